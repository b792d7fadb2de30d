"""The agent server's stream tests' app: a minimal Agent hosting a ``SessionStream``.

The agent hosts the stream with the routes the agent server gives it (``/sse``, ``/history``,
WebSocket upgrades with ``?fromSequence=N``) and RPC methods standing in for the agent loop;
variants shrink the heartbeat, the replay page and the SSE backlog so tests reach them quickly.
The readers here are real: httpx with httpx-sse for SSE, the ``websockets`` client for WebSockets.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from httpx_sse import aconnect_sse
from workers import Response

from agents import Agent, Connection, ConnectionContext
from agents.server import SessionStream, StreamRangeError
from doemu.runtime import ClassSpec, Runtime

from .servers import Served

__all__ = [
    "CLASSES",
    "HANGING",
    "SmallBacklogStream",
    "chunk_events",
    "session_runtime",
    "sse_events",
]


#: The latest sequence seen inside an open transaction, once it hangs there.
HANGING: list[int] = []


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


class Session(Agent):
    """One session: the stream, the routes, and RPC methods standing in for the agent loop."""

    heartbeat_ms = 60_000
    stream_class = SessionStream

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.stream = self.stream_class(self, heartbeat_ms=self.heartbeat_ms)

    def should_send_protocol_messages(self, connection: Connection, ctx: ConnectionContext) -> bool:
        return False  # stream readers get stream events only

    async def on_connect(self, connection: Connection, ctx: ConnectionContext) -> None:
        try:
            start = self.stream.check_from_sequence(
                _query(str(ctx.request.url)).get("fromSequence")
            )
        except StreamRangeError as exc:
            connection.close(4000 + exc.status, str(exc)[:120])
            return
        self.stream.attach(connection, start)

    async def on_message(self, connection: Connection, message: Any) -> None:
        if not self.stream.handle_message(connection, message):
            connection.send(json.dumps({"type": "unhandled", "message": message}))

    async def on_request(self, request: Any) -> Any:
        path = urlsplit(str(request.url)).path.rsplit("/", 1)[-1]
        query = _query(str(request.url))
        try:
            start = self.stream.check_from_sequence(query.get("fromSequence"))
        except StreamRangeError as exc:
            return Response.json({"error": str(exc)}, status=exc.status)
        if path == "sse":
            return self.stream.sse(start)
        if path == "history":
            return Response.json(self.stream.history(start, int(query.get("limit", "100"))))
        return Response("not found", status=404)

    # -- the agent loop's side, over RPC ---------------------------------------------------------
    def push(self, chunk: Any) -> int:
        return self.stream.append(chunk)

    async def push_many(self, count: int, size: int = 0, yielding: bool = False) -> list[int]:
        sequences = []
        for i in range(count):
            sequences.append(self.stream.append({"type": "text_delta", "i": i, "pad": "x" * size}))
            if yielding:
                await asyncio.sleep(0)
        return sequences

    def end_run(self, output: Any) -> None:
        self.stream.finish(output)

    def fail_run(self, error: str) -> None:
        self.stream.fail(error)

    def new_run(self) -> None:
        self.stream.reopen()

    def crash_after_pushing(self, count: int) -> None:
        for i in range(count):
            self.stream.append({"type": "doomed", "i": i})
        self.ctx.abort("simulated crash before the turn committed")

    async def push_in_open_transaction(self, count: int) -> None:
        async def body(_txn: Any) -> None:
            for i in range(count):
                self.stream.append({"type": "doomed", "i": i})
            HANGING.append(self.stream.latest_sequence)
            await asyncio.Event().wait()  # hangs with the transaction open: nothing committed

        await self.ctx.storage.transaction(body)

    def errors(self) -> list[list[str]]:
        """What the stream refuses, as [class name, message] pairs."""
        attempts: list[Any] = [
            lambda: self.stream.append({"bad": {1, 2}}),
            lambda: self.stream.append(["not", "an", "object"]),
            lambda: self.stream.append({"nan": float("nan")}),
            lambda: self.stream.append({"big": "x" * (SessionStream.MAX_CHUNK_BYTES + 1)}),
            lambda: self.stream.finish(object()),
        ]
        out = []
        for attempt in attempts:
            try:
                attempt()
                out.append(["ok", ""])
            except Exception as exc:
                out.append([type(exc).__name__, str(exc)])
        return out

    def closed_errors(self) -> list[str]:
        out = []
        for attempt in (lambda: self.stream.append({"late": 1}), lambda: self.stream.fail("again")):
            try:
                attempt()
            except Exception as exc:
                out.append(f"{type(exc).__name__}: {exc}")
        return out

    def check(self, value: Any) -> Any:
        try:
            return self.stream.check_from_sequence(value)
        except StreamRangeError as exc:
            return f"{type(exc).__name__} {exc.status}"

    def status(self) -> dict[str, Any]:
        return {
            "latest": self.stream.latest_sequence,
            "terminal": self.stream.terminal,
            "sse": self.stream.sse_readers,
        }

    def buffered(self) -> int:
        return self.stream.sse_buffered_bytes


class FastBeat(Session):
    heartbeat_ms = 20


class SmallPageStream(SessionStream):
    REPLAY_PAGE = 10


class SmallPages(Session):
    stream_class = SmallPageStream


class SmallBacklogStream(SessionStream):
    MAX_SSE_BACKLOG_BYTES = 128 * 1024


class SmallBacklog(Session):
    stream_class = SmallBacklogStream


CLASSES = {"SESSION": Session, "BEAT": FastBeat, "PAGES": SmallPages, "BACKLOG": SmallBacklog}


@asynccontextmanager
async def session_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    """A runtime serving the session classes, persisted under ``tmp_path``, closed afterwards."""
    runtime = Runtime(
        worker_name="streams",
        classes={name: ClassSpec(cls) for name, cls in CLASSES.items()},
        bindings={binding: binding for binding in CLASSES},
        persist_dir=tmp_path,
    )
    try:
        yield runtime
    finally:
        await runtime.close()


def chunk_events(events: list[dict[str, Any]]) -> list[int]:
    return [e["sequence"] for e in events if e["type"] == "chunk"]


async def sse_events(srv: Served, path: str, into: list[dict[str, Any]]) -> None:
    """Read one SSE response to its end, each event parsed into ``into``."""
    async with httpx.AsyncClient(timeout=30) as http:
        async with aconnect_sse(http, "GET", f"{srv.url}/{path}") as source:
            assert source.response.headers["content-type"] == "text/event-stream"
            async for event in source.aiter_sse():
                into.append(json.loads(event.data))
