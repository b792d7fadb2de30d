"""The core every feature of an agent is built on; it never imports a feature or the façade.

Layers inside, top to bottom:

* ``websockets`` — HTTP and WebSocket events: upgrade → connection, protocol frames, dispatch.
* ``state`` — ``state`` / ``set_state``: the ``cf_agents_state`` row and the change pipeline.
* ``connections`` — a ``Connection`` (a view onto a hibernatable socket), the set of open ones.
* ``host`` — the façade/feature contract: the ``Core`` plumbing (SQL, clock, ``on_error``, the
  single alarm) and the ``AgentHost`` protocol features see the agent through.
* ``sql``, ``schema``, ``protocol``, ``callbacks`` — portable rows, the versioned schema, the
  SDK's wire frames, named callbacks and their rows.
"""

from __future__ import annotations

__all__: list[str] = []
