"""KV namespaces in process: Cloudflare's Python shapes, limits and texts, expiry on the clock.

Each expectation here was read off the same Python calls on real workerd-Python under Miniflare
(``e2e/test_bindings_differential.py`` runs them both ways): results are ``str``/``None``/
``memoryview``/``JsDict``, errors are ``JsException`` with ``str()`` ``"Error: KV PUT failed:
414 …"``, unknown options are ignored, keyword options are a trailing JS object.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pyodide.ffi import JsException
from workers import DurableObject

from doemu.bindings import BindingTypeError
from doemu.bindings.kv import KvError
from doemu.compat.readable import ReadableStream, stream_of
from doemu.compat.rpc import JsDict
from doemu.storage import durability
from doemu.testing.plugin import HarnessFactory


class Writer(DurableObject):
    """An object that writes to its own storage, then to KV (the output gate applies)."""

    async def remember(self, key: str, value: str) -> str | None:
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (v TEXT)")
        self.ctx.storage.sql.exec("INSERT INTO t VALUES (?)", value)
        await self.env.CACHE.put(key, value, metadata={"by": "object"})
        got = await self.env.CACHE.get(key)
        return str(got) if got is not None else None


async def _harness(doemu_harness: HarnessFactory, **options: Any) -> Any:
    return await doemu_harness({"WRITER": Writer}, kv_namespaces=["CACHE"], **options)


async def test_values_come_back_in_the_types_python_workers_see(
    doemu_harness: HarnessFactory,
) -> None:
    kv = (await _harness(doemu_harness)).env.CACHE
    assert await kv.put("text", "hello") is None
    await kv.put("bytes", b"\x00\x01\xff")
    await kv.put("doc", json.dumps({"a": [1, 2.0, 2.5, None], "b": {"c": True}}))

    assert await kv.get("text") == "hello"
    assert await kv.get("missing") is None
    raw = await kv.get("bytes", type="arrayBuffer")
    assert isinstance(raw, memoryview) and bytes(raw) == b"\x00\x01\xff"
    assert await kv.get("bytes") == "\x00\x01\ufffd"  # text decodes as TextDecoder does
    doc = await kv.get("doc", type="json")
    assert isinstance(doc, JsDict) and doc.b.c is True
    assert doc == {"a": [1, 2, 2.5, None], "b": {"c": True}}  # 2.0 is the JS number 2
    assert type(doc["a"][1]) is int
    assert await kv.get("doc", "json") == doc  # the type as a positional argument
    await kv.put("streamed", stream_of(b"from a stream"))  # a ReadableStream value
    assert await kv.get("streamed") == "from a stream"
    stream = await kv.get("text", type="stream")
    assert isinstance(stream, ReadableStream)
    assert b"".join([bytes(c) async for c in stream]) == b"hello"


async def test_get_with_metadata_and_primitive_values(doemu_harness: HarnessFactory) -> None:
    kv = (await _harness(doemu_harness)).env.CACHE
    await kv.put("a", "v", metadata={"x": 1, "n": None})
    await kv.put("number", 5)  # a JS binding stores String(5)
    await kv.put("null", None)
    result = await kv.getWithMetadata("a")
    assert isinstance(result, JsDict)
    assert result == {"value": "v", "metadata": {"x": 1, "n": None}, "cacheStatus": None}
    assert result.metadata.x == 1
    assert await kv.getWithMetadata("nope") == {
        "value": None,
        "metadata": None,
        "cacheStatus": None,
    }
    assert (await kv.getWithMetadata("number", type="json")).value == 5
    assert await kv.get("number") == "5"
    assert await kv.get("null") == "null"
    assert await kv.get(5) is None  # the key is String(5)


async def test_cloudflares_limits_and_error_texts(doemu_harness: HarnessFactory) -> None:
    kv = (await _harness(doemu_harness)).env.CACHE

    async def error_of(awaitable: Any) -> BaseException:
        with pytest.raises(JsException) as info:
            await awaitable
        return info.value

    long_key = await error_of(kv.put("x" * 600, "v"))
    assert str(long_key) == (
        "Error: KV PUT failed: 414 UTF-8 encoded length of 600 exceeds key length limit of 512."
    )
    assert isinstance(long_key, KvError) and long_key.name == "Error"
    assert long_key.message.startswith("KV PUT failed: 414")
    assert str(await error_of(kv.get("é" * 257))) == (
        "Error: KV GET failed: 414 UTF-8 encoded length of 514 exceeds key length limit of 512."
    )
    empty = await error_of(kv.put("", "v"))
    assert str(empty) == "TypeError: Key name cannot be empty."
    # A JS TypeError, not a Python one (as through Pyodide): ``except TypeError`` misses it.
    assert isinstance(empty, BindingTypeError) and not isinstance(empty, TypeError)
    assert str(await error_of(kv.get(".."))) == ('TypeError: ".." is not allowed as a key name.')
    assert str(await error_of(kv.put("k", "v", expirationTtl=10))) == (
        "Error: KV PUT failed: 400 Invalid expiration_ttl of 10. Expiration TTL must be at "
        "least 60."
    )
    assert str(await error_of(kv.put("k", "v", expirationTtl=-5))) == (
        "Error: KV PUT failed: 400 Invalid expiration_ttl of -5. Please specify integer greater "
        "than 0."
    )
    assert "Please specify integer greater than the current number of seconds" in str(
        await error_of(kv.put("k", "v", expiration=10))
    )
    assert str(await error_of(kv.put("k", "v", metadata={"x": "y" * 1100}))) == (
        "Error: KV PUT failed: 413 Metadata length of 1108 exceeds limit of 1024."
    )
    assert str(await error_of(kv.put("k", "x" * (25 * 1024 * 1024 + 1)))) == (
        "Error: KV PUT failed: 413 Value length of 26214401 exceeds limit of 26214400."
    )
    assert str(await error_of(kv.put("k", {"a": 1}))) == (
        "TypeError: KV put() accepts only strings, ArrayBuffers, ArrayBufferViews, and "
        "ReadableStreams as values."
    )
    assert str(await error_of(kv.get("k", type="xml"))) == (
        'TypeError: Unknown response type. Possible types are "text", "arrayBuffer", "json", '
        'and "stream".'
    )
    assert str(await error_of(kv.get("k", cacheTtl=10))) == (
        "Error: KV GET failed: 400 Invalid cache_ttl of 10. Cache TTL must be at least 30."
    )
    assert str(await error_of(kv.list(limit=2000))) == (
        "Error: KV GET failed: 400 Invalid key_count_limit of 2000. Please specify an integer "
        "less than 1000."
    )
    with pytest.raises(TypeError, match="cannot be sent over RPC"):
        kv.put(("a", "b"), "v")  # refused by the SDK's conversion, before the call
    # Nothing was written by any refused call; exactly 25 MiB is fine.
    # (``.keys`` is dict.keys on a JsDict, on Cloudflare too: the SDK documents the clash.)
    assert (await kv.list())["keys"] == []
    await kv.put("k", "x" * (25 * 1024 * 1024))
    assert len(await kv.get("k")) == 25 * 1024 * 1024


async def test_expiry_follows_the_doemu_clock(doemu_harness: HarnessFactory) -> None:
    h = await _harness(doemu_harness)
    kv = h.env.CACHE
    now_s = int(h.clock.now() // 1000)
    await kv.put("ttl", "v", expirationTtl=60, metadata={"m": 1})
    await kv.put("at", "v", expiration=now_s + 120)
    await kv.put("both", "v", expirationTtl=100, expiration=now_s + 1000)  # the TTL wins
    listing = await kv.list()
    assert [k.name for k in listing["keys"]] == ["at", "both", "ttl"]
    assert listing["keys"][2] == {"name": "ttl", "expiration": now_s + 60, "metadata": {"m": 1}}
    assert listing["keys"][1].expiration == now_s + 100

    await h.advance(59_000)
    assert await kv.get("ttl") == "v"
    await h.advance(1_000)
    assert await kv.get("ttl") is None
    assert await kv.getWithMetadata("ttl") == {"value": None, "metadata": None, "cacheStatus": None}
    assert [k.name for k in (await kv.list())["keys"]] == ["at", "both"]
    await h.advance(60_000)
    assert (await kv.list())["keys"] == []


async def test_listing_pages_with_prefix_limit_and_cursor(doemu_harness: HarnessFactory) -> None:
    kv = (await _harness(doemu_harness)).env.CACHE
    for i in range(5):
        await kv.put(f"p/{i}", str(i))
    await kv.put("q", "other")
    first = await kv.list(prefix="p/", limit=2)
    assert first == {
        "keys": [{"name": "p/0"}, {"name": "p/1"}],
        "list_complete": False,
        "cursor": "cC8x",  # Miniflare's cursor: the last key, base64
        "cacheStatus": None,
    }
    second = await kv.list(prefix="p/", limit=2, cursor=first.cursor)
    assert [k.name for k in second["keys"]] == ["p/2", "p/3"]
    third = await kv.list(prefix="p/", limit=2, cursor=second.cursor)
    assert third == {"keys": [{"name": "p/4"}], "list_complete": True, "cacheStatus": None}
    assert "cursor" not in third
    assert (await kv.list(cursor="garbage"))["keys"] == []  # as Miniflare: nothing after it
    assert len((await kv.list(limit=0))["keys"]) == 6  # 0 means the default, as in workerd
    # UTF-8 byte order, as Cloudflare lists keys.
    await kv.put("\u00e9", "e-acute")
    await kv.put("z", "z")
    names = [k.name for k in (await kv.list())["keys"]]
    assert names[-2:] == ["z", "\u00e9"]


async def test_bulk_get_and_deletes(doemu_harness: HarnessFactory) -> None:
    kv = (await _harness(doemu_harness)).env.CACHE
    await kv.put("a", "1")
    await kv.put("b", json.dumps({"x": 1}), metadata=[1])
    assert await kv.get(["a", "zz"]) == {"a": "1", "zz": None}
    assert await kv.get(["b"], type="json") == {"b": {"x": 1}}
    assert await kv.getWithMetadata(["b", "zz"]) == {
        "b": {"value": '{"x": 1}', "metadata": [1]},
        "zz": None,
    }
    await kv.put("c", "not json")
    with pytest.raises(KvError, match="At least one of the requested keys corresponds to a non"):
        await kv.get(["c"], type="json")
    with pytest.raises(KvError, match="minimum of 1 key"):
        await kv.get([])
    with pytest.raises(KvError, match="maximum of 100 keys"):
        await kv.get([str(i) for i in range(101)])
    assert await kv.delete("a") is None
    assert await kv.delete("never") is None
    assert await kv.get("a") is None


async def test_unknown_options_are_ignored_with_one_warning(
    doemu_harness: HarnessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    kv = (await _harness(doemu_harness)).env.CACHE
    with caplog.at_level(logging.WARNING, logger="doemu.bindings.kv"):
        await kv.put("snake", "v", expiration_ttl=100)
        await kv.put("snake2", "v", expiration_ttl=100)
    assert [k.get("expiration") for k in (await kv.list())["keys"]] == [None, None]
    warned = [r.getMessage() for r in caplog.records if "expiration_ttl" in r.getMessage()]
    assert len(warned) <= 1  # once per process (an earlier test may have warned already)
    await kv.put("opts", "v", {"expirationTtl": 100})  # a dict positional is the options object
    assert (await kv.list(prefix="opts"))["keys"][0].expiration is not None


async def test_an_unawaited_put_still_writes(doemu_harness: HarnessFactory) -> None:
    kv = (await _harness(doemu_harness)).env.CACHE
    kv.put("fire-and-forget", "v")
    await asyncio.sleep(0)
    assert await kv.get("fire-and-forget") == "v"


async def test_entries_survive_a_restart_and_objects_share_the_namespace(
    doemu_harness: HarnessFactory, tmp_path: Path
) -> None:
    h = await _harness(doemu_harness)
    assert await h.stub("WRITER", "w1").remember("from-object", "hello") == "hello"
    await h.env.CACHE.put("from-outside", "world", expirationTtl=3600)
    await h.restart()
    kv = h.env.CACHE
    assert await kv.get("from-object") == "hello"
    assert (await kv.getWithMetadata("from-object")).metadata == {"by": "object"}
    assert await kv.get("from-outside") == "world"
    assert (tmp_path / "doemu-state" / "kv" / "CACHE.sqlite").is_file()


async def test_an_acknowledged_put_is_fsynced_at_power_durability(
    doemu_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[tuple[str, ...]] = []

    def record(paths: Any, **_: Any) -> None:
        synced.append(tuple(paths))

    monkeypatch.setattr(durability, "fsync_paths", record)
    h = await _harness(doemu_harness, durability="power")
    await h.env.CACHE.put("k", "v")
    assert any(p.endswith("kv/CACHE.sqlite-wal") for call in synced for p in call)
    before = len(synced)
    assert await h.env.CACHE.get("k") == "v"
    assert len(synced) == before  # reads never wait for the disk


async def test_the_binding_has_only_cloudflares_names(doemu_harness: HarnessFactory) -> None:
    kv = (await _harness(doemu_harness)).env.CACHE
    public = sorted(name for name in dir(kv) if not name.startswith("_"))
    assert public == ["delete", "get", "getWithMetadata", "list", "put"]
