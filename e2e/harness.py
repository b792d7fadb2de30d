"""Real ``doemu dev`` processes for end-to-end tests: the shipped
:class:`doemu.testing.devserver.DevServer`, the same one users get (start on a free port, wait for
the ready line, SIGKILL the process group, restart on the same persist dir).

The e2e suite used to carry its own copy; it now uses the shipped class, so what the project's
tests rely on is what its users rely on. This module only keeps the old import path.
"""

from __future__ import annotations

from doemu.testing.devserver import READY, DevServer, port_is_open

__all__ = ["READY", "DevServer", "port_is_open"]
