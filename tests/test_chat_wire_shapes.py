"""One wire behaviour for both documented ways of answering (issue 28, item 7).

``model_reply(...)`` (the model loop) and ``ui_message_response(text_stream(...))`` (your own
model call) send what ``streamText(...).toUIMessageStreamResponse()`` sends through the published
``AIChatAgent``, as observed on ``@cloudflare/ai-chat`` 0.12.2 with ``@ai-sdk/openai-compatible``:

* the ``start`` chunk names a new message ``assistant_<ms>_<9 base-36 chars>``;
* a step's text part is ``txt-0`` (each step's, and a continuation's);
* every model call opens a step: a continuation starts with ``start-step`` too, so the saved
  message keeps the package's trailing ``step-start`` part;
* ``start-step`` waits until the model answers: a request refused with an HTTP error leaves only
  ``start`` (and the transcript only the user's message);
* a retry of a turn killed before its first chunk answers in a new message.

Both paths run against the OpenAI-compatible wire-format fake, in process (manual clock).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from agents.chat import AIChatAgent, ChatMessageOptions, text_stream, ui_message_response
from agents.chat.recovery import ChatRecoveryConfig
from agents.providers import (
    ModelCall,
    OpenAIChatCompletions,
    OpenAIResponses,
    ProviderHTTPError,
    TextDelta,
    Tool,
    items_from_messages,
    model_reply,
)
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Client, connect, request
from .test_providers_loop import env_for, stored, text_of

ASSISTANT_ID = re.compile(r"^assistant_\d{13}_[0-9a-z]{9}$")


async def lookup(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"hits": 3}


class ModelPath(AIChatAgent):
    """``model_reply`` over the chat-completions adapter."""

    chat_recovery = ChatRecoveryConfig(max_attempts=3)
    tools: ClassVar[list[Tool]] = [Tool("lookup", "Look it up.", {"type": "object"}, lookup)]

    def provider(self) -> Any:
        return OpenAIChatCompletions.from_env(self.env, model="m")

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        return model_reply(self, options, self.provider(), tools=self.tools)


class StreamPath(ModelPath):
    """``ui_message_response(text_stream(deltas))``, the deltas read from the same adapter."""

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        provider = self.provider()
        call = ModelCall(items_from_messages(self.messages))

        async def deltas() -> Any:
            async for event in provider.stream(call):
                if isinstance(event, TextDelta):
                    yield event.delta

        return ui_message_response(text_stream(deltas()))


PATHS = {"model_reply": ModelPath, "text_stream": StreamPath}


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


async def chat(doemu_harness: HarnessFactory, llm: FakeLLM, cls: type) -> tuple[Any, Any, Client]:
    h = await doemu_harness({"CHAT": cls}, vars=env_for(llm))
    stub = h.env.CHAT.getByName("room")
    return h, stub, await connect(stub, "a")


def others(a: Client, request_id: str) -> list[dict[str, Any]]:
    """The chunks of every other request (the continuations and retries of recovery)."""
    ids = [f["id"] for f in a.of("cf_agent_use_chat_response") if f["id"] != request_id]
    return [c for rid in dict.fromkeys(ids) for c in a.chunks(rid)]


@pytest.mark.parametrize("path", list(PATHS))
async def test_the_start_chunk_names_a_new_message_as_the_package_does(
    doemu_harness: HarnessFactory, llm: FakeLLM, path: str
) -> None:
    llm.script(Reply(Text("Hello ", "world")))
    _, stub, a = await chat(doemu_harness, llm, PATHS[path])
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    start = a.chunks("r1")[0]
    assert start["type"] == "start" and ASSISTANT_ID.match(start["messageId"]), start
    assert [m["id"] for m in await stored(stub)] == ["u1", start["messageId"]]


@pytest.mark.parametrize("path", list(PATHS))
async def test_a_steps_text_part_is_txt_0(
    doemu_harness: HarnessFactory, llm: FakeLLM, path: str
) -> None:
    llm.script(Reply(Text("let me ", "look"), ToolUse("lookup", {"q": "x"}, id="call_1")))
    llm.script(Reply(Text("found ", "three")))
    _, _, a = await chat(doemu_harness, llm, PATHS[path])
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    opened = [c["id"] for c in a.chunks("r1") if c["type"] == "text-start"]
    # the model loop runs the tool and calls again: two steps, each with its own txt-0
    assert opened == (["txt-0", "txt-0"] if path == "model_reply" else ["txt-0"])
    assert {c["id"] for c in a.chunks("r1") if c["type"].startswith("text-")} == {"txt-0"}


@pytest.mark.parametrize("path", list(PATHS))
async def test_a_continuation_opens_a_step_and_the_message_keeps_its_step_start(
    doemu_harness: HarnessFactory, llm: FakeLLM, path: str
) -> None:
    """A dropped connection is continued; the continuation is a new model call, so it sends
    ``start``, ``start-step``, then its text (into the partial's text part, whose ``text-start``
    the agent drops): the message ends ``[step-start, text, step-start]`` as the package's."""
    llm.script(Reply(Text("one ", "two ", "three ", "four"), die_after=3), Reply(Text("four")))
    h, stub, a = await chat(doemu_harness, llm, PATHS[path])
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the cut turn's end")
    await h.advance(1_000)  # the first transient retry's back-off

    async def continued() -> bool:
        messages = await stored(stub)
        return len(messages) == 2 and text_of(messages[1]) == "one two three four"

    await eventually(continued, what="the continued reply")
    assert [c["type"] for c in others(a, "r1")] == [
        "start", "start-step", "text-delta", "text-end", "finish-step", "finish"]  # fmt: skip
    assert others(a, "r1")[2]["id"] == "txt-0"
    (_, reply) = await stored(stub)
    assert [p["type"] for p in reply["parts"]] == ["step-start", "text", "step-start"]


