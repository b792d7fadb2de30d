"""The operation ledger: costly or side-effecting calls that never silently run twice.

An LLM call, a tool execution, a paid API or a webhook may be cut short by an eviction, and the
next activation cannot know whether the call happened. So each such call is an *operation* with
a stable id — ``op_`` + sha256 of (kind, canonical args, turn): the same call at the same turn
position gets the same id in every process — and a ``cf_agents_operations`` row: ``started`` is
written and made durable (``storage.sync()``) *before* the call, ``completed`` (with the JSON
result) or ``failed`` (with the error) after it. Entering an operation tells the body what is
safe (:attr:`Operation.status`):

* ``new`` — never seen: call. ``retry`` — failed before: calling again is allowed.
* ``replayed`` — completed before: :attr:`Operation.result` is the stored result; do not call.
* ``resumed`` — started by an earlier activation, never settled, ``idempotent=True`` (the
  upstream honours idempotency keys): call again with :attr:`Operation.id` as the key.
* ``ambiguous`` — the same, not idempotent: the call may have executed, so the body must not
  re-run it; :attr:`Operation.ambiguity` is the message for the model. Once the agent has
  verified what happened, ``complete(result)`` records it.

A row this activation is still running is in flight, not pending: entering it again meanwhile
raises :class:`OperationInFlightError`. A cancelled body (a reset, a timeout) leaves its row
``started``: a cancelled call may have executed, so it is judged ambiguous next time, not failed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Literal

from .core.host import Core
from .core.sql import delete_in
from .errors import AgentsError

__all__ = [
    "SCHEMA",
    "EntryStatus",
    "Operation",
    "OperationDataError",
    "OperationError",
    "OperationFn",
    "OperationInFlightError",
    "OperationLedger",
    "OperationOutcome",
    "OperationRecord",
    "canonical_json",
    "operation_id",
]

_log = logging.getLogger("agents.ops")

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS cf_agents_operations (
  id TEXT PRIMARY KEY NOT NULL,
  kind TEXT NOT NULL,
  args TEXT,
  turn TEXT,
  status TEXT NOT NULL,
  result TEXT,
  error TEXT,
  idempotent INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0,
  started_at INTEGER,
  completed_at INTEGER
)""",
    "CREATE INDEX IF NOT EXISTS idx_operations_status ON cf_agents_operations(status)",
    "CREATE INDEX IF NOT EXISTS idx_operations_turn ON cf_agents_operations(turn)",
)

_COLUMNS = "id, kind, args, turn, status, result, error, idempotent, attempts, started_at, "
_COLUMNS += "completed_at"
_START = (
    "INSERT INTO cf_agents_operations (id, kind, args, turn, status, idempotent, attempts, "
    "started_at) VALUES (?, ?, ?, ?, 'started', ?, 1, ?) ON CONFLICT(id) DO UPDATE SET "
    "status = 'started', result = NULL, error = NULL, completed_at = NULL, "
    "idempotent = excluded.idempotent, attempts = attempts + 1, started_at = excluded.started_at"
)
_SETTLE = "UPDATE cf_agents_operations SET status = ?, result = ?, error = ?, completed_at = ? "
_SETTLE += "WHERE id = ?"

#: How entering an operation found it (see the module docstring).
EntryStatus = Literal["new", "replayed", "resumed", "ambiguous", "retry"]
_RECORD_STATUSES = ("started", "completed", "failed")


class OperationError(AgentsError):
    """An operation used wrongly: a blank kind, ``complete`` with a result other than the one
    recorded or outside its ``async with``, an unknown status filter."""


class OperationInFlightError(OperationError):
    """The operation was entered again while this activation is still running it."""


class OperationDataError(OperationError, ValueError):
    """An operation's args or result is not JSON (the ledger hashes and stores JSON only)."""


def canonical_json(value: Any) -> str:
    """One spelling per JSON value (sorted keys, no spaces, UTF-8 kept, no NaN), so that
    ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` hash and compare the same."""
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise OperationDataError(f"not JSON-serialisable: {exc}") from exc


def _turn_text(turn: str | int | None) -> str | None:
    return None if turn is None else str(turn)


