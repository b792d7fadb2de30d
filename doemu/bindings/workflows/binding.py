"""``env.<WORKFLOW>``: create and address workflow instances, as the Python SDK presents it.

On Cloudflare the binding is the SDK's ``_WorkflowBindingWrapper`` over the JS ``Workflow``:
``create(id=…, params=…)`` (keywords become one options object, so ``create({"id": …})`` is the
same call), ``get(id)``, ``create_batch([...])`` (and the JS ``createBatch``), each answering an
instance handle with ``id``, ``status()``, ``pause()``, ``resume()``, ``terminate()``,
``restart()`` and ``sendEvent(type=…, payload=…)`` / ``send_event``. Errors are JS errors with
the engine's texts. Called from inside a Durable Object, each call is output: the object's
writes commit first (see :func:`doemu.bindings.boundary.call`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Mapping
from typing import Any

from ... import clone
from ...compat.rpc import python_from_rpc, python_to_rpc
from ...errors import DataCloneError
from ..boundary import call, js_arguments
from .errors import INSTANCE_NOT_FOUND, WorkflowError
from .runner import MAX_VALUE_BYTES
from .service import WorkflowService

__all__ = ["MAX_BATCH", "Workflow", "WorkflowInstance"]

#: The most instances one ``createBatch`` call may create.
MAX_BATCH = 100
_ID = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9-_]*")
_MAX_ID = 100


def _options(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    values = js_arguments(args, kwargs)
    first = values[0] if values else None
    if first is None:
        return {}
    if not isinstance(first, Mapping):
        raise WorkflowError(f"create() expects an object like {{id, params}}, got {first!r}")
    return first


def _encode(value: Any, what: str) -> bytes:
    try:
        data = clone.encode(python_to_rpc(value))
    except DataCloneError as exc:
        raise WorkflowError(f"{what} cannot be serialized: {exc.message}") from None
    if len(data) > MAX_VALUE_BYTES:
        raise WorkflowError(f"{what} is too large: {len(data)} bytes (Cloudflare's limit is 1 MiB)")
    return data


class WorkflowInstance:
    """A handle on one instance (``id``, and its methods; see the module docstring)."""

    __slots__ = ("_service", "id")

    def __init__(self, service: WorkflowService, instance_id: str) -> None:
        self._service = service
        self.id = instance_id

    def __repr__(self) -> str:
        return f"<WorkflowInstance {self._service.spec.name}/{self.id}>"

    def _call(self, method: str, *args: Any) -> Awaitable[Any]:
        async def work() -> Any:
            if not self._service.stored(self.id):
                raise WorkflowError(INSTANCE_NOT_FOUND)
            return await self._service.call(self.id, method, *args)

        return call(work)

    async def status(self) -> Any:
        """``{status, error, output}``: ``queued``, ``running``, ``paused``, ``waiting``,
        ``waitingForPause``, ``errored``, ``terminated`` or ``complete``."""
        return python_from_rpc(await self._call("status"))

    async def pause(self) -> None:
        await self._call("pause")

    async def resume(self) -> None:
        await self._call("resume")

    async def terminate(self) -> None:
        await self._call("terminate")

    async def restart(self) -> None:
        await self._call("restart")

    async def sendEvent(self, *args: Any, **kwargs: Any) -> None:
        """Deliver an event (``type``, ``payload``) to the instance's ``wait_for_event``."""
        options = _options(args, kwargs)
        event_type = options.get("type")
        if not isinstance(event_type, str) or not event_type:
            raise WorkflowError(f"sendEvent needs a type (a non-empty string), got {event_type!r}")
        payload = _encode(options.get("payload"), "The event payload")
        await self._call("send_event", event_type, payload)

    send_event = sendEvent


class Workflow:
    """``env.<WORKFLOW>`` (see the module docstring)."""

    __slots__ = ("_binding", "_service")

    def __init__(self, binding: str, service: WorkflowService) -> None:
        self._binding = binding
        self._service = service

    def __repr__(self) -> str:
        return f"<Workflow {self._service.spec.name} (env.{self._binding})>"

    async def create(self, *args: Any, **kwargs: Any) -> WorkflowInstance:
        """Start an instance: ``create(id=…, params=…)``; ``id`` defaults to a random UUID."""
        return await call(lambda: self._create(_options(args, kwargs)))

    async def _create(self, options: Mapping[str, Any]) -> WorkflowInstance:
        instance_id = options.get("id")
        if instance_id is None:
            instance_id = str(uuid.uuid4())
        if (
            not isinstance(instance_id, str)
            or len(instance_id) > _MAX_ID
            or not _ID.fullmatch(instance_id)
        ):
            raise WorkflowError("Workflow instance has invalid id")
        params = options.get("params")
        data = _encode({} if params is None else params, "The instance params")
        if not await self._service.call(instance_id, "init", instance_id, data):
            raise WorkflowError("(instance.already_exists) Instance already exists")
        return WorkflowInstance(self._service, instance_id)

    async def get(self, *args: Any, **kwargs: Any) -> WorkflowInstance:
        """The instance with this id; ``instance.not_found`` when there is none."""
        values = js_arguments(args, kwargs)
        instance_id = values[0] if values else None
        if not isinstance(instance_id, str):
            raise WorkflowError(INSTANCE_NOT_FOUND)

        async def work() -> WorkflowInstance:
            service = self._service
            if not service.stored(instance_id) or not await service.call(instance_id, "exists"):
                raise WorkflowError(INSTANCE_NOT_FOUND)
            return WorkflowInstance(service, instance_id)

        return await call(work)

    async def create_batch(self, *args: Any, **kwargs: Any) -> list[WorkflowInstance]:
        """Start several instances: a list of ``{id, params}`` (at most 100)."""
        values = js_arguments(args, kwargs)
        batch = values[0] if values else None
        if not isinstance(batch, list) or not batch:
            raise WorkflowError("WorkflowError: batchCreate should have at least 1 instance")
        if len(batch) > MAX_BATCH:
            raise WorkflowError(
                f"WorkflowError: batchCreate is limited to {MAX_BATCH} instances, got {len(batch)}"
            )
        out = []
        for options in batch:
            if not isinstance(options, Mapping):
                raise WorkflowError(
                    f"createBatch expects objects like {{id, params}}, got {options!r}"
                )
            out.append(await self._create_one(options))
        return out

    async def _create_one(self, options: Mapping[str, Any]) -> WorkflowInstance:
        return await call(lambda: self._create(options))

    createBatch = create_batch
