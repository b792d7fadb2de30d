"""R2, the same calls on Miniflare (workerd-Python) and on doemu: e2e/test_bindings_differential.py.

Objects are recorded field by field; fields that differ on every run (``version``, ``uploaded``,
upload ids and part etags) are recorded by their type only."""

import datetime
import hashlib
import json

from pyodide.ffi import JsException
from record import seen
from workers import Response, WorkerEntrypoint

FIELDS = (
    "key",
    "size",
    "etag",
    "httpEtag",
    "httpMetadata",
    "customMetadata",
    "range",
    "storageClass",
    "ssecKeyMd5",
)


def obj(value):
    """An R2Object / R2ObjectBody as Python code reads it (None stays None)."""
    if value is None:
        return None
    fields = {name: seen(getattr(value, name)) for name in FIELDS}
    fields["version"] = [type(value.version).__name__, len(value.version)]
    fields["uploaded"] = type(value.uploaded).__name__
    fields["checksums"] = seen(value.checksums.toJSON())
    fields["md5"] = seen(value.checksums.md5)
    return fields


async def body(value):
    if value is None:
        return None
    return {"object": obj(value), "text": await value.text()}


async def record(out, name, make, shape=obj):
    async def shaped():
        result = await make()
        return await shape(result) if shape is body else shape(result)

    try:
        out[name] = await shaped()
    except JsException as exc:
        out[name] = ["JsException", str(exc)]
    except Exception as exc:
        out[name] = ["error", type(exc).__name__, str(exc)]


