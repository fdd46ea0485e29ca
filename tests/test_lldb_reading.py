"""verify's lldb-14 reading check on small real libraries: a library whose functions leave
their parameters unnamed in the source (`int f(int)`, common in PyTorch's kernels and
overrides) has nothing to read and must pass; one built with line tables only (-g1: lldb
lists no parameters at all) must still fail, naming the function."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.verify.inputs import Interpreter, VerifyConfig
from orchestrator.verify.lldb_reading import optimized_out, probe, unreadable
from orchestrator.verify.resolve import SearchConfig

UNNAMED = """\
namespace lr {
int unnamed_one(int) { return 1; }
double unnamed_two(double, int) { return 2.0; }
long unnamed_three(long, long, int) { return 3; }
}
"""
NAMED = UNNAMED.replace(
    "long unnamed_three",
    "int named(int count, double scale) { return int(count * scale) + 7; }\nlong unnamed_three")

# A by-value struct passed in memory: at -O2 GCC splits it (SRA) and gives `a` a location only
# after the entry, whatever the flags (torchsort's TensorAccessor arguments).
ACC = "namespace lr { struct Acc { float* data; long stride; long size; }; }\n"
SPLIT = """\
namespace lr {
__attribute__((noinline)) float sum%d(Acc a, int scale) {
  float s = 0; for (long i = 0; i < a.size; ++i) s += a.data[i * a.stride]; return s * scale * %d; }
}
"""
AGGREGATE = ACC + SPLIT % (1, 1) + NAMED
ALL_SPLIT = ACC + "".join(SPLIT % (n, n) for n in (1, 2, 3))


def build(tmp: Path, name: str, text: str, *flags: str) -> Path:
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    (src / f"{name}.cpp").write_text(text)
    out = tmp / f"lib{name}.so"
    subprocess.run(["g++", "-O2", "-gdwarf-4", "-fno-reorder-blocks-and-partition", *flags,
                    "-fPIC", "-shared", f"-ffile-prefix-map={src}=/orch/src",
                    str(src / f"{name}.cpp"), "-o", str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory, session_toolchain) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("lldb-reading")
    libs = {"unnamed": build(tmp, "unnamed", UNNAMED, "-g"),
            "named": build(tmp, "named", NAMED, "-g"),
            "lines": build(tmp, "lines", NAMED, "-g1"),
            "aggregate": build(tmp, "aggregate", AGGREGATE, "-g"),
            "all_split": build(tmp, "all_split", ALL_SPLIT, "-g")}
    got = probe(session_toolchain / "debs" / "root", Path("/usr/bin/python3"),
                list(libs.values()), sample=8)
    return {k: got[str(p)] for k, p in libs.items()}


def test_a_library_whose_parameters_are_all_unnamed_passes(results) -> None:
    r = results["unnamed"]
    assert r["own"] == 3 and r["unnamed"] == 3 and r["functions"] == [], r
    assert unreadable(r) is None


def test_named_parameters_are_what_is_sampled_and_read(results) -> None:
    r = results["named"]
    assert [f["name"] for f in r["functions"]] == ["lr::named(int, double)"], r
    assert r["functions"][0]["located"] == ["count", "scale"]
    assert r["unnamed"] == 3 and unreadable(r) is None


def test_line_tables_only_still_fail_naming_a_function(results) -> None:
    r = results["lines"]
    bad = unreadable(r)
    assert bad is not None and bad.missing == "no parameter names", r
    assert bad.function.startswith("lr::") and bad.where.startswith("/orch/src/lines.cpp:")


def test_an_aggregate_the_optimizer_split_is_reported_not_failed_in_optimized_code(results) -> None:
    """One sampled function of four with a parameter unlocated at entry: RelWithDebInfo
    passes (an info finding names it); -O0's expectations still fail on it."""
    r = results["aggregate"]
    [gone] = optimized_out(r)
    assert gone.function == "lr::sum1(lr::Acc, int)" and gone.missing.endswith("for a"), r
    assert unreadable(r, optimized=True) is None
    strict = unreadable(r)
    assert strict is not None and strict.function == "lr::sum1(lr::Acc, int)"


def test_most_functions_unlocated_still_fail_in_optimized_code(results) -> None:
    r = results["all_split"]
    assert len(optimized_out(r)) == 3, r
    bad = unreadable(r, optimized=True)
    assert bad is not None and bad.missing == "no value location at entry for a"


def test_the_probe_never_indexes_a_library_s_whole_dwarf(results) -> None:
    """Every lookup the probe makes is by address, within one compile unit: lldb's statistics
    show no DWARF indexing (preloading it took most of a minute and 8 GB on libtorch_cpu.so)."""
    assert all(r["index_seconds"] == 0.0 for r in results.values()), \
        {k: r["index_seconds"] for k, r in results.items()}


