"""Placeholder: replaced by the durable fibers feature."""

from __future__ import annotations

__all__ = ["SCHEMA", "FibersMixin"]

SCHEMA: tuple[str, ...] = ()


class FibersMixin:
    def _init_fibers(self) -> None:
        pass

    async def _check_run_fibers(self) -> None:
        pass

    def _next_fiber_recovery_ms(self, now: float) -> float | None:
        return None
