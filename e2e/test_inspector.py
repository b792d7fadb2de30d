"""The inspector page (``/__doemu/api/``) in a real headless Chromium against a real ``doemu dev``.

A copy of the counter example runs; objects are made through its own HTTP routes (as an app
would), and every assertion is on the page's DOM, cross-checked against the app or the admin
API where the page claims something happened. Waits are Playwright's ``expect`` (polling with a
deadline), never sleeps. The access rules for strangers are proved at the API level in
``tests/test_admin_inspector.py``; here the token flow is driven as a user would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.polling import eventually_sync

from .browser import WITHIN_MS
from .browser import browser as browser  # the fixture: one Debian Chromium for the module
from .harness import DevServer
from .test_chat import _pythonpath
from .test_chat import chat_project as chat_project  # the fixture: a private copy of the example

PAGE_PATH = "/__doemu/api/"
TOKEN = "inspector-e2e-token"


@dataclass
class Inspector:
    """A browser page on the inspector, collecting uncaught script errors (a page that throws
    must fail the test, not just look stuck)."""

    page: Page
    server: DevServer
    errors: list[str] = field(default_factory=list)

    def open(self, suffix: str = "") -> None:
        """Load the page and wait until its event stream is connected (from then on no
        lifecycle event can be missed: the server subscribes before it answers)."""
        self.page.goto(self.server.url + PAGE_PATH + suffix)
        expect(self.page.locator("#stream")).to_have_text("events: connected")

    def row(self, name: str) -> Locator:
        return self.page.locator("#namespaces tr.object", has_text=name)

    def open_object(self, name: str, binding: str = "COUNTER") -> None:
        self.row(name).get_by_role("button", name="Open").click()
        expect(self.page.locator("#object-title")).to_have_text(f"{name} ({binding})")

    def event(self, text: str) -> Locator:
        return self.page.locator("#timeline li.event", has_text=text)


def _app(server: DevServer, method: str, path: str, **kw: Any) -> httpx.Response:
    response = httpx.request(method, server.url + path, timeout=10, **kw)
    response.raise_for_status()
    return response


@pytest.fixture
def server(dev_server: Callable[..., DevServer], counter_project: Path) -> Iterator[DevServer]:
    """The counter example with two objects: ``alpha`` (counter at 2, a KV entry, live) and
    ``beta`` (an alarm an hour away)."""
    started = dev_server(counter_project)
    for _ in range(2):
        _app(started, "POST", "/COUNTER/alpha/incr")
    _app(started, "PUT", "/COUNTER/alpha/kv/colour", content=b"blue <b>&")
    _app(started, "POST", "/COUNTER/beta/alarm", params={"in_ms": "3600000"})
    yield started
    assert "Traceback" not in started.output, started.output


@pytest.fixture
def inspector(browser: Browser, server: DevServer) -> Iterator[Inspector]:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(WITHIN_MS)
        page.on("dialog", lambda dialog: dialog.accept())  # the evict/reset confirmations
        opened = Inspector(page, server)
        page.on("pageerror", lambda error: opened.errors.append(str(error)))
        yield opened
        assert opened.errors == [], opened.errors
    finally:
        context.close()


def test_lists_objects_and_shows_an_objects_kv_and_sql_rows(inspector: Inspector) -> None:
    """The list shows both objects with their state and alarm; opening ``alpha`` shows its KV
    entry (markup in it rendered as text) and its SQL tables' rows."""
    inspector.open()
    expect(inspector.page.locator("#namespaces tr.object")).to_have_count(2)
    expect(inspector.row("alpha").locator("td").nth(2)).to_have_text("live")
    expect(inspector.row("beta").locator("td").nth(3)).not_to_be_empty()  # its alarm time
    inspector.open_object("alpha")
    expect(inspector.page.locator("#kv tr", has_text="colour")).to_contain_text("blue <b>&")
    expect(inspector.page.locator("#kv b")).to_have_count(0)  # text, never markup
    counter = inspector.page.locator('#tables table[data-table="counter"]')
    expect(counter.locator("tr").nth(1)).to_have_text("12")  # id 1, value 2
    expect(inspector.page.locator("#tables h4")).to_have_text(["alarm_log", "boots", "counter"])
    expect(inspector.page.locator("#agent")).to_be_hidden()  # no agent tables in a counter
    inspector.page.fill("#query", "SELECT value * 10 AS tenfold FROM counter")
    inspector.page.get_by_role("button", name="Run query").click()
    expect(inspector.page.locator("#query-result tr").nth(1)).to_have_text("20")


