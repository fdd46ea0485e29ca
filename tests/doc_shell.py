"""Run documented command lines as written, in order, in one bash (sourced state carries), and
say which line failed: shared by the README and docs/debugging.md tests."""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path


def strip_comment(line: str) -> str:
    """The docs align comments after two or more spaces: `cmd args      # what it does`."""
    return re.split(r"\s{2,}# ", line, maxsplit=1)[0].rstrip()


@dataclass(frozen=True)
class DocRun:
    returncode: int
    stdout: str
    output: str            # stdout + stderr
    failed_line: str       # the line running when the shell stopped ("set-up": before any)
    sections: dict[str, str]  # each documented line -> its stdout

    def output_of(self, prefix: str, nth: int = 0) -> str:
        return [text for line, text in self.sections.items() if line.startswith(prefix)][nth]


def run_lines(project: Path, setup: list[str], lines: list[str], env: dict[str, str],
              timeout: float) -> DocRun:
    """`setup` then `lines` in one `bash -c` under `set -euo pipefail`, each line announced."""
    script = ["set -euo pipefail", *setup]
    for i, line in enumerate(lines):
        script += [f"echo '>>> line {i}'", line]
    res = subprocess.run(["bash", "-c", "\n".join(script)], cwd=project, env=env,
                         capture_output=True, text=True, timeout=timeout)
    ran = re.findall(r">>> line (\d+)", res.stdout)
    return DocRun(res.returncode, res.stdout, res.stdout + res.stderr,
                  lines[int(ran[-1])] if ran else "set-up",
                  dict(zip(lines, re.split(r">>> line \d+\n", res.stdout)[1:], strict=False)))
