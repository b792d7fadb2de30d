"""``examples/agent_server``'s page in a real Chromium, against a real ``doemu dev`` of the example.

What a newcomer following the example's README sees, checked on the page's DOM: a copy of the
example runs under ``doemu dev`` with ``.dev.vars`` pointing at a :class:`FakeLLM` in this process
(the demo responder of ``python -m doemu.testing.fake_providers --demo``, with a scripted reply
where a test needs to hold a run still), and Debian's Chromium drives the page. Waits are
Playwright's ``expect``/``wait_for_function`` and :func:`eventually_sync`: polls with deadlines.

* a reply streams onto the page while the run is still going; a reload mid-run restores it from
  ``/snapshot`` + ``/history`` and reads on from ``streamSequence + 1``: the whole text, once;
* an "approve" message shows Approve/Reject; the session's object is evicted (admin API) while
  it waits; Approve continues the run to "Approved: …", Reject to "Not approved.";
* tool calls and a sub-agent's section are shown; a SIGKILLed server leaves the run
  interrupted, the page reconnects by itself and Resume finishes the answer;
* the Worker's routing: bad session ids and unknown routes are JSON 4xx, the WebSocket is
  forwarded, the page carries its Content-Security-Policy.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect
from websockets.sync.client import connect

from doemu.testing.devserver import DevServer, DevServerFactory
from doemu.testing.fake_providers import FakeLLM, Reply, Text
from doemu.testing.fake_providers.__main__ import demo_responder
from tests.polling import eventually_sync

from .agent_server_fixtures import ROOT, copy_app, openai_vars
from .browser import WITHIN_MS
from .browser import browser as browser  # the fixture: one Debian Chromium for the module

EXAMPLE = ROOT / "examples" / "agent_server"

#: The page's own text of one turn's answer: the ``.text`` spans of its ``.assistant`` block
#: (tool calls and sub-agent sections are elements of their own), exactly as the DOM holds it.
OWN_TEXT = """(index) => {
  const turns = document.querySelectorAll("#log > .turn");
  const turn = turns[index < 0 ? turns.length + index : index];
  if (!turn) return null;
  return [...turn.querySelectorAll(":scope > .assistant > .text")]
    .map((span) => span.textContent).join("");
}"""


def demo_words(question: str) -> list[str]:
    """The deltas the demo model streams for ``question``, one word each."""
    reply = demo_responder("chat", {"messages": [{"role": "user", "content": question}]})
    assert reply is not None
    return [delta for item in reply.items if isinstance(item, Text) for delta in item.chunks]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key", responder=demo_responder) as server:
        yield server


@pytest.fixture
def server(tmp_path: Path, doemu_dev: DevServerFactory, llm: FakeLLM) -> Iterator[DevServer]:
    """A copy of the example under ``doemu dev``; no traceback may appear in its log."""
    project = copy_app(EXAMPLE, tmp_path / "agent_server", openai_vars(llm))
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    started = doemu_dev(project, env={"PYTHONPATH": path})
    yield started
    assert "Traceback" not in started.output, started.output


class AgentPage:
    """The example's page in a fresh browser context, failing on any uncaught script error."""

    def __init__(self, page: Page, server: DevServer) -> None:
        self.page = page
        self.server = server
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.set_default_timeout(WITHIN_MS)

    @property
    def status(self) -> Locator:
        return self.page.locator("#status")

    @property
    def session_id(self) -> str:
        return self.page.url.split("#", 1)[1]

    def open(self) -> None:
        self.page.goto(f"{self.server.url}/")
        expect(self.page.locator("#session")).to_have_text("(none yet: send a message)")

    def send(self, text: str) -> None:
        self.page.fill("#text", text)
        self.page.get_by_role("button", name="Send").click()

    def answer(self, index: int = -1) -> Locator:
        return self.page.locator("#log > .turn").nth(index).locator(".assistant")

    def own_text(self, index: int = -1) -> str | None:
        text: str | None = self.page.evaluate(OWN_TEXT, index)
        return text

    def wait_for_text(self, text: str, index: int = -1) -> None:
        """Until the answer's own text is exactly ``text`` (Playwright polls, with a deadline)."""
        self.page.wait_for_function(f"(want) => ({OWN_TEXT})({index}) === want", arg=text)

    def api(self, path: str) -> Any:
        url = f"{self.server.url}/api/sessions/{self.session_id}{path}"
        return httpx.get(url, timeout=10).json()


