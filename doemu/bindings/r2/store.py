"""An R2 bucket on disk: object bodies as files, everything else in ``metadata.sqlite``.

A body (or a multipart part) is written to ``blobs/.tmp/`` first, then renamed to
``blobs/<2 hex>/<32 hex>``; only after that does the row that names it commit. So a file in
``blobs/`` is always whole, a row only ever names a whole file, and a SIGKILL at any point leaves
either the old object or the new one, never half of one. At power durability the file is fsynced
before the rename, its directory after it, and the row's commit before the put resolves.

A body no row names any more (the old version of an overwritten object, a deleted one, the parts
of an aborted upload) is removed after the commit; if the process dies first, the sweep at the
next opening removes it (and anything left in ``blobs/.tmp/``). A reader keeps its file open, so
an object replaced while it is being read is still read whole.

Multipart objects keep their parts as separate files, linked to the object by its key (as
Miniflare does): completing an upload writes no new copy of the data.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ...clock import Clock
from ...persist import r2_blob_file
from ...storage.durability import SyncPool, fsync_paths
from ..sqlite import BindingFile

__all__ = ["BlobWriter", "ObjectRow", "PartRow", "R2Store"]

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS objects (key TEXT PRIMARY KEY, blob_id TEXT, version TEXT NOT "
    "NULL, size INTEGER NOT NULL, etag TEXT NOT NULL, uploaded INTEGER NOT NULL, checksums TEXT "
    "NOT NULL, http_metadata TEXT NOT NULL, custom_metadata TEXT NOT NULL, storage_class TEXT "
    "NOT NULL)",
    "CREATE TABLE IF NOT EXISTS uploads (upload_id TEXT PRIMARY KEY, key TEXT NOT NULL, "
    "http_metadata TEXT NOT NULL, custom_metadata TEXT NOT NULL, storage_class TEXT NOT NULL, "
    "state INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS parts (upload_id TEXT NOT NULL, part_number INTEGER NOT NULL, "
    "blob_id TEXT NOT NULL, size INTEGER NOT NULL, etag TEXT NOT NULL, md5 TEXT NOT NULL, "
    "object_key TEXT, PRIMARY KEY (upload_id, part_number))",
    "CREATE INDEX IF NOT EXISTS parts_by_object ON parts(object_key) WHERE object_key IS NOT NULL",
]
_OBJECT_COLUMNS = (
    "key, blob_id, version, size, etag, uploaded, checksums, http_metadata, custom_metadata, "
    "storage_class"
)
#: Upload states (as Miniflare numbers them).
IN_PROGRESS, COMPLETED, ABORTED = 0, 1, 2
#: Bytes read from a body file per step of a stream.
CHUNK = 1024 * 1024
#: A read at most this long is done in one worker-thread step (open and read together).
WHOLE_READ = 8 * 1024 * 1024
#: The hash algorithms R2 checks (hashlib names).
HASHES = ("md5", "sha1", "sha256", "sha384", "sha512")


@dataclass(frozen=True, slots=True)
class ObjectRow:
    """One object's metadata (``blob_id`` None: a multipart object, its body in parts)."""

    key: str
    blob_id: str | None
    version: str
    size: int
    etag: str
    uploaded: int
    checksums: str
    http_metadata: str
    custom_metadata: str
    storage_class: str


@dataclass(frozen=True, slots=True)
class PartRow:
    part_number: int
    blob_id: str
    size: int
    etag: str
    md5: str


@dataclass(slots=True)
class WrittenBlob:
    """A whole body on disk, not yet named by any row: its id, size and digests (hex)."""

    blob_id: str
    size: int
    digests: dict[str, str]


class BlobWriter:
    """A body being written to ``blobs/.tmp/``; :meth:`finish` makes it a whole blob file.

    Every file operation runs in a worker thread (hashing too), never on the event loop.
    """

    def __init__(self, store: R2Store, algorithms: Sequence[str]) -> None:
        self._store = store
        self._hashes = {name: hashlib.new(name) for name in dict.fromkeys(("md5", *algorithms))}
        self.blob_id = secrets.token_hex(16)
        self._temp = store.tmp_dir / self.blob_id
        self._file: BinaryIO | None = None
        self.size = 0

    async def write(self, chunk: bytes) -> None:
        await asyncio.to_thread(self._write, chunk)

    def _write(self, chunk: bytes) -> None:
        if self._file is None:
            self._store.tmp_dir.mkdir(parents=True, exist_ok=True)
            self._file = open(self._temp, "wb")
        self._file.write(chunk)
        for digest in self._hashes.values():
            digest.update(chunk)
        self.size += len(chunk)

    async def finish(self) -> WrittenBlob:
        """Sync (at power durability) and rename into ``blobs/``: the blob is whole from here."""
        return await asyncio.to_thread(self._finish)

    def _finish(self) -> WrittenBlob:
        if self._file is None:
            self._write(b"")
        assert self._file is not None
        self._file.flush()
        if self._store.durable:
            os.fsync(self._file.fileno())
        self._file.close()
        target = r2_blob_file(self._store.directory, self.blob_id)
        made_dir = not target.parent.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self._temp, target)
        if self._store.durable:
            fsync_paths([str(target.parent), *([str(target.parent.parent)] if made_dir else [])])
        return WrittenBlob(
            self.blob_id, self.size, {n: d.hexdigest() for n, d in self._hashes.items()}
        )

    async def discard(self) -> None:
        await asyncio.to_thread(self._discard)

    def _discard(self) -> None:
        if self._file is not None:
            self._file.close()
        self._temp.unlink(missing_ok=True)


