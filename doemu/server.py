"""The ASGI app ``doemu dev`` serves: the entry worker, the default router, the WebSocket bridge.

Object traffic goes through a thin ASGI callable rather than a routing framework: one request is
one dict lookup, one ``Request`` built from the scope, one event on the object. The admin API is a
small Starlette app mounted under ``/__doemu/api``.

* With a ``Default(WorkerEntrypoint)`` in the main module, every request goes to its ``fetch``.
* Without one, ``/<BINDING>/<name>/<rest>`` goes to that object's ``fetch`` (the default router).
* A WebSocket upgrade is answered by whatever ``fetch`` returns: a 101 ``Response`` with a
  ``web_socket`` completes the handshake and the server bridges frames; anything else refuses it
  with that response's status and body.

Every failure becomes a JSON ``{"error": ...}`` response with a 4xx/5xx status; the server keeps
serving other requests and other objects.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any
from urllib.parse import unquote

from .admin import ADMIN_PREFIX, build_admin_app
from .compat import call_relaxed
from .compat.fetch_api import Headers, Request, Response
from .compat.websocket import CloseEvent, WebSocket
from .errors import DataCloneError, InvalidIdError, ObjectResetError
from .runtime import Runtime
from .socket_events import SocketEvent, collect_socket_events, resume
from .ws_protocol import SEND_FRAME

__all__ = ["DEFAULT_MAX_BODY", "DoemuApp", "EntryContext"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_log = logging.getLogger("doemu.server")

#: Cloudflare's request-body limit on the smallest plan (100 MB).
DEFAULT_MAX_BODY = 100 * 1024 * 1024
#: workerd's close reason for a client that vanished without a Close frame.
ABNORMAL_CLOSE_REASON = "WebSocket disconnected without sending Close frame."


class HttpError(Exception):
    """A request doemu refuses before it reaches user code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class EntryContext:
    """The ``ctx`` a ``WorkerEntrypoint`` receives: ``waitUntil`` and pass-through."""

    __slots__ = ("_tasks",)

    def __init__(self, tasks: set[asyncio.Task[Any]]) -> None:
        self._tasks = tasks

    def waitUntil(self, awaitable: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(awaitable)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def passThroughOnException(self) -> None:
        """There is no origin to pass through to locally; kept for API compatibility."""


def _json_response(status: int, body: dict[str, Any]) -> Response:
    return Response._from_parts(
        status, {"content-type": "application/json"}, json.dumps(body).encode()
    )


class DoemuApp:
    """The root ASGI application."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        entry: type | None = None,
        admin_token: str | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        hold_alarms: bool = False,
    ) -> None:
        self.runtime = runtime
        #: Let the server report ready before persisted alarms fire (see Runtime.start).
        self.hold_alarms = hold_alarms
        self.entry = entry
        self.max_body = max_body
        self.admin = build_admin_app(runtime, token=admin_token)
        self._entry_tasks: set[asyncio.Task[Any]] = set()
        #: Frames the objects sent this loop turn (see _Outbound).
        self._writes = _WriteBatch()

    # -- ASGI -----------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path: str = scope["path"]
            if path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/"):
                child = dict(scope)
                child["root_path"] = scope.get("root_path", "") + ADMIN_PREFIX
                child["path"] = path[len(ADMIN_PREFIX) :] or "/"
                await self.admin(child, receive, send)
                return
            await self._http(scope, receive, send)
        elif kind == "websocket":
            await self._websocket(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.runtime.start(hold_alarms=self.hold_alarms)
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.runtime.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- HTTP -------------------------------------------------------------------------------------
    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = await self._read_body(scope, receive)
            request = self._request(scope, body)
            response = await self._dispatch(scope, request)
            if response._web_socket is not None:
                _release_uncoupled(response._web_socket)
                raise HttpError(
                    500, "fetch() returned a 101 WebSocket response to a plain HTTP request"
                )
        except HttpError as exc:
            response = _json_response(exc.status, {"error": exc.message})
        await _send_response(send, response, head=scope["method"] == "HEAD")

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    raise HttpError(400, "invalid Content-Length header") from None
                if declared > self.max_body:
                    raise HttpError(
                        413, f"request body of {declared} bytes exceeds the {self.max_body} limit"
                    )
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, "client disconnected before sending the whole body")
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > self.max_body:
                    raise HttpError(413, f"request body exceeds the {self.max_body} byte limit")
                chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _request(self, scope: Scope, body: bytes) -> Request:
        # ASGI servers hand over lowercase names that their HTTP parser has validated.
        entries = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in scope["headers"]]
        headers = Headers._trusted(entries)
        host = next((v for n, v in entries if n == "host"), None)
        if host is None:
            server = scope.get("server") or ("127.0.0.1", 8787)
            host = f"{server[0]}:{server[1]}"
        scheme = scope.get("scheme", "http")
        if scheme == "ws":
            scheme = "http"
        elif scheme == "wss":
            scheme = "https"
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        url = f"{scheme}://{host}{path}" + (f"?{query}" if query else "")
        method = scope.get("method", "GET")
        return Request._from_parts(url, method, headers, body or None)

    async def _dispatch(self, scope: Scope, request: Request) -> Response:
        """Run ``fetch`` (entry worker or routed object); user errors become JSON 500s."""
        try:
            if self.entry is not None:
                instance = self.entry(EntryContext(self._entry_tasks), self.runtime.env)
                result = await call_relaxed(instance.fetch, request)
            else:
                stub = self._route(scope)
                result = await stub._deliver_fetch(request)  # fresh request: no copy needed
        except HttpError:
            raise
        except ObjectResetError as exc:
            raise HttpError(500, f"Durable Object reset: {exc.reason}") from None
        except (InvalidIdError, DataCloneError) as exc:
            raise HttpError(400, str(exc)) from None
        except Exception as exc:
            _log.error("fetch() raised:\n%s", "".join(traceback.format_exception(exc)))
            raise HttpError(500, f"{type(exc).__name__}: {exc}") from None
        if not isinstance(result, Response):
            raise HttpError(500, f"fetch() must return a Response, got {type(result).__name__}")
        return result

    def _route(self, scope: Scope) -> Any:
        # Split the raw path and decode each segment once: the ASGI "path" is already decoded,
        # so "/B/a%2Fb/x" would otherwise route to object "a" instead of "a/b".
        raw = scope.get("raw_path")
        path = raw.decode("latin-1").split("?", 1)[0] if raw else scope["path"]
        parts = path.split("/", 3)  # "", BINDING, name, rest
        if len(parts) < 3 or not parts[1] or not parts[2]:
            raise HttpError(
                404,
                f"no route for {path!r}: without a Default entry worker, doemu routes "
                f"/<BINDING>/<name>/<path> to an object; bindings: {sorted(self.runtime.bindings)}",
            )
        binding, name = parts[1], unquote(parts[2]) if raw else parts[2]
        ns = self.runtime.bindings.get(binding)
        if ns is None:
            raise HttpError(
                404, f"unknown binding {binding!r}; known: {sorted(self.runtime.bindings)}"
            )
        return ns.stub_namespace.getByName(name)

    # -- WebSocket ------------------------------------------------------------------------------
    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        try:
            request = self._request({**scope, "method": "GET"}, b"")
            response = await self._dispatch(scope, request)
        except HttpError as exc:
            response = _json_response(exc.status, {"error": exc.message})
        client = response._web_socket
        if client is None or response.status != 101:
            if response.status == 101 or response.status < 200:
                response = _json_response(
                    500,
                    {
                        "error": "fetch() must return Response(None, status=101, "
                        "web_socket=client) to accept a WebSocket"
                    },
                )
            await _refuse(scope, send, response)
            return
        try:
            client._couple()
        except Exception as exc:
            await _refuse(scope, send, _json_response(500, {"error": str(exc)}))
            return
        accept: Message = {"type": "websocket.accept"}
        protocol = response.headers.get("sec-websocket-protocol")
        if protocol:
            accept["subprotocol"] = protocol
        await send(accept)
        send_frame = scope.get("extensions", {}).get(SEND_FRAME)
        await _bridge(client, receive, send, self._writes, send_frame)


def _release_uncoupled(client: WebSocket) -> None:
    """Forget the server end of a pair whose client end will never reach the network."""
    server_end = client._peer
    host = getattr(server_end, "_host", None)
    if host is not None:
        host.sockets.remove(server_end)


async def _send_response(send: Send, response: Response, *, head: bool = False) -> None:
    try:
        headers = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in response.headers.items()
            if k != "content-length"  # always the real length: a wrong one breaks the connection
        ]
    except UnicodeEncodeError as exc:
        response = _json_response(500, {"error": f"fetch() returned a non-Latin-1 header: {exc}"})
        headers = [(b"content-type", b"application/json")]
    body = response.body or b""
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def _refuse(scope: Scope, send: Send, response: Response) -> None:
    """Refuse a WebSocket handshake with ``response``'s status and body where ASGI allows."""
    if "websocket.http.response" in scope.get("extensions", {}):
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
        await send(
            {"type": "websocket.http.response.start", "status": response.status, "headers": headers}
        )
        await send({"type": "websocket.http.response.body", "body": response.body or b""})
    else:
        await send({"type": "websocket.close", "code": 1008})


async def _bridge(
    client: WebSocket,
    receive: Receive,
    send: Send,
    batch: _WriteBatch,
    send_frame: Callable[[str | bytes], bool] | None = None,
) -> None:
    """Pump frames between the network and the client end of the pair until either side closes.

    No task per frame in either direction: a frame the object sends is written with every other
    frame of the same loop turn (:class:`_Outbound`), and a frame that arrives starts its handler
    in the task that read it (:class:`_Inbound`). This task only waits for the connection to
    end, so it never runs user code and uvicorn's shutdown never waits for a handler.
    """
    outbound = _Outbound(send, batch, send_frame)
    for item in list(client._inbox):  # what the object sent before the handshake completed
        if isinstance(item, str | bytes):
            outbound.message(item)
        elif isinstance(item, CloseEvent):
            outbound.close(item.code, item.reason)
    client._inbox.clear()
    client._sink = outbound.message
    client._close_sink = outbound.close
    inbound = _Inbound(client, receive)
    try:
        await inbound.ended
    finally:
        inbound.stop()
        outbound.stop()


class _Outbound:
    """Frames from the object to the network, in order, with no task unless the network is slow.

    A frame is not written from inside the object's ``ws.send()`` but at the start of the next
    loop turn, together with every other frame sent during this turn (:class:`_WriteBatch`).
    Writing each frame at once is cheaper in Python but dearer in the kernel: with 50 busy
    connections, writes spread between the reads and handlers of a turn cost about a quarter
    more server CPU per echo than the same writes back to back, which is also what the task
    per frame this replaced happened to do. A lone frame waits only for the rest of its turn
    (writing the first frame of a turn at once would make one connection's round trip ~15 %
    faster, but costs the busy case ~2 %). uvicorn's ``send`` is a coroutine that only suspends
    under flow control (the transport's buffer is full), so it is driven by hand: it normally
    finishes on the spot. If it suspends, a task finishes it and later frames (a close
    included) queue behind it, so order is kept. With doemu's uvicorn protocol, a data frame
    skips ``send`` altogether (``send_frame``, see :mod:`doemu.ws_protocol`) whenever that
    protocol says it can be written as it is.
    """

    __slots__ = ("_backlog", "_batch", "_closed", "_dead", "_send", "_send_frame", "_task")

    def __init__(
        self,
        send: Send,
        batch: _WriteBatch,
        send_frame: Callable[[str | bytes], bool] | None = None,
    ) -> None:
        self._send = send
        self._send_frame = send_frame
        self._batch = batch
        #: Frames waiting behind a suspended send; ``None`` while nothing is suspended.
        self._backlog: deque[Message] | None = None
        self._task: asyncio.Task[None] | None = None
        #: A close frame is on its way: later frames are dropped (the object cannot send any).
        self._closed = False
        #: The connection is over or a send failed: nothing more is written.
        self._dead = False

    def message(self, data: str | bytes) -> None:
        """The object sent ``data`` (the client end's ``_sink``)."""
        if isinstance(data, bytes):
            self._put({"type": "websocket.send", "bytes": data})
        else:
            self._put({"type": "websocket.send", "text": data})

    def close(self, code: int, reason: str, *_: Any) -> None:
        """The object closed (the client end's ``_close_sink``); 1005 is "no code": 1000."""
        self._put(
            {"type": "websocket.close", "code": 1000 if code == 1005 else code, "reason": reason}
        )
        self._closed = True

    def stop(self) -> None:
        """The connection is over: drop whatever has not been written."""
        self._dead = True
        self._backlog = None
        if self._task is not None:
            self._task.cancel()

    def _put(self, message: Message) -> None:
        if self._closed or self._dead:
            return
        if self._backlog is not None:
            self._backlog.append(message)
        else:
            self._batch.add(self, message)

    def write(self, message: Message) -> None:
        """Hand ``message`` to uvicorn now (the batch's flush), or queue it behind a slow send."""
        if self._dead:
            return
        if self._backlog is not None:
            self._backlog.append(message)
            return
        send_frame = self._send_frame
        if send_frame is not None and message["type"] == "websocket.send":
            data = message.get("text")
            try:
                if send_frame(message["bytes"] if data is None else data):
                    return
            except Exception:  # e.g. text that is not UTF-8: uvicorn's send says why
                pass
        try:
            sending = self._send(message)
            if not isinstance(sending, Coroutine):
                self._suspended(sending)
                return
            yielded = sending.send(None)
        except StopIteration:
            return
        except Exception as exc:
            self._failed(exc)
            return
        self._suspended(resume(sending, yielded))

    def _suspended(self, rest: Awaitable[None]) -> None:
        """A send must wait: a task finishes it, and later frames wait in the backlog."""
        self._backlog = deque()
        self._task = asyncio.get_running_loop().create_task(self._drain(rest))

    async def _drain(self, rest: Awaitable[None]) -> None:
        try:
            await rest
            backlog = self._backlog
            while backlog:
                await self._send(backlog.popleft())
        except Exception as exc:
            self._failed(exc)
        finally:
            self._backlog = None
            self._task = None

    def _failed(self, exc: Exception) -> None:
        # The client is gone (uvicorn raises ClientDisconnected) or the connection is closing;
        # the object learns of it from the disconnect, never from its own send().
        _log.debug("dropping WebSocket frames after a failed send: %r", exc)
        self._dead = True


class _WriteBatch:
    """The frames every connection sent during this loop turn, written at the start of the next.

    One callback per turn for all connections, not a task or a callback per frame.
    """

    __slots__ = ("_frames", "_loop")

    def __init__(self) -> None:
        self._frames: list[tuple[_Outbound, Message]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def add(self, outbound: _Outbound, message: Message) -> None:
        frames = self._frames
        if not frames or self._loop is None or not self._loop.is_running():
            # The first frame of this turn (or frames left by a loop that stopped before its
            # flush, as between tests): schedule the flush on the running loop.
            frames.clear()
            self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._flush)
        frames.append((outbound, message))

    def _flush(self) -> None:
        frames = self._frames
        self._frames = []
        for outbound, message in frames:
            outbound.write(message)


class _Inbound:
    """Frames from the network to the object, each handler started by the task that read it.

    A handler that finishes without suspending (the usual case) costs no task at all. One that
    suspends (a long LLM stream, an RPC call, the input gate) keeps the task it started in (see
    :class:`~doemu.host.SocketEvent`), and reading moves to a new task, so the next message is
    delivered while the handler waits: events interleave across awaits, as on Cloudflare, and
    start in the order their frames arrived.
    """

    __slots__ = ("_client", "_closed", "_reader", "_receive", "ended")

    def __init__(self, client: WebSocket, receive: Receive) -> None:
        self._client = client
        self._receive = receive
        self._closed = False
        #: Resolved when the connection is over (the bridge's task then returns).
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader: asyncio.Task[None] | None = None
        self._read()

    def stop(self) -> None:
        """Stop reading if the connection is still open (the bridge's task was cancelled)."""
        if not self._closed and self._reader is not None:
            self._reader.cancel()

    def _read(self) -> None:
        """Read the connection in a new task."""
        self._reader = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        client = self._client
        receive = self._receive
        reader = self._reader  # this task: _read() set it before the task first ran
        assert reader is not None
        suspended: SocketEvent | None = None
        try:
            while suspended is None and not self._closed:
                message = await receive()
                if message["type"] == "websocket.receive":
                    text = message.get("text")
                    data = text if text is not None else message.get("bytes") or b""
                    events = collect_socket_events(client._forward, data)
                else:
                    events = self._other(message)
                for index, event in enumerate(events):
                    finished = event.start()
                    if finished and not reader.cancelling():
                        continue
                    # The handler keeps this task (or, returning, left it a cancellation of
                    # its own making, due at its next await); reading goes on in another one.
                    # Events of the same frame after it (rare) start as tasks, in order.
                    for later in events[index + 1 :]:
                        later.spawn()
                    if not self._closed:
                        self._read()
                    if finished:
                        return
                    suspended = event
                    break
        except Exception as exc:
            self._end()
            client._forward_error(exc)
            return
        if suspended is not None:
            await suspended.finish()

    def _other(self, message: Message) -> list[SocketEvent]:
        """Any ASGI message but a frame: the disconnect ends the connection."""
        if message["type"] != "websocket.disconnect":
            return []
        self._end()
        client = self._client
        code = int(message.get("code", 1005))
        # uvicorn reports a lost connection as 1006, or (sans-I/O implementation) as 1005
        # without a "reason" key; a received Close frame always carries "reason".
        if code == 1006 or (code == 1005 and "reason" not in message):
            return collect_socket_events(client._forward_close, 1006, ABNORMAL_CLOSE_REASON, False)
        reason = str(message.get("reason") or "")
        return collect_socket_events(client._forward_close, code, reason, True)

    def _end(self) -> None:
        self._closed = True
        if not self.ended.done():
            self.ended.set_result(None)
