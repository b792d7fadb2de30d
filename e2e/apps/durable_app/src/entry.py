"""A workflow whose steps report their side effects to a counter outside the process.

``Job`` runs: ``first`` → ``slow`` (holds for ``hold`` seconds on its first attempt, the window
in which the test kills doemu) → a ``nap`` sleep → ``woke`` → waits for an "approve" event →
``last``. Each step POSTs ``{"id", "step", "attempt"}`` to ``COUNTER_URL`` when it runs.

The ``tasks`` queue's consumer reports each message it sees (``{"id": "queue", "step": n,
"attempt"}``) and, on a first delivery that asks for it, holds the batch before acking it.
"""

import asyncio
import json

from workers import Response, WorkerEntrypoint, WorkflowEntrypoint, fetch


async def effect(env, instance_id, name, attempt=1):
    body = json.dumps({"id": instance_id, "step": name, "attempt": attempt})
    await fetch(env.COUNTER_URL, method="POST", body=body)


class Job(WorkflowEntrypoint):
    async def run(self, event, step):
        params = event["payload"]
        me = event["instanceId"]
        env = self.env

        @step.do()
        async def first():
            await effect(env, me, "first")
            return 1

        @step.do()
        async def slow(first, ctx):
            await effect(env, me, "slow", ctx["attempt"])
            if ctx["attempt"] == 1:
                await asyncio.sleep(params["hold"])
            return first + 1

        await slow()
        await step.sleep("nap", f"{params['nap']} seconds")

        @step.do()
        async def woke():
            await effect(env, me, "woke")
            return "awake"

        await woke()
        approval = await step.wait_for_event("approval", "approve", timeout="1 hour")

        @step.do()
        async def last(slow):
            await effect(env, me, "last")
            return slow + approval["payload"]["bonus"]

        return {"result": await last()}


class Default(WorkerEntrypoint):
    async def queue(self, batch, env, ctx):
        """Report every message, then hold the batch if asked (the test kills doemu then)."""
        hold = 0.0
        for message in batch.messages:
            body = message.body
            await effect(self.env, "queue", body["n"], message.attempts)
            if message.attempts == 1:
                hold = max(hold, body.get("hold", 0))
        if hold:
            await asyncio.sleep(hold)
        batch.ackAll()

    async def fetch(self, request):
        url = request.url
        query = dict(p.split("=", 1) for p in url.split("?", 1)[1].split("&")) if "?" in url else {}
        path = "/" + url.split("://", 1)[1].split("/", 1)[1].split("?", 1)[0]
        if path == "/start":
            params = {"hold": float(query.get("hold", "60")), "nap": float(query.get("nap", "1"))}
            instance = await self.env.JOBS.create(id=query["id"], params=params)
            return Response(instance.id)
        if path == "/status":
            instance = await self.env.JOBS.get(query["id"])
            status = await instance.status()
            return Response(json.dumps(dict(status)), headers={"content-type": "application/json"})
        if path == "/event":
            instance = await self.env.JOBS.get(query["id"])
            await instance.sendEvent(type="approve", payload={"bonus": int(query["bonus"])})
            return Response("sent")
        if path == "/enqueue":
            count, hold = int(query["count"]), float(query.get("hold", "0"))
            await self.env.TASKS.sendBatch([{"body": {"n": n, "hold": hold}} for n in range(count)])
            return Response("queued")
        return Response("not found", status=404)
