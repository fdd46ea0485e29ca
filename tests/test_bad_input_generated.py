"""Generated bad input: recipes, locks, cache.toml, nightly.toml and variables.

Each case writes one hostile file (or passes hostile variables) into a throwaway project
copy and runs the real doit entry point in-process (doit_glue.DoitEntry, a DoitMain, on the
project's tasks), the same path `doit` on the command line takes. Every case must end in exit
status 2 with one `error:` line, no traceback, and no file of the project or the store
changed. A small sample also runs `doit` as a subprocess. Seeded: the same cases every run.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import copy_project, run_doit

SEED = 15
RNG = random.Random(SEED)
FAKE_ID = "0" * 40
BAD_BYTES = [b"\xff", b"\xfe\xff", b"\xc3(", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc",
             b"\xed\xa0\x80", b"\xc0\xaf"]


@dataclass
class Case:
    """One hostile input: files to write (relative to the project) and doit's argv."""
    name: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None


# -- recipes --------------------------------------------------------------------------------

DEMO = """\
description = "d"
[source]
kind = "path"
path = "demo"
[build]
system = "cmake"
[variants.relwithdebinfo]
build_type = "RelWithDebInfo"
cflags = ["-gdwarf-4"]
"""


def toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string (\\u escapes included)


def recipe_case(name: str, text: str | bytes) -> Case:
    raw = text.encode() if isinstance(text, str) else text
    return Case(f"recipe:{name}", ["verify", "recipe=bad"], {"recipes/bad.toml": raw})


