"""Agent lifecycle and plumbing: ``on_start``, ``alarm()`` failures, ``self.sql``, portability.

``on_start`` runs once per activation, inside ``blockConcurrencyWhile`` after the fiber-recovery
scan, so no event reaches the agent before it has finished. ``alarm()`` re-arms only on success:
a failure propagates so that the platform retries with back-off. ``self.sql`` is the one place
where cursor rows become Python data, so an agent also works with Cloudflare's JavaScript
cursors, whose rows are only readable through ``toArray()`` and ``to_py()``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from types import SimpleNamespace
from typing import Any, ClassVar

from agents import Agent, AgentOptions, SqlQueryError
from agents.core.portable import wait_until
from agents.fibers.types import FiberContext, FiberRecoveryContext
from doemu.testing.plugin import HarnessFactory

from .polling import eventually

#: What the agents of this module did, in order, per object name (plain memory: it survives
#: resets and evictions, which is the point).
EVENTS: dict[str, list[str]] = {}
GATES: dict[str, asyncio.Event] = {}


def events(obj: str) -> list[str]:
    return EVENTS.setdefault(obj, [])


class LifecycleAgent(Agent):
    options = AgentOptions(keep_alive_interval_ms=1000)
    #: Object names whose ``on_start`` waits for ``GATES[name]``.
    slow_start: ClassVar[set[str]] = set()

    async def on_start(self) -> None:
        recovered = self.sql("SELECT count(*) AS n FROM cf_agents_runs")[0]["n"]
        events(self.name).append(f"on_start:begin:runs={recovered}")
        if self.name in self.slow_start:
            await GATES.setdefault(self.name, asyncio.Event()).wait()
        events(self.name).append("on_start:end")

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        events(self.name).append(f"recovered:{ctx.name}")

    async def ping(self, tag: str) -> list[str]:
        events(self.name).append(f"ping:{tag}")
        return list(events(self.name))

    async def start_orphan(self) -> None:
        async def body(ctx: FiberContext) -> None:
            await asyncio.Event().wait()

        wait_until(self.ctx, self.run_fiber("orphan", body))

    async def bad_query(self) -> dict[str, Any]:
        try:
            self.sql("SELECT nope FROM no_such_table WHERE x = ?", 1)
        except SqlQueryError as exc:
            return {"type": type(exc).__name__, "message": str(exc), "query": exc.query}
        return {}


async def test_on_start_runs_once_per_activation_and_again_after_eviction(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"LIFE": LifecycleAgent})
    name = unique_name("once")
    stub = h.env.LIFE.getByName(name)
    await stub.ping("a")
    seen = await stub.ping("b")
    assert seen == ["on_start:begin:runs=0", "on_start:end", "ping:a", "ping:b"]
    await h.evict("LIFE", name)
    seen = await stub.ping("c")
    assert [e for e in seen if e.startswith("on_start:end")] == ["on_start:end"] * 2
    assert seen[-3:] == ["on_start:begin:runs=0", "on_start:end", "ping:c"]


async def test_no_event_is_delivered_before_on_start_finishes(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"LIFE": LifecycleAgent})
    name = unique_name("gate")
    LifecycleAgent.slow_start.add(name)
    try:
        stub = h.env.LIFE.getByName(name)
        first = asyncio.ensure_future(stub.ping("first"))
        second = asyncio.ensure_future(stub.ping("second"))
        await eventually(lambda: events(name), what="on_start to begin")
        for _ in range(20):
            await asyncio.sleep(0)
        assert not first.done() and not second.done()
        assert events(name) == ["on_start:begin:runs=0"]
        GATES[name].set()
        await asyncio.gather(first, second)
        assert events(name)[:2] == ["on_start:begin:runs=0", "on_start:end"]
        assert sorted(events(name)[2:]) == ["ping:first", "ping:second"]
    finally:
        LifecycleAgent.slow_start.discard(name)


async def test_on_start_runs_after_the_recovery_scan(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"LIFE": LifecycleAgent})
    name = unique_name("order")
    stub = h.env.LIFE.getByName(name)
    await stub.start_orphan()
    h.reset("LIFE", name, "crash")
    EVENTS[name] = []
    seen = await stub.ping("after")
    # The orphan's hook ran first; when on_start looked, its row was already retired.
    assert seen == ["recovered:orphan", "on_start:begin:runs=0", "on_start:end", "ping:after"]


async def test_sql_wraps_errors_in_sql_query_error_naming_the_query(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"LIFE": LifecycleAgent})
    out = await h.env.LIFE.getByName(unique_name("sql")).bad_query()
    assert out["type"] == "SqlQueryError"
    assert out["query"] == "SELECT nope FROM no_such_table WHERE x = ?"
    assert "no_such_table" in out["message"]
    assert "query: SELECT nope FROM no_such_table" in out["message"]


# -- alarm failures ------------------------------------------------------------------------------


class FlakyAlarmAgent(Agent):
    """The framework's own alarm work fails (say, an SQL error) the first ``failures`` times."""

    failures: ClassVar[int] = 0
    calls: ClassVar[list[float]] = []

    async def _run_due(self, now: float) -> None:
        type(self).calls.append(now)
        if type(self).failures > 0:
            type(self).failures -= 1
            raise SqlQueryError("SELECT id FROM cf_agents_schedules", RuntimeError("disk I/O"))
        await super()._run_due(now)

    async def tick(self) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS ticks (n INTEGER)")
        self.sql("INSERT INTO ticks VALUES (1)")

    async def arm(self) -> None:
        await self.schedule(1, "tick")

    async def ticks(self) -> int:
        self.sql("CREATE TABLE IF NOT EXISTS ticks (n INTEGER)")
        return int(self.sql("SELECT count(*) AS n FROM ticks")[0]["n"])


