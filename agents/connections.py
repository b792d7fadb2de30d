"""Placeholder: replaced by the connections feature."""

from __future__ import annotations

__all__ = ["ConnectionsMixin"]


class ConnectionsMixin:
    def _init_connections(self) -> None:
        pass
