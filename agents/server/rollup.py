"""Usage: the seed's ``UsageStore`` and ``UsageRollup``, across a session and its sub-agents.

A session's usage lives in its object (:class:`DOUsageStore`, the default ``usage_store``):
tokens, cost and per-model numbers from the usage table, tool calls (outcome, duration) from the
operation ledger, sub-agent calls from the children table, custom metrics from
:mod:`.metrics`. A ``usage_store`` factory given to ``create_agent_server`` replaces it: the
server then hands it every entry as it happens (``record_entry``: ``kind`` ``tokens`` /
``tool`` / ``subagent`` / ``custom``, camelCase fields) and reads ``/usage`` from it.

The seed leaves ``tokensIncludingSubAgents`` at the parent's own numbers ("cross-DO aggregation
is not supported"). Here a parent knows its children (``cf_server_children``) and asks each one
for *its* roll-up over HTTP (``/usage?mode=rollup`` on the child's object), which recurses, so
tokens, cost and custom metrics add up across the whole tree.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .metrics import add_custom
from .subagents import call_session

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = [
    "DOUsageStore",
    "UsageStore",
    "UsageStoreContext",
    "UsageStoreFactory",
    "entry_json",
    "usage_report",
]


class UsageStore(Protocol):
    """The seed's ``UsageStore``; each method may be sync or async."""

    def record_entry(self, entry: Mapping[str, Any]) -> Any: ...
    def get_entries(self, session_id: str) -> Any: ...
    def get_rollup(self, session_id: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class UsageStoreContext:
    """What a ``usage_store`` factory is given beside ``env``: the session it serves."""

    session_id: str
    agent_type: str | None


UsageStoreFactory = Callable[[Any, UsageStoreContext], UsageStore]


async def _settled(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _tokens(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt": prompt, "completion": completion, "total": prompt + completion}


def _stats(rows: Iterable[tuple[str, str, int]], by: str) -> dict[str, Any]:
    """``{totalCalls, successfulCalls, failedCalls, totalDurationMs, <by>: {key: …}}``."""
    stats: dict[str, Any] = {
        "totalCalls": 0,
        "successfulCalls": 0,
        "failedCalls": 0,
        "totalDurationMs": 0,
        by: {},
    }
    for key, status, duration in rows:
        entry = stats[by].setdefault(
            key, {"calls": 0, "successfulCalls": 0, "failedCalls": 0, "totalDurationMs": 0}
        )
        for target in (stats, entry):
            target["totalCalls" if target is stats else "calls"] += 1
            target["successfulCalls"] += status == "completed"
            target["failedCalls"] += status == "failed"
            target["totalDurationMs"] += duration
    return stats


def _duration(started: int | None, completed: int | None) -> int:
    return int(completed - started) if started is not None and completed is not None else 0


def entry_json(entry: Any) -> dict[str, Any]:
    """A token usage entry (a ``cf_agents_usage`` row) in the API's camelCase."""
    return {
        "kind": "tokens",
        "id": entry.id,
        "at": entry.at,
        "provider": entry.provider,
        "model": entry.model,
        "inputTokens": entry.input_tokens,
        "outputTokens": entry.output_tokens,
        "totalTokens": entry.total_tokens,
        "cost": entry.cost,
        "priced": entry.priced,
        "turn": entry.turn,
        "opId": entry.op_id,
        "partial": entry.partial,
    }


class DOUsageStore:
    """The default usage store: the session object's own tables (see the module docstring).

    ``record_entry`` takes ``tokens`` entries (``provider``, ``model``, ``inputTokens``,
    ``outputTokens``) and ``custom`` ones (``type``, ``name``, ``value``); tool and sub-agent
    entries are already in the ledger and the children table, so they need no recording."""

    def __init__(self, server: AgentServer) -> None:
        self._server = server

    def record_entry(self, entry: Mapping[str, Any]) -> None:
        kind = entry.get("kind")
        if kind == "tokens":
            self._server.record_usage(
                provider=str(entry.get("provider") or "custom"),
                model=str(entry.get("model") or "custom"),
                input_tokens=int(entry.get("inputTokens", 0)),
                output_tokens=int(entry.get("outputTokens", 0)),
                turn=entry.get("turn"),
                op_id=entry.get("opId"),
            )
        elif kind == "custom":
            self._server.record_metric(
                str(entry.get("type")),
                str(entry.get("name")),
                entry.get("value"),  # type: ignore[arg-type]
            )

    def get_entries(self, session_id: str) -> list[dict[str, Any]]:
        server = self._server
        tokens = [entry_json(e) for e in server.usage_entries(limit=100_000)]
        return [*tokens, *server.metrics.entries()]

    def get_rollup(self, session_id: str) -> dict[str, Any]:
        server = self._server
        record = server.session
        own = server.usage()
        tools = [
            (op.kind[5:], op.status, _duration(op.started_at, op.completed_at))
            for op in server.operations(limit=100_000)
            if op.kind.startswith("tool:")
        ]
        entries = server.usage_entries(limit=100_000)
        return {
            "runId": record.run_id,
            "sessionId": record.session_id,
            "tokens": _tokens(own.input_tokens, own.output_tokens),
            "tokensByModel": {
                m: _tokens(int(v["input_tokens"]), int(v["output_tokens"]))
                for m, v in own.by_model.items()
            },
            "cost": own.cost,
            # A request cut mid-stream counts what was known when it was cut: the totals are
            # then lower bounds of what the provider billed.
            "partialCalls": own.partial_calls,
            "tokensLowerBound": own.tokens_lower_bound,
            "toolStats": _stats(tools, "byTool"),
            "subAgentStats": _stats(server.sessions.sub_agent_calls(), "byType"),
            "custom": server.metrics.sums(),
            "startedAt": min((e.at for e in entries), default=None),
            "lastUpdatedAt": max((e.at for e in entries), default=None),
            "entryCount": len(entries),
        }


async def usage_report(server: AgentServer, mode: str) -> dict[str, Any]:
    """``/usage`` (this session), ``?mode=rollup`` (with every descendant), ``?mode=entries``."""
    store = server.usage_store
    session_id = server.session.session_id or server.name
    if mode == "entries":
        entries = list(await _settled(store.get_entries(session_id)))
        return {"sessionId": session_id, "entries": entries}
    rollup = dict(await _settled(store.get_rollup(session_id)))
    tokens = rollup.get("tokens") or {}
    including = _tokens(int(tokens.get("prompt", 0)), int(tokens.get("completion", 0)))
    cost = float(rollup.get("cost", 0.0))
    lower_bound = bool(rollup.get("tokensLowerBound", False))
    custom = add_custom({}, rollup.get("custom") or {})
    if mode == "rollup":
        for child in server.sessions.children():
            status, rolled = await call_session(server, child.session_id, "/usage?mode=rollup")
            if status != 200 or not isinstance(rolled, Mapping):
                continue
            theirs = rolled.get("tokensIncludingSubAgents") or {}
            including = _tokens(
                including["prompt"] + int(theirs.get("prompt", 0)),
                including["completion"] + int(theirs.get("completion", 0)),
            )
            cost += float(rolled.get("costIncludingSubAgents", 0.0))
            lower_bound = lower_bound or bool(rolled.get("tokensIncludingSubAgentsLowerBound"))
            add_custom(custom, rolled.get("customIncludingSubAgents") or {})
    return {
        **rollup,
        "tokensIncludingSubAgents": including,
        "tokensIncludingSubAgentsLowerBound": lower_bound,
        "costIncludingSubAgents": cost,
        "customIncludingSubAgents": custom,
    }
