"""The agent's lifecycle beyond activation: ``on_start(props)``, and ``destroy()``.

**Props.** A Worker passes startup properties with ``route_agent_request(..., props=...)``
(or :func:`agents.routing.get_agent_by_name`). As in the SDK they travel to the object in the
``x-agents-lifecycle-props`` header — base64 of the props' JSON — and are never stored: an
``on_start`` that needs them after an eviction keeps what it needs in ``state``. An ``on_start``
that takes a parameter therefore waits for the first event that can carry props (a fetch, a
WebSocket event, the alarm, or an explicit ``ensure_started``); it runs once per activation under
``blockConcurrencyWhile``, and one that raises is retried by the next event (the SDK's rule).

**Destroy.** :meth:`Lifecycle.destroy` writes the durable marker ``cf_agents_destroy_pending``
(the SDK's key) before it deletes anything, so a teardown that is cut short is finished by the
next activation before any other code runs; ``deleteAll()`` then removes every SQL table, every
key (the marker too) and the alarm. The object is reset afterwards (``ctx.abort("destroyed")``,
once the current event has answered), so no cache of the destroyed agent outlives it.
:meth:`Lifecycle.schedule_destroy` is the SDK's ``_cf_scheduleDestroy``: two fast writes (the
marker, an alarm one second out), the teardown running later in the alarm with its own budget.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from workers import Request

from .core.host import Core

__all__ = [
    "DESTROY_ALARM_DELAY_MS",
    "DESTROY_PENDING_KEY",
    "PROPS_HEADER",
    "Lifecycle",
    "decode_props",
    "encode_props",
    "header_pairs",
    "takes_props",
]

_log = logging.getLogger("agents.agent")

#: The SDK's durable "a destroy is under way" marker (a KV key, so it outlives dropped tables).
DESTROY_PENDING_KEY = "cf_agents_destroy_pending"
#: The SDK's delay before a scheduled teardown (lets the caller's answer leave first).
DESTROY_ALARM_DELAY_MS = 1_000
#: The SDK's header carrying routing props to the object.
PROPS_HEADER = "x-agents-lifecycle-props"


def encode_props(props: Any) -> str:
    """``props`` as the header carries them: base64 of their UTF-8 JSON."""
    return base64.b64encode(json.dumps(props).encode("utf-8")).decode("ascii")


def decode_props(value: str) -> Any:
    """The props a :data:`PROPS_HEADER` carries; raises ``ValueError`` for anything else."""
    try:
        return json.loads(base64.b64decode(value, validate=True).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{PROPS_HEADER} is not base64 of JSON: {exc}") from exc


def takes_props(on_start: Callable[..., Any]) -> bool:
    """Whether a (bound) ``on_start`` accepts a positional ``props`` argument."""
    try:
        parameters = inspect.signature(on_start).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                  inspect.Parameter.VAR_POSITIONAL)  # fmt: skip
    return any(p.kind in positional for p in parameters)


class Lifecycle:
    """The lazy ``on_start(props)`` and the destroy protocol of one agent instance."""

    __slots__ = (
        "_abort",
        "_core",
        "_run_on_start",
        "_starting",
        "destroyed",
        "lazy",
        "user_started",
    )

    def __init__(
        self, core: Core, on_start: Callable[..., Any], run: Callable[[Any], Awaitable[None]]
    ) -> None:
        self._core = core
        #: ``on_start`` takes props: it waits for the first event (see the module docstring).
        self.lazy = takes_props(on_start)
        self._run_on_start = run
        self._starting: asyncio.Future[None] | None = None
        self.user_started = False
        self.destroyed = False
        self._abort: asyncio.Task[None] | None = None

    # -- on_start(props) ------------------------------------------------------------------------
    async def ensure_started(self, props: Any = None) -> None:
        """Run the lazy ``on_start(props)`` once for this activation (no-op when it ran)."""
        if self.user_started or self.destroyed:
            return
        if self._starting is None:
            ctx = self._core.ctx
            self._starting = asyncio.ensure_future(
                ctx.blockConcurrencyWhile(lambda: self._run_on_start(props))
            )
        starting = self._starting
        try:
            await asyncio.shield(starting)
        except Exception:
            if self._starting is starting:
                self._starting = None  # the next event tries again, as the SDK's does
            raise
        self.user_started = True

    def take_props(self, request: Any) -> tuple[Any, Any]:
        """``(props, request)``: the props a request carries (``None`` without them; a bad header
        is logged) and the request without the internal header, as the SDK strips it."""
        value = request.headers.get(PROPS_HEADER)
        if not isinstance(value, str) or not value:
            return None, request
        request = Request(request, headers=header_pairs(request.headers, drop=(PROPS_HEADER,)))
        try:
            return decode_props(value), request
        except ValueError as exc:
            _log.error("agent: ignoring props: %s", exc)
            return None, request

    # -- destroy ----------------------------------------------------------------------------------
    async def pending(self) -> bool:
        """Whether a destroy was begun (or scheduled) and not finished."""
        return bool(await self._core.ctx.storage.get(DESTROY_PENDING_KEY))

    async def tear_down(self) -> None:
        """Delete everything: the marker first, then the alarm and all storage (SQL and KV)."""
        storage = self._core.ctx.storage
        await storage.put(DESTROY_PENDING_KEY, True)
        await storage.deleteAlarm()
        await storage.deleteAll()
        self.destroyed = True

    async def schedule(self) -> None:
        """Mark the agent condemned and let its alarm tear it down a second from now."""
        storage = self._core.ctx.storage
        await storage.put(DESTROY_PENDING_KEY, True)
        await storage.setAlarm(self._core.now() + DESTROY_ALARM_DELAY_MS)

    def reset_soon(self) -> None:
        """``ctx.abort("destroyed")`` once the current event has answered (the SDK's
        ``setTimeout(abort, 0)``): the next event builds a fresh instance on empty storage."""

        async def abort() -> None:
            await asyncio.sleep(0)
            try:
                self._core.ctx.abort("destroyed")
            except BaseException:  # the abort ends the calling code by raising; nothing to do
                pass

        self._abort = asyncio.get_running_loop().create_task(abort())


def header_pairs(
    headers: Any, extra: Mapping[str, str] | None = None, *, drop: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """``headers`` as ``(name, value)`` pairs, without the ``drop`` names, with ``extra``
    replacing the same names.

    On Cloudflare ``request.headers`` / ``response.headers`` is an ``http.client.HTTPMessage``:
    ``Request(headers=…)`` and ``Response(headers=…)`` refuse it ("Received unexpected type for
    headers argument") and its ``h[name] = value`` appends instead of replacing. Pairs are what
    both runtimes accept, and they keep repeated headers (``set-cookie``) apart."""
    extra = extra or {}
    gone = {name.lower() for name in (*drop, *extra)}
    kept = [(str(k), str(v)) for k, v in headers.items() if str(k).lower() not in gone]
    return kept + list(extra.items())
