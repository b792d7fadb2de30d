"""A Worker with one binding of each kind: R2 objects put over HTTP (with their metadata), a
``scheduled()`` handler that records each run in KV, a Durable Object and a named entrypoint."""

from urllib.parse import parse_qs, unquote, urlsplit

from workers import DurableObject, Response, WorkerEntrypoint


class Notes(DurableObject):
    async def fetch(self, request):
        count = (await self.ctx.storage.get("count")) or 0
        await self.ctx.storage.put("count", count + 1)
        return Response(str(count + 1))


class Helper(WorkerEntrypoint):
    async def ping(self):
        return "pong"


class Default(WorkerEntrypoint):
    async def scheduled(self, controller, env, ctx):
        key = f"cron:{controller.cron}:{controller.scheduledTime}"
        await self.env.CACHE.put(key, "ran", metadata={"cron": controller.cron})

    async def fetch(self, request):
        url = urlsplit(request.url)
        if url.path.startswith("/r2/") and request.method == "PUT":
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            content_type = query.pop("type", "application/octet-stream")
            await self.env.FILES.put(
                unquote(url.path[len("/r2/") :]),
                await request.bytes(),
                httpMetadata={"contentType": content_type},
                customMetadata=query,
            )
            return Response("stored")
        if url.path.startswith("/notes/"):
            stub = self.env.NOTES.getByName(url.path[len("/notes/") :])
            return await stub.fetch(request)
        if url.path == "/ping":
            return Response(await self.env.HELPER.ping())
        return Response("not found", status=404)
