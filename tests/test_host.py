"""Objects and events: laziness, the input gate, blockConcurrencyWhile, abort, waitUntil."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest
from pyodide.ffi import create_proxy
from workers import DurableObject

from doemu.errors import BlockConcurrencyTimeoutError, DurableObjectAbort, ObjectResetError
from doemu.jsboundary import JsException
from doemu.persist import object_file
from doemu.testing.plugin import HarnessFactory

from .polling import eventually

# The error texts spelled out (golden), not imported from doemu: a drift in doemu's copy of
# Cloudflare's wording must fail a test.
BLOCK_CONCURRENCY_TIMEOUT_MESSAGE = (
    "A call to blockConcurrencyWhile() in a Durable Object waited for too long. The call "
    "was canceled and the Durable Object was reset."
)

CONSTRUCTED: list[str] = []
AFTER_ABORT: list[str] = []  # what the handlers below ran after ctx.abort()
SWALLOWING: set[str] = set()  # gates of the swallow_reset handlers that have started


class Counter(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        CONSTRUCTED.append(str(ctx.id))

    async def incr(self) -> int:
        await asyncio.sleep(0)  # a real await: other events may run here
        value = (await self.ctx.storage.get("n") or 0) + 1
        await self.ctx.storage.put("n", value)
        return value

    async def get(self) -> int:
        return await self.ctx.storage.get("n") or 0

    async def fail(self, message: str) -> None:
        await self.ctx.storage.put("before-fail", True)
        raise ValueError(message)

    async def abort_after_write(self) -> None:
        self.ctx.storage.kv.put("doomed", 1)
        self.ctx.abort("custom reason")

    async def abort_inside_except_exception(self, reason: str | None) -> str:
        """A broad handler around ctx.abort(), as user code often has one around its work."""
        try:
            self.ctx.abort(reason)
        except Exception as exc:
            AFTER_ABORT.append(f"handler caught {type(exc).__name__}")
        AFTER_ABORT.append("code after the handler")
        self.ctx.storage.kv.put("after-abort", 1)
        return "kept running"

    async def what_abort_raises(self) -> str:
        try:
            self.ctx.abort()
        except BaseException as exc:  # only to look at it
            AFTER_ABORT.append(f"{type(exc).__name__}: {exc}")
            raise

    async def slow(self, gate: str) -> str:
        await asyncio.sleep(3600)
        return gate

    async def spawn(self) -> None:
        async def later() -> None:
            await asyncio.sleep(0)
            await self.ctx.storage.put("background", True)

        self.ctx.waitUntil(create_proxy(later()))

    async def read(self, key: str) -> Any:
        return await self.ctx.storage.get(key)


class Blocking(DurableObject):
    """Its constructor blocks concurrency until an event (set by the test) is released."""

    release: asyncio.Event
    order: list[str]

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.ready = False

        async def init() -> None:
            await Blocking.release.wait()
            Blocking.order.append("init done")
            self.ready = True

        ctx.blockConcurrencyWhile(init)

    async def is_ready(self) -> bool:
        Blocking.order.append("event")
        return self.ready

    async def hang(self) -> str:
        async def forever() -> None:
            Blocking.order.append("hanging")
            await asyncio.Event().wait()

        await self.ctx.blockConcurrencyWhile(forever)
        return "unreachable"


async def test_stubs_construct_nothing_until_the_first_call(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"COUNTER": Counter})
    stub = h.env.COUNTER.getByName("lazy")
    before = len(CONSTRUCTED)
    assert not h.is_live("COUNTER", "lazy")
    assert len(CONSTRUCTED) == before
    assert await stub.incr() == 1
    assert len(CONSTRUCTED) == before + 1
    assert h.is_live("COUNTER", "lazy")


async def test_concurrent_read_modify_write_is_atomic(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"COUNTER": Counter})
    stub = h.env.COUNTER.getByName("gate")
    results = await asyncio.gather(*(stub.incr() for _ in range(20)))
    assert sorted(results) == list(range(1, 21))
    assert await stub.get() == 20


async def test_user_exception_reaches_caller_and_does_not_reset(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"COUNTER": Counter})
    stub = h.env.COUNTER.getByName("raises")
    await stub.incr()
    before = len(CONSTRUCTED)
    with pytest.raises(JsException, match="ValueError: boom"):  # a PythonError, as on Cloudflare
        await stub.fail("boom")
    assert await stub.read("before-fail") is True  # writes before the raise are kept
    assert len(CONSTRUCTED) == before  # same instance


async def test_abort_drops_uncommitted_writes_and_rebuilds(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"COUNTER": Counter})
    stub = h.env.COUNTER.getByName("aborts")
    await stub.incr()
    before = len(CONSTRUCTED)
    with pytest.raises(ObjectResetError, match="custom reason"):
        await stub.abort_after_write()
    assert not h.is_live("COUNTER", "aborts")
    assert await stub.read("doomed") is None
    assert await stub.get() == 1
    assert len(CONSTRUCTED) == before + 1


async def test_abort_is_not_an_exception_so_a_broad_handler_cannot_swallow_it(
    doemu_harness: HarnessFactory,
) -> None:
    """As Cloudflare's Python runtime (``DurableObjectAbort(BaseException)``): an ``except
    Exception:`` around ``ctx.abort()`` does not catch it, the code after that handler never
    runs (its write is not made), and the caller gets the reset's error with the reason."""
    AFTER_ABORT.clear()
    h = await doemu_harness({"COUNTER": Counter})
    stub = h.env.COUNTER.getByName("abort-swallow")
    with pytest.raises(ObjectResetError, match=r"^no swallowing$"):
        await stub.abort_inside_except_exception("no swallowing")
    assert AFTER_ABORT == []
    assert not h.is_live("COUNTER", "abort-swallow")
    assert await stub.read("after-abort") is None
    assert issubclass(DurableObjectAbort, BaseException)
    assert not issubclass(DurableObjectAbort, Exception)


