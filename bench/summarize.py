#!/usr/bin/env python3
"""Medians, ratios and targets from bench/results/, written as BENCHMARKS.md (stdlib only).

    python bench/summarize.py --results bench/results --targets-only   # results/targets.json
    python bench/summarize.py --results bench/results --out BENCHMARKS.md

Inputs (bench/results/): ``doemu-N.json`` (doemu at power durability), ``doemu_process-N.json``
(process durability, the phases that write), ``doemu_equal-N.json`` (phase f at workerd's eviction
policy) and ``workerd-N.json`` (bench/load.py); ``micro-N.json`` and ``micro_process-N.json``
(bench/micro.py); ``env.json`` and ``commands.txt`` (bench/run.sh); ``profiles/summary.json``
(bench/profile_misses.py); ``crosscheck.json`` (bench/crosscheck.py); targets in targets.py.
The chat rows (bench/chatload.py) are in ``doemu-N.json`` and ``workerd-N.json``, the agent-server
rows (bench/serverload.py, doemu only) in ``doemu-N.json`` and ``doemu_process-N.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import provenance
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
    (
        "floor_c1",
        "bare write+fdatasync loop, 1 file (bench/fsyncfloor.py)",
        "floor.fdatasync_c1",
        "writes/s",
        "",
        0,
    ),
    (
        "incr_c1_floor",
        "  incr, 1 object, c=1 as a fraction of it",
        "floor_fraction.incr_c1",
        "",
        "up",
        3,
    ),
    (
        "floor_parallel",
        "bare write+fdatasync on 32 files at once",
        "floor.fdatasync_parallel",
        "writes/s",
        "",
        0,
    ),
    (
        "incr_spread_floor",
        "  incr over 1,000 objects, c=32 as a fraction of it",
        "floor_fraction.incr_spread",
        "",
        "up",
        3,
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
        "live_10k",
        "  objects live at that reading (open database files)",
        "rss.after_10000.live_objects",
        "",
        "",
        0,
    ),
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

# The chat rows (bench/chatload.py, results merged into doemu-N.json and workerd-N.json): doemu's
# AIChatAgent (power durability) against Cloudflare's published one on bare workerd.
CHAT_ROWS: list[tuple[str, str, str, str, str, int]] = [
    (
        "chat_fanout",
        "chat fan-out: one turn of 1,000 deltas to 10 clients",
        "chat_fanout.chunks_per_s",
        "chunks/s",
        "up",
        0,
    ),
    (
        "chat_turn_p50",
        "  turn, request sent to the last client's done: p50",
        "chat_fanout.turn_ms.p50_ms",
        "ms",
        "down",
        1,
    ),
    ("chat_cpu", "  server CPU per turn", "chat_fanout.server_cpu_s_per_turn", "s", "down", 3),
    (
        "chat_fanout_light",
        "  doemu's lighter path (hand-written SSE reader, no ledger or checkpoint): not judged",
        "chat_fanout_light.chunks_per_s",
        "chunks/s",
        "up",
        0,
    ),
    (
        "chat_cpu_light",
        "    its server CPU per turn",
        "chat_fanout_light.server_cpu_s_per_turn",
        "s",
        "down",
        3,
    ),
    (
        "chat_many",
        "{chats} chats at once, one turn of {deltas} deltas each, one client each: chunks/s in "
        "total",
        "chat_many.chunks_per_s",
        "chunks/s",
        "up",
        0,
    ),
    (
        "chat_many_wait",
        "  wait for each chunk after a client's first, p99",
        "chat_many.chunk_wait_ms.p99_ms",
        "ms",
        "down",
        1,
    ),
    (
        "chat_many_wait50",
        "  wait for each chunk after a client's first, p50",
        "chat_many.chunk_wait_ms.p50_ms",
        "ms",
        "down",
        2,
    ),
    (
        "chat_many_first",
        "  first chunk after the client's request, p99",
        "chat_many.first_chunk_ms.p99_ms",
        "ms",
        "down",
        1,
    ),
    ("chat_many_cpu", "  server CPU per round", "chat_many.server_cpu_s_per_round", "s", "down", 3),
    (
        "chat_replay",
        "replay of 1,000 chunks: connect to the last replayed chunk, p50",
        "chat_replay.to_last_chunk_ms.p50_ms",
        "ms",
        "down",
        1,
    ),
    (
        "chat_replay_p90",
        "  connect to the last replayed chunk: p90",
        "chat_replay.to_last_chunk_ms.p90_ms",
        "ms",
        "down",
        1,
    ),
    (
        "chat_replay_ack",
        "  resume ACK sent to the last replayed chunk: p50",
        "chat_replay.ack_to_last_chunk_ms.p50_ms",
        "ms",
        "down",
        1,
    ),
]

#: Rows whose workerd column is another path's: the lighter path of doemu's chat agent is set
#: against the same JavaScript agent as the judged row.
WORKERD_PATH = {
    "chat_fanout_light": "chat_fanout.chunks_per_s",
    "chat_cpu_light": "chat_fanout.server_cpu_s_per_turn",
}

# The agent-server rows (phase j, bench/serverload.py, merged into doemu-N.json and
# doemu_process-N.json): agents.server sessions on doemu at both durability levels; no workerd
# column (the seed's server is not in the JavaScript peer). The labels name the run's parameters
# ({clients}, {deltas}, … from the results, see _server_params).
SERVER_ROWS: list[tuple[str, str, str, str, str, int]] = [
    (
        "srv_fanout",
        "fan-out: one run of {deltas} deltas ({chunks} chunks) to {clients} SSE clients, "
        "chunks/s in total",
        "server_fanout.total_chunks_per_s",
        "chunks/s",
        "up",
        0,
    ),
    (
        "srv_fanout_client",
        "  per client (median client)",
        "server_fanout.per_client_chunks_per_s",
        "chunks/s",
        "up",
        0,
    ),
    (
        "srv_fanout_slowest",
        "  per client (slowest client)",
        "server_fanout.slowest_client_chunks_per_s",
        "chunks/s",
        "up",
        0,
    ),
    (
        "srv_run",
        "  run: start request sent to the last client's end event",
        "server_fanout.run_ms.p50_ms",
        "ms",
        "down",
        0,
    ),
    (
        "srv_first_chunk",
        "  first chunk (run_started) after the start request, median client",
        "server_fanout.first_chunk_ms",
        "ms",
        "down",
        1,
    ),
    (
        "srv_first_delta",
        "  first text_delta after the start request, median client",
        "server_fanout.first_delta_ms",
        "ms",
        "down",
        1,
    ),
    ("srv_cpu", "  server CPU per run", "server_fanout.server_cpu_s_per_run", "s", "down", 2),
    (
        "srv_one_client",
        "  contrast: one run of {replay_deltas} deltas to 1 SSE client",
        "server_replay.build_chunks_per_s",
        "chunks/s",
        "up",
        0,
    ),
    (
        "srv_provider",
        "  the provider alone, {deltas} deltas read straight from it",
        "server_fanout.provider_alone_deltas_per_s",
        "deltas/s",
        "up",
        0,
    ),
    (
        "srv_provider_cpu",
        "  provider CPU per fan-out run",
        "server_fanout.provider_cpu_s_per_run",
        "s",
        "down",
        3,
    ),
    (
        "srv_sessions",
        "{sessions} sessions at once, one run of {session_deltas} deltas each, one SSE client "
        "each: chunks/s in total",
        "server_sessions.total_chunks_per_s",
        "chunks/s",
        "up",
        0,
    ),
    (
        "srv_sessions_wait",
        "  wait for each chunk after a client's first, p99",
        "server_sessions.chunk_wait_ms.p99_ms",
        "ms",
        "down",
        1,
    ),
    (
        "srv_sessions_wait50",
        "  wait for each chunk after a client's first, p50",
        "server_sessions.chunk_wait_ms.p50_ms",
        "ms",
        "down",
        2,
    ),
    (
        "srv_sessions_first",
        "  first chunk after the session's start request, p99",
        "server_sessions.first_chunk_ms.p99_ms",
        "ms",
        "down",
        1,
    ),
    (
        "srv_sessions_cpu",
        "  server CPU per round",
        "server_sessions.server_cpu_s_per_run",
        "s",
        "down",
        2,
    ),
    (
        "srv_replay",
        "replay of {replay} chunks over SSE from fromSequence=0: connect to the end event, p50",
        "server_replay.sse_to_end_ms.p50_ms",
        "ms",
        "down",
        1,
    ),
    (
        "srv_replay_first",
        "  connect to the first replayed chunk, p50",
        "server_replay.sse_to_first_chunk_ms.p50_ms",
        "ms",
        "down",
        1,
    ),
    (
        "srv_replay_cpu",
        "  server CPU per replay",
        "server_replay.sse_server_cpu_s",
        "s",
        "down",
        3,
    ),
    (
        "srv_history",
        "  the same {replay} chunks as /history pages of {limit} ({pages} requests), p50",
        "server_replay.history_ms.p50_ms",
        "ms",
        "down",
        1,
    ),
    (
        "srv_history_parse",
        "    of which the client's JSON parsing of the pages",
        "server_replay.history_parse_ms",
        "ms",
        "down",
        1,
    ),
]

SERVER_CHECKS: list[tuple[str, str]] = [
    (
        "every client received every chunk once, in order, gap-free, byte-identical, then `end`",
        "server_fanout.every_client_every_chunk_in_order",
    ),
    ("chunks each client received per run", "server_fanout.chunks_per_client"),
    (
        "concurrent sessions: every session's client received every chunk once, in order, "
        "then `end`",
        "server_sessions.every_session_every_chunk_in_order",
    ),
    ("chunks per replay", "server_replay.replayed_per_read"),
    ("SSE replay and /history pages hold the same chunks", "server_replay.replay_equals_history"),
]

# Phase f at equal eviction policy: doemu_equal-N.json (doemu, power, evicting objects idle for
# BENCH_EQUAL_IDLE s as workerd does, live cap lifted to what the descriptors allow) against
# workerd; the default-policy doemu column again for contrast.
EQUAL_ROWS: list[tuple[str, str, str, str, str, int]] = [
    ("eq_rss_1k", "RSS after 1,000 objects", "rss.after_1000.total_mb", "MB", "down", 1),
    ("eq_live_1k", "  objects live", "rss.after_1000.live_objects", "", "", 0),
    ("eq_rss_10k", "RSS after 10,000 objects", "rss.after_10000.total_mb", "MB", "down", 1),
    ("eq_live_10k", "  objects live", "rss.after_10000.live_objects", "", "", 0),
    (
        "eq_create",
        "  new objects per s (9,000, 16 in flight)",
        "rss.after_10000.new_objects_per_s",
        "objects/s",
        "up",
        0,
    ),
    ("eq_rss_idle", "RSS after 5 s idle", "rss.after_idle.total_mb", "MB", "down", 1),
    ("eq_live_idle", "  objects live", "rss.after_idle.live_objects", "", "", 0),
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
    ("chat fan-out: chunks each client received per turn", "chat_fanout.chunks_per_client"),
    ("chat replay: chunks replayed per reconnect", "chat_replay.replayed_per_reconnect"),
    ("many chats: chunks each client received per round", "chat_many.chunks_per_client"),
]

MICRO_ROWS: list[tuple[str, str, str, str, int]] = [
    (
        "stash_turn",
        "stash(): self.stash() in run_fiber, 1 KB snapshot, a frame per stash (each its own "
        "turn, the frame leaving once it is durable)",
        "stash.per_turn.per_s",
        "/s",
        0,
    ),
    (
        "stash_batch",
        "  the same stashes, all in one turn (one commit, one frame)",
        "stash.per_batch.per_s",
        "/s",
        0,
    ),
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
    ("rss_fresh_micro", "  RSS of the fresh server", "rss_per_object.rss_fresh_mb", "MB", 1),
    (
        "rss_evicted_mb",
        "  RSS after 10,000 objects, all evicted (evict-all, 2 s later)",
        "rss_per_object.rss_after_evict_all_mb",
        "MB",
        1,
    ),
    (
        "rss_evicted_frac",
        "  that over the fresh server's",
        "rss_per_object.evicted_over_fresh",
        "×",
        3,
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


def load_rounds(results: Path, prefix: str) -> dict[int, dict[str, Any]]:
    """``<prefix>-N.json`` by round N (run.sh runs every variant of a phase in each round)."""
    out = {}
    for f in results.glob(f"{prefix}-[0-9]*.json"):
        n = f.stem.rsplit("-", 1)[1]
        if n.isdigit():
            out[int(n)] = json.loads(f.read_text())
    return dict(sorted(out.items()))


def load(results: Path, prefix: str) -> list[dict[str, Any]]:
    return list(load_rounds(results, prefix).values())


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def _judge(kind: str, threshold: float, value: float | None) -> bool | None:
    if value is None:
        return None
    if kind in ("max", "ratio_max"):
        return value <= threshold
    return value >= threshold  # ratio_min and min


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _round_ratios(
    doemu: dict[int, Any], workerd: dict[int, Any], path: str, workerd_path: str | None = None
) -> list[float]:
    """doemu / workerd per round: each round's doemu run against the workerd run of the same
    round (measured back to back), for the rounds both have."""
    out = []
    for n in sorted(set(doemu) & set(workerd)):
        d, w = _number(get(doemu[n], path)), _number(get(workerd[n], workerd_path or path))
        if d is not None and w:
            out.append(d / w)
    return out


def _worst(kind: str, values: list[Any]) -> float | None:
    """The round a target is judged on: the highest value under a ceiling, else the lowest."""
    nums = [v for v in (_number(x) for x in values) if v is not None]
    if not nums:
        return None
    return max(nums) if kind in ("max", "ratio_max") else min(nums)


def compute(results: Path) -> dict[str, Any]:
    rounds = {
        v: load_rounds(results, v) for v in ("doemu", "doemu_process", "doemu_equal", "workerd")
    }
    runs = {v: list(r.values()) for v, r in rounds.items()}
    doemu, workerd = runs["doemu"], runs["workerd"]
    micro, micro_p = load(results, "micro"), load(results, "micro_process")
    cross_file = results / "crosscheck.json"
    cross = json.loads(cross_file.read_text()) if cross_file.exists() else None
    shared = {r["row"]: r for r in cross["rows"]} if cross else {}
    rows: dict[str, dict[str, Any]] = {}
    chat_params = _chat_params(doemu + workerd)
    for rid, label, path, unit, better, digits in CONTRACT_ROWS + CHAT_ROWS:
        wpath = WORKERD_PATH.get(rid, path)
        d, w = median(doemu, path), median(workerd, wpath)
        dp = median(runs["doemu_process"], path)
        rows[rid] = {
            "label": label.format(**chat_params) if rid.startswith("chat_") else label,
            "unit": unit,
            "better": better,
            "digits": digits,
            "doemu": d,
            "doemu_process": dp,
            "workerd": w,
            "ratio": _ratio(d, w) if better else None,
            "ratio_process": _ratio(dp, w) if better else None,
            "doemu_runs": [get(r, path) for r in doemu],
            "doemu_process_runs": [get(r, path) for r in runs["doemu_process"]],
            "workerd_runs": [get(r, wpath) for r in workerd],
            "round_ratios": _round_ratios(rounds["doemu"], rounds["workerd"], path, wpath),
            "shared": shared.get(rid),
        }
    server_params = _server_params(doemu + runs["doemu_process"])
    for rid, label, path, unit, better, digits in SERVER_ROWS:
        rows[rid] = {
            "label": label.format(**server_params),
            "unit": unit,
            "better": better,
            "digits": digits,
            "doemu": median(doemu, path),
            "doemu_process": median(runs["doemu_process"], path),
            "doemu_runs": [get(r, path) for r in doemu],
            "doemu_process_runs": [get(r, path) for r in runs["doemu_process"]],
            "workerd_runs": [],
        }
    for rid, label, path, unit, better, digits in EQUAL_ROWS:
        d, w = median(runs["doemu_equal"], path), median(workerd, path)
        rows[rid] = {
            "label": label,
            "unit": unit,
            "better": better,
            "digits": digits,
            "doemu_default": median(doemu, path),
            "doemu": d,
            "workerd": w,
            "ratio": _ratio(d, w) if better else None,
            "doemu_runs": [get(r, path) for r in runs["doemu_equal"]],
            "workerd_runs": [get(r, path) for r in workerd],
            "round_ratios": _round_ratios(rounds["doemu_equal"], rounds["workerd"], path),
        }
    for rid, label, path, unit, digits in MICRO_ROWS:
        rows[rid] = {
            "label": label,
            "unit": unit,
            "digits": digits,
            "doemu": median(micro, path),
            "doemu_process": median(micro_p, path),
            "doemu_runs": [get(r, path) for r in micro],
            "doemu_process_runs": [get(r, path) for r in micro_p],
            "micro": True,
        }
    targets = []
    for rid, kind, threshold, text in TARGETS:
        row = rows[rid]
        relative = kind.startswith("ratio")  # judged as doemu / workerd
        value = row.get("ratio") if relative else row["doemu"]
        per_round = row.get("round_ratios", []) if relative else row["doemu_runs"]
        worst = _worst(kind, per_round)
        ours = _judge(kind, threshold, worst)  # the worst round, not the median (see render)
        sh = row.get("shared") or {}
        value_shared = sh.get("ratio_shared") if relative else sh.get("doemu_shared")
        shared_rounds = sh.get("ratio_shared_runs") if relative else sh.get("doemu_shared_runs")
        worst_shared = _worst(kind, shared_rounds or [value_shared])
        theirs = _judge(kind, threshold, worst_shared) if sh else None
        # met only if every harness that measured the row finds it met
        met = ours if theirs is None or ours is None else ours and theirs
        targets.append(
            {
                "row": rid,
                "kind": kind,
                "threshold": threshold,
                "text": text,
                "value": value,
                "worst": worst,
                "rounds": len(per_round),
                "met_ours": ours,
                "value_shared": value_shared,
                "worst_shared": worst_shared,
                "met_shared": theirs,
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
                "doemu_process": [get(r, path) for r in runs["doemu_process"]],
                "workerd": [get(r, path) for r in workerd],
            }
        )
    return {
        "runs": {k: len(v) for k, v in runs.items()} | {"micro": len(micro)},
        "rows": rows,
        "targets": targets,
        "checks": checks,
        "misses": [t["row"] for t in targets if t["met"] is False],
        "server_checks": [
            {
                "label": label,
                "doemu": [get(r, path) for r in doemu],
                "doemu_process": [get(r, path) for r in runs["doemu_process"]],
            }
            for label, path in SERVER_CHECKS
        ],
        "server_conditions": {
            v: [r.get("server_conditions") for r in runs[v] if r.get("server_conditions")]
            for v in ("doemu", "doemu_process")
        },
        "cross": cross,
        "doemu_meta": [r.get("meta", {}) for r in doemu],
        "equal_cmd": next(
            (r.get("meta", {}).get("server_cmd", "") for r in runs["doemu_equal"]), ""
        ),
    }


def _chat_params(results: list[dict[str, Any]]) -> dict[str, str]:
    """The many-chats rows' parameters, as the first run that has them measured them."""
    many = next((r["chat_many"] for r in results if r.get("chat_many")), {})
    return {"chats": fmt(many.get("chats"), 0), "deltas": fmt(many.get("deltas_per_chat"), 0)}


