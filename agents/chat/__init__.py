"""``AIChatAgent`` and the chat layer: durable chat turns, resumable streams and the SDK's chat
protocol, so Cloudflare's ``useAgentChat`` talks to a Python agent unchanged.

Layers, top to bottom: ``agent`` (the façade) → ``requests`` (requests, queueing turns),
``recovering``, ``submissions`` → ``turn`` (one turn), ``resume`` (the handshake), ``overflow``,
``repair`` → ``reply`` (reading a reply), ``replay`` → ``turns`` (the queue), ``store`` and
``streams`` (SQLite), ``stream_rows`` → ``scripted``, ``producers`` (making UI-message streams)
→ ``incoming`` (what clients send) → ``messages``, ``reconcile`` → ``parts`` → ``chunks``,
``frames`` (the vocabulary and the wire); ``recovery/`` is the pure budget math.
"""

from __future__ import annotations

from .agent import CHAT_FIBER_PREFIX as CHAT_FIBER_PREFIX
from .agent import AIChatAgent as AIChatAgent
from .recovery import ChatRecoveryConfig as ChatRecoveryConfig
from .recovery import ChatRecoveryContext as ChatRecoveryContext
from .recovery.overflow import (
    default_context_overflow_classifier as default_context_overflow_classifier,
)
from .streams.producers import text_stream as text_stream
from .streams.producers import tool_call as tool_call
from .streams.producers import ui_message_response as ui_message_response
from .streams.producers import ui_message_stream as ui_message_stream
from .streams.scripted import ScriptedModel as ScriptedModel
from .streams.scripted import demo_model as demo_model
from .transcript.chunks import UI_MESSAGE_STREAM_HEADERS as UI_MESSAGE_STREAM_HEADERS
from .transcript.chunks import Chunk as Chunk
from .transcript.chunks import SseDecoder as SseDecoder
from .transcript.chunks import encode_sse as encode_sse
from .transcript.messages import UIMessage as UIMessage
from .turns.turn import ChatMessageOptions as ChatMessageOptions

__all__ = [
    "CHAT_FIBER_PREFIX",
    "UI_MESSAGE_STREAM_HEADERS",
    "AIChatAgent",
    "ChatMessageOptions",
    "ChatRecoveryConfig",
    "ChatRecoveryContext",
    "Chunk",
    "ScriptedModel",
    "SseDecoder",
    "UIMessage",
    "default_context_overflow_classifier",
    "demo_model",
    "encode_sse",
    "text_stream",
    "tool_call",
    "ui_message_response",
    "ui_message_stream",
]
