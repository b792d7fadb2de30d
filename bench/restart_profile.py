#!/usr/bin/env python3
"""Where a restart after SIGKILL spends its time, reproducibly (issue 12; bench/load.py phase g).

    .venv/bin/python bench/restart_profile.py                 # 20 kill/restart/first-read loops
    .venv/bin/python bench/restart_profile.py --trace         # ... with a per-phase breakdown
    .venv/bin/python bench/restart_profile.py --importtime 10 # what is imported, by package
    .venv/bin/python bench/restart_profile.py --floor         # the interpreter's own start-up

Every loop does what phase g of ``bench/load.py`` does: SIGKILL a running ``doemu dev`` serving
``bench/app`` (persisted state: ``--objects`` objects with SQL storage, ``--alarms`` pending
alarms an hour away, and the object ``restart`` written just before the kill), start it again
with the same shell command, and poll ``GET /obj/restart/get`` on a fresh connection every
``--poll-ms`` until it answers 200. The answer must be the value written before the kill (it is
checked: a fast restart that lost a write is a failure, not a result). Only the standard library
is used, so the project venv runs it and the numbers need nothing else installed.

``--trace`` starts the server through this file (``--child``) instead of the ``doemu`` script: a
meta-path hook wraps a few functions as their modules load (nothing is imported early, so import
costs stay where they fall) and writes ``CLOCK_MONOTONIC`` timestamps, which the parent lines up
with its own: exec → interpreter ready → ``doemu.cli`` imported → config and settings → worker
imported → runtime imports → ``Runtime()`` → uvicorn start-up (lifespan: ``runtime.start()``,
whose alarm-table scan is timed too) → listening → banner → first request in → first read out.
With ``--trace`` every run is traced and pays for the hook (a few hundred microseconds), so the
headline medians come from runs without it.

``--src DIR`` runs another copy of doemu's sources with the same interpreter (``PYTHONPATH``
precedes the editable install's finder) and ``--compare DIR2`` restarts a second copy
alternately with the first, each on its own identically built state, which is how a
before/after comparison on one shared machine, in one sitting, is made::

    git archive <commit> doemu | tar -x -C /tmp/before
    .venv/bin/python bench/restart_profile.py --compile --compare /tmp/before --trace

Bytecode matters more than anything here: with ``PYTHONDONTWRITEBYTECODE`` set (it is reported)
and no ``.pyc`` files, every start compiles doemu's sources again, tens of milliseconds.
``--compile`` runs ``compileall`` on each copy first (``.pyc`` files are read even when writing
them is disabled); ``--write-bytecode`` lets the servers write their own instead.
"""

from __future__ import annotations

# Only what the traced child needs is imported here: the child starts through this file, and
# every import above its first timestamp would be counted as interpreter start-up.
import os
import sys
import time

if __name__ != "__main__" or sys.argv[1:2] != ["--child"]:
    import argparse
    import contextlib
    import json
    import shlex
    import signal
    import socket
    import statistics
    import subprocess
    import tempfile
    from pathlib import Path
    from typing import Any

    REPO = Path(__file__).resolve().parent.parent
    APP = REPO / "bench" / "app" / "wrangler.toml"

TRACE_ENV = "DOEMU_RESTART_TRACE"
NAME = "restart"