def _server_params(results: list[dict[str, Any]]) -> dict[str, str]:
    """The agent-server rows' parameters, as the first run that has them measured them."""
    fan = next((r["server_fanout"] for r in results if r.get("server_fanout")), {})
    rep = next((r["server_replay"] for r in results if r.get("server_replay")), {})
    replay = rep.get("stream_chunks")
    ses = next((r["server_sessions"] for r in results if r.get("server_sessions")), {})
    return {
        "sessions": fmt(ses.get("sessions"), 0),
        "session_deltas": fmt(ses.get("deltas_per_session"), 0),
        "clients": fmt(fan.get("clients"), 0),
        "deltas": fmt(fan.get("deltas_per_run"), 0),
        "chunks": fmt(fan.get("chunks_per_run"), 0),
        "replay": fmt(replay, 0),
        "replay_deltas": fmt(replay - 4 if replay else None, 0),
        "limit": fmt(rep.get("history_limit"), 0),
        "pages": ", ".join(fmt(p, 0) for p in rep.get("history_pages") or []) or "n/a",
    }


def _value_cell(row: dict[str, Any], key: str) -> str:
    return fmt(row.get(key), row["digits"])


def _ratio_cell(row: dict[str, Any], key: str) -> str:
    if not row.get("better"):
        return ""
    arrow = "↑" if row["better"] == "up" else "↓"
    return "n/a" if row.get(key) is None else f"{row[key]:.2f} {arrow}"


