"""The verify report: plain dataclasses (stored as meta/verify.json) and the rich table.

Dataclasses, not pydantic models: the verify engine is imported by processes that need
nothing else (a verify of torch's 12 libraries spent more time importing pydantic than
reading them); `from_json` reads a report back (the verdict cache)."""
from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass, field
from typing import Any, Literal

CHECKS = ("resolution", "symbols", "cxx_abi", "python", "debug_info", "portability",
          "required_symbols", "cuda")
Check = Literal["resolution", "symbols", "cxx_abi", "python", "debug_info", "portability",
                "required_symbols", "cuda"]
Severity = Literal["fail", "warn", "info"]
Abi = Literal["0", "1", "mixed"]  # _GLIBCXX_USE_CXX11_ABI as judged from the symbols
Verdict = Literal["pass", "fail", "skipped"]
_ORDER = {"fail": 0, "warn": 1, "info": 2}


@dataclass
class Finding:
    """One result of one check for one file: what, where, why."""
    check: Check
    severity: Severity
    file: str
    cause: str
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.check not in CHECKS or self.severity not in _ORDER:
            raise ValueError(f"finding of unknown check/severity {self.check!r}/{self.severity!r}")


@dataclass
class FileFacts:
    """Portability and build facts about one ELF file of the artifact."""
    needed: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    max_versions: dict[str, str] = field(default_factory=dict)
    debug_info: bool = False
    producers: list[str] = field(default_factory=list)
    cuda: list[str] = field(default_factory=list)
    cxx11_abi: Abi | None = None


@dataclass
class VerifyReport:
    """Everything `doit verify` found for one artifact; `ok` is False on any failure."""
    artifact: str
    root: str
    ok: bool
    checks: dict[str, Verdict]
    findings: list[Finding]
    files: dict[str, FileFacts]
    forced: bool = False
    max_versions: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)  # files whose recorded verdict was used
    ignored: list[Finding] = field(default_factory=list)  # set aside by [verify] ignore
    schema_version: Literal[1] = 1

    @staticmethod
    def from_json(data: dict[str, Any]) -> VerifyReport:
        """The report `to_json` wrote (KeyError/TypeError/ValueError when it is not one)."""
        known = {f.name for f in dataclasses.fields(VerifyReport)}
        if data.get("schema_version") != 1 or set(data) - known:
            raise ValueError("not a verify report of schema 1")
        return VerifyReport(**{**data, "findings": [Finding(**f) for f in data["findings"]],
                               "ignored": [Finding(**f) for f in data.get("ignored", [])],
                               "files": {k: FileFacts(**v) for k, v in data["files"].items()}})

    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "fail"]

    def summary(self) -> dict[str, object]:
        """What the manifest records: verdicts, failure count and the first causes."""
        fails = self.failures()
        return {"ok": self.ok, "checks": dict(self.checks), "failures": len(fails),
                "first_failures": [f"{f.file}: {f.cause}" for f in fails[:5]],
                "max_versions": dict(self.max_versions), "forced": self.forced}

    def to_json(self) -> dict[str, Any]:
        """The full report as JSON-ready data (meta/verify.json)."""
        return dataclasses.asdict(self)

    def render(self, width: int | None = None, full_report: str | None = None) -> str:
        """The summary for people (see render_table), as wide as the terminal by default;
        `full_report` says where every finding is."""
        if width is None:
            from orchestrator.console import console
            width = console.width
        return render_table(self, width=width, full_report=full_report)

    def headline(self) -> str:
        """One line: which checks failed and the first cause."""
        fails = self.failures()
        if not fails:
            return f"verify {self.artifact}: all checks passed ({len(self.files)} ELF files)"
        failed = sorted({f.check for f in fails}, key=CHECKS.index)
        return (f"verify {self.artifact}: {len(fails)} failure(s) in {', '.join(failed)}; "
                f"first: {fails[0].file}: {fails[0].cause}")


def uses_cuda(report: VerifyReport) -> bool:
    """Whether anything in the artifact (or a finding) is about CUDA."""
    return any(f.cuda for f in report.files.values()) or any(
        f.check == "cuda" for f in report.findings)


FIRST_FINDINGS = 10  # the summary lists this many findings (failures first)


def render_table(report: VerifyReport, width: int = 160, color: bool = False,
                 full_report: str | None = None, first: int = FIRST_FINDINGS) -> str:
    """The summary as rich tables, rendered to text: each check's verdict with its counts of
    failures, warnings, notes and set-aside findings; the first `first` findings (failures
    first); how many more and where they all are (`full_report`); the [verify] ignore rules
    that set findings aside, with their reasons."""
    from rich.console import Console
    from rich.table import Table

    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=color, color_system="auto" if color else None)
    status = "[green]PASS[/]" if report.ok else "[red]FAIL[/]"
    # the title is its own line: as a table title it wraps at the (narrow) table's width
    console.print(f"verify {report.artifact} {status}", soft_wrap=True)
    verdicts = Table(show_lines=False)
    for column in ("check", "result", "fail", "warn", "info", "ignored"):
        verdicts.add_column(column, justify="left" if column in ("check", "result") else "right")
    for check in CHECKS:
        v = report.checks.get(check, "skipped")
        if check == "cuda" and v != "fail" and not uses_cuda(report):
            continue  # a CPU-only artifact: no CUDA row
        colour = {"pass": "green", "fail": "red", "skipped": "yellow"}[v]
        counts = [str(sum(f.check == check and f.severity == s for f in report.findings) or "")
                  for s in ("fail", "warn", "info")]
        verdicts.add_row(check, f"[{colour}]{v}[/]", *counts,
                         str(sum(f.check == check for f in report.ignored) or ""))
    console.print(verdicts)
    findings = sorted(report.findings, key=lambda f: (_ORDER[f.severity], CHECKS.index(f.check), f.file))
    if findings:
        t = Table(show_lines=False)
        t.add_column("", no_wrap=True)
        t.add_column("check", no_wrap=True)
        t.add_column("file", overflow="fold")
        t.add_column("cause", overflow="fold")
        for f in findings[:first]:
            mark = {"fail": "[red]FAIL[/]", "warn": "[yellow]warn[/]", "info": "[dim]info[/]"}[f.severity]
            t.add_row(mark, f.check, f.file, f.cause)
        console.print(t)
        if len(findings) > first:
            where = f": {full_report}" if full_report else ""
            console.print(f"… and {len(findings) - first} more finding(s) of {len(findings)}; "
                          f"all of them{where}", markup=False, soft_wrap=True)
    reasons: dict[str, set[str]] = {}
    for f in report.ignored:
        reasons.setdefault(str(f.detail.get("ignored")), set()).add(f.file)
    for why, files in sorted(reasons.items()):
        console.print(f"set aside by [verify] ignore ({why}): "
                      f"{sum(str(f.detail.get('ignored')) == why for f in report.ignored)} "
                      f"finding(s) in {len(files)} file(s), e.g. {min(files)}",
                      markup=False, soft_wrap=True)
    if report.max_versions:
        console.print("needs at most: " + ", ".join(f"{k}_{v}" for k, v in sorted(report.max_versions.items())))
    if report.forced and not report.ok:
        console.print("[yellow]committed anyway (commit_failed=1); the failure is recorded in the manifest[/]")
    return out.getvalue()
