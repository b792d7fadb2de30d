"""Usage accounting: durable token counts and cost per turn, per operation and per agent.

Recovery spends money: a resumed turn calls the model again, a retried tool may bill again. To
judge a recovery budget in money rather than in attempts, every model call records what it used
(``record_usage``) in ``cf_agents_usage``, in the same turn's transaction as the rest of the
agent's writes, so the totals survive evictions exactly as the work they paid for does.

A cost is either given by the caller (the provider reported it) or computed from the class's
``model_prices`` (USD per million input / output tokens). A model without a price is recorded
with cost 0.0 and ``priced=False``: its tokens count, and :attr:`UsageTotals.unpriced_calls`
says the money total is a lower bound.

A request cut off before the provider reported its usage was still billed. So an entry can be
*partial* (``partial=True``): recorded the moment something is known — the input tokens a
provider reports as the request starts (Anthropic's ``message_start``), the output counted as it
streams — and updated in place (the Agent's ``update_usage``, :meth:`UsageLedger.update`) as
more is known, until the provider's own report replaces it. A partial entry's tokens are a lower
bound of what was billed, and :attr:`UsageTotals.partial_calls` says so for every total that
includes one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from .core.host import Core
from .errors import AgentsError

__all__ = [
    "SCHEMA",
    "ModelPrices",
    "UsageEntry",
    "UsageError",
    "UsageLedger",
    "UsageTotals",
    "price_of",
]

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS cf_agents_usage (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  turn TEXT,
  op_id TEXT,
  kind TEXT NOT NULL,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  cost REAL NOT NULL,
  priced INTEGER NOT NULL,
  partial INTEGER NOT NULL DEFAULT 0
)""",
    "CREATE INDEX IF NOT EXISTS idx_usage_turn ON cf_agents_usage(turn)",
    "CREATE INDEX IF NOT EXISTS idx_usage_op ON cf_agents_usage(op_id)",
)

#: model → (USD per million input tokens, USD per million output tokens).
ModelPrices = Mapping[str, tuple[float, float]]


class UsageError(AgentsError, ValueError):
    """``record_usage`` got numbers that cannot be usage: negative or non-integer token
    counts, a negative or non-finite cost, a blank provider or model."""


def price_of(
    prices: ModelPrices, model: str, input_tokens: int, output_tokens: int
) -> float | None:
    """The USD cost of a call at ``prices``, or None when ``model`` has no price."""
    price = prices.get(model)
    if price is None:
        return None
    per_input, per_output = price
    return (input_tokens * per_input + output_tokens * per_output) / 1_000_000


