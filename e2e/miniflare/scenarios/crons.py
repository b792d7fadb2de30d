"""Cron triggers: what scheduled() receives, on Miniflare (workerd-Python) and on doemu:
e2e/test_bindings_differential.py (the runner calls scheduled() first, then fetch reads back
what it recorded in KV)."""

import json

from record import seen
from workers import Response, WorkerEntrypoint


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
