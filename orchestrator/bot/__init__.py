"""The nightly build bot: the nightly.toml matrix built, verified, smoke-tested, pushed, and
reported (JSON, Markdown, a self-contained HTML page with plots and ABI diffs).

Modules: matrix (config + cells, checked up front), cell (one cell, its result file),
abi_diff (ELF summaries and diffs), report (merge, history, Markdown), report_html (the
page), notify (POST the summary), command (the `doit nightly` forms).
"""
from orchestrator.bot.command import cmd_nightly

__all__ = ["cmd_nightly"]
