"""Service bindings (``services``) to this Worker's own entrypoints: ``fetch`` and RPC methods.

``[[services]] binding = "AUTH", service = "<this worker>", entrypoint = "Auth"`` makes
``env.AUTH`` a stub of the ``Auth(WorkerEntrypoint)`` class of the main module (``Default``
without an ``entrypoint``). Each call builds a fresh instance with ``(ctx, env)``, as Cloudflare
does per call: ``await env.AUTH.fetch(url_or_request, **options)`` gets its ``fetch``'s
``Response`` (redirects followed, as by any ``fetch()``, unless ``redirect="manual"``), and
``await env.AUTH.check(token)`` calls a method (``async`` or not). Values cross as they do
between two Python Workers on Cloudflare (checked on workerd-Python): arguments are
checked by ``python_to_rpc`` (tuples refused), keyword arguments become one trailing object (so
``f(1, b=3)`` receives ``(1, {"b": 3})``), and both arguments and the result are copied
(structured clone) and arrive as JS values do (``JsDict``, ``memoryview``, JS numbers). A method
that does not exist is ``TypeError: Method x does not exist``; an exception in the callee reaches
the caller as a ``JsException`` named ``PythonError`` carrying the callee's traceback, as on
Cloudflare and as between Durable Objects (with ``--lenient``: its own type and message). Names
starting with ``_`` are not callable, as for Durable Object stubs.

A binding to another Worker is refused with an error naming it on every call: doemu runs one
Worker per process (``doemu dev`` warns at start-up).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .. import clone
from ..compat import call_relaxed, workers
from ..compat.rpc import check_rpc_value
from ..config.bindings import ServiceBinding
from ..errors import DoemuError
from ..jsboundary import is_strict
from ..objects.stubs import python_error
from .boundary import call, js_arguments, to_python
from .entry import EntryHost, ExecutionContext, follow_redirects
from .errors import ServiceError

__all__ = ["Fetcher", "ServiceNotFound", "resolve_service"]

#: Attribute names a stub never turns into RPC calls.
_NOT_RPC = frozenset({"fetch", "connect", "then"})


class ServiceNotFound(DoemuError):
    """A service binding names an entrypoint the main module does not define (start-up)."""


class _MethodMissing(ServiceError):
    js_name = "TypeError"


def resolve_service(
    spec: ServiceBinding, worker_name: str, entrypoints: Mapping[str, type]
) -> type | None:
    """The class a local service binding calls, or None for another Worker's; raises
    :class:`ServiceNotFound` with workerd's start-up text when the class is missing."""
    if not spec.local:
        return None
    name = spec.entrypoint or "Default"
    cls = entrypoints.get(name)
    if cls is None:
        if spec.entrypoint is None:
            raise ServiceNotFound(
                f'Worker "{worker_name}"\'s binding "{spec.binding}" refers to service '
                f'"{worker_name}", which has no Default entrypoint (class Default('
                "WorkerEntrypoint) in the main module)"
            )
        raise ServiceNotFound(
            f'Worker "{worker_name}"\'s binding "{spec.binding}" refers to service '
            f'"{worker_name}" with a named entrypoint "{name}", but "{worker_name}" has no such '
            f"named entrypoint. (known: {', '.join(sorted(entrypoints)) or 'none'})"
        )
    return cls


class Fetcher:
    """``env.<binding>`` of a service binding (see the module docstring)."""

    __slots__ = ("_binding", "_cls", "_host", "_service")

    def __init__(self, spec: ServiceBinding, cls: type | None, host: EntryHost) -> None:
        self._binding = spec.binding
        self._service = spec.service
        self._cls = cls
        self._host = host

    def __repr__(self) -> str:
        target = self._cls.__name__ if self._cls is not None else f"Worker {self._service!r}"
        return f"<Fetcher {self._binding} → {target}>"

    def _target(self) -> type:
        if self._cls is None:
            raise ServiceError(
                f'env.{self._binding} is bound to the Worker "{self._service}", which doemu does '
                "not run (one Worker per process): bind to an entrypoint class of this Worker, "
                "or run that Worker separately"
            )
        return self._cls

    def _instance(self, ctx: ExecutionContext) -> Any:
        return self._target()(ctx, self._host.env)

    async def _invoke(self, method: Callable[[Any], Any]) -> Any:
        ctx = ExecutionContext(self._host.track)
        instance = self._instance(ctx)
        with self._host.entry_scope(ctx.waitUntil):
            result = method(instance)
            if inspect.isawaitable(result):
                result = await result
        return result

    def fetch(self, resource: Any, **kwargs: Any) -> Awaitable[Any]:
        """``fetch(resource, **options)`` delivered to the entrypoint's ``fetch``."""
        if "fetcher" in kwargs:
            raise TypeError("fetch() got multiple values for keyword argument 'fetcher'")
        request = workers.Request._for_fetch(resource, kwargs)

        async def send(request: Any) -> Any:
            self._target()

            def deliver(instance: Any) -> Any:
                handler = getattr(instance, "fetch", None)
                if handler is None:
                    raise _MethodMissing("Method fetch does not exist")
                return call_relaxed(handler, request)

            response = await self._invoke(deliver)
            if not isinstance(response, workers.Response):
                raise ServiceError(
                    f"fetch() of {self._target().__name__} must return a Response, "
                    f"got {type(response).__name__}"
                )
            return response

        return call(lambda: follow_redirects(send, request))

    #: ``workers.fetch(..., fetcher=env.SVC.fetch)`` hands this fetcher the request itself.
    fetch.__doemu_fetcher__ = True  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_") or name in _NOT_RPC:
            raise AttributeError(name)

        def method(*args: Any, **kwargs: Any) -> Awaitable[Any]:
            sent = clone.clone(js_arguments(args, kwargs))

            async def work() -> Any:
                cls = self._target()
                fn = getattr(cls, name, None)
                if fn is None or not callable(fn):
                    raise _MethodMissing(f"Method {name} does not exist")

                def rpc(instance: Any) -> Any:
                    return getattr(instance, name)(*(to_python(a) for a in sent))

                strict = is_strict()
                try:
                    result = await self._invoke(rpc)
                    if strict:
                        check_rpc_value(result)  # the callee's SDK refuses these, after the call
                except DoemuError:
                    raise
                except Exception as exc:
                    if strict:
                        raise python_error(exc) from None
                    raise _copy(exc, cls.__name__, name) from None
                return to_python(clone.clone(result))

            return call(work)

        method.__name__ = name
        return method


def _copy(exc: Exception, class_name: str, method: str) -> Exception:
    """A fresh exception of the same type and message (errors cross by value, like RPC)."""
    try:
        return type(exc)(*exc.args)
    except Exception:
        return ServiceError(f"{class_name}.{method}() raised {type(exc).__name__}: {exc}")
