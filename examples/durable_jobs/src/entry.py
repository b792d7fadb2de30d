"""An agent that hands a long job to a Workflow, which fans items out through a Queue.

    POST /jobs/<name>    start a job (body: {"items": 60, "slice": 10, "pace": 1}, all optional)
    GET  /jobs/<name>    the agent's report: progress, what ran how often, and the result

The pieces and who owns what:

* ``Coordinator(Agent)`` starts one ``Job`` workflow per agent, with an id derived from its own
  name (``<name>-job``): an agent that starts it again gets ``instance.already_exists`` and simply
  follows the one it has. It follows progress with ``status()`` from a schedule (every second,
  cancelled once the result is in), and keeps what the others report to it in its own SQLite.
* ``Job(WorkflowEntrypoint)`` does the job in slices: each slice is one ``step.do`` that sends
  its items to the ``items`` queue and tells the agent it ran; between slices it pauses with
  ``step.sleep``. A finished step's result is stored by the engine and never recomputed, and a
  sleep is an alarm, so a ``kill -9`` anywhere leaves it to carry on after a restart, by itself.
  Its last step hands the summary back to the agent (``job_done``), an ordinary stub call.
* ``Default.queue`` is the items' consumer: it squares each item and hands the answer to the
  agent, which keeps the first answer per item (``INSERT OR IGNORE``). Delivery is at least
  once — a batch killed before its ack comes again — so keying on the item makes it exactly once.

There is no SDK link from an agent to a workflow in Python (the TypeScript ``AgentWorkflow``
has no Python counterpart), so the link is the two portable calls above: ``status()`` polled
from a schedule, and a stub call from the workflow's last step.
"""

import json
import re

from workers import Response, WorkerEntrypoint, WorkflowEntrypoint

from agents import Agent

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,59}")
FINAL = ("complete", "errored", "terminated")


def _plain(value):
    """JS objects (RPC results, statuses, message bodies) as Python data, on both runtimes."""
    return value.to_py() if hasattr(value, "to_py") else value


