"""ccache's prefix command with distcc (CCACHE_PREFIX): one compile-cache miss compiled on a
distcc host with the bytes of a local compile, `-g` included.

Classic distcc preprocesses here and compiles the fully expanded `.ii` there; GCC then takes
token columns from the reformatted `.ii` instead of the source, so DWARF column rows and
`DW_AT_decl_column` differ from a local compile. This program instead has distcc preprocess
with `-fdirectives-only` (includes and conditionals resolved here, macros expanded there, from
the original text), compiles to assembly on the host (`-S`), drops the one trace of that flag
(GCC lists it in `DW_AT_producer`) and assembles here with the very `as` command the local
compile runs. The object is the local one, byte for byte (tests/test_distcc.py).

A compile it does not know how to split is left as it is: to distcc without `-g` (classic
distcc is byte-identical there), compiled here with `-g`. A split compile that fails is
compiled here again, so a real error reads as a local one. Standard library only: run as
`python -I distcc_compile.py <distcc> <compiler> <args...>` by the launcher script that
`launcher.with_distcc` writes.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

DIRECTIVES_ONLY = "-fdirectives-only"
GCC_NAME = re.compile(r"^(?:[\w.+-]+-)?(?:gcc|g\+\+|cc|c\+\+)(?:-\d+(?:\.\d+)*)?$")
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".C", ".cp", ".CPP")
# Flags this split cannot keep byte-identical: -g3 (.debug_macro records the macros' origin),
# switches recorded in their own section, incompatible with -fdirectives-only, or extra outputs.
UNSPLITTABLE = re.compile(
    r"^(?:-g(?:gdb)?3|-frecord-gcc-switches|-Wunused-macros|-traditional(?:-cpp)?|"
    r"-save-temps.*|-fmodules-ts|-fmodule-header.*|-gsplit-dwarf|-flto.*|-E|-S|-M|-MM|-x|"
    r"-fdump-.*|-fcallgraph-info.*|-fstack-usage|-Wa,.*|-Xassembler|-specs=.*|-fdirectives-only)$")
ASM_STRING = re.compile(r'^\t\.(ascii|string)\t"(.*)"$')
PRODUCER_SWITCH = re.compile(r" -fdirectives-only(?= |$)")


def source_of(args: list[str]) -> str | None:
    """The one C/C++ source of a `-c` compile with `-o`, else None."""
    sources = [a for a in args if not a.startswith("-") and a.endswith(SOURCE_SUFFIXES)]
    if "-c" not in args or "-o" not in args or len(sources) != 1:
        return None
    return sources[0]


def splittable(compiler: str, args: list[str]) -> bool:
    return bool(GCC_NAME.match(os.path.basename(compiler))) and source_of(args) is not None \
        and not any(UNSPLITTABLE.match(a) for a in args)


def has_debug_info(args: list[str]) -> bool:
    """Whether the last -g flag asks for debug info (-g0 turns it off)."""
    levels = [a for a in args if re.match(r"^-g(?:gdb|dwarf)?\d?$|^-gdwarf-\d$", a)]
    return bool(levels) and levels[-1] not in ("-g0", "-ggdb0")


def remote_args(args: list[str], output: str, asm: str) -> list[str]:
    """The compile as distcc gets it: -S into `asm`, the dependency file and its target
    named as they would be for `output`, preprocessed with -fdirectives-only."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "-o":
            out += ["-o", asm]
            i += 2
            continue
        out.append("-S" if a == "-c" else a)
        i += 1
    if any(a in ("-MD", "-MMD") for a in args):
        if "-MF" not in args and not any(a.startswith("-MF") for a in args):
            out += ["-MF", os.path.splitext(output)[0] + ".d"]
        if not any(a.startswith(("-MT", "-MQ")) for a in args):
            out += ["-MT", output]
    return [*out, DIRECTIVES_ONLY]


def assembler_command(compiler: str, args: list[str], asm: str) -> list[str] | None:
    """The `as` command the local compile runs (from `<compiler> -###`), reading `asm`."""
    probe = subprocess.run([compiler, "-###", *(a for a in args if a != "-pipe")],
                           capture_output=True, text=True)
    commands = [shlex.split(line) for line in probe.stderr.splitlines() if line.startswith(' "')]
    if probe.returncode != 0 or len(commands) != 2 or "-o" not in commands[0]:
        return None
    compiled, assemble = commands
    temp = compiled[compiled.index("-o") + 1]
    if assemble.count(temp) != 1:
        return None
    return [asm if a == temp else a for a in assemble]


def drop_producer_switch(text: str) -> str | None:
    """The assembly with -fdirectives-only removed from DW_AT_producer: the `.ascii`/`.string`
    run that spells "GNU ..." is joined and rewritten as one `.string` (same bytes as GCC's
    chunks). None when there is no such run to fix."""
    lines = text.split("\n")
    for start, line in enumerate(lines):
        m = ASM_STRING.match(line)
        if not m or not m[2].startswith("GNU "):
            continue
        end, parts = start, []
        while True:
            m = ASM_STRING.match(lines[end])
            if m is None:
                break
            parts.append(m[2])
            if m[1] == "string":
                break
            end += 1
        if m is None:
            continue
        joined = "".join(parts)
        fixed, n = PRODUCER_SWITCH.subn("", joined, count=1)
        if n == 1:
            return "\n".join([*lines[:start], f'\t.string\t"{fixed}"', *lines[end + 1:]])
    return None


def compile_split(distcc: str, compiler: str, args: list[str]) -> bool:
    """The split compile; False when it did not produce the object (the caller compiles here)."""
    output = args[args.index("-o") + 1]
    asm = f"{output}.orch-distcc-{os.getpid()}.s"
    try:
        remote = subprocess.run([distcc, compiler, *remote_args(args, output, asm)],
                                capture_output=True)
        if remote.returncode != 0:
            return False
        with open(asm, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
        if has_debug_info(args):
            fixed = drop_producer_switch(text)
            if fixed is None:
                return False
            with open(asm, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(fixed)
        assemble = assembler_command(compiler, args, asm)
        if assemble is None or subprocess.run(assemble).returncode != 0:
            return False
        sys.stderr.buffer.write(remote.stderr)  # the compile's warnings
        return True
    finally:
        try:
            os.unlink(asm)
        except FileNotFoundError:
            pass


def main(argv: list[str]) -> int:
    distcc, compiler, *args = argv
    if splittable(compiler, args):
        if compile_split(distcc, compiler, args):
            return 0
        os.execv(compiler, [compiler, *args])
    if has_debug_info(args):
        os.execv(compiler, [compiler, *args])  # classic distcc would change DWARF columns
    os.execv(distcc, [distcc, compiler, *args])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
