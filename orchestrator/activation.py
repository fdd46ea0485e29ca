"""Make a realised artifact the workspace's active profile (what `doit switch` and the nightly
bot's smoke tests do): the profile link plus the toolchain whose python the env script uses."""
from __future__ import annotations

from orchestrator.realise import Realised
from orchestrator.store import Store
from orchestrator.workspace import Workspace


def activate(ws: Workspace, store: Store, r: Realised) -> tuple[int, bool]:
    """Point ws at r; returns (generation, changed). r.toolchain is the one realise ensured
    (a present or pulled artifact's is ensured here: the env script needs its python)."""
    return ws.switch(r.path, store, r.toolchain.root, r.plan.recipe.outputs.model_dump())
