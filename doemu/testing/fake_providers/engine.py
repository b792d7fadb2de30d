"""One generation, API-agnostic: play a :class:`~.script.Reply` into a list of wire events.

Every fake generation is a task that appends events to a :class:`Run`; the HTTP responses that
stream it are separate *relays* that follow the run (:mod:`.relay`). Keeping the two apart is
what OpenAI's background mode needs (the generation outlives its stream, and a later
``GET …?stream=true&starting_after=N`` replays the stored events then follows the live ones),
and the other APIs get the same timing semantics for free.

The wire format is the :class:`Format`'s business: it turns "an item starts", "a delta", "an item
ends" into that provider's events. The driver owns the script's behaviour: ``delay_ms`` between
deltas, and after the ``k``-th delta ``hold_after`` (pause on the ledger's gate),
``die_after`` (mark the cut: the first relay stops there and drops its connection; a
non-background generation stops generating too) and ``stall_after`` (never another event).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any, ClassVar, Protocol

from .script import GenerationStatus, Item, Reply
from .state import Ledger, Record

__all__ = ["Event", "Format", "Run", "drive", "launch"]

Event = tuple[str | None, dict[str, Any] | str]
"""An SSE event: its ``event:`` name (``None``: none) and its data (JSON, or raw text)."""


class Format(Protocol):
    """A provider's events for the moments of a generation (each returns the events to send)."""

    def opening(self) -> list[Event]: ...

    def item_start(self, index: int, item: Item) -> list[Event]: ...

    def delta(self, index: int, item: Item, piece: str) -> list[Event]: ...

    def item_end(self, index: int, item: Item) -> list[Event]: ...

    def closing(self) -> list[Event]:
        """The terminal events of a completed generation (usage, stop reason)."""
        ...

    def stopped(self, status: GenerationStatus) -> None:
        """The generation ended otherwise (cut, client gone, cancelled): no events follow."""
        ...


class Run:
    """The events of one generation as they are produced; relays wait on :meth:`changed`."""

    # The loop keeps only weak references to tasks: a generation nobody awaits (background
    # mode) must not be collected mid-flight.
    _live: ClassVar[set[asyncio.Task[None]]] = set()

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.cut_at: int | None = None
        self.finished = False
        # What a cancellation of the generation's task means: the client went away, unless the
        # canceller says otherwise (Responses' cancel endpoint sets "cancelled").
        self.cancel_status: GenerationStatus = "incomplete"
        self.task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    def emit(self, events: Iterable[Event]) -> None:
        self.events.extend(events)
        self._notify()

    def cut(self) -> None:
        """``die_after`` reached: the first relay ends here, abruptly."""
        if self.cut_at is None:
            self.cut_at = len(self.events)
            self._notify()

    def finish(self) -> None:
        self.finished = True
        self._notify()

    async def changed(self) -> None:
        """Wait for the next event, cut or finish (check the state first, then await this)."""
        await self._changed.wait()

    async def done(self) -> None:
        """Wait until the generation has finished."""
        while not self.finished:
            await self.changed()

    def start(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self.task = asyncio.ensure_future(coroutine)
        Run._live.add(self.task)
        self.task.add_done_callback(Run._live.discard)

    def cancel(self, status: GenerationStatus = "incomplete") -> None:
        """Stop the generation (its status becomes ``status``) if it is still going."""
        if self.task is not None and not self.task.done():
            self.cancel_status = status
            self.task.cancel()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class _Stopped(Exception):
    """A non-background generation reached ``die_after``: it generates nothing more."""


async def drive(
    run: Run, reply: Reply, fmt: Format, ledger: Ledger, record: Record, *, detached: bool
) -> None:
    """Play ``reply`` into ``run``; ``detached``: a background generation that outlives a cut."""
    status: GenerationStatus = "incomplete"
    count = 0

    async def checkpoint() -> None:
        if reply.hold_after == count:
            await ledger.gate.hold()
        if reply.die_after == count:
            run.cut()
            if not detached:
                raise _Stopped
        if reply.stall_after == count:
            await asyncio.Event().wait()  # forever, until cancelled

    try:
        run.emit(fmt.opening())
        await checkpoint()
        for index, item in enumerate(reply.items):
            run.emit(fmt.item_start(index, item))
            for piece in item.deltas():
                if count and reply.delay_ms:
                    await asyncio.sleep(reply.delay_ms / 1000)
                run.emit(fmt.delta(index, item, piece))
                ledger.delta(record, item, piece)
                count += 1
                await checkpoint()
            run.emit(fmt.item_end(index, item))
        status = "completed"
        run.emit(fmt.closing())
    except _Stopped:
        pass
    except asyncio.CancelledError:
        status = run.cancel_status
        raise
    finally:
        _settle(run, fmt, ledger, record, status)


def _settle(
    run: Run, fmt: Format, ledger: Ledger, record: Record, status: GenerationStatus
) -> None:
    """The generation's end, recorded once: its format, its ledger record, its relays."""
    if run.finished:
        return
    if status != "completed":
        fmt.stopped(status)
    ledger.finish(record, status)
    run.finish()


def launch(
    ledger: Ledger, record: Record, reply: Reply, fmt: Format, *, detached: bool = False
) -> Run:
    """Start a generation as a task on the running loop; relays follow the returned run."""
    run = Run()
    run.start(drive(run, reply, fmt, ledger, record, detached=detached))
    # A task cancelled before its first step never enters drive(): settle it here instead.
    assert run.task is not None
    run.task.add_done_callback(lambda _: _settle(run, fmt, ledger, record, run.cancel_status))
    return run
