"""The durable-work bench's Worker (see bench/durableload.py for the routes and what they do).

Counters live in module globals: the queue consumer, the workflows and ``fetch`` run in one
process here and in one isolate on Miniflare, so a client can follow progress without touching
the queue or the instances (a request to an instance could wake it, which the restart row must
not do).
"""

import json
from urllib.parse import parse_qs, urlparse

from js import Date
from workers import Response, WorkerEntrypoint, WorkflowEntrypoint

COUNTS = {"acked": 0, "batches": 0, "completed": 0}
WOKE = {}


def trivial(i):
    """A step body that returns ``i`` (a factory, so each step keeps its own ``i``)."""

    async def body():
        return i

    return body


class Steps(WorkflowEntrypoint):
    """``steps`` trivial steps, then one that counts the instance as complete."""

    async def run(self, event, step):
        total = event["payload"]["steps"]
        value = 0
        for i in range(total):
            value += await step.do(f"s{i}")(trivial(i))()

        @step.do("finish")
        async def finish():
            COUNTS["completed"] += 1
            return value

        return await finish()


class Sleeper(WorkflowEntrypoint):
    """A step, a durable sleep of ``ms``, and a step that records when it woke."""

    async def run(self, event, step):
        me = event["instanceId"]

        @step.do("armed")
        async def armed():
            return Date.now()

        started = await armed()
        await step.sleep("nap", event["payload"]["ms"])

        @step.do("woke")
        async def woke():
            now = Date.now()
            WOKE[me] = now
            return now

        return {"armed": started, "woke": await woke()}


class Default(WorkerEntrypoint):
    async def queue(self, batch, env, ctx):
        COUNTS["batches"] += 1
        COUNTS["acked"] += len(batch.messages)
        batch.ackAll()

    async def fetch(self, request):
        url = urlparse(request.url)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        route = url.path
        if route == "/q/send":
            n = int(query["n"])
            await self.env.Q.sendBatch([{"body": {"i": i}} for i in range(n)])
            return Response("ok")
        if route == "/counts":
            return Response(json.dumps(COUNTS), headers={"content-type": "application/json"})
        if route == "/wf/create":
            steps = int(query["steps"])
            await self.env.STEPS.create(id=query["id"], params={"steps": steps})
            return Response("ok")
        if route == "/wf/sleeper":
            await self.env.SLEEPER.create(id=query["id"], params={"ms": int(query["ms"])})
            return Response("ok")
        if route == "/wf/woke":
            return Response(json.dumps(WOKE.get(query["id"])))
        if route == "/wf/status":
            binding = self.env.SLEEPER if query.get("kind") == "sleeper" else self.env.STEPS
            status = await (await binding.get(query["id"])).status()
            return Response(json.dumps(dict(status)), headers={"content-type": "application/json"})
        if route == "/obj/__bench_ready__/ping":
            return Response("ok")
        return Response("not found", status=404)
