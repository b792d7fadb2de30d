"""Custom usage metrics: ``record_metric(type, name, value)`` from tools and hooks.

The seed's roll-up has ``custom: {type: {name: number}}`` beside the tokens — what an agent
counts for itself (API calls to a search service, bytes uploaded). Each metric is a row of
``cf_server_metrics``; ``/usage`` sums them by type and name, and the roll-up adds every
descendant's sums, as it does tokens.

A metric recorded by a tool is keyed by the call's ledger operation and its order within the
call, so a call run again after a crash (an idempotent tool re-run with the same key) writes
the same rows again instead of counting twice. Elsewhere a metric gets a fresh key.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..core.sql import query_rows
from .errors import AgentServerError

__all__ = ["MetricError", "MetricStore", "add_custom"]


class MetricError(AgentServerError, ValueError):
    """A metric that cannot be recorded: an empty type or name, or a value that is not a finite
    number. Nothing was recorded."""


class MetricStore:
    """The session's custom metrics, over the object's ``sql``."""

    SCHEMA: ClassVar[tuple[str, ...]] = (
        """CREATE TABLE IF NOT EXISTS cf_server_metrics (
  key TEXT PRIMARY KEY, type TEXT NOT NULL, name TEXT NOT NULL, value REAL NOT NULL,
  run_id TEXT, at INTEGER NOT NULL)""",
    )

    def __init__(self, sql: Any, now: Callable[[], float]) -> None:
        self._sql = sql
        self._now = now
        for statement in self.SCHEMA:
            query_rows(sql, statement)

    def record(
        self, kind: str, name: str, value: float, *, run_id: str | None, key: str | None = None
    ) -> str:
        """Add ``value`` to metric ``kind``/``name``; ``key`` makes a repeat a no-op."""
        for label, text in (("type", kind), ("name", name)):
            if not isinstance(text, str) or not text.strip():
                raise MetricError(f"a metric's {label} must be a non-empty string, got {text!r}")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise MetricError(f"metric {kind}/{name}: the value must be a finite number, "
                              f"got {value!r}")  # fmt: skip
        key = key or f"m_{secrets.token_hex(8)}"
        query_rows(
            self._sql,
            "INSERT OR REPLACE INTO cf_server_metrics VALUES (?, ?, ?, ?, ?, ?)",
            key,
            kind,
            name,
            float(value),
            run_id,
            int(self._now()),
        )
        return key

    def sums(self) -> dict[str, dict[str, float]]:
        """``{type: {name: sum}}`` over every metric of the session."""
        rows = query_rows(
            self._sql,
            "SELECT type, name, sum(value) AS total FROM cf_server_metrics GROUP BY type, name",
        )
        out: dict[str, dict[str, float]] = {}
        for row in rows:
            out.setdefault(str(row["type"]), {})[str(row["name"])] = _number(row["total"])
        return out

    def entries(self) -> list[dict[str, Any]]:
        rows = query_rows(
            self._sql,
            "SELECT key, type, name, value, run_id, at FROM cf_server_metrics ORDER BY at, key",
        )
        return [
            {"kind": "custom", "key": r["key"], "type": r["type"], "name": r["name"],
             "value": _number(r["value"]), "runId": r["run_id"], "at": int(r["at"])}
            for r in rows
        ]  # fmt: skip


def _number(value: Any) -> float:
    """A sum as JSON shows it best: a whole number as an int (``5``, not ``5.0``)."""
    number = float(value)
    return int(number) if number.is_integer() else number


def add_custom(
    into: dict[str, dict[str, float]], other: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, float]]:
    """``into`` plus ``other`` (both ``{type: {name: number}}``), summed per type and name."""
    for kind, names in other.items():
        target = into.setdefault(str(kind), {})
        for name, value in names.items():
            target[str(name)] = _number(target.get(str(name), 0) + float(value))
    return into
