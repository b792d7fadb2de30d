"""The admin API's routes for durable work beyond one object: Queues, Workflows, Workers AI.

Reads come from the bindings' own stores and objects (a queue's file, an instance's rows, the AI
binding's ring of recent calls) and change nothing; listing a workflow's instances reads their
files and constructs no instance (:mod:`doemu.bindings.workflows.listing`). Actions go through
the bindings as user code's calls do: a test message is sent by a producer with Cloudflare's
limits and texts, an instance is created, paused, resumed, terminated, restarted or sent an
event through the Workflow binding with the engine's errors. The two actions user code has no
call for are a queue's purge (what ``wrangler queues purge`` does) and moving a dead letter back
into its queue (a replay), each one transaction on the queue's file.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ... import clone
from ...bindings import BindingError, WorkerBindings
from ...bindings.queues import Queue
from ...bindings.workflows import Workflow, WorkflowService
from ...bindings.workflows.binding import WorkflowInstance
from ...bindings.workflows.listing import InstanceSummary
from ...errors import HttpError
from ...inspection.readers import jsonable
from ...runtime import Runtime
from .handlers import endpoint, int_query, json_body, param
from .openapi import _ARRAY, _op

__all__ = ["DURABLE_PATHS", "PREVIEW_CHARS", "STATUSES", "DurableRoutes", "body_preview"]

#: A message body is shown up to this many characters (the rest is counted, not sent).
PREVIEW_CHARS = 2000
#: What ``?status=`` may filter instances by.
STATUSES = ("queued", "running", "paused", "waiting", "waitingForPause", "errored",
            "terminated", "complete")  # fmt: skip
_ACTIONS = ("pause", "resume", "terminate", "restart")
_SEND_BODY = (
    'expected a JSON body like {"body": {"any": "JSON"}, "contentType": "json", '
    '"delaySeconds": 0} (contentType "text" needs a string body)'
)
_CREATE_BODY = 'expected a JSON body like {"id": "optional-id", "params": {"any": "JSON"}}'
_EVENT_BODY = 'expected a JSON body like {"type": "approval", "payload": {"any": "JSON"}}'


def body_preview(data: bytes, content_type: str) -> dict[str, Any]:
    """A message body as text for a person to read: ``body`` (at most :data:`PREVIEW_CHARS`
    characters), ``truncated``, and ``bytes`` (its stored size)."""
    if content_type in ("text", "json"):
        text = data.decode("utf-8", "replace")
    elif content_type == "bytes":
        text = "base64:" + base64.b64encode(data[:PREVIEW_CHARS]).decode("ascii")
    else:  # v8: the structured clone, shown as the JSON it is closest to
        try:
            text = json.dumps(jsonable(clone.decode(data)), ensure_ascii=False)
        except Exception:
            text = f"(v8 value of {len(data)} bytes)"
    return {
        "body": text[:PREVIEW_CHARS],
        "truncated": len(text) > PREVIEW_CHARS,
        "bytes": len(data),
    }


def _tally(summaries: list[InstanceSummary]) -> dict[str, int]:
    """How many instances have each status (only the statuses some instance has)."""
    return dict(Counter(s.status for s in summaries))


class DurableRoutes:
    """The handlers of the Queues, Workflows and AI routes, over one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def extra(self) -> WorkerBindings:
        return self.runtime.extra

    # -- queues ----------------------------------------------------------------------------------
    def _queue(self, request: Request) -> str:
        name = param(request, "queue")
        names = self.extra.queue_names()
        if name not in names:
            raise HttpError(404, f"unknown queue {name!r}; known: {', '.join(names) or 'none'}")
        return name

    def _poke(self, queue: str) -> None:
        consumer = self.extra.consumers.get(queue)
        if consumer is not None:
            consumer.poke()

    async def queues(self, request: Request) -> Response:
        extra = self.extra
        limit = int_query(request, "limit", 100) or 100
        now = self.runtime.clock.now()
        out = []
        for name in extra.queue_names():
            store = extra.queue_store(name)
            consumer = extra.consumers.get(name)
            out.append(
                {
                    "queue": name,
                    "producers": [p.binding for p in extra.resources.producers if p.queue == name],
                    "consumer": None
                    if consumer is None
                    else {
                        "handler": consumer.handler_present,
                        "max_batch_size": consumer.spec.max_batch_size,
                        "max_batch_timeout": consumer.spec.max_batch_timeout,
                        "max_retries": consumer.spec.max_retries,
                        "retry_delay": consumer.spec.retry_delay,
                        "dead_letter_queue": consumer.spec.dead_letter_queue,
                        "max_concurrency": consumer.spec.max_concurrency,
                        "delivered": consumer.delivered,
                    },
                    "backlog": store.count(),
                    "counts": store.counts(now),
                    "messages": store.backlog(limit),
                    "dead_letters": store.dead_letters(limit),
                }
            )
        return JSONResponse(out)

    async def dead_letters(self, request: Request) -> Response:
        name = self._queue(request)
        store = self.extra.queue_store(name)
        limit = min(int_query(request, "limit", 50) or 50, 1000)
        offset = int_query(request, "offset", 0)
        page = store.dead_letter_page(limit, offset)
        return JSONResponse(
            {
                "queue": name,
                "count": store.counts(self.runtime.clock.now())["deadLetters"],
                "offset": offset,
                "deadLetters": [
                    {**fields, **body_preview(body, str(fields["contentType"]))}
                    for fields, body in page
                ],
            }
        )

    async def send(self, request: Request) -> Response:
        name = self._queue(request)
        body = await json_body(request, _SEND_BODY)
        if "body" not in body:
            raise HttpError(400, f"{_SEND_BODY}; 'body' is missing")
        content_type = body.get("contentType", "json")
        if content_type not in ("json", "text"):
            raise HttpError(400, f'{_SEND_BODY}; \'contentType\' must be "json" or "text"')
        options: dict[str, Any] = {"contentType": content_type}
        if body.get("delaySeconds") is not None:
            options["delaySeconds"] = body["delaySeconds"]
        extra = self.extra
        producer = Queue(
            "(admin)",
            name,
            lambda: extra.queue_store(name),
            self.runtime.clock.now,
            lambda: self._poke(name),
        )
        try:
            await producer.send(body["body"], **options)
        except BindingError as exc:
            raise HttpError(400, exc.message) from None
        return JSONResponse({"queue": name, "sent": True})

    async def purge(self, request: Request) -> Response:
        name = self._queue(request)
        store = self.extra.queue_store(name)
        purged = store.purge()
        durable = store.file.durable()
        if durable is not None:
            await durable
        return JSONResponse({"queue": name, "purged": purged})

    async def replay(self, request: Request) -> Response:
        """Move a dead letter back: its copy in the dead-letter queue (if it still waits there)
        is taken out first, so a crash between the two writes loses nothing (the dead letter
        keeps its body until it is replayed) and the message is not delivered twice."""
        name = self._queue(request)
        message_id = param(request, "id")
        extra = self.extra
        store = extra.queue_store(name)
        fields = next(
            (f for f, _ in store.dead_letter_page(1_000_000, 0) if f["id"] == message_id), None
        )
        if fields is None:
            raise HttpError(404, f"no dead letter {message_id!r} in queue {name}")
        copy = "absent"
        moved_to = fields["movedTo"]
        if isinstance(moved_to, str) and moved_to != name:
            dlq = extra.queue_store(moved_to)
            copy = dlq.withdraw(message_id)
            if copy == "inFlight":
                raise HttpError(
                    409,
                    f"message {message_id!r} is being delivered from the dead-letter queue "
                    f"{moved_to} right now; try again when that batch is done",
                )
            durable = dlq.file.durable()
            if durable is not None:
                await durable
        replayed = store.replay(message_id, self.runtime.clock.now())
        if replayed is None:  # replayed by another request meanwhile
            raise HttpError(404, f"no dead letter {message_id!r} in queue {name}")
        durable = store.file.durable()
        if durable is not None:
            await durable
        self._poke(name)
        return JSONResponse(
            {
                "queue": name,
                "id": message_id,
                "replayed": True,
                "removedFrom": moved_to if copy == "removed" else None,
            }
        )

    # -- workflows -------------------------------------------------------------------------------
    def _workflow(self, request: Request) -> tuple[str, WorkflowService]:
        binding = param(request, "binding")
        service = self.extra.workflows.get(binding)
        if service is None:
            known = ", ".join(sorted(self.extra.workflows)) or "none"
            raise HttpError(404, f"unknown Workflow binding {binding!r}; known: {known}")
        return binding, service

    def _instance(self, request: Request) -> tuple[WorkflowService, str]:
        _binding, service = self._workflow(request)
        instance_id = param(request, "id")
        if not service.stored(instance_id):
            raise HttpError(404, f"no instance {instance_id!r} of the workflow {service.spec.name}")
        return service, instance_id

    async def workflows(self, request: Request) -> Response:
        """Each workflow, the tally of its instances' statuses (Cloudflare's list of workflows
        counts them the same way) and its newest ``limit`` instances with ``status()``'s
        fields, all read from the instances' files: listing wakes no instance."""
        limit = int_query(request, "limit", 100) or 100
        out = []
        for binding, service in self.extra.workflows.items():
            every = await service.summaries()
            page = every[:limit]
            outcomes = await service.outcomes([s.hex_id for s in page])
            instances = []
            for summary in page:
                outcome = outcomes.get(summary.hex_id)
                if outcome is None:  # restarted or removed between the two reads
                    continue
                instances.append(
                    {
                        "id": summary.id,
                        "status": summary.status,
                        "error": outcome.error,
                        "output": outcome.output,
                    }
                )
            out.append(
                {
                    "binding": binding,
                    "name": service.spec.name,
                    "class_name": service.spec.class_name,
                    "total": len(every),
                    "statuses": _tally(every),
                    "instances": jsonable(instances),
                }
            )
        return JSONResponse(out)

    async def instances(self, request: Request) -> Response:
        binding, service = self._workflow(request)
        if request.method == "POST":
            return await self._create(binding, service, request)
        status = request.query_params.get("status") or None
        if status is not None and status not in STATUSES:
            raise HttpError(400, f"status {status!r} is not one of {', '.join(STATUSES)}")
        limit = min(int_query(request, "limit", 50) or 50, 1000)
        offset = int_query(request, "offset", 0)
        every = await service.summaries()
        chosen = [s for s in every if status is None or s.status == status]
        return JSONResponse(
            {
                "binding": binding,
                "name": service.spec.name,
                "total": len(every),
                "count": len(chosen),
                "statuses": _tally(every),
                "offset": offset,
                "instances": [s.view() for s in chosen[offset : offset + limit]],
                "now": self.runtime.clock.now(),
            }
        )

    async def _create(self, binding: str, service: WorkflowService, request: Request) -> Response:
        body = await json_body(request, _CREATE_BODY)
        options = {k: body[k] for k in ("id", "params") if body.get(k) is not None}
        try:
            created = await Workflow(binding, service).create(**options)
        except BindingError as exc:
            status = 409 if "already_exists" in exc.message else 400
            raise HttpError(status, exc.message) from None
        return JSONResponse({"id": created.id, "created": True})

    async def workflow_instance(self, request: Request) -> Response:
        service, instance_id = self._instance(request)
        try:
            view = await service.call(instance_id, "describe")
        except BindingError as exc:
            raise HttpError(404, exc.message) from None
        return JSONResponse({**jsonable(view), "now": self.runtime.clock.now()})

    async def instance_action(self, request: Request) -> Response:
        action = param(request, "action")
        if action not in _ACTIONS:
            raise HttpError(404, f"no instance action {action!r}; one of {', '.join(_ACTIONS)}")
        service, instance_id = self._instance(request)
        handle = WorkflowInstance(service, instance_id)
        try:
            await getattr(handle, action)()
            status = await handle.status()
        except BindingError as exc:
            raise HttpError(409 if "cannot_" in exc.message else 400, exc.message) from None
        return JSONResponse({"id": instance_id, "action": action, **jsonable(status)})

    async def instance_event(self, request: Request) -> Response:
        service, instance_id = self._instance(request)
        body = await json_body(request, _EVENT_BODY)
        event_type = body.get("type")
        if not isinstance(event_type, str) or not event_type:
            raise HttpError(400, f"{_EVENT_BODY}; 'type' must be a non-empty string")
        try:
            await WorkflowInstance(service, instance_id).sendEvent(
                type=event_type, payload=body.get("payload")
            )
        except BindingError as exc:
            raise HttpError(400, exc.message) from None
        return JSONResponse({"id": instance_id, "type": event_type, "sent": True})

    # -- Workers AI ------------------------------------------------------------------------------
    async def ai(self, request: Request) -> Response:
        extra = self.extra
        ai = extra.ai
        if ai is None or extra.resources.ai is None:
            raise HttpError(404, "this Worker has no AI binding ([ai] binding in wrangler.toml)")
        settings = ai.settings
        return JSONResponse(
            {
                "binding": extra.resources.ai.binding,
                "configured": settings is not None,
                "base_url": settings.base_url if settings is not None else None,
                "models": dict(settings.models) if settings is not None else {},
                "default_model": settings.default_model if settings is not None else None,
                "default_embedding_model": (
                    settings.default_embedding_model if settings is not None else None
                ),
                "lastRequestHttpStatusCode": ai.lastRequestHttpStatusCode,
                "calls": ai.calls.recent(),
                "total_calls": ai.calls.total,
            }
        )

    def routes(self) -> list[Route]:
        instance = "/workflows/{binding}/instances/{id}"
        return [
            Route("/queues", endpoint(self.queues)),
            Route("/queues/{queue}/messages", endpoint(self.send), methods=["POST"]),
            Route("/queues/{queue}/purge", endpoint(self.purge), methods=["POST"]),
            Route("/queues/{queue}/dead-letters", endpoint(self.dead_letters)),
            Route(
                "/queues/{queue}/dead-letters/{id}/replay",
                endpoint(self.replay),
                methods=["POST"],
            ),
            Route("/workflows", endpoint(self.workflows)),
            Route(
                "/workflows/{binding}/instances",
                endpoint(self.instances),
                methods=["GET", "POST"],
            ),
            Route(instance, endpoint(self.workflow_instance)),
            Route(instance + "/events", endpoint(self.instance_event), methods=["POST"]),
            Route(instance + "/{action}", endpoint(self.instance_action), methods=["POST"]),
            Route("/ai", endpoint(self.ai)),
        ]


