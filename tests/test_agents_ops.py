"""The operation ledger: stable ids, ``started`` on disk before the call, replay, ambiguity.

Agents run on a real doemu runtime with real SQLite files. A kill mid-call is ``h.reset(...)``
while the body waits on a gate that is never opened: the ``started`` row is all that is left, as
after a SIGKILL. The external call is simulated by counting calls (``CALLS``) per object.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from agents import (
    Agent,
    AgentsError,
    Operation,
    OperationDataError,
    OperationError,
    OperationInFlightError,
    operation_id,
)
from agents import observability as obs
from doemu.clock import ManualClock
from doemu.errors import ObjectResetError
from doemu.persist import object_file
from doemu.testing.harness import WorkerHarness
from doemu.testing.plugin import HarnessFactory

START_MS = 1_700_000_000_000

#: How many times each object's simulated upstream was called, and with which keys.
CALLS: dict[str, list[str | None]] = {}
#: Bodies wait here once started; a gate never set is a call the test "kills" mid-flight.
STARTED: dict[str, asyncio.Event] = {}
GATES: dict[str, asyncio.Event] = {}
#: Run inside a body, before its "external call": what another connection sees on disk.
PROBES: dict[str, Callable[[], Any]] = {}


class Ledger(Agent):
    async def _upstream(self, op: Operation, fail: bool = False) -> dict[str, Any]:
        """The simulated external call: counted, optionally gated, optionally failing."""
        if self.name in PROBES:
            PROBES[self.name]()
        CALLS.setdefault(self.name, []).append(op.id if op.idempotent else None)
        if self.name in GATES:
            STARTED[self.name].set()
            await GATES[self.name].wait()
        if fail:
            raise RuntimeError("upstream said no")
        return {"receipt": f"r{len(CALLS[self.name])}"}

    async def charge(
        self, amount: int, turn: str, idempotent: bool = False, fail: bool = False
    ) -> dict[str, Any]:
        """The documented pattern: skip the call when replayed or ambiguous."""
        try:
            async with self.operation(
                "charge", {"amount": amount}, turn=turn, idempotent=idempotent
            ) as op:
                seen = {"status": op.status, "attempt": op.attempt, "id": op.id}
                if op.replayed or op.ambiguous:
                    return {**seen, "result": op.result, "ambiguity": op.ambiguity}
                op.complete(await self._upstream(op, fail))
        except RuntimeError as exc:
            return {**seen, "raised": str(exc)}
        return {**seen, "result": op.result, "ambiguity": op.ambiguity}

    async def verify(self, amount: int, turn: str, receipt: str) -> list[Any]:
        """After checking with the upstream, record what an ambiguous operation did."""
        async with self.operation("charge", {"amount": amount}, turn=turn) as op:
            assert op.ambiguous
            op.complete({"receipt": receipt})
        return [op.status, op.result]

    async def body_ends_without_complete(self, turn: str) -> str | None:
        async with self.operation("notify", None, turn=turn) as op:
            status = op.status
        return status

    async def complete_rules(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        op = self.operation("tool", {"q": "x"}, turn=1)
        try:
            op.complete(1)
        except OperationError as exc:
            out["before_entry"] = type(exc).__name__
        async with op:
            op.complete({"n": 1})
            op.complete({"n": 1})  # the same value again: a no-op
            for bad in ({"n": 2}, object()):
                try:
                    op.complete(bad)
                except OperationError as exc:
                    out.setdefault("errors", []).append(type(exc).__name__)
        try:
            async with op:
                pass
        except OperationError as exc:
            out["entered_twice"] = type(exc).__name__
        try:  # the result is recorded: a later error does not turn it into a failure
            async with self.operation("tool", {"q": "y"}, turn=1) as op2:
                op2.complete("done")
                raise ValueError("after the call")
        except ValueError:
            pass
        out["rows"] = {r.args["q"]: r.status for r in self.operations(kind="tool")}
        return out

    async def concurrent(self, turn: str) -> dict[str, Any]:
        """Enter the same operation while it is in flight in this activation."""
        first = asyncio.ensure_future(self.charge(1, turn))
        await STARTED[self.name].wait()
        out: dict[str, Any] = {"pending_while_in_flight": len(self.pending_operations())}
        try:
            async with self.operation("charge", {"amount": 1}, turn=turn):
                out["second"] = "ran"
        except OperationInFlightError as exc:
            out["second"] = type(exc).__name__
            out["is_agents_error"] = isinstance(exc, AgentsError)
        GATES.pop(self.name).set()
        out["first"] = await first
        out["again"] = (await self.charge(1, turn))["status"]
        return out

    async def run_op(self, turn: str, mode: str) -> dict[str, Any]:
        calls: list[str] = []

        async def body(op: Operation) -> Any:
            calls.append(op.id)
            if mode == "explicit":
                op.complete({"explicit": True})
                return "ignored"
            return {"returned": turn}

        def sync_body(op: Operation) -> str:
            calls.append(op.id)
            return "sync"

        fn = sync_body if mode == "sync" else body
        outcome = await self.run_operation("llm", {"prompt": "hi"}, fn, turn=turn)
        return {**dataclasses.asdict(outcome), "calls": len(calls)}

    async def run_charge(self, amount: int, turn: str) -> dict[str, Any]:
        """``charge`` through ``run_operation``: the same operation id."""
        outcome = await self.run_operation("charge", {"amount": amount}, self._upstream, turn=turn)
        return dataclasses.asdict(outcome)

    async def run_failing(self) -> dict[str, Any]:
        async def body(op: Operation) -> None:
            raise KeyError("missing")

        try:
            await self.run_operation("llm", None, body, turn="f")
        except KeyError:
            pass
        return self.operations(turn="f")[0].to_dict()

    async def ops(self, filters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.operations(**(filters or {}))]

    async def pending(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.pending_operations()]

    async def forget(self, kwargs: dict[str, Any] | None = None) -> int:
        return self.forget_operations(**(kwargs or {}))

    async def misuse(self) -> list[str]:
        errors = []
        for attempt in (
            lambda: self.operation(" "),
            lambda: self.operation("x", {"f": {1, 2}}),
            lambda: self.operations(status="done"),
        ):
            try:
                attempt()
            except OperationError as exc:
                errors.append(type(exc).__name__)
        return errors


@pytest.fixture
async def ledger(doemu_harness: HarnessFactory, unique_name: Callable[[str], str]) -> Any:
    h = await doemu_harness({"LEDGER": Ledger}, clock=ManualClock(START_MS))
    name = unique_name("ledger")
    yield h, h.env.LEDGER.getByName(name), name
    for table in (CALLS, STARTED, GATES, PROBES):
        table.pop(name, None)


def _gate(name: str) -> None:
    GATES[name], STARTED[name] = asyncio.Event(), asyncio.Event()


async def _kill_mid_call(h: WorkerHarness, stub: Any, name: str, **charge: Any) -> Any:
    """Start a charge whose upstream call never returns, then reset the object under it."""
    _gate(name)
    call = asyncio.ensure_future(stub.charge(*charge.values()))
    await asyncio.wait_for(STARTED[name].wait(), 5)
    h.reset("LEDGER", name, "killed mid-call")
    with pytest.raises(ObjectResetError):
        await call
    del GATES[name]
    return h.env.LEDGER.getByName(name)


def test_op_id_is_stable_and_canonical() -> None:
    op_id = operation_id("charge", {"amount": 5, "currency": "€"}, "req_1:call_1")
    assert op_id == operation_id("charge", {"currency": "€", "amount": 5}, "req_1:call_1")
    text = json.dumps(["charge", {"amount": 5, "currency": "€"}, "req_1:call_1"],
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # fmt: skip
    assert op_id == "op_" + hashlib.sha256(text.encode()).hexdigest()
    assert op_id != operation_id("charge", {"amount": 5, "currency": "€"}, "req_1:call_2")
    assert op_id != operation_id("refund", {"amount": 5, "currency": "€"}, "req_1:call_1")
    assert operation_id("x", [1], 3) == operation_id("x", [1], "3")
    assert operation_id("x", None) != operation_id("x", None, "")
    with pytest.raises(OperationDataError) as excinfo:
        operation_id("x", {"nan": float("nan")})
    assert isinstance(excinfo.value, ValueError)
    # Another interpreter, with another hash seed, computes the same id.
    code = "from agents import operation_id as f; print(f('charge', {'currency': '€', 'amount': 5}, 'req_1:call_1'))"  # noqa: E501
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert other.stdout.strip() == op_id


async def test_a_new_operation_runs_once_and_is_replayed_after_a_restart(ledger: Any) -> None:
    h, stub, name = ledger
    first = await stub.charge(5, "t1")
    assert first["status"] == "new"
    assert first["attempt"] == 1
    assert first["id"] == operation_id("charge", {"amount": 5}, "t1")
    assert first["result"] == {"receipt": "r1"}
    [row] = await stub.ops()
    assert row["status"] == "completed"
    assert row["args"] == {"amount": 5}
    assert row["result"] == {"receipt": "r1"}
    assert (row["started_at"], row["completed_at"]) == (START_MS, START_MS)

    await h.restart()
    stub = h.env.LEDGER.getByName(name)
    again = await stub.charge(5, "t1")
    assert again == {**first, "status": "replayed"}
    assert len(CALLS[name]) == 1  # the body never called again
    assert (await stub.charge(5, "t2"))["status"] == "new"  # another turn: another call


async def test_the_started_row_is_on_disk_before_the_body_runs(ledger: Any) -> None:
    h, stub, name = ledger
    seen: list[Any] = []

    def probe() -> None:
        host = h.runtime.host("LEDGER", name)
        with sqlite3.connect(object_file(host.kind.directory, host.hex_id)) as other:
            seen.extend(other.execute("SELECT status, attempts FROM cf_agents_operations"))

    PROBES[name] = probe
    await stub.charge(7, "t1")
    assert seen == [("started", 1)]


async def test_a_kill_mid_call_makes_the_operation_ambiguous(ledger: Any) -> None:
    h, stub, name = ledger
    stub = await _kill_mid_call(h, stub, name, amount=9, turn="t1")
    [pending] = await stub.pending()
    op_id = operation_id("charge", {"amount": 9}, "t1")
    assert (pending["id"], pending["status"], pending["attempts"]) == (op_id, "started", 1)

    again = await stub.charge(9, "t1")
    assert again["status"] == "ambiguous"
    assert again["ambiguity"] == (
        f"operation {op_id} (charge) may have executed; verify before retrying"
    )
    assert again["result"] is None
    assert len(CALLS[name]) == 1  # never re-run
    assert [r["status"] for r in await stub.ops()] == ["started"]  # left as it was
    assert (await stub.charge(9, "t1"))["status"] == "ambiguous"  # and stays so

    # Verified with the upstream: recording the result settles it; later entries replay it.
    assert await stub.verify(9, "t1", "checked") == ["ambiguous", {"receipt": "checked"}]
    again = await stub.charge(9, "t1")
    assert (again["status"], again["result"]) == ("replayed", {"receipt": "checked"})
    assert await stub.pending() == []
    assert len(CALLS[name]) == 1


async def test_an_idempotent_operation_is_resumed_with_its_key(ledger: Any) -> None:
    h, stub, name = ledger
    stub = await _kill_mid_call(h, stub, name, amount=3, turn="t1", idempotent=True)
    again = await stub.charge(3, "t1", True)
    op_id = operation_id("charge", {"amount": 3}, "t1")
    assert (again["status"], again["attempt"]) == ("resumed", 2)
    assert CALLS[name] == [op_id, op_id]  # both calls carried the same idempotency key
    [row] = await stub.ops()
    assert (row["status"], row["attempts"], row["result"]) == ("completed", 2, {"receipt": "r2"})
    assert await stub.pending() == []


async def test_a_failed_operation_may_be_retried(ledger: Any) -> None:
    _h, stub, name = ledger
    failed = await stub.charge(4, "t1", False, True)
    assert (failed["status"], failed["raised"]) == ("new", "upstream said no")
    [row] = await stub.ops()
    assert (row["status"], row["error"]) == ("failed", "RuntimeError: upstream said no")
    assert await stub.pending() == []  # failed is settled, not pending

    retried = await stub.charge(4, "t1")
    assert (retried["status"], retried["attempt"]) == ("retry", 2)
    [row] = await stub.ops()
    assert (row["status"], row["error"], row["attempts"]) == ("completed", None, 2)
    assert len(CALLS[name]) == 2


async def test_the_same_operation_in_flight_twice_raises(ledger: Any) -> None:
    _h, stub, name = ledger
    _gate(name)
    out = await stub.concurrent("t1")
    assert out["second"] == "OperationInFlightError"
    assert out["is_agents_error"] is True
    assert out["pending_while_in_flight"] == 0  # in flight here is not pending
    assert out["first"]["status"] == "new"
    assert out["again"] == "replayed"
    assert len(CALLS[name]) == 1


async def test_run_operation_outcomes(ledger: Any) -> None:
    _h, stub, _name = ledger
    op_id = operation_id("llm", {"prompt": "hi"}, "a")
    first = await stub.run_op("a", "returned")
    assert first == {
        "op_id": op_id,
        "status": "new",
        "result": {"returned": "a"},
        "ambiguity": None,
        "calls": 1,
    }
    assert await stub.run_op("a", "returned") == {**first, "status": "replayed", "calls": 0}
    assert (await stub.run_op("b", "explicit"))["result"] == {"explicit": True}
    assert (await stub.run_op("c", "sync"))["result"] == "sync"
    failed = await stub.run_failing()
    assert (failed["status"], failed["error"]) == ("failed", "KeyError: 'missing'")


async def test_run_operation_does_not_call_an_ambiguous_operation(ledger: Any) -> None:
    h, stub, name = ledger
    stub = await _kill_mid_call(h, stub, name, amount=1, turn="x")
    outcome = await stub.run_charge(1, "x")
    op_id = operation_id("charge", {"amount": 1}, "x")
    assert outcome == {
        "op_id": op_id,
        "status": "ambiguous",
        "result": None,
        "ambiguity": f"operation {op_id} (charge) may have executed; verify before retrying",
    }
    assert len(CALLS[name]) == 1
    assert (await stub.run_charge(1, "y"))["result"] == {"receipt": "r2"}
    assert (await stub.run_charge(1, "y"))["status"] == "replayed"
    assert len(CALLS[name]) == 2


async def test_complete_rules_and_misuse(ledger: Any) -> None:
    _h, stub, _name = ledger
    out = await stub.complete_rules()
    assert out["before_entry"] == "OperationError"
    assert out["errors"] == ["OperationError", "OperationDataError"]
    assert out["entered_twice"] == "OperationError"
    assert out["rows"] == {"x": "completed", "y": "completed"}
    assert await stub.misuse() == ["OperationError", "OperationDataError", "OperationError"]


async def test_a_body_that_never_completes_records_none(ledger: Any) -> None:
    _h, stub, _name = ledger
    assert await stub.body_ends_without_complete("n") == "new"
    [row] = await stub.ops({"kind": "notify"})
    assert (row["status"], row["result"]) == ("completed", None)
    assert await stub.body_ends_without_complete("n") == "replayed"


async def test_listing_filters_and_forgetting(ledger: Any) -> None:
    h, stub, name = ledger
    await stub.charge(1, "t1")
    await h.advance(1_000)
    await stub.charge(2, "t1", False, True)
    await h.advance(1_000)
    await stub.charge(3, "t2")
    stub = await _kill_mid_call(h, stub, name, amount=4, turn="t2")  # a started row

    rows = await stub.ops()
    assert [r["args"]["amount"] for r in rows] == [4, 3, 2, 1]  # newest first
    assert [r["args"]["amount"] for r in await stub.ops({"turn": "t1"})] == [2, 1]
    assert [r["args"]["amount"] for r in await stub.ops({"status": "failed"})] == [2]
    assert [r["args"]["amount"] for r in await stub.ops({"turn": "t2", "limit": 1})] == [4]
    assert await stub.ops({"kind": "other"}) == []

    assert await stub.forget({"before_ms": START_MS + 1_000}) == 1  # only the first settled
    assert await stub.forget() == 2  # the other settled ones; the started row stays
    assert [r["status"] for r in await stub.ops()] == ["started"]
    assert await stub.forget({"turn": "t2"}) == 1  # a turn's rows go whatever their status
    assert await stub.ops() == []


async def test_operation_events(ledger: Any) -> None:
    h, stub, name = ledger
    events: list[dict[str, Any]] = []
    unsubscribe = obs.subscribe("operation", events.append)
    try:
        await stub.charge(1, "t1")
        await stub.charge(2, "t1", False, True)
        stub = await _kill_mid_call(h, stub, name, amount=3, turn="t1")
        await stub.charge(3, "t1")
    finally:
        unsubscribe()
    mine = [(e["type"], e["payload"]["kind"]) for e in events if e["name"] == name]
    assert mine == [
        ("operation:started", "charge"),
        ("operation:completed", "charge"),
        ("operation:started", "charge"),
        ("operation:failed", "charge"),
        ("operation:started", "charge"),
        ("operation:ambiguous", "charge"),
    ]
    ambiguous = events[-1]["payload"]
    assert ambiguous["opId"] == operation_id("charge", {"amount": 3}, "t1")
    assert ambiguous["message"].endswith("may have executed; verify before retrying")
    assert [e["payload"]["attempt"] for e in events if e["name"] == name][:2] == [1, 1]


async def test_pending_operations_are_oldest_first_across_a_restart(ledger: Any) -> None:
    h, stub, name = ledger
    stub = await _kill_mid_call(h, stub, name, amount=1, turn="a")
    await h.advance(5)
    stub = await _kill_mid_call(h, stub, name, amount=2, turn="b")
    await h.restart()
    stub = h.env.LEDGER.getByName(name)
    pending = await stub.pending()
    assert [(p["turn"], p["started_at"]) for p in pending] == [("a", START_MS), ("b", START_MS + 5)]
