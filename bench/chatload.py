#!/usr/bin/env python3
"""The chat rows (bench/README.md, "Chat rows"): one run against one chat server.

    python bench/chatload.py --label doemu --port 8801 --provider-port 8802 \\
        --server-cmd 'exec bench/app/chat/serve.sh 8801 STATE http://127.0.0.1:8802/v1' \\
        --out bench/results/doemu-1.json --merge

It starts the fake provider (bench/fakeprovider.py) and then the server, each in its own process
group, drives the chat protocol over WebSockets as Cloudflare's client does, and stops both at the
end. The server is doemu's ``AIChatAgent`` (bench/app/chat) or Cloudflare's on bare workerd
(bench/peer-chat); both stream from that one provider with persistence on (their default: every
chunk stored in the resumable stream, flushed every 10, the reply persisted at the end).

* fan-out: ``--clients`` connections to one chat (a fresh chat per run); client 0 sends a chat
  request whose last user message asks the provider for ``--deltas`` text deltas; every client
  counts the ``cf_agent_use_chat_response`` frames carrying a chunk (non-empty body) until the
  request's ``done`` frame. Chunks/s = chunks delivered to all clients / time from the request
  sent to the last client's ``done``. One unmeasured turn, then ``--turns`` measured; each turn
  sends the transcript so far (the snapshot a non-sender received at the end of the last turn)
  plus the new user message, as ``useChat`` does. With ``--light`` the same again on a new chat
  with ``{"path": "light"}`` in every request body (``chat_fanout_light``): doemu's agent then
  answers with its hand-written lighter path instead of ``model_reply`` (bench/app/chat).
* replay: a turn whose stream holds ``--replay-chunks`` chunks (the provider sends that many
  minus 3 deltas, the other three being start, start-step and text-start) and then stalls, so the
  stream stays live; once an observer has every chunk live, a new connection is opened
  ``--reconnects`` times (plus one unmeasured): it gets ``cf_agent_stream_resuming {id}``,
  answers ``cf_agent_stream_resume_ack``, and receives the stored chunks (``replay: true``) and
  then ``replayComplete: true``. Measured: WebSocket connect start → last replayed chunk (the
  row), → ``replayComplete``, and ACK sent → last replayed chunk. Then the provider is released
  and the turn must end normally.

* many chats (``chat_many``): ``--many`` chats (100), each a new agent with its own WebSocket
  client, all connected first (not timed); then every client sends its chat's first request at
  once, each asking for ``--many-deltas`` deltas, and records when each chunk frame arrives.
  Chunks/s = chunks delivered to all clients / time from the first request sent to the last
  client's ``done``; chunk latency = how long a client waited for each chunk after its first
  (from the previous one), over every chunk of every client: p50 and p99; and the wait for the
  first chunk (from the client's request) apart: p50 and p99. One unmeasured round, then
  ``--many-turns`` measured, each on ``--many`` new chats; the run's values are the median
  round's. ``--many 0`` skips it.

``--frames-log`` writes the frames of the first measured turn (sender and one other client) and
of the first measured reconnect, for comparing what the two servers send.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchlib import (
    HttpClient,
    HttpError,
    Server,
    install_fast_loop,
    latency_ms,
    log,
    tree_cpu_s,
)
from load import write_results
from wsclient import WebSocketClient

AGENT = "chat-bench"  # route_agent_request's kebab-case of the ChatBench binding
RESPONSE = "cf_agent_use_chat_response"
READY_PATH = f"/agents/{AGENT}/__bench_ready__/get-messages"
#: Stream chunks around the text deltas: start, start-step, text-start before the first delta.
CHUNKS_BEFORE_DELTAS = 3


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _request_frame(
    request_id: str, messages: list[dict[str, Any]], extra: dict[str, Any] | None = None
) -> str:
    body = json.dumps({"messages": messages, "trigger": "submit-message", **(extra or {})})
    return json.dumps(
        {"id": request_id, "type": "cf_agent_use_chat_request",
         "init": {"method": "POST", "body": body}}
    )  # fmt: skip


def _user_message(text: str) -> dict[str, Any]:
    return {"id": f"u-{uuid.uuid4().hex[:12]}", "role": "user",
            "parts": [{"type": "text", "text": text}]}  # fmt: skip


class ChatClient:
    """One WebSocket to the chat; frames are read by :meth:`until_done` (or kept for a log)."""

    def __init__(self, ws: WebSocketClient, keep: list[str] | None = None) -> None:
        self.ws = ws
        self.keep = keep
        self.transcript: list[dict[str, Any]] | None = None

    @classmethod
    async def connect(cls, port: int, chat: str, keep: list[str] | None = None) -> ChatClient:
        return cls(await WebSocketClient.connect(port, f"/agents/{AGENT}/{chat}"), keep)

    async def frame(self) -> dict[str, Any]:
        opcode, data = await self.ws.receive()
        if opcode != 0x1:
            raise HttpError(f"unexpected WebSocket opcode {opcode}")
        if self.keep is not None:
            self.keep.append(data.decode())
        value: dict[str, Any] = json.loads(data)
        return value

    async def until_done(self, request_id: str) -> tuple[int, float]:
        """Chunks of ``request_id`` received until its ``done`` frame, and when that came."""
        chunks = 0
        while True:
            f = await self.frame()
            kind = f.get("type")
            if kind == RESPONSE and f.get("id") == request_id:
                if f.get("error"):
                    raise HttpError(f"the turn failed: {f.get('body')!r}")
                if f.get("done"):
                    return chunks, time.perf_counter()
                if f.get("body"):
                    chunks += 1
            elif kind == "cf_agent_chat_messages":
                self.transcript = f.get("messages")

    async def timed_until_done(self, request_id: str) -> tuple[list[float], float]:
        """Arrival times of the chunks of ``request_id`` until its ``done`` frame, and when that
        came (the many-chats row: each client is its chat's only connection)."""
        times: list[float] = []
        clock = time.perf_counter
        while True:
            f = await self.frame()
            if f.get("type") == RESPONSE and f.get("id") == request_id:
                if f.get("error"):
                    raise HttpError(f"the turn failed: {f.get('body')!r}")
                if f.get("done"):
                    return times, clock()
                if f.get("body"):
                    times.append(clock())

    async def close(self) -> None:
        await self.ws.close(1000)


class ChatRun:
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
        self.http = HttpClient(self.port)
        self.provider_http = HttpClient(args.provider_port)
        self.frames: dict[str, list[str]] = {}

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

    # -------------------------------------------------------------------- fan-out
    async def _turn(
        self,
        clients: list[ChatClient],
        transcript: list[dict[str, Any]],
        deltas: int,
        extra: dict[str, Any] | None,
    ) -> dict[str, Any]:
        request_id = uuid.uuid4().hex[:8]
        user = _user_message(f"turn chunks:{deltas}")
        waits = [asyncio.ensure_future(c.until_done(request_id)) for c in clients]
        cpu0 = tree_cpu_s(self.server.pid)
        t0 = time.perf_counter()
        clients[0].ws.send_text(_request_frame(request_id, [*transcript, user], extra))
        done = await asyncio.wait_for(asyncio.gather(*waits), self.args.turn_limit)
        elapsed = max(t for _, t in done) - t0
        cpu = tree_cpu_s(self.server.pid) - cpu0
        per_client = [n for n, _ in done]
        return {
            "elapsed_s": elapsed,
            "chunks": sum(per_client),
            "chunks_per_client": sorted(set(per_client)),
            "server_cpu_s": round(cpu, 3),
        }

    async def fanout(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The fan-out row; ``extra`` goes into every request's body (``{"path": "light"}``
        selects the doemu agent's lighter path) and keeps the frames log off."""
        a = self.args
        log_frames = a.frames_log and extra is None
        chat = f"fanout-{uuid.uuid4().hex[:8]}"
        keep_sender: list[str] = []
        keep_other: list[str] = []
        clients = [await ChatClient.connect(self.port, chat) for _ in range(a.clients)]
        transcript: list[dict[str, Any]] = []
        turns: list[dict[str, Any]] = []
        try:
            for i in range(a.turns + 1):  # the first turn is not measured
                if i == 1 and log_frames:
                    clients[0].keep, clients[1].keep = keep_sender, keep_other
                turn = await self._turn(clients, transcript, a.deltas, extra)
                clients[0].keep = clients[1].keep = None
                # the transcript as the other clients have it: the snapshot sent at turn end
                transcript = clients[1].transcript or transcript
                if i > 0:
                    turns.append(turn)
                log(
                    f"chat turn {i}{' (unmeasured)' if i == 0 else ''}: "
                    f"{turn['chunks'] / turn['elapsed_s']:.0f} chunks/s, "
                    f"{turn['elapsed_s'] * 1000:.0f} ms, {turn['chunks']} chunks"
                )
        finally:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        if log_frames:
            self.frames["turn_sender"] = keep_sender
            self.frames["turn_other_client"] = keep_other
        rates = [t["chunks"] / t["elapsed_s"] for t in turns]
        return {
            "clients": a.clients,
            "deltas_per_turn": a.deltas,
            "turns": len(turns),
            "chunks_per_s": round(_median(rates) or 0.0, 1),
            "chunks_per_s_runs": [round(r, 1) for r in rates],
            "turn_ms": latency_ms([t["elapsed_s"] for t in turns]),
            "chunks_per_turn": sorted({t["chunks"] for t in turns}),
            "chunks_per_client": sorted({n for t in turns for n in t["chunks_per_client"]}),
            "server_cpu_s_per_turn": _median([t["server_cpu_s"] for t in turns]),
        }

    # -------------------------------------------------------------------- many chats
    async def _many_round(self, chats: int, deltas: int) -> dict[str, Any]:
        """One round: ``chats`` new chats, one client each, all asking at once."""
        tag = uuid.uuid4().hex[:8]
        gate = asyncio.Semaphore(20)  # the connects (not timed) in waves, not one burst

        async def connect(k: int) -> ChatClient:
            async with gate:
                return await ChatClient.connect(self.port, f"many-{tag}-{k}")

        clients = await asyncio.gather(*(connect(k) for k in range(chats)))
        try:
            ids = [uuid.uuid4().hex[:8] for _ in clients]
            frames = [_request_frame(rid, [_user_message(f"turn chunks:{deltas}")]) for rid in ids]
            waits = [
                asyncio.ensure_future(c.timed_until_done(rid))
                for c, rid in zip(clients, ids, strict=True)
            ]
            cpu0, client_cpu0 = tree_cpu_s(self.server.pid), time.process_time()
            sent = []
            for c, frame in zip(clients, frames, strict=True):
                sent.append(time.perf_counter())
                c.ws.send_text(frame)
            done = await asyncio.wait_for(asyncio.gather(*waits), self.args.turn_limit)
            last = max(t for _, t in done)
            cpu = tree_cpu_s(self.server.pid) - cpu0
            client_cpu = time.process_time() - client_cpu0
        finally:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        waited: list[float] = []
        first: list[float] = []
        for t_sent, (times, _) in zip(sent, done, strict=True):
            if times:
                first.append(times[0] - t_sent)
                waited += [b - a for a, b in itertools.pairwise(times)]
        chunks = sum(len(times) for times, _ in done)
        return {
            "elapsed_s": last - sent[0],
            "chunks": chunks,
            "chunks_per_s": chunks / (last - sent[0]),
            "chunks_per_client": sorted({len(times) for times, _ in done}),
            "wait": latency_ms(waited),
            "first": latency_ms(first),
            "server_cpu_s": round(cpu, 3),
            "client_cpu_s": round(client_cpu, 3),
        }

    async def many(self) -> dict[str, Any]:
        """The many-chats row (see the module docstring)."""
        a = self.args
        rounds = []
        for i in range(a.many_turns + 1):  # the first round is not measured
            r = await self._many_round(a.many, a.many_deltas)
            log(
                f"many chats round {i}{' (unmeasured)' if i == 0 else ''}: {a.many} chats, "
                f"{r['chunks_per_s']:.0f} chunks/s in total, chunk wait p99 "
                f"{r['wait'].get('p99_ms')} ms, first chunk p99 {r['first'].get('p99_ms')} ms, "
                f"{r['chunks']} chunks"
            )
            if i > 0:
                rounds.append(r)
        rounds.sort(key=lambda r: r["chunks_per_s"])
        mid = rounds[len(rounds) // 2]  # the median round (the upper one of an even count)

        def med(key: str, sub: str) -> float | None:
            return _median([r[key][sub] for r in rounds if r[key].get(sub) is not None])

        return {
            "chats": a.many,
            "deltas_per_chat": a.many_deltas,
            "rounds": len(rounds),
            "chunks_per_s": round(mid["chunks_per_s"], 1),
            "chunks_per_s_runs": [round(r["chunks_per_s"], 1) for r in rounds],
            "round_ms": latency_ms([r["elapsed_s"] for r in rounds]),
            "chunk_wait_ms": {"p50_ms": med("wait", "p50_ms"), "p99_ms": med("wait", "p99_ms"),
                              "max_ms": max(r["wait"].get("max_ms") or 0 for r in rounds)},
            "first_chunk_ms": {"p50_ms": med("first", "p50_ms"),
                               "p99_ms": med("first", "p99_ms")},
            "chunks_per_round": sorted({r["chunks"] for r in rounds}),
            "chunks_per_client": sorted({n for r in rounds for n in r["chunks_per_client"]}),
            "server_cpu_s_per_round": _median([r["server_cpu_s"] for r in rounds]),
            "client_cpu_s_per_round": _median([r["client_cpu_s"] for r in rounds]),
        }  # fmt: skip

    # -------------------------------------------------------------------- replay
    async def _reconnect(self, chat: str, keep: list[str] | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        client = await ChatClient.connect(self.port, chat, keep)
        try:
            connected = time.perf_counter()
            first = await client.frame()
            if first.get("type") != "cf_agent_stream_resuming":
                raise HttpError(f"expected cf_agent_stream_resuming first, got {first}")
            stream_id = first["id"]
            client.ws.send_text(json.dumps({"type": "cf_agent_stream_resume_ack", "id": stream_id}))
            acked = time.perf_counter()
            replayed, last_chunk = 0, None
            while True:
                f = await client.frame()
                if f.get("type") != RESPONSE or f.get("id") != stream_id:
                    continue
                if f.get("replayComplete") or f.get("done"):
                    complete = time.perf_counter()
                    break
                if f.get("replay") and f.get("body"):
                    replayed += 1
                    last_chunk = time.perf_counter()
        finally:
            await client.close()
        return {
            "replayed": replayed,
            "connect_s": connected - t0,
            "to_last_chunk_s": (last_chunk or complete) - t0,
            "to_complete_s": complete - t0,
            "ack_to_last_chunk_s": (last_chunk or complete) - acked,
        }

    async def replay(self) -> dict[str, Any]:
        a = self.args
        chat = f"replay-{uuid.uuid4().hex[:8]}"
        want = a.replay_chunks
        sender = await ChatClient.connect(self.port, chat)
        observer = await ChatClient.connect(self.port, chat)
        request_id = uuid.uuid4().hex[:8]
        sender.ws.send_text(
            _request_frame(
                request_id, [_user_message(f"replay chunks:{want - CHUNKS_BEFORE_DELTAS} stall")]
            )
        )
        # every chunk has reached the observer live (so the server has stored or buffered it)
        live = 0
        deadline = time.perf_counter() + a.turn_limit
        while live < want:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"only {live} of {want} chunks arrived live")
            f = await observer.frame()
            if f.get("type") == RESPONSE and f.get("id") == request_id:
                if f.get("done"):
                    raise HttpError(f"the stream ended before stalling: {f}")
                if f.get("body"):
                    live += 1
        results = []
        keep: list[str] = []
        for i in range(a.reconnects + 1):  # the first reconnect is not measured
            res = await self._reconnect(chat, keep if (i == 1 and a.frames_log) else None)
            if i > 0:
                results.append(res)
        if a.frames_log:
            self.frames["reconnect"] = keep
        # release the stalled provider: the turn must then end normally for both clients
        await self.provider_http.post("/release")
        ends = await asyncio.wait_for(
            asyncio.gather(sender.until_done(request_id), observer.until_done(request_id)),
            a.turn_limit,
        )
        await asyncio.gather(sender.close(), observer.close(), return_exceptions=True)
        row = latency_ms([r["to_last_chunk_s"] for r in results])
        out = {
            "stream_chunks": want,
            "reconnects": len(results),
            "replayed_per_reconnect": sorted({r["replayed"] for r in results}),
            "to_last_chunk_ms": row,
            "to_complete_ms": latency_ms([r["to_complete_s"] for r in results]),
            "ack_to_last_chunk_ms": latency_ms([r["ack_to_last_chunk_s"] for r in results]),
            "connect_ms": latency_ms([r["connect_s"] for r in results]),
            "ended_after_release": all(n >= 0 for n, _ in ends),
        }
        log(
            f"replay of {want} chunks: p50 {row.get('p50_ms')} ms to the last chunk "
            f"(ack → last p50 {out['ack_to_last_chunk_ms'].get('p50_ms')} ms), "
            f"replayed {out['replayed_per_reconnect']}"
        )
        return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    run = ChatRun(args)
    out: dict[str, Any] = {
        "meta": {
            "label": args.label,
            "server_cmd": args.server_cmd,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "client": f"python {platform.python_version()} {args.loop_name}",
            "cpu_count": os.cpu_count(),
        }
    }
    t0 = time.perf_counter()
    try:
        out["meta"]["start_to_ready_s"] = round(await run.start(), 3)
        log(f"[{args.label}] chat fan-out")
        out["chat_fanout"] = await run.fanout()
        if args.light:
            log(f"[{args.label}] chat fan-out, the lighter path")
            out["chat_fanout_light"] = await run.fanout({"path": "light"})
        if args.many:
            log(f"[{args.label}] many chats at once")
            out["chat_many"] = await run.many()
        log(f"[{args.label}] chat replay")
        out["chat_replay"] = await run.replay()
    finally:
        run.stop()
    out["meta"]["total_s"] = round(time.perf_counter() - t0, 1)
    out["frames"] = run.frames
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--label", required=True, help="doemu or workerd (names the results)")
    ap.add_argument("--server-cmd", required=True, help="shell command serving the chat agent")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--provider-port", type=int, required=True, help="the fake provider's port")
    ap.add_argument("--server-log", help="append the servers' output here")
    ap.add_argument("--out", help="write the JSON here too")
    ap.add_argument("--merge", action="store_true", help="add the results to an existing --out")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--deltas", type=int, default=1000, help="provider text deltas per turn")
    ap.add_argument("--turns", type=int, default=5, help="measured fan-out turns")
    ap.add_argument("--replay-chunks", type=int, default=1000, help="stream chunks to replay")
    ap.add_argument("--reconnects", type=int, default=10, help="measured reconnects")
    ap.add_argument("--turn-limit", type=float, default=60.0, help="seconds a turn may take")
    ap.add_argument("--many", type=int, default=100, help="chats at once (0: skip the row)")
    ap.add_argument("--many-deltas", type=int, default=100, help="provider deltas per chat")
    ap.add_argument("--many-turns", type=int, default=1, help="measured many-chats rounds")
    ap.add_argument("--frames-log", help="write the first measured turn's and replay's frames")
    ap.add_argument(
        "--light",
        action="store_true",
        help='also run the fan-out with {"path": "light"} in the request body (doemu\'s agent: '
        "its hand-written lighter path, shown beside the judged row)",
    )
    args = ap.parse_args()
    if args.clients < 2 or args.replay_chunks <= CHUNKS_BEFORE_DELTAS:
        ap.error("--clients must be ≥ 2 and --replay-chunks > 3")
    args.loop_name = install_fast_loop()
    res = asyncio.run(main_async(args))
    frames = res.pop("frames")
    if args.frames_log:
        Path(args.frames_log).write_text(json.dumps(frames, indent=1) + "\n")
    write_results(res, args.out, "i" if args.merge else None)


if __name__ == "__main__":
    main()
