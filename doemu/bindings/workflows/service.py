"""A workflow of the Worker: its internal namespace of instances, and calls into them.

Each ``[[workflows]]`` entry gets a namespace of its own, registered with the runtime beside
the Worker's Durable Object classes but not bound in ``env``: its objects are the instances
(:class:`~doemu.bindings.workflows.instance.InstanceObject`), addressed by the instance id as
an object name, with files under ``<persist>/workflows/<name>/`` (:func:`doemu.persist.
workflow_dir`) and alarms in that directory's ``metadata.sqlite`` like any namespace's, so
start-up restores them as it restores every alarm.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ...clock import Clock
from ...config.bindings import WorkflowBinding
from ...persist import object_file, workflow_dir, workflow_key
from ..entry import EntryHost
from .instance import InstanceObject
from .listing import InstanceOutcome, InstanceSummary, read_outcomes, read_summaries

__all__ = ["WorkflowHost", "WorkflowService"]


class WorkflowHost(EntryHost, Protocol):
    """What a workflow needs of the runtime: an internal namespace and its clock."""

    @property
    def clock(self) -> Clock: ...

    def internal_namespace(
        self, key: str, class_name: str, cls: type, directory: Path, label: str
    ) -> Any: ...


class WorkflowService:
    """One workflow: ``spec`` (its config), its class, and the namespace of its instances."""

    def __init__(
        self,
        spec: WorkflowBinding,
        host: WorkflowHost,
        cls: type | None,
        *,
        persist_dir: Path,
        worker_name: str,
    ) -> None:
        self.spec = spec
        self.cls = cls
        instance_class = type(
            f"WorkflowInstance_{spec.class_name}",
            (InstanceObject,),
            {"spec": spec, "entry_host": host, "workflow_class": cls},
        )
        self.directory = workflow_dir(persist_dir, spec.name)
        self.namespace = host.internal_namespace(
            workflow_key(worker_name, spec.name),
            spec.class_name,
            instance_class,
            self.directory,
            f"workflow:{spec.name}",
        )

    def _host(self, instance_id: str) -> Any:
        ns = self.namespace
        return ns.host(ns.ids.from_name(instance_id))

    def stored(self, instance_id: str) -> bool:
        """Whether an instance with this id may exist (its object has a file)."""
        host = self._host(instance_id)
        return bool(host.live) or object_file(self.directory, host.hex_id).exists()

    async def call(self, instance_id: str, method: str, *args: Any) -> Any:
        """Run ``method(*args)`` of the instance's object, as an event of that object."""
        host = self._host(instance_id)
        return await host.call("rpc", _method(method, args))

    def stored_ids(self) -> list[str]:
        return list(self.namespace.stored_ids())

    async def summaries(self) -> list[InstanceSummary]:
        """Every stored instance's status and times, newest first, read from the files: no
        instance is constructed or woken (see :mod:`.listing`)."""
        return await asyncio.to_thread(read_summaries, self.directory, self.stored_ids())

    async def outcomes(self, hex_ids: Sequence[str]) -> dict[str, InstanceOutcome]:
        """The error and output of these instances (by object id), read as :meth:`summaries`
        reads their statuses."""
        return await asyncio.to_thread(read_outcomes, self.directory, list(hex_ids))


def _method(method: str, args: tuple[Any, ...]) -> Callable[[Any], Any]:
    def run(instance: Any) -> Any:
        return getattr(instance, method)(*args)

    return run
