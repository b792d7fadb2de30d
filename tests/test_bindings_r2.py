"""R2 buckets in process: objects and their Python shapes, ranges, conditionals, checksums,
listings, multipart uploads, R2's limits and texts, and bodies kept as whole files."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from js import Headers
from pyodide.ffi import JsException

from doemu.bindings.r2 import R2Object, R2ObjectBody
from doemu.compat.readable import ReadableStream, stream_of
from doemu.compat.rpc import JsDict
from doemu.storage import durability
from doemu.testing.plugin import HarnessFactory

from .polling import eventually

MIB = 1024 * 1024


async def _bucket(doemu_harness: HarnessFactory, **options: Any) -> Any:
    return await doemu_harness({}, r2_buckets=["FILES"], **options)


async def error_of(awaitable: Any) -> str:
    with pytest.raises(JsException) as info:
        await awaitable
    return str(info.value)


def blobs(root: Path) -> list[Path]:
    folder = root / "r2" / "FILES" / "blobs"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


async def test_objects_have_cloudflares_python_shapes(doemu_harness: HarnessFactory) -> None:
    bucket = (await _bucket(doemu_harness)).env.FILES
    put = await bucket.put(
        "a/b.txt",
        "hello world",
        httpMetadata={"contentType": "text/plain"},
        customMetadata={"x": "1"},
    )
    assert isinstance(put, R2Object) and not isinstance(put, R2ObjectBody)
    md5 = hashlib.md5(b"hello world").hexdigest()
    assert (put.key, put.size, put.etag, put.httpEtag) == ("a/b.txt", 11, md5, f'"{md5}"')
    assert len(put.version) == 32 and put.storageClass == "Standard" and put.ssecKeyMd5 is None
    assert isinstance(put.uploaded, dt.datetime) and put.uploaded.tzinfo is None
    assert put.httpMetadata == {
        "contentType": "text/plain",
        "contentLanguage": None,
        "contentDisposition": None,
        "contentEncoding": None,
        "cacheControl": None,
        "cacheExpiry": None,
    }
    assert isinstance(put.httpMetadata, JsDict) and put.customMetadata == {"x": "1"}
    assert put.range is None
    assert isinstance(put.checksums.md5, memoryview) and put.checksums.md5.hex() == md5
    assert put.checksums.toJSON() == {
        "md5": md5, "sha1": None, "sha256": None, "sha384": None, "sha512": None
    }  # fmt: skip

    head = await bucket.head("a/b.txt")
    assert isinstance(head, R2Object) and head.version == put.version
    assert head.range == {"offset": 0, "length": 11, "suffix": None}  # the whole object
    got = await bucket.get("a/b.txt")
    assert isinstance(got, R2ObjectBody)
    assert got.range == {"offset": 0, "length": 11, "suffix": None}
    assert got.bodyUsed is False
    assert await got.text() == "hello world"
    assert got.bodyUsed is True
    with pytest.raises(JsException, match="Body has already been used"):
        await got.text()
    await bucket.put("doc.json", json.dumps({"a": [1, 2.0]}))
    doc = await (await bucket.get("doc.json")).json()
    assert isinstance(doc, JsDict) and doc == {"a": [1, 2]}
    raw = await (await bucket.get("a/b.txt")).arrayBuffer()
    assert isinstance(raw, memoryview) and bytes(raw) == b"hello world"
    body = (await bucket.get("a/b.txt")).body
    assert isinstance(body, ReadableStream)
    assert b"".join([bytes(c) async for c in body]) == b"hello world"
    assert await bucket.get("missing") is None and await bucket.head("missing") is None
    headers = Headers.new()
    got.writeHttpMetadata(headers)
    assert headers.get("content-type") == "text/plain"


async def test_values_of_every_kind(doemu_harness: HarnessFactory) -> None:
    bucket = (await _bucket(doemu_harness)).env.FILES
    await bucket.put("bytes", b"\x00\xff")
    await bucket.put("stream", stream_of(b"streamed " * 1000))
    await bucket.put("empty", None)
    await bucket.put("view", memoryview(b"mv"))
    assert bytes(await (await bucket.get("bytes")).arrayBuffer()) == b"\x00\xff"
    assert await (await bucket.get("stream")).text() == "streamed " * 1000
    assert (await bucket.head("empty")).size == 0
    assert await (await bucket.get("empty")).text() == ""
    assert await (await bucket.get("view")).text() == "mv"
    with pytest.raises(JsException, match="R2 put"):
        await bucket.put("dict", {"a": 1})


async def test_ranges(doemu_harness: HarnessFactory) -> None:
    bucket = (await _bucket(doemu_harness)).env.FILES
    await bucket.put("r", "hello world")

    async def read(**options: Any) -> tuple[str, Any]:
        got = await bucket.get("r", **options)
        return await got.text(), got.range

    assert await read(range={"offset": 6}) == ("world", {"offset": 6, "length": 5, "suffix": None})
    assert (await read(range={"offset": 0, "length": 5}))[0] == "hello"
    assert await read(range={"suffix": 3}) == ("rld", {"offset": 8, "length": 3, "suffix": None})
    assert (await read(range={"offset": 6, "length": 100}))[0] == "world"  # clipped to the end
    assert (await read(range=Headers.new({"range": "bytes=0-4"}.items())))[0] == "hello"
    assert (await read(range=Headers.new({"range": "bytes=-5"}.items())))[0] == "world"
    for bad in ({"offset": 100}, {"offset": 0, "length": 0}, {"suffix": 0}):
        assert await error_of(bucket.get("r", range=bad)) == (
            "Error: get: The requested range is not satisfiable (10039)"
        )


async def test_conditionals(doemu_harness: HarnessFactory) -> None:
    bucket = (await _bucket(doemu_harness)).env.FILES
    first = await bucket.put("c", "one")
    skipped = await bucket.get("c", onlyIf={"etagDoesNotMatch": first.etag})
    assert isinstance(skipped, R2Object) and not isinstance(skipped, R2ObjectBody)
    assert skipped.etag == first.etag  # the metadata, without the body
    assert isinstance(await bucket.get("c", onlyIf={"etagMatches": first.etag}), R2ObjectBody)
    assert await error_of(bucket.get("c", onlyIf={"etagMatches": f'"{first.etag}"'})) == (
        f'TypeError: Conditional ETag should not be wrapped in quotes ("{first.etag}").'
    )
    assert not isinstance(await bucket.get("c", onlyIf={"etagMatches": "nope"}), R2ObjectBody)
    assert isinstance(await bucket.get("c", onlyIf={"etagDoesNotMatch": "*"}), R2Object)
    later = dt.datetime.now() + dt.timedelta(days=1)
    assert isinstance(await bucket.get("c", onlyIf={"uploadedBefore": later}), R2ObjectBody)
    assert not isinstance(await bucket.get("c", onlyIf={"uploadedAfter": later}), R2ObjectBody)
    by_header = await bucket.get(
        "c", onlyIf=Headers.new({"if-none-match": f'"{first.etag}"'}.items())
    )
    assert not isinstance(by_header, R2ObjectBody)

    # A put whose condition fails is None and changes nothing, on disk either.
    assert await bucket.put("c", "two", onlyIf={"etagMatches": "other"}) is None
    assert await (await bucket.get("c")).text() == "one"
    second = await bucket.put("c", "two", onlyIf={"etagMatches": first.etag})
    assert second is not None and await (await bucket.get("c")).text() == "two"
    assert await bucket.put("new", "x", onlyIf={"etagMatches": "*"}) is None  # no object to match
    assert await bucket.put("new", "x", onlyIf={"etagDoesNotMatch": "*"}) is not None


async def test_checksums(doemu_harness: HarnessFactory) -> None:
    bucket = (await _bucket(doemu_harness)).env.FILES
    sha = hashlib.sha256(b"data").hexdigest()
    stored = await bucket.put("k", "data", sha256=sha)
    assert stored.checksums.toJSON()["sha256"] == sha
    assert bytes(stored.checksums.sha256) == bytes.fromhex(sha)
    assert (await bucket.head("k")).checksums.sha256.hex() == sha
    wrong = hashlib.md5(b"other").digest()
    assert await error_of(bucket.put("k", "data", md5=wrong)) == (
        "Error: put: The MD5 checksum you specified did not match what we received.\n"
        f"You provided a MD5 checksum with value: {wrong.hex()}\n"
        f"Actual MD5 was: {hashlib.md5(b'data').hexdigest()} (10037)"
    )
    assert await (await bucket.get("k")).text() == "data"


async def test_limits_and_texts(doemu_harness: HarnessFactory) -> None:
    bucket = (await _bucket(doemu_harness)).env.FILES
    assert await error_of(bucket.put("x" * 1025, "v")) == (
        "Error: put: The specified object name is not valid. (10020)"
    )
    assert await error_of(bucket.get("x" * 1025)) == (
        "Error: get: The specified object name is not valid. (10020)"
    )
    assert await error_of(bucket.put("k", "v", customMetadata={"m": "x" * 2048})) == (
        "Error: put: Your metadata headers exceed the maximum allowed metadata size. (10012)"
    )
    assert await error_of(bucket.list(limit=5000)) == (
        "Error: list: MaxKeys params must be positive integer <= 1000. (10022)"
    )
    with pytest.raises(TypeError, match="cannot be sent over RPC"):
        bucket.get(("a",))
    assert (await bucket.list())["objects"] == []


async def test_listings(doemu_harness: HarnessFactory) -> None:
    bucket = (await _bucket(doemu_harness)).env.FILES
    for key in ("a/1", "a/2", "a/sub/3", "b", "c/4"):
        await bucket.put(key, key, customMetadata={"k": key}, httpMetadata={"contentType": "t"})
    everything = await bucket.list()
    assert [o.key for o in everything.objects] == ["a/1", "a/2", "a/sub/3", "b", "c/4"]
    assert everything.truncated is False and everything.cursor is None
    assert everything.delimitedPrefixes == []
    assert everything.objects[0].customMetadata == {}  # only with include
    root = await bucket.list(delimiter="/")
    assert [o.key for o in root.objects] == ["b"] and root.delimitedPrefixes == ["a/", "c/"]
    a = await bucket.list(prefix="a/", delimiter="/")
    assert [o.key for o in a.objects] == ["a/1", "a/2"] and a.delimitedPrefixes == ["a/sub/"]
    page = await bucket.list(limit=2, include=["customMetadata", "httpMetadata"])
    assert [o.key for o in page.objects] == ["a/1", "a/2"] and page.truncated is True
    assert page.objects[1].customMetadata == {"k": "a/2"}
    assert page.objects[1].httpMetadata.contentType == "t"
    rest = await bucket.list(limit=2, cursor=page.cursor)
    assert [o.key for o in rest.objects] == ["a/sub/3", "b"]
    assert [o.key for o in (await bucket.list(startAfter="b")).objects] == ["c/4"]
    grouped = await bucket.list(delimiter="/", limit=1)
    assert grouped.delimitedPrefixes == ["a/"] and grouped.truncated is True
    after = await bucket.list(delimiter="/", limit=1, cursor=grouped.cursor)
    assert [o.key for o in after.objects] == ["b"]  # past every key of the prefix
    await bucket.delete("b")
    await bucket.delete(["a/1", "a/2", "never"])
    assert [o.key for o in (await bucket.list()).objects] == ["a/sub/3", "c/4"]


async def test_large_reads_stream_in_chunks(
    doemu_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from doemu.bindings.r2 import store as r2_store

    monkeypatch.setattr(r2_store, "WHOLE_READ", 10)
    monkeypatch.setattr(r2_store, "CHUNK", 7)
    bucket = (await _bucket(doemu_harness)).env.FILES
    await bucket.put("long", "abcdefghijklmnopqrstuvwxyz")
    chunks = [bytes(c) async for c in (await bucket.get("long")).body]
    assert [len(c) for c in chunks] == [7, 7, 7, 5] and b"".join(
        chunks
    ) == b"abcdefghijklmnopqrstuvwxyz"
    ranged = await bucket.get("long", range={"offset": 3, "length": 20})
    assert await ranged.text() == "defghijklmnopqrstuvw"


async def test_multipart_uploads(doemu_harness: HarnessFactory, tmp_path: Path) -> None:
    h = await _bucket(doemu_harness)
    bucket = h.env.FILES
    upload = await bucket.createMultipartUpload(
        "big", httpMetadata={"contentType": "application/octet-stream"}
    )
    assert upload.key == "big" and isinstance(upload.uploadId, str)
    one = await upload.uploadPart(1, b"A" * (5 * MIB))
    assert isinstance(one, JsDict) and one.partNumber == 1 and isinstance(one.etag, str)
    two = await upload.uploadPart(2, "B")
    done = await upload.complete([one, two])
    md5 = hashlib.md5(
        hashlib.md5(b"A" * (5 * MIB)).digest() + hashlib.md5(b"B").digest()
    ).hexdigest()
    assert (done.size, done.etag) == (5 * MIB + 1, f"{md5}-2")
    assert done.checksums.md5 is None
    assert done.httpMetadata.contentType == "application/octet-stream"
    got = await bucket.get("big", range={"offset": 5 * MIB - 2, "length": 3})
    assert await got.text() == "AAB"  # across the parts' boundary
    assert len(await (await bucket.get("big")).arrayBuffer()) == 5 * MIB + 1
    assert await error_of(upload.uploadPart(3, "x")) == (
        "Error: uploadPart: The specified multipart upload does not exist. (10024)"
    )

    small = await bucket.createMultipartUpload("small")
    parts = [await small.uploadPart(1, "A"), await small.uploadPart(2, "B")]
    assert await error_of(small.complete(parts)) == (
        "Error: completeMultipartUpload: Your proposed upload is smaller than the minimum "
        "allowed object size. (10011)"
    )
    assert await error_of(small.complete([{"partNumber": 1, "etag": "wrong"}])) == (
        "Error: completeMultipartUpload: One or more of the specified parts could not be "
        "found. (10025)"
    )
    resumed = bucket.resumeMultipartUpload("small", small.uploadId)
    assert await resumed.abort() is None
    assert (await error_of(resumed.uploadPart(1, "x"))).endswith("(10024)")
    assert await bucket.head("small") is None
    # Aborted parts and the replaced object's body are removed from disk.
    await bucket.put("big", "now small")
    root = h.persist_dir
    await eventually(lambda: len(blobs(root)) == 1, what="only the live body stays on disk")


async def test_bodies_are_whole_files_and_strays_are_swept(doemu_harness: HarnessFactory) -> None:
    h = await _bucket(doemu_harness)
    await h.env.FILES.put("k", "v")
    await eventually(lambda: len(blobs(h.persist_dir)) == 1, what="one body file")
    [body] = blobs(h.persist_dir)
    assert body.read_bytes() == b"v"
    stray = body.parent / ("0" * 32)
    stray.write_bytes(b"half an object a crash left")
    temp = body.parent.parent / ".tmp"
    temp.mkdir(exist_ok=True)
    (temp / "unfinished").write_bytes(b"partial")
    await h.restart()
    assert await (await h.env.FILES.get("k")).text() == "v"  # opening the bucket sweeps it
    assert blobs(h.persist_dir) == [body]


async def test_a_write_is_fsynced_before_it_resolves_at_power_durability(
    doemu_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    monkeypatch.setattr(durability, "fsync_paths", lambda paths, **_: synced.extend(paths))
    from doemu.bindings.r2 import store as r2_store

    monkeypatch.setattr(r2_store, "fsync_paths", lambda paths, **_: synced.extend(paths))
    h = await _bucket(doemu_harness, durability="power")
    await h.env.FILES.put("k", "v")
    assert any(p.endswith("r2/FILES/metadata.sqlite-wal") for p in synced)
    assert any("/blobs/" in p for p in synced)  # the body's directory entry


async def test_concurrent_puts_of_one_key_leave_one_whole_object(
    doemu_harness: HarnessFactory,
) -> None:
    h = await _bucket(doemu_harness)
    bucket = h.env.FILES
    await asyncio.gather(*(bucket.put("same", str(i) * 1000) for i in range(10)))
    text = await (await bucket.get("same")).text()
    assert len(set(text)) == 1 and len(text) == 1000
    await eventually(lambda: len(blobs(h.persist_dir)) == 1, what="the losers' bodies removed")
