#!/usr/bin/env python3
"""The cross-check: the team's shared harness (../shared/bench/load.py, aiohttp client) against
the same two servers, in the same sitting, compared row by row with this harness.

    # one phase of the shared harness against one server (bench/run.sh, interleaved with ours)
    bench/.venv/bin/python bench/crosscheck.py run --shared ../shared/bench/load.py \\
        --results bench/results --label doemu --run 1 --phases b --port 8807 --server-cmd '...'
    # the comparison, for bench/summarize.py (results/crosscheck.json)
    bench/.venv/bin/python bench/crosscheck.py compare --results bench/results

`run.sh` calls `run` once per phase and server (so every phase gets a fresh server, as this
harness's phases do, and the shared harness's doemu and workerd numbers for a phase are taken a
minute apart, next to this harness's), then `compare`. A clone has no ../shared: `run.sh` skips
the cross-check there and the targets are judged by this harness alone.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchlib import log

#: Two harnesses "differ" on a row when the ratio of their doemu / workerd ratios (or, on rows
#: with an absolute target, of their doemu values) is outside [1 / DIFFER, DIFFER].
DIFFER = 1.2

# (row id as in summarize.py, label, path in this harness's result, path in the shared one's,
# digits, absolute: the row's target is on the doemu value itself, so compare values too;
# tol: the row's resolution, within which two values cannot be told apart: alarm times are whole
# milliseconds of the server's clock, and the restart row polls every 5 ms here, every 10 ms
# there)
PAIRS: list[tuple[str, str, str, str, int, bool, float]] = [
    ("ping_c1", "ping, c=1 (req/s)", "ping_c1.rps", "ping_c1.rps", 0, False, 0),
    ("ping_c32", "ping, c=32 (req/s)", "ping_c32.rps", "ping_c32.rps", 0, False, 0),
    ("incr_c1", "incr, 1 object, c=1 (req/s)", "incr_one_c1.rps", "incr_one_object_c1.rps", 0,
     False, 0),
    ("incr_c32", "incr, 1 object, c=32 (req/s)", "incr_one_c32.rps",
     "incr_one_object_c32.rps", 0, False, 0),
    ("incr_spread", "incr over 1,000 objects, c=32 (req/s)", "incr_spread_c32.rps",
     "incr_spread_1000_objects_c32.rps", 0, False, 0),
    ("cold_p50", "cold first request p50 (ms)", "cold_first_request.p50_ms",
     "cold_first_request.p50_ms", 3, True, 0.1),
    ("alarm_p50", "alarm lateness p50 (ms)", "alarm_lateness.p50_ms",
     "alarm_latency_server_clock.p50_ms", 1, False, 1.0),
    ("alarm_p99", "alarm lateness p99 (ms)", "alarm_lateness.p99_ms",
     "alarm_latency_server_clock.p99_ms", 1, True, 1.0),
    ("ws_1", "WS echo, 1 connection (round-trips/s)", "ws_1.rps",
     "ws_echo_1_conn.roundtrips_per_s", 0, False, 0),
    ("ws_50_one", "WS echo, 50 conns to 1 object (round-trips/s)", "ws_50_one_object.rps",
     "ws_echo_50_conns_one_object.roundtrips_per_s", 0, False, 0),
    ("ws_50_many", "WS echo, 50 conns to 50 objects (round-trips/s)", "ws_50_objects.rps",
     "ws_echo_50_conns_50_objects.roundtrips_per_s", 0, False, 0),
    ("rss_1k", "RSS after 1,000 objects (MB)", "rss.after_1000.total_mb",
     "rss.after_1000_objects.total_mb", 1, False, 0),
    ("rss_10k", "RSS after 10,000 objects (MB)", "rss.after_10000.total_mb",
     "rss.after_10000_objects.total_mb", 1, True, 0),
    ("create_rate", "new objects per s (9,000, 16 in flight)",
     "rss.after_10000.new_objects_per_s", "rss.after_10000_objects.new_objects_per_s", 0, False,
     0),
    ("restart", "restart after SIGKILL to first read (s)", "restart.start_to_first_read_s",
     "restart.start_to_first_get_s", 3, True, 0.01),
]  # fmt: skip


def get(d: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def median(docs: list[dict[str, Any]], path: str) -> float | None:
    vals = [get(d, path) for d in docs]
    nums = [v for v in vals if isinstance(v, int | float) and not isinstance(v, bool)]
    return statistics.median(nums) if nums else None


def load_rounds(results: Path, prefix: str) -> dict[int, dict[str, Any]]:
    """``<prefix>-N.json`` by round N."""
    out = {}
    for f in results.glob(f"{prefix}-[0-9]*.json"):
        n = f.stem.rsplit("-", 1)[1]
        if n.isdigit():
            out[int(n)] = json.loads(f.read_text())
    return dict(sorted(out.items()))


def load(results: Path, prefix: str) -> list[dict[str, Any]]:
    return list(load_rounds(results, prefix).values())


def per_round(
    doemu: dict[int, dict[str, Any]], workerd: dict[int, dict[str, Any]], path: str
) -> tuple[list[float], list[float]]:
    """doemu's value and doemu / workerd per round, for the rounds both have (the targets are
    judged on the worst round; bench/summarize.py)."""
    values, ratios = [], []
    for n in sorted(set(doemu) & set(workerd)):
        d, w = get(doemu[n], path), get(workerd[n], path)
        if isinstance(d, int | float) and isinstance(w, int | float) and w:
            values.append(d)
            ratios.append(d / w)
    return values, ratios


def _apart(a: tuple[float, float], b: tuple[float, float]) -> float | None:
    """How far apart two ranges of positive numbers are, as a factor (1.0 if they overlap)."""
    if a[1] >= b[0] and b[1] >= a[0]:
        return 1.0
    lo, hi = (a, b) if a[1] < b[0] else (b, a)
    return hi[0] / lo[1] if lo[1] > 0 else None


def values_apart(a: float | None, b: float | None, tol: float = 0.0) -> float | None:
    """How far apart two measured values are, as a factor >= 1, each known to within ``tol``."""
    if a is None or b is None:
        return None
    return _apart((max(a - tol, 0.0), a + tol), (max(b - tol, 0.0), b + tol))


def _ratio_range(d: float, w: float, tol: float) -> tuple[float, float]:
    return max(d - tol, 0.0) / (w + tol), (d + tol) / max(w - tol, 1e-9)


def ratios_apart(
    d1: float | None, w1: float | None, d2: float | None, w2: float | None, tol: float = 0.0
) -> float | None:
    """How far apart two doemu / workerd ratios are, as a factor >= 1, each value known to
    within ``tol``."""
    if None in (d1, w1, d2, w2) or not w1 or not w2:
        return None
    assert d1 is not None and w1 is not None and d2 is not None and w2 is not None
    return _apart(_ratio_range(d1, w1, tol), _ratio_range(d2, w2, tol))


def ratio(d: float | None, w: float | None) -> float | None:
    return d / w if d is not None and w else None


def cmd_run(args: argparse.Namespace) -> None:
    """One invocation of the shared harness (its own fresh server), merged into
    results/shared-LABEL-RUN.json."""
    part = args.results / f"part-shared-{args.label}-{args.run}-{args.phases}.json"
    log(f"cross-check: shared load.py, phases {args.phases}, against {args.label}")
    subprocess.run(
        [
            sys.executable,
            str(args.shared),
            "--base",
            f"http://127.0.0.1:{args.port}",
            "--server-cmd",
            args.server_cmd,
            "--phases",
            args.phases,
            "--duration",
            str(args.duration),
            "--warmup",
            str(args.warmup),
            "--rss-idle",
            str(args.rss_idle),
            "--out",
            str(part),
            "--server-log",
            str(args.results / f"shared-{args.label}-{args.run}.server.log"),
            *shlex.split(args.extra),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    merged_file = args.results / f"shared-{args.label}-{args.run}.json"
    merged = json.loads(merged_file.read_text()) if merged_file.exists() else {}
    new = json.loads(part.read_text())
    meta = merged.get("meta", {})
    meta.setdefault("invocations", []).append({"phases": args.phases, **new.pop("meta", {})})
    merged.update(new)
    merged["meta"] = meta
    merged_file.write_text(json.dumps(merged, indent=1) + "\n")
    part.unlink()


def compare(results: Path) -> dict[str, Any]:
    ours = {s: load(results, s) for s in ("doemu", "workerd")}
    theirs_rounds = {s: load_rounds(results, f"shared-{s}") for s in ("doemu", "workerd")}
    theirs = {s: list(r.values()) for s, r in theirs_rounds.items()}
    rows: list[dict[str, Any]] = []
    differ = 0
    for rid, label, mine, shared, digits, absolute, tol in PAIRS:
        d_o, w_o = median(ours["doemu"], mine), median(ours["workerd"], mine)
        d_s, w_s = median(theirs["doemu"], shared), median(theirs["workerd"], shared)
        r_o, r_s = ratio(d_o, w_o), ratio(d_s, w_s)
        apart = ratios_apart(d_o, w_o, d_s, w_s, tol)
        if absolute:
            both = [x for x in (apart, values_apart(d_o, d_s, tol)) if x is not None]
            apart = max(both) if both else None
        differs = None if apart is None else apart > DIFFER
        differ += bool(differs)
        cpu = (mine.rsplit(".", 1)[0] + ".server_cpu_pct", shared.rsplit(".", 1)[0])
        d_runs, r_runs = per_round(theirs_rounds["doemu"], theirs_rounds["workerd"], shared)
        rows.append(
            {
                "row": rid,
                "label": label,
                "digits": digits,
                "absolute": absolute,
                "doemu_ours": d_o,
                "workerd_ours": w_o,
                "ratio_ours": r_o,
                "doemu_shared": d_s,
                "workerd_shared": w_s,
                "ratio_shared": r_s,
                "doemu_shared_runs": d_runs,
                "ratio_shared_runs": r_runs,
                "apart": None if apart is None else round(apart, 3),
                "differs": differs,
                "server_cpu_ours": [median(ours[s], cpu[0]) for s in ("doemu", "workerd")],
                "server_cpu_shared": [
                    median(theirs[s], cpu[1] + ".server_cpu_pct") for s in ("doemu", "workerd")
                ],
            }
        )
    stalls = []
    for server, docs in theirs.items():
        for i, doc in enumerate(docs, 1):
            for key, r in doc.items():
                if isinstance(r, dict) and r.get("max_ms") and r.get("p50_ms"):
                    if r["max_ms"] > 100 and r["max_ms"] > 50 * r["p50_ms"]:
                        stalls.append(
                            f"{server} run {i} {key}: max {r['max_ms']:,.0f} ms "
                            f"(p50 {r['p50_ms']} ms)"
                        )
    compared = sum(1 for r in rows if r["differs"] is not None)
    return {
        "runs": {s: len(docs) for s, docs in theirs.items()},
        "windows": theirs["doemu"][0]["meta"]["invocations"][0] if theirs["doemu"] else {},
        "differ_threshold": DIFFER,
        "rows": rows,
        "compared": compared,
        "differ": differ,
        "stalls": stalls,
    }


def cmd_compare(args: argparse.Namespace) -> None:
    out = compare(args.results)
    (args.results / "crosscheck.json").write_text(json.dumps(out, indent=1) + "\n")
    log(
        f"cross-check: {out['differ']} of {out['compared']} rows differ by more than "
        f"{round(100 * (DIFFER - 1))} % between the harnesses"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="one invocation of the shared harness")
    run.add_argument("--shared", type=Path, required=True)
    run.add_argument("--results", type=Path, required=True)
    run.add_argument("--label", required=True, choices=("doemu", "workerd"))
    run.add_argument("--run", type=int, default=1)
    run.add_argument("--phases", required=True)
    run.add_argument("--port", type=int, required=True)
    run.add_argument("--server-cmd", required=True)
    run.add_argument("--duration", type=float, default=3.0)
    run.add_argument("--warmup", type=float, default=1.0)
    run.add_argument("--rss-idle", type=float, default=5.0)
    run.add_argument("--extra", default="", help="more shared load.py options (a quick try)")
    cmp_ = sub.add_parser("compare", help="results/crosscheck.json from both harnesses' files")
    cmp_.add_argument("--results", type=Path, required=True)
    args = ap.parse_args()
    if args.cmd == "run":
        cmd_run(args)
    else:
        cmd_compare(args)


if __name__ == "__main__":
    main()
