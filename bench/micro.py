#!/usr/bin/env python3
"""doemu micro-benchmarks for what the contract does not cover (one run, fresh state).

    python bench/micro.py --work DIR --template DIR_100K --out results/micro-1.json

* ``stash``: ``self.stash(snapshot)`` inside ``run_fiber`` on an ``agents.Agent``
  (bench/app/stash), a 1 KB snapshot, timed by a WebSocket client from its request to the
  fiber's answer: one stash per turn, each followed by a frame to the client that leaves only
  once the stash is durable (at power, after its fsync), and all in one turn (one commit, one
  frame).
* ``evicted_cold``: objects with storage are evicted through the admin API, then the first
  ``get`` (constructor + SQL read) is timed; a second ``get`` for contrast.
* ``rss_per_object``: RSS of a fresh server, after N objects are live, and after all are evicted.
* ``startup_100k``: a persist dir of 100,000 objects and 10,000 overdue alarms (gen_persist.py):
  time from spawn to the admin health route answering, and until every alarm has fired (its row
  gone from ``metadata.sqlite``'s ``_cf_ALARM``, which doemu deletes only after the handler
  succeeded); the same spawn-to-ready on an empty dir for contrast.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import (
    HttpClient,
    HttpError,
    Server,
    install_fast_loop,
    latency_ms,
    log,
    tree_rss_mb,
)
from wsclient import WebSocketClient

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "bench" / "app" / "wrangler.toml"
STASH_APP = REPO / "bench" / "app" / "stash" / "wrangler.toml"
NS_DIR = "doemu-bench-BenchDO"
HEALTH = "/__doemu/api/health"


def doemu_cmd(args: argparse.Namespace, state: Path, app: Path = APP) -> str:
    return (
        f"exec {args.doemu} dev --config {app} --port {args.port} --persist-to {state} "
        f"--log-level warning --durability {args.durability}"
    )


class Doemu:
    def __init__(self, args: argparse.Namespace, state: Path, app: Path = APP) -> None:
        self.server = Server(doemu_cmd(args, state, app), args.port, Path(args.server_log))
        self.http = HttpClient(args.port, timeout=60.0)

    async def __aenter__(self) -> Doemu:
        self.server.start()
        self.ready_s = await self.http.wait_ready(HEALTH, proc=self.server, interval=0.005)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.http.close()
        t = time.perf_counter()
        self.server.stop(grace=30.0)
        self.stop_s = time.perf_counter() - t

    async def health(self) -> dict[str, Any]:
        status, body = await self.http.get(HEALTH)
        assert status == 200, body
        return dict(json.loads(body))


async def stash_run(ws: WebSocketClient, n: int, size: int, mode: str) -> dict[str, Any]:
    """One fiber of ``n`` stashes; timed from the request to the ``done`` frame."""
    t0 = time.perf_counter()
    ws.send_text(json.dumps({"n": n, "bytes": size, "mode": mode}))
    frames = 0
    while True:
        opcode, data = await ws.receive()
        if opcode != 0x1:
            raise HttpError(f"unexpected WebSocket opcode {opcode}")
        text = data.decode()
        if text.startswith('{"done"'):
            elapsed = time.perf_counter() - t0
            if json.loads(text)["done"] != n:
                raise HttpError(f"the fiber answered {text}, not {n} steps")
            break
        if not text.startswith("{"):  # a step's frame (the rest: the agent protocol's)
            frames += 1
    want = n if mode == "turn" else 0
    if frames != want:
        raise HttpError(f"{frames} step frames for {n} stashes in mode {mode}")
    return {"elapsed_s": elapsed, "per_s": n / elapsed}


async def stash(args: argparse.Namespace, state: Path) -> dict[str, Any]:
    """``self.stash()`` inside ``run_fiber`` (bench/app/stash): every stash's frame (turn mode)
    or the fiber's answer (batch) has left the object when the clock stops."""
    out: dict[str, Any] = {
        "what": "self.stash(snapshot) in run_fiber; turn: a frame per stash, each its own turn"
    }
    async with Doemu(args, state, STASH_APP):
        ws = await WebSocketClient.connect(args.port, "/agents/stash-bench/stash-agent")
        try:
            await stash_run(ws, 2000, args.stash_bytes, "turn")  # warm-up: object live
            for mode in ("turn", "batch"):
                runs = [await stash_run(ws, args.stash_n, args.stash_bytes, mode)
                        for _ in range(3)]  # fmt: skip
                out[f"per_{mode}"] = {
                    "n": args.stash_n,
                    "snapshot_bytes": args.stash_bytes,
                    "per_s_runs": [round(r["per_s"]) for r in runs],
                    "per_s": round(statistics.median(r["per_s"] for r in runs)),
                }
        finally:
            await ws.close(1000)
    log(
        f"stash: {out['per_turn']['per_s']}/s one per turn with its frame, "
        f"{out['per_batch']['per_s']}/s in one turn"
    )
    return out


