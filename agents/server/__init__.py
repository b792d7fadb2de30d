"""agents.server: one Durable Object per session, running an agent loop, streamed to clients.

The session's stream (:class:`SessionStream`) numbers, stores and pushes every chunk of its runs
to SSE and hibernatable WebSocket readers; the errors the package raises on purpose derive from
:class:`AgentServerError`.
"""

from __future__ import annotations

from .errors import AgentServerError as AgentServerError
from .errors import StreamClosedError as StreamClosedError
from .errors import StreamPayloadError as StreamPayloadError
from .errors import StreamRangeError as StreamRangeError
from .streams import SessionStream as SessionStream

__all__ = [
    "AgentServerError",
    "SessionStream",
    "StreamClosedError",
    "StreamPayloadError",
    "StreamRangeError",
]