def _shared_cell(row: dict[str, Any]) -> str:
    """Both harnesses' numbers where they differ by more than crosscheck.DIFFER."""
    sh = row.get("shared")
    if not sh or sh.get("differs") is None:
        return ""
    if not sh["differs"]:
        return "agrees"
    d = row["digits"]
    rs = "n/a" if sh.get("ratio_shared") is None else f"{sh['ratio_shared']:.2f}"
    return (
        f"**{fmt(sh['doemu_shared'], d)} / {fmt(sh['workerd_shared'], d)} = {rs}** "
        f"(off by {sh['apart']:.2f}×)"
    )


def _option(cmd: str, name: str) -> str:
    parts = cmd.split()
    return parts[parts.index(name) + 1] if name in parts[:-1] else "n/a"


def render(results: Path, s: dict[str, Any]) -> str:
    env = json.loads((results / "env.json").read_text()) if (results / "env.json").exists() else {}
    profiles_file = results / "profiles" / "summary.json"
    profiles = json.loads(profiles_file.read_text()) if profiles_file.exists() else {}
    cross = s["cross"]
    rows, out = s["rows"], []
    w = out.append
    w("# Benchmarks: doemu vs bare workerd\n")
    w(
        f"Generated by `make bench` (`bash bench/run.sh`) on {env.get('date', 'n/a')} at commit "
        f"`{str((env.get('provenance') or {}).get('commit') or 'n/a')[:12]}`; every number "
        "below comes from that one sitting, and `make bench` refuses to write this file for a "
        "tree whose measured code (doemu, agents, bench) differs from that commit's. Do not "
        "edit by hand: re-run `make bench`.\n"
    )
    n = s["runs"]
    w(
        f"doemu and workerd each served the same contract ({n['doemu']} and {n['workerd']} "
        "runs; every phase on a fresh server, the servers interleaved phase by phase); the "
        "tables show medians. **doemu (power)** is `doemu dev --durability power`, workerd's "
        "durability (every commit fsynced before its output leaves); the targets are judged on "
        "it. **doemu (process)** is `--durability process` (a commit survives the process being "
        "killed, not a power loss), run for the phases that write "
        f"({n['doemu_process']} runs) and shown next to it, not judged. **ratio** is doemu / "
        "workerd: above 1 is better for doemu on throughput rows (↑), below 1 on latency, memory "
        "and time rows (↓). The client shares the machine's two cores with the server, and the "
        "machine is shared with other work, so compare ratios from one sitting rather than "
        "absolute numbers across sittings.\n"
    )
    w("## Targets\n")
    if cross:
        w(
            "A target counts as met only if both harnesses find it met: this one and the "
            "shared one (`../shared/bench/load.py`, see the cross-check below) where it "
            "measures the row; rows it does not measure are judged by this harness alone.\n"
        )
    w(
        "A target is judged on its **worst round**, not on the median: a ratio target on the "
        "lowest per-round ratio (each round's doemu run against the same round's workerd run, "
        "the two measured back to back), a ceiling on the highest per-round value, a floor on "
        "the lowest. Each cell shows the median and, in brackets, the worst round; values get "
        "three significant figures, more where three would round onto the threshold.\n"
    )
    w("| target | doemu (power), this harness: median (worst round) | shared harness | met? |")
    w("|---|---:|---:|:---:|")
    for t in s["targets"]:
        met = {True: "**met**", False: "**missed**", None: "n/a"}[t["met"]]
        shared_cell = _target_shared(t, rows) or "—"
        w(f"| {t['text']} | {_target_cells(t, rows)} | {shared_cell} | {met} |")
    w("")
    w("## Contract rows (medians)\n")
    w(
        "The last column is the shared harness's doemu (power) / workerd = ratio, printed "
        "wherever its ratio (or, on rows with an absolute target, its doemu value) differs from "
        f"this harness's by more than {_pct(cross)}; `agrees` where it does not; blank where it "
        "does not measure the row.\n"
    )
    w(
        "| row | unit | doemu (power) | doemu (process) | workerd | ratio power / workerd | "
        "ratio process / workerd | shared harness where it differs |"
    )
    w("|---|---|---:|---:|---:|---:|---:|---|")
    for rid, *_ in CONTRACT_ROWS:
        row = rows[rid]
        dp = "—" if row["doemu_process"] is None else _value_cell(row, "doemu_process")
        rp = "—" if row["doemu_process"] is None else _ratio_cell(row, "ratio_process")
        w(
            f"| {row['label'].strip()} | {row['unit']} | {_value_cell(row, 'doemu')} | {dp} | "
            f"{_value_cell(row, 'workerd')} | {_ratio_cell(row, 'ratio')} | {rp} | "
            f"{_shared_cell(row)} |"
        )
    w("")
    w("Per-run values:\n")
    w("| row | doemu (power) runs | doemu (process) runs | workerd runs |")
    w("|---|---|---|---|")
    for rid, *_ in CONTRACT_ROWS:
        row = rows[rid]
        cells = [
            ", ".join(fmt(v, row["digits"]) for v in row[f"{k}_runs"]) or "—"
            for k in ("doemu", "doemu_process", "workerd")
        ]
        if all(v is None for v in row["doemu_process_runs"]):
            cells[1] = "—"
        w(f"| {row['label'].strip()} | {' | '.join(cells)} |")
    w("")
    w("| correctness check | doemu (power) runs | doemu (process) runs | workerd runs |")
    w("|---|---|---|---|")
    for c in s["checks"]:
        cells = [", ".join(fmt(v) for v in c[k]) or "—" for k in ("doemu", "doemu_process")]
        w(f"| {c['label']} | {' | '.join(cells)} | {', '.join(fmt(v) for v in c['workerd'])} |")
    w("")
    w(_chat(s))
    w(_server(s))
    bindings = results / "bindings.md"  # phase k: bench/bindingsload.py writes its own section
    if bindings.exists():
        w(bindings.read_text())
    durable = results / "durable.md"  # phase l: bench/durableload.py writes its own section
    if durable.exists():
        w(durable.read_text())
    w(_equal(s, env))
    w("## doemu micro-benchmarks (medians)\n")
    w(
        "Not in the contract, so doemu only (bench/micro.py, fresh state per run); the parts "
        "that write (stash's commits, the overdue alarms' handlers) at both durability levels.\n"
    )
    w("| measurement | unit | doemu (power) | doemu (process) | per run (power; process) |")
    w("|---|---|---:|---:|---|")
    for rid, *_ in MICRO_ROWS:
        row = rows[rid]
        runs = ", ".join(fmt(v, row["digits"]) for v in row["doemu_runs"])
        if row["doemu_process"] is not None:
            runs += "; " + ", ".join(fmt(v, row["digits"]) for v in row["doemu_process_runs"])
        dp = "—" if row["doemu_process"] is None else _value_cell(row, "doemu_process")
        w(
            f"| {row['label'].strip()} | {row['unit']} | {_value_cell(row, 'doemu')} | {dp} | "
            f"{runs} |"
        )
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


