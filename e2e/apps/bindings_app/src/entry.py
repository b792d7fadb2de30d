"""HTTP endpoints over the Worker's bindings: each write answers only once the binding has
acknowledged it, so the crash tests know what must survive."""

import hashlib
import json

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def bad_input(self):
        """Every binding refusing bad input with Cloudflare's text (caught here)."""
        seen = {}

        async def attempt(name, make):
            try:
                result = await make()
                seen[name] = ["ok", repr(result)[:80]]
            except Exception as exc:
                seen[name] = [type(exc).__name__, str(exc)]

        env = self.env
        await attempt("kv_long_key", lambda: env.CACHE.put("k" * 600, "v"))
        await attempt("kv_big_value", lambda: env.CACHE.put("big", "x" * (25 * 1024 * 1024 + 1)))
        await attempt("kv_bad_ttl", lambda: env.CACHE.put("k", "v", expirationTtl=5))
        await attempt("kv_bad_cursor", lambda: env.CACHE.list(cursor="!!not-a-cursor!!"))
        await attempt("r2_bad_range", lambda: env.FILES.get("r2-bad-input", range={"offset": 999}))
        await attempt("r2_long_key", lambda: env.FILES.put("k" * 1100, "v"))
        await attempt("d1_syntax", lambda: env.DB.prepare("SELEC 1").all())
        await attempt("d1_no_table", lambda: env.DB.prepare("SELECT * FROM nope").all())
        await attempt("d1_bad_bind", lambda: env.DB.prepare("SELECT ?").bind({"a": 1}).all())

        async def unknown():
            return env.NOPE

        await attempt("unknown_binding", unknown)
        return seen

    async def scheduled(self, controller, env, ctx):
        await self.env.CACHE.put(f"cron:{controller.scheduledTime}", controller.cron)

    async def fetch(self, request):
        url = request.url
        path = url.split("://", 1)[1].split("/", 1)[1].split("?", 1)[0]
        parts = path.split("/")
        if parts[0] == "kv" and len(parts) == 2:
            key = parts[1]
            if request.method == "PUT":
                await self.env.CACHE.put(key, await request.text())
                return Response("stored")
            value = await self.env.CACHE.get(key)
            return Response(json.dumps(value), headers={"content-type": "application/json"})
        if parts[0] == "d1" and len(parts) == 2 and request.method == "PUT":
            order = int(parts[1])
            db = self.env.DB
            await db.batch(
                [
                    db.prepare("INSERT INTO orders (id, note) VALUES (?, ?)").bind(order, "o"),
                    db.prepare("INSERT INTO lines (order_id, item) VALUES (?, 'a')").bind(order),
                    db.prepare("INSERT INTO lines (order_id, item) VALUES (?, 'b')").bind(order),
                ]
            )
            return Response("stored")
        if parts[0] == "d1-check":
            rows = await self.env.DB.prepare(
                "SELECT o.id AS id, count(l.id) AS n FROM orders o "
                "LEFT JOIN lines l ON l.order_id = o.id GROUP BY o.id"
            ).raw()
            orphans = await self.env.DB.prepare(
                "SELECT count(*) AS n FROM lines WHERE order_id NOT IN (SELECT id FROM orders)"
            ).first("n")
            return Response(
                json.dumps({"orders": rows, "orphans": orphans}),
                headers={"content-type": "application/json"},
            )
        if parts[0] == "r2" and len(parts) == 2 and request.method == "PUT":
            data = await request.bytes()
            digest = hashlib.sha256(data).hexdigest()
            await self.env.FILES.put(parts[1], data, customMetadata={"sha256": digest})
            return Response("stored")
        if parts[0] == "r2-multi" and len(parts) == 2 and request.method == "PUT":
            data = await request.bytes()
            upload = await self.env.FILES.createMultipartUpload(
                parts[1], customMetadata={"sha256": hashlib.sha256(data).hexdigest()}
            )
            half = 5 * 1024 * 1024
            first = await upload.uploadPart(1, data[:half])
            second = await upload.uploadPart(2, data[half:])
            await upload.complete([first, second])
            return Response("stored")
        if parts[0] == "r2-check":
            seen, bad, cursor = [], [], None
            while True:
                page = await self.env.FILES.list(include=["customMetadata"], cursor=cursor)
                for item in page.objects:
                    body = await self.env.FILES.get(item.key)
                    data = bytes(await body.arrayBuffer())
                    seen.append(item.key)
                    if hashlib.sha256(data).hexdigest() != item.customMetadata["sha256"]:
                        bad.append(item.key)
                if not page.truncated:
                    break
                cursor = page.cursor
            return Response(
                json.dumps({"keys": seen, "bad": bad}), headers={"content-type": "application/json"}
            )
        if parts[0] == "bad":
            return Response(
                json.dumps(await self.bad_input()), headers={"content-type": "application/json"}
            )
        if parts[0] == "kv-uncaught":
            await self.env.CACHE.get("k" * 600)  # the binding's error escapes: a JSON 500
        if parts[0] == "kv-count":
            listing = await self.env.CACHE.list()
            return Response(str(len(listing["keys"])))
        return Response("not found", status=404)
