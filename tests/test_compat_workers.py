"""The ``workers`` module: Headers, Request, Response, entrypoint base classes, env/waitUntil."""

from __future__ import annotations

import asyncio
import inspect
import json
from http import HTTPMethod
from typing import Any

import pytest

from doemu.compat import set_env, set_wait_until, workers
from doemu.compat.headers import Headers  # what request.headers is (workers.Headers is a hint)
from doemu.compat.js import WebSocketPair
from doemu.compat.workers import (
    Context,
    DurableObject,
    FetchResponse,
    Request,
    Response,
    WorkerEntrypoint,
    WorkflowEntrypoint,
    handler,
)
from doemu.jsboundary import JsException
from doemu.objects.context import DurableObjectState
from doemu.server.app import EntryContext

# -- Headers ------------------------------------------------------------------------------------


def test_headers_are_case_insensitive_and_lowercased() -> None:
    h = Headers({"Content-Type": "text/html", "X-Thing": "1"})
    assert h.get("content-type") == "text/html"
    assert h.get("CONTENT-TYPE") == "text/html"
    assert h["x-thing"] == "1"
    assert "X-THING" in h
    assert h.has("x-thing")
    assert list(h) == ["content-type", "x-thing"]
    assert h.keys() == ["content-type", "x-thing"]


def test_headers_missing_name_gives_none_like_httpmessage() -> None:
    h = Headers()
    assert h["missing"] is None
    assert h.get("missing") is None
    assert h.get("missing", "fallback") == "fallback"
    assert "missing" not in h
    assert len(h) == 0


def test_headers_append_set_delete() -> None:
    h = Headers([("Accept", "a"), ("accept", "b")])
    assert h.get("accept") == "a, b"
    assert h.get_all("accept") == ["a, b"]
    h.append("Accept", "c")
    assert h.get("accept") == "a, b, c"
    h.set("accept", "only")
    assert h.get("accept") == "only"
    h["X-New"] = "v"
    assert h["x-new"] == "v"
    h.delete("accept")
    assert not h.has("accept")
    del h["x-new"]
    assert len(h) == 0
    assert h.get_all("x-new") is None
    assert h.get_all("x-new", []) == []


def test_headers_iterate_sorted_and_combined_except_set_cookie() -> None:
    h = Headers([("b", "2"), ("Set-Cookie", "a=1"), ("a", "1"), ("set-cookie", "b=2"), ("b", "3")])
    assert h.items() == [("a", "1"), ("b", "2, 3"), ("set-cookie", "a=1"), ("set-cookie", "b=2")]
    assert list(h.entries()) == h.items()
    assert h.values() == ["1", "2, 3", "a=1", "b=2"]
    assert h.getSetCookie() == ["a=1", "b=2"]
    assert h.get("set-cookie") == "a=1"
    assert h.get_all("set-cookie") == ["a=1", "b=2"]
    assert dict(h) == {"a": "1", "b": "2, 3", "set-cookie": "a=1"}


def test_headers_httpmessage_helpers_and_copy() -> None:
    h = Headers()
    h.add_header("X-A", "1")
    h.replace_header("x-a", "2")
    assert h["x-a"] == "2"
    with pytest.raises(KeyError):
        h.replace_header("x-missing", "1")
    copy = h.copy()
    copy.set("x-a", "3")
    assert h["x-a"] == "2"
    assert Headers(h) == h
    assert h == {"X-A": "2"}


def test_headers_values_are_trimmed_and_ints_accepted() -> None:
    h = Headers({"content-length": 5, "x": "  padded \t"})  # type: ignore[arg-type]
    assert h["content-length"] == "5"
    assert h["x"] == "padded"


@pytest.mark.parametrize("name", ["bad name", "", "x:y", "ü"])
def test_headers_reject_invalid_names(name: str) -> None:
    with pytest.raises(TypeError, match=r"^Invalid header name\.$"):
        Headers({name: "v"})


