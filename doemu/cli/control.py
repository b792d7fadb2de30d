"""The commands for what only the admin API did before: ``run-alarm``, ``clock``, ``kv`` and
``tail`` (the event stream), talking to a running ``doemu dev`` found as the inspection commands
find it (``--url``, else the URL its persist dir records). ``kv`` reads the persist dir when no
server runs, as ``sql`` does; writing, running an alarm, moving the clock and tailing need one.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from datetime import UTC, datetime
from typing import Any

import click

from ..errors import DoemuError
from .common import _fail, main
from .inspect import (
    _echo_json,
    _echo_rows,
    _offline,
    _online,
    _path,
    _stdout_is_terminal,
    _Target,
    _targeted,
)

__all__: list[str] = []

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def _needs_server(target: _Target, what: str) -> None:
    base = target.client.base
    where = target.client.absent if base is None else f"no doemu server runs at {base}"
    _fail(f"{where}: {what} needs a running `doemu dev`")


def _duration_ms(text: str) -> float:
    """``60000``, ``90s``, ``5m``, ``1h`` → milliseconds."""
    match = _DURATION.match(text)
    if match is None:
        raise click.BadParameter(f"expected milliseconds or a duration like 90s, 5m, 1h: {text!r}")
    return float(match.group(1)) * _UNIT_MS[match.group(2) or "ms"]


def _utc(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


@main.command(name="run-alarm")
@_targeted
@click.argument("binding")
@click.argument("name")
def run_alarm(target: _Target, binding: str, name: str) -> None:
    """Deliver the pending alarm of object NAME now (as the inspector's "Run now")."""
    result = _online(target, lambda c: c.post(f"/objects/{_path(binding)}/{_path(name)}/alarm/run"))
    if result is None:
        _needs_server(target, "running an alarm")
    click.echo(f"ran the alarm of {binding} {name} ({result['id']})")


@main.command()
@_targeted
@click.option(
    "--advance",
    default=None,
    metavar="DURATION",
    help="Move a manual clock forward (milliseconds, or 90s, 5m, 1h); due alarms fire.  "
    "[default: only show the time]",
)
def clock(target: _Target, advance: str | None) -> None:
    """Show the server's clock; with --advance, move a manual clock (doemu dev --clock manual)."""
    if advance is None:
        result = _online(target, lambda c: c.get("/clock"))
    else:
        ms = _duration_ms(advance)
        result = _online(target, lambda c: c.post("/clock", {"advance_ms": ms}))
    if result is None:
        _needs_server(target, "the clock")
    kind = "manual" if result["manual"] else "real"
    click.echo(f"{result['now']:.0f} {_utc(result['now'])} ({kind} clock)")


def _value(text: str) -> Any:
    """A ``--put`` value: JSON when it parses (``42``, ``{"a": 1}``, ``"text"``), else text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@main.command()
@_targeted
@click.option("--prefix", default="", help="Only keys starting with this.  [default: all]")
@click.option("--limit", default=1000, show_default=True, help="At most this many entries.")
@click.option(
    "--put",
    "put",
    default=None,
    metavar="VALUE",
    help="Store VALUE under KEY (JSON when it parses, else text), as the object's "
    "ctx.storage.kv.put would.  [default: read]",
)
@click.option("--delete", is_flag=True, help="Delete KEY.  [default: read]")
@click.option(
    "--format",
    "output",
    type=click.Choice(["auto", "table", "json"]),
    default="auto",
    show_default=True,
    help="table on a terminal, JSON when piped (auto).",
)
@click.argument("binding")
@click.argument("name")
@click.argument("key", required=False)
def kv(
    target: _Target,
    prefix: str,
    limit: int,
    put: str | None,
    delete: bool,
    output: str,
    binding: str,
    name: str,
    key: str | None,
) -> None:
    """Read the KV storage of object NAME (KEY, or every key); --put or --delete KEY writes it."""
    base = f"/objects/{_path(binding)}/{_path(name)}/kv"
    if put is not None or delete:
        if key is None or (put is not None and delete):
            _fail("give KEY with either --put VALUE or --delete")
        assert key is not None
        if delete:
            result = _online(target, lambda c: c.call("DELETE", f"{base}/{_path(key)}"))
        else:
            body = {"value": _value(put or "")}
            result = _online(target, lambda c: c.call("PUT", f"{base}/{_path(key)}", body))
        if result is None:
            _needs_server(target, "writing KV (it runs inside the object)")
        _echo_json(result)
        return
    query = f"?prefix={_path(key if key is not None else prefix)}&limit={limit}"
    found = _online(target, lambda c: c.get(base + query))
    entries = (
        found["entries"]
        if found is not None
        else _offline_kv(target, binding, name, key or prefix, limit)
    )
    if key is not None:
        entries = [e for e in entries if e["key"] == key]
        if not entries:
            _fail(f"no key {key!r} in the KV storage of {binding} {name}")
    if output == "auto":
        output = "table" if _stdout_is_terminal() else "json"
    if output == "json":
        _echo_json(entries if key is None else entries[0]["value"])
        return
    if not entries:
        click.echo(f"no KV entries in {binding} {name}", err=True)
        return
    _echo_rows(["key", "value"], [[e["key"], json.dumps(e["value"])] for e in entries])


def _offline_kv(
    target: _Target, binding: str, name: str, prefix: str, limit: int
) -> list[dict[str, Any]]:
    import asyncio

    from ..inspection.offline import find_object_file
    from ..inspection.readers import read_kv

    try:
        file = find_object_file(
            target.worker, target.settings.persist_to, target.binding(binding), name
        )
        _offline(target)
        rows = asyncio.run(read_kv(file, prefix=prefix, limit=limit))
    except DoemuError as exc:
        _fail(str(exc))
    return [r for r in rows if str(r["key"]).startswith(prefix)]


@main.command()
@_targeted
@click.option(
    "--format",
    "output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: one line per event; json: each event's JSON, one per line.",
)
def tail(target: _Target, output: str) -> None:
    """Print the server's events as they happen (Ctrl-C stops): lifecycle events (constructed,
    evicted, reset, alarm.fired, alarm.retried, alarm.dropped), requests and log lines."""
    # Ctrl-C (SIGINT) is how it stops, also when it was started from a context that ignores
    # SIGINT (a background job of a non-interactive shell, a CI runner): Python then installs
    # no KeyboardInterrupt handler, and the command would follow forever.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for kind, event in target.client.events():
            if kind == "connected":  # on stderr: stdout stays one event per line
                click.echo(f"(following {target.client.base}/events; Ctrl-C stops)", err=True)
                continue
            if output == "json":
                click.echo(json.dumps({"type": kind, **event}))
                sys.stdout.flush()
                continue
            when = _utc(event["timestamp"])[11:23] if "timestamp" in event else ""
            if kind == "request":
                line = f"{event['method']} {event['path']} {event['status']} {event['ms']:.1f} ms"
                click.echo(f"{when} {line}")
                sys.stdout.flush()
                continue
            if kind == "log":
                click.echo(f"{when} {event['level']} {event['logger']}: {event['message']}")
                sys.stdout.flush()
                continue
            who = " ".join(str(event[k]) for k in ("binding", "name") if event.get(k) is not None)
            ident = f"({str(event.get('id', ''))[:12]}…)" if event.get("id") else ""
            extra = " ".join(
                f"{k}={event[k]}" for k in ("retryCount", "reason", "error") if k in event
            )
            click.echo(" ".join(part for part in (when, kind, who, ident, extra) if part))
            sys.stdout.flush()  # one line per event, also into a pipe or a file
    except KeyboardInterrupt:
        return
    except DoemuError as exc:
        from ..server.admin.client import AdminUnavailable

        if isinstance(exc, AdminUnavailable):
            _needs_server(target, "tail")
        _fail(str(exc))
