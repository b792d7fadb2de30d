"""Socket events: started in the task that read their frame, in arrival order, under the gates.

Most WebSocket handlers never really await (an echo, a broadcast, a counter in storage), so a task
per message is pure overhead on the hottest path. The server hands each network frame to the
worker inside :func:`collect_socket_events`; the events the delivery raises come back as
:class:`SocketEvent` objects, and the server runs each one's first step itself. Only a handler
that really suspends keeps a task: the one it started in (see :class:`SocketEvent`). Handlers of
one object start in the order their frames arrived (:class:`StartOrder`), also when one of them
has to wait at the input gate first.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import types
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar, cast

from ..errors import ObjectResetError

__all__ = [
    "EventOwner",
    "SocketEvent",
    "StartOrder",
    "collect_socket_events",
    "collector",
    "resume",
    "start_socket_event",
]

T = TypeVar("T")

_log = logging.getLogger("doemu.sockets")


class EventOwner(Protocol):
    """The object a socket event is delivered to (the object host)."""

    @property
    def hex_id(self) -> str: ...

    @property
    def last_reset(self) -> ObjectResetError | None: ...

    async def call(self, kind: str, fn: Callable[[Any], Any]) -> Any: ...

    def track(self, task: asyncio.Task[Any]) -> None: ...


class StartOrder:
    """Socket events of one object start their handlers in the order their frames arrived.

    A handler normally starts the moment its frame arrives (see start_socket_event),
    but one that has to wait first (at the input gate of a ``blockConcurrencyWhile``, or for the
    constructor) must not be overtaken by a frame that arrives just as the gate opens: the later
    handler would otherwise start in the loop turn between the gate opening and the earlier
    event's wake-up. Each event takes a turn when its frame arrives and passes it on the moment
    its handler starts (or when it ends without starting); the next event waits only if an
    earlier one has not started yet, so the common case costs two counter updates.
    """

    __slots__ = ("_pending", "_waiting")

    def __init__(self) -> None:
        #: Events that arrived and have not passed their turn on (the first of them holds it).
        self._pending = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    def __len__(self) -> int:
        """Events that arrived but have not started their handler yet."""
        return self._pending

    def arrive(self) -> asyncio.Future[None] | None:
        """Take a turn: ``None`` to go ahead now, or a future that resolves at this event's turn."""
        self._pending += 1
        if self._pending == 1:
            return None
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        return turn

    def started(self) -> None:
        """The event holding the turn started its handler (or ended): the next one may go."""
        self._pending -= 1
        waiting = self._waiting
        while waiting:
            turn = waiting.popleft()
            if not turn.done():  # a cancelled waiter has already left
                turn.set_result(None)
                return

    def leave(self, turn: asyncio.Future[None]) -> None:
        """An event stopped waiting for ``turn`` (cancelled): pass the turn on if it got it."""
        if turn.done() and not turn.cancelled():
            self.started()
        else:
            turn.cancel()
            self._pending -= 1


#: The socket events started while the server hands one network frame to the worker (see
#: collect_socket_events); ``None`` the rest of the time.
_collected: list[SocketEvent] | None = None


def collector() -> list[SocketEvent] | None:
    """Where a socket event raised now should go instead of a task, if a collection is on."""
    return _collected


def collect_socket_events(deliver: Callable[..., None], *args: Any) -> list[SocketEvent]:
    """``deliver(*args)``, returning the socket events it raised instead of starting them as tasks.

    The server calls this with ``client._forward`` (and friends) for every frame, then runs each
    event's first step in its own task (:meth:`SocketEvent.start`): no task per frame and no
    loop turn between the frame and its handler. The events run only after ``deliver`` returns,
    so what the delivery itself does (an auto-reply to a close) happens first, as with tasks.
    """
    global _collected
    if _collected is not None:  # nested delivery: the outer caller collects
        deliver(*args)
        return []
    collected: list[SocketEvent] = []
    _collected = collected
    try:
        deliver(*args)
    except BaseException:
        for event in collected:
            event.spawn()
        raise
    finally:
        _collected = None
    return collected


