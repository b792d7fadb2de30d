#!/usr/bin/env python3
"""The benchmark contract's load harness (see bench/README.md): one run against one server.

    python bench/load.py --label doemu --port 8801 --out bench/results/doemu-1.json \\
        --server-cmd '.venv/bin/doemu dev --config bench/app/wrangler.toml --port 8801 ...'

It starts the server itself (its own process group), drives it, restarts it (RSS on a fresh
process), SIGKILLs it (restart and alarm recovery) and always stops it at the end. HTTP throughput
rows use wrk (one thread) when it is installed, otherwise the asyncio client; everything wrk cannot
do (WebSocket echo, cold starts, alarms, restarts) uses the small asyncio clients of benchlib.
Prints one JSON document (also written to --out); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import (
    READY_NAME,
    HttpClient,
    HttpError,
    Server,
    closed_loop,
    install_fast_loop,
    latency_ms,
    log,
    run_wrk,
    tree_cpu_s,
    tree_open_files,
    tree_rss_mb,
    wrk_path,
)
from wsclient import WebSocketClient

PHASES = "abcdefgh"


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.port: int = args.port
        self.rid: str = args.run_id
        self.server = Server(
            args.server_cmd, self.port, Path(args.server_log) if args.server_log else None
        )
        self.http = HttpClient(self.port)
        self.use_wrk = wrk_path() is not None and not args.no_wrk

    def path(self, name: str, op: str, query: str = "") -> str:
        return f"/obj/{self.rid}-{name}/{op}{query}"

    async def start(self) -> float:
        self.server.start()
        return await self.http.wait_ready(f"/obj/{READY_NAME}/ping", proc=self.server)

    # -------------------------------------------------------------------- throughput helpers
    async def throughput(
        self,
        label: str,
        method: str,
        concurrency: int,
        *,
        name: str | None = None,
        op: str,
        spread: int = 0,
        spread_name: str = "",
    ) -> dict[str, Any]:
        a = self.args
        if self.use_wrk:
            kw: dict[str, Any] = {"method": method, "connections": concurrency}
            if spread:
                kw.update(
                    path_prefix=f"/obj/{self.rid}-{spread_name}-",
                    path_suffix=f"/{op}",
                    spread=spread,
                )
            else:
                assert name is not None
                kw.update(path=self.path(name, op))
            warm = await asyncio.to_thread(run_wrk, self.port, seconds=a.warmup, **kw)
            res = await asyncio.to_thread(
                run_wrk, self.port, seconds=a.duration, server_pid=self.server.pid, **kw
            )
            res["acked_including_warmup"] = warm["ok"] + res["ok"]
            res["max_in_flight_unacked"] = 2 * concurrency  # a run can end with requests unanswered
        else:
            if spread:
                paths = [self.path(f"{spread_name}-{j + 1}", op) for j in range(spread)]

                def path_fn(i: int) -> str:
                    return paths[i % spread]
            else:
                assert name is not None
                fixed = self.path(name, op)

                def path_fn(i: int) -> str:
                    return fixed

            def factory() -> HttpClient:
                return HttpClient(self.port)

            warm = await closed_loop(factory, method, path_fn, concurrency, a.warmup)
            res = await closed_loop(
                factory, method, path_fn, concurrency, a.duration, server_pid=self.server.pid
            )
            res["acked_including_warmup"] = warm["ok"] + res["ok"]
            res["max_in_flight_unacked"] = 0
        log(
            f"{label}: {res['rps']} req/s  p50 {res['p50_ms']} ms  p99 {res['p99_ms']} ms  "
            f"errors {res['errors']}  non-2xx {res['non_2xx']}  server CPU {res['server_cpu_pct']}%"
        )
        return res

    # -------------------------------------------------------------------- phases
    async def phase_a(self) -> dict[str, Any]:
        return {
            "ping_c1": await self.throughput("ping c=1", "GET", 1, name="ping", op="ping"),
            "ping_c32": await self.throughput("ping c=32", "GET", 32, name="ping", op="ping"),
        }

    async def _value(self, name: str) -> int | None:
        status, body = await self.http.get(self.path(name, "get"))
        return int(body) if status == 200 else None

    @staticmethod
    def _consistent(res: dict[str, Any], value: int) -> None:
        acked = res["acked_including_warmup"]
        res["final_value"] = value
        res["value_consistent"] = acked <= value <= acked + res["max_in_flight_unacked"]

    async def phase_b(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for c in (1, 32):
            name = f"incr-c{c}"
            res = await self.throughput(f"incr 1 object c={c}", "POST", c, name=name, op="incr")
            self._consistent(res, await self._value(name) or 0)
            out[f"incr_one_c{c}"] = res
        n = self.args.spread_objects
        # pre-create the objects: the window measures warm writes spread over n objects
        await self.http.fanout("GET", [self.path(f"spread-{j + 1}", "get") for j in range(n)], 16)
        res = await self.throughput(
            f"incr over {n} objects c=32", "POST", 32, op="incr", spread=n, spread_name="spread"
        )
        got = await self.http.fanout(
            "GET", [self.path(f"spread-{j + 1}", "get") for j in range(n)], 16
        )
        self._consistent(res, sum(int(b) for s, b in got if s == 200))
        res["objects"] = n
        out["incr_spread_c32"] = res
        return out

    async def phase_c(self) -> dict[str, Any]:
        n = self.args.cold_objects
        # "cold" is a new object in a warm process: the first few activations after a start
        # also pay one-time costs (lazy imports, JIT), so they are not measured
        for i in range(self.args.cold_warmup):
            await self.http.get(self.path(f"cold-warmup-{i}", "ping"))
        cold: list[float] = []
        errors = 0
        deadline = time.perf_counter() + 120
        for i in range(n):
            if time.perf_counter() > deadline:
                break
            t = time.perf_counter()
            try:
                status, _ = await self.http.get(self.path(f"cold-{i}", "ping"))
            except (TimeoutError, OSError, HttpError):
                errors += 1
                continue
            if status == 200:
                cold.append(time.perf_counter() - t)
            else:
                errors += 1
        warm: list[float] = []
        for i in range(min(len(cold), self.args.warm_objects)):
            t = time.perf_counter()
            status, _ = await self.http.get(self.path(f"cold-{i}", "ping"))
            if status == 200:
                warm.append(time.perf_counter() - t)
        res = {
            "cold_first_request": {"objects": n, "errors": errors, **latency_ms(cold)},
            "warm_second_request": latency_ms(warm),
        }
        log(
            f"cold first request p50 {res['cold_first_request'].get('p50_ms')} ms, "
            f"second request p50 {res['warm_second_request'].get('p50_ms')} ms"
        )
        return res

    async def phase_d(self) -> dict[str, Any]:
        n, ms = self.args.alarms, self.args.alarm_ms
        names = [f"alarm-{i}" for i in range(n)]
        # one alarm on another object first, so the burst does not pay the alarm machinery's
        # first use after a start
        await self.http.post(self.path("alarm-warmup", "alarm", "?ms=0"))
        for _ in range(100):
            status, body = await self.http.get(self.path("alarm-warmup", "alarmlog"))
            if status == 200 and (json.loads(body) or [{}])[-1].get("fired") is not None:
                break
            await asyncio.sleep(0.01)
        t_client = time.time() * 1000
        sets = await self.http.fanout(
            "POST", [self.path(nm, "alarm", f"?ms={ms}") for nm in names], 10
        )
        set_ok = [json.loads(b) for s, b in sets if s == 200]
        # the server's clock against the client's (both wall clocks on one machine)
        skew = max((abs(r["set"] - t_client) for r in set_ok), default=None)
        await asyncio.sleep(ms / 1000 + 0.2)
        logs: dict[str, list[dict[str, Any]]] = {}
        pending = list(names)
        deadline = time.perf_counter() + 15
        while pending and time.perf_counter() < deadline:
            got = await self.http.fanout("GET", [self.path(nm, "alarmlog") for nm in pending], 10)
            still = []
            for nm, (status, body) in zip(pending, got, strict=True):
                rows = json.loads(body) if status == 200 else []
                if rows and rows[-1]["fired"] is not None:
                    logs[nm] = rows
                else:
                    still.append(nm)
            pending = still
            if pending:
                await asyncio.sleep(0.1)
        lateness = [(r[-1]["fired"] - r[-1]["scheduled"]) / 1000 for r in logs.values()]
        res = {
            "alarms": n,
            "delay_ms": ms,
            "set_ok": len(set_ok),
            "fired": len(logs),
            "fired_early": sum(1 for x in lateness if x < 0),
            "server_vs_client_clock_max_ms": None if skew is None else round(skew, 1),
            **latency_ms(lateness),
        }
        log(
            f"alarms: {len(logs)}/{n} fired, "
            f"lateness p50 {res.get('p50_ms')} ms p99 {res.get('p99_ms')} ms"
        )
        return {"alarm_lateness": res}

    async def ws_echo(self, names: list[str], label: str) -> dict[str, Any]:
        a = self.args
        body = "x" * 32
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(WebSocketClient.connect(self.port, self.path(nm, "ws")) for nm in names),
            return_exceptions=True,
        )
        connect_s = time.perf_counter() - t0
        conns = [r for r in results if isinstance(r, WebSocketClient)]
        errors = len(results) - len(conns)

        async def loop(
            ws: WebSocketClient, idx: int, seconds: float, keep: list[float] | None
        ) -> None:
            nonlocal errors
            deadline = time.perf_counter() + seconds
            seq = 0
            while time.perf_counter() < deadline and seq < a.max_requests:
                msg = f"{idx}:{seq}:{body}"
                t = time.perf_counter()
                ws.send_text(msg)
                try:
                    opcode, data = await ws.receive()
                except (TimeoutError, HttpError, OSError):
                    errors += 1
                    return
                if opcode != 0x1 or data != msg.encode():
                    errors += 1
                    return
                if keep is not None:
                    keep.append(time.perf_counter() - t)
                seq += 1

        await asyncio.gather(*(loop(ws, i, a.warmup, None) for i, ws in enumerate(conns)))
        lat: list[float] = []
        cpu0, c0, t0 = tree_cpu_s(self.server.pid), time.process_time(), time.perf_counter()
        await asyncio.gather(*(loop(ws, i, a.duration, lat) for i, ws in enumerate(conns)))
        elapsed = time.perf_counter() - t0
        cpu1, c1 = tree_cpu_s(self.server.pid), time.process_time()
        codes = await asyncio.gather(*(ws.close(1000) for ws in conns), return_exceptions=True)
        res = {
            "connections": len(names),
            "connected": len(conns),
            "connect_all_s": round(connect_s, 3),
            "errors": errors,
            "close_code_echoed": sum(1 for c in codes if c == 1000),
            "elapsed_s": round(elapsed, 3),
            "roundtrips": len(lat),
            "rps": round(len(lat) / elapsed, 1),
            **latency_ms(lat),
            "client_cpu_pct": round(100 * (c1 - c0) / elapsed, 1),
            "server_cpu_pct": round(100 * (cpu1 - cpu0) / elapsed, 1),
        }
        log(
            f"{label}: {res['rps']} round-trips/s  p50 {res.get('p50_ms')} ms  errors {errors}  "
            f"client CPU {res['client_cpu_pct']}%  server CPU {res['server_cpu_pct']}%"
        )
        return res

    async def phase_e(self) -> dict[str, Any]:
        return {
            "ws_1": await self.ws_echo(["ws-single"], "ws 1 connection"),
            "ws_50_one_object": await self.ws_echo(
                ["ws-shared"] * 50, "ws 50 connections, 1 object"
            ),
            "ws_50_objects": await self.ws_echo(
                [f"ws-{i}" for i in range(50)], "ws 50 connections, 50 objects"
            ),
        }

    async def phase_f(self) -> dict[str, Any]:
        a = self.args
        self.server.stop()
        out: dict[str, Any] = {"fresh_start_to_ready_s": round(await self.start(), 3)}
        await asyncio.sleep(1.0)
        out["before"] = {**tree_rss_mb(self.server.pid), **tree_open_files(self.server.pid)}
        done = 0
        for mark in a.rss_marks:
            t0 = time.perf_counter()
            res = await self.http.fanout(
                "POST", [self.path(f"rss-{i}", "incr") for i in range(done, mark)], 16
            )
            el = time.perf_counter() - t0
            await asyncio.sleep(0.5)
            out[f"after_{mark}"] = {
                **tree_rss_mb(self.server.pid),
                **tree_open_files(self.server.pid),
                "ok": sum(1 for s, _ in res if s == 200),
                "new_objects_per_s": round((mark - done) / el, 1),
            }
            log(
                f"RSS after {mark} objects: {out[f'after_{mark}']['total_mb']} MB, "
                f"{out[f'after_{mark}']['live_objects']} live"
            )
            done = mark
        await asyncio.sleep(a.rss_idle)
        out["after_idle"] = {
            **tree_rss_mb(self.server.pid),
            **tree_open_files(self.server.pid),
            "idle_s": a.rss_idle,
        }
        if a.label.startswith("doemu"):
            status, body = await self.http.get("/__doemu/api/health")
            if status == 200:
                out["doemu_live_objects"] = json.loads(body).get("live_objects")
        return {"rss": out}

    async def phase_g(self) -> dict[str, Any]:
        name = "restart"
        for _ in range(10):
            await self.http.post(self.path(name, "incr"))
        before = await self._value(name)
        self.http.close()
        self.server.kill9()
        t0 = time.perf_counter()
        self.server.start()
        first, value, polls = None, None, 0
        while time.perf_counter() - t0 < 60:
            polls += 1
            probe = HttpClient(self.port, timeout=2.0)
            try:
                status, body = await probe.get(self.path(name, "get"))
                if status == 200:
                    first, value = time.perf_counter() - t0, int(body)
                    break
            except (TimeoutError, OSError, HttpError):
                pass
            finally:
                probe.close()
            await asyncio.sleep(self.args.poll_ms / 1000)
        res = {
            "value_before_kill": before,
            "start_to_first_read_s": None if first is None else round(first, 3),
            "value_after": value,
            "value_survived": value == before,
            "poll_ms": self.args.poll_ms,
            "polls": polls,
        }
        log(
            f"restart after SIGKILL: first read after {res['start_to_first_read_s']} s, "
            f"value {value}/{before}"
        )
        return {"restart": res}

    async def phase_h(self) -> dict[str, Any]:
        name = "alarm-restart"
        status, body = await self.http.post(self.path(name, "alarm", "?ms=3000"))
        scheduled = json.loads(body)["scheduled"]
        await asyncio.sleep(1.0)
        self.http.close()
        self.server.kill9()
        ready = await self.start()  # the probe touches another object only
        wait = max(0.0, scheduled / 1000 - time.time()) + self.args.alarm_restart_slack
        await asyncio.sleep(wait)
        status, body = await self.http.get(self.path(name, "alarmlog"))
        rows = json.loads(body) if status == 200 else []
        fired = rows[-1]["fired"] if rows else None
        res = {
            "restart_ready_s": round(ready, 3),
            "fired_without_request": fired is not None,
            "fired_minus_scheduled_ms": None if fired is None else fired - scheduled,
        }
        log(f"alarm across SIGKILL: fired without a request = {fired is not None}")
        return {"alarm_across_restart": res}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    loop_name = args.loop_name
    run = Run(args)
    out: dict[str, Any] = {
        "meta": {
            "label": args.label,
            "run_id": args.run_id,
            "server_cmd": args.server_cmd,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "http_tool": "wrk -t1" if run.use_wrk else "asyncio client",
            "client": f"python {platform.python_version()} {loop_name}",
            "cpu_count": os.cpu_count(),
        }
    }
    t0 = time.perf_counter()
    try:
        out["meta"]["start_to_ready_s"] = round(await run.start(), 3)
        out["meta"]["rss_at_start"] = tree_rss_mb(run.server.pid)
        for i, phase in enumerate(args.phases):
            if i > 0 and args.fresh_per_phase and phase != "f":  # f restarts by itself
                # A fresh process per phase: what one phase leaves behind must not land in the
                # next one's window. workerd evicts every object idle for ~10 s, and evicting the
                # 1,000 objects that phase b last touched at once stalls its thread for 1-2 s,
                # which then fell into whichever row ran 10 s later (see bench/README.md).
                run.http.close()
                run.server.stop()
                await run.start()
            log(f"[{args.label}] phase {phase}")
            out.update(await getattr(run, f"phase_{phase}")())
    finally:
        run.http.close()
        run.server.stop()
    out["meta"]["total_s"] = round(time.perf_counter() - t0, 1)
    return out


def merge(old: dict[str, Any], new: dict[str, Any], phases: str) -> dict[str, Any]:
    """Results of one more invocation (other phases, same label and run) into an existing file;
    ``meta`` keeps the first invocation's values and lists every invocation's."""
    meta = old.get("meta", {})
    meta.setdefault("invocations", [])
    meta["invocations"].append({"phases": phases, **new["meta"]})
    for key in ("start_to_ready_s", "rss_at_start"):
        meta.setdefault(key, new["meta"].get(key))
    merged = {**old, **{k: v for k, v in new.items() if k != "meta"}}
    merged["meta"] = meta
    return merged


def write_results(res: dict[str, Any], out: str | None, merge_phases: str | None) -> None:
    """Print ``res`` as JSON and write it to ``out``; with ``merge_phases`` (``--merge``), into
    the results ``out`` already holds, as one more invocation of the same run."""
    if merge_phases is not None and out and Path(out).exists():
        res = merge(json.loads(Path(out).read_text()), res, merge_phases)
    text = json.dumps(res, indent=1)
    if out:
        Path(out).write_text(text + "\n")
    sys.stdout.write(text + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--label", required=True, help="doemu or workerd (names the results)")
    ap.add_argument(
        "--server-cmd", required=True, help="shell command that serves the contract on --port"
    )
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--server-log", help="append the server's output here")
    ap.add_argument("--out", help="write the JSON here too")
    ap.add_argument("--phases", default=PHASES)
    ap.add_argument(
        "--duration", type=float, default=3.0, help="measured seconds per throughput row"
    )
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each")
    ap.add_argument("--max-requests", type=int, default=1_000_000)
    ap.add_argument("--spread-objects", type=int, default=1000)
    ap.add_argument("--cold-objects", type=int, default=1000)
    ap.add_argument("--warm-objects", type=int, default=200, help="second request to the first N")
    ap.add_argument(
        "--cold-warmup", type=int, default=20, help="unmeasured new objects before phase c's"
    )
    ap.add_argument("--alarms", type=int, default=100)
    ap.add_argument("--alarm-ms", type=int, default=100)
    ap.add_argument(
        "--rss-marks", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 10000]
    )
    ap.add_argument("--rss-idle", type=float, default=5.0)
    ap.add_argument("--poll-ms", type=float, default=5.0, help="restart probe interval")
    ap.add_argument("--alarm-restart-slack", type=float, default=2.0)
    ap.add_argument("--no-wrk", action="store_true", help="use the asyncio client for HTTP rows")
    ap.add_argument("--run-id", default=None)
    ap.add_argument(
        "--fresh-per-phase",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="restart the server (same state) before every phase (default: on)",
    )
    ap.add_argument(
        "--merge", action="store_true", help="add these phases' results to an existing --out"
    )
    args = ap.parse_args()
    args.run_id = args.run_id or uuid.uuid4().hex[:8]
    if set(args.phases) - set(PHASES):
        ap.error(f"--phases takes letters from {PHASES!r}")
    args.loop_name = install_fast_loop()
    res = asyncio.run(main_async(args))
    write_results(res, args.out, args.phases if args.merge else None)


if __name__ == "__main__":
    main()
