#!/usr/bin/env python3
"""Builds a doemu persist dir holding N objects of the bench app, M of them with an overdue alarm.

    .venv/bin/python bench/gen_persist.py --out DIR [--objects 100000] [--alarms 10000]

Run with the project's venv: it uses doemu's own id derivation and value encoding. The files are
not synthesised by hand. A real ``doemu dev`` serves the bench app once and makes two template
objects through the contract (one ``incr``; one ``incr`` plus an ``alarm``), then stops
gracefully, so the object files and ``metadata.sqlite`` have exactly the runtime's format. Each
generated object is a copy of a template whose stored name (and, for alarm objects, stored alarm
time) is replaced in place by a value of the same encoded length, and ``_cf_ALARM`` gets one row per
alarm object. Every alarm is overdue by 60 s or more when the start-up measurement begins.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path

from benchlib import HttpClient, Server, free_port, log

from doemu import clone
from doemu.ids import IdFactory

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "bench" / "app" / "wrangler.toml"
WORKER, CLASS = "doemu-bench", "BenchDO"
NAME_WIDTH = 8  # names are obj-00000000 … (one encoded length for all)


def _name(prefix: str, i: int) -> str:
    return f"{prefix}-{i:0{NAME_WIDTH}d}"


async def _make_templates(state: Path, doemu: str) -> None:
    port = free_port()
    server = Server(
        f"exec {doemu} dev --config {APP} --port {port} --persist-to {state} --log-level warning",
        port,
    )
    server.start()
    http = HttpClient(port)
    try:
        await http.wait_ready("/__doemu/api/health", proc=server)
        for path in (f"/obj/{_name('tpl', 0)}/incr", f"/obj/{_name('tpl', 1)}/incr"):
            status, body = await http.post(path)
            assert status == 200, body
        status, body = await http.post(f"/obj/{_name('tpl', 1)}/alarm?ms=86400000")
        assert status == 200, body
    finally:
        http.close()
        server.stop()  # graceful: WAL checkpointed into the .sqlite files


def _replace_once(data: bytes, old: bytes, new: bytes, what: str) -> bytes:
    if data.count(old) != 1:
        raise SystemExit(f"template format changed: {what} found {data.count(old)} times, not once")
    assert len(old) == len(new)
    return data.replace(old, new)


def generate(out: Path, objects: int, alarms: int, doemu: str) -> dict[str, object]:
    t_start = time.perf_counter()
    if out.exists():
        shutil.rmtree(out)
    tpl_state = out.parent / (out.name + ".templates")
    if tpl_state.exists():
        shutil.rmtree(tpl_state)
    asyncio.run(_make_templates(tpl_state, doemu))
    unique_key = f"{WORKER}-{CLASS}"
    ids = IdFactory(unique_key)
    src = tpl_state / unique_key
    plain = (src / f"{ids.from_name(_name('tpl', 0))}.sqlite").read_bytes()
    armed = (src / f"{ids.from_name(_name('tpl', 1))}.sqlite").read_bytes()
    meta = sqlite3.connect(src / "metadata.sqlite")
    (tpl_alarm,) = meta.execute("SELECT scheduled_time FROM _cf_ALARM").fetchone()
    meta.close()
    dst = out / unique_key
    dst.mkdir(parents=True)
    shutil.copyfile(src / "metadata.sqlite", dst / "metadata.sqlite")
    overdue_base = int(time.time() * 1000) - 60_000 - alarms
    rows = []
    for i in range(objects):
        name = _name("obj", i)
        hex_id = str(ids.from_name(name))
        template, tpl_name = (armed, _name("tpl", 1)) if i < alarms else (plain, _name("tpl", 0))
        data = _replace_once(template, clone.encode(tpl_name), clone.encode(name), "stored name")
        if i < alarms:
            when = overdue_base + i
            data = _replace_once(
                data, clone.encode(float(tpl_alarm)), clone.encode(float(when)), "stored alarm"
            )
            rows.append((hex_id, when, name))
        (dst / f"{hex_id}.sqlite").write_bytes(data)
    meta = sqlite3.connect(dst / "metadata.sqlite", isolation_level=None)
    meta.execute("BEGIN")
    meta.execute("DELETE FROM _cf_ALARM")
    meta.executemany(
        "INSERT INTO _cf_ALARM (actor_id, scheduled_time, actor_name) VALUES (?, ?, ?)", rows
    )
    meta.execute("COMMIT")
    meta.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    meta.close()
    shutil.rmtree(tpl_state)
    info = {
        "objects": objects,
        "alarms": alarms,
        "alarm_names": [_name("obj", i) for i in (0, alarms // 2, alarms - 1)],
        "overdue_from_ms": overdue_base,
        "bytes_per_object": len(plain),
        "generate_s": round(time.perf_counter() - t_start, 1),
    }
    (out / "gen.json").write_text(json.dumps(info))
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--alarms", type=int, default=10_000)
    ap.add_argument("--doemu", default=str(REPO / ".venv" / "bin" / "doemu"))
    args = ap.parse_args()
    info = generate(args.out.resolve(), args.objects, args.alarms, args.doemu)
    log(
        f"generated {info['objects']} objects ({info['alarms']} with alarms) "
        f"in {info['generate_s']} s"
    )
    sys.stdout.write(json.dumps(info) + "\n")


if __name__ == "__main__":
    main()
