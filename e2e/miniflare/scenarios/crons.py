"""Cron triggers: what scheduled() receives, on Miniflare (workerd-Python) and on doemu:
e2e/test_bindings_differential.py (the runner calls scheduled() first, then fetch reads back
what it recorded in KV)."""

import json

from pyodide.ffi import JsException
from workers import Response, WorkerEntrypoint


def seen(value):
    if isinstance(value, memoryview):
        return ["memoryview", bytes(value).hex()]
    if value is None or isinstance(value, bool | int | float | str):
        return [type(value).__name__, value]
    if isinstance(value, dict):
        return [type(value).__name__, {k: seen(v) for k, v in value.items()}]
    if isinstance(value, list):
        return ["list", [seen(v) for v in value]]
    constructor = getattr(getattr(value, "constructor", None), "name", None)
    return ["object", constructor or type(value).__name__]


async def step(out, name, make):
    try:
        out[name] = seen(await make())
    except JsException as exc:
        out[name] = ["JsException", str(exc)]
    except Exception as exc:
        out[name] = ["error", type(exc).__name__, str(exc)]


class Default(WorkerEntrypoint):
    async def scheduled(self, controller, env, ctx):
        seen_by_handler = {
            "cron": seen(controller.cron),
            "scheduledTime": seen(controller.scheduledTime),
            "env": seen(env),
            "ctx": seen(ctx),
            "has_noRetry": callable(getattr(controller, "noRetry", None)),
            "self_env_kv": type(self.env.KV).__name__ != "NoneType",
        }
        await self.env.KV.put("scheduled", json.dumps(seen_by_handler))

    async def fetch(self, request):
        return Response(
            await self.env.KV.get("scheduled") or "{}", headers={"content-type": "application/json"}
        )
