"""Pieces shared by the bench clients (bench/load.py, bench/micro.py and the others): server
control, process-tree RSS and CPU, a minimal keep-alive HTTP/1.1 client, the wrk runner,
percentiles (the WebSocket client is in bench/wsclient.py), and what the rows of doemu beside
Miniflare (bench/bindingsload.py, bench/durableload.py) run them with: the variants, their
servers on fresh state, interleaved runs and the medians of their results.

The clients are deliberately small asyncio protocols (no aiohttp): their per-request overhead is
a few tens of microseconds, so latency rows measure the server, not the client. Every loop is
bounded by a count and by wall time; only loopback targets are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
READY_NAME = "__bench_ready__"
REPO = Path(__file__).resolve().parent.parent


def log(*parts: object) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {' '.join(str(p) for p in parts)}\n")
    sys.stderr.flush()


def install_fast_loop() -> str:
    """uvloop for the client when it is installed (bench/requirements.txt), else asyncio's."""
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        return "asyncio"
    uvloop.install()
    return f"uvloop {uvloop.__version__}"


# ------------------------------------------------------------------------------ statistics
def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), int(-(-p * len(sorted_values) // 100))))
    return sorted_values[rank - 1]


def latency_ms(seconds: list[float]) -> dict[str, Any]:
    values = sorted(s * 1000.0 for s in seconds)
    if not values:
        return {"n": 0}

    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 3)

    return {
        "n": len(values),
        "p50_ms": r(percentile(values, 50)),
        "p90_ms": r(percentile(values, 90)),
        "p99_ms": r(percentile(values, 99)),
        "max_ms": r(values[-1]),
        "mean_ms": r(sum(values) / len(values)),
    }


# ------------------------------------------------------------------------------ processes
def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def process_tree(root: int) -> list[int]:
    children = _children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if os.path.exists(f"/proc/{pid}"):
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out


def tree_rss_mb(root: int) -> dict[str, Any]:
    """VmRSS summed over the process tree, with a per-process breakdown."""
    total_kb, procs = 0, []
    for pid in process_tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        kb = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
        )
        total_kb += kb
        procs.append({"pid": pid, "comm": comm, "rss_mb": round(kb / 1024, 1)})
    return {"total_mb": round(total_kb / 1024, 1), "procs": procs}


_OBJECT_DB = re.compile(r"/[0-9a-f]{64}\.sqlite$")


def tree_open_files(root: int) -> dict[str, int]:
    """Open descriptors over the process tree, and how many are an object's database file.

    Both servers keep one ``<64 hex digits>.sqlite`` file per object (plus its -wal and -shm)
    open while the object is live, so ``live_objects`` counts live objects the same way for
    doemu and workerd (workerd has no API that reports it)."""
    fds = live = 0
    for pid in process_tree(root):
        try:
            entries = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        fds += len(entries)
        for fd in entries:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if _OBJECT_DB.search(target):
                live += 1
    return {"fds": fds, "live_objects": live}


def tree_cpu_s(root: int) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in process_tree(root):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def port_open(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.2):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


