"""doemu's WebSocket protocol for uvicorn: uvicorn's sans-I/O protocol with two shortcuts.

Both keep uvicorn's behaviour and only remove per-message work that a busy echo showed:

* **Lazy pausing.** uvicorn stops reading a connection (``pause_reading``) as soon as one message
  waits for the app, and starts again (``resume_reading``) when the app takes it: two
  ``epoll_ctl`` calls and, on asyncio's own loop, a selector re-registration in Python for every
  single message, though the app takes it a moment later. This protocol pauses only when a
  message arrives while an earlier one is still waiting (the app really is behind), so at most
  two messages and one read are buffered per connection, as with uvicorn's rule. Measured with
  50 connections echoing on asyncio's loop: about 30 % less server CPU per round trip (on uvloop,
  where pausing is cheap C, about the same).
* **Direct data frames.** An ASGI ``websocket.send`` goes through a coroutine, a flow-control
  wait, a ``Frame`` object, the websockets library's serializer and a list join before the one
  ``transport.write`` that matters. A server's data frame is a two-to-ten-byte header and the
  unmasked payload, so while the connection is open, writable, not fragmenting and has no
  extension (permessage-deflate compresses frames: then uvicorn's path is taken), the bridge
  writes the frame itself through :data:`SEND_FRAME`, a callable this protocol puts in the
  connection's ASGI ``extensions``. Anything else (a close, a full transport buffer, a
  compressed connection) goes through uvicorn's ``send`` exactly as before; frames keep their
  order because both paths write synchronously.

It also answers a malformed handshake the way the rest of the server answers errors: websockets
refuses one (no ``Sec-WebSocket-Key``, a version other than 13, not a GET...) before the app is
called, with a plain-text body; this protocol sends the same status with a JSON
``{"error": ...}`` body naming the problem (and, for a bad version, the ``Sec-WebSocket-Version:
13`` that RFC 6455 section 4.4 requires).

Imported on first use (it imports websockets). A uvicorn without the sans-I/O implementation gets
the protocol its ``ws="auto"`` picks, without either shortcut.
"""

from __future__ import annotations

import asyncio
import functools
import json
import struct
from collections.abc import Callable
from typing import Any

__all__ = ["ABORT", "SEND_FRAME", "encode_data_frame", "uvicorn_ws_protocol"]

#: The ASGI ``extensions`` key under which the protocol offers its direct frame writer:
#: ``writer(data: str | bytes) -> bool``, False when the frame must go through ``send``.
SEND_FRAME = "doemu.websocket.send_frame"
#: The ASGI ``extensions`` key of ``abort() -> None``: drop the connection at once (TCP reset, no
#: Close frame, whatever is still buffered for it discarded); the app then sees a 1006
#: disconnect. The bridge uses it for a client that stopped reading (see
#: :data:`doemu.sockets.bridge.MAX_UNSENT_BYTES`): a Close frame would only queue behind the
#: frames it is not reading.
ABORT = "doemu.websocket.abort"

_TEXT = 0x81  # FIN + text opcode
_BINARY = 0x82  # FIN + binary opcode
_HEADER_16 = struct.Struct("!BBH")
_HEADER_64 = struct.Struct("!BBQ")


def encode_data_frame(data: str | bytes) -> bytes:
    """One unfragmented, unmasked RFC 6455 data frame (what a server sends): text for ``str``."""
    if isinstance(data, str):
        payload, first = data.encode(), _TEXT
    else:
        payload, first = bytes(data), _BINARY
    size = len(payload)
    if size < 126:
        return bytes((first, size)) + payload
    if size < 1 << 16:
        return _HEADER_16.pack(first, 126, size) + payload
    return _HEADER_64.pack(first, 127, size) + payload


@functools.cache
def uvicorn_ws_protocol() -> Callable[..., asyncio.Protocol]:
    """The WebSocket protocol class to give uvicorn (``ws=``); see the module docstring."""
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
        from websockets.exceptions import InvalidHandshake, InvalidHeader
        from websockets.http11 import Request, Response
        from websockets.protocol import State
        from websockets.server import ServerProtocol
    except ImportError:  # pragma: no cover - uvicorn before 0.35
        from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

        if AutoWebSocketsProtocol is None:
            raise RuntimeError("no WebSocket implementation: install websockets") from None
        return AutoWebSocketsProtocol

    open_state = State.OPEN

    class JsonRefusingServerProtocol(ServerProtocol):
        """websockets' server handshake, refusing with a JSON body (see the module docstring)."""

        def accept(self, request: Request) -> Response:
            response = super().accept(request)
            if response.status_code != 101:
                exc = self.handshake_exc
                if isinstance(exc, InvalidHandshake):
                    message = f"WebSocket handshake refused: {exc}"
                else:  # an unexpected error, logged by websockets with its traceback
                    message = "WebSocket handshake failed; see the server log"
                if isinstance(exc, InvalidHeader) and exc.name == "Sec-WebSocket-Version":
                    response.headers["Sec-WebSocket-Version"] = "13"
                body = json.dumps({"error": message}).encode()
                del response.headers["Content-Type"], response.headers["Content-Length"]
                response.headers["Content-Type"] = "application/json"
                response.headers["Content-Length"] = str(len(body))
                response.body = body
            return response

    class DoemuWebSocketProtocol(WebSocketsSansIOProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # uvicorn builds a plain ServerProtocol and offers no hook to choose the class; the
            # subclass adds behaviour to one method and no state, so it is swapped in as is.
            self.conn.__class__ = JsonRefusingServerProtocol

        def send_receive_event_to_app(self) -> None:
            if self.read_paused or not self.queue.empty():
                super().send_receive_event_to_app()  # the app is behind: pause, as uvicorn does
                return
            self.read_paused = True  # uvicorn's own check then skips the pause
            try:
                super().send_receive_event_to_app()
            finally:
                self.read_paused = False

        def handle_connect(self, event: Any) -> None:
            super().handle_connect(event)
            scope: Any = getattr(self, "scope", None)
            if scope is not None:  # an accepted upgrade: the app will be called with it
                scope["extensions"][SEND_FRAME] = self.send_frame
                scope["extensions"][ABORT] = self.abort_connection

        def abort_connection(self) -> None:
            """Drop the connection now (see :data:`ABORT`)."""
            if not self.disconnected:
                self.transport.abort()

        def send_frame(self, data: str | bytes) -> bool:
            """Write one data frame now, as ``send`` would; False: use ``send`` instead."""
            conn = self.conn
            if (
                not self.handshake_complete
                or self.close_sent
                or self.disconnected
                or self.initial_response is not None
                or not self.writable.is_set()
                or conn.state is not open_state
                or conn.extensions
                or conn.expect_continuation_frame
            ):
                return False
            self.transport.write(encode_data_frame(data))
            return True

    return DoemuWebSocketProtocol
