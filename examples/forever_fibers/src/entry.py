"""A research agent whose eight-step job survives a crash (``kill -9``) and resumes by itself.

    POST /research/<name>             start researching (body: {"topic": "..."}, optional)
    POST /research/<name>?managed=1   the same, as a managed fiber (a retained job record)
    GET  /research/<name>             status: completed steps, done flag, recovered count

How it survives: the job runs as a durable fiber (``run_fiber``). Its ``cf_agents_runs`` row is
written before the first step and deleted after the last; after every step the finding is
written to ``research_steps`` and the progress is stashed (``ctx.stash``) in the same turn, so
both commit together. While it runs, the fiber holds a ``keep_alive()`` reference: a heartbeat
alarm every ``keep_alive_interval_ms`` (2 s here) is always pending. If the process dies, that
persisted alarm wakes the agent after a restart — no request needed — the recovery scan finds the
orphaned row, and ``on_fiber_recovered`` starts a new fiber from the snapshot.
"""

import asyncio
import json
from urllib.parse import parse_qs, urlparse

from js import Date
from workers import Response, WorkerEntrypoint

from agents import Agent, AgentOptions, wait_until

STEPS = 8


class Researcher(Agent):
    options = AgentOptions(keep_alive_interval_ms=2000)

    async def on_start(self):
        self._ensure_tables()

    def _ensure_tables(self):
        # Also called from the recovery hook, which runs before on_start.
        self.sql(
            "CREATE TABLE IF NOT EXISTS research_steps ("
            "step INTEGER PRIMARY KEY, topic TEXT, finding TEXT, completed_at INTEGER)"
        )
        self.sql("CREATE TABLE IF NOT EXISTS research_meta (key TEXT PRIMARY KEY, value TEXT)")
        self.sql(
            "CREATE TABLE IF NOT EXISTS research_recoveries ("
            "fiber_id TEXT, name TEXT, snapshot TEXT, managed INTEGER, at INTEGER)"
        )

    # -- RPC, called by the entry worker ---------------------------------------------------------
    async def start_research(self, topic):
        """Fire-and-forget: start the eight-step job in the background and answer at once."""
        if self._meta("topic") is not None:
            return {"started": False, **(await self.status())}
        self._set_meta("topic", topic)
        # run_fiber writes the fiber's row before it returns: even a crash right after this
        # answer leaves the job for recovery.
        wait_until(self.ctx, self.run_fiber("research", self._research(topic, [])))
        return {"started": True, "topic": topic}

    async def start_managed_research(self, topic):
        """The same job as a managed fiber: a retained record, deduplicated by topic."""
        self._set_meta("topic", topic)
        record = await self.start_fiber(
            "managed-research",
            self._research(topic, [], managed=True),
            idempotency_key=f"research:{topic}",
            metadata={"topic": topic},
        )
        return {"started": record.accepted, "fiber": record.to_dict()}

    async def status(self):
        steps = self.sql("SELECT step, finding FROM research_steps ORDER BY step")
        recoveries = self.sql("SELECT name, snapshot, managed FROM research_recoveries")
        return {
            "topic": self._meta("topic"),
            "completed_steps": [row["step"] for row in steps],
            "findings": [row["finding"] for row in steps],
            "done": self._meta("done") == "1",
            "recovered": len(recoveries),
            "recoveries": recoveries,
            "running_fibers": len(self.running_fiber_ids),
            "managed": [record.to_dict() for record in await self.list_fibers()],
        }

    # -- the job ---------------------------------------------------------------------------------
    def _research(self, topic, completed, managed=False, managed_id=None):
        """The fiber body: the steps not yet in ``completed``, one a second, stashing each."""

        async def body(ctx):
            done = list(completed)
            owner = managed_id or (ctx.id if managed else None)
            for step in range(len(done) + 1, STEPS + 1):
                await asyncio.sleep(1)  # stands in for an LLM call or a web search
                if ctx.signal.aborted:
                    return done
                self.sql(
                    "INSERT OR REPLACE INTO research_steps VALUES (?, ?, ?, ?)",
                    step,
                    topic,
                    f"finding {step} about {topic}",
                    Date.now(),
                )
                done.append(step)
                # Same turn as the INSERT: the finding and the checkpoint commit together.
                ctx.stash({"topic": topic, "completed": done, "managed_id": owner})
            self._set_meta("done", "1")
            if managed_id is not None:
                # Resumed work of an interrupted managed fiber: settle its record.
                await self.resolve_fiber(
                    managed_id, {"status": "completed", "snapshot": {"completed": done}}
                )
            return done

        return body

    async def on_fiber_recovered(self, ctx):
        """Resume from the snapshot — in the background: this runs at activation, inside
        blockConcurrencyWhile, so it must return quickly."""
        self._ensure_tables()
        snapshot = ctx.snapshot or {}
        topic = snapshot.get("topic") or self._meta("topic") or "unknown"
        completed = [step for step in snapshot.get("completed", []) if isinstance(step, int)]
        self.sql(
            "INSERT INTO research_recoveries VALUES (?, ?, ?, ?, ?)",
            ctx.id,
            ctx.name,
            json.dumps(ctx.snapshot),
            1 if ctx.managed else 0,
            Date.now(),
        )
        # A managed fiber is now `interrupted`; the resumed run resolves it as `completed`.
        # The new fiber's row is written by this call, before the old row is retired.
        managed_id = ctx.id if ctx.managed else snapshot.get("managed_id")
        wait_until(
            self.ctx,
            self.run_fiber("research", self._research(topic, completed, managed_id=managed_id)),
        )

    # -- small helpers ---------------------------------------------------------------------------
    def _meta(self, key):
        self._ensure_tables()
        rows = self.sql("SELECT value FROM research_meta WHERE key = ?", key)
        return rows[0]["value"] if rows else None

    def _set_meta(self, key, value):
        self.sql(
            "INSERT INTO research_meta VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            key,
            value,
        )


def _plain(value):
    """RPC results are JS objects on Cloudflare and plain data on doemu."""
    return value.to_py() if hasattr(value, "to_py") else value


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlparse(request.url)
        parts = url.path.strip("/").split("/")
        if len(parts) != 2 or parts[0] != "research" or not parts[1]:
            return Response.json(
                {"error": "try POST /research/<name> or GET /research/<name>"}, status=404
            )
        agent = self.env.RESEARCHER.getByName(parts[1])
        if request.method == "POST":
            text = await request.text()
            topic = (json.loads(text) if text else {}).get("topic") or parts[1]
            if parse_qs(url.query).get("managed") == ["1"]:
                return Response.json(_plain(await agent.start_managed_research(topic)))
            return Response.json(_plain(await agent.start_research(topic)))
        return Response.json(_plain(await agent.status()))
