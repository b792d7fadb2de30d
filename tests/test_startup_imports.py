"""What a serving ``doemu dev`` has imported by its first answer: nothing it does not need yet.

A restart after a crash is measured to its first answered request (``make bench``, phase g), and
most of that time is imports. These tests read ``sys.modules`` of a real ``doemu dev`` from inside
its Worker, after start-up and one request, and check that what only some Workers or some
commands need was left for them: a binding kind's modules wait for a Worker that configures one
(and are there when it does), the inspection commands' modules for those commands, the HTML
error page's entity table, the config checker's "did you mean" matcher and the traceback
filter's ``sysconfig`` for their first use.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx

from e2e.harness import DevServer

ENTRY = """
import sys

from workers import DurableObject, Response, WorkerEntrypoint


class Modules(DurableObject):
    async def fetch(self, request):
        return Response.json(sorted(sys.modules))


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        if request.url.endswith("/kv"):
            await self.env.CACHE.put("k", "v")
            return Response(await self.env.CACHE.get("k"))
        stub = self.env.MODULES.get(self.env.MODULES.idFromName("m"))
        return await stub.fetch(request)
"""

WRANGLER = """
name = "imports"
main = "src/entry.py"
compatibility_date = "2026-11-01"
compatibility_flags = ["python_workers"]

[[durable_objects.bindings]]
name = "MODULES"
class_name = "Modules"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Modules"]
"""

KV = """
[[kv_namespaces]]
binding = "CACHE"
id = "cache"
"""

#: Modules a Worker with only Durable Objects must not have imported by its first answer.
DEFERRED = (
    "doemu.bindings.ai",
    "doemu.bindings.kv",
    "doemu.bindings.d1",
    "doemu.bindings.r2",
    "doemu.bindings.queues",
    "doemu.bindings.workflows",
    "doemu.bindings.assets",
    "doemu.bindings.services",
    "doemu.config.workbindings",
    "doemu.cli.control",
    "doemu.cli.d1",
    "doemu.cli.inspect",
    "doemu.inspection",
    "difflib",
    "sysconfig",
    "html",
    "websockets",
    "httpx",
)


def _project(root: Path, extra: str = "") -> Path:
    (root / "src").mkdir(parents=True)
    (root / "wrangler.toml").write_text(WRANGLER + extra)
    (root / "src" / "entry.py").write_text(textwrap.dedent(ENTRY))
    return root


def _modules_after_first_answer(server: DevServer) -> set[str]:
    response = httpx.get(f"{server.url}/modules", timeout=30)
    assert response.status_code == 200, response.text
    return set(response.json())


def test_a_serving_process_leaves_what_its_worker_does_not_use_unimported(
    tmp_path: Path,
) -> None:
    with DevServer(_project(tmp_path / "project"), tmp_path / "state") as server:
        modules = _modules_after_first_answer(server)
    # What it did import: the list is the serving process's own (so the test can fail).
    assert {"doemu.runtime", "doemu.bindings", "doemu.server.app", "uvicorn"} <= modules
    assert sorted(m for m in DEFERRED if m in modules) == []
    assert not any(m.startswith("doemu.server.admin.") for m in modules)


def test_a_configured_binding_kind_is_imported_and_works(tmp_path: Path) -> None:
    with DevServer(_project(tmp_path / "project", KV), tmp_path / "state") as server:
        modules = _modules_after_first_answer(server)
        assert httpx.get(f"{server.url}/kv", timeout=30).text == "v"
    assert "doemu.bindings.kv" in modules
    assert "doemu.bindings.r2" not in modules  # only the kinds the Worker has


AI = """
[ai]
binding = "AI"
"""


def test_a_worker_with_the_ai_binding_starts_without_httpx(tmp_path: Path) -> None:
    """The AI binding's HTTP client (httpx, ~60 ms of imports) waits for the first ``run``."""
    with DevServer(_project(tmp_path / "project", AI), tmp_path / "state") as server:
        modules = _modules_after_first_answer(server)
    assert "doemu.bindings.ai" in modules
    assert "httpx" not in modules and "httpx_sse" not in modules
