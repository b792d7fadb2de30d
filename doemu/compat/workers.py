"""The ``workers`` module of Cloudflare's Python Workers, as doemu installs it.

``from workers import DurableObject, WorkerEntrypoint, Response`` in user code imports this module
(doemu puts it in ``sys.modules["workers"]`` before loading the worker). It holds exactly the
names of Cloudflare's module, so code that imports anything else fails here as it would on deploy;
the definitions live in :mod:`doemu.compat.entrypoints` and :mod:`doemu.compat.fetch_api`.
``env`` and ``waitUntil`` / ``wait_until`` forward to the running runtime's env and to the
current object's (or request's) ``waitUntil``.
"""

from doemu.compat.entrypoints import (
    Context,
    DurableObject,
    WorkerEntrypoint,
    WorkflowEntrypoint,
    env,
    handler,
    wait_until,
    waitUntil,
)
from doemu.compat.fetch_api import FetchResponse, Headers, Request, Response

__all__ = [
    "Context",
    "DurableObject",
    "FetchResponse",
    "Headers",
    "Request",
    "Response",
    "WorkerEntrypoint",
    "WorkflowEntrypoint",
    "env",
    "handler",
    "waitUntil",
    "wait_until",
]
