"""The inspector's Queues, Workflows and Workers AI views in a real headless Chromium against a
real ``doemu dev``.

The project (``e2e/apps/inspector_durable_app``) has a queue with a consumer that dead-letters a
``{"fail": true}`` body into ``jobs-dlq``, a workflow (a step, a one-minute sleep, a wait for an
``approve`` event) and ``env.AI`` served by the fake providers' OpenAI endpoint (its key in
``.dev.vars``). The server runs with ``--admin-token`` and ``--clock manual``, so batches and
sleeps move only when a test moves the clock. Each section is compared with what the admin API
answers; each action is checked on the page and through the API. Waits are Playwright's
``expect`` (polling with a deadline), never sleeps.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from doemu.testing.fake_providers import FakeLLM, Reply, Text
from doemu.testing.fake_providers.gate import poll

from .browser import Dialogs, inspector_pages
from .browser import browser as browser  # the fixture: one Debian Chromium for the module
from .harness import DevServer

APP = Path(__file__).resolve().parent / "apps" / "inspector_durable_app"
TOKEN = "inspector-durable-token"
SECRET = "sk-inspector-never-shown-5521"
API = "/__doemu/api"
LLAMA = "@cf/meta/llama-3.1-8b-instruct"


def _api(server: DevServer, method: str, path: str, **kw: Any) -> Any:
    headers = {"authorization": f"Bearer {TOKEN}"}
    response = httpx.request(method, server.url + API + path, headers=headers, timeout=10, **kw)
    response.raise_for_status()
    return response.json()


def _advance(server: DevServer, ms: float) -> None:
    _api(server, "POST", "/clock", json={"advance_ms": ms})


def _status(server: DevServer, instance: str) -> str:
    return str(_api(server, "GET", f"/workflows/APPROVALS/instances/{instance}")["status"])


def _queue(server: DevServer, name: str) -> dict[str, Any]:
    return next(q for q in _api(server, "GET", "/queues") if q["queue"] == name)


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key=SECRET) as server:
        yield server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[DevServer]:
    """The app, seeded: one job consumed, one dead-lettered (its copy waits in jobs-dlq), a
    delayed message in jobs-dlq, three workflow instances asleep, one AI call made."""
    project = tmp_path_factory.mktemp("inspector-durable") / "app"
    shutil.copytree(APP, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    (project / "pyproject.toml").write_text(
        f'[tool.doemu.ai]\nbase_url = "{llm.url}/v1"\ndefault_model = "local-default"\n'
        f'[tool.doemu.ai.models]\n"{LLAMA}" = "local-llama"\n'
    )
    (project / ".dev.vars").write_text(f"DOEMU_AI_API_KEY={SECRET}\n")
    started = DevServer(
        project, project.parent / "state", args=["--clock", "manual", "--admin-token", TOKEN]
    ).start()
    try:
        _api(started, "POST", "/queues/jobs/messages", json={"body": {"job": "ok"}})
        _api(started, "POST", "/queues/jobs/messages", json={"body": {"fail": True, "n": 1}})
        _advance(started, 1_000)  # the first delivery: "ok" is consumed, the other retried
        _advance(started, 6_000)  # its retry fails too: a dead letter, moved to jobs-dlq
        _api(
            started,
            "POST",
            "/queues/jobs-dlq/messages",
            json={"body": "later", "contentType": "text", "delaySeconds": 600},
        )
        for n in range(3):
            _api(
                started,
                "POST",
                "/workflows/APPROVALS/instances",
                json={"id": f"seed-{n}", "params": {"who": f"person {n}"}},
            )
            _advance(started, 1)
        llm.script(Reply(Text("Hello ", "there")))
        with httpx.Client(base_url=started.url, timeout=30) as http:
            asked = http.post("/ask", json={"prompt": "hi"})
            assert asked.status_code == 200, asked.text
        yield started
    finally:
        started.kill()


@pytest.fixture
def dialogs() -> Dialogs:
    return Dialogs()


@pytest.fixture
def page(browser: Browser, server: DevServer, dialogs: Dialogs) -> Iterator[Callable[..., Page]]:
    with inspector_pages(
        browser, server.url, TOKEN, dialogs, "#bindings-queues .binding"
    ) as open_page:
        yield open_page


def _panel(shown: Page, kind: str, key: str) -> Locator:
    return shown.locator(f'#bindings-{kind} .binding[data-binding="{key}"]')


def _refresh(shown: Page) -> None:
    shown.get_by_role("button", name="Refresh", exact=True).click()


def _iso(shown: Page, ms: float) -> str:
    return str(shown.evaluate(f"new Date({ms}).toISOString()"))


def test_each_section_shows_what_the_api_returns(
    server: DevServer, page: Callable[..., Page], llm: FakeLLM
) -> None:
    """1. Queues: each queue's counts and consumer settings as /queues has them, the waiting
       messages, a dead letter with its body preview, attempts and times.
    2. Workflows: the instances and their status tally, a filter, one instance's params,
       steps (the result preview) and the sleep it waits on, on the doemu clock.
    3. Workers AI: the endpoint and model map, the call made, with its status and tokens; the
       key is nowhere on the page."""
    shown = page()
    jobs, dlq = _queue(server, "jobs"), _queue(server, "jobs-dlq")
    panel = _panel(shown, "queues", "jobs")
    c = jobs["counts"]
    expect(panel.locator("table.queue-counts tr").nth(1).locator("td")).to_have_text(
        [str(c["ready"]), str(c["delayed"]), str(c["inFlight"]), str(c["deadLetters"])]
    )
    expect(panel.locator("h3 .resource")).to_have_text("producers: JOBS")
    consumer = jobs["consumer"]
    expect(panel.locator(".queue-consumer dd")).to_have_text(
        ["Default.queue()", "5", "1 s", "1", "5 s", "jobs-dlq", "(default)",
         str(consumer["delivered"])]
    )  # fmt: skip
    (dead,) = _api(server, "GET", "/queues/jobs/dead-letters")["deadLetters"]
    row = panel.locator(f'tr.queue-dead-letter[data-id="{dead["id"]}"] td')
    expect(row.nth(1)).to_have_text('{"fail":true,"n":1}')
    expect(row.nth(2)).to_have_text("2")
    expect(row.nth(4).locator("time")).to_have_attribute(
        "title", f"{round(dead['died'])} ms · " + _iso(shown, dead["died"])
    )
    expect(row.nth(5)).to_have_text("jobs-dlq")

    other = _panel(shown, "queues", "jobs-dlq")
    d = dlq["counts"]
    expect(other.locator("table.queue-counts tr").nth(1).locator("td")).to_have_text(
        [str(d["ready"]), str(d["delayed"]), str(d["inFlight"]), str(d["deadLetters"])]
    )
    expect(other.locator("h3 .resource")).to_have_text("no producer binding")
    expect(other.locator(".queue-consumer")).to_have_text(
        "no consumer: messages wait here until something reads them"
    )
    states = {m["id"]: m for m in dlq["messages"]}
    expect(other.locator("tr.queue-message")).to_have_count(len(states))
    delayed = next(m for m in dlq["messages"] if m["contentType"] == "text")
    expect(other.locator(f'tr.queue-message[data-id="{delayed["id"]}"] td').nth(2)).to_have_text(
        "delayed"
    )

    flow = _panel(shown, "workflows", "APPROVALS")
    listing = _api(server, "GET", "/workflows/APPROVALS/instances")
    expect(flow.locator("h3 .count")).to_have_text(f"({listing['total']} instances)")
    expect(flow.locator("h3 .resource")).to_have_text("workflow approvals · Approval")
    tally = " · ".join(f"{s} {n}" for s, n in listing["statuses"].items())
    expect(flow.locator(".wf-statuses")).to_have_text(tally)
    expect(flow.locator("tr.wf-row")).to_have_count(listing["count"])
    expect(flow.locator("tr.wf-row").first).to_have_attribute(
        "data-id", listing["instances"][0]["id"]
    )
    flow.get_by_label("status filter").select_option("complete")
    flow.get_by_role("button", name="Filter").click()
    expected = _api(server, "GET", "/workflows/APPROVALS/instances?status=complete")["count"]
    expect(flow.locator("tr.wf-row")).to_have_count(expected)
    flow.get_by_label("status filter").select_option("")
    flow.get_by_role("button", name="Filter").click()
    flow.locator('tr.wf-row[data-id="seed-0"]').get_by_role("button", name="Open").click()
    one = _api(server, "GET", "/workflows/APPROVALS/instances/seed-0")
    expect(flow.locator(".wf-instance-status")).to_have_text(one["status"])
    expect(flow.locator("pre.wf-params")).to_have_text('{\n  "who": "person 0"\n}')
    prepare = flow.locator('tr.wf-step[data-name="prepare"] td')
    expect(prepare.nth(2)).to_have_text("done")
    expect(prepare.nth(4)).to_have_text('{"who":"person 0","items":[1,2,3]}')
    settle = next(s for s in one["steps"] if s["name"] == "settle")
    if settle["state"] == "sleeping":  # the first test of the module: the clock has not moved
        expect(flow.locator(".wf-pending li")).to_contain_text("sleep “settle” wakes at ")
        expect(flow.locator(".wf-pending li time")).to_have_attribute(
            "title", f"{round(settle['wakeAt'])} ms · " + _iso(shown, settle["wakeAt"])
        )

    ai = _api(server, "GET", "/ai")
    section = _panel(shown, "ai", "AI")
    expect(section.locator(".ai-endpoint")).to_have_text(f"{llm.url}/v1")
    expect(section.locator("table.ai-models tr").nth(1).locator("td")).to_have_text(
        [LLAMA, "local-llama"]
    )
    call = ai["calls"][-1]  # the seeded one: the oldest kept
    cells = section.locator("tr.ai-call").last.locator("td")
    expect(cells.nth(1)).to_have_text(LLAMA)
    expect(cells.nth(2)).to_have_text("local-llama")
    expect(cells.nth(3)).to_have_text("text")
    expect(cells.nth(4)).to_have_text("200")
    latency = call["latency_ms"]  # JSON's 233.0 is JavaScript's 233
    expect(cells.nth(5)).to_have_text(f"{int(latency) if latency == int(latency) else latency} ms")
    t = call["tokens"]
    expect(cells.nth(6)).to_have_text(
        f"{t['prompt_tokens']} in · {t['completion_tokens']} out · {t['total_tokens']}"
    )
    assert SECRET not in shown.content()


def test_queue_send_purge_and_move_back(
    server: DevServer, page: Callable[..., Page], dialogs: Dialogs
) -> None:
    """1. A JSON test message sent from the page is in the queue (the API has it); bad JSON is
    refused on the page. 2. A purge whose confirm is dismissed deletes nothing; a confirmed
    one empties the waiting messages. 3. "Move back" puts the dead letter back into its
    queue and takes its copy out of the dead-letter queue."""
    shown = page()
    dlq = _panel(shown, "queues", "jobs-dlq")
    marker = uuid.uuid4().hex[:8]
    form = dlq.locator("form.queue-send")
    form.get_by_label("message body").fill(f'{{"marker": "{marker}"}}')
    form.get_by_role("button", name="Send").click()
    expect(dlq.locator(".queue-done")).to_have_text("Sent a json message to jobs-dlq.")
    before = _queue(server, "jobs-dlq")
    expect(dlq.locator("tr.queue-message")).to_have_count(before["backlog"])
    assert any(m["contentType"] == "json" for m in before["messages"])
    form.get_by_label("message body").fill("{not json")
    form.get_by_role("button", name="Send").click()
    expect(dlq.locator(".binding-error").first).to_contain_text(
        "Could not send: the body is not valid JSON"
    )
    assert _queue(server, "jobs-dlq")["backlog"] == before["backlog"]

    dialogs.refuse_next = True
    dlq.get_by_role("button", name="Purge").click()
    assert dialogs.seen[-1] == "Purge queue jobs-dlq? Every waiting message is deleted."
    assert _queue(server, "jobs-dlq")["backlog"] == before["backlog"]
    dlq.get_by_role("button", name="Purge").click()
    expect(dlq.locator(".queue-done")).to_have_text(f"Purged {before['backlog']} message(s).")
    expect(dlq.locator("td.empty").first).to_have_text("no messages waiting")
    assert _queue(server, "jobs-dlq")["backlog"] == 0

    jobs = _panel(shown, "queues", "jobs")
    (dead,) = _api(server, "GET", "/queues/jobs/dead-letters")["deadLetters"]
    _api(server, "POST", "/queues/jobs-dlq/messages", json={"body": {"other": 1}})
    jobs.locator(f'tr.queue-dead-letter[data-id="{dead["id"]}"]').get_by_role(
        "button", name="Move back"
    ).click()
    assert dialogs.seen[-1] == f"Move dead letter “{dead['id']}” back into queue jobs?"
    expect(jobs.locator(".queue-done")).to_have_text(f"Moved “{dead['id']}” back into jobs.")
    expect(jobs.locator(f'tr.queue-message[data-id="{dead["id"]}"] td').nth(3)).to_have_text("0")
    expect(jobs.locator("tr.queue-dead-letter")).to_have_count(0)
    assert _api(server, "GET", "/queues/jobs/dead-letters")["count"] == 0
    assert _queue(server, "jobs")["counts"]["ready"] == 1


def test_workflow_create_event_and_controls(
    server: DevServer, page: Callable[..., Page], dialogs: Dialogs
) -> None:
    """1. An instance created from the page with params opens and shows them. 2. Past its
    sleep (the clock moved) it waits for "approve", as the page says; the event sent from the
    page completes it with the output shown. 3. Pause (confirmed) and Resume change the
    status as the API reports it; Terminate, then Restart, too."""
    shown = page()
    flow = _panel(shown, "workflows", "APPROVALS")
    new = f"page-{uuid.uuid4().hex[:6]}"
    form = flow.locator("form.wf-create")
    form.get_by_label("instance id").fill(new)
    form.get_by_label("params").fill('{"who": "the page"}')
    form.get_by_role("button", name="Create").click()
    expect(flow.locator(".wf-instance h4").first).to_have_text(f"Instance “{new}”")
    expect(flow.locator("pre.wf-params")).to_have_text('{\n  "who": "the page"\n}')
    assert _api(server, "GET", f"/workflows/APPROVALS/instances/{new}")["params"] == {
        "who": "the page"
    }
    _advance(server, 0)
    _advance(server, 60_000)
    _refresh(shown)
    expect(flow.locator(".wf-pending li").first).to_contain_text(
        "waits for event “approve” (step “approval”) until "
    )
    expect(flow.locator(".wf-instance-status")).to_have_text("waiting")
    event = flow.locator("form.wf-event")
    event.get_by_label("event type").fill("approve")
    event.get_by_label("event payload").fill('{"answer": "yes"}')
    event.get_by_role("button", name="Send event").click()

    # The page posts the event on its own time: move the (manual) clock until the instance,
    # as the API reports it, has taken the event and finished; only then read the page.
    def completed() -> bool:
        _advance(server, 0)
        return _status(server, new) == "complete"

    poll(completed, timeout=15, what=f"instance {new} to complete after the page sent its event")
    _refresh(shown)
    expect(flow.locator(".wf-instance-status")).to_have_text("complete")
    expect(flow.locator("pre.wf-output")).to_have_text(
        '{\n  "who": "the page",\n  "answer": "yes"\n}'
    )
    done = _api(server, "GET", f"/workflows/APPROVALS/instances/{new}")
    assert done["status"] == "complete" and done["output"]["answer"] == "yes"

    flow.locator('tr.wf-row[data-id="seed-1"]').get_by_role("button", name="Open").click()
    actions = flow.locator(".wf-actions")
    actions.get_by_role("button", name="Pause").click()
    assert dialogs.seen[-1] == "Pause instance “seed-1” of APPROVALS?"
    expect(flow.locator(".wf-instance-status")).to_have_text("paused")
    assert _api(server, "GET", "/workflows/APPROVALS/instances/seed-1")["status"] == "paused"
    actions.get_by_role("button", name="Resume").click()
    expect(flow.locator(".wf-instance-status")).to_have_text("queued")
    dialogs.refuse_next = True
    actions.get_by_role("button", name="Terminate").click()
    assert _api(server, "GET", "/workflows/APPROVALS/instances/seed-1")["status"] == "queued"
    actions.get_by_role("button", name="Terminate").click()
    expect(flow.locator(".wf-instance-status")).to_have_text("terminated")
    actions.get_by_role("button", name="Terminate").click()
    expect(flow.locator(".binding-error").first).to_contain_text(
        "Could not terminate “seed-1”: (instance.cannot_terminate)"
    )
    actions.get_by_role("button", name="Restart").click()
    expect(flow.locator(".wf-instance-status")).to_have_text("queued")
    expect(flow.locator('tr.wf-row[data-id="seed-1"] td').nth(1)).to_have_text("queued")


def _one_line(shown: Page, selector: str) -> None:
    heights = shown.eval_on_selector_all(
        selector, "nodes => nodes.map(n => n.getBoundingClientRect().height)"
    )
    line = shown.eval_on_selector("th", "n => parseFloat(getComputedStyle(n).lineHeight)")
    assert max(heights, default=0) < 2 * line + 12, (selector, heights)


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_durable_views_fit_laptop_widths(
    server: DevServer, page: Callable[..., Page], width: int, tmp_path: Path
) -> None:
    """Every section (an instance opened) sits left of the timeline and takes most of the
    width; no header cell or button wraps; nothing scrolls sideways (screenshots saved)."""
    shown = page(width)
    flow = _panel(shown, "workflows", "APPROVALS")
    flow.locator('tr.wf-row[data-id="seed-0"]').get_by_role("button", name="Open").click()
    expect(flow.locator("table.wf-steps")).to_be_visible()
    timeline = shown.locator("#sidebar").bounding_box()
    assert timeline is not None
    for section in ("queues", "workflows", "ai"):
        expect(shown.locator(f"#bindings-{section}")).to_be_visible()
        for table in shown.locator(f"#bindings-{section} table").all():
            box = table.bounding_box()
            assert box is not None
            assert box["width"] > 0.5 * width, (section, box)
            assert box["x"] + box["width"] <= timeline["x"], (section, box, timeline)
        assert shown.locator(f"#bindings-{section} th").count(), section
        _one_line(shown, f"#bindings-{section} th")
        _one_line(shown, f"#bindings-{section} button")
        shown.locator(f"#bindings-{section}").screenshot(
            path=str(tmp_path / f"{section}-{width}.png")
        )
    assert shown.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shown.screenshot(path=str(tmp_path / f"durable-{width}.png"), full_page=True)