def test_run_now_fires_the_pending_alarm(inspector: Inspector) -> None:
    """``beta``'s alarm is an hour away; "Run now" delivers it: the object's own alarm log gets
    a row, the pending list empties and the timeline shows ``alarm.fired``. (How many times it
    is delivered is the next test's business.)"""
    inspector.open()
    pending = inspector.page.locator("#alarms tr.alarm")
    expect(pending).to_have_count(1)
    expect(pending).to_contain_text("beta")
    pending.get_by_role("button", name="Run now").click()
    expect(inspector.event("alarm.fired COUNTER beta").first).to_be_visible()
    expect(pending).to_have_count(0)
    expect(inspector.row("beta").locator("td").nth(3)).to_be_empty()
    fired = _app(inspector.server, "GET", "/COUNTER/beta/alarms").json()
    assert fired and fired[0]["retry_count"] == 0, fired


def test_run_now_delivers_the_alarm_once(server: DevServer) -> None:
    """The admin API's ``alarm/run`` on a real server, no browser: one delivery, one row. (At
    power durability the commit that brings the alarm forward is mirrored after its fsync, and
    its timer used to start a second delivery beside run-now's.)"""
    _app(server, "POST", "/__doemu/api/objects/COUNTER/beta/alarm/run", json={})
    eventually_sync(
        lambda: _app(server, "GET", "/COUNTER/beta/alarms").json(), what="the alarm to run"
    )
    # A second delivery would be an armed (pending) alarm until it ran: wait until nothing is
    # pending anywhere before counting. Due alarms start before any later event (the server
    # preempts for them), so the read below comes after any delivery that was still due.

    def nothing_pending() -> bool:
        health = _app(server, "GET", "/__doemu/api/health").json()
        beta = _app(server, "GET", "/__doemu/api/objects/COUNTER/beta/alarm").json()
        return health["pending_alarms"] == 0 and beta["scheduled_time"] is None

    eventually_sync(nothing_pending, what="no alarm pending")
    fired = _app(server, "GET", "/COUNTER/beta/alarms").json()
    assert len(fired) == 1, fired


def test_evict_and_reset_change_the_state_shown(inspector: Inspector) -> None:
    """Evict (confirmed) turns ``alpha`` from live to evicted, as the admin API agrees; after
    the app wakes it again, Reset drops it and the timeline shows both events."""
    inspector.open()
    state = inspector.row("alpha").locator("td").nth(2)
    expect(state).to_have_text("live")
    inspector.open_object("alpha")
    inspector.page.get_by_role("button", name="Evict").click()
    expect(state).to_have_text("evicted")
    expect(inspector.event("evicted COUNTER alpha")).to_have_count(1)
    listed = httpx.get(inspector.server.url + "/__doemu/api/objects").json()
    assert {o["name"]: o["state"] for o in listed}["alpha"] == "evicted", listed
    _app(inspector.server, "POST", "/COUNTER/alpha/incr")  # wakes it: a "constructed" event
    expect(state).to_have_text("live")
    inspector.page.get_by_role("button", name="Reset").click()
    expect(inspector.event(" reset COUNTER alpha")).to_have_count(1)
    expect(state).to_have_text("evicted")
    expect(inspector.page.locator('#tables table[data-table="counter"] tr').nth(1)).to_have_text(
        "13"
    )


