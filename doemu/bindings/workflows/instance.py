"""One workflow instance = one object of the workflow's internal namespace.

The object is an ordinary doemu Durable Object (its own SQLite file, its alarm in the
namespace's alarm table, evicted when idle), so the runtime's guarantees carry over: its rows
(:mod:`~doemu.bindings.workflows.records`) commit with each turn, and **its alarm drives the
run**. ``create`` stores the instance and sets the alarm to now; every wake-up is the alarm
firing: the first run, the end of a sleep or retry delay, an event arriving, a resume, and
doemu starting again after a crash (a persisted alarm fires at start-up with no request, and a
run that was cut off left its alarm in place, since an alarm is removed only once its handler
returns). The alarm handler replays ``run()`` (:mod:`~doemu.bindings.workflows.runner`) until
it finishes, fails, or suspends; a suspension sets the alarm to when it wakes.

The control methods (``status``, ``pause``, ``resume``, ``terminate``, ``restart``,
``send_event``) are events of the same object, so they interleave with a running replay only at
its awaits, as every Durable Object's events do; ``terminate`` and ``restart`` cancel the replay
in flight.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import logging
from typing import Any, ClassVar

from ... import clone
from ...compat.rpc import python_from_rpc, python_to_rpc
from ...config.bindings import WorkflowBinding
from ...jsboundary import JsDict, JsException
from ..entry import EntryHost, ExecutionContext
from .errors import Suspend, WorkflowError
from .records import Records
from .runner import MAX_VALUE_BYTES, Runner
from .step import WorkflowStep

__all__ = ["FINAL", "InstanceObject"]

_log = logging.getLogger("doemu.workflows")

#: Statuses an instance never leaves (except through ``restart``).
FINAL = frozenset({"complete", "errored", "terminated"})


def workflow_error(exc: BaseException) -> dict[str, Any]:
    """The ``error`` of an instance whose ``run()`` raised ``exc``, as Cloudflare reports it:
    a JS error keeps its name and message; a Python exception is a ``PythonError`` (its
    traceback as the message)."""
    if isinstance(exc, JsException):
        return {"name": exc.name, "message": exc.message}
    import traceback

    return {"name": "Error", "message": "PythonError: " + "".join(traceback.format_exception(exc))}


class InstanceObject:
    """The Durable Object behind each instance; one subclass per workflow sets the class
    attributes (see :class:`~doemu.bindings.workflows.service.WorkflowService`)."""

    spec: ClassVar[WorkflowBinding]
    entry_host: ClassVar[EntryHost]
    #: The user's ``WorkflowEntrypoint`` subclass (None: the class is missing from ``main``).
    workflow_class: ClassVar[type | None]

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env
        self.records = Records(ctx.storage.sql)
        self._task: asyncio.Task[Any] | None = None
        self._runner: Runner | None = None

    @property
    def _clock_now(self) -> float:
        return float(self.entry_host.clock.now())

    def _set_alarm(self, when: float | None) -> None:
        if when is None:
            self.ctx.storage.deleteAlarm()
        else:
            self.ctx.storage.setAlarm(max(when, self._clock_now))

    # -- control (each an event of this object) -----------------------------------------------
    def init(self, instance_id: str, params: bytes) -> bool:
        """Store a new instance and wake it now; False when this id exists already."""
        if self.records.instance() is not None:
            return False
        now = self._clock_now
        self.records.create(instance_id, params, now)
        self._set_alarm(now)
        return True

    def exists(self) -> bool:
        return self.records.instance() is not None

    def status(self) -> dict[str, Any]:
        row = self.records.instance()
        if row is None:
            raise WorkflowError("instance.not_found")
        output = None if row.output is None else clone.decode(row.output)
        return {"status": row.status, "error": row.error, "output": output}

    def describe(self) -> dict[str, Any]:
        """The admin API's view: the status, times, params and every step."""
        row = self.records.instance()
        if row is None:
            raise WorkflowError("instance.not_found")
        return {
            "id": row.id,
            **self.status(),
            "params": None if row.params is None else clone.decode(row.params),
            "created": row.created,
            "started": row.started,
            "ended": row.ended,
            "generation": row.generation,
            "steps": self.records.steps(),
        }

    def pause(self) -> None:
        row = self._row()
        if row.status == "running":
            self.records.set_status("waitingForPause")  # the replay stops at its next step
        elif row.status in ("queued", "waiting"):
            self.records.set_status("paused")
            self._set_alarm(None)

    def resume(self) -> None:
        row = self._row()
        if row.status == "waitingForPause":
            self.records.set_status("running")
        elif row.status == "paused":
            self.records.set_status("queued")
            self._set_alarm(self._clock_now)

    def terminate(self) -> None:
        row = self._row()
        if row.status in FINAL:
            raise WorkflowError(
                "(instance.cannot_terminate) Cannot terminate instance since its on a finite state"
            )
        self.records.set_status("terminated", self._clock_now)
        self._set_alarm(None)
        self._cancel()

    def restart(self) -> None:
        self._row()
        self._cancel()
        self.records.restart()
        self._set_alarm(self._clock_now)

    def send_event(self, event_type: str, payload: bytes) -> None:
        row = self._row()
        self.records.add_event(event_type, payload, self._clock_now)
        if row.status == "waiting" and event_type in self.records.waiting_types():
            self._set_alarm(self._clock_now)

    def _row(self) -> Any:
        row = self.records.instance()
        if row is None:
            raise WorkflowError("instance.not_found")
        return row

    def _cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    # -- the run ----------------------------------------------------------------------------------
    async def alarm(self, alarm_info: Any = None) -> None:
        """Wake the instance: replay ``run()`` (see the module docstring)."""
        row = self.records.instance()
        if row is None or row.status in FINAL or row.status == "paused":
            return
        if row.status == "waitingForPause":
            self.records.set_status("paused")
            return
        cls = self.workflow_class
        now = self._clock_now
        self.records.set_status("running", now)
        if cls is None or not callable(getattr(cls, "run", None)):
            self.records.finish(None, _missing_class(self.spec), now)
            return
        runner = Runner(
            self.records,
            self.entry_host.clock,
            step_limit=self.spec.step_limit,
            paused=self._pause_requested,
        )
        step = WorkflowStep(runner, implicit=self.spec.implicit_dependencies)
        created = dt.datetime.fromtimestamp(row.created / 1000.0, dt.UTC)
        params = None if row.params is None else clone.decode(row.params)
        event = JsDict(
            timestamp=python_from_rpc(created),
            payload=python_from_rpc(params),
            instanceId=row.id,
        )
        task = asyncio.ensure_future(self._run(cls, event, step))
        self._task, generation = task, row.generation
        try:
            await asyncio.wait([task])
        finally:
            if not task.done():  # the alarm handler itself was cancelled (a reset, shutdown)
                task.cancel()
            for pending in list(runner.tasks):
                pending.cancel()
            self._task = None
        self._settle(task, generation)

    def _pause_requested(self) -> bool:
        row = self.records.instance()
        return row is not None and row.status == "waitingForPause"

    async def _run(self, cls: type, event: Any, step: WorkflowStep) -> Any:
        host = self.entry_host
        entry = cls(ExecutionContext(host.track), self.env)
        result = entry.run(event, step)
        if inspect.isawaitable(result):
            result = await result
        return None if result is None else python_to_rpc(result)

    def _settle(self, task: asyncio.Task[Any], generation: int) -> None:
        now = self._clock_now
        row = self.records.instance()
        if row is None or row.generation != generation or row.status in FINAL or task.cancelled():
            return  # terminated or restarted meanwhile: that call decided what happens next
        exc = task.exception()
        if exc is None:
            try:
                output = clone.encode(task.result())
            except Exception as error:
                self.records.finish(None, workflow_error(error), now)
                return
            if len(output) > MAX_VALUE_BYTES:
                self.records.finish(
                    None,
                    {
                        "name": "Error",
                        "message": "The workflow output is too large. Maximum allowed size "
                        "is 1MiB.",
                    },
                    now,
                )
                return
            self.records.finish(output, None, now)
            return
        if isinstance(exc, Suspend):
            if exc.status == "paused" or row.status == "waitingForPause":
                self.records.set_status("paused")
                self._set_alarm(None)
                return
            self.records.set_status(exc.status)
            wake = exc.wake_at
            if self.records.has_event_for(self.records.waiting_types()):
                wake = now  # an event came while this replay was finishing
            self._set_alarm(wake)
            return
        _log.warning(
            "workflow %s instance %r failed: %s", self.spec.name, row.id, workflow_error(exc)
        )
        self.records.finish(None, workflow_error(exc), now)


def _missing_class(spec: WorkflowBinding) -> dict[str, Any]:
    return {
        "name": "Error",
        "message": f'the workflow "{spec.name}" names the class "{spec.class_name}", which the '
        "main module does not define as a WorkflowEntrypoint subclass with a run() method",
    }