# ------------------------------------------------------------------------------ the child
def _child(argv: list[str]) -> None:
    """Serve ``doemu <argv>`` with timestamps of each start-up phase written to $TRACE_ENV."""
    now = time.monotonic
    out = open(os.environ[TRACE_ENV], "a", buffering=1)

    def mark(what: str) -> None:
        out.write(f"{what} {now():.6f}\n")
        if what == "first_request.end":
            # CPU time since exec (sh included: it execs python), robust to a loaded machine.
            out.write(f"cpu {time.process_time():.6f}\n")

    mark("interpreter")

    def timed(obj: Any, attr: str, label: str, *, once: bool = True, coro: bool = False) -> None:
        fn = getattr(obj, attr)
        state = {"done": False}

        if coro:

            async def awrapper(*a: Any, **k: Any) -> Any:
                first = not state["done"]
                state["done"] = once
                if first:
                    mark(f"{label}.start")
                try:
                    return await fn(*a, **k)
                finally:
                    if first:
                        mark(f"{label}.end")

            setattr(obj, attr, awrapper)
            return

        def wrapper(*a: Any, **k: Any) -> Any:
            first = not state["done"]
            state["done"] = once
            if first:
                mark(f"{label}.start")
            try:
                return fn(*a, **k)
            finally:
                if first:
                    mark(f"{label}.end")

        setattr(obj, attr, wrapper)

    def patch_cli(m: Any) -> None:
        timed(m, "_load", "config")
        timed(m, "_settings", "settings")

    def patch_devserver(m: Any) -> None:
        timed(m, "load_worker", "worker_import")
        timed(m, "banner", "banner")
        timed(m, "serve", "serve", coro=True)

    def patch_runtime(m: Any) -> None:
        mark("runtime_imported")
        timed(m.Runtime, "__init__", "Runtime()")
        timed(m.Runtime, "start", "runtime.start", coro=True)

    def patch_service(m: Any) -> None:
        timed(m.AlarmService, "restore", "alarm_scan", coro=True)

    def patch_uvicorn(m: Any) -> None:
        timed(m.Server, "startup", "uvicorn.startup", coro=True)

    def patch_app(m: Any) -> None:
        mark("app_imported")
        original = m.DoemuApp.__call__
        seen = {"http": False}

        async def call(self: Any, scope: Any, receive: Any, send: Any) -> None:
            first = scope["type"] == "http" and not seen["http"]
            if first:
                seen["http"] = True
                mark("first_request.start")
            try:
                await original(self, scope, receive, send)
            finally:
                if first:
                    mark("first_request.end")

        m.DoemuApp.__call__ = call

    patches = {
        "doemu.cli": patch_cli,
        "doemu.server.devserver": patch_devserver,
        "doemu.runtime": patch_runtime,
        "doemu.alarms.service": patch_service,
        "uvicorn.server": patch_uvicorn,
        "doemu.server.app": patch_app,
    }

    class Hook:
        """Wraps functions of the modules above right after each one has executed."""

        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            patch = patches.pop(name, None)
            if patch is None:
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            loader = spec.loader
            exec_module = loader.exec_module

            def exec_and_patch(module: Any) -> None:
                exec_module(module)
                patch(module)

            loader.exec_module = exec_and_patch
            return spec

    sys.meta_path.insert(0, Hook())
    from doemu.cli import main

    mark("cli_imported")
    sys.argv = ["doemu", *argv]
    main()


