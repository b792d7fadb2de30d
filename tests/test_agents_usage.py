"""Usage accounting: durable tokens and cost per turn, per operation and per agent.

Agents run on a real doemu runtime with real SQLite; durability is shown by a clean restart and
by a reset (a crash) after the recording turn ended.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from agents import Agent, AgentsError, UsageError
from agents import observability as obs
from agents.usage import ModelPrices, price_of
from doemu.clock import ManualClock
from doemu.testing.plugin import HarnessFactory

START_MS = 1_700_000_000_000
V1_USAGE_TABLE = """CREATE TABLE cf_agents_usage (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, turn TEXT, op_id TEXT,
  kind TEXT NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL, input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL, cost REAL NOT NULL, priced INTEGER NOT NULL
)"""


class Metered(Agent):
    model_prices: ClassVar[ModelPrices] = {"big": (3.0, 15.0), "small": (0.25, 1.25)}

    async def record(self, entry: dict[str, Any]) -> dict[str, Any]:
        return self.record_usage(**entry).to_dict()

    async def totals(self, turn: str | None = None, op_id: str | None = None) -> dict[str, Any]:
        return self.usage(turn, op_id).to_dict()

    async def entries(
        self, turn: str | None = None, limit: int = 1000, op_id: str | None = None
    ) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.usage_entries(turn, limit, op_id)]

    async def update(self, entry_id: int, counts: dict[str, Any]) -> dict[str, Any]:
        return self.update_usage(entry_id, **counts).to_dict()

    async def refused_update(self, entry_id: int, counts: dict[str, Any]) -> str:
        try:
            self.update_usage(entry_id, **counts)
        except UsageError as exc:
            return str(exc)
        return ""

    async def downgrade_to_version_1(self) -> None:
        """The usage table as version 1 of the schema left it, with one old row."""
        self.sql("DROP TABLE cf_agents_usage")
        self.sql(V1_USAGE_TABLE)
        self.sql(
            "INSERT INTO cf_agents_usage (at, kind, provider, model, input_tokens, "
            "output_tokens, cost, priced) VALUES (1, 'llm', 'acme', 'big', 7, 3, 0.0, 0)"
        )
        self.sql("UPDATE cf_agents_schema SET version = 1")

    async def refused(self, entries: list[dict[str, Any]]) -> list[str]:
        out = []
        for entry in entries:
            try:
                self.record_usage(**entry)
            except UsageError as exc:
                assert isinstance(exc, AgentsError) and isinstance(exc, ValueError)
                out.append(str(exc))
        return out


def _call(model: str, tokens_in: int, tokens_out: int, **extra: Any) -> dict[str, Any]:
    return {
        "provider": "acme",
        "model": model,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        **extra,
    }


def counts(tokens_in: int, tokens_out: int, *, partial: bool) -> dict[str, Any]:
    return {"input_tokens": tokens_in, "output_tokens": tokens_out, "partial": partial}


@pytest.fixture
async def metered(doemu_harness: HarnessFactory, unique_name: Callable[[str], str]) -> Any:
    h = await doemu_harness({"METERED": Metered}, clock=ManualClock(START_MS))
    name = unique_name("metered")
    return h, h.env.METERED.getByName(name), name


def test_price_of() -> None:
    prices = {"big": (3.0, 15.0)}
    assert price_of(prices, "big", 1_000_000, 2_000_000) == 33.0
    assert price_of(prices, "other", 10, 10) is None


async def test_an_entry_is_priced_from_the_class_prices(metered: Any) -> None:
    _h, stub, _name = metered
    entry = await stub.record(_call("big", 1_000, 500, turn="t1", op_id="op_1"))
    assert entry == {
        "id": 1,
        "at": START_MS,
        "turn": "t1",
        "op_id": "op_1",
        "kind": "llm",
        "provider": "acme",
        "model": "big",
        "input_tokens": 1_000,
        "output_tokens": 500,
        "cost": pytest.approx((1_000 * 3.0 + 500 * 15.0) / 1e6),
        "priced": True,
        "partial": False,
        "total_tokens": 1_500,
    }
    unpriced = await stub.record(_call("mystery", 10, 20, kind="embedding"))
    assert (unpriced["cost"], unpriced["priced"], unpriced["kind"]) == (0.0, False, "embedding")
    given = await stub.record(_call("mystery", 1, 2, cost=0.5))
    assert (given["cost"], given["priced"]) == (0.5, True)


async def test_sums_per_turn_per_operation_and_per_agent(metered: Any) -> None:
    _h, stub, _name = metered
    await stub.record(_call("big", 1_000_000, 100_000, turn="t1", op_id="op_a"))  # 3 + 1.5
    await stub.record(_call("small", 2_000_000, 0, turn="t1", op_id="op_b"))  # 0.5
    await stub.record(_call("small", 0, 1_000_000, turn="t2", op_id="op_b"))  # 1.25
    await stub.record(_call("unknown", 7, 3, turn="t2"))  # unpriced

    t1 = await stub.totals("t1")
    assert (t1["input_tokens"], t1["output_tokens"], t1["total_tokens"]) == (
        3_000_000,
        100_000,
        3_100_000,
    )
    assert t1["cost"] == pytest.approx(5.0)
    assert (t1["calls"], t1["unpriced_calls"]) == (2, 0)
    assert t1["by_model"]["big"] == {
        "input_tokens": 1_000_000,
        "output_tokens": 100_000,
        "total_tokens": 1_100_000,
        "cost": pytest.approx(4.5),
        "calls": 1,
        "unpriced_calls": 0,
        "partial_calls": 0,
    }
    op_b = await stub.totals(None, "op_b")
    assert (op_b["calls"], op_b["cost"]) == (2, pytest.approx(1.75))
    assert list(op_b["by_model"]) == ["small"]
    both = await stub.totals("t2", "op_b")
    assert (both["calls"], both["output_tokens"]) == (1, 1_000_000)

    everything = await stub.totals()
    assert (everything["calls"], everything["unpriced_calls"]) == (4, 1)
    assert everything["cost"] == pytest.approx(6.25)
    assert everything["total_tokens"] == 3_000_000 + 100_000 + 1_000_000 + 10
    assert sorted(everything["by_model"]) == ["big", "small", "unknown"]
    empty = await stub.totals("nobody")
    assert (empty["calls"], empty["cost"], empty["by_model"]) == (0, 0.0, {})


async def test_entries_are_listed_newest_first(metered: Any) -> None:
    h, stub, _name = metered
    for n in range(3):
        await stub.record(_call("small", n, n, turn="t1" if n < 2 else "t2"))
        await h.advance(10)
    entries = await stub.entries()
    assert [e["input_tokens"] for e in entries] == [2, 1, 0]
    assert [e["at"] for e in entries] == [START_MS + 20, START_MS + 10, START_MS]
    assert [e["input_tokens"] for e in await stub.entries("t1")] == [1, 0]
    assert [e["input_tokens"] for e in await stub.entries(None, 1)] == [2]


async def test_bad_numbers_are_refused(metered: Any) -> None:
    _h, stub, _name = metered
    errors = await stub.refused(
        [
            _call("big", -1, 0),
            _call("big", 1.5, 0),
            _call("big", 0, True),
            _call("big", 0, "3"),
            _call("big", 1, 1, cost=-0.1),
            _call("big", 1, 1, cost=math.nan),
            _call("", 1, 1),
            {**_call("big", 1, 1), "provider": " "},
        ]
    )
    assert errors == [
        "input_tokens must not be negative, got -1",
        "input_tokens must be an integer, got 1.5",
        "output_tokens must be an integer, got True",
        "output_tokens must be an integer, got '3'",
        "cost must not be negative, got -0.1",
        "cost must be a finite number, got nan",
        "model must be a non-blank string, got ''",
        "provider must be a non-blank string, got ' '",
    ]
    assert (await stub.totals())["calls"] == 0  # nothing was written


async def test_usage_survives_a_restart_and_a_crash(metered: Any) -> None:
    h, stub, name = metered
    await stub.record(_call("big", 100, 10, turn="t1"))
    await h.restart()
    stub = h.env.METERED.getByName(name)
    await stub.record(_call("big", 200, 20, turn="t1"))
    h.reset("METERED", name, "crash after the turn ended")
    totals = await stub.totals("t1")
    assert (totals["calls"], totals["input_tokens"], totals["output_tokens"]) == (2, 300, 30)
    assert totals["cost"] == pytest.approx((300 * 3.0 + 30 * 15.0) / 1e6)


async def test_usage_recorded_event(metered: Any) -> None:
    _h, stub, name = metered
    events: list[dict[str, Any]] = []
    unsubscribe = obs.subscribe("usage", events.append)
    try:
        await stub.record(_call("small", 4_000, 1_000, turn="t9", op_id="op_x"))
    finally:
        unsubscribe()
    [event] = [e for e in events if e["name"] == name]
    assert event["type"] == "usage:recorded"
    assert event["agent"] == "Metered"
    assert event["payload"] == {
        "provider": "acme",
        "model": "small",
        "kind": "llm",
        "turn": "t9",
        "opId": "op_x",
        "inputTokens": 4_000,
        "outputTokens": 1_000,
        "cost": pytest.approx((4_000 * 0.25 + 1_000 * 1.25) / 1e6),
        "priced": True,
        "partial": False,
    }


async def test_a_partial_entry_is_completed_in_place_and_totals_say_lower_bound(
    metered: Any,
) -> None:
    """A request cut before its usage was reported: input known at its start, output counted as
    it streamed. Its entry is partial until the provider's report replaces it (one request, one
    entry); while any entry is partial, the totals say they are lower bounds."""
    _h, stub, _name = metered
    opened = await stub.record(_call("big", 1_000, 0, turn="t1", op_id="op_cut", partial=True))
    assert (opened["partial"], opened["output_tokens"]) == (True, 0)
    counted = await stub.update(opened["id"], counts(1_000, 40, partial=True))
    assert counted["cost"] == pytest.approx((1_000 * 3.0 + 40 * 15.0) / 1e6)
    await stub.record(_call("big", 1_200, 60, turn="t1", op_id="op_next"))
    totals = await stub.totals("t1")
    assert (totals["calls"], totals["partial_calls"]) == (2, 1)
    assert (totals["input_tokens"], totals["output_tokens"]) == (2_200, 100)
    assert totals["tokens_lower_bound"] is True and totals["cost_lower_bound"] is True
    assert totals["by_model"]["big"]["partial_calls"] == 1
    (entry,) = await stub.entries(None, 10, "op_cut")
    assert entry["id"] == opened["id"] and entry["partial"] is True

    final = await stub.update(opened["id"], counts(1_000, 45, partial=False))
    assert final["partial"] is False and final["at"] == opened["at"]
    totals = await stub.totals("t1")
    assert (totals["calls"], totals["partial_calls"], totals["output_tokens"]) == (2, 0, 105)
    assert totals["tokens_lower_bound"] is False and totals["cost_lower_bound"] is False
    unpriced = await stub.record(_call("mystery", 1, 1, turn="t3"))
    assert unpriced["priced"] is False
    t3 = await stub.totals("t3")
    assert t3["tokens_lower_bound"] is False and t3["cost_lower_bound"] is True


async def test_an_update_names_what_is_wrong(metered: Any) -> None:
    _h, stub, _name = metered
    assert await stub.refused_update(99, counts(1, 1, partial=False)) == "no usage entry 99"
    entry = await stub.record(_call("big", 1, 1))
    assert await stub.refused_update(entry["id"], counts(-1, 1, partial=False)) == (
        "input_tokens must not be negative, got -1"
    )


async def test_a_version_1_database_gains_the_partial_column(
    doemu_harness: HarnessFactory, unique_name: Callable[[str], str]
) -> None:
    """A database written before partial entries existed: the migration adds the column and
    its old rows read as complete."""
    h = await doemu_harness({"METERED": Metered}, clock=ManualClock(START_MS))
    name = unique_name("old-schema")
    stub = h.env.METERED.getByName(name)
    await stub.downgrade_to_version_1()
    h.reset("METERED", name, "the new code is deployed")
    totals = await stub.totals()
    assert (totals["calls"], totals["input_tokens"], totals["partial_calls"]) == (1, 7, 0)
    (entry,) = await stub.entries()
    assert entry["partial"] is False
