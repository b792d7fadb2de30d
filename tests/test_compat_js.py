"""The ``js`` module: Date (injectable clock), JSON, console, Object, constructors."""

from __future__ import annotations

import logging
import time

import pytest

from doemu.clock import ManualClock
from doemu.compat import js, set_clock, workers
from doemu.compat.headers import Headers as HeadersClass
from doemu.compat.js import (
    JSON,
    Date,
    Headers,
    Object,
    Request,
    Response,
    WebSocket,
    WebSocketPair,
    WebSocketRequestResponsePair,
    console,
)
from doemu.compat.pyodide.ffi import JsProxy, to_js
from doemu.errors import NotEmulatedError


def test_date_now_defaults_to_the_system_clock() -> None:
    set_clock(None)
    now = Date.now()
    assert isinstance(now, int)
    assert abs(now - time.time() * 1000) < 5_000


def test_date_now_follows_an_injected_clock() -> None:
    clock = ManualClock(start_ms=1_700_000_000_123.9)
    try:
        set_clock(clock)
        assert Date.now() == 1_700_000_000_123
        clock.advance(1_000)
        assert Date.now() == 1_700_000_001_123
    finally:
        set_clock(None)


def test_json_stringify_matches_js_format() -> None:
    assert JSON.stringify({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'
    assert JSON.stringify({"a": 1}, None, 2) == '{\n  "a": 1\n}'
    assert JSON.stringify([1], None, "\t") == "[\n\t1\n]"
    assert JSON.stringify("s") == '"s"'
    assert JSON.parse('{"a":[1,null,true]}') == {"a": [1, None, True]}
    assert JSON.parse(b"[1]") == [1]


def test_console_writes_to_the_doemu_console_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="doemu.console"):
        console.log("hello", 1, {"a": 2})
        console.info("info")
        console.debug("debug")
        console.warn("careful")
        console.error("broken")
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "doemu.console"]
    assert records == [
        (logging.INFO, "hello 1 {'a': 2}"),
        (logging.INFO, "info"),
        (logging.DEBUG, "debug"),
        (logging.WARNING, "careful"),
        (logging.ERROR, "broken"),
    ]


def test_object_helpers_make_and_read_plain_javascript_objects() -> None:
    made = Object.fromEntries([("a", 1), ["b", 2]])
    assert isinstance(made, JsProxy) and (made.a, made.b) == (1, 2)
    assert made.to_py() == {"a": 1, "b": 2}
    assert Object.fromEntries({"a": 1}).to_py() == {"a": 1}
    assert Object.fromEntries(Headers.new({"X": "1"}).items()).to_py() == {"x": "1"}
    assert list(Object.keys(made)) == ["a", "b"]
    assert list(Object.values(made)) == [1, 2]
    assert [list(pair) for pair in Object.entries(made)] == [["a", 1], ["b", 2]]
    assert list(Object.keys({"a": 1})) == ["a"]


async def test_js_response_new_builds_a_workers_response() -> None:
    resp = Response.new("hi", {"status": 201, "statusText": "Made", "headers": {"X-A": "1"}})
    assert isinstance(resp, workers.Response)
    assert (resp.status, resp.status_text, resp.headers["x-a"]) == (201, "Made", "1")
    assert await resp.text() == "hi"
    kw = Response.new(bytearray(b"\x01"), status=202, headers=Object.fromEntries([("a", "b")]))
    made = Response.new("x", to_js({"status": 203, "headers": {"X-B": "2"}}))
    assert (made.status, made.headers["x-b"]) == (203, "2")
    assert await kw.bytes() == b"\x01"
    assert kw.headers["a"] == "b"
    assert Response.new().status == 200
    with pytest.raises(TypeError, match="Unsupported type in Response"):
        Response.new(123)


def test_js_response_new_with_web_socket() -> None:
    client, _server = WebSocketPair.new().object_values()
    resp = Response.new(None, {"status": 101, "webSocket": client})
    assert resp.status == 101
    assert resp._web_socket is client


async def test_js_response_json_and_redirect() -> None:
    resp = Response.json({"a": 1}, {"status": 400})
    assert resp.status == 400
    assert resp.headers["content-type"] == "application/json"
    assert await resp.text() == '{"a":1}'
    keep = Response.json([], headers={"content-type": "text/json"})
    assert keep.headers["content-type"] == "text/json"
    redirect = Response.redirect("https://x/", 301)
    assert redirect.status == 301
    assert redirect.headers["location"] == "https://x/"


async def test_js_request_and_headers_constructors() -> None:
    req = Request.new("http://x/y", {"method": "POST", "body": "b"})
    assert isinstance(req, workers.Request)
    assert req.method == "POST"
    again = Request.new(req, method="PUT")
    assert again.method == "PUT"
    assert await again.text() == "b"  # new Request(req) takes req's body over
    assert req.body_used
    headers = Headers.new([("A", "1")])
    assert isinstance(headers, HeadersClass)
    assert headers.get("a") == "1"


def test_websocket_request_response_pair() -> None:
    pair = WebSocketRequestResponsePair.new("ping", "pong")
    assert (pair.request, pair.response) == ("ping", "pong")
    assert "ping" in repr(pair)
    with pytest.raises(TypeError):
        WebSocketRequestResponsePair.new("ping", 1)  # type: ignore[arg-type]


def test_websocket_constants_and_outbound_refusal() -> None:
    assert (WebSocket.READY_STATE_CONNECTING, WebSocket.READY_STATE_OPEN) == (0, 1)
    assert (WebSocket.READY_STATE_CLOSING, WebSocket.READY_STATE_CLOSED) == (2, 3)
    assert (WebSocket.CONNECTING, WebSocket.OPEN, WebSocket.CLOSING, WebSocket.CLOSED) == (
        0,
        1,
        2,
        3,
    )
    with pytest.raises(NotEmulatedError, match="outbound WebSocket"):
        WebSocket.new("wss://example.com")


def test_js_all_is_explicit_and_resolves() -> None:
    for name in js.__all__:
        assert hasattr(js, name), name
    assert "set_clock" not in js.__all__


async def test_js_response_new_copies_another_response() -> None:
    original = Response.new("a", {"status": 203, "statusText": "Copied", "headers": {"x": "1"}})
    copy = Response.new("b", original)
    assert (copy.status, copy.status_text, copy.headers["x"]) == (203, "Copied", "1")
    assert await copy.text() == "b"
