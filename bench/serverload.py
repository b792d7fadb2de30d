#!/usr/bin/env python3
"""The agent-server rows (bench/README.md, "Agent-server rows", phase j): one run against one doemu.

    python bench/serverload.py --label doemu --port 8801 --provider-port 8802 \\
        --server-cmd 'exec .venv/bin/doemu dev --config bench/app/server/wrangler.toml \\
            --port 8801 --persist-to STATE --log-level warning --durability power \\
            --var OPENAI_BASE_URL:http://127.0.0.1:8802/v1 --var OPENAI_API_KEY:bench' \\
        --out bench/results/doemu-1.json --merge

It starts the fake provider (bench/fakeprovider.py) and then the server (bench/app/server: an
``agents.server`` session object per session, the agent ``bench`` answered by the provider),
each in its own process group, and stops both at the end. A run of N provider deltas stores
N + 4 chunks in the session's stream (``run_started``, ``message_start``, N ``text_delta``,
``step_completed``, ``run_completed``), followed by the terminal ``end`` event, after which SSE
responses close.

* provider alone: the same streamed completion read straight from the provider, so the rows
  can show it is not what limits them (``--deltas`` deltas, best of 3).
* fan-out: ``--clients`` SSE clients (``GET /sessions/<id>/sse?fromSequence=0``) on a new
  session — its run will start at sequence 0 — all with their response headers in before
  ``POST /sessions/<id>/start`` asks for ``--deltas`` deltas. Measured from the start request
  sent: to each client's first chunk (``run_started``) and first ``text_delta``, and to its
  terminal event; chunks/s per client = chunks / its time to the terminal, in total = all
  clients' chunks / the last client's. One unmeasured run, then ``--runs`` measured, each on a
  new session; the row is the median run.
* concurrent sessions (``server_sessions``): ``--sessions`` new sessions (20), each watched by
  one SSE client (all with their headers in), then every session's ``/start`` sent at once, each
  asking for ``--session-deltas`` deltas. Chunks/s in total = all chunks / time from the first
  start request sent to the last terminal event; chunk latency = how long a client waited for
  each chunk after its first (from the previous one; chunks that arrive in one read wait 0),
  over every chunk of every session: p50 and p99; and the wait for the first chunk (from its
  session's start request) apart: p50 and p99. One unmeasured round, then ``--runs``
  measured, each on new sessions; the row is the median round. ``--sessions 0`` skips it.
* replay: a new session whose stream holds ``--replay-chunks`` chunks (one run, watched live by
  one SSE client: the build run's rate is recorded too); then ``--replays`` times (plus one
  unmeasured) a new connection reads it all from ``fromSequence=0`` to the terminal event, and
  as often ``/history`` pages of ``--history-limit`` are read on one new keep-alive connection
  (each page parsed, as a client must to know where the next starts).

Every stream is checked after its clock stopped, and any fault fails the run (exit status 1,
nothing written): every client got every chunk exactly once, in order, with gap-free sequences
from the run's start, the deltas are the provider's, the terminal is ``end`` with the run's
output, all clients' events are byte-identical, and replay and ``/history`` give the same
chunks. The SSE clients only buffer bytes while the clock runs (bench/sseclient.py).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import HttpClient, Server, install_fast_loop, latency_ms, log, tree_cpu_s
from load import write_results
from sseclient import StreamedResponse

AGENT_TYPE = "bench"
READY_PATH = "/sessions/__bench_ready__/status"
#: Stream chunks around a run's text deltas: run_started, message_start; step_completed,
#: run_completed.
CHUNKS_AROUND_DELTAS = 4
_DELTA_MARKER = b'"text_delta"'


class CheckError(AssertionError):
    """A stream that is not what the server promised: the benchmark fails."""


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _expected_output(deltas: int) -> str:
    return "".join(f"w{i} " for i in range(deltas))  # what bench/fakeprovider.py streams


def check_run_events(events: list[bytes], deltas: int, first_sequence: int, what: str) -> None:
    """One run's events as a client must see them (see the module docstring), else CheckError."""
    chunks = deltas + CHUNKS_AROUND_DELTAS
    if len(events) != chunks + 1:
        raise CheckError(f"{what}: {len(events)} events, expected {chunks} chunks + the terminal")
    output = _expected_output(deltas)
    for i, raw in enumerate(events[:-1]):
        event = json.loads(raw)
        sequence = first_sequence + i
        if event.get("type") != "chunk" or event.get("sequence") != sequence:
            got = (event.get("type"), event.get("sequence"))
            raise CheckError(f"{what}: event {i} is {got}, expected chunk {sequence}")
        chunk = event["chunk"]
        if i == 0:
            want: dict[str, Any] = {"type": "run_started"}
        elif i == 1:
            want = {"type": "message_start"}
        elif i <= deltas + 1:
            want = {"type": "text_delta", "delta": f"w{i - 2} "}
        elif i == deltas + 2:
            want = {"type": "step_completed"}
        else:
            want = {"type": "run_completed", "output": output}
        if any(chunk.get(k) != v for k, v in want.items()):
            raise CheckError(
                f"{what}: chunk {sequence} is {str(chunk)[:300]}, expected {str(want)[:300]}"
            )
    end = json.loads(events[-1])
    if end != {"type": "end", "finalOutput": output}:
        raise CheckError(f"{what}: the terminal event is {str(end)[:200]}, expected end")


