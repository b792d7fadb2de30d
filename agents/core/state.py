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
  :class:`~agents.connections.Connection`.
* ``on_state_changed`` is a notification: it runs after the write, its errors go to ``on_error``
  and never undo the change. ``set_state`` itself is synchronous (the write is committed before the
  caller's next ``await``, like the SDK's synchronous ``setState``) and returns an awaitable that
  settles when the hook has run; awaiting it is optional.

The cached value is the JSON round trip of what was set (tuples become lists, keys strings), so
what a caller reads back never differs from what a fresh activation would load.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from ..core.protocol import STATE_READONLY_ERROR
from ..errors import StateValidationError

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["SCHEMA", "STATE_ROW_ID", "StateMixin", "StateSource"]

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


class StateMixin:
    """``state`` / ``set_state`` and their hooks; part of :class:`~agents.agent.Agent`."""

    #: The state an agent starts with (``None``: no initial state). Copied, never shared.
    initial_state: ClassVar[Any] = None

    _state_value: Any

    def _init_state(self) -> None:
        self._state_value = _UNSET

    # -- hooks ----------------------------------------------------------------------------------
    def validate_state_change(self, next_state: Any, source: StateSource) -> None:
        """Raise to refuse ``next_state`` (then nothing is persisted or broadcast). Synchronous."""

    def on_state_changed(self, state: Any, source: StateSource) -> Any:
        """Called after a change was persisted and broadcast (may be ``async``)."""

    # -- reading --------------------------------------------------------------------------------
    @property
    def state(self) -> Any:
        """The current state (``None`` when unset and there is no ``initial_state``)."""
        if self._state_value is not _UNSET:
            return self._state_value
        agent = self._state_agent()
        rows = agent.sql("SELECT state FROM cf_agents_state WHERE id = ?", STATE_ROW_ID)
        if rows:
            raw = rows[0]["state"]
            try:
                if not isinstance(raw, str):
                    raise ValueError(f"expected JSON text, got {type(raw).__name__}")
                self._state_value = json.loads(raw)
                return self._state_value
            except ValueError as exc:
                _log.error(
                    "agent %s: stored state is not valid JSON (%s); falling back to initial_state",
                    agent.name,
                    exc,
                )
                if self.initial_state is None:
                    agent._exec("DELETE FROM cf_agents_state WHERE id = ?", STATE_ROW_ID)
                    return None
        elif self.initial_state is None:
            return None
        self._apply_state(_json_copy(self.initial_state), "server")
        return self._state_value

    @property
    def has_state(self) -> bool:
        """Whether a state is set (after falling back to ``initial_state`` if there is one)."""
        _ = self.state
        return self._state_value is not _UNSET

    # -- writing --------------------------------------------------------------------------------
    def set_state(self, state: Any) -> asyncio.Future[None]:
        """Validate, persist and broadcast ``state`` now; ``on_state_changed`` runs after.

        Raises :class:`~agents.errors.StateValidationError` when ``validate_state_change``
        refuses (its exception is the ``__cause__``) or when called while handling a message from
        a readonly connection. The returned future settles once ``on_state_changed`` has run.
        """
        from ..core.connections import current_connection

        connection = current_connection.get()
        if connection is not None and connection.readonly:
            raise StateValidationError(STATE_READONLY_ERROR)
        return self._apply_state(state, "server")

    def _apply_state(self, state: Any, source: StateSource) -> asyncio.Future[None]:
        """The one path every change takes: validate, persist, cache, broadcast, notify."""
        agent = self._state_agent()
        try:
            verdict: Any = self.validate_state_change(state, source)  # type: ignore[func-returns-value]
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
        agent._exec(
            "INSERT OR REPLACE INTO cf_agents_state (id, state) VALUES (?, ?)",
            STATE_ROW_ID,
            serialized,
        )
        self._state_value = json.loads(serialized)
        current = self._state_value
        agent._broadcast_state(current, source)
        return self._notify_state_changed(current, source)

    def _notify_state_changed(self, state: Any, source: StateSource) -> asyncio.Future[None]:
        agent = self._state_agent()

        async def notify() -> None:
            try:
                result = self.on_state_changed(state, source)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                await _report(agent, exc, "on_state_changed")

        task = asyncio.ensure_future(notify())
        agent.ctx.waitUntil(task)
        return task

    def _state_agent(self) -> Agent:
        return self  # type: ignore[return-value]


async def _report(agent: Agent, error: BaseException, context: Any) -> None:
    try:
        await agent.on_error(error, context)
    except Exception:
        _log.exception("agent %s: on_error raised while reporting %r", agent.name, error)


def _json_copy(value: Any) -> Any:
    return json.loads(json.dumps(value))
