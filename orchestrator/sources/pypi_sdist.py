"""`fetch = { pypi = "name==version" }`: the sdist's file from the package index, with no build.

`pip download` prepares an sdist's metadata before it saves the file, and that runs the
sdist's build backend: in an environment without the sdist's build requirements (torch,
scikit-build-core, hatchling, ...) it fails, with or without build isolation. So pip is used
as the index client only: its own option parsing and configuration (pip.conf, PIP_INDEX_URL,
PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX, certificates, proxies), its package finder
restricted to sdists (`--no-binary :all:`) for the best file of `name==version`, and its
session to download that file. Nothing of the sdist runs. The caller checks the recipe's sha256.

The finder is pip's internal API, so it runs in a child process of the orchestrator's own
interpreter (the pip it ships with), never imported here: a pip whose internals moved gives
one `cause:` line, not a traceback.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CAUSE = "cause: "

FINDER = r'''
import logging, os, sys
spec, dest = sys.argv[1], sys.argv[2]
unread = []  # pip's finder only logs (debug) an index it could not read: kept for the cause


class KeepUnread(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if text.startswith("Could not fetch URL"):
            unread.append(text)


logging.getLogger("pip").addHandler(KeepUnread())
logging.getLogger("pip").setLevel(logging.DEBUG)  # it logs this at debug level
logging.getLogger("pip").propagate = False
try:
    from pip._internal.commands import create_command
    from pip._vendor.packaging.requirements import Requirement
    req = Requirement(spec)
    cmd = create_command("download")
    with cmd.main_context():
        options, _ = cmd.parse_args(["--no-deps", "--no-binary", ":all:", "-d", dest, spec])
        session = cmd.get_default_session(options)
        finder = cmd._build_package_finder(options=options, session=session)
        found = finder.find_best_candidate(req.name, req.specifier)
        best = found.best_candidate
        if best is None:
            sdists = sorted({c.version for c in found.iter_all()})
            scope = finder.search_scope
            where = ", ".join([*scope.index_urls, *scope.find_links]) or "no index (--no-index)"
            have = (f"its sdists are {', '.join(str(v) for v in sdists[-5:])}" if sdists
                    else f"no sdist of {req.name} at all")
            also = f"; {unread[-1]}" if unread else ""  # an index it could not read
            print(f"cause: the index has no sdist for {spec} ({have}; looked in {where}){also}",
                  file=sys.stderr)
            sys.exit(3)
        link = best.link
        part = os.path.join(dest, "." + link.filename + ".part")
        resp = session.get(link.url_without_fragment, stream=True)
        resp.raise_for_status()
        with open(part, "wb") as out:
            for chunk in resp.iter_content(1 << 20):
                out.write(chunk)
        os.replace(part, os.path.join(dest, link.filename))
        print(link.filename)
except SystemExit:
    raise
except BaseException as e:
    print(f"cause: {type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
    sys.exit(4)
'''


class SdistNotFetched(Exception):
    """pip's cause, one line."""


def download_sdist(spec: str, dest: Path) -> Path:
    """Download the sdist of `spec` (name==version) into the directory `dest`; its path."""
    res = subprocess.run([sys.executable, "-c", FINDER, spec, str(dest)], capture_output=True,
                         text=True)
    lines = res.stderr.strip().splitlines()
    if res.returncode != 0:
        cause = next((line[len(CAUSE):] for line in reversed(lines) if line.startswith(CAUSE)),
                     lines[-1] if lines else f"exit status {res.returncode}, no output")
        raise SdistNotFetched(cause)
    name = res.stdout.strip().splitlines()[-1]
    return dest / name
