"""The inspector's views in a real headless Chromium: its layout at common laptop widths, paging,
sorting, schemas, readable times, failed queries, the timeline's requests and log lines, empty
states, and the page at ``/__doemu/``.

Before: at 1280-1440 px the objects table was squeezed to ~330 px (headers and buttons wrapping
letter by letter); tables stopped at 200 rows without saying so; epoch-ms values were raw; a
failed query left the old result on screen (with advice to send ``"write": true`` for a read);
the timeline had no requests or logs; empty tables showed nothing. Layout is asserted on the
rendered geometry, and each width's screenshot is saved beside the test's files (and was looked
at when this was written).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from .browser import WITHIN_MS
from .browser import browser as browser  # the fixture: one Debian Chromium for the module
from .harness import DevServer

ALPHA = "alpha-with-a-rather-long-name"
BOOT_MS = 1_000_000_000_700  # 2001-09-09T01:46:40.700Z, an epoch-ms time in the `at` column


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DevServer]:
    """One counter example for the module: 14 objects, one with 230 KV entries and 206 rows
    in ``boots``, one with an alarm an hour away."""
    import shutil

    from .conftest import COUNTER

    root = tmp_path_factory.mktemp("views")
    project = root / "counter"
    shutil.copytree(COUNTER, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    started = DevServer(project, root / "state").start()
    try:
        with httpx.Client(base_url=started.url, timeout=10) as http:
            for n in range(12):
                http.post(f"/COUNTER/obj-{n:02d}/incr").raise_for_status()
            http.post(f"/COUNTER/{ALPHA}/incr").raise_for_status()
            http.post("/COUNTER/beta/alarm", params={"in_ms": "3600000"}).raise_for_status()
            for k in range(230):
                http.put(
                    f"/__doemu/api/objects/COUNTER/{ALPHA}/kv/key-{k:03d}", json={"value": k}
                ).raise_for_status()
            http.post(
                f"/__doemu/api/objects/COUNTER/{ALPHA}/sql",
                json={
                    "query": "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n "
                    "WHERE i < 204) INSERT INTO boots (at) SELECT ? + i FROM n",
                    "params": [BOOT_MS],
                    "write": True,
                },
            ).raise_for_status()
        yield started
    finally:
        started.kill()


@pytest.fixture
def page(browser: Browser) -> Iterator[Callable[..., Page]]:
    contexts: list[Any] = []
    errors: list[str] = []

    def open_page(server: DevServer, width: int = 1280, path: str = "/__doemu/") -> Page:
        context = browser.new_context(viewport={"width": width, "height": 900})
        contexts.append(context)
        new = context.new_page()
        new.set_default_timeout(WITHIN_MS)
        new.on("pageerror", lambda error: errors.append(str(error)))
        new.on("dialog", lambda dialog: dialog.accept())
        new.goto(server.url + path)
        expect(new.locator("#stream")).to_have_text("events: connected")
        expect(new.locator("#namespaces tr.object").first).to_be_visible()
        return new

    yield open_page
    for context in contexts:
        context.close()
    assert errors == [], errors


def _box(page: Page, selector: str) -> dict[str, float]:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_layout_fits_laptop_widths(
    server: DevServer, page: Callable[..., Page], width: int, tmp_path: Path
) -> None:
    """The objects table takes the width left of the timeline; no header cell or button
    wraps; nothing scrolls sideways."""
    shown = page(server, width)
    table = _box(shown, "#namespaces table")
    timeline = _box(shown, "#sidebar")
    assert table["width"] > 0.55 * width, table
    assert table["x"] + table["width"] <= timeline["x"], (table, timeline)
    heights = shown.eval_on_selector_all(
        "#namespaces th, #namespaces button",
        "nodes => nodes.map(n => n.getBoundingClientRect().height)",
    )
    line = shown.eval_on_selector(
        "#namespaces th", "n => parseFloat(getComputedStyle(n).lineHeight)"
    )
    assert max(heights) < 2 * line + 12, heights  # one line each (padding and borders aside)
    assert shown.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shown.screenshot(path=str(tmp_path / f"inspector-{width}.png"))
    shown.locator("#namespaces tr.object", has_text=ALPHA).get_by_role(
        "button", name="Open"
    ).click()
    expect(shown.locator('#tables table[data-table="boots"]')).to_be_visible()
    kv = _box(shown, "#kv")
    assert kv["width"] > 0.55 * width, kv
    shown.screenshot(path=str(tmp_path / f"inspector-object-{width}.png"))


def test_paging_sorting_counts_schema_and_readable_times(
    server: DevServer, page: Callable[..., Page]
) -> None:
    shown = page(server)
    rows = shown.locator("#namespaces tr.object")
    expect(rows).to_have_count(14)
    shown.locator("#namespaces th", has_text="name").click()  # sort by name, ascending
    expect(rows.first.locator("td").first).to_have_text(ALPHA)
    shown.locator("#namespaces th", has_text="name").click()  # and descending
    expect(rows.first.locator("td").first).to_have_text("obj-11")

    shown.locator("#namespaces tr.object", has_text=ALPHA).get_by_role(
        "button", name="Open"
    ).click()
    expect(shown.locator("#kv-count")).to_have_text("(200 of 230 entries)")
    expect(shown.locator("#kv tr")).to_have_count(201)
    shown.locator("#kv-pager").get_by_role("button", name="Next").click()
    expect(shown.locator("#kv tr")).to_have_count(31)
    expect(shown.locator("#kv tr").nth(1)).to_have_text("key-200200")
    expect(shown.locator("#kv-pager .range")).to_have_text("201–230 of 230")

    boots = shown.locator('.sql-table[data-name="boots"]')
    expect(boots.locator(".count")).to_have_text("(200 of 206 rows)")
    expect(boots.locator(".pager .range")).to_have_text("1–200 of 206")
    boots.locator(".pager").get_by_role("button", name="Next").click()
    expect(boots.locator("table tr")).to_have_count(7)
    expect(boots.locator("details.schema pre")).to_have_text("CREATE TABLE boots (at REAL)")
    boots.locator("th", has_text="at").click()  # ORDER BY at: the first page again, sorted
    first = boots.locator("table tr").nth(1).locator("time")
    expect(first).to_have_attribute("title", f"{BOOT_MS} ms · 2001-09-09T01:46:40.700Z")
    expect(first).to_have_text(
        shown.evaluate(f"""(() => {{
      const d = new Date({BOOT_MS}), p = (n, w) => String(n).padStart(w || 2, "0");
      return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " +
        p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()) + ".700";
    }})()""")
    )
    counter = shown.locator('.sql-table[data-name="counter"] table tr').nth(1)
    expect(counter).to_have_text("11")  # small integers stay numbers


def test_a_failed_query_clears_the_old_result_and_says_why(
    server: DevServer, page: Callable[..., Page]
) -> None:
    shown = page(server)
    shown.locator("#namespaces tr.object", has_text=ALPHA).get_by_role(
        "button", name="Open"
    ).click()
    shown.fill("#query", "SELECT value * 10 AS tenfold FROM counter")
    shown.get_by_role("button", name="Run query").click()
    expect(shown.locator("#query-result tr").nth(1)).to_have_text("10")
    shown.fill("#query", "SELECT nope FROM counter")
    shown.get_by_role("button", name="Run query").click()
    expect(shown.locator("#query-error")).to_have_text("The query failed: no such column: nope")
    expect(shown.locator("#query-result tr")).to_have_count(0)
    shown.fill("#query", "ATTACH DATABASE ':memory:' AS other")  # refused, and not a write
    shown.get_by_role("button", name="Run query").click()
    expect(shown.locator("#query-error")).to_contain_text("read-only SQL cannot run")
    expect(shown.locator("#query-error")).not_to_contain_text("write")
    shown.fill("#query", "DELETE FROM counter")  # a write: the checkbox is the advice
    shown.get_by_role("button", name="Run query").click()
    expect(shown.locator("#query-error")).to_contain_text("Tick “write” to run it inside")


def test_the_timeline_shows_requests_and_log_lines(
    server: DevServer, page: Callable[..., Page]
) -> None:
    shown = page(server)
    expect(shown.locator("#timeline li.placeholder")).to_be_visible()
    httpx.get(f"{server.url}/COUNTER/obj-03/value").raise_for_status()
    httpx.post(f"{server.url}/COUNTER/obj-03/echo", content=b"{not json")  # a 500, logged
    timeline = shown.locator("#timeline")
    expect(timeline.locator("li.request", has_text="GET /COUNTER/obj-03/value 200")).to_have_count(
        1
    )
    expect(timeline.locator("li.request", has_text="POST /COUNTER/obj-03/echo 500")).to_have_count(
        1
    )
    logged = timeline.locator("li.log", has_text="POST /COUNTER/obj-03/echo answered 500")
    expect(logged).to_have_count(1)
    expect(timeline.locator("li", has_text="/__doemu/api")).to_have_count(0)  # its own calls
    shown.uncheck("#show-requests")
    expect(timeline.locator("li.request").first).to_be_hidden()
    expect(logged).to_be_visible()


def test_empty_lists_say_so(
    dev_server: Callable[..., DevServer], counter_project: Path, page: Callable[..., Page]
) -> None:
    fresh = dev_server(counter_project)
    httpx.post(f"{fresh.url}/COUNTER/lonely/incr").raise_for_status()
    shown = page(fresh)
    expect(shown.locator("#alarms td.empty")).to_have_text("no pending alarms")
    shown.get_by_role("button", name="Open").click()
    expect(shown.locator("#kv td.empty")).to_have_text("no KV entries")
    alarm_log = shown.locator('.sql-table[data-name="alarm_log"]')
    expect(alarm_log.locator("td.empty")).to_have_text("(empty table)")
    expect(alarm_log.locator(".count")).to_have_text("(0 rows)")
