"""The ``workers`` module of Cloudflare's Python Workers, as doemu installs it.

``from workers import DurableObject, WorkerEntrypoint, Response`` in user code imports this module
(doemu puts it in ``sys.modules["workers"]`` before loading the worker). It holds exactly the
names of Cloudflare's module (``workers-runtime-sdk`` 1.9.5), so code that imports anything else
fails here as it would on deploy. ``env`` and ``waitUntil`` / ``wait_until`` forward to the
running runtime's env and to the current object's (or request's) ``waitUntil``; ``fetch`` is a
real outbound HTTP client. ``Headers``, ``Body``, ``JSBody``, ``BlobValue`` and ``FormDataValue``
are the SDK's annotation strings, not classes (see :mod:`doemu.compat.sdk_types`).
"""

from doemu.compat.blob import Blob, BlobEnding, File
from doemu.compat.entrypoints import (
    Context,
    DurableObject,
    WorkerEntrypoint,
    WorkflowEntrypoint,
    env,
    handler,
    import_from_javascript,
    patch_env,
    wait_until,
    waitUntil,
)
from doemu.compat.formdata import FormData
from doemu.compat.outbound import fetch
from doemu.compat.requests import Request
from doemu.compat.responses import FetchResponse, Response
from doemu.compat.rpc import python_from_rpc, python_to_rpc
from doemu.compat.sdk_types import (
    BlobValue,
    Body,
    FetchKwargs,
    FormDataValue,
    Headers,
    JSBody,
    RequestInitCfProperties,
)

__all__ = [
    "Blob",
    "BlobEnding",
    "BlobValue",
    "Body",
    "Context",
    "DurableObject",
    "FetchKwargs",
    "FetchResponse",
    "File",
    "FormData",
    "FormDataValue",
    "Headers",
    "JSBody",
    "Request",
    "RequestInitCfProperties",
    "Response",
    "WorkerEntrypoint",
    "WorkflowEntrypoint",
    "env",
    "fetch",
    "handler",
    "import_from_javascript",
    "patch_env",
    "python_from_rpc",
    "python_to_rpc",
    "waitUntil",
    "wait_until",
]
