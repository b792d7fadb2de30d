"""The UI-message stream's SSE framing (research §4.2) and the incremental decoder the chat agent
reads a reply's body with: exact bytes out, chunks back whatever the reads' boundaries."""

from __future__ import annotations

import json

import pytest

from agents.chat.transcript.chunks import (
    SSE_DONE,
    UI_MESSAGE_STREAM_HEADERS,
    SseDecoder,
    encode_sse,
    is_event_stream,
    sse_text,
)

HELLO = [
    {"type": "start"},
    {"type": "start-step"},
    {"type": "text-start", "id": "t0"},
    {"type": "text-delta", "id": "t0", "delta": "Hello"},
    {"type": "text-delta", "id": "t0", "delta": ", "},
    {"type": "text-delta", "id": "t0", "delta": "world"},
    {"type": "text-end", "id": "t0"},
    {"type": "finish-step"},
    {"type": "finish", "finishReason": "stop"},
]


def _body(chunks: list[dict[str, object]]) -> bytes:
    return b"".join(encode_sse(chunk) for chunk in chunks) + SSE_DONE


def test_encode_sse_is_json_stringify_framed_as_one_event() -> None:
    assert encode_sse({"type": "text-delta", "id": "t0", "delta": "Hello"}) == (
        b'data: {"type":"text-delta","id":"t0","delta":"Hello"}\n\n'
    )
    # Compact, insertion-ordered, non-ASCII kept as is (UTF-8 on the wire), like JSON.stringify.
    chunk = {"type": "text-delta", "delta": "été ✓", "id": "t0"}
    assert encode_sse(chunk) == 'data: {"type":"text-delta","delta":"été ✓","id":"t0"}\n\n'.encode()
    assert sse_text({"type": "start"}) == 'data: {"type":"start"}\n\n'
    assert SSE_DONE == b"data: [DONE]\n\n"


def test_headers_are_the_ai_sdks() -> None:
    assert list(UI_MESSAGE_STREAM_HEADERS.items()) == [
        ("content-type", "text/event-stream"),
        ("cache-control", "no-cache"),
        ("connection", "keep-alive"),
        ("x-vercel-ai-ui-message-stream", "v1"),
        ("x-accel-buffering", "no"),
    ]


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/event-stream", True),
        ("text/event-stream; charset=utf-8", True),
        ("text/plain;charset=UTF-8", False),
        ("Text/Event-Stream", False),  # the SDK's includes() is case-sensitive
        ("", False),
        (None, False),
    ],
)
def test_is_event_stream_is_a_contains_test(content_type: str | None, expected: bool) -> None:
    assert is_event_stream(content_type) is expected


def test_a_whole_body_decodes_to_its_chunks() -> None:
    decoder = SseDecoder()
    assert decoder.feed(_body(HELLO)) == HELLO
    assert decoder.finish() == []
    assert decoder.skipped == 0


def test_every_split_point_gives_the_same_chunks() -> None:
    """A JSON line cut anywhere (the SDK would drop it) waits for its rest."""
    body = _body(HELLO)
    for cut in range(1, len(body)):
        decoder = SseDecoder()
        chunks = decoder.feed(body[:cut]) + decoder.feed(body[cut:]) + decoder.finish()
        assert chunks == HELLO, cut


def test_byte_by_byte_reads_with_multibyte_characters() -> None:
    chunks = [{"type": "text-delta", "id": "t0", "delta": "naïve 😀 日本"}, {"type": "text-end"}]
    body = _body(chunks)
    decoder = SseDecoder()
    out = []
    for i in range(len(body)):
        out += decoder.feed(body[i : i + 1])
    assert out + decoder.finish() == chunks
    assert decoder.skipped == 0


def test_a_character_split_between_reads_is_kept_whole() -> None:
    body = encode_sse({"type": "text-delta", "delta": "é"})
    cut = body.index("é".encode()) + 1  # between the two bytes of "é"
    decoder = SseDecoder()
    assert decoder.feed(body[:cut]) == []
    assert decoder.feed(body[cut:]) == [{"type": "text-delta", "delta": "é"}]


def test_crlf_and_cr_line_endings() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b'data: {"type":"a"}\r\n\r\ndata: {"type":"b"}\r') == [{"type": "a"}]
    # A trailing "\r" may be the first half of "\r\n": it is settled by the next read.
    assert decoder.pending == 'data: {"type":"b"}\r'
    assert decoder.feed(b'\ndata: {"type":"c"}\r\r') == [{"type": "b"}, {"type": "c"}]
    assert decoder.finish() == []


def test_comments_fields_done_and_blank_lines_yield_nothing() -> None:
    body = (
        b": stream-open\n\n"
        b"event: message\n"
        b"id: 7\n"
        b"retry: 1000\n"
        b'data: {"type":"start"}\n\n'
        b": keep-alive\n\n"
        b"data: [DONE]\n\n"
    )
    decoder = SseDecoder()
    assert decoder.feed(body) == [{"type": "start"}]
    assert decoder.skipped == 0


def test_malformed_data_lines_are_skipped_and_counted() -> None:
    body = (
        b"data: not json\n"
        b"data: 42\n"
        b'data: ["type"]\n'
        b"data: null\n"
        b'data: {"no":"type"}\n'
        b'data: {"type":7}\n'
        b"data: NaN\n"
        b'data: {"type":"text-delta","delta":"x"\n'  # cut short: never completed
        b'data: {"type":"finish"}\n'
    )
    decoder = SseDecoder()
    assert decoder.feed(body) == [{"type": "finish"}]
    assert decoder.skipped == 8


def test_data_without_the_space_and_extra_keys_are_kept() -> None:
    decoder = SseDecoder()
    chunk = decoder.feed(b'data:{"type":"x-custom","z":1,"a":[1,2]}\n')
    assert chunk == [{"type": "x-custom", "z": 1, "a": [1, 2]}]
    assert list(chunk[0]) == ["type", "z", "a"]  # key order survives


def test_finish_flushes_an_unterminated_last_line() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b'data: {"type":"finish"}') == []
    assert decoder.finish() == [{"type": "finish"}]
    assert decoder.pending == ""


def test_incomplete_characters_become_replacements() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b'data: {"type":"t","d":"') == []
    # "\xc3" cannot start a character followed by '"': U+FFFD, as TextDecoder does.
    assert decoder.feed(b'\xc3"}') == []
    assert decoder.finish() == [{"type": "t", "d": "\ufffd"}]
    decoder = SseDecoder()
    decoder.feed(b'data: {"type":"t","d":"\xc3')
    assert decoder.finish() == []  # '{"type":"t","d":"\ufffd' is not JSON
    assert decoder.skipped == 1


def test_str_reads_and_a_bom() -> None:
    decoder = SseDecoder()
    assert decoder.feed("\ufeffdata: ") == []
    assert decoder.feed('{"type":"start"}\n') == [{"type": "start"}]
    decoder = SseDecoder()
    assert decoder.feed(b'\xef\xbb\xbfdata: {"type":"start"}\n') == [{"type": "start"}]


def test_invalid_utf8_becomes_replacement_characters() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b'data: {"type":"t","d":"a\xffb"}\n') == [{"type": "t", "d": "a\ufffdb"}]


def test_round_trip_of_arbitrary_chunks() -> None:
    chunks = [
        {"type": "data-weather", "id": "w1", "data": {"line": "a\nb\r\nc", "quote": '"'}},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
        {"type": "error", "errorText": "data: [DONE]"},
    ]
    decoder = SseDecoder()
    assert decoder.feed(_body(chunks)) == chunks
    assert json.loads(encode_sse(chunks[0])[6:]) == chunks[0]
