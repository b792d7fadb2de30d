"""examples/chaos on doemu and on workerd: what its README promises, with real SIGKILLs.

The README's table: after a crash halfway, ``ForgetfulImporter``'s import never finishes,
``NaiveImporter`` imports pages twice when the crash comes before a *resumed* fiber's first
``stash``, and ``Importer`` finishes with every page once — while all three pass when nothing
crashes. ``--doemu-chaos`` proves it in-process; here the crashes are SIGKILLs of the server, on
both targets, and only the stored heartbeat alarm brings an agent back (no request is sent).

The example's three classes run unchanged; the project around them (built by the ``project``
fixture) adds what a client needs and a deploy would have: a ``Default`` entry worker calling
each agent's ``start()``/``progress()`` over RPC, one binding per class, and a page download
that takes :data:`PAGE_SECONDS` (the example's ``fetch_page`` is an ``asyncio.sleep(0)`` standing
in for a slow download: a kill must be able to land between two pages).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.polling import eventually_sync

from ..targets import AGENTS_VENDOR, ROOT, TargetServer
from .conftest import running

EXAMPLE = ROOT / "examples" / "chaos"
PAGES = list(range(6))
#: How long one page's download takes: the window for the second kill of the naive case.
PAGE_SECONDS = 1.0
CLASSES = {"IMPORTER": "Importer", "NAIVE": "NaiveImporter", "FORGETFUL": "ForgetfulImporter"}

DRIVER = f'''"""The chaos example's importers behind an entry worker (test_chaos.py, e2e).

/<BINDING>/<name>/start       POST: the agent's start() over RPC
/<BINDING>/<name>/progress    GET: the agent's progress() over RPC
"""

import asyncio

import entry
from entry import ForgetfulImporter, Importer, NaiveImporter  # noqa: F401 - the classes
from workers import Response, WorkerEntrypoint


async def slow_page(page):
    await asyncio.sleep({PAGE_SECONDS})
    return 100 + page


entry.fetch_page = slow_page


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = request.url.split("?", 1)[0].split("/")[3:]
        if len(parts) != 3 or parts[0] not in {sorted(CLASSES)!r}:
            return Response.json({{"error": "no route"}}, status=404)
        agent = getattr(self.env, parts[0]).getByName(parts[1])
        if parts[2] == "start":
            return Response.json(await agent.start())
        return Response.json(await agent.progress())
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example, with the driver as its main module and a binding per class."""
    target = tmp_path_factory.mktemp("chaos-project") / "chaos"
    shutil.copytree(EXAMPLE / "src", target / "src")
    (target / "src" / "driver.py").write_text(DRIVER)
    bindings = "".join(
        f'[[durable_objects.bindings]]\nname = "{b}"\nclass_name = "{c}"\n\n'
        for b, c in CLASSES.items()
    )
    (target / "wrangler.toml").write_text(
        'name = "chaos-example"\nmain = "src/driver.py"\ncompatibility_date = "2026-11-01"\n'
        f'compatibility_flags = ["python_workers"]\n\n{bindings}[[migrations]]\ntag = "v1"\n'
        f"new_sqlite_classes = {json.dumps(sorted(CLASSES.values()))}\n"
    )
    return target


@pytest.fixture(scope="module")
def chaos(serve: Any, project: Path) -> TargetServer:
    server: TargetServer = serve(project, vendor=AGENTS_VENDOR)
    return server


def call(server: TargetServer, binding: str, name: str, action: str) -> Any:
    method = "POST" if action == "start" else "GET"
    answer = httpx.request(method, f"{running(server).url}/{binding}/{name}/{action}", timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def pages(server: TargetServer, binding: str, name: str) -> list[int]:
    """The pages committed, read from the object's file (never wakes it)."""
    rows = server.sql(binding, name, "SELECT page FROM pages ORDER BY page")
    return [row["page"] for row in rows]


def runs(server: TargetServer, binding: str, name: str) -> list[dict[str, Any]]:
    return server.sql(binding, name, "SELECT id, snapshot FROM cf_agents_runs")


def test_without_a_crash_all_three_finish(chaos: TargetServer, target: str) -> None:
    """The README: all three pass every ordinary test."""
    name = f"calm-{target}"
    for binding in CLASSES:
        assert call(chaos, binding, name, "start") == {"started": True}
    for binding in CLASSES:
        done = eventually_sync(
            lambda b=binding: (p := call(chaos, b, name, "progress"))["done"] and p,
            within=30,
            what=f"{binding}'s import to finish",
        )
        assert done == {"pages": PAGES, "done": True}


def test_after_crashes_only_the_recovering_importer_finishes(
    chaos: TargetServer, target: str
) -> None:
    """1. All three start; once each has two pages, SIGKILL, restart, no request.
    2. The heartbeat alarm wakes each: Importer and NaiveImporter resume, ForgetfulImporter
       drops its work (its log line says so). As soon as NaiveImporter's resumed fiber has its
       row and no checkpoint yet, SIGKILL again, restart, no request.
    3. Importer: every page once. NaiveImporter: the first pages twice (it started over from
       page 0). ForgetfulImporter: the pages of before the first crash, never finished."""
    name = f"crash-{target}"
    for binding in CLASSES:
        assert call(chaos, binding, name, "start") == {"started": True}
    for binding in CLASSES:
        eventually_sync(
            lambda b=binding: len(pages(chaos, b, name)) >= 2, within=30, what=f"{binding} pages"
        )
    before = {binding: runs(chaos, binding, name) for binding in CLASSES}
    chaos.kill()
    chaos.restart()

    def resumed_without_checkpoint() -> bool:
        rows = runs(chaos, "NAIVE", name)
        return bool(rows) and rows[0]["id"] != before["NAIVE"][0]["id"] and not rows[0]["snapshot"]

    eventually_sync(resumed_without_checkpoint, within=30, what="the naive importer to resume")
    chaos.kill()
    forgotten = pages(chaos, "FORGETFUL", name)
    chaos.restart()

    assert eventually_sync(
        lambda: (p := call(chaos, "IMPORTER", name, "progress"))["done"] and p,
        within=60,
        what="the recovering importer to finish",
    ) == {"pages": PAGES, "done": True}
    naive = eventually_sync(  # no fiber row left first, then the pages: they are final
        lambda: not runs(chaos, "NAIVE", name) and pages(chaos, "NAIVE", name),
        within=60,
        what="the naive importer to end",
    )
    assert sorted(set(naive)) == PAGES and len(naive) > len(PAGES), naive
    assert naive[:4] == [0, 0, 1, 1], naive
    dropped = re.compile(r"fiber 'import' .* on_fiber_recovered is not overridden")
    eventually_sync(
        lambda: dropped.search("\n".join([*chaos.outputs, chaos.output])),
        within=10,
        what="the forgetful importer to say it dropped its work",
    )
    assert 2 <= len(forgotten) < len(PAGES)
    assert call(chaos, "FORGETFUL", name, "progress") == {"pages": forgotten, "done": False}
    assert runs(chaos, "FORGETFUL", name) == []
