"""verify's ELF reader, resolver and checks on tiny real gcc-built fixtures and the real torch wheel.

Resolution is cross-checked against glibc's own ld.so (`--list`), which only maps the files."""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from orchestrator.verify.checks.cxx_abi import object_abi, symbol_abi
from orchestrator.verify.demangle import demangle
from orchestrator.verify.dwarf import debug_facts
from orchestrator.verify.elf import read_elf
from orchestrator.verify.engine import verify_tree
from orchestrator.verify.fatbin import fatbin_images
from orchestrator.verify.gnuhash import gnu_hash
from orchestrator.verify.inputs import Interpreter, TorchFacts, VerifyConfig
from orchestrator.verify.resolve import Resolver, SearchConfig, parse_ld_so_conf

LDSO = "/lib64/ld-linux-x86-64.so.2"
NO_SYSTEM = SearchConfig(ld_library_path=[], conf_dirs=[], default_dirs=["/lib/x86_64-linux-gnu",
                                                                         "/usr/lib/x86_64-linux-gnu"])


def cc(out: Path, src: str, *flags: str, lang: str = "c") -> Path:
    """Compile one source text into `out` with the real gcc/g++."""
    out.parent.mkdir(parents=True, exist_ok=True)
    suffix = ".c" if lang == "c" else ".cpp"
    srcfile = out.with_name(out.name + suffix)
    srcfile.write_text(src)
    compiler = "gcc" if lang == "c" else "g++"
    subprocess.run([compiler, "-fPIC", "-o", str(out), str(srcfile), *flags], check=True,
                   capture_output=True, text=True)
    srcfile.unlink()
    return out


