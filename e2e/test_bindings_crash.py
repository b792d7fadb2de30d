"""SIGKILL and restart with the bindings beyond Durable Objects: every write a binding
acknowledged survives, at both durability levels (e2e/apps/bindings_app)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

APP = Path(__file__).resolve().parent / "apps" / "bindings_app"
LEVELS = pytest.mark.parametrize("level", ["process", "power"])


def _load_until_killed(server: Any, path_of: Any, body_of: Any, enough: int) -> list[int]:
    """Send writes from 16 clients until ``enough`` are acknowledged, SIGKILL the server
    mid-load, and return the numbers of the acknowledged writes."""
    acked: list[int] = []
    counter = iter(range(1_000_000))
    done = asyncio.Event()
    killed = asyncio.Event()

    async def client() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            while not killed.is_set():
                n = next(counter)
                try:
                    response = await http.put(path_of(n), content=body_of(n))
                except httpx.HTTPError:
                    return
                if response.status_code == 200:
                    acked.append(n)
                    if len(acked) >= enough:
                        done.set()

    async def run() -> None:
        tasks = [asyncio.ensure_future(client()) for _ in range(16)]
        await asyncio.wait_for(done.wait(), timeout=60)
        await asyncio.get_running_loop().run_in_executor(None, server.kill)
        killed.set()
        await asyncio.gather(*tasks)

    asyncio.run(run())
    return acked


@LEVELS
def test_acknowledged_kv_puts_survive_sigkill(dev_server: Any, level: str) -> None:
    """1. 16 clients put distinct keys into env.CACHE through the Worker.
    2. Once 300 puts are acknowledged, the process group is SIGKILLed mid-load.
    3. After a restart on the same persist dir, every acknowledged key reads back its value."""
    server = dev_server(APP, "--durability", level)
    acked = _load_until_killed(server, lambda n: f"/kv/key-{n}", lambda n: f"value-{n}", 300)
    assert len(acked) >= 300
    server.start()
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for n in acked:
            assert http.get(f"/kv/key-{n}").json() == f"value-{n}", n
        assert int(http.get("/kv-count").text) >= len(acked)


@LEVELS
def test_acknowledged_d1_batches_survive_sigkill_whole(dev_server: Any, level: str) -> None:
    """1. The migrations are applied with `doemu d1 migrations apply` against the running server.
    2. 16 clients each write orders as one batch (an order and its two lines).
    3. Once 200 batches are acknowledged, the process group is SIGKILLed mid-load.
    4. After a restart, every acknowledged order is there with both lines, and no batch is
       half there: every order has exactly two lines and no line lacks its order."""
    server = dev_server(APP, "--durability", level)
    applied = subprocess.run(
        [sys.executable, "-m", "doemu", "d1", "migrations", "apply", "DB",
         "--url", server.url, "--config", str(APP / "wrangler.toml")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert "applied  0001_orders.sql" in applied.stdout
    acked = _load_until_killed(server, lambda n: f"/d1/{n}", lambda n: b"", 200)
    assert len(acked) >= 200
    server.start()
    with httpx.Client(base_url=server.url, timeout=10) as http:
        state = http.get("/d1-check").json()
    counts = {order: n for order, n in state["orders"]}
    assert set(acked) <= set(counts)
    assert set(counts.values()) == {2}
    assert state["orphans"] == 0


def _body(n: int, size: int) -> bytes:
    return bytes([n % 251]) * size + n.to_bytes(4, "big")


@LEVELS
def test_acknowledged_r2_puts_survive_and_no_half_object_is_visible(
    dev_server: Any, level: str
) -> None:
    """1. 16 clients put objects of 64 KiB to 1 MiB into env.FILES, each with its SHA-256 as
       custom metadata (the Worker computes it).
    2. Once 150 puts are acknowledged, the process group is SIGKILLed mid-load (puts in flight).
    3. After a restart every acknowledged object is there, and every object that is there
       (acknowledged or not) is whole: its body hashes to its metadata."""
    server = dev_server(APP, "--durability", level)
    size = lambda n: 64 * 1024 * (1 + n % 16)  # noqa: E731
    acked = _load_until_killed(server, lambda n: f"/r2/obj-{n}", lambda n: _body(n, size(n)), 150)
    assert len(acked) >= 150
    server.start()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        state = http.get("/r2-check").json()
    assert state["bad"] == []
    assert {f"obj-{n}" for n in acked} <= set(state["keys"])


@LEVELS
def test_acknowledged_multipart_uploads_survive_whole(dev_server: Any, level: str) -> None:
    """1. 16 clients each upload objects of two parts (5 MiB and a few bytes) through
       createMultipartUpload, uploadPart and complete.
    2. Once 20 are acknowledged, SIGKILL (uploads and completions in flight).
    3. After a restart every acknowledged object is there and every object there is whole."""
    server = dev_server(APP, "--durability", level)
    body = lambda n: _body(n, 5 * 1024 * 1024 + n % 7)  # noqa: E731
    acked = _load_until_killed(server, lambda n: f"/r2-multi/mp-{n}", body, 20)
    assert len(acked) >= 20
    server.start()
    with httpx.Client(base_url=server.url, timeout=120) as http:
        state = http.get("/r2-check").json()
    assert state["bad"] == []
    assert {f"mp-{n}" for n in acked} <= set(state["keys"])
