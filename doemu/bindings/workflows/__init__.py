"""Workflows: ``[[workflows]]``, a Python ``WorkflowEntrypoint`` run durably on doemu's objects.

* :mod:`.binding`: ``env.<WORKFLOW>`` and the instance handles user code holds;
* :mod:`.service`: one workflow's internal namespace (one object per instance);
* :mod:`.instance`: that object: control methods, and the alarm that drives the run;
* :mod:`.runner` and :mod:`.step`: one replay of ``run(event, step)``, the engine's side and
  the ``step`` the user's code sees;
* :mod:`.records`: the rows an instance keeps; :mod:`.listing`: those rows read from the files
  for a listing, waking no instance; :mod:`.durations`: durations and step configs.
"""

from __future__ import annotations

from .binding import Workflow, WorkflowInstance
from .errors import Suspend, WorkflowError, WorkflowFatalError, WorkflowTimeoutError
from .instance import FINAL, InstanceObject
from .service import WorkflowHost, WorkflowService
from .step import WorkflowStep

__all__ = [
    "FINAL",
    "InstanceObject",
    "Suspend",
    "Workflow",
    "WorkflowError",
    "WorkflowFatalError",
    "WorkflowHost",
    "WorkflowInstance",
    "WorkflowService",
    "WorkflowStep",
    "WorkflowTimeoutError",
]
