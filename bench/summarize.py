#!/usr/bin/env python3
"""Medians, ratios and targets from bench/results/, written as BENCHMARKS.md (stdlib only).

    python bench/summarize.py --results bench/results --targets-only   # results/targets.json
    python bench/summarize.py --results bench/results --out BENCHMARKS.md

Inputs: ``doemu-N.json`` and ``workerd-N.json`` (bench/load.py), ``micro-N.json`` (bench/micro.py),
``env.json`` and ``commands.txt`` (bench/run.sh), ``profiles/summary.json``
(bench/profile_misses.py) and ``crosscheck.json`` (bench/crosscheck.py); targets in targets.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from targets import ADVICE, TARGETS

# (id, label, path in a load.py result, unit, better: "up" | "down", digits)
CONTRACT_ROWS: list[tuple[str, str, str, str, str, int]] = [
    ("ping_c1", "ping, 1 object, c=1", "ping_c1.rps", "req/s", "up", 0),
    ("ping_c32", "ping, 1 object, c=32", "ping_c32.rps", "req/s", "up", 0),
    ("ping_c32_p99", "  ping c=32: p99 latency", "ping_c32.p99_ms", "ms", "down", 2),
    ("incr_c1", "incr, 1 object, c=1", "incr_one_c1.rps", "req/s", "up", 0),
    ("incr_c32", "incr, 1 object, c=32", "incr_one_c32.rps", "req/s", "up", 0),
    ("incr_spread", "incr over 1,000 objects, c=32", "incr_spread_c32.rps", "req/s", "up", 0),
    (
        "incr_spread_p99",
        "  incr over 1,000: p99 latency",
        "incr_spread_c32.p99_ms",
        "ms",
        "down",
        2,
    ),
    ("ws_1", "WebSocket echo, 1 connection", "ws_1.rps", "round-trips/s", "up", 0),
    (
        "ws_50_one",
        "WebSocket echo, 50 connections to 1 object",
        "ws_50_one_object.rps",
        "round-trips/s",
        "up",
        0,
    ),
    (
        "ws_50_many",
        "WebSocket echo, 50 connections to 50 objects",
        "ws_50_objects.rps",
        "round-trips/s",
        "up",
        0,
    ),
    (
        "cold_p50",
        "cold first request (1,000 new objects, c=1): p50",
        "cold_first_request.p50_ms",
        "ms",
        "down",
        3,
    ),
    ("cold_p99", "  cold first request: p99", "cold_first_request.p99_ms", "ms", "down", 3),
    (
        "warm_p50",
        "  second request to 200 of them: p50",
        "warm_second_request.p50_ms",
        "ms",
        "down",
        3,
    ),
    (
        "alarm_p50",
        "alarm lateness, 100 alarms at +100 ms: p50",
        "alarm_lateness.p50_ms",
        "ms",
        "down",
        1,
    ),
    ("alarm_p99", "alarm lateness: p99", "alarm_lateness.p99_ms", "ms", "down", 1),
    ("alarm_fired", "  alarms fired (of 100)", "alarm_lateness.fired", "", "up", 0),
    ("rss_fresh", "RSS, fresh server", "rss.before.total_mb", "MB", "down", 1),
    ("rss_1k", "RSS after 1,000 objects", "rss.after_1000.total_mb", "MB", "down", 1),
    ("rss_10k", "RSS after 10,000 objects", "rss.after_10000.total_mb", "MB", "down", 1),
    ("rss_10k_ok", "  objects created of 10,000", "rss.after_10000.ok", "", "up", 0),
    (
        "create_rate",
        "  new objects per s (9,000, 16 in flight)",
        "rss.after_10000.new_objects_per_s",
        "objects/s",
        "up",
        0,
    ),
    ("rss_idle", "RSS after 5 s idle", "rss.after_idle.total_mb", "MB", "down", 1),
    ("start_ready", "start to first ping (fresh state)", "meta.start_to_ready_s", "s", "down", 3),
    (
        "restart",
        "restart after SIGKILL to first successful read",
        "restart.start_to_first_read_s",
        "s",
        "down",
        3,
    ),
    (
        "alarm_restart",
        "alarm set before SIGKILL: fired - scheduled",
        "alarm_across_restart.fired_minus_scheduled_ms",
        "ms",
        "down",
        0,
    ),
]

CHECKS: list[tuple[str, str]] = [
    (
        "incr, 1 object, c=32: final value matches acknowledged increments",
        "incr_one_c32.value_consistent",
    ),
    (
        "incr over 1,000 objects: sum matches acknowledged increments",
        "incr_spread_c32.value_consistent",
    ),
    ("counter survived SIGKILL", "restart.value_survived"),
    (
        "alarm pending at SIGKILL fired after restart with no request",
        "alarm_across_restart.fired_without_request",
    ),
]

MICRO_ROWS: list[tuple[str, str, str, str, int]] = [
    (
        "stash_turn",
        "stash(): one committed UPDATE per turn, 1 KB snapshot",
        "stash.per_turn.per_s",
        "/s",
        0,
    ),
    ("stash_batch", "  the same statements, all in one turn", "stash.per_batch.per_s", "/s", 0),
    (
        "evicted_p50",
        "cold activation of an evicted object: first get p50",
        "evicted_cold.first_get_after_evict.p50_ms",
        "ms",
        3,
    ),
    ("evicted_p99", "  first get p99", "evicted_cold.first_get_after_evict.p99_ms", "ms", 3),
    ("evicted_warm", "  second get p50", "evicted_cold.second_get.p50_ms", "ms", 3),
    ("kb_live", "RSS per live object", "rss_per_object.kb_per_live_object", "KB", 1),
    (
        "kb_evicted",
        "RSS per evicted object (after evict-all)",
        "rss_per_object.kb_per_evicted_object",
        "KB",
        1,
    ),
    (
        "startup_ready",
        "100,000 objects + 10,000 overdue alarms: spawn to ready",
        "startup_100k.spawn_to_ready_s",
        "s",
        3,
    ),
    (
        "startup_fired",
        "  spawn to every overdue alarm fired",
        "startup_100k.spawn_to_all_alarms_fired_s",
        "s",
        3,
    ),
    (
        "startup_empty",
        "  spawn to ready, empty persist dir (contrast)",
        "startup_100k.spawn_to_ready_empty_dir_s",
        "s",
        3,
    ),
    ("startup_rss", "  RSS after all alarms fired", "startup_100k.rss_after_mb", "MB", 1),
    (
        "startup_stop",
        "  graceful stop (SIGTERM) after that",
        "startup_100k.graceful_stop_s",
        "s",
        2,
    ),
]


def get(d: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def median(runs: list[dict[str, Any]], path: str) -> float | None:
    vals = [get(r, path) for r in runs]
    nums = [v for v in vals if isinstance(v, int | float) and not isinstance(v, bool)]
    return statistics.median(nums) if nums else None


def fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        return f"{v:,.{digits}f}"
    return str(v)


def load(results: Path, prefix: str) -> list[dict[str, Any]]:
    files = sorted(results.glob(f"{prefix}-[0-9]*.json"))
    return [json.loads(f.read_text()) for f in files]


def compute(results: Path) -> dict[str, Any]:
    doemu, workerd = load(results, "doemu"), load(results, "workerd")
    micro = load(results, "micro")
    rows: dict[str, dict[str, Any]] = {}
    for rid, label, path, unit, better, digits in CONTRACT_ROWS:
        d, w = median(doemu, path), median(workerd, path)
        ratio = d / w if d is not None and w not in (None, 0) else None
        rows[rid] = {
            "label": label,
            "unit": unit,
            "better": better,
            "digits": digits,
            "doemu": d,
            "workerd": w,
            "ratio": ratio,
            "doemu_runs": [get(r, path) for r in doemu],
            "workerd_runs": [get(r, path) for r in workerd],
        }
    for rid, label, path, unit, digits in MICRO_ROWS:
        rows[rid] = {
            "label": label,
            "unit": unit,
            "digits": digits,
            "doemu": median(micro, path),
            "doemu_runs": [get(r, path) for r in micro],
            "micro": True,
        }
    targets = []
    for rid, kind, threshold, text in TARGETS:
        row = rows[rid]
        if kind == "ratio_min":
            value = row.get("ratio")
            met = None if value is None else value >= threshold
        elif kind == "max":
            value = row["doemu"]
            met = None if value is None else value <= threshold
        else:
            value = row["doemu"]
            met = None if value is None else value >= threshold
        targets.append(
            {
                "row": rid,
                "kind": kind,
                "threshold": threshold,
                "text": text,
                "value": value,
                "met": met,
                "ratio": row.get("ratio"),
            }
        )
    checks = []
    for label, path in CHECKS:
        checks.append(
            {
                "label": label,
                "doemu": [get(r, path) for r in doemu],
                "workerd": [get(r, path) for r in workerd],
            }
        )
    return {
        "runs": {
            "doemu": len(doemu),
            "workerd": len(workerd),
            "micro": len(micro),
        },
        "rows": rows,
        "targets": targets,
        "checks": checks,
        "misses": [t["row"] for t in targets if t["met"] is False],
        "doemu_meta": [r.get("meta", {}) for r in doemu],
    }


def _value_cell(row: dict[str, Any], key: str) -> str:
    return fmt(row.get(key), row["digits"])


def render(results: Path, s: dict[str, Any]) -> str:
    env = json.loads((results / "env.json").read_text()) if (results / "env.json").exists() else {}
    profiles_file = results / "profiles" / "summary.json"
    profiles = json.loads(profiles_file.read_text()) if profiles_file.exists() else {}
    cross_file = results / "crosscheck.json"
    cross = json.loads(cross_file.read_text()) if cross_file.exists() else None
    rows, out = s["rows"], []
    w = out.append
    w("# Benchmarks: doemu vs bare workerd\n")
    w(
        f"Generated by `make bench` (`bash bench/run.sh`) on {env.get('date', 'n/a')}; "
        "every number below comes from that one sitting. Do not edit by hand: re-run "
        "`make bench`.\n"
    )
    w(
        f"doemu and workerd each served the same contract ({s['runs']['doemu']} and "
        f"{s['runs']['workerd']} runs, interleaved, fresh state each time); the table shows "
        "medians. **ratio** is doemu / workerd of the row's value: above 1 is better for doemu on "
        "throughput rows (↑), below 1 is better on latency, memory and time rows (↓). The client "
        "shares the machine's two cores with the server, and the machine is shared with other "
        "work, so compare ratios from one sitting rather than absolute numbers across sittings.\n"
    )
    w("## Targets\n")
    w("| target | doemu | met? |")
    w("|---|---:|:---:|")
    for t in s["targets"]:
        row = rows[t["row"]]
        if t["kind"] == "ratio_min":
            val = "n/a" if t["value"] is None else f"{t['value']:.2f}× workerd"
        else:
            val = f"{fmt(t['value'], row['digits'])} {row['unit']}"
            if row.get("ratio") is not None:
                val += f" ({row['ratio']:.2f}× workerd)"
        met = {True: "**met**", False: "**missed**", None: "n/a"}[t["met"]]
        w(f"| {t['text']} | {val} | {met} |")
    w("")
    w("## Contract rows (medians)\n")
    head = "| row | unit | doemu | workerd | ratio doemu / workerd |"
    sep = "|---|---|---:|---:|---:|"
    w(head)
    w(sep)
    for rid, *_ in CONTRACT_ROWS:
        row = rows[rid]
        arrow = "↑" if row["better"] == "up" else "↓"
        ratio = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f} {arrow}"
        line = (
            f"| {row['label'].strip()} | {row['unit']} | {_value_cell(row, 'doemu')} | "
            f"{_value_cell(row, 'workerd')} | {ratio} |"
        )
        w(line)
    w("")
    w("Per-run values (doemu | workerd):\n")
    w("| row | doemu runs | workerd runs |")
    w("|---|---|---|")
    for rid, *_ in CONTRACT_ROWS:
        row = rows[rid]
        dr = ", ".join(fmt(v, row["digits"]) for v in row["doemu_runs"])
        wr = ", ".join(fmt(v, row["digits"]) for v in row["workerd_runs"])
        w(f"| {row['label'].strip()} | {dr} | {wr} |")
    w("")
    w("| correctness check | doemu runs | workerd runs |")
    w("|---|---|---|")
    for c in s["checks"]:
        w(
            f"| {c['label']} | {', '.join(fmt(v) for v in c['doemu'])} | "
            f"{', '.join(fmt(v) for v in c['workerd'])} |"
        )
    w("")
    w("## doemu micro-benchmarks (medians)\n")
    w("Not in the contract, so doemu only (bench/micro.py, fresh state per run).\n")
    w("| measurement | unit | doemu | per run |")
    w("|---|---|---:|---|")
    for rid, *_ in MICRO_ROWS:
        row = rows[rid]
        runs = ", ".join(fmt(v, row["digits"]) for v in row["doemu_runs"])
        w(f"| {row['label'].strip()} | {row['unit']} | {_value_cell(row, 'doemu')} | {runs} |")
    w("")
    w(_notes(results, s, env))
    w(_findings(s, profiles))
    if cross is not None:
        w(_crosscheck(cross))
    w(_machine(env, s))
    cmds = results / "commands.txt"
    if cmds.exists():
        w("## Exact commands\n")
        w(
            "`bash bench/run.sh` ran these from the repository root (ports as on this machine; "
            "`$WORK` is the scratch dir, `BENCH_WORK`, default `/tmp/doemu-bench`):\n"
        )
        w("```")
        w(cmds.read_text().rstrip())
        w("```\n")
    return "\n".join(out).rstrip() + "\n"


def _profile_block(p: dict[str, Any]) -> list[str]:
    lines = [
        f"Profile: {p['what']} (py-spy {p.get('rate', '')} Hz, {p['samples']} samples"
        f"{', ' + p['note'] if p.get('note') else ''}).\n"
    ]
    if p.get("server_cpu_pct") is not None:
        lines.append(
            f"Server CPU during the profiled window: {p['server_cpu_pct']} % of one core.\n"
        )
    if p.get("inclusive"):
        lines.append("| inclusive % | function | | self % | function |")
        lines.append("|---:|---|---|---:|---|")
        inc, slf = p["inclusive"], p["self"]
        for i in range(max(len(inc), len(slf))):
            a = inc[i] if i < len(inc) else None
            b = slf[i] if i < len(slf) else None
            lines.append(
                f"| {a['pct'] if a else ''} | {('`' + a['function'] + '`') if a else ''} | | "
                f"{b['pct'] if b else ''} | {('`' + b['function'] + '`') if b else ''} |"
            )
        lines.append("")
    if p.get("hot_lines"):
        lines.append("Line by line, the largest self times in doemu's own code:\n")
        lines.append("| self % | function | line | source |")
        lines.append("|---:|---|---:|---|")
        for h in p["hot_lines"]:
            src = h["source"].replace("|", "\\|")
            lines.append(f"| {h['pct']} | `{h['function']}` | {h['line']} | `{src}` |")
        lines.append("")
    if p.get("memory"):
        lines.append("| tracemalloc: allocation site | KB per live object |")
        lines.append("|---|---:|")
        for m in p["memory"]:
            lines.append(f"| `{m['site']}` | {m['kb_per_object']} |")
        lines.append("")
    if p.get("extra"):
        lines.append(p["extra"] + "\n")
    return lines


def _stalls(results: Path) -> list[str]:
    """Single requests or round trips far slower than the rest of their window."""
    out = []
    for server in ("doemu", "workerd"):
        for i, run in enumerate(load(results, server), 1):
            for key, label in (
                ("ping_c1", "ping c=1"), ("incr_one_c1", "incr c=1"),
                ("ws_1", "WebSocket, 1 connection"),
                ("ws_50_one_object", "WebSocket, 50 connections to 1 object"),
                ("ws_50_objects", "WebSocket, 50 connections to 50 objects"),
            ):  # fmt: skip
                r = run.get(key) or {}
                mx, p50 = r.get("max_ms"), r.get("p50_ms")
                if mx and p50 and mx > 100 and mx > 50 * p50:
                    out.append(f"{server} run {i}, {label}: max {mx:,.0f} ms (p50 {p50} ms)")
    return out


def _notes(results: Path, s: dict[str, Any], env: dict[str, Any]) -> str:
    out = ["## Method notes\n"]
    out.append(
        f"* {env.get('windows', 'n/a')}. The windows are shorter than the shared harness's 5 s, "
        "to keep `make bench` near 15 minutes; likewise the cold row's contrast request goes to "
        "200 of the 1,000 objects and the RSS phase idles 5 s. HTTP rows use wrk with one "
        "thread; the other rows use the asyncio clients in `bench/benchlib.py`."
    )
    live = [get(r, "rss.doemu_live_objects") for r in load(results, "doemu")]
    live = [v for v in live if v is not None]
    if live:
        out.append(
            f"* After 10,000 objects doemu held {', '.join(str(v) for v in live)} of them live "
            f"(its live cap at an open-file limit of {env.get('fd_limit', 'n/a')}); the rest were "
            "evicted, so the RSS row measures the cap times the cost of a live object, plus what "
            "eviction leaves behind; workerd's column is whatever it holds for the same 10,000 "
            "objects."
        )
    out.append(
        "* The eviction and RSS-per-object micro-benchmarks run once (first micro run): they "
        "vary by under 1 % between runs and cost a minute each; stash() and the 100,000-object "
        "start-up run three times."
    )
    noisy = []
    for rid, *_ in CONTRACT_ROWS:
        row = s["rows"][rid]
        for server in ("doemu", "workerd"):
            vals = [v for v in row[f"{server}_runs"] if isinstance(v, int | float) and v > 0]
            if len(vals) > 1 and max(vals) / min(vals) > 1.5 and max(vals) >= 5:
                lo, hi = fmt(min(vals), row["digits"]), fmt(max(vals), row["digits"])
                noisy.append(f"{row['label'].strip()} ({server}, {lo}–{hi} {row['unit']})")
    if noisy:
        out.append(
            "* Rows whose runs differ by more than 1.5× (the machine is shared; read their ratio "
            "with care): " + "; ".join(noisy) + "."
        )
    stalls = _stalls(results)
    if stalls:
        out.append(
            "* Single stalls inside a throughput window (one request or round trip above 100 ms "
            "and 50× the median), which lower that run's throughput: " + "; ".join(stalls) + "."
        )
    return "\n".join(out) + "\n"


def _findings(s: dict[str, Any], profiles: dict[str, Any]) -> str:
    out = ["## Findings: every missed target\n"]
    if not s["misses"]:
        out.append("Every target is met.\n")
    for t in s["targets"]:
        if t["met"] is not False:
            continue
        row = s["rows"][t["row"]]
        ratio = "n/a" if row.get("ratio") is None else f"{row['ratio']:.2f}× workerd"
        out.append(f"### {t['text']}: missed\n")
        out.append(
            f"Measured: doemu {fmt(row['doemu'], row['digits'])} {row['unit']}"
            + (
                "."
                if row.get("micro")
                else f", workerd {fmt(row['workerd'], row['digits'])} {row['unit']}; ratio {ratio}."
            )
            + "\n"
        )
        for p in profiles.get(t["row"], []):
            if "see" in p:
                out.append("Profile: the same code path as the next WebSocket row; see there.\n")
                continue
            out += _profile_block(p)
        if t["row"] in ADVICE:
            out.append("What would close it: " + ADVICE[t["row"]] + "\n")
    return "\n".join(out)


def _crosscheck(cross: dict[str, Any]) -> str:
    out = ["## Cross-check against ../shared/bench/load.py\n", cross.get("intro", "") + "\n"]
    out.append(
        "| row | doemu (this) | workerd (this) | ratio (this) | doemu (shared) | "
        "workerd (shared) | ratio (shared) | ratios agree ±25 % | server CPU % doemu / workerd "
        "(this; shared) |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|:---:|---|")
    for r in cross["rows"]:
        d = r["digits"]
        rt = "n/a" if r.get("ratio_ours") is None else f"{r['ratio_ours']:.2f}"
        rs = "n/a" if r.get("ratio_shared") is None else f"{r['ratio_shared']:.2f}"
        ag = {True: "yes", False: "**no**", None: "n/a"}[r.get("agree")]
        co, cs = (
            r.get("server_cpu_ours") or [None, None],
            r.get("server_cpu_shared") or [None, None],
        )
        cpu = (
            ""
            if co[0] is None and cs[0] is None
            else (f"{fmt(co[0], 0)} / {fmt(co[1], 0)}; {fmt(cs[0], 0)} / {fmt(cs[1], 0)}")
        )
        out.append(
            f"| {r['label']} | {fmt(r['doemu_ours'], d)} | {fmt(r['workerd_ours'], d)} | {rt} | "
            f"{fmt(r['doemu_shared'], d)} | {fmt(r['workerd_shared'], d)} | {rs} | {ag} | {cpu} |"
        )
    out.append("")
    if cross.get("verdict"):
        out.append(cross["verdict"] + "\n")
    return "\n".join(out)


def _machine(env: dict[str, Any], s: dict[str, Any]) -> str:
    out = ["## Machine and versions\n", "| | |", "|---|---|"]
    for key, label in (
        ("cpu", "CPU"),
        ("cores", "cores"),
        ("memory", "memory"),
        ("kernel", "kernel"),
        ("filesystem", "persist dirs on"),
        ("fd_limit", "open-file limit (doemu's live cap derives from it)"),
        ("python", "Python"),
        ("doemu", "doemu"),
        ("workerd", "workerd (npm, pinned in bench/peer)"),
        ("wrk", "wrk"),
        ("node", "node"),
        ("client", "asyncio client"),
        ("py_spy", "py-spy"),
        ("loadavg_start", "load average at start"),
        ("loadavg_end", "load average at end"),
        ("windows", "windows"),
        ("total", "whole run"),
    ):
        if env.get(key):
            out.append(f"| {label} | {env[key]} |")
    out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--targets-only", action="store_true", help="write results/targets.json only")
    args = ap.parse_args()
    s = compute(args.results)
    (args.results / "targets.json").write_text(json.dumps(s, indent=1) + "\n")
    if args.targets_only:
        sys.stdout.write(json.dumps({"misses": s["misses"]}) + "\n")
        return
    text = render(args.results, s)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
