"""Probe answers remembered across processes: what a probed binary printed (`cc --version`,
`cc -print-prog-name=as`, the interpreter's facts) or what dpkg says is installed, so that
an unchanged machine is not asked again by every command (a demo plan ran 9 subprocesses,
a PyTorch plan 24).

An answer is keyed by the question and the path of the file it follows (the binary as it
is run, or dpkg's status database), and holds the (real path, size, mtime_ns, inode,
ctime_ns) of the file that path resolves to: a binary replaced, rebuilt, touched or
re-pointed by a symlink, or a package installed or removed, is asked again. A question
whose answer is None (the probe failed, the package is missing) is never remembered. One JSON file in the store, written
atomically; the owner saves it only once its check passed, so every remembered answer is
one that matched the lock.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from orchestrator.fs import FileSig, JsonDictFile
from orchestrator.memo.file_reads import note_binary, untraced

Answer = TypeVar("Answer")


def binary_signature(path: str) -> list[Any] | None:
    """[real path, size, mtime_ns, inode, ctime_ns] of the file `path` resolves to (None:
    there is none)."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return [real, *FileSig.of(st)]


class ProbeCache(JsonDictFile):
    """question + file path -> [signature..., answer], loaded from and saved to `path`."""

    def answer(self, file: str, question: str, ask: Callable[[], Answer]) -> Answer:
        """`ask()`'s answer to `question`, remembered while `file`'s signature holds."""
        sig = binary_signature(file)
        note_binary(file, sig)
        if sig is None:
            return ask()  # not there: the probe says so in its own words
        key = f"{question}\0{file}"
        hit = self.entries.get(key)
        if isinstance(hit, list) and len(hit) == len(sig) + 1 and hit[:-1] == sig:
            return hit[-1]
        with untraced():  # a trace keys this answer by the binary's signature, noted above
            found = ask()
        if found is not None:
            self.put(key, [*sig, found])
        return found
