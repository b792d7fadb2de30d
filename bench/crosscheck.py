#!/usr/bin/env python3
"""One-time cross-check: the shared team harness (../shared/bench/load.py, aiohttp client) against
the same two servers, compared with this harness's medians from the same sitting.

    bench/.venv/bin/python bench/crosscheck.py --shared ../shared/bench/load.py \\
        --results bench/results \\
        --doemu-cmd '...' --workerd-cmd '...' --port 8807

Only run where that file exists (a developer machine of this project); a clone has no ../shared,
and `make bench` skips this step there. Writes results/crosscheck.json for bench/summarize.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchlib import log

# (label, path in this harness's result, path in the shared harness's result, digits)
PAIRS = [
    ("ping, c=1 (req/s)", "ping_c1.rps", "ping_c1.rps", 0),
    ("ping, c=32 (req/s)", "ping_c32.rps", "ping_c32.rps", 0),
    ("incr, 1 object, c=1 (req/s)", "incr_one_c1.rps", "incr_one_object_c1.rps", 0),
    ("incr, 1 object, c=32 (req/s)", "incr_one_c32.rps", "incr_one_object_c32.rps", 0),
    (
        "incr over 1,000 objects, c=32 (req/s)",
        "incr_spread_c32.rps",
        "incr_spread_1000_objects_c32.rps",
        0,
    ),
    ("cold first request p50 (ms)", "cold_first_request.p50_ms", "cold_first_request.p50_ms", 3),
    ("alarm lateness p50 (ms)", "alarm_lateness.p50_ms", "alarm_latency_server_clock.p50_ms", 1),
    ("alarm lateness p99 (ms)", "alarm_lateness.p99_ms", "alarm_latency_server_clock.p99_ms", 1),
    ("WS echo, 1 connection (round-trips/s)", "ws_1.rps", "ws_echo_1_conn.roundtrips_per_s", 0),
    (
        "WS echo, 50 conns to 1 object (round-trips/s)",
        "ws_50_one_object.rps",
        "ws_echo_50_conns_one_object.roundtrips_per_s",
        0,
    ),
    (
        "WS echo, 50 conns to 50 objects (round-trips/s)",
        "ws_50_objects.rps",
        "ws_echo_50_conns_50_objects.roundtrips_per_s",
        0,
    ),
    (
        "restart after SIGKILL to first read (s)",
        "restart.start_to_first_read_s",
        "restart.start_to_first_get_s",
        3,
    ),
]


def get(d: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def median(files: list[Path], path: str) -> float | None:
    vals = [get(json.loads(f.read_text()), path) for f in files]
    nums = [v for v in vals if isinstance(v, int | float) and not isinstance(v, bool)]
    return statistics.median(nums) if nums else None


def run_shared(args: argparse.Namespace, label: str, cmd: str) -> Path:
    out = args.results / f"crosscheck-{label}.json"
    log(f"cross-check: shared load.py against {label}")
    subprocess.run(
        [
            sys.executable,
            str(args.shared),
            "--base",
            f"http://127.0.0.1:{args.port}",
            "--server-cmd",
            cmd,
            "--phases",
            args.phases,
            "--out",
            str(out),
            "--server-log",
            str(args.results / f"crosscheck-{label}.server.log"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--shared", type=Path, required=True)
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--doemu-cmd", required=True)
    ap.add_argument("--workerd-cmd", required=True)
    ap.add_argument("--port", type=int, default=8807)
    ap.add_argument("--phases", default="abcdeg")
    ap.add_argument("--reuse", action="store_true", help="compare the existing crosscheck-*.json")
    args = ap.parse_args()
    theirs = {}
    for label, cmd in (("doemu", args.doemu_cmd), ("workerd", args.workerd_cmd)):
        out = args.results / f"crosscheck-{label}.json"
        if not args.reuse:
            out = run_shared(args, label, cmd)
        theirs[label] = json.loads(out.read_text())
    ours = {s: sorted(args.results.glob(f"{s}-[0-9]*.json")) for s in ("doemu", "workerd")}
    rows: list[dict[str, Any]] = []
    agree, compared = 0, 0
    for label, mine, shared, digits in PAIRS:
        d_ours, w_ours = median(ours["doemu"], mine), median(ours["workerd"], mine)
        d_theirs, w_theirs = get(theirs["doemu"], shared), get(theirs["workerd"], shared)
        r_ours = d_ours / w_ours if d_ours is not None and w_ours else None
        r_theirs = d_theirs / w_theirs if d_theirs is not None and w_theirs else None
        same = None
        if r_ours and r_theirs:
            compared += 1
            same = 0.75 <= r_theirs / r_ours <= 1.33
            agree += same
        cpu = (
            mine.rsplit(".", 1)[0] + ".server_cpu_pct",
            shared.rsplit(".", 1)[0] + ".server_cpu_pct",
        )
        rows.append(
            {
                "server_cpu_ours": [median(ours[s], cpu[0]) for s in ("doemu", "workerd")],
                "server_cpu_shared": [get(theirs[s], cpu[1]) for s in ("doemu", "workerd")],
                "label": label,
                "digits": digits,
                "doemu_ours": d_ours,
                "workerd_ours": w_ours,
                "ratio_ours": r_ours,
                "doemu_shared": d_theirs,
                "workerd_shared": w_theirs,
                "ratio_shared": r_theirs,
                "agree": same,
            }
        )
    intro = (
        "The shared harness (aiohttp client; phases "
        f"`{args.phases}`, its default 5 s windows) was run once against each of the same two "
        "servers, in the same sitting, right after this harness's runs. Absolute numbers differ "
        "where the clients differ (wrk's C client versus aiohttp, which costs the shared harness "
        "client CPU on this two-core machine); what should agree is the doemu / workerd ratio."
    )
    verdict = (
        f"doemu / workerd ratios agree within ±25 % on {agree} of {compared} rows compared "
        "(the ratio of the two harnesses' ratios between 0.75 and 1.33). Where a server runs "
        "well below 100 % of a core under one harness but not the other (server CPU columns), "
        "that harness's client sets the pace and pulls the ratio toward 1; rows whose runs vary "
        "by more than 1.5× in the per-run table are within noise of each other."
    )
    stalls = []
    for label, res in theirs.items():
        for key, r in res.items():
            if isinstance(r, dict) and r.get("max_ms") and r.get("p50_ms"):
                if r["max_ms"] > 100 and r["max_ms"] > 50 * r["p50_ms"]:
                    stalls.append(
                        f"{label} {key}: max {r['max_ms']:,.0f} ms (p50 {r['p50_ms']} ms)"
                    )
    if stalls:
        verdict += " Single stalls in the shared harness's run: " + "; ".join(stalls) + "."
    (args.results / "crosscheck.json").write_text(
        json.dumps(
            {
                "intro": intro,
                "rows": rows,
                "verdict": verdict,
                "agree": agree,
                "compared": compared,
            },
            indent=1,
        )
        + "\n"
    )
    log(verdict)


if __name__ == "__main__":
    main()