def check_identical(reference: list[bytes], events: list[bytes], what: str) -> None:
    if events != reference:
        pairs = enumerate(zip(reference, events, strict=False))
        at = next((i for i, (a, b) in pairs if a != b), min(len(reference), len(events)))
        raise CheckError(
            f"{what}: {len(events)} events, which differ from the first client's "
            f"{len(reference)} from event {at}"
        )


class ServerRun:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.port: int = args.port
        log_path = Path(args.server_log) if args.server_log else None
        self.provider = Server(
            f"exec {sys.executable} {Path(__file__).parent / 'fakeprovider.py'} "
            f"--port {args.provider_port}",
            args.provider_port,
            log_path,
        )
        self.server = Server(args.server_cmd, self.port, log_path)
        self.http = HttpClient(self.port, timeout=args.run_limit)
        self.provider_http = HttpClient(args.provider_port)

    async def start(self) -> float:
        self.provider.start()
        await self.provider_http.wait_ready("/health", proc=self.provider)
        self.server.start()
        return await self.http.wait_ready(READY_PATH, proc=self.server)

    def stop(self) -> None:
        self.http.close()
        self.provider_http.close()
        self.server.stop()
        self.provider.stop()

    def _cpu(self) -> tuple[float, float, float]:
        """CPU seconds so far: server tree, provider, this client."""
        return tree_cpu_s(self.server.pid), tree_cpu_s(self.provider.pid), time.process_time()

    # -------------------------------------------------------------------- provider alone
    async def provider_alone(self, deltas: int) -> dict[str, Any]:
        body = json.dumps(
            {"model": "fake", "stream": True,
             "messages": [{"role": "user", "content": f"run chunks:{deltas}"}]}
        ).encode()  # fmt: skip
        rates = []
        for _ in range(3):
            r = await StreamedResponse.open(
                self.args.provider_port, "POST", "/v1/chat/completions", body
            )
            if await r.headers(self.args.run_limit) != 200:
                raise CheckError(f"the provider answered {r.status}")
            await r.finished(self.args.run_limit)
            events = r.events()
            # the role chunk, the deltas, the finish chunk, [DONE]
            if len(events) != deltas + 3 or events[-1] != b"[DONE]":
                raise CheckError(f"the provider sent {len(events)} events for {deltas} deltas")
            assert r.t_end is not None
            rates.append(deltas / (r.t_end - r.t_sent))
        return {"deltas": deltas, "deltas_per_s": round(max(rates), 1)}

    # -------------------------------------------------------------------- one run
    async def _watch(
        self, session: str, clients: int, *, timed: bool = False
    ) -> list[StreamedResponse]:
        path = f"/sessions/{session}/sse?fromSequence=0"
        streams = await asyncio.gather(
            *(
                StreamedResponse.open(self.port, "GET", path, marker=_DELTA_MARKER, timed=timed)
                for _ in range(clients)
            )
        )
        statuses = await asyncio.gather(*(s.headers(self.args.run_limit) for s in streams))
        if any(s != 200 for s in statuses):
            raise CheckError(f"SSE answered {sorted(set(statuses))}, expected 200")
        return list(streams)

    async def _start(self, session: str, deltas: int) -> float:
        body = json.dumps(
            {"agentType": AGENT_TYPE, "sessionId": session,
             "input": {"message": f"run chunks:{deltas}"}}
        ).encode()  # fmt: skip
        t0 = time.perf_counter()
        status, data = await self.http.post(f"/sessions/{session}/start", body)
        if status != 200:
            raise CheckError(f"/start answered {status}: {data[:300]!r}")
        started = json.loads(data)
        if started.get("status") != "started" or started.get("startSequence") != 0:
            raise CheckError(f"/start of a new session answered {started}")
        return t0

    async def run(self, clients: int, deltas: int, what: str) -> dict[str, Any]:
        """One run of ``deltas`` deltas on a new session watched by ``clients`` SSE clients."""
        session = f"{what}-{uuid.uuid4().hex[:10]}"
        streams = await self._watch(session, clients)
        try:
            cpu0 = self._cpu()
            t0 = await self._start(session, deltas)
            await asyncio.wait_for(
                asyncio.gather(*(s.finished(self.args.run_limit) for s in streams)),
                self.args.run_limit,
            )
            cpu1 = self._cpu()
        finally:
            for s in streams:
                s.close()
        # the clock has stopped: check what every client received
        reference = streams[0].events()
        check_run_events(reference, deltas, 0, f"{what}, client 0")
        for i, s in enumerate(streams[1:], 1):
            check_identical(reference, s.events(), f"{what}, client {i}")
        chunks = deltas + CHUNKS_AROUND_DELTAS
        ends = [s.t_end - t0 for s in streams if s.t_end is not None]
        last = max(ends)
        return {
            "session": session,
            "chunks": chunks,
            "elapsed_s": last,
            "total_chunks_per_s": chunks * clients / last,
            "per_client_chunks_per_s": [chunks / e for e in ends],
            "first_chunk_s": [s.t_first_body - t0 for s in streams if s.t_first_body],
            "first_delta_s": [s.t_marker - t0 for s in streams if s.t_marker],
            "server_cpu_s": cpu1[0] - cpu0[0],
            "provider_cpu_s": cpu1[1] - cpu0[1],
            "client_cpu_s": cpu1[2] - cpu0[2],
            "events": reference,
        }

    # -------------------------------------------------------------------- fan-out
    async def fanout(self) -> dict[str, Any]:
        a = self.args
        runs = []
        for i in range(a.runs + 1):  # the first run is not measured
            run = await self.run(a.clients, a.deltas, "fanout")
            run.pop("events")
            log(
                f"fan-out run {i}{' (unmeasured)' if i == 0 else ''}: "
                f"{run['total_chunks_per_s']:.0f} chunks/s in total to {a.clients} clients, "
                f"{run['elapsed_s'] * 1000:.0f} ms, first chunk "
                f"{(_median(run['first_chunk_s']) or 0) * 1000:.1f} ms"
            )
            if i > 0:
                runs.append(run)
        per_client = [_median(r["per_client_chunks_per_s"]) or 0.0 for r in runs]
        slowest = [min(r["per_client_chunks_per_s"]) for r in runs]
        return {
            "clients": a.clients,
            "deltas_per_run": a.deltas,
            "chunks_per_run": a.deltas + CHUNKS_AROUND_DELTAS,
            "runs": len(runs),
            "total_chunks_per_s": _rounded(_median([r["total_chunks_per_s"] for r in runs])),
            "total_chunks_per_s_runs": [round(r["total_chunks_per_s"], 1) for r in runs],
            "per_client_chunks_per_s": _rounded(_median(per_client)),
            "slowest_client_chunks_per_s": _rounded(_median(slowest)),
            "run_ms": latency_ms([r["elapsed_s"] for r in runs]),
            # per run the median client's; then the median run
            "first_chunk_ms": _rounded(
                1000 * (_median([_median(r["first_chunk_s"]) or 0.0 for r in runs]) or 0.0), 2
            ),
            "first_delta_ms": _rounded(
                1000 * (_median([_median(r["first_delta_s"]) or 0.0 for r in runs]) or 0.0), 2
            ),
            "first_chunk_max_ms": _rounded(1000 * max(max(r["first_chunk_s"]) for r in runs), 2),
            "server_cpu_s_per_run": _rounded(_median([r["server_cpu_s"] for r in runs]), 3),
            "provider_cpu_s_per_run": _rounded(_median([r["provider_cpu_s"] for r in runs]), 3),
            "client_cpu_s_per_run": _rounded(_median([r["client_cpu_s"] for r in runs]), 3),
            "chunks_per_client": sorted({r["chunks"] for r in runs}),
            # only reached when every check passed (a fault raises CheckError)
            "every_client_every_chunk_in_order": True,
        }

    # -------------------------------------------------------------------- concurrent sessions
    async def _sessions_round(self, sessions: int, deltas: int) -> dict[str, Any]:
        """One round: ``sessions`` new sessions, one SSE client each, all started at once."""
        names = [f"many-{uuid.uuid4().hex[:10]}" for _ in range(sessions)]
        # a keep-alive connection per start request, opened before the clock runs
        await asyncio.gather(*(self.http.get(READY_PATH) for _ in names))
        streams = [s for name in names for s in await self._watch(name, 1, timed=True)]
        try:
            cpu0 = self._cpu()
            starts = await asyncio.gather(*(self._start(name, deltas) for name in names))
            await asyncio.wait_for(
                asyncio.gather(*(s.finished(self.args.run_limit) for s in streams)),
                self.args.run_limit,
            )
            cpu1 = self._cpu()
        finally:
            for s in streams:
                s.close()
        waited: list[float] = []
        first: list[float] = []
        for name, t0, stream in zip(names, starts, streams, strict=True):
            check_run_events(stream.events(), deltas, 0, f"concurrent session {name}")
            times = stream.event_times()[:-1]  # the chunks (the terminal event is not one)
            first.append(times[0] - t0)
            waited += [b - a for a, b in itertools.pairwise(times)]
        chunks = (deltas + CHUNKS_AROUND_DELTAS) * sessions
        ends = [s.t_end for s in streams if s.t_end is not None]
        elapsed = max(ends) - min(starts)
        return {
            "elapsed_s": elapsed,
            "chunks": chunks,
            "total_chunks_per_s": chunks / elapsed,
            "wait": latency_ms(waited),
            "first": latency_ms(first),
            "server_cpu_s": cpu1[0] - cpu0[0],
            "provider_cpu_s": cpu1[1] - cpu0[1],
            "client_cpu_s": cpu1[2] - cpu0[2],
        }

    async def sessions(self) -> dict[str, Any]:
        """The concurrent-sessions row (see the module docstring)."""
        a = self.args
        rounds = []
        for i in range(a.runs + 1):  # the first round is not measured
            r = await self._sessions_round(a.sessions, a.session_deltas)
            log(
                f"concurrent sessions round {i}{' (unmeasured)' if i == 0 else ''}: "
                f"{a.sessions} sessions, {r['total_chunks_per_s']:.0f} chunks/s in total, "
                f"chunk wait p99 {r['wait'].get('p99_ms')} ms, first chunk p99 "
                f"{r['first'].get('p99_ms')} ms"
            )
            if i > 0:
                rounds.append(r)

        def med(key: str, sub: str) -> float | None:
            values = [r[key][sub] for r in rounds if r[key].get(sub) is not None]
            return _rounded(_median(values), 3)

        return {
            "sessions": a.sessions,
            "deltas_per_session": a.session_deltas,
            "chunks_per_session": a.session_deltas + CHUNKS_AROUND_DELTAS,
            "runs": len(rounds),
            "total_chunks_per_s": _rounded(_median([r["total_chunks_per_s"] for r in rounds])),
            "total_chunks_per_s_runs": [round(r["total_chunks_per_s"], 1) for r in rounds],
            "round_ms": latency_ms([r["elapsed_s"] for r in rounds]),
            "chunk_wait_ms": {"p50_ms": med("wait", "p50_ms"), "p99_ms": med("wait", "p99_ms"),
                              "max_ms": max(r["wait"].get("max_ms") or 0 for r in rounds)},
            "first_chunk_ms": {"p50_ms": med("first", "p50_ms"),
                               "p99_ms": med("first", "p99_ms")},
            "server_cpu_s_per_run": _rounded(_median([r["server_cpu_s"] for r in rounds]), 3),
            "provider_cpu_s_per_run": _rounded(_median([r["provider_cpu_s"] for r in rounds]), 3),
            "client_cpu_s_per_run": _rounded(_median([r["client_cpu_s"] for r in rounds]), 3),
            # only reached when every check passed (a fault raises CheckError)
            "every_session_every_chunk_in_order": True,
        }  # fmt: skip

    # -------------------------------------------------------------------- replay
    async def _history(self, session: str, limit: int) -> tuple[float, int, float, list[Any]]:
        """Every chunk through /history pages on one new keep-alive connection: time, pages,
        the client's JSON parsing time within it, the chunks."""
        client = HttpClient(self.port, timeout=self.args.run_limit)
        chunks: list[Any] = []
        pages, parse_s, start = 0, 0.0, 0
        try:
            t0 = time.perf_counter()
            while True:
                status, data = await client.get(
                    f"/sessions/{session}/history?fromSequence={start}&limit={limit}"
                )
                if status != 200:
                    raise CheckError(f"/history answered {status}: {data[:300]!r}")
                p0 = time.perf_counter()
                page = json.loads(data)
                parse_s += time.perf_counter() - p0
                pages += 1
                chunks += page["chunks"]
                if not page["hasMore"] or not page["chunks"]:
                    break
                start = page["chunks"][-1]["sequence"] + 1
            elapsed = time.perf_counter() - t0
        finally:
            client.close()
        return elapsed, pages, parse_s, chunks

    async def replay(self) -> dict[str, Any]:
        a = self.args
        deltas = a.replay_chunks - CHUNKS_AROUND_DELTAS
        build = await self.run(1, deltas, "replay")
        session, reference = build["session"], build["events"]
        log(
            f"replay session: {a.replay_chunks} chunks stored in {build['elapsed_s']:.2f} s "
            f"({build['total_chunks_per_s']:.0f} chunks/s to one client)"
        )
        path = f"/sessions/{session}/sse?fromSequence=0"
        sse = []
        for i in range(a.replays + 1):  # the first read is not measured
            cpu0 = tree_cpu_s(self.server.pid)
            r = await StreamedResponse.open(self.port, "GET", path)
            try:
                if await r.headers(a.run_limit) != 200:
                    raise CheckError(f"replay {i}: SSE answered {r.status}")
                await r.finished(a.run_limit)
            finally:
                r.close()
            cpu = tree_cpu_s(self.server.pid) - cpu0
            check_identical(reference, r.events(), f"replay {i} from fromSequence=0")
            assert r.t_end is not None and r.t_first_body is not None and r.t_headers is not None
            if i > 0:
                sse.append(
                    {
                        "to_end_s": r.t_end - r.t_connect,
                        "to_headers_s": r.t_headers - r.t_connect,
                        "to_first_chunk_s": r.t_first_body - r.t_connect,
                        "server_cpu_s": cpu,
                    }
                )
        wanted = [json.loads(e)["chunk"] for e in reference[:-1]]
        history = []
        for i in range(a.replays + 1):
            elapsed, pages, parse_s, chunks = await self._history(session, a.history_limit)
            if [c["sequence"] for c in chunks] != list(range(a.replay_chunks)):
                raise CheckError(f"/history pass {i}: the sequences are not 0..{a.replay_chunks}")
            if [c["chunk"] for c in chunks] != wanted:
                raise CheckError(f"/history pass {i}: its chunks differ from the SSE replay's")
            if i > 0:
                history.append({"s": elapsed, "pages": pages, "parse_s": parse_s})
        row = latency_ms([r["to_end_s"] for r in sse])
        hist = latency_ms([h["s"] for h in history])
        out = {
            "stream_chunks": a.replay_chunks,
            "replays": len(sse),
            "sse_to_end_ms": row,
            "sse_chunks_per_s": _rounded(a.replay_chunks / ((row.get("p50_ms") or 1) / 1000)),
            "sse_to_headers_ms": latency_ms([r["to_headers_s"] for r in sse]),
            "sse_to_first_chunk_ms": latency_ms([r["to_first_chunk_s"] for r in sse]),
            "sse_server_cpu_s": _rounded(_median([r["server_cpu_s"] for r in sse]), 3),
            "history_limit": a.history_limit,
            "history_pages": sorted({h["pages"] for h in history}),
            "history_ms": hist,
            "history_parse_ms": _rounded(1000 * (_median([h["parse_s"] for h in history]) or 0), 2),
            "build_chunks_per_s": _rounded(build["total_chunks_per_s"]),
            "build_server_cpu_s": _rounded(build["server_cpu_s"], 3),
            "replayed_per_read": [a.replay_chunks],
            # only reached when every check passed (a fault raises CheckError)
            "replay_equals_history": True,
        }
        log(
            f"replay of {a.replay_chunks} chunks from fromSequence=0: SSE p50 {row.get('p50_ms')} "
            f"ms; /history ({out['history_pages']} pages of {a.history_limit}) p50 "
            f"{hist.get('p50_ms')} ms"
        )
        return out


