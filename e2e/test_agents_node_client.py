"""Cloudflare's own JavaScript client against a Python agent served by a real ``doemu dev``.

``e2e/node_client/client.mjs`` uses ``AgentClient`` from the npm ``agents`` package (the version
pinned in ``e2e/node_client/package.json`` / ``package-lock.json``) unchanged: it connects to
``/agents/counter-agent/<name>`` of ``e2e/apps/agent_app``, receives identity and state, sets
state (seen by a second client), and calls ``@callable`` methods, plain and streaming.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from .harness import DevServer
from .node import require_node

ROOT = Path(__file__).resolve().parent.parent
CLIENT = Path(__file__).resolve().parent / "node_client"
APP = Path(__file__).resolve().parent / "apps" / "agent_app"


def _installed_version() -> str | None:
    manifest = CLIENT / "node_modules" / "agents" / "package.json"
    if not manifest.exists():
        return None
    return str(json.loads(manifest.read_text())["version"])


@pytest.fixture(scope="module")
def node_client() -> Path:
    """The Node project with its locked dependencies installed when missing.

    ``npm install`` rather than ``npm ci``: npm 11's ``ci`` rejects this lock file because npm left
    the other platforms' optional ``@rolldown/binding-*`` packages out of it (an npm bug with
    platform-specific optional dependencies); ``install --no-save`` installs what the committed
    lock pins and never rewrites it (a test must not modify tracked files).
    """
    npm, _node = require_node("the JavaScript client interop test")
    wanted = json.loads((CLIENT / "package.json").read_text())["dependencies"]["agents"]
    if _installed_version() != wanted:
        done = subprocess.run(
            [npm, "install", "--no-save", "--no-audit", "--no-fund"],
            cwd=CLIENT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"npm install failed:\n{done.stdout}\n{done.stderr}"
    assert _installed_version() == wanted
    return CLIENT


def test_agent_client_from_npm_talks_to_a_python_agent(
    node_client: Path, dev_server: Callable[..., DevServer]
) -> None:
    # The package under test is imported from this checkout even if the venv predates it.
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    server = dev_server(APP, env={"PYTHONPATH": pythonpath})
    name = f"node-{uuid.uuid4().hex[:8]}"
    run = subprocess.run(
        ["node", "client.mjs", f"{server.host}:{server.port}", name],
        cwd=node_client,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, (
        f"node client failed:\n{run.stderr}\n--- server ---\n{server.output}"
    )
    result = json.loads(run.stdout.strip().splitlines()[-1])

    assert result["identity"] == {"identified": True, "name": name, "agent": "counter-agent"}
    assert result["initialState"] == {"count": 0, "history": []}
    assert result["broadcastToB"] == {
        "state": {"count": 5, "history": ["set by node"]},
        "source": "server",
    }
    assert result["increment"] == 7  # the client's state was persisted before the call
    assert result["stateAfterIncrement"] == {"count": 7, "history": ["set by node", "+2"]}
    assert result["greet"] == f"hello node, this is {name}"
    assert result["missing"] == "Method missing does not exist"
    assert result["countdownChunks"] == [3, 2, 1]
    assert result["countdownDone"] == "liftoff"
