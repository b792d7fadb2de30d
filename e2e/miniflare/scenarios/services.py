"""Service bindings to this Worker's entrypoints, on Miniflare (workerd-Python) and on doemu:
e2e/test_bindings_differential.py. An error raised in the callee arrives as a JsException named
PythonError carrying the callee's traceback: its name and last line are compared."""

import json

from pyodide.ffi import JsException
from record import step
from workers import Response, WorkerEntrypoint


class Named(WorkerEntrypoint):
    async def fetch(self, request):
        body = await request.text()
        return Response(
            f"named {request.method} {request.url} {body}", status=201, headers={"x-by": "named"}
        )

    async def add(self, a, b):
        return a + b

    async def echo(self, value):
        return value

    def double(self, value):
        return value * 2

    async def keywords(self, a, b=2):
        return [a, b]

    async def half(self):
        return 2.0

    async def boom(self):
        raise ValueError("bad thing")

    async def pair(self):
        return (1, 2)

    async def info(self):
        return {"a": [1, None], "b": {"c": "d"}, "n": None}


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.url.endswith("/inner"):
            return Response("default inner")
        svc = self.env.SVC
        out = {}

        async def fetched():
            response = await svc.fetch("http://x/hello", method="POST", body="b")
            return {
                "status": response.status,
                "text": await response.text(),
                "x-by": response.headers.get("x-by"),
            }

        await step(out, "fetch", fetched)
        await step(out, "add", lambda: svc.add(1, 2))
        await step(out, "echo_dict", lambda: svc.echo({"k": [1, 2], "n": None}))
        await step(out, "echo_none", lambda: svc.echo(None))
        await step(out, "echo_bytes", lambda: svc.echo(b"ab"))
        await step(out, "echo_float", lambda: svc.echo(1.5))
        await step(out, "echo_list", lambda: svc.echo([1, "two", None]))
        await step(out, "double_sync", lambda: svc.double(4))
        await step(out, "keywords", lambda: svc.keywords(1, b=3))
        await step(out, "keywords_default", lambda: svc.keywords(1))
        await step(out, "half", lambda: svc.half())
        await step(out, "info", lambda: svc.info())
        await step(out, "missing", lambda: svc.missing())
        await step(out, "echo_tuple", lambda: svc.echo((1, 2)))
        for name, call in (("boom", svc.boom), ("pair", svc.pair)):
            try:
                await call()
            except JsException as exc:  # the callee's traceback: its last line is the error
                out[name] = [exc.name, exc.message.rstrip().splitlines()[-1]]

        async def self_fetch():
            response = await self.env.SELF.fetch("http://x/inner")
            return await response.text()

        await step(out, "self_fetch", self_fetch)
        return Response(json.dumps(out), headers={"content-type": "application/json"})
