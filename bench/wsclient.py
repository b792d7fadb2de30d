"""A minimal asyncio WebSocket client for the benchmark (bench/load.py, profile_misses.py).

RFC 6455 handshake, masked frames out, messages in a queue: small enough that a round trip
measures the server, not the client. Loopback only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import socket
from collections import deque

from benchlib import LOOPBACK, HttpError

_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class _WsProtocol(asyncio.Protocol):
    """A client WebSocket: RFC 6455 handshake, masked frames out, messages in a queue."""

    def __init__(self, host: str, path: str) -> None:
        self.host, self.path = host, path
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.key = base64.b64encode(os.urandom(16))
        self.open: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.messages: deque[tuple[int, bytes]] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.handshaken = False
        self.closed = False
        self.close_code: int | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport.write(  # type: ignore[union-attr]
            f"GET {self.path} HTTP/1.1\r\nHost: {self.host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {self.key.decode()}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.open.done():
            self.open.set_exception(HttpError(f"connection lost during handshake: {exc!r}"))
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.handshaken:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            del self.buf[: end + 4]
            status = int(head[0].split(" ", 2)[1])
            accept = base64.b64encode(hashlib.sha1(self.key + _WS_GUID).digest()).decode()
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])
            }
            if status != 101 or headers.get("sec-websocket-accept") != accept:
                self.open.set_exception(HttpError(f"handshake refused: {head[0]}"))
                assert self.transport is not None
                self.transport.close()
                return
            self.handshaken = True
            self.open.set_result(None)
        self._frames()

    def _frames(self) -> None:
        buf = self.buf
        got = False
        while len(buf) >= 2:
            opcode = buf[0] & 0x0F
            n = buf[1] & 0x7F
            pos = 2
            if n == 126:
                if len(buf) < 4:
                    break
                n = int.from_bytes(buf[2:4], "big")
                pos = 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n = int.from_bytes(buf[2:10], "big")
                pos = 10
            if buf[1] & 0x80:
                pos += 4  # servers do not mask; tolerate it anyway by skipping the key
            if len(buf) < pos + n:
                break
            payload = bytes(buf[pos : pos + n])
            del buf[: pos + n]
            if opcode == 0x9:  # ping
                self._send(0xA, payload)
            elif opcode == 0x8:  # close
                self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                self.messages.append((0x8, payload))
                got = True
            elif opcode in (0x1, 0x2):
                self.messages.append((opcode, payload))
                got = True
        if got:
            self._wake()

    def _send(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        if n < 126:
            head = bytes((0x80 | opcode, 0x80 | n))
        elif n < 65536:
            head = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
        else:
            head = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
        mask = os.urandom(4)
        if n:
            key = (mask * (n // 4 + 1))[:n]
            payload = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(
                n, "big"
            )
        assert self.transport is not None
        self.transport.write(head + mask + payload)


class WebSocketClient:
    def __init__(self, proto: _WsProtocol, timeout: float) -> None:
        self.proto = proto
        self.timeout = timeout

    @classmethod
    async def connect(cls, port: int, path: str, limit_s: float = 15.0) -> WebSocketClient:
        loop = asyncio.get_running_loop()
        _t, proto = await asyncio.wait_for(
            loop.create_connection(lambda: _WsProtocol(f"{LOOPBACK}:{port}", path), LOOPBACK, port),
            limit_s,
        )
        await asyncio.wait_for(proto.open, limit_s)
        return cls(proto, limit_s)

    def send_text(self, text: str) -> None:
        self.proto._send(0x1, text.encode())

    async def receive(self) -> tuple[int, bytes]:
        proto = self.proto
        while not proto.messages:
            if proto.closed:
                raise HttpError("connection closed")
            proto.waiter = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(proto.waiter, self.timeout)
        return proto.messages.popleft()

    async def close(self, code: int = 1000) -> int | None:
        """Close handshake; returns the code the server closed back with."""
        if self.proto.closed:
            return self.proto.close_code
        self.proto._send(0x8, code.to_bytes(2, "big"))
        with contextlib.suppress(asyncio.TimeoutError, HttpError):
            while True:
                opcode, _ = await self.receive()
                if opcode == 0x8:
                    break
        if self.proto.transport is not None:
            self.proto.transport.close()
        return self.proto.close_code
