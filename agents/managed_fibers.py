"""Placeholder: replaced by the managed fibers feature."""

from __future__ import annotations

__all__ = ["SCHEMA", "ManagedFibersMixin"]

SCHEMA: tuple[str, ...] = ()


class ManagedFibersMixin:
    def _init_managed_fibers(self) -> None:
        pass
