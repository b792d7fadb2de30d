"""``env.BINDING`` and its stubs: how one object (or the entry worker) reaches another.

A stub is created immediately and constructs nothing: the target is activated by its first call.
Arguments and results cross as structured-clone copies (msgpack), so no object can mutate another
object's memory, and an error raised in the callee reaches the caller with its type and message,
not as the same exception object. Before a call leaves an object, that object's pending writes are
committed (the output gate), exactly as for an HTTP response.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from .. import clone
from ..compat import call_relaxed, workers
from ..compat.readable import ReadableStream, core_of
from ..compat.rpc import check_rpc_value, from_rpc_result
from ..errors import DataCloneError, DoemuError, FetchError, ObjectResetError, RpcError
from ..ids import DurableObjectId
from ..jsboundary import JsException, is_strict
from ..sockets.registry import fetch_scope
from .diagnostics import explain, forgot_await, method_location, remote_cause
from .host import ObjectHost, current_host
from .namespace import Namespace

__all__ = ["DurableObjectNamespace", "DurableObjectStub", "python_error", "remote_fetch_error"]

#: doemu's own source folder: its frames are left out of a remote traceback.
_DOEMU_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

#: Names a stub never forwards as RPC: Python internals and the stub's own attributes.
_NOT_RPC = frozenset({"id", "name", "fetch", "then"})
#: The JavaScript options objects of the namespace methods (passed as keywords from Python).
_NEW_UNIQUE_ID = frozenset({"jurisdiction"})
_GET = frozenset({"locationHint", "routingMode", "retry"})


def _options(
    method: str,
    allowed: frozenset[str],
    options: Mapping[str, Any] | None,
    kwargs: Mapping[str, Any],
) -> None:
    """Accept Cloudflare's options for ``method`` (as a mapping or keywords); refuse the rest."""
    unknown = (set(options or {}) | set(kwargs)) - allowed
    if unknown:
        raise TypeError(
            f"{method}() got unknown options {sorted(unknown)}; Cloudflare's are {sorted(allowed)}"
        )