@pytest.fixture
def agent_page(browser: Browser, server: DevServer) -> Iterator[AgentPage]:
    context = browser.new_context()
    try:
        page = AgentPage(context.new_page(), server)
        yield page
        assert page.errors == [], page.errors
    finally:
        context.close()


def test_a_reply_streams_live_and_a_reload_mid_run_restores_it_once(
    agent_page: AgentPage, llm: FakeLLM
) -> None:
    """1. Send a question; the model holds after 8 words: they are on the page while the run
    is running (it cannot end while held).  2. Reload: the session id is in the address, and the
    page shows the same 8 words (snapshot + history: nothing new can have streamed).  3. Let the
    model go on: the page reads on from ``streamSequence + 1`` to the end — the whole answer,
    each word once, as the session's ``/status`` has it."""
    words = demo_words("tell me about otters")
    llm.script(Reply(Text(*words), hold_after=8, delay_ms=20))
    agent_page.open()
    agent_page.send("tell me about otters")
    agent_page.wait_for_text("".join(words[:8]))
    expect(agent_page.status).to_have_text("running…")
    session = agent_page.session_id
    assert session.startswith("s-") and agent_page.api("/status")["status"] == "active"

    agent_page.page.reload()
    expect(agent_page.page.locator("#session")).to_have_text(session)
    agent_page.wait_for_text("".join(words[:8]))
    expect(agent_page.page.locator("#log > .turn > .user")).to_have_text(["tell me about otters"])
    expect(agent_page.status).to_have_text("running…")

    llm.release()
    expect(agent_page.status).to_have_text("completed")
    assert agent_page.own_text() == "".join(words)
    assert agent_page.api("/status")["output"] == "".join(words)
    expect(agent_page.page.locator("#log > .turn")).to_have_count(1)


def test_approve_after_an_eviction_continues_the_run_and_reject_says_no(
    agent_page: AgentPage, server: DevServer
) -> None:
    """1. "approve the deploy": the model asks the ``approve`` client tool; the run suspends and
    the page shows Approve/Reject, again after a reload.  2. The session's object is evicted
    (admin API) while it waits.  3. Approve: the result is posted, the run continues in a fresh
    instance of the object and the page follows it to "Approved: approve the deploy."
    4. A second request in the same session, rejected: "Not approved."."""
    agent_page.open()
    agent_page.send("approve the deploy")
    expect(agent_page.status).to_have_text("waiting for your approval")
    expect(agent_page.page.locator("#approvals")).to_contain_text("Approve: approve the deploy?")
    agent_page.page.reload()  # the question is the session's, not the page's: it is asked again
    expect(agent_page.status).to_have_text("waiting for your approval")
    expect(agent_page.page.locator("#approvals")).to_contain_text("Approve: approve the deploy?")
    name = quote(f"session:{agent_page.session_id}", safe="")
    evicted = httpx.post(f"{server.url}/__doemu/api/objects/AGENTS/{name}/evict", timeout=10)
    assert evicted.json()["evicted"] is True, evicted.text  # it was live, and now it is not

    agent_page.page.get_by_role("button", name="Approve").click()
    expect(agent_page.status).to_have_text("completed")
    expect(agent_page.page.locator("#approvals button")).to_have_count(0)
    lead = "I need your approval before I do that. "
    approved = "Approved: approve the deploy. Consider it done, in this demo at least."
    assert agent_page.own_text() == lead + approved
    expect(agent_page.answer().locator(".tool[data-tool=approve] .result")).to_have_text(
        ' → {"approved":true}'
    )

    agent_page.send("approve the refund")
    agent_page.page.get_by_role("button", name="Reject").click()
    expect(agent_page.status).to_have_text("completed")
    assert agent_page.own_text() == lead + "Not approved. Nothing was done."
    assert agent_page.own_text(0) == lead + approved  # the first turn, as it was


