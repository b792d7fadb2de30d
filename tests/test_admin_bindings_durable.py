"""The admin API's Queues, Workflows and Workers AI routes (what the inspector's views read and
do), over a real in-process app, real queue files and workflow instances, a manual clock, and
the fake providers' OpenAI endpoint for ``env.AI``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from workers import WorkerEntrypoint, WorkflowEntrypoint

from doemu.clock import ManualClock
from doemu.config.ai import AiSettings
from doemu.config.bindings import (
    AiBinding,
    QueueConsumer,
    QueueProducer,
    WorkerResources,
    WorkflowBinding,
)
from doemu.control import RuntimeControl
from doemu.runtime import Runtime
from doemu.server.app import DoemuApp
from doemu.testing.fake_providers import FakeLLM, Reply, Text

from .admin_helpers import API, JSON_TYPE, T0, client

CONSUMED: list[tuple[Any, int]] = []
LLAMA = "@cf/meta/llama-3.1-8b-instruct"
KEY = "secret-ai-key-never-shown"


class Default(WorkerEntrypoint):
    """Consumes ``jobs``: a body ``{"fail": true}`` always raises (so it dies after retries)."""

    async def queue(self, batch: Any, env: Any, ctx: Any) -> None:
        for message in batch.messages:
            body = message.body
            if isinstance(body, dict) and body.get("fail"):
                raise RuntimeError("this job always fails")
            CONSUMED.append((body, message.attempts))


class Approve(WorkflowEntrypoint):
    """prepare → sleep 1 minute → wait for "approve" → the payload's answer."""

    async def run(self, event: Any, step: Any) -> Any:
        @step.do("prepare")
        async def prepare() -> Any:
            return {"who": event["payload"].get("who", "nobody")}

        prepared = await prepare()
        await step.sleep("settle", "1 minute")
        approval = await step.wait_for_event("approval", "approve", timeout="1 hour")
        return {"who": prepared["who"], "answer": approval["payload"]["answer"]}


RESOURCES = WorkerResources(
    producers=(QueueProducer("JOBS", "jobs"),),
    consumers=(
        QueueConsumer(
            "jobs",
            max_batch_size=10,
            max_batch_timeout=1,
            max_retries=1,
            retry_delay=5,
            dead_letter_queue="jobs-dlq",
        ),
    ),
    workflows=(WorkflowBinding("APPROVE", "approve", "Approve", True),),
    ai=AiBinding("AI"),
)


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key=KEY) as server:
        yield server


@asynccontextmanager
async def served(
    tmp_path: Path, ai: AiSettings | None, token: str | None = None
) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    runtime = Runtime(
        worker_name="durable-admin",
        classes={},
        persist_dir=tmp_path / "state",
        clock=ManualClock(T0),
        resources=RESOURCES,
        entrypoints={"Default": Default, "Approve": Approve},
        ai=ai,
        vars={"DOEMU_AI_API_KEY": KEY},
    )
    await runtime.start()
    try:
        async with client(DoemuApp(runtime, admin_token=token)) as http:
            yield runtime, http
    finally:
        await runtime.close()