class Coordinator(Agent):
    async def on_start(self):
        self._tables()

    def _tables(self):
        self.sql(
            "CREATE TABLE IF NOT EXISTS job (id INTEGER PRIMARY KEY CHECK (id = 1), "
            "instance TEXT, items INTEGER, slices INTEGER, workflow TEXT, summary TEXT, "
            "result TEXT, schedule TEXT)"
        )
        # One row per run of a slice step: a slice that ran twice shows twice.
        self.sql("CREATE TABLE IF NOT EXISTS slice_runs (slice INTEGER, attempt INTEGER)")
        # One row per item: the first answer wins. deliveries counts every delivery.
        self.sql("CREATE TABLE IF NOT EXISTS items (item INTEGER PRIMARY KEY, value INTEGER)")
        self.sql("CREATE TABLE IF NOT EXISTS deliveries (item INTEGER, attempts INTEGER)")

    # -- RPC from the entry worker ---------------------------------------------------------------
    async def start_job(self, items, slice_size, pace):
        self._tables()
        if self._job() is not None:
            return {"started": False, **self.report()}
        instance = f"{self.name}-job"
        slices = -(-items // slice_size)
        params = {"agent": self.name, "items": items, "slice": slice_size, "pace": pace}
        try:
            await self.env.JOBS.create(id=instance, params=params)
        except Exception as error:  # a recovered agent starting it again: follow that one
            if "already_exists" not in str(error):
                raise
        schedule = await self.schedule_every(1, "check_job")
        self.sql(
            "INSERT INTO job (id, instance, items, slices, workflow, schedule) "
            "VALUES (1, ?, ?, ?, 'queued', ?)",
            instance,
            items,
            slices,
            schedule.id,
        )
        return {"started": True, "instance": instance, "items": items, "slices": slices}

    def report(self):
        self._tables()
        job = self._job()
        if job is None:
            return {"started": False}
        runs = self.sql("SELECT slice, count(*) AS n FROM slice_runs GROUP BY slice ORDER BY slice")
        return {
            "instance": job["instance"],
            "workflow": job["workflow"],
            "slices": job["slices"],
            "slices_done": len(runs),
            "slice_runs": {str(row["slice"]): row["n"] for row in runs},
            "items": job["items"],
            "items_done": self.sql("SELECT count(*) AS n FROM items")[0]["n"],
            "deliveries": self.sql("SELECT count(*) AS n FROM deliveries")[0]["n"],
            "summary": json.loads(job["summary"]) if job["summary"] else None,
            "result": json.loads(job["result"]) if job["result"] else None,
        }

    # -- RPC from the workflow and the consumer --------------------------------------------------
    async def slice_ran(self, slice_number, attempt):
        self._tables()
        self.sql("INSERT INTO slice_runs VALUES (?, ?)", slice_number, attempt)

    async def item_done(self, item, value, attempts):
        self._tables()
        self.sql("INSERT INTO deliveries VALUES (?, ?)", item, attempts)
        self.sql("INSERT OR IGNORE INTO items VALUES (?, ?)", item, value)
        await self._maybe_finish()

    async def job_done(self, summary):
        self._tables()
        self.sql(
            "UPDATE job SET summary = ?, workflow = 'complete' WHERE id = 1",
            json.dumps(_plain(summary)),
        )
        await self._maybe_finish()

    # -- the schedule ----------------------------------------------------------------------------
    async def check_job(self, payload=None, schedule=None):
        """Follow the workflow: record its status; an errored or terminated one ends the job."""
        job = self._job()
        if job is None or job["result"]:
            return
        instance = await self.env.JOBS.get(job["instance"])
        status = _plain(await instance.status())
        self.sql("UPDATE job SET workflow = ? WHERE id = 1", status["status"])
        if status["status"] in ("errored", "terminated"):
            await self._finish({"failed": status["status"], "error": status.get("error")})
        else:
            await self._maybe_finish()

    async def _maybe_finish(self):
        job = self._job()
        if job is None or job["result"] or not job["summary"]:
            return
        done = self.sql("SELECT count(*) AS n, sum(value) AS total FROM items")[0]
        if done["n"] < job["items"]:
            return  # the workflow is done; some items are still in the queue
        await self._finish({"items": done["n"], "sum_of_squares": done["total"]})

    async def _finish(self, result):
        job = self._job()
        self.sql("UPDATE job SET result = ? WHERE id = 1", json.dumps(result))
        if job["schedule"]:
            await self.cancel_schedule(job["schedule"])

    def _job(self):
        rows = self.sql("SELECT * FROM job WHERE id = 1")
        return rows[0] if rows else None


class Job(WorkflowEntrypoint):
    """``items`` items in slices of ``slice``: one step per slice, a ``pace`` sleep between."""

    async def run(self, event, step):
        params = event["payload"]
        agent_name, items, size = params["agent"], params["items"], params["slice"]
        env = self.env
        sent = 0
        slices = -(-items // size)
        for number in range(slices):
            first = number * size
            sent += await step.do(f"slice-{number}")(
                slice_step(env, agent_name, number, range(first, min(first + size, items)))
            )()
            if number < slices - 1:
                await step.sleep(f"pause-{number}", f"{params['pace']} seconds")

        @step.do("deliver")
        async def deliver():
            summary = {"slices": slices, "items_sent": sent}
            await env.COORDINATOR.getByName(agent_name).job_done(summary)
            return summary

        return await deliver()


def slice_step(env, agent_name, number, item_range):
    """One slice's step body (a factory, so each step keeps its own slice)."""

    async def body(ctx):
        messages = [{"body": {"agent": agent_name, "item": item}} for item in item_range]
        await env.ITEMS.sendBatch(messages)
        await env.COORDINATOR.getByName(agent_name).slice_ran(number, ctx["attempt"])
        return len(messages)

    return body


class Default(WorkerEntrypoint):
    async def queue(self, batch, env, ctx):
        """Square each item and hand the answer to its agent; ack only what was handed over."""
        for message in batch.messages:
            body = _plain(message.body)
            agent = self.env.COORDINATOR.getByName(body["agent"])
            await agent.item_done(body["item"], body["item"] ** 2, message.attempts)
            message.ack()

    async def fetch(self, request):
        parts = request.url.split("?", 1)[0].split("/")[3:]
        if len(parts) != 2 or parts[0] != "jobs" or not NAME.fullmatch(parts[1]):
            return Response.json(
                {"error": "try POST /jobs/<name> or GET /jobs/<name> (name: letters, digits, - _)"},
                status=404,
            )
        agent = self.env.COORDINATOR.getByName(parts[1])
        if request.method != "POST":
            return Response.json(_plain(await agent.report()))
        text = await request.text()
        try:
            options = json.loads(text) if text else {}
            items = int(options.get("items", 60))
            size = int(options.get("slice", 10))
            pace = float(options.get("pace", 1))
        except (ValueError, TypeError, AttributeError):
            return Response.json({"error": 'expected JSON like {"items": 60}'}, status=400)
        if not (1 <= items <= 1000 and 1 <= size <= 100 and 0 <= pace <= 60):
            return Response.json(
                {"error": "items must be 1-1000, slice 1-100, pace 0-60 seconds"}, status=400
            )
        return Response.json(_plain(await agent.start_job(items, size, pace)))
