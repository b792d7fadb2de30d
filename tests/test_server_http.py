"""HTTP through the ASGI app: the entry worker, the default router, errors as JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from workers import DurableObject, Response, WorkerEntrypoint

from doemu.runtime import ClassSpec, Runtime
from doemu.server.app import DoemuApp


class Echo(DurableObject):
    async def fetch(self, request: Any) -> Any:
        if request.url.endswith("/boom"):
            raise RuntimeError("user bug")
        if request.url.endswith("/not-a-response"):
            return {"oops": True}
        body = await request.text()
        return Response.json(
            {
                "method": request.method,
                "url": request.url,
                "body": body,
                "ct": request.headers.get("content-type"),
                "name": self.ctx.id.name,
            },
            headers={"x-object": "echo"},
        )

    async def greet(self, who: str) -> str:
        return f"{self.env.GREETING}, {who}"


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        if request.url.endswith("/rpc"):
            return Response(await self.env.ECHO.getByName("rpc").greet("entry"))
        return await self.env.ECHO.getByName("via-entry").fetch(request)


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = Runtime(
        worker_name="http-test",
        classes={"Echo": ClassSpec(Echo)},
        bindings={"ECHO": "Echo"},
        persist_dir=tmp_path / "state",
        vars={"GREETING": "hello"},
    )
    await rt.start()
    yield rt
    await rt.close()


def client(app: DoemuApp) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 4000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


async def test_default_router_reaches_the_named_object(runtime: Runtime) -> None:
    async with client(DoemuApp(runtime)) as http:
        response = await http.post("/ECHO/some%20name/path?q=1", content="payload")
    assert response.status_code == 200
    assert response.headers["x-object"] == "echo"
    body = response.json()
    assert body["name"] == "some name"
    assert body["method"] == "POST"
    assert body["url"] == "http://testserver/ECHO/some%20name/path?q=1"
    assert body["body"] == "payload"


async def test_entry_worker_receives_every_request(runtime: Runtime) -> None:
    async with client(DoemuApp(runtime, entry=Default)) as http:
        forwarded = (await http.get("/anything")).json()
        greeting = await http.get("/rpc")
    assert forwarded["name"] == "via-entry"
    assert greeting.text == "hello, entry"


@pytest.mark.parametrize(
    ("path", "status", "fragment"),
    [
        ("/", 404, "no route"),
        ("/ECHO", 404, "no route"),
        ("/NOPE/x", 404, "unknown binding 'NOPE'"),
        ("/ECHO/x/boom", 500, "RuntimeError: user bug"),
        ("/ECHO/x/not-a-response", 500, "must return a Response, got dict"),
    ],
)
async def test_errors_are_json(runtime: Runtime, path: str, status: int, fragment: str) -> None:
    async with client(DoemuApp(runtime)) as http:
        response = await http.get(path)
        assert response.status_code == status
        assert fragment in response.json()["error"]
        assert (await http.get("/ECHO/x/fine")).status_code == 200  # still serving


async def test_oversized_body_is_refused(runtime: Runtime) -> None:
    async with client(DoemuApp(runtime, max_body=10)) as http:
        response = await http.post("/ECHO/x/", content=b"x" * 11)
        assert response.status_code == 413
        assert "exceeds" in response.json()["error"]
        assert (await http.post("/ECHO/x/", content=b"small")).status_code == 200


async def test_head_requests_have_no_body(runtime: Runtime) -> None:
    async with client(DoemuApp(runtime)) as http:
        response = await http.head("/ECHO/x/")
    assert response.status_code == 200
    assert response.content == b""


async def test_names_are_decoded_exactly_once(runtime: Runtime) -> None:
    async with client(DoemuApp(runtime)) as http:
        slash = (await http.get("/ECHO/a%2Fb/x")).json()
        percent = (await http.get("/ECHO/a%2541/x")).json()
        admin_lookalike = await http.get("/__doemu/apifoo")
    assert slash["name"] == "a/b"
    assert percent["name"] == "a%41"
    assert admin_lookalike.status_code == 404
    assert "unknown binding '__doemu'" in admin_lookalike.json()["error"]