@pytest.fixture(scope="module")
def fx(tmp_path_factory) -> Path:
    """A handful of libraries laid out to exercise the search order and the symbol checks."""
    root = tmp_path_factory.mktemp("elf-fixtures")
    a, b, exe_dir = root / "a", root / "b", root / "bin"
    vs = root / "leaf.map"
    vs.write_text("LEAF_1.0 { global: leaf_one; local: *; };\nLEAF_2.0 { global: leaf_two; } LEAF_1.0;\n")
    # Two builds of libleaf.so: a/ has both versions, b/ only LEAF_1.0 (and no leaf_two).
    cc(a / "libleaf.so", "int leaf_one(void){return 1;} int leaf_two(void){return 2;}",
       "-shared", "-Wl,-soname,libleaf.so", f"-Wl,--version-script={vs}")
    (root / "leaf1.map").write_text("LEAF_1.0 { global: leaf_one; local: *; };\n")
    cc(b / "libleaf.so", "int leaf_one(void){return 10;}", "-shared", "-Wl,-soname,libleaf.so",
       f"-Wl,--version-script={root / 'leaf1.map'}")
    # libmid.so needs libleaf.so and has no search path of its own.
    cc(root / "mid" / "libmid.so", "int leaf_one(void); int leaf_two(void);"
       "int mid(void){return leaf_one()+leaf_two();}", "-shared", f"-L{a}", "-lleaf")
    mid = root / "mid"
    # Executables: one with DT_RPATH=a (inherited by libmid's lookup), one with DT_RUNPATH=a (not).
    main = "int mid(void); int main(void){return mid();}"
    cc(exe_dir / "with_rpath", main, f"-L{mid}", "-lmid", f"-L{a}", "-Wl,--disable-new-dtags",
       f"-Wl,-rpath,{a}:{mid}")
    cc(exe_dir / "with_runpath", main, f"-L{mid}", "-lmid", f"-L{a}", "-Wl,--enable-new-dtags",
       f"-Wl,-rpath,{a}:{mid}")
    # $ORIGIN-relative RUNPATH.
    cc(root / "origin" / "lib" / "libuses_leaf.so", "int leaf_one(void); int f(void){return leaf_one();}",
       "-shared", f"-L{a}", "-lleaf", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../../a")
    # A weak undefined symbol (must be ignored) and a strong one.
    cc(root / "weak" / "libweak.so", "extern int maybe(void) __attribute__((weak));"
       "extern int surely(void); int g(void){return (maybe ? maybe() : 0) + surely();}",
       "-shared", "-Wl,-z,undefs")
    return root


def ldso_list(exe: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """glibc's own answer: soname -> path, from `ld.so --list` (maps, never runs, the program)."""
    out = subprocess.run([LDSO, "--list", str(exe)], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", **(env or {})}).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def test_reads_needed_soname_paths_and_versions(fx):
    leaf = read_elf(fx / "a" / "libleaf.so")
    assert leaf.soname == "libleaf.so"
    assert leaf.defined[b"leaf_two"] == ("LEAF_2.0",) and leaf.verdefs == {"LEAF_1.0", "LEAF_2.0"}
    mid = read_elf(fx / "mid" / "libmid.so")
    assert "libleaf.so" in mid.needed and mid.rpath == [] and mid.runpath == []
    by_name = {u.name: u for u in mid.undefined}
    assert by_name[b"leaf_two"].version == "LEAF_2.0" and by_name[b"leaf_two"].version_file == "libleaf.so"
    exe = read_elf(fx / "bin" / "with_runpath")
    assert exe.runpath == [str(fx / "a"), str(fx / "mid")] and exe.rpath == []
    assert read_elf(fx / "bin" / "with_rpath").rpath == [str(fx / "a"), str(fx / "mid")]
    weak = read_elf(fx / "weak" / "libweak.so")
    assert {u.name for u in weak.undefined} >= {b"surely"} and b"maybe" not in {u.name for u in weak.undefined}


@pytest.mark.parametrize("exe,leaf_found", [("with_rpath", True), ("with_runpath", False)])
def test_rpath_is_inherited_runpath_is_not_like_ldso(fx, exe, leaf_found):
    r = Resolver(NO_SYSTEM)
    closure = r.closure(fx / "bin" / exe)
    got = {e.soname: e.path for e in closure.edges}
    assert (got["libleaf.so"] is not None) == leaf_found
    truth = ldso_list(fx / "bin" / exe)
    assert (truth.get("libleaf.so", "not found") != "not found") == leaf_found
    if leaf_found:
        assert str(got["libleaf.so"]) == truth["libleaf.so"]


def test_ld_library_path_beats_runpath_rpath_beats_both(fx):
    b = str(fx / "b")
    r = Resolver(SearchConfig(ld_library_path=[b], conf_dirs=[], default_dirs=NO_SYSTEM.default_dirs))
    runpath = {e.soname: e.path for e in r.closure(fx / "bin" / "with_runpath").edges}
    rpath = {e.soname: e.path for e in r.closure(fx / "bin" / "with_rpath").edges}
    # libmid's own lookup: RUNPATH exe -> LD_LIBRARY_PATH (b); RPATH exe -> a first.
    assert runpath["libleaf.so"] == fx / "b" / "libleaf.so"
    assert rpath["libleaf.so"] == fx / "a" / "libleaf.so"
    assert ldso_list(fx / "bin" / "with_runpath", {"LD_LIBRARY_PATH": b})["libleaf.so"] == str(fx / "b" / "libleaf.so")
    assert ldso_list(fx / "bin" / "with_rpath", {"LD_LIBRARY_PATH": b})["libleaf.so"] == str(fx / "a" / "libleaf.so")


def test_origin_and_foreign_machine_is_skipped(fx, tmp_path):
    lib = fx / "origin" / "lib" / "libuses_leaf.so"
    r = Resolver(NO_SYSTEM)
    [edge] = [e for e in r.closure(lib).edges if e.soname == "libleaf.so"]
    assert edge.path == fx / "a" / "libleaf.so"
    # The same library with e_machine patched to AArch64 earlier on the path: ld.so skips it.
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    data = bytearray((fx / "b" / "libleaf.so").read_bytes())
    data[18:20] = (183).to_bytes(2, "little")
    (foreign / "libleaf.so").write_bytes(bytes(data))
    r2 = Resolver(SearchConfig(ld_library_path=[str(foreign)], conf_dirs=[], default_dirs=[]))
    [edge2] = [e for e in r2.closure(lib).edges if e.soname == "libleaf.so"]
    assert edge2.path == fx / "a" / "libleaf.so" and str(foreign) in edge2.tried


def test_ld_so_conf_includes(tmp_path):
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "b.conf").write_text("/opt/b  # comment\n\n")
    (tmp_path / "conf.d" / "a.conf").write_text("# only a comment\n/opt/a\n")
    (tmp_path / "ld.so.conf").write_text(f"/opt/first\ninclude conf.d/*.conf\ninclude {tmp_path}/none/*.conf\n")
    assert parse_ld_so_conf(str(tmp_path / "ld.so.conf")) == ["/opt/first", "/opt/a", "/opt/b"]
    assert "/usr/lib/x86_64-linux-gnu" in parse_ld_so_conf()  # the machine's own


def _cfg(root: Path, **kw) -> VerifyConfig:
    return VerifyConfig(artifact=root.name, root=root, prefix=root, search=kw.pop("search", NO_SYSTEM), **kw)


def test_missing_symbol_and_version_are_named(fx, tmp_path):
    """libmid linked against a/ (LEAF_2.0, leaf_two) but shipped with b/'s older libleaf."""
    art = tmp_path / "art"
    (art / "lib").mkdir(parents=True)
    shutil.copy(fx / "mid" / "libmid.so", art / "lib")
    shutil.copy(fx / "b" / "libleaf.so", art / "lib")
    report = verify_tree(_cfg(art, search=SearchConfig(ld_library_path=[str(art / "lib")], conf_dirs=[],
                                                       default_dirs=NO_SYSTEM.default_dirs)))
    causes = [f.cause for f in report.failures()]
    assert report.checks["symbols"] == "fail" and report.checks["resolution"] == "pass"
    assert any("undefined symbol leaf_two@LEAF_2.0 needed by lib/libmid.so" in c for c in causes), causes
    assert any("does not define version(s) LEAF_2.0 required by lib/libmid.so" in c for c in causes), causes
    shutil.copy(fx / "a" / "libleaf.so", art / "lib")
    assert verify_tree(_cfg(art, search=SearchConfig(ld_library_path=[str(art / "lib")], conf_dirs=[],
                                                     default_dirs=NO_SYSTEM.default_dirs))).ok


def test_cxx11_abi_mismatch_is_said_in_words(tmp_path):
    art = tmp_path / "art"
    lib = art / "lib"
    cc(lib / "libstr.so", "#include <string>\nnamespace s { int take(const std::string& x){return x.size();}"
       " int plain(int x){return x;} }",
       "-shared", "-Wl,-soname,libstr.so", "-D_GLIBCXX_USE_CXX11_ABI=1", lang="c++")
    cc(lib / "libold.so", "#include <string>\nnamespace s { int take(const std::string&); int plain(int); }\n"
       "int use(){ return s::take(std::string(\"hi\")) + s::plain(1); }", "-shared", f"-L{lib}", "-lstr",
       "-D_GLIBCXX_USE_CXX11_ABI=0", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN", lang="c++")
    assert object_abi(read_elf(lib / "libold.so")) == "0"
    assert object_abi(read_elf(lib / "libstr.so")) == "1"
    report = verify_tree(_cfg(art, search=SearchConfig()))
    [abi] = [f for f in report.failures() if f.check == "cxx_abi"]
    assert abi.file == "lib/libold.so"
    assert abi.cause.startswith("libold.so was built with _GLIBCXX_USE_CXX11_ABI=0 but libstr.so uses 1")
    assert "s::take(std::string const&)" in abi.cause
    assert any(f.check == "symbols" and "s::take(std::string const&)" in f.cause for f in report.failures())


def test_dwarf_producer_and_levels(tmp_path):
    src = "int f(int x){return x*2;}"
    o2 = cc(tmp_path / "libo2.so", src, "-shared", "-g", "-O2")
    o0 = cc(tmp_path / "libo0.so", src, "-shared", "-g")
    nodbg = cc(tmp_path / "libnodbg.so", src, "-shared", "-O3")
    z = cc(tmp_path / "libz.so", src, "-shared", "-g", "-O1", "-gz")
    f2 = debug_facts(o2, read_elf(o2))
    assert f2.has_debug_info and f2.has_debug_line and re.search(r" -g .*-O2|-O2.* -g", f2.producers[0])
    assert "-O" not in debug_facts(o0, read_elf(o0)).producers[0]
    assert not debug_facts(nodbg, read_elf(nodbg)).has_debug_info
    assert "-O1" in debug_facts(z, read_elf(z)).producers[0]  # compressed .debug_info

    # A library of several units compiled apart, each with its own flags and a rich
    # abbreviation table (C++, GCC numbers the unit's abbreviation last): every unit's producer,
    # as pyelftools reads it.
    objs = []
    for i, flags in enumerate((["-O2"], ["-O0"], ["-O3", "-gdwarf-5"], ["-Os", "-gdwarf-4"])):
        objs.append(cc(tmp_path / "multi" / f"u{i}.o", (
            f"#include <map>\n#include <string>\nstruct S{i} {{ virtual ~S{i}() = default; "
            f"std::map<std::string, int> m; }};\nint u{i}(const char* k) {{ S{i} s; "
            f"s.m[k] = {i}; return s.m.size(); }}\n"), "-c", "-g", *flags, lang="cpp"))
    multi = tmp_path / "multi" / "libmulti.so"
    subprocess.run(["g++", "-shared", "-o", str(multi), *map(str, objs)], check=True)
    with open(multi, "rb") as f:
        theirs = [cu.get_top_DIE().attributes["DW_AT_producer"].value.decode()
                  for cu in ELFFile(f).get_dwarf_info().iter_CUs()
                  if "DW_AT_producer" in cu.get_top_DIE().attributes]
    ours = debug_facts(multi, read_elf(multi)).producers
    assert set(ours) == set(theirs) and len(ours) >= 4, (ours, theirs)
    for obj in objs:
        obj.unlink()
    multi.unlink()

    def run(build_type: str) -> list[str]:
        cfg = _cfg(tmp_path, search=SearchConfig(), build_type=build_type, variant=build_type.lower())
        return [f"{f.file}: {f.cause}" for f in verify_tree(cfg).failures() if f.check == "debug_info"]

    rwdi = run("RelWithDebInfo")
    assert any(c.startswith("libnodbg.so: variant relwithdebinfo (RelWithDebInfo) expects DWARF") for c in rwdi)
    assert any(c.startswith("libo0.so: variant relwithdebinfo expects -O2 but DW_AT_producer says -O0") for c in rwdi)
    assert not any(c.startswith("libo2.so") for c in rwdi)
    rel = run("Release")
    assert {c.split(":")[0] for c in rel} == {"libo2.so", "libo0.so", "libz.so"}


def test_runpath_into_build_tmp_and_home_is_flagged(tmp_path):
    art = tmp_path / "art"
    build = tmp_path / "build"
    cc(art / "libbad.so", "int f(void){return 0;}", "-shared", "-Wl,--enable-new-dtags",
       f"-Wl,-rpath,{build}/sub:/home/someone/lib:$ORIGIN")
    report = verify_tree(_cfg(art, search=SearchConfig(), build_dirs=[build]))
    causes = [f.cause for f in report.failures() if f.check == "portability"]
    assert any(f"RUNPATH entry '{build}/sub' points into the build directory" in c for c in causes), causes
    assert any("'/home/someone/lib' points into a home directory" in c for c in causes), causes
    assert not any("$ORIGIN" in c for c in causes)


def test_extension_policy_and_suffix(tmp_path):
    art = tmp_path / "art"
    py = art / "python"
    src = "#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"e\", 0, -1, 0};\n" \
          "PyMODINIT_FUNC PyInit_e(void){return PyModule_Create(&m);}"
    inc = "-I/usr/include/python3.11"
    cc(py / "e.cpython-311-x86_64-linux-gnu.so", src, "-shared", inc)
    cc(py / "linked" / "e.cpython-311-x86_64-linux-gnu.so", src, "-shared", inc, "-lpython3.11")
    cc(py / "wrong" / "e.cpython-310-x86_64-linux-gnu.so", src, "-shared", inc)
    interp = Interpreter(Path("/usr/bin/python3"), "3.11.2", ".cpython-311-x86_64-linux-gnu.so",
                         "libpython3.11.so.1.0")
    cfg = _cfg(art, search=SearchConfig(), interpreter=interp, python_dirs=[py])
    report = verify_tree(cfg)
    py_fails = {f.file: f.cause for f in report.failures() if f.check == "python"}
    assert set(py_fails) == {"python/linked/e.cpython-311-x86_64-linux-gnu.so",
                             "python/wrong/e.cpython-310-x86_64-linux-gnu.so"}
    assert "links libpython3.11.so.1.0" in py_fails["python/linked/e.cpython-311-x86_64-linux-gnu.so"]
    assert "does not match the locked Python 3.11.2" in py_fails["python/wrong/e.cpython-310-x86_64-linux-gnu.so"]
    # PyModule_Create2 & co. come from the preloaded interpreter: no symbol failures.
    assert report.checks["symbols"] == "pass"
    cfg.rules = dataclasses.replace(cfg.rules, libpython="interpreter")
    allowed = {f.file for f in verify_tree(cfg).failures() if f.check == "python"}
    assert allowed == {"python/wrong/e.cpython-310-x86_64-linux-gnu.so"}


def test_required_symbols_demangled_patterns(tmp_path):
    cc(tmp_path / "libops.so", "namespace demo { namespace native { int add_kernel(int a, int b){return a+b;} } }",
       "-shared", lang="c++")
    from orchestrator.model.verify_rules import VerifyRules
    ok = VerifyRules(required_symbols={"libops.so": ["demo::native::add_kernel*"]})
    bad = VerifyRules(required_symbols={"libops.so": ["demo::native::mul_kernel*"], "libnone.so": ["x"]})
    assert verify_tree(_cfg(tmp_path, search=SearchConfig(), rules=ok)).ok
    causes = [f.cause for f in verify_tree(_cfg(tmp_path, search=SearchConfig(), rules=bad)).failures()]
    assert "libops.so exports no symbol matching 'demo::native::mul_kernel*'" in causes
    assert any(c.startswith("libnone.so (named in verify.required_symbols) is not in the prefix") for c in causes)


def test_fatbin_architectures_from_the_section(tmp_path, session_cuda_toolchain):
    nvcc = str(session_cuda_toolchain / "cuda" / "bin" / "nvcc")  # the locked toolkit's
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(float* a){a[threadIdx.x] += 1.f;}\n"
                  "extern \"C\" void launch(float* a){k<<<1, 32>>>(a);}\n")
    so = tmp_path / "libk.so"
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_80,code=sm_80",
                    "-gencode", "arch=compute_90,code=compute_90", "-o", str(so), str(cu)], check=True)
    assert {str(i) for i in fatbin_images(so, read_elf(so))} == {"sm_80", "compute_90"}
    from orchestrator.model.verify_rules import VerifyRules
    cfg = _cfg(tmp_path, search=SearchConfig(), rules=VerifyRules(cuda_architectures={"v": "90"}), variant="v")
    [f] = [f for f in verify_tree(cfg).failures() if f.check == "cuda"]
    assert "lacks sm_90" in f.cause and "has unexpected sm_80" in f.cause
    cfg.rules = VerifyRules(cuda_architectures={"v": "80-real;90-virtual"})
    assert verify_tree(cfg).checks["cuda"] == "pass"


