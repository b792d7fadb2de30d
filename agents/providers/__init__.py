"""LLM providers for agents: wire-format adapters, a recoverable model loop, tools.

``on_chat_message`` returns :func:`model_reply` with a provider and tools; see
:mod:`agents.providers.loop` for what happens when the turn is cut, and each adapter's module
for its recovery strategy (``retrieve``, ``prefill``, ``retry``).
"""

from .anthropic import AnthropicMessages
from .base import (
    Finished,
    ModelCall,
    Provider,
    ProviderEvent,
    Started,
    TextDelta,
    ToolCallDone,
    ToolSpec,
    Usage,
)
from .errors import ProviderConfigError, ProviderError, ProviderHTTPError, ProviderStreamError
from .loop import model_reply
from .openai_chat import CONTINUE_INSTRUCTION, OpenAIChatCompletions
from .openai_responses import OpenAIResponses
from .tools import Tool, ToolContext

__all__ = [
    "CONTINUE_INSTRUCTION",
    "AnthropicMessages",
    "Finished",
    "ModelCall",
    "OpenAIChatCompletions",
    "OpenAIResponses",
    "Provider",
    "ProviderConfigError",
    "ProviderError",
    "ProviderEvent",
    "ProviderHTTPError",
    "ProviderStreamError",
    "Started",
    "TextDelta",
    "Tool",
    "ToolCallDone",
    "ToolContext",
    "ToolSpec",
    "Usage",
    "model_reply",
]
