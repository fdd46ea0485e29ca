"""The plan memo's answer includes the toolchain's quick signature (issue 29): a no-op build
is answered from its memo only while the toolchain it was planned with is the one in the
store, as it was. Real doit, a real cmake build of the demo."""
from __future__ import annotations

import os
from pathlib import Path

from test_plan_memo import answered_from_memo, memo_doit  # noqa: F401 (a fixture)


def test_a_toolchain_gone_is_a_full_command(memo_doit, project: Path,  # noqa: F811
                                                       store: Path) -> None:
    for _ in range(2):  # the second, a full no-op, writes the memo
        built = memo_doit("build", "substitute=0")
        assert built.returncode == 0, built.output
    assert answered_from_memo(project, store, "build", "substitute=0")
    [entry] = list((store / "toolchains").iterdir())
    aside = entry.with_name(entry.name + "-aside")
    os.rename(entry, aside)                                    # the toolchain is gone
    try:
        assert not answered_from_memo(project, store, "build", "substitute=0")
    finally:
        os.rename(aside, entry)
    # that full command's memo noted no toolchain: the next is full again, then the memo holds
    assert not answered_from_memo(project, store, "build", "substitute=0")
    assert answered_from_memo(project, store, "build", "substitute=0")
