"""A Starlette app served by uvicorn on 127.0.0.1, in a daemon thread with its own event loop.

The fakes live in the test process but outside the test's event loop: a synchronous test, an
asyncio test, and a ``doemu dev`` subprocess (SIGKILLed and restarted as the test likes) all talk
to them over real loopback HTTP, and the server keeps running through all of it. Its own loop
means a test that blocks (``wait_held``) never stalls the server.

uvicorn's logging configuration is left alone (``log_config=None``), so starting a fake does not
reconfigure the test process's loggers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

import uvicorn
from starlette.types import ASGIApp

from .gate import poll

__all__ = ["LoopbackServer", "Served"]

START_TIMEOUT = 10.0


class LoopbackServer:
    """Serves ``app`` on a free loopback port from :meth:`start` until :meth:`stop`.

    ``on_stop`` runs on the server's loop just before it shuts down (cancel whatever would keep
    a stream open).
    """

    def __init__(self, app: ASGIApp, *, name: str, on_stop: Callable[[], None] | None = None):
        self._app = app
        self._name = name
        self._on_stop = on_stop
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failure: BaseException | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        if not self.port:
            raise RuntimeError(f"{self._name} is not running")
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start serving; returns once the port accepts connections."""
        if self._thread is not None:
            raise RuntimeError(f"{self._name} is already running")
        config = uvicorn.Config(
            self._app,
            host="127.0.0.1",
            port=0,
            lifespan="off",
            log_config=None,
            log_level=None,
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        poll(
            lambda: server.started or self._failure is not None or not self._alive(),
            START_TIMEOUT,
            f"{self._name} to start",
        )
        if not server.started:
            raise RuntimeError(f"{self._name} did not start") from self._failure
        self.port = server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Stop serving: open streams are cut, the thread ends."""
        server, loop, thread = self._server, self._loop, self._thread
        if server is None or thread is None:
            return
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._request_exit, server)
            except RuntimeError:  # the loop closed in between
                pass
        thread.join(START_TIMEOUT)
        self._server = self._thread = self._loop = None
        self.port = 0

    def call(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the server's loop and wait for it (a no-op once stopped)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                callback()
            except BaseException as exc:
                done.set_exception(exc)
            else:
                done.set_result(None)

        try:
            loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop closed in between
            return
        done.result(START_TIMEOUT)

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _request_exit(self, server: uvicorn.Server) -> None:
        if self._on_stop is not None:
            self._on_stop()
        server.should_exit = True
        server.force_exit = True

    def _run(self) -> None:
        assert self._server is not None
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # this thread's own
        self._loop = loop
        try:
            loop.run_until_complete(self._server.serve())
        except BaseException as exc:
            self._failure = exc
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()


class Served:
    """The fakes' shared lifecycle: ``with X() as x`` (or ``start()``/``close()``) and ``url``."""

    _server: LoopbackServer

    def _starting(self) -> None:
        """Before the server starts."""

    def _closing(self) -> None:
        """Before the server stops."""

    def start(self) -> Self:
        """Start serving on a free loopback port (``with`` does this)."""
        self._starting()
        self._server.start()
        return self

    def close(self) -> None:
        """Stop serving: whatever is held is let go, open streams are cut."""
        self._closing()
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return self._server.url