@dataclass(frozen=True)
class UsageEntry:
    """One ``cf_agents_usage`` row (``at`` in ms from the agent's clock)."""

    id: int
    at: int
    turn: str | None
    op_id: str | None
    kind: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cost: float
    priced: bool
    #: The tokens are what was known, not the provider's report (a cut request): a lower bound.
    partial: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON responses and RPC answers."""
        return {**asdict(self), "total_tokens": self.total_tokens}


@dataclass(frozen=True)
class UsageTotals:
    """Sums over entries; ``by_model`` maps each model to the same sums as a dict
    (``input_tokens``, ``output_tokens``, ``total_tokens``, ``cost``, ``calls``,
    ``unpriced_calls``, ``partial_calls``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float = 0.0
    calls: int = 0
    #: Entries without a price (cost 0.0): when non-zero, ``cost`` is a lower bound.
    unpriced_calls: int = 0
    #: Partial entries (requests cut before the provider reported their usage): when non-zero,
    #: every token total — and ``cost`` — is a lower bound of what was billed.
    partial_calls: int = 0
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tokens_lower_bound(self) -> bool:
        """Whether the token totals may be below what was billed (a partial entry counts)."""
        return self.partial_calls > 0

    @property
    def cost_lower_bound(self) -> bool:
        """Whether ``cost`` may be below what was billed (a partial or unpriced entry counts)."""
        return self.partial_calls > 0 or self.unpriced_calls > 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON responses and RPC answers (the two ``*_lower_bound`` flags
        included)."""
        return {
            **asdict(self),
            "tokens_lower_bound": self.tokens_lower_bound,
            "cost_lower_bound": self.cost_lower_bound,
        }


def _token_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be an integer, got {value!r}")
    if value < 0:
        raise UsageError(f"{name} must not be negative, got {value}")
    return value


def _label(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{name} must be a non-blank string, got {value!r}")
    return value


def _entry(row: Mapping[str, Any]) -> UsageEntry:
    # An integral REAL reads back as an int across the JavaScript boundary: cost stays a float.
    return UsageEntry(**{**row, "cost": float(row["cost"]), "priced": bool(row["priced"]),
                         "partial": bool(row["partial"])})  # fmt: skip


_COLUMNS = "id, at, turn, op_id, kind, provider, model, input_tokens, output_tokens, cost, "
_COLUMNS += "priced, partial"
_INSERT = (
    "INSERT INTO cf_agents_usage (at, turn, op_id, kind, provider, model, input_tokens, "
    "output_tokens, cost, priced, partial) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
_UPDATE = (
    "UPDATE cf_agents_usage SET input_tokens = ?, output_tokens = ?, cost = ?, priced = ?, "
    f"partial = ? WHERE id = ? RETURNING {_COLUMNS}"
)


class UsageLedger:
    """Token and cost accounting, a feature the Agent owns: ``cf_agents_usage`` through the
    core, priced with the agent's ``model_prices`` (read when a call is recorded, so a subclass's
    prices apply). The Agent's ``record_usage``, ``update_usage``, ``usage`` and
    ``usage_entries`` delegate here."""

    __slots__ = ("_prices", "core")
    #: The tables this feature owns (the Agent ensures them at every activation).
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(self, core: Core, prices: Callable[[], ModelPrices]) -> None:
        self.core = core
        self._prices = prices

    def record(
        self,
        *,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        turn: str | None = None,
        op_id: str | None = None,
        cost: float | None = None,
        kind: str = "llm",
        partial: bool = False,
    ) -> UsageEntry:
        """Record one call's tokens (and cost: given, or from ``model_prices``) durably;
        ``partial``: what is known so far of a request still running or cut (see the module
        docstring), to be completed with :meth:`update`."""
        _label("provider", provider)
        _label("model", model)
        _label("kind", kind)
        input_tokens = _token_count("input_tokens", input_tokens)
        output_tokens = _token_count("output_tokens", output_tokens)
        cost, priced = self._cost(model, input_tokens, output_tokens, cost)
        core = self.core
        at = int(core.now())
        turn = None if turn is None else str(turn)
        values = (at, turn, op_id, kind, provider, model, input_tokens, output_tokens, float(cost))
        rows = core.sql(_INSERT, *values, int(priced), int(bool(partial)))
        entry = UsageEntry(int(rows[0]["id"]), *values, priced, bool(partial))
        self._event("usage:recorded", entry)
        return entry

    def update(
        self,
        entry_id: int,
        *,
        input_tokens: int,
        output_tokens: int,
        partial: bool,
        cost: float | None = None,
    ) -> UsageEntry:
        """Replace the tokens (and cost) of entry ``entry_id``: a partial entry as more of its
        request becomes known, and finally with the provider's report (``partial=False``).
        One request stays one entry, so nothing is counted twice."""
        input_tokens = _token_count("input_tokens", input_tokens)
        output_tokens = _token_count("output_tokens", output_tokens)
        core = self.core
        found = core.sql("SELECT model FROM cf_agents_usage WHERE id = ?", entry_id)
        if not found:
            raise UsageError(f"no usage entry {entry_id!r}")
        cost, priced = self._cost(str(found[0]["model"]), input_tokens, output_tokens, cost)
        rows = core.sql(_UPDATE, input_tokens, output_tokens, float(cost), int(priced),
                        int(bool(partial)), entry_id)  # fmt: skip
        entry = _entry(rows[0])
        self._event("usage:updated", entry)
        return entry

    def _cost(
        self, model: str, input_tokens: int, output_tokens: int, cost: float | None
    ) -> tuple[float, bool]:
        """The cost to record and whether it is priced (given, or from ``model_prices``)."""
        if cost is None:
            computed = price_of(self._prices(), model, input_tokens, output_tokens)
            return (0.0, False) if computed is None else (computed, True)
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost):
            raise UsageError(f"cost must be a finite number, got {cost!r}")
        if cost < 0:
            raise UsageError(f"cost must not be negative, got {cost}")
        return float(cost), True

    def _event(self, kind: str, entry: UsageEntry) -> None:
        payload = {
            "provider": entry.provider,
            "model": entry.model,
            "kind": entry.kind,
            "turn": entry.turn,
            "opId": entry.op_id,
            "inputTokens": entry.input_tokens,
            "outputTokens": entry.output_tokens,
            "cost": entry.cost,
            "priced": entry.priced,
            "partial": entry.partial,
        }
        if kind == "usage:updated":
            payload["id"] = entry.id
        self.core.emit(kind, payload)

    def totals(self, turn: str | None = None, op_id: str | None = None) -> UsageTotals:
        """Token and cost sums for ``turn`` and/or ``op_id``, or for the whole agent."""
        clause, params = _where(turn, op_id)
        rows = self.core.sql(
            "SELECT model, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS "
            "output_tokens, SUM(cost) AS cost, COUNT(*) AS calls, SUM(1 - priced) AS unpriced, "
            "SUM(partial) AS partial "
            f"FROM cf_agents_usage{clause} GROUP BY model ORDER BY model",
            *params,
        )
        by_model: dict[str, dict[str, Any]] = {}
        for row in rows:
            tokens_in, tokens_out = int(row["input_tokens"]), int(row["output_tokens"])
            by_model[str(row["model"])] = {
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
                "cost": float(row["cost"]),
                "calls": int(row["calls"]),
                "unpriced_calls": int(row["unpriced"]),
                "partial_calls": int(row["partial"]),
            }
        models = by_model.values()
        return UsageTotals(
            input_tokens=sum(m["input_tokens"] for m in models),
            output_tokens=sum(m["output_tokens"] for m in models),
            total_tokens=sum(m["total_tokens"] for m in models),
            cost=math.fsum(m["cost"] for m in models),
            calls=sum(m["calls"] for m in models),
            unpriced_calls=sum(m["unpriced_calls"] for m in models),
            partial_calls=sum(m["partial_calls"] for m in models),
            by_model=by_model,
        )

    def entries(
        self, turn: str | None = None, limit: int = 1000, op_id: str | None = None
    ) -> list[UsageEntry]:
        """Recorded calls (of ``turn`` and/or ``op_id`` when given), newest first."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"limit must be a positive integer, got {limit!r}")
        clause, params = _where(turn, op_id)
        rows = self.core.sql(
            f"SELECT {_COLUMNS} FROM cf_agents_usage{clause} ORDER BY id DESC LIMIT ?",
            *params,
            limit,
        )
        return [_entry(row) for row in rows]


def _where(turn: str | None, op_id: str | None) -> tuple[str, list[Any]]:
    where, params = [], []
    for column, value in (("turn", turn), ("op_id", op_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(str(value))
    return (f" WHERE {' AND '.join(where)}" if where else ""), params