def listing(value):
    return {
        "objects": [obj(o) for o in value.objects],
        "keys": [o.key for o in value.objects],
        "truncated": value.truncated,
        "has_cursor": value.cursor is not None,
        "delimitedPrefixes": value.delimitedPrefixes,
    }


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        r2 = self.env.R2
        out = {}
        await record(
            out,
            "put",
            lambda: r2.put(
                "a/b.txt",
                "hello world",
                httpMetadata={"contentType": "text/plain"},
                customMetadata={"x": "1"},
            ),
        )
        await record(out, "head", lambda: r2.head("a/b.txt"))
        await record(out, "get", lambda: r2.get("a/b.txt"), body)
        await record(out, "get_missing", lambda: r2.get("nope"))
        await record(out, "head_missing", lambda: r2.head("nope"))
        await record(out, "range_offset", lambda: r2.get("a/b.txt", range={"offset": 6}), body)
        await record(
            out, "range_length", lambda: r2.get("a/b.txt", range={"offset": 0, "length": 5}), body
        )
        await record(out, "range_suffix", lambda: r2.get("a/b.txt", range={"suffix": 3}), body)
        await record(
            out,
            "range_clipped",
            lambda: r2.get("a/b.txt", range={"offset": 6, "length": 100}),
            body,
        )
        await record(out, "range_past_end", lambda: r2.get("a/b.txt", range={"offset": 100}))
        await record(
            out, "range_empty", lambda: r2.get("a/b.txt", range={"offset": 0, "length": 0})
        )
        got = await r2.get("a/b.txt")
        out["array_buffer"] = seen(await got.arrayBuffer())
        etag = (await r2.head("a/b.txt")).etag
        await record(
            out, "only_if_not_match", lambda: r2.get("a/b.txt", onlyIf={"etagDoesNotMatch": etag})
        )
        await record(
            out, "only_if_match", lambda: r2.get("a/b.txt", onlyIf={"etagMatches": etag}), body
        )
        await record(
            out,
            "only_if_match_quoted",
            lambda: r2.get("a/b.txt", onlyIf={"etagMatches": f'"{etag}"'}),
            body,
        )
        await record(
            out, "only_if_wildcard", lambda: r2.get("a/b.txt", onlyIf={"etagDoesNotMatch": "*"})
        )
        later = datetime.datetime.now() + datetime.timedelta(days=1)
        await record(
            out, "only_if_before", lambda: r2.get("a/b.txt", onlyIf={"uploadedBefore": later}), body
        )
        await record(
            out, "only_if_after", lambda: r2.get("a/b.txt", onlyIf={"uploadedAfter": later})
        )
        await record(
            out, "put_if_fails", lambda: r2.put("a/b.txt", "two", onlyIf={"etagMatches": "other"})
        )
        await record(out, "after_failed_put", lambda: r2.get("a/b.txt"), body)
        await record(
            out, "put_if_new_star", lambda: r2.put("new", "x", onlyIf={"etagMatches": "*"})
        )
        await record(out, "put_bytes", lambda: r2.put("bytes", b"\x00\xff"))
        await record(out, "put_none", lambda: r2.put("empty", None))
        await record(out, "get_empty", lambda: r2.get("empty"), body)
        await record(out, "put_json", lambda: r2.put("j.json", json.dumps({"a": [1, 2.0]})))
        doc = await r2.get("j.json")
        out["json"] = seen(await doc.json())
        sha = hashlib.sha256(b"data").hexdigest()
        await record(out, "put_sha256", lambda: r2.put("sum", "data", sha256=sha))
        await record(
            out, "put_bad_md5", lambda: r2.put("sum", "data", md5=hashlib.md5(b"other").digest())
        )
        await record(out, "put_long_key", lambda: r2.put("x" * 1025, "v"))
        await record(out, "get_long_key", lambda: r2.get("x" * 1025))
        await record(
            out, "put_big_metadata", lambda: r2.put("m", "v", customMetadata={"m": "x" * 2048})
        )
        await record(out, "list_limit_high", lambda: r2.list(limit=5000), listing)
        for key in ("d/1", "d/2", "d/sub/3", "e", "f/4"):
            await r2.put(key, key, customMetadata={"k": key})
        await record(out, "list_all", lambda: r2.list(prefix="d/"), listing)
        await record(out, "list_delimiter", lambda: r2.list(delimiter="/"), listing)
        await record(
            out, "list_prefix_delimiter", lambda: r2.list(prefix="d/", delimiter="/"), listing
        )
        await record(
            out,
            "list_page",
            lambda: r2.list(prefix="d/", limit=2, include=["customMetadata"]),
            listing,
        )
        page = await r2.list(prefix="d/", limit=2)
        await record(
            out, "list_next", lambda: r2.list(prefix="d/", limit=2, cursor=page.cursor), listing
        )
        await record(out, "list_start_after", lambda: r2.list(startAfter="e"), listing)
        await record(out, "delete_one", lambda: r2.delete("e"), seen)
        await record(out, "delete_many", lambda: r2.delete(["d/1", "d/2", "never"]), seen)
        await record(out, "after_deletes", lambda: r2.list(prefix="d/"), listing)
        upload = await r2.createMultipartUpload(
            "big", httpMetadata={"contentType": "application/octet-stream"}
        )
        out["upload"] = [upload.key, type(upload.uploadId).__name__]
        one = await upload.uploadPart(1, "A" * (5 * 1024 * 1024))
        out["part"] = [sorted(one.keys()), one.partNumber, type(one.etag).__name__]
        two = await upload.uploadPart(2, "B")
        await record(out, "complete", lambda: upload.complete([one, two]))
        await record(
            out,
            "multipart_range",
            lambda: r2.get("big", range={"offset": 5 * 1024 * 1024 - 2, "length": 3}),
            body,
        )
        await record(out, "part_after_complete", lambda: upload.uploadPart(3, "x"))
        small = await r2.createMultipartUpload("small")
        parts = [await small.uploadPart(1, "A"), await small.uploadPart(2, "B")]
        await record(out, "complete_small_parts", lambda: small.complete(parts))
        await record(
            out, "complete_wrong_etag", lambda: small.complete([{"partNumber": 1, "etag": "wrong"}])
        )
        resumed = r2.resumeMultipartUpload("small", small.uploadId)
        await record(out, "abort", lambda: resumed.abort(), seen)
        await record(out, "part_after_abort", lambda: resumed.uploadPart(1, "x"))
        await record(out, "head_aborted", lambda: r2.head("small"))
        return Response(json.dumps(out), headers={"content-type": "application/json"})
