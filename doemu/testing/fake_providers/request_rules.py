"""What the real APIs refuse in a request body, answered as they answer it: a 400 in their words.

Two layers, checked in order on every request that creates a generation:

1. **The shape**: the body against the official SDK's request type (:mod:`.sdk_types`), the
   problem rendered as each API phrases it — OpenAI's ``Missing required parameter:
   'messages[1].tool_call_id'.``, ``Invalid value: 'tol'. Supported values are: …``, ``Unknown
   parameter: 'input[0].contnt'.`` with ``param`` and ``code``; Anthropic's pydantic-style
   ``messages.0.content.0.text: Field required``.
2. **The conversation**: rules across messages that no type expresses, with the real texts:

   * chat completions — a ``tool`` message must answer a ``tool_calls`` message before it; an
     assistant message with ``tool_calls`` must be followed by a ``tool`` message for each id;
     an assistant message needs ``content`` or ``tool_calls``;
   * Responses — a ``function_call_output`` needs its ``function_call`` earlier in ``input``,
     and every ``function_call`` its output;
   * Anthropic — ``user`` and ``assistant`` alternate (today's API merges consecutive turns of
     one role; the fake refuses them, holding adapters to the canonical shape); a message after
     ``tool_use`` blocks begins with one ``tool_result`` per id, and every ``tool_result``
     answers a ``tool_use`` of the message before; text blocks are not empty or blank; a final
     assistant message (a prefill) does not end in whitespace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .script import Api
from .sdk_types import Problem, check_body

__all__ = ["Refusal", "check_request"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A 400's ``message`` and, for OpenAI, its ``param`` and ``code``."""

    message: str
    param: str | None = None
    code: str | None = None


def check_request(api: Api, body: dict[str, Any]) -> Refusal | None:
    """Why the real API would refuse ``body`` with a 400, or ``None``."""
    problem = check_body(api, body)
    if problem is not None:
        return _anthropic(problem) if api == "messages" else _openai(api, problem)
    return _RULES[api](body)


# -- the shape, in each API's words ------------------------------------------------------------


def _openai_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number" if isinstance(value, float) else "an integer"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _listed(choices: tuple[Any, ...]) -> str:
    quoted = [f"'{c}'" for c in choices]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def _openai(api: Api, problem: Problem) -> Refusal:
    param = _openai_path(problem.path)
    if problem.kind == "missing":
        message = f"Missing required parameter: '{param}'."
        return Refusal(message, param, "missing_required_parameter")
    if problem.kind == "unknown":
        if len(problem.path) == 1 and api == "chat":
            return Refusal(f"Unrecognized request argument supplied: {param}", None, None)
        return Refusal(f"Unknown parameter: '{param}'.", param, "unknown_parameter")
    if problem.kind == "value":
        got = problem.got if isinstance(problem.got, str) else json.dumps(problem.got)
        return Refusal(
            f"Invalid value: '{got}'. Supported values are: {_listed(problem.choices)}.",
            param,
            "invalid_value",
        )
    return Refusal(
        f"Invalid type for '{param}': expected {problem.expected}, but got "
        f"{_json_kind(problem.got)} instead.",
        param,
        "invalid_type",
    )


_PYDANTIC = {"a string": "a valid string", "an integer": "a valid integer",
             "a number": "a valid number", "a boolean": "a valid boolean",
             "an object": "a valid dictionary", "an array": "a valid list"}  # fmt: skip


def _anthropic(problem: Problem) -> Refusal:
    where = ".".join(str(part) for part in problem.path)
    if problem.kind == "missing":
        return Refusal(f"{where}: Field required")
    if problem.kind == "unknown":
        return Refusal(f"{where}: Extra inputs are not permitted")
    if problem.kind == "value":
        quoted = [f"'{c}'" for c in problem.choices]
        listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" or {quoted[-1]}"
        return Refusal(f"{where}: Input should be {listed}")
    expected = " or ".join(_PYDANTIC.get(e, e) for e in problem.expected.split(" or "))
    return Refusal(f"{where}: Input should be {expected}")


