"""Node for the tests that run Cloudflare's own JavaScript clients (``AgentClient``,
``useAgentChat``) from npm.

Without ``node`` and ``npm`` those tests skip, naming what is missing; ``.ci/run`` installs them
and sets ``DOEMU_E2E_REQUIRE_NODE=1``, so that in CI a missing Node fails the tests instead of
letting the client proofs pass silently. :func:`locked_project` installs a client's npm project
from its lock file when what it pins is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.locks import exclusive

__all__ = ["installed_version", "locked_project", "require_node"]


def require_node(what: str) -> tuple[str, str]:
    """``(npm, node)`` paths; skips (or, with ``DOEMU_E2E_REQUIRE_NODE=1``, fails) without."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        missing = " and ".join(n for n, p in (("node", node), ("npm", npm)) if p is None)
        reason = f"{missing} not installed; {what} needs Node (apt-get install nodejs npm)"
        if os.environ.get("DOEMU_E2E_REQUIRE_NODE") == "1":
            pytest.fail(f"DOEMU_E2E_REQUIRE_NODE=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return npm, node


def installed_version(project: Path, package: str) -> str | None:
    """The version of ``package`` in ``project``'s ``node_modules`` (``None``: not installed)."""
    manifest = project / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text())["version"]) if manifest.exists() else None


def locked_project(project: Path, packages: tuple[str, ...], what: str) -> Path:
    """``project`` with its locked dependencies: ``npm ci`` when one of ``packages`` is not
    installed at the version its ``package.json`` pins (Node required as :func:`require_node`
    says, for ``what``)."""
    npm, _node = require_node(what)
    wanted = json.loads((project / "package.json").read_text())["dependencies"]

    def stale() -> list[str]:
        return [p for p in packages if installed_version(project, p) != wanted[p]]

    # One worker at a time (make test runs xdist workers): two modules may share a project.
    with exclusive(project / "package.json"):
        if stale():
            done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=project,
                                  capture_output=True, text=True, timeout=600)  # fmt: skip
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    assert stale() == [], f"not at the locked versions after npm ci: {stale()}"
    return project
