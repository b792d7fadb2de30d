"""The WebSocket delivery tests' object: a chat whose handlers wait, block, fail and flood on cue.

``LOG`` records what the handlers did, in order; ``GATES`` are the events a test opens to let a
waiting handler go on; ``PROBE`` runs inside the "probe" handler while later frames wait.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from js import WebSocketPair
from websockets.asyncio.client import ClientConnection
from workers import DurableObject, Response

__all__ = ["BOOTS", "GATES", "LOG", "PROBE", "Chat", "replies"]


#: What the handlers did, in order ("start <message>", "unblocked <gate>", "close <code>").
LOG: list[str] = []
#: Events the test opens to let a waiting handler (or blockConcurrencyWhile callback) go on.
GATES: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
#: Called by the "probe" handler with the object, while the frames after it wait to be read.
PROBE: list[Callable[[], Any]] = []
BOOTS: list[str] = []
TAG: contextvars.ContextVar[str] = contextvars.ContextVar("tag", default="unset")


class Chat(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        BOOTS.append(str(ctx.id))

    async def fetch(self, request: Any) -> Any:
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        if request.url.endswith("/early-close"):
            server.send("before the handshake")
            server.close(4001, "closed early")
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws: Any, message: Any) -> None:
        if not isinstance(message, str):  # binary: echoed as it came
            ws.send(message)  # the ArrayBuffer itself: a binary frame
            return
        LOG.append(f"start {message}")
        command, _, arg = message.partition(" ")
        if command == "wait":  # suspend until the test (or another message) opens the gate
            await GATES[arg].wait()
            ws.send(f"done {arg}")
        elif command == "open":
            GATES[arg].set()
            ws.send(f"opened {arg}")
        elif command == "block":  # hold the input gate until the gate opens

            async def hold() -> None:
                await GATES[arg].wait()
                LOG.append(f"unblocked {arg}")

            await self.ctx.blockConcurrencyWhile(hold)
            ws.send(f"blocked {arg}")
        elif command == "own-task":  # the task that starts the handler is the one that ends it
            first = asyncio.current_task()
            await asyncio.sleep(0)
            ws.send(f"same task: {asyncio.current_task() is first}")
        elif command == "timeout":  # asyncio.timeout cancels this handler's task, nothing else
            try:
                async with asyncio.timeout(0.01):
                    await GATES[arg].wait()
            except TimeoutError:
                ws.send("timed out")
        elif command == "group":  # a TaskGroup whose child fails cancels only this handler

            async def fail() -> None:
                await asyncio.sleep(0)
                raise ValueError("child failed")

            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(fail())
                    await GATES[arg].wait()
            except ExceptionGroup as exc:
                ws.send(f"group: {exc.exceptions[0]}")
        elif command == "context":  # each event starts in its own copy of the context
            before = TAG.get()
            TAG.set(arg)
            await asyncio.sleep(0)
            ws.send(f"context {before} -> {TAG.get()}")
        elif command == "burst":
            for i in range(int(arg)):
                ws.send(f"frame {i}")
            ws.close(4000, "burst done")
        elif command == "flood":  # more than the transport buffers: uvicorn's send() must wait
            chunk = "x" * 65536
            for i in range(int(arg)):
                ws.send(f"{i:06d}{chunk}")
            ws.send("flood done")
        elif command == "probe":
            PROBE[0]()
            ws.send("probed")
        elif command == "self-cancel":  # cancels its own task and returns at once
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            ws.send("cancelled myself")
        elif command == "boom":
            raise ValueError("handler failed")
        else:
            ws.send(f"echo {message}")

    async def webSocketClose(self, ws: Any, code: int, reason: str, was_clean: bool) -> None:
        LOG.append(f"close {code}")


async def replies(ws: ClientConnection, count: int) -> list[Any]:
    return [await asyncio.wait_for(ws.recv(), 5) for _ in range(count)]
