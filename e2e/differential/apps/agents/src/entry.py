"""A note board: the ``agents`` features a client can observe, on doemu and on workerd.

/agents/board/<name>   WebSocket: the Agents SDK protocol (state sync, ``rpc``);
                       HTTP GET: ``{"name", "state", "reminders", "changes"}``

State: ``{"notes": [...]}``; a client may propose a new one (``cf_agent_state``), which
``validate_state_change`` refuses unless it is a dict with a ``notes`` list; ``?readonly=1``
connections may not. ``remind(seconds, text)`` schedules ``reminded``, which appends the text to
the notes and logs it in ``reminders``; ``tick_every(seconds)`` a recurring ``ticked``.
"""

from typing import Any, ClassVar

from workers import Response, WorkerEntrypoint

from agents import Agent, route_agent_request
from agents.rpc import callable


class Board(Agent):
    initial_state: ClassVar[dict[str, Any]] = {"notes": []}

    async def on_start(self):
        self.sql("CREATE TABLE IF NOT EXISTS reminders (text TEXT NOT NULL)")
        self.sql("CREATE TABLE IF NOT EXISTS changes (source TEXT NOT NULL, notes INTEGER)")
        self.sql("CREATE TABLE IF NOT EXISTS ticks (n INTEGER)")

    def should_connection_be_readonly(self, connection, ctx):
        return "readonly=1" in ctx.request.url

    def validate_state_change(self, next_state, source):
        if not isinstance(next_state, dict) or not isinstance(next_state.get("notes"), list):
            raise ValueError("a board's state is {'notes': [...]}")

    def on_state_changed(self, state, source):
        kind = "server" if source == "server" else "client"
        self.sql("INSERT INTO changes (source, notes) VALUES (?, ?)", kind, len(state["notes"]))

    @callable()
    async def add(self, text):
        await self.set_state({"notes": [*self.state["notes"], text]})
        return len(self.state["notes"])

    @callable()
    async def fail(self, why):
        raise ValueError(why)

    @callable()
    async def remind(self, seconds, text):
        schedule = await self.schedule(seconds, "reminded", {"text": text})
        return {"id": schedule.id, "type": schedule.type, "callback": schedule.callback}

    @callable()
    async def cancel(self, schedule_id):
        return await self.cancel_schedule(schedule_id)

    @callable()
    async def tick_every(self, seconds):
        schedule = await self.schedule_every(seconds, "ticked")
        return schedule.id

    @callable()
    def pending(self):
        return sorted(s.callback for s in self.get_schedules())

    async def reminded(self, payload):
        self.sql("INSERT INTO reminders (text) VALUES (?)", payload["text"])
        await self.set_state({"notes": [*self.state["notes"], payload["text"]]})

    async def ticked(self, payload=None):
        self.sql("INSERT INTO ticks (n) VALUES (1)")

    async def on_request(self, request):
        return Response.json(
            {
                "name": self.name,
                "state": self.state,
                "reminders": [r["text"] for r in self.sql("SELECT text FROM reminders")],
                "changes": [[r["source"], r["notes"]] for r in self.sql("SELECT * FROM changes")],
            }
        )


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