async def test_abort_without_a_reason_raises_the_sdks_text(doemu_harness: HarnessFactory) -> None:
    """In the object, the SDK's text; for the caller, the reset's."""
    AFTER_ABORT.clear()
    h = await doemu_harness({"COUNTER": Counter})
    stub = h.env.COUNTER.getByName("abort-default")
    with pytest.raises(ObjectResetError) as info:
        await stub.what_abort_raises()
    assert str(info.value) == "Durable Object was aborted by ctx.abort()."
    assert AFTER_ABORT == ["DurableObjectAbort: Durable Object abort requested"]


async def test_reset_cancels_in_flight_callers_with_the_reason(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"COUNTER": Counter})
    stub = h.env.COUNTER.getByName("reset-inflight")
    pending = asyncio.ensure_future(stub.slow("x"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    h.reset("COUNTER", "reset-inflight", "code updated")
    with pytest.raises(ObjectResetError, match="code updated"):
        await pending
    assert await stub.incr() == 1


async def test_block_concurrency_while_holds_other_events(doemu_harness: HarnessFactory) -> None:
    Blocking.release = asyncio.Event()
    Blocking.order = []
    h = await doemu_harness({"BLOCKING": Blocking})
    stub = h.env.BLOCKING.getByName("bcw")
    first = asyncio.ensure_future(stub.is_ready())
    second = asyncio.ensure_future(stub.is_ready())
    for _ in range(5):
        await asyncio.sleep(0)
    assert Blocking.order == []  # both events wait for the constructor's block
    Blocking.release.set()
    assert await first is True and await second is True
    assert Blocking.order == ["init done", "event", "event"]


async def test_block_concurrency_while_times_out_and_resets(doemu_harness: HarnessFactory) -> None:
    Blocking.release = asyncio.Event()
    Blocking.release.set()
    Blocking.order = []
    h = await doemu_harness({"BLOCKING": Blocking})
    stub = h.env.BLOCKING.getByName("bcw-timeout")
    assert await stub.is_ready() is True
    hung = asyncio.ensure_future(stub.hang())
    await eventually(lambda: "hanging" in Blocking.order, what="the blocking callback to run")
    await h.advance(29_999)
    assert not hung.done()
    await h.advance(1)
    with pytest.raises(ObjectResetError) as info:
        await hung
    assert str(info.value) == BLOCK_CONCURRENCY_TIMEOUT_MESSAGE
    assert isinstance(info.value, BlockConcurrencyTimeoutError)
    assert await stub.is_ready() is True  # a fresh instance serves the next event


async def test_wait_until_keeps_the_object_alive_until_it_settles(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"COUNTER": Counter}, idle_timeout=(1.0, 1.0))
    stub = h.env.COUNTER.getByName("wait-until")
    await stub.spawn()
    host = h.runtime.host("COUNTER", "wait-until")
    assert host.busy
    await eventually(lambda: not host.busy, what="the waitUntil task to settle")
    assert await stub.read("background") is True


class Nested(DurableObject):
    async def nested(self) -> str:
        async def inner() -> str:
            return "inner"

        async def outer() -> str:
            return str(await self.ctx.blockConcurrencyWhile(inner))

        return str(await self.ctx.blockConcurrencyWhile(outer))

    async def fail_after_write(self) -> None:
        self.ctx.storage.kv.put("written", True)
        raise RuntimeError("after the write")

    async def swallow_reset(self, gate: str) -> str:
        SWALLOWING.add(gate)
        try:
            await asyncio.sleep(3600)
        except BaseException:
            return "swallowed"
        return "unreachable"

    async def work(self) -> str:
        await self.ctx.storage.put("state", "half")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await self.ctx.storage.put("state", "done")
        return "ok"

    async def call_peer(self, name: str) -> str:
        return str(await self.env.NESTED.getByName(name).work())

    async def read(self, key: str) -> Any:
        return await self.ctx.storage.get(key)


async def test_nested_block_concurrency_while_does_not_deadlock(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"NESTED": Nested})
    assert await h.env.NESTED.getByName("nest").nested() == "inner"


