"""The project ``doemu init`` writes, on doemu and on workerd: it serves with no edits.

``doemu init`` (the real command, in a subprocess) writes a Worker with a ``Counter`` Durable
Object behind a ``Default`` entry worker, which its README says deploys to Cloudflare unchanged;
here it is served as written by both targets, and a client gets the same answers, also after a
SIGKILL and a restart. (``--with kv,d1,r2`` adds bindings the workerd runner does not generate;
those are proven against Miniflare by ``e2e/test_bindings_differential.py``.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..targets import TargetServer
from .conftest import running


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("init") / "hello-counter"
    done = subprocess.run(
        [sys.executable, "-m", "doemu", "init", str(target)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return target


@pytest.fixture(scope="module")
def hello(serve: Any, project: Path) -> TargetServer:
    server: TargetServer = serve(project)
    return server


def call(server: TargetServer, method: str, path: str) -> httpx.Response:
    return httpx.request(method, f"{running(server).url}{path}", timeout=30)


def test_the_counter_counts(hello: TargetServer, target: str) -> None:
    """POST /counter/<name> adds one ({"name", "value"}); GET reads it; names are separate."""
    name = f"alice-{target}"
    assert call(hello, "POST", f"/counter/{name}").json() == {"name": name, "value": 1}
    assert call(hello, "POST", f"/counter/{name}").json() == {"name": name, "value": 2}
    assert call(hello, "GET", f"/counter/{name}").json() == {"name": name, "value": 2}
    assert call(hello, "GET", f"/counter/bob-{target}").json() == {
        "name": f"bob-{target}",
        "value": 0,
    }


def test_other_paths_say_what_to_try(hello: TargetServer) -> None:
    answer = call(hello, "GET", "/")
    assert (answer.status_code, answer.text) == (
        404,
        "try: curl -X POST http://127.0.0.1:8787/counter/alice\n",
    )


def test_the_count_survives_sigkill(hello: TargetServer, target: str) -> None:
    name = f"kill-{target}"
    for value in (1, 2):
        assert call(hello, "POST", f"/counter/{name}").json()["value"] == value
    hello.kill()
    hello.restart()
    assert call(hello, "GET", f"/counter/{name}").json() == {"name": name, "value": 2}
    assert hello.sql("COUNTER", name, "SELECT n FROM counter") == [{"n": 2}]