# -- the real torch wheel (the locked toolchain's) --------------------------------------------

@pytest.fixture(scope="module")
def torch_dir(session_toolchain) -> Path:
    [d] = list((session_toolchain / "venv" / "lib").glob("python3.*/site-packages/torch"))
    return d


def test_torch_symbol_tables_match_nm(torch_dir):
    lib = torch_dir / "lib" / "libc10.so"
    info = read_elf(lib)
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    nm_names = {line.split()[-1].split("@")[0].encode() for line in nm.stdout.splitlines() if line.strip()}
    assert set(info.defined) == nm_names
    nm_u = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True, check=True)
    strong = {ln.split()[-1].split("@")[0].encode() for ln in nm_u.stdout.splitlines() if ln.split()[0] == "U"}
    assert {u.name for u in info.undefined} == strong
    check_fail = b"_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    assert symbol_abi(check_fail) == "1"
    assert object_abi(info) == "1"
    assert demangle(b"_ZN3c106detail14torchCheckFailEPKcS2_jRKSs") == \
        "c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::string const&)"


def test_torch_closure_verifies(torch_dir):
    roots = [p for p in sorted((torch_dir / "lib").glob("*.so*"))] + sorted(torch_dir.glob("_C.cpython-*.so"))
    interp = Interpreter(Path("/usr/bin/python3"), "3.11.2", ".cpython-311-x86_64-linux-gnu.so", "libpython3.11.so.1.0")
    cfg = VerifyConfig(artifact="torch", root=torch_dir, prefix=torch_dir, roots=roots, interpreter=interp,
                       toolchain_dirs=[torch_dir], torch=TorchFacts("2.13.0", torch_dir / "lib", True),
                       python_dirs=[torch_dir.parent])
    report = verify_tree(cfg)
    assert report.ok, report.render()
    assert report.files["lib/libc10.so"].cxx11_abi == "1"
    assert report.files["_C.cpython-311-x86_64-linux-gnu.so"].needed == ["libtorch_python.so", "libc.so.6"]
    assert report.max_versions["GLIBC"].startswith("2.")