@pytest.mark.parametrize("path", list(PATHS))
async def test_a_refused_request_sends_only_start(
    doemu_harness: HarnessFactory, llm: FakeLLM, path: str
) -> None:
    llm.script(Reply(fail=(500, "the model is down")))
    _, stub, a = await chat(doemu_harness, llm, PATHS[path])
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    assert [c["type"] for c in a.chunks("r1")] == ["start"]
    assert a.done("r1")["outcome"] == "error"  # type: ignore[index]
    assert [m["role"] for m in await stored(stub)] == ["user"]


@pytest.mark.parametrize("path", list(PATHS))
async def test_a_retry_after_a_kill_before_the_first_chunk_answers_in_a_new_message(
    doemu_harness: HarnessFactory, llm: FakeLLM, path: str
) -> None:
    llm.script(Reply(Text("lost"), hold_after=0), Reply(Text("Hello")))  # not answered yet
    h, stub, a = await chat(doemu_harness, llm, PATHS[path])
    a.send(request("r1", "hi", "u1"))
    await llm.await_held(timeout=10)
    await eventually(lambda: a.chunks("r1"), what="the start chunk")
    orphan = a.chunks("r1")[0]["messageId"]
    h.reset("CHAT", "room", "simulated crash")
    llm.release()
    await stored(stub)  # any request wakes it: recovery schedules the retry
    await h.advance(1)

    async def answered() -> bool:
        messages = await stored(stub)
        return len(messages) == 2 and text_of(messages[1]) == "Hello"

    await eventually(answered, what="the retried turn's answer")
    (_, reply) = await stored(stub)
    assert reply["id"] != orphan and ASSISTANT_ID.match(reply["id"])


class ResponsesPath(AIChatAgent):
    """The model loop on the Responses adapter (re-attaches to the stored response), with the
    stall watchdog: each continuation adds a ``step-start``, which must not reset where the
    re-attached stream resumes."""

    chat_stream_stall_timeout_ms = 1_000
    chat_recovery = ChatRecoveryConfig(max_attempts=5)

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        return model_reply(self, options, OpenAIResponses.from_env(self.env, model="m"))


