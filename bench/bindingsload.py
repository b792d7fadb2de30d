"""The bindings rows of ``make bench`` (phase k): KV, D1 and R2 on doemu beside Miniflare.

The same routes are served by ``bench/app/bindings`` on ``doemu dev`` (at power durability, the
one judged, and at process durability) and by ``bench/peer-bindings`` on Miniflare (what
``wrangler dev`` runs; its KV, D1 and R2 persisted to disk as ``wrangler dev --persist-to`` does,
with no fsync). Every variant runs on a fresh server and fresh state, the variants interleaved
run by run; each row is a closed loop (warm-up, then a measured window) of:

=================  ============================================================  ===========
row                request                                                       concurrency
=================  ============================================================  ===========
kv_get             ``GET /kv/get?k=key-N`` (100 keys of 100 B, seeded)           16
kv_put             ``POST /kv/put?k=new-N`` with 100 B                            16
d1_get             ``GET /d1/get?id=N``: ``SELECT v FROM items WHERE id = ?``    16
                   (1,000 rows, seeded)
d1_insert          ``POST /d1/insert``: ``INSERT INTO log (v) VALUES (?)``       16
r2_put_1mib        ``PUT /r2/put?k=obj-N`` with 1 MiB                             4
r2_get_1mib        ``GET /r2/get?k=obj-N`` (20 objects of 1 MiB, seeded)          4
=================  ============================================================  ===========

It writes ``bindings-<variant>-<run>.json`` to the results folder and ``bindings.md``, the
section ``bench/summarize.py`` appends to BENCHMARKS.md: medians, and doemu / Miniflare ratios
(targets: at least 1.0 for the KV and D1 rows at power durability).

    bench/.venv/bin/python bench/bindingsload.py --results bench/results --work /tmp/w
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import (
    PEER_LABELS,
    PEER_VARIANTS,
    HttpClient,
    closed_loop,
    load_peer_runs,
    log,
    peer_arguments,
    peer_command,
    row_median,
    run_peers,
    start_fresh,
    wait_pinged,
)

MIB = 1024 * 1024
#: (row, label, method, path(i), body(i), concurrency, judged against Miniflare)
Row = tuple[str, str, str, Callable[[int], str], Callable[[int], bytes], int, bool]
ROWS: list[Row] = [
    ("kv_get", "KV get (c=16)", "GET", lambda i: f"/kv/get?k=key-{i % 100}",
     lambda i: b"", 16, True),
    ("kv_put", "KV put, 100 B (c=16)", "POST", lambda i: f"/kv/put?k=new-{i}",
     lambda i: b"v" * 100, 16, True),
    ("d1_get", "D1 query by key (c=16)", "GET", lambda i: f"/d1/get?id={i % 1000}",
     lambda i: b"", 16, True),
    ("d1_insert", "D1 insert (c=16)", "POST", lambda i: "/d1/insert",
     lambda i: b"row", 16, True),
    ("r2_put_1mib", "R2 put, 1 MiB (c=4)", "PUT", lambda i: f"/r2/put?k=obj-{i % 20}",
     lambda i: b"x" * MIB, 4, False),
    ("r2_get_1mib", "R2 get, 1 MiB (c=4)", "GET", lambda i: f"/r2/get?k=obj-{i % 20}",
     lambda i: b"", 4, False),
]  # fmt: skip


def command(variant: str, port: int, state: Path) -> str:
    return peer_command(variant, port, state, app="bindings", peer="serve.mjs")


async def seed(port: int) -> None:
    client = HttpClient(port, timeout=60)
    try:
        for i in range(100):
            await client.request("POST", f"/kv/put?k=key-{i}", b"v" * 100)
        status, body = await client.request("POST", "/d1/seed?n=1000")
        assert status == 200, body
        for i in range(20):
            status, body = await client.request("PUT", f"/r2/put?k=obj-{i}", b"x" * MIB)
            assert status == 200, body
    finally:
        client.close()


async def measure(port: int, pid: int, row: Row, seconds: float) -> dict[str, Any]:
    """One row's closed loop: its concurrency of clients back to back for ``seconds``."""
    _row, _label, method, path, body, concurrency, _judged = row
    return await closed_loop(
        lambda: HttpClient(port, timeout=30), method, path, concurrency, seconds,
        server_pid=pid, body_fn=body,
    )  # fmt: skip


async def run_variant(variant: str, run: int, args: argparse.Namespace) -> dict[str, Any]:
    server = start_fresh(lambda port, state: command(variant, port, state), args.work,
                         f"bindings-{variant}-{run}")  # fmt: skip
    try:
        await wait_pinged(server, 0.05)
        await seed(server.port)
        rows: dict[str, Any] = {}
        for row in ROWS:
            await measure(server.port, server.pid, row, args.warmup)
            rows[row[0]] = found = await measure(server.port, server.pid, row, args.duration)
            log(f"{variant} run {run} {row[0]}: {found['rps']} req/s, p50 {found['p50_ms']} ms")
        return {"variant": variant, "run": run, "cmd": server.cmd, "rows": rows}
    finally:
        server.stop()


def summarize(results: Path) -> str:
    """The BENCHMARKS.md section from every ``bindings-*.json`` in ``results``."""
    runs = load_peer_runs(results, "bindings")
    if not any(runs.values()):
        return ""

    def med(variant: str, row: str, key: str) -> float | None:
        return row_median(runs, variant, row, key)

    out = [
        "## Bindings: KV, D1 and R2 beside Miniflare (phase k)\n",
        "`bench/bindingsload.py`: the same routes on `doemu dev` (`bench/app/bindings`) and on "
        "Miniflare (`bench/peer-bindings`, what `wrangler dev` runs, KV/D1/R2 persisted to disk "
        f"without fsync), {max(len(r) for r in runs.values())} runs each, a fresh server and "
        "state per run; medians of requests per second (p50 latency in ms). Ratios are doemu / "
        "Miniflare throughput; the KV and D1 rows are judged at doemu's power durability "
        "(target ≥ 1.0×), where every write is fsynced before its answer (Miniflare's are not).\n",
        "| row | doemu (power) | doemu (process) | Miniflare | power / Miniflare | "
        "process / Miniflare | target met |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row, label, *_rest, judged in ROWS:
        cells = []
        for variant in PEER_VARIANTS:
            rps, p50 = med(variant, row, "rps"), med(variant, row, "p50_ms")
            cells.append("—" if rps is None else f"{rps:,.0f} ({p50:.2f})")
        ratios = []
        for variant in ("doemu", "doemu_process"):
            ours, theirs = med(variant, row, "rps"), med("miniflare", row, "rps")
            ratios.append(None if not ours or not theirs else ours / theirs)
        shown = ["—" if r is None else f"{r:.2f}×" for r in ratios]
        met = "—" if not judged or ratios[0] is None else ("yes" if ratios[0] >= 1.0 else "no")
        out.append(f"| {label} | {' | '.join(cells)} | {' | '.join(shown)} | {met} |")
    errors = {
        v: sum(r["rows"][row]["errors"] for r in runs[v] for row in r["rows"])
        for v in PEER_VARIANTS
    }
    out.append("")
    out.append(
        "Errors (non-200 answers or failed requests) over every row and run: "
        + ", ".join(f"{PEER_LABELS[v]} {errors[v]}" for v in PEER_VARIANTS)
        + ".\n"
    )
    return "\n".join(out) + "\n"


async def main() -> None:
    parser = peer_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    await run_peers(parser.parse_args(), "bindings", run_variant, summarize)


if __name__ == "__main__":
    asyncio.run(main())
