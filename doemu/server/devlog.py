"""``doemu dev``'s log: one format for doemu's, uvicorn's and the reloader's lines, a line per
request, colours on a terminal, and no library debug noise.

Every line is ``HH:MM:SS LEVEL name: message`` on stderr (stdout carries the banner and the
ready line that harnesses wait for). uvicorn is started with ``log_config=None`` so that its
loggers reach the same handler instead of its own formatter.

The request log (:class:`AccessLog`, logger ``doemu.http``) writes one line per HTTP request
(``GET /COUNTER/a/incr 200 1.2 ms``) and two per WebSocket (``101`` when the upgrade is accepted,
then the connection's lifetime when it closes). It is on the hot path, so it is only installed
when ``doemu.http`` logs at INFO (``--log-level warning`` removes it entirely: the benchmark runs
that way), and it builds one string per request. Admin API calls are logged at DEBUG only: the
CLI and the inspector would otherwise drown the application's requests.

Colours follow the usual conventions: only when stderr is a terminal, never with ``NO_COLOR``
set (https://no-color.org), always with ``FORCE_COLOR`` set.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "ACCESS_LOGGER",
    "TRACE",
    "AccessLog",
    "LineFormatter",
    "access_log_enabled",
    "setup_logging",
    "use_colour",
]

#: uvicorn's TRACE level, below DEBUG.
TRACE = 5
#: The request log's logger.
ACCESS_LOGGER = "doemu.http"
_ADMIN_PREFIX = "/__doemu"
#: Libraries whose DEBUG lines say nothing about the user's Worker; kept at WARNING unless
#: ``--log-level trace`` asks for everything.
_QUIET_LIBRARIES = (
    "asyncio", "aiosqlite", "websockets", "httpx", "httpcore", "watchfiles", "multipart",
    "python_multipart", "hpack", "uvicorn.access",
)  # fmt: skip

_SHORT_LEVELS = {"WARNING": "WARN", "CRITICAL": "CRIT"}
_RESET = "\x1b[0m"
_LEVEL_COLOURS = {
    "TRACE": "\x1b[2m",
    "DEBUG": "\x1b[2m",
    "INFO": "\x1b[32m",
    "WARNING": "\x1b[33m",
    "ERROR": "\x1b[31m",
    "CRITICAL": "\x1b[1;31m",
}
_STATUS_COLOURS = {1: "\x1b[36m", 2: "\x1b[32m", 3: "\x1b[36m", 4: "\x1b[33m", 5: "\x1b[31m"}


def use_colour(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Colours for ``stream``: ``NO_COLOR`` wins, then ``FORCE_COLOR``, then "is it a TTY"."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class LineFormatter(logging.Formatter):
    """``12:00:01 INFO  doemu.http: GET / 200 1.2 ms``, coloured when ``colour``.

    A request line's record carries its status (``extra={"status": …}``) so that the status
    alone is coloured by class (2xx green, 4xx yellow, 5xx red).
    """

    def __init__(self, *, colour: bool) -> None:
        super().__init__("%(message)s")
        self.colour = colour

    _second = -1
    _when = ""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info or record.stack_info:
            message = super().format(record)
        second = int(record.created)
        if second != self._second:  # strftime once a second, not once a line
            self._second, self._when = second, time.strftime("%H:%M:%S", time.localtime(second))
        when = self._when
        level = record.levelname
        padded = f"{_SHORT_LEVELS.get(level, level):<5}"
        if not self.colour:
            return f"{when} {padded} {record.name}: {message}"
        status = getattr(record, "status", None)
        if isinstance(status, int):
            text = str(status)
            coloured = f"{_STATUS_COLOURS.get(status // 100, '')}{text}{_RESET}"
            message = message.replace(f" {text} ", f" {coloured} ", 1)
        tint = _LEVEL_COLOURS.get(level, "")
        name = f"\x1b[2m{record.name}:{_RESET}"
        return f"\x1b[2m{when}{_RESET} {tint}{padded}{_RESET} {name} {message}"


def setup_logging(level: str, *, stream: TextIO | None = None) -> None:
    """Log to stderr at ``level`` (a setting's value, ``trace`` included) in doemu's one format.

    Replaces any handler on the root logger (a reload child and the tests may call it twice), and
    caps the chatty libraries at WARNING unless ``level`` is ``trace``.
    """
    logging.addLevelName(TRACE, "TRACE")  # "trace" is a valid setting; logging lacks the level
    target = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(target)
    handler.setFormatter(LineFormatter(colour=use_colour(target)))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = TRACE if level == "trace" else logging.getLevelNamesMapping()[level.upper()]
    root.setLevel(numeric)
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(numeric if level == "trace" else logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        # uvicorn's own dictConfig (an earlier server in this process, a library) may have given
        # these loggers handlers of their own and cut them off from the root: one format only.
        uvicorn_logger = logging.getLogger(name)
        for old in list(uvicorn_logger.handlers):
            uvicorn_logger.removeHandler(old)
        uvicorn_logger.propagate = True


def access_log_enabled() -> bool:
    """Whether the request log would write anything (INFO enabled for ``doemu.http``)."""
    return logging.getLogger(ACCESS_LOGGER).isEnabledFor(logging.INFO)


class AccessLog:
    """ASGI middleware: one log line per request, ``METHOD PATH STATUS DURATION``.

    WebSockets: ``GET /path 101 …`` when the upgrade is accepted (its duration is the time to
    accept) and ``WS /path closed after 2.5 s`` when the connection ends; a refused upgrade logs
    its status (uvicorn answers 403). A request whose application raised logs 500.
    """

    __slots__ = ("app", "logger")

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.logger = logging.getLogger(ACCESS_LOGGER)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        path: str = scope["path"]
        query: bytes = scope.get("query_string", b"")
        target = f"{path}?{query.decode('latin-1')}" if query else path
        level = logging.DEBUG if path.startswith(_ADMIN_PREFIX) else logging.INFO
        method = scope.get("method", "GET")
        state: dict[str, Any] = {}

        async def logged_send(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                state["status"] = message["status"]
            elif kind == "websocket.accept":
                state["status"] = 101
                state["accepted"] = time.perf_counter()
                self._line(level, method, target, 101, start)
            elif kind == "websocket.close" and "status" not in state:
                state["status"] = 403
            elif kind == "websocket.http.response.start":
                state["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, logged_send)
        except BaseException:
            if "status" not in state:
                state["status"] = 500
            raise
        finally:
            accepted = state.get("accepted")
            if accepted is not None:
                lived = time.perf_counter() - accepted
                if self.logger.isEnabledFor(level):
                    self.logger.log(level, "WS %s closed after %.1f s", target, lived)
            else:
                self._line(level, method, target, state.get("status", 500), start)

    def _line(self, level: int, method: str, target: str, status: int, start: float) -> None:
        """Log the request; the record is made directly (no caller lookup: a third of the cost)."""
        logger = self.logger
        if logger.isEnabledFor(level):
            ms = (time.perf_counter() - start) * 1000.0
            record = logger.makeRecord(
                logger.name, level, __file__, 0, "%s %s %d %.1f ms", (method, target, status, ms),
                None, extra={"status": status},
            )  # fmt: skip
            logger.handle(record)
