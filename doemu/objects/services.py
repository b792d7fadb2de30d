"""What the runtime hands each object host: its class, and the few services a host may use.

A host lives inside a runtime but must not reach into it: everything it needs crosses this one
protocol, so reading :class:`HostServices` tells you the whole of what an object can do to the
rest of the process (open its storage, report its alarm and its lifecycle, keep a task alive).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..clock import Clock
from ..storage import ObjectStorage

__all__ = ["ClassSpec", "Evictable", "HostServices", "ObjectClass"]


@dataclass(frozen=True)
class ClassSpec:
    """A Durable Object class as the runtime needs it: the class and whether it has SQL."""

    cls: type
    sql: bool = True


@dataclass(frozen=True)
class ObjectClass:
    """One namespace as its hosts see it: the class, its binding, where its files live."""

    spec: ClassSpec
    class_name: str
    binding: str
    unique_key: str
    directory: Path

    @property
    def cls(self) -> type:
        return self.spec.cls


class Evictable(Protocol):
    """What idle eviction and the live-object cap need of a host."""

    idle_deadline: float | None
    in_idle_heap: bool

    @property
    def hex_id(self) -> str: ...

    @property
    def live(self) -> bool: ...

    @property
    def busy(self) -> bool:
        """Something keeps the object in memory (an event, ``waitUntil``, a pinning socket)."""

    def evict_now(self) -> None:
        """Drop the instance now (graceful: pending writes are committed)."""


class HostServices(Protocol):
    """The runtime's side of every object host (implemented by :class:`doemu.runtime.Runtime`)."""

    @property
    def clock(self) -> Clock: ...

    @property
    def env(self) -> Any:
        """The ``env`` passed to every constructor."""

    @property
    def closed(self) -> bool:
        """True once the runtime shuts down: no new event may start."""

    def open_storage(
        self,
        path: Path,
        *,
        sql_enabled: bool,
        has_alarm_handler: bool,
        on_alarm_commit: Callable[[float | None], None],
        on_alarm_prepare: Callable[[float | None], asyncio.Future[None] | None],
        on_commit_failed: Callable[[BaseException], None],
        exclusive: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
    ) -> ObjectStorage:
        """A storage connection on the object file ``path`` (limits, file pool and durability
        applied)."""

    def alarm_committed(self, key: tuple[str, str], when: float | None, name: str | None) -> None:
        """A transaction that changed the alarm of object ``key`` committed (None: deleted)."""

    def alarm_prepared(
        self, key: tuple[str, str], when: float | None, name: str | None
    ) -> asyncio.Future[None] | None:
        """Object ``key`` is about to commit alarm time ``when`` (None: put back a deletion);
        returns what the commit must wait for first, if anything."""

    def preempting(self) -> bool:
        """Whether an event about to start should first let due alarms begin."""

    def activated(self, host: Evictable) -> None:
        """``host`` constructed its instance (counts towards the live-object cap)."""

    def deactivated(self, host: Evictable) -> None:
        """``host`` dropped its instance (evicted or reset)."""

    def idle(self, host: Evictable) -> None:
        """``host`` has nothing in flight: its idle window starts."""

    def emit(self, type_: str, **fields: Any) -> None:
        """A lifecycle event (``constructed``, ``evicted``, ``reset``)."""

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep ``task`` (an event run outside its caller's task) until it ends or shutdown."""