class Server:
    """A server started from a shell command in its own session (process group).

    ``stop`` is SIGTERM to the group, then SIGKILL after ``grace`` seconds; ``kill9`` SIGKILLs
    every process of the tree and the group and waits until the port is closed.
    """

    def __init__(self, cmd: str, port: int, log_path: Path | None = None) -> None:
        self.cmd = cmd
        self.port = port
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None, "server not running"
        return self.proc.pid

    def start(self, env: dict[str, str] | None = None) -> None:
        if port_open(self.port):
            raise RuntimeError(f"port {self.port} is already in use")
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            ["/bin/sh", "-c", self.cmd],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        if out is not subprocess.DEVNULL:
            out.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 8.0) -> None:
        if self.proc is None:
            return
        pgid = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log(f"server did not stop within {grace} s of SIGTERM; SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self._wait_port_closed()
        self.proc = None

    def kill9(self) -> None:
        assert self.proc is not None
        pids = process_tree(self.proc.pid)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._wait_port_closed()
        self.proc = None

    def _wait_port_closed(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and port_open(self.port):
            time.sleep(0.01)


# ------------------------------------------------------------------------------ HTTP client
class HttpError(Exception):
    pass


class _HttpProtocol(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection carrying one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple[int, dict[str, str], bytes]] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(HttpError(f"connection lost: {exc!r}"))

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.waiter is not None and not self.waiter.done():
            try:
                parsed = self._parse()
            except Exception as exc:  # a malformed response fails the request
                self.waiter.set_exception(HttpError(f"bad response: {exc!r}"))
                return
            if parsed is not None:
                self.waiter.set_result(parsed)

    def _parse(self) -> tuple[int, dict[str, str], bytes] | None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        start = end + 4
        if "content-length" in headers:
            n = int(headers["content-length"])
            if len(self.buf) < start + n:
                return None
            body = bytes(self.buf[start : start + n])
            del self.buf[: start + n]
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body_parts, pos = [], start
            while True:
                eol = self.buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                size = int(bytes(self.buf[pos:eol]).split(b";")[0], 16)
                if len(self.buf) < eol + 2 + size + 2:
                    return None
                if size == 0:
                    trailer_end = self.buf.find(b"\r\n\r\n", eol)
                    if trailer_end < 0 and self.buf[eol + 2 : eol + 4] != b"\r\n":
                        return None
                    cut = eol + 4 if self.buf[eol + 2 : eol + 4] == b"\r\n" else trailer_end + 4
                    del self.buf[:cut]
                    break
                body_parts.append(bytes(self.buf[eol + 2 : eol + 2 + size]))
                pos = eol + 2 + size + 2
            body = b"".join(body_parts)
        else:
            body = b""
            del self.buf[:start]
        return status, headers, body


class HttpClient:
    """A pool of keep-alive connections to one loopback port."""

    def __init__(self, port: int, timeout: float = 15.0) -> None:
        self.port = port
        self.timeout = timeout
        self._idle: list[_HttpProtocol] = []

    async def _connect(self) -> _HttpProtocol:
        loop = asyncio.get_running_loop()
        _t, proto = await loop.create_connection(_HttpProtocol, LOOPBACK, self.port)
        return proto

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        proto = None
        while self._idle:
            candidate = self._idle.pop()
            if not candidate.closed:
                proto = candidate
                break
        if proto is None:
            proto = await asyncio.wait_for(self._connect(), self.timeout)
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {LOOPBACK}:{self.port}\r\n"
            f"Accept-Encoding: identity\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        proto.waiter = asyncio.get_running_loop().create_future()
        assert proto.transport is not None
        proto.transport.write(head + body if body else head)
        try:
            status, headers, data = await asyncio.wait_for(proto.waiter, self.timeout)
        except BaseException:
            if proto.transport is not None:
                proto.transport.close()
            raise
        proto.waiter = None
        if headers.get("connection", "").lower() == "close":
            assert proto.transport is not None
            proto.transport.close()
        else:
            self._idle.append(proto)
        return status, data

    async def get(self, path: str) -> tuple[int, bytes]:
        return await self.request("GET", path)

    async def post(self, path: str, body: bytes = b"") -> tuple[int, bytes]:
        return await self.request("POST", path, body)

    def close(self) -> None:
        for proto in self._idle:
            if proto.transport is not None:
                proto.transport.close()
        self._idle.clear()

    async def fanout(
        self, method: str, paths: list[str], concurrency: int, time_cap: float = 120.0
    ) -> list[tuple[int, bytes]]:
        """Each path once, ``concurrency`` in flight; (0, error) for a failed request."""
        results: list[tuple[int, bytes]] = [(0, b"not sent")] * len(paths)
        todo = iter(range(len(paths)))
        deadline = time.perf_counter() + time_cap

        async def worker() -> None:
            for i in todo:
                if time.perf_counter() > deadline:
                    return
                try:
                    results[i] = await self.request(method, paths[i])
                except (TimeoutError, OSError, HttpError) as exc:
                    results[i] = (0, repr(exc).encode())

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return results

    async def wait_ready(
        self, path: str, limit_s: float = 120.0, interval: float = 0.01, proc: Server | None = None
    ) -> float:
        """Seconds until ``GET path`` answers 200 (fresh connection for every probe)."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < limit_s:
            if proc is not None and proc.proc is not None and proc.proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.proc.returncode}")
            probe = HttpClient(self.port, timeout=2.0)
            try:
                status, _ = await probe.get(path)
                if status == 200:
                    return time.perf_counter() - t0
            except (TimeoutError, OSError, HttpError):
                pass
            finally:
                probe.close()
            await asyncio.sleep(interval)
        raise RuntimeError(f"{path} did not answer 200 within {limit_s} s")


# ------------------------------------------------------------------------------ wrk
_WRK_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
"""


def wrk_path() -> str | None:
    return shutil.which("wrk")


def run_wrk(
    port: int,
    *,
    method: str,
    path: str | None = None,
    path_prefix: str | None = None,
    path_suffix: str = "",
    spread: int = 0,
    connections: int,
    seconds: float,
    server_pid: int | None = None,
    timeout_s: int = 10,
) -> dict[str, Any]:
    """One wrk run (1 thread). Either a fixed ``path`` or ``path_prefix .. i .. path_suffix`` for
    i cycling over ``spread`` objects. Returns throughput, latency percentiles and error counts."""
    lua = [f'wrk.method = "{method}"', 'wrk.headers["Accept-Encoding"] = "identity"']
    if method == "POST":
        # an empty body, so that wrk sends "Content-Length: 0" as HTTP clients do for a bodiless
        # POST (RFC 9110 8.6; curl -d '', fetch(), aiohttp, this module's asyncio client);
        # without it wrk sends no length at all, a request shape doemu handles differently
        # (see bench/README.md)
        lua.append('wrk.body = ""')
    if spread:
        lua += [
            "local i = 0",
            "request = function()",
            f"  i = i % {spread} + 1",
            f'  return wrk.format(nil, "{path_prefix}" .. i .. "{path_suffix}")',
            "end",
        ]
    lua.append(_WRK_DONE)
    url_path = path if path is not None else "/"
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write("\n".join(lua))
        script = f.name
    cmd = [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        f"--timeout={timeout_s}s",
        "-s",
        script,
        f"http://{LOOPBACK}:{port}{url_path}",
    ]
    cpu0 = tree_cpu_s(server_pid) if server_pid else None
    ru0 = os.times()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=False)
    finally:
        os.unlink(script)
    ru1 = os.times()
    cpu1 = tree_cpu_s(server_pid) if server_pid else None
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk failed: {out.stdout[-400:]} {out.stderr[-400:]}")
    raw = json.loads(line[len("WRKJSON ") :])
    elapsed = raw["duration_us"] / 1e6
    errors = raw["connect"] + raw["read"] + raw["write"] + raw["timeout"]
    ok = raw["requests"] - raw["status"]
    client_cpu = (ru1.children_user - ru0.children_user) + (
        ru1.children_system - ru0.children_system
    )
    return {
        "tool": "wrk",
        "command": " ".join([*cmd[:-3], "<script>", cmd[-1]]),
        "concurrency": connections,
        "elapsed_s": round(elapsed, 3),
        "requests": raw["requests"],
        "ok": ok,
        "non_2xx": raw["status"],
        "errors": errors,
        "rps": round(ok / elapsed, 1) if elapsed else None,
        "p50_ms": round(raw["p50_us"] / 1000, 3),
        "p90_ms": round(raw["p90_us"] / 1000, 3),
        "p99_ms": round(raw["p99_us"] / 1000, 3),
        "max_ms": round(raw["max_us"] / 1000, 3),
        "mean_ms": round(raw["mean_us"] / 1000, 3),
        "client_cpu_pct": round(100 * client_cpu / elapsed, 1) if elapsed else None,
        "server_cpu_pct": (
            round(100 * (cpu1 - cpu0) / elapsed, 1)
            if elapsed and cpu0 is not None and cpu1 is not None
            else None
        ),
    }


async def closed_loop(
    client_factory: Callable[[], HttpClient],
    method: str,
    path_fn: Callable[[int], str],
    concurrency: int,
    seconds: float,
    max_requests: int = 500_000,
    server_pid: int | None = None,
    body_fn: Callable[[int], bytes] | None = None,
) -> dict[str, Any]:
    """``concurrency`` workers, back to back (the asyncio fallback when wrk is missing, and the
    client of rows with request bodies: ``body_fn(i)``, else none)."""
    lat: list[float] = []
    errors = 0
    issued = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal errors, issued
        client = client_factory()
        try:
            while issued < max_requests and time.perf_counter() < deadline:
                i = issued
                issued += 1
                t = time.perf_counter()
                try:
                    body = b"" if body_fn is None else body_fn(i)
                    status, _ = await client.request(method, path_fn(i), body)
                except (TimeoutError, OSError, HttpError):
                    errors += 1
                    continue
                if status == 200:
                    lat.append(time.perf_counter() - t)
                else:
                    errors += 1
        finally:
            client.close()

    cpu0 = tree_cpu_s(server_pid) if server_pid else None
    c0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    c1 = time.process_time()
    cpu1 = tree_cpu_s(server_pid) if server_pid else None
    return {
        "tool": "asyncio",
        "concurrency": concurrency,
        "elapsed_s": round(elapsed, 3),
        "requests": len(lat) + errors,
        "ok": len(lat),
        "errors": errors,
        "non_2xx": 0,
        "rps": round(len(lat) / elapsed, 1),
        **latency_ms(lat),
        "client_cpu_pct": round(100 * (c1 - c0) / elapsed, 1),
        "server_cpu_pct": (
            round(100 * (cpu1 - cpu0) / elapsed, 1)
            if cpu0 is not None and cpu1 is not None
            else None
        ),
    }


# ------------------------------------------------------------------------ doemu beside Miniflare
#: The variants of the rows beside Miniflare: doemu at power durability (the one judged), doemu
#: at process durability, and Miniflare (what ``wrangler dev`` runs).
PEER_VARIANTS = ("doemu", "doemu_process", "miniflare")
PEER_LABELS = {
    "doemu": "doemu (power)",
    "doemu_process": "doemu (process)",
    "miniflare": "Miniflare",
}
#: The bench apps' readiness probe (``bench/app/*`` and ``bench/peer-bindings`` answer it alike).
PING = f"/obj/{READY_NAME}/ping"


def peer_command(variant: str, port: int, state: Path, *, app: str, peer: str) -> str:
    """The shell command serving ``bench/app/<app>`` on ``doemu dev`` (at the durability the
    variant names), or ``bench/peer-bindings/<peer>`` on Miniflare; its state persisted in
    ``state``."""
    if variant == "miniflare":
        return f"node {REPO}/bench/peer-bindings/{peer} {port} {state}"
    durability = "power" if variant == "doemu" else "process"
    return (
        f"{REPO}/.venv/bin/doemu dev --config {REPO}/bench/app/{app}/wrangler.toml "
        f"--port {port} --persist-to {state} --durability {durability} --log-level warning"
    )


def start_fresh(command: Callable[[int, Path], str], work: Path, name: str) -> Server:
    """The server ``command(port, state)`` started on a free port with fresh state (the folder
    ``work/<name>``, emptied first), its output in ``work/<name>.log``."""
    port = free_port()
    state = work / name
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    server = Server(command(port, state), port, log_path=work / f"{name}.log")
    server.start()
    return server


async def wait_pinged(server: Server, interval: float) -> float:
    """Seconds until ``server`` answers :data:`PING` (a new connection for every probe, one
    each ``interval`` s, 60 s at most; a server that exits fails at once)."""
    return await HttpClient(server.port).wait_ready(PING, 60.0, interval, proc=server)


def peer_arguments(description: str) -> argparse.ArgumentParser:
    """The command line every row beside Miniflare takes; the caller adds its own sizes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variants", default=",".join(PEER_VARIANTS))
    parser.add_argument("--summarize-only", action="store_true")
    return parser


async def run_peers(
    args: argparse.Namespace,
    prefix: str,
    run_variant: Callable[[str, int, argparse.Namespace], Awaitable[dict[str, Any]]],
    summarize: Callable[[Path], str],
) -> None:
    """Every chosen variant ``args.runs`` times (``run_variant(variant, run, args)``), interleaved
    run by run (who goes first rotates), each result in ``<prefix>-<variant>-<run>.json``; then
    the section ``summarize`` makes of them in ``<prefix>.md``, all in ``args.results``."""
    args.results.mkdir(parents=True, exist_ok=True)
    chosen = tuple(v for v in PEER_VARIANTS if v in args.variants.split(","))
    if not args.summarize_only:
        if not chosen:
            sys.exit(f"{prefix}: --variants names none of {', '.join(PEER_VARIANTS)}")
        if "miniflare" in chosen and shutil.which("node") is None:
            sys.exit(f"{prefix}: node is required for the Miniflare peer")
        for run in range(1, args.runs + 1):
            shift = run % len(chosen)
            for variant in chosen[shift:] + chosen[:shift]:
                result = await run_variant(variant, run, args)
                path = args.results / f"{prefix}-{variant}-{run}.json"
                path.write_text(json.dumps(result, indent=1))
    section = args.results / f"{prefix}.md"
    section.write_text(summarize(args.results))
    log(f"wrote {section}")


def load_peer_runs(results: Path, prefix: str) -> dict[str, list[dict[str, Any]]]:
    """Every ``<prefix>-<variant>-<run>.json`` in ``results``, by variant."""
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in PEER_VARIANTS}
    for path in sorted(results.glob(f"{prefix}-*.json")):
        data = json.loads(path.read_text())
        runs[data["variant"]].append(data)
    return runs


def row_values(
    runs: dict[str, list[dict[str, Any]]], variant: str, row: str, key: str
) -> list[Any]:
    """``key`` of ``row`` in each run of ``variant`` that has the row (``None`` where missing)."""
    return [r["rows"][row].get(key) for r in runs[variant] if row in r["rows"]]


def row_median(
    runs: dict[str, list[dict[str, Any]]], variant: str, row: str, key: str
) -> float | None:
    """The median of :func:`row_values` that are not ``None``; ``None`` when there is none."""
    found = [v for v in row_values(runs, variant, row, key) if v is not None]
    return statistics.median(found) if found else None
