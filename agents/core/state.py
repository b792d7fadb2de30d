"""Agent state: one JSON value per agent, persisted in ``cf_agents_state`` and synced to clients.

The table and its single row are the SDK's own (``state/index.ts``): ``cf_agents_state(id TEXT
PRIMARY KEY NOT NULL, state TEXT)`` with the value JSON-encoded under ``id = 'cf_state_row_id'``.
The existence of that row — not the truthiness of its value — means "state was set", so ``0``,
``""``, ``[]``, ``{}``, ``False`` and ``None`` (JSON ``null``) are all states.

Behaviour, as in the SDK:

* ``state`` loads lazily and is cached. With no row it falls back to ``initial_state``, which is
  then *persisted* through the normal path (validated, broadcast, ``on_state_changed``) so every
  reader and every client sees the same value. A row whose JSON is corrupt falls back the same
  way; with no ``initial_state`` the corrupt row is deleted and the state is unset (``None``).
* ``set_state(value)`` calls ``validate_state_change(value, source)`` first — it raises to refuse,
  and then nothing is persisted or broadcast — then writes the row, broadcasts ``cf_agent_state``
  to every connection except the one the change came from, and finally runs
  ``on_state_changed(state, source)``. ``source`` is ``"server"`` or the client
  :class:`~agents.core.connections.Connection`.
* ``on_state_changed`` is a notification: it runs after the write, its errors go to ``on_error``
  and never undo the change. ``set_state`` itself is synchronous (the write is committed before the
  caller's next ``await``, like the SDK's synchronous ``setState``) and returns an awaitable that
  settles when the hook has run; awaiting it is optional.

The cached value is the JSON round trip of what was set (tuples become lists, keys strings), so
what a caller reads back never differs from what a fresh activation would load.

The store reads through the core's row-reading ``sql`` (never by iterating a raw cursor, which
on Cloudflare yields JavaScript rows), and pushes changes to clients through the ``broadcast``
the Agent wires in (:meth:`~agents.core.connections.ConnectionSet.broadcast_state`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from ..errors import StateValidationError
from .connections import current_connection
from .host import AgentHost, Core
from .protocol import STATE_READONLY_ERROR

__all__ = ["SCHEMA", "STATE_ROW_ID", "StateHooks", "StateSource", "StateStore"]

_log = logging.getLogger("agents.state")

#: The SDK's row id for the single state value.
STATE_ROW_ID = "cf_state_row_id"
#: A row older SDKs wrote next to the state; the SDK's v1 state migration deletes it.
_LEGACY_WAS_CHANGED_ROW_ID = "cf_state_was_changed"

SCHEMA: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS cf_agents_state (id TEXT PRIMARY KEY NOT NULL, state TEXT)",
    f"DELETE FROM cf_agents_state WHERE id = '{_LEGACY_WAS_CHANGED_ROW_ID}'",
)

#: Where a state change came from: ``"server"`` or the client connection that sent it.
StateSource = Any

_UNSET: Any = object()


class StateHooks(AgentHost, Protocol):
    """What the state store reads and calls on the agent."""

    @property
    def initial_state(self) -> Any: ...

    def validate_state_change(self, next_state: Any, source: StateSource) -> Any: ...

    def on_state_changed(self, state: Any, source: StateSource) -> Any: ...


class StateStore:
    """``Agent.state`` / ``set_state``: the cached value, its row, and the change pipeline."""

    __slots__ = ("_broadcast", "_core", "_hooks", "_value")
    #: The tables this feature owns (the Agent ensures them at every activation).
    SCHEMA: ClassVar[tuple[str, ...]] = SCHEMA

    def __init__(
        self,
        core: Core,
        hooks: StateHooks,
        broadcast: Callable[[Any, StateSource], None],
    ) -> None:
        self._core = core
        self._hooks = hooks
        self._broadcast = broadcast
        self._value: Any = _UNSET

    # -- reading --------------------------------------------------------------------------------
    @property
    def value(self) -> Any:
        """The current state (``None`` when unset and there is no ``initial_state``)."""
        if self._value is not _UNSET:
            return self._value
        hooks = self._hooks
        rows = self._core.sql("SELECT state FROM cf_agents_state WHERE id = ?", STATE_ROW_ID)
        if rows:
            raw = rows[0]["state"]
            try:
                if not isinstance(raw, str):
                    raise ValueError(f"expected JSON text, got {type(raw).__name__}")
                self._value = json.loads(raw)
                return self._value
            except ValueError as exc:
                _log.error(
                    "agent %s: stored state is not valid JSON (%s); falling back to initial_state",
                    hooks.name,
                    exc,
                )
                if hooks.initial_state is None:
                    self._core.exec("DELETE FROM cf_agents_state WHERE id = ?", STATE_ROW_ID)
                    return None
        elif hooks.initial_state is None:
            return None
        self.apply(_json_copy(hooks.initial_state), "server")
        return self._value

    @property
    def has_state(self) -> bool:
        """Whether a state is set (after falling back to ``initial_state`` if there is one)."""
        _ = self.value
        return self._value is not _UNSET

    # -- writing --------------------------------------------------------------------------------
    def set(self, state: Any) -> asyncio.Future[None]:
        """``set_state``: refused while handling a readonly connection's message, else applied."""
        connection = current_connection.get()
        if connection is not None and connection.readonly:
            raise StateValidationError(STATE_READONLY_ERROR)
        return self.apply(state, "server")

    def apply(self, state: Any, source: StateSource) -> asyncio.Future[None]:
        """The one path every change takes: validate, persist, cache, broadcast, notify."""
        try:
            verdict = self._hooks.validate_state_change(state, source)
        except StateValidationError:
            raise
        except Exception as exc:
            raise StateValidationError(f"state change refused: {exc}") from exc
        if inspect.isawaitable(verdict):
            if inspect.iscoroutine(verdict):
                verdict.close()
            raise StateValidationError(
                "validate_state_change must be synchronous (it returned an awaitable)"
            )
        try:
            serialized = json.dumps(state, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"agent state must be JSON-serializable: {exc}") from exc
        self._core.exec(
            "INSERT OR REPLACE INTO cf_agents_state (id, state) VALUES (?, ?)",
            STATE_ROW_ID,
            serialized,
        )
        self._value = json.loads(serialized)
        current = self._value
        self._broadcast(current, source)
        return self._notify_changed(current, source)

    def _notify_changed(self, state: Any, source: StateSource) -> asyncio.Future[None]:
        core, hooks = self._core, self._hooks

        async def notify() -> None:
            try:
                result = hooks.on_state_changed(state, source)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                await core.report(exc, "on_state_changed")

        task = asyncio.ensure_future(notify())
        core.wait_until(task)
        return task


def _json_copy(value: Any) -> Any:
    return json.loads(json.dumps(value))