# ------------------------------------------------------------------------------ HTTP probe
def _request(port: int, method: str, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """One request on a fresh connection (what the benchmark's restart probe does)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Length: 0\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------------------ the server
class Server:
    """``doemu dev`` on the bench app, started as the benchmark starts it (``sh -c 'exec …'``)."""

    def __init__(self, args: argparse.Namespace, src: str | None, persist: Path, port: int) -> None:
        self.args = args
        self.src = src
        self.persist = persist
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self.trace_file: Path | None = None

    def command(self, *, trace: bool, importtime: bool) -> str:
        py = shlex.quote(self.args.python)
        flags = "-X importtime " if importtime else ""
        if trace:
            head = f"exec {py} {flags}{shlex.quote(str(Path(__file__).resolve()))} --child"
        elif importtime:
            head = f"exec {py} {flags}-m doemu"
        else:
            head = f"exec {shlex.quote(self.args.doemu)}"
        return (
            f"{head} dev --config {shlex.quote(str(APP))} --port {self.port} "
            f"--persist-to {shlex.quote(str(self.persist))} --log-level warning"
        )

    def env(self, trace_file: Path | None) -> dict[str, str]:
        env = dict(os.environ)
        if self.src:
            env["PYTHONPATH"] = str(Path(self.src).resolve())
        if self.args.write_bytecode:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        if trace_file is not None:
            env[TRACE_ENV] = str(trace_file)
        return env

    def start(
        self, *, trace_file: Path | None = None, importtime: Path | None = None
    ) -> tuple[float, float]:
        """Start it; returns (monotonic time before the fork, perf_counter time)."""
        if _port_open(self.port):
            raise RuntimeError(f"port {self.port} is in use")
        cmd = self.command(trace=trace_file is not None, importtime=importtime is not None)
        env = self.env(trace_file)
        stderr: Any = subprocess.DEVNULL
        if importtime is not None:
            stderr = open(importtime, "wb")
        mono, perf = time.monotonic(), time.perf_counter()
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", cmd],
            # Not the repository: ``python -m`` puts the working directory first on sys.path,
            # where a checkout's doemu/ would shadow the --src copy being measured.
            cwd=self.persist.parent,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
        )
        if importtime is not None:
            stderr.close()
        return mono, perf

    def kill9(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None
        deadline = time.monotonic() + 10
        while _port_open(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError("the port stayed open after SIGKILL")
            time.sleep(0.002)

    def first_ok(self, path: str, poll_s: float, limit_s: float = 30.0) -> tuple[float, bytes]:
        """perf_counter time of the first 200 for ``GET path``, and its body."""
        deadline = time.perf_counter() + limit_s
        while time.perf_counter() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}")
            try:
                status, body = _request(self.port, "GET", path, timeout=2.0)
                if status == 200:
                    return time.perf_counter(), body
            except OSError:
                pass
            time.sleep(poll_s)
        raise RuntimeError(f"{path} did not answer 200 within {limit_s} s")


# ------------------------------------------------------------------------------ the runs
def _prepare(server: Server, objects: int, alarms: int) -> int:
    """Build the persisted state on a fresh dir; returns the value ``restart`` holds."""
    server.start()
    server.first_ok("/obj/__ready__/ping", 0.01)
    for i in range(objects):
        assert _request(server.port, "POST", f"/obj/obj-{i}/incr")[0] == 200
    for i in range(alarms):
        status, _ = _request(server.port, "POST", f"/obj/alarm-{i}/alarm?ms=3600000")
        assert status == 200
    for _ in range(10):
        status, body = _request(server.port, "POST", f"/obj/{NAME}/incr")
        assert status == 200
    return int(body)


def _read_trace(path: Path, t0: float) -> dict[str, float]:
    """Trace marks as milliseconds since ``t0`` (the parent's clock before the fork)."""
    marks: dict[str, float] = {}
    for line in path.read_text().splitlines():
        what, _, stamp = line.rpartition(" ")
        if what == "cpu":
            marks.setdefault("cpu_ms", float(stamp) * 1000)
            continue
        marks.setdefault(what, (float(stamp) - t0) * 1000)
    return marks


#: What each mark ends: the time from the previous mark (in start-up order) is spent on it.
MARKS = {
    "interpreter": "exec: sh, python, site (the editable install's finder)",
    "cli_imported": "import doemu.cli (click, config, devserver, ...)",
    "config.start": "click parses the command line",
    "config.end": "read wrangler.toml",
    "settings.start": "-",
    "settings.end": "resolve settings (env, pyproject)",
    "serve.start": "logging, bind and listen, the event loop (uvloop), asyncio.Runner",
    "worker_import.start": "-",
    "worker_import.end": "import the worker (bench/app) and the Workers surface",
    "runtime_imported": "import uvicorn, doemu.runtime",
    "app_imported": "import doemu.server.app",
    "Runtime().start": "-",
    "Runtime().end": "Runtime(): namespaces, alarm tables opened",
    "uvicorn.startup.start": "DoemuApp, uvicorn Config/Server, lifespan begins",
    "runtime.start.start": "-",
    "alarm_scan.start": "-",
    "alarm_scan.end": "the alarm-table scan",
    "runtime.start.end": "-",
    "uvicorn.startup.end": "lifespan complete, uvicorn serves the socket",
    "banner.start": "serve() learns uvicorn started",
    "banner.end": "print the banner",
    "first_request.start": "the first request reaches the app",
    "first_request.end": "handle it (activate the object, SQLite opens its file)",
    "client": "the response reaches the client",
}


def _timeline(traces: list[dict[str, float]]) -> list[tuple[str, float, float]]:
    """(mark, median ms since the fork, median ms since the previous mark), in order."""
    names = [name for name in MARKS if sum(name in t for t in traces) * 2 > len(traces)]
    names.sort(key=lambda n: statistics.median(t[n] for t in traces if n in t))
    rows, previous = [], None
    for name in names:
        at = statistics.median(t[name] for t in traces if name in t)
        deltas = [
            t[name] - (t[previous] if previous else 0.0)
            for t in traces
            if name in t and (previous is None or previous in t)
        ]
        rows.append((name, at, statistics.median(deltas)))
        previous = name
    return rows


def _importtime(paths: list[Path], top: int) -> dict[str, Any]:
    """``-X importtime`` of several restarts: per module the median self and cumulative time,
    summed per top-level package, and the largest cumulative imports (medians resist the
    spikes a shared machine puts into single runs)."""
    selfs: dict[str, list[int]] = {}
    cums: dict[str, list[int]] = {}
    for path in paths:
        for line in path.read_text(errors="replace").splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, cum_us, name = (part.strip() for part in line.split("|"))
            selfs.setdefault(name, []).append(int(self_us.removeprefix("import time:")))
            cums.setdefault(name, []).append(int(cum_us))
    per_pkg: dict[str, float] = {}
    for name, values in selfs.items():
        pkg = name.split(".")[0]
        per_pkg[pkg] = per_pkg.get(pkg, 0.0) + statistics.median(values)
    cumulative = sorted(((statistics.median(v), n) for n, v in cums.items()), reverse=True)
    return {
        "runs": len(paths),
        "modules": len(selfs),
        "total_ms": round(sum(per_pkg.values()) / 1000, 1),
        "self_ms_by_package": {
            k: round(v / 1000, 2) for k, v in sorted(per_pkg.items(), key=lambda kv: -kv[1])[:top]
        },
        "largest_cumulative_ms": [(n, round(c / 1000, 2)) for c, n in cumulative[:top]],
        "self_ms_by_module": {n: round(statistics.median(v) / 1000, 3) for n, v in selfs.items()},
    }


def _floor(python: str, runs: int, src: str | None, cwd: str) -> dict[str, float]:
    """Median wall time of bare interpreter starts (the floor under any restart)."""
    cases = {
        "sh -c exec python -c pass": ["/bin/sh", "-c", f"exec {shlex.quote(python)} -c pass"],
        "python -c pass": [python, "-c", "pass"],
        "python -S -c pass": [python, "-S", "-c", "pass"],
        "python -I -S -c pass": [python, "-I", "-S", "-c", "pass"],
        "python -c 'import doemu.cli'": [python, "-c", "import doemu.cli"],
    }
    out = {}
    for label, cmd in cases.items():
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())} if src else None
            subprocess.run(cmd, check=True, env=env, cwd=cwd)
            times.append(time.perf_counter() - t)
        out[label] = round(statistics.median(times) * 1000, 1)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=20, help="kill/restart/first-read loops")
    ap.add_argument("--objects", type=int, default=200, help="objects with storage")
    ap.add_argument("--alarms", type=int, default=20, help="pending alarms (an hour away)")
    ap.add_argument("--poll-ms", type=float, default=5.0, help="probe interval (bench: 5)")
    ap.add_argument("--trace", action="store_true", help="per-phase breakdown (see above)")
    ap.add_argument(
        "--importtime", type=int, default=0, metavar="N", help="N more runs under -X importtime"
    )
    ap.add_argument("--floor", action="store_true", help="interpreter start-up alone")
    ap.add_argument("--top", type=int, default=15, help="rows of the import table")
    ap.add_argument("--src", help="serve this copy of doemu's sources (a dir holding doemu/)")
    ap.add_argument(
        "--compare",
        metavar="SRC2",
        help="a second copy of the sources, restarted alternately with the first (before/after)",
    )
    ap.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    ap.add_argument("--doemu", default=str(REPO / ".venv" / "bin" / "doemu"))
    ap.add_argument("--write-bytecode", action="store_true", help="unset PYTHONDONTWRITEBYTECODE")
    ap.add_argument(
        "--compile",
        action="store_true",
        help="compileall doemu's sources first (their .pyc files are then used even with "
        "PYTHONDONTWRITEBYTECODE set)",
    )
    ap.add_argument("--persist", help="persist dir (default: a fresh temporary one)")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()

    variants = {"src": args.src}
    if args.compare:
        variants["compare"] = args.compare
    results = {}
    for label, src in variants.items():
        results[label] = result = {
            "label": label,
            "runs": args.runs,
            "objects": args.objects,
            "pending_alarms": args.alarms,
            "poll_ms": args.poll_ms,
            "src": str(Path(src).resolve()) if src else str(REPO),
            "PYTHONDONTWRITEBYTECODE": (
                None if args.write_bytecode else os.environ.get("PYTHONDONTWRITEBYTECODE")
            ),
        }
        root = Path(src) if src else REPO
        if args.compile:
            subprocess.run([args.python, "-m", "compileall", "-q", str(root / "doemu")], check=True)
        result["doemu_pyc_files"] = sum(1 for _ in root.glob("doemu/**/__pycache__/*.pyc"))
    if args.floor:
        floor_runs = max(args.runs, 5)
        results["src"]["floor_ms"] = _floor(
            args.python, floor_runs, args.src, tempfile.gettempdir()
        )
    with tempfile.TemporaryDirectory(prefix="doemu-restart-") as scratch:
        servers, values = {}, {}
        totals: dict[str, list[float]] = {label: [] for label in variants}
        traces: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
        try:
            for label, src in variants.items():
                persist = Path(args.persist or scratch) / f"state-{label}"
                servers[label] = Server(args, src, persist, _free_port())
                values[label] = _prepare(servers[label], args.objects, args.alarms)
            # Interleaved, so that both variants meet the same load on a shared machine.
            for i in range(args.runs):
                for label, server in servers.items():
                    server.kill9()
                    trace_file = Path(scratch) / f"trace-{label}-{i}" if args.trace else None
                    mono0, perf0 = server.start(trace_file=trace_file)
                    done, body = server.first_ok(f"/obj/{NAME}/get", args.poll_ms / 1000)
                    totals[label].append((done - perf0) * 1000)
                    if int(body) != values[label]:
                        raise RuntimeError(
                            f"read {body!r} after the restart, wrote {values[label]}"
                        )
                    if trace_file is not None:
                        marks = _read_trace(trace_file, mono0)
                        marks["client"] = (done - perf0) * 1000
                        traces[label].append(marks)
                    status, body = _request(server.port, "POST", f"/obj/{NAME}/incr")
                    assert status == 200
                    values[label] = int(body)  # the next kill comes right after this write
            for label, server in servers.items():
                logs = []
                for i in range(args.importtime):
                    server.kill9()
                    logs.append(Path(scratch) / f"importtime-{label}-{i}.txt")
                    server.start(importtime=logs[-1])
                    server.first_ok(f"/obj/{NAME}/get", args.poll_ms / 1000)
                if logs:
                    results[label]["importtime"] = _importtime(logs, args.top)
        finally:
            for server in servers.values():
                if server.proc is not None:
                    server.kill9()
    for label, result in results.items():
        result["load_average"] = os.getloadavg()
        result["start_to_first_read_ms"] = {
            "median": round(statistics.median(totals[label]), 1),
            "min": round(min(totals[label]), 1),
            "max": round(max(totals[label]), 1),
            "all": [round(t, 1) for t in totals[label]],
        }
        cpu = [t["cpu_ms"] for t in traces[label] if "cpu_ms" in t]
        if cpu:
            result["cpu_to_first_read_ms"] = {
                "median": round(statistics.median(cpu), 1),
                "min": round(min(cpu), 1),
            }
        if traces[label]:
            result["trace_median_ms"] = [
                {"mark": name, "at": round(at, 1), "delta": round(delta, 1), "what": MARKS[name]}
                for name, at, delta in _timeline(traces[label])
            ]
        _print(result)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