_API = "/__doemu/api"
_QUEUE = {"name": "queue", "in": "path", "required": True, "schema": {"type": "string"}}
_BINDING = {"name": "binding", "in": "path", "required": True, "schema": {"type": "string"}}
_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
_PAGE = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 1000}},
    {"name": "offset", "in": "query", "schema": {"type": "integer"}},
]

#: The OpenAPI paths of these routes (merged into the admin API's document).
DURABLE_PATHS: dict[str, Any] = {
    _API + "/queues": {
        "get": _op(
            "Each queue: its producers, consumer settings, backlog counts (ready, delayed, in "
            "flight, dead letters), the waiting messages (with attempts) and dead letters",
            "Queues",
            schema=_ARRAY,
        )
    },
    _API + "/queues/{queue}/messages": {
        "post": _op(
            "Send a message through a producer (Cloudflare's limits and texts)",
            "Sent",
            params=[_QUEUE],
            body={
                "type": "object",
                "properties": {
                    "body": {},
                    "contentType": {"enum": ["json", "text"], "default": "json"},
                    "delaySeconds": {"type": "integer", "minimum": 0, "maximum": 43200},
                },
                "required": ["body"],
            },
        )
    },
    _API + "/queues/{queue}/purge": {
        "post": _op(
            "Delete every waiting message (a batch in flight settles as it would); dead letters "
            "stay",
            "Purged",
            params=[_QUEUE],
        )
    },
    _API + "/queues/{queue}/dead-letters": {
        "get": _op(
            "A page of the queue's dead letters with a body preview (2000 characters), "
            "attempts and times (epoch ms)",
            "Dead letters",
            params=[_QUEUE, *_PAGE],
        )
    },
    _API + "/queues/{queue}/dead-letters/{id}/replay": {
        "post": _op(
            "Move a dead letter back into its queue (attempts from 0, ready now); its copy "
            "waiting in the dead-letter queue is taken out",
            "Replayed",
            params=[_QUEUE, _ID],
            conflict=True,
        )
    },
    _API + "/workflows": {
        "get": _op(
            "Each workflow: how many instances have each status (statuses, total) and its "
            "newest instances (at most limit, default 100) with status, error and output, read "
            "from their files (no instance wakes)",
            "Workflows",
            schema=_ARRAY,
            params=[{"name": "limit", "in": "query", "schema": {"type": "integer"}}],
        )
    },
    _API + "/workflows/{binding}/instances": {
        "get": _op(
            "A page of a workflow's instances, newest first, with their status and times; "
            "count (with the filter), total and how many have each status",
            "Instances",
            params=[
                _BINDING,
                {"name": "status", "in": "query", "schema": {"enum": list(STATUSES)}},
                *_PAGE,
            ],
        ),
        "post": _op(
            "Create an instance through the binding (id optional, params as JSON)",
            "Created",
            params=[_BINDING],
            body={"type": "object", "properties": {"id": {"type": "string"}, "params": {}}},
            conflict=True,
        ),
    },
    _API + "/workflows/{binding}/instances/{id}": {
        "get": _op(
            "One workflow instance: status, params, output or error, times, every step (state, "
            "attempts, value, wake time, last update) and now on the doemu clock",
            "Instance",
            params=[_BINDING, _ID],
        )
    },
    _API + "/workflows/{binding}/instances/{id}/events": {
        "post": _op(
            "Send an event (type and JSON payload) to the instance",
            "Sent",
            params=[_BINDING, _ID],
            body={
                "type": "object",
                "properties": {"type": {"type": "string"}, "payload": {}},
                "required": ["type"],
            },
        )
    },
    _API + "/workflows/{binding}/instances/{id}/{action}": {
        "post": _op(
            "pause, resume, terminate or restart the instance; answers its new status",
            "Status",
            params=[
                _BINDING,
                _ID,
                {
                    "name": "action",
                    "in": "path",
                    "required": True,
                    "schema": {"enum": list(_ACTIONS)},
                },
            ],
            conflict=True,
        )
    },
    _API + "/ai": {
        "get": _op(
            "The AI binding: its endpoint and model map (never the key) and the last 50 calls "
            "(model, status, latency, tokens)",
            "AI",
        )
    },
}
