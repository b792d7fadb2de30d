#!/usr/bin/env python3
"""Machine and version facts for BENCHMARKS.md: ``envinfo.py OUT.json [--work DIR]`` writes them,
``envinfo.py OUT.json --finish SECONDS`` adds the end-of-run load average and the total time."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import time
from pathlib import Path

import provenance

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


def sh(*cmd: str) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout or out.stderr).strip()


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--windows", default="")
    ap.add_argument("--finish", type=float)
    args = ap.parse_args()
    loadavg = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    if args.finish is not None:
        env = json.loads(args.out.read_text())
        env["loadavg_end"] = loadavg
        env["total"] = f"{args.finish / 60:.1f} min"
        args.out.write_text(json.dumps(env, indent=1) + "\n")
        return
    mem_kb = next(
        int(x.split()[1])
        for x in Path("/proc/meminfo").read_text().splitlines()
        if x.startswith("MemTotal")
    )
    measured = provenance.state(REPO)  # the commit and its uncommitted changes, if any
    sha = (measured["commit"] or "?")[:12]
    doemu_version = sh(
        str(REPO / ".venv" / "bin" / "python"), "-c", "import doemu; print(doemu.__version__)"
    )
    workerd_bin = (
        BENCH / "peer" / "node_modules" / "@cloudflare" / "workerd-linux-64" / "bin" / "workerd"
    )
    pkg = json.loads((BENCH / "peer" / "package.json").read_text())
    fs = sh("df", "-T", str(args.work or "/tmp")).splitlines()[-1:] or [""]
    env = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": cpu_model(),
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "kernel": platform.release(),
        "filesystem": " ".join(fs[0].split()[:2]) if fs[0] else "",
        "fd_limit": str(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
        "python": platform.python_version(),
        "doemu": f"{doemu_version} (git {sha}{', modified' if measured['dirty'] else ''})",
        "provenance": measured,
        "workerd": f"{pkg['dependencies']['workerd']} ({sh(str(workerd_bin), '--version')})",
        "wrk": (sh("wrk", "--version").splitlines() or ["?"])[0].split(" Copyright")[0]
        if shutil.which("wrk")
        else "not installed (asyncio client used)",
        "node": sh("node", "--version"),
        "py_spy": sh(str(BENCH / ".venv" / "bin" / "py-spy"), "--version"),
        "client": sh(
            str(BENCH / ".venv" / "bin" / "python"),
            "-c",
            "import uvloop, sys; "
            "print('python', sys.version.split()[0], '+ uvloop', uvloop.__version__)",
        ),
        "loadavg_start": loadavg,
        "windows": args.windows,
    }
    args.out.write_text(json.dumps(env, indent=1) + "\n")


if __name__ == "__main__":
    main()