class SocketEvent:
    """A socket event whose handler starts in the delivering task rather than in a task of its own.

    Why: most handlers never really await (an echo, a broadcast, a counter in storage), so a task
    per message is pure overhead on the hottest path. :meth:`start` runs the event up to its first
    real suspension, in a copy of the current context as a task would. A handler that does
    suspend keeps the current task (:meth:`finish`), because anything it captured in its first
    step (``asyncio.current_task()``, an ``asyncio.timeout``, a ``TaskGroup``, the host's record
    of in-flight events that a reset cancels) refers to that task; the caller moves its own work
    (reading the next frame) to a new task instead, so a long handler never delays the next
    message on the socket.
    """

    __slots__ = ("_context", "_coro", "_owner", "_yielded")

    def __init__(self, owner: EventOwner, coro: Coroutine[Any, Any, None]) -> None:
        self._owner = owner
        self._coro = coro
        self._context = contextvars.copy_context()
        self._yielded: Any = None

    def start(self) -> bool:
        """Run the event up to its first suspension; ``True`` when it has already finished."""
        try:
            self._yielded = self._context.run(self._coro.send, None)
        except StopIteration:
            return True
        except asyncio.CancelledError:
            # The handler raised it itself (nothing can cancel a task between two awaits): it
            # ended, and it must not end the caller's task with it.
            _log.warning("a WebSocket handler of %s raised CancelledError", self._owner.hex_id)
            return True
        return False

    def spawn(self) -> None:
        """Run the event, not started yet, as a task of its own (as outside a collection).

        For events the caller cannot start itself: those after one that suspended in the same
        frame, or those of a delivery that raised.
        """
        task = asyncio.get_running_loop().create_task(self._coro, context=self._context)
        self._owner.track(task)

    def finish(self) -> Awaitable[None]:
        """Run the rest of a suspended event in the current task, which it now belongs to.

        The task is tracked like an event task, so shutdown cancels it and settling a manual
        clock waits for it.
        """
        task = asyncio.current_task()
        assert task is not None
        self._owner.track(task)
        return resume(self._coro, self._yielded, self._context)


@types.coroutine
def resume(
    coro: Coroutine[Any, Any, T], yielded: Any, context: contextvars.Context | None = None
) -> Generator[Any, Any, T]:
    """Await the rest of ``coro``, whose steps so far ran by hand and last yielded ``yielded``.

    Python 3.11 has no eager tasks: code that wants to run a coroutine's first step without a
    task drives it with ``send(None)``, and if it suspends, a task continues it through this
    generator, which hands every yielded future to the task and every result or exception
    (cancellation included) back to the coroutine. With ``context``, each step runs in it.
    """
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                yielded = coro.throw(exc) if context is None else context.run(coro.throw, exc)
            except StopIteration as stop:
                return cast(T, stop.value)
        else:
            try:
                yielded = coro.send(sent) if context is None else context.run(coro.send, sent)
            except StopIteration as stop:
                return cast(T, stop.value)


def start_socket_event(
    owner: EventOwner, order: StartOrder, kind: str, fn: Callable[[Any], Any]
) -> None:
    """Start a socket event: eagerly while the server hands over a network frame, else a task.

    During :func:`collect_socket_events` the event is handed back to the server, which runs the
    handler's first step in its own task right away (see :class:`SocketEvent`); anywhere else (a
    pair whose both ends live in-process) it becomes a task, so user code never re-enters another
    handler from inside ``send()``.
    """
    coro = _socket_event(owner, order, kind, fn, order.arrive(), owner.last_reset)
    collected = _collected
    if collected is not None:
        collected.append(SocketEvent(owner, coro))
        return
    owner.track(asyncio.get_running_loop().create_task(coro))


async def _socket_event(
    owner: EventOwner,
    order: StartOrder,
    kind: str,
    fn: Callable[[Any], Any],
    turn: asyncio.Future[None] | None,
    reset_before: ObjectResetError | None,
) -> None:
    """One socket event under the object's gates, started in arrival order; logs errors."""
    holding = True  # this event holds its turn until the handler starts

    def start(instance: Any) -> Any:
        nonlocal holding
        holding = False
        order.started()
        return fn(instance)

    try:
        if turn is not None:
            try:
                await turn
            except BaseException:
                holding = False
                order.leave(turn)
                raise
            reset = owner.last_reset
            if reset is not reset_before and reset is not None:
                # The object was reset while this event queued behind an earlier one at its
                # gate: it fails like the events that were waiting inside the gate.
                raise type(reset)(reset.reason)
        await owner.call(kind, start)
    except Exception:
        _log.exception("%s handler of %s raised", kind, owner.hex_id)
    finally:
        if holding:  # ended (constructor failure, reset) without starting the handler
            order.started()