@pytest.mark.parametrize("lib", ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"])
def test_gnu_hash_lookup_agrees_with_the_full_symbol_table(lib):
    """ld.so's way (bloom filter + buckets + chains + versym) finds exactly the decoded table."""
    fast = read_elf(Path(lib))
    assert fast.index is not None and fast._defined is None
    full = read_elf(Path(lib), full=True).defined
    assert len(full) > 1000
    for name, versions in full.items():
        assert set(fast.index.versions(name)) == set(versions), name
    for missing in (b"no_such_symbol", b"memcpy_x", b"_ZN3c106detail14torchCheckFail"):
        assert fast.index.versions(missing) is None
    # A caller that passed the bloom filter hands its hash over: the same answers (a fresh
    # index, so none comes from the memo), also for a name the buckets do not hold.
    again = read_elf(Path(lib))
    for name in [*list(full)[::50], b"no_such_symbol"]:
        assert again.index.versions(name, gnu_hash(name)) == fast.index.versions(name), name
    again.close()
    assert fast.defines(b"memcpy", "GLIBC_2.14") if "libc.so" in lib else fast.defines(b"_ZdlPv", "GLIBCXX_3.4")
    fast.close()


def test_symbol_lookups_split_across_a_fork_give_the_same_report(torch_dir, tmp_path, monkeypatch):
    """torch's closure without libc10.so: thousands of c10 names missing in several files.
    The lookups split between this process and a forked child find exactly what one process
    finds, in the same order (and the split did run)."""
    from orchestrator.verify.checks import linkage

    art = tmp_path / "torch"
    (art / "lib").mkdir(parents=True)
    roots = []
    for p in sorted((torch_dir / "lib").glob("*.so*")) + sorted(torch_dir.glob("_C.cpython-*.so")):
        if p.name == "libc10.so":
            continue
        dest = art / p.relative_to(torch_dir)
        os.link(p, dest) if p.stat().st_dev == art.stat().st_dev else shutil.copy(p, dest)
        roots.append(dest)
    interp = Interpreter(Path("/usr/bin/python3"), "3.11.2", ".cpython-311-x86_64-linux-gnu.so",
                         "libpython3.11.so.1.0")

    def report(split_min: int):
        monkeypatch.setattr(linkage, "SPLIT_MIN_NAMES", split_min)
        cfg = VerifyConfig(artifact="torch", root=art, prefix=art, roots=roots, interpreter=interp,
                           toolchain_dirs=[art], torch=TorchFacts("2.13.0", art / "lib", True),
                           python_dirs=[art.parent])
        return verify_tree(cfg)

    splits = []
    real_both = linkage.both
    monkeypatch.setattr(linkage, "both", lambda a, b: splits.append(1) or real_both(a, b))
    monkeypatch.setattr(linkage, "cores", lambda: 2)
    one = report(10**9)
    assert not splits
    two = report(0)
    assert splits == [1]
    symbols = [f for f in one.findings if f.check == "symbols"]
    assert len({f.file for f in symbols}) >= 2 and len(symbols) > 50
    assert [dataclasses.asdict(f) for f in two.findings] == [dataclasses.asdict(f) for f in one.findings]


def test_fork_split_runs_the_second_half_in_a_child_and_falls_back_when_it_dies():
    from orchestrator.verify.fork_split import both

    parent = os.getpid()
    assert both(lambda: os.getpid(), lambda: os.getpid()) != (parent, parent)
    assert both(lambda: "mine", lambda: ["theirs", {"n": 1}]) == ("mine", ["theirs", {"n": 1}])

    def dies_in_a_child() -> str:
        if os.getpid() != parent:
            os.kill(os.getpid(), 9)
        return "computed here"
    assert both(lambda: 1, dies_in_a_child) == (1, "computed here")

    def raises_in_a_child() -> int:
        if os.getpid() != parent:
            raise RuntimeError("child")
        return 2
    assert both(lambda: 1, raises_in_a_child) == (1, 2)
