"""The Python check: extension modules' libpython links and file-name suffix."""
from __future__ import annotations

import re

from orchestrator.verify.checks.state import State
from orchestrator.verify.elf import ElfInfo
from orchestrator.verify.inputs import VerifyConfig
from orchestrator.verify.report import Finding
from orchestrator.verify.resolve import realpath, within

LIBPYTHON_RE = re.compile(r"^libpython\d+\.\d+[a-z]*\.so(\.\d+)*$")


def is_extension(rel: str, obj: ElfInfo, cfg: VerifyConfig) -> bool:
    """A CPython extension module: under a python dir with PyInit_, or a cpython/abi3 suffix."""
    name = obj.path.name
    if ".cpython-" in name or name.endswith(".abi3.so"):
        return True
    in_python = any(within(realpath(str(obj.path)), realpath(str(d))) for d in cfg.python_dirs)
    return in_python and obj.defines(b"PyInit_" + name.split(".")[0].encode(), None)


def check_python(st: State) -> list[Finding]:
    """Extension modules link no libpython (unless policy allows the locked one's) and carry
    the locked interpreter's suffix."""
    out: list[Finding] = []
    interp = st.config.interpreter
    policy = st.config.rules.libpython
    for rel in sorted(st.extensions):
        obj = st.objects[rel]
        for soname in obj.needed:
            if not LIBPYTHON_RE.match(soname):
                continue
            if policy == "interpreter" and interp and soname == interp.libpython_soname:
                continue
            why = ("the recipe's policy (verify.libpython = \"forbid\") forbids any libpython"
                   if policy == "forbid" else
                   f"only the locked interpreter's {interp.libpython_soname if interp else '(none)'} is allowed")
            out.append(Finding(check="python", severity="fail", file=rel,
                               cause=f"extension module links {soname}; {why}",
                               detail={"soname": soname, "policy": policy}))
        if interp is not None:
            name = obj.path.name
            if not (name.endswith(interp.ext_suffix) or name.endswith(".abi3.so")):
                out.append(Finding(check="python", severity="fail", file=rel,
                                   cause=f"extension module suffix of {name} does not match the locked "
                                         f"Python {interp.version} ({interp.ext_suffix})",
                                   detail={"expected_suffix": interp.ext_suffix}))
    return out
