"""``from workers import env`` and ``workers.waitUntil`` inside a running worker, as on Cloudflare.

``env`` is the worker's env wherever user code reads it (also when imported at module level,
before any runtime existed); ``waitUntil`` extends the lifetime of whatever is running: inside an
object it is that object's ``ctx.waitUntil`` (the object stays in memory until the work settles),
in the entry worker it is the request's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import workers
from pyodide.ffi import create_proxy
from workers import DurableObject, Response, WorkerEntrypoint, env

from doemu.runtime import ClassSpec, Runtime
from doemu.server.app import DoemuApp
from doemu.testing import WorkerHarness

from .polling import eventually

#: Work started with ``workers.waitUntil`` waits on these, so a test decides when it may end.
GATES: dict[str, asyncio.Event] = {}


class Keeper(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS log (what TEXT)")

    async def greeting(self) -> str:
        return str(env.GREETING)  # the module-level import, read inside an object

    async def peer_greeting(self, name: str) -> str:
        result: str = await env.KEEPER.getByName(name).greeting()
        return result

    async def start(self, gate: str) -> str:
        async def later() -> None:
            await GATES[gate].wait()
            self.ctx.storage.sql.exec("INSERT INTO log VALUES ('after the gate')")

        workers.waitUntil(create_proxy(later()))  # the JS waitUntil: a promise, not a coroutine
        return "started"

    async def log(self) -> list[str]:
        return [row["what"] for row in self.ctx.storage.sql.exec("SELECT what FROM log")]


async def test_env_is_the_running_worker_s_env(tmp_path: Path) -> None:
    async with WorkerHarness(
        {"KEEPER": Keeper}, persist_dir=tmp_path, vars={"GREETING": "hello"}
    ) as h:
        assert await h.stub("KEEPER", "e1").greeting() == "hello"
        assert await h.stub("KEEPER", "e1").peer_greeting("e2") == "hello"
        assert workers.env.KEEPER is h.env.KEEPER
    # A closed runtime takes its env with it: nothing stale is served to a later worker.
    with pytest.raises(AttributeError, match=r"workers\.env is not available"):
        _ = workers.env.GREETING


async def test_wait_until_in_an_object_keeps_it_alive_until_the_work_settles(
    tmp_path: Path,
) -> None:
    GATES["w1"] = asyncio.Event()
    async with WorkerHarness({"KEEPER": Keeper}, persist_dir=tmp_path) as h:
        stub = h.stub("KEEPER", "w1")
        assert await stub.start("w1") == "started"
        host = h.runtime.host("KEEPER", "w1")
        assert host.busy  # the pending work pins the object in memory, as ctx.waitUntil does
        eviction = asyncio.ensure_future(h.evict("KEEPER", "w1"))
        await asyncio.sleep(0)
        assert not eviction.done()  # a graceful eviction waits for it
        GATES["w1"].set()
        assert await eviction
        assert await stub.log() == ["after the gate"]


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        done = asyncio.Event()
        SEEN["done"] = done

        async def after_response() -> None:
            await GATES["entry"].wait()
            SEEN["env"] = env.GREETING
            done.set()

        workers.waitUntil(create_proxy(after_response()))
        return Response("answered")


SEEN: dict[str, Any] = {}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Runtime, DoemuApp]]:
    runtime = Runtime(
        worker_name="globals",
        classes={"Keeper": ClassSpec(Keeper)},
        bindings={"KEEPER": "Keeper"},
        persist_dir=tmp_path,
        vars={"GREETING": "from env"},
    )
    await runtime.start()
    yield runtime, DoemuApp(runtime, entry=Default)
    await runtime.close()


async def test_wait_until_in_the_entry_worker_outlives_the_response(
    served: tuple[Runtime, DoemuApp],
) -> None:
    _runtime, app = served
    GATES["entry"] = asyncio.Event()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.get("/anything")
    assert response.text == "answered"  # the response did not wait for the background work
    assert "env" not in SEEN
    GATES["entry"].set()
    await eventually(lambda: SEEN["done"].is_set(), what="the waitUntil work to finish")
    assert SEEN["env"] == "from env"