def _near(v: float | None, threshold: float, decimals: int | None = None) -> str:
    """``v`` with three significant figures (or ``decimals``), and more digits wherever fewer
    would print the threshold itself for a value that is not it (0.998 is not "1.00")."""
    if v is None:
        return "n/a"
    if decimals is None:
        decimals = max(0, 2 - math.floor(math.log10(abs(v)))) if v else 2
    text = f"{v:,.{decimals}f}"
    while v != threshold and text == f"{threshold:,.{decimals}f}" and decimals < 8:
        decimals += 1
        text = f"{v:,.{decimals}f}"
    return text


def _target_cells(t: dict[str, Any], rows: dict[str, Any]) -> str:
    """This harness's cell of a target: median and worst round, judged on the worst."""
    row, th = rows[t["row"]], t["threshold"]
    if t["value"] is None:
        return "n/a"
    if t["kind"].startswith("ratio"):
        val = f"{_near(t['value'], th)}× workerd ({_near(t['worst'], th)}×)"
    else:
        d = row["digits"]
        val = f"{_near(t['value'], th, d)} {row['unit']} ({_near(t['worst'], th, d)})"
        if row.get("ratio") is not None:
            val += f", {row['ratio']:.2f}× workerd"
    if t["row"] == "rss_10k":
        val += _rss_policy(rows)
    if t["met_shared"] is not None and t["met_shared"] != t["met_ours"]:
        val += " (" + ("met" if t["met_ours"] else "missed") + ")"
    return val


