"""Placeholder: replaced by the queue feature."""

from __future__ import annotations

__all__ = ["SCHEMA", "QueueMixin"]

SCHEMA: tuple[str, ...] = ()


class QueueMixin:
    def _init_queue(self) -> None:
        pass

    async def _resume_queue(self) -> None:
        pass
