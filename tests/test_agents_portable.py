"""``agents.wait_until``: what the runtime is handed settles as Cloudflare's waitUntil needs.

On workerd, a cancelled task handed to a Durable Object's ``waitUntil`` is logged as an uncaught
``CancelledError`` (observed: the agent server's SSE heartbeat, cancelled when the last reader
leaves); ``e2e/differential/test_agent_server.py`` checks the log on both targets. These are the
unit checks: the awaitable the runtime keeps ends quietly when the task is cancelled, fails with
the task's error, and cancelling it (doemu resetting the object) cancels the task.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents.core.portable import wait_until


class Ctx:
    """A Durable Object's ``ctx`` that records what ``waitUntil`` was given, unwrapped."""

    def __init__(self) -> None:
        self.kept: list[Any] = []

    def waitUntil(self, promise: Any) -> None:
        self.kept.append(promise.unwrap())


async def test_a_cancelled_task_settles_quietly() -> None:
    ctx = Ctx()
    task = wait_until(ctx, asyncio.sleep(60))
    task.cancel()
    assert await ctx.kept[0] is None
    assert task.cancelled()


async def test_an_error_fails_what_the_runtime_keeps() -> None:
    async def fail() -> None:
        raise ValueError("boom")

    ctx = Ctx()
    task = wait_until(ctx, fail())
    with pytest.raises(ValueError, match="boom"):
        await ctx.kept[0]
    assert isinstance(task.exception(), ValueError)


async def test_cancelling_what_the_runtime_keeps_cancels_the_task() -> None:
    ctx = Ctx()
    task = wait_until(ctx, asyncio.sleep(60))
    ctx.kept[0].cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
