"""All benchmarks (issue 12) in one run, printed as ONE table: a row per measure, its baseline
measured in the same run, and the ratio. Not a test: nothing here asserts a time.

Each script runs as its own process and ends with one JSON line, read here (time_to_breakpoint
prints text, parsed here). A row whose script cannot run says why instead of a number.

    .venv/bin/python benchmarks/all.py [--quick] [--repeat 3] [--big-gb 1] [--torch DIR]
        [--pytorch-store DIR [--pytorch-store-targets c10]]
        [--pytorch-checkout DIR --pytorch-checkout-store DIR [--pytorch-targets c10]]

--quick skips the slow ones (time_to_breakpoint, cache_pull, cache_pull_oci (at least 5 rounds:
its ratios are medians of per-round ratios, spread beside them), the c10 edit loop: its first run
builds c10, a few minutes; --c10-work DIR keeps that build for the next run).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rich.console import Console
from rich.table import Table
from verify_torch import find_torch  # noqa: E402  (one lookup of the toolchain's torch)

from orchestrator.bench.noise import busy  # the one reading of load and pressure (doit bench)

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
Row = tuple[str, str, str, str, str]  # measure, value, baseline, ratio, goal


SETTLED: dict[str, float] = {}  # script -> seconds waited for a quiet machine before it


def settle(limit_s: float = 120) -> float:
    """Flush what earlier scripts wrote, then wait (at most limit_s) until neither the disk nor
    the CPUs are contended (PSI avg10: io under 5 %, cpu under 10 %): a script's scratch being
    deleted (GBs, on a disk mounted with discard) kept the next script's disk busy for a
    minute and more. Returns the seconds waited."""
    t0 = time.monotonic()
    os.sync()
    while time.monotonic() - t0 < limit_s and busy():
        time.sleep(2)
    return time.monotonic() - t0


def run_script(name: str, *args: str, timeout: float = 3600) -> tuple[str | None, str]:
    """(stdout, "") of benchmarks/<name> run to its end on a settled machine, or (None, why it
    failed)."""
    SETTLED[name] = settle()
    try:
        proc = subprocess.run([sys.executable, str(HERE / name), *args], cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"{name}: no result after {timeout:.0f} s"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        return None, f"{name} exit {proc.returncode}: {tail[0][:100]}"
    return proc.stdout, ""


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def row(measure: str, value: float, base: float, goal: str, unit: str = "s",
        extra: str = "") -> Row:
    return (measure, f"{value:.3f} {unit}", f"{base:.3f} {unit}",
            f"{value / base:.2f}{extra}" if base else "-", goal)


def skipped(measure: str, why: str) -> Row:
    return (measure, "skipped", "-", "-", why)


def spine_rows(args: argparse.Namespace) -> list[Row]:
    out, why = run_script("spine.py", "--big-gb", str(args.big_gb), "--repeat", str(args.repeat))
    if out is None:
        return [skipped("spine (no-op build, switch, edit one .cpp)", why)]
    d = last_json(out)
    ln, py = d["ln_s"], d["python_doit_s"]  # sampled by spine, interleaved with its measures
    extra = d["edit_doit_s"] - d["edit_ninja_s"]
    return [
        row("no-op `doit build` vs `doit list`", d["noop_build_s"], d["list_s"], "build <= 0.3 s"),
        row("no-op `doit build` vs python + import doit", d["noop_build_s"], py, "build <= 0.3 s"),
        row("`doit switch` (small) vs `ln -sfn` + rename", d["switch_small_s"], ln, "switch <= 0.2 s"),
        row(f"`doit switch`: {args.big_gb:g} GB artifact vs small", d["switch_big_s"],
            d["switch_small_s"], "ratio ~ 1"),
        row("edit 1 .cpp: `doit build` vs `ninja` alone", d["edit_doit_s"], d["edit_ninja_s"],
            "+ <= 0.3 s", extra=f" (+{extra:.2f} s)"),
        row("edit 1 .cpp: MB the commit wrote vs artifact MB", d["commit_new_mb"], d["artifact_mb"],
            "only changed files", unit="MB"),
    ]


def c10_edit_rows(args: argparse.Namespace) -> list[Row]:
    """pytorch_c10_edit.py: edit one .cpp of c10 in a git checkout of the pinned tree."""
    measure = "edit 1 .cpp of c10 (PyTorch checkout): `doit build` vs `ninja` alone"
    work = ["--work", args.c10_work] if args.c10_work else []
    out, why = run_script("pytorch_c10_edit.py", "--rounds", str(max(args.repeat, 5)), *work)
    if out is None:
        return [skipped(measure, why)]
    d = last_json(out)
    extra = d["edit_doit_s"] - d["edit_ninja_s"]
    return [row(measure, d["edit_doit_s"], d["edit_ninja_s"], "+ <= 0.3 s",
                extra=f" (+{extra:.2f} s)")]


def startup_rows(args: argparse.Namespace) -> list[Row]:
    """startup.py: the no-op build and the switch against doit's, ninja's and ln's own
    start-up, on the demo and on an artifact of PyTorch's file count, and one process's
    steps (what is ours of the no-op build)."""
    files = str(args.files)
    out, why = run_script("startup.py", "--rounds", str(args.repeat), "--files", files)
    if out is None:
        return [skipped("start-up (no-op build, switch, their steps)", why)]
    d = last_json(out)
    t, demo = d["totals"], d["shares"]["demo"]
    skip = ("before:", "import doit", "switch:")  # not ours, cut, or not a no-op build's
    ours = sum(v for k, v in demo.items() if not k.startswith(skip))
    return [
        row("no-op `doit build` vs ninja's own no-op", t["no-op doit build"],
            t["ninja no-op (build tree)"], "build <= 0.3 s"),
        row("no-op `doit build` vs the same, plan memo off", t["no-op doit build"],
            t["no-op doit build, memo off"], "(the full planner)"),
        row("`doit switch` vs the same, plan memo off", t["doit switch"],
            t["doit switch, memo off"], "switch <= 0.2 s"),
        row("`doit switch` vs python + import doit", t["doit switch"],
            t["python + import doit"], "switch <= 0.2 s"),
        row(f"no-op `doit build`: {files}-file artifact vs demo",
            t[f"no-op doit build, {files} files"], t["no-op doit build"], "ratio ~ 1"),
        row(f"`doit switch`: {files}-file artifact vs demo", t[f"doit switch, {files} files"],
            t["doit switch"], "ratio ~ 1"),
        row("  memo miss: the planner's steps after doit's import vs the no-op", ours,
            t["no-op doit build"], "what is ours"),
        row("  of which importing the verbs vs the no-op",
            demo["import the verbs (realise, plan, models)"], t["no-op doit build"], ""),
        row("  cut: probes run / toolchain lstat()ed vs the no-op",
            demo["before: machine check, probes run"] + demo["before: toolchain files lstat()ed"],
            t["no-op doit build"], "no longer paid"),
    ]


def pytorch_noop_rows(args: argparse.Namespace) -> list[Row]:
    """pytorch_noop.py on artifacts already built (a full build takes hours: never here)."""
    measure = "no-op `doit build`, whole PyTorch tree"
    if not args.pytorch_store and not args.pytorch_checkout:
        return [skipped(measure, "no --pytorch-store (a store with a full PyTorch build) "
                                 "nor --pytorch-checkout")]
    extra = ["--checkout", args.pytorch_checkout, "--checkout-store",
             args.pytorch_checkout_store or args.pytorch_store, "--targets", args.pytorch_targets] \
        if args.pytorch_checkout else []
    store = ["--store", args.pytorch_store, "--store-targets", args.pytorch_store_targets] \
        if args.pytorch_store else []
    out, why = run_script("pytorch_noop.py", *store, "--rounds", str(max(args.repeat, 5)), *extra)
    if out is None:
        return [skipped(measure, why)]
    t = last_json(out)
    sel = args.pytorch_store_targets
    pinned_base = f"`ninja -n {sel}` (pinned tree)" if sel else "`ninja -n` (pinned tree)"
    pinned = f"{measure}, pinned source" + (f" (targets={sel}: its identity is the lock's "
                                            "hashes whatever the targets)" if sel else "")
    rows = [row(f"{pinned} vs {pinned_base}", t["no-op doit build, pinned"],
                t["ninja -n (pinned tree)"], "build <= 0.3 s"),
            row(f"{pinned} vs the plan memo off", t["no-op doit build, pinned"],
                t["no-op doit build, pinned, memo off"], "")] \
        if "no-op doit build, pinned" in t else \
        [skipped(f"{measure}, pinned source", "no --pytorch-store (a full build takes hours)")]
    if "no-op doit build, checkout" in t:
        git = next(k for k in t if k.startswith("git status"))
        base = pinned_base if args.pytorch_store else f"`ninja -n {args.pytorch_targets}` (its tree)"
        rows += [row(f"{measure}, git checkout vs {base}", t["no-op doit build, checkout"],
                     t["ninja -n (pinned tree)"], "build <= 0.3 s"),
                 row(f"{measure}, git checkout vs the plan memo off",
                     t["no-op doit build, checkout"], t["no-op doit build, checkout, memo off"], ""),
                 row(f"  of which {git}", t[git], t["no-op doit build, checkout"], "")]
    return rows


def verify_rows(args: argparse.Namespace) -> list[Row]:
    measure = "`doit verify` process on torch lib/ vs `nm -D --defined-only`"
    torch = find_torch(args.torch)
    if torch is None:
        return [skipped(measure, "no materialized torch toolchain; pass --torch DIR")]
    out, why = run_script("verify_torch.py", "--torch", str(torch), "--repeat", str(args.repeat))
    if out is None:
        return [skipped(measure, why)]
    d = last_json(out)
    return [row(measure, d["verify_s"], d["nm_s"], "<= 1.5x"),
            row("  of which verify_tree itself vs nm -D", d["verify_tree_s"], d["nm_s"], "")]


def pull_rows(args: argparse.Namespace) -> list[Row]:
    measure = "pull from nginx vs curl + zstd of the same content"
    out, why = run_script("cache_pull.py", "--rounds", str(args.repeat))
    if out is None:
        return [skipped(measure, why)]
    d = last_json(out)
    # The goals are on throughput: the ratio column is baseline s / pull s.
    rows: list[Row] = []
    if "pull_s" in d:
        rows.append((f"pull of torch lib/ ({d['files']} files, {d['mb']:.0f} MB) vs the best "
                     "`curl | zstd -d` of its objects", f"{d['pull_s']:.2f} s",
                     f"{min(d['curl_seq_s'], d['curl_par_s']):.2f} s",
                     f"{d['ratio_best']:.2f} (throughput)", ">= 0.9"))
    if "small_pull_s" in d:
        rows.append((f"pull of {d['small_files']} small files ({d['small_mb']:.0f} MB) vs "
                     "`curl | zstd -d | tar -x`", f"{d['small_pull_s']:.2f} s",
                     f"{d['small_tar_s']:.2f} s", f"{d['small_ratio']:.2f} (throughput)",
                     ">= 0.8"))
    return rows or [skipped(measure, "cache_pull.py printed neither set")]


def oci_pull_rows(args: argparse.Namespace) -> list[Row]:
    """cache_pull_oci.py: pulls from nginx and from a docker-registry against `curl | zstd -d`
    of the registry's blobs; each ratio is the median of the rounds' own ratios (each round's
    baseline over that round's pull) with their spread beside it."""
    measure = "pull from nginx and from an OCI registry vs curl + zstd of the same blobs"
    out, why = run_script("cache_pull_oci.py", "--rounds", str(max(args.repeat, 5)))
    if out is None:
        return [skipped(measure, why)]
    d = last_json(out)
    rows: list[Row] = []
    for tree, what, base, goal in (("large", "torch lib/", "the best `curl | zstd -d`", ">= 0.9"),
                                   ("small", "small files", "`curl | zstd -d | tar -x`", ">= 0.8")):
        if f"{tree}_paired_ratio_oci" not in d:
            continue
        baseline = d[f"{tree}_tar_s"] if tree == "small" else \
            min(d[f"{tree}_curl-seq_s"], d[f"{tree}_curl-par_s"])
        for name, label in (("nginx", "nginx"), ("oci", "OCI registry")):
            k = f"{tree}_paired_ratio_{name}"
            rows.append((f"pull of {what} ({d[f'{tree}_files']:.0f} files, {d[f'{tree}_mb']:.0f} "
                         f"MB) from {label} vs {base}, load {d[f'{tree}_load']:.1f}",
                         f"{d[f'{tree}_{name}_s']:.2f} s", f"{baseline:.2f} s",
                         f"{d[k]:.2f} ({d[k + '_min']:.2f}-{d[k + '_max']:.2f})", goal))
    return rows or [skipped(measure, "cache_pull_oci.py printed neither set")]


def breakpoint_rows(args: argparse.Namespace) -> list[Row]:
    measure = "first breakpoint, fresh clone + cached artifact vs warm"
    out, why = run_script("time_to_breakpoint.py")
    if out is None:
        return [skipped(measure, why)]
    cold = re.search(r"^cold total\s+([\d.]+)", out, re.M)
    pulled = re.search(r"^cold total, toolchain pulled\s+([\d.]+)", out, re.M)
    warm = re.search(r"^baseline: warm[^\d]*([\d.]+)", out, re.M)
    if not (cold and warm):
        return [skipped(measure, "time_to_breakpoint.py printed no cold/warm totals")]
    rows = [row("first breakpoint, fresh clone, toolchain built vs warm", float(cold[1]),
                float(warm[1]), "cold <= 120 s")]
    if pulled:
        rows.append(row("first breakpoint, fresh clone, toolchain pulled vs warm",
                        float(pulled[1]), float(warm[1]), "cold <= 15 s"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip time_to_breakpoint, cache_pull and cache_pull_oci")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big-gb", type=float, default=1.0, help="size of spine's big artifact")
    ap.add_argument("--torch", help="torch package directory for verify_torch.py")
    ap.add_argument("--files", type=int, default=12000, help="files of startup.py's big artifact")
    ap.add_argument("--pytorch-store", help="a store holding a full `recipe=pytorch` build")
    ap.add_argument("--pytorch-store-targets", default="",
                    help="targets= of that pinned build (default: the whole tree)")
    ap.add_argument("--pytorch-checkout", help="a git checkout of the tree, built with source=")
    ap.add_argument("--pytorch-checkout-store", help="where that checkout's build is")
    ap.add_argument("--pytorch-targets", default="c10", help="targets= of that build")
    ap.add_argument("--c10-work", help="where pytorch_c10_edit.py keeps its checkout and store")
    args = ap.parse_args()
    parts = [spine_rows, startup_rows, pytorch_noop_rows, verify_rows]
    if not args.quick:
        parts += [c10_edit_rows, pull_rows, oci_pull_rows, breakpoint_rows]
    rows = [r for part in parts for r in part(args)]
    load = os.getloadavg()[0]
    table = Table(title=f"benchmarks (median of {args.repeat}; baselines measured in this run; "
                        f"{os.cpu_count()} cores, load {load:.1f})")
    for col in ("measure", "value", "baseline", "ratio", "goal"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    Console(width=160).print(table)
    print("waited for a quiet machine before each script: " + ", ".join(
        f"{name} {s:.0f} s" for name, s in SETTLED.items()))
    print(json.dumps([dict(zip(("measure", "value", "baseline", "ratio", "goal"), r, strict=True)) for r in rows]))


if __name__ == "__main__":
    main()
