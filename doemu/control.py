"""Operations on a running runtime: run an alarm now, evict, reset, move a manual clock.

What the admin API (and the CLI through it) and the test harness do to objects from outside, as
opposed to what objects do themselves. They are apart from :mod:`doemu.runtime` because they are
a different concern — control of a system under inspection — and because both the admin routes and
:class:`~doemu.testing.WorkerHarness` must behave exactly alike.
"""

from __future__ import annotations

import asyncio

from .clock import ManualClock
from .errors import DoemuError
from .runtime import Runtime

__all__ = ["RuntimeControl"]

_DEFAULT_RESET = "Durable Object reset by doemu."


class RuntimeControl:
    """Controls one :class:`Runtime` (addresses are a binding and a name or 64-hex id)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def pending_alarm(self, binding: str, name_or_id: str) -> float | None:
        """The object's pending alarm (ms), or None; never creates or wakes anything."""
        ns = self.runtime.namespace(binding)
        return self.runtime.alarms.pending((ns.unique_key, str(ns.resolve(name_or_id))))

    async def run_alarm(self, binding: str, name_or_id: str) -> bool:
        """Deliver the object's pending alarm now; False when it has none."""
        ns = self.runtime.namespace(binding)
        key = (ns.unique_key, str(ns.resolve(name_or_id)))
        if self.runtime.alarms.pending(key) is None:
            return False  # asked first: an object without an alarm is not even looked up
        return await self.runtime.alarms.run_now(key)

    async def evict(self, binding: str, name_or_id: str) -> bool:
        """Evict one object gracefully; False if it was not live (or a socket pins it)."""
        ns = self.runtime.namespace(binding)
        host = ns.hosts.get(str(ns.resolve(name_or_id)))
        return False if host is None else await host.evict()

    async def evict_all(self) -> int:
        """Evict every live object gracefully; returns how many were evicted."""
        results = await asyncio.gather(*(h.evict() for h in self.runtime.live_hosts()))
        return sum(1 for evicted in results if evicted)

    def reset(self, binding: str, name_or_id: str, reason: str | None = None) -> bool:
        """Abort in-flight work and drop the instance; False if the object was not live."""
        ns = self.runtime.namespace(binding)
        host = ns.hosts.get(str(ns.resolve(name_or_id)))
        was_live = host is not None and host.live
        if host is not None:
            host.reset(reason or _DEFAULT_RESET)
        return was_live

    def reset_all(self, reason: str | None = None) -> int:
        """Reset every live object; returns how many."""
        hosts = self.runtime.live_hosts()
        for host in hosts:
            host.reset(reason or _DEFAULT_RESET)
        return len(hosts)

    async def advance(self, ms: float) -> None:
        """Move a manual clock forward by ``ms``, running everything due in time order.

        Each due timer fires at its own time and its work (an alarm handler, a retry) runs to
        completion before time moves on, so a long advance replays retries exactly.
        """
        clock = self.runtime.clock
        if not isinstance(clock, ManualClock):
            raise DoemuError("advance() needs a manual clock; this runtime runs on real time")
        if ms < 0:
            raise ValueError(f"advance() expects ms >= 0, got {ms}")
        target = clock.now() + ms
        await self.settle()
        while True:
            due = clock.next_due()
            if due is None or due > target:
                break
            clock.set(max(due, clock.now()))
            await self.settle()
        clock.set(target)
        await self.settle()

    async def settle(self) -> None:
        """Let due work run: loop turns, then every running alarm delivery to completion."""
        runtime = self.runtime
        for _ in range(3):
            await asyncio.sleep(0)
        while runtime.alarms.running() or runtime.tracked():
            await runtime.alarms.idle()
            tracked = runtime.tracked()
            if tracked:
                await asyncio.gather(*tracked, return_exceptions=True)
            for _ in range(3):
                await asyncio.sleep(0)