def operation_id(kind: str, args: Any = None, turn: str | int | None = None) -> str:
    """``op_`` + the sha256 hex digest of the canonical JSON of ``[kind, args, turn]`` (the
    turn as text): stable across processes, so a re-run after an eviction finds its own row."""
    text = canonical_json([kind, args, _turn_text(turn)])
    return "op_" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class OperationRecord:
    """One ``cf_agents_operations`` row, decoded (times in ms from the agent's clock)."""

    id: str
    kind: str
    args: Any
    turn: str | None
    status: Literal["started", "completed", "failed"]
    result: Any
    error: str | None
    idempotent: bool
    attempts: int
    started_at: int | None
    completed_at: int | None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON responses and RPC answers."""
        return dataclasses.asdict(self)


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _record(row: Mapping[str, Any]) -> OperationRecord:
    decoded = {"args": _decode(row["args"]), "result": _decode(row["result"])}
    return OperationRecord(**{**row, **decoded, "idempotent": bool(row["idempotent"])})


@dataclass(frozen=True)
class OperationOutcome:
    """What ``run_operation`` answers: how the operation was entered and its result (``None``,
    with the ``ambiguity`` message, when the body was not run because it may have been)."""

    op_id: str
    status: EntryStatus
    result: Any
    ambiguity: str | None


#: The body ``run_operation`` calls with the entered operation (may be ``async``).
OperationFn = Callable[["Operation"], Awaitable[Any] | Any]


class OperationLedger:
    """The operation ledger, a feature the Agent owns: ``cf_agents_operations`` through the
    core, and the ids this activation has in flight (a ``started`` row not in this set was left
    by an earlier one). The Agent's ``operation``, ``run_operation``, ``operations``,
    ``pending_operations`` and ``forget_operations`` delegate here."""

    __slots__ = ("core", "in_flight")
    #: The tables this feature owns (the Agent ensures them at every activation).
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(self, core: Core) -> None:
        self.core = core
        self.in_flight: set[str] = set()

    def read(self, op_id: str) -> dict[str, Any] | None:
        rows = self.core.sql(f"SELECT {_COLUMNS} FROM cf_agents_operations WHERE id = ?", op_id)
        return rows[0] if rows else None

    def operation(
        self,
        kind: str,
        args: Any = None,
        *,
        turn: str | int | None = None,
        idempotent: bool = False,
    ) -> Operation:
        """A costly call, ``async with self.operation(kind, args, turn=...) as op:`` (nothing
        is written until it is entered; see :mod:`agents.ops` for what the body may do)."""
        return Operation(self, kind, args, turn, idempotent)

    async def run(
        self,
        kind: str,
        args: Any,
        fn: OperationFn,
        *,
        turn: str | int | None = None,
        idempotent: bool = False,
    ) -> OperationOutcome:
        """Await ``fn(op)`` unless replayed or ambiguous; what ``fn`` returns is the result
        unless it called ``op.complete`` itself. Its errors propagate (``failed``)."""
        async with self.operation(kind, args, turn=turn, idempotent=idempotent) as op:
            if not (op.replayed or op.ambiguous):
                value = fn(op)
                if inspect.isawaitable(value):
                    value = await value
                if not op.completed:
                    op.complete(value)
        assert op.status is not None
        return OperationOutcome(op.id, op.status, op.result, op.ambiguity)

    def records(
        self,
        status: str | None = None,
        kind: str | None = None,
        turn: str | None = None,
        limit: int = 100,
    ) -> list[OperationRecord]:
        """Ledger rows matching every filter given, newest started first."""
        if status is not None and status not in _RECORD_STATUSES:
            raise OperationError(f"unknown operation status {status!r}; one of {_RECORD_STATUSES}")
        where, params = ["1"], []
        for column, value in (("status", status), ("kind", kind), ("turn", _turn_text(turn))):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        rows = self.core.sql(
            f"SELECT {_COLUMNS} FROM cf_agents_operations WHERE {' AND '.join(where)} "
            "ORDER BY started_at DESC, rowid DESC LIMIT ?",
            *params,
            max(int(limit), 0),
        )
        return [_record(row) for row in rows]

    def pending(self) -> list[OperationRecord]:
        """Started, never settled and not running now — left by an earlier activation (or
        cancelled): what recovery must judge. Oldest first; rows in flight are not pending."""
        ledger = self
        rows = ledger.core.sql(
            f"SELECT {_COLUMNS} FROM cf_agents_operations WHERE status = 'started' "
            "ORDER BY started_at ASC, rowid ASC"
        )
        return [_record(row) for row in rows if row["id"] not in ledger.in_flight]

    def forget(self, *, before_ms: int | None = None, turn: str | None = None) -> int:
        """Delete settled rows (``completed``/``failed``), or every row of ``turn`` when given;
        with ``before_ms``, only those settled (or started) before it. Rows in flight stay.
        Returns how many rows were deleted."""
        ledger = self
        where = ["status IN ('completed', 'failed')" if turn is None else "turn = ?"]
        params: list[Any] = [] if turn is None else [_turn_text(turn)]
        if before_ms is not None:
            where.append("COALESCE(completed_at, started_at) < ?")
            params.append(int(before_ms))
        query = f"SELECT id FROM cf_agents_operations WHERE {' AND '.join(where)}"
        ids = [r["id"] for r in ledger.core.sql(query, *params) if r["id"] not in ledger.in_flight]
        delete_in(ledger.core.ctx.storage.sql, "cf_agents_operations", "id", ids)
        return len(ids)


class Operation:
    """One costly call, entered once with ``async with`` (see the module docstring).

    ``status``, ``attempt``, ``result`` and ``ambiguity`` are set on entry. On exit a call this
    entry made is settled: ``completed`` (result ``None`` unless :meth:`complete` recorded one),
    ``failed`` if the body raised (the exception propagates), left ``started`` if it was
    cancelled. A replayed or ambiguous operation's row is left as it was.
    """

    def __init__(
        self,
        ledger: OperationLedger,
        kind: str,
        args: Any,
        turn: str | int | None,
        idempotent: bool,
    ) -> None:
        if not isinstance(kind, str) or not kind.strip():
            raise OperationError(f"an operation needs a non-blank kind, got {kind!r}")
        self.id = operation_id(kind, args, turn)  # raises OperationDataError for non-JSON args
        self.kind, self.args, self.turn, self.idempotent = kind, args, _turn_text(turn), idempotent
        self.status: EntryStatus | None = None
        self.attempt = 0
        self.result: Any = None
        self.ambiguity: str | None = None
        self._ledger = ledger
        self._phase: Literal["idle", "open", "running", "closed"] = "idle"
        self._result_json: str | None = None  # the recorded result (before, or by this entry)
        self._deferred = False

    @property
    def replayed(self) -> bool:
        """Completed before: :attr:`result` is the answer; the body must not call again."""
        return self.status == "replayed"

    @property
    def ambiguous(self) -> bool:
        """Started before and never settled, not idempotent: the body must not re-run it."""
        return self.status == "ambiguous"

    @property
    def completed(self) -> bool:
        """Whether a result is recorded (before, or by :meth:`complete`)."""
        return self._result_json is not None

    def defer(self) -> None:
        """The call goes on elsewhere (a sub-agent waiting for its client): leave the row
        ``started`` on exit, for a later activation to enter again and settle."""
        self._deferred = True

    def complete(self, result: Any = None) -> None:
        """Record the JSON ``result`` now (a second call with the same value is a no-op).

        Raises :class:`OperationDataError` if it is not JSON, :class:`OperationError` if another
        result is recorded or the operation is not entered."""
        text = canonical_json(result)
        if self._result_json is not None:
            if text != self._result_json:
                raise OperationError(f"operation {self.id} already completed with another result")
            return
        if self._phase not in ("open", "running"):
            raise OperationError(f"operation {self.id} is not entered: complete() it inside it")
        self._ledger.core.exec(_SETTLE, "completed", text, None, self._now(), self.id)
        self._result_json, self.result = text, json.loads(text)
        self._emit("completed")

    async def __aenter__(self) -> Operation:
        ledger = self._ledger
        if self._phase != "idle":
            raise OperationError(f"operation {self.id} was entered already (make a new one)")
        if self.id in ledger.in_flight:
            raise OperationInFlightError(
                f"operation {self.id} ({self.kind}) is already running in this activation"
            )
        self._phase = "open"
        row = ledger.read(self.id)
        self.attempt = 0 if row is None else int(row["attempts"])
        if row is not None and row["status"] == "completed":
            self.status, self._result_json = "replayed", row["result"] or "null"
            self.result = json.loads(self._result_json)
        elif row is not None and row["status"] == "started" and not self._resumable(row):
            self.status = "ambiguous"
            self.ambiguity = (
                f"operation {self.id} ({self.kind}) may have executed; verify before retrying"
            )
            self._emit("ambiguous", message=self.ambiguity)
        else:
            self.status = (
                "new" if row is None else "retry" if row["status"] == "failed" else "resumed"
            )
            await self._start()
        return self

    def _resumable(self, row: Mapping[str, Any]) -> bool:
        """A key collapses the duplicate only if the earlier call sent it too."""
        return self.idempotent and bool(row["idempotent"])

    async def _start(self) -> None:
        """Write ``started`` and make it durable before the body can make its call."""
        ledger, core = self._ledger, self._ledger.core
        ledger.in_flight.add(self.id)  # before any await: a concurrent entry now raises
        self._phase = "running"
        self.attempt += 1
        args = canonical_json(self.args)
        core.exec(_START, self.id, self.kind, args, self.turn, int(self.idempotent), self._now())
        sync = getattr(core.ctx.storage, "sync", None)
        if sync is not None:
            try:
                await sync()
            except BaseException as exc:  # the body never ran: the call surely did not happen
                self._close(exc)
                raise
        self._emit("started", status=self.status)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._phase == "running":
            self._close(exc)
        self._phase = "closed"

    def _close(self, exc: BaseException | None) -> None:
        """Settle the call this entry made; a failure to mark ``failed`` never masks ``exc``."""
        try:
            if self.completed or self._deferred:
                pass  # recorded already (an error after it changes nothing), or still going on
            elif exc is None:
                self.complete(None)
            elif isinstance(exc, Exception):
                error = f"{type(exc).__name__}: {exc}"
                try:
                    self._ledger.core.exec(_SETTLE, "failed", None, error, self._now(), self.id)
                except Exception:  # storage gone (a reset): the row stays started
                    _log.debug("operation %s: could not record its failure", self.id, exc_info=True)
                else:
                    self._emit("failed", error=error)
        finally:
            self._ledger.in_flight.discard(self.id)
            self._phase = "closed"

    def _now(self) -> int:
        return int(self._ledger.core.now())

    def _emit(self, event: str, **extra: Any) -> None:
        identity = {"opId": self.id, "kind": self.kind, "turn": self.turn, "attempt": self.attempt}
        self._ledger.core.emit(f"operation:{event}", {**identity, **extra})

    def __repr__(self) -> str:
        return f"<Operation {self.id} {self.kind!r} turn={self.turn!r} status={self.status}>"
