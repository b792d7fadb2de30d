"""Node for the tests that run Cloudflare's own JavaScript clients (``AgentClient``,
``useAgentChat``) from npm.

Without ``node`` and ``npm`` those tests skip, naming what is missing; ``.ci/run`` installs them
and sets ``DOEMU_E2E_REQUIRE_NODE=1``, so that in CI a missing Node fails the tests instead of
letting the client proofs pass silently.
"""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["require_node"]


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
