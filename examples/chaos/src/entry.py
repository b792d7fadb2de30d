"""An import job that must finish even if the process dies halfway: a durable fiber.

``Importer.start()`` runs the job as a fiber (``run_fiber``): a row in ``cf_agents_runs`` exists
while it runs, and after each page the fiber checkpoints with ``ctx.stash`` in the same turn as
the page's ``INSERT``, so a page and the checkpoint that says it is done commit together. After a
crash the next activation hands the orphaned row to ``on_fiber_recovered``.

``ForgetfulImporter`` is the same job without ``on_fiber_recovered``: a crash halfway leaves the
import unfinished forever. ``NaiveImporter`` resumes from the last checkpoint, which is missing
when the crash comes before a resumed fiber's first ``stash``: it imports pages twice. All three
pass every ordinary test; only crashes show the difference, which is what
``pytest --doemu-chaos-reset=...`` provides (see README.md).
"""

import asyncio

from agents import Agent, AgentOptions, FiberContext, FiberRecoveryContext, wait_until

PAGES = 6


async def fetch_page(page):
    """Stands in for a slow download: a real await, where a crash can strike."""
    await asyncio.sleep(0)
    return 100 + page


class ForgetfulImporter(Agent):
    # While the fiber runs, a heartbeat alarm a second ahead is always stored: after a crash,
    # that alarm wakes the agent (and its recovery scan) with no request.
    options = AgentOptions(keep_alive_interval_ms=1_000)

    async def on_start(self):
        self.sql("CREATE TABLE IF NOT EXISTS pages (page INTEGER NOT NULL, words INTEGER)")

    async def start(self):
        """Start the import in the background and answer at once."""
        self.import_from(0)
        return {"started": True}

    async def progress(self):
        pages = [row["page"] for row in self.sql("SELECT page FROM pages ORDER BY page")]
        return {"pages": pages, "done": pages == list(range(PAGES))}

    def import_from(self, first_page):
        async def body(ctx: FiberContext):
            for page in range(first_page, PAGES):
                words = await fetch_page(page)
                # One turn (no await in between): the page and the checkpoint commit together.
                self.sql("INSERT INTO pages (page, words) VALUES (?, ?)", page, words)
                ctx.stash({"next_page": page + 1})

        # run_fiber writes the fiber's row before it returns; wait_until keeps the object in
        # memory until the fiber ends (a Durable Object's ctx.waitUntil needs a proxied task on
        # Cloudflare: agents.wait_until hands it one).
        wait_until(self.ctx, self.run_fiber("import", body))


class NaiveImporter(ForgetfulImporter):
    async def on_fiber_recovered(self, ctx: FiberRecoveryContext):
        """Resume from the checkpoint — which looks right, and is not.

        A resumed fiber is a new fiber: its row starts with no snapshot until its first
        ``stash``. A crash before that leaves ``ctx.snapshot`` None, and this starts over at
        page 0, importing pages twice. Chaos mode finds it in a fraction of a second.
        """
        if ctx.name == "import":
            self.import_from((ctx.snapshot or {}).get("next_page", 0))


class Importer(ForgetfulImporter):
    async def on_fiber_recovered(self, ctx: FiberRecoveryContext):
        """Resume after the last page committed: storage is the truth, not the checkpoint.

        Runs at activation, inside blockConcurrencyWhile: start the rest in the background and
        return; returning deletes the old row in the same turn as the new fiber's row is written.
        """
        if ctx.name == "import":
            self.import_from(self.pages_done())

    def pages_done(self):
        # A page and its checkpoint commit together, so the pages table says how far it got
        # even when the checkpoint is missing (a crash before a resumed fiber's first stash).
        return self.sql("SELECT count(*) AS n FROM pages")[0]["n"]
