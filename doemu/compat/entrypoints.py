"""What the ``workers`` module defines itself: entrypoint base classes, ``env``, ``waitUntil``.

User code imports these through ``workers`` (:mod:`doemu.compat.workers`, which holds exactly
Cloudflare's names); this module may hold helpers besides. Names and signatures
follow Cloudflare's SDK (``cloudflare/workers-py``, ``packages/runtime-sdk/src/workers``): Python
style where the SDK is Python style (``status_text``, ``web_socket``), JS names where the SDK
passes JS objects through (``ctx.storage``, ``acceptWebSocket``, ``waitUntil``).

``env`` and ``waitUntil`` / ``wait_until`` forward to what the runtime registered with
``doemu.compat.set_env`` / ``set_wait_until``, so ``from workers import env`` at import time keeps
working when the runtime changes its env later.
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from . import _state

__all__ = [
    "Context",
    "DurableObject",
    "WorkerEntrypoint",
    "WorkflowEntrypoint",
    "env",
    "handler",
    "import_from_javascript",
    "patch_env",
    "waitUntil",
    "wait_until",
]

F = TypeVar("F", bound=Callable[..., Any])


class Context(Protocol):
    """What ``ctx`` offers every entrypoint: ``waitUntil``."""

    def waitUntil(self, other: Awaitable[Any]) -> None: ...


class DurableObject:
    """Base class of a Durable Object: ``__init__(self, ctx, env)`` keeps both as attributes."""

    ctx: Any
    env: Any

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class WorkerEntrypoint:
    """Base class of a Worker entrypoint (``class Default(WorkerEntrypoint)`` in ``main``)."""

    ctx: Any
    env: Any

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class WorkflowEntrypoint:
    """Base class of a Workflow entrypoint: ``[[workflows]]`` names a subclass whose
    ``run(event, step)`` doemu runs durably (see :mod:`doemu.bindings.workflows`)."""

    ctx: Any
    env: Any

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


def handler(func: F) -> F:
    """Cloudflare's ``@handler`` converts JS arguments to Python ones; here they already are."""
    return func


#: What ``patch_env`` overrides in the current context (innermost last).
_patches: contextvars.ContextVar[tuple[Mapping[str, Any], ...]] = contextvars.ContextVar(
    "doemu_env_patches", default=()
)


class _GlobalEnv:
    """``workers.env``: forwards every attribute to the env the runtime registered."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        for patch in reversed(_patches.get()):
            if name in patch:
                return patch[name]
        return getattr(_state.get_env(), name)

    def __repr__(self) -> str:
        try:
            return repr(_state.get_env())
        except AttributeError:
            return "<workers.env (not set)>"


env: Any = _GlobalEnv()


def waitUntil(awaitable: Awaitable[Any]) -> None:
    """Keep the current request (or object) alive until ``awaitable`` settles."""
    _state.get_wait_until()(awaitable)


wait_until = waitUntil


@contextlib.contextmanager
def patch_env(
    d: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None, **kwds: Any
) -> Iterator[None]:
    """Override attributes of ``workers.env`` inside the ``with`` block (this context only)."""
    values = {**dict(d or {}), **kwds}
    token = _patches.set((*_patches.get(), values))
    try:
        yield
    finally:
        _patches.reset(token)


def import_from_javascript(module_name: str) -> Any:
    """A JavaScript module. ``cloudflare:workers`` gives ``env`` and ``waitUntil``; there is no
    JavaScript locally, so any other module fails with an ``ImportError`` naming it."""
    if module_name == "cloudflare:workers":
        return types.SimpleNamespace(env=env, waitUntil=waitUntil)
    raise ImportError(
        f"import_from_javascript({module_name!r}): doemu runs Python natively and has no "
        "JavaScript modules; only 'cloudflare:workers' (env, waitUntil) is available locally"
    )