def _target_shared(t: dict[str, Any], rows: dict[str, Any]) -> str:
    if t["value_shared"] is None:
        return ""
    row, th = rows[t["row"]], t["threshold"]
    if t["kind"].startswith("ratio"):
        vsh = f"{_near(t['value_shared'], th)}× workerd ({_near(t['worst_shared'], th)}×)"
    else:
        d = row["digits"]
        vsh = f"{_near(t['value_shared'], th, d)} {row['unit']} ({_near(t['worst_shared'], th, d)})"
    if t["met_shared"] is not None and t["met_shared"] != t["met_ours"]:
        vsh += " (" + ("met" if t["met_shared"] else "missed") + ")"
    return vsh


def _rss_policy(rows: dict[str, Any]) -> str:
    """The RSS target's context: how many objects each server held live, and the ratio at
    equal eviction policy (the like-for-like comparison; the target itself is on doemu's
    default)."""
    live, eq, eq_live = rows["live_10k"], rows["eq_rss_10k"], rows["eq_live_10k"]
    text = (
        f"; at its default live cap, {fmt(live['doemu'], 0)} objects live against workerd's "
        f"{fmt(live['workerd'], 0)}"
    )
    if eq.get("ratio") is not None:
        text += (
            f"; **at workerd's eviction policy {fmt(eq['doemu'], 1)} MB, {eq['ratio']:.2f}× "
            f"workerd** ({fmt(eq_live['doemu'], 0)} live)"
        )
    return text


