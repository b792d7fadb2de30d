"""ManualClock: timers fire in order at their own time, never before."""

from __future__ import annotations

import pytest

from doemu.clock import ManualClock


def test_manual_clock_fires_due_timers_in_order_at_their_time() -> None:
    clock = ManualClock(1_000)
    seen: list[tuple[str, float]] = []
    clock.call_at(1_500, lambda: seen.append(("b", clock.now())))
    clock.call_at(1_200, lambda: seen.append(("a", clock.now())))
    cancelled = clock.call_at(1_300, lambda: seen.append(("x", clock.now())))
    cancelled.cancel()
    clock.advance(100)
    assert seen == []
    clock.advance(1_000)
    assert seen == [("a", 1_200), ("b", 1_500)]
    assert clock.now() == 2_100
    assert clock.next_due() is None


def test_manual_clock_refuses_to_go_backwards() -> None:
    clock = ManualClock(10)
    with pytest.raises(ValueError, match="backwards"):
        clock.set(5)
    with pytest.raises(ValueError, match="ms >= 0"):
        clock.advance(-1)
