"""The nightly build bot: the nightly.toml matrix built, verified, smoke-tested, pushed, and
reported (JSON, Markdown, a self-contained HTML page with plots and ABI diffs).

Modules: matrix (config + cells, checked up front), cell (one cell, its result file),
abi_diff (ELF summaries and diffs), report (merge, history, Markdown), report_html (the
page), notify (POST the summary), runs (run ids, report paths, a cell as its own process).
The `doit nightly` verb itself is orchestrator.verbs.nightly.
"""
