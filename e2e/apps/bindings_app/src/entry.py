"""HTTP endpoints over the Worker's bindings: each write answers only once the binding has
acknowledged it, so the crash tests know what must survive."""

import json

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
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
        if parts[0] == "kv-count":
            listing = await self.env.CACHE.list()
            return Response(str(len(listing["keys"])))
        return Response("not found", status=404)
