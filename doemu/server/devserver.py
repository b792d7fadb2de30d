"""What ``doemu dev`` does: set up logging, bind the port, serve the worker with uvicorn (with
its signal handling, the banner and the ready line), or supervise a reloading child.

It is apart from :mod:`doemu.cli` so that the command module only declares options and echoes:
the server's lifecycle (a socket bound before anything starts, a graceful stop on SIGINT/SIGTERM,
a temp dir removed on exit) is one concept, and it lives here. Expected failures are still the
CLI's one-line ``Error: …`` (a :class:`click.ClickException`), raised from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fnmatch
import gc
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ..config import DevVars, DoemuSettings, Loop, WorkerConfig, display_path, resolve_vars
from ..errors import DoemuError, error_text
from .banner import (
    banner,
    browsable_url,
    http_url,
    remove_server_record,
    write_server_record,
)
from .devlog import AccessLog, access_log_enabled, setup_logging

if TYPE_CHECKING:
    import uvicorn

    from ..loader import LoadedWorker

__all__ = [
    "StartupError",
    "load_worker",
    "loop_factory",
    "run",
    "run_with_reload",
    "serve",
    "serve_error_page",
    "setup_logging",
]

#: How long a graceful stop waits for in-flight requests before closing connections.
GRACEFUL_SHUTDOWN_SECONDS = 5


_log = logging.getLogger("doemu")
_reload_log = logging.getLogger("doemu.reload")


class StartupError(click.ClickException):
    """The user's Worker failed to import: shown as their traceback, not as ``Error: …``.

    ``text`` is :func:`doemu.loader.user_traceback`'s rendering (their frames, their file and
    line); a plain ``ClickException`` would print one line and lose the location, a bare
    exception would bury it in click's and the loader's frames.
    """

    def __init__(self, headline: str, text: str) -> None:
        super().__init__(headline)
        self.text = text

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.message}\n{self.text}", err=True)


def _fail(message: str) -> NoReturn:
    """An expected failure: the CLI's one-line ``Error: …`` and exit code 1."""
    raise click.ClickException(message)


def load_worker(worker: WorkerConfig) -> LoadedWorker:
    """Import the worker; an exception of the user's own code is a :class:`StartupError`.

    Any exception but doemu's own (which are already one-line messages) is raised by code the
    Worker runs at import time, so it is shown with the user's frames only.
    """
    from .. import loader

    try:
        loaded = loader.load_worker(worker)
    except DoemuError as exc:
        _fail(error_text(exc))
    except Exception as exc:
        roots = [worker.base_dir]
        if worker.main_path is not None:
            roots.insert(0, worker.main_path.parent)
        headline = f"the Worker {worker.name!r} failed to import ({worker.main}):"
        if loader.is_entropy_refusal(exc):
            headline += f"\n({loader.ENTROPY_HINT})"
        raise StartupError(headline, loader.user_traceback(exc, roots)) from exc
    for warning in loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    return loaded


