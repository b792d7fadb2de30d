"""The SDK's observability events at one subscription point, and in doemu's event stream."""

from __future__ import annotations

from typing import Any, ClassVar

from agents import Agent, callable
from agents import observability as obs
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import _steps, connect, request, step
from .test_chat_recovery import Recovering, _continued, transcript

__all__ = ["_steps"]


class Worker(Agent):
    @callable()
    async def work(self, fail: bool) -> str:
        async def body(_ctx: Any) -> str:
            if fail:
                raise RuntimeError("nope")
            return "done"

        try:
            return await self.run_fiber("job", body)
        except RuntimeError:
            return "failed"

    @callable()
    async def later(self) -> str:
        schedule = await self.schedule(60, "tick", {"n": 1})
        await self.cancel_schedule(schedule.id)
        return schedule.id

    async def tick(self, _payload: Any) -> None: ...


class Silent(Worker):
    observability = None


async def test_fiber_and_schedule_events_reach_a_subscriber(doemu_harness: HarnessFactory) -> None:
    seen: list[dict[str, Any]] = []
    everything: list[str] = []
    unsubscribe = obs.subscribe("fiber", seen.append)
    unsubscribe_all = obs.subscribe("*", lambda e: everything.append(e["type"]))
    broken = obs.subscribe("fiber", lambda e: 1 / 0)  # a failing subscriber breaks nothing
    try:
        h = await doemu_harness({"WORKER": Worker})
        stub = h.env.WORKER.getByName("w1")
        assert await stub.work(False) == "done"
        assert await stub.work(True) == "failed"
        await stub.later()
    finally:
        unsubscribe()
        unsubscribe_all()
        broken()
    types = [e["type"] for e in seen]
    assert types == [
        "fiber:run:started", "fiber:run:completed", "fiber:run:started", "fiber:run:failed",
    ]  # fmt: skip
    started = seen[0]
    assert started["agent"] == "Worker" and started["name"] == "w1"
    assert started["payload"]["fiberName"] == "job" and started["payload"]["managed"] is False
    assert seen[3]["payload"]["error"] == "nope"
    assert "schedule:create" in everything and "schedule:cancel" in everything
    # doemu's admin event stream got them too, tagged with the object
    forwarded = [e for e in h.runtime.events.history if e["type"] == "agent.event"]
    assert [e["event"] for e in forwarded][:2] == ["fiber:run:started", "fiber:run:completed"]
    assert forwarded[0]["binding"] == "WORKER" and forwarded[0]["payload"]["fiberName"] == "job"


async def test_observability_none_silences_an_agent(doemu_harness: HarnessFactory) -> None:
    seen: list[Any] = []
    unsubscribe = obs.subscribe("*", seen.append)
    try:
        h = await doemu_harness({"WORKER": Silent})
        assert await h.env.WORKER.getByName("quiet").work(False) == "done"
    finally:
        unsubscribe()
    assert seen == []


async def test_chat_recovery_reports_its_lifecycle(doemu_harness: HarnessFactory) -> None:
    seen: list[str] = []
    unsubscribe = obs.subscribe("chat", lambda e: seen.append(e["type"]))
    try:
        Recovering.recoveries = []
        h = await doemu_harness({"CHAT": Recovering})
        stub = h.env.CHAT.getByName("room")
        a = await connect(stub, "a")
        a.send(request("r1", "slow", "u1"))
        step(12)
        await eventually(lambda: len(a.chunks("r1")) >= 15, what="more than one stored block")
        h.reset("CHAT", "room", "simulated crash")
        await transcript(stub)
        await h.advance(1)
        await eventually(lambda: _continued(stub), what="the continuation")
        await eventually(lambda: "chat:recovery:completed" in seen, what="the incident's end")
    finally:
        unsubscribe()
    assert seen == [
        "chat:recovery:detected",
        "chat:recovery:attempt",
        "chat:recovery:scheduled",
        "chat:recovery:completed",
    ]


class Probe:
    """``channel_of`` as the SDK's diagnostics channels."""

    cases: ClassVar[dict[str, str]] = {
        "chat:recovery:attempt": "chat",
        "chat:transcript:x": "transcript",
        "schedule:create": "schedule",
        "queue:retry": "schedule",
        "fiber:run:started": "fiber",
        "connect": "lifecycle",
        "rpc": "rpc",
        "rpc:error": "rpc",
        "state:update": "state",
    }


def test_events_map_to_the_sdks_channels() -> None:
    assert {t: obs.channel_of(t) for t in Probe.cases} == Probe.cases
