"""Instances listed from their files: statuses without waking anyone.

Listing a workflow's instances (the admin API, the inspector's refreshes) must not construct
their objects: constructing one opens its file, counts against the live-object cap and, for a
sleeping instance, is work nobody asked for; with a thousand instances it would be a thousand
activations per refresh. So the ``workflow_instance`` row (:mod:`.records`) is read here from
each instance's file through a read-only connection (``mode=ro``; WAL lets it read beside a live
object's writer), which sees exactly what has been committed and can change nothing: no object,
alarm or row is touched. One worker thread reads every file of a listing, so a thousand
instances do not start a thousand threads.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ... import clone
from ...persist import object_file

__all__ = ["InstanceOutcome", "InstanceSummary", "read_outcomes", "read_summaries"]

_SUMMARY = "SELECT id, status, created, started, ended FROM workflow_instance LIMIT 1"
_OUTCOME = "SELECT error, output FROM workflow_instance LIMIT 1"


@dataclass(frozen=True)
class InstanceSummary:
    """One instance as a listing shows it; ``hex_id`` names its object (and file)."""

    hex_id: str
    id: str
    status: str
    created: float
    started: float | None
    ended: float | None

    def view(self) -> dict[str, Any]:
        """The admin API's fields (the object id stays internal)."""
        return {
            "id": self.id,
            "status": self.status,
            "created": self.created,
            "started": self.started,
            "ended": self.ended,
        }


@dataclass(frozen=True)
class InstanceOutcome:
    """What ``status()`` adds to the status: the run's ``error`` and ``output`` (decoded)."""

    error: dict[str, Any] | None
    output: Any


def _row(path: Path, query: str) -> tuple[Any, ...] | None:
    """The instance row's ``query`` columns; None when the file or the row is missing (a
    create cut off by a crash, or its first turn not committed yet)."""
    try:
        db = sqlite3.connect(f"file:{quote(str(path), safe='/')}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return None  # removed since it was listed
    try:
        row: tuple[Any, ...] | None = db.execute(query).fetchone()
    except sqlite3.OperationalError:
        return None  # no table yet
    finally:
        db.close()
    return row


def read_summaries(directory: Path, hex_ids: Sequence[str]) -> list[InstanceSummary]:
    """Every instance among ``hex_ids`` that has its row, newest first (ties by id).

    Blocking: call it in a worker thread."""
    out = []
    for hex_id in hex_ids:
        row = _row(object_file(directory, hex_id), _SUMMARY)
        if row is None:
            continue
        instance_id, status, created, started, ended = row
        out.append(
            InstanceSummary(
                hex_id,
                str(instance_id),
                str(status),
                float(created),
                None if started is None else float(started),
                None if ended is None else float(ended),
            )
        )
    out.sort(key=lambda s: (-s.created, s.id))
    return out


def read_outcomes(directory: Path, hex_ids: Sequence[str]) -> dict[str, InstanceOutcome]:
    """The error and output of each instance among ``hex_ids``, by object id; an instance
    whose row cannot be read is left out, one whose output cannot be decoded says so in place
    of it. Blocking: call it in a worker thread."""
    out = {}
    for hex_id in hex_ids:
        row = _row(object_file(directory, hex_id), _OUTCOME)
        if row is None:
            continue
        error, output = row
        try:
            value = None if output is None else clone.decode(bytes(output))
        except Exception as exc:  # one corrupt value must not hide the other instances
            value = {"$error": f"undecodable output: {exc}"}
        out[hex_id] = InstanceOutcome(None if error is None else dict(json.loads(error)), value)
    return out
