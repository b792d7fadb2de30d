"""The inspector's bindings views in a real headless Chromium against a real ``doemu dev``.

The project (``e2e/apps/inspector_bindings_app``) has one binding of each kind: a Durable
Object, a KV namespace, a D1 database with migrations, an R2 bucket, two cron triggers with a
``scheduled()`` that records each run in KV, a service binding and an assets directory. The
server runs with ``--admin-token`` (so every call of the page, downloads included, must carry
it) and ``--clock manual`` (so the crons' next runs hold still until a test moves the clock).
Each section is compared with what the admin API answers; each action is checked on the page
and through the API (or the file it downloaded). Waits are Playwright's ``expect`` (polling with
a deadline), never sleeps.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from .browser import Dialogs, inspector_pages
from .browser import browser as browser  # the fixture: one Debian Chromium for the module
from .harness import DevServer

APP = Path(__file__).resolve().parent / "apps" / "inspector_bindings_app"
TOKEN = "inspector-bindings-token"
API = "/__doemu/api"
ITEMS = 230
README = b"hello from the readme\n"
LOGO = bytes(range(256)) * 5


def _api(server: DevServer, method: str, path: str, **kw: Any) -> Any:
    headers = {"authorization": f"Bearer {TOKEN}"}
    response = httpx.request(method, server.url + API + path, headers=headers, timeout=10, **kw)
    response.raise_for_status()
    return response.json()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the app (the D1 test adds a migration file to it)."""
    target = tmp_path_factory.mktemp("inspector-bindings") / "app"
    shutil.copytree(APP, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    return target


@pytest.fixture(scope="module")
def server(project: Path) -> Iterator[DevServer]:
    """The app, seeded: 230 ``item-…`` KV keys and a ``profile`` with metadata and an
    expiration, the first migration applied and three orders, three R2 objects (one under a
    deeper prefix), and a Durable Object."""
    started = DevServer(
        project, project.parent / "state", args=["--clock", "manual", "--admin-token", TOKEN]
    ).start()
    try:
        with httpx.Client(base_url=started.url, timeout=10) as http:
            http.get("/notes/first").raise_for_status()
            for path, body in (
                ("/r2/docs/readme.txt?type=text/plain&author=ada", README),
                ("/r2/docs/img/logo.png?type=image/png", LOGO),
                ("/r2/top.bin", b"\x00\x01"),
            ):
                http.put(path, content=body).raise_for_status()
        for n in range(ITEMS):
            _api(started, "PUT", f"/kv/CACHE/keys/item-{n:03d}", json={"value": f"v{n}"})
        _api(
            started,
            "PUT",
            "/kv/CACHE/keys/profile",
            json={"value": '{"name": "Ada"}', "metadata": {"owner": "ada"}, "expirationTtl": 3600},
        )
        _api(started, "POST", "/d1/DB/migrations/apply")
        _api(
            started,
            "POST",
            "/d1/DB/sql",
            json={
                "query": "INSERT INTO orders (item, placed_at) VALUES ('tea', 1), ('cake', 2), "
                "('jam', 3)",
                "write": True,
            },
        )
        yield started
    finally:
        started.kill()


@pytest.fixture
def dialogs() -> Dialogs:
    return Dialogs()


@pytest.fixture
def page(browser: Browser, server: DevServer, dialogs: Dialogs) -> Iterator[Callable[..., Page]]:
    with inspector_pages(browser, server.url, TOKEN, dialogs, "#bindings-kv .binding") as open_page:
        yield open_page


def _kv(shown: Page) -> Locator:
    return shown.locator('#bindings-kv .binding[data-binding="CACHE"]')


def _d1(shown: Page) -> Locator:
    return shown.locator('#bindings-d1 .binding[data-binding="DB"]')


def _r2(shown: Page) -> Locator:
    return shown.locator('#bindings-r2 .binding[data-binding="FILES"]')


def _filter(kv: Locator, prefix: str) -> None:
    kv.locator("form.kv-filter input").fill(prefix)
    kv.get_by_role("button", name="Filter").click()


def test_each_section_shows_what_the_api_returns(
    server: DevServer, page: Callable[..., Page]
) -> None:
    """1. KV: the keys 200 to a page, "N of M" as the API counts them, a prefix filter, the
       next page through the API's cursor, an entry's value, metadata and expiration.
    2. D1: the tables with their row counts and schema; the migrations as the API lists them.
    3. R2: the count and bytes, the top level with its "docs/" prefix, one level down with an
       object's size, etag, upload time and metadata, and back up.
    4. Crons: each trigger with its next run (the API's epoch ms in the tooltip) and the
       doemu clock's now. 5. Services and assets as /bindings has them."""
    shown = page()
    kv = _kv(shown)
    total = _api(server, "GET", "/kv/CACHE/keys")["count"]
    expect(kv.locator("h3 .count")).to_have_text(f"(200 of {total} keys)")
    expect(kv.locator("h3 .resource")).to_have_text("kv inspector-cache")
    expect(kv.locator("tr.kv-key")).to_have_count(200)
    _filter(kv, "item-")
    expect(kv.locator("h3 .count")).to_have_text(f"(200 of {ITEMS} keys with prefix “item-”)")
    expect(kv.locator(".pager .range")).to_have_text(f"1–200 of {ITEMS}")
    kv.locator(".pager").get_by_role("button", name="Next").click()
    expect(kv.locator(".pager .range")).to_have_text(f"201–{ITEMS} of {ITEMS}")
    expect(kv.locator("tr.kv-key")).to_have_count(ITEMS - 200)
    expect(kv.locator("tr.kv-key").first.locator("td").first).to_have_text("item-200")
    _filter(kv, "nothing-has-this-prefix")
    expect(kv.locator("td.empty")).to_have_text("no keys with prefix “nothing-has-this-prefix”")
    _filter(kv, "profile")
    kv.locator('tr.kv-key[data-key="profile"]').get_by_role("button", name="Show").click()
    entry = _api(server, "GET", "/kv/CACHE/keys/profile")
    expect(kv.locator("pre.kv-value")).to_have_text('{"name": "Ada"}')
    expect(kv.locator("pre.kv-metadata")).to_have_text('{\n  "owner": "ada"\n}')
    expiration = kv.locator(".kv-expiration time")
    expect(expiration).to_have_attribute(
        "title", f"{entry['expiration']} s · " + _iso(shown, entry["expiration"] * 1000)
    )
    row = kv.locator('tr.kv-key[data-key="profile"] td')
    expect(row.nth(2)).to_have_text('{"owner":"ada"}')

    d1 = _d1(shown)
    expect(d1.locator("h3 .resource")).to_have_text("d1 inspector-db-id · inspector-db")
    orders = d1.locator('tr.d1-table[data-table="orders"] td')
    expect(orders.nth(1)).to_have_text(
        str(
            _api(server, "POST", "/d1/DB/sql", json={"query": "SELECT count(*) FROM orders"})[
                "rows"
            ][0][0]
        )
    )
    expect(orders.nth(2).locator("pre")).to_have_text(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, placed_at INTEGER "
        "NOT NULL)"
    )
    state = _api(server, "GET", "/d1/DB/migrations")
    expect(d1.locator("tr.d1-migration.applied")).to_have_count(len(state["applied"]))
    expect(d1.locator("tr.d1-migration.pending")).to_have_count(len(state["pending"]))
    first = state["applied"][0]
    expect(d1.locator('tr.d1-migration[data-name="0001_orders.sql"] td')).to_have_text(
        ["0001_orders.sql", "applied", first["applied_at"]]
    )
    expect(d1.locator(".d1-folder")).to_have_text(f"folder {state['folder']}")

    r2 = _r2(shown)
    expect(r2.locator("h3 .count")).to_have_text(
        f"(3 objects, {_size(len(README) + len(LOGO) + 2)})"
    )
    expect(r2.locator("tr.r2-prefix")).to_have_attribute("data-prefix", "docs/")
    expect(r2.locator("tr.r2-object")).to_have_count(1)
    expect(r2.locator("tr.r2-object td").first).to_have_text("top.bin")
    r2.locator('tr.r2-prefix[data-prefix="docs/"]').get_by_role("button", name="Open").click()
    expect(r2.locator("h3 .count")).to_have_text(
        f"(2 objects, {_size(len(README) + len(LOGO))} under “docs/”)"
    )
    meta = _api(server, "GET", f"/r2/FILES/objects/{quote('docs/readme.txt', safe='')}")
    cells = r2.locator('tr.r2-object[data-key="docs/readme.txt"] td')
    expect(cells.nth(1).locator("span")).to_have_attribute("title", f"{len(README)} bytes")
    expect(cells.nth(2)).to_have_attribute("title", meta["etag"])
    expect(cells.nth(2)).to_have_text(meta["etag"][:8] + "…")
    expect(cells.nth(3).locator("time")).to_have_attribute(
        "title", f"{meta['uploaded']} ms · " + _iso(shown, meta["uploaded"])
    )
    expect(cells.nth(4)).to_have_text('{"contentType":"text/plain"}')
    expect(cells.nth(5)).to_have_text('{"author":"ada"}')
    expect(r2.locator("tr.r2-prefix")).to_have_attribute("data-prefix", "docs/img/")
    r2.locator(".r2-path").get_by_role("button", name="(top)").click()
    expect(r2.locator("tr.r2-object td").first).to_have_text("top.bin")

    crons = _api(server, "GET", "/crons")
    section = shown.locator("#bindings-crons")
    for trigger in crons["crons"]:
        nxt = section.locator(f'tr.cron[data-cron="{trigger["cron"]}"] .cron-next time')
        expect(nxt).to_have_attribute(
            "title", f"{round(trigger['next'])} ms · " + _iso(shown, trigger["next"])
        )
    expect(section.locator("tr.cron")).to_have_count(2)
    expect(section.locator(".cron-clock time")).to_have_attribute(
        "title", f"{round(crons['now'])} ms · " + _iso(shown, crons["now"])
    )

    services = shown.locator("#bindings-services")
    expect(services.locator("table.services tr").nth(1).locator("td")).to_have_text(
        ["HELPER", "inspector-bindings-app", "Helper", "yes"]
    )
    assets = next(b for b in _api(server, "GET", "/bindings") if b["type"] == "assets")
    expect(services.locator("dl.assets dd").first).to_have_text(assets["directory"])
    expect(services.locator("dl.assets dd").nth(3)).to_have_text("404-page")


def _iso(shown: Page, ms: float) -> str:
    return str(shown.evaluate(f"new Date({ms}).toISOString()"))


def _size(n: int) -> str:
    """The page's size text (KiB with one decimal below 10)."""
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    return f"{value:.1f} KiB" if value < 10 else f"{value:.0f} KiB"


def test_kv_put_then_delete(server: DevServer, page: Callable[..., Page], dialogs: Dialogs) -> None:
    """1. A put with metadata and a TTL, confirmed, is stored through the binding (the API has
    it), and the entry opens. 2. A refused put shows Cloudflare's text. 3. A delete whose
    confirm is dismissed deletes nothing. 4. A confirmed one removes it (the API answers 404)
    and the filtered listing says it is empty."""
    shown = page()
    kv = _kv(shown)
    key = f"put-{uuid.uuid4().hex[:8]}"
    form = kv.locator("form.kv-put")
    form.get_by_label("key to put").fill(key)
    form.get_by_label("value").fill("fresh value")
    form.get_by_label("metadata").fill('{"by": "the inspector"}')
    form.get_by_label("expirationTtl").fill("3600")
    form.get_by_role("button", name="Put").click()
    expect(kv.locator("pre.kv-value")).to_have_text("fresh value")
    assert dialogs.seen == [f"Put “{key}” in KV namespace CACHE?"]
    stored = _api(server, "GET", f"/kv/CACHE/keys/{key}")
    assert stored["value"] == "fresh value" and stored["metadata"] == {"by": "the inspector"}
    now_s = _api(server, "GET", "/crons")["now"] / 1000
    assert 3599 <= stored["expiration"] - now_s <= 3601
    expect(kv.locator(".kv-expiration time")).to_have_attribute(
        "title", f"{stored['expiration']} s · " + _iso(shown, stored["expiration"] * 1000)
    )

    form.get_by_label("expirationTtl").fill("5")
    form.get_by_role("button", name="Put").click()
    expect(kv.locator(".binding-error").first).to_have_text(
        f"Could not put “{key}”: KV PUT failed: 400 Invalid expiration_ttl of 5. Expiration TTL "
        "must be at least 60."
    )
    assert _api(server, "GET", f"/kv/CACHE/keys/{key}")["value"] == "fresh value"

    _filter(kv, key)
    expect(kv.locator("tr.kv-key")).to_have_count(1)
    dialogs.refuse_next = True
    kv.locator(f'tr.kv-key[data-key="{key}"]').get_by_role("button", name="Delete").click()
    assert dialogs.seen[-1] == f"Delete “{key}” from KV namespace CACHE?"
    expect(kv.locator("tr.kv-key")).to_have_count(1)
    assert _api(server, "GET", f"/kv/CACHE/keys/{key}")["value"] == "fresh value"
    kv.locator(f'tr.kv-key[data-key="{key}"]').get_by_role("button", name="Delete").click()
    expect(kv.locator("td.empty")).to_have_text(f"no keys with prefix “{key}”")
    expect(kv.locator("pre.kv-value")).to_have_count(0)  # the opened entry went with it
    gone = httpx.get(
        f"{server.url}{API}/kv/CACHE/keys/{key}", headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert gone.status_code == 404


def test_an_entry_deleted_behind_the_page_goes_and_says_so(
    server: DevServer, page: Callable[..., Page]
) -> None:
    """An opened KV entry that the Worker (here the API) deletes is, at the next refresh,
    cleared from the page with a message naming it, rather than left on screen as if it were
    still there."""
    key = f"gone-{uuid.uuid4().hex[:8]}"
    _api(server, "PUT", f"/kv/CACHE/keys/{key}", json={"value": "soon gone"})
    shown = page()
    kv = _kv(shown)
    _filter(kv, key)
    kv.locator(f'tr.kv-key[data-key="{key}"]').get_by_role("button", name="Show").click()
    expect(kv.locator("pre.kv-value")).to_have_text("soon gone")
    _api(server, "DELETE", f"/kv/CACHE/keys/{key}")
    shown.get_by_role("button", name="Refresh", exact=True).click()
    expect(kv.locator(".binding-error").first).to_have_text(
        f"Could not read “{key}”: no key '{key}' in KV namespace CACHE"
    )
    expect(kv.locator("pre.kv-value")).to_have_count(0)
    expect(kv.locator("td.empty")).to_have_text(f"no keys with prefix “{key}”")


def test_d1_query_refused_write_write_and_migrations(
    server: DevServer, page: Callable[..., Page], project: Path
) -> None:
    """1. A read shows its rows. 2. A write without the toggle is refused (the checkbox is the
       advice), clears the last result, and changes nothing. 3. A bad query says why.
    4. With "write" ticked it runs through the binding (its meta shown, the row count moves).
    5. A new migration file is pending; "Apply" applies it and its table appears."""
    shown = page()
    d1 = _d1(shown)
    d1.locator('tr.d1-table[data-table="orders"]').get_by_role("button", name="Query").click()
    expect(d1.locator("table.d1-result tr").nth(1).locator("td").nth(1)).to_have_text("tea")
    before = _api(server, "POST", "/d1/DB/sql", json={"query": "SELECT count(*) FROM orders"})

    d1.get_by_label("SQL").fill("DELETE FROM orders")
    d1.get_by_role("button", name="Run query").click()
    expect(d1.locator(".d1-query-error")).to_have_text(
        "The query failed: read-only SQL cannot run DELETE; only reads run here. Tick “write” "
        "to run it through the binding."
    )
    expect(d1.locator("table.d1-result tr")).to_have_count(0)
    after = _api(server, "POST", "/d1/DB/sql", json={"query": "SELECT count(*) FROM orders"})
    assert after == before

    d1.get_by_label("SQL").fill("SELECT nope FROM orders")
    d1.get_by_role("button", name="Run query").click()
    expect(d1.locator(".d1-query-error")).to_have_text("The query failed: no such column: nope")

    d1.get_by_label("SQL").fill("INSERT INTO orders (item, placed_at) VALUES ('scone', 4)")
    d1.locator("input.d1-write").check()
    d1.get_by_role("button", name="Run query").click()
    expect(d1.locator(".d1-result-note")).to_contain_text("changes 1")
    expect(d1.locator(".d1-query-error")).to_have_text("")
    count = before["rows"][0][0] + 1
    expect(d1.locator('tr.d1-table[data-table="orders"] td').nth(1)).to_have_text(str(count))

    name = f"0002_customers_{uuid.uuid4().hex[:6]}.sql"
    (project / "migrations" / name).write_text(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);\n"
    )
    shown.get_by_role("button", name="Refresh", exact=True).click()
    expect(d1.locator(f'tr.d1-migration.pending[data-name="{name}"]')).to_be_visible()
    d1.get_by_role("button", name="Apply 1 pending").click()
    expect(d1.locator(f'tr.d1-migration.applied[data-name="{name}"]')).to_be_visible()
    expect(d1.locator(".d1-applied")).to_have_text(f"applied {name}")
    expect(d1.get_by_role("button", name="Nothing pending")).to_be_disabled()
    expect(d1.locator('tr.d1-table[data-table="customers"]')).to_be_visible()
    assert _api(server, "GET", "/d1/DB/migrations")["pending"] == []


def test_r2_download(server: DevServer, page: Callable[..., Page], tmp_path: Path) -> None:
    """The bodies saved by "Download" (fetched with the token) are the bytes that were put,
    under the key's last segment."""
    shown = page()
    r2 = _r2(shown)
    r2.locator('tr.r2-prefix[data-prefix="docs/"]').get_by_role("button", name="Open").click()
    for key, body in (("docs/readme.txt", README), ("docs/img/logo.png", LOGO)):
        if key == "docs/img/logo.png":
            r2.locator('tr.r2-prefix[data-prefix="docs/img/"]').get_by_role(
                "button", name="Open"
            ).click()
        with shown.expect_download() as started:
            r2.locator(f'tr.r2-object[data-key="{key}"]').get_by_role(
                "button", name="Download"
            ).click()
        download = started.value
        assert download.suggested_filename == key.rsplit("/", 1)[-1]
        saved = tmp_path / download.suggested_filename
        download.save_as(saved)
        assert saved.read_bytes() == body
    expect(r2.locator(".binding-error")).to_have_text("")


def test_crons_run_now_and_on_the_clock(server: DevServer, page: Callable[..., Page]) -> None:
    """1. "Run now" runs scheduled() with that cron: the outcome is shown, the run is in the
       last runs, and the key the handler wrote is in the KV view (and the API).
    2. Moving the manual clock past the next */5 run fires it; the page shows the new run
       without a click: the timeline's cron.fired event reloads the views (the Durable Object
       was evicted first, so no lifecycle event refreshes the page instead)."""
    _api(server, "POST", "/objects/NOTES/first/evict")  # no lifecycle event refreshes later
    shown = page()
    section = shown.locator("#bindings-crons")
    runs = section.locator("tr.cron-run")
    already = len(_api(server, "GET", "/crons")["history"])
    expect(runs).to_have_count(already)
    row = section.locator('tr.cron[data-cron="0 3 * * *"]')
    row.get_by_role("button", name="Run now").click()
    expect(section.locator(".cron-ran")).to_contain_text("Ran “0 3 * * *” (scheduledTime ")
    expect(section.locator(".cron-ran .outcome-ok")).to_have_text("ok")
    expect(runs).to_have_count(already + 1)
    ran = _api(server, "GET", "/crons")["history"][-1]
    assert ran["cron"] == "0 3 * * *" and ran["outcome"] == "ok"
    expect(row.locator(".cron-last time")).to_have_attribute(
        "title", f"{ran['scheduledTime']} ms · " + _iso(shown, ran["scheduledTime"])
    )
    key = f"cron:0 3 * * *:{ran['scheduledTime']}"
    assert _api(server, "GET", f"/kv/CACHE/keys/{quote(key, safe='')}")["value"] == "ran"
    kv = _kv(shown)
    _filter(kv, "cron:0 3")
    expect(kv.locator(f'tr.kv-key[data-key="{key}"]')).to_be_visible()

    crons = _api(server, "GET", "/crons")
    every5 = next(c for c in crons["crons"] if c["cron"] == "*/5 * * * *")
    _api(server, "POST", "/clock", json={"advance_ms": every5["next"] - crons["now"] + 1})
    at = f"{round(every5['next'])} ms · " + _iso(shown, every5["next"])
    fired = runs.filter(has=shown.locator(f'time[title="{at}"]'), has_text="*/5 * * * *")
    expect(fired).to_have_count(1)  # (at 03:00 UTC, "0 3 * * *" fires beside it)
    expect(shown.locator('#timeline li[data-type="cron.fired"]').first).to_be_visible()
    expect(fired.locator("td").nth(2)).to_have_text("ok")


def _one_line(shown: Page, selector: str) -> None:
    heights = shown.eval_on_selector_all(
        selector, "nodes => nodes.map(n => n.getBoundingClientRect().height)"
    )
    line = shown.eval_on_selector("th", "n => parseFloat(getComputedStyle(n).lineHeight)")
    assert max(heights, default=0) < 2 * line + 12, (selector, heights)


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_bindings_fit_laptop_widths(
    server: DevServer, page: Callable[..., Page], width: int, tmp_path: Path
) -> None:
    """Every bindings section sits left of the timeline and takes most of the width; no header
    cell or button wraps; nothing scrolls sideways (screenshots saved beside the test)."""
    shown = page(width)
    timeline = shown.locator("#sidebar").bounding_box()
    assert timeline is not None
    for section in ("kv", "d1", "r2", "crons", "services"):
        expect(shown.locator(f"#bindings-{section}")).to_be_visible()
        for table in shown.locator(f"#bindings-{section} table").all():
            box = table.bounding_box()
            assert box is not None
            assert box["width"] > 0.5 * width, (section, box)
            assert box["x"] + box["width"] <= timeline["x"], (section, box, timeline)
        assert shown.locator(f"#bindings-{section} th").count(), section
        _one_line(shown, f"#bindings-{section} th")
        _one_line(shown, f"#bindings-{section} button")
    assert shown.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    _r2(shown).locator('tr.r2-prefix[data-prefix="docs/"]').get_by_role(
        "button", name="Open"
    ).click()
    expect(_r2(shown).locator('tr.r2-object[data-key="docs/readme.txt"]')).to_be_visible()
    kv = _kv(shown)
    _filter(kv, "p")
    kv.locator('tr.kv-key[data-key="profile"]').get_by_role("button", name="Show").click()
    expect(kv.locator("pre.kv-metadata")).to_be_visible()
    d1 = _d1(shown)
    d1.locator('tr.d1-table[data-table="orders"]').get_by_role("button", name="Query").click()
    expect(d1.locator("table.d1-result tr").nth(1)).to_be_visible()
    assert shown.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    for section in ("kv", "d1", "r2", "crons", "services"):
        shown.locator(f"#bindings-{section}").screenshot(
            path=str(tmp_path / f"{section}-{width}.png")
        )
    shown.screenshot(path=str(tmp_path / f"bindings-{width}.png"), full_page=True)


def test_a_worker_without_bindings_shows_none_of_the_sections(
    browser: Browser, dev_server: Any, counter_project: Path
) -> None:
    """The counter example has only a Durable Object: every bindings section stays hidden."""
    other = dev_server(counter_project)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        shown = context.new_page()
        shown.goto(f"{other.url}/__doemu/")
        expect(shown.locator("#stream")).to_have_text("events: connected")
        expect(shown.locator("#namespaces h3")).to_contain_text("COUNTER")
        shown.get_by_role("button", name="Refresh", exact=True).click()
        for section in ("kv", "d1", "r2", "crons", "services"):
            expect(shown.locator(f"#bindings-{section}")).to_be_hidden()
        expect(shown.locator("#error")).to_have_text("")
    finally:
        context.close()