class R2Store:
    """One bucket's directory (see the module docstring); used on the event loop."""

    def __init__(self, directory: Path, clock: Clock, sync_pool: SyncPool | None = None) -> None:
        self.directory = directory
        self.clock = clock
        self.durable = sync_pool is not None
        self.tmp_dir = directory / "blobs" / ".tmp"
        self._file = BindingFile(directory / "metadata.sqlite", _SCHEMA, sync_pool)
        self._db = self._file.conn
        self._sweep()

    # -- blobs -------------------------------------------------------------------------------------
    def writer(self, algorithms: Sequence[str] = ()) -> BlobWriter:
        return BlobWriter(self, algorithms)

    async def write_blob(self, data: bytes, algorithms: Sequence[str] = ()) -> WrittenBlob:
        """A whole body from bytes, in one worker-thread step."""
        writer = self.writer(algorithms)

        def work() -> WrittenBlob:
            writer._write(data)
            return writer._finish()

        try:
            return await asyncio.to_thread(work)
        except BaseException:
            await writer.discard()
            raise

    def blob_path(self, blob_id: str) -> Path:
        return r2_blob_file(self.directory, blob_id)

    def _remove_blobs(self, blob_ids: Sequence[str]) -> None:
        """Delete bodies no row names any more, in the background (a reader keeps its file)."""
        if not blob_ids:
            return
        paths = [self.blob_path(b) for b in blob_ids]

        def remove() -> None:
            for path in paths:
                path.unlink(missing_ok=True)

        task = asyncio.get_running_loop().run_in_executor(None, remove)
        _background.add(task)
        task.add_done_callback(_background.discard)

    def _sweep(self) -> None:
        """Remove bodies that no row names (left by a crash) and every unfinished write."""
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        blobs = self.directory / "blobs"
        if not blobs.is_dir():
            return
        named = {
            row[0]
            for row in self._db.execute(
                "SELECT blob_id FROM objects WHERE blob_id IS NOT NULL "
                "UNION SELECT blob_id FROM parts"
            )
        }
        for folder in blobs.iterdir():
            if not folder.is_dir() or folder.name == ".tmp":
                continue
            for path in folder.iterdir():
                if path.name not in named:
                    path.unlink(missing_ok=True)

    # -- objects -----------------------------------------------------------------------------------
    def head(self, key: str) -> ObjectRow | None:
        row = self._db.execute(
            f"SELECT {_OBJECT_COLUMNS} FROM objects WHERE key = ?", (key,)
        ).fetchone()
        return None if row is None else ObjectRow(*row)

    def parts_of(self, key: str) -> list[PartRow]:
        rows = self._db.execute(
            "SELECT part_number, blob_id, size, etag, md5 FROM parts WHERE object_key = ? "
            "ORDER BY part_number",
            (key,),
        ).fetchall()
        return [PartRow(*row) for row in rows]

    def put(
        self, row: ObjectRow, check: Callable[[ObjectRow | None], bool] | None = None
    ) -> tuple[bool, asyncio.Future[None] | None]:
        """Name a written body: the row replaces the key's (if ``check`` of the old one holds).

        Returns ``(stored, durable)``; when not stored the caller discards the body.
        """
        with self._file.write() as db:
            old = self.head(row.key)
            if check is not None and not check(old):
                return False, None
            freed = self._detach(old)
            db.execute(
                f"INSERT OR REPLACE INTO objects ({_OBJECT_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.key, row.blob_id, row.version, row.size, row.etag, row.uploaded,
                    row.checksums, row.http_metadata, row.custom_metadata, row.storage_class,
                ),
            )  # fmt: skip
        self._remove_blobs(freed)
        return True, self._file.durable()

    def _detach(self, old: ObjectRow | None) -> list[str]:
        """The bodies of ``old`` (its file, or its parts' files), their rows dropped."""
        if old is None:
            return []
        if old.blob_id is not None:
            return [old.blob_id]
        rows = self._db.execute(
            "DELETE FROM parts WHERE object_key = ? RETURNING blob_id", (old.key,)
        ).fetchall()
        return [r[0] for r in rows]

    def delete(self, keys: Sequence[str]) -> asyncio.Future[None] | None:
        freed: list[str] = []
        with self._file.write() as db:
            for key in keys:
                old = self.head(key)
                if old is not None:
                    freed += self._detach(old)
                    db.execute("DELETE FROM objects WHERE key = ?", (key,))
        self._remove_blobs(freed)
        return self._file.durable() if freed else None

    def list(
        self, prefix: str, start_after: str | None, limit: int, delimiter: str | None
    ) -> tuple[list[ObjectRow], list[str], str | None]:
        """Objects and delimited prefixes in key order, and the last key seen (for a cursor,
        ``None`` when the listing is complete)."""
        params = {"prefix": prefix, "after": start_after, "limit": limit + 1}
        where = "substr(key, 1, length(:prefix)) = :prefix AND (:after IS NULL OR key > :after)"
        if not delimiter:
            rows = self._db.execute(
                f"SELECT {_OBJECT_COLUMNS} FROM objects WHERE {where} ORDER BY key LIMIT :limit",
                params,
            ).fetchall()
            objects = [ObjectRow(*r) for r in rows[:limit]]
            last = objects[-1].key if len(rows) > limit and objects else None
            return objects, [], last
        # Group the keys that continue past the delimiter into one prefix each (max(key) so the
        # next page starts after every key of that prefix).
        grouped = self._db.execute(
            f"SELECT max(key) AS last_key, iif(instr(substr(key, length(:prefix) + 1), :delim), "
            f"'p' || substr(key, 1, length(:prefix) + instr(substr(key, length(:prefix) + 1), "
            f":delim) + length(:delim) - 1), 'k' || key) AS item, {_OBJECT_COLUMNS} "
            f"FROM objects WHERE {where} GROUP BY item ORDER BY last_key LIMIT :limit",
            {**params, "delim": delimiter},
        ).fetchall()
        objects, prefixes = [], []
        for _last_key, item, *columns in grouped[:limit]:
            if item.startswith("p"):
                prefixes.append(item[1:])
            else:
                objects.append(ObjectRow(*columns))
        last = grouped[limit - 1][0] if len(grouped) > limit else None
        return objects, prefixes, last

    def count(self, prefix: str = "") -> tuple[int, int]:
        """Objects whose key starts with ``prefix`` and their total size (the admin API's
        summary)."""
        row = self._db.execute(
            "SELECT count(*), coalesce(sum(size), 0) FROM objects "
            "WHERE substr(key, 1, length(:prefix)) = :prefix",
            {"prefix": prefix},
        ).fetchone()
        return int(row[0]), int(row[1])

    # -- multipart ---------------------------------------------------------------------------------
    def create_upload(
        self, upload_id: str, key: str, http: str, custom: str, storage_class: str
    ) -> asyncio.Future[None] | None:
        with self._file.write() as db:
            db.execute(
                "INSERT INTO uploads (upload_id, key, http_metadata, custom_metadata, "
                "storage_class) VALUES (?, ?, ?, ?, ?)",
                (upload_id, key, http, custom, storage_class),
            )
        return self._file.durable()

    def upload(self, upload_id: str, key: str) -> tuple[Any, ...] | None:
        """``(http_metadata, custom_metadata, storage_class, state)`` of an upload, or None."""
        row = self._db.execute(
            "SELECT http_metadata, custom_metadata, storage_class, state FROM uploads "
            "WHERE upload_id = ? AND key = ?",
            (upload_id, key),
        ).fetchone()
        return None if row is None else tuple(row)

    def put_part(
        self, upload_id: str, key: str, number: int, blob: WrittenBlob, etag: str
    ) -> tuple[bool, asyncio.Future[None] | None]:
        """Record a part (replacing one of the same number); False if the upload is not in
        progress (the caller discards the body)."""
        with self._file.write() as db:
            upload = self.upload(upload_id, key)
            if upload is None or upload[3] != IN_PROGRESS:
                return False, None
            old = db.execute(
                "SELECT blob_id FROM parts WHERE upload_id = ? AND part_number = ?",
                (upload_id, number),
            ).fetchone()
            db.execute(
                "INSERT OR REPLACE INTO parts (upload_id, part_number, blob_id, size, etag, md5) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (upload_id, number, blob.blob_id, blob.size, etag, blob.digests["md5"]),
            )
        self._remove_blobs([old[0]] if old else [])
        return True, self._file.durable()

    def parts(self, upload_id: str) -> dict[int, PartRow]:
        rows = self._db.execute(
            "SELECT part_number, blob_id, size, etag, md5 FROM parts WHERE upload_id = ?",
            (upload_id,),
        ).fetchall()
        return {r[0]: PartRow(*r) for r in rows}

    def complete(
        self, upload_id: str, row: ObjectRow, numbers: Sequence[int]
    ) -> asyncio.Future[None] | None:
        """Make the upload's chosen parts the object ``row`` (one transaction)."""
        with self._file.write() as db:
            freed = self._detach(self.head(row.key))
            db.execute(
                f"INSERT OR REPLACE INTO objects ({_OBJECT_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.key, None, row.version, row.size, row.etag, row.uploaded, row.checksums,
                    row.http_metadata, row.custom_metadata, row.storage_class,
                ),
            )  # fmt: skip
            db.executemany(
                "UPDATE parts SET object_key = ? WHERE upload_id = ? AND part_number = ?",
                [(row.key, upload_id, n) for n in numbers],
            )
            unused = db.execute(
                "DELETE FROM parts WHERE upload_id = ? AND object_key IS NULL RETURNING blob_id",
                (upload_id,),
            ).fetchall()
            db.execute("UPDATE uploads SET state = ? WHERE upload_id = ?", (COMPLETED, upload_id))
        self._remove_blobs([*freed, *(r[0] for r in unused)])
        return self._file.durable()

    def abort(self, upload_id: str) -> asyncio.Future[None] | None:
        with self._file.write() as db:
            state = db.execute(
                "SELECT state FROM uploads WHERE upload_id = ?", (upload_id,)
            ).fetchone()
            if state is None or state[0] != IN_PROGRESS:
                return None
            freed = db.execute(
                "DELETE FROM parts WHERE upload_id = ? RETURNING blob_id", (upload_id,)
            ).fetchall()
            db.execute("UPDATE uploads SET state = ? WHERE upload_id = ?", (ABORTED, upload_id))
        self._remove_blobs([r[0] for r in freed])
        return self._file.durable()

    # -- reading -----------------------------------------------------------------------------------
    async def read(self, row: ObjectRow, start: int, length: int) -> AsyncIterator[bytes]:
        """The bytes ``[start, start + length)`` of an object, as chunks read off the loop.

        Every file is opened before the first chunk is produced, so a replacement of the object
        while it is read cannot take its data away.
        """
        pieces: list[tuple[Path, int, int]] = []  # (file, offset in it, bytes from it)
        if row.blob_id is not None:
            pieces.append((self.blob_path(row.blob_id), start, length))
        else:
            at = 0
            end = start + length
            for part in self.parts_of(row.key):
                lo, hi = max(start, at), min(end, at + part.size)
                if lo < hi:
                    pieces.append((self.blob_path(part.blob_id), lo - at, hi - lo))
                at += part.size
        if length <= WHOLE_READ:
            data = await asyncio.to_thread(_read_all, pieces)
            return _one(data)
        files = await asyncio.to_thread(_open_all, [p for p, _, _ in pieces])
        return _chunks(files, pieces)

    def close(self) -> None:
        self._file.close()


_background: set[asyncio.Future[None]] = set()


def _read_all(pieces: Sequence[tuple[Path, int, int]]) -> bytes:
    parts = []
    for path, offset, length in pieces:
        with open(path, "rb") as file:
            file.seek(offset)
            data = file.read(length)
        if len(data) != length:
            raise OSError(f"R2 body file {path} ended early")
        parts.append(data)
    return b"".join(parts)


async def _one(data: bytes) -> AsyncIterator[bytes]:
    if data:
        yield data


def _open_all(paths: Sequence[Path]) -> list[BinaryIO]:
    files: list[BinaryIO] = []
    try:
        for path in paths:
            files.append(open(path, "rb"))
    except OSError:
        for file in files:
            file.close()
        raise
    return files


async def _chunks(
    files: list[BinaryIO], pieces: list[tuple[Path, int, int]]
) -> AsyncIterator[bytes]:
    try:
        for file, (_, offset, length) in zip(files, pieces, strict=True):
            file.seek(offset)
            left = length
            while left > 0:
                chunk = await asyncio.to_thread(file.read, min(CHUNK, left))
                if not chunk:
                    raise OSError(f"R2 body file {file.name} ended early")
                left -= len(chunk)
                yield chunk
    finally:
        for file in files:
            file.close()
