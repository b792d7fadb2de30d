"""Structured output (issue 32, item 4): an agent with an output schema asks each provider for
JSON in that shape (its own structured-output mode, in the request shape the real API takes —
the fakes check every body against the official SDK's request type), checks the final answer,
corrects the model within the step budget, and ends ``failed`` naming the violation when the
model cannot comply; ``/status.output`` is the validated value, durable with the run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pydantic
import pytest

from agents.chat import AIChatAgent, ChatMessageOptions
from agents.providers import (
    AnthropicMessages,
    OpenAIChatCompletions,
    OpenAIResponses,
    OutputSchemaError,
    Tool,
    model_reply,
    output_schema,
)
from agents.providers.output import anthropic_schema
from agents.server import AgentRegistry, create_agent_server, define_agent, session_object_name
from doemu.testing.fake_providers import Api, FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .agent_server_steps import Session
from .polling import eventually
from .test_chat_agent import connect, request

ANALYSIS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sentiment": {"enum": ["positive", "negative", "neutral"]},
        "topics": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["sentiment", "topics"],
}
VALID = '{"sentiment": "positive", "topics": ["otters"]}'
INVALID = '{"sentiment": "meh", "topics": ["otters"]}'


class Summary(pydantic.BaseModel):
    summary: str
    sources: list[str]


async def lookup(args: dict[str, Any], ctx: Any) -> Any:
    return {"found": args.get("q")}


PROVIDERS: dict[str, Callable[[Any], Any]] = {
    "chat": lambda env: OpenAIChatCompletions.from_env(env, model="m"),
    "responses": lambda env: OpenAIResponses.from_env(env, model="m"),
    "anthropic": lambda env: AnthropicMessages.from_env(env, model="m"),
}
API: dict[str, Api] = {"chat": "chat", "responses": "responses", "anthropic": "messages"}


def registry() -> AgentRegistry:
    agents = AgentRegistry()
    for kind in PROVIDERS:
        agents.register(define_agent(f"analyst-{kind}", output_schema=ANALYSIS, max_steps=3))
    agents.register(define_agent("terse", output_schema=ANALYSIS, max_steps=2))
    agents.register(define_agent("summariser", output_schema=Summary, max_steps=3))
    tool = Tool("lookup", "Look something up.", {"type": "object"}, execute=lookup)
    agents.register(define_agent("busy", tools=[tool], output_schema=ANALYSIS, max_steps=2))
    return agents


def _adapter(env: Any, ctx: Any) -> Any:
    kind = ctx.agent_type.rpartition("-")[2]
    return PROVIDERS.get(kind, PROVIDERS["chat"])(env)


Server = create_agent_server(agents=registry(), llm_adapter=_adapter, name="StructuredServer")


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="k") as server:
        yield server


def _vars(llm: FakeLLM) -> dict[str, str]:
    return {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": f"{llm.url}/v1",
            "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": llm.url}  # fmt: skip


async def harness(doemu_harness: HarnessFactory, llm: FakeLLM) -> Any:
    return await doemu_harness({"AGENTS": Server}, vars=_vars(llm))


# -- the schema itself ---------------------------------------------------------------------------


def test_a_json_schema_accepts_its_values_and_names_what_it_refuses() -> None:
    schema = output_schema(ANALYSIS, name="analysis")
    assert schema.validate(VALID) == {"sentiment": "positive", "topics": ["otters"]}
    assert schema.validate(f"```json\n{VALID}\n```")["sentiment"] == "positive"  # a fence
    with pytest.raises(OutputSchemaError) as refused:
        schema.validate(INVALID)
    assert refused.value.violation == (
        "$.sentiment must be one of ['positive', 'negative', 'neutral']"
    )
    assert "output 'analysis' does not match its schema" in str(refused.value)
    with pytest.raises(OutputSchemaError, match=r"must contain \['topics'\]"):
        schema.validate('{"sentiment": "neutral"}')
    with pytest.raises(OutputSchemaError, match="not JSON"):
        schema.validate("The sentiment is positive.")


def test_a_pydantic_model_validates_with_itself() -> None:
    schema = output_schema(Summary)
    assert schema.name == "Summary" and schema.schema["required"] == ["summary", "sources"]
    assert schema.validate('{"summary": "s", "sources": ["a"]}') == {
        "summary": "s",
        "sources": ["a"],
    }
    with pytest.raises(OutputSchemaError, match=r"\$.sources: Field required"):
        schema.validate('{"summary": "s"}')


def test_what_is_not_a_schema_is_refused_when_the_agent_is_defined() -> None:
    with pytest.raises(ValueError, match="agent 'x': output schema 'output' is not a valid"):
        define_agent("x", output_schema={"type": "no-such-type"})
    with pytest.raises(ValueError, match=r"a JSON Schema .* or a pydantic model class"):
        define_agent("x", output_schema="a string")


def test_anthropic_gets_closed_objects_without_the_constraints_it_does_not_take() -> None:
    schema = {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "object", "properties": {}}}}}  # fmt: skip
    assert anthropic_schema(schema) == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "n": {"type": "integer", "description": '{minimum: 1}'},
            "tags": {"type": "array", "items": {"type": "object", "properties": {},
                                                "additionalProperties": False}},
        },
    }  # fmt: skip


# -- the agent server ----------------------------------------------------------------------------

#: The structured-output request field of each API, as its official SDK types it.
FORMAT: dict[str, Any] = {
    "chat": lambda body: body["response_format"],
    "responses": lambda body: body["text"]["format"],
    "anthropic": lambda body: body["output_config"],
}
EXPECTED_FORMAT: dict[str, Any] = {
    "chat": {"type": "json_schema",
             "json_schema": {"name": "output", "schema": ANALYSIS, "strict": False}},
    "responses": {"type": "json_schema", "name": "output", "schema": ANALYSIS, "strict": False},
    "anthropic": {"format": {"type": "json_schema", "schema": anthropic_schema(ANALYSIS)}},
}  # fmt: skip


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_a_valid_answer_is_the_runs_output_in_each_providers_mode(
    doemu_harness: HarnessFactory, llm: FakeLLM, kind: str
) -> None:
    llm.script(Reply(Text('{"sentiment": ', '"positive", "topics": ["otters"]}')))
    h = await harness(doemu_harness, llm)
    s = Session(h, f"so-valid-{kind}", default_agent=f"analyst-{kind}")
    await s.start("how do people feel about otters?")
    status = await s.wait("completed")
    assert status["output"] == {"sentiment": "positive", "topics": ["otters"]}
    (sent,) = llm.requests(API[kind])
    assert FORMAT[kind](sent) == EXPECTED_FORMAT[kind]
    history = [c["chunk"] for c in await s.history()]
    completed = [c for c in history if c["type"] == "run_completed"]
    assert completed[-1]["output"] == status["output"]
    assert [c["output"] for c in history if c["type"] == "output"] == [status["output"]]
    assert await h.evict("AGENTS", session_object_name(s.id))
    assert (await s.status())["output"] == status["output"]  # stored with the run


@pytest.mark.parametrize("kind", list(PROVIDERS))
async def test_an_invalid_answer_is_corrected_within_the_step_budget(
    doemu_harness: HarnessFactory, llm: FakeLLM, kind: str
) -> None:
    llm.script(Reply(Text(INVALID)), Reply(Text(VALID)))
    h = await harness(doemu_harness, llm)
    s = Session(h, f"so-fix-{kind}", default_agent=f"analyst-{kind}")
    await s.start("how do people feel about otters?")
    status = await s.wait("completed")
    assert status["output"] == {"sentiment": "positive", "topics": ["otters"]}
    _, second = llm.requests(API[kind])
    assert FORMAT[kind](second) == EXPECTED_FORMAT[kind]  # every step asks for the shape
    said = _said(kind, second)
    assert said[-2:] == [
        ("assistant", INVALID),
        ("user", "Your answer does not match the required output schema 'output': $.sentiment "
                 "must be one of ['positive', 'negative', 'neutral']. Answer again with only a "
                 "JSON value that matches the schema — no prose and no code fences."),
    ]  # fmt: skip
    rejected = [c["chunk"] for c in await s.history() if c["chunk"]["type"] == "output_rejected"]
    assert [(r["step"], r["retry"]) for r in rejected] == [(0, True)]


def _said(kind: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each message the request sends."""
    out = []
    for message in body["input"] if kind == "responses" else body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(b.get("text", "")) for b in content)
        out.append((message.get("role"), content))
    return out