async def evicted_cold(args: argparse.Namespace, state: Path) -> dict[str, Any]:
    n = args.evict_objects
    names = [f"evict-{i}" for i in range(n)]
    async with Doemu(args, state) as d:
        res = await d.http.fanout("POST", [f"/obj/{nm}/incr" for nm in names], 16)
        assert all(s == 200 for s, _ in res), "could not create the objects"
        cold, warm, errors = [], [], 0
        for nm in names:
            status, body = await d.http.post(f"/__doemu/api/objects/BENCH/{nm}/evict")
            if status != 200:
                errors += 1
                continue
            t = time.perf_counter()
            status, body = await d.http.get(f"/obj/{nm}/get")
            if status == 200 and body == b"1":
                cold.append(time.perf_counter() - t)
            else:
                errors += 1
            t = time.perf_counter()
            status, _ = await d.http.get(f"/obj/{nm}/get")
            if status == 200:
                warm.append(time.perf_counter() - t)
    out = {
        "objects": n,
        "errors": errors,
        "first_get_after_evict": latency_ms(cold),
        "second_get": latency_ms(warm),
    }
    log(f"evicted object, first get p50 {out['first_get_after_evict'].get('p50_ms')} ms")
    return out


async def rss_per_object(args: argparse.Namespace, state: Path) -> dict[str, Any]:
    n = args.rss_objects
    async with Doemu(args, state) as d:
        await asyncio.sleep(1.0)
        base = tree_rss_mb(d.server.pid)["total_mb"]
        res = await d.http.fanout("POST", [f"/obj/mem-{i}/incr" for i in range(n)], 16)
        ok = sum(1 for s, _ in res if s == 200)
        await asyncio.sleep(0.5)
        live = (await d.health())["live_objects"]
        live_mb = tree_rss_mb(d.server.pid)["total_mb"]
        await d.http.post("/__doemu/api/evict-all")
        await asyncio.sleep(2.0)  # the closes run off the loop; freed memory goes back after
        after = (await d.health())["live_objects"]
        evicted_mb = tree_rss_mb(d.server.pid)["total_mb"]
    out = {
        "objects": n,
        "created_ok": ok,
        "live_after_create": live,
        "rss_fresh_mb": base,
        "rss_live_mb": live_mb,
        "rss_after_evict_all_mb": evicted_mb,
        "live_after_evict_all": after,
        "kb_per_live_object": round((live_mb - base) * 1024 / max(1, live), 1),
        "kb_per_evicted_object": round((evicted_mb - base) * 1024 / max(1, ok), 1),
        "evicted_over_fresh": round(evicted_mb / base, 3) if base else None,
        "note": "RSS deltas over the fresh server; freed memory the allocator keeps counts as used",
    }
    log(
        f"RSS per live object {out['kb_per_live_object']} KB, "
        f"per evicted {out['kb_per_evicted_object']} KB"
    )
    return out


