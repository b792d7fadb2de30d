"""Same script, two targets: a project served by ``doemu dev`` or by real workerd.

A differential test is written once against :class:`TargetServer` — ``url``, ``ws_url``,
``kill()``, ``restart()``, ``sql()`` — and runs on both targets (the ``target`` fixture of
``e2e/differential/conftest.py``):

* ``doemu``: the shipped :class:`doemu.testing.devserver.DevServer` (``doemu dev`` in a
  subprocess, CPython, doemu's compat layer);
* ``workerd``: :class:`doemu.testing.workerd.WorkerdServer` (Cloudflare's open-source runtime
  running the same project on Pyodide, prepared by pyworkerd).

Both keep objects in the same on-disk layout (``<persist>/<worker>-<Class>/<id>.sqlite``, the
namespace's alarms in ``metadata.sqlite``), so ``server.sql(...)`` and :func:`stored_alarm`
observe committed state on either without waking an object.

When pyworkerd cannot be prepared, the workerd side is skipped with the reason, unless
``DOEMU_E2E_REQUIRE_WORKERD=1`` (CI), which makes it fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing, suppress
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import pytest
from websockets.sync.client import ClientConnection

from doemu.config import WorkerConfig
from doemu.ids import IdFactory
from doemu.persist import metadata_file, namespace_dir
from doemu.testing.devserver import DevServer
from doemu.testing.workerd import (
    PyworkerdPaths,
    PyworkerdUnavailableError,
    WorkerdServer,
    prepare_pyworkerd,
)
from tests.polling import eventually_sync

__all__ = [
    "AGENTS_VENDOR",
    "REQUIRE_WORKERD",
    "ROOT",
    "STARTS",
    "TARGETS",
    "TargetServer",
    "close_and_await",
    "copy_project",
    "pyworkerd_or_skip",
    "start_server",
    "stored_alarm",
    "timings",
]

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("doemu", "workerd")
#: ``DOEMU_E2E_REQUIRE_WORKERD=1``: a workerd target that cannot be prepared fails (CI).
REQUIRE_WORKERD = "DOEMU_E2E_REQUIRE_WORKERD"
#: What a project using ``agents`` vendors on workerd (pywrangler would vendor the same): the
#: package itself and its pure-Python dependencies (croniter needs python-dateutil; structured
#: output, fastjsonschema).
AGENTS_VENDOR = ("agents", "croniter", "python-dateutil", "fastjsonschema")

T = TypeVar("T")

#: Seconds spent starting each target, for the run's summary line (see conftest.py).
timings: dict[str, list[float]] = {target: [] for target in TARGETS}
#: The name of a test report's user property listing the workerd starts (seconds) made in it.
STARTS = "workerd_starts"


class TargetServer(Protocol):
    """What a differential test may use: the methods both servers have."""

    project: Path
    persist_dir: Path
    lines: list[str]
    #: What each earlier run printed (``lines`` is this run's).
    outputs: list[str]

    @property
    def url(self) -> str: ...

    @property
    def ws_url(self) -> str: ...

    @property
    def running(self) -> bool: ...

    @property
    def output(self) -> str: ...

    @property
    def config(self) -> WorkerConfig: ...

    def kill(self) -> None: ...

    def restart(self, timeout: float = ..., *, graceful: bool = ...) -> Any: ...

    def stop(self, timeout: float = ...) -> int: ...

    def wait_for_line(self, pattern: str, within: float = ...) -> str: ...

    def object_ids(self, binding: str) -> list[str]: ...

    def sql(
        self, binding: str, name_or_id: str, query: str, *params: Any
    ) -> list[dict[str, Any]]: ...


_prepared: list[PyworkerdPaths | str] = []


def pyworkerd_or_skip() -> PyworkerdPaths:
    """pyworkerd, prepared once per session; skips the test (fails it, in CI) when it cannot be."""
    if not _prepared:
        try:
            _prepared.append(prepare_pyworkerd())
        except PyworkerdUnavailableError as exc:
            _prepared.append(f"workerd target unavailable: {exc}")
    found = _prepared[0]
    if isinstance(found, str):
        if os.environ.get(REQUIRE_WORKERD) == "1":
            pytest.fail(f"{found} ({REQUIRE_WORKERD}=1)", pytrace=False)
        pytest.skip(found)
    return found


def copy_project(source: Path, target: Path) -> Path:
    """A private copy of an example (``doemu dev`` may write beside its config)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    return target


def start_server(
    target: str,
    project: Path,
    persist_dir: Path,
    *,
    vendor: Sequence[str] = (),
    vars: Mapping[str, str] | None = None,
) -> DevServer | WorkerdServer:
    """A started server for ``project`` on ``target`` (``doemu`` or ``workerd``)."""
    began = time.monotonic()
    server: DevServer | WorkerdServer
    if target == "doemu":
        args = [arg for key, value in (vars or {}).items() for arg in ("--var", f"{key}:{value}")]
        server = DevServer(project, persist_dir, args=args).start()
    elif target == "workerd":
        paths = pyworkerd_or_skip()
        server = WorkerdServer(project, persist_dir, vars=vars, vendor=vendor, paths=paths).start()
    else:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    timings[target].append(time.monotonic() - began)
    return server


def stored_alarm(server: TargetServer, binding: str, name: str) -> int | None:
    """The alarm time (epoch ms) stored for object ``name``, or ``None``: read from the
    namespace's ``metadata.sqlite`` (``_cf_ALARM``, the same table on both targets; workerd
    stores nanoseconds, doemu milliseconds)."""
    config = server.config
    key = config.unique_key(config.binding(binding))
    path = metadata_file(namespace_dir(server.persist_dir, key))
    if not path.exists():
        return None
    object_id = IdFactory(key).from_name(name).toString()
    uri = f"file:{quote(str(path), safe='/')}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        try:
            row = db.execute(
                "SELECT scheduled_time FROM _cf_ALARM WHERE actor_id = ?", (object_id,)
            ).fetchone()
        except sqlite3.OperationalError:
            return None  # no table yet: no alarm was ever set
    if row is None or row[0] is None:
        return None
    return int(row[0]) // 1_000_000 if isinstance(server, WorkerdServer) else int(row[0])


def close_and_await(ws: ClientConnection, handled: Callable[[], T], *, what: str) -> T:
    """The client closes ``ws`` (a Close frame, 1000); once ``handled()`` shows that the server
    got it (its ``webSocketClose`` ran, its log says so), the client drops the connection.
    Returns what ``handled()`` returned.

    Why not ``ws.close()`` alone: workerd does not answer a client's Close frame on a
    hibernatable WebSocket whose handler does not close it in turn; it ends the TCP connection
    10 s later, and ``close()`` waits that long for the handshake. What the test observes of the
    close happens at once on both targets, so the test waits for that instead (doemu answers the
    Close frame at once: there the handshake is over before ``handled`` is first polled)."""
    closer = threading.Thread(target=ws.close, name="ws-close", daemon=True)
    closer.start()
    try:
        return eventually_sync(handled, within=15, what=what)
    finally:
        if closer.is_alive():
            with suppress(OSError):  # the handshake ended meanwhile: the socket is closed
                ws.socket.shutdown(socket.SHUT_RDWR)
        closer.join(timeout=15)