@pytest.fixture
async def admin(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    CONSUMED.clear()
    settings = AiSettings(f"{llm.url}/v1", {LLAMA: "local-llama"})
    async with served(tmp_path, settings) as it:
        yield it


def _queue(listing: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(q for q in listing if q["queue"] == name)


async def test_queue_backlog_counts_send_and_purge(
    admin: tuple[Runtime, httpx.AsyncClient],
) -> None:
    """A test message goes through a producer (json and text; Cloudflare's refusals); the
    backlog is split into ready, delayed and in flight on the doemu clock; a purge empties
    the waiting messages and the consumer then gets nothing."""
    runtime, http = admin
    sent = await http.post(
        f"{API}/queues/jobs-dlq/messages", json={"body": {"n": 1}, "contentType": "json"}
    )
    assert sent.json() == {"queue": "jobs-dlq", "sent": True}
    await http.post(
        f"{API}/queues/jobs-dlq/messages",
        json={"body": "later", "contentType": "text", "delaySeconds": 60},
    )
    dlq = _queue((await http.get(f"{API}/queues")).json(), "jobs-dlq")
    assert dlq["counts"] == {"ready": 1, "delayed": 1, "inFlight": 0, "deadLetters": 0}
    assert dlq["consumer"] is None and dlq["producers"] == []
    assert [m["contentType"] for m in dlq["messages"]] == ["json", "text"]
    await RuntimeControl(runtime).advance(60_000)
    dlq = _queue((await http.get(f"{API}/queues")).json(), "jobs-dlq")
    assert dlq["counts"]["ready"] == 2 and dlq["counts"]["delayed"] == 0

    bad = await http.post(
        f"{API}/queues/jobs/messages", json={"body": {"n": 1}, "contentType": "text"}
    )
    assert bad.status_code == 400
    assert bad.json()["error"].startswith('Content Type "text" requires a value of type string')
    big = await http.post(f"{API}/queues/jobs/messages", json={"body": "x" * 130_000})
    assert big.status_code == 400
    assert "exceeds limit of 128000" in big.json()["error"]
    kind = await http.post(f"{API}/queues/jobs/messages", json={"body": 1, "contentType": "v8"})
    assert kind.status_code == 400 and "'contentType' must be" in kind.json()["error"]
    missing = await http.post(f"{API}/queues/nope/messages", json={"body": 1})
    assert missing.status_code == 404
    assert missing.json()["error"] == "unknown queue 'nope'; known: jobs, jobs-dlq"
    wrong_type = await http.post(
        f"{API}/queues/jobs/messages", content=b"{}", headers={"content-type": "text/plain"}
    )
    assert wrong_type.status_code == 415

    purged = await http.post(f"{API}/queues/jobs-dlq/purge")
    assert purged.json() == {"queue": "jobs-dlq", "purged": 2}
    assert runtime.extra.queue_store("jobs-dlq").count() == 0

    await http.post(f"{API}/queues/jobs/messages", json={"body": {"keep": 1}})
    await http.post(f"{API}/queues/jobs/purge")
    await RuntimeControl(runtime).advance(2_000)
    assert CONSUMED == []  # purged before its batch went


async def test_dead_letters_browse_and_replay(admin: tuple[Runtime, httpx.AsyncClient]) -> None:
    """A message that fails its retries is a dead letter with its body, attempts and times;
    moving it back takes its copy out of the dead-letter queue and delivers it again (attempts
    from 1); an unknown id is a 404."""
    runtime, http = admin
    control = RuntimeControl(runtime)
    await http.post(f"{API}/queues/jobs/messages", json={"body": {"fail": True, "id": 7}})
    await control.advance(1_000)  # attempt 1 fails
    await control.advance(6_000)  # the retry delay, the batch timeout: attempt 2 fails
    page = (await http.get(f"{API}/queues/jobs/dead-letters")).json()
    assert page["count"] == 1 and page["offset"] == 0
    (dead,) = page["deadLetters"]
    assert dead["body"] == '{"fail":true,"id":7}' and dead["truncated"] is False
    assert dead["attempts"] == 2 and dead["movedTo"] == "jobs-dlq"
    assert dead["contentType"] == "json" and dead["bytes"] == len(dead["body"])
    assert dead["enqueued"] == T0 and dead["died"] > dead["enqueued"]
    jobs = _queue((await http.get(f"{API}/queues")).json(), "jobs")
    assert jobs["counts"]["deadLetters"] == 1
    assert jobs["consumer"]["max_retries"] == 1 and jobs["consumer"]["dead_letter_queue"]
    assert runtime.extra.queue_store("jobs-dlq").count() == 1  # its copy waits there

    unknown = await http.post(f"{API}/queues/jobs/dead-letters/nobody/replay")
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "no dead letter 'nobody' in queue jobs"

    replayed = await http.post(f"{API}/queues/jobs/dead-letters/{dead['id']}/replay")
    assert replayed.json() == {
        "queue": "jobs",
        "id": dead["id"],
        "replayed": True,
        "removedFrom": "jobs-dlq",
    }
    assert runtime.extra.queue_store("jobs-dlq").count() == 0
    jobs = _queue((await http.get(f"{API}/queues")).json(), "jobs")
    assert jobs["counts"] == {"ready": 1, "delayed": 0, "inFlight": 0, "deadLetters": 0}
    assert jobs["messages"][0]["attempts"] == 0
    again = await http.post(f"{API}/queues/jobs/dead-letters/{dead['id']}/replay")
    assert again.status_code == 404


async def test_body_previews_are_bounded() -> None:
    from doemu.bindings.queues.codec import encode_body
    from doemu.server.admin.durable import PREVIEW_CHARS, body_preview

    long = body_preview(b"y" * (PREVIEW_CHARS + 5), "text")
    assert len(long["body"]) == PREVIEW_CHARS and long["truncated"] and long["bytes"] == 2005
    assert body_preview(b"\x00\xff", "bytes")["body"] == "base64:AP8="
    assert body_preview(encode_body({"a": [1, 2]}, "v8"), "v8")["body"] == '{"a": [1, 2]}'


async def test_workflow_instances_paged_filtered_and_controlled(
    admin: tuple[Runtime, httpx.AsyncClient],
) -> None:
    """Instances are created with params through the binding (a duplicate id is 409, a bad
    one 400), listed newest first with counts per status, filtered and paged; one instance
    shows its steps with their times and the clock's now; pause, resume, an event and
    terminate work as the binding's calls do."""
    runtime, http = admin
    control = RuntimeControl(runtime)
    base = f"{API}/workflows/APPROVE/instances"
    ids = [f"wf-{n}-{uuid.uuid4().hex[:6]}" for n in range(3)]
    for n, instance_id in enumerate(ids):
        created = await http.post(base, json={"id": instance_id, "params": {"who": f"p{n}"}})
        assert created.json() == {"id": instance_id, "created": True}
        await control.advance(1)
    anonymous = (await http.post(base, json={})).json()
    assert len(anonymous["id"]) == 36  # a random UUID, as create() gives
    duplicate = await http.post(base, json={"id": ids[0]})
    assert duplicate.status_code == 409
    assert duplicate.json()["error"] == "(instance.already_exists) Instance already exists"
    invalid = await http.post(base, json={"id": "no spaces allowed"})
    assert invalid.status_code == 400
    assert invalid.json()["error"] == "Workflow instance has invalid id"
    await control.advance(0)

    await control.evict_all()
    listing = (await http.get(base)).json()
    assert listing["total"] == 4 and listing["count"] == 4
    instances = runtime.extra.workflows["APPROVE"].namespace.hosts.values()
    assert not any(host.live for host in instances)  # read from the files: nothing woke
    assert listing["statuses"] == {"waiting": 4}
    assert [i["id"] for i in listing["instances"]][1:] == ids[::-1]  # newest first
    page = (await http.get(f"{base}?limit=2&offset=2")).json()
    assert [i["id"] for i in page["instances"]] == [ids[1], ids[0]]
    bad = await http.get(f"{base}?status=sleeping")
    assert bad.status_code == 400 and "is not one of queued, running" in bad.json()["error"]

    one = (await http.get(f"{base}/{ids[0]}")).json()
    assert one["status"] == "waiting" and one["params"] == {"who": "p0"}
    assert one["now"] == runtime.clock.now()
    prepare, settle = one["steps"]
    assert (prepare["name"], prepare["state"], prepare["value"]) == (
        "prepare",
        "done",
        {"who": "p0"},
    )
    assert prepare["attempts"] == 1 and prepare["updated"] == T0
    assert settle["kind"] == "sleep" and settle["wakeAt"] == T0 + 60_000

    paused = (await http.post(f"{base}/{ids[1]}/pause")).json()
    assert paused == {"id": ids[1], "action": "pause", "status": "paused", "error": None,
                      "output": None}  # fmt: skip
    only = (await http.get(f"{base}?status=paused")).json()
    assert [i["id"] for i in only["instances"]] == [ids[1]] and only["count"] == 1

    await control.advance(60_000)  # the others wake from their sleep and wait for the event
    waiting = (await http.get(f"{base}/{ids[0]}")).json()
    assert [s["state"] for s in waiting["steps"]][-1] == "waiting"
    assert waiting["steps"][-1]["eventType"] == "approve"
    sent = await http.post(
        f"{base}/{ids[0]}/events", json={"type": "approve", "payload": {"answer": "yes"}}
    )
    assert sent.json() == {"id": ids[0], "type": "approve", "sent": True}
    await control.advance(0)
    done = (await http.get(f"{base}/{ids[0]}")).json()
    assert done["status"] == "complete" and done["output"] == {"who": "p0", "answer": "yes"}

    resumed = (await http.post(f"{base}/{ids[1]}/resume")).json()
    assert resumed["status"] == "queued"
    terminated = (await http.post(f"{base}/{ids[2]}/terminate")).json()
    assert terminated["status"] == "terminated"
    twice = await http.post(f"{base}/{ids[2]}/terminate")
    assert twice.status_code == 409 and "cannot_terminate" in twice.json()["error"]
    restarted = (await http.post(f"{base}/{ids[2]}/restart")).json()
    assert restarted["status"] == "queued"
    await control.advance(0)
    assert (await http.get(f"{base}/{ids[2]}")).json()["steps"][0]["name"] == "prepare"

    no_type = await http.post(f"{base}/{ids[1]}/events", json={"payload": 1})
    assert no_type.status_code == 400 and "'type' must be" in no_type.json()["error"]
    action = await http.post(f"{base}/{ids[1]}/explode")
    assert action.status_code == 404 and "no instance action 'explode'" in action.json()["error"]
    nobody = await http.post(f"{base}/nobody/pause")
    assert nobody.status_code == 404
    assert nobody.json()["error"] == "no instance 'nobody' of the workflow approve"
    unknown = await http.get(f"{API}/workflows/NOPE/instances")
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "unknown Workflow binding 'NOPE'; known: APPROVE"


async def test_ai_shows_its_endpoint_and_last_calls_never_the_key(
    admin: tuple[Runtime, httpx.AsyncClient], llm: FakeLLM
) -> None:
    """The endpoint and model map as configured; each run() is recorded (model, the
    endpoint's model, status, latency, tokens), a refused one with its error; the key is in
    no answer."""
    runtime, http = admin
    llm.script(Reply(Text("Hello ", "there")))
    result = await runtime.env.AI.run(LLAMA, {"messages": [{"role": "user", "content": "hi"}]})
    assert result["response"] == "Hello there"
    failed = None
    try:
        await runtime.env.AI.run("@cf/unmapped/model", {"prompt": "hi"})
    except Exception as exc:
        failed = str(exc)
    assert failed is not None and "5007" in failed
    response = await http.get(f"{API}/ai")
    assert KEY not in response.text
    ai = response.json()
    assert ai["binding"] == "AI" and ai["configured"] is True
    assert ai["base_url"] == f"{llm.url}/v1" and ai["models"] == {LLAMA: "local-llama"}
    assert ai["total_calls"] == 2
    refused, ok = ai["calls"]  # newest first
    assert ok["model"] == LLAMA and ok["endpoint_model"] == "local-llama"
    assert ok["status"] == 200 and ok["ok"] is True and ok["task"] == "text"
    assert ok["latency_ms"] >= 0 and ok["stream"] is False
    assert ok["tokens"]["completion_tokens"] == 2
    assert refused["model"] == "@cf/unmapped/model" and refused["ok"] is False
    assert refused["status"] is None and "5007: No such model" in refused["error"]


async def test_ai_without_a_binding_or_endpoint(tmp_path: Path) -> None:
    async with served(tmp_path, None) as (runtime, http):
        ai = (await http.get(f"{API}/ai")).json()
        assert ai["configured"] is False and ai["base_url"] is None and ai["calls"] == []
    runtime = Runtime(worker_name="no-ai", classes={}, persist_dir=tmp_path / "other",
                      clock=ManualClock(T0))  # fmt: skip
    await runtime.start()
    try:
        async with client(DoemuApp(runtime)) as http:
            missing = await http.get(f"{API}/ai")
            assert missing.status_code == 404
            assert missing.json()["error"].startswith("this Worker has no AI binding")
            queues = await http.post(f"{API}/queues/any/purge")
            assert queues.status_code == 404
            assert queues.json()["error"] == "unknown queue 'any'; known: none"
    finally:
        await runtime.close()


async def test_the_new_routes_keep_the_access_rules(tmp_path: Path) -> None:
    """With a token, every new route refuses a call without it; without one, a client that is
    not on loopback is refused."""
    async with served(tmp_path, None, token="durable-token") as (runtime, http):
        for method, path in (
            ("GET", "/queues/jobs/dead-letters"),
            ("POST", "/queues/jobs/purge"),
            ("GET", "/workflows/APPROVE/instances"),
            ("POST", "/workflows/APPROVE/instances/x/pause"),
            ("GET", "/ai"),
        ):
            refused = await http.request(method, API + path, headers=JSON_TYPE)
            assert refused.status_code == 401, path
            allowed = await http.request(
                method, API + path, headers={"authorization": "Bearer durable-token"}
            )
            assert allowed.status_code in (200, 404), (path, allowed.text)
    async with served(tmp_path, None) as (runtime, _http):
        async with client(DoemuApp(runtime), host="10.1.2.3") as remote:
            assert (await remote.get(f"{API}/ai")).status_code == 403
