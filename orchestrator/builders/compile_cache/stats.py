"""One build's compile-cache counters (ccache's per-build stats log, or sccache's server,
in ccache's counter names) and the summary line they print."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from orchestrator.builders.compile_cache.kind import CompileCache

STATS_LOG = ".orch-ccache-stats.log"   # per build, in the build tree: this build's counters
# ccache counters that are neither a hit, a miss nor an uncacheable compile.
NOT_UNCACHEABLE = frozenset({
    "direct_cache_hit", "preprocessed_cache_hit", "cache_miss", "direct_cache_miss",
    "preprocessed_cache_miss", "local_storage_hit", "local_storage_miss",
    "local_storage_read_hit", "local_storage_read_miss", "local_storage_write",
    "remote_storage_hit", "remote_storage_miss", "remote_storage_read_hit",
    "remote_storage_read_miss", "remote_storage_write", "remote_storage_error",
    "remote_storage_timeout", "recache"})


@dataclass(frozen=True)
class BuildStats:
    counters: dict[str, int]

    @property
    def remote_hits(self) -> int:
        return self.counters.get("remote_storage_hit", 0)

    @property
    def hits(self) -> int:
        return self.counters.get("direct_cache_hit", 0) + self.counters.get("preprocessed_cache_hit", 0)

    @property
    def misses(self) -> int:
        return self.counters.get("cache_miss", 0)

    @property
    def uncacheable(self) -> int:
        return sum(n for k, n in self.counters.items() if k not in NOT_UNCACHEABLE)

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def to_json(self) -> dict[str, int | float]:
        return {"hits": self.hits, "local_hits": self.hits - self.remote_hits,
                "remote_hits": self.remote_hits, "misses": self.misses,
                "uncacheable": self.uncacheable, "hit_rate": round(self.hit_rate, 4)}

    def line(self, cc: CompileCache) -> str:
        extra = []
        if self.remote_hits:
            extra.append(f"{self.remote_hits} from the remote")
        if self.uncacheable:
            extra.append(f"{self.uncacheable} uncacheable")
        if cc.distcc_hosts:
            extra.append(f"misses on distcc {cc.distcc_hosts}")
        tail = f" ({'; '.join(extra)})" if extra else ""
        return (f"compile cache: {self.hits} hit(s), {self.misses} miss(es), "
                f"{self.hit_rate:.0%} hit rate{tail}")


def read_stats(log: Path) -> BuildStats:
    """Counters of the compiles this build ran (ccache appends one block per compile:
    a `# <input>` line, then the counter names)."""
    counts: Counter[str] = Counter()
    if log.is_file():
        for line in log.read_text(errors="replace").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                counts[line] += 1
    return BuildStats(dict(counts))
