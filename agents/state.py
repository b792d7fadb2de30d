"""Placeholder: replaced by the state feature (initial_state, state, set_state, …)."""

from __future__ import annotations

__all__ = ["SCHEMA", "StateMixin"]

SCHEMA: tuple[str, ...] = ()


class StateMixin:
    def _init_state(self) -> None:
        pass
