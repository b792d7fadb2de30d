"""User code sees Cloudflare's names and nothing else: what runs here must deploy unchanged.

Every object user code can reach (the ``workers``/``js``/``pyodide`` modules, ``ctx``,
``ctx.storage`` and what it hands out, ids, namespaces, stubs, WebSockets) is checked name by
name: a doemu-only public name (``commit``, ``set_clock``, ``F``, ``WebSocket.new`` on a socket…)
would let code run locally and break on deploy. Module namespaces are checked whole, private names
included; objects by their public (non-underscore) names.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from workers import DurableObject

from doemu.compat import install_modules
from doemu.testing import WorkerHarness

install_modules()

#: workers-runtime-sdk 1.9.5's ``workers.__all__``, name for name.
WORKERS = {
    "Blob",
    "BlobEnding",
    "BlobValue",
    "Body",
    "Context",
    "DurableObject",
    "FetchKwargs",
    "FetchResponse",
    "File",
    "FormData",
    "FormDataValue",
    "Headers",
    "JSBody",
    "Request",
    "RequestInitCfProperties",
    "Response",
    "WorkerEntrypoint",
    "WorkflowEntrypoint",
    "env",
    "fetch",
    "handler",
    "import_from_javascript",
    "patch_env",
    "python_from_rpc",
    "python_to_rpc",
    "waitUntil",
    "wait_until",
}
JS = {
    "Date",
    "Headers",
    "JSON",
    "Object",
    "ReadableStream",
    "Request",
    "Response",
    "TextDecoder",
    "TextEncoder",
    "TransformStream",
    "WebSocket",
    "WebSocketPair",
    "WebSocketRequestResponsePair",
    "WritableStream",
    "console",
}
PYODIDE_FFI = {
    "JsArray",
    "JsBuffer",
    "JsException",
    "JsMap",
    "JsNull",
    "JsProxy",
    "create_once_callable",
    "create_proxy",
    "destroy_proxies",
    "jsnull",
    "to_js",
}
CTX = {
    "abort",
    "acceptWebSocket",
    "blockConcurrencyWhile",
    "getHibernatableWebSocketEventTimeout",
    "getTags",
    "getWebSocketAutoResponse",
    "getWebSocketAutoResponseTimestamp",
    "getWebSockets",
    "id",
    "setHibernatableWebSocketEventTimeout",
    "setWebSocketAutoResponse",
    "storage",
    "waitUntil",
}
STORAGE = {
    "delete",
    "deleteAlarm",
    "deleteAll",
    "get",
    "getAlarm",
    "kv",
    "list",
    "put",
    "setAlarm",
    "sql",
    "sync",
    "transaction",
    "transactionSync",
}
# workerd's DurableObjectTransaction has deleteAll (it only throws "Cannot call deleteAll()
# within a transaction"), so it is a Cloudflare name.
TRANSACTION = {
    "delete",
    "deleteAlarm",
    "deleteAll",
    "get",
    "getAlarm",
    "list",
    "put",
    "rollback",
    "setAlarm",
}
SQL = {"exec", "databaseSize"}
CURSOR = {"columnNames", "next", "one", "raw", "rowsRead", "rowsWritten", "toArray"}
SYNC_KV = {"delete", "get", "list", "put"}
OBJECT_ID = {"equals", "name", "toString"}
NAMESPACE = {"get", "getByName", "idFromName", "idFromString", "jurisdiction", "newUniqueId"}
STUB = {"fetch", "id", "name"}
WEBSOCKET = {
    "CLOSED",
    "CLOSING",
    "CONNECTING",
    "OPEN",
    "READY_STATE_CLOSED",
    "READY_STATE_CLOSING",
    "READY_STATE_CONNECTING",
    "READY_STATE_OPEN",
    "accept",
    "addEventListener",
    "binaryType",
    "close",
    "deserializeAttachment",
    "extensions",
    "protocol",
    "readyState",
    "removeEventListener",
    "send",
    "serializeAttachment",
    "url",
}


def _non_dunder(obj: object) -> set[str]:
    return {n for n in dir(obj) if not (n.startswith("__") and n.endswith("__"))}


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


@pytest.mark.parametrize(
    ("module", "names"),
    [("workers", WORKERS), ("js", JS), ("pyodide.ffi", PYODIDE_FFI), ("pyodide", {"ffi"})],
)
def test_modules_hold_only_cloudflare_names(module: str, names: set[str]) -> None:
    """Not even helpers (``annotations``, ``Any``, ``F``, ``set_clock``) leak into the module."""
    assert _non_dunder(sys.modules[module]) == names
    assert set(sys.modules[module].__all__) == names


class Probe(DurableObject):
    """Collects what user code can reach, from inside a running object."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (a)")

    async def alarm(self) -> None:
        pass

    async def names(self) -> dict[str, list[str]]:
        ctx = self.ctx
        seen: dict[str, set[str]] = {
            "ctx": _public(ctx),
            "storage": _public(ctx.storage),
            "sql": _public(ctx.storage.sql),
            "cursor": _public(ctx.storage.sql.exec("SELECT a FROM t")),
            "kv": _public(ctx.storage.kv),
            "id": _public(ctx.id),
            "namespace": _public(self.env.PROBE),
            "stub": _public(self.env.PROBE.getByName("other")),
            "resolved": _public(ctx.storage.get("k")),
        }

        async def in_transaction(txn: Any) -> None:
            seen["txn"] = _public(txn)

        await ctx.storage.transaction(in_transaction)
        from js import WebSocketPair

        _client, server = WebSocketPair.new().object_values()
        seen["websocket"] = _public(server)
        return {k: sorted(v) for k, v in seen.items()}


