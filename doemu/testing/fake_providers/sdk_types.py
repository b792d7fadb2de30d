"""Request bodies checked against the official SDKs' request types, field by field.

The ``openai`` and ``anthropic`` SDKs describe every request body as ``TypedDict`` params
(``CompletionCreateParamsStreaming``, ``ResponseCreateParamsStreaming``,
``MessageCreateParamsStreaming`` and everything they nest). A fake that accepted any JSON would
prove only that an adapter parses the answers; this module makes it refuse what the real API
refuses: a missing required field, a field the type does not have, a value of the wrong type, a
literal outside its set. pydantic's ``TypeAdapter`` cannot do it alone — it validates iterables
lazily and ignores unknown keys of a ``TypedDict`` — so the types are walked here, with the
SDK's own hints (``Required``/``NotRequired``, ``Literal``, unions, ``PropertyInfo`` aliases);
a pydantic model met inside (Anthropic accepts its response blocks as input) is validated by
pydantic itself.

:func:`check_body` answers the first :class:`Problem` (``None``: the body fits), which
:mod:`.request_rules` renders in each provider's words. The SDKs are dev dependencies of doemu:
without them installed nothing is checked here (the cross-message rules still are).
"""

from __future__ import annotations

import collections.abc
import functools
import types
import typing
from dataclasses import dataclass, replace
from typing import Any, Literal

import typing_extensions

from .script import Api

__all__ = ["Problem", "check_body", "preload", "request_type"]

ProblemKind = Literal["missing", "unknown", "type", "value"]
Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a body does not fit: ``kind`` at ``path``, ``expected`` in words (a ``value``
    problem lists the allowed ``choices``), and the value found."""

    path: Path
    kind: ProblemKind
    expected: str = ""
    got: Any = None
    choices: tuple[Any, ...] = ()
    #: Found inside an object whose discriminator (a literal field it has) matched: the value
    #: was meant to be of that type.
    matched: bool = False


def request_type(api: Api, body: dict[str, Any]) -> Any | None:
    """The SDK's params type for a request of ``api`` (streaming or not, as the body says), or
    ``None`` when the SDK is not installed."""
    stream = body.get("stream") is True
    try:
        if api == "chat":
            from openai.types.chat import completion_create_params as chat

            return (
                chat.CompletionCreateParamsStreaming
                if stream
                else chat.CompletionCreateParamsNonStreaming
            )
        if api == "responses":
            from openai.types.responses import response_create_params as responses

            return (
                responses.ResponseCreateParamsStreaming
                if stream
                else responses.ResponseCreateParamsNonStreaming
            )
        from anthropic.types import message_create_params as messages

        return (
            messages.MessageCreateParamsStreaming
            if stream
            else messages.MessageCreateParamsNonStreaming
        )
    except ImportError:
        return None


def preload() -> None:
    """Import the SDKs' types now (seconds, once per process), not on a server's first
    request, where the wait would hold its event loop."""
    for api in ("chat", "responses", "messages"):
        request_type(api, {})


def check_body(api: Api, body: dict[str, Any]) -> Problem | None:
    """The first way ``body`` does not fit the SDK's request type for ``api``, or ``None``."""
    params = request_type(api, body)
    return None if params is None else _check(body, params, ())


_REQUIRED = {typing.Required, typing_extensions.Required}
_NOT_REQUIRED = {typing.NotRequired, typing_extensions.NotRequired}
_LITERAL = {typing.Literal, typing_extensions.Literal}
_SEQUENCES = {
    list,
    collections.abc.Iterable,
    collections.abc.Sequence,
    collections.abc.Collection,
    typing.List,  # noqa: UP006 (the SDKs' own spelling)
}
_ALIASES: tuple[type, ...] = tuple(
    {
        typing_extensions.TypeAliasType,
        getattr(typing, "TypeAliasType", typing_extensions.TypeAliasType),
    }
)
_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping, typing.Dict}  # noqa: UP006


def _unwrap(tp: Any) -> Any:
    """``tp`` without ``Annotated``, ``Required``/``NotRequired`` and type-alias indirection."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated or origin in _REQUIRED or origin in _NOT_REQUIRED:
            tp = typing.get_args(tp)[0]
        elif isinstance(tp, _ALIASES):
            tp = getattr(tp, "__value__", Any)
        else:
            return tp


@functools.cache
def _fields(cls: Any) -> dict[str, tuple[str, Any, bool]]:
    """A ``TypedDict``'s fields by their wire name: ``(python name, type, required)``."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: dict[str, tuple[str, Any, bool]] = {}
    for name, hint in hints.items():
        wire, required, inner = name, name in getattr(cls, "__required_keys__", ()), hint
        while True:
            origin = typing.get_origin(inner)
            if origin in _REQUIRED:
                required, inner = True, typing.get_args(inner)[0]
            elif origin in _NOT_REQUIRED:
                required, inner = False, typing.get_args(inner)[0]
            elif origin is typing.Annotated:
                for meta in getattr(inner, "__metadata__", ()):
                    alias = getattr(meta, "alias", None)
                    if isinstance(alias, str):
                        wire = alias
                inner = typing.get_args(inner)[0]
            else:
                break
        out[wire] = (name, inner, required)
    return out


@functools.cache
def _discriminators_first(cls: Any) -> tuple[tuple[str, tuple[str, Any, bool]], ...]:
    """A ``TypedDict``'s fields with the literal-typed ones (``type``, ``role``) first: a value
    of another union member is told apart by them before a missing field of this one counts."""
    fields = list(_fields(cls).items())
    literal = [item for item in fields if typing.get_origin(_unwrap(item[1][1])) in _LITERAL]
    return (*literal, *(item for item in fields if item not in literal))