def _pct(cross: dict[str, Any] | None) -> str:
    return f"{round(100 * ((cross or {}).get('differ_threshold', 1.2) - 1))} %"


def _chat(s: dict[str, Any]) -> str:
    """The chat rows: doemu's AIChatAgent against the JavaScript SDK's, medians and every run."""
    rows = s["rows"]
    if all(rows[rid]["doemu"] is None and rows[rid]["workerd"] is None for rid, *_ in CHAT_ROWS):
        return ""
    out = ["## Chat rows (medians)\n"]
    out.append(
        "The same chat agent twice: doemu's Python `AIChatAgent` (`bench/app/chat`, "
        "`--durability power`) and Cloudflare's `AIChatAgent` (`@cloudflare/ai-chat`, `agents`, "
        "`ai` with `@ai-sdk/openai-compatible`, pinned in `bench/peer-chat`) on bare workerd, "
        "both streaming from one local fake OpenAI-compatible provider (`bench/fakeprovider.py`) "
        "with persistence on. Like for like: the judged row is the agent a user writes, "
        "`model_reply` over `OpenAIChatCompletions` (model loop, operation ledger, checkpoint), "
        "against `streamText(...).toUIMessageStreamResponse()` on the JavaScript side; the "
        "lighter path below it (a hand-written SSE reader returning the chunks as an async "
        "iterable) is shown against the same JavaScript agent, labelled and not judged. "
        "Fan-out: chunks delivered to all 10 clients / time from the "
        "request to the last client's `done`, median of the turns of a run (first turn "
        "unmeasured). Replay: a reconnecting client's resume handshake on a live, stalled "
        "1,000-chunk stream, from WebSocket connect to the last `replay: true` chunk. "
        "Many chats: that many new chats, one WebSocket client each, all connected first, then "
        "every client's first request sent at once; chunks delivered to all clients / time from "
        "the first request to the last `done`, and how long clients waited for each chunk after "
        "their first (and for the first), median of the measured rounds (bench/README.md).\n"
    )
    out.append("| row | unit | doemu (power) | workerd | ratio | doemu runs | workerd runs |")
    out.append("|---|---|---:|---:|---:|---|---|")
    for rid, *_ in CHAT_ROWS:
        row = rows[rid]
        runs = [
            ", ".join(fmt(v, row["digits"]) for v in row[f"{k}_runs"]) or "—"
            for k in ("doemu", "workerd")
        ]
        out.append(
            f"| {row['label'].strip()} | {row['unit']} | {_value_cell(row, 'doemu')} | "
            f"{_value_cell(row, 'workerd')} | {_ratio_cell(row, 'ratio')} | {runs[0]} | "
            f"{runs[1]} |"
        )
    return "\n".join(out) + "\n"


def _server(s: dict[str, Any]) -> str:
    """The agent-server rows: agents.server on doemu at both durability levels, every run."""
    rows = s["rows"]
    if all(
        rows[rid]["doemu"] is None and rows[rid]["doemu_process"] is None for rid, *_ in SERVER_ROWS
    ):
        return ""
    out = ["## Agent-server rows (medians, doemu only)\n"]
    out.append(
        "`agents.server` (`create_agent_server`, `bench/app/server`): one Durable Object per "
        "session running the agent loop, every chunk stored with a gap-free sequence before it "
        "is streamed. The agent's model is the local fake OpenAI-compatible provider "
        "(`bench/fakeprovider.py`, one write per delta), reached over loopback through "
        "`env.OPENAI_BASE_URL`. Fan-out: SSE clients (`GET …/sse?fromSequence=0`) on a new "
        "session, all connected before `POST …/start`; chunks/s = chunks received / time from "
        "the start request to the terminal `end` event (per client: its own; in total: all "
        "clients' chunks / the last client's); one unmeasured run, then the median of the "
        "measured runs, each on a new session. Replay: a session whose stream holds the chunks "
        "of one finished run, read by a new connection from `fromSequence=0` to the `end` event, "
        "and the same chunks as `/history` pages on one new keep-alive connection; median of "
        "the measured reads. Every stream is checked after its clock stops and a fault fails "
        "the run (bench/README.md). There is no workerd column: the seed's agent server is not "
        "part of the JavaScript peer, and the issue sets no target for these rows. "
        "**doemu (power)** is `--durability power` (the default: every commit fsynced before "
        "its output leaves), **doemu (process)** `--durability process`.\n"
    )
    out.append("| row | unit | doemu (power) | doemu (process) | power runs | process runs |")
    out.append("|---|---|---:|---:|---|---|")
    for rid, *_ in SERVER_ROWS:
        row = rows[rid]
        runs = [
            ", ".join(fmt(v, row["digits"]) for v in row[f"{k}_runs"]) or "—"
            for k in ("doemu", "doemu_process")
        ]
        out.append(
            f"| {row['label'].strip()} | {row['unit']} | "
            f"{_value_cell(row, 'doemu')} | {_value_cell(row, 'doemu_process')} | "
            f"{runs[0]} | {runs[1]} |"
        )
    out.append("")
    alone, client = rows["srv_provider"]["doemu"], rows["srv_fanout_client"]["doemu"]
    pcpu, scpu = rows["srv_provider_cpu"]["doemu"], rows["srv_cpu"]["doemu"]
    if alone and client and pcpu is not None and scpu:
        out.append(
            f"The provider is not what limits these rows: read alone it streams "
            f"{fmt(alone, 0)} deltas/s, {alone / client:.0f}× the rate each client receives, and "
            f"during a fan-out run it used {fmt(pcpu, 3)} s of CPU to the server's "
            f"{fmt(scpu, 2)} s (power medians).\n"
        )
    out.append("| check | doemu (power) runs | doemu (process) runs |")
    out.append("|---|---|---|")
    for c in s["server_checks"]:
        cells = [", ".join(fmt(v) for v in c[k]) or "—" for k in ("doemu", "doemu_process")]
        out.append(f"| {c['label']} | {' | '.join(cells)} |")
    out.append("")
    loads = []
    for variant, label in (("doemu", "power"), ("doemu_process", "process")):
        for i, c in enumerate(s["server_conditions"][variant], 1):
            loads.append(
                f"{label} run {i} {c.get('loadavg_start', '?')} → {c.get('loadavg_end', '?')}"
            )
    if loads:
        out.append(
            "Load average (1, 5, 15 min; it counts this benchmark's own server, provider and "
            "client) at the start and end of each invocation: " + "; ".join(loads) + "."
        )
    return "\n".join(out).rstrip() + "\n"


