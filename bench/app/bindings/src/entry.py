"""The bindings bench's Worker (see bench/bindingsload.py for the routes and what they do)."""

from urllib.parse import parse_qs, urlparse

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlparse(request.url)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        route = url.path
        if route == "/kv/get":
            value = await self.env.KV.get(query["k"])
            return Response(value or "", status=200 if value is not None else 404)
        if route == "/kv/put":
            await self.env.KV.put(query["k"], await request.text())
            return Response("ok")
        if route == "/d1/get":
            row = (
                await self.env.DB.prepare("SELECT v FROM items WHERE id = ?")
                .bind(int(query["id"]))
                .first("v")
            )
            return Response(row or "", status=200 if row is not None else 404)
        if route == "/d1/insert":
            await (
                self.env.DB.prepare("INSERT INTO log (v) VALUES (?)")
                .bind(await request.text())
                .run()
            )
            return Response("ok")
        if route == "/d1/seed":
            n = int(query["n"])
            await self.env.DB.exec(
                "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, v TEXT);\n"
                "CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, v TEXT)"
            )
            insert = self.env.DB.prepare("INSERT OR REPLACE INTO items (id, v) VALUES (?, ?)")
            await self.env.DB.batch([insert.bind(i, f"value-{i}") for i in range(n)])
            return Response("ok")
        if route == "/r2/put":
            await self.env.R2.put(query["k"], await request.bytes())
            return Response("ok")
        if route == "/r2/get":
            found = await self.env.R2.get(query["k"])
            if found is None:
                return Response("", status=404)
            return Response(found.body)
        if route == "/obj/__bench_ready__/ping":
            return Response("ok")
        return Response("not found", status=404)