def _alarm_rows(meta: Path) -> int | None:
    try:
        db = sqlite3.connect(f"file:{meta}?mode=ro", uri=True, timeout=1.0)
        try:
            return int(db.execute("SELECT count(*) FROM _cf_ALARM").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return None


def _prepare_copy(template: Path, dst: Path, alarms: int) -> None:
    """Hard links for objects that are never opened; real copies for the ones that change."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(template, dst, copy_function=os.link)
    gen = json.loads((template / "gen.json").read_text())
    meta = dst / NS_DIR / "metadata.sqlite"
    meta.unlink()
    shutil.copyfile(template / NS_DIR / "metadata.sqlite", meta)
    db = sqlite3.connect(f"file:{meta}?mode=ro", uri=True)
    ids = [r[0] for r in db.execute("SELECT actor_id FROM _cf_ALARM")]
    db.close()
    assert len(ids) == gen["alarms"] == alarms, (len(ids), gen)
    for hex_id in ids:
        f = dst / NS_DIR / f"{hex_id}.sqlite"
        f.unlink()
        shutil.copyfile(template / NS_DIR / f"{hex_id}.sqlite", f)


async def startup(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    template = args.template
    gen = json.loads((template / "gen.json").read_text())
    empty = work / "empty"
    async with Doemu(args, empty) as d:
        empty_ready = d.ready_s
    state = work / "big"
    t = time.perf_counter()
    await asyncio.to_thread(_prepare_copy, template, state, gen["alarms"])
    prep_s = time.perf_counter() - t
    meta = state / NS_DIR / "metadata.sqlite"
    files = sum(1 for _ in (state / NS_DIR).glob("*.sqlite")) - 1
    async with Doemu(args, state) as d:
        t0 = d.server.started_at
        ready = d.ready_s
        fired_at, rows = None, None
        while time.perf_counter() - t0 < args.startup_cap:
            rows = _alarm_rows(meta)
            if rows == 0:
                fired_at = time.perf_counter() - t0
                break
            await asyncio.sleep(0.01)
        health = await d.health()
        rss = tree_rss_mb(d.server.pid)["total_mb"]
        sample = await d.http.fanout("GET", [f"/obj/{nm}/alarmlog" for nm in gen["alarm_names"]], 4)
        fired_ok = sum(1 for s, b in sample if s == 200 and json.loads(b)[-1]["fired"] is not None)
    shutil.rmtree(state, ignore_errors=True)
    out = {
        "graceful_stop_s": round(d.stop_s, 2),
        "objects_on_disk": files,
        "overdue_alarms": gen["alarms"],
        "spawn_to_ready_s": round(ready, 3),
        "spawn_to_ready_empty_dir_s": round(empty_ready, 3),
        "spawn_to_all_alarms_fired_s": None if fired_at is None else round(fired_at, 3),
        "alarms_left": rows,
        "pending_alarms_reported": health.get("pending_alarms"),
        "sampled_alarm_objects_fired": f"{fired_ok}/{len(sample)}",
        "rss_after_mb": rss,
        "prepare_copy_s": round(prep_s, 1),
        "note": "ready = GET /__doemu/api/health answers 200 (5 ms polling); page cache warm",
    }
    log(
        f"start-up with {files} objects: ready {out['spawn_to_ready_s']} s "
        f"(empty dir {out['spawn_to_ready_empty_dir_s']} s), all {gen['alarms']} alarms fired "
        f"after {out['spawn_to_all_alarms_fired_s']} s"
    )
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    work: Path = args.work
    os.makedirs(work, exist_ok=True)
    out: dict[str, Any] = {
        "meta": {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "durability": args.durability}
    }
    t0 = time.perf_counter()
    for part in args.parts.split(","):
        state = work / part
        shutil.rmtree(state, ignore_errors=True)
        if part == "stash":
            out["stash"] = await stash(args, state)
        elif part == "evicted_cold":
            out["evicted_cold"] = await evicted_cold(args, state)
        elif part == "rss":
            out["rss_per_object"] = await rss_per_object(args, state)
        elif part == "startup":
            if args.template is None:
                out["startup_100k"] = {"skipped": "no --template"}
            else:
                out["startup_100k"] = await startup(args, state)
        shutil.rmtree(state, ignore_errors=True)
    out["meta"]["total_s"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--work", type=Path, required=True, help="scratch dir for persist dirs")
    ap.add_argument("--template", type=Path, help="dir made by gen_persist.py (startup part)")
    ap.add_argument("--port", type=int, default=8803)
    ap.add_argument("--doemu", default=str(REPO / ".venv" / "bin" / "doemu"))
    ap.add_argument("--server-log", default=os.devnull)
    ap.add_argument("--durability", choices=("power", "process"), default="power")
    ap.add_argument("--parts", default="stash,evicted_cold,rss,startup")
    ap.add_argument("--stash-n", type=int, default=20000)
    ap.add_argument("--stash-bytes", type=int, default=1024)
    ap.add_argument("--evict-objects", type=int, default=100)
    ap.add_argument("--rss-objects", type=int, default=10000)
    ap.add_argument("--startup-cap", type=float, default=300.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    install_fast_loop()
    res = asyncio.run(main_async(args))
    text = json.dumps(res, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
