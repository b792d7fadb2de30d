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
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import HttpClient, HttpError, Server, free_port, latency_ms, log, tree_cpu_s

REPO = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
VARIANTS = ("doemu", "doemu_process", "miniflare")
LABELS = {
    "doemu": "doemu (power)",
    "doemu_process": "doemu (process)",
    "miniflare": "Miniflare",
}
#: (row, label, method, path(i), body(i), concurrency, judged against Miniflare)
ROWS: list[tuple[str, str, str, Callable[[int], str], Callable[[int], bytes], int, bool]] = [
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
    if variant == "miniflare":
        return f"node {REPO}/bench/peer-bindings/serve.mjs {port} {state}"
    durability = "power" if variant == "doemu" else "process"
    return (
        f"{REPO}/.venv/bin/doemu dev --config {REPO}/bench/app/bindings/wrangler.toml "
        f"--port {port} --persist-to {state} --durability {durability} --log-level warning"
    )


async def wait_ready(port: int, deadline_s: float = 60.0) -> None:
    client = HttpClient(port, timeout=2)
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline:
            try:
                status, _ = await client.request("GET", "/obj/__bench_ready__/ping")
                if status == 200:
                    return
            except (OSError, TimeoutError, HttpError):
                pass
            await asyncio.sleep(0.05)
    finally:
        client.close()
    raise RuntimeError(f"no server answered on port {port} within {deadline_s} s")


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


async def closed_loop(
    port: int,
    method: str,
    path: Callable[[int], str],
    body: Callable[[int], bytes],
    concurrency: int,
    seconds: float,
    server_pid: int,
) -> dict[str, Any]:
    """``concurrency`` clients back to back for ``seconds``: rps, latency, errors, server CPU."""
    latencies: list[float] = []
    errors = 0
    issued = 0
    deadline = time.perf_counter() + seconds

    async def client_loop() -> None:
        nonlocal errors, issued
        client = HttpClient(port, timeout=30)
        try:
            while time.perf_counter() < deadline:
                i = issued
                issued += 1
                started = time.perf_counter()
                try:
                    status, _ = await client.request(method, path(i), body(i))
                except (TimeoutError, OSError, HttpError):
                    errors += 1
                    continue
                if status == 200:
                    latencies.append(time.perf_counter() - started)
                else:
                    errors += 1
        finally:
            client.close()

    cpu0 = tree_cpu_s(server_pid)
    t0 = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    cpu1 = tree_cpu_s(server_pid)
    return {
        "rps": round(len(latencies) / elapsed, 1),
        "ok": len(latencies),
        "errors": errors,
        **latency_ms(latencies),
        "server_cpu_pct": round(100 * (cpu1 - cpu0) / elapsed, 1),
    }


async def run_variant(
    variant: str, run: int, work: Path, warmup: float, duration: float
) -> dict[str, Any]:
    port = free_port()
    state = work / f"bindings-{variant}-{run}"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    server = Server(command(variant, port, state), port, log_path=work / f"{variant}-{run}.log")
    server.start()
    try:
        await wait_ready(port)
        await seed(port)
        rows: dict[str, Any] = {}
        for row, _label, method, path, body, concurrency, _judged in ROWS:
            await closed_loop(port, method, path, body, concurrency, warmup, server.pid)
            rows[row] = await closed_loop(
                port, method, path, body, concurrency, duration, server.pid
            )
            log(
                f"{variant} run {run} {row}: {rows[row]['rps']} req/s, p50 {rows[row]['p50_ms']} ms"
            )
        return {"variant": variant, "run": run, "cmd": server.cmd, "rows": rows}
    finally:
        server.stop()


def summarize(results: Path) -> str:
    """The BENCHMARKS.md section from every ``bindings-*.json`` in ``results``."""
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for path in sorted(results.glob("bindings-*.json")):
        data = json.loads(path.read_text())
        runs[data["variant"]].append(data)
    if not any(runs.values()):
        return ""

    def med(variant: str, row: str, key: str) -> float | None:
        values = [r["rows"][row][key] for r in runs[variant] if row in r["rows"]]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

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
        for variant in VARIANTS:
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
        v: sum(r["rows"][row]["errors"] for r in runs[v] for row in r["rows"]) for v in VARIANTS
    }
    out.append("")
    out.append(
        "Errors (non-200 answers or failed requests) over every row and run: "
        + ", ".join(f"{LABELS[v]} {errors[v]}" for v in VARIANTS)
        + ".\n"
    )
    return "\n".join(out) + "\n"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--summarize-only", action="store_true")
    args = parser.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    if not args.summarize_only:
        if shutil.which("node") is None:
            sys.exit("bindingsload: node is required for the Miniflare peer")
        for run in range(1, args.runs + 1):
            order = VARIANTS[run % 3 :] + VARIANTS[: run % 3]  # rotate who goes first
            for variant in order:
                result = await run_variant(variant, run, args.work, args.warmup, args.duration)
                path = args.results / f"bindings-{variant}-{run}.json"
                path.write_text(json.dumps(result, indent=1))
    (args.results / "bindings.md").write_text(summarize(args.results))
    log(f"wrote {args.results / 'bindings.md'}")


if __name__ == "__main__":
    asyncio.run(main())