async def test_a_failing_alarm_is_retried_with_back_off_not_re_armed_to_now(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"FLAKY": FlakyAlarmAgent})
    name = unique_name("flaky")
    FlakyAlarmAgent.calls = []
    FlakyAlarmAgent.failures = 2
    stub = h.env.FLAKY.getByName(name)
    await stub.arm()
    due = await h.get_alarm("FLAKY", name)
    assert due is not None
    await h.advance(due - h.clock.now())
    # Failed once; the alarm is the platform's retry (2 s + jitter), not a re-arm to "now".
    assert FlakyAlarmAgent.calls == [due]
    retry = await h.get_alarm("FLAKY", name)
    assert retry is not None and retry >= due + 2000
    await h.advance(20_000)
    calls = FlakyAlarmAgent.calls
    assert len(calls) == 3
    assert all(b - a >= 2000 for a, b in itertools.pairwise(calls))  # backed off
    assert await stub.ticks() == 1  # the third delivery succeeded and ran the schedule
    assert await h.get_alarm("FLAKY", name) is None


# -- portability: Cloudflare's cursors -----------------------------------------------------------


class JsRow:
    """A row as Pyodide shows a JavaScript object: attributes only, no mapping protocol."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.__dict__.update(data)


class JsArray:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self._rows = rows

    def to_py(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self._rows]


class JsCursor:
    """Cloudflare's cursor as Python sees it: iterating gives ``JsRow``s, not dicts."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def toArray(self) -> JsArray:
        return JsArray([dict(row) for row in self._cursor.toArray()])

    def __iter__(self) -> Any:
        return iter([JsRow(dict(row)) for row in self._cursor.toArray()])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _JsSql:
    def __init__(self, sql: Any) -> None:
        self._sql = sql

    def exec(self, query: str, *params: Any) -> JsCursor:
        return JsCursor(self._sql.exec(query, *params))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sql, name)


class _JsStorage:
    def __init__(self, storage: Any) -> None:
        self._storage = storage
        self.sql = _JsSql(storage.sql)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


class _JsCtx:
    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.storage = _JsStorage(ctx.storage)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


class JsCursorAgent(LifecycleAgent):
    """An agent whose SQL cursors behave like Cloudflare's."""

    initial_state: ClassVar[Any] = {"count": 0}

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(_JsCtx(ctx), env)

    async def bump(self) -> Any:
        self.set_state({"count": self.state["count"] + 1})
        return self.state


async def test_an_agent_works_with_cursors_whose_rows_are_javascript_objects(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"JS": JsCursorAgent})
    name = unique_name("js")
    stub = h.env.JS.getByName(name)
    assert await stub.bump() == {"count": 1}
    await h.evict("JS", name)
    assert await stub.bump() == {"count": 2}  # state (and schema) read back after a wake
    await stub.start_orphan()
    h.reset("JS", name, "crash")
    seen = await stub.ping("after")  # the recovery scan read the orphan through toArray()
    assert "recovered:orphan" in seen


def test_sql_converts_rows_once_through_to_array_and_to_py() -> None:
    calls: list[tuple[str, tuple[Any, ...]]] = []

    class Cursor:
        def toArray(self) -> JsArray:
            return JsArray([{"a": 1, "b": "x"}])

        def __iter__(self) -> Any:
            raise AssertionError("rows must not be read by iterating the JS cursor")

    def exec_sql(query: str, *params: Any) -> Cursor:
        calls.append((query, params))
        return Cursor()

    fake = SimpleNamespace(
        ctx=SimpleNamespace(storage=SimpleNamespace(sql=SimpleNamespace(exec=exec_sql)))
    )
    rows = Agent.sql(fake, "SELECT a, b FROM t WHERE c = ?", 3)  # type: ignore[arg-type]
    assert rows == [{"a": 1, "b": "x"}]
    assert type(rows[0]) is dict
    assert calls == [("SELECT a, b FROM t WHERE c = ?", (3,))]


def test_name_tolerates_an_id_without_a_name_property() -> None:
    class JsId:
        """A JS ``DurableObjectId`` made by ``newUniqueId()``: ``name`` is undefined."""

        def __getattr__(self, attr: str) -> Any:
            raise AttributeError(attr)

        def __str__(self) -> str:
            return "ab" * 32

    fake = SimpleNamespace(ctx=SimpleNamespace(id=JsId()))
    assert Agent.name.fget(fake) == "ab" * 32  # type: ignore[attr-defined]


def test_state_rows_are_read_through_the_row_reading_sql() -> None:
    """``state`` loads via the core's ``sql`` (rows as dicts), never through a raw cursor."""
    from agents.core.state import STATE_ROW_ID, StateStore

    class Core:
        def sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
            assert params == (STATE_ROW_ID,)
            return [{"state": json.dumps({"ok": True})}]

        def exec(self, query: str, *params: Any) -> None:
            raise AssertionError(f"raw cursor used for {query!r}")

    holder = SimpleNamespace(name="holder", initial_state=None)
    store = StateStore(Core(), holder, broadcast=lambda state, source: None)  # type: ignore[arg-type]
    assert store.value == {"ok": True}
