"""The documentation's runtime and agents snippets run as written (the room, the researcher).

Each block is taken from the docs pages by the line that introduces it, compiled as its own module,
and driven through the in-process harness: the room's sockets are the client ends of real 101
responses; the researcher's fiber runs to the end and leaves its state.
"""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

from doemu.testing.plugin import HarnessFactory

from .polling import eventually

DOCS = Path(__file__).resolve().parent.parent / "docs"


def snippet(after: str) -> types.ModuleType:
    """The first ``python`` block after the line starting with ``after`` (on whichever page of
    ``docs/`` has it), as a module."""
    text = next(
        t for p in sorted(DOCS.glob("*.md")) if after in (t := p.read_text(encoding="utf-8"))
    )
    start = text.index(after)
    match = re.compile(r"^```python\n(.*?)^```$", re.M | re.S).search(text, start)
    assert match is not None, f"no python block after {after!r}"
    module = types.ModuleType(f"readme_{abs(hash(after))}")
    exec(compile(match[1], f"docs ({after})", "exec"), module.__dict__)
    return module


async def test_the_websocket_room_snippet_broadcasts(doemu_harness: HarnessFactory) -> None:
    room = snippet("**WebSockets.**").Room
    h = await doemu_harness({"ROOM": room})
    stub = h.env.ROOM.getByName("lobby")
    received: list[list[str]] = [[], []]
    sockets: list[Any] = []
    for inbox in received:
        response = await stub.fetch("http://x/", headers={"Upgrade": "websocket"})
        assert response.status == 101
        ws = response._web_socket
        ws.accept()
        ws.addEventListener("message", lambda event, box=inbox: box.append(event.data))
        sockets.append(ws)
    sockets[0].send("hello")
    await eventually(lambda: all(box == ["hello"] for box in received), what="the broadcast")
    plain = await stub.fetch("http://x/")
    assert plain.status == 426


async def test_the_researcher_snippet_runs_its_fiber(doemu_harness: HarnessFactory) -> None:
    researcher = snippet("`agents` is a Python port").Researcher
    h = await doemu_harness({"RESEARCHER": researcher})
    stub = h.env.RESEARCHER.getByName("topic")
    assert await stub.start("tides") == "started"

    async def done() -> Any:
        state = await stub.state_now()
        return state if len(state["done"]) == 8 else None

    researcher.state_now = lambda self: self.state  # a test-only read of the agent's state
    state = await eventually(done, what="eight findings")
    assert state["done"][0] == "tides: finding 0"


async def test_the_in_process_client_snippet_runs(doemu_harness: HarnessFactory) -> None:
    """The README's ``h.client()`` / ``h.websocket()`` example, on the README's own room."""
    example = snippet("**HTTP and WebSockets in process.**")
    example.Room = snippet("**WebSockets.**").Room
    await example.test_a_room(doemu_harness)
