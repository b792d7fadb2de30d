"""``/__scheduled?cron=…``: run the Worker's ``scheduled()`` handler now, from a browser or curl.

It is the route ``wrangler dev --test-scheduled`` adds (and ``/cdn-cgi/handler/scheduled``,
Miniflare's newer name for it), always on under doemu: ``cron`` names the trigger (default
``""``, as wrangler), ``time`` the scheduled time in epoch ms (default: now on the doemu clock).
The answer is wrangler's ``Ran scheduled event``; a Worker without a handler gets a JSON 404
and a handler that raises a JSON 500 with its error (the traceback goes to the log).
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import parse_qs

from ..bindings import NoScheduledHandler
from ..compat.fetch_api import Response
from ..runtime import Runtime

__all__ = ["SCHEDULED_PATHS", "run_scheduled"]

SCHEDULED_PATHS = frozenset({"/__scheduled", "/cdn-cgi/handler/scheduled"})


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response._from_parts(
        status, {"content-type": "application/json"}, json.dumps(body).encode()
    )


async def run_scheduled(runtime: Runtime, scope: MutableMapping[str, Any]) -> Response:
    """Run the handler for the request in ``scope``; the response to send."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    cron = query.get("cron", [""])[0]
    time_text = query.get("time", [None])[0]
    scheduled_time: float | None = None
    if time_text is not None:
        try:
            scheduled_time = float(time_text)
        except ValueError:
            return _json(400, {"error": f"time must be epoch milliseconds, got {time_text!r}"})
    crons = runtime.extra.crons
    if crons is None:
        return _json(404, {"error": "this runtime runs no cron triggers"})
    try:
        outcome = await crons.run(cron, scheduled_time)
    except NoScheduledHandler as exc:
        return _json(404, {"error": str(exc)})
    if outcome["outcome"] != "ok":
        return _json(500, {"error": outcome.get("error", "scheduled() failed")})
    return Response._from_parts(
        200, {"content-type": "text/plain;charset=UTF-8"}, b"Ran scheduled event"
    )
