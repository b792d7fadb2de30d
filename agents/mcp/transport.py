"""MCP's streamable-HTTP transport, client side, over ``workers.fetch``.

Why not the official ``mcp`` SDK's client: it is built on httpx and anyio, and inside a Worker
(Pyodide) there are no sockets for httpx and no anyio event loop of its own — the only way out
is ``fetch``. The transport is small enough to speak directly (MCP 2025-11-25, "Streamable
HTTP"): every JSON-RPC message is a ``POST`` of one JSON object; the answer is ``202`` for a
notification, or the response either as ``application/json`` or as an SSE stream
(``text/event-stream``) whose ``data:`` lines are JSON-RPC messages, the response among them.
The server names a session in the ``Mcp-Session-Id`` header of its ``initialize`` answer; every
later request carries it and ``MCP-Protocol-Version``, and ``DELETE`` ends it. A ``404`` on a
session means it expired: the caller initializes again.

The official SDK builds the real MCP server the tests run against, so this client is proven
against the reference implementation's wire behaviour.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Mapping
from typing import Any

from workers import fetch

from ..errors import McpError, McpProtocolError

__all__ = ["PROTOCOL_VERSION", "McpSessionExpired", "McpUnauthorized", "StreamableHttp"]

#: The revision this client speaks (the newest reachable through the initialize handshake).
PROTOCOL_VERSION = "2025-11-25"


class McpSessionExpired(McpError):
    """The server no longer knows the session (HTTP 404): initialize again."""


class McpUnauthorized(McpError):
    """The server answered ``401``: ``www_authenticate`` is its challenge (OAuth starts there)."""

    def __init__(self, message: str, www_authenticate: str | None) -> None:
        super().__init__(message)
        self.www_authenticate = www_authenticate


def _as_bytes(piece: Any) -> bytes:
    if isinstance(piece, bytes | bytearray | memoryview):
        return bytes(piece)
    to_bytes = getattr(piece, "to_bytes", None)  # a JS Uint8Array in a Worker
    if to_bytes is not None:
        return bytes(to_bytes())
    return piece.encode() if isinstance(piece, str) else bytes(piece)


class _SseData:
    """The ``data`` of each SSE event, in order (MCP uses no other field that matters here)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []

    def feed(self, data: bytes) -> list[str]:
        self._buffer += self._decoder.decode(data).replace("\r\n", "\n").replace("\r", "\n")
        events: list[str] = []
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                self._data = []
            elif line.startswith("data:"):
                self._data.append(line[5:].removeprefix(" "))
        return events


class StreamableHttp:
    """One MCP session with one server: ``request``, ``notify``, ``close``."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        #: The OAuth ``Authorization`` header, read at every request (tokens are refreshed).
        self.authorization: Callable[[], Mapping[str, str]] = dict
        self._next_id = 0

    def _headers(self) -> dict[str, str]:
        headers = {
            **self.headers,
            **self.authorization(),
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send a request; its ``result``, or :class:`McpProtocolError` for an ``error``."""
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        response = await self._post(message)
        if response.status == 202:
            raise McpError(f"MCP server {self.url} accepted {method} but sent no response")
        if method == "initialize":
            session = response.headers.get("mcp-session-id")
            self.session_id = session if isinstance(session, str) and session else None
        answer = await self._read_response(response, request_id)
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            code = error.get("code")
            raise McpProtocolError(
                f"MCP server {self.url}: {method} failed: {error.get('message', answer['error'])}",
                code=code if isinstance(code, int) else None,
            )
        return answer.get("result")

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        response = await self._post(message)
        if response.status not in (200, 202, 204):
            raise McpError(f"MCP server {self.url}: {method} answered HTTP {response.status}")
        await _discard(response)

    async def close(self) -> None:
        """End the session on the server (``DELETE``); a server that refuses it is ignored."""
        if self.session_id is None:
            return
        try:
            response = await fetch(self.url, method="DELETE", headers=self._headers())
            await _discard(response)
        except Exception:
            pass
        self.session_id = None

    async def _post(self, message: Mapping[str, Any]) -> Any:
        try:
            response = await fetch(
                self.url, method="POST", headers=self._headers(), body=json.dumps(message)
            )
        except Exception as exc:  # refused, reset, DNS: say which server
            raise McpError(f"MCP server {self.url} could not be reached: {exc}") from exc
        status = int(response.status)
        if status == 404 and self.session_id is not None:
            await _discard(response)
            raise McpSessionExpired(f"MCP server {self.url} no longer knows the session")
        if status == 401:
            challenge = response.headers.get("www-authenticate")
            await _discard(response)
            raise McpUnauthorized(
                f"MCP server {self.url} answered HTTP 401: it needs authorization",
                challenge if isinstance(challenge, str) else None,
            )
        if status >= 400:
            text = (await response.text())[:300]
            raise McpError(f"MCP server {self.url} answered HTTP {status}: {text}")
        return response

    async def _read_response(self, response: Any, request_id: int) -> dict[str, Any]:
        content_type = str(response.headers.get("content-type") or "").lower()
        if content_type.startswith("application/json"):
            return _match(json.loads(await response.text()), request_id, self.url)
        if not content_type.startswith("text/event-stream"):
            raise McpError(f"MCP server {self.url} answered with content-type {content_type!r}")
        stream = response.body
        if stream is None:
            raise McpError(f"MCP server {self.url} sent an empty event stream")
        decoder = _SseData()
        found: dict[str, Any] | None = None
        async for piece in stream:
            for data in decoder.feed(_as_bytes(piece)):
                try:
                    message = json.loads(data)
                except ValueError:
                    continue
                if isinstance(message, dict) and message.get("id") == request_id:
                    found = message
            if found is not None:
                break
        if found is None:
            raise McpError(f"MCP server {self.url} closed the stream before answering")
        await _cancel(stream)  # the server may hold the stream open for more: not needed
        return found


def _match(message: Any, request_id: int, url: str) -> dict[str, Any]:
    messages = message if isinstance(message, list) else [message]
    for item in messages:
        if isinstance(item, dict) and item.get("id") == request_id:
            return item
    raise McpError(f"MCP server {url} answered without the response to request {request_id}")


async def _discard(response: Any) -> None:
    try:
        await response.text()
    except Exception:
        pass


async def _cancel(stream: Any) -> None:
    cancel = getattr(stream, "cancel", None)
    if cancel is None:
        return
    try:
        result = cancel()
        if hasattr(result, "__await__"):
            await result
    except Exception:
        pass
