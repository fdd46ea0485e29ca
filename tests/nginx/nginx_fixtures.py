"""pytest fixtures around NginxServer; test modules import them by name."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from nginx_server import NginxServer


@pytest.fixture(scope="session")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NginxServer]:
    """One real nginx for the session; each test uses its own sub-directory of the cache."""
    server = NginxServer(Path(tmp_path_factory.mktemp("nginx"))).start()
    yield server
    server.stop()
