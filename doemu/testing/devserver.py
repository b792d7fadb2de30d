"""A real ``doemu dev`` in a subprocess for tests: start, SIGKILL, restart, read its SQLite.

The in-process harness resets an object to simulate a crash; what it cannot show is a real
process dying between an fsync and its answer, the server's start-up recovery, or the HTTP and
WebSocket surface. :class:`DevServer` runs ``python -m doemu dev`` for a project in its own
process group, on a free port, with its state in a directory the test owns, and learns the
port from the ready line (``doemu ready on http://HOST:PORT``). ``kill()`` is a crash (SIGKILL
to the whole group: no shutdown code runs) and waits until the port is closed, so a
``restart()`` on the same persist dir is a genuine crash recovery.

Objects' files are read strictly read-only (:mod:`doemu.inspection`), located through the
project's config and :mod:`doemu.persist` — a name is hashed into an id, never used as a path —
so a test can check what was *committed*, with or without a server running, without waking an
object.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..config import WorkerConfig, load_config
from ..inspection.offline import find_object_file
from ..inspection.readers import read_kv, read_sql
from ..persist import namespace_dir, stored_ids

__all__ = ["READY", "DevServer", "DevServerFactory", "port_is_open"]

T = TypeVar("T")

READY = re.compile(r"^doemu ready on http://(?P<host>[^:\s]+):(?P<port>\d+)\s*$")


def port_is_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def _poll(predicate: Callable[[], bool], within: float, what: str) -> None:
    """Wait (polling, with a real-time deadline) until ``predicate()``."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        time.sleep(0.01)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a reader coroutine from sync code, inside a running event loop or not (an async
    test calls these helpers too: then it runs on a thread of its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class DevServer:
    """One ``doemu dev`` subprocess for ``project`` (a directory with a wrangler config).

    ``url``/``ws_url`` are valid once started; ``output`` is what the server printed (stdout and
    stderr) in its current run, ``outputs`` every run's. Extra CLI options go in ``args``.
    """

    def __init__(
        self,
        project: Path | str,
        persist_dir: Path | str,
        *,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.project = Path(project).resolve()
        self.persist_dir = Path(persist_dir).resolve()
        self.args = list(args)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.host = host
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.outputs: list[str] = []
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        self._config: WorkerConfig | None = None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<DevServer {str(self.project)!r} on {self.url}: {state}>"

    # -- addresses and output ---------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_for_line(self, pattern: str, within: float = 15.0) -> str:
        """The first output line (this run) matching the regex ``pattern``, once printed."""
        regex = re.compile(pattern)
        found: list[str] = []

        def seen() -> bool:
            found[:] = [ln for ln in list(self.lines) if regex.search(ln)][:1]
            return bool(found)

        _poll(seen, within, f"a line matching {pattern!r} in:\n{self.output}")
        return found[0]

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 30.0, *, port: int = 0) -> DevServer:
        """Start the server (``port`` 0: a free one) and wait for its ready line."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        if self.lines:
            self.outputs.append(self.output)
        self.lines = []
        self._ready.clear()
        cmd = [sys.executable, "-m", "doemu", "dev", "--no-reload", "--host", self.host]
        cmd += ["--port", str(port), "--persist-to", str(self.persist_dir), *self.args]
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.project,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its own process group: kill() reaches every child
        )
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        proc = self.proc
        try:
            _poll(
                lambda: self._ready.is_set() or proc.poll() is not None,
                timeout,
                f"doemu dev to be ready:\n{self.output}",
            )
        except AssertionError:
            self.kill()
            raise
        if not self._ready.is_set():
            self._join_reader()
            raise RuntimeError(f"doemu dev exited with {proc.returncode}:\n{self.output}")
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            match = READY.match(line)
            if match and not self._ready.is_set():
                self.host, self.port = match["host"], int(match["port"])
                self._ready.set()

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
            _poll(lambda: not port_is_open(self.host, self.port), 15, "the port to close")

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

    def restart(self, timeout: float = 30.0, *, graceful: bool = False) -> DevServer:
        """Kill it (or stop it, with ``graceful``) and start it again on the same state, on the
        same port when that port is still free (else on a new one: read ``url`` again)."""
        if graceful:
            self.stop()
        else:
            self.kill()
        port = self.port
        try:
            return self.start(timeout, port=port)
        except RuntimeError:
            if not port or self.running:
                raise
            return self.start(timeout)  # the old port was taken meanwhile

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.running:
            self.kill()

    # -- reading the objects' files (read-only) ---------------------------------------------------
    @property
    def config(self) -> WorkerConfig:
        """The project's wrangler config, as the server reads it."""
        if self._config is None:
            self._config = load_config(cwd=self.project)
        return self._config

    def object_file(self, binding: str, name_or_id: str) -> Path:
        """The SQLite file of object ``name_or_id`` (a name, or a 64-hex id) of ``binding``."""
        worker = self.config
        return find_object_file(worker, self.persist_dir, worker.binding(binding), name_or_id)

    def object_ids(self, binding: str) -> list[str]:
        """Ids of every object of ``binding`` with a file on disk."""
        worker = self.config
        key = worker.unique_key(worker.binding(binding))
        return stored_ids(namespace_dir(self.persist_dir, key))

    def sql(self, binding: str, name_or_id: str, query: str, *params: Any) -> list[dict[str, Any]]:
        """Rows of a read-only ``query`` on the object's file, as dicts (``[]`` if the object
        has no file). It sees what is committed, and neither wakes nor writes the object."""
        path = self.object_file(binding, name_or_id)
        if not path.exists():
            return []
        result = _run(read_sql(path, query, list(params)))
        return [dict(zip(result["columns"], row, strict=True)) for row in result["rows"]]

    def kv(self, binding: str, name_or_id: str, *, prefix: str = "") -> dict[str, Any]:
        """The object's committed KV pairs (decoded), read-only."""
        path = self.object_file(binding, name_or_id)
        return {pair["key"]: pair["value"] for pair in _run(read_kv(path, prefix=prefix))}


class DevServerFactory:
    """The ``doemu_dev`` fixture: ``doemu_dev(project)`` starts a server; all are killed at the
    end of the test. Each gets its own persist dir under the test's temporary directory."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[DevServer] = []

    def __call__(
        self,
        project: Path | str,
        *,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        persist_dir: Path | str | None = None,
        timeout: float = 30.0,
    ) -> DevServer:
        """A started server for ``project`` (its state in a fresh directory unless
        ``persist_dir`` is given); ``args`` are extra ``doemu dev`` options."""
        if persist_dir is None:
            persist_dir = self.tmp_path / f"doemu-dev-{len(self.started)}"
        server = DevServer(project, persist_dir, args=args, env=env)
        self.started.append(server)
        return server.start(timeout)

    def stop_all(self) -> None:
        """Kill every server still running (crash-style: tests should not wait for shutdown)."""
        for server in self.started:
            if server.running:
                server.kill()
