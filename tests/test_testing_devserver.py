"""The ``doemu_dev`` fixture: a real ``doemu dev`` for examples/counter, crashed and restarted.

What is committed survives a SIGKILL; the object's SQLite file is read directly (read-only, by
name or id) with the server running and with it dead; the restart keeps the port when it can.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from doemu.ids import IdFactory
from doemu.testing.devserver import DevServer, DevServerFactory, port_is_open

COUNTER = Path(__file__).resolve().parent.parent / "examples" / "counter"


def test_a_real_server_survives_sigkill_and_its_sqlite_can_be_read(
    doemu_dev: DevServerFactory,
) -> None:
    server = doemu_dev(COUNTER)
    assert server.url.startswith("http://127.0.0.1:") and server.ws_url.startswith("ws://")
    assert "doemu ready on" in server.output
    with httpx.Client(base_url=server.url, timeout=10) as http:
        for expected in (1, 2, 3):
            response = http.post("/COUNTER/alice/incr")
            assert response.json() == {"value": expected}
        assert http.put("/COUNTER/alice/kv/colour", content="teal").status_code == 200

    # Read while it runs: committed rows, by name and by id; nothing written, nothing woken.
    assert server.sql("COUNTER", "alice", "SELECT value FROM counter") == [{"value": 3}]
    hex_id = str(IdFactory(server.config.unique_key("Counter")).from_name("alice"))
    assert server.object_ids("COUNTER") == [hex_id]
    assert server.sql("COUNTER", hex_id, "SELECT count(*) AS n FROM boots") == [{"n": 1}]
    assert server.kv("COUNTER", "alice") == {"colour": "teal"}
    assert server.sql("COUNTER", "nobody", "SELECT 1") == []  # no file: no rows, none created
    assert server.object_ids("COUNTER") == [hex_id]

    port = server.port
    server.kill()  # a crash: no shutdown code runs
    assert not server.running and not port_is_open(server.host, port)
    assert server.sql("COUNTER", "alice", "SELECT value FROM counter") == [{"value": 3}]

    server.restart()
    assert server.port == port  # the same port, still free
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.post("/COUNTER/alice/incr").json() == {"value": 4}
    assert server.sql("COUNTER", "alice", "SELECT count(*) AS n FROM boots") == [{"n": 2}]
    assert len(server.outputs) == 1  # the first run's output is kept
    assert server.stop() == 0
    assert not server.running


async def test_the_helpers_work_inside_an_async_test(doemu_dev: DevServerFactory) -> None:
    server = doemu_dev(COUNTER)
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        assert (await http.post("/COUNTER/bob/incr")).json() == {"value": 1}
    assert server.sql("COUNTER", "bob", "SELECT value FROM counter") == [{"value": 1}]


def test_names_never_become_paths(tmp_path: Path) -> None:
    server = DevServer(COUNTER, tmp_path / "state")  # not started: files only
    path = server.object_file("COUNTER", "../../etc/passwd")
    assert path.parent == tmp_path / "state" / "counter-example-Counter"
    assert path.name != "passwd" and path.suffix == ".sqlite"
    with pytest.raises(KeyError):
        server.object_file("NOPE", "a")
