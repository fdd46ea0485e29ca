"""notify=URL: POST the run summary as JSON (one try, a bounded wait; a failure is a warning)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from orchestrator.errors import UserError

TIMEOUT_S = 30


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"notify={url[:120]!r}: use an http:// or https:// URL")
    return url


def post(url: str, summary: dict[str, Any]) -> str | None:
    """None when the server answered 2xx; otherwise why not (one line)."""
    req = urllib.request.Request(url, data=json.dumps(summary, sort_keys=True).encode(),
                                 headers={"Content-Type": "application/json",
                                          "User-Agent": "orchestrator-nightly"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            resp.read(65536)
            return None if 200 <= resp.status < 300 else f"HTTP {resp.status}"
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code} {e.reason}"
    except (urllib.error.URLError, OSError) as e:
        return str(getattr(e, "reason", e))
