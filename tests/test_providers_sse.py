"""The providers' SSE decoder against the specification's event model."""

from __future__ import annotations

import pytest

from agents.providers.sse import SseEvent, SseEventDecoder

STREAM = (
    b'event: message_start\ndata: {"a": 1}\n\n'
    b": a comment\n"
    b"data: first line\ndata: second line\n\n"
    b"id: 7\r\nevent: ping\r\ndata:no-space\r\n\r\n"
    b"data: [DONE]\r\r"
)
EXPECTED = [
    SseEvent("message_start", '{"a": 1}'),
    SseEvent("message", "first line\nsecond line"),
    SseEvent("ping", "no-space", "7"),
    SseEvent("message", "[DONE]", "7"),
]


def test_whole_stream() -> None:
    decoder = SseEventDecoder()
    assert decoder.feed(STREAM) == EXPECTED[:-1]  # the last "\r" may be half of "\r\n"
    assert decoder.finish() == EXPECTED[-1:]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_any_slicing(size: int) -> None:
    decoder = SseEventDecoder()
    events = []
    for i in range(0, len(STREAM), size):
        events += decoder.feed(STREAM[i : i + size])
    assert events + decoder.finish() == EXPECTED


def test_split_utf8_and_bom() -> None:
    data = "\ufeffdata: héllo ✓\n\n".encode()
    decoder = SseEventDecoder()
    events = [e for i in range(len(data)) for e in decoder.feed(data[i : i + 1])]
    assert events == [SseEvent("message", "héllo ✓")]


def test_a_cut_event_is_not_dispatched() -> None:
    decoder = SseEventDecoder()
    assert decoder.feed(b"data: complete\n\ndata: half") == [SseEvent("message", "complete")]
    assert decoder.finish() == []


def test_event_name_without_data_is_dropped() -> None:
    decoder = SseEventDecoder()
    assert decoder.feed(b"event: lonely\n\ndata: x\n\n") == [SseEvent("message", "x")]