def nested_array(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def nested_table(depth: int) -> str:
    return "{a = " * depth + "1" + "}" * depth


def recipe_cases() -> list[Case]:
    cases = []
    for i in range(30):
        raw = DEMO.encode()
        pos = RNG.randrange(len(raw))
        cases.append(recipe_case(f"non-utf8-{i}", raw[:pos] + RNG.choice(BAD_BYTES) + raw[pos:]))
    for i in range(8):
        depth = RNG.choice([1000, 5000, 20000, 100000])
        cases.append(recipe_case(f"nested-array-{i}", DEMO + f"x = {nested_array(depth)}\n"))
    for i in range(8):
        depth = RNG.choice([200, 1000, 5000])
        cases.append(recipe_case(f"nested-table-{i}", DEMO + f"x = {nested_table(depth)}\n"))
    for i in range(4):  # deep but readable: stopped by the depth limit, not by the stack
        cases.append(recipe_case(f"nested-cflags-{i}", DEMO.replace(
            'cflags = ["-gdwarf-4"]', f"cflags = {nested_array(RNG.randrange(70, 400))}")))
    huge = ["cflags = [{v}]", "defines = {{ BIG = {v} }}", "env = {{ BIG = {v} }}"]
    for i in range(12):
        v = toml_str("x" * RNG.choice([40_000, 200_000, 1_000_000]))
        line = RNG.choice(huge).format(v=v)
        cases.append(recipe_case(f"huge-value-{i}", DEMO.replace('cflags = ["-gdwarf-4"]', line)))
    cases.append(recipe_case("many-flags", DEMO.replace(
        'cflags = ["-gdwarf-4"]', "cflags = [" + ", ".join([toml_str("y" * 30000)] * 20) + "]")))
    nul = ["cflags = [{v}]", "defines = {{ D = {v} }}", "env = {{ E = {v} }}", "defines = {{ {v} = 1 }}",
           "env = {{ {v} = \"1\" }}", "targets = [{v}]"]
    for i in range(12):
        v = toml_str("a\0b" if i % 2 else "\0")
        line = nul[i % len(nul)].format(v=v)
        where = "[build]\nsystem = \"cmake\"\n" + (line + "\n" if line.startswith("targets") else "")
        text = DEMO.replace('cflags = ["-gdwarf-4"]', "" if line.startswith("targets") else line)
        cases.append(recipe_case(f"nul-{i}", text.replace('[build]\nsystem = "cmake"\n', where)))
    for i, key in enumerate(["A=B", "=", "", "PATH=", "X Y=1"]):
        cases.append(recipe_case(f"env-key-{i}", DEMO.replace(
            'cflags = ["-gdwarf-4"]', f"env = {{ {toml_str(key)} = \"v\" }}")))
    for i, p in enumerate(["a" * 6000, "/" + "b/" * 2500, "c" * 300, "d/" + "e" * 256 + "/f",
                           "demo\0", "/tmp/\0x"]):
        cases.append(recipe_case(f"source-path-{i}", DEMO.replace('path = "demo"', f"path = {toml_str(p)}")))
    bad_values = ["1", "true", "[1, 2]", "{ a = 1 }", '"x"', "1.5", "1979-05-27T07:32:00Z", '""',
                  '"\\u0000"', toml_str("z" * 5000)]
    fields = [('description = "d"', "description = {v}"), ('kind = "path"', "kind = {v}"),
              ('path = "demo"', "path = {v}"), ('system = "cmake"', "system = {v}"),
              ('build_type = "RelWithDebInfo"', "build_type = {v}"),
              ('cflags = ["-gdwarf-4"]', "cflags = {v}"), ('cflags = ["-gdwarf-4"]', "defines = {v}"),
              ('cflags = ["-gdwarf-4"]', "env = {v}"), ('description = "d"', "name = {v}"),
              ('description = "d"', "lock = {v}"), ('system = "cmake"', 'system = "cmake"\nuses = {v}'),
              ('system = "cmake"', 'system = "cmake"\ntargets = {v}'),
              ('description = "d"', "variants = {v}"), ('description = "d"', "verify = {v}"),
              ('description = "d"', "outputs = {v}"), ('description = "d"', "source = {v}")]
    for i in range(60):
        old, new = RNG.choice(fields)
        v = RNG.choice(bad_values)
        text = DEMO.replace(old, new.format(v=v), 1)
        if text == DEMO or ('"x"' == v and "description" in new):
            v = "[1]"
            text = DEMO.replace(old, new.format(v=v), 1)
        cases.append(recipe_case(f"bad-type-{i}", text))
    for i, vname in enumerate(["Bad", "a b", "x\ny", "../x", "é", ".x"]):
        cases.append(recipe_case(f"variant-name-{i}", DEMO.replace("[variants.relwithdebinfo]",
                                                                     f"[variants.{toml_str(vname)}]")))
    for i, lname in enumerate(["../../etc/passwd", "nope", "a\0b", "x" * 300, "Tool Chain"]):
        cases.append(recipe_case(f"lock-name-{i}", DEMO.replace('description = "d"',
                                                                  f"lock = {toml_str(lname)}")))
    return cases


# -- locks ----------------------------------------------------------------------------------

def lock_cases(repo: Path) -> list[Case]:
    original = json.loads((repo / "locks" / "toolchain.lock.json").read_text())
    cases = []

    def with_lock(name: str, data: object | bytes, setup=None) -> None:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        cases.append(Case(f"lock:{name}", ["verify", "recipe=demo"],
                          {"locks/toolchain.lock.json": raw}, setup=setup))

    def python_at(path: str) -> dict:
        d = json.loads(json.dumps(original))
        d["entries"]["python"]["path"] = path
        return d

    for p in ["/bin/false", "/bin/echo", "/bin/true", "/dev/null", "/", "/nonexistent/python3",
              "python-nope", "/etc/passwd", "/bin/sh", "/usr/bin/env", "py\0thon", "x" * 5000]:
        with_lock(f"python={p[:20]!r}", python_at(p))

    def unreadable(project: Path) -> None:
        exe = project / "noperm-python"
        exe.write_text("#!/bin/sh\necho hi\n")
        os.chmod(exe, 0)

    with_lock("python-unreadable", python_at("noperm-python-placeholder"), setup=unreadable)

    def script(project: Path, body: str) -> None:
        exe = project / "fake-python"
        exe.write_text(body)
        os.chmod(exe, 0o755)

    for i, body in enumerate(["#!/bin/sh\nexit 0\n", "#!/bin/sh\necho '{}'\n", "#!/bin/sh\necho '[1]'\n",
                              "#!/bin/sh\necho '{\"version\": 1}'\n", "\x7fELF garbage",
                              "#!/bin/sh\nsleep 0; echo '{\"version\":\"3\",\"soabi\":null,"
                              "\"ext_suffix\":null,\"libpython\":null}'\n"]):
        with_lock(f"python-script-{i}", python_at("fake-python-placeholder"),
                  setup=lambda pr, b=body: script(pr, b))
    raw = json.dumps(original).encode()
    for i in range(10):
        pos = RNG.randrange(len(raw))
        with_lock(f"non-utf8-{i}", raw[:pos] + RNG.choice(BAD_BYTES) + raw[pos:])
    for i, depth in enumerate([1000, 10000, 100000, 200]):
        with_lock(f"nested-{i}", ("[" * depth + "]" * depth).encode())
        with_lock(f"nested-obj-{i}", ('{"a":' * depth + "1" + "}" * depth).encode())
    mutations: list[tuple[str, Callable[[dict], None]]] = [
        ("entries-list", lambda d: d.__setitem__("entries", [])),
        ("platform-int", lambda d: d.__setitem__("platform", 3)),
        ("spec-sha", lambda d: d.__setitem__("spec_sha256", "z" * 64)),
        ("schema", lambda d: d.__setitem__("schema_version", 99)),
        ("no-python", lambda d: d["entries"].pop("python")),
        ("py-kind", lambda d: d["entries"]["python"].__setitem__("kind", "nope")),
        ("py-sha", lambda d: d["entries"]["python"].__setitem__("sha256", "0" * 64)),
        ("py-version", lambda d: d["entries"]["python"].__setitem__("version", [])),
        ("cc-path", lambda d: d["entries"]["compiler:cc"].__setitem__("path", "/bin/false")),
        ("cc-nul", lambda d: d["entries"]["compiler:cc"].__setitem__("path", "g\0cc")),
        ("cc-dir", lambda d: d["entries"]["compiler:cc"].__setitem__("path", "/usr")),
        ("top-list", lambda d: d.clear()),
    ]
    for name, mutate in mutations:
        d = json.loads(json.dumps(original))
        mutate(d)
        with_lock(name, d if name != "top-list" else [1, 2])
    with_lock("empty", b"")
    with_lock("text", b"not json")
    return cases


# -- lock specs (locks/<name>.toml; only ones `doit lock` must refuse before resolving) ----

def spec_cases(repo: Path) -> list[Case]:
    raw = (repo / "locks" / "toolchain.toml").read_bytes()
    cases = []

    def spec(name: str, data: bytes | str) -> None:
        body = data.encode() if isinstance(data, str) else data
        cases.append(Case(f"spec:{name}", ["lock", "lock=toolchain"], {"locks/toolchain.toml": body}))

    for i in range(10):
        pos = RNG.randrange(len(raw))
        spec(f"non-utf8-{i}", raw[:pos] + RNG.choice(BAD_BYTES) + raw[pos:])
    for i, depth in enumerate([1000, 100000, 300]):
        spec(f"nested-{i}", f"x = {nested_array(depth)}\n")
    for name, text in [("python-int", "python = 1"), ("requirements-str", '[pypi]\nrequirements = "x"'),
                       ("compilers-list", "compilers = [1]"), ("deb-int", "deb = 3"),
                       ("unknown", "wat = 1"), ("conda-lockfile-int", "[conda]\nlockfile = 1"),
                       ("interpreter-list", "[python]\ninterpreter = []"), ("malformed", "[python\n")]:
        spec(name, text + "\n")
    cases.append(Case("spec:lock-name-bad", ["lock", "lock=../toolchain"]))
    cases.append(Case("spec:lock-name-missing", ["lock", "lock=nope"]))
    return cases


# -- cache.toml -----------------------------------------------------------------------------

def cache_cases() -> list[Case]:
    base = '[cache]\nsubstituters = ["file:///tmp/nowhere"]\ntimeout = 5\n'
    cases = []

    def cfg(name: str, text: str | bytes, env: dict[str, str] | None = None) -> None:
        raw = text.encode() if isinstance(text, str) else text
        cases.append(Case(f"cache:{name}", ["pull", f"id={FAKE_ID}"], {"cache.toml": raw},
                          env=env or {}))

    for i in range(10):
        raw = base.encode()
        pos = RNG.randrange(len(raw))
        cfg(f"non-utf8-{i}", raw[:pos] + RNG.choice(BAD_BYTES) + raw[pos:])
    for u in ["http://[::1", "http://[::1/x", "https://[zz]/", "http://host:99999/", "http://host:abc/",
              "http://", "https://", "ftp://x/", "http://a b/", "http://x/\n", "http://x/\0",
              "http://[::1]:-1/", "file://" + "a" * 5000, "http://" + "h" * 300 + "/"]:
        cfg(f"url={u[:24]!r}", f"[cache]\nsubstituters = [{toml_str(u)}]\n")
        cfg(f"push={u[:24]!r}", f"[cache]\npush = {toml_str(u)}\nsubstituters = [{toml_str(u)}]\n")
    for i, depth in enumerate([1000, 100000, 300]):
        cfg(f"nested-{i}", f"[cache]\nsubstituters = {nested_array(depth)}\n")
    for name, body in [("timeout-neg", "timeout = -1"), ("timeout-str", 'timeout = "x"'),
                       ("jobs-0", "jobs = 0"), ("jobs-huge", "jobs = 100000000000000000000"),
                       ("subs-str", 'substituters = "file:///x"'), ("keys-bad", 'trusted-keys = ["nope"]'),
                       ("keys-int", "trusted-keys = [1]"), ("unknown", "wat = 1"),
                       ("cache-str", None)]:
        cfg(name, '[cache]\n' + body + "\n" if body else 'cache = "x"\n')
    cases.append(Case("cache:env-dir", ["pull", f"id={FAKE_ID}"], env={"ORCH_CACHE_CONFIG": "/"}))
    cases.append(Case("cache:env-missing", ["pull", f"id={FAKE_ID}"],
                      env={"ORCH_CACHE_CONFIG": "/nonexistent/cache.toml"}))
    return cases


# -- nightly.toml ---------------------------------------------------------------------------

def nightly_cases() -> list[Case]:
    base = '[[matrix]]\nrecipe = "demo"\nvariants = ["release"]\nsmoke = [{s}]\n'
    cases = []

    def night(name: str, text: str | bytes) -> None:
        raw = text.encode() if isinstance(text, str) else text
        cases.append(Case(f"nightly:{name}", ["nightly", "config=nightly-bad.toml"],
                          {"nightly-bad.toml": raw}))

    for i, s in enumerate(["echo {", "echo }", "echo {x}", "echo {recipe.x}", "echo {recipe[0]}",
                           "echo {0}", "echo {}", "echo {recipe!z}", "echo {recipe:d}",
                           "awk '{print $1}'", "echo ${HOME}", "echo \0", "x" * 200_000]):
        night(f"smoke-{i}", base.format(s=toml_str(s)))
    for i in range(8):
        raw = base.format(s='"true"').encode()
        pos = RNG.randrange(len(raw))
        night(f"non-utf8-{i}", raw[:pos] + RNG.choice(BAD_BYTES) + raw[pos:])
    for i, depth in enumerate([1000, 100000, 300]):
        night(f"nested-{i}", f"matrix = {nested_array(depth)}\n")
    for name, text in [("empty", ""), ("matrix-empty", "matrix = []"),
                       ("variants-empty", '[[matrix]]\nrecipe = "demo"\nvariants = []\n'),
                       ("timeout-0", '[[matrix]]\nrecipe = "demo"\nvariants = ["release"]\ntimeout_s = 0\n'),
                       ("history-str", 'history = "x"\n[[matrix]]\nrecipe = "demo"\nvariants = ["r"]\n'),
                       ("unknown", 'x = 1\n[[matrix]]\nrecipe = "demo"\nvariants = ["r"]\n'),
                       ("fail-on-unknown", 'fail_on = ["abi", "weather"]\n' + base.format(s='"true"')),
                       ("targets-bad", base.format(s='"true"') + 'targets = ["c10; rm -rf /"]\n'),
                       ("buildbot-tag", base.format(s='"true"')
                        + '[buildbot]\nworkers = [{name = "w", tags = ["tpu"]}]\n')]:
        night(name, text)
    cases.append(Case("nightly:missing", ["nightly", "config=/nonexistent.toml"]))
    cases.append(Case("nightly:dir", ["nightly", "config=/"]))
    return cases


# -- variables ------------------------------------------------------------------------------

def variable_cases() -> list[Case]:
    cases = []

    def var(name: str, *argv: str, setup=None) -> None:
        cases.append(Case(f"var:{name}", list(argv), setup=setup))

    def regular_file(project: Path) -> None:
        (project / "afile").write_text("x")

    for verb in ["status", "gc", "pull", "verify", "build", "switch", "rollback"]:
        for s in ["/proc/x", "/dev/null", "afile", "/proc/self/status", "/sys/x/y"]:
            var(f"{verb}-store={s}", verb, f"store={s}", f"id={FAKE_ID}" if verb == "pull" else "recipe=demo",
                setup=regular_file)
    for argv in [["status", "wat=1"], ["build", "force=2"], ["status", "jobs=abc"], ["status", "jobs=0"],
                 ["status", "jobs=" + "9" * 5000], ["status", "format=xml"], ["build", "substitute=maybe"],
                 ["verify", "variant=nope"], ["verify", "recipe=../x"], ["verify", "recipe=Demo"],
                 ["verify", "recipe=nope"], ["verify", "recipe=" + "a" * 300], ["gc", "keep=-1"],
                 ["gc", "keep=x"], ["build", "compile_cache=sscache"], ["status", "workspace=/dev/null"],
                 ["status", "workspace=/nonexistent"], ["status", "workspace=" + "w" * 6000],
                 ["pull", "id=zz"], ["verify", "id=abc"], ["build", "keep_going=2"],
                 ["push", "id=abcdef"], ["pull", "id=abcdef12"], ["verify", "id=" + "0" * 41],
                 ["push", "all=maybe"], ["push", "all="], ["nightly", "push=maybe"],
                 ["gc", "dry_run=maybe"], ["verify", "toolchain=maybe"], ["status", "create=2"],
                 ["verify", "recipe=demo", "variant=" + "v" * 300], ["toolchain", "lock=nope"],
                 ["toolchain", "lock=../x"], ["status", "store=" + "s" * 6000],
                 ["status", "store=/" + "s/" * 2100]]:
        var(" ".join(a[:30] for a in argv), *argv)
    return cases


# -- running --------------------------------------------------------------------------------

def snapshot(*roots: Path) -> dict[str, tuple]:
    """Every file and link under roots (doit's own state excepted): size, mtime, mode."""
    out: dict[str, tuple] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            if Path(dirpath).name == ".orch":
                filenames = [f for f in filenames if not f.startswith("doit.sqlite3")]
            for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                st = os.lstat(os.path.join(dirpath, n))
                out[os.path.join(dirpath, n)] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def doit_in_process(project: Path, argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """The real doit entry point on project/dodo.py's tasks, output captured."""
    from doit.cmd_base import ModuleTaskLoader

    from orchestrator.cli import tasks
    from orchestrator.cli.doit_glue import DoitEntry, doit_config

    module = {k: getattr(tasks, k) for k in dir(tasks) if k.startswith("task_")}
    module["DOIT_CONFIG"] = doit_config(project)
    saved = {k: os.environ.get(k) for k in [*env, "ORCH_STORE", "ORCH_CACHE_CONFIG"]}
    os.environ.pop("ORCH_STORE", None)
    os.environ.pop("ORCH_CACHE_CONFIG", None)
    os.environ.update(env)
    out = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(project)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = DoitEntry(ModuleTaskLoader(module)).run(argv)
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, out.getvalue()


REPO = Path(__file__).resolve().parents[1]
CASES = recipe_cases() + lock_cases(REPO) + spec_cases(REPO) + cache_cases() + nightly_cases() + variable_cases()


def test_case_count() -> None:
    assert len(CASES) >= 300, len(CASES)


@pytest.fixture(scope="module")
def bad_project(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bad-input")
    project = copy_project(root / "project")
    store = root / "store"
    store.mkdir()
    return project, store


def apply(case: Case, project: Path) -> dict[Path, bytes | None]:
    """Write the case's files; return what to restore afterwards."""
    saved: dict[Path, bytes | None] = {}
    for rel, data in case.files.items():
        p = project / rel
        saved[p] = p.read_bytes() if p.is_file() else None
        p.write_bytes(data)
    if case.setup is not None:
        case.setup(project)
    for p in list(case.files):
        f = project / p
        if f.suffix == ".json" and b"placeholder" in f.read_bytes():
            f.write_bytes(f.read_bytes().replace(b"noperm-python-placeholder",
                                                 str(project / "noperm-python").encode())
                          .replace(b"fake-python-placeholder", str(project / "fake-python").encode()))
    return saved


def restore(saved: dict[Path, bytes | None]) -> None:
    for p, data in saved.items():
        if data is None:
            p.unlink(missing_ok=True)
        else:
            p.write_bytes(data)


def error_lines(output: str) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("error:")]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, bad_project: tuple[Path, Path]) -> None:
    project, store = bad_project
    argv = [a if not a.startswith("store=") or a.startswith("store=/") else f"store={project / a[6:]}"
            for a in case.argv]
    if not any(a.startswith("store=") for a in argv):
        argv.append(f"store={store}")
    saved = apply(case, project)
    try:
        before = snapshot(project, store)
        rc, output = doit_in_process(project, argv, case.env)
        after = snapshot(project, store)
    finally:
        restore(saved)
    assert "Traceback" not in output, output[-1500:]
    assert rc == 2, output[-1500:]
    lines = error_lines(output)
    assert len(lines) == 1, output[-1500:]
    assert len(output.strip().splitlines()) == 1, output[-1500:]
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert not changed, sorted(changed)[:5]


SAMPLE = RNG.sample(CASES, 6)


@pytest.mark.parametrize("case", SAMPLE, ids=[c.name for c in SAMPLE])
def test_bad_input_subprocess(case: Case, tmp_path: Path) -> None:
    """The same through `doit` as a user runs it: one line on the terminal, exit 2."""
    project = copy_project(tmp_path / "project")
    store = tmp_path / "store"
    store.mkdir()
    argv = [a if not a.startswith("store=") or a.startswith("store=/") else f"store={project / a[6:]}"
            for a in case.argv]
    if not any(a.startswith("store=") for a in argv):
        argv.append(f"store={store}")
    apply(case, project)
    if any("\0" in a for a in argv):
        pytest.skip("argv cannot carry a NUL")
    res = run_doit(project, *argv, env=case.env, timeout=120)
    assert "Traceback" not in res.output, res.output[-1500:]
    assert res.returncode == 2, res.output[-1500:]
    assert len(error_lines(res.output)) == 1, res.output[-1500:]


