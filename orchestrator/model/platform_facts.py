"""The platform part of an identity: what a binary built here can run on."""
from __future__ import annotations

import os
import platform


def platform_facts() -> dict[str, str]:
    libc = os.confstr("CS_GNU_LIBC_VERSION") or "unknown"
    return {"os": platform.system().lower(), "arch": platform.machine(),
            "libc": libc.replace(" ", "-")}
