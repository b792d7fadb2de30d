"""Queues on doemu, the Python twin of ``e2e/miniflare/twins/queues.mjs`` (run on Miniflare) for
``e2e/test_queues_differential.py``: the same HTTP surface, the same consumer, the same records.

``POST /send`` ``{binding, messages: [{body, contentType, delaySeconds}], batch, delaySeconds}``
sends through ``env[binding]`` (``sendBatch`` when ``batch``) and answers ``{at: Date.now()}``; a
body ``{"$bytes": [...]}`` is sent as bytes. ``GET /log`` answers every batch the consumer
received, in order: ``{queue, at, messages: [{id, attempts, timestamp, body}]}``, a body recorded
as ``{kind, value}`` ("text" for a string, "bytes" with the byte values, "json" otherwise). A
message whose body has a ``plan`` is acted on: ``plan[attempts - 1]`` is ``ack``, ``retry``,
``retry:N`` (delaySeconds N), ``ackAll``, ``retryAll``, ``retryAll:N``, ``throw`` (``queue()``
raises after the rest) or nothing.
"""

import json

from js import Date
from workers import Response, WorkerEntrypoint

DELIVERIES = []


def to_body(value):
    if isinstance(value, dict) and isinstance(value.get("$bytes"), list):
        return bytes(value["$bytes"])
    return value


def describe(body):
    if isinstance(body, str):
        return {"kind": "text", "value": body}
    if isinstance(body, bytes | bytearray | memoryview):
        return {"kind": "bytes", "value": list(bytes(body))}
    return {"kind": "json", "value": body}


def split(action):
    verb, _, arg = action.partition(":")
    return verb, ({"delaySeconds": int(arg)} if arg else {})


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = "/" + request.url.split("://", 1)[1].split("/", 1)[1].split("?", 1)[0]
        if path == "/send":
            order = json.loads(await request.text())
            queue = getattr(self.env, order["binding"])
            messages = []
            for m in order["messages"]:
                out = {"body": to_body(m["body"])}
                out.update({k: m[k] for k in ("contentType", "delaySeconds") if k in m})
                messages.append(out)
            at = Date.now()
            if order.get("batch"):
                options = {"delaySeconds": order["delaySeconds"]} if "delaySeconds" in order else {}
                await queue.sendBatch(messages, **options)
            else:
                for m in messages:
                    await queue.send(m.pop("body"), **m)
            return Response(json.dumps({"at": at}), headers={"content-type": "application/json"})
        if path == "/log":
            body = json.dumps({"deliveries": DELIVERIES})
            return Response(body, headers={"content-type": "application/json"})
        return Response("not found", status=404)

    async def queue(self, batch, env, ctx):
        record = {"queue": batch.queue, "at": Date.now(), "messages": []}
        DELIVERIES.append(record)
        batch_actions = []
        fail = False
        for message in batch.messages:
            body = message.body
            record["messages"].append(
                {
                    "id": message.id,
                    "attempts": message.attempts,
                    "timestamp": round(message.timestamp.timestamp() * 1000),
                    "body": describe(body),
                }
            )
            plan = body.get("plan", []) if isinstance(body, dict) else []
            attempt = message.attempts - 1
            verb, options = split(plan[attempt] if attempt < len(plan) else "none")
            if verb == "ack":
                message.ack()
            elif verb == "retry":
                message.retry(**options)
            elif verb in ("ackAll", "retryAll"):
                batch_actions.append((verb, options))
            elif verb == "throw":
                fail = True
        for verb, options in batch_actions:
            if verb == "ackAll":
                batch.ackAll()
            else:
                batch.retryAll(**options)
        if fail:
            raise RuntimeError("the consumer failed on purpose")