# -- the conversation --------------------------------------------------------------------------


def _chat(body: dict[str, Any]) -> Refusal | None:
    pending: list[str] = []
    opened = 0
    for index, message in enumerate(body["messages"]):
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return Refusal(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",  # sic: the API's spelling
                    f"messages.[{index}].role",
                )
            pending.remove(message["tool_call_id"])
            continue
        if pending:
            return _unanswered(pending, opened)
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if message.get("content") is None and not calls and not message.get("refusal"):
                return Refusal(
                    "Invalid value for 'content': expected a string, got null.",
                    f"messages.[{index}].content",
                )
            pending, opened = [str(call.get("id")) for call in calls], index
    return _unanswered(pending, opened) if pending else None


def _unanswered(pending: list[str], index: int) -> Refusal:
    return Refusal(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(pending),
        f"messages.[{index}].role",
    )


def _responses(body: dict[str, Any]) -> Refusal | None:
    items = body["input"]
    if isinstance(items, str):
        return None
    calls: list[str] = []
    answered: set[str] = set()
    for item in items:
        kind, call_id = item.get("type"), str(item.get("call_id"))
        if kind == "function_call":
            calls.append(call_id)
        elif kind == "function_call_output":
            if call_id not in calls:
                return Refusal(
                    f"No tool call found for function call output with call_id {call_id}.",
                    "input",
                )
            answered.add(call_id)
    for call_id in calls:
        if call_id not in answered:
            return Refusal(f"No tool output found for function call {call_id}.", "input")
    return None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or () if isinstance(b, dict)]


def _messages(body: dict[str, Any]) -> Refusal | None:
    messages = body["messages"]
    if not messages:
        return Refusal("messages: at least one message is required")
    final = messages[-1]
    if final.get("role") == "assistant":
        texts = [b.get("text") for b in _blocks(final) if b.get("type") == "text"]
        if texts and isinstance(texts[-1], str) and texts[-1] != texts[-1].rstrip():
            return Refusal("messages: final assistant content cannot end with trailing whitespace")
    previous: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if index and role == messages[index - 1].get("role") and role in ("user", "assistant"):
            return Refusal(
                f'messages: roles must alternate between "user" and "assistant", but found '
                f'multiple "{role}" roles in a row'
            )
        blocks = _blocks(message)
        for block in blocks:
            if block.get("type") == "text":
                text = str(block.get("text", ""))
                if not text:
                    return Refusal("messages: text content blocks must be non-empty")
                if not text.strip():
                    return Refusal("messages: text content blocks must contain non-whitespace text")
        refused = _tool_pairing(index, blocks, previous)
        if refused is not None:
            return refused
        previous = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
    if previous:
        return _without_results(len(messages) - 1, previous)
    return None


def _tool_pairing(index: int, blocks: list[dict[str, Any]], uses: list[str]) -> Refusal | None:
    """The message at ``index`` against the ``tool_use`` ids of the message before it."""
    results = [b for b in blocks if b.get("type") == "tool_result"]
    for position, block in enumerate(blocks):
        if block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in uses:
            return Refusal(
                f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` block "
                "must have a corresponding `tool_use` block in the previous message."
            )
    if not uses:
        return None
    answered = {str(b.get("tool_use_id")) for b in results}
    missing = [u for u in uses if u not in answered]
    if missing:
        return _without_results(index - 1, missing)
    leading = 0
    while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
        leading += 1
    if leading < len(results):
        return Refusal(
            f"messages.{index}: Did not find {len(results)} tool_result block(s) at the beginning "
            "of this message. Messages following tool_use blocks must begin with a matching "
            "number of tool_result blocks."
        )
    return None


def _without_results(index: int, ids: list[str]) -> Refusal:
    return Refusal(
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )


_RULES: dict[Api, Callable[[dict[str, Any]], Refusal | None]] = {
    "chat": _chat,
    "responses": _responses,
    "messages": _messages,
}