async def test_a_model_that_never_complies_fails_the_run_naming_the_violation(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("I think people like otters.")), Reply(Text(INVALID)))
    h = await harness(doemu_harness, llm)
    s = Session(h, "so-never", default_agent="terse")
    await s.start("how do people feel about otters?")
    status = await s.wait("failed")
    assert status["output"] is None
    assert status["error"] == (
        "output 'output' does not match its schema: $.sentiment must be one of ['positive', "
        "'negative', 'neutral'] — no answer matched the output schema within max_steps=2"
    )
    assert len(llm.requests("chat")) == 2  # the budget: max_steps requests, no more
    history = [c["chunk"] for c in await s.history()]
    rejected = [(c["step"], c["retry"]) for c in history if c["type"] == "output_rejected"]
    assert rejected == [(0, True), (1, False)]
    failed = [c for c in history if c["type"] == "run_failed"]
    assert failed[-1]["error"] == status["error"]
    assert "Traceback" not in status["error"]
    llm.script(Reply(Text(VALID)))  # the session serves on: a new run completes
    await s.start("again?")
    assert (await s.wait("completed"))["output"]["sentiment"] == "positive"


async def test_a_run_still_calling_tools_at_its_last_step_fails(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(ToolUse("lookup", {"q": "a"}, id="c1")),
               Reply(ToolUse("lookup", {"q": "b"}, id="c2")))  # fmt: skip
    h = await harness(doemu_harness, llm)
    s = Session(h, "so-busy", default_agent="busy")
    await s.start("look things up")
    status = await s.wait("failed")
    assert status["error"] == (
        "output 'output': no answer within max_steps=2 — the model was still calling tools at "
        "its last step"
    )


