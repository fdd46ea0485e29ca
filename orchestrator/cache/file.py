"""file:// backend: a shared (e.g. NFS) directory with the same layout as the HTTP cache."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

from orchestrator.cache.backend import CHUNK, RECORD_LIMIT, Body, window
from orchestrator.cache.errors import CacheError, TransferInterrupted
from orchestrator.fs import atomic_writer


class FileBackend:
    def __init__(self, url: str) -> None:
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise CacheError(f"cache URL {url!r}: use file:///absolute/path")
        self.url = url if url.endswith("/") else url + "/"  # as the HTTP backend: url + key
        self.root = Path(unquote(parsed.path))

    def _path(self, key: str) -> Path:
        if not self.root.is_dir():
            raise CacheError(f"cache {self.url}: directory {self.root} does not exist "
                             "(not mounted?)")
        return self.root / key

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def get(self, key: str, limit: int = RECORD_LIMIT) -> bytes | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                data = f.read(limit + 1)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CacheError(f"cache {self.url}: cannot read {key} ({e.strerror})") from None
        if len(data) > limit:
            raise CacheError(f"cache {self.url}: {key} is larger than {limit} bytes")
        return data

    @contextlib.contextmanager
    def stream(self, key: str, size: int = 0, start: int = 0,
               length: int | None = None) -> Iterator[Iterator[bytes]]:
        path = self._path(key)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise CacheError(f"cache {self.url}: {key} is missing (incomplete cache?)") from None
        except OSError as e:
            raise CacheError(f"cache {self.url}: cannot read {key} ({e.strerror})") from None
        with f:
            try:
                f.seek(start)
                yield window(iter(lambda: f.read(CHUNK), b""), 0, length)
            except OSError as e:
                raise TransferInterrupted(f"cache {self.url}: cannot read {key} "
                                          f"({e.strerror})") from None

    def put(self, key: str, body: Body, size: int = 0) -> int:
        path = self._path(key)
        sent = 0
        try:
            with atomic_writer(path) as f:
                for chunk in body():
                    f.write(chunk)
                    sent += len(chunk)
        except OSError as e:
            raise CacheError(f"push to {self.url} refused: cannot write {key} "
                             f"({e.strerror})") from None
        return sent

    def forget_connections(self) -> None:
        pass

    def close(self) -> None:
        pass
