"""Local wire-format fake LLM servers, and a side-effect counter, for tests.

Adapters are tested against these, never against mocks of the SDKs: :class:`FakeLLM` serves
OpenAI Responses (background mode, resumable streams, idempotency keys), OpenAI chat completions
and Anthropic Messages on one loopback port, in their real wire formats, each generation scripted
with a :class:`Reply` (chunks, delays, a hold, a cut, a stall, an HTTP failure) and counted in
:attr:`FakeLLM.stats` (requests served, tokens billed, stored responses retrieved). Every request
body is checked as the real API checks it — against the official SDK's request type and the
rules across messages (:mod:`.request_rules`) — and refused with its 400 in the API's words.
:class:`CounterServer` counts a costly side effect, with or without idempotency keys, for
exactly-once tests.

    with FakeLLM() as llm:
        llm.script(Reply(Text("Hello ", "world")), Reply(ToolUse("charge", {"amount": 5})))
        client = openai.OpenAI(base_url=f"{llm.url}/v1", api_key="test-key")
        ...
        assert llm.stats.billed_output_tokens == 3
"""

from __future__ import annotations

from .counter import CounterServer
from .fake_llm import FakeLLM
from .script import (
    DEFAULT_REPLY,
    Api,
    Generation,
    GenerationStatus,
    Reply,
    Retrieval,
    Stats,
    Text,
    ToolUse,
)

__all__ = [
    "DEFAULT_REPLY",
    "Api",
    "CounterServer",
    "FakeLLM",
    "Generation",
    "GenerationStatus",
    "Reply",
    "Retrieval",
    "Stats",
    "Text",
    "ToolUse",
]
