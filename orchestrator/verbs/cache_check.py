"""`doit cache-check`: the team cache, checked in one go before anyone relies on it: the
configuration (cache.toml or ORCH_CACHE_CONFIG), the trusted keys, the signing key (set, and
trusted), every substituter answering a read, and the push URL taking a write (a small probe
object, `checks/write-probe-<digest of host and uid>`, written and read back; two people
checking at once each write their own). Each check is one line; any failure is
exit 1 with every failure named (bad input, such as a malformed cache.toml, is exit 2)."""
from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

from rich.markup import escape

from orchestrator.cache.backend import probe_key
from orchestrator.cache.backends import open_backend
from orchestrator.cache.cache_toml import Credentials, config_path, load_config
from orchestrator.cache.errors import CacheError
from orchestrator.cache.signing import SIGNING_KEY_ENV, load_signing_key
from orchestrator.config.settings import Settings
from orchestrator.console import console
from orchestrator.errors import CheckFailed, UserError
from orchestrator.verbs.output import emit

PROBE_KEY = "checks/write-probe"  # read access: its existence asked (either answer is fine)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def _probe(config: Any, url: str) -> Check:
    """Write the probe object to url and read it back."""
    body = f"cache-check {socket.gethostname()} {os.getpid()} {time.time():.0f}\n".encode()
    key = probe_key("write-probe", socket.gethostname(), str(os.getuid()))
    backend = open_backend(url, config)
    try:
        backend.put(key, lambda: iter([body]), len(body))
        back = backend.get(key)
    except (CacheError, OSError) as e:
        creds = Credentials.from_env()
        hint = "" if creds.present() or url.startswith("file://") else \
            f" (no write credentials: set {creds.missing()})"
        return Check("write access", False, f"{url}: {e}{hint}")
    finally:
        backend.close()
    if back != body:
        return Check("write access", False, f"{url}: the probe written to {key} did not "
                                            "read back the same")
    return Check("write access", True, f"{url}: wrote and read back {key}")


def run_checks(settings: Settings) -> list[Check]:
    path = config_path(settings.repo_root)
    config = load_config(settings.repo_root)  # a malformed file: UserError, exit 2
    checks: list[Check] = []
    urls = config.substituters
    checks.append(Check("configuration", bool(urls or config.push), f"{path}: {len(urls)} "
                        f"substituter(s), push to {config.push_url or '(nowhere)'}"
                        if urls or config.push else f"{path}: no substituters and no push URL; "
                        "set [cache] substituters = [\"file:///...\" or \"http://...\"]"))
    trusted = config.trusted().keys
    checks.append(Check("trusted keys", bool(trusted), ", ".join(sorted(trusted)) if trusted else
                        "none: every pulled record would be refused; add the line "
                        "`doit cache-keygen` printed to trusted-keys"))
    try:
        key = load_signing_key()
        ok = key.name in trusted and trusted[key.name] == key.public.key
        checks.append(Check("signing key", ok, f"{key.name} (from {SIGNING_KEY_ENV})" if ok else
                            f"{key.name} is not in trusted-keys: teammates would refuse what "
                            f"it signs; add: {key.public.line()}"))
    except UserError as e:
        checks.append(Check("signing key", False, str(e)))
    for url in urls:
        backend = None
        try:
            backend = open_backend(url, config)
            backend.exists(PROBE_KEY)
            checks.append(Check("read access", True, url))
        except (CacheError, OSError) as e:
            checks.append(Check("read access", False, f"{url}: {e}"))
        finally:
            if backend is not None:
                backend.close()
    if config.push_url:
        checks.append(_probe(config, config.push_url))
    return checks


def cmd_cache_check(settings: Settings) -> dict[str, Any]:
    checks = run_checks(settings)
    data = {"ok": all(c.ok for c in checks), "checks": [asdict(c) for c in checks]}
    if settings.fmt == "json":
        emit(settings, data)
    else:
        for c in checks:
            mark = "[green]✓[/]" if c.ok else "[red]✗[/]"
            console.print(f"{mark} {c.name:<14} {escape(c.detail)}", soft_wrap=True)
    failed = [c for c in checks if not c.ok]
    if failed:
        raise CheckFailed(f"cache-check: {len(failed)} problem(s): "
                          + "; ".join(c.name for c in failed))
    return data
