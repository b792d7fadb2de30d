"""Placeholder: replaced by the schedules feature."""

from __future__ import annotations

__all__ = ["SCHEMA", "SchedulesMixin"]

SCHEMA: tuple[str, ...] = ()


class SchedulesMixin:
    def _init_schedules(self) -> None:
        pass

    def _next_schedule_ms(self, now: float) -> float | None:
        return None

    async def _run_due_schedules(self, now: float) -> None:
        pass
