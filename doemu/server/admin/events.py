"""``GET /__doemu/api/events``: lifecycle events as server-sent events.

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
        next_event: asyncio.Future[Any] = asyncio.ensure_future(anext(events))
        gone: asyncio.Future[Any] = asyncio.ensure_future(_disconnected(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            await send(_chunk(b": doemu lifecycle events\n\n"))
            while True:
                await asyncio.wait({next_event, gone}, return_when=asyncio.FIRST_COMPLETED)
                if gone.done():
                    return
                event: LifecycleEvent = next_event.result()
                next_event = asyncio.ensure_future(anext(events))
                data = json.dumps(jsonable(event))
                await send(_chunk(f"event: {event['type']}\ndata: {data}\n\n".encode()))
        except OSError:
            return  # the client went away mid-send (ASGI 2.4 servers raise instead of ignoring)
        finally:
            next_event.cancel()
            gone.cancel()
            await asyncio.gather(next_event, gone, return_exceptions=True)
            events.close()


def _chunk(body: bytes) -> Message:
    return {"type": "http.response.body", "body": body, "more_body": True}


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
