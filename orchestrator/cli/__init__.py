"""The command line's front: doit's tasks (tasks), the glue from doit's variables to the verbs
(doit_glue), doit's `help`/`run` commands (doit_commands), and the repeated-command fast path
that answers a no-op `doit build`/`doit switch` before doit loads a task (fast_path)."""
