"""``--reload``: editing a source restarts the process; state and alarms survive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.polling import eventually_sync


def test_reload_restarts_on_source_change_with_state_and_alarms_intact(
    dev_server: Any, counter_project: Path
) -> None:
    """1. Start with --reload; increment and set an alarm for +4 s.
    2. Edit the worker's source: the child process restarts (a second ready line).
    3. The value is intact, the new code answers, and the alarm fires by itself."""
    server = dev_server(counter_project, "--reload")
    assert httpx.post(f"{server.url}/COUNTER/r/incr").json() == {"value": 1}
    httpx.post(f"{server.url}/COUNTER/r/alarm?in_ms=4000").raise_for_status()
    entry = counter_project / "src" / "entry.py"
    entry.write_text(
        entry.read_text().replace('"name": self.ctx.id.name', '"name": self.ctx.id.name, "v": 2')
    )
    eventually_sync(
        lambda: sum(1 for line in server.lines if line.startswith("doemu ready on")) >= 2,
        within=30,
        what="the reloaded child to be ready",
    )

    def value() -> dict[str, Any] | None:
        body = httpx.get(f"{server.url}/COUNTER/r/value").json()
        return body if body.get("v") == 2 else None

    answer = eventually_sync(
        value, within=15, what="the new code to answer", ignoring=(httpx.TransportError,)
    )
    assert answer["value"] == 1
    log = eventually_sync(
        lambda: httpx.get(f"{server.url}/COUNTER/r/alarms").json(),
        within=20,
        what="the alarm to fire after the reload",
        ignoring=(httpx.TransportError,),
    )
    assert len(log) == 1
