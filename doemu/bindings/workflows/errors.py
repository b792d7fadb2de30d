"""What the Workflows binding and engine raise into user code.

Errors of the binding (``create``, ``get``, an instance's methods) are JavaScript errors on
Cloudflare, so here they are :class:`~doemu.bindings.errors.BindingError` (a ``JsException``)
with the engine's texts (``instance.not_found``, ``Workflow instance has invalid id``). Inside
``run()``, a step that timed out raises :class:`WorkflowTimeoutError`; the suspension of a run
(a sleep, a wait, a retry delay, a pause) is :class:`Suspend`, a ``BaseException`` so that user
code's ``except Exception`` cannot swallow it.
"""

from __future__ import annotations

from ..errors import BindingError

__all__ = [
    "INSTANCE_NOT_FOUND",
    "Suspend",
    "WorkflowError",
    "WorkflowFatalError",
    "WorkflowTimeoutError",
]

#: The engine's text for ``get()`` of an id that has no instance.
INSTANCE_NOT_FOUND = "instance.not_found"


class WorkflowError(BindingError):
    """A call on a Workflow binding or instance was refused (a JS ``Error``)."""


class WorkflowFatalError(BindingError):
    """A step the engine refuses to run (a bad name or config, the step limit): the workflow
    fails unless ``run()`` catches it."""

    js_name = "WorkflowFatalError"


class WorkflowTimeoutError(BindingError):
    """A step attempt or a ``wait_for_event`` ran past its timeout."""

    js_name = "WorkflowTimeoutError"


class Suspend(BaseException):
    """The run stops here; the instance's alarm resumes it at ``wake_at`` (ms; None: only an
    event or a resume wakes it). ``status`` is what ``status()`` reports meanwhile."""

    def __init__(self, wake_at: float | None, status: str) -> None:
        super().__init__(status)
        self.wake_at = wake_at
        self.status = status
