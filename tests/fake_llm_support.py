"""Shared by the fake providers' tests: one server per test module, reset before each test,
and the official SDK clients pointed at it (their parsers are the proof that the fakes speak the
real wire formats). Modules import the fixtures they use from here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openai.types.responses import ResponseTextDeltaEvent

from doemu.testing.fake_providers import FakeLLM, Stats

try:  # the HTTP client under the current SDKs; the Anthropic SDK lets its errors through a stream
    import httpx2

    CUT: tuple[type[Exception], ...] = (
        anthropic.APIConnectionError,
        httpx.TransportError,
        httpx2.TransportError,
    )
except ImportError:  # older SDKs use httpx itself
    CUT = (anthropic.APIConnectionError, httpx.TransportError)

KEY = "test-key"
USER: Any = [{"role": "user", "content": "say hello"}]  # 2 input tokens
CHARGE_TOOL: Any = {
    "type": "function",
    "function": {"name": "charge", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLM]:
    with FakeLLM(api_key=KEY) as llm:
        yield llm


@pytest.fixture
def llm(server: FakeLLM) -> FakeLLM:
    server.reset()
    return server


@pytest.fixture
def oai(llm: FakeLLM) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0, timeout=10) as client:
        yield client


@pytest.fixture
def claude(llm: FakeLLM) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=llm.url, api_key=KEY, max_retries=0, timeout=10) as client:
        yield client


def texts(events: list[Any]) -> str:
    return "".join(event.delta for event in events if isinstance(event, ResponseTextDeltaEvent))


def statuses(stats: Stats) -> list[str]:
    return [generation.status for generation in stats.generations]


def served(stats: Stats) -> dict[str, int]:
    """The routes that were called (``stats.requests`` has a 0 for every other one)."""
    return {route: count for route, count in stats.requests.items() if count}
