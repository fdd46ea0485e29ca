"""doit entry point: `doit list` shows the verbs; variables are `name=value` (see README)."""
from pathlib import Path

from orchestrator.cli.fast_path import answer

answer(Path(__file__).resolve().parent)  # a no-op build / switch from its memo: exits here

from orchestrator.cli.doit_glue import doit_config  # noqa: E402
from orchestrator.cli.tasks import *  # noqa: E402,F401,F403 - doit collects task_* from here

DOIT_CONFIG = doit_config(Path(__file__).resolve().parent)
