"""The verbs behind `doit <verb>`, one module each: the verb's function, its human output and
its JSON (through orchestrator.verbs.output), nothing else. The variables a verb takes are
declared in orchestrator.config.cli_vars; tasks.py maps each verb to a doit task."""
