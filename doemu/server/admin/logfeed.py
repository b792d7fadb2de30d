"""Requests and log lines as timeline events, for the admin event stream while someone reads it.

The runtime's event bus carries lifecycle events only (what tests and recovery code wait for).
A person watching the inspector's timeline, or ``doemu tail``, also wants to see the requests
that caused them and what the log said. :class:`LogFeed` is a logging handler that one event
stream attaches to the root logger for as long as it runs: each request line of the request log
(logger ``doemu.http``) becomes a ``request`` event ``{method, path, status, ms}``, any other
record at INFO or above a ``log`` event ``{level, logger, message}``. Nothing is attached, and
nothing costs anything, while no stream is open; with the request log off (``--log-level
warning``) there are no request events.

The admin API's own requests (logged at DEBUG) and its own logger are left out, so the
inspector's calls never feed its timeline. Records may come from other threads (the file worker,
a library's thread): they are handed to the stream's loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

__all__ = ["LogFeed"]

_ADMIN_PATH = "/__doemu"
_QUIET = ("doemu.admin", "doemu.events")


class LogFeed(logging.Handler):
    """Log records → ``(type, event)`` pairs in :attr:`queue` (see the module docstring)."""

    def __init__(self, maxsize: int = 1024) -> None:
        super().__init__(logging.INFO)
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(maxsize)

    def __enter__(self) -> LogFeed:
        logging.getLogger().addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger().removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            item = self._event(record)
        except Exception:  # a handler must never break the code that logged
            return
        if item is None:
            return
        if threading.get_ident() == self.thread:
            self._put(item)
        else:
            self.loop.call_soon_threadsafe(self._put, item)

    def _put(self, item: tuple[str, dict[str, Any]]) -> None:
        if self.queue.full():
            self.queue.get_nowait()  # a slow reader loses the oldest, never slows the server
        self.queue.put_nowait(item)

    @staticmethod
    def _event(record: logging.LogRecord) -> tuple[str, dict[str, Any]] | None:
        if record.name.startswith(_QUIET):
            return None
        timestamp = record.created * 1000.0
        status = getattr(record, "status", None)
        if record.name == "doemu.http" and isinstance(status, int):
            method, path, _, ms = record.args  # type: ignore[misc]
            if str(path).startswith(_ADMIN_PATH):
                return None
            return "request", {
                "timestamp": timestamp, "method": method, "path": path, "status": status,
                "ms": ms,
            }  # fmt: skip
        message = record.getMessage()
        if record.name == "doemu.http" and _ADMIN_PATH in message:
            return None
        return "log", {
            "timestamp": timestamp,
            "level": record.levelname,
            "logger": record.name,
            "message": message,
        }