def loop_factory(loop: Loop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What creates the event loop the ``loop`` setting names; ``None`` is asyncio's own.

    uvloop is the default when it can be imported because the server spends most of its time in
    the loop's socket and callback machinery, where uvloop is much faster (WebSocket echo
    throughput rises by about half). ``auto`` quietly falls back to asyncio without it; an
    explicit ``uvloop`` was checked by the settings and fails here only on a broken install.
    """
    if loop == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        if loop == "auto":
            return None
        _fail(f"the loop setting is uvloop, but uvloop cannot be imported: {exc}")
    return uvloop.new_event_loop


def run(
    worker: WorkerConfig,
    settings: DoemuSettings,
    *,
    force_on_second_signal: bool = True,
    dev_vars: DevVars | None = None,
) -> None:
    """``doemu dev`` without ``--reload``: :func:`serve` on the event loop the settings name.

    The port is bound and listening before anything else is imported or started (see
    :func:`_listen`). ``asyncio.Runner`` with a loop factory (rather than a global event loop
    policy) keeps the choice to this one loop, exactly as ``asyncio.run`` would run it otherwise.
    The cyclic garbage collector is paused from here until the ready line (see
    :class:`_StartupGcPause`), and resumed however this ends.
    """
    pause = _StartupGcPause()
    try:
        with _listen(settings.host, settings.port) as sock:
            with asyncio.Runner(loop_factory=loop_factory(settings.loop)) as runner:
                runner.run(
                    serve(
                        worker,
                        settings,
                        force_on_second_signal=force_on_second_signal,
                        sock=sock,
                        gc_pause=pause,
                        dev_vars=dev_vars,
                    )
                )
    finally:
        pause.end(freeze=False)


class _StartupGcPause:
    """The cyclic garbage collector, disabled while :func:`run` starts the server.

    Start-up (importing the server, the runtime and the worker, opening storage) leaves tens of
    thousands of objects for the collector to track that live as long as the process, and the
    collector keeps walking that growing heap: a few milliseconds of a restart's time to its
    first answer. At the end of the pause they are frozen (``gc.freeze``: moved to the permanent
    generation) before the collector is enabled again; otherwise its first collections would scan
    all of them at once, on whichever request comes next, and every later full collection would
    walk them again. The few cycles start-up leaves as garbage are frozen with them (tens of
    kilobytes, never freed). A collector the caller had already disabled is left as it was.

    It starts in :func:`run` rather than in the ``dev`` command: between the two only the config
    and the settings are read, which allocate too little for a collection to run (measured).
    ``--reload``'s watching parent never pauses: only its children call :func:`run`.
    """

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = gc.isenabled()
        gc.disable()

    def end(self, *, freeze: bool = True) -> None:
        """Resume collecting (idempotent); ``freeze`` what exists first, once the server is up."""
        if self.active:
            self.active = False
            if freeze:
                gc.freeze()
            gc.enable()


#: Pending connections the kernel queues until the server accepts them (uvicorn's default).
BACKLOG = 2048


def _listen(host: str, port: int) -> socket.socket:
    """Bind and listen as uvicorn would, before anything else is imported or started.

    uvicorn reports a busy port with ``sys.exit`` inside its task (a traceback, exit code 3, and
    a ``--no-persist`` temp dir left behind); binding first makes it a one-line error.

    Listening at once is what a restart's first request needs: from here on the kernel accepts
    connections and queues their requests while the server imports, opens its storage and reads
    its alarms, and uvicorn (which calls ``listen`` again on this socket) answers them as soon as
    it accepts. A client is never refused during start-up and never waits out its retry interval;
    the ready line still means what it says (every persisted alarm is loaded).

    The protocol is named explicitly: asyncio sets TCP_NODELAY only on accepted sockets whose
    ``proto`` is ``IPPROTO_TCP``, and without it a keep-alive response (headers and body are
    written separately) waits ~40 ms for the client's delayed ACK.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        hint = ""
        if exc.errno == errno.EADDRINUSE:
            hint = (
                "; another process (another doemu dev?) serves on that port: stop it, or pass "
                "--port 0 to pick a free port"
            )
        _fail(f"cannot listen on {http_url(host, port)}: {exc.strerror or exc}{hint}")
    return sock


@contextlib.contextmanager
def _stop_signals(server: uvicorn.Server) -> Iterator[None]:
    """Send SIGINT/SIGTERM to uvicorn's graceful shutdown, before, during and after ``serve()``.

    Once it has shut down (storage committed), uvicorn restores the handlers it found and
    re-raises the signal that stopped it. With Python's defaults that kills the process (exit
    -15) or raises KeyboardInterrupt; with ``handle_exit`` installed it is a no-op and a graceful
    stop exits 0. It also covers a signal that arrives before uvicorn installs its own handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in stops}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _WebSocketProtocol(asyncio.Protocol):
    """doemu's WebSocket protocol for uvicorn, imported when the first upgrade arrives.

    uvicorn resolves its ``ws`` setting as it starts, importing websockets (about 10 ms, most of
    it the ``importlib.metadata`` that ``websockets.version`` pulls in) before the first request
    can be served; a restart's first request is rarely an upgrade, so that import waits for one.
    uvicorn only ever calls the class it is given (``ws_protocol_class(config=…, …)``), so
    ``__new__`` returns an instance of the protocol of
    :func:`doemu.sockets.protocol.uvicorn_ws_protocol`.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> asyncio.Protocol:  # type: ignore[misc]
        from ..sockets.protocol import uvicorn_ws_protocol

        return uvicorn_ws_protocol()(*args, **kwargs)


def _server(
    config: uvicorn.Config, force_on_second_signal: bool, ready: asyncio.Event
) -> uvicorn.Server:
    """uvicorn's server; a second SIGINT forces the exit only when ``force_on_second_signal``.

    Under ``--reload``, Ctrl-C (or a group-wide SIGTERM) reaches the child and watchfiles then
    sends it one more SIGINT: that duplicate must not turn the graceful shutdown into a forced one
    (skipping the lifespan shutdown with a traceback). The parent still SIGKILLs a stuck child.

    ``ready`` is set once uvicorn has started (the runtime's start-up done, the socket served),
    so the banner follows at once rather than at the next turn of a polling loop. A start-up
    that failed sets nothing (uvicorn releases ``startup`` without ``started`` or with
    ``sys.exit``, depending on its version).
    """
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if force_on_second_signal or not self.should_exit:
                super().handle_exit(sig, frame)

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                ready.set()

    return Server(config)


