"""HTTP responses that follow a :class:`~.engine.Run`: an SSE stream, or one JSON at the end.

Both watch the connection while they wait (Starlette's own streaming response only notices a
departed client when a write fails, and a stalled stream never writes), and call
``on_disconnect`` when the client goes away: a non-background generation stops there.

A cut (``die_after``) must look like a network failure, not like an ending: the relay raises
:class:`StreamCut` and uvicorn, its response already started, closes the transport without the
final empty chunk, so the client reads an incomplete chunked body. uvicorn logs any exception of
an ASGI app with its traceback; :func:`quiet_stream_cuts` filters out exactly these, and the
cancellations of this module's relays when a fake stops (nothing else in the process is touched).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Protocol

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .engine import Event, Format, Run, launch
from .intake import begin, lower_headers
from .script import Api
from .state import Ledger, Record

__all__ = [
    "EventStream",
    "FinalJSON",
    "StreamCut",
    "Tied",
    "quiet_stream_cuts",
    "sse_frame",
    "tied_generation",
]


class StreamCut(Exception):
    """Raised from a relay to drop its connection abruptly (a scripted ``die_after``)."""


class _CutFilter(logging.Filter):
    """Drops uvicorn's report of a scripted cut, or of a relay cancelled as its server stops."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, StreamCut):
            return False
        if isinstance(error, asyncio.CancelledError):
            return not _through_this_module(error.__traceback__)
        return True


def _through_this_module(trace: TracebackType | None) -> bool:
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == __file__:
            return True
        trace = trace.tb_next
    return False


_FILTER = _CutFilter()


def quiet_stream_cuts() -> None:
    """Keep uvicorn from logging a traceback for each scripted cut (idempotent)."""
    logger = logging.getLogger("uvicorn.error")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


def sse_frame(event: Event) -> bytes:
    """``event: NAME\\ndata: JSON\\n\\n`` (no ``event:`` line when the name is ``None``)."""
    name, data = event
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {name}\n" if name is not None else ""
    return f"{head}data: {text}\n\n".encode()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _Watched(Response):
    """A response that runs :meth:`_send_body` while listening for the client leaving."""

    media_type = "application/json"
    extra_headers: ClassVar[Mapping[str, str]] = {}

    def __init__(self, run: Run, die: bool, on_disconnect: Callable[[], None] | None) -> None:
        # Not Response.__init__: it would add a content-length for an empty body.
        self.status_code = 200
        self.background: BackgroundTask | None = None
        self.init_headers(self.extra_headers)
        self.run = run
        self.die = die
        self.on_disconnect = on_disconnect

    def cut_reached(self, position: int) -> bool:
        return self.die and self.run.cut_at is not None and position >= self.run.cut_at

    async def _send_body(self, send: Send) -> None:
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = asyncio.ensure_future(self._send_body(send))
        gone = asyncio.ensure_future(_disconnected(receive))
        await asyncio.wait({body, gone}, return_when=asyncio.FIRST_COMPLETED)
        if body.done():
            gone.cancel()
            body.result()  # a StreamCut goes up to uvicorn, which drops the connection
            return
        body.cancel()
        if self.on_disconnect is not None:
            self.on_disconnect()


class EventStream(_Watched):
    """``text/event-stream`` of the run's events from index ``start``, live until it finishes."""

    media_type = "text/event-stream"
    extra_headers: ClassVar[Mapping[str, str]] = {"cache-control": "no-cache"}

    def __init__(
        self,
        run: Run,
        *,
        start: int = 0,
        die: bool = False,
        on_disconnect: Callable[[], None] | None = None,
        on_sent: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(run, die, on_disconnect)
        self.start = start
        #: Told the index of each event once it was handed to the server.
        self.on_sent = on_sent

    async def _send_body(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        position, run = self.start, self.run
        while True:
            while position < len(run.events) and not self.cut_reached(position):
                frame = sse_frame(run.events[position])
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                if self.on_sent is not None:
                    self.on_sent(position)
                position += 1
            if self.cut_reached(position):
                raise StreamCut
            if run.finished and position >= len(run.events):
                break
            await run.changed()
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class FinalJSON(_Watched):
    """One JSON body, rendered once the run has finished (a non-streaming request)."""

    def __init__(
        self,
        run: Run,
        render: Callable[[], Any],
        *,
        die: bool = False,
        on_disconnect: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(run, die, on_disconnect)
        self.build = render

    async def _send_body(self, send: Send) -> None:
        run = self.run
        while not run.finished and not self.cut_reached(len(run.events)):
            await run.changed()
        body = json.dumps(self.build()).encode()
        headers = [*self.raw_headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if self.cut_reached(len(run.events)):
            # The head promised a body that never comes: the client reads a truncated response.
            raise StreamCut
        await send({"type": "http.response.body", "body": body, "more_body": False})


class Tied(Format, Protocol):
    """The format of a generation that lives and dies with its request."""

    id: str
    input_tokens: int

    def final(self) -> dict[str, Any]:
        """The whole answer of a non-streaming request."""
        ...


def tied_generation(
    ledger: Ledger,
    api: Api,
    request: Request,
    body: dict[str, Any],
    fmt: Tied,
    error: Callable[[int, str], Response],
) -> Response:
    """Answer ``request`` with a new generation that is tied to it (chat completions, Anthropic
    Messages): cut by ``die_after``, stopped when the client goes away; SSE when the body asks
    for ``stream``, else the final JSON once it has finished."""
    headers = lower_headers(request)
    record = Record(fmt.id, api, body, headers, headers.get("idempotency-key"))
    reply = begin(ledger, record, fmt.input_tokens, error)
    if isinstance(reply, Response):
        return reply
    run = launch(ledger, record, reply, fmt)
    if body.get("stream") is True:
        return EventStream(run, die=True, on_disconnect=run.cancel)
    return FinalJSON(run, fmt.final, die=True, on_disconnect=run.cancel)