def test_tools_and_a_sub_agent_are_shown_and_resume_finishes_a_killed_run(
    agent_page: AgentPage, server: DevServer, llm: FakeLLM
) -> None:
    """1. "count these four words": the ``word_count`` call and its result are shown.
    2. "summarize …": the ``summarize`` sub-agent's section shows its own streamed answer.
    3. A run held after 6 words, then ``doemu dev`` is SIGKILLed and restarted: the page
    reconnects by itself, says the run was interrupted and offers Resume; Resume finishes the
    answer — the 6 words stored before the kill, then the rest, each once."""
    agent_page.open()
    agent_page.send("count these four words")
    expect(agent_page.status).to_have_text("completed")
    expect(agent_page.answer().locator(".tool[data-tool=word_count] .result")).to_have_text(
        ' → {"words":4}'
    )
    assert agent_page.own_text() == (
        "Let me count the words. That message has 4 words, by the word_count tool's count."
    )
    agent_page.send("summarize otters are playful")
    expect(agent_page.status).to_have_text("completed")
    section = agent_page.answer().locator(".subagent")
    expect(section).to_contain_text("sub-agent summarizer (done)")
    expect(section.locator(".body")).to_have_text("In short: summarize otters are playful.")
    assert agent_page.own_text() == (
        "Let me ask the summarizer. The summarizer says: In short: summarize otters are playful."
    )

    words = demo_words("tell me about badgers")
    llm.script(Reply(Text(*words), hold_after=6))
    agent_page.send("tell me about badgers")
    agent_page.wait_for_text("".join(words[:6]))
    server.restart()  # SIGKILL, then the same state on the same port
    expect(agent_page.status).to_have_text("interrupted: the process running this session stopped")
    agent_page.page.get_by_role("button", name="Resume").click()
    expect(agent_page.status).to_have_text("completed")
    assert agent_page.own_text() == "".join(words)
    eventually_sync(lambda: agent_page.api("/status")["status"] == "completed", what="completed")


START = {"agentType": "researcher", "input": {"message": "hi"}}


def test_the_worker_routes_sessions_and_refuses_what_it_cannot_use(
    server: DevServer, llm: FakeLLM
) -> None:
    """The Worker in front of the objects: JSON 4xx for a bad session id, an unknown route, a
    body naming another session, a non-upgrade ``/ws``; the page's security headers; a run's
    stream over the forwarded WebSocket."""
    base = f"{server.url}/api/sessions"
    refusals = [
        ("GET", f"{base}/bad%20id/status", None, 400, "BAD_SESSION_ID"),
        ("GET", f"{base}/{'x' * 65}/status", None, 400, "BAD_SESSION_ID"),
        ("GET", f"{base}/ok/", None, 404, "NOT_FOUND"),
        ("GET", f"{server.url}/elsewhere", None, 404, "NOT_FOUND"),
        ("GET", f"{base}/ok/ws", None, 426, "UPGRADE_REQUIRED"),
        ("POST", f"{base}/ok/start", {**START, "sessionId": "other"}, 400, "SESSION_MISMATCH"),
        ("POST", f"{base}/ok/start", {**START, "agentType": "nobody"}, 404, "AGENT_NOT_FOUND"),
    ]
    for method, url, body, status, code in refusals:
        response = httpx.request(method, url, json=body, timeout=10)
        assert (response.status_code, response.json()["code"]) == (status, code), response.text
    page = httpx.get(f"{server.url}/", timeout=10)
    assert "script-src 'sha256-" in page.headers["content-security-policy"]
    assert page.headers["content-type"].startswith("text/html")

    llm.script(Reply(Text("over ", "the ", "socket")))
    started = httpx.post(f"{base}/ws1/start", json=START, timeout=10)
    assert started.json()["status"] == "started", started.text
    eventually_sync(
        lambda: httpx.get(f"{base}/ws1/status", timeout=10).json()["status"] == "completed",
        what="the run to complete",
    )

    events: list[dict[str, Any]] = []
    with connect(f"{server.ws_url}/api/sessions/ws1/ws?fromSequence=0", open_timeout=10) as ws:
        while not events or events[-1]["type"] != "end":
            events.append(json.loads(ws.recv(timeout=10)))
    assert [e["sequence"] for e in events[:-1]] == list(range(len(events) - 1))
    deltas = [e["chunk"]["delta"] for e in events if e.get("chunk", {}).get("type") == "text_delta"]
    assert "".join(deltas) == "over the socket" and events[-1]["finalOutput"] == "over the socket"
