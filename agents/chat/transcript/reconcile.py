"""Reconciling a client's copy of the transcript with the stored one (research §3.3, step 1).

A client sends its whole transcript with every request (and with ``setMessages``), and its copy
lags the server's: an assistant message it built from the stream may carry a different id, and a
tool part it shows as waiting may already have its result on the server. Before anything is
written, :func:`reconcile_messages` makes the incoming list agree with what is stored, as the
published ``reconcileMessages`` does:

* an incoming message with a stored id claims that row; an incoming assistant with a new id
  adopts the id of the first unclaimed stored assistant carrying the same tool calls (or, with no
  tool parts, the same parts);
* server tool outputs win: a tool part still waiting in the incoming copy takes the stored
  part's settled state and output;
* a stale copy (only ``step-start`` and waiting tool parts that duplicate calls already settled
  on a claimed row) is dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from ...core.protocol import dumps

__all__ = ["reconcile_messages"]

#: An AI SDK ``UIMessage`` as JSON data.
UIMessage = dict[str, Any]

_RESOLVED_STATES = frozenset({"output-available", "output-error", "output-denied"})
_PENDING_STATES = frozenset({"input-available", "approval-requested", "approval-responded"})
_MISSING: Any = object()


def reconcile_messages(
    incoming: Sequence[UIMessage],
    stored: Sequence[UIMessage],
    sanitize: Callable[[UIMessage], UIMessage] | None = None,
) -> list[UIMessage]:
    """Align a client's copy of the transcript with the stored one (research §3.3 step 1).

    1. *Ids*: each incoming message claims the stored row with its id. An incoming **assistant**
       with an unknown id adopts the id of the first unclaimed stored assistant that carries the
       same tool calls (a shared ``toolCallId`` whose ``type``, ``toolName`` when both have one,
       and input — key order ignored — agree), or, without tool parts, whose parts serialise
       identically (and that has no tool parts). A client that rebuilt the assistant under its
       own id thus updates the server's row instead of duplicating it.
    2. *Server tool outputs win*: on an incoming assistant that resolved to a stored row, a tool
       part still ``input-available`` / ``approval-requested`` / ``approval-responded`` whose
       stored copy is settled takes the stored ``state`` and its ``output`` / ``errorText`` /
       ``approval``. A tab that missed a tool result cannot roll it back.
    3. *Stale copies dropped*: an incoming assistant that claimed no row, is not the last
       message, and consists only of ``step-start`` and pending tool parts that repeat calls
       already settled on a claimed row is removed (it would reach the next prompt as a
       duplicate tool call).

    ``sanitize`` is the agent's persistence normaliser, applied before comparing, so a tool
    input the agent truncates on write still matches its stored form.
    """
    adopted = _reconcile_ids(incoming, stored, sanitize)
    merged = _merge_server_tool_outputs(adopted, stored)
    return _drop_stale_tool_copies(merged, stored, sanitize)


def _parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


def _is_resolved(part: Mapping[str, Any]) -> bool:
    return (
        isinstance(part.get("toolCallId"), str)
        and "state" in part
        and part["state"] in _RESOLVED_STATES
    )


def _is_pending(part: Mapping[str, Any]) -> bool:
    return (
        isinstance(part.get("toolCallId"), str)
        and "state" in part
        and part["state"] in _PENDING_STATES
    )


def _jsify(value: Any) -> Any:
    """``value`` with integral floats as ints: JavaScript has one number type, so a client that
    parsed ``1.0`` sends back ``1``, and the two must compare equal."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, list):
        return [_jsify(item) for item in value]
    if isinstance(value, dict):
        return {key: _jsify(item) for key, item in value.items()}
    return value


