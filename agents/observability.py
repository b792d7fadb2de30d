"""Observability: the SDK's events (``fiber:*``, ``schedule:*``, ``chat:*``…) at one
subscription point.

Every agent emits ``{type, agent, name, payload, timestamp}`` events through its
``observability`` (default :data:`generic_observability`, as in the SDK). The generic one
publishes to in-process subscribers — ``subscribe("chat", fn)`` (a channel, as the SDK's
``diagnostics_channel`` names: ``fiber``, ``schedule``, ``chat``, ``state``, ``rpc``,
``lifecycle``…) or ``subscribe("*", fn)`` — and to the standard ``logging`` logger
``agents.observability`` (at DEBUG, the event in the record's ``agents_event`` attribute). The
logger is the portable half: it reaches Workers Logs / a Tail Worker on Cloudflare, and
``doemu dev`` forwards it to its admin event stream (``agent.event``) without ``agents`` ever
importing doemu. Events are silent when nobody listens; a subscriber that raises is logged and
never breaks the agent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = [
    "Observability",
    "ObservabilityEvent",
    "Subscriber",
    "agent_event",
    "channel_of",
    "generic_observability",
    "publish",
    "subscribe",
]

ObservabilityEvent = dict[str, Any]
Subscriber = Callable[[ObservabilityEvent], None]

_log = logging.getLogger("agents.observability")
_subscribers: dict[str, list[Subscriber]] = {}


class Observability(Protocol):
    """What an agent's ``observability`` is: something that takes its events."""

    def emit(self, event: ObservabilityEvent) -> None: ...


def channel_of(event_type: str) -> str:
    """The SDK's channel for an event type (``chat:recovery:attempt`` → ``chat``)."""
    if event_type.startswith(("transcript:", "chat:transcript:")):
        return "transcript"
    if event_type.startswith(("schedule:", "queue:")):
        return "schedule"
    if event_type.startswith(("message:", "tool:", "submission:", "action:")):
        return "message"
    if event_type in ("connect", "disconnect", "destroy"):
        return "lifecycle"
    if event_type == "rpc" or event_type.startswith("rpc:"):
        return "rpc"
    return event_type.split(":", 1)[0]


def agent_event(
    agent_class: str, name: str, event_type: str, payload: dict[str, Any] | None
) -> ObservabilityEvent:
    """``{type, agent, name, payload}`` (the caller adds ``timestamp`` from its clock)."""
    return {"type": event_type, "agent": agent_class, "name": name, "payload": payload or {}}


def subscribe(channel: str, callback: Subscriber) -> Callable[[], None]:
    """Call ``callback(event)`` for every event on ``channel`` (``"*"``: all); returns the
    function that unsubscribes it."""
    callbacks = _subscribers.setdefault(channel, [])
    callbacks.append(callback)

    def unsubscribe() -> None:
        if callback in callbacks:
            callbacks.remove(callback)

    return unsubscribe


def publish(event: Mapping[str, Any]) -> None:
    """Hand ``event`` to its channel's subscribers, the ``"*"`` ones and the logger."""
    record = dict(event)
    for key in (channel_of(str(record.get("type", ""))), "*"):
        for callback in list(_subscribers.get(key, ())):
            try:
                callback(record)
            except Exception:
                _log.exception("an observability subscriber failed on %s", record.get("type"))
    if _log.isEnabledFor(logging.DEBUG):  # cheap when nobody listens
        _log.debug(
            "%s %s", record.get("type"), record.get("payload"), extra={"agents_event": record}
        )


class _Generic:
    """The default: :func:`publish`."""

    def emit(self, event: ObservabilityEvent) -> None:
        publish(event)


#: Every agent's default ``observability`` (the SDK's ``genericObservability``).
generic_observability: Observability = _Generic()
