"""In-process tests: doemu's pytest plugin provides the `doemu_harness` and `doemu_clock` fixtures
and runs `async def` tests; `src` is on pytest's pythonpath (see pyproject.toml)."""

from pathlib import Path

from entry import Counter, Default
from workers import Request

WRANGLER_TOML = Path(__file__).parent.parent / "wrangler.toml"


async def test_increment(doemu_harness):
    h = await doemu_harness({"COUNTER": Counter})  # real SQLite files under tmp_path
    counter = h.env.COUNTER.getByName("alice")
    assert await counter.increment() == 1
    assert await counter.increment() == 2
    assert await counter.value() == 2


async def test_the_alarm_resets_the_counter(doemu_harness):
    h = await doemu_harness({"COUNTER": Counter})  # time stands still until advanced
    counter = h.env.COUNTER.getByName("bob")
    await counter.increment()
    await counter.reset_in(60_000)
    await h.advance(59_999)
    assert await counter.value() == 1
    await h.advance(1)  # the alarm is due: it runs, and its work finishes, before this returns
    assert await counter.value() == 0


async def test_the_worker_and_its_config(doemu_harness):
    h = await doemu_harness(config=WRANGLER_TOML)  # bindings and classes from wrangler.toml
    worker = Default(None, h.env)
    response = await worker.fetch(Request("http://localhost/counter/carol", method="POST"))
    assert await response.json() == {"name": "carol", "value": 1}


# {{with:kv}}


async def test_the_cache(doemu_harness):
    h = await doemu_harness(config=WRANGLER_TOML)  # env.CACHE is the KV namespace of wrangler.toml
    worker = Default(None, h.env)
    await worker.fetch(Request("http://localhost/cache/greeting", method="PUT", body="hi"))
    response = await worker.fetch(Request("http://localhost/cache/greeting"))
    assert await response.json() == {"key": "greeting", "value": "hi"}
    await h.advance(3_600_000)  # an hour later the entry has expired
    response = await worker.fetch(Request("http://localhost/cache/greeting"))
    assert await response.json() == {"key": "greeting", "value": None}


# {{end:kv}}
# {{with:d1}}


async def test_the_notes(doemu_harness):
    h = await doemu_harness(config=WRANGLER_TOML)
    assert await h.apply_d1_migrations("DB") == ["0001_create_notes.sql"]  # migrations/*.sql
    worker = Default(None, h.env)
    await worker.fetch(Request("http://localhost/notes", method="POST", body="buy milk"))
    response = await worker.fetch(Request("http://localhost/notes"))
    assert await response.json() == {"notes": [{"id": 1, "text": "buy milk"}]}


# {{end:d1}}
# {{with:r2}}


async def test_the_files(doemu_harness):
    h = await doemu_harness(config=WRANGLER_TOML)
    worker = Default(None, h.env)
    put = Request(
        "http://localhost/files/hello.txt",
        method="PUT",
        body="hi",
        headers={"content-type": "text/plain"},
    )
    await worker.fetch(put)
    response = await worker.fetch(Request("http://localhost/files/hello.txt"))
    assert await response.text() == "hi"
    assert response.headers["content-type"] == "text/plain"
    assert (await worker.fetch(Request("http://localhost/files/none"))).status == 404


# {{end:r2}}
