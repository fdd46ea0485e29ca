"""How busy the machine is: the load average and Linux's pressure stall information
(/proc/pressure/{cpu,io,memory}). A timing taken while something else competes for the CPUs or
the disk says little, so `doit bench` refuses to call a difference then, and benchmarks/all.py
waits for a quiet machine. Reads files only; imports nothing of the package."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PSI_DIR = Path("/proc/pressure")
# `some avg10` at or above these: the machine is too busy for a verdict (benchmarks/all.py
# waits below the same lines before each script).
CPU_PRESSURE_LIMIT = 10.0
IO_PRESSURE_LIMIT = 5.0
MEMORY_PRESSURE_LIMIT = 5.0


def pressure(kind: str) -> float:
    """/proc/pressure/<kind>'s `some avg10` (% of the last 10 s something waited); 0 without PSI."""
    try:
        some = (PSI_DIR / kind).read_text().splitlines()[0]
        return float(some.split("avg10=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0


def busy() -> bool:
    """True while the disk or the CPUs are contended (what benchmarks/all.py waits out)."""
    return pressure("io") >= IO_PRESSURE_LIMIT or pressure("cpu") >= CPU_PRESSURE_LIMIT


@dataclass(frozen=True)
class MachineLoad:
    """One reading of how busy the machine is."""
    load1: float  # 1-minute load average
    cores: int  # CPUs this process may run on
    cpu: float  # PSI some avg10, %
    io: float
    memory: float

    def reasons(self) -> list[str]:
        """Why this reading is too noisy for a verdict (empty: quiet enough)."""
        out = []
        if self.load1 > self.cores:
            out.append(f"load {self.load1:.1f} over {self.cores} usable core(s)")
        for kind, value, limit in (("cpu", self.cpu, CPU_PRESSURE_LIMIT),
                                   ("io", self.io, IO_PRESSURE_LIMIT),
                                   ("memory", self.memory, MEMORY_PRESSURE_LIMIT)):
            if value >= limit:
                out.append(f"{kind} pressure {value:.1f}% (some avg10; limit {limit:.0f}%)")
        return out


def read_load() -> MachineLoad:
    return MachineLoad(load1=os.getloadavg()[0], cores=len(os.sched_getaffinity(0)),
                       cpu=pressure("cpu"), io=pressure("io"), memory=pressure("memory"))
