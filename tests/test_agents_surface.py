"""The smaller SDK surface (issue 32 item 8), in process: ``destroy()``, ``schedule_destroy()``,
``get_current_agent()``, ``on_start(props)``, ``route_agent_request``'s hooks and streamed CORS,
and the bound on fiber-recovery attempts.

Time is the harness's manual clock; background work is awaited by polling with a deadline.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

import httpx
from js import TextEncoder, TransformStream
from workers import Request, Response, WorkerEntrypoint

from agents import Agent, AgentOptions, callable, get_current_agent, wait_until
from agents.fibers.types import FiberContext, FiberRecoveryContext
from agents.lifecycle import DESTROY_PENDING_KEY, decode_props, encode_props
from agents.routing import AgentRoute, get_agent_by_name, route_agent_request
from doemu.runtime import ClassSpec, Runtime
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .servers import serve


class Notes(Agent):
    """Keeps rows in a table of its own, a schedule and state: everything destroy must remove."""

    initial_state: ClassVar[dict[str, int]] = {"n": 0}

    async def on_request(self, request: Any) -> Any:
        self.sql("CREATE TABLE IF NOT EXISTS notes (body TEXT)")
        if request.method == "POST":
            self.sql("INSERT INTO notes VALUES (?)", await request.text())
            self.set_state({"n": self.state["n"] + 1})
            await self.schedule(3600, "tick")
        if request.method == "DELETE":
            await self.destroy()
            return Response("destroyed")
        rows = self.sql("SELECT body FROM notes")
        return Response.json({"notes": [r["body"] for r in rows], "state": self.state})

    async def tick(self, payload: Any = None) -> None:
        pass

    async def tables(self) -> list[str]:
        rows = self.sql("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        return [r["name"] for r in rows]

    async def kv(self, key: str) -> Any:
        return await self.ctx.storage.get(key)

    async def condemn(self) -> None:
        await self.schedule_destroy()


class Propped(Agent):
    """``on_start`` takes props: it runs lazily, with the props of the first event."""

    async def on_start(self, props: Any) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS starts (props TEXT)")
        self.sql("INSERT INTO starts VALUES (?)", json.dumps(props))
        agent, _, request = get_current_agent()
        self.sql("CREATE TABLE IF NOT EXISTS seen (agent TEXT, has_request INT)")
        self.sql("INSERT INTO seen VALUES (?, ?)", agent.name, int(request is not None))

    async def on_request(self, request: Any) -> Any:
        rows = self.sql("SELECT props FROM starts")
        return Response.json(
            {
                "starts": [json.loads(r["props"]) for r in rows],
                "seen": self.sql("SELECT * FROM seen"),
                "header": request.headers.get("x-agents-lifecycle-props"),
            }
        )

    async def starts(self) -> list[Any]:
        return [json.loads(r["props"]) for r in self.sql("SELECT props FROM starts")]


def lookup_tool() -> dict[str, Any]:
    """A "tool" several calls deep: it finds its agent, connection and request by itself."""
    agent, connection, request = get_current_agent()
    return {
        "agent": None if agent is None else agent.name,
        "connection": None if connection is None else connection.id,
        "url": None if request is None else str(request.url),
    }


class Contextual(Agent):
    async def on_request(self, request: Any) -> Any:
        inside: dict[str, Any] = {}

        async def later() -> None:  # a task started while handling the request
            await asyncio.sleep(0)
            inside.update(lookup_tool())

        await wait_until(self.ctx, later())
        return Response.json({"direct": lookup_tool(), "task": inside})

    @callable()
    async def who(self) -> dict[str, Any]:
        return lookup_tool()

    async def on_message(self, connection: Any, message: Any) -> None:
        connection.send(json.dumps(lookup_tool()))

    async def tick(self, payload: Any = None) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS ticks (found TEXT)")
        self.sql("INSERT INTO ticks VALUES (?)", json.dumps(lookup_tool()))

    async def arm(self) -> None:
        await self.schedule(1, "tick")

    async def ticks(self) -> list[Any]:
        rows = self.sql("SELECT name FROM sqlite_master WHERE name = 'ticks'")
        return [json.loads(r["found"]) for r in self.sql("SELECT found FROM ticks")] if rows else []


class Poison(Agent):
    options = AgentOptions(keep_alive_interval_ms=1000, fiber_recovery_max_attempts=3)

    async def start(self) -> None:
        async def forever(ctx: FiberContext) -> None:
            ctx.stash({"step": 1})
            await asyncio.Event().wait()

        wait_until(self.ctx, self.run_fiber("poison", forever))

    async def on_fiber_recovered(self, ctx: FiberRecoveryContext) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS attempts (n INT)")
        self.sql("INSERT INTO attempts VALUES (?)", ctx.attempt)
        raise RuntimeError("cannot recover")

    async def on_error(self, error: BaseException, context: Any = None) -> None:
        self.sql("CREATE TABLE IF NOT EXISTS errors (message TEXT)")
        self.sql("INSERT INTO errors VALUES (?)", str(error))

    async def report(self) -> dict[str, Any]:
        def rows(table: str, column: str) -> list[Any]:
            exists = self.sql("SELECT name FROM sqlite_master WHERE name = ?", table)
            return [r[column] for r in self.sql(f"SELECT {column} FROM {table}")] if exists else []

        return {
            "attempts": rows("attempts", "n"),
            "errors": rows("errors", "message"),
            "runs": len(self.sql("SELECT id FROM cf_agents_runs")),
        }


LOG: list[Any] = []


class Default(WorkerEntrypoint):
    async def fetch(self, request: Any) -> Any:
        path = str(request.url)

        def before(req: Any, route: AgentRoute) -> Any:
            LOG.append(("request", route.class_name, route.name))
            if req.headers.get("authorization") != "Bearer ok":
                return Response("no token", status=401)
            if "rewrite" in path:
                headers = req.headers
                headers["x-rewritten"] = "yes"
                return Request(req, headers=headers)
            return None

        async def before_connect(req: Any, route: AgentRoute) -> Any:
            LOG.append(("connect", route.class_name, route.name))
            return Response("go away", status=403) if "deny" in path else None

        props = {"user": "ada", "plan": "pro"} if "props" in path else None
        routed = await route_agent_request(
            request,
            self.env,
            cors=True,
            props=props,
            on_before_request=before if "guarded" in path else None,
            on_before_connect=before_connect,
        )
        return routed if routed is not None else Response("no route", status=404)


class Streamer(Agent):
    async def on_request(self, request: Any) -> Any:
        ts = TransformStream.new()
        writer = ts.writable.getWriter()

        async def produce() -> None:
            encoder = TextEncoder.new()
            await writer.write(encoder.encode("data: first\n\n"))
            await STREAM_GATE.wait()
            await writer.write(encoder.encode("data: second\n\n"))
            await writer.close()

        wait_until(self.ctx, produce())
        return Response(ts.readable, headers={"content-type": "text/event-stream"})


STREAM_GATE = asyncio.Event()


async def routed(factory: HarnessFactory, classes: dict[str, Any]) -> Any:
    """A started harness whose requests go through :class:`Default` (``route_agent_request``)."""
    h = await factory(classes)
    h.entry = Default
    return h


async def test_props_round_trip_as_the_sdk_encodes_them() -> None:
    props = {"user": "Ada Lovelace", "n": 1, "ok": True, "ü": ["é"]}
    assert decode_props(encode_props(props)) == props


async def test_destroy_removes_tables_state_schedules_and_kv_then_a_fresh_agent_answers(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await routed(doemu_harness, {"Notes": Notes})
    name = unique_name("notes")
    async with h.client() as http:
        for body in ("a", "b"):
            assert (await http.post(f"/agents/notes/{name}", content=body)).status_code == 200
        before = (await http.get(f"/agents/notes/{name}")).json()
        assert before == {"notes": ["a", "b"], "state": {"n": 2}}
        assert await h.get_alarm("Notes", name) is not None
        assert "notes" in await h.env.Notes.getByName(name).tables()

        answer = await http.delete(f"/agents/notes/{name}")
        assert (answer.status_code, answer.text) == (200, "destroyed")
        # The object is reset; the next event builds a new agent on empty storage.
        await eventually(lambda: not h.is_live("Notes", name), what="the reset after destroy")
        assert await h.get_alarm("Notes", name) is None
        stub = h.env.Notes.getByName(name)
        assert "notes" not in await stub.tables()
        assert await stub.kv(DESTROY_PENDING_KEY) is None
        after = (await http.get(f"/agents/notes/{name}")).json()
        assert after == {"notes": [], "state": {"n": 0}}


async def test_schedule_destroy_answers_first_and_the_alarm_tears_down(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await routed(doemu_harness, {"Notes": Notes})
    name = unique_name("condemned")
    async with h.client() as http:
        await http.post(f"/agents/notes/{name}", content="x")
        stub = h.env.Notes.getByName(name)
        await stub.condemn()
        assert await stub.kv(DESTROY_PENDING_KEY) is True
        assert await h.get_alarm("Notes", name) == h.clock.now() + 1000
        await h.advance(1000)
        await eventually(lambda: not h.is_live("Notes", name), what="the teardown's reset")
        assert await h.get_alarm("Notes", name) is None
        assert (await http.get(f"/agents/notes/{name}")).json()["notes"] == []


async def test_an_interrupted_teardown_is_finished_by_the_next_activation(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await routed(doemu_harness, {"Notes": Notes})
    name = unique_name("half")
    async with h.client() as http:
        await http.post(f"/agents/notes/{name}", content="kept?")
        stub = h.env.Notes.getByName(name)
        await stub.condemn()  # the marker is durable; then the object dies before its alarm
        h.reset("Notes", name, "killed before the teardown alarm")
        # Whatever wakes it next finishes the teardown before any user code runs.
        await eventually(
            lambda: _notes_after_teardown(http, name), what="a fresh agent after the teardown"
        )
        assert await h.env.Notes.getByName(name).kv(DESTROY_PENDING_KEY) is None


async def _notes_after_teardown(http: Any, name: str) -> bool:
    answer = await http.get(f"/agents/notes/{name}")
    return answer.status_code == 200 and answer.json()["notes"] == []


async def test_on_start_with_props_runs_lazily_with_the_routed_props_once_per_activation(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await routed(doemu_harness, {"Propped": Propped})
    name = unique_name("propped")
    async with h.client() as http:
        first = (await http.get(f"/agents/propped/{name}?props=1")).json()
        assert first["starts"] == [{"user": "ada", "plan": "pro"}]
        assert first["header"] is None  # the internal header never reaches on_request
        assert first["seen"] == [{"agent": name, "has_request": 1}]
        again = (await http.get(f"/agents/propped/{name}?props=1")).json()
        assert again["starts"] == first["starts"]  # once per activation
        await h.evict("Propped", name)
        woken = (await http.get(f"/agents/propped/{name}")).json()
        assert woken["starts"] == [{"user": "ada", "plan": "pro"}, None]  # props are not stored


async def test_get_agent_by_name_starts_the_agent_with_props_before_rpc(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"Propped": Propped})
    name = unique_name("rpc")
    stub = await get_agent_by_name(h.env.Propped, name, props={"via": "rpc"})
    assert await stub.starts() == [{"via": "rpc"}]
    await stub.ensure_started({"via": "again"})  # already started: nothing runs twice
    assert await stub.starts() == [{"via": "rpc"}]


async def test_get_current_agent_in_requests_tasks_rpc_messages_and_alarms(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await routed(doemu_harness, {"Contextual": Contextual})
    name = unique_name("ctx")
    async with h.client() as http:
        answer = (await http.get(f"/agents/contextual/{name}?x=1")).json()
    url = f"http://testserver/agents/contextual/{name}?x=1"
    assert answer["direct"] == {"agent": name, "connection": None, "url": url}
    assert answer["task"] == answer["direct"]  # tasks started by the request inherit it

    async with h.websocket(f"/agents/contextual/{name}?_pk=conn-1") as ws:
        for _ in range(3):  # identity, state? and mcp frames
            frame = json.loads(await ws.receive_text())
            if frame["type"] == "cf_agent_mcp_servers":
                break
        await ws.send_text(json.dumps({"type": "rpc", "id": "1", "method": "who", "args": []}))
        rpc = json.loads(await ws.receive_text())
        assert rpc["result"] == {"agent": name, "connection": "conn-1", "url": None}
        await ws.send_text("hello")
        assert json.loads(await ws.receive_text())["connection"] == "conn-1"

    stub = h.env.Contextual.getByName(name)
    await stub.arm()
    await h.advance(1000)
    ticks = await eventually(stub.ticks, what="the scheduled tick")
    assert ticks == [{"agent": name, "connection": None, "url": None}]
    assert get_current_agent() == (None, None, None)  # outside any agent


async def test_routing_hooks_answer_rewrite_or_pass_and_carry_cors(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await routed(doemu_harness, {"Propped": Propped})
    name = unique_name("guarded")
    LOG.clear()
    async with h.client() as http:
        refused = await http.get(f"/agents/propped/{name}?guarded=1")
        assert (refused.status_code, refused.text) == (401, "no token")
        assert refused.headers["access-control-allow-origin"] == "*"  # CORS on hook answers too
        assert not h.object_ids("Propped")  # the agent was never woken
        ok = await http.get(
            f"/agents/propped/{name}?guarded=1", headers={"authorization": "Bearer ok"}
        )
        assert ok.status_code == 200
        assert ok.headers["access-control-allow-origin"] == "*"
        preflight = await http.options(f"/agents/propped/{name}")
        assert preflight.headers["access-control-allow-methods"] == "GET, POST, HEAD, OPTIONS"
    assert LOG == [("request", "Propped", name), ("request", "Propped", name)]


async def test_on_before_connect_refuses_an_upgrade(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await routed(doemu_harness, {"Propped": Propped})
    name = unique_name("deny")
    LOG.clear()
    async with h.client() as http:
        refused = await http.get(
            f"/agents/propped/{name}?deny=1",
            headers={"upgrade": "websocket", "connection": "upgrade"},
        )
    assert (refused.status_code, refused.text) == (403, "go away")
    assert LOG == [("connect", "Propped", name)]


async def test_cors_does_not_buffer_a_streamed_answer(tmp_path: Path, unique_name: Any) -> None:
    """A real server: httpx's in-process transport reads whole bodies, a socket does not."""
    runtime = Runtime(
        worker_name="surface-cors",
        classes={"Streamer": ClassSpec(Streamer)},
        bindings={"Streamer": "Streamer"},
        persist_dir=tmp_path / "state",
    )
    name = unique_name("sse")
    STREAM_GATE.clear()
    async with (
        serve(runtime, entry=Default) as served,
        httpx.AsyncClient(base_url=served.url) as http,
        http.stream("GET", f"/agents/streamer/{name}") as answer,
    ):
        assert answer.headers["access-control-allow-origin"] == "*"
        chunks = answer.aiter_text()
        first = await asyncio.wait_for(anext(chunks), timeout=5)
        assert first == "data: first\n\n"  # arrived while the stream is still open
        STREAM_GATE.set()
        rest = "".join([c async for c in chunks])
        assert rest == "data: second\n\n"


async def test_fiber_recovery_is_bounded_by_attempts(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    h = await doemu_harness({"Poison": Poison})
    name = unique_name("poison")
    stub = h.env.Poison.getByName(name)
    await stub.start()
    h.reset("Poison", name, "simulated crash")
    report = await stub.report()
    assert report["attempts"] == [1]
    await h.advance(1000)  # attempt 2 after 1 s
    await h.advance(2000)  # attempt 3 after 2 s more: the last one
    report = await eventually(lambda: _settled(stub), what="the third attempt")
    assert report["attempts"] == [1, 2, 3]
    assert report["runs"] == 0
    (error,) = report["errors"]
    assert "max_attempts_exceeded" in error and "3 attempts" in error
    assert await h.get_alarm("Poison", name) is None
    await h.advance(600_000)
    assert (await stub.report())["attempts"] == [1, 2, 3]  # never tried again


async def _settled(stub: Any) -> dict[str, Any] | None:
    report: dict[str, Any] = await stub.report()
    return report if report["errors"] else None
