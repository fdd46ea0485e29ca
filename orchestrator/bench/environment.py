"""One artifact's own environment for a command: what `.orch/env.sh` gives a shell whose
profile is that artifact, built from the artifact itself, with nothing of another artifact or
profile left in it (PATH, PYTHONPATH or LD_LIBRARY_PATH entries into a store or a workspace's
.orch/ are dropped, LD_PRELOAD too). Its libraries are found through their own RUNPATH."""
from __future__ import annotations

import os
from pathlib import Path

from orchestrator.bench.sides import Side

# Variables that would carry another artifact or profile into the process.
DROPPED = ("LD_PRELOAD", "PYTHONHOME", "PYTHONSTARTUP", "ORCH_PROFILE", "ORCH_WORKSPACE",
           "ORCH_TOOLCHAIN")
PATH_LISTS = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH")


def foreign(entry: str, stores: list[Path]) -> bool:
    """An entry that names an artifact or a profile: below a store's store/ or an .orch/."""
    if not entry:
        return True  # an empty entry is the current directory: never wanted here
    real = os.path.realpath(entry)
    parts = Path(entry).parts
    return ".orch" in parts or any(real == str(s) or real.startswith(f"{s}/") for s in stores)


def artifact_env(side: Side, base: dict[str, str]) -> dict[str, str]:
    store_dir = side.path.parent
    stores = [Path(os.path.realpath(store_dir))]
    env = {k: v for k, v in base.items() if k not in DROPPED}
    for name in PATH_LISTS:
        kept = [e for e in env.get(name, "").split(":") if not foreign(e, stores)]
        env[name] = ":".join(kept)
    prefix = side.path / "prefix"
    bins = [str(side.toolchain_root / "venv" / "bin"), *(str(prefix / d) for d in side.outputs["bin"])]
    env["PATH"] = ":".join([*bins, *filter(None, [env["PATH"]])])
    pythonpath = [*(str(prefix / d) for d in side.outputs["python"]),
                  *(str(side.path / d) for d in side.outputs.get("runtime", []))]  # entry-relative
    env["PYTHONPATH"] = ":".join([*pythonpath, *filter(None, [env["PYTHONPATH"]])])
    if not env["LD_LIBRARY_PATH"]:
        del env["LD_LIBRARY_PATH"]
    env["ORCH_PROFILE"] = str(side.path)
    env["ORCH_TOOLCHAIN"] = str(side.toolchain_root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # store entries are immutable
    return env