async def test_writes_before_an_error_are_committed_before_the_error_leaves(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"NESTED": Nested})
    stub = h.env.NESTED.getByName("err-commit")
    with pytest.raises(JsException, match="RuntimeError: after the write"):
        await stub.fail_after_write()
    # Right after the error reached us, before any yield, another connection sees the write.
    host = h.runtime.host("NESTED", "err-commit")
    path = object_file(host.kind.directory, host.hex_id)
    with sqlite3.connect(path) as other:
        keys = [row[0] for row in other.execute("SELECT key FROM _cf_KV")]
    assert keys == ["written"]


async def test_a_handler_that_swallows_the_reset_still_reports_it(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"NESTED": Nested})
    pending = asyncio.ensure_future(h.env.NESTED.getByName("swallow").swallow_reset("x"))
    await eventually(lambda: "x" in SWALLOWING, what="the handler to start")
    h.reset("NESTED", "swallow", "reset wins")
    with pytest.raises(ObjectResetError, match="reset wins"):
        await pending


async def test_resetting_a_caller_does_not_cut_its_callee_short(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"NESTED": Nested})
    pending = asyncio.ensure_future(h.env.NESTED.getByName("caller").call_peer("callee"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    h.reset("NESTED", "caller", "caller reset")
    with pytest.raises(ObjectResetError, match="caller reset"):
        await pending
    await h.control.settle()
    assert await h.env.NESTED.getByName("callee").read("state") == "done"


async def test_a_closed_runtime_refuses_new_events(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"NESTED": Nested})
    stub = h.env.NESTED.getByName("closed")
    await h.runtime.close()
    with pytest.raises(ObjectResetError, match="shutting down"):
        await stub.read("x")
