"""``doemu dev``'s log: the one line format, colours only where wanted, quiet libraries, and the
request log middleware (one line per request, two per WebSocket)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from doemu.server.devlog import ACCESS_LOGGER, AccessLog, LineFormatter, setup_logging, use_colour


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    assert use_colour(_Tty(), {}) is True
    assert use_colour(io.StringIO(), {}) is False
    assert use_colour(_Tty(), {"NO_COLOR": "1"}) is False
    assert use_colour(io.StringIO(), {"FORCE_COLOR": "1"}) is True


def _record(message: str, *args: Any, status: int | None = None) -> logging.LogRecord:
    record = logging.LogRecord(ACCESS_LOGGER, logging.INFO, __file__, 1, message, args, None)
    if status is not None:
        record.status = status
    return record


def test_one_plain_format() -> None:
    line = LineFormatter(colour=False).format(_record("GET %s %d %.1f ms", "/a", 200, 1.25))
    time_, level, name, *rest = line.split(maxsplit=3)
    assert len(time_) == 8 and time_[2] == ":" and (level, name) == ("INFO", "doemu.http:")
    assert rest == ["GET /a 200 1.2 ms"]
    assert "\x1b[" not in line


def test_colour_marks_the_status() -> None:
    line = LineFormatter(colour=True).format(_record("GET /a 404 1.0 ms", status=404))
    assert "\x1b[33m404\x1b[0m" in line


@pytest.fixture
def root_logging() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    saved_levels = {n: logging.getLogger(n).level for n in ("asyncio", "aiosqlite", "watchfiles")}
    stream = io.StringIO()
    try:
        yield stream
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)


def test_libraries_are_quiet_at_debug_and_uvicorn_shares_the_format(
    root_logging: io.StringIO,
) -> None:
    """Before: basicConfig at DEBUG let asyncio's and aiosqlite's lines through, and uvicorn
    logged through its own formatter."""
    setup_logging("debug", stream=root_logging)
    logging.getLogger("aiosqlite").debug("executing something")
    logging.getLogger("asyncio").debug("Using selector")
    logging.getLogger("doemu.x").debug("ours")
    logging.getLogger("uvicorn.error").warning("theirs")
    lines = root_logging.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "DEBUG doemu.x: ours",
        "WARN  uvicorn.error: theirs",
    ]


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 1000})
        return
    if scope["path"] == "/boom":
        raise RuntimeError("boom")
    await send({"type": "http.response.start", "status": 201, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def _noop_send(message: Any) -> None:
    pass


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b""}


async def test_access_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=ACCESS_LOGGER)
    app = AccessLog(_app)
    base = {"query_string": b"", "headers": []}
    await app({**base, "type": "http", "method": "POST", "path": "/C/a/incr"}, _receive, _noop_send)
    await app(
        {**base, "type": "http", "method": "GET", "path": "/q", "query_string": b"x=1"},
        _receive,
        _noop_send,
    )
    with pytest.raises(RuntimeError):
        await app({**base, "type": "http", "method": "GET", "path": "/boom"}, _receive, _noop_send)
    await app({**base, "type": "websocket", "path": "/C/a/ws"}, _receive, _noop_send)
    await app(
        {**base, "type": "http", "method": "GET", "path": "/__doemu/api/x"}, _receive, _noop_send
    )
    messages = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == ACCESS_LOGGER]
    shapes = [(level, " ".join(m.split()[:3])) for level, m in messages]
    assert shapes == [
        (logging.INFO, "POST /C/a/incr 201"),
        (logging.INFO, "GET /q?x=1 201"),
        (logging.INFO, "GET /boom 500"),
        (logging.INFO, "GET /C/a/ws 101"),
        (logging.INFO, "WS /C/a/ws closed"),
        (logging.DEBUG, "GET /__doemu/api/x 201"),
    ]
    assert all(m.endswith(" ms") for _, m in messages if not m.startswith("WS"))


def test_loader_report_keeps_only_user_frames(tmp_path: Any) -> None:
    from doemu.loader import user_traceback

    user = tmp_path / "mod.py"
    user.write_text("def f():\n    raise ValueError('mine')\n")
    namespace: dict[str, Any] = {}
    exec(compile(user.read_text(), str(user), "exec"), namespace)
    try:
        namespace["f"]()
    except ValueError as exc:
        text = user_traceback(exc, [tmp_path])
    assert 'mod.py", line 2, in f' in text and text.endswith("ValueError: mine")
    assert "test_devx_log.py" not in text