async def test_objects_user_code_reaches_have_only_cloudflare_names(tmp_path: Path) -> None:
    async with WorkerHarness({"PROBE": Probe}, persist_dir=tmp_path) as h:
        seen = await h.stub("PROBE", "surface").names()
    expected = {
        "ctx": CTX,
        "storage": STORAGE,
        "sql": SQL,
        "cursor": CURSOR,
        "kv": SYNC_KV,
        "id": OBJECT_ID,
        "namespace": NAMESPACE,
        "stub": STUB,
        "resolved": set(),  # a storage promise: only ``await``
        "txn": TRANSACTION,
        "websocket": WEBSOCKET,
    }
    assert {k: set(v) for k, v in seen.items()} == expected


REQUEST = {
    "blob",
    "body",
    "body_used",
    "buffer",
    "bytes",
    "cache",
    "cf",
    "clone",
    "credentials",
    "destination",
    "form_data",
    "headers",
    "integrity",
    "is_history_navigation",
    "js_object",
    "json",
    "keepalive",
    "method",
    "mode",
    "redirect",
    "referrer",
    "referrer_policy",
    "text",
    "url",
}
RESPONSE = {
    "abort",
    "blob",
    "body",
    "body_used",
    "buffer",
    "bytes",
    "clone",
    "formData",
    "form_data",
    "from_json",
    "headers",
    "js_object",
    "js_response",
    "json",
    "memoryview",
    "ok",
    "raise_for_status",
    "redirect",
    "redirected",
    "replace_body",
    "status",
    "status_text",
    "string",
    "text",
    "type",
    "unpack_archive",
    "url",
}
READABLE = {"cancel", "getReader", "locked", "pipeThrough", "pipeTo", "tee"}
READER = {"cancel", "closed", "read", "releaseLock"}
READ_RESULT = {"done", "to_py", "value"}
WRITABLE = {"abort", "close", "getWriter", "locked"}
WRITER = {"abort", "close", "closed", "desiredSize", "ready", "releaseLock", "write"}
BLOB = {"bytes", "content_type", "js_object", "size", "slice", "text"}
FORM_DATA = {
    "append",
    "clear",
    "delete",
    "get",
    "get_all",
    "items",
    "js_object",
    "keys",
    "pop",
    "popitem",
    "setdefault",
    "update",
    "values",
}


async def test_bodies_streams_and_blobs_have_only_cloudflare_names() -> None:
    from js import TextDecoder, TextEncoder, TransformStream
    from workers import Blob, File, FormData, Request, Response

    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    writer.write(b"x")
    reader = ts.readable.getReader()
    seen = {
        "request": (_public(Request("http://x/")), REQUEST),
        "response": (_public(Response("x")), RESPONSE),
        "transform": (_public(ts), {"readable", "writable"}),
        "readable": (_public(ts.readable), READABLE),
        "reader": (_public(reader), READER),
        "result": (_public(await reader.read()), READ_RESULT),
        "writable": (_public(ts.writable), WRITABLE),
        "writer": (_public(writer), WRITER),
        "encoder": (_public(TextEncoder.new()), {"encode", "encoding"}),
        "decoder": (_public(TextDecoder.new()), {"decode", "encoding", "fatal", "ignoreBOM"}),
        "blob": (_public(Blob(["x"])), BLOB),
        "file": (_public(File(["x"], "x.txt")), BLOB | {"last_modified", "name"}),
        "form": (_public(FormData({"a": "1"})), FORM_DATA),
    }
    assert {k: v[0] for k, v in seen.items()} == {k: v[1] for k, v in seen.items()}
