"""``GET /__doemu/api/events``: lifecycle events (and, while it runs, requests and log lines:
see :mod:`.logfeed`) as server-sent events.

Its own module because a stream has a lifecycle no other admin route has: it subscribes before the
response starts, runs until the client leaves, and must notice a departure even while no event
arrives.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from ...events import EventBus, LifecycleEvent
from ...inspection.readers import jsonable
from .logfeed import LogFeed

__all__ = ["EventStream"]

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # reverse proxies must not buffer a stream
]


class EventStream:
    """``GET /events``: lifecycle events as server-sent events until the client goes away.

    A plain ASGI app rather than a ``StreamingResponse`` for two reasons. The subscription must
    exist before the client can see the response start, or an event the client triggers right
    after connecting could be missed. And the stream must end when the client disconnects even
    while no event arrives, which ``StreamingResponse`` does not do on ASGI 2.4 servers.
    """

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "HEAD":  # headers only: a HEAD response has no stream to wait for
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            await send({"type": "http.response.body", "body": b""})
            return
        events = self.bus.subscribe()  # registered now: nothing after the headers can be missed
        feed = LogFeed()  # requests and log lines, while this stream runs (see .logfeed)
        next_event: asyncio.Future[Any] = asyncio.ensure_future(anext(events))
        next_line: asyncio.Future[Any] = asyncio.ensure_future(feed.queue.get())
        gone: asyncio.Future[Any] = asyncio.ensure_future(_disconnected(receive))
        try:
            with feed:
                await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
                await send(_chunk(b": doemu lifecycle events\n\n"))
                while True:
                    await asyncio.wait(
                        {next_event, next_line, gone}, return_when=asyncio.FIRST_COMPLETED
                    )
                    if gone.done():
                        return
                    if next_event.done():
                        event: LifecycleEvent = next_event.result()
                        next_event = asyncio.ensure_future(anext(events))
                        await send(_sse(event["type"], event))
                    if next_line.done():
                        kind, line = next_line.result()
                        next_line = asyncio.ensure_future(feed.queue.get())
                        await send(_sse(kind, {"type": kind, **line}))
        except OSError:
            return  # the client went away mid-send (ASGI 2.4 servers raise instead of ignoring)
        finally:
            for future in (next_event, next_line, gone):
                future.cancel()
            await asyncio.gather(next_event, next_line, gone, return_exceptions=True)
            events.close()


def _sse(kind: str, event: dict[str, Any]) -> Message:
    data = json.dumps(jsonable(event))
    return _chunk(f"event: {kind}\ndata: {data}\n\n".encode())


def _chunk(body: bytes) -> Message:
    return {"type": "http.response.body", "body": body, "more_body": True}


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
