"""A doemu project on Cloudflare's own runtime: real workerd running Python Workers, for tests.

doemu promises that code written for it deploys to Cloudflare unchanged. This package checks it:
:class:`WorkerdServer` serves a doemu project (its wrangler config, main module, ``.dev.vars``,
vendored packages) on the open-source ``workerd`` with Pyodide, prepared offline by pyworkerd
(:func:`prepare_pyworkerd`), with the interface of :class:`doemu.testing.devserver.DevServer` so
the same client script runs against both. The config is generated from the project's own
config by :func:`plan_worker` / :func:`write_worker`.

It is test plumbing: nothing here is needed to run doemu or to deploy.
"""

from __future__ import annotations

from .generate import MAX_COMPATIBILITY_DATE as MAX_COMPATIBILITY_DATE
from .generate import REQUIRED_FLAGS as REQUIRED_FLAGS
from .generate import Binding as Binding
from .generate import Namespace as Namespace
from .generate import WorkerPlan as WorkerPlan
from .generate import plan_worker as plan_worker
from .generate import render_config as render_config
from .generate import write_worker as write_worker
from .locate import PyworkerdPaths as PyworkerdPaths
from .locate import PyworkerdUnavailableError as PyworkerdUnavailableError
from .locate import WorkerdError as WorkerdError
from .locate import default_home as default_home
from .locate import find_pyworkerd as find_pyworkerd
from .locate import prepare_pyworkerd as prepare_pyworkerd
from .server import WorkerdServer as WorkerdServer
from .server import WorkerdStartError as WorkerdStartError
from .vendor import Module as Module
from .vendor import VendorError as VendorError

__all__ = [
    "MAX_COMPATIBILITY_DATE",
    "REQUIRED_FLAGS",
    "Binding",
    "Module",
    "Namespace",
    "PyworkerdPaths",
    "PyworkerdUnavailableError",
    "VendorError",
    "WorkerPlan",
    "WorkerdError",
    "WorkerdServer",
    "WorkerdStartError",
    "default_home",
    "find_pyworkerd",
    "plan_worker",
    "prepare_pyworkerd",
    "render_config",
    "write_worker",
]
