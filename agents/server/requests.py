"""The request bodies of the agent server, parsed and checked before anything changes.

Each parser returns a small frozen value or raises :class:`~.errors.RequestError` naming the
field that is wrong — so a malformed body is a 400 with a JSON error and the session's state is
untouched. Field names are the seed's (camelCase on the wire).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import RequestError

__all__ = [
    "ResumeRequest",
    "StartRequest",
    "ToolResultRequest",
    "merge_patch",
    "parse_resume",
    "parse_start",
    "parse_tool_result",
    "query_int",
    "user_messages",
]


def _bad(message: str, **details: Any) -> RequestError:
    return RequestError(400, "BAD_REQUEST", message, **details)


def _object(body: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise _bad(f"{what} must be a JSON object, got {type(body).__name__}")
    return body


def _text(body: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _bad(f"{key} must be a non-empty string, got {value!r}", field=key)
    return value


@dataclass(frozen=True, slots=True)
class StartRequest:
    agent_type: str
    messages: tuple[dict[str, Any], ...]
    session_id: str
    user_id: str | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, str] | None = None
    parent_session_id: str | None = None
    root_session_id: str | None = None
    #: A parent's operation id: the same key twice re-attaches to the run it started.
    idempotency_key: str | None = None
    #: ``input.state``: the agent's state for this run (None: keep the state it has).
    state: Any = None


def user_messages(message: Any) -> tuple[dict[str, Any], ...]:
    """``input.message`` — a string or ``[{role: "user", content, metadata?, files?}]`` — as
    UI messages."""
    if isinstance(message, str):
        if not message.strip():
            raise _bad("input.message must not be empty", field="input.message")
        items: list[Any] = [{"role": "user", "content": message}]
    elif isinstance(message, list) and message:
        items = message
    else:
        raise _bad(
            "input.message must be a string or a non-empty list of user messages",
            field="input.message",
        )
    out = []
    for index, item in enumerate(items):
        where = f"input.message[{index}]"
        if not isinstance(item, Mapping) or item.get("role") != "user":
            raise _bad(f"{where} must be an object with role 'user'", field=where)
        content = item.get("content")
        if not isinstance(content, str):
            raise _bad(f"{where}.content must be a string", field=f"{where}.content")
        parts: list[dict[str, Any]] = [{"type": "text", "text": content}]
        files = item.get("files") or []
        if not isinstance(files, list):
            raise _bad(f"{where}.files must be a list", field=f"{where}.files")
        for file in files:
            if (
                not isinstance(file, Mapping)
                or not isinstance(file.get("data"), str)
                or not (isinstance(file.get("mediaType"), str))
            ):
                raise _bad(f"{where}.files entries need data and mediaType", field=where)
            parts.append(
                {
                    "type": "file",
                    "url": file["data"],
                    "mediaType": file["mediaType"],
                    **({"filename": file["filename"]} if file.get("filename") else {}),
                }
            )
        message_out: dict[str, Any] = {
            "id": f"u_{secrets.token_hex(8)}",
            "role": "user",
            "parts": parts,
        }
        if isinstance(item.get("metadata"), Mapping):
            message_out["metadata"] = dict(item["metadata"])
        out.append(message_out)
    return tuple(out)


def parse_start(body: Any) -> StartRequest:
    body = _object(body, "the /start body")
    agent_type = _text(body, "agentType")
    session_id = _text(body, "sessionId")
    data = _object(body.get("input"), "input")
    messages = user_messages(data.get("message"))
    state = data.get("state")
    if state is not None and not isinstance(state, Mapping):
        raise _bad("input.state must be a JSON object", field="input.state")
    tags = body.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _bad("tags must be a list of strings", field="tags")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise _bad("metadata must be an object of strings", field="metadata")
    return StartRequest(
        agent_type or "",
        messages,
        session_id or "",
        _text(body, "userId", required=False),
        tuple(tags),
        dict(metadata),
        _text(body, "parentSessionId", required=False),
        _text(body, "rootSessionId", required=False),
        _text(body, "idempotencyKey", required=False),
        dict(state) if state is not None else None,
    )


@dataclass(frozen=True, slots=True)
class ResumeRequest:
    mode: str
    checkpoint_id: str | None
    append_messages: tuple[dict[str, Any], ...]
    #: The seed's ``modifyState``: a JSON merge patch (RFC 7396) of the agent's state, or — in
    #: process, through :meth:`AgentServer.resume` — a function of the state to the new state.
    modify_state: Any = None
    #: ``options.approvals``: a person's decisions on the calls a ``suspended_approval`` run
    #: waits for (``{toolCallId, approved, reason?}`` each).
    approvals: tuple[ToolResultRequest, ...] = ()


def parse_resume(body: Any) -> ResumeRequest:
    body = _object(body if body is not None else {}, "the /resume body")
    options = _object(body.get("options") or {}, "options")
    mode = options.get("mode", "continue")
    if mode not in ("continue", "retry", "branch"):
        raise _bad(
            f"options.mode must be continue, retry or branch, got {mode!r}", field="options.mode"
        )
    checkpoint = _text(options, "checkpointId", required=False)
    if mode == "branch" and checkpoint is None:
        raise _bad("options.mode 'branch' needs options.checkpointId", field="options.checkpointId")
    appended = options.get("appendMessages") or []
    if not isinstance(appended, list):
        raise _bad("options.appendMessages must be a list", field="options.appendMessages")
    messages = user_messages(appended) if appended else ()
    patch = options.get("modifyState")
    if patch is not None and not isinstance(patch, Mapping):
        raise _bad(
            "options.modifyState must be a JSON object: a merge patch of the agent's state "
            f"(a key set to null is removed), got {type(patch).__name__}",
            field="options.modifyState",
        )
    raw = options.get("approvals") or []
    if not isinstance(raw, list):
        raise _bad("options.approvals must be a list of {toolCallId, approved, reason?}",
                   field="options.approvals")  # fmt: skip
    approvals = []
    for index, item in enumerate(raw):
        where = f"options.approvals[{index}]"
        item = _object(item, where)
        if "approved" not in item:
            raise _bad(f"{where} needs approved: true or false", field=where)
        try:
            approvals.append(parse_tool_result(item))
        except RequestError as exc:
            raise _bad(f"{where}: {exc}", field=where) from None
    return ResumeRequest(str(mode), checkpoint, messages, patch, tuple(approvals))


@dataclass(frozen=True, slots=True)
class ToolResultRequest:
    tool_call_id: str
    result: Any
    error: str | None
    #: An approval's answer (``{approved, reason?}``) instead of a result; None: a result.
    approved: bool | None = None
    reason: str | None = None


def parse_tool_result(body: Any) -> ToolResultRequest:
    body = _object(body, "the tool result body")
    call_id = _text(body, "toolCallId")
    if "approved" in body:
        approved = body["approved"]
        if not isinstance(approved, bool):
            raise _bad("approved must be true or false", field="approved")
        reason = body.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise _bad("reason must be a string", field="reason")
        return ToolResultRequest(call_id or "", None, None, approved, reason)
    if "result" not in body and "error" not in body:
        raise _bad("a tool result needs result (or error), or an approval's approved",
                   field="result")  # fmt: skip
    error = body.get("error")
    if error is not None and not isinstance(error, str):
        raise _bad("error must be a string", field="error")
    return ToolResultRequest(call_id or "", body.get("result"), error)


def query_int(params: Mapping[str, str], key: str, default: int, lo: int, hi: int) -> int:
    """An integer query parameter within ``lo..hi`` (else a 400 naming it)."""
    raw = params.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _bad(f"{key} must be a whole number, got {raw!r}", field=key) from None
    if not lo <= value <= hi:
        raise _bad(f"{key} must be between {lo} and {hi}, got {value}", field=key)
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7396): objects merge key by
    key, ``null`` removes a key, anything else replaces. (Ten lines of a short RFC: a library
    for it would be a dependency on Cloudflare's Python runtime for no gain.)"""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