async def serve(
    worker: WorkerConfig,
    settings: DoemuSettings,
    *,
    force_on_second_signal: bool = True,
    sock: socket.socket | None = None,
    gc_pause: _StartupGcPause | None = None,
    dev_vars: DevVars | None = None,
) -> None:
    """``doemu dev`` without ``--reload``: load the worker and serve it until a signal stops it.

    ``sock`` is the listening socket :func:`run` made first (closed here on exit); without one it
    is made here. ``gc_pause`` ends right after the ready line. ``dev_vars`` are the Worker's
    variables (default: ``[vars]`` and ``.dev.vars``, see :func:`doemu.config.resolve_vars`).
    """
    import uvicorn

    from ..bindings import find_entrypoints
    from ..clock import ManualClock
    from ..runtime import ClassSpec, Runtime
    from ..storage import StorageLimits
    from .app import DoemuApp
    from .http_protocol import DoemuHttpProtocol

    if dev_vars is None:
        try:
            dev_vars = resolve_vars(worker)
        except DoemuError as exc:
            _fail(error_text(exc))
    from ..compat.boundary import set_strict

    set_strict(not settings.lenient)  # before the import: entropy at global scope is refused
    loaded = load_worker(worker)
    async with contextlib.AsyncExitStack() as cleanup:
        sock = cleanup.enter_context(sock or _listen(settings.host, settings.port))
        try:
            runtime = Runtime(
                worker_name=worker.name,
                classes={name: ClassSpec(c.cls, c.sql) for name, c in loaded.classes.items()},
                bindings={b.name: b.class_name for b in worker.bindings},
                persist_dir=settings.persist_to if settings.persist else None,
                durability=settings.durability,
                vars=dev_vars.values,
                clock=ManualClock() if settings.clock == "manual" else None,
                idle_timeout=settings.idle_timeout,
                max_live_objects=settings.max_live_objects,
                limits=StorageLimits.production() if settings.limits == "production" else None,
                resources=worker.resources,
                entrypoints=find_entrypoints(loaded.module),
                lenient=settings.lenient,
                ai=settings.ai,
            )
        except (DoemuError, OSError) as exc:
            _fail(f"cannot start the runtime: {exc}")
        # Closing is idempotent: this commits and removes a temp dir even when uvicorn's lifespan
        # shutdown did not run (startup failure, a second Ctrl-C).
        cleanup.push_async_callback(runtime.close)
        started = asyncio.Event()
        app: Any = DoemuApp(
            runtime, entry=loaded.entry, admin_token=settings.admin_token, hold_alarms=True
        )
        if access_log_enabled():  # not even wrapped under --log-level warning (the bench)
            app = AccessLog(app)
        server = _server(
            uvicorn.Config(
                app,
                lifespan="on",
                # doemu's handler and format (see doemu.server.devlog), not uvicorn's own.
                log_config=None,
                log_level="warning" if settings.log_level == "info" else settings.log_level,
                access_log=False,  # doemu's request log replaces uvicorn's
                http=DoemuHttpProtocol,
                ws=_WebSocketProtocol,
                ws_ping_interval=None,
                # Open event streams and idle WebSockets never finish by themselves: give
                # in-flight requests this long, then close the rest so shutdown completes.
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            ),
            force_on_second_signal,
            started,
        )
        cleanup.enter_context(_stop_signals(server))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        ready = asyncio.ensure_future(started.wait())
        await asyncio.wait((serving, ready), return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            await serving
            _fail("the server failed to start (see the log above)")
        port = sock.getsockname()[1]
        url = browsable_url(settings.host, port)
        banner(worker, loaded, runtime, settings, dev_vars, url, port)
        if settings.persist:
            record = write_server_record(runtime.persist_dir, url)
            if record is not None:
                cleanup.callback(remove_server_record, record)
        runtime.release_alarms()  # overdue alarms fire now, right after the ready line
        if gc_pause is not None:
            gc_pause.end()
        await serving
    _log.info(
        "stopped: %s",
        "storage committed" if settings.persist else "temporary state removed",
    )


def serve_error_page(settings: DoemuSettings, error: StartupError) -> None:
    """Serve ``error`` (a Worker that failed to import) on the server's address until stopped.

    Under ``--reload`` the watching parent restarts this process when a source changes; until
    then a browser tab or a client gets the error (an HTML page, or JSON, with status 500)
    instead of "connection refused", as ``wrangler dev`` shows a broken Worker's error.
    """
    import uvicorn

    from .errorpage import error_page, is_loopback, wants_html

    message = f"{error.message} {error.text.splitlines()[-1] if error.text else ''}".strip()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # a WebSocket: refused (closed) by uvicorn
        if wants_html(scope.get("headers", ())):
            detail = error.text if is_loopback(scope.get("client")) else None
            footer = "doemu dev --reload: save a fix and this page's server restarts."
            body = error_page(500, error.message, detail, footer)
            kind = b"text/html; charset=utf-8"
        else:
            body = json.dumps({"error": message}).encode()
            kind = b"application/json"
        await send(
            {"type": "http.response.start", "status": 500, "headers": [(b"content-type", kind)]}
        )
        await send({"type": "http.response.body", "body": body})

    with _listen(settings.host, settings.port) as sock:
        config = uvicorn.Config(
            app, lifespan="off", log_config=None, log_level="warning", access_log=False
        )
        server = uvicorn.Server(config)
        asyncio.run(server.serve(sockets=[sock]))


def _changed(changes: set[tuple[Any, str]]) -> str:
    """``src/entry.py changed`` (at most three paths named), for the reload line."""
    paths = sorted({display_path(Path(path)) for _, path in changes})
    named = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return f"{named} changed"


def run_with_reload(
    worker: WorkerConfig,
    settings: DoemuSettings,
    cli_vars: dict[str, str] | None = None,
    *,
    reload_dirs: Sequence[Path] = (),
    reload_excludes: Sequence[str] = (),
    env_files: Sequence[Path] = (),
) -> None:
    """Run ``doemu dev --no-reload`` as a child and restart it when a source file changes.

    The parent owns the port (a busy one fails here, ``0`` is fixed once so a restart keeps the
    URL) and, with ``--no-persist``, the temp dir, so state survives reloads as on a code update.
    A child whose Worker fails to import serves that error (see :func:`serve_error_page`) until
    the next change starts a new one. ``reload_dirs`` are watched instead of the project's
    folder; a path matching one of ``reload_excludes`` (globs, as uvicorn's ``--reload-exclude``)
    is not a change. watchfiles' own lines (``process already dead``, signal notices) are kept
    out of the log below ``--log-level trace``: the reloader's own lines say what happens.
    """
    import watchfiles

    with _listen(settings.host, settings.port) as probe:
        port = probe.getsockname()[1]
    temp = None if settings.persist else Path(tempfile.mkdtemp(prefix="doemu-"))
    persist = (temp or settings.persist_to).resolve()
    args = [
        sys.executable, "-m", "doemu", "dev", "--no-reload", "--reload-child",
        "--host", settings.host, "--port", str(port), "--persist-to", str(persist),
        "--durability", settings.durability,
        "--log-level", settings.log_level, "--limits", settings.limits, "--loop", settings.loop,
        "--idle-timeout", f"{settings.idle_timeout[0]}-{settings.idle_timeout[1]}",
        "--clock", settings.clock, "--lenient" if settings.lenient else "--strict",
    ]  # fmt: skip
    if worker.env is not None:
        args += ["--env", worker.env]
    for key, value in (cli_vars or {}).items():
        args += ["--var", f"{key}:{value}"]
    if worker.source is not None:
        args += ["--config", str(worker.source)]
    if settings.max_live_objects:
        args += ["--max-live-objects", str(settings.max_live_objects)]
    for env_file in env_files:
        args += ["--env-file", str(env_file)]
    if settings.admin_token:  # through the environment: argv is visible to every local user
        os.environ["DOEMU_ADMIN_TOKEN"] = settings.admin_token
    secrets = {p.resolve() for p in env_files}
    watched = [d.resolve() for d in reload_dirs] or [worker.base_dir.resolve()]

    def source_change(change: watchfiles.Change, path: str) -> bool:
        p = Path(path).resolve()
        if p == persist or persist in p.parents:
            return False
        if any(part in {".doemu", "__pycache__", ".git", ".venv"} for part in p.parts):
            return False
        if any(p.match(pattern) or fnmatch.fnmatch(str(p), pattern) for pattern in reload_excludes):
            return False
        if p.name == ".dev.vars" or p.name.startswith(".dev.vars.") or p in secrets:
            return True
        return p.suffix in {".py", ".toml", ".json", ".jsonc"}

    shown = ", ".join(display_path(d) for d in watched)
    _reload_log.info("watching %s for changes (--no-reload turns this off)", shown)
    if temp is not None:
        _reload_log.info("--no-persist: state in %s, removed on exit", temp)
    if settings.log_level != "trace":
        logging.getLogger("watchfiles").setLevel(logging.ERROR)
    try:
        watchfiles.run_process(
            *watched,
            target=shlex.join(args),
            target_type="command",
            watch_filter=source_change,
            callback=lambda changes: _reload_log.info("%s; restarting", _changed(changes)),
        )
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        _reload_log.info("stopped watching")
