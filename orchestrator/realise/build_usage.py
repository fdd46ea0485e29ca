"""What a build's processes used, for the artifact's timings: the CPU seconds of every process
the builder waited for (ninja, the compilers, the linker, cmake, through each parent's wait),
the largest resident set among them, and the same summed over every run in the build tree
(a whole PyTorch tree is built over several resumed runs: the first run's numbers alone say
little).

The peak is the kernel's RUSAGE_CHILDREN maximum: the largest process this command has
waited for so far, so a command that ran something bigger before its build (it never does:
configure and the toolchain's set-up are small) would show that one. A process nobody waits
for is not counted: mold by default links in a forked child that outlives the process gcc
waits for, so a mold link's CPU and memory are missing (GNU ld's are counted).

The tree's sums live in `<build tree>/.orch-build-usage.json` ({"runs", "build_s", "cpu_s",
"peak_rss_mb"}); a run that failed or was interrupted counts too (it compiled what the next
one reuses), one refused as bad input (a UserError: nothing may change) does not. A file of
another shape starts the sums again.
"""
from __future__ import annotations

import json
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.fs import write_atomic

USAGE_FILE = ".orch-build-usage.json"
KEYS = ("runs", "build_s", "cpu_s", "peak_rss_mb")


def _cpu(ru: resource.struct_rusage) -> float:
    return ru.ru_utime + ru.ru_stime


@dataclass
class BuildUsage:
    """One run's numbers (filled when the measured block ends) and its tree's sums."""
    build_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    tree: dict[str, float] = field(default_factory=dict)

    def timings(self) -> dict[str, float]:
        """The manifest's `timings` entries (build_s is the caller's own)."""
        return {"build_cpu_s": round(self.cpu_s, 1),
                "build_peak_rss_mb": round(self.peak_rss_mb, 1),
                **{f"tree_{k}": round(v, 1) for k, v in self.tree.items()}}


def read_tree(build_dir: Path) -> dict[str, float]:
    try:
        doc = json.loads((build_dir / USAGE_FILE).read_text())
    except (OSError, ValueError):
        return dict.fromkeys(KEYS, 0.0)
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), (int, float)) for k in KEYS):
        return dict.fromkeys(KEYS, 0.0)
    return {k: float(doc[k]) for k in KEYS}


@contextmanager
def measured(build_dir: Path) -> Iterator[BuildUsage]:
    """`with measured(build_dir) as usage: <run the builder>`: usage is filled on the way out,
    and the tree's sums are written, whether the block succeeded or not."""
    usage = BuildUsage()
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    refused = False
    try:
        yield usage
    except UserError:
        refused = True  # bad input: one line, exit 2 and nothing changed, this file included
        raise
    finally:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        usage.build_s = time.monotonic() - t0
        usage.cpu_s = _cpu(after) - _cpu(before)
        usage.peak_rss_mb = after.ru_maxrss / 1024  # KiB on Linux
        sums = read_tree(build_dir)
        sums = {"runs": sums["runs"] + 1, "build_s": sums["build_s"] + usage.build_s,
                "cpu_s": sums["cpu_s"] + usage.cpu_s,
                "peak_rss_mb": max(sums["peak_rss_mb"], usage.peak_rss_mb)}
        usage.tree = sums
        if build_dir.is_dir() and not refused:
            write_atomic(build_dir / USAGE_FILE, json.dumps(sums) + "\n", durable=False)
