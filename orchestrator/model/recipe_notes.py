"""What each recipe key means, with an example: the hand-written half of docs/recipes.md
(model/recipe_reference.py adds the type and default from the models). A key added to the
models needs its line here (tests/test_recipe_reference.py)."""
from __future__ import annotations

ARCHIVE = "source[archive]."
OVERLAY = "source[archive].overlays[]."

NOTES: dict[str, tuple[str, str]] = {
    "name": ("The recipe's name: the file name `recipes/<name>.toml` (set from it when absent).",
             'name = "myext"'),
    "description": ("One line for people (`doit status`, `doit help`); not part of the id.",
                    'description = "CUDA kernels for X"'),
    "lock": ("The lock (`locks/<lock>.lock.json`) whose toolchain builds it: interpreter, "
             "compilers, pinned wheels such as torch.", 'lock = "pytorch"'),
    "source": ("What is built: `kind` picks one of the tables below; `source=PATH` on the command "
               "line builds a checkout instead (docs/sources.md).", 'kind = "archive"'),
    "source[path].kind": ("A directory on disk.", 'kind = "path"'),
    "source[path].path": ("The directory, relative to recipes/ or absolute.", 'path = "myext"'),
    "source[path].subdir": ("Build this subdirectory of it (the identity still covers the tree).",
                            'subdir = "cpp"'),
    "source[path].patches": ("Patches (relative to recipes/) applied in order to a copy under "
                             "the store; the directory itself is never changed.",
                             'patches = ["myext/fix.patch"]'),
    ARCHIVE + "kind": ("A pinned tarball (an sdist, a release archive).", 'kind = "archive"'),
    ARCHIVE + "file": ("The archive's file name, looked up in $ORCH_ARCHIVES, "
                       "~/.cache/orchestrator/archives and <store>/archives; for an sdist, the "
                       "sdist's own name.", 'file = "myext-1.2.tar.gz"'),
    ARCHIVE + "sha256": ("The archive's sha256 (the pin: a different file is refused).",
                         'sha256 = "9f2c…"'),
    ARCHIVE + "strip_components": ("Leading path components dropped when unpacking.",
                                   "strip_components = 1"),
    ARCHIVE + "fetch": ("Where to get the archive when it is not found by name: one of "
                        "`url`, `pypi`, `apt_source`.", 'fetch = { pypi = "myext==1.2" }'),
    ARCHIVE + "fetch.url": ("Downloaded (https or file://), then checked against sha256.",
                            'fetch = { url = "https://example.org/myext-1.2.tar.gz" }'),
    ARCHIVE + "fetch.apt_source": ("Debian's source archive, `apt-get source --download-only`.",
                                   'fetch = { apt_source = "pytorch=2.6.0+dfsg-7" }'),
    ARCHIVE + "fetch.pypi": ("The sdist of NAME==VERSION from the package index, through pip's "
                             "finder; nothing of the sdist runs (docs/sources.md).",
                             'fetch = { pypi = "myext==1.2" }'),
    ARCHIVE + "overlays": ("Other pinned tarballs unpacked at a path inside the tree (an emptied "
                           "submodule), in order.", '[[source.overlays]]'),
    OVERLAY + "file": ("The overlay archive's file name (looked up as `file`).",
                       'file = "pocketfft-1.0.tar.gz"'),
    OVERLAY + "sha256": ("Its sha256.", 'sha256 = "ab12…"'),
    OVERLAY + "strip_components": ("Leading components dropped when unpacking it.",
                                   "strip_components = 1"),
    OVERLAY + "fetch": ("Where to get it, as `source.fetch`.",
                        'fetch = { url = "https://example.org/pocketfft-1.0.tar.gz" }'),
    OVERLAY + "fetch.url": ("As `source.fetch.url`.", 'fetch = { url = "file:///srv/x.tar.gz" }'),
    OVERLAY + "fetch.apt_source": ("As `source.fetch.apt_source`.",
                                   'fetch = { apt_source = "pocketfft=0.0~git-1" }'),
    OVERLAY + "fetch.pypi": ("As `source.fetch.pypi`.", 'fetch = { pypi = "extra==1.0" }'),
    OVERLAY + "path": ("Where in the tree it goes (an empty or missing directory).",
                       'path = "third_party/pocketfft"'),
    OVERLAY + "archive_dir": ("Only this directory of the overlay archive (strip_components "
                              "unused).", 'archive_dir = "debian/pocketfft-9d3a…"'),
    ARCHIVE + "patches": ("Patches applied in order after unpacking (part of the identity).",
                          'patches = ["myext/0001-fix.patch"]'),
    ARCHIVE + "subdir": ("Build this subdirectory of the unpacked tree.", 'subdir = "cpp"'),
    ARCHIVE + "patch_checkouts": ("With `source=PATH`, apply the overlays and patches to a copy "
                                  "of the checkout too.", "patch_checkouts = true"),
    "source[git].kind": ("A git repository at a pinned revision.", 'kind = "git"'),
    "source[git].url": ("The repository: https, ssh, git, file:// or a path.",
                        'url = "https://github.com/example/myext.git"'),
    "source[git].rev": ("A branch, tag or commit (the lock-free pin is a commit).",
                        'rev = "v1.2.0"'),
    "source[git].submodules": ("Check out submodules recursively at the commits the tree records.",
                               "submodules = true"),
    "source[git].subdir": ("Build this subdirectory.", 'subdir = "cpp"'),
    "source[git].patches": ("Patches applied in order to the checkout's copy.",
                            'patches = ["myext/fix.patch"]'),
    "build": ("How it is built.", 'system = "setuptools"'),
    "build.system": ("The builder: `cmake` (CMake + Ninja), `setuptools` (setup.py, "
                     "torch.utils.cpp_extension), `pep517` (scikit-build-core, or setuptools), "
                     "`pytorch` (a PyTorch tree).", 'system = "pep517"'),
    "build.defines": ("`-D` defines for every variant: CMake cache entries (cmake, pep517, "
                      "pytorch) or preprocessor defines on setuptools' compile lines; a variant's "
                      "win.", 'defines = { BUILD_TESTS = false }'),
    "build.env": ("Environment variables of the build for every variant, e.g. a setup.py's own "
                  "switches; a variant's win. Part of the id.",
                  'env = { WITH_SYMBOLS = "1" }'),
    "build.cflags": ("Compiler flags for every variant, after the build type's (so a later -O "
                     "wins on the compile line).", 'cflags = ["-fno-omit-frame-pointer"]'),
    "build.targets": ("Build only these targets (cmake, pytorch); `targets=` on the command "
                      "line overrides it.", 'targets = ["c10"]'),
    "build.uses": ("Lock entries the build depends on (part of the id); each build requirement "
                   "of an sdist must be here. Default: the builder's set; required for pep517.",
                   'uses = ["python", "compiler:cc", "compiler:cxx", "pypi:setuptools", '
                   '"pypi:torch"]'),
    "build.linker": ("The linker gcc runs, cmake and pytorch builds only: unset is gcc's own "
                     "(GNU ld); `\"mold\"` is the lock's `deb:mold` (add `\"mold\"` to the "
                     "lock's `[deb] packages`, run `doit lock`, and name `\"deb:mold\"` in "
                     "`build.uses`), reached through gcc's `-B`. Part of the id; unset leaves "
                     "older recipes' ids as they were.",
                     'linker = "mold"'),
    "build.pytorch": ("Options of the pytorch builder (environment of PyTorch's build).",
                      "[build.pytorch]"),
    "build.pytorch.cuda": ("USE_CUDA; needs cuda_arch_list.", "cuda = true"),
    "build.pytorch.cuda_arch_list": ("TORCH_CUDA_ARCH_LIST.", 'cuda_arch_list = "8.0;9.0+PTX"'),
    "build.pytorch.distributed": ("USE_DISTRIBUTED.", "distributed = true"),
    "build.pytorch.build_test": ("BUILD_TEST (PyTorch's C++ tests).", "build_test = true"),
    "build.pytorch.system_libs": ("USE_SYSTEM_LIBS: the distribution's cpuinfo, sleef, onnx, ...",
                                  "system_libs = true"),
    "build.pytorch.disable": ("Backends turned off, each USE_<NAME>=0.",
                              'disable = ["MKLDNN", "FBGEMM"]'),
    "build.pytorch.version": ("torch.__version__ (TORCH_BUILD_VERSION); default: the tree's "
                              "version.txt (+git<sha> for checkouts).", 'version = "2.6.0"'),
    "build.pytorch.python_extension": ("Build torch._C in full builds.",
                                       "python_extension = false"),
    "variants": ("The named variants (`variant=` on the command line); relwithdebinfo, "
                 "release and debug are the usual ones.", "[variants.relwithdebinfo]"),
    "variants.<name>.build_type": ("CMake's build type; for setuptools the same -O/-g/-DNDEBUG "
                                   "on the compile line.", 'build_type = "RelWithDebInfo"'),
    "variants.<name>.defines": ("Defines of this variant (after build.defines).",
                                'defines = { USE_FOO = true }'),
    "variants.<name>.env": ("Environment of this variant's build (after build.env).",
                            'env = { WITH_SYMBOLS = "1", DEBUG = "1" }'),
    "variants.<name>.cflags": ("Flags of this variant, after build.cflags: a setup.py's own "
                               "`-O3` or `-s` in extra_compile_args comes later still (see the "
                               "worked example).", 'cflags = ["-gdwarf-4"]'),
    "variants.<name>.split_dwarf": ("Split DWARF (cmake and pytorch recipes, RelWithDebInfo or "
                                    "Debug): each object's debug info goes to a .dwo file, so links "
                                    "write only skeletons; the artifact carries the .dwo files in "
                                    "`.dwo/` beside each library, where lldb-14 and gdb read them "
                                    "(docs/debugging.md).", "split_dwarf = true"),
    "outputs": ("Where the installed prefix keeps what the workspace puts on its paths.",
                "[outputs]"),
    "outputs.lib": ("Library directories of the prefix (LD_LIBRARY_PATH of a switch is never "
                    "set: RUNPATH finds them; these are for tools).", 'lib = ["lib", "lib64"]'),
    "outputs.bin": ("Directories put on PATH by `.orch/env.sh`.", 'bin = ["bin"]'),
    "outputs.python": ("Directories put on PYTHONPATH by `.orch/env.sh` (a wheel's files land in "
                       "`python`).", 'python = ["python"]'),
    "verify": ("What `doit verify` checks beyond the defaults (docs/verify.md).", "[verify]"),
    "verify.allowed_system_libs": ("Sonames (globs) that may resolve to system directories.",
                                   'allowed_system_libs = ["libgomp.so.1"]'),
    "verify.required_symbols": ("Library (relative to the prefix) → demangled symbol patterns it "
                                "must export.", 'required_symbols = { "lib/libx.so" = ["x::run*"] }'),
    "verify.host": ("What loads the artifact: `none`, `python` (the locked interpreter) or `torch` "
                    "(after `import torch`: torch's libraries are in the process).",
                    'host = "torch"'),
    "verify.libpython": ("Extension modules: `forbid` libpython, or allow the `interpreter`'s.",
                         'libpython = "interpreter"'),
    "verify.max_versions": ("Highest symbol versions the artifact may need.",
                            'max_versions = { GLIBC = "2.28" }'),
    "verify.own_libs": ("Globs (relative to the prefix) of the project's libraries whose debug "
                        "info is checked.", 'own_libs = ["python/**/*.so"]'),
    "verify.release_debug_allowed": ("Globs allowed to carry debug info in release variants.",
                                     'release_debug_allowed = ["lib/libthird.so"]'),
    "verify.opt_level": ("Variant → the -O level DW_AT_producer must show (the last -O of the "
                         "compile line: a setup.py's forced -O3 shows here).",
                         'opt_level = { relwithdebinfo = "3" }'),
    "verify.cmake_cache": ("CMakeCache.txt entries every variant must have.",
                           'cmake_cache = { BUILD_SHARED_LIBS = "ON" }'),
    "verify.cuda_architectures": ("Variant → CUDA architectures in CMake syntax.",
                                  'cuda_architectures = { release = "90-real" }'),
    "verify.skip": ("Checks not run for this recipe (recorded as skipped).",
                    'skip = ["portability"]'),
    "verify.ignore": ("Files whose findings are set aside, each with its reason, shown in the "
                      "report (docs/verify.md).",
                      'ignore = [{ path = "python/x/lib/*", reason = "stray install copies" }]'),
    "verify.ignore[].path": ("A glob relative to the prefix (`*` crosses `/`).",
                             'path = "python/x/lib/*"'),
    "verify.ignore[].reason": ("Why (required), printed with the set-aside findings.",
                               'reason = "copies its install rules add; never loaded"'),
    "runtime": ("What the artifact needs at import time besides the toolchain's packages: "
                "pinned by `doit lock` in `locks/runtime/<recipe>.lock.json` (by sha256, held to "
                "the lock's own pins), installed into the store entry's `runtime/site-packages`, "
                "which `.orch/env.sh`, `doit run` and the IDE files put on PYTHONPATH after the "
                "prefix's. The pins are part of the id.", "[runtime]"),
    "runtime.requires": ("Requirements (PEP 508: a name, version specifiers, markers; no URL) "
                         "of wheels from the package index; what the recipe's lock already "
                         "installs (torch and its dependencies) is not pinned again. A change "
                         "needs `doit lock` (a plan says so).",
                         'requires = ["numpy>=1.26", "diskcache==5.6.3"]'),
}