def _durability(server_cmd: str) -> str:
    """The --durability the server command gives (doemu's default: power)."""
    found = re.search(r"--durability[ =](\w+)", server_cmd)
    return found.group(1) if found else "power"


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    run = ServerRun(args)
    out: dict[str, Any] = {
        "meta": {
            "label": args.label,
            "server_cmd": args.server_cmd,
            "durability": _durability(args.server_cmd),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "client": f"python {platform.python_version()} {args.loop_name}",
            "cpu_count": os.cpu_count(),
            "loadavg_start": _loadavg(),
        }
    }
    t0 = time.perf_counter()
    try:
        out["meta"]["start_to_ready_s"] = round(await run.start(), 3)
        log(f"[{args.label}] provider alone")
        provider = await run.provider_alone(args.deltas)
        log(f"provider alone: {provider['deltas_per_s']:.0f} deltas/s")
        log(f"[{args.label}] agent-server fan-out")
        out["server_fanout"] = await run.fanout()
        out["server_fanout"]["provider_alone_deltas_per_s"] = provider["deltas_per_s"]
        if args.sessions:
            log(f"[{args.label}] agent-server concurrent sessions")
            out["server_sessions"] = await run.sessions()
        log(f"[{args.label}] agent-server replay")
        out["server_replay"] = await run.replay()
    finally:
        run.stop()
    out["meta"]["loadavg_end"] = _loadavg()
    out["meta"]["total_s"] = round(time.perf_counter() - t0, 1)
    # the conditions of these rows, kept apart from meta (which a merge keeps from the first
    # invocation of the run only)
    out["server_conditions"] = {
        k: out["meta"][k] for k in ("durability", "started", "loadavg_start", "loadavg_end")
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--label", required=True, help="doemu or doemu_process (names the results)")
    ap.add_argument("--server-cmd", required=True, help="shell command serving bench/app/server")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--provider-port", type=int, required=True, help="the fake provider's port")
    ap.add_argument("--server-log", help="append the servers' output here")
    ap.add_argument("--out", help="write the JSON here too")
    ap.add_argument("--merge", action="store_true", help="add the results to an existing --out")
    ap.add_argument("--clients", type=int, default=10, help="SSE clients watching each run")
    ap.add_argument("--deltas", type=int, default=5000, help="provider text deltas per run")
    ap.add_argument("--runs", type=int, default=3, help="measured fan-out runs")
    ap.add_argument(
        "--sessions", type=int, default=20, help="concurrent sessions (0: skip the row)"
    )
    ap.add_argument("--session-deltas", type=int, default=250, help="deltas per session's run")
    ap.add_argument("--replay-chunks", type=int, default=10_000, help="stream chunks to replay")
    ap.add_argument("--replays", type=int, default=5, help="measured replays (SSE and /history)")
    ap.add_argument("--history-limit", type=int, default=1000, help="/history page size")
    ap.add_argument("--run-limit", type=float, default=120.0, help="seconds a run may take")
    args = ap.parse_args()
    if args.clients < 1 or args.deltas < 1 or args.replay_chunks <= CHUNKS_AROUND_DELTAS:
        ap.error("--clients and --deltas must be ≥ 1 and --replay-chunks > 3")
    args.loop_name = install_fast_loop()
    try:
        res = asyncio.run(main_async(args))
    except CheckError as exc:
        log(f"[{args.label}] CHECK FAILED: {exc}")
        sys.exit(1)
    write_results(res, args.out, "j" if args.merge else None)


if __name__ == "__main__":
    main()
