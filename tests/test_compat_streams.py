"""``js`` streams: TransformStream, ReadableStream, readers, writers, TextEncoder/TextDecoder.

Each test drives a stream the way Python Workers code does (``TransformStream.new()``, a writer,
``async for`` or a reader) and checks what the other end observes: chunks in order, back-pressure
that holds a writer until the reader takes enough, cancellation reaching the producer, and the
errors JavaScript gives for misuse.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from js import ReadableStream, TextDecoder, TextEncoder, TransformStream, WritableStream

from doemu.compat.chunks import STRING_CHUNK
from doemu.compat.readable import core_of
from doemu.compat.streams import HIGH_WATER_MARK
from doemu.errors import StreamError
from doemu.jsboundary import JsException

from .polling import eventually


async def collect(stream: Any) -> list[bytes]:
    return [chunk.to_bytes() async for chunk in stream]


async def test_a_transform_stream_carries_chunks_in_order_then_ends() -> None:
    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    encoder = TextEncoder.new()

    async def produce() -> None:
        await writer.write(encoder.encode("data: one\n\n"))
        await writer.write(b"data: two\n\n")
        await writer.close()

    producer = asyncio.ensure_future(produce())
    assert await collect(ts.readable) == [b"data: one\n\n", b"data: two\n\n"]
    await producer


async def test_a_reader_reads_done_and_value() -> None:
    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    writer.write(b"x")  # not awaited: the chunk is queued anyway, as a JS promise would do
    writer.close()
    reader = ts.readable.getReader()
    first = await reader.read()
    assert (first.done, first.value.to_bytes()) == (False, b"x")
    last = await reader.read()
    assert (last.done, last.value) == (True, None)
    assert last.to_py() == {"done": True, "value": None}


async def test_back_pressure_holds_the_writer_until_the_reader_takes_enough() -> None:
    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    big = b"x" * (HIGH_WATER_MARK // 2 + 1)
    await writer.write(big)  # under the mark: settles at once
    second = writer.write(big)  # now over it
    await asyncio.sleep(0)
    assert not second.done()
    assert writer.desiredSize is not None and writer.desiredSize < 0
    reader = ts.readable.getReader()
    await reader.read()  # the reader takes one chunk: room again
    await asyncio.wait_for(second, 1)
    assert writer.desiredSize == HIGH_WATER_MARK - len(big)


async def test_cancelling_the_readable_fails_the_next_write_and_unblocks_a_waiting_one() -> None:
    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    writer.write(b"y" * (HIGH_WATER_MARK + 1))
    waiting = writer.write(b"more")
    await ts.readable.cancel("the client went away")
    with pytest.raises(StreamError, match="the client went away"):
        await waiting
    with pytest.raises(StreamError, match="the client went away"):
        await writer.write(b"again")


async def test_writes_after_close_and_string_chunks_are_refused() -> None:
    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    with pytest.raises(TypeError) as info:
        writer.write("a str, not bytes")
    assert str(info.value) == STRING_CHUNK
    writer.close()
    with pytest.raises(StreamError, match="closed"):
        await writer.write(b"late")
    assert await collect(ts.readable) == []


async def test_a_stream_dropped_unread_fails_its_writer() -> None:
    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    readable = ts.readable
    del ts, readable
    gc.collect()
    with pytest.raises(StreamError, match="dropped without being read"):
        await writer.write(b"nobody reads this")


async def test_locks_are_exclusive() -> None:
    stream = ReadableStream.new(start=lambda c: c.close())
    reader = stream.getReader()
    assert stream.locked
    with pytest.raises(StreamError, match="locked"):
        stream.getReader()
    reader.releaseLock()
    assert not stream.locked
    writable = TransformStream.new().writable
    writable.getWriter()
    with pytest.raises(StreamError, match="locked"):
        writable.getWriter()


async def test_a_pull_source_is_read_only_as_fast_as_the_consumer() -> None:
    pulled: list[int] = []

    async def pull(controller: Any) -> None:
        pulled.append(len(pulled))
        if len(pulled) > 3:
            controller.close()
        else:
            controller.enqueue(f"chunk {len(pulled)}".encode())

    stream = ReadableStream.new(pull=pull)
    reader = stream.getReader()
    assert (await reader.read()).value.to_bytes() == b"chunk 1"
    assert pulled == [0]  # nothing read ahead
    rest = [chunk.to_bytes() async for chunk in _rest(reader)]
    assert rest == [b"chunk 2", b"chunk 3"]


async def _rest(reader: Any) -> Any:
    while not (result := await reader.read()).done:
        yield result.value


async def test_cancel_reaches_the_source() -> None:
    reasons: list[str] = []
    stream = ReadableStream.new(pull=lambda c: c.enqueue(b"."), cancel=reasons.append)
    await stream.cancel("enough")
    assert reasons and "enough" in reasons[0]


async def test_an_early_break_from_async_for_cancels_the_stream() -> None:
    cancelled: list[str] = []
    stream = ReadableStream.new(pull=lambda c: c.enqueue(b"."), cancel=cancelled.append)
    async for _chunk in stream:
        break
    await eventually(lambda: cancelled, what="the source to be cancelled")


async def test_tee_gives_both_branches_every_chunk() -> None:
    ts = TransformStream.new()
    writer = ts.writable.getWriter()
    left, right = ts.readable.tee()
    writer.write(b"a")
    writer.write(b"b")
    writer.close()
    assert await asyncio.gather(collect(left), collect(right)) == [[b"a", b"b"], [b"a", b"b"]]


async def test_pipe_to_and_pipe_through() -> None:
    received: list[bytes] = []
    sink = WritableStream.new(write=lambda chunk: received.append(bytes(chunk)))
    source = ReadableStream.new(start=lambda c: (c.enqueue(b"1"), c.enqueue(b"2"), c.close()))
    await source.pipeTo(sink)
    assert received == [b"1", b"2"]
    piped = ReadableStream.new(start=lambda c: (c.enqueue(b"3"), c.close()))
    assert await collect(piped.pipeThrough(TransformStream.new())) == [b"3"]


async def test_a_source_error_reaches_the_reader() -> None:
    stream = ReadableStream.new(start=lambda c: c.error(ValueError("broken upstream")))
    with pytest.raises(ValueError, match="broken upstream"):
        await stream.getReader().read()
    assert core_of(stream).error is not None


def test_text_encoder_and_decoder_round_trip_and_stream_split_characters() -> None:
    data = TextEncoder.new().encode("héllo ✓")
    assert data.to_bytes() == "héllo ✓".encode()
    decoder = TextDecoder.new()
    assert decoder.decode(data) == "héllo ✓"
    split = "✓".encode()
    streaming = TextDecoder.new("utf-8")
    assert streaming.decode(split[:1], stream=True) == ""  # half a character waits
    assert streaming.decode(split[1:], stream=True) == "✓"
    assert TextDecoder.new().decode(b"\xff") == "\ufffd"
    with pytest.raises(TypeError):
        TextDecoder.new("utf-8", fatal=True).decode(b"\xff")
    with pytest.raises(JsException, match=r"^RangeError: Invalid encoding"):
        TextDecoder.new("no-such-encoding")


async def test_a_read_waiting_when_the_reader_cancels_sees_done() -> None:
    """The Streams spec: cancel closes the readable side, so a pending read resolves
    ``{done: true}`` (a model reading a provider's body that the turn cancelled ends quietly),
    and later reads do too; the producer's next write fails with the reason."""
    ts = TransformStream.new()
    reader = ts.readable.getReader()
    pending = asyncio.ensure_future(reader.read())
    await asyncio.sleep(0)
    await reader.cancel("stop")
    first = await pending
    assert first.done is True and first.value is None
    assert (await reader.read()).done is True
    with pytest.raises(StreamError, match="stop"):
        await ts.writable.getWriter().write(b"late")
