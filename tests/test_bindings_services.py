"""Service bindings to this Worker's own entrypoints: fetch and RPC, values as they cross between
Python Workers on Cloudflare (checked on workerd-Python), errors, and bindings refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pyodide.ffi import JsException
from workers import DurableObject, Request, Response, WorkerEntrypoint, waitUntil

from doemu.bindings import ServiceError, ServiceNotFound
from doemu.compat.rpc import JsDict
from doemu.config import load_config
from doemu.testing.plugin import HarnessFactory

DONE: list[str] = []


class Auth(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        if request.url.endswith("/old"):
            return Response(None, status=307, headers={"location": "/new"})
        body = await request.text()
        return Response(
            f"{request.method} {request.url} {body}", headers={"x-by": "auth"}, status=201
        )

    async def add(self, a: int, b: int) -> int:
        return a + b

    async def echo(self, value: Any) -> Any:
        return value

    def double(self, value: int) -> int:  # not async: still an RPC method
        return value * 2

    async def keywords(self, a: Any, b: Any = 2) -> list[Any]:
        return [a, b]

    async def half(self) -> float:
        return 2.0

    async def pair(self) -> tuple[int, int]:
        return (1, 2)

    async def boom(self) -> None:
        raise ValueError("bad token")

    async def later(self, tag: str) -> str:
        async def work() -> None:
            await asyncio.sleep(0)
            DONE.append(tag)

        self.ctx.waitUntil(work())
        waitUntil(asyncio.ensure_future(work()))
        return "accepted"

    async def _private(self) -> str:
        return "never"


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        return Response("default")


class Caller(DurableObject):
    async def check(self) -> int:
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (v)")
        self.ctx.storage.sql.exec("INSERT INTO t VALUES (1)")
        return int(await self.env.AUTH.add(20, 22))


async def _harness(doemu_harness: HarnessFactory) -> Any:
    return await doemu_harness(
        {"CALLER": Caller},
        entrypoints={"Default": Default, "Auth": Auth},
        services={"AUTH": "Auth", "SELF": "Default"},
    )


async def test_fetch_through_a_service(doemu_harness: HarnessFactory) -> None:
    env = (await _harness(doemu_harness)).env
    response = await env.AUTH.fetch("http://auth/check", method="POST", body="token")
    assert isinstance(response, Response)
    assert (response.status, await response.text()) == (201, "POST http://auth/check token")
    assert response.headers.get("x-by") == "auth"
    again = await env.AUTH.fetch(Request("http://auth/req", method="PUT", body="b"))
    assert await again.text() == "PUT http://auth/req b"
    assert await (await env.SELF.fetch("http://self/")).text() == "default"
    moved = await env.AUTH.fetch("http://auth/old")  # redirects are followed, as by fetch()
    assert await moved.text() == "GET http://auth/new "
    manual = await env.AUTH.fetch("http://auth/old", redirect="manual")
    assert (manual.status, manual.headers.get("location")) == (307, "/new")


async def test_rpc_values_cross_as_between_python_workers(doemu_harness: HarnessFactory) -> None:
    h = await _harness(doemu_harness)
    auth = h.env.AUTH
    assert await auth.add(1, 2) == 3
    echoed = await auth.echo({"k": [1, 2], "n": None})
    assert isinstance(echoed, JsDict) and echoed.k == [1, 2] and echoed.n is None
    raw = await auth.echo(b"ab")
    assert isinstance(raw, memoryview) and bytes(raw) == b"ab"
    assert await auth.echo(None) is None
    assert await auth.double(4) == 8
    assert await auth.keywords(1, b=3) == [1, {"b": 3}]  # keywords are one trailing object
    assert await auth.keywords(1) == [1, 2]
    half = await auth.half()
    assert half == 2 and type(half) is int  # the JS number 2
    with pytest.raises(JsException, match="cannot be sent over RPC") as refused:
        await auth.pair()  # the callee's result is refused, as by its SDK there
    assert refused.value.name == "PythonError"
    with pytest.raises(TypeError, match="cannot be sent over RPC"):
        auth.echo((1, 2))  # refused by the caller's SDK, before the call
    with pytest.raises(JsException) as raised:
        await auth.boom()  # the callee's exception: PythonError with its traceback, as there
    assert raised.value.name == "PythonError"
    assert "ValueError: bad token" in raised.value.message and "in boom" in raised.value.message
    with pytest.raises(ServiceError) as info:
        await auth.missing()
    assert str(info.value) == "TypeError: Method missing does not exist"
    with pytest.raises(AttributeError):
        auth._private()
    assert await h.stub("CALLER", "c1").check() == 42  # from inside an object


async def test_wait_until_work_of_the_callee_finishes(doemu_harness: HarnessFactory) -> None:
    DONE.clear()
    h = await _harness(doemu_harness)
    assert await h.env.AUTH.later("x") == "accepted"
    await h.control.settle()
    assert DONE == ["x", "x"]


def _project(tmp_path: Path, services: str, code: str = "") -> Path:
    (tmp_path / "src").mkdir(exist_ok=True)
    (tmp_path / "src" / "entry.py").write_text(
        "from workers import WorkerEntrypoint, Response\n\n\n"
        "class Default(WorkerEntrypoint):\n"
        "    async def fetch(self, request):\n"
        "        return Response('ok')\n" + code
    )
    (tmp_path / "wrangler.toml").write_text(
        'name = "svc"\nmain = "src/entry.py"\ncompatibility_date = "2025-01-01"\n' + services
    )
    return tmp_path / "wrangler.toml"


async def test_a_binding_to_another_worker_is_refused_by_name(
    doemu_harness: HarnessFactory, tmp_path: Path
) -> None:
    config = _project(tmp_path, '[[services]]\nbinding = "OTHER"\nservice = "billing"\n')
    warnings = load_config(config).warnings
    assert any(
        'binds to the Worker "billing"' in w and "one Worker per process" in w for w in warnings
    )
    h = await doemu_harness(config=config)
    with pytest.raises(ServiceError, match='bound to the Worker "billing", which doemu does not'):
        await h.env.OTHER.fetch("http://billing/")
    with pytest.raises(ServiceError, match="one Worker per process"):
        await h.env.OTHER.charge(5)


def test_a_missing_entrypoint_stops_the_start(
    doemu_harness: HarnessFactory, tmp_path: Path
) -> None:
    config = _project(
        tmp_path, '[[services]]\nbinding = "AUTH"\nservice = "svc"\nentrypoint = "Auth"\n'
    )
    with pytest.raises(ServiceNotFound) as info:
        doemu_harness(config=config)
    assert str(info.value).startswith(
        'Worker "svc"\'s binding "AUTH" refers to service "svc" with a named entrypoint "Auth", '
        'but "svc" has no such named entrypoint.'
    )
