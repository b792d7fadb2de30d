"""WebSocketPair and WebSocket: send/close rules, readyState, events, attachments, hooks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from doemu import clone
from doemu.compat.pyodide.ffi import JsBuffer, JsException, JsProxy, jsnull, to_js
from doemu.compat.socket_end import SocketEnd
from doemu.compat.websocket import (
    MAX_ATTACHMENT_SIZE,
    CloseEvent,
    ErrorEvent,
    Event,
    MessageEvent,
    WebSocket,
    WebSocketPair,
    end_of,
)
from doemu.errors import DataCloneError, WebSocketError

MUST_ACCEPT = (
    "You must call one of accept() or state.acceptWebSocket() on this WebSocket before sending "
    "messages."
)


def pair() -> tuple[WebSocket, WebSocket]:
    client, server = WebSocketPair.new()
    return client, server


# -- the pair -----------------------------------------------------------------------------------


def test_pair_unpacks_directly_and_through_object_values() -> None:
    p = WebSocketPair.new()
    client, server = p
    assert (client, server) == p.object_values()
    assert p[0] is client and p[1] is server and p["1"] is server
    assert len(p) == 2
    assert client is not server
    assert end_of(client).peer is end_of(server) and end_of(server).peer is end_of(client)
    assert "WebSocketPair" in repr(p)


def test_pair_cannot_be_constructed_without_new() -> None:
    with pytest.raises(TypeError):
        WebSocketPair()  # type: ignore[call-arg]


def test_fresh_sockets() -> None:
    _client, server = pair()
    assert server.readyState == WebSocket.READY_STATE_OPEN
    assert server.url is None
    assert server.protocol == ""
    assert server.extensions == ""
    assert server.binaryType == "blob"
    server.binaryType = "arraybuffer"
    assert server.binaryType == "arraybuffer"
    server.binaryType = "nonsense"
    assert server.binaryType == "arraybuffer"
    assert "readyState=1" in repr(server)


# -- send ---------------------------------------------------------------------------------------


def test_send_requires_accept() -> None:
    _client, server = pair()
    with pytest.raises(WebSocketError) as info:
        server.send("x")
    assert info.value.message == MUST_ACCEPT
    assert info.value.name == "TypeError" and not isinstance(info.value, TypeError)


def test_send_delivers_to_the_peer_sink_or_buffer() -> None:
    client, server = pair()
    server.accept()
    server.send("one")
    server.send(to_js(b"two"))  # a JS buffer: a binary frame
    assert list(end_of(client).inbox) == ["one", b"two"]
    got: list[str | bytes] = []
    end_of(client).sink = got.append
    server.send(to_js(b"four"))
    assert got == [b"four"]


def test_python_bytes_and_dicts_go_out_as_text_as_on_cloudflare(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """workerd (observed): ``ws.send(b"...")`` sends a TEXT frame holding ``str(data)``, no error;
    only ``to_js(data)`` is binary. doemu does the same and logs why, once per line."""
    client, server = pair()
    server.accept()
    for _ in range(2):
        server.send(b"\x01two")
    server.send(bytearray(b"ba"))
    server.send({"a": 1})  # type: ignore[arg-type]
    assert list(end_of(client).inbox) == [
        "b'\\x01two'",
        "b'\\x01two'",
        "bytearray(b'ba')",
        "{'a': 1}",
    ]
    warnings = [r.getMessage() for r in caplog.records if "TEXT frame" in r.getMessage()]
    assert len(warnings) == 3 and "to_js(data)" in warnings[0]


def test_lenient_send_takes_bytes_as_binary(lenient: None) -> None:
    client, server = pair()
    server.accept()
    server.send(b"two")
    server.send(bytearray(b"three"))
    assert list(end_of(client).inbox) == [b"two", b"three"]
    with pytest.raises(JsException, match="expects str or bytes"):
        server.send({"a": 1})  # type: ignore[arg-type]


def test_send_after_close_raises_and_is_dropped_after_release() -> None:
    _client, server = pair()
    server.accept()
    server.close(1000, "bye")
    with pytest.raises(
        WebSocketError, match=r"^TypeError: Can't call WebSocket send\(\) after close\(\)\.$"
    ):
        server.send("late")
    client2, _server2 = pair()
    end_of(client2).couple()
    client2.send("ignored")  # a socket used in a response silently drops sends
    client2.close()


def test_before_send_hook_runs_first() -> None:
    client, server = pair()
    server.accept()
    calls: list[str] = []
    end_of(server).before_send = lambda: calls.append("gate")
    end_of(client).sink = lambda m: calls.append(f"sent {m!r}")
    server.send("m")
    server.close()
    assert calls == ["gate", "sent 'm'", "gate"]


# -- close and readyState -----------------------------------------------------------------------


def test_close_validation_uses_workerd_texts() -> None:
    _client, server = pair()
    with pytest.raises(WebSocketError, match=r"^TypeError: You must call one of accept\(\)"):
        server.close()
    server.accept()
    for bad in (999, 1004, 1005, 1006, 1015, 5000):
        with pytest.raises(WebSocketError) as info:
            server.close(bad)
        assert info.value.message == f"Invalid WebSocket close code: {bad}."
    with pytest.raises(WebSocketError) as info:
        server.close(None, "reason without code")
    assert info.value.message == (
        "If you specify a WebSocket close reason, you must also specify a code."
    )
    with pytest.raises(WebSocketError, match="123 bytes"):
        server.close(1000, "é" * 62)  # 124 bytes of UTF-8
    with pytest.raises(TypeError):
        server.close("1000")  # type: ignore[arg-type]
    server.close(4999, "x" * 123)
    assert server.readyState == WebSocket.READY_STATE_CLOSING


@pytest.mark.parametrize("code", [1000, 1001, 1011, 3000, 4000])
def test_close_accepts_valid_codes(code: int) -> None:
    client, server = pair()
    server.accept()
    closes: list[tuple[int, str, bool]] = []
    end_of(client).close_sink = lambda code, reason, clean: closes.append((code, reason, clean))
    server.close(code)
    assert closes == [(code, "", True)]  # the peer gets the code as given
    assert server.readyState == WebSocket.READY_STATE_CLOSING


def test_close_delivers_to_the_peer_close_sink() -> None:
    client, server = pair()
    server.accept()
    closes: list[tuple[int, str, bool]] = []
    end_of(client).close_sink = lambda code, reason, clean: closes.append((code, reason, clean))
    server.close(1001, "going away")
    server.close(1000)  # a second close is ignored
    assert closes == [(1001, "going away", True)]
    assert server.readyState == WebSocket.READY_STATE_CLOSING
    end_of(client).forward_close(1001, "going away")  # the network echoes the close
    assert server.readyState == WebSocket.READY_STATE_CLOSED


def test_close_without_code_sends_1005() -> None:
    client, server = pair()
    server.accept()
    closes: list[tuple[int, str, bool]] = []
    end_of(client).close_sink = lambda code, reason, clean: closes.append((code, reason, clean))
    server.close()
    assert closes == [(1005, "", True)]


def test_in_memory_pair_completes_the_close_handshake() -> None:
    client, server = pair()
    client.accept()
    server.accept()
    server.close(1000, "done")
    assert server.readyState == WebSocket.READY_STATE_CLOSED
    assert client.readyState == WebSocket.READY_STATE_CLOSED


def test_auto_reply_can_be_disabled() -> None:
    client, server = pair()
    client.accept({"allowHalfOpen": True})
    server.accept()
    server.close(1000)
    assert client.readyState == WebSocket.READY_STATE_CLOSING
    assert server.readyState == WebSocket.READY_STATE_CLOSING
    client.close(1000)
    assert server.readyState == WebSocket.READY_STATE_CLOSED


def test_remote_close_on_hibernatable_socket_auto_replies() -> None:
    client, server = pair()
    end_of(server).accept_hibernatable()
    seen: list[tuple[str, int, str, bool]] = []

    def sink(side: str) -> Any:
        return lambda code, reason, clean: seen.append((side, code, reason, clean))

    end_of(server).close_sink = sink("server")
    end_of(client).close_sink = sink("client")
    end_of(client).couple()
    end_of(client).forward_close(1000, "client left")
    assert server.readyState == WebSocket.READY_STATE_CLOSED
    assert seen == [("server", 1000, "client left", True), ("client", 1000, "client left", True)]
    server.close(1000)  # closing again in webSocketClose is harmless: nothing more is sent
    assert len(seen) == 2
    assert server.readyState == WebSocket.READY_STATE_CLOSED


def test_unclean_disconnect_does_not_auto_reply() -> None:
    client, server = pair()
    server.accept()
    replies: list[tuple[int, str, bool]] = []
    got: list[tuple[int, str, bool]] = []
    end_of(client).close_sink = lambda code, reason, clean: replies.append((code, reason, clean))
    end_of(server).close_sink = lambda code, reason, clean: got.append((code, reason, clean))
    end_of(client).forward_close(1006, "WebSocket disconnected without sending Close frame.", False)
    assert replies == []
    assert got == [(1006, "WebSocket disconnected without sending Close frame.", False)]
    assert server.readyState == WebSocket.READY_STATE_CLOSING


def test_error_closes_the_socket() -> None:
    client, server = pair()
    server.accept()
    events: list[Event] = []
    server.addEventListener("error", events.append)
    boom = RuntimeError("boom")
    end_of(client).forward_error(boom)
    end_of(client).forward_error(RuntimeError("second"))  # reported once
    assert server.readyState == WebSocket.READY_STATE_CLOSED
    assert len(events) == 1
    assert isinstance(events[0], ErrorEvent)
    assert events[0].error is boom and events[0].message == "boom"
    sent: list[str | bytes] = []
    closes: list[tuple[int, str, bool]] = []
    end_of(client).sink = sent.append
    end_of(client).close_sink = lambda code, reason, clean: closes.append((code, reason, clean))
    server.send("dropped")  # sends after an error are dropped
    server.close()  # and so is close
    assert (sent, closes) == ([], [])
    assert server.readyState == WebSocket.READY_STATE_CLOSED


def test_error_sink_takes_the_error_instead_of_an_event() -> None:
    client, server = pair()
    end_of(server).accept_hibernatable()
    errors: list[BaseException] = []
    end_of(server).error_sink = errors.append
    boom = ConnectionResetError("gone")
    end_of(client).forward_error(boom)
    assert errors == [boom]
    assert server.readyState == WebSocket.READY_STATE_CLOSED
    assert not end_of(server).inbox


# -- accept / hibernation / coupling --------------------------------------------------------------


def test_accept_rules() -> None:
    client, server = pair()
    server.accept()
    server.accept()  # twice is fine
    with pytest.raises(WebSocketError) as info:
        end_of(server).accept_hibernatable()
    assert info.value.message == (
        "Cannot call `acceptWebSocket()` if the WebSocket was already accepted via `accept()`"
    )
    end_of(client).couple()
    with pytest.raises(WebSocketError) as info:
        client.accept()
    assert info.value.message == "Can't accept() WebSocket that was already used in a response."
    with pytest.raises(WebSocketError) as info:
        end_of(client).couple()
    assert info.value.message == "Can't return WebSocket that was already used in a response."


def test_hibernatable_accept_rules() -> None:
    client, server = pair()
    end_of(server).accept_hibernatable()
    with pytest.raises(WebSocketError) as info:
        server.accept()
    assert info.value.message == "Can't accept() WebSocket after enabling hibernation."
    with pytest.raises(WebSocketError, match="already accepted"):
        end_of(server).accept_hibernatable()
    with pytest.raises(WebSocketError) as info:
        end_of(server).couple()
    assert info.value.message == (
        "Can't return WebSocket in a Response after calling acceptWebSocket()."
    )
    end_of(client).couple()


def test_accept_hibernatable_needs_an_unused_pair() -> None:
    client, server = pair()
    end_of(client).couple()
    with pytest.raises(WebSocketError) as info:
        end_of(server).accept_hibernatable()
    assert info.value.message == (
        "Cannot call `acceptWebSocket()` on this WebSocket because its pair has already been "
        "accepted or used in a Response."
    )
    lone = WebSocket(SocketEnd())
    with pytest.raises(WebSocketError):
        end_of(lone).accept_hibernatable()


def test_couple_after_accept_is_refused() -> None:
    client, _server = pair()
    client.accept()
    with pytest.raises(WebSocketError) as info:
        end_of(client).couple()
    assert info.value.message == "Can't return WebSocket in a Response after calling accept()."


def test_bind_routes_sends_through_the_output_gate() -> None:
    gated: list[str] = []
    client, server = pair()
    end_of(server).bind(lambda: gated.append("gate"))
    assert end_of(server).hibernatable
    got: list[str | bytes] = []
    end_of(client).sink = got.append
    server.send("x")
    assert gated == ["gate"]
    assert got == ["x"]


def test_network_messages_reach_the_server_end() -> None:
    client, server = pair()
    end_of(server).accept_hibernatable()
    got: list[str | bytes] = []
    end_of(server).sink = got.append
    end_of(client).couple()
    end_of(client).forward("hello")
    end_of(client).forward(b"\x01")
    assert got == ["hello", b"\x01"]
    unpaired = WebSocket(SocketEnd())
    end_of(unpaired).forward("nowhere")
    end_of(unpaired).forward_close(1000)
    end_of(unpaired).forward_error(RuntimeError())


# -- events (accept()-ed sockets) ----------------------------------------------------------------


def test_listeners_receive_message_and_close_events() -> None:
    client, server = pair()
    server.accept()
    events: list[Any] = []
    server.addEventListener("message", events.append)
    server.addEventListener("message", events.append)  # the same listener is added once
    server.addEventListener("close", events.append)
    end_of(client).forward("text")
    end_of(client).forward(b"bin")
    end_of(client).forward_close(1000, "bye")
    end_of(client).forward("after close is dropped")
    assert [type(e) for e in events] == [MessageEvent, MessageEvent, CloseEvent]
    assert events[0].data == "text" and events[0].type == "message"
    assert isinstance(events[1].data, JsBuffer)
    assert events[1].data.to_bytes() == b"bin" and events[1].data == b"bin"
    assert (events[2].code, events[2].reason, events[2].wasClean) == (1000, "bye", True)


def test_messages_before_listeners_are_queued_then_flushed_in_order() -> None:
    client, server = pair()
    end_of(client).forward("early-1")
    end_of(client).forward("early-2")
    server.accept()  # no loop running: flushes now, but nobody listens yet
    assert list(end_of(server).inbox) == ["early-1", "early-2"]
    seen: list[str] = []
    server.addEventListener("message", lambda e: seen.append(e.data))
    assert seen == ["early-1", "early-2"]
    end_of(client).forward("late")
    assert seen == ["early-1", "early-2", "late"]


async def test_accept_flushes_queued_messages_on_the_next_loop_turn() -> None:
    client, server = pair()
    end_of(client).forward("queued")
    seen: list[str] = []
    server.accept()
    server.addEventListener("message", lambda e: seen.append(e.data))
    await asyncio.sleep(0)
    assert seen == ["queued"]


def test_remove_event_listener() -> None:
    client, server = pair()
    server.accept()
    seen: list[Any] = []
    server.addEventListener("message", seen.append)
    server.removeEventListener("message", seen.append)
    server.removeEventListener("message", seen.append)
    server.removeEventListener("close", seen.append)
    end_of(client).forward("x")
    assert seen == []
    assert list(end_of(server).inbox) == ["x"]


def test_listener_errors_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    client, server = pair()
    server.accept()
    seen: list[str] = []

    def bad(_event: Any) -> None:
        raise ValueError("listener bug")

    server.addEventListener("message", bad)
    server.addEventListener("message", lambda e: seen.append(e.data))
    end_of(client).forward("x")
    assert seen == ["x"]
    assert "listener bug" in caplog.text


async def test_async_listeners_run_as_tasks() -> None:
    client, server = pair()
    server.accept()
    done = asyncio.Event()
    seen: list[str] = []

    async def listener(event: Any) -> None:
        seen.append(event.data)
        done.set()

    server.addEventListener("message", listener)
    end_of(client).forward("async")
    await asyncio.wait_for(done.wait(), 1)
    assert seen == ["async"]


def test_event_classes() -> None:
    assert repr(Event("open")) == "Event('open')"
    assert MessageEvent("s").data == "s"
    close = CloseEvent(1000, "r", False)
    assert (close.type, close.code, close.reason, close.wasClean) == ("close", 1000, "r", False)


# -- attachments ----------------------------------------------------------------------------------


def test_attachment_round_trip_is_a_copy_of_javascript_values() -> None:
    """As on Cloudflare (observed on workerd): nothing attached reads as ``jsnull``; what
    ``to_js`` made comes back as JS values (an Object read by attribute, ``.to_py()`` a dict)."""
    _client, server = pair()
    assert server.deserializeAttachment() is jsnull
    value = {"id": "abc", "tags": [1, 2], "gone": None}
    server.serializeAttachment(to_js(value))
    value["id"] = "mutated"
    first = server.deserializeAttachment()
    assert isinstance(first, JsProxy) and first.id == "abc" and list(first.tags) == [1, 2]
    with pytest.raises(TypeError, match="not subscriptable"):
        first["id"]
    assert first.to_py() == {"id": "abc", "tags": [1, 2], "gone": None}
    first.tags.append(3)
    assert list(server.deserializeAttachment().tags) == [1, 2]
    assert isinstance(end_of(server).attachment, bytes)
    server.serializeAttachment("plain string")
    assert server.deserializeAttachment() == "plain string"
    server.serializeAttachment(None)
    assert server.deserializeAttachment() is None  # undefined, not null


@pytest.mark.parametrize("value", [{"a": 1}, [1, 2], (1,), b"raw", {1}])
def test_a_python_container_cannot_be_attached(value: Any) -> None:
    """workerd: ``DataCloneError: [object Object] could not be cloned.`` (a JsException)."""
    _client, server = pair()
    with pytest.raises(DataCloneError) as info:
        server.serializeAttachment(value)
    assert str(info.value).startswith("DataCloneError: [object Object] could not be cloned.")
    assert isinstance(info.value, JsException) and not isinstance(info.value, TypeError)


def test_lenient_attachments_keep_python_data(lenient: None) -> None:
    _client, server = pair()
    assert server.deserializeAttachment() is None
    server.serializeAttachment({"id": "abc", "raw": b"\x00"})
    assert server.deserializeAttachment() == {"id": "abc", "raw": b"\x00"}


def test_attachment_limit_is_16_kib() -> None:
    _client, server = pair()
    overhead = len(clone.encode("")) + 2
    server.serializeAttachment("x" * (MAX_ATTACHMENT_SIZE - overhead))
    assert len(end_of(server).attachment or b"") <= MAX_ATTACHMENT_SIZE
    too_big = "x" * MAX_ATTACHMENT_SIZE
    size = len(clone.encode(too_big))
    with pytest.raises(WebSocketError) as info:
        server.serializeAttachment(too_big)
    assert info.value.message == (
        f"A WebSocket 'attachment' cannot be larger than 16384 bytes.'attachment' was {size} bytes."
    )
    assert server.deserializeAttachment() == "x" * (MAX_ATTACHMENT_SIZE - overhead)


def test_attachment_refuses_unclonable_values() -> None:
    _client, server = pair()
    with pytest.raises(DataCloneError):
        server.serializeAttachment(object())
    with pytest.raises(DataCloneError):
        server.serializeAttachment(to_js([object()]))  # a proxy of a Python object inside