async def test_a_pydantic_model_is_the_schema_and_the_validator(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text('{"summary": "otters"}')),
               Reply(Text('{"summary": "otters", "sources": ["a"]}')))  # fmt: skip
    h = await harness(doemu_harness, llm)
    s = Session(h, "so-pydantic", default_agent="summariser")
    await s.start("summarise")
    status = await s.wait("completed")
    assert status["output"] == {"summary": "otters", "sources": ["a"]}
    first, second = llm.requests("chat")
    assert first["response_format"]["json_schema"]["name"] == "Summary"
    assert first["response_format"]["json_schema"]["schema"] == Summary.model_json_schema()
    assert "$.sources: Field required" in _said("chat", second)[-1][1]


async def test_a_crash_after_a_correction_resumes_with_the_correction_kept(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(INVALID)), Reply(Text(VALID), hold_after=0))  # held: the 2nd step
    h = await harness(doemu_harness, llm)
    s = Session(h, "so-crash", default_agent="analyst-chat")
    await s.start("how do people feel about otters?")
    await llm.await_held(timeout=10)
    h.reset("AGENTS", session_object_name(s.id), "simulated crash")
    llm.release()
    await s.wait("interrupted")
    llm.script(Reply(Text('{"sentiment": "neutral", "topics": []}')))
    status, body = await s.call("/resume", {"options": {"mode": "continue"}})
    assert status == 200, body
    done = await s.wait("completed")
    assert done["output"] == {"sentiment": "neutral", "topics": []}
    _, held, resumed = llm.requests("chat")
    assert _said("chat", resumed) == _said("chat", held)  # the stored correction, read again
    assert _said("chat", resumed)[-2:] == [
        ("assistant", INVALID),
        ("user", _said("chat", held)[-1][1]),
    ]
    assert "$.sentiment must be one of" in _said("chat", resumed)[-1][1]
    assert await h.evict("AGENTS", session_object_name(s.id))
    assert (await s.status())["output"] == done["output"]


# -- model_reply in a chat agent -----------------------------------------------------------------


class AnalystChat(AIChatAgent):
    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        provider = OpenAIChatCompletions.from_env(self.env, model="m")
        return model_reply(self, options, provider, output_schema=ANALYSIS, max_steps=3)


async def test_model_reply_takes_an_output_schema_for_chat_agents(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(INVALID)), Reply(Text(VALID)))
    h = await doemu_harness({"CHAT": AnalystChat}, vars=_vars(llm))
    client = await connect(h.env.CHAT.getByName("so-chat"), "a")
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "otters?"}]}
    client.send(request("r1", "", "u1", messages=[message]))
    await eventually(lambda: client.done("r1"), what="the turn's end")
    assert not (client.done("r1") or {}).get("error")
    chunks = client.chunks("r1")
    outputs = [c for c in chunks if c["type"] == "data-structured-output"]
    assert outputs == [{"type": "data-structured-output", "id": "output",
                        "data": {"sentiment": "positive", "topics": ["otters"]}}]  # fmt: skip
    corrections = [c["data"]["step"] for c in chunks if c["type"] == "data-structured-output-error"]
    assert corrections == [0]
