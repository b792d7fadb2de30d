"""A Durable Object counter and the Worker in front of it, on Cloudflare's Python Workers API.

POST /counter/<name>   add 1 to the counter called <name>: {"name": "<name>", "value": n}
GET  /counter/<name>   read it
# {{with:kv}}
PUT  /cache/<key>      store the body in the KV namespace env.CACHE for an hour
GET  /cache/<key>      read it back: {"key": "<key>", "value": "..." or null}
# {{end:kv}}
# {{with:d1}}
POST /notes            add the body as a note in the D1 database env.DB
GET  /notes            list the notes: {"notes": [{"id": 1, "text": "..."}]}
# {{end:d1}}
# {{with:r2}}
PUT  /files/<key>      store the body in the R2 bucket env.FILES (with its content type)
GET  /files/<key>      get it back, with its content type and etag
# {{end:r2}}
"""

from urllib.parse import urlparse

from js import Date
from workers import DurableObject, Response, WorkerEntrypoint


class Counter(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER)"
        )

    async def increment(self):
        row = self.ctx.storage.sql.exec(
            "INSERT INTO counter VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET n = n + 1 RETURNING n"
        ).one()
        return row["n"]

    async def value(self):
        rows = self.ctx.storage.sql.exec("SELECT n FROM counter").toArray()
        return rows[0]["n"] if rows else 0

    async def reset_in(self, ms):
        """Set the counter back to 0 in `ms` milliseconds: a durable alarm."""
        await self.ctx.storage.setAlarm(Date.now() + ms)

    async def alarm(self, alarm_info=None):
        self.ctx.storage.sql.exec("DELETE FROM counter")


# {{with:kv}}
async def cache(env, request, key):
    """A KV namespace: values with an expiry, read anywhere (Cloudflare's edge caches them)."""
    if request.method == "PUT":
        await env.CACHE.put(key, await request.text(), expirationTtl=3600)
    return Response.json({"key": key, "value": await env.CACHE.get(key)})


# {{end:kv}}
# {{with:d1}}
async def notes(env, request):
    """A D1 database: SQL with prepared statements (the table is in migrations/)."""
    if request.method == "POST":
        await env.DB.prepare("INSERT INTO notes (text) VALUES (?)").bind(await request.text()).run()
    rows = await env.DB.prepare("SELECT id, text FROM notes ORDER BY id").all()
    return Response.json({"notes": rows.results})


# {{end:d1}}
# {{with:r2}}
async def files(env, request, key):
    """An R2 bucket: objects with HTTP metadata, streamed in and out."""
    if request.method == "PUT":
        content_type = request.headers.get("content-type") or "application/octet-stream"
        await env.FILES.put(key, await request.bytes(), httpMetadata={"contentType": content_type})
    found = await env.FILES.get(key)
    if found is None:
        return Response("no such file\n", status=404)
    headers = {"etag": found.httpEtag, "content-type": found.httpMetadata.contentType}
    return Response(await found.text(), headers=headers)


# {{end:r2}}
class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlparse(request.url).path.strip("/").split("/")
        # {{with:kv}}
        if len(parts) == 2 and parts[0] == "cache" and parts[1]:
            return await cache(self.env, request, parts[1])
        # {{end:kv}}
        # {{with:d1}}
        if parts == ["notes"]:
            return await notes(self.env, request)
        # {{end:d1}}
        # {{with:r2}}
        if len(parts) == 2 and parts[0] == "files" and parts[1]:
            return await files(self.env, request, parts[1])
        # {{end:r2}}
        if len(parts) != 2 or parts[0] != "counter" or not parts[1]:
            return Response("try: curl -X POST http://127.0.0.1:8787/counter/alice\n", status=404)
        counter = self.env.COUNTER.getByName(parts[1])
        value = await counter.increment() if request.method == "POST" else await counter.value()
        return Response.json({"name": parts[1], "value": value})
