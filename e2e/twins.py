"""Twins: the same scenario on Miniflare (a JavaScript Worker) and on a real ``doemu dev`` (its
Python twin), driven by one client, for the differential tests of Queues and Workflows.

``e2e/test_bindings_differential.py`` runs one Python Worker on both sides; Queues consumers and
Workflows cannot go that way (Miniflare runs no Python ``WorkflowEntrypoint``), so each scenario
has a JavaScript twin (``e2e/miniflare/twins/*.mjs``, run by ``e2e/miniflare/serve.mjs``) and a
Python twin (``e2e/apps/*_differential/``), with the same HTTP surface and the same records. The
Miniflare side gets its queue and workflow settings from the Python twin's ``wrangler.toml``
(:func:`miniflare_options`), so both run one configuration.

Time: doemu runs with ``--clock manual`` and :meth:`Twin.settle` moves it a tick between polls;
Miniflare has no clock to move (its queue broker and Workflows engine wait on real timers), so
there the same poll simply waits, with a deadline. Scenarios keep their delays small and assert
time only as lower bounds (a gap of at least the configured delay), which holds on both.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from doemu.testing.devserver import DevServer
from tests.locks import exclusive
from tests.polling import eventually_sync

from .node import require_node

__all__ = ["Twin", "doemu_twin", "install_miniflare", "miniflare_options", "miniflare_twin"]

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
MINIFLARE = HERE / "miniflare"


class Twin:
    """One side of a differential: ``name`` is ``"miniflare"`` or ``"doemu"``."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: Any) -> Any:
        response = self.http.post(path, json=body)
        response.raise_for_status()
        return response.json()

    def advance(self, ms: float) -> None:
        """Move doemu's manual clock; nothing on Miniflare (its timers run on real time)."""
        if self.name == "doemu":
            self.http.post("/__doemu/api/clock", json={"advance_ms": ms}).raise_for_status()

    def settle(
        self, observe: Callable[[], T], *, what: str, tick_ms: float = 100, within: float = 20
    ) -> T:
        """Poll ``observe()`` until it is truthy (and return it); on doemu, move the clock
        ``tick_ms`` after each miss, so delays and timeouts run out as time passes."""

        def poll() -> T:
            value = observe()
            if not value:
                self.advance(tick_ms)
            return value

        return eventually_sync(poll, within=within, what=f"{what} ({self.name})", interval=0.05)

    def close(self) -> None:
        self.http.close()


def miniflare_options(wrangler: Path) -> dict[str, Any]:
    """Miniflare's options for the queues and workflows of a ``wrangler.toml``."""
    config = tomllib.loads(wrangler.read_text())
    queues = config.get("queues", {})
    options: dict[str, Any] = {}
    if queues.get("producers"):
        options["queueProducers"] = {
            p["binding"]: {"queueName": p["queue"]} for p in queues["producers"]
        }
    names = {
        "max_batch_size": "maxBatchSize",
        "max_batch_timeout": "maxBatchTimeout",
        "max_retries": "maxRetries",
        "retry_delay": "retryDelay",
        "dead_letter_queue": "deadLetterQueue",
    }
    if queues.get("consumers"):
        options["queueConsumers"] = {
            c["queue"]: {names[k]: v for k, v in c.items() if k in names}
            for c in queues["consumers"]
        }
    if config.get("workflows"):
        options["workflows"] = {
            w["binding"]: {"name": w["name"], "className": w["class_name"]}
            for w in config["workflows"]
        }
    return options


def install_miniflare(npm: str) -> None:
    """``npm install`` the pinned Miniflare into ``e2e/miniflare`` when it is not there yet (one
    test process at a time: its three test modules may run on different pytest-xdist workers)."""
    wanted = json.loads((MINIFLARE / "package.json").read_text())["dependencies"]["miniflare"]
    installed = MINIFLARE / "node_modules" / "miniflare" / "package.json"
    with exclusive(MINIFLARE / "package.json"):
        if installed.exists() and json.loads(installed.read_text())["version"] == wanted:
            return
        done = subprocess.run(
            [npm, "install", "--no-save", "--no-audit", "--no-fund"],
            cwd=MINIFLARE, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert done.returncode == 0, f"npm install failed:\n{done.stdout}\n{done.stderr}"


@contextmanager
def miniflare_twin(script: Path, wrangler: Path, workdir: Path) -> Iterator[Twin]:
    """``script`` served by Miniflare with ``wrangler``'s queues and workflows; skips (or fails,
    with ``DOEMU_E2E_REQUIRE_NODE=1``) without Node."""
    npm, node = require_node("the Miniflare differential of Queues and Workflows")
    install_miniflare(npm)
    options = workdir / "miniflare-options.json"
    options.write_text(json.dumps(miniflare_options(wrangler)))
    proc = subprocess.Popen(
        [node, "serve.mjs", str(script.resolve()), str(options.resolve())],
        cwd=MINIFLARE,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    assert proc.stdout is not None

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ready = eventually_sync(
        lambda: (
            next((json.loads(x) for x in lines if x.startswith('{"url"')), None)
            or (proc.poll() is not None and {"dead": "".join(lines)})
        ),
        within=60,
        what="Miniflare serving the twin",
    )
    assert "url" in ready, f"Miniflare did not start:\n{ready['dead']}"
    twin = Twin("miniflare", ready["url"])
    try:
        yield twin
    finally:
        twin.close()
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def doemu_twin(app: Path, workdir: Path) -> Iterator[Twin]:
    """The Python twin ``app`` on a real ``doemu dev --clock manual``."""
    project = workdir / app.name
    shutil.copytree(app, project, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    server = DevServer(project, workdir / "state", args=["--clock", "manual"]).start()
    twin = Twin("doemu", server.url)
    try:
        yield twin
    finally:
        twin.close()
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