def _equal(s: dict[str, Any], env: dict[str, Any]) -> str:
    rows = s["rows"]
    if not s["runs"]["doemu_equal"]:
        return ""
    cmd = s["equal_cmd"]
    idle, cap = _option(cmd, "--idle-timeout"), _option(cmd, "--max-live-objects")
    out = ["## RSS at equal eviction policy\n"]
    out.append(
        "The RSS rows above compare each server at its own default policy: doemu keeps at most "
        "1,000 objects live (`--max-live-objects`, default from the open-file limit) and evicts "
        "the least recently used beyond that; workerd has no count cap but evicts every object "
        "that has been idle for about 10 s (measured here: its open database files drop to zero "
        "10 s after the last request), so it does not keep the 10,000 objects live either: at "
        "the 10,000 reading it holds those touched in the last 10 s, and its RSS includes what "
        "the evicted ones left behind. Here doemu runs with workerd's policy: "
        f"`--idle-timeout {idle}` and the live cap lifted to {fmt(_num(cap), 0)}, as many live "
        f"objects as the open-file limit ({env.get('fd_limit', 'n/a')}) allows at three "
        "descriptors each (all 10,000 would need about 31,000; the hard limit here cannot be "
        "raised). Both columns count live objects the same way, as open object database files. "
        f"doemu at power durability; {s['runs']['doemu_equal']} runs.\n"
    )
    out.append(
        "| row | unit | doemu, default policy | doemu, workerd's policy | workerd | "
        "ratio workerd's policy / workerd |"
    )
    out.append("|---|---|---:|---:|---:|---:|")
    for rid, *_ in EQUAL_ROWS:
        row = rows[rid]
        out.append(
            f"| {row['label'].strip()} | {row['unit']} | {_value_cell(row, 'doemu_default')} | "
            f"{_value_cell(row, 'doemu')} | {_value_cell(row, 'workerd')} | "
            f"{_ratio_cell(row, 'ratio')} |"
        )
    out.append("")
    runs = ", ".join(fmt(v, 1) for v in rows["eq_rss_10k"]["doemu_runs"])
    live = ", ".join(fmt(v, 0) for v in rows["eq_live_10k"]["doemu_runs"])
    line = f"Per run, doemu at workerd's policy: RSS after 10,000 {runs} MB; live {live}."
    capped = [
        v for v in rows["eq_live_10k"]["doemu_runs"] if v and _num(cap) and v >= 0.98 * _num(cap)
    ]
    if capped:
        line += (
            f" In {len(capped)} of the runs doemu's live objects reached the cap: there the "
            "open-file limit, not the idle rule, decided how many stayed live (doemu creates "
            "objects faster than workerd, so more of them are less than 10 s old)."
        )
    out.append(line + "\n")
    return "\n".join(out)


def _num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


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
    for server in ("doemu", "doemu_process", "workerd"):
        for i, run in enumerate(load(results, server), 1):
            for key, label in (
                ("ping_c1", "ping c=1"), ("ping_c32", "ping c=32"),
                ("incr_one_c1", "incr c=1"), ("incr_one_c32", "incr c=32"),
                ("incr_spread_c32", "incr over 1,000 objects"),
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
        f"* {env.get('windows', 'n/a')}. The windows are shorter than the shared harness's "
        "default 5 s (it runs with the same windows here), to keep `make bench` near 20 "
        "minutes; "
        "likewise the cold row's contrast request goes to 200 of the 1,000 objects and the RSS "
        "phase idles 5 s. HTTP rows use wrk with one thread; the other rows use the asyncio "
        "clients in `bench/benchlib.py`."
    )
    out.append(
        "* Every phase runs on a freshly started server: workerd evicts every object that has "
        "been idle for about 10 s, and evicting the 1,000 objects phase b last touched at once "
        "stalls its only thread for 1–2 s; with all phases on one server that stall fell inside "
        "whichever row ran 10 s later (a WebSocket row in earlier sittings), so that row "
        "measured phase b's after-effects. The cold and alarm phases start with unmeasured "
        "warm-ups (20 new objects; one alarm), so a fresh process's one-time costs stay out."
    )
    live = [get(r, "rss.doemu_live_objects") for r in load(results, "doemu")]
    live = [v for v in live if v is not None]
    if live:
        out.append(
            f"* After 10,000 objects doemu (default policy) held {', '.join(str(v) for v in live)}"
            f" of them live (its live cap at an open-file limit of {env.get('fd_limit', 'n/a')}); "
            "workerd held those it had not evicted after 10 s idle (the live-objects row). See "
            "the equal-policy section."
        )
    out.append(
        "* The eviction and RSS-per-object micro-benchmarks run once (first micro run): they "
        "vary by under 1 % between runs and cost a minute each; stash() and the 100,000-object "
        "start-up run three times at each durability level."
    )
    noisy = []
    for rid, *_ in CONTRACT_ROWS + CHAT_ROWS + SERVER_ROWS:
        row = s["rows"][rid]
        for server in ("doemu", "doemu_process", "workerd"):
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
    shown: set[str] = set()  # a row judged by two targets gets its profile and advice once
    for t in s["targets"]:
        if t["met"] is not False:
            continue
        row = s["rows"][t["row"]]
        ratio = "n/a" if row.get("ratio") is None else f"{row['ratio']:.2f}× workerd"
        by = (
            "both harnesses"
            if t["met_ours"] is False and t["met_shared"] is False
            else "the shared harness only"
            if t["met_ours"]
            else "this harness"
            + (" (the shared harness does not measure it)" if t["met_shared"] is None else " only")
        )
        out.append(f"### {t['text']}: missed\n")
        line = f"Missed by {by}. Measured: doemu (power) {fmt(row['doemu'], row['digits'])} "
        line += row["unit"]
        if not row.get("micro"):
            line += f", workerd {fmt(row['workerd'], row['digits'])} {row['unit']}; ratio {ratio}"
        if row.get("ratio_process") is not None:
            line += f"; doemu (process) {row['ratio_process']:.2f}× workerd"
        sh = row.get("shared")
        if sh and sh.get("doemu_shared") is not None:
            rs = "n/a" if sh.get("ratio_shared") is None else f"{sh['ratio_shared']:.2f}×"
            line += (
                f"; shared harness: doemu {fmt(sh['doemu_shared'], row['digits'])}, workerd "
                f"{fmt(sh['workerd_shared'], row['digits'])} ({rs})"
            )
        out.append(line + ".\n")
        if t["row"] in shown:
            out.append("Profile and what would close it: as for the target above on this row.\n")
            continue
        shown.add(t["row"])
        for p in profiles.get(t["row"], []):
            if "see" in p:
                out.append("Profile: the same code path as the next WebSocket row; see there.\n")
                continue
            out += _profile_block(p)
        if t["row"] in ADVICE:
            out.append("What would close it: " + ADVICE[t["row"]] + "\n")
    return "\n".join(out)