def test_the_timeline_shows_events_as_they_happen(inspector: Inspector) -> None:
    """With the page open, the app creates ``gamma``: its ``constructed`` event appears on the
    timeline and the object in the list, without a reload."""
    inspector.open()
    expect(inspector.page.locator("#namespaces tr.object")).to_have_count(2)
    _app(inspector.server, "POST", "/COUNTER/gamma/incr")
    expect(inspector.event("constructed COUNTER gamma")).to_have_count(1)
    expect(inspector.row("gamma")).to_have_count(1)
    _app(inspector.server, "POST", "/__doemu/api/objects/COUNTER/gamma/evict", json={})
    expect(inspector.event("evicted COUNTER gamma")).to_have_count(1)
    expect(inspector.row("gamma").locator("td").nth(2)).to_have_text("evicted")


def test_with_an_admin_token_the_page_asks_for_it_and_keeps_it_out_of_the_address(
    browser: Browser, dev_server: Callable[..., DevServer], counter_project: Path
) -> None:
    """Started with ``--admin-token``: the page opened bare asks for the token (the API said
    401); opened with ``#token=…`` it lists the objects, streams events, and the token is gone
    from the address bar and from the document."""
    server = dev_server(counter_project, "--admin-token", TOKEN)
    _app(server, "POST", "/COUNTER/alpha/incr")
    assert httpx.get(server.url + "/__doemu/api/objects").status_code == 401
    context = browser.new_context()
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.url + PAGE_PATH)
        expect(page.locator("#token-form")).to_be_visible()
        page.fill("#token", TOKEN)
        page.get_by_role("button", name="Use token").click()
        expect(page.locator("#namespaces tr.object")).to_have_count(1)
        expect(page.locator("#stream")).to_have_text("events: connected")

        fresh = context.new_page()  # a new tab: its own sessionStorage, the token in the URL
        fresh.on("pageerror", lambda error: errors.append(str(error)))
        fresh.goto(f"{server.url}{PAGE_PATH}#token={TOKEN}")
        expect(fresh.locator("#namespaces tr.object")).to_have_count(1)
        expect(fresh.locator("#stream")).to_have_text("events: connected")
        assert fresh.url == server.url + PAGE_PATH
        assert TOKEN not in fresh.content()
        _app(server, "POST", "/COUNTER/delta/incr")
        expect(
            fresh.locator("#timeline li.event", has_text="constructed COUNTER delta")
        ).to_have_count(1)
        assert errors == [], errors
    finally:
        context.close()
    assert TOKEN not in server.output


def test_an_agents_state_fibers_and_chat_transcript_are_shown(
    browser: Browser, dev_server: Callable[..., DevServer], chat_project: Path
) -> None:
    """The chat example: a turn sent from its own page, then the inspector opens that agent and
    shows the agent section from its tables (the transcript as the chat page showed it, the
    state, the schedules and fibers tables) alongside the raw SQL tables."""
    server = dev_server(chat_project, env=_pythonpath())
    context = browser.new_context()
    try:
        chat = context.new_page()
        chat.goto(f"{server.url}/?chat=inspected")
        expect(chat.locator("#status")).to_have_text('chat "inspected"')
        chat.fill("#text", "hi")
        chat.get_by_role("button", name="Send").click()
        expect(chat.locator("#log > div")).to_have_text(["hi", "Hello, world"])

        inspector = Inspector(context.new_page(), server)
        inspector.page.on("pageerror", lambda error: inspector.errors.append(str(error)))
        inspector.open()
        inspector.open_object("inspected", "ChatAgent")
        expect(inspector.page.locator("#agent")).to_be_visible()
        expect(inspector.page.locator("#transcript li")).to_have_text(
            ["user: hi", "assistant: Hello, world"]
        )
        expect(inspector.page.locator("#agent-schedules")).to_contain_text("(none)")
        expect(inspector.page.locator("#agent-fibers th").first).not_to_have_text(
            "(no cf_agents_runs table)"
        )
        tables = inspector.page.locator("#tables h4")
        expect(tables.filter(has_text="cf_ai_chat_agent_messages")).to_have_count(1)
        assert inspector.errors == [], inspector.errors
    finally:
        context.close()
    assert "Traceback" not in server.output, server.output
