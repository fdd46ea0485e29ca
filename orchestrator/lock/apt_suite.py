"""Debian packages of a suite the machine's apt sources do not list (`[cuda.debs]`: CUDA 12.4
from trixie's non-free on a Debian 12 machine), resolved without root and without touching
/etc/apt: a private apt configuration (its own sources list, lists and caches under a temp
directory) names the mirror the machine's own sources name, with the suite and components
asked for; `apt-get update` checks the index's signature with the machine's keyring.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.model.lock import CudaDebSpec, DebEntry

APT_SOURCES = Path("/etc/apt")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def _deb822_uris(text: str) -> list[str]:
    uris = []
    for stanza in re.split(r"\n\s*\n", text.strip()):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.strip() and not line.lstrip().startswith("#") and ":" in line and not line[0].isspace():
                k, v = line.split(":", 1)
                fields[k.strip()] = v.strip()
        suites = fields.get("Suites", "").split()
        if "deb" in fields.get("Types", "").split() and fields.get("Enabled", "yes") != "no" \
                and suites and not any(s.endswith("-security") for s in suites):
            uris += fields.get("URIs", "").split()
    return uris


def mirror_uri(etc: Path = APT_SOURCES) -> str:
    """The Debian mirror the machine's apt sources name (the first `deb` source that is not a
    security suite), read at each use: no host name is written anywhere by the project."""
    found: list[str] = []
    for path in sorted(etc.glob("sources.list.d/*.sources")):
        found += _deb822_uris(path.read_text(errors="replace"))
    for path in [etc / "sources.list", *sorted(etc.glob("sources.list.d/*.list"))]:
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                words = [w for w in line.split() if not w.startswith("[") and not w.endswith("]")]
                if len(words) >= 3 and words[0] == "deb" and not words[2].endswith("-security"):
                    found.append(words[1])
    for uri in found:
        if uri.startswith(("http://", "https://")):
            return uri.rstrip("/")
    raise UserError(f"no http(s) Debian mirror in the apt sources under {etc}; add one (a `deb` "
                    "source) so that packages of another suite can be fetched from it")


class PrivateApt:
    """apt-get / apt-cache on a private configuration under `home` (nothing of /etc/apt's
    lists or state is read or written)."""

    def __init__(self, home: Path, suite: str, components: list[str]) -> None:
        self.home = home
        for d in ("lists/partial", "cache/archives/partial"):
            (home / d).mkdir(parents=True, exist_ok=True)
        (home / "status").touch()
        (home / "sources.list").write_text(
            f"deb [signed-by={KEYRING}] {mirror_uri()} {suite} {' '.join(components)}\n")
        self.suite = suite

    def options(self) -> list[str]:
        h = self.home
        return ["-o", f"Dir::Etc::SourceList={h / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/nonexistent",
                "-o", f"Dir::State={h}", "-o", f"Dir::State::Lists={h / 'lists'}",
                "-o", f"Dir::State::status={h / 'status'}", "-o", f"Dir::Cache={h / 'cache'}",
                "-o", "APT::Architecture=amd64", "-o", "APT::Architectures=amd64"]

    def update(self) -> None:
        """The suite's index, once per home (a second section of the same suite reuses it)."""
        done = self.home / "updated"
        if done.is_file():
            return
        res = subprocess.run(["apt-get", *self.options(), "update", "-q"], capture_output=True, text=True)
        if res.returncode != 0 or "NO_PUBKEY" in res.stderr or "not signed" in res.stderr:
            last = (res.stderr.strip().splitlines() or ["apt-get update failed"])[-1]
            raise UserError(f"reading the {self.suite} package index failed: {last}")
        done.touch()

    def show(self, packages: list[str]) -> dict[str, dict[str, str]]:
        """The index's fields of each package (its newest version), in one apt-cache call."""
        res = subprocess.run(["apt-cache", *self.options(), "show", "--no-all-versions", *packages],
                             capture_output=True, text=True)
        found: dict[str, dict[str, str]] = {}
        for stanza in res.stdout.split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if not line[:1].isspace() and ":" in line:
                    k, v = line.split(":", 1)
                    fields[k] = v.strip()
            if "Package" in fields:
                found.setdefault(fields["Package"], fields)
        missing = [p for p in packages if p not in found]
        if missing:
            raise UserError(f"Debian package {missing[0]!r} is not in {self.suite}; fix the "
                            "packages of [cuda.debs] / [cuda.gdb] in the lock spec")
        return found


def resolve_suite_debs(spec: CudaDebSpec, home: Path, tree: str | None = None) -> list[DebEntry]:
    """One entry per package of `spec` (no dependency is followed), as the suite's index has it:
    version, sha256, and the pool directory it is fetched from."""
    apt = PrivateApt(home / "-".join([spec.suite, *spec.components]), spec.suite, spec.components)
    apt.update()
    unknown = sorted(set(spec.omit) - set(spec.packages))
    if unknown:
        raise UserError(f"[cuda.debs] omit names {unknown[0]!r}, which is not in its packages")
    out = []
    shown = apt.show(spec.packages)
    for name in spec.packages:
        f = shown[name]
        pool, filename = f["Filename"].rsplit("/", 1)
        out.append(DebEntry(name=name, version=f["Version"], arch=f["Architecture"], sha256=f["SHA256"],
                            filename=filename, suite=spec.suite, pool=pool,
                            omit=tuple(spec.omit[name]) if name in spec.omit else None, tree=tree))
    return out
