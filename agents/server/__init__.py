"""agents.server: one Durable Object per session, running an agent loop, streamed to clients.

The errors the package raises on purpose derive from :class:`AgentServerError`.
"""

from __future__ import annotations

from .errors import AgentServerError as AgentServerError
from .errors import StreamClosedError as StreamClosedError
from .errors import StreamPayloadError as StreamPayloadError
from .errors import StreamRangeError as StreamRangeError

__all__ = [
    "AgentServerError",
    "StreamClosedError",
    "StreamPayloadError",
    "StreamRangeError",
]
