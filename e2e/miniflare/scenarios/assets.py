"""Static assets: the Worker behind them, on Miniflare (workerd-Python) and on doemu
(e2e/test_bindings_differential.py): it answers what the assets do not, and passes
/via-binding/PATH to env.ASSETS.fetch."""

from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = "/" + request.url.split("://", 1)[1].split("/", 1)[1]
        if path.startswith("/via-binding/"):
            return await self.env.ASSETS.fetch("http://localhost/" + path[len("/via-binding/") :])
        return Response(f"worker: {path}")
