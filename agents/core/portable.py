"""Idioms that behave the same on doemu and on Cloudflare's Python runtime (Pyodide in workerd).

On Cloudflare, Python code talks to JavaScript APIs through Pyodide's FFI, and a few rules of that
boundary break code that CPython accepts (doemu enforces the same rules by default, so a mistake
shows locally). These helpers are the portable way through each rule; user code may use them too
(``from agents import wait_until, js_array, js_object, from_js``):

* :func:`wait_until` — a Durable Object's ``ctx.waitUntil`` wants a JavaScript promise. A Python
  coroutine handed to it is converted to a *borrowed* proxy that Pyodide destroys as soon as the
  call returns, so the coroutine never runs ("This borrowed proxy was automatically
  destroyed…"); a bare ``asyncio`` task is refused the same way. The working form schedules the
  awaitable as a task, hands JavaScript a long-lived proxy of it, and destroys that proxy when the
  task is done.
* :func:`js_array`, :func:`js_object` — JavaScript APIs that want an Array or a plain Object
  (``ctx.acceptWebSocket(ws, tags)``, ``ws.serializeAttachment(value)``) refuse Python lists and
  dicts ("parameter 2 is not of type 'Array'", ``DataCloneError``); ``to_js`` converts them, and a
  dict needs ``dict_converter=Object.fromEntries`` to become an Object rather than a Map.
* :func:`from_js` — a value read back from a JavaScript API (``ws.deserializeAttachment()``) is a
  JavaScript value: ``jsnull`` for "nothing" (which is not ``None``), a proxy for an object (which
  cannot be subscripted until converted with ``.to_py()``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar

from js import Object
from pyodide.ffi import JsProxy, create_proxy, to_js

__all__ = ["from_js", "js_array", "js_object", "settle_in_background", "wait_until"]

T = TypeVar("T")

_log = logging.getLogger("agents")

_jsnull: object
try:  # Pyodide 0.28+; before it, JavaScript null arrived as None
    from pyodide.ffi import jsnull as _jsnull
except ImportError:  # pragma: no cover - depends on the runtime's Pyodide
    _jsnull = None


def wait_until(ctx: Any, awaitable: Awaitable[T]) -> asyncio.Future[T]:
    """Run ``awaitable`` in the background and keep the object alive until it settles.

    Returns the task, so a caller may still await it or cancel it. What the runtime waits for is
    :func:`_kept` of the task: an error of the task fails it (the runtime logs it, on Cloudflare
    as "uncaught exception"), a cancellation settles it quietly — cancelling one's own background
    work is not an error, and on Cloudflare a cancelled task handed to ``waitUntil`` is logged as
    an uncaught ``CancelledError``. When the runtime cancels what it waits for (doemu resetting
    an object), the task is cancelled too.
    """
    task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
    kept = _kept(task)
    proxy = create_proxy(kept)
    kept.add_done_callback(lambda _done: proxy.destroy())
    ctx.waitUntil(proxy)
    return task


def _kept(task: asyncio.Future[Any]) -> asyncio.Future[None]:
    """A future that settles when ``task`` does: its error, or ``None`` (also when cancelled);
    cancelling it cancels ``task``."""
    kept: asyncio.Future[None] = task.get_loop().create_future()

    def settle(done: asyncio.Future[Any]) -> None:
        if kept.done():
            return
        error = None if done.cancelled() else done.exception()
        if error is None:
            kept.set_result(None)
        else:
            kept.set_exception(error)

    def propagate(settled: asyncio.Future[None]) -> None:
        if settled.cancelled():
            task.cancel()

    task.add_done_callback(settle)
    kept.add_done_callback(propagate)
    return kept


def settle_in_background(result: Any, what: str) -> None:
    """Observe the promise a JavaScript call returned when the caller cannot ``await`` it.

    Storage calls take effect when made, on Cloudflare as on doemu, so a synchronous caller may
    fire ``storage.setAlarm(...)`` without awaiting. On Cloudflare the SDK's wrapper returns a
    coroutine for the promise: left alone it logs "coroutine was never awaited" and its error is
    lost. This runs it to completion and logs a failure, naming ``what``.
    """
    if not asyncio.iscoroutine(result):
        return  # doemu's already-settled results report their own errors
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        result.close()
        return

    def done(task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            _log.error("%s failed: %r", what, task.exception())

    loop.create_task(result).add_done_callback(done)


def js_array(items: Iterable[Any]) -> Any:
    """A JavaScript Array of ``items`` (e.g. ``ctx.acceptWebSocket(ws, js_array(["room"]))``)."""
    return to_js(list(items))


def js_object(mapping: Mapping[str, Any]) -> Any:
    """A plain JavaScript Object of ``mapping``, nested dicts included (not a ``Map``)."""
    return to_js(dict(mapping), dict_converter=Object.fromEntries)


def from_js(value: Any) -> Any:
    """A value read back from a JavaScript API, as Python data: ``jsnull`` → ``None``, a
    JavaScript object or array → ``dict``/``list`` (``.to_py()``), anything else unchanged."""
    if value is None or (_jsnull is not None and value is _jsnull):
        return None
    if isinstance(value, JsProxy):
        return value.to_py()
    return value
