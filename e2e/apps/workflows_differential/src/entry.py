"""Workflows on doemu, the Python twin of ``e2e/miniflare/twins/workflows.mjs`` (run on
Miniflare) for ``e2e/test_workflows_differential.py``: the same workflow (a scenario per
``params["kind"]``), the same HTTP surface, the same records.

``POST /create`` ``{id, params}``, ``GET /status?id=``, ``POST /control`` ``{id, action}``
(pause, resume, terminate, restart), ``POST /event`` ``{id, type, payload}``: the binding's calls,
each answering JSON (``{"error": message}`` when the call raises). ``GET /effects?id=`` answers
every side effect the instance recorded, in order: ``{what, at}`` ("run" each time ``run()``
starts, a step's name each time its function runs).
"""

import json

from js import Date
from workers import Response, WorkerEntrypoint, WorkflowEntrypoint
from workers.workflows import NonRetryableError

EFFECTS = []


def effect(instance_id, what):
    EFFECTS.append({"id": instance_id, "what": what, "at": Date.now()})


def attempts(instance_id, what):
    return sum(1 for e in EFFECTS if e["id"] == instance_id and e["what"] == what)


def describe(error):
    name = getattr(error, "name", type(error).__name__)
    return f"{name}: {getattr(error, 'message', str(error))}"


def flaky(me, name):
    """A step function failing on its first three attempts."""

    async def attempt_it():
        effect(me, name)
        attempt = attempts(me, name)
        if attempt <= 3:
            raise RuntimeError(f"{name} failed on attempt {attempt}")
        return attempt

    return attempt_it


def message_of(error):
    return getattr(error, "message", str(error))


class Flow(WorkflowEntrypoint):
    async def run(self, event, step):
        me = event["instanceId"]
        params = event["payload"]
        effect(me, "run")
        kind = params["kind"]
        if kind == "cache":

            @step.do("a")
            async def a():
                effect(me, "a")
                return 1

            first = await a()
            await step.sleep("nap", params["nap"])

            @step.do("b")
            async def b():
                effect(me, "b")
                return first + 1

            return {"a": first, "b": await b()}
        if kind == "retries":
            out = {}
            for backoff in ("constant", "linear", "exponential"):
                name = f"flaky-{backoff}"
                config = {"retries": {"limit": 3, "delay": params["delay"], "backoff": backoff}}

                out[backoff] = await step.do(name, config=config)(flaky(me, name))()

            doomed_config = {
                "retries": {"limit": 1, "delay": params["delay"], "backoff": "constant"}
            }

            @step.do("doomed", config=doomed_config)
            async def doomed():
                effect(me, "doomed")
                raise RuntimeError(f"doomed on attempt {attempts(me, 'doomed')}")

            try:
                await doomed()
            except Exception as error:
                out["doomed"] = message_of(error)

            @step.do("refused", config={"retries": {"limit": 5, "delay": params["delay"]}})
            async def refused():
                effect(me, "refused")
                raise NonRetryableError("refused for good")

            try:
                await refused()
            except Exception as error:
                out["refused"] = message_of(error)
            return out
        if kind == "fatal":

            @step.do("fatal", config={"retries": {"limit": 5, "delay": params["delay"]}})
            async def fatal():
                effect(me, "fatal")
                raise NonRetryableError("no point in retrying")

            await fatal()
            return "unreachable"
        if kind == "events":
            early = await step.wait_for_event("early", "early", timeout="1 hour")
            effect(me, "waiting for approval")
            approval = await step.wait_for_event("approval", "approve", timeout="1 hour")
            try:
                late = await step.wait_for_event("late", "late", timeout=params["timeout"])
            except Exception as error:
                late = describe(error)
            return {
                "early": early["payload"],
                "approval": approval["payload"],
                "type": approval["type"],
                "late": late,
            }
        if kind == "lifecycle":

            @step.do("work")
            async def work():
                effect(me, "work")
                return "worked"

            await work()
            go = await step.wait_for_event("go", "go", timeout="1 hour")
            return {"done": go["payload"]}
        raise ValueError(f"unknown kind {kind}")


def reply(value):
    return Response(json.dumps(value), headers={"content-type": "application/json"})


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = request.url
        path = "/" + url.split("://", 1)[1].split("/", 1)[1].split("?", 1)[0]
        body = json.loads(await request.text()) if request.method == "POST" else {}
        query = dict(p.split("=", 1) for p in url.split("?", 1)[1].split("&")) if "?" in url else {}
        instance_id = body.get("id", query.get("id"))
        flow = self.env.FLOW
        try:
            if path == "/create":
                instance = await flow.create(id=instance_id, params=body["params"])
                return reply({"id": instance.id})
            if path == "/status":
                status = await (await flow.get(instance_id)).status()
                return reply(
                    {
                        "status": status["status"],
                        "output": status["output"],
                        "error": status["error"],
                    }
                )
            if path == "/control":
                await getattr(await flow.get(instance_id), body["action"])()
                return reply({"ok": True})
            if path == "/event":
                instance = await flow.get(instance_id)
                await instance.sendEvent(type=body["type"], payload=body["payload"])
                return reply({"ok": True})
        except Exception as error:
            return reply({"error": message_of(error)})
        if path == "/effects":
            mine = [{"what": e["what"], "at": e["at"]} for e in EFFECTS if e["id"] == instance_id]
            return reply(mine)
        return Response("not found", status=404)
