"""Usage across a session and every session it started, in every object.

The seed leaves ``tokensIncludingSubAgents`` at the parent's own numbers ("cross-DO aggregation
is not supported"). Here a parent knows its children (``cf_server_children``) and asks each one
for *its* roll-up over HTTP (``/usage?mode=rollup`` on the child's object), which recurses, so
the numbers add up across the whole tree. Own numbers come from the usage table (tokens, cost,
per model) and the operation ledger (tool calls: outcome and duration).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .subagents import call_session

__all__ = ["entry_json", "usage_report"]


def _tokens(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt": prompt, "completion": completion, "total": prompt + completion}


def _stats(rows: Iterable[tuple[str, str, int]]) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "totalCalls": 0,
        "successfulCalls": 0,
        "failedCalls": 0,
        "totalDurationMs": 0,
        "byKey": {},
    }
    for key, status, duration in rows:
        entry = stats["byKey"].setdefault(
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


async def _child_rollup(server: Any, session_id: str) -> Mapping[str, Any] | None:
    status, body = await call_session(server, session_id, "/usage?mode=rollup")
    return body if status == 200 and isinstance(body, Mapping) else None


def entry_json(entry: Any) -> dict[str, Any]:
    """A usage entry in the API's camelCase."""
    return {
        "id": entry.id,
        "at": entry.at,
        "kind": entry.kind,
        "provider": entry.provider,
        "model": entry.model,
        "inputTokens": entry.input_tokens,
        "outputTokens": entry.output_tokens,
        "totalTokens": entry.total_tokens,
        "cost": entry.cost,
        "priced": entry.priced,
        "turn": entry.turn,
        "opId": entry.op_id,
    }


async def usage_report(server: Any, mode: str) -> dict[str, Any]:
    """``/usage`` (this session), ``?mode=rollup`` (with every descendant), ``?mode=entries``."""
    record = server.session
    if mode == "entries":
        entries = [entry_json(e) for e in server.usage_entries(limit=100_000)]
        return {"sessionId": record.session_id, "entries": entries}
    own = server.usage()
    children = server.sessions.children()
    ops = server.operations(limit=100_000)
    sub_calls = {c.tool_call_id: c for c in children}
    tools = [
        (op.kind[5:], op.status, _duration(op.started_at, op.completed_at))
        for op in ops
        if op.kind.startswith("tool:")
    ]
    tool_stats = _stats(tools)
    tool_stats["byTool"] = tool_stats.pop("byKey")
    sub_stats = _stats((c.agent_type, c.status, 0) for c in sub_calls.values())
    sub_stats["byType"] = sub_stats.pop("byKey")
    tokens = _tokens(own.input_tokens, own.output_tokens)
    including = dict(tokens)
    cost_including = own.cost
    if mode == "rollup":
        for child in children:
            rolled = await _child_rollup(server, child.session_id)
            if rolled is None:
                continue
            child_tokens = rolled.get("tokensIncludingSubAgents") or {}
            including = _tokens(
                including["prompt"] + int(child_tokens.get("prompt", 0)),
                including["completion"] + int(child_tokens.get("completion", 0)),
            )
            cost_including += float(rolled.get("costIncludingSubAgents", 0.0))
    entries = server.usage_entries(limit=100_000)
    return {
        "runId": record.run_id,
        "sessionId": record.session_id,
        "tokens": tokens,
        "tokensByModel": {
            m: _tokens(int(v["input_tokens"]), int(v["output_tokens"]))
            for m, v in own.by_model.items()
        },
        "tokensIncludingSubAgents": including,
        "cost": own.cost,
        "costIncludingSubAgents": cost_including,
        "toolStats": tool_stats,
        "subAgentStats": sub_stats,
        "custom": {},
        "startedAt": min((e.at for e in entries), default=None),
        "lastUpdatedAt": max((e.at for e in entries), default=None),
        "entryCount": len(entries),
    }
