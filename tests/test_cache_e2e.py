"""The team flow through the real CLI: build in store A, push to nginx, a teammate pulls into
an empty store B and switches a workspace to it; then every kind of bad cache is refused
with one line and leaves store and profile alone; then a one-file delta pull.
"""
from __future__ import annotations

import http.server
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard

sys.path.insert(0, str(Path(__file__).parent / "nginx"))
sys.path.insert(0, str(Path(__file__).parent / "oci"))
from conftest import make_store  # noqa: E402
from nginx_fixtures import nginx  # noqa: E402,F401  (fixture)
from nginx_server import PASSWORD, USER, NginxServer, free_port  # noqa: E402
from registry_fixtures import token_registry  # noqa: E402,F401  (fixture)
from registry_server import PASSWORD as OCI_PASSWORD  # noqa: E402
from registry_server import USER as OCI_USER  # noqa: E402
from registry_server import RegistryServer  # noqa: E402

from orchestrator.cache.signing import SecretKey  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
AREA = "e2e"


@dataclass
class Team:
    root: Path
    src: Path
    keys: Path
    public: str
    config: Path
    store_a: Path
    store_b: Path
    workspace: Path
    nginx: NginxServer
    built_id: str

    @property
    def area(self) -> Path:
        return self.nginx.root / "cache" / AREA

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_CACHE_")}
        env.update(ORCH_CACHE_CONFIG=str(self.config), ORCH_NO_PROGRESS="1",
                   ORCH_CACHE_KEY_DIR=str(self.keys))
        env.update(extra)
        return env

    def pusher_env(self) -> dict[str, str]:
        return self.env(ORCH_CACHE_SIGNING_KEY=str(self.keys / "team-1.secret"),
                        ORCH_CACHE_USER=USER, ORCH_CACHE_PASSWORD=PASSWORD)

    def doit(self, *args: str, env: dict[str, str] | None = None,
             check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), *args,
                            f"source={self.src}"], cwd=REPO, env=env or self.env(),
                           capture_output=True, text=True, timeout=300)
        if check and p.returncode != 0:
            raise AssertionError(f"doit {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
        return p

    def write_config(self, path: Path, urls: list[str], keys: list[str] | None = None) -> Path:
        path.write_text("[cache]\n" + f"substituters = {json.dumps(urls)}\n"
                        + f"trusted-keys = {json.dumps(keys or [self.public])}\n"
                        + "jobs = 4\ntimeout = 5\n")
        return path


@pytest.fixture(scope="module")
def team(nginx: NginxServer, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
         session_toolchain: Path) -> Team:
    """Store A builds the demo; store B is the teammate's. Both use the session's toolchain
    (same lock, same hash: what each would materialize), which keeps the suite fast."""
    root = tmp_path_factory.mktemp("team")
    src = root / "demo-src"
    shutil.copytree(REPO / "recipes" / "demo", src)
    (root / "ws").mkdir()
    t = Team(root=root, src=src, keys=root / "keys", public="", config=root / "cache.toml",
             store_a=root / "A", store_b=root / "B", workspace=root / "ws", nginx=nginx,
             built_id="")
    p = subprocess.run([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"),
                        "cache-keygen", "name=team-1"], cwd=REPO, env=t.env(),
                       capture_output=True, text=True, check=True)
    t.public = p.stdout.strip().splitlines()[-1]
    assert t.public.startswith("team-1:")
    t.write_config(t.config, [nginx.url("cache") + AREA + "/"])
    make_store(t.store_a, session_toolchain)
    make_store(t.store_b, session_toolchain)
    out = t.doit("build", f"store={t.store_a}", "substitute=0", "format=json")
    t.built_id = json.loads(out.stdout)["id"]
    return t


def artifacts(store: Path) -> list[str]:
    d = store / "store"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def leftovers(store: Path) -> list[str]:
    d = store / "tmp"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def test_push_then_teammate_pulls_and_switches(team: Team) -> None:
    # A client without write credentials is refused, naming what to set; nothing lands.
    ro = team.doit("push", f"store={team.store_a}",
                   env=team.env(ORCH_CACHE_SIGNING_KEY=str(team.keys / "team-1.secret")),
                   check=False)
    assert ro.returncode == 2, ro.stderr
    assert "ORCH_CACHE_TOKEN, or ORCH_CACHE_USER and ORCH_CACHE_PASSWORD" in ro.stderr
    assert not (team.area / "ac").exists()
    nokey = team.doit("push", f"store={team.store_a}", env=team.env(), check=False)
    assert nokey.returncode == 2 and "ORCH_CACHE_SIGNING_KEY" in nokey.stderr

    pushed = team.doit("push", f"store={team.store_a}", "format=json", env=team.pusher_env())
    stats = json.loads(pushed.stdout)["stats"]
    assert stats["blobs_uploaded"] > 0 and stats["blobs_present"] == 0
    assert (team.area / "ac" / f"{team.built_id}.json").is_file()
    again = json.loads(team.doit("push", f"store={team.store_a}", "format=json",
                                 env=team.pusher_env()).stdout)["stats"]
    assert again["blobs_uploaded"] == 0 and again["blobs_present"] == stats["blobs_uploaded"]

    # The teammate: a store without artifacts, no credentials, switches a workspace.
    sw = team.doit("switch", f"store={team.store_b}", f"workspace={team.workspace}")
    assert f"substituted from {team.nginx.url('cache')}{AREA}/" in sw.stderr, sw.stderr
    assert artifacts(team.store_b) == artifacts(team.store_a)
    run = subprocess.run(["bash", "-c", '. .orch/env.sh && python -c '
                          '"import demo; print(demo.build_type(), demo.add([1, 2], [3, 4]))"'],
                         cwd=team.workspace, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[0] == "RelWithDebInfo"
    a = json.loads((team.store_a / "store" / artifacts(team.store_a)[0] / "manifest.json")
                   .read_text())
    b = json.loads((team.store_b / "store" / artifacts(team.store_b)[0] / "manifest.json")
                   .read_text())
    assert a["files"] == b["files"] and b["origin"]["kind"] == "substituted"


def test_oci_registry_push_gc_then_teammate_switches(team: Team, tmp_path: Path,
                                                     token_registry: RegistryServer) -> None:  # noqa: F811
    """The same flow against a real OCI registry behind token auth, with a garbage-collect
    between the push and the teammate's switch."""
    url = token_registry.url("team/e2e")
    config = team.write_config(tmp_path / "oci.toml", [url])
    denied = team.doit("push", f"store={team.store_a}", check=False,
                       env=team.env(ORCH_CACHE_CONFIG=str(config),
                                    ORCH_CACHE_SIGNING_KEY=str(team.keys / "team-1.secret")))
    assert denied.returncode == 2 and "401" in denied.stderr, denied.stderr
    assert len([ln for ln in denied.stderr.splitlines() if ln.strip()]) == 1, denied.stderr
    pushed = team.doit("push", f"store={team.store_a}", "format=json",
                       env={**team.pusher_env(), "ORCH_CACHE_CONFIG": str(config),
                            "ORCH_CACHE_USER": OCI_USER, "ORCH_CACHE_PASSWORD": OCI_PASSWORD})
    assert json.loads(pushed.stdout)["stats"]["blobs_uploaded"] > 0
    token_registry.garbage_collect()
    [toolchain] = (team.store_a / "toolchains").iterdir()
    store_c = make_store(tmp_path / "C", toolchain.resolve())
    (tmp_path / "ws").mkdir()
    sw = team.doit("switch", f"store={store_c}", f"workspace={tmp_path / 'ws'}",
                   env=team.env(ORCH_CACHE_CONFIG=str(config)))
    assert f"substituted from {url}/" in sw.stderr, sw.stderr
    assert artifacts(store_c) == artifacts(team.store_a)
    run = subprocess.run(["bash", "-c", '. .orch/env.sh && python -c '
                          '"import demo; print(demo.build_type(), demo.add([1, 2], [3, 4]))"'],
                         cwd=tmp_path / "ws", capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.split()[0] == "RelWithDebInfo", run.stderr


# ---- refusals ------------------------------------------------------------------------------

def _record(area: Path, artifact_id: str) -> dict:
    return json.loads((area / "ac" / f"{artifact_id}.json").read_text())


def _save(area: Path, doc: dict, sign_with: SecretKey | None) -> None:
    doc.pop("signature", None)
    if sign_with is not None:
        doc["signature"] = sign_with.sign(doc)
    (area / "ac" / f"{doc['id']}.json").write_text(json.dumps(doc))


def _team_key(team: Team) -> SecretKey:
    return SecretKey.parse((team.keys / "team-1.secret").read_text())


def tamper_blob(team: Team, area: Path) -> None:
    """The biggest file's content, changed in the middle and compressed again: as a loose
    blob, or in place of its pack member (compressed harder and padded with a skippable
    frame to the member's length, so the record's offsets still hold)."""
    doc = _record(area, team.built_id)
    f = max((f for f in doc["manifest"]["files"] if f["kind"] == "file"), key=lambda f: f["size"])
    data = bytearray((team.store_a / "store" / doc["name"] / f["path"]).read_bytes())
    data[len(data) // 2] ^= 0xFF
    for pack in doc.get("packs", []):
        for m in pack["members"]:
            if m["sha256"] == f["sha256"]:
                frame = zstandard.ZstdCompressor(level=19).compress(bytes(data))
                pad = m["length"] - len(frame) - 8
                assert pad >= 0, "level 19 should beat the pusher's level 3"
                frame += struct.pack("<II", 0x184D2A50, pad) + b"\0" * pad  # skippable frame
                path = area / "packs" / pack["sha256"]
                raw = path.read_bytes()
                path.write_bytes(raw[: m["offset"]] + frame + raw[m["offset"] + m["length"]:])
                return
    (area / "cas" / f["sha256"]).write_bytes(zstandard.ZstdCompressor().compress(bytes(data)))


def tamper_record(team: Team, area: Path) -> None:
    doc = _record(area, team.built_id)
    doc["manifest"]["files"][0]["mode"] = 0o4755
    (area / "ac" / f"{team.built_id}.json").write_text(json.dumps(doc))


def untrusted_key(team: Team, area: Path) -> None:
    _save(area, _record(area, team.built_id), SecretKey.generate("mallory"))


def unsigned(team: Team, area: Path) -> None:
    _save(area, _record(area, team.built_id), None)


def _with_entry(team: Team, area: Path, entry: dict) -> None:
    doc = _record(area, team.built_id)
    doc["manifest"]["files"].append(entry)
    doc["summary"]["files"] += 1
    _save(area, doc, _team_key(team))  # even a validly signed record may not escape


def path_escape(team: Team, area: Path) -> None:
    blob = next(f for f in _record(area, team.built_id)["manifest"]["files"] if f["kind"] == "file")
    _with_entry(team, area, {**blob, "path": "prefix/../../../escaped"})


def absolute_path(team: Team, area: Path) -> None:
    blob = next(f for f in _record(area, team.built_id)["manifest"]["files"] if f["kind"] == "file")
    _with_entry(team, area, {**blob, "path": str(team.root / "escaped")})


def symlink_escape(team: Team, area: Path) -> None:
    _with_entry(team, area, {"path": "prefix/lib/libevil.so", "kind": "symlink", "size": 0,
                             "mode": 0o777, "sha256": None, "target": "../../../../../etc/passwd"})


CASES: dict[str, tuple[Callable[[Team, Path], None], str]] = {
    "tampered-blob": (tamper_blob, "content hash mismatch"),
    "tampered-record": (tamper_record, "bad signature"),
    "untrusted-key": (untrusted_key, "untrusted key 'mallory'"),
    "unsigned": (unsigned, "record is unsigned"),
    "path-escape": (path_escape, "path contains '..'"),
    "absolute-path": (absolute_path, "absolute path"),
    "symlink-escape": (symlink_escape, "escapes the artifact"),
}


def _assert_refused(team: Team, config: Path, store: Path, fragment: str) -> None:
    profile = team.workspace / ".orch" / "profile"
    before = os.readlink(profile) if profile.is_symlink() else None
    p = team.doit("pull", f"store={store}", f"id={team.built_id}",
                  env=team.env(ORCH_CACHE_CONFIG=str(config)), check=False)
    assert p.returncode == 2, p.stdout + p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and fragment in errors[0], p.stderr
    assert "Traceback" not in p.stderr
    assert artifacts(store) == [] and leftovers(store) == []
    assert (os.readlink(profile) if profile.is_symlink() else None) == before


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_cache_content_is_refused(team: Team, case: str) -> None:
    if not (team.area / "ac").is_dir():
        test_push_then_teammate_pulls_and_switches(team)
    craft, fragment = CASES[case]
    area = team.nginx.root / "cache" / f"bad-{case}"
    shutil.copytree(team.area, area)
    craft(team, area)
    config = team.write_config(team.root / f"{case}.toml", [team.nginx.url("cache") + area.name + "/"])
    _assert_refused(team, config, team.root / f"store-{case}", fragment)


class _Truncating(http.server.BaseHTTPRequestHandler):
    """Serves a cache directory but sends only half of every blob, then hangs up."""
    root: Path

    def do_GET(self) -> None:  # noqa: N802
        path = self.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        cut = "/cas/" in self.path or "/packs/" in self.path
        self.wfile.write(data[: len(data) // 2] if cut else data)
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def truncating_server(team: Team) -> Iterator[str]:
    handler = type("H", (_Truncating,), {"root": team.area})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
    srv.shutdown()
    srv.server_close()


def test_truncated_transfer_is_refused(team: Team, truncating_server: str) -> None:
    if not (team.area / "ac").is_dir():
        test_push_then_teammate_pulls_and_switches(team)
    config = team.write_config(team.root / "trunc.toml", [truncating_server])
    _assert_refused(team, config, team.root / "store-trunc", "cut short")


def test_server_down_is_refused(team: Team) -> None:
    config = team.write_config(team.root / "down.toml", [f"http://127.0.0.1:{free_port()}/c/"])
    _assert_refused(team, config, team.root / "store-down", "is down or unreachable")


# ---- concurrency and delta -----------------------------------------------------------------

def _spawn(team: Team, *args: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), *args,
                             f"source={team.src}"], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_pushers_and_two_pullers(team: Team) -> None:
    config = team.write_config(team.root / "conc.toml", [team.nginx.url("cache") + "conc/"])
    env = {**team.pusher_env(), "ORCH_CACHE_CONFIG": str(config)}
    pushers = [_spawn(team, "push", f"store={team.store_a}", f"id={team.built_id}", env=env)
               for _ in range(2)]
    for p in pushers:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    record = team.nginx.root / "cache" / "conc" / "ac" / f"{team.built_id}.json"
    assert json.loads(record.read_text())["signature"]["key"] == "team-1"

    mark = team.nginx.mark()
    store = team.root / "store-conc"
    pullers = [_spawn(team, "pull", f"store={store}", f"id={team.built_id}",
                      env=team.env(ORCH_CACHE_CONFIG=str(config))) for _ in range(2)]
    for p in pullers:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert [a[:40] for a in artifacts(store)] == [team.built_id] and leftovers(store) == []
    doc = json.loads(record.read_text())
    packed = {m["sha256"] for p in doc.get("packs", []) for m in p["members"]}
    blobs = {f["sha256"] for f in doc["manifest"]["files"] if f["kind"] == "file"} - packed
    gets = [e.uri for e in team.nginx.access_log()[mark:] if e.method == "GET"
            and ("/cas/" in e.uri or "/packs/" in e.uri)]
    assert sorted(gets) == sorted([f"/cache/conc/cas/{b}" for b in blobs]
                                  + [f"/cache/conc/packs/{p['sha256']}" for p in doc["packs"]])
    # each blob and each pack once


def test_delta_pull_downloads_only_changed_files(team: Team) -> None:
    if not artifacts(team.store_b):
        test_push_then_teammate_pulls_and_switches(team)
    core = team.src / "core" / "core.cpp"
    core.write_text(core.read_text().replace('os << "Tensor([";', 'os << "tensor([";'))
    out = team.doit("build", f"store={team.store_a}", "substitute=0", "format=json")
    new_id = json.loads(out.stdout)["id"]
    assert new_id != team.built_id
    pushed = json.loads(team.doit("push", f"store={team.store_a}", "all=1", "format=json",
                                  env=team.pusher_env()).stdout)
    assert len(pushed["pushed"]) == 2  # all=1: both demo artifacts of store A

    old = {(f["sha256"]) for f in _record(team.area, team.built_id)["manifest"]["files"]
           if f["kind"] == "file"}
    new = _record(team.area, new_id)
    changed = {f["sha256"] for f in new["manifest"]["files"] if f["kind"] == "file"} - old
    assert changed and any(f["path"].endswith("libdemo_core.so") and f["sha256"] in changed
                           for f in new["manifest"]["files"])

    mark = team.nginx.mark()
    # A dead first substituter only costs a warning; the second one delivers.
    config = team.write_config(team.root / "delta.toml", [f"http://127.0.0.1:{free_port()}/x/",
                                                          team.nginx.url("cache") + AREA + "/"])
    p = team.doit("pull", f"store={team.store_b}", "format=json",
                  env=team.env(ORCH_CACHE_CONFIG=str(config)))
    assert "is down or unreachable" in p.stderr
    stats = json.loads(p.stdout)["stats"]
    gets = [e for e in team.nginx.access_log()[mark:] if e.method == "GET"
            and ("/cas/" in e.uri or "/packs/" in e.uri)]
    # Changed contents only: loose blobs by name, packed ones as byte ranges of their pack.
    where = {m["sha256"]: (p["sha256"], m["length"]) for p in new.get("packs", [])
             for m in p["members"]}
    assert sorted(e.uri.rsplit("/", 1)[1] for e in gets if "/cas/" in e.uri) == \
        sorted(changed - set(where))
    ranged = [e for e in gets if "/packs/" in e.uri]
    assert {e.uri.rsplit("/", 1)[1] for e in ranged} == {where[c][0] for c in changed & set(where)}
    assert all(e.status == 206 for e in ranged)
    assert sum(e.body_bytes_sent for e in ranged) < sum(
        p["size"] for p in new["packs"] if p["sha256"] in {e.uri.rsplit("/", 1)[1] for e in ranged})
    wire = sum(e.body_bytes_sent for e in gets)
    assert wire == stats["bytes_downloaded"]
    total = new["summary"]["bytes"]
    assert stats["files_linked"] > 0 and wire < total / 2
    print(f"\ndelta pull: {wire} bytes on the wire for a {total}-byte artifact "
          f"({len(changed)} of {new['summary']['blobs']} blobs, {len(gets)} requests)")


def test_shared_directory_cache_and_pull_by_id(team: Team) -> None:
    shared = team.root / "nfs-cache"
    shared.mkdir()
    config = team.write_config(team.root / "nfs.toml", [f"file://{shared}"])
    env = team.env(ORCH_CACHE_CONFIG=str(config),
                   ORCH_CACHE_SIGNING_KEY=str(team.keys / "team-1.secret"))
    team.doit("push", f"store={team.store_a}", f"id={team.built_id[:8]}", env=env)  # a prefix
    assert (shared / "ac" / f"{team.built_id}.json").is_file()
    assert not [p for p in shared.rglob("*") if ".tmp-" in p.name]
    store = team.root / "store-nfs"
    p = team.doit("pull", f"store={store}", f"id={team.built_id}", "format=json",
                  env=team.env(ORCH_CACHE_CONFIG=str(config)))
    assert json.loads(p.stdout)["origin"] == f"file://{shared}"
    assert [a[:40] for a in artifacts(store)] == [team.built_id]
    bad = team.doit("pull", f"store={store}", "id=xyz", env=team.env(ORCH_CACHE_CONFIG=str(config)),
                    check=False)
    assert bad.returncode == 2 and "40 lowercase hex" in bad.stderr
    # A prefix names a store entry: one not stored yet is pulled by all 40 digits.
    prefix = team.doit("pull", f"store={team.root / 'store-prefix'}", f"id={team.built_id[:8]}",
                       env=team.env(ORCH_CACHE_CONFIG=str(config)), check=False)
    assert prefix.returncode == 2 and f"id={team.built_id[:8]}: no artifact" in prefix.stderr
    present = team.doit("pull", f"store={store}", f"id={team.built_id[:8]}", "format=json",
                        env=team.env(ORCH_CACHE_CONFIG=str(config)))
    assert json.loads(present.stdout)["origin"] == "present"
    verified = team.doit("verify", f"store={team.store_a}", f"id={team.built_id[:8]}",
                         "format=json", env=team.env(ORCH_CACHE_CONFIG=str(config)))
    assert json.loads(verified.stdout)["ok"] is True
    # all=false is false: the one recipe/variant artifact, not every one of the recipe.
    one = team.doit("push", f"store={team.store_a}", "all=false", "format=json", env=env)
    assert len(json.loads(one.stdout)["pushed"]) == 1
    missing = team.doit("pull", f"store={team.root / 'store-none'}", f"id={'0' * 40}",
                        env=team.env(ORCH_CACHE_CONFIG=str(config)), check=False)
    assert missing.returncode == 2 and "no substituter has" in missing.stderr


@dataclass
class _PlanRef:
    """The two plan fields substitute() reads (a real Plan needs the whole toolchain)."""
    artifact_id: str
    name: str


def test_substitute_warns_and_falls_back(team: Team, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.cache import substitute
    from orchestrator.config.settings import Settings
    from orchestrator.store.artifacts import Store

    if not (team.area / "ac").is_dir():
        test_push_then_teammate_pulls_and_switches(team)
    bad = team.nginx.root / "cache" / "bad-unsigned"
    if not bad.is_dir():
        shutil.copytree(team.area, bad)
        unsigned(team, bad)
    down = f"http://127.0.0.1:{free_port()}/x/"
    plan = _PlanRef(team.built_id, f"{team.built_id}-demo-relwithdebinfo")
    store_root = team.root / "store-subst"

    def run(urls: list[str], substitute_var: str = "1") -> Path | None:
        monkeypatch.setenv("ORCH_CACHE_CONFIG", str(team.write_config(team.root / "s.toml", urls)))
        settings = Settings.from_vars(REPO, {"store": str(store_root),
                                             "substitute": substitute_var})
        return substitute(settings, plan, Store(store_root))

    assert run([down, team.nginx.url("cache") + "bad-unsigned/"]) is None
    err = capsys.readouterr().err
    assert "is down or unreachable" in err and "unsigned" in err and "building it here" in err
    assert artifacts(store_root) == [] and leftovers(store_root) == []
    assert run([team.nginx.url("cache") + AREA + "/"], substitute_var="0") is None
    assert artifacts(store_root) == []
    got = run([down, team.nginx.url("cache") + "bad-unsigned/", team.nginx.url("cache") + AREA + "/"])
    assert got is not None and got.name == plan.name
    assert "substituted" in capsys.readouterr().err


class _Stalling(_Truncating):
    """Sends half of a blob or pack, then stalls until the test is over (the client gets
    killed)."""
    started: threading.Event
    release: threading.Event

    def do_GET(self) -> None:  # noqa: N802
        path = self.root / self.path.lstrip("/")
        if not ("/cas/" in self.path or "/packs/" in self.path) or not path.is_file():
            return super().do_GET()
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.started.set()
        self.release.wait(60)


def test_killed_pull_leaves_store_as_it_was(team: Team) -> None:
    if not (team.area / "ac").is_dir():
        test_push_then_teammate_pulls_and_switches(team)
    started, release = threading.Event(), threading.Event()
    handler = type("S", (_Stalling,), {"root": team.area, "started": started, "release": release})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    store = team.root / "store-killed"
    try:
        config = team.write_config(team.root / "stall.toml", [f"http://127.0.0.1:{srv.server_address[1]}/"])
        p = _spawn(team, "pull", f"store={store}", f"id={team.built_id}",
                   env=team.env(ORCH_CACHE_CONFIG=str(config)))
        assert started.wait(60), "the pull never asked for a blob"
        p.kill()
        p.communicate(timeout=30)
    finally:
        release.set()
        srv.shutdown()
        srv.server_close()
    assert artifacts(store) == []
    assert leftovers(store)  # the dead pull's staging dir, cleaned by the next run
    team.doit("pull", f"store={store}", f"id={team.built_id}")
    assert [a[:40] for a in artifacts(store)] == [team.built_id] and leftovers(store) == []
