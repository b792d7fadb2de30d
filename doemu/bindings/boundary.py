"""The JavaScript boundary a binding call crosses on Cloudflare, reproduced in Python.

On Cloudflare ``env.KV`` (and every other binding) is a JS object behind the Python SDK's
``_BindingWrapper``: each argument goes through ``python_to_rpc`` (dicts become JS objects,
``None`` becomes ``null``, tuples are refused), keyword arguments become one trailing JS options
object (Pyodide's rule for calling a JS function with keywords), and the result comes back
through ``python_from_rpc``: plain JS objects as ``JsDict``, ``null`` as ``None``, an
``ArrayBuffer`` as a ``memoryview``, and a JS number as an ``int`` when it is a safe integer
(else a ``float``). :func:`js_arguments` and :func:`to_python` are those two conversions, so a
binding method written in JS terms (positional arguments, an options object) sees exactly what
its JS twin would, and user code gets exactly what it would get there.

:func:`js_string` is JavaScript's ``String(value)``, which a JS binding applies to a key given as
a number or ``None``; :func:`settled` and :func:`after` are the promises binding methods return.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any, TypeVar

from ..compat import _state
from ..compat.rpc import JsDict, python_to_rpc
from ..storage.resolved import Resolved, rejected
from .errors import BindingError, BindingSyntaxError

__all__ = [
    "MAX_SAFE_INTEGER",
    "After",
    "after",
    "before_call",
    "call",
    "js_arguments",
    "js_json_parse",
    "js_number",
    "js_string",
    "option",
    "rejected",
    "settled",
    "to_python",
]

T = TypeVar("T")

#: ``Number.MAX_SAFE_INTEGER``: larger integers lose precision as JS numbers.
MAX_SAFE_INTEGER = 2**53 - 1


def js_arguments(args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
    """The JS arguments of a call made with ``args`` and ``kwargs`` from Python.

    Every value is checked as ``python_to_rpc`` checks it (tuples, bytearrays and awaitables are
    refused with a ``TypeError``); keywords become one options object after the positional
    arguments, so ``get("k", type="json")`` is ``get("k", {type: "json"})``, and
    ``get("k", "json", cacheTtl=60)`` passes the options third, where ``get`` ignores them.
    """
    values = [python_to_rpc(arg) for arg in args]
    if kwargs:
        values.append({key: python_to_rpc(value) for key, value in kwargs.items()})
    return values


def option(options: Any, name: str) -> Any:
    """``options[name]`` of a JS options argument (``None`` when absent or not an object)."""
    if isinstance(options, Mapping):
        return options.get(name)
    return None


def js_number(value: float) -> int | float:
    """A JS number as Pyodide hands it to Python: an ``int`` when it is a safe integer."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= MAX_SAFE_INTEGER else float(value)
    if math.isfinite(value) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return value


def to_python(value: Any) -> Any:
    """A JS value as ``python_from_rpc`` gives it to Python (see the module docstring)."""
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int | float):
        return js_number(value)
    if isinstance(value, Mapping):
        return JsDict({str(k): to_python(v) for k, v in value.items()})
    if isinstance(value, list):
        return [to_python(item) for item in value]
    if isinstance(value, bytes | bytearray):
        return memoryview(bytes(value))
    return value


def js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for the values Python code passes to a binding."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) <= MAX_SAFE_INTEGER else _js_float(float(value))
    if isinstance(value, float):
        return _js_float(value)
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    if isinstance(value, Mapping):
        return "[object Object]"
    return str(value)


def _js_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value).replace("e-0", "e-")


def js_json_parse(text: str) -> Any:
    """``JSON.parse(text)`` (its ``SyntaxError`` texts as V8 words the common ones)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text):
            raise BindingSyntaxError("Unexpected end of JSON input") from None
        shown = text if len(text) <= 30 else text[:30] + "..."
        raise BindingSyntaxError(
            f"Unexpected token '{text[exc.pos]}', \"{shown}\" is not valid JSON"
        ) from None


def before_call() -> asyncio.Future[None] | None:
    """Called from inside an object, a binding call is output: the object's writes are
    committed first, and the call waits for what the output gate says (fsyncs at power
    durability), as a call to another object does."""
    return _state.before_output(hold=False)


#: Calls that had to wait for their object's output gate, kept until they finish (an unawaited
#: call still runs to its end, as a JS promise does).
_waiting: set[asyncio.Task[Any]] = set()


def call(work: Callable[[], Awaitable[T]]) -> Awaitable[T]:
    """Run a binding method's ``work`` as its JS twin would: at once, or, called from an object
    whose output gate holds output, once the gate opens. A :class:`BindingError` it raises
    becomes a rejected promise, as a JS binding rejects rather than throws."""
    barrier = before_call()
    if barrier is None:
        try:
            result = work()
        except BindingError as exc:
            return rejected(exc)
        if not inspect.iscoroutine(result):
            return result
        # Work that waits (file I/O, a stream) runs as a task: it happens even unawaited.
        return _keep(asyncio.ensure_future(result))
    return _keep(asyncio.ensure_future(_after_gate(barrier, work)))


def _keep(task: asyncio.Task[T]) -> asyncio.Task[T]:
    _waiting.add(task)
    task.add_done_callback(_waiting.discard)
    return task


async def _after_gate(barrier: asyncio.Future[None], work: Callable[[], Awaitable[T]]) -> T:
    await barrier
    return await work()


def settled(value: T) -> Resolved[T]:
    """An already-resolved promise of ``value`` (the work was done when the method was called)."""
    return Resolved(value)


class After(Awaitable[T]):
    """A promise that resolves to ``value`` once ``durable`` (an fsync) has completed.

    The write is on its way to the disk whether or not the caller awaits: like a JS promise,
    not awaiting it does not undo it; awaiting it is what makes the caller wait for the disk.
    """

    __slots__ = ("_durable", "_value")

    def __init__(self, durable: asyncio.Future[None], value: T) -> None:
        self._durable = durable
        self._value = value

    def __await__(self) -> Generator[Any, None, T]:
        yield from self._durable.__await__()
        return self._value


def after(durable: asyncio.Future[None] | None, value: T) -> Awaitable[T]:
    """``value`` once ``durable`` completes; at once when there is nothing to wait for."""
    if durable is None:
        return Resolved(value)
    return After(durable, value)
