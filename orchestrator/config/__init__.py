"""What a command is asked: the variables each verb takes (cli_vars), the command line's words
read before doit parses them (command_line), and the Settings built from both (settings)."""