async def test_two_stalled_continuations_of_a_stored_response_repeat_no_text(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    words = [f"w{i} " for i in range(8)]
    llm.script(Reply(Text(*words), hold_after=3))
    h, stub, a = await chat(doemu_harness, llm, ResponsesPath)
    a.send(request("r1", "hi", "u1"))
    await llm.await_held(timeout=10)
    await eventually(lambda: len(a.chunks("r1")) >= 6, what="three words")
    for stall in (1, 2):  # the first reply, then its first continuation, go quiet
        await h.advance(1_000)

        def recovering(n: int = stall) -> bool:
            frames = a.of("cf_agent_use_chat_response")
            return sum(1 for f in frames if f.get("outcome") == "recovering") >= n

        await eventually(recovering, what=f"stall {stall}")
        await h.advance(1)  # the continuation's schedule
        await eventually(
            lambda n=stall: llm.stats.requests["responses.retrieve"] >= n,  # type: ignore[misc]
            what=f"continuation {stall} re-attached",
        )
    llm.release()

    async def whole() -> bool:
        messages = await stored(stub)
        return len(messages) == 2 and text_of(messages[1]) == "".join(words)

    await eventually(whole, what="the whole reply, once")
    assert llm.stats.requests["responses.create"] == 1


class ResponsesRetry(ResponsesPath):
    chat_stream_stall_timeout_ms = 0


async def test_a_retry_in_a_new_message_still_re_attaches_to_the_stored_response(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    """Killed once the response was asked for but before any of its text reached storage: the
    retry answers in a new message, yet from the same response (nothing generated or billed
    twice), since the cut request keeps its operation and so its idempotency key."""
    llm.script(Reply(Text("Hello ", "world"), hold_after=0))
    h, stub, a = await chat(doemu_harness, llm, ResponsesRetry)
    a.send(request("r1", "hi", "u1"))
    await llm.await_held(timeout=10)
    await eventually(lambda: a.chunks("r1"), what="the start chunk")
    orphan = a.chunks("r1")[0]["messageId"]
    h.reset("CHAT", "room", "simulated crash")
    llm.release()
    await stored(stub)
    await h.advance(1)

    async def answered() -> bool:
        messages = await stored(stub)
        return len(messages) == 2 and text_of(messages[1]) == "Hello world"

    await eventually(answered, what="the retried turn's answer")
    (_, reply) = await stored(stub)
    assert reply["id"] != orphan
    stats = llm.stats
    # One generation: re-attached by its stored id, or — when the kill came before that id was
    # stored — created again under the cut request's idempotency key and collapsed upstream.
    assert len(stats.generations) == 1
    assert stats.requests["responses.create"] + stats.requests["responses.retrieve"] == 2


class Masked(ModelPath):
    """The README's recipe for not showing a provider's words: the refusal becomes an in-band
    error chunk in the agent's own words (``streamText``'s default ``onError`` text)."""

    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        reply = model_reply(self, options, self.provider())

        async def masked() -> Any:
            try:
                async for chunk in reply:
                    yield chunk
            except ProviderHTTPError:
                yield {"type": "error", "errorText": "An error occurred."}

        return masked()


async def test_an_agent_can_word_a_refusal_itself(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(fail=(401, "Incorrect API key provided: sk-...abcd")))
    _, stub, a = await chat(doemu_harness, llm, Masked)
    a.send(request("r1", "hi", "u1"))
    await eventually(lambda: a.done("r1"), what="the turn's end")
    (error,) = [f for f in a.of("cf_agent_use_chat_response") if f.get("error")]
    assert error["body"] == "An error occurred."
    assert a.done("r1")["outcome"] == "error"  # type: ignore[index]
    assert [m["role"] for m in await stored(stub)] == ["user"]
