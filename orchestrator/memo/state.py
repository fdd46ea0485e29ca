"""The repeated-command shortcut's state in this process, in one object instead of module
globals spread over three modules: what file_reads is tracing, what the plan memo is keying,
and the head start this process started.

Each field is set by exactly one module (named beside it); the others only read it. The
types are those modules' own (Trace, Command, Started), held as Any here because this module
sits below them (orchestrator.LAYERS: it is a foundation, like file_reads)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class MemoState:
    reading: Any = None          # file_reads: the Trace recording what the running work reads
    hooked: bool = False         # file_reads: the audit hook is installed (once per process)
    offered: dict[str, Any] = field(default_factory=dict)  # file_reads: answers found early
    command: Any = None          # plan_memo: the memoizable Command this process runs
    plan_reads: Any = None       # plan_memo: the plan's Trace in this process
    head_start: Any = None       # head_start: the Started ninja this process adopted or owns


STATE = MemoState()