def _crosscheck(cross: dict[str, Any]) -> str:
    win = cross.get("windows", {})
    out = ["## Cross-check against ../shared/bench/load.py\n"]
    out.append(
        "The team's shared harness (aiohttp client) ran against the same two servers (doemu at "
        f"power durability) in {cross['runs'].get('doemu', 0)} round(s) of this sitting (medians "
        "below), one "
        "phase per invocation, so each phase again had a fresh server, right after this "
        "harness's runs of the same phase, with the same windows "
        f"({win.get('duration_s', 'n/a')} s after {win.get('warmup_s', 'n/a')} s warm-up; RSS "
        "idle 5 s). Absolute throughput differs where the clients differ (wrk's C client "
        "against aiohttp, whose per-request cost is in the loop: at c=1 it adds the same "
        "fraction of a millisecond to both servers, which pulls the ratio toward 1); what "
        "should agree is the doemu / workerd ratio, and on rows with an absolute target the "
        "doemu value.\n"
    )
    out.append(
        "| row | doemu (this) | workerd (this) | ratio (this) | doemu (shared) | "
        "workerd (shared) | ratio (shared) | apart | server CPU % doemu / workerd "
        "(this; shared) |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|:---:|---|")
    for r in cross["rows"]:
        d = r["digits"]
        rt = "n/a" if r.get("ratio_ours") is None else f"{r['ratio_ours']:.2f}"
        rs = "n/a" if r.get("ratio_shared") is None else f"{r['ratio_shared']:.2f}"
        apart = "n/a" if r.get("apart") is None else f"{r['apart']:.2f}×"
        if r.get("differs"):
            apart = f"**{apart}**"
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
            f"{fmt(r['doemu_shared'], d)} | {fmt(r['workerd_shared'], d)} | {rs} | {apart} | "
            f"{cpu} |"
        )
    out.append("")
    out.append(
        f"**apart** is how far the two harnesses' ratios are apart (on rows with an absolute "
        f"target, the larger of that and how far their doemu values are apart); bold above "
        f"{_pct(cross)}: {cross['differ']} of {cross['compared']} rows. Where a server runs well "
        "below 100 % of a core under one harness but not the other (server CPU columns), that "
        "harness's client sets the pace. Runs on this shared machine drift: the cold and alarm "
        "rows are mostly kernel file-system time, which changes with the disk's other load, for "
        "either server, and a p99 of 100 alarms is one slow object creation."
    )
    if cross.get("stalls"):
        out.append(
            " Single stalls in the shared harness's windows: " + "; ".join(cross["stalls"]) + "."
        )
    out.append("")
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
    ap.add_argument(
        "--allow-dirty",
        action="store_true",
        help="write --out even if it would not describe the code measured, as a marked draft",
    )
    args = ap.parse_args()
    s = compute(args.results)
    (args.results / "targets.json").write_text(json.dumps(s, indent=1) + "\n")
    if args.targets_only:
        sys.stdout.write(json.dumps({"misses": s["misses"]}) + "\n")
        return
    text = render(args.results, s)
    if args.out:
        env_file = args.results / "env.json"
        env = json.loads(env_file.read_text()) if env_file.exists() else {}
        refused = provenance.problems(env.get("provenance", {}))
        if refused and not args.allow_dirty:
            for problem in refused:
                sys.stderr.write(f"refusing to write {args.out}: {problem}\n")
            sys.stderr.write(
                "BENCHMARKS.md must describe the commit it measured: commit, then re-run `make "
                "bench` (or BENCH_ALLOW_DIRTY=1 for a draft that says so)\n"
            )
            sys.exit(1)
        if refused:
            text = _draft_banner(refused) + text
        args.out.write_text(text)
    else:
        sys.stdout.write(text)


def _draft_banner(refused: list[str]) -> str:
    lines = "".join(f"> * {p}\n" for p in refused)
    return (
        "> **Draft, not a report** (written with `BENCH_ALLOW_DIRTY=1`): these numbers do not "
        "describe this tree's code, because\n" + lines + "\n"
    )


if __name__ == "__main__":
    main()
