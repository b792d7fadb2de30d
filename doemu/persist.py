"""The on-disk layout of a persist directory: the one module that knows directory and file names.

```
<persist>/
  <uniqueKey>/               one directory per Durable Object class ("<worker>-<ClassName>")
    metadata.sqlite          the namespace's alarm table (see doemu.alarms.table)
    <64-hex id>.sqlite       one file per object (WAL mode: also -wal and -shm beside it)
    .spare/                  ready-made empty object files (see doemu.storage.files)
  kv/<namespace>.sqlite      one file per KV namespace (see doemu.bindings.kv)
  d1/<database>.sqlite       one file per D1 database, the database itself (see doemu.bindings.d1)
  r2/<bucket>/               one directory per R2 bucket (see doemu.bindings.r2)
    metadata.sqlite          its objects, versions and multipart uploads
    blobs/<2 hex>/<32 hex>   object bodies and parts, each written whole before it is named
  workflows/<name>/          one internal namespace per workflow (see doemu.bindings.workflows):
    metadata.sqlite          its alarms (what wakes sleeping instances at start-up)
    <64-hex id>.sqlite       one object per instance: its status, steps and events
  queues/<queue>.sqlite      one file per queue: its messages (see doemu.bindings.queues)
```

It is workerd's layout for local SQLite-backed objects, so a persist directory reads the same to
both. Object names and ids never become file names except as validated 64-hex ids: a name is
hashed into an id first (:mod:`doemu.ids`), and :func:`object_file` refuses anything else, so no
request can reach a path outside its namespace's directory. A binding's resource (a KV namespace
id, a D1 database id, a bucket name) becomes a file name only when it is a plain name
(:func:`resource_stem`; anything else is hashed), and its directories hold no ``-``, so they
never collide with a namespace's ``<worker>-<Class>``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from .errors import DoemuError, InvalidIdError
from .ids import is_hex_id

__all__ = [
    "METADATA_FILE",
    "SPARE_DIR",
    "d1_file",
    "kv_file",
    "metadata_file",
    "namespace_dir",
    "object_file",
    "queue_file",
    "r2_blob_file",
    "r2_dir",
    "resource_stem",
    "spare_dir",
    "stored_ids",
    "unique_key",
    "workflow_dir",
    "workflow_key",
]

#: The namespace's alarm table, beside its object files.
METADATA_FILE = "metadata.sqlite"
#: Where a namespace directory keeps its ready-made object files.
SPARE_DIR = ".spare"
_OBJECT_SUFFIX = ".sqlite"

_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def unique_key(worker_name: str, class_name: str) -> str:
    """workerd's namespace key ``<worker>-<ClassName>``, refused if it could not be a directory."""
    key = f"{worker_name}-{class_name}"
    if not _KEY.fullmatch(key):
        raise DoemuError(f"cannot derive a storage directory from namespace {key!r}")
    return key


def namespace_dir(root: Path, key: str) -> Path:
    """The directory of the namespace ``key`` (from :func:`unique_key`) under ``root``."""
    if not _KEY.fullmatch(key):
        raise DoemuError(f"cannot derive a storage directory from namespace {key!r}")
    return root / key


def object_file(directory: Path, hex_id: str) -> Path:
    """The file of object ``hex_id`` in a namespace directory; only 64-hex ids are accepted."""
    if not is_hex_id(hex_id):  # defence in depth: only validated ids become file names
        raise InvalidIdError(f"refusing to use {hex_id!r} as an object file name")
    return directory / f"{hex_id.lower()}{_OBJECT_SUFFIX}"


def metadata_file(directory: Path) -> Path:
    """The namespace's ``metadata.sqlite`` (its alarm table)."""
    return directory / METADATA_FILE


def spare_dir(directory: Path) -> Path:
    """Where ready-made object files wait to be renamed into place."""
    return directory / SPARE_DIR


def stored_ids(directory: Path) -> list[str]:
    """Ids of every object with a file in the namespace directory, sorted."""
    if not directory.is_dir():
        return []
    return sorted(
        path.stem for path in directory.glob(f"*{_OBJECT_SUFFIX}") if is_hex_id(path.stem)
    )


# ------------------------------------------------------------------------------------- bindings

_BLOB_ID = re.compile(r"[0-9a-f]{32}")


def resource_stem(name: str) -> str:
    """A file name for a binding's resource: the name itself when it is a plain name (letters,
    digits, ``_``, ``.``, ``-``; not starting with ``.``; at most 100 characters), else a hash."""
    if _KEY.fullmatch(name) and len(name) <= 100:
        return name
    return "h-" + hashlib.sha256(name.encode()).hexdigest()[:32]


def kv_file(root: Path, namespace: str) -> Path:
    """The SQLite file of the KV namespace ``namespace`` (its id, else its binding name)."""
    return root / "kv" / f"{resource_stem(namespace)}{_OBJECT_SUFFIX}"


def d1_file(root: Path, database: str) -> Path:
    """The SQLite file that is the D1 database ``database`` (its id, else name, else binding)."""
    return root / "d1" / f"{resource_stem(database)}{_OBJECT_SUFFIX}"


def r2_dir(root: Path, bucket: str) -> Path:
    """The directory of the R2 bucket ``bucket``: ``metadata.sqlite`` and ``blobs/``."""
    return root / "r2" / resource_stem(bucket)


def r2_blob_file(bucket_dir: Path, blob_id: str) -> Path:
    """Where a body (or a part) with the 32-hex ``blob_id`` lives; only such ids are accepted."""
    if _BLOB_ID.fullmatch(blob_id) is None:
        raise DoemuError(f"refusing to use {blob_id!r} as an R2 blob file name")
    return bucket_dir / "blobs" / blob_id[:2] / blob_id


def workflow_key(worker_name: str, workflow: str) -> str:
    """The internal namespace key of a workflow's instances (what their ids derive from)."""
    key = f"{worker_name}-workflow-{resource_stem(workflow)}"
    if not _KEY.fullmatch(key):
        raise DoemuError(f"cannot derive a storage directory from workflow {workflow!r}")
    return key


def workflow_dir(root: Path, workflow: str) -> Path:
    """The directory of the workflow ``workflow``'s instances (a namespace directory)."""
    return root / "workflows" / resource_stem(workflow)


def queue_file(root: Path, queue: str) -> Path:
    """The SQLite file holding the messages of the queue ``queue``."""
    return root / "queues" / f"{resource_stem(queue)}{_OBJECT_SUFFIX}"
