"""Socket events started in the task that read their frame, not in a task of their own.

Most WebSocket handlers never really await (an echo, a broadcast, a counter in storage), so a task
per message is pure overhead on the hottest path. The server hands each network frame to the
worker inside :func:`collect_socket_events`; the events the delivery raises come back as
:class:`SocketEvent` objects, and the server runs each one's first step itself. Only a handler
that really suspends keeps a task: the one it started in (see :class:`SocketEvent`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from .host import ObjectHost

__all__ = ["SocketEvent", "collect_socket_events", "collector", "resume"]

T = TypeVar("T")

_log = logging.getLogger("doemu.host")


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

    __slots__ = ("_context", "_coro", "_host", "_yielded")

    def __init__(self, host: ObjectHost, coro: Coroutine[Any, Any, None]) -> None:
        self._host = host
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
            _log.warning("a WebSocket handler of %s raised CancelledError", self._host.hex_id)
            return True
        return False

    def spawn(self) -> None:
        """Run the event, not started yet, as a task of its own (as outside a collection).

        For events the caller cannot start itself: those after one that suspended in the same
        frame, or those of a delivery that raised.
        """
        task = asyncio.get_running_loop().create_task(self._coro, context=self._context)
        self._host.runtime.track(task)

    def finish(self) -> Awaitable[None]:
        """Run the rest of a suspended event in the current task, which it now belongs to.

        The task is tracked by the runtime like an event task, so shutdown cancels it and
        ``settle()`` waits for it.
        """
        task = asyncio.current_task()
        assert task is not None
        self._host.runtime.track(task)
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
