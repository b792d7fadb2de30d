"""What ``doemu dev`` tells people: its URLs, the banner, and the server record the client
commands read (``<persist>/.doemu-server.json``: the URL of the server that owns that state)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import __version__
from ..config import DevVars, DoemuSettings, WorkerConfig, display_path

if TYPE_CHECKING:
    from ..loader import LoadedWorker
    from ..runtime import Runtime

__all__ = [
    "SERVER_RECORD",
    "banner",
    "browsable_url",
    "http_url",
    "read_server_record",
    "remove_server_record",
    "write_server_record",
]

#: The file in the persist dir where a serving ``doemu dev`` records its URL and pid, so that
#: ``doemu objects`` and the other client commands find a server started with another ``--port``.
SERVER_RECORD = ".doemu-server.json"


def http_url(host: str, port: int) -> str:
    """The ``http://`` URL of ``host:port`` (an IPv6 host in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def browsable_url(host: str, port: int) -> str:
    """A URL one can open for a server bound to ``host``: loopback for a wildcard address."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return http_url(shown, port)


def _lan_address(ipv6: bool) -> str | None:
    """This machine's address on its default route, for the banner of a wildcard bind.

    Connecting a UDP socket sends nothing: it only asks the kernel which source address it
    would use. ``None`` when there is no route (an offline machine).
    """
    family, probe = (socket.AF_INET6, "2001:db8::1") if ipv6 else (socket.AF_INET, "192.0.2.1")
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as udp:
            udp.connect((probe, 9))
            address: str = udp.getsockname()[0]
    except OSError:
        return None
    return None if address in ("0.0.0.0", "::") else address


def read_server_record(persist_dir: Path) -> str | None:
    """The URL a running ``doemu dev`` recorded in ``persist_dir``, if its process still lives."""
    try:
        record = json.loads((persist_dir / SERVER_RECORD).read_text(encoding="utf-8"))
        url, pid = record["url"], int(record["pid"])
        os.kill(pid, 0)  # raises when the process is gone (a SIGKILLed server leaves its record)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return url if isinstance(url, str) else None


def write_server_record(persist_dir: Path, url: str) -> Path | None:
    """Record ``url`` for the client commands (best effort: the server runs without it)."""
    path = persist_dir / SERVER_RECORD
    try:
        temp = path.with_suffix(f".{os.getpid()}.tmp")
        temp.write_text(json.dumps({"url": url, "pid": os.getpid()}), encoding="utf-8")
        os.replace(temp, path)
    except OSError:
        return None
    return path


def remove_server_record(path: Path) -> None:
    """Remove the record if it is still this process's (a newer server may have replaced it)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


_DURABILITY_LINES = {
    "power": "power (each commit fsynced before its output leaves)",
    "process": "process (commits survive a crash of doemu, not of the machine)",
}


def banner(
    worker: WorkerConfig,
    loaded: LoadedWorker,
    runtime: Runtime,
    settings: DoemuSettings,
    dev_vars: DevVars,
    url: str,
    port: int,
) -> None:
    """What is being served and where; the last line is the exact one harnesses wait for.

    ``url`` is one a browser can open (loopback for a wildcard bind, whose LAN address follows).
    Variables are listed by name; a ``.dev.vars`` secret's value is never printed.
    """
    persist = (
        f"{display_path(runtime.persist_dir)} (persistent)"
        if settings.persist
        else f"{runtime.persist_dir} (temporary: removed on exit)"
    )
    env = f" · env {worker.env}" if worker.env else ""
    click.echo(f"doemu {__version__} · worker {worker.name!r} · {worker.source_name}{env}")
    click.echo(f"  url:     {url}")
    if settings.host in ("0.0.0.0", "::"):
        lan = _lan_address(settings.host == "::")
        if lan is not None:
            click.echo(f"  network: {http_url(lan, port)}")
        if settings.admin_token is None:
            click.echo("  note:    the admin API answers loopback only (--admin-token shares it)")
    click.echo(f"  inspect: {url}/__doemu/  (objects, storage, alarms, events; API under /api)")
    click.echo(f"  persist: {persist}")
    click.echo(f"  durable: {_DURABILITY_LINES[settings.durability]}")
    click.echo(f"  loop:    {_loop_name(asyncio.get_running_loop())}")
    if settings.clock == "manual":
        click.echo('  clock:   manual (POST /__doemu/api/clock {"advance_ms": …} moves it)')
    entry = f"Default ({loaded.entry.__module__})" if loaded.entry else "default router"
    click.echo(f"  entry:   {entry}")
    for binding in worker.bindings:
        item = loaded.classes[binding.class_name]
        click.echo(f"  {binding.name} → {item.name} ({'sql' if item.sql else 'kv'}; {item.origin})")
    for line in binding_lines(runtime):
        click.echo(f"  {line}")
    for key, shown in dev_vars.shown().items():
        click.echo(f"  var:     {key} = {shown}")
    if dev_vars.source is not None:
        click.echo(f"  secrets: from {display_path(dev_vars.source)} (values hidden)")
    if len(runtime.alarms):
        click.echo(f"  alarms:  {len(runtime.alarms)} restored")
    click.echo(f"doemu ready on {url}")
    sys.stdout.flush()


def binding_lines(runtime: Runtime) -> list[str]:
    """One banner line per KV namespace, D1 database, R2 bucket, service, assets, cron."""
    lines = []
    for item in runtime.extra.describe():
        where = item.get("file") or item.get("directory") or item.get("target") or ""
        if where.startswith("/"):
            where = display_path(Path(where))
        lines.append(f"{item['binding']} → {item['type']} {item['resource']} ({where})")
    crons = runtime.extra.crons
    if crons is not None and crons.crons:
        state = "scheduled" if crons.handler_present else "NOT scheduled: no Default.scheduled()"
        lines.append(
            f"crons:   {', '.join(crons.crons)} ({state}; /__scheduled?cron=… runs one now)"
        )
    return lines


def _loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: the loop the server really runs on, for the banner."""
    return "uvloop" if type(loop).__module__.partition(".")[0] == "uvloop" else "asyncio"
