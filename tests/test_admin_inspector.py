"""Admin routes that address one object answer 404 when it never existed; the inspector page.

Before, ``evict`` of a misspelled name answered ``{"evicted": false}`` and ``kv`` an empty list,
both 200: indistinguishable from an object that exists and is empty. Every route that reads or
controls one object now refuses with a 404 naming the object, while an object that exists but is
evicted (a file, no instance) still answers 200. Write SQL is the exception on purpose: it is an
event delivered to the object, and creates it as a request would.

The page itself (``GET /__doemu/api/``) is checked here for what a browser test cannot see: the
access rules it shares with the API, and that nothing from the request is echoed into it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from doemu.server.admin.inspector import PAGE
from doemu.server.app import DoemuApp

from .admin_helpers import API, T0, Admin, admin_on, client

ROUTES = [
    ("GET", "kv"),
    ("POST", "sql"),
    ("GET", "alarm"),
    ("POST", "alarm/run"),
    ("POST", "evict"),
    ("POST", "reset"),
]


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[Admin]:
    async with admin_on(tmp_path) as ready:
        yield ready


def _body(suffix: str) -> dict[str, str] | None:
    return {"query": "SELECT 1"} if suffix == "sql" else None


@pytest.mark.parametrize(("method", "suffix"), ROUTES)
async def test_an_object_that_never_existed_is_a_404_naming_it(
    admin: Admin, method: str, suffix: str
) -> None:
    hex_id = admin.id_of("BOX", "ghost")
    for address, named in (("ghost", f"'ghost' (id {hex_id})"), (hex_id, hex_id)):
        response = await admin.http.request(
            method, f"{API}/objects/BOX/{address}/{suffix}", json=_body(suffix)
        )
        assert response.status_code == 404, (suffix, response.text)
        assert response.json() == {
            "error": f"no object {named} in BOX: it was never created (no storage, not live)"
        }
    assert hex_id not in admin.runtime.bindings["BOX"].hosts  # asking created nothing
    assert not (await admin.http.get(f"{API}/objects")).json()


@pytest.mark.parametrize(("method", "suffix"), ROUTES)
async def test_an_evicted_object_is_still_found(admin: Admin, method: str, suffix: str) -> None:
    """It has a file but no instance: the 404 is only for objects that never existed."""
    await admin.stub("BOX", "sleeper").arm(T0 + 1_000)
    await admin.control.evict("BOX", "sleeper")
    assert not admin.live("BOX", "sleeper")
    response = await admin.http.request(
        method, f"{API}/objects/BOX/sleeper/{suffix}", json=_body(suffix)
    )
    assert response.status_code == 200, (suffix, response.text)


async def test_write_sql_still_creates_the_object(admin: Admin) -> None:
    """Write SQL is an event of the object, like a request to it: it may be its first."""
    response = await admin.http.post(
        f"{API}/objects/BOX/newborn/sql",
        json={"query": "SELECT count(*) FROM items", "write": True},
    )
    assert response.status_code == 200, response.text
    assert (await admin.http.get(f"{API}/objects/BOX/newborn/kv")).status_code == 200


async def test_the_page_is_served_with_a_strict_policy(admin: Admin) -> None:
    for path in (API, f"{API}/"):
        response = await admin.http.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert response.text == PAGE.html
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert f"script-src '{PAGE.script_hash}'" in policy  # only the page's own inline script
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"
    head = await admin.http.head(f"{API}/")
    assert (head.status_code, head.content) == (200, b"")


async def test_slash_doemu_is_the_page(admin: Admin) -> None:
    """``/__doemu/`` (where people look for it, and what the banner prints) serves the page
    itself, under the same policy and access rules; ``/__doemu`` redirects there."""
    response = await admin.http.get("/__doemu/")
    assert response.status_code == 200
    assert response.text == PAGE.html
    assert f"script-src '{PAGE.script_hash}'" in response.headers["content-security-policy"]
    redirect = await admin.http.get("/__doemu")
    assert (redirect.status_code, redirect.headers["location"]) == (307, "/__doemu/")
    async with client(admin.app, host="10.0.0.7") as remote:
        assert (await remote.get("/__doemu/")).status_code == 403


async def test_the_page_follows_the_apis_loopback_rules(admin: Admin) -> None:
    async with client(admin.app, host="10.0.0.7") as remote:
        response = await remote.get(f"{API}/")
        assert response.status_code == 403
        assert "loopback-only" in response.json()["error"]
    async with client(admin.app) as local:
        local.base_url = "http://evil.example:8787"  # DNS rebinding: a foreign Host
        response = await local.get(f"{API}/")
        assert response.status_code == 403
    response = await admin.http.get(f"{API}/", headers={"origin": "http://evil.example"})
    assert response.status_code == 403


async def test_with_a_token_the_page_loads_but_its_data_needs_the_token(
    admin: Admin,
) -> None:
    """A browser cannot send a header when it opens a URL, so the page (static, the same bytes
    for everyone, no data in it) loads from anywhere; every call it makes needs the token."""
    secret = "s3cret-token"
    app = DoemuApp(admin.runtime, admin_token=secret)
    async with client(app, host="10.0.0.7") as remote:
        for url in (f"{API}/", f"{API}/?token={secret}"):
            page = await remote.get(url)
            assert page.status_code == 200
            assert secret not in page.text and page.text == PAGE.html  # nothing echoed
        assert (await remote.get(f"{API}/objects")).status_code == 401
        assert (await remote.get(f"{API}/objects?token={secret}")).status_code == 401
        authorized = await remote.get(
            f"{API}/objects", headers={"authorization": f"Bearer {secret}"}
        )
        assert authorized.status_code == 200
        foreign = await remote.get(f"{API}/", headers={"origin": "http://evil.example"})
        assert foreign.status_code == 403
        assert (await remote.post(f"{API}/")).status_code == 401  # only GET/HEAD is the page
