"""The JavaScript boundary's rules, as Cloudflare's Python runtime enforces them.

On Cloudflare, user code runs in Pyodide and reaches every JavaScript API through Pyodide's FFI.
Code that CPython happily runs fails there in a few recurring ways: a coroutine handed to a
Durable Object's ``ctx.waitUntil`` never runs, a Python list where JavaScript wants an Array is
refused, a dict cannot be structured-cloned, a value read back is a JavaScript value (``jsnull``,
a ``JsProxy``) rather than Python data. doemu's JS APIs apply the same rules, so the mistake shows
locally and not after deploying.

Strict by default. ``doemu dev --lenient`` (``DOEMU_LENIENT=1``, ``[tool.doemu] lenient = true``)
turns the rules off for code that relies on the old leniency; :func:`set_strict` is what the
runtime calls. Each JS API calls one of the ``accept_*`` functions here on what it is given,
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import sys
from collections.abc import Awaitable, Iterable
from typing import Any

from ..jsboundary import JsException, hinted, is_strict, set_strict
from .jsproxy import JsBuffer, _Proxy
from .jsvalues import JsArray, to_python

__all__ = [
    "BORROWED_PROXY_DESTROYED",
    "accept_array",
    "accept_entry_promise",
    "accept_promise",
    "is_strict",
    "js_array_result",
    "report_once",
    "set_strict",
    "websocket_send_value",
]

_log = logging.getLogger("doemu.boundary")
#: workerd's log line when a coroutine or a task reaches JavaScript as a borrowed proxy.
BORROWED_PROXY_DESTROYED = (
    "This borrowed proxy was automatically destroyed at the end of a function call. "
    "Try using create_proxy or create_once_callable."
)
#: doemu's own source folder: frames there are not "the caller".
_DOEMU_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _type_error(message: str) -> JsException:
    return JsException("TypeError", message)


def accept_array(value: Any, api: str, position: int) -> list[Any] | None:
    """What a JS API that wants an Array (or nothing) was given, as a Python list.

    A Python list or tuple is refused as workerd refuses it (``to_js`` makes an Array).
    """
    if value is None:
        return None
    if isinstance(value, JsArray):
        return to_python(value)  # type: ignore[no-any-return]
    if is_strict():
        raise hinted(
            _type_error(f"Failed to execute {api}: parameter {position} is not of type 'Array'."),
            f"a Python {type(value).__name__} is not a JavaScript Array on Cloudflare; pass "
            "to_js([...]) from pyodide.ffi",
        )
    if isinstance(value, str):
        raise _type_error(f"Failed to execute {api}: parameter {position} is not of type 'Array'.")
    return list(value) if isinstance(value, Iterable) else [value]


def accept_promise(value: Any, api: str) -> Awaitable[Any] | None:
    """What a Durable Object's ``ctx.waitUntil`` was given, as something to keep the object
    alive for — or ``None`` when, on Cloudflare, it would not be.

    Cloudflare's rule (observed on workerd with Pyodide): ``waitUntil`` needs a JavaScript
    promise. A coroutine is passed as a *borrowed* proxy that Pyodide destroys when the call
    returns, so the call returns normally, the coroutine never runs, and workerd logs "Uncaught
    (in promise) Error: This borrowed proxy was automatically destroyed…". An ``asyncio`` task
    fails the same way, but it was scheduled already, so it runs — without keeping the object
    alive. ``create_proxy(...)`` of either is a promise to JavaScript and works (the portable
    form is ``create_proxy(asyncio.ensure_future(coro))``, destroyed when the task is done:
    ``agents.wait_until(ctx, coro)``). doemu does exactly the same, and its log line also names
    the caller's line and the fix.
    """
    if isinstance(value, _Proxy):
        inner = value.unwrap()
        if inspect.isawaitable(inner):
            return inner
        raise _type_error(f"{api}(): the proxied value is not awaitable ({type(inner).__name__})")
    if is_strict() and (asyncio.iscoroutine(value) or isinstance(value, asyncio.Future)):
        if asyncio.iscoroutine(value):
            value.close()  # never runs, as on Cloudflare
            what = "a coroutine, which therefore never runs"
        else:
            what = "an asyncio task, which runs but does not keep the object alive"
        report_once(
            f"Uncaught (in promise) Error: {BORROWED_PROXY_DESTROYED} (doemu: {api}() was given "
            f"{what} on Cloudflare; pass "
            "create_proxy(asyncio.ensure_future(...)) from pyodide.ffi and destroy the proxy "
            "when the task is done, or use agents.wait_until(ctx, ...))"
        )
        return None
    if inspect.isawaitable(value):
        return value
    if callable(value):
        # workerd ignores a function silently; doemu says so (its own warning, once per place).
        report_once(
            f"doemu: {api}() was given a function ({getattr(value, '__name__', value)!r}), which "
            "Cloudflare ignores without a word: it never runs. Pass its result: "
            f"{api}(create_proxy(asyncio.ensure_future(fn())))"
        )
        return None
    raise _type_error(f"{api}() needs a promise, got {type(value).__name__}")


def accept_entry_promise(value: Any) -> Awaitable[Any] | None:
    """What a ``WorkerEntrypoint``'s ``self.ctx.waitUntil`` was given, as something to await.

    The SDK patches the entrypoint's ``waitUntil`` (unlike a Durable Object's), so a coroutine, a
    task and ``create_proxy(...)`` of either all run there; a function is ignored silently.
    """
    if isinstance(value, _Proxy):
        value = value.unwrap()
    if inspect.isawaitable(value):
        return value
    if callable(value):
        report_once(
            f"doemu: waitUntil() was given a function ({getattr(value, '__name__', value)!r}), "
            "which Cloudflare ignores without a word: it never runs. Pass its result."
        )
        return None
    raise _type_error(f"waitUntil() needs a promise, got {type(value).__name__}")


_reported: set[tuple[str, int, str]] = set()


def _caller() -> tuple[str, int]:
    """The first frame outside doemu: the user's line that crossed the boundary."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_DOEMU_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return ("<unknown>", 0)
    return (frame.f_code.co_filename, frame.f_lineno)


def report_once(message: str) -> None:
    """Log a boundary violation Cloudflare reports (not raises), once per place in user code."""
    filename, line = _caller()
    key = (filename, line, message)
    if key in _reported:
        return
    _reported.add(key)
    _log.error("%s\n  at %s:%d", message, filename, line)


def js_array_result(items: list[Any]) -> Any:
    """What a JS API returning an Array gives Python: a ``JsArray`` (a sequence, not a ``list``),
    or the plain list under ``--lenient``."""
    return JsArray(items) if is_strict() else items


def websocket_send_value(message: Any) -> Any:
    """What ``ws.send(message)`` puts on the wire, as on Cloudflare.

    workerd sends a JavaScript string as text and an ArrayBuffer or typed array as binary. A
    Python ``bytes`` (or ``bytearray``, ``memoryview``, ``dict``…) is none of those: it reaches
    JavaScript as a proxy, which ``send`` turns into a string, so the peer gets a *text* frame
    holding ``"b'\\x01…'"``, with no error (observed). doemu does the same and says so once per
    place; ``to_js(data)`` sends binary on both.
    """
    if isinstance(message, str | JsBuffer) or not is_strict():
        return message
    report_once(
        f"doemu: ws.send() was given a Python {type(message).__name__}; on Cloudflare it is sent "
        f"as a TEXT frame holding {str(message)[:40]!r}…, not as binary. Send to_js(data) (from "
        "pyodide.ffi) for a binary frame"
    )
    return str(message)
