"""HTTP and WebSocket clients for a :class:`~doemu.testing.WorkerHarness`, in the test's process.

``h.client()`` is an ``httpx.AsyncClient`` over ``httpx.ASGITransport`` and doemu's own ASGI app
(:class:`~doemu.server.app.DoemuApp`: the entry worker, or the default router, exactly as
``doemu dev`` serves them) on the harness's runtime: no port, no subprocess, the harness's
manual clock. ``ASGITransport`` reads a whole response before returning it, so a stream that
never ends (an SSE feed) needs a real server (``doemu_dev``).

``h.websocket(path)`` is :class:`ASGIWebSocket`: a small client that speaks the ASGI WebSocket
protocol (``websocket.connect`` / ``accept`` / ``receive`` / ``send`` / ``disconnect``) to the same
app in a task of the test's event loop. It is written here rather than taken from ``httpx-ws``
(whose ``ASGIWebSocketTransport`` does the same) because it needs no new dependency in what
doemu installs for users, reports a refused handshake with the status and body the Worker
returned (the ``websocket.http.response`` extension), and a close with its code and reason.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ASGIWebSocket", "WebSocketClosed", "WebSocketRefused"]

#: How long a receive, or the app's ending after a close, may take before the test fails.
DEFAULT_TIMEOUT = 10.0


class WebSocketRefused(Exception):
    """The handshake was refused: ``status`` and ``body`` are what the Worker answered."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"WebSocket handshake refused with {status}: {body[:200]!r}")
        self.status = status
        self.body = body


class WebSocketClosed(Exception):
    """The server closed the connection (``code``, ``reason``): nothing more to receive."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"WebSocket closed by the server: {code} {reason!r}")
        self.code = code
        self.reason = reason


class ASGIWebSocket:
    """One WebSocket connection to an ASGI app, in process (see the module docstring).

    ``async with`` it (or ``await ws.connect()`` and ``await ws.close()``); then ``send_text``,
    ``send_bytes``, ``send_json`` and ``receive_text``, ``receive_bytes``, ``receive_json``,
    ``receive`` (text or bytes). Receiving after the server closed raises
    :class:`WebSocketClosed`; an exception in the app is raised by the next call.
    """

    def __init__(
        self,
        app: Any,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        subprotocols: Iterable[str] = (),
        client: tuple[str, int] = ("127.0.0.1", 50000),
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        parts = urlsplit(url if "://" in url else "ws://testserver" + url)
        host = parts.netloc or "testserver"
        self._app = app
        self.timeout = timeout
        self.subprotocol: str | None = None
        #: Set once the server closed the connection: ``(code, reason)``.
        self.closed: tuple[int, str] | None = None
        self._scope: dict[str, Any] = {
            "type": "websocket",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "scheme": "wss" if parts.scheme in ("wss", "https") else "ws",
            "server": (parts.hostname or "testserver", parts.port or 80),
            "client": client,
            "root_path": "",
            "path": parts.path or "/",
            "raw_path": (parts.path or "/").encode(),
            "query_string": parts.query.encode(),
            "headers": [
                (b"host", host.encode()),
                (b"connection", b"upgrade"),
                (b"upgrade", b"websocket"),
                (b"sec-websocket-version", b"13"),
                *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
            ],
            "subprotocols": list(subprotocols),
            "extensions": {"websocket.http.response": {}},
        }
        self._to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    # -- the app's side ----------------------------------------------------------------------
    async def _receive(self) -> dict[str, Any]:
        return await self._to_app.get()

    async def _send(self, message: Mapping[str, Any]) -> None:
        await self._from_app.put(dict(message))

    async def _run(self) -> None:
        try:
            await self._app(self._scope, self._receive, self._send)
        finally:
            await self._from_app.put({"type": "doemu.app.ended"})

    async def _next(self) -> dict[str, Any]:
        """The app's next message; its exception if it failed; a deadline against a hang."""
        try:
            message = await asyncio.wait_for(self._from_app.get(), self.timeout)
        except TimeoutError:
            raise TimeoutError(f"no WebSocket message within {self.timeout} s") from None
        if message["type"] == "doemu.app.ended" and self._task is not None and self._task.done():
            if not self._task.cancelled() and self._task.exception() is not None:
                raise self._task.exception()  # type: ignore[misc]
        return message

    # -- the test's side ---------------------------------------------------------------------
    async def connect(self) -> ASGIWebSocket:
        """Open the connection: the app accepts it, or :class:`WebSocketRefused` says how not."""
        self._task = asyncio.ensure_future(self._run())
        await self._to_app.put({"type": "websocket.connect"})
        message = await self._next()
        kind = message["type"]
        if kind == "websocket.accept":
            self.subprotocol = message.get("subprotocol")
            return self
        if kind == "websocket.http.response.start":
            status = int(message["status"])
            body = b""
            while True:
                part = await self._next()
                if part["type"] != "websocket.http.response.body":
                    break
                body += part.get("body", b"")
                if not part.get("more_body"):
                    break
            await self._finish()
            raise WebSocketRefused(status, body)
        await self._finish()
        code = int(message.get("code", 1006)) if kind == "websocket.close" else 1006
        raise WebSocketRefused(403 if kind == "websocket.close" else 500, f"{code}".encode())

    async def send_text(self, text: str) -> None:
        await self._to_app.put({"type": "websocket.receive", "text": text})

    async def send_bytes(self, data: bytes) -> None:
        await self._to_app.put({"type": "websocket.receive", "bytes": data})

    async def send_json(self, value: Any) -> None:
        await self.send_text(json.dumps(value))

    async def receive(self) -> str | bytes:
        """The next frame the server sent (text or bytes)."""
        if self.closed is not None:
            raise WebSocketClosed(*self.closed)
        message = await self._next()
        if message["type"] == "websocket.send":
            text = message.get("text")
            return text if text is not None else bytes(message.get("bytes") or b"")
        if message["type"] == "websocket.close":
            self.closed = (int(message.get("code", 1000)), str(message.get("reason") or ""))
        else:
            self.closed = (1006, "")
        raise WebSocketClosed(*self.closed)

    async def receive_text(self) -> str:
        frame = await self.receive()
        if not isinstance(frame, str):
            raise TypeError(f"expected a text frame, got {len(frame)} bytes")
        return frame

    async def receive_bytes(self) -> bytes:
        frame = await self.receive()
        if not isinstance(frame, bytes):
            raise TypeError(f"expected a binary frame, got text {frame[:80]!r}")
        return frame

    async def receive_json(self) -> Any:
        return json.loads(await self.receive_text())

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close from the client's side (the object's ``webSocketClose`` runs) and wait for the
        app to finish with the connection."""
        if self._task is None or self._task.done():
            return
        await self._to_app.put({"type": "websocket.disconnect", "code": code, "reason": reason})
        await self._finish()

    async def _finish(self) -> None:
        task = self._task
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), self.timeout)
        except TimeoutError:
            task.cancel()
            raise TimeoutError(
                f"the app did not end the WebSocket within {self.timeout} s"
            ) from None

    async def __aenter__(self) -> ASGIWebSocket:
        return await self.connect()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
