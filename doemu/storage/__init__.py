"""Per-object storage: Cloudflare's ``ctx.storage`` over one SQLite file.

:class:`ObjectStorage` is what the runtime creates for each live object, and
:class:`DurableObjectStorage` its view that user code gets as ``ctx.storage``; the other names are
the types user code meets through it (``storage.sql`` cursors and rows, ``storage.kv``,
the ``txn`` of ``transaction()``).
"""

from __future__ import annotations

from doemu.storage.api import DurableObjectStorage as DurableObjectStorage
from doemu.storage.cursor import IteratorResult as IteratorResult
from doemu.storage.cursor import RawIterator as RawIterator
from doemu.storage.cursor import SqlCursor as SqlCursor
from doemu.storage.cursor import SqlRow as SqlRow
from doemu.storage.errors import StorageTypeError as StorageTypeError
from doemu.storage.limits import StorageLimits as StorageLimits
from doemu.storage.resolved import Resolved as Resolved
from doemu.storage.sql import SqlStorage as SqlStorage
from doemu.storage.storage import ObjectStorage as ObjectStorage
from doemu.storage.sync_kv import SyncKvStorage as SyncKvStorage
from doemu.storage.transactions import Transaction as Transaction

__all__ = [
    "DurableObjectStorage",
    "IteratorResult",
    "ObjectStorage",
    "RawIterator",
    "Resolved",
    "SqlCursor",
    "SqlRow",
    "SqlStorage",
    "StorageLimits",
    "StorageTypeError",
    "SyncKvStorage",
    "Transaction",
]
