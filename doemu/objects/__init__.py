"""Objects: one host per Durable Object (activation, gates, event delivery), its ``ctx``, the
stubs that reach it, its namespace, and idle eviction."""

from __future__ import annotations

from .context import DurableObjectState as DurableObjectState
from .eviction import DEFAULT_MAX_LIVE as DEFAULT_MAX_LIVE
from .eviction import EvictionManager as EvictionManager
from .host import BLOCK_CONCURRENCY_NESTING_MESSAGE as BLOCK_CONCURRENCY_NESTING_MESSAGE
from .host import BLOCK_CONCURRENCY_TIMEOUT_MESSAGE as BLOCK_CONCURRENCY_TIMEOUT_MESSAGE
from .host import BLOCK_CONCURRENCY_TIMEOUT_MS as BLOCK_CONCURRENCY_TIMEOUT_MS
from .host import Lifecycle as Lifecycle
from .host import ObjectHost as ObjectHost
from .host import current_host as current_host
from .namespace import Namespace as Namespace
from .services import ClassSpec as ClassSpec
from .services import HostServices as HostServices
from .services import ObjectClass as ObjectClass
from .stubs import DurableObjectNamespace as DurableObjectNamespace
from .stubs import DurableObjectStub as DurableObjectStub

__all__ = [
    "BLOCK_CONCURRENCY_NESTING_MESSAGE",
    "BLOCK_CONCURRENCY_TIMEOUT_MESSAGE",
    "BLOCK_CONCURRENCY_TIMEOUT_MS",
    "DEFAULT_MAX_LIVE",
    "ClassSpec",
    "DurableObjectNamespace",
    "DurableObjectState",
    "DurableObjectStub",
    "EvictionManager",
    "HostServices",
    "Lifecycle",
    "Namespace",
    "ObjectClass",
    "ObjectHost",
    "current_host",
]
