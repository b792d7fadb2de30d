"""Queues, a workflow and Workers AI for the inspector's views.

``jobs``' consumer records and acknowledges each body in ``CONSUMED`` (read at ``GET
/consumed``) and retries a body with ``"fail": true`` every time, so such a message dies after
its retry and goes to ``jobs-dlq``.
``Approval`` runs a step, sleeps a minute on the doemu clock, waits for an ``approve`` event and
returns the answer. ``POST /ask`` calls ``env.AI.run`` with the body's prompt.
"""

import json

from workers import Response, WorkerEntrypoint, WorkflowEntrypoint

CONSUMED = []


class Approval(WorkflowEntrypoint):
    async def run(self, event, step):
        @step.do("prepare")
        async def prepare():
            return {"who": event["payload"].get("who", "nobody"), "items": [1, 2, 3]}

        prepared = await prepare()
        await step.sleep("settle", "1 minute")
        approval = await step.wait_for_event("approval", "approve", timeout="1 hour")
        return {"who": prepared["who"], "answer": approval["payload"]["answer"]}


class Default(WorkerEntrypoint):
    async def queue(self, batch, env, ctx):
        for message in batch.messages:
            body = message.body
            if isinstance(body, dict) and body.get("fail"):
                message.retry()  # always: after max_retries it is a dead letter
            else:
                CONSUMED.append(body)
                message.ack()

    async def fetch(self, request):
        path = request.url.split("://", 1)[-1].partition("/")[2].partition("?")[0]
        if path == "consumed":
            return Response(json.dumps(CONSUMED), headers={"content-type": "application/json"})
        if path == "ask" and request.method == "POST":
            body = await request.json()
            result = await self.env.AI.run(
                "@cf/meta/llama-3.1-8b-instruct", {"prompt": body["prompt"]}
            )
            return Response(result["response"])
        return Response("not found", status=404)