def _is_model(tp: Any) -> bool:
    try:
        from pydantic import BaseModel
    except ImportError:  # pragma: no cover - the SDKs depend on pydantic
        return False
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _describe(tp: Any) -> str:
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if tp is str:
        return "a string"
    if tp is bool:
        return "a boolean"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is type(None) or tp is None:
        return "null"
    if typing_extensions.is_typeddict(tp) or _is_model(tp) or origin in _MAPPINGS or tp is dict:
        return "an object"
    if origin in _SEQUENCES or tp in _SEQUENCES:
        return "an array"
    if origin in _LITERAL:
        return " or ".join(repr(v) for v in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_describe(m) for m in typing.get_args(tp)))
    return getattr(tp, "__name__", str(tp))


def _check(value: Any, tp: Any, path: Path) -> Problem | None:
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if tp is Any or tp is object:
        return None
    if tp is None or tp is type(None):
        return None if value is None else Problem(path, "type", "null", value)
    if origin in _LITERAL:
        choices = typing.get_args(tp)
        ok = any(value == c and type(value) is type(c) for c in choices)
        return None if ok else Problem(path, "value", _describe(tp), value, choices)
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, typing.get_args(tp), path)
    if tp is str:
        return None if isinstance(value, str) else Problem(path, "type", "a string", value)
    if tp is bool:
        return None if isinstance(value, bool) else Problem(path, "type", "a boolean", value)
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else Problem(path, "type", "an integer", value)
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else Problem(path, "type", "a number", value)
    if typing_extensions.is_typeddict(tp):
        return _check_typeddict(value, tp, path)
    if _is_model(tp):
        return _check_model(value, tp, path)
    if origin in _SEQUENCES or tp in _SEQUENCES:
        if not isinstance(value, list):
            return Problem(path, "type", "an array", value)
        (item,) = typing.get_args(tp) or (Any,)
        for index, element in enumerate(value):
            if (problem := _check(element, item, (*path, index))) is not None:
                return problem
        return None
    if origin in _MAPPINGS or tp in _MAPPINGS:
        if not isinstance(value, dict):
            return Problem(path, "type", "an object", value)
        args = typing.get_args(tp)
        item = args[1] if len(args) == 2 else Any
        for key, element in value.items():
            if (problem := _check(element, item, (*path, str(key)))) is not None:
                return problem
        return None
    # Anything else (file uploads, dates…) cannot be a JSON value the SDK sends as itself.
    return Problem(path, "type", _describe(tp), value)


def _check_typeddict(value: Any, tp: Any, path: Path) -> Problem | None:
    if not isinstance(value, dict):
        return Problem(path, "type", "an object", value)
    fields = _fields(tp)
    matched = False
    for wire, (_, field_type, required) in _discriminators_first(tp):
        literal = _unwrap(field_type)
        choices = typing.get_args(literal) if typing.get_origin(literal) in _LITERAL else ()
        if wire not in value:
            if required:
                return Problem((*path, wire), "missing", _describe(field_type), None, choices,
                               matched)  # fmt: skip
            continue
        if (problem := _check(value[wire], field_type, (*path, wire))) is not None:
            return problem if problem.matched or not matched else replace(problem, matched=True)
        matched = matched or bool(choices)
    for key in value:
        if key not in fields:
            return Problem((*path, key), "unknown", got=value[key], matched=matched)
    return None


def _check_model(value: Any, tp: Any, path: Path) -> Problem | None:
    from pydantic import ValidationError

    if not isinstance(value, dict):
        return Problem(path, "type", "an object", value)
    try:
        tp.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = (*path, *error.get("loc", ()))
        kind: ProblemKind = "missing" if error.get("type") == "missing" else "type"
        return Problem(where, kind, str(error.get("msg", "")), error.get("input"))
    # The SDK's models accept extra keys (to read newer answers); a request must not have any.
    known = {field.alias or name for name, field in tp.model_fields.items()}
    for key in value:
        if key not in known:
            return Problem((*path, key), "unknown", got=value[key])
    return None


def _literal_mismatch(problem: Problem, path: Path) -> bool:
    """A union member refused on a literal field right under ``path`` (a discriminator such
    as ``type`` or ``role``, wrong or absent): the value is of another member, not a broken
    one of this."""
    return bool(problem.choices) and len(problem.path) == len(path) + 1


def _check_union(value: Any, members: tuple[Any, ...], path: Path) -> Problem | None:
    problems: list[tuple[Any, Problem]] = []
    for member in members:
        problem = _check(value, member, path)
        if problem is None:
            return None
        problems.append((member, problem))
    # Of a value that is no member's JSON kind: say which kinds would do.
    fitting = [(m, p) for m, p in problems if not (p.kind == "type" and p.path == path)]
    if not fitting:
        expected = " or ".join(dict.fromkeys(_describe(m) for m in members))
        return Problem(path, "type", expected, value)

    # The member the value was meant to be: one whose discriminator it matched, else the one
    # sharing most of its keys, else the one it got furthest into.
    def meant(item: tuple[Any, Problem]) -> tuple[bool, int, int]:
        member, problem = item
        shared = 0
        if isinstance(value, dict) and typing_extensions.is_typeddict(_unwrap(member)):
            shared = len(value.keys() & _fields(_unwrap(member)).keys())
        mismatch = _literal_mismatch(problem, path)
        return (problem.matched and not mismatch, shared, len(problem.path) - mismatch)

    _, best = max(fitting, key=meant)
    if not _literal_mismatch(best, path):
        return best
    # A wrong (or absent) discriminator: every value the members accept there.
    same = [p for _, p in fitting if p.path == best.path and _literal_mismatch(p, path)]
    choices = tuple(dict.fromkeys(c for p in same for c in p.choices))
    return replace(best, expected=" or ".join(repr(c) for c in choices), choices=choices)
