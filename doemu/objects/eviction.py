"""Idle eviction and the live-object cap.

An object with nothing in flight is evicted after an idle window drawn uniformly from the
configured range (Cloudflare evicts after 70–140 s of inactivity; a single value fixes it).
Rather than one timer per object, the manager keeps a heap with at most one entry per idle object
and one clock timer for the earliest deadline: a request never cancels or re-arms a timer, it
only marks its object busy; the entry is checked (and re-queued if the object was used again)
when it comes due.

The cap on live objects bounds open file descriptors (each live object holds its SQLite file, WAL
and shared-memory file): activating one more than the cap evicts the least recently used idle
object first.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import random
import resource

from ..clock import Clock, TimerHandle
from .services import Evictable

__all__ = ["DEFAULT_MAX_LIVE", "EvictionManager", "default_live_cap", "live_cap"]

_log = logging.getLogger("doemu.eviction")

#: File descriptors a live object may hold: the database, its WAL and its shared-memory index.
FDS_PER_OBJECT = 3
#: Descriptors kept free for sockets, the metadata tables and everything else.
FD_RESERVE = 1024
#: Default cap on live objects. Each live object holds an SQLite connection (~170 KB of RSS,
#: mostly SQLite's own lookaside and the WAL index), so memory is bounded by the cap rather than
#: by how many objects exist (about 240 MB after 10,000 objects in BENCHMARKS.md); idle ones
#: beyond that are evicted least-recently-used first.
DEFAULT_MAX_LIVE = 1_000


def fd_live_limit() -> int | None:
    """How many objects the descriptor limit lets be live at once (None: no limit)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(64, (soft - FD_RESERVE) // (FDS_PER_OBJECT + 1))


def default_live_cap() -> int:
    """How many objects may be live at once: the default, lowered by the descriptor limit."""
    limit = fd_live_limit()
    return DEFAULT_MAX_LIVE if limit is None else min(DEFAULT_MAX_LIVE, limit)


def live_cap(requested: int | None) -> int:
    """The live cap to use: ``requested`` (or the default), never past the descriptor limit.

    A cap the process cannot hold open would fail activations with "unable to open database
    file" once the descriptors run out; it is lowered, with a warning, instead.
    """
    if requested is None:
        return default_live_cap()
    limit = fd_live_limit()
    if limit is not None and requested > limit:
        _log.warning(
            "max live objects %d needs more file descriptors than the limit allows "
            "(ulimit -n %d); using %d",
            requested,
            resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            limit,
        )
        return limit
    return requested


class EvictionManager:
    """Decides when live objects are dropped from memory."""

    def __init__(
        self,
        clock: Clock,
        idle_timeout: tuple[float, float],
        *,
        max_live: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        low, high = idle_timeout
        if low <= 0 or high < low:
            raise ValueError(f"idle timeout range must be 0 < low <= high, got {idle_timeout}")
        self._clock = clock
        self._range_ms = (low * 1000.0, high * 1000.0)
        self._rng = rng or random.Random()
        self.max_live = live_cap(max_live)
        self._live: collections.OrderedDict[Evictable, None] = collections.OrderedDict()
        self._heap: list[tuple[float, int, Evictable]] = []
        #: Heap entries of hosts deactivated since they were pushed (see ``deactivated``).
        self._stale = 0
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None
        self._closed = False

    @property
    def live_count(self) -> int:
        return len(self._live)

    def live_hosts(self) -> list[Evictable]:
        return list(self._live)

    def draw_window_ms(self) -> float:
        low, high = self._range_ms
        return low if low == high else self._rng.uniform(low, high)

    # -- notifications from hosts -------------------------------------------------------------
    def activated(self, host: Evictable) -> None:
        self._live[host] = None
        self._live.move_to_end(host)
        if len(self._live) > self.max_live:
            self._evict_lru(exclude=host)

    def deactivated(self, host: Evictable) -> None:
        self._live.pop(host, None)
        host.idle_deadline = None
        if host.in_idle_heap:
            # Its heap entry stays until it comes due (70-140 s by default), and holds the host:
            # after a burst of evictions (the live cap churning through 10,000 objects, an
            # evict-all) that would keep every evicted host in memory. Once most entries are
            # stale, the heap is rebuilt from the live ones: O(n) per n/2 evictions.
            self._stale += 1
            if self._stale > 256 and self._stale * 2 > len(self._heap):
                self._compact()

    def _compact(self) -> None:
        kept = []
        for entry in self._heap:
            host = entry[2]
            if host.live and host.idle_deadline is not None:
                kept.append(entry)
            else:
                host.in_idle_heap = False
        heapq.heapify(kept)
        self._heap = kept
        self._stale = 0

    def idle(self, host: Evictable) -> None:
        """``host`` has nothing in flight any more: start its idle window."""
        if not host.live:
            return
        if host in self._live:
            self._live.move_to_end(host)
        deadline = self._clock.now() + self.draw_window_ms()
        host.idle_deadline = deadline
        if not host.in_idle_heap:
            host.in_idle_heap = True
            heapq.heappush(self._heap, (deadline, next(self._seq), host))
            if self._timer_at is None or deadline < self._timer_at:
                self._arm(deadline)

    # -- internals -----------------------------------------------------------------------------
    def _evict_lru(self, exclude: Evictable) -> None:
        # Scanned from the least recently used end, stopping at the first idle object: a copy
        # of the whole live set per activation (1,000 hosts by default) cost more than the
        # eviction itself once every new object evicts an old one.
        live = self._live
        while len(live) > self.max_live:
            victim = next((h for h in live if h is not exclude and not h.busy), None)
            if victim is None:
                return  # everything else is busy: over the cap until something settles
            _log.debug("live cap %d reached: evicting %s", self.max_live, victim.hex_id)
            victim.evict_now()
            live.pop(victim, None)  # gone already (deactivated); never loop on the same host

    def _arm(self, when: float) -> None:
        if self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._clock.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        now = self._clock.now()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, host = heapq.heappop(heap)
            host.in_idle_heap = False
            deadline = host.idle_deadline
            if not host.live or deadline is None:
                continue
            if host.busy:
                continue  # re-queued by idle() when it finishes
            if deadline > now:
                host.in_idle_heap = True
                heapq.heappush(heap, (deadline, next(self._seq), host))
                continue
            host.evict_now()
        if heap:
            self._arm(heap[0][0])

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
