"""The durable-work rows of ``make bench`` (phase l): Queues and Workflows beside Miniflare.

The same routes are served by ``bench/app/durable`` on ``doemu dev`` (at power durability, the
one judged, and at process durability) and by ``bench/peer-bindings/durable-worker.mjs`` on
Miniflare (``durable-serve.mjs``: what ``wrangler dev`` runs, its workflows persisted to disk).
Both declare the same queue (``max_batch_size`` 100, ``max_batch_timeout`` 1 s, ``max_retries``
3) and the same two workflows; one client drives both. Every variant runs on a fresh server and
fresh state, the variants interleaved run by run. Progress is read from counters the Worker keeps
in module globals (``GET /counts``, ``GET /wf/woke``), which touch neither the queue nor an
instance.

=============  ===================================================================================
row            what is measured
=============  ===================================================================================
queue          ``--messages`` messages sent as ``sendBatch`` of 100 (``POST /q/send?n=100``, 4
               producers in flight) to a consumer that counts each batch and calls ``ackAll()``;
               messages/s = accepted messages / (first send → the consumer has acked them
               all); the producers' own rate and their failed ``sendBatch`` calls (Miniflare
               answers some concurrent ones with a 500) are recorded beside it
workflow       ``--instances`` instances of a workflow of ``--steps`` trivial ``step.do`` plus a
               last step that counts the instance (``POST /wf/create``, 16 creations in flight);
               steps/s = instances × (steps + 1) / (first create → the last instance counted)
wake           an instance runs a step, then ``step.sleep`` of 1.5 s; once it sleeps the server is
               SIGKILLed and stays down until the sleep is over; then it is started and nothing
               is sent to the instance: the row is the time from the start command to the
               instance's next step (its ``Date.now()``, the server's clock), 15 s at most
=============  ===================================================================================

Each throughput row has an unmeasured warm-up (500 messages; 4 instances of 5 steps) first.
Miniflare 4 does not wake a sleeping workflow after a SIGKILL and a restart (observed while
building this row: the instance stays ``running`` and its next step never runs), so its wake
cell says so rather than giving a time.

It writes ``durable-<variant>-<run>.json`` to the results folder and ``durable.md``, the section
``bench/summarize.py`` appends to BENCHMARKS.md.

    bench/.venv/bin/python bench/durableload.py --results bench/results --work /tmp/w
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from benchlib import (
    PEER_LABELS,
    PEER_VARIANTS,
    HttpClient,
    HttpError,
    Server,
    load_peer_runs,
    log,
    peer_arguments,
    peer_command,
    row_median,
    row_values,
    run_peers,
    start_fresh,
    tree_cpu_s,
    wait_pinged,
)

BATCH = 100  # messages per sendBatch, and the consumer's max_batch_size on both servers
PRODUCERS = 4
CREATORS = 16
SLEEP_MS = 1500
WAKE_DEADLINE_S = 15.0
POLL_S = 0.005


def command(variant: str, port: int, state: Path) -> str:
    return peer_command(variant, port, state, app="durable", peer="durable-serve.mjs")


async def get_json(client: HttpClient, path: str) -> Any:
    status, body = await client.request("GET", path)
    if status != 200:
        raise RuntimeError(f"GET {path}: {status} {body[:200]!r}")
    return json.loads(body)


async def wait_count(
    client: HttpClient, key: str, target: int, deadline_s: float
) -> tuple[float | None, int]:
    """Poll ``/counts`` until ``key`` reaches ``target``: (perf_counter then, last value)."""
    deadline = time.perf_counter() + deadline_s
    value = 0
    while time.perf_counter() < deadline:
        value = (await get_json(client, "/counts"))[key]
        if value >= target:
            return time.perf_counter(), value
        await asyncio.sleep(POLL_S)
    return None, value


async def in_flight(paths: list[str], port: int, concurrency: int) -> tuple[float, int]:
    """POST every path, ``concurrency`` at a time: (perf_counter when the last answered, errors)."""
    queue = list(reversed(paths))
    errors = 0

    async def worker() -> None:
        nonlocal errors
        client = HttpClient(port, timeout=60)
        try:
            while queue:
                path = queue.pop()
                try:
                    status, _ = await client.request("POST", path)
                except (TimeoutError, OSError, HttpError):
                    errors += 1
                    continue
                if status != 200:
                    errors += 1
        finally:
            client.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter(), errors


async def queue_row(port: int, pid: int, messages: int, *, measured: bool) -> dict[str, Any]:
    """Send ``messages`` in batches and wait until the consumer has acked every accepted one.

    The target is what the producers had accepted (a ``sendBatch`` answered 200), not what was
    attempted: Miniflare 4 answers some concurrent ``sendBatch`` calls with a 500 ("Queue
    sendBatch failed: Internal Server Error"), and a row that waited for those messages would
    never finish. Failed sends are recorded in the row and printed under the table. A consumer
    that does not catch up within the deadline gives a row marked incomplete (acked of accepted),
    not an abort of the whole bench.
    """
    client = HttpClient(port, timeout=30)
    try:
        base = (await get_json(client, "/counts"))["acked"]
        sends = [f"/q/send?n={BATCH}"] * (messages // BATCH)
        total = len(sends) * BATCH
        deadline_s = 60 + total / 100
        cpu0 = tree_cpu_s(pid)
        t0 = time.perf_counter()
        sending = asyncio.ensure_future(in_flight(sends, port, PRODUCERS))
        # Until the producers are done the target is every attempted message; after, only the
        # accepted ones (a failed batch is never delivered).
        target, acked, done_at = total, 0, None
        deadline = t0 + deadline_s
        while time.perf_counter() < deadline:
            acked = (await get_json(client, "/counts"))["acked"] - base
            if sending.done():
                target = total - sending.result()[1] * BATCH
            if acked >= target:
                done_at = time.perf_counter()
                break
            await asyncio.sleep(POLL_S)
        sent_at, errors = await sending
        target = total - errors * BATCH
        cpu = tree_cpu_s(pid) - cpu0
    finally:
        client.close()
    end = done_at if done_at is not None else time.perf_counter()
    elapsed = end - t0
    result = {
        "messages": total,
        "accepted": target,
        "acked": acked,
        "complete": done_at is not None,
        "messages_per_s": round(min(acked, target) / elapsed, 1),
        "send_messages_per_s": round(target / (sent_at - t0), 1),
        "seconds": round(elapsed, 3),
        "deadline_s": deadline_s,
        "send_errors": errors,
        "server_cpu_pct": round(100 * cpu / elapsed, 1),
    }
    if measured:
        note = "" if done_at is not None else f", INCOMPLETE: {acked} of {target} acked"
        log(
            f"  queue: {result['messages_per_s']} messages/s ({target} accepted of {total}, "
            f"{errors} failed sendBatch, {elapsed:.2f} s{note})"
        )
    return result


async def workflow_row(
    port: int, pid: int, prefix: str, instances: int, steps: int, *, measured: bool
) -> dict[str, Any]:
    client = HttpClient(port, timeout=30)
    try:
        base = (await get_json(client, "/counts"))["completed"]
        creates = [f"/wf/create?id={prefix}-{i}&steps={steps}" for i in range(instances)]
        cpu0 = tree_cpu_s(pid)
        t0 = time.perf_counter()
        creating = asyncio.ensure_future(in_flight(creates, port, CREATORS))
        deadline = 60 + instances * steps / 50
        done_at, completed = await wait_count(client, "completed", base + instances, deadline)
        created_at, errors = await creating
        cpu = tree_cpu_s(pid) - cpu0
        if done_at is None:
            raise RuntimeError(
                f"workflow: {completed - base} of {instances} instances complete within "
                f"{deadline:.0f} s"
            )
        # Correctness, outside the timed window: every instance complete with the sum of 0..n-1.
        wrong = []
        for i in range(instances):
            status = await get_json(client, f"/wf/status?id={prefix}-{i}")
            if status["status"] != "complete" or status["output"] != steps * (steps - 1) // 2:
                wrong.append(status)
    finally:
        client.close()
    elapsed = done_at - t0
    total_steps = instances * (steps + 1)
    result = {
        "instances": instances,
        "steps_per_instance": steps + 1,
        "steps_per_s": round(total_steps / elapsed, 1),
        "instances_per_s": round(instances / elapsed, 2),
        "create_s": round(created_at - t0, 3),
        "seconds": round(elapsed, 3),
        "create_errors": errors,
        "wrong_outputs": len(wrong),
        "server_cpu_pct": round(100 * cpu / elapsed, 1),
    }
    if measured:
        log(f"  workflow: {result['steps_per_s']} steps/s ({total_steps} in {elapsed:.2f} s)")
    return result


async def wake_row(server: Server, port: int) -> dict[str, Any]:
    """Sleep, SIGKILL, stay down past the sleep, start: start command → the next step."""
    client = HttpClient(port, timeout=30)
    try:
        status, body = await client.request("POST", f"/wf/sleeper?id=nap&ms={SLEEP_MS}")
        assert status == 200, body
        created = time.time()
        # Until the first step is done and the sleep has begun: "waiting" on doemu (Cloudflare's
        # word), "running" on Miniflare, which does not distinguish a sleep.
        deadline = time.perf_counter() + 30
        while time.perf_counter() < deadline:
            state = await get_json(client, "/wf/status?id=nap&kind=sleeper")
            if state["status"] in ("waiting", "running"):
                break
            await asyncio.sleep(POLL_S)
        await asyncio.sleep(0.3)  # inside the sleep; its first step is durable by now
    finally:
        client.close()
    server.kill9()
    await asyncio.sleep(max(0.0, created + SLEEP_MS / 1000 + 0.5 - time.time()))
    started_wall = time.time()
    server.start()
    ready_s = await wait_pinged(server, POLL_S)
    woke = None
    probe = HttpClient(port, timeout=5)
    try:
        deadline = time.perf_counter() + WAKE_DEADLINE_S
        while time.perf_counter() < deadline:
            woke = await get_json(probe, "/wf/woke?id=nap")
            if woke is not None:
                break
            await asyncio.sleep(POLL_S)
        final = await get_json(probe, "/wf/status?id=nap&kind=sleeper")
    finally:
        probe.close()
    wake_ms = None if woke is None else round(woke - started_wall * 1000, 1)
    log(f"  wake after restart: {wake_ms} ms (ready after {ready_s * 1000:.0f} ms)")
    return {
        "start_to_wake_ms": wake_ms,
        "start_to_ready_ms": round(ready_s * 1000, 1),
        "woke": woke is not None,
        "status_after": final["status"],
        "deadline_s": WAKE_DEADLINE_S,
    }


async def run_variant(variant: str, run: int, args: argparse.Namespace) -> dict[str, Any]:
    server = start_fresh(lambda port, state: command(variant, port, state), args.work,
                         f"durable-{variant}-{run}")  # fmt: skip
    port = server.port
    try:
        await wait_pinged(server, POLL_S)
        log(f"{variant} run {run}")
        rows: dict[str, Any] = {}
        await queue_row(port, server.pid, 5 * BATCH, measured=False)
        rows["queue"] = await queue_row(port, server.pid, args.messages, measured=True)
        await workflow_row(port, server.pid, "warm", 4, 5, measured=False)
        rows["workflow"] = await workflow_row(
            port, server.pid, "wf", args.instances, args.steps, measured=True
        )
        rows["wake"] = await wake_row(server, port)
        return {"variant": variant, "run": run, "cmd": server.cmd, "rows": rows}
    finally:
        if server.alive():
            server.stop()


def summarize(results: Path) -> str:
    """The BENCHMARKS.md section from every ``durable-*.json`` in ``results``."""
    runs = load_peer_runs(results, "durable")
    if not any(runs.values()):
        return ""

    def values(variant: str, row: str, key: str) -> list[Any]:
        return row_values(runs, variant, row, key)

    def med(variant: str, row: str, key: str) -> float | None:
        return row_median(runs, variant, row, key)

    def sample(row: str, key: str) -> Any:
        for variant in PEER_VARIANTS:
            found = values(variant, row, key)
            if found:
                return found[0]
        return "?"

    out = [
        "## Durable work: Queues and Workflows beside Miniflare (phase l)\n",
        "`bench/durableload.py`: the same queue and workflows on `doemu dev` (`bench/app/durable`)"
        " and on Miniflare (`bench/peer-bindings/durable-worker.mjs`, what `wrangler dev` runs, "
        "workflows persisted to disk), one client, the same batch settings (`max_batch_size` 100,"
        f" `max_batch_timeout` 1 s); {max(len(r) for r in runs.values())} runs each, a fresh "
        "server and state per run; medians. Ratios are doemu / Miniflare.\n",
        "| row | doemu (power) | doemu (process) | Miniflare | power / Miniflare | "
        "process / Miniflare |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    throughput = [
        (
            "queue",
            "messages_per_s",
            f"queue, messages/s: {sample('queue', 'messages')} messages as `sendBatch` of "
            f"{BATCH} ({PRODUCERS} producers), consumer `ackAll()`",
        ),
        (
            "workflow",
            "steps_per_s",
            f"workflow, steps/s: {sample('workflow', 'instances')} instances of "
            f"{sample('workflow', 'steps_per_instance')} trivial `step.do`, created "
            f"{CREATORS} at a time",
        ),
    ]
    for row, key, label in throughput:
        cells = []
        for variant in PEER_VARIANTS:
            value = med(variant, row, key)
            short = [c for c in values(variant, row, "complete") if c is False]
            mark = f" ({len(short)} runs incomplete)" if short else ""
            cells.append("—" if value is None else f"{value:,.0f}{mark}")
        ratios = []
        for variant in ("doemu", "doemu_process"):
            ours, theirs = med(variant, row, key), med("miniflare", row, key)
            ratios.append("—" if not ours or not theirs else f"{ours / theirs:.2f}×")
        out.append(f"| {label} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    wake_cells = []
    for variant in PEER_VARIANTS:
        woke = values(variant, "wake", "woke")
        value = med(variant, "wake", "start_to_wake_ms")
        if not woke:
            wake_cells.append("—")
        elif not any(woke):
            wake_cells.append(f"never (not within {WAKE_DEADLINE_S:.0f} s, {len(woke)} runs)")
        else:
            missed = woke.count(False)
            wake_cells.append(f"{value:,.0f}" + (f" ({missed} runs never)" if missed else ""))
    out.append(
        f"| restart → a sleeping workflow's next step, ms: a {SLEEP_MS / 1000:g} s `step.sleep`"
        " over a SIGKILL, started after its deadline, no request to the instance | "
        + " | ".join(wake_cells)
        + " | — | — |"
    )
    out.append("")
    ready = ", ".join(
        f"{PEER_LABELS[v]} {med(v, 'wake', 'start_to_ready_ms'):,.0f} ms"
        for v in PEER_VARIANTS
        if med(v, "wake", "start_to_ready_ms") is not None
    )
    failed_sends = {
        v: sum(r["rows"].get("queue", {}).get("send_errors") or 0 for r in runs[v])
        for v in PEER_VARIANTS
    }
    errors = {
        v: sum(
            (r["rows"].get("workflow", {}).get("create_errors") or 0)
            + (r["rows"].get("workflow", {}).get("wrong_outputs") or 0)
            for r in runs[v]
        )
        for v in PEER_VARIANTS
    }
    send = ", ".join(
        f"{PEER_LABELS[v]} {med(v, 'queue', 'send_messages_per_s'):,.0f}"
        for v in PEER_VARIANTS
        if med(v, "queue", "send_messages_per_s") is not None
    )
    out.append(
        f"The producers alone (messages/s acknowledged by `sendBatch`): {send}. Start command → "
        f"ready in the wake row: {ready}; the wake time includes it. Miniflare keeps a "
        "sleeping instance `running` across a restart and never runs its next step; doemu's "
        "sleep is an alarm of the instance's object, restored at start-up. `sendBatch` calls "
        "that failed (HTTP 500; the queue row waits only for the accepted messages, and its "
        "rate counts only them) over every run: "
        + ", ".join(f"{PEER_LABELS[v]} {failed_sends[v]}" for v in PEER_VARIANTS)
        + ". Workflow errors (failed creations, instances not complete with the right output): "
        + ", ".join(f"{PEER_LABELS[v]} {errors[v]}" for v in PEER_VARIANTS)
        + ". A run marked incomplete is one whose consumer had not acked every accepted message "
        "within its deadline; its rate is what was acked by then.\n"
    )
    return "\n".join(out) + "\n"


async def main() -> None:
    parser = peer_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--steps", type=int, default=20)
    await run_peers(parser.parse_args(), "durable", run_variant, summarize)


if __name__ == "__main__":
    asyncio.run(main())
