"""Plumbing the workerd runner must get right, served the same way by doemu dev.

GET /vars                    the env's variables (text and JSON)
GET /fetch?url=<url>         workers.fetch(url): its status and body
GET /storage/<BINDING>/<n>   the object's kind of storage: KV always, SQL only if SQLite-backed
"""

import json
from urllib.parse import parse_qs, urlparse

from workers import DurableObject, Response, WorkerEntrypoint, fetch

VARS = ("PLAIN", "OVERRIDDEN", "SECRET", "LIMITS", "FROM_CALLER")


def plain(value):
    """JSON vars are JS objects on Cloudflare and Python values on doemu."""
    return value.to_py() if hasattr(value, "to_py") else value


class Storage(DurableObject):
    async def fetch(self, request):
        await self.ctx.storage.put("seen", "yes")
        try:
            self.ctx.storage.sql.exec("SELECT 1")
            sql = True
        except Exception:
            sql = False
        return Response.json({"kv": await self.ctx.storage.get("seen"), "sql": sql})


class Notes(Storage):
    pass


class Ledger(Storage):
    pass


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlparse(request.url)
        parts = url.path.strip("/").split("/")
        if parts == ["vars"]:
            found = {name: plain(getattr(self.env, name, None)) for name in VARS}
            return Response.json(found)
        if parts == ["fetch"]:
            target = parse_qs(url.query)["url"][0]
            upstream = await fetch(target)
            return Response.json({"status": upstream.status, "body": await upstream.text()})
        if len(parts) == 3 and parts[0] == "storage" and parts[1] in ("NOTES", "LEDGER"):
            stub = getattr(self.env, parts[1]).getByName(parts[2])
            return await stub.fetch(request)
        return Response.json({"error": json.dumps(parts)}, status=404)