BASE = """\
namespace lr {
struct Shape { virtual ~Shape(); virtual double area() const; double w = 2, h = 3; };
Shape::~Shape() {}
double Shape::area() const { return w * h; }
}
"""
USER = """\
namespace lr {
struct Shape { virtual ~Shape(); virtual double area() const; double w = 2, h = 3; };
double scaled(const Shape& shape, double factor) { return shape.area() * factor; }
int twice(int count, int extra) { return 2 * count + extra; }
}
"""


def test_a_library_is_probed_without_the_libraries_it_needs(tmp_path, session_toolchain) -> None:
    """lldb's default target takes a library's DT_NEEDED libraries along, and a lookup of a type
    its units only declare (Shape: GCC describes a class with virtual methods in full only
    where its vtable is) then searches, and indexes, those too: libtorch_python.so's probe
    indexed libtorch_cpu.so's 3.3 GB of DWARF, verify's probe of the 2.6 tree's relinked
    libraries took 50 s and 8.5 GB instead of 9.6 s and 3 GB. The probe loads the library
    alone, and it still reads it; the lookup stays within the library."""
    base = build(tmp_path, "base", BASE, "-g")
    src = tmp_path / "src"
    (src / "user.cpp").write_text(USER)
    user = tmp_path / "libuser.so"
    subprocess.run(["g++", "-O2", "-g", "-gdwarf-4", "-fno-reorder-blocks-and-partition", "-fPIC",
                    "-shared", f"-ffile-prefix-map={src}=/orch/src", str(src / "user.cpp"),
                    "-o", str(user), f"-L{tmp_path}", "-Wl,--no-as-needed", "-lbase", f"-Wl,-rpath,{tmp_path}"],
                   check=True)
    assert base.name in subprocess.run(["readelf", "-d", str(user)], capture_output=True,
                                       text=True, check=True).stdout
    r = probe(session_toolchain / "debs" / "root", Path("/usr/bin/python3"), [user], sample=8)[str(user)]
    assert r["modules"] == [str(user)], r["modules"]
    assert unreadable(r, optimized=True) is None, r
    assert {f["name"].split("(")[0] for f in r["functions"]} == {"lr::scaled", "lr::twice"}, r
    # The declared-only Shape is looked up in libuser.so itself (an index of its own DWARF).
    assert r["index_seconds"] > 0, r


def _debug_config(art: Path, deb_root: Path, **kw) -> VerifyConfig:
    interp = Interpreter(path=Path("/usr/bin/python3"), version="3.11", ext_suffix=".so",
                         libpython_soname=None)
    return VerifyConfig(artifact="art", root=art, prefix=art / "prefix", variant="relwithdebinfo",
                        build_type="RelWithDebInfo", lldb_deb_root=deb_root, interpreter=interp,
                        search=SearchConfig(ld_library_path=[], conf_dirs=[],
                                            default_dirs=["/lib/x86_64-linux-gnu"]), **kw)


def test_the_probe_starts_ahead_on_new_content_and_its_results_are_the_checks(tmp_path, session_toolchain) -> None:
    """verify starts lldb on the libraries whose content no one hashed yet (an incremental
    build's relinked ones) before it hashes and reads them, and the debug-info check takes
    its results: a -g1 library still fails naming its function, a -g one passes."""
    import os

    from orchestrator.hashing import remember_sha256, sha256_file
    from orchestrator.verify import engine
    from orchestrator.verify.engine import verify_tree

    deb_root = session_toolchain / "debs" / "root"
    art = tmp_path / "art"
    lib = art / "prefix" / "lib"
    lib.mkdir(parents=True)
    named = build(lib, "named", NAMED, "-g")
    lines = build(lib, "lines", NAMED, "-g1")
    (lib / "src").rename(tmp_path / "src")
    known = build(lib, "known", UNNAMED, "-g")
    (lib / "src").rename(tmp_path / "src2")
    remember_sha256(os.stat(known), sha256_file(known))  # pooled: its verdict is the cache's
    cfg = _debug_config(art, deb_root)
    ahead = engine._probe_ahead(cfg, [named, lines, known])
    assert ahead is not None and sorted(ahead.libs) == sorted([named.resolve(), lines.resolve()])
    ahead.close()
    started: list[list[Path]] = []
    real_start = engine.start_probe

    def spy(deb, py, libs, *a):
        started.append(list(libs))
        return real_start(deb, py, libs, *a)

    engine.start_probe = spy  # type: ignore[assignment]
    try:
        report = verify_tree(cfg)
    finally:
        engine.start_probe = real_start  # type: ignore[assignment]
    assert len(started) == 1 and sorted(started[0]) == sorted([named.resolve(), lines.resolve()])
    debug = [f for f in report.failures() if f.check == "debug_info"]
    assert [f.file for f in debug] == ["prefix/lib/liblines.so"], report.findings
    assert "lr::named" in debug[0].cause
    # with the three known, nothing starts ahead
    for p in (named, lines):
        remember_sha256(os.stat(p), sha256_file(p))
    assert engine._probe_ahead(cfg, [named, lines, known]) is None
