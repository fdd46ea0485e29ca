"""doit entry point: `doit list` shows the verbs; variables are `name=value` (see README)."""
from pathlib import Path

from orchestrator.doit_glue import doit_config
from orchestrator.tasks import *  # noqa: F401,F403 - doit collects task_* from here

DOIT_CONFIG = doit_config(Path(__file__).resolve().parent)
