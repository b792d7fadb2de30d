#!/usr/bin/env python3
"""Which code a benchmark measured, and whether a report may be written for it (stdlib only).

    python bench/provenance.py check-clean          # exit 1 if the measured code has changes
    python bench/provenance.py check results/env.json   # exit 1 if no report may be written

BENCHMARKS.md says what the code at its commit does, so `make bench` refuses to write it when
that is not what was measured: ``run.sh`` records the commit and any uncommitted change to the
measured code (:data:`CODE`) in ``results/env.json`` when it starts (``envinfo.py``), and
``summarize.py`` writes the report only if

* the tree was clean when the run started (nothing uncommitted was measured),
* the commit measured is the checkout's HEAD or an ancestor of it (the report is not written
  into an older tree than the code it measured), and
* no measured path differs between that commit and the checkout as it is now (committed or
  not): the report would otherwise sit next to code it never measured.

``BENCH_ALLOW_DIRTY=1`` (``summarize.py --allow-dirty``) writes it anyway, as a draft that says
so in its first lines: for a quick try, never for committing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["CODE", "REPORT", "problems", "state"]

REPO = Path(__file__).resolve().parent.parent
#: What a benchmark measures: the runtime, the agents library, the bench's own apps and clients,
#: and what decides how they are installed and run.
CODE = ("doemu", "agents", "bench", "pyproject.toml", "setup.py", "Makefile")
#: The report's own code (it reads the results and writes BENCHMARKS.md) and the bench's README:
#: neither is measured, so a change to how a sitting is judged, worded or documented may
#: re-summarize that sitting (``run.sh --summarize``) without a new one. Git pathspecs, excluded
#: from :data:`CODE`.
REPORT = (
    ":(exclude)bench/summarize.py",
    ":(exclude)bench/targets.py",
    ":(exclude)bench/provenance.py",
    ":(exclude)bench/README.md",
)


def _git(*args: str, repo: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )


def state(repo: Path = REPO) -> dict[str, Any]:
    """The commit checked out and the measured paths with uncommitted changes (or untracked)."""
    head = _git("rev-parse", "HEAD", repo=repo)
    status = _git("status", "--porcelain", "--untracked-files=all", "--", *CODE, *REPORT, repo=repo)
    dirty = [line[3:] for line in status.stdout.splitlines()] if status.returncode == 0 else []
    return {"commit": head.stdout.strip() if head.returncode == 0 else None, "dirty": dirty}


def problems(measured: dict[str, Any], repo: Path = REPO) -> list[str]:
    """Why no report may be written for a run that recorded ``measured`` (empty: it may)."""
    commit = measured.get("commit")
    if not commit:
        return ["the run recorded no commit (not a git checkout, or an older run.sh)"]
    out = []
    if measured.get("dirty"):
        out.append(
            f"the measured code had uncommitted changes when the run started: "
            f"{', '.join(measured['dirty'][:10])}"
        )
    now = state(repo)
    if now["commit"] != commit:
        if _git("merge-base", "--is-ancestor", commit, "HEAD", repo=repo).returncode != 0:
            out.append(
                f"the checkout (HEAD {str(now['commit'])[:12]}) does not contain the measured "
                f"commit {commit[:12]}: the report would describe code this tree does not have"
            )
        else:
            changed = _git("diff", "--name-only", commit, "HEAD", "--", *CODE, *REPORT, repo=repo)
            if changed.stdout.strip():
                files = changed.stdout.split()
                out.append(
                    f"the measured code changed since {commit[:12]} was measured: "
                    f"{', '.join(files[:10])}{' …' if len(files) > 10 else ''}"
                )
    if now["dirty"]:
        out.append(f"the measured code has uncommitted changes now: {', '.join(now['dirty'][:10])}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check-clean", help="refuse a run on uncommitted changes to the measured code")
    check = sub.add_parser("check", help="refuse a report for the run recorded in ENV")
    check.add_argument("env", type=Path)
    args = ap.parse_args()
    if args.cmd == "check-clean":
        found = state()["dirty"]
        found_problems = [f"uncommitted changes to the measured code: {', '.join(found[:10])}"]
        found_problems = found_problems if found else []
    else:
        env = json.loads(args.env.read_text()) if args.env.exists() else {}
        found_problems = problems(env.get("provenance", {}))
    for problem in found_problems:
        sys.stderr.write(f"refusing: {problem}\n")
    if found_problems:
        sys.stderr.write(
            "commit first (BENCHMARKS.md must describe a commit), or BENCH_ALLOW_DIRTY=1 for a "
            "draft that says so\n"
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
