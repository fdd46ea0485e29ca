"""pytest fixtures around RegistryServer; test modules import them by name."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from registry_server import RegistryServer


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """One real registry without auth; each test uses its own repository."""
    server = RegistryServer(Path(tmp_path_factory.mktemp("registry"))).start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """One real registry behind token auth (anonymous: pull; USER/PASSWORD: push too)."""
    server = RegistryServer(Path(tmp_path_factory.mktemp("token-registry")),
                            token_auth=True).start()
    yield server
    server.close()
