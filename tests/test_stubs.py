"""Stubs and RPC: copies across the boundary, errors by value, private names, env and vars."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pyodide.ffi import create_proxy, to_js
from workers import DurableObject, Response

from doemu.errors import DataCloneError
from doemu.jsboundary import JsException
from doemu.testing.plugin import HarnessFactory


class Store(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.items: list[Any] = []

    async def add(self, item: Any) -> list[Any]:
        self.items.append(item)
        return self.items

    def sync_method(self, a: int, b: int) -> int:
        return a + b

    async def greeting(self) -> str:
        return str(self.env.GREETING)

    async def boom(self) -> None:
        raise KeyError("missing thing")

    async def _private(self) -> str:
        return "secret"

    async def call_peer(self, name: str, item: Any) -> list[Any]:
        return await self.env.STORE.getByName(name).add(item)

    async def fetch(self, request: Any) -> Any:
        return Response(f"{request.method} {request.url}")

    async def give_unclonable(self) -> Any:
        return object()


async def test_arguments_and_results_are_copies(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"STORE": Store})
    stub = h.env.STORE.getByName("copies")
    item = {"tags": ["a"]}
    result = await stub.add(item)
    item["tags"].append("mutated")  # the caller's object is not the callee's
    result[0]["tags"].append("mutated too")
    again = await stub.add({"tags": []})
    assert again == [{"tags": ["a"]}, {"tags": []}]


async def test_sync_methods_and_env_vars(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"STORE": Store}, vars={"GREETING": "hello"})
    stub = h.env.STORE.getByName("sync")
    assert await stub.sync_method(2, 3) == 5
    assert await stub.greeting() == "hello"
    assert h.env.GREETING == "hello"


async def test_an_error_crosses_as_the_callees_traceback(doemu_harness: HarnessFactory) -> None:
    """workerd: the caller gets ``JsException`` ``PythonError`` whose message is the callee's
    traceback — not the callee's exception type (``except KeyError`` misses it there)."""
    h = await doemu_harness({"STORE": Store})
    with pytest.raises(JsException) as info:
        await h.env.STORE.getByName("errs").boom()
    assert info.value.name == "PythonError" and not isinstance(info.value, KeyError)
    assert info.value.message.startswith("Traceback (most recent call last):\n")
    assert info.value.message.endswith("KeyError: 'missing thing'\n")
    assert "in boom" in info.value.message and "doemu/" not in info.value.message


async def test_lenient_errors_cross_by_type_and_message(
    doemu_harness: HarnessFactory, lenient: None
) -> None:
    h = await doemu_harness({"STORE": Store}, lenient=True)
    with pytest.raises(KeyError, match="missing thing"):
        await h.env.STORE.getByName("errs").boom()


async def test_private_and_unknown_methods_are_not_exported(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"STORE": Store})
    stub = h.env.STORE.getByName("private")
    with pytest.raises(AttributeError):
        stub._private  # noqa: B018
    with pytest.raises(JsException, match=r"^TypeError: Method nope does not exist$"):
        await stub.nope()


async def test_unclonable_values_are_refused(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"STORE": Store})
    stub = h.env.STORE.getByName("unclonable")
    with pytest.raises(DataCloneError):
        await stub.add(object())
    with pytest.raises(DataCloneError):
        await stub.give_unclonable()


async def test_object_to_object_calls_and_fetch(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"STORE": Store})
    stub = h.env.STORE.getByName("caller")
    assert await stub.call_peer("callee", 7) == [7]
    assert await h.env.STORE.getByName("callee").add(8) == [7, 8]
    response = await stub.fetch("https://example.com/path?q=1", method="POST")
    assert response.status == 200
    assert await response.text() == "POST https://example.com/path?q=1"


async def test_namespace_methods(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"STORE": Store})
    ns = h.env.STORE
    named = ns.idFromName("x")
    assert ns.get(named).id.equals(named)
    assert ns.getByName("x").name == "x"
    unique = ns.newUniqueId()
    assert ns.idFromString(str(unique)).equals(unique)
    assert ns.jurisdiction("eu") is ns
    with pytest.raises(TypeError):
        ns.get("not-an-id")


#: Opened by the test to let the first of two upgrades finish after the second one.
UPGRADE_GATES: dict[str, Any] = {}


class TwoDoors(DurableObject):
    async def fetch(self, request: Any) -> Any:
        from js import WebSocketPair

        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server, to_js([request.url.rsplit("/", 1)[-1]]))
        gate = UPGRADE_GATES.get(request.url.rsplit("/", 1)[-1])
        if gate is not None:
            await gate.wait()  # the other upgrade runs and ends meanwhile
        return Response(None, status=101, web_socket=client)

    async def tags(self) -> list[str]:
        return sorted(t for ws in self.ctx.getWebSockets() for t in self.ctx.getTags(ws))


async def test_two_upgrades_in_flight_to_one_object_keep_both_sockets(
    doemu_harness: HarnessFactory,
) -> None:
    """The end of one upgrade's fetch drops only the sockets *it* accepted and did not return,
    never the socket of another upgrade still in flight to the same object."""
    UPGRADE_GATES["first"] = asyncio.Event()
    h = await doemu_harness({"D": TwoDoors})
    stub = h.env.D.getByName("d")
    first = asyncio.ensure_future(stub.fetch("http://do/first", headers={"Upgrade": "websocket"}))
    for _ in range(1000):  # until the first upgrade has accepted its socket and waits
        await asyncio.sleep(0)
        if "first" in await stub.tags():
            break
    assert "first" in await stub.tags()
    second = await stub.fetch("http://do/second", headers={"Upgrade": "websocket"})
    UPGRADE_GATES["first"].set()
    await first
    assert second.status == 101
    assert await stub.tags() == ["first", "second"]


class Endless(DurableObject):
    """Streams one chunk, then nothing: a body still being read when the object is reset."""

    async def fetch(self, request: Any) -> Any:
        from js import TransformStream

        ts = TransformStream.new()
        writer = ts.writable.getWriter()
        self.ctx.waitUntil(create_proxy(writer.write(b"first")))
        return Response(ts.readable)


async def test_a_reset_fails_the_bodies_the_object_is_still_producing(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"E": Endless})
    response = await h.env.E.getByName("e").fetch("http://do/")
    reader = response.body.getReader()
    first = await asyncio.wait_for(reader.read(), 5)
    assert bytes(first.value) == b"first"
    pending = asyncio.ensure_future(reader.read())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not pending.done()
    assert h.reset("E", "e", "simulated crash")
    with pytest.raises(Exception, match="simulated crash"):
        await asyncio.wait_for(pending, 5)  # an error, not a reader waiting forever
