"""Make a realised artifact the workspace's active profile (what `doit switch` and the nightly
bot's smoke tests do): the profile link plus the toolchain whose python the env script uses."""
from __future__ import annotations

from orchestrator.model.recipe import path_outputs
from orchestrator.realise.pipeline import Realised
from orchestrator.store.artifacts import Store
from orchestrator.toolchain.materialize import Toolchain
from orchestrator.workspace.profiles import Workspace


def activate(ws: Workspace, store: Store, r: Realised,
             toolchain: Toolchain | None = None) -> tuple[int, bool]:
    """Point ws at r; returns (generation, changed). The toolchain linked is `toolchain`
    (`doit switch`: Realised.toolchain_to_link) or r.toolchain, the one realise ensured (a
    present artifact's is ensured here, files checked: the bot runs smoke tests from it)."""
    tc = toolchain if toolchain is not None else r.toolchain
    return ws.switch(r.path, store, tc.root, path_outputs(r.plan.recipe))
