"""The vocabulary shared by durable fibers (``run_fiber``) and managed fibers (``start_fiber``).

Both kinds run user code as a *fiber*: a unit of work registered in SQLite before it starts, so
an eviction or crash leaves evidence that recovery can act on. This module holds only the value
types they share — the context a fiber body receives, the context a recovery hook receives, the
cooperative cancellation signal, the managed status enum and the resolution a hook may return —
so that running, managing and recovering fibers share one vocabulary and none of their modules
has to import another for it. (The fiber errors live in :mod:`agents.errors` with the rest.)
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import FiberAbortedError, FiberError

__all__ = [
    "TERMINAL_STATUSES",
    "FiberContext",
    "FiberRecoveryContext",
    "FiberResolution",
    "FiberSignal",
    "FiberStatus",
    "parse_snapshot",
]

_log = logging.getLogger("agents.fibers")


class FiberStatus(enum.StrEnum):
    """A managed fiber's status in ``cf_agents_fibers.status`` (the SDK's strings).

    ``pending`` → ``running`` → one of the terminal states. ``interrupted`` is what recovery
    writes for a fiber whose process died; ``resolve_fiber`` (or the hook's return value) may
    move it on to ``completed``, ``aborted`` or ``error``.
    """

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    ABORTED = "aborted"
    INTERRUPTED = "interrupted"
    ERROR = "error"


TERMINAL_STATUSES = frozenset(
    {FiberStatus.COMPLETED, FiberStatus.ABORTED, FiberStatus.INTERRUPTED, FiberStatus.ERROR}
)


class FiberSignal:
    """Cooperative cancellation, the Python spelling of the SDK's ``AbortSignal``.

    ``cancel_fiber`` marks the ledger row ``aborted`` at once and sets this signal; the fiber's
    code decides when to stop: check :attr:`aborted`, call :meth:`throw_if_aborted` between steps,
    or ``await signal.wait()`` alongside other work. Nothing is cancelled behind its back, so a
    half-written step is never torn.
    """

    __slots__ = ("_event", "_reason", "aborted")

    def __init__(self) -> None:
        self.aborted = False
        self._reason: str | None = None
        self._event: asyncio.Event | None = None

    @property
    def reason(self) -> str | None:
        return self._reason

    def abort(self, reason: str | None = None) -> None:
        """Set the signal (idempotent: the first reason wins)."""
        if self.aborted:
            return
        self.aborted = True
        self._reason = reason
        if self._event is not None:
            self._event.set()

    def throw_if_aborted(self) -> None:
        """Raise :class:`FiberAbortedError` (carrying the reason) if the fiber was cancelled."""
        if self.aborted:
            raise FiberAbortedError(self._reason or "fiber was cancelled")

    async def wait(self) -> str | None:
        """Wait until the fiber is cancelled; returns the reason."""
        if not self.aborted:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        return self._reason


@dataclass
class FiberContext:
    """What a fiber body receives: its ``id``, ``stash(data)``, ``snapshot`` and ``signal``.

    ``snapshot`` is None while the fiber runs (a fresh run has no checkpoint); recovered work
    gets its checkpoint from :class:`FiberRecoveryContext` instead.
    """

    id: str
    name: str
    signal: FiberSignal
    _stash: Callable[[Any], None] = field(repr=False)
    snapshot: Any = None

    def stash(self, data: Any) -> None:
        """Replace this fiber's checkpoint with ``data`` (JSON), synchronously.

        The ``UPDATE`` is issued before this returns, so it commits with the current turn: no
        await separates deciding on a checkpoint from saving it.
        """
        self._stash(data)


@dataclass
class FiberRecoveryContext:
    """What ``on_fiber_recovered`` receives for a fiber left behind by a dead process.

    ``snapshot`` is the last stash, parsed (None if never stashed or corrupt); ``created_at`` is
    ms since the epoch. For managed fibers ``status`` is ``interrupted`` and ``idempotency_key``
    and ``metadata`` are filled in; for ``run_fiber`` rows they are None.
    """

    id: str
    name: str
    snapshot: Any
    created_at: float
    recovery_reason: str = "interrupted"
    status: FiberStatus | None = None
    idempotency_key: str | None = None
    metadata: dict[str, Any] | None = None
    attempt: int = 1

    @property
    def managed(self) -> bool:
        return self.status is not None


_UNSET: Any = object()


@dataclass(frozen=True)
class FiberResolution:
    """How an interrupted managed fiber ends: returned by the hook or passed to ``resolve_fiber``.

    ``status`` is terminal (``completed``, ``aborted``, ``error`` or ``interrupted``); ``snapshot``
    (when given) replaces the stored one; ``error`` (for ``error``) or ``reason`` (for
    ``aborted``/``interrupted``) becomes the record's error message; ``metadata`` (for
    ``completed``) replaces the metadata.
    """

    status: FiberStatus
    snapshot: Any = _UNSET
    error: str | None = None
    reason: str | None = None
    metadata: Mapping[str, Any] | None = None

    @property
    def has_snapshot(self) -> bool:
        return self.snapshot is not _UNSET

    @classmethod
    def coerce(cls, value: FiberResolution | Mapping[str, Any]) -> FiberResolution:
        """Accept a resolution or the SDK-shaped dict ``{"status": ..., "snapshot": ...}``."""
        if isinstance(value, FiberResolution):
            status = FiberStatus(value.status)
            resolution = value if status is value.status else _replace_status(value, status)
        else:
            error = value.get("error")
            resolution = cls(
                status=FiberStatus(value["status"]),
                snapshot=value["snapshot"] if "snapshot" in value else _UNSET,
                error=None if error is None else str(error),
                reason=value.get("reason"),
                metadata=value.get("metadata"),
            )
        if resolution.status not in TERMINAL_STATUSES:
            raise FiberError(f"a fiber can only be resolved to a terminal status, not {value!r}")
        return resolution

    def error_message(self) -> str | None:
        if self.status is FiberStatus.ERROR:
            return self.error
        if self.status in (FiberStatus.ABORTED, FiberStatus.INTERRUPTED):
            return self.reason
        return None


def _replace_status(value: FiberResolution, status: FiberStatus) -> FiberResolution:
    return FiberResolution(status, value.snapshot, value.error, value.reason, value.metadata)


def parse_snapshot(fiber_id: str, text: str | None) -> Any:
    """A stored snapshot, parsed; None when absent or corrupt (logged, never raised)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        _log.warning("corrupt snapshot for fiber %s; treating it as None", fiber_id)
        return None
