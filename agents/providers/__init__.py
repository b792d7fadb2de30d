"""LLM providers for agents: wire-format adapters, a recoverable model loop, tools.

``on_chat_message`` returns :func:`model_reply` with a provider and tools; see
:mod:`agents.providers.loop` for what happens when the turn is cut, and each adapter's module
for its recovery strategy (``retrieve``, ``prefill``, ``retry``; :class:`WorkersAI` reads the
``env.AI`` binding and recovers as chat completions do). To call a model yourself,
:func:`items_from_messages` turns the chat's UI messages into provider-neutral items (the AI
SDK's ``convertToModelMessages``), and :func:`chat_messages`, :func:`responses_input` and
:func:`anthropic_messages` turn those into each API's wire format.
"""

from .anthropic import AnthropicMessages, anthropic_messages
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
from .errors import (
    ProviderConfigError,
    ProviderError,
    ProviderHTTPError,
    ProviderInputError,
    ProviderStreamError,
)
from .loop import model_reply
from .openai_chat import CONTINUE_INSTRUCTION, OpenAIChatCompletions, chat_messages
from .openai_responses import OpenAIResponses, responses_input
from .output import OutputSchema, OutputSchemaError, output_schema
from .tools import Tool, ToolContext
from .transcript import File, Item, Text, ToolCall, ToolResult, items_from_messages
from .workers_ai import WorkersAI

__all__ = [
    "CONTINUE_INSTRUCTION",
    "AnthropicMessages",
    "File",
    "Finished",
    "Item",
    "ModelCall",
    "OpenAIChatCompletions",
    "OpenAIResponses",
    "OutputSchema",
    "OutputSchemaError",
    "Provider",
    "ProviderConfigError",
    "ProviderError",
    "ProviderEvent",
    "ProviderHTTPError",
    "ProviderInputError",
    "ProviderStreamError",
    "Started",
    "Text",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCallDone",
    "ToolContext",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "WorkersAI",
    "anthropic_messages",
    "chat_messages",
    "items_from_messages",
    "model_reply",
    "output_schema",
    "responses_input",
]
