"""KV namespaces (``kv_namespaces``): ``env.KV.get/put/list/…`` on a SQLite file per namespace.

:mod:`~doemu.bindings.kv.store` keeps the entries (expiry on the doemu clock, listing order,
cursors); :mod:`~doemu.bindings.kv.namespace` is what user code holds, with Cloudflare's argument
forms, limits, error texts and result shapes.
"""

from __future__ import annotations

from .namespace import KV_LIMITS as KV_LIMITS
from .namespace import KvError as KvError
from .namespace import KVNamespace as KVNamespace
from .store import KvEntry as KvEntry
from .store import KvListing as KvListing
from .store import KvStore as KvStore

__all__ = ["KV_LIMITS", "KVNamespace", "KvEntry", "KvError", "KvListing", "KvStore"]
