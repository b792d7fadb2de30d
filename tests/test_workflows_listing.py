"""Listing workflows and their instances reads the instances' files: it wakes no instance.

After a restart nothing is live; the admin API's listings (``GET /workflows`` and ``GET
/workflows/{binding}/instances``) must report every status, error and output while the runtime
constructs no instance object (``/health``'s ``live_objects``, the ``constructed`` lifecycle
events) and leaves every instance as it was: the sleepers still wake at their time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workers import WorkflowEntrypoint

from doemu.config.bindings import WorkerResources, WorkflowBinding
from doemu.testing.plugin import HarnessFactory

from .admin_helpers import API, client

SLEEPERS = 101  # more than a listing's default page of 100


class Napper(WorkflowEntrypoint):
    """``mode``: "sleep" (an hour, then rested), "done" (at once) or "fail" (raises)."""

    async def run(self, event: Any, step: Any) -> Any:
        mode = event["payload"]["mode"]

        @step.do()
        async def prepare() -> str:
            return f"prepared for {mode}"

        await prepare()
        if mode == "fail":
            raise ValueError("no nap today")
        if mode == "sleep":
            await step.sleep("nap", "1 hour")
        return {"rested": mode == "sleep"}


async def _harness(doemu_harness: HarnessFactory, persist_dir: Path) -> Any:
    return await doemu_harness(
        {},
        resources=WorkerResources(workflows=(WorkflowBinding("NAP", "napper", "Napper", True),)),
        entrypoints={"Napper": Napper},
        persist_dir=persist_dir,
    )


async def _get(h: Any, path: str) -> Any:
    async with client(h.app()) as http:
        got = await http.get(API + path)
    assert got.status_code == 200, got.text
    return got.json()


def _constructed(h: Any) -> list[dict[str, Any]]:
    return [e for e in h.runtime.events.history if e["type"] == "constructed"]


async def test_listing_wakes_no_instance_and_reports_every_status(
    doemu_harness: HarnessFactory, tmp_path: Path
) -> None:
    persist = tmp_path / "state"
    h = await _harness(doemu_harness, persist)
    for n in range(SLEEPERS):
        await h.env.NAP.create(id=f"nap-{n:03d}", params={"mode": "sleep"})
    await h.advance(1000)  # the newest three are created a second later: listed first
    await h.env.NAP.create(id="list-done", params={"mode": "done"})
    await h.env.NAP.create(id="list-fail", params={"mode": "fail"})
    paused = await h.env.NAP.create(id="list-paused", params={"mode": "sleep"})
    await h.advance(0)
    await paused.pause()
    await h.restart()  # nothing is live now; the sleepers' alarms are an hour away

    assert (await _get(h, "/health"))["live_objects"] == 0
    listed = await _get(h, "/workflows")
    page = await _get(h, "/workflows/NAP/instances?status=waiting&limit=1000")
    assert (await _get(h, "/health"))["live_objects"] == 0
    assert _constructed(h) == []
    assert not any(host.live for host in h.runtime.extra.workflows["NAP"].namespace.hosts.values())

    [workflow] = listed
    assert workflow["binding"] == "NAP" and workflow["name"] == "napper"
    assert workflow["total"] == SLEEPERS + 3
    assert workflow["statuses"] == {
        "waiting": SLEEPERS,
        "complete": 1,
        "errored": 1,
        "paused": 1,
    }
    instances = workflow["instances"]
    assert len(instances) == 100  # the default limit; the tally counts them all
    newest = {i["id"]: i for i in instances[:3]}
    assert sorted(newest) == ["list-done", "list-fail", "list-paused"]
    assert newest["list-done"]["status"] == "complete"
    assert newest["list-done"]["output"] == {"rested": False}
    assert newest["list-fail"]["status"] == "errored"
    assert newest["list-fail"]["error"]["name"] == "Error"
    assert "ValueError: no nap today" in newest["list-fail"]["error"]["message"]
    assert newest["list-paused"] == {
        "id": "list-paused",
        "status": "paused",
        "error": None,
        "output": None,
    }
    assert instances[3] == {"id": "nap-000", "status": "waiting", "error": None, "output": None}
    assert page["count"] == SLEEPERS and page["total"] == SLEEPERS + 3
    assert {i["status"] for i in page["instances"]} == {"waiting"}

    # Nothing changed: the sleepers wake at their time and finish; the paused one stays.
    await h.advance(3_600_000)
    after = (await _get(h, "/workflows?limit=1000"))[0]
    assert after["statuses"] == {"complete": SLEEPERS + 1, "errored": 1, "paused": 1}
    rested = [i for i in after["instances"] if i["id"].startswith("nap-")]
    assert len(rested) == SLEEPERS
    assert all(i["output"] == {"rested": True} for i in rested)
