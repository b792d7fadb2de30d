"""A doemu project on real workerd in a subprocess: start, SIGKILL, restart on the same state.

:class:`WorkerdServer` has the interface of :class:`doemu.testing.devserver.DevServer` where it
makes sense (``start``, ``kill``, ``stop``, ``restart``, ``url``, ``ws_url``, ``lines``,
``output``, ``wait_for_line``, a context manager, and the read-only ``sql``/``object_file``/
``object_ids`` views of the objects' files), so one client script drives either target.

How it runs: each ``start()`` reads the project's wrangler config again, writes workerd's
config and modules into a build directory (:mod:`.generate`), binds the listening socket in this
process and hands it to ``workerd serve --socket-fd http=FD`` — port 0 gets a free port with no
window for another process to take it, and a restart binds the same port again. Then it closes
its own copy, so once workerd dies the port is closed (a client gets "connection refused", not a
connection that hangs in the backlog). workerd runs with ``--verbose`` (Python tracebacks reach
the log) in its own process group; ``kill()`` is a SIGKILL to the group, a crash: the objects'
``localDisk`` SQLite files keep exactly what was committed, and a ``restart()`` on the same
persist dir is a genuine crash recovery (a stored alarm fires with no request).

``start()`` returns once the Worker answers HTTP (``GET /``, any status; Pyodide takes 5-7 s to
load on an idle machine). A Worker that fails to load (an import error, entropy at import) makes
workerd exit with the traceback in its log; when workerd exits first or the deadline passes,
``start()`` raises :class:`WorkerdStartError` with the log's tail.

``kv()`` is the one ``DevServer`` reader not offered: workerd stores KV values in V8's
serialization format, doemu in msgpack; read KV through the Worker instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

from ...config import WorkerConfig, load_config
from ...inspection.offline import find_object_file
from ...inspection.readers import read_sql
from ...persist import namespace_dir, stored_ids
from .generate import SOCKET_NAME, WorkerPlan, plan_worker, write_worker
from .locate import PyworkerdPaths, WorkerdError, prepare_pyworkerd

__all__ = ["WorkerdServer", "WorkerdStartError"]

T = TypeVar("T")

#: How much of workerd's log a failed start shows.
LOG_TAIL = 60


class WorkerdStartError(WorkerdError):
    """workerd did not come up; ``log`` is the tail of what it printed."""

    def __init__(self, message: str, *, log: str) -> None:
        super().__init__(f"{message}\n--- workerd log (last lines) ---\n{log}")
        self.log = log


def _port_is_open(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def _poll(predicate: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        time.sleep(0.01)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a reader coroutine from sync code, in a running event loop or not."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class WorkerdServer:
    """One ``workerd serve`` subprocess for ``project`` (a directory with a wrangler config).

    ``vars`` override ``[vars]`` and ``.dev.vars``; ``vendor`` names installed pure-Python
    distributions (or importable packages, e.g. ``agents``) served under ``python_modules/``.
    ``paths`` is a prepared pyworkerd (default: :func:`prepare_pyworkerd` on first start);
    ``build_dir`` holds the generated config and modules (default: beside ``persist_dir``).
    """

    def __init__(
        self,
        project: Path | str,
        persist_dir: Path | str,
        *,
        vars: Mapping[str, str] | None = None,
        vendor: Iterable[str] = (),
        host: str = "127.0.0.1",
        paths: PyworkerdPaths | None = None,
        build_dir: Path | str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.project = Path(project).resolve()
        self.persist_dir = Path(persist_dir).resolve()
        self.vars = dict(vars or {})
        self.vendor = tuple(vendor)
        self.host = host
        self.paths = paths
        self.build_dir = (
            Path(build_dir).resolve()
            if build_dir is not None
            else self.persist_dir.with_name(self.persist_dir.name + ".workerd-build")
        )
        self.env = {**os.environ, **(env or {})}
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.outputs: list[str] = []
        self.plan: WorkerPlan | None = None
        self._reader: threading.Thread | None = None
        self._config: WorkerConfig | None = None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<WorkerdServer {str(self.project)!r} on {self.url}: {state}>"

    # -- addresses and output ---------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self._netloc}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self._netloc}"

    @property
    def _netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_for_line(self, pattern: str, within: float = 15.0) -> str:
        """The first log line (this run) matching the regex ``pattern``, once printed."""
        regex = re.compile(pattern)
        found: list[str] = []

        def seen() -> bool:
            found[:] = [ln for ln in list(self.lines) if regex.search(ln)][:1]
            return bool(found)

        _poll(seen, within, f"a line matching {pattern!r} in:\n{self.output}")
        return found[0]

    def _tail(self) -> str:
        return "\n".join(self.lines[-LOG_TAIL:])

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 60.0, *, port: int | None = None) -> WorkerdServer:
        """Start workerd (``port`` 0: a free one; default: the previous run's port, else a
        free one) and wait until the Worker answers HTTP."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        if self.paths is None:
            self.paths = prepare_pyworkerd()
        if self.proc is not None:  # a previous run: keep its log, even an empty one
            self.outputs.append(self.output)
        self.lines = []
        self._config = load_config(cwd=self.project)
        self.plan = plan_worker(
            self._config, self.persist_dir, sdk=self.paths.sdk, vendor=self.vendor, vars=self.vars
        )
        wanted = self.port if port is None else port
        try:
            listener = _listen(self.host, wanted)
        except OSError:
            if not wanted or port is not None:
                raise
            listener = _listen(self.host, 0)  # the old port was taken meanwhile
        with listener:
            self.port = listener.getsockname()[1]
            config = write_worker(self.plan, self.build_dir, f"{self.host}:{self.port}")
            fd = listener.fileno()
            cmd = [
                str(self.paths.workerd),
                "serve",
                "--experimental",
                "--verbose",
                f"--pyodide-bundle-disk-cache-dir={self.paths.bundle_cache}",
                f"--socket-fd={SOCKET_NAME}={fd}",
                str(config),
            ]
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.build_dir,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
                pass_fds=(fd,),
                start_new_session=True,  # its own process group: kill() reaches every child
            )
        # Only workerd holds the listening socket now: its death closes the port.
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        proc = self.proc
        assert proc is not None
        deadline = time.monotonic() + timeout
        last: str = "no answer yet"
        while True:
            if proc.poll() is not None:
                self._join_reader()
                raise WorkerdStartError(f"workerd exited with {proc.returncode}", log=self._tail())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerdStartError(
                    f"workerd did not answer HTTP within {timeout}s ({last})", log=self._tail()
                )
            try:
                # Requests wait in the socket's backlog until the Worker is loaded.
                response = httpx.get(f"{self.url}/", timeout=min(remaining, 5.0))
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
                time.sleep(0.05)
                continue
            del response  # any answer, even a 500 of the Worker's own, means it is loaded
            return

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)

    def kill(self) -> None:
        """Crash it: SIGKILL the process group, then wait until the port is closed."""
        proc = self.proc
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
        self._join_reader()
        if self.port:
            _poll(lambda: not _port_is_open(self.host, self.port), 15, "the port to close")

    def stop(self, timeout: float = 15.0) -> int:
        """Stop it gracefully (SIGTERM; SIGKILL after ``timeout``); returns the exit code."""
        proc = self.proc
        if proc is None:
            raise RuntimeError(f"{self!r} was never started")
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._join_reader()
        return code

    def restart(self, timeout: float = 60.0, *, graceful: bool = False) -> WorkerdServer:
        """Kill it (or stop it, with ``graceful``) and start it again on the same state and,
        when it is still free, the same port (else a new one: read ``url`` again)."""
        if graceful:
            self.stop()
        else:
            self.kill()
        return self.start(timeout)

    def __enter__(self) -> WorkerdServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.running:
            self.kill()

    # -- reading the objects' files (read-only) ---------------------------------------------------
    @property
    def config(self) -> WorkerConfig:
        """The project's wrangler config, as the last start read it."""
        if self._config is None:
            self._config = load_config(cwd=self.project)
        return self._config

    def object_file(self, binding: str, name_or_id: str) -> Path:
        """The SQLite file of object ``name_or_id`` of ``binding`` (workerd's ``localDisk``
        layout is doemu's: ``<persist>/<worker>-<Class>/<id>.sqlite``)."""
        worker = self.config
        return find_object_file(worker, self.persist_dir, worker.binding(binding), name_or_id)

    def object_ids(self, binding: str) -> list[str]:
        """Ids of every object of ``binding`` with a file on disk."""
        worker = self.config
        return stored_ids(
            namespace_dir(self.persist_dir, worker.unique_key(worker.binding(binding)))
        )

    def sql(self, binding: str, name_or_id: str, query: str, *params: Any) -> list[dict[str, Any]]:
        """Rows of a read-only ``query`` on the object's file, as dicts (``[]`` if the object
        has no file): what is committed, read without waking or writing the object."""
        path = self.object_file(binding, name_or_id)
        if not path.exists():
            return []
        result = _run(read_sql(path, query, list(params)))
        return [dict(zip(result["columns"], row, strict=True)) for row in result["rows"]]