def _stable(value: Any) -> str | None:
    """The SDK's ``stableStringify``: JSON with object keys sorted; ``None`` for a missing key."""
    if value is _MISSING:
        return None
    return json.dumps(_jsify(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _same_tool_call(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    name_a, name_b = a.get("toolName", _MISSING), b.get("toolName", _MISSING)
    return (
        a.get("type") == b.get("type")
        and (name_a is _MISSING or name_b is _MISSING or name_a == name_b)
        and _stable(a.get("input", _MISSING)) == _stable(b.get("input", _MISSING))
    )


def _content_key(message: UIMessage, sanitize: Callable[[UIMessage], UIMessage] | None) -> str:
    parts = (sanitize(message) if sanitize else message).get("parts")
    return dumps(_jsify(parts))


def _reconcile_ids(
    incoming: Sequence[UIMessage],
    stored: Sequence[UIMessage],
    sanitize: Callable[[UIMessage], UIMessage] | None,
) -> list[UIMessage]:
    if not stored:
        return list(incoming)
    claimed: set[int] = set()
    exact: set[int] = set()
    for index, message in enumerate(incoming):
        for row, candidate in enumerate(stored):
            if row not in claimed and candidate.get("id") == message.get("id"):
                claimed.add(row)
                exact.add(index)
                break

    def claim(match: Callable[[UIMessage], bool]) -> str | None:
        # First unclaimed row first: repeated identical assistants pair up turn by turn.
        for row, candidate in enumerate(stored):
            if row not in claimed and candidate.get("role") == "assistant" and match(candidate):
                claimed.add(row)
                return str(candidate.get("id"))
        return None

    result: list[UIMessage] = []
    for index, message in enumerate(incoming):
        if index in exact or message.get("role") != "assistant":
            result.append(message)
            continue
        calls: dict[str, dict[str, Any]] = {}
        for part in _parts(sanitize(message) if sanitize else message):
            call_id = part.get("toolCallId")
            if isinstance(call_id, str):
                calls.setdefault(call_id, part)
        if calls:
            adopted = claim(partial(_carries_same_tool_calls, calls=calls))
        else:
            key = _content_key(message, sanitize)
            adopted = claim(partial(_same_plain_content, key=key, sanitize=sanitize))
        result.append({**message, "id": adopted} if adopted is not None else message)
    return result


def _same_plain_content(
    stored: UIMessage, *, key: str, sanitize: Callable[[UIMessage], UIMessage] | None
) -> bool:
    """No tool parts, and the same parts JSON as the incoming assistant's ``key``."""
    return (
        not any("toolCallId" in p for p in _parts(stored)) and _content_key(stored, sanitize) == key
    )


def _carries_same_tool_calls(stored: UIMessage, *, calls: Mapping[str, Mapping[str, Any]]) -> bool:
    """At least one shared ``toolCallId``, and every shared one is the same call (a provider
    reusing an id for a new call carries another tool or input)."""
    shared = False
    for part in _parts(stored):
        call_id = part.get("toolCallId")
        if not isinstance(call_id, str) or call_id not in calls:
            continue
        if not _same_tool_call(part, calls[call_id]):
            return False
        shared = True
    return shared


def _merge_server_tool_outputs(
    incoming: list[UIMessage], stored: Sequence[UIMessage]
) -> list[UIMessage]:
    # Only from the row a message resolved to: providers may reuse toolCallIds across turns.
    resolved: dict[str, dict[str, dict[str, Any]]] = {}
    for message in stored:
        if message.get("role") != "assistant":
            continue
        settled = {p["toolCallId"]: p for p in _parts(message) if _is_resolved(p)}
        if settled:
            resolved[str(message.get("id"))] = settled
    if not resolved:
        return incoming
    result: list[UIMessage] = []
    for message in incoming:
        own = resolved.get(str(message.get("id"))) if message.get("role") == "assistant" else None
        if own is None:
            result.append(message)
            continue
        changed = False
        parts: list[Any] = []
        for part in message.get("parts") or []:
            server = (
                own.get(part["toolCallId"])
                if isinstance(part, dict) and _is_pending(part)
                else None
            )
            if server is None:
                parts.append(part)
                continue
            changed = True
            # Carry only the result field of the server's terminal state.
            merged = {**part, "state": server["state"]}
            field = {"output-available": "output", "output-error": "errorText"}.get(
                server["state"], "approval"
            )
            if field in server:
                merged[field] = server[field]
            parts.append(merged)
        result.append({**message, "parts": parts} if changed else message)
    return result


def _drop_stale_tool_copies(
    reconciled: list[UIMessage],
    stored: Sequence[UIMessage],
    sanitize: Callable[[UIMessage], UIMessage] | None,
) -> list[UIMessage]:
    reconciled_ids = {message.get("id") for message in reconciled}
    stored_ids: set[Any] = set()
    settled_on_claimed: dict[str, list[dict[str, Any]]] = {}
    for message in stored:
        stored_ids.add(message.get("id"))
        if message.get("role") != "assistant" or message.get("id") not in reconciled_ids:
            continue
        for part in _parts(message):
            if _is_resolved(part):
                settled_on_claimed.setdefault(part["toolCallId"], []).append(part)
    if not settled_on_claimed:
        return reconciled

    def stale(message: UIMessage) -> bool:
        if message.get("role") != "assistant" or message.get("id") in stored_ids:
            return False
        has_tool_part = False
        for part in _parts(sanitize(message) if sanitize else message):
            if part.get("type") == "step-start":
                continue
            call_id = part.get("toolCallId")
            if not isinstance(call_id, str) or not (
                _is_pending(part) or part.get("state") == "input-streaming"
            ):
                return False
            if not any(_same_tool_call(s, part) for s in settled_on_claimed.get(call_id, ())):
                return False
            has_tool_part = True
        return has_tool_part

    last = len(reconciled) - 1
    kept = [m for i, m in enumerate(reconciled) if i == last or not stale(m)]
    return kept if len(kept) != len(reconciled) else reconciled


# -- the transcript --------------------------------------------------------------------------------
