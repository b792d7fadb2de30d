"""``Namespace``: all objects of one Durable Object class — ids, hosts, and where their files are.

A host exists for every object that is live, that holds hibernated sockets, or that an event is
addressing right now; the rest exist only as files (:func:`doemu.persist.stored_ids`). Looking an
object up by name or id never creates a file: only its first event does, through its host.
"""

from __future__ import annotations

from ..ids import DurableObjectId, IdFactory, is_hex_id
from ..persist import stored_ids
from .host import ObjectHost
from .services import HostServices, ObjectClass

__all__ = ["Namespace"]


class Namespace:
    """All objects of one class: id derivation and the hosts of the objects in memory."""

    def __init__(self, kind: ObjectClass, services: HostServices) -> None:
        self.kind = kind
        self._services = services
        self.ids = IdFactory(kind.unique_key)
        self.hosts: dict[str, ObjectHost] = {}
        kind.directory.mkdir(parents=True, exist_ok=True)

    @property
    def binding(self) -> str:
        return self.kind.binding

    @property
    def class_name(self) -> str:
        return self.kind.class_name

    @property
    def unique_key(self) -> str:
        return self.kind.unique_key

    def host(self, object_id: DurableObjectId) -> ObjectHost:
        """The host of ``object_id``, created (not activated) if it has none yet."""
        hex_id = str(object_id)
        host = self.hosts.get(hex_id)
        if host is None:
            host = self.hosts[hex_id] = ObjectHost(
                self.kind, object_id, self._services, self.forget
            )
        elif host.id.name is None and object_id.name is not None:
            host.id.name = object_id.name
        return host

    def host_by_hex(self, hex_id: str) -> ObjectHost:
        return self.host(DurableObjectId(hex_id.lower()))

    def resolve(self, name_or_id: str) -> DurableObjectId:
        """An admin/test address: a 64-hex id of this namespace, else a name."""
        if is_hex_id(name_or_id):  # an id: must belong to this namespace (else InvalidIdError)
            return self.ids.from_string(name_or_id)
        return self.ids.from_name(name_or_id)

    def stored_ids(self) -> list[str]:
        """Ids of every object that has a file, live or not."""
        return stored_ids(self.kind.directory)

    def forget(self, host: ObjectHost) -> None:
        """Drop an evicted host that holds nothing worth keeping in memory."""
        if not host.live and not len(host.sockets) and self.hosts.get(host.hex_id) is host:
            del self.hosts[host.hex_id]