def _print(result: dict[str, Any]) -> None:
    w = sys.stdout.write
    w(
        f"[{result['label']}] doemu restart after SIGKILL → first GET /obj/{NAME}/get = 200 "
        f"({result['runs']} runs, {result['objects']} objects, {result['pending_alarms']} "
        f"pending alarms, poll {result['poll_ms']} ms, src {result['src']}, "
        f"PYTHONDONTWRITEBYTECODE={result['PYTHONDONTWRITEBYTECODE']}, "
        f"{result['doemu_pyc_files']} doemu .pyc files, "
        f"load {result['load_average'][0]:.2f})\n"
    )
    total = result["start_to_first_read_ms"]
    w(
        f"  start → first read: median {total['median']} ms (min {total['min']}, max "
        f"{total['max']})\n"
    )
    if "cpu_to_first_read_ms" in result:
        cpu = result["cpu_to_first_read_ms"]
        w(
            f"  CPU time of the server process from exec to its first response (traced runs): "
            f"median {cpu['median']} ms (min {cpu['min']})\n"
        )
    if "trace_median_ms" in result:
        w("  traced timeline (medians, ms since the fork; the traced run pays for its hook):\n")
        w(f"    {'mark':<22} {'at':>7} {'+delta':>7}  spent on\n")
        for row in result["trace_median_ms"]:
            w(f"    {row['mark']:<22} {row['at']:7.1f} {row['delta']:7.1f}  {row['what']}\n")
    if "floor_ms" in result:
        w("  interpreter floor (median wall ms):\n")
        for label, value in result["floor_ms"].items():
            w(f"    {label:<48} {value:7.1f}\n")
    if "importtime" in result:
        imp = result["importtime"]
        w(
            f"  -X importtime ({imp['runs']} runs, {imp['modules']} modules): "
            f"{imp['total_ms']} ms of imports; median self time by top-level package:\n"
        )
        for name, ms in imp["self_ms_by_package"].items():
            w(f"    {name:<48} {ms:7.2f}\n")
        w("  largest cumulative imports:\n")
        for name, ms in imp["largest_cumulative_ms"]:
            w(f"    {name:<48} {ms:7.2f}\n")


if __name__ == "__main__":
    main()
