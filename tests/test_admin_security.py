"""Regressions found in review: the admin API driven by a web page in the developer's browser
(cross-site POSTs, DNS rebinding), oversized admin bodies, and header values that are not
ByteStrings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from workers import DurableObject, Response

from doemu.compat.headers import Headers
from doemu.runtime import ClassSpec, Runtime
from doemu.server.admin import ADMIN_PREFIX
from doemu.server.admin.access import MAX_BODY_BYTES
from doemu.server.admin.client import AdminClient
from doemu.server.app import DoemuApp

from .servers import serve

API = ADMIN_PREFIX
JSON_TYPE = "application/json"
CROSS_SITE = "/objects/BOX/victim/sql"
PWN = json.dumps({"query": "CREATE TABLE pwned (x)", "write": True}).encode()


class Box(DurableObject):
    async def fetch(self, request: Any) -> Any:
        if "euro" in request.url:
            return Response("x", headers={"x-price": "price €5"})
        return Response("ok", headers={"x-latin": "café"})

    async def touch(self) -> None:
        await self.ctx.storage.put("k", 1)


def make_runtime(tmp_path: Path) -> Runtime:
    return Runtime(
        worker_name="w",
        classes={"Box": ClassSpec(Box)},
        bindings={"BOX": "Box"},
        persist_dir=tmp_path / "state",
    )


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = make_runtime(tmp_path)
    await rt.start()
    yield rt
    await rt.close()


def client(
    app: DoemuApp, base_url: str = "http://127.0.0.1:8787", peer: str = "127.0.0.1"
) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(peer, 5555))
    return httpx.AsyncClient(transport=transport, base_url=base_url)


async def tables(runtime: Runtime) -> list[str]:
    storage = runtime.host("BOX", "victim").storage
    if storage is None:
        return []
    rows = storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'").toArray()
    return [row["name"] for row in rows]


# -- cross-site requests -------------------------------------------------------------------------


async def test_a_cross_site_text_plain_post_is_refused(runtime: Runtime) -> None:
    """What a page of another site can send without a CORS preflight."""
    async with client(DoemuApp(runtime)) as http:
        response = await http.post(
            API + CROSS_SITE,
            content=PWN,
            headers={"origin": "https://evil.example", "content-type": "text/plain;charset=UTF-8"},
        )
    assert response.status_code == 403
    assert "cross-origin" in response.json()["error"]
    assert "pwned" not in await tables(runtime)


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://127.0.0.1:9999", "https://127.0.0.1:8787"]
)
async def test_foreign_origins_are_refused_even_for_reads(runtime: Runtime, origin: str) -> None:
    async with client(DoemuApp(runtime)) as http:
        response = await http.get(f"{API}/health", headers={"origin": origin})
    assert response.status_code == 403
    assert response.json()["error"].startswith("admin API refuses cross-origin requests")


@pytest.mark.parametrize(
    ("base_url", "origin"),
    [
        ("http://127.0.0.1:8787", "http://127.0.0.1:8787"),
        ("http://localhost:8787", "http://LOCALHOST:8787"),
        ("http://localhost", "http://localhost:80"),
        ("http://[::1]:8787", "http://[::1]:8787"),
    ],
)
async def test_the_servers_own_origin_is_allowed(
    runtime: Runtime, base_url: str, origin: str
) -> None:
    async with client(DoemuApp(runtime), base_url=base_url) as http:
        response = await http.get(f"{API}/health", headers={"origin": origin})
        assert response.status_code == 200, response.text
        response = await http.post(
            f"{API}{CROSS_SITE}",
            json={"query": "CREATE TABLE t (x)", "write": True},
            headers={"origin": origin},
        )
        assert response.status_code == 200, response.text


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8787", "10.0.0.5:8787", "[::2]"])
async def test_dns_rebinding_hosts_are_refused(runtime: Runtime, host: str) -> None:
    """A rebound name resolves to 127.0.0.1, but the browser still sends it as the Host."""
    async with client(DoemuApp(runtime), base_url=f"http://{host}") as http:
        response = await http.get(f"{API}/health")
        assert response.status_code == 403
        assert "Host header" in response.json()["error"]
        response = await http.post(
            f"{API}{CROSS_SITE}", content=PWN, headers={"content-type": JSON_TYPE}
        )
        assert response.status_code == 403
    assert "pwned" not in await tables(runtime)


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8787", "127.0.0.1", "127.1.2.3:80", "[::1]:8787", "[::1]"]
)
async def test_loopback_hosts_are_allowed(runtime: Runtime, host: str) -> None:
    async with client(DoemuApp(runtime), base_url=f"http://{host}") as http:
        assert (await http.get(f"{API}/health")).status_code == 200


async def test_with_a_token_any_host_is_fine_but_a_foreign_origin_is_not(
    runtime: Runtime,
) -> None:
    app = DoemuApp(runtime, admin_token="s3cret")
    auth = {"authorization": "Bearer s3cret"}
    async with client(app, base_url="http://devbox.lan:8787", peer="10.1.2.3") as http:
        assert (await http.get(f"{API}/health", headers=auth)).status_code == 200
        assert (await http.get(f"{API}/health")).status_code == 401
        foreign = await http.get(
            f"{API}/health", headers={**auth, "origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        own = await http.get(f"{API}/health", headers={**auth, "origin": "http://devbox.lan:8787"})
        assert own.status_code == 200


# -- request bodies ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
async def test_parsed_post_bodies_must_be_json(runtime: Runtime, content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    async with client(DoemuApp(runtime)) as http:
        response = await http.post(f"{API}{CROSS_SITE}", content=PWN, headers=headers)
        assert response.status_code == 415
        assert "content-type: application/json" in response.json()["error"]
        ok = await http.post(
            f"{API}{CROSS_SITE}",
            content=PWN,
            headers={"content-type": "application/json; charset=utf-8"},
        )
        assert ok.status_code == 200
    assert "pwned" in await tables(runtime)


async def test_posts_without_a_body_still_work(runtime: Runtime) -> None:
    await runtime.env.BOX.getByName("victim").touch()
    async with client(DoemuApp(runtime)) as http:
        response = await http.post(f"{API}/objects/BOX/victim/evict")
        assert response.json() == {"id": runtime.host("BOX", "victim").hex_id, "evicted": True}
        assert (await http.post(f"{API}/evict-all")).status_code == 200


async def test_the_cli_client_still_works_over_a_real_server(runtime: Runtime) -> None:
    async with serve(runtime) as served:
        admin = AdminClient(served.url)
        rows = await asyncio.to_thread(
            admin.post, "/objects/BOX/cli/sql", {"query": "SELECT 1 AS one", "write": True}
        )
        assert rows["rows"] == [[1]]
        evicted = await asyncio.to_thread(admin.post, "/objects/BOX/cli/evict")
        assert evicted["evicted"] is True
        assert (await asyncio.to_thread(admin.get, "/health"))["ok"] is True


async def test_oversized_bodies_are_refused(runtime: Runtime) -> None:
    big = b'{"query": "SELECT 1", "pad": "' + b"x" * MAX_BODY_BYTES + b'"}'
    async with client(DoemuApp(runtime)) as http:
        declared = await http.post(
            f"{API}{CROSS_SITE}", content=big, headers={"content-type": JSON_TYPE}
        )
        assert declared.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:  # no content-length: counted as it arrives
            for start in range(0, len(big), 65536):
                yield big[start : start + 65536]

        streamed = await http.post(
            f"{API}{CROSS_SITE}", content=chunks(), headers={"content-type": JSON_TYPE}
        )
        assert streamed.status_code == 413
        assert "limited to" in streamed.json()["error"]
        fits = await http.post(
            f"{API}{CROSS_SITE}",
            json={"query": "SELECT 1 AS one", "write": True, "pad": "x" * 1000},
        )
        assert fits.status_code == 200


# -- header values that are not ByteStrings ------------------------------------------------------


def test_headers_refuse_characters_above_255_like_workerd() -> None:
    with pytest.raises(TypeError) as info:
        Headers({"x-price": "price €5"})
    assert str(info.value) == (
        "Cannot convert argument to a ByteString because the character at index 6 has a value "
        "of 8364 which is greater than 255."
    )
    headers = Headers()
    with pytest.raises(TypeError, match="index 2 has a value of 55357 "):  # UTF-16, as in JS
        headers.set("x", "ab😀")
    with pytest.raises(TypeError, match="ByteString"):
        headers.append("x-€", "1")
    headers.append("x-latin", "café")  # Latin-1 is fine
    assert headers.get("x-latin") == "café"


async def test_a_response_header_outside_latin1_is_a_500_not_a_crash(runtime: Runtime) -> None:
    async with client(DoemuApp(runtime)) as http:
        response = await http.get("/BOX/n/euro")
        assert response.status_code == 500
        assert "Cannot convert argument to a ByteString" in response.json()["error"]
        ok = await http.get("/BOX/n/plain")
        assert ok.status_code == 200
        assert ok.headers["x-latin"].encode("latin-1") == "café".encode("latin-1")
