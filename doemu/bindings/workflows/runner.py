"""One run of a workflow instance: the engine's side of ``step.do``, ``sleep`` and
``wait_for_event``.

A run replays ``run(event, step)`` from the top every time the instance wakes (its alarm fires:
after ``create``, a sleep, a retry delay, an event, a resume, or a restart of doemu). Each step
is found by its kind, name and how many times this run met that name; a step that finished is
answered from its row (its value, or its error) without running again, so only the work after
the last finished step is done again, which is Cloudflare's model. A step that must wait (a
sleep not yet over, a retry delay, an event not yet sent) stores when it wakes and raises
:class:`~doemu.bindings.workflows.errors.Suspend`; the instance sets its alarm to that time.

A step's value is what ``python_to_rpc`` makes of the callback's result, stored with the
structured-clone rules and handed back through ``python_from_rpc``, as on Cloudflare where it
crosses to the engine and back; a value over 1 MiB is refused with the engine's error. An
exception that ends a step reaches ``run()`` the way the Python SDK converts it back
(:func:`user_error`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

from ... import clone
from ...clock import Clock
from ...compat.rpc import python_from_rpc, python_to_rpc
from ...compat.workflows import NonRetryableError
from ...errors import DataCloneError
from ...jsboundary import JsDict, JsException
from .durations import DEFAULT_EVENT_TIMEOUT, StepConfig, duration_ms, step_config
from .errors import Suspend, WorkflowError, WorkflowFatalError, WorkflowTimeoutError
from .records import Records, StepRow

__all__ = ["MAX_STEP_NAME", "MAX_VALUE_BYTES", "Runner", "error_record", "user_error"]

#: Cloudflare's limit on a step's result (and on params, an event's payload, the output).
MAX_VALUE_BYTES = 1024 * 1024
#: The longest step name the engine accepts.
MAX_STEP_NAME = 256

StepCallback = Callable[[Any], Awaitable[Any]]


def error_record(exc: BaseException) -> dict[str, Any]:
    """How a step's (or the run's) exception is stored: as the JS error it is on Cloudflare."""
    if isinstance(exc, NonRetryableError):
        return {"name": "NonRetryableError", "message": str(exc)}
    if isinstance(exc, JsException):
        return {"name": exc.name, "message": exc.message}
    return {"name": "PythonError", "message": "".join(traceback.format_exception(exc))}


def user_error(record: dict[str, Any]) -> Exception:
    """The exception ``run()`` sees for a failed step, as the SDK's ``_from_js_error`` makes it:
    ``NonRetryableError`` again, ``TypeError``/``ValueError`` named by their traceback's last
    line, anything else a ``JsException``."""
    name, message = str(record.get("name")), str(record.get("message", ""))
    if name == "NonRetryableError":
        return NonRetryableError(message)
    if name == "PythonError":
        last = message.rstrip().split("\n")[-1]
        if last.startswith("TypeError"):
            return TypeError(last)
        if last.startswith("ValueError"):
            return ValueError(last)
        return JsException(f"PythonError: {message}", name="Error")
    if name == "WorkflowTimeoutError":
        return WorkflowTimeoutError(message)
    return JsException(message, name=name)


def _encode(value: Any, what: str) -> bytes:
    try:
        data = clone.encode(value)
    except DataCloneError:
        raise WorkflowFatalError(f'Value returned from step "{what}" is not serialisable') from None
    return data


class Runner:
    """The engine's state for one replay of ``run()`` (see the module docstring)."""

    def __init__(
        self,
        records: Records,
        clock: Clock,
        *,
        step_limit: int,
        paused: Callable[[], bool],
    ) -> None:
        self._records = records
        self._clock = clock
        self._step_limit = step_limit
        self._paused = paused
        self._counts: dict[str, int] = {}
        self._steps = 0
        #: Step callbacks in flight (cancelled if the run stops while they run).
        self.tasks: set[asyncio.Task[Any]] = set()

    def _count(self, key: str) -> int:
        self._counts[key] = self._counts.get(key, 0) + 1
        return self._counts[key]

    def _check_pause(self) -> None:
        if self._paused():
            raise Suspend(None, "paused")

    # -- step.do --------------------------------------------------------------------------------
    async def do(self, name: Any, config: Any, callback: StepCallback) -> Any:
        self._steps += 1
        if self._steps > self._step_limit:
            raise WorkflowFatalError(
                f"The limit of {self._step_limit} steps has been reached. This limit can be "
                "changed in your worker configuration."
            )
        if not isinstance(name, str) or len(name) > MAX_STEP_NAME or any(ord(c) < 32 for c in name):
            raise WorkflowFatalError(
                f'Step name "{name}" exceeds max length ({MAX_STEP_NAME} chars) or invalid '
                "characters found"
            )
        parsed = step_config(config)
        if parsed is None:
            raise WorkflowFatalError(
                f'Step config for "{name}" is in a invalid format. See '
                "https://developers.cloudflare.com/workflows/build/sleeping-and-retrying/"
            )
        count = self._count(f"do:{name}")
        key = f"do:{name}:{count}"
        row = self._records.step(key)
        if row is not None and row.state == "done":
            assert row.value is not None
            return python_from_rpc(clone.decode(row.value))
        if row is not None and row.state == "failed":
            assert row.error is not None
            raise user_error(row.error)
        self._check_pause()
        now = self._clock.now()
        if row is None:
            row = StepRow(key, "do", name, count, "pending", 0, None, None, None, None)
        elif row.state == "retrying" and row.wake_at is not None and row.wake_at > now:
            raise Suspend(row.wake_at, "running")
        # "running" here means an attempt was cut off (doemu was killed): it counted, and the
        # step runs again now.
        return await self._attempt(row, parsed, callback)

    async def _attempt(self, row: StepRow, config: StepConfig, callback: StepCallback) -> Any:
        records, clock = self._records, self._clock
        row.attempts += 1
        row.state, row.wake_at = "running", None
        records.put_step(row, clock.now())
        context = JsDict(
            step=JsDict(name=row.name, count=row.seq),
            attempt=row.attempts,
            config=python_from_rpc(config.as_js()),
        )
        what = f"{row.name}-{row.seq}"
        try:
            value = await self._with_timeout(callback(context), config.timeout_ms)
            data = _encode(python_to_rpc(value), row.name)
            if len(data) > MAX_VALUE_BYTES:
                raise WorkflowFatalError(
                    f"Step {what} output is too large. Maximum allowed size is 1MiB."
                )
        except (Exception, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            retry = not isinstance(exc, NonRetryableError | WorkflowFatalError)
            row.error = error_record(exc)
            if retry and row.attempts <= config.limit:
                row.state = "retrying"
                row.wake_at = clock.now() + config.retry_delay(row.attempts)
                records.put_step(row, clock.now())
                raise Suspend(row.wake_at, "running") from None
            row.state = "failed"
            records.put_step(row, clock.now())
            raise user_error(row.error) from None
        row.state, row.value, row.error = "done", data, None
        records.put_step(row, clock.now())
        result = python_from_rpc(clone.decode(data))
        self._check_pause()
        return result

    async def _with_timeout(self, work: Awaitable[Any], timeout_ms: float) -> Any:
        """``work`` on the doemu clock's time: a ``WorkflowTimeoutError`` past ``timeout_ms``."""
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        timed_out = False

        def expire() -> None:
            nonlocal timed_out
            if not task.done():
                timed_out = True
                task.cancel()

        timer = self._clock.call_at(self._clock.now() + timeout_ms, expire)
        try:
            return await task
        except asyncio.CancelledError:
            if timed_out and not _cancelling():
                raise WorkflowTimeoutError(
                    f"Execution timed out after {_ms(timeout_ms)}ms"
                ) from None
            raise
        finally:
            timer.cancel()
            self.tasks.discard(task)

    # -- sleeps ---------------------------------------------------------------------------------
    async def sleep(self, name: Any, duration: Any) -> None:
        ms = duration_ms(duration)
        if math.isnan(ms) or ms < 0:
            raise WorkflowError(f"Invalid sleep duration for step {name!r}: {duration!r}")
        count = self._count(f"sleep:{name}:{_ms(ms)}")
        key = f"sleep:{name}:{_ms(ms)}:{count}"
        await self._sleep(key, str(name), count, lambda now: now + ms)

    async def sleep_until(self, name: Any, timestamp: Any) -> None:
        when = _epoch_ms(timestamp)
        count = self._count(f"until:{name}")
        key = f"until:{name}:{count}"

        def wake(now: float) -> float:
            if when < now:
                raise WorkflowError("You can't sleep until a time in the past, time-traveler")
            return when

        await self._sleep(key, str(name), count, wake)

    async def _sleep(self, key: str, name: str, count: int, wake: Callable[[float], float]) -> None:
        now = self._clock.now()
        row = self._records.step(key)
        if row is None:
            self._check_pause()
            row = StepRow(key, "sleep", name, count, "sleeping", 0, None, None, wake(now), None)
            self._records.put_step(row, now)
        if row.state == "done":
            return
        assert row.wake_at is not None
        if row.wake_at > now:
            raise Suspend(row.wake_at, "waiting")
        row.state = "done"
        self._records.put_step(row, now)
        self._check_pause()

    # -- events ---------------------------------------------------------------------------------
    async def wait_for_event(self, name: Any, event_type: Any, timeout: Any) -> Any:  # noqa: ASYNC109 - the SDK name
        ms = duration_ms(DEFAULT_EVENT_TIMEOUT if timeout is None else timeout)
        if math.isnan(ms) or ms < 0:
            raise WorkflowError(f"Invalid timeout for wait_for_event {name!r}: {timeout!r}")
        count = self._count(f"wait:{name}")
        key = f"wait:{name}:{count}"
        now = self._clock.now()
        row = self._records.step(key)
        if row is None:
            self._check_pause()
            row = StepRow(key, "wait", str(name), count, "waiting", 0, None, None, now + ms,
                          str(event_type))  # fmt: skip
            self._records.put_step(row, now)
        if row.state == "done":
            assert row.value is not None
            return python_from_rpc(clone.decode(row.value))
        if row.state == "timedout":
            raise WorkflowTimeoutError(f"Execution timed out after {_ms(ms)}ms")
        event = self._records.take_event(str(event_type), key)
        if event is not None:
            payload = None if event.payload is None else clone.decode(event.payload)
            value = {
                "payload": payload,
                "type": event.type,
                "timestamp": dt.datetime.fromtimestamp(event.timestamp / 1000.0, dt.UTC),
            }
            row.state, row.value = "done", clone.encode(value)
            self._records.put_step(row, now)
            return python_from_rpc(value)
        assert row.wake_at is not None
        if row.wake_at <= now:
            row.state = "timedout"
            self._records.put_step(row, now)
            raise WorkflowTimeoutError(f"Execution timed out after {_ms(ms)}ms")
        raise Suspend(row.wake_at, "waiting")


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _ms(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _epoch_ms(timestamp: Any) -> float:
    """``sleep_until``'s time: a ``datetime`` (naive: local time), epoch ms, or an ISO string."""
    if isinstance(timestamp, dt.datetime):
        return timestamp.timestamp() * 1000.0
    if isinstance(timestamp, bool):
        raise WorkflowError(f"sleep_until expects a datetime or epoch ms, got {timestamp!r}")
    if isinstance(timestamp, int | float):
        return float(timestamp)
    if isinstance(timestamp, str):
        try:
            parsed = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
        except ValueError:
            raise WorkflowError("Invalid date") from None
        return parsed.timestamp() * 1000.0
    raise WorkflowError(f"sleep_until expects a datetime or epoch ms, got {type(timestamp)}")
