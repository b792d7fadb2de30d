"""``agents`` observability events in doemu's admin event stream, without importing ``agents``.

``agents`` publishes every event of an agent (``fiber:run:started``, ``chat:recovery:attempt``…)
to the standard logger ``agents.observability`` with the event in the record's ``agents_event``
attribute: the portable channel, which on Cloudflare reaches Workers Logs. doemu listens on that
logger and re-emits each event, while its object handles it, as an ``agent.event`` on the
runtime's event bus of that object (``binding``, ``id`` and the event's fields), so the admin
API's SSE stream and the inspector's timeline show them. The logger is set to DEBUG and stops
propagating (its records would otherwise reach the console's handlers); an app that wants the
events in code subscribes with ``agents.observability.subscribe``.
"""

from __future__ import annotations

import logging
from typing import Any

from .host import current_host

__all__ = ["install_agent_event_bridge"]

_LOGGER = "agents.observability"


class _Bridge(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        event: Any = getattr(record, "agents_event", None)
        host = current_host.get()
        if not isinstance(event, dict) or host is None:
            return
        fields = {k: v for k, v in event.items() if k not in ("type", "timestamp")}
        host._services.emit(
            "agent.event",
            binding=host.kind.binding,
            id=host.hex_id,
            event=event.get("type"),
            **fields,
        )


def install_agent_event_bridge() -> None:
    """Forward agents' events to the admin event stream (idempotent: one bridge a process)."""
    logger = logging.getLogger(_LOGGER)
    if any(isinstance(h, _Bridge) for h in logger.handlers):
        return
    logger.addHandler(_Bridge(logging.DEBUG))
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