class DurableObjectNamespace:
    """What ``env.BINDING`` is: Cloudflare's ``DurableObjectNamespace``."""

    __slots__ = ("_ns",)

    def __init__(self, namespace: Namespace) -> None:
        self._ns = namespace

    def idFromName(self, name: str) -> DurableObjectId:
        return self._ns.ids.from_name(name)

    def newUniqueId(
        self, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> DurableObjectId:
        """A random id; ``jurisdiction=`` is accepted (there is one locality locally)."""
        _options("newUniqueId", _NEW_UNIQUE_ID, options, kwargs)
        return self._ns.ids.new_unique()

    def idFromString(self, text: str) -> DurableObjectId:
        return self._ns.ids.from_string(text)

    def get(
        self, object_id: DurableObjectId, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> DurableObjectStub:
        """The stub of ``object_id``; ``locationHint=``, ``routingMode=`` are accepted."""
        _options("get", _GET, options, kwargs)
        if not isinstance(object_id, DurableObjectId):
            raise TypeError(
                f"get() expects a DurableObjectId (from idFromName/newUniqueId/idFromString), "
                f"got {type(object_id).__name__}"
            )
        if not self._ns.ids.owns(str(object_id)):
            raise TypeError("Durable Object ID is not valid for this namespace.")
        return DurableObjectStub(self._ns, object_id)

    def getByName(
        self, name: str, options: Mapping[str, Any] | None = None, /, **kwargs: Any
    ) -> DurableObjectStub:
        _options("getByName", _GET, options, kwargs)
        return DurableObjectStub(self._ns, self._ns.ids.from_name(name))

    def jurisdiction(self, name: str) -> DurableObjectNamespace:
        """Jurisdictions do not exist locally; the same namespace is returned."""
        return self

    def __repr__(self) -> str:
        return f"DurableObjectNamespace({self._ns.class_name})"


class DurableObjectStub:
    """A handle on one object: ``await stub.fetch(...)`` and ``await stub.method(*args)``."""

    __slots__ = ("_ns", "id")

    def __init__(self, namespace: Namespace, object_id: DurableObjectId) -> None:
        self._ns = namespace
        self.id = object_id

    @property
    def name(self) -> str | None:
        return self.id.name

    async def fetch(self, resource: Any, **kwargs: Any) -> Any:
        """``fetch(resource, **options)`` sent to the object's ``fetch`` handler: its Response.

        As on Cloudflare, where ``stub.fetch`` is ``workers.fetch(..., fetcher=stub)``: the
        options are ``fetch()``'s (``method``, ``headers``, ``body``, …); a streamed body passes
        through in both directions without being buffered.
        """
        if "fetcher" in kwargs:
            raise TypeError("stub.fetch() got multiple values for keyword argument 'fetcher'")
        request = workers.Request._for_fetch(resource, kwargs)
        if not is_strict():
            return await self._deliver_fetch(request)
        try:
            return await self._deliver_fetch(request)
        except (ObjectResetError, DoemuError):
            raise
        except Exception as exc:
            raise remote_fetch_error(exc) from None

    #: ``workers.fetch(..., fetcher=stub.fetch)`` hands this fetcher the request itself.
    fetch.__doemu_fetcher__ = True  # type: ignore[attr-defined]

    async def _deliver_fetch(self, request: Any) -> Any:
        """doemu-internal: deliver a request the caller will not touch again (no copy)."""
        barrier = _gate_caller()
        if barrier is not None:
            await barrier

        accepted: set[Any] = set()  # the sockets this fetch accepts (see fetch_ended)

        def invoke(instance: Any) -> Any:
            fetch_scope.set(accepted)  # in the handler's context, which nothing else shares
            handler = getattr(instance, "fetch", None)
            if handler is None:
                raise RpcError(
                    f"Durable Object class {type(instance).__name__} has no fetch() handler."
                )
            return call_relaxed(handler, request)

        host = self._ns.host(self.id)
        try:
            response = await _invoke(host, "fetch", invoke)
        except BaseException:
            host.sockets.fetch_ended(None, accepted)  # sockets accepted by a fetch that failed
            raise
        if not isinstance(response, workers.Response):
            host.sockets.fetch_ended(None, accepted)
            raise RpcError(
                f"fetch() of {self._ns.class_name} must return a Response, "
                f"got {type(response).__name__}"
            )
        host.sockets.fetch_ended(response._web_socket, accepted)
        body = response._body
        if isinstance(body, ReadableStream):
            # The object stays in memory while a body it produces is still being read.
            host.wait_until(_held_while_read(host, core_of(body)))
        return response

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_") or method in _NOT_RPC:
            raise AttributeError(method)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                if is_strict():
                    # Pyodide passes keyword arguments to a JS function as one trailing object.
                    return await self._rpc(method, (*args, kwargs))
                raise RpcError(
                    f"RPC method {method}() was given keyword arguments {sorted(kwargs)}; "
                    "RPC calls take positional arguments only."
                )
            return await self._rpc(method, args)

        call.__name__ = method
        return call

    async def _rpc(self, method: str, args: tuple[Any, ...]) -> Any:
        strict = is_strict()
        if strict:
            check_rpc_value(list(args))  # the SDK refuses tuples etc. in the caller
        sent = clone.clone(list(args))
        if strict:
            sent = from_rpc_result(sent)  # what the callee's SDK gives it: JsDicts, memoryviews
        barrier = _gate_caller()
        if barrier is not None:
            await barrier
        class_name = self._ns.class_name

        def invoke(instance: Any) -> Any:
            fn = getattr(type(instance), method, None)
            if fn is None or not callable(fn):
                if strict:
                    raise UnknownMethodError(f"Method {method} does not exist")
                raise RpcError(f'The RPC receiver does not implement the method "{method}".')
            return getattr(instance, method)(*sent)

        try:
            result = await _invoke(self._ns.host(self.id), "rpc", invoke)
        except (ObjectResetError, UnknownMethodError):
            raise
        except Exception as exc:
            explain(exc)  # advice for a mistake doemu recognises, in what the caller sees
            if strict:
                raise python_error(exc) from None
            if isinstance(exc, DoemuError):
                raise
            cause = remote_cause(exc, class_name, method)  # the object's frames, for the caller
            raise _copy_exception(exc, class_name, method) from cause
        if strict:
            try:
                check_rpc_value(result)  # the SDK refuses these in the callee, after the method
            except TypeError as exc:
                self._unawaited(exc, result, method)
                raise python_error(exc) from None
        try:
            copied = clone.clone(result)
        except DataCloneError as exc:
            self._unawaited(exc, result, method)
            raise
        return from_rpc_result(copied) if strict else copied

    def _unawaited(self, exc: BaseException, result: Any, method: str) -> None:
        """A result refused because it is an awaitable (``return self.ctx.storage.get(k)``,
        no ``await``): say so, naming the method's file and line."""
        if inspect.isawaitable(result):
            exc.add_note(forgot_await(method_location(self._ns.kind.cls, method)))
            if inspect.iscoroutine(result):
                result.close()  # explained here: no "never awaited" warning on top

    def __repr__(self) -> str:
        return f"DurableObjectStub({self._ns.class_name}, {self.id})"


async def _invoke(host: ObjectHost, kind: str, fn: Callable[[Any], Any]) -> Any:
    """Deliver an event to ``host``, isolated from the caller when the caller is an object.

    From the server (no calling object) the event runs in the request's own task: the hot path.
    From another object's event it runs in a task of its own, awaited through ``shield``: a
    reset or cancellation of the caller then cannot cut the callee's handler short, exactly as
    a Durable Object keeps running when the worker that called it goes away.
    """
    if current_host.get() is None:
        return await host.call(kind, fn)
    task = asyncio.ensure_future(host.call(kind, fn))
    host.track(task)
    return await asyncio.shield(task)


async def _held_while_read(host: Any, core: Any) -> None:
    """Wait for the body to be read; if the object is reset first, the body fails with the
    reset's error (as workerd's does), so its reader is not left waiting forever."""
    try:
        await core.drained()
    except asyncio.CancelledError:
        reason = host.last_reset
        core.fail(reason if reason is not None else ObjectResetError("the object was reset"))
        raise


def _gate_caller() -> asyncio.Future[None] | None:
    """The calling object's output gate, before a call leaves it: what the call awaits first.

    It waits for what is committed to be durable, never for a commit a ``transaction()`` still
    holds back: that transaction may be waiting for this very call's answer.
    """
    host = current_host.get()
    return None if host is None else host.output_barrier(hold=False)


class UnknownMethodError(RpcError, JsException):
    """The callee has no such public method (workerd: ``TypeError: Method X does not exist``)."""

    js_name = "TypeError"


def python_error(exc: BaseException) -> JsException:
    """What a caller gets on Cloudflare when the callee's Python raised: a ``JsException``
    named ``PythonError`` whose message is the callee's traceback, not the exception itself
    (``except ValueError:`` in the caller does not catch it there). The traceback shows the
    user's frames; doemu's own are left out."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith(_DOEMU_DIR)
    ]
    text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
    text += "".join(traceback.format_exception_only(exc))
    return JsException("PythonError", text)


def remote_fetch_error(exc: BaseException) -> FetchError:
    """What ``stub.fetch()`` raises on Cloudflare when the object's ``fetch`` raised: Pyodide's
    ``AbortError`` (an ``OSError``) carrying the callee's traceback."""
    return FetchError(python_error(exc).message)


def _copy_exception(exc: Exception, class_name: str, method: str) -> Exception:
    """A fresh exception of the same type and message (errors cross by value, like RPC)."""
    try:
        copy = type(exc)(*exc.args)
    except Exception:
        return RpcError(f"{class_name}.{method}() raised {type(exc).__name__}: {exc}")
    return copy