def test_headers_reject_invalid_values() -> None:
    with pytest.raises(TypeError, match=r"^Invalid header value\.$"):
        Headers({"x": "a\r\nInjected: 1"})
    with pytest.raises(TypeError, match=r"^Invalid header value\.$"):
        Headers({"x": None})  # type: ignore[arg-type]


def test_headers_reject_unexpected_init() -> None:
    with pytest.raises(TypeError, match="Received unexpected type for headers argument"):
        Headers(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Received unexpected type for headers argument"):
        Headers([("only-name",)])  # type: ignore[list-item]


# -- Request ------------------------------------------------------------------------------------


async def test_request_basics() -> None:
    req = Request(
        "https://Example.COM/a?b=1",
        method="post",
        headers={"Content-Type": "application/json"},
        body='{"x": 1}',
    )
    assert req.url == "https://example.com/a?b=1"
    assert req.method == "POST"
    assert req.method is HTTPMethod.POST
    assert req.headers.get("content-type") == "application/json"
    assert await req.json() == {"x": 1}
    assert req.body_used
    assert repr(req) == "Request(method='POST', url='https://example.com/a?b=1')"


async def test_request_defaults_and_empty_body() -> None:
    req = Request("http://example.com")
    assert req.url == "http://example.com/"
    assert req.method == "GET"
    assert req.body is None
    assert await req.text() == ""
    assert await req.text() == ""  # a null body is never "used"
    assert not req.body_used
    assert req.redirect == "follow"
    assert req.cf is None


async def test_request_body_can_be_read_once() -> None:
    req = Request("http://x/", method="PUT", body=b"\x00\x01")
    assert await req.bytes() == b"\x00\x01"
    with pytest.raises(OSError, match="Body already used"):
        await req.bytes()
    with pytest.raises(OSError, match="Body already used"):
        req.clone()


async def test_request_str_body_gets_text_plain() -> None:
    req = Request("http://x/", method="POST", body="hi")
    assert req.headers["content-type"] == "text/plain;charset=UTF-8"
    assert await req.text() == "hi"


def test_request_get_with_body_is_refused() -> None:
    with pytest.raises(
        TypeError, match=r"^Request with a GET or HEAD method cannot have a body\.$"
    ):
        Request("http://x/", body="nope")
    with pytest.raises(TypeError):
        Request("http://x/", method="HEAD", body=b"x")


def test_request_needs_absolute_url_and_valid_method() -> None:
    with pytest.raises(TypeError, match="Invalid URL: /relative"):
        Request("/relative")
    with pytest.raises(TypeError, match="Invalid HTTP method"):
        Request("http://x/", method="BAD METHOD")


def test_request_custom_method_is_a_plain_string() -> None:
    req = Request("http://x/", method="purge")
    assert req.method == "PURGE"
    assert not isinstance(req.method, HTTPMethod)


def test_request_headers_property_is_a_copy() -> None:
    req = Request("http://x/", headers=[("X-A", "1")])
    req.headers["x-a"] = "changed"
    assert req.headers["x-a"] == "1"
    assert dict(req.headers) == {"x-a": "1"}


async def test_request_from_request_with_overrides_and_clone() -> None:
    base = Request("http://x/p", method="POST", headers={"a": "1"}, body="data")
    derived = Request(base, method="PUT", headers={"b": "2"})
    assert derived.url == "http://x/p"
    assert derived.method == "PUT"
    assert dict(derived.headers) == {"b": "2"}
    # As in JavaScript, the new request takes the body over: the old one reads as used.
    assert base.body_used
    with pytest.raises(OSError, match="Body already used"):
        base.clone()
    twin = derived.clone()
    assert await twin.text() == "data"
    assert await derived.text() == "data"


async def test_request_from_parts_for_the_server() -> None:
    req = Request._from_parts(
        "http://127.0.0.1:8787/x?y=1", "post", [("Upgrade", "websocket")], b'{"n": 2}'
    )
    assert req.method == "POST"
    assert req.headers.get("upgrade") == "websocket"
    assert await req.json() == {"n": 2}
    assert req._body == b'{"n": 2}'  # raw body stays available to the runtime
    empty = Request._from_parts("http://h/", "GET", None, b"")
    assert empty.body is None


async def test_the_request_fetch_and_stub_fetch_send() -> None:
    req = Request._for_fetch("http://do/path", {"method": "POST", "body": bytearray(b"abc")})
    assert req.method == "POST"
    assert await req.bytes() == b"abc"
    original = Request("http://do/a", method="POST", body="x")
    sent = Request._for_fetch(original, {})
    assert sent is not original and original.body_used  # the body moved, as in JavaScript
    assert await sent.text() == "x"
    with pytest.raises(TypeError, match="already used"):
        Request._for_fetch(original, {})  # fetch() of a request whose body was read
    overridden = Request._for_fetch(Request("http://do/b"), {"headers": {"h": "v"}})
    assert overridden.headers["h"] == "v"
    with pytest.raises(TypeError, match="unknown options"):
        Request._for_fetch("http://do/", {"bogus": 1})


# -- Response -----------------------------------------------------------------------------------


async def test_a_body_is_a_stream_and_reading_it_uses_it() -> None:
    resp = Response("streamed")
    chunk = await resp.body.getReader().read()  # .body is a ReadableStream, as on Cloudflare
    assert chunk.value.to_bytes() == b"streamed"
    assert resp.body_used
    with pytest.raises(OSError, match="already used"):
        await resp.text()


def test_workers_headers_is_the_sdks_annotation_not_a_class() -> None:
    """On Cloudflare ``workers.Headers`` is a string naming JS types: calling it fails there."""
    assert workers.Headers == "dict[str, str] | list[tuple[str, str]] | js.Headers"


async def test_response_text() -> None:
    resp = Response("hello", status=201, headers={"X-A": "1"})
    assert resp.status == 201
    assert resp.status_text == "Created"
    assert resp.ok
    assert resp.headers["x-a"] == "1"
    assert resp.headers["content-type"] == "text/plain;charset=UTF-8"
    assert resp._body == b"hello"
    assert await resp.text() == "hello"
    assert resp.body_used
    with pytest.raises(OSError, match="Response body is already used"):
        await resp.text()


async def test_response_defaults() -> None:
    resp = Response()
    assert resp.status == 200
    assert resp.status_text == "OK"
    assert resp.body is None
    assert await resp.bytes() == b""
    assert "content-type" not in resp.headers
    assert resp.url == ""
    assert resp.type == "default"
    assert not resp.redirected


async def test_response_bytes_and_positional_arguments() -> None:
    resp = Response(b"\xff\x00", 404, "Nope", [("content-type", "application/octet-stream")])
    assert (resp.status, resp.status_text) == (404, "Nope")
    assert not resp.ok
    assert await resp.bytes() == b"\xff\x00"
    with pytest.raises(OSError, match="404 Client Error: Nope for url: "):
        resp.raise_for_status()
    Response("ok").raise_for_status()
    with pytest.raises(OSError, match="500 Server Error"):
        Response("x", status=500).raise_for_status()


def test_response_rejects_unsupported_bodies() -> None:
    with pytest.raises(TypeError, match=r"^Unsupported type in Response: dict$"):
        Response({"a": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Unsupported type in Response: bytearray$"):
        Response(bytearray(b"x"))  # type: ignore[arg-type]


def test_response_status_rules() -> None:
    msg = "Responses may only be constructed with status codes in the range 200 to 599, inclusive."
    with pytest.raises(JsException) as info:  # workerd: a JS RangeError, not a ValueError
        Response(None, status=101)
    assert str(info.value) == f"RangeError: {msg}"
    with pytest.raises(JsException, match=r"^RangeError"):
        Response("x", status=600)
    with pytest.raises(TypeError, match=r"^Invalid statusText$"):
        Response("x", status_text="a\nb")
    with pytest.raises(TypeError, match=r"null body status \(101, 204, 205, or 304\)"):
        Response("content", status=204)
    assert Response(b"", status=204).body is None
    assert Response(None, status=304).status == 304


def test_response_with_web_socket() -> None:
    client, _server = WebSocketPair.new()
    resp = Response(None, status=101, web_socket=client)
    assert resp.status == 101
    assert resp._web_socket is client
    assert resp.status_text == "Switching Protocols"
    with pytest.raises(
        JsException, match=r"^RangeError: Responses with a WebSocket must have status code 101\.$"
    ):
        Response(None, web_socket=client)
    with pytest.raises(TypeError, match="web_socket must be a WebSocket"):
        Response(None, status=101, web_socket=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Cannot clone a response to a WebSocket handshake\.$"):
        resp.clone()


async def test_response_json_static_and_instance() -> None:
    resp = Response.json({"a": [1, 2]}, status=202)
    assert isinstance(resp, Response)
    assert resp.status == 202
    assert resp.headers["content-type"] == "application/json"
    assert resp._body == json.dumps({"a": [1, 2]}).encode()
    assert await resp.json() == {"a": [1, 2]}
    custom = Response.json([1], headers={"Content-Type": "application/vnd+json"})
    assert custom.headers["content-type"] == "application/vnd+json"
    assert await Response("1.5").json(parse_float=str) == "1.5"


async def test_response_from_json() -> None:
    resp = Response.from_json("s", status=400, status_text="Bad", headers=[("x", "1")])
    assert (resp.status, resp.status_text) == (400, "Bad")
    assert resp.headers["x"] == "1"
    assert resp.headers["content-type"] == "application/json"
    assert await resp.text() == '"s"'


def test_response_redirect() -> None:
    resp = Response.redirect("https://example.com/next")
    assert resp.status == 302
    assert resp.headers["location"] == "https://example.com/next"
    assert resp.body is None
    assert Response.redirect("/x", 308).status == 308
    with pytest.raises(JsException) as info:
        Response.redirect("/x", 200)
    assert info.value.name == "RangeError" and info.value.message == (
        "200 is not a redirect status code. It must be one of: 301, 302, 303, 307, or 308."
    )
    with pytest.raises(TypeError, match="Redirect URL cannot contain"):
        Response.redirect("/x\r\nSet-Cookie: a=1")


async def test_response_clone_replace_body_and_headers_copy() -> None:
    resp = Response("body", status=418, status_text="Teapot", headers={"x": "1"})
    twin = resp.clone()
    assert await twin.text() == "body"
    assert await resp.text() == "body"
    with pytest.raises(OSError):
        resp.clone()
    replaced = resp.replace_body("new")
    assert (replaced.status, replaced.status_text) == (418, "Teapot")
    assert await replaced.text() == "new"
    resp.headers["x"] = "changed"
    assert resp.headers["x"] == "1"


async def test_response_from_parts_for_the_runtime() -> None:
    resp = Response._from_parts(299, {"a": "b"}, b"raw", "Custom")
    assert isinstance(resp, FetchResponse)
    assert (resp.status, resp.status_text, resp.headers["a"]) == (299, "Custom", "b")
    assert await resp.bytes() == b"raw"
    assert Response._from_parts(599, None, None).status_text == ""


def test_response_repr() -> None:
    assert repr(Response("x")) == "Response(status=200, content_type='text/plain;charset=UTF-8')"
    assert repr(Response(None, 404, "Gone")) == "Response(status=404, status_text='Gone')"


# -- entrypoints and module-level helpers --------------------------------------------------------


def test_entrypoints_keep_ctx_and_env() -> None:
    ctx, env = object(), object()

    class Counter(DurableObject):
        pass

    for cls in (Counter, WorkerEntrypoint, WorkflowEntrypoint):
        obj = cls(ctx, env)
        assert obj.ctx is ctx
        assert obj.env is env


def test_handler_is_identity() -> None:
    def fn() -> int:
        return 1

    assert handler(fn) is fn


def test_the_contexts_doemu_builds_offer_what_the_context_protocol_promises() -> None:
    """``Context`` is what ``ctx`` offers every entrypoint; the two doemu builds — the Worker
    entrypoint's and a Durable Object's — both have ``waitUntil`` with the protocol's shape
    (one awaitable, positional). A ctx class that lost it, or renamed it, fails here."""
    wanted = inspect.signature(Context.waitUntil).parameters
    assert list(wanted) == ["self", "other"]
    for cls in (EntryContext, DurableObjectState):
        method = getattr(cls, "waitUntil", None)
        assert callable(method), f"{cls.__name__} has no waitUntil"
        params = list(inspect.signature(method).parameters.values())
        assert len(params) == len(wanted), (cls.__name__, params)
        assert params[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, (cls.__name__, params)


async def test_the_entry_context_runs_what_it_is_given_and_forgets_it_once_settled() -> None:
    tasks: set[asyncio.Task[Any]] = set()
    ctx: Context = EntryContext(tasks)
    ran = asyncio.Event()

    async def work() -> None:
        ran.set()

    ctx.waitUntil(work())
    assert len(tasks) == 1  # held, so the task is not garbage-collected mid-way
    await asyncio.wait_for(ran.wait(), timeout=5)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)
    assert tasks == set()


def test_env_forwards_to_the_registered_env() -> None:
    class Env:
        GREETING = "hi"

    set_env(None)
    with pytest.raises(AttributeError, match=r"workers\.env is not available"):
        _ = workers.env.GREETING
    assert "not set" in repr(workers.env)
    try:
        set_env(Env())
        assert workers.env.GREETING == "hi"
        with pytest.raises(AttributeError):
            _ = workers.env.MISSING
    finally:
        set_env(None)


def test_wait_until_forwards_to_the_registered_function() -> None:
    seen: list[object] = []
    set_wait_until(None)
    with pytest.raises(RuntimeError, match="waitUntil is not available"):
        workers.waitUntil(object())  # type: ignore[arg-type]
    try:
        set_wait_until(seen.append)
        marker = object()
        workers.waitUntil(marker)  # type: ignore[arg-type]
        workers.wait_until(marker)  # type: ignore[arg-type]
        assert seen == [marker, marker]
    finally:
        set_wait_until(None)


def test_workers_all_is_explicit_and_resolves() -> None:
    for name in workers.__all__:
        assert hasattr(workers, name), name


@pytest.mark.parametrize(
    ("cls", "snake"),
    [
        (Response, ["statusText", "bodyUsed", "from_JSON", "webSocket", "status_code"]),
        (Request, ["bodyUsed", "http_method"]),
        (Headers, ["get_set_cookie"]),
    ],
)
def test_no_invented_aliases_on_the_sdk_classes(cls: type, snake: list[str]) -> None:
    """The Python SDK's names only: nothing invented that would not deploy."""
    for name in snake:
        assert not hasattr(cls, name), f"{cls.__name__}.{name} does not exist on Cloudflare"


def test_no_snake_case_aliases_for_camel_case_names() -> None:
    from doemu.compat.websocket import WebSocket

    forbidden = {
        WebSocket: [
            "ready_state",
            "serialize_attachment",
            "deserialize_attachment",
            "add_event_listener",
            "remove_event_listener",
            "binary_type",
        ],
        Headers: ["get_set_cookie"],
    }
    for owner, names in forbidden.items():
        for name in names:
            assert not hasattr(owner, name), name
    assert hasattr(WebSocket, "serializeAttachment")
    assert hasattr(Headers, "getSetCookie")
