"""Real ``doemu dev`` processes for end-to-end tests: start, wait for ready, SIGKILL, restart.

Each server runs in its own process group (``start_new_session``) on a free port (``--port 0``);
the harness reads the exact ready line ``doemu ready on http://HOST:PORT`` to learn the port.
``kill()`` SIGKILLs the whole group (a crash: no shutdown hook runs) and waits until the port is
closed, so a restart on the same persist dir is a genuine crash recovery.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from tests.polling import eventually_sync

__all__ = ["DevServer", "port_is_open"]

READY = re.compile(r"^doemu ready on http://(?P<host>[^:\s]+):(?P<port>\d+)\s*$")
T = TypeVar("T")


def port_is_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


class DevServer:
    """One ``doemu dev`` subprocess."""

    def __init__(
        self,
        project: Path,
        persist_dir: Path,
        *,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.project = project
        self.persist_dir = persist_dir
        self.args = list(args)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.host = "127.0.0.1"
        self.port = 0
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def output(self) -> str:
        return "\n".join(self.lines)

    def start(self, timeout: float = 30.0) -> DevServer:
        cmd = [
            sys.executable,
            "-m",
            "doemu",
            "dev",
            "--port",
            "0",
            "--persist-to",
            str(self.persist_dir),
            *self.args,
        ]
        self.lines = []
        self._ready.clear()
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.project,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout):
            self.kill()
            raise AssertionError(f"doemu dev was not ready in {timeout}s:\n{self.output()}")
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            match = READY.match(line)
            if match:
                self.host, self.port = match["host"], int(match["port"])
                self._ready.set()

    def wait_for_line(self, pattern: str, within: float = 15.0) -> str:
        regex = re.compile(pattern)
        line = eventually_sync(
            lambda: next((ln for ln in self.lines if regex.search(ln)), None),
            within=within,
            what=f"a line matching {pattern!r}",
        )
        assert line is not None
        return line

    def kill(self) -> None:
        """SIGKILL the whole process group and wait until the port is closed."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        if self.port:
            eventually_sync(
                lambda: not port_is_open(self.host, self.port), within=15, what="the port to close"
            )

    def stop(self, timeout: float = 15.0) -> int:
        """Graceful stop (SIGTERM); returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def restart(self, timeout: float = 30.0) -> DevServer:
        self.kill()
        return self.start(timeout)

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
