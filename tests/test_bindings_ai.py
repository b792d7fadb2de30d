"""Workers AI in process: ``env.AI.run`` served by the fake providers' OpenAI endpoint.

The endpoint is :class:`~doemu.testing.fake_providers.FakeLLM` (a real HTTP server speaking
chat completions and embeddings, which checks every body against the official SDK's request
type), so what the binding sends is what an OpenAI-compatible server accepts, and what it
answers is read back in Workers AI's shapes.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from pyodide.ffi import JsException

from doemu.bindings.ai import AiNotConfiguredError, InferenceUpstreamError
from doemu.compat.rpc import JsDict
from doemu.config.ai import AiSettings
from doemu.config.bindings import AiBinding, WorkerResources
from doemu.errors import DoemuError
from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse
from doemu.testing.fake_providers.embeddings import embedding
from doemu.testing.plugin import HarnessFactory

LLAMA = "@cf/meta/llama-3.1-8b-instruct"
BGE = "@cf/baai/bge-base-en-v1.5"
RESOURCES = WorkerResources(ai=AiBinding("AI"))


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(api_key="test-key") as server:
        yield server


def settings(url: str, **extra: Any) -> AiSettings:
    return AiSettings(f"{url}/v1", {LLAMA: "local-llama", BGE: "local-embed"}, **extra)


async def ai_of(doemu_harness: HarnessFactory, llm: FakeLLM, key: str = "test-key") -> Any:
    h = await doemu_harness(
        {}, resources=RESOURCES, ai=settings(llm.url), vars={"DOEMU_AI_API_KEY": key}
    )
    return h.env.AI


async def read_events(stream: Any) -> list[Any]:
    body = b""
    async for chunk in stream:
        body += bytes(chunk)
    text = body.decode()
    assert text.endswith("\n\n")
    events = []
    for block in text.strip("\n").split("\n\n"):
        assert block.startswith("data: "), block
        data = block.removeprefix("data: ")
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


async def test_messages_and_prompt_are_answered_in_workers_ai_shape(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("Hello ", "there")), Reply(Text("ok")))
    ai = await ai_of(doemu_harness, llm)
    result = await ai.run(
        LLAMA,
        {"messages": [{"role": "system", "content": "Be terse."},
                      {"role": "user", "content": "hi"}], "max_tokens": 20},
    )  # fmt: skip
    assert isinstance(result, JsDict)
    assert result.response == "Hello there"
    assert result["usage"]["completion_tokens"] == 2
    assert result["usage"]["total_tokens"] == result["usage"]["prompt_tokens"] + 2
    assert "tool_calls" not in result
    first = llm.requests("chat")[0]
    assert first["model"] == "local-llama" and first["max_tokens"] == 20
    assert first["messages"][1] == {"role": "user", "content": "hi"}
    assert llm.stats.generations[0].headers["authorization"] == "Bearer test-key"
    # Keywords are one trailing JS object, as through the Python SDK: the inputs here.
    assert (await ai.run(LLAMA, prompt="Say ok")).response == "ok"
    assert llm.requests("chat")[1]["messages"] == [{"role": "user", "content": "Say ok"}]
    assert ai.lastRequestHttpStatusCode == 200


async def test_a_stream_is_workers_ai_server_sent_events_ending_in_done(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("one ", "two ", "three")))
    ai = await ai_of(doemu_harness, llm)
    stream = await ai.run(LLAMA, {"prompt": "count", "stream": True})
    assert type(stream).__name__ == "ReadableStream"
    events = await read_events(stream)
    assert events[-1] == "[DONE]"
    assert [e["response"] for e in events[:3]] == ["one ", "two ", "three"]
    usage = events[-2]
    assert usage["response"] == "" and usage["usage"]["completion_tokens"] == 3
    sent = llm.requests("chat")[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_tools_go_out_in_openai_shape_and_calls_come_back_in_workers_ais(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(
        Reply(ToolUse("getWeather", {"city": "London"}, id="call_w")),
        Reply(ToolUse("getWeather", {"city": "Paris"}, id="call_p")),
        Reply(Text("Sunny")),
    )
    ai = await ai_of(doemu_harness, llm)
    city = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = {"name": "getWeather", "description": "The weather in a city", "parameters": city}
    ask = [{"role": "user", "content": "weather in london?"}]
    result = await ai.run(LLAMA, {"messages": ask, "tools": [tool]})
    assert result.tool_calls == [{"name": "getWeather", "arguments": {"city": "London"}}]
    assert result.response == ""
    assert llm.requests("chat")[0]["tools"] == [{"type": "function", "function": tool}]

    stream = await ai.run(LLAMA, {"messages": ask, "tools": [tool], "stream": True})
    calls = [e for e in await read_events(stream) if isinstance(e, dict) and e.get("tool_calls")]
    pieces = [piece for e in calls for piece in e["tool_calls"]]
    assert pieces[0]["id"] == "call_p" and pieces[0]["function"]["name"] == "getWeather"
    arguments = "".join(p["function"].get("arguments", "") for p in pieces)
    assert json.loads(arguments) == {"city": "Paris"}

    # The conversation goes on with the call (flat, as Workers AI spells it) and its result.
    follow = [*ask, {"role": "assistant", "content": "",
                     "tool_calls": [{"name": "getWeather", "arguments": {"city": "London"}}]},
              {"role": "tool", "name": "getWeather", "content": '{"sky": "sunny"}'}]  # fmt: skip
    assert (await ai.run(LLAMA, {"messages": follow, "tools": [tool]})).response == "Sunny"
    sent = llm.requests("chat")[2]["messages"]
    call_id = sent[1]["tool_calls"][0]["id"]
    assert sent[1]["tool_calls"][0]["function"] == {
        "name": "getWeather", "arguments": '{"city": "London"}'}  # fmt: skip
    assert sent[2] == {"role": "tool", "tool_call_id": call_id, "content": '{"sky": "sunny"}'}


async def test_embeddings_have_workers_ai_shape_and_data(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    ai = await ai_of(doemu_harness, llm)
    result = await ai.run(BGE, {"text": ["a story", "another story"]})
    assert result["shape"] == [2, 8]
    assert result["data"] == [embedding("a story"), embedding("another story")]
    assert result["pooling"] == "mean"
    assert llm.embeddings.requests[0]["model"] == "local-embed"
    single = await ai.run(BGE, {"text": "one"})
    assert single["shape"] == [1, 8] and single["data"] == [embedding("one")]


async def test_without_an_endpoint_every_call_says_how_to_configure_one(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({}, resources=RESOURCES)
    with pytest.raises(AiNotConfiguredError) as caught:
        await h.env.AI.run(LLAMA, {"prompt": "hi"})
    error = caught.value
    assert isinstance(error, DoemuError) and isinstance(error, JsException)
    assert error.name == "AiInternalError"
    for words in ("cannot run locally", "[tool.doemu.ai]", "base_url", "pyproject.toml",
                  "DOEMU_AI_API_KEY", LLAMA):  # fmt: skip
        assert words in error.message
    described = h.runtime.extra.describe()[-1]
    assert described["type"] == "ai" and described["resource"] == "(not configured)"
    assert described["configured"] is False and "[tool.doemu.ai]" in described["target"]


async def test_bad_input_and_unmapped_models_are_refused_by_name(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    ai = await ai_of(doemu_harness, llm)
    refusals = [
        ("@cf/unknown/model", {"prompt": "hi"}, "5007: No such model @cf/unknown/model"),
        ("@cf/unknown/model", {"prompt": "hi"}, "does not map it and no default_model is set"),
        (LLAMA, "just a string", "inputs must be an object"),
        (LLAMA, ["a", "list"], "inputs must be an object"),
        (LLAMA, {"input": "hi"}, "required properties are 'messages' or 'prompt'"),
        (LLAMA, {"messages": "hi"}, "'messages' must be a non-empty list"),
        (BGE, {"text": [1, 2]}, "'text' must be a string or a non-empty list of strings"),
    ]
    for model, inputs, words in refusals:
        with pytest.raises(InferenceUpstreamError) as caught:
            await ai.run(model, inputs)
        assert words in caught.value.message, caught.value.message
        assert caught.value.name == "InferenceUpstreamError"
    assert llm.requests("chat") == [] and llm.embeddings.requests == []
    # With a default, an unmapped text model is served by it (embeddings keep their own).
    h = await doemu_harness(
        {}, resources=RESOURCES, ai=settings(llm.url, default_model="fallback"),
        vars={"DOEMU_AI_API_KEY": "test-key"},
    )  # fmt: skip
    assert (await h.env.AI.run("@cf/other/model", {"prompt": "hi"})).response == "ok"
    assert llm.requests("chat")[-1]["model"] == "fallback"
    with pytest.raises(InferenceUpstreamError, match="default_embedding_model"):
        await h.env.AI.run("@cf/baai/bge-small-en-v1.5", {"text": "x"})


async def test_endpoint_failures_name_the_model_and_endpoint_and_the_binding_keeps_serving(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(fail=(503, "the model is loading")), Reply(fail=(500, "boom")))
    ai = await ai_of(doemu_harness, llm)
    with pytest.raises(InferenceUpstreamError) as caught:
        await ai.run(LLAMA, {"prompt": "hi"})
    text = caught.value.message
    assert text.startswith("503: the model is loading")
    assert LLAMA in text and "'local-llama'" in text and f"{llm.url}/v1/chat/completions" in text
    assert caught.value.status == 503 and ai.lastRequestHttpStatusCode == 503
    with pytest.raises(InferenceUpstreamError) as caught:  # a stream is refused at once
        await ai.run(LLAMA, {"prompt": "hi", "stream": True})
    assert caught.value.message.startswith("500: boom")
    assert (await ai.run(LLAMA, {"prompt": "hi"})).response == "ok"


async def test_a_wrong_key_is_refused_without_showing_it(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    ai = await ai_of(doemu_harness, llm, key="sk-wrong-secret-1234")
    with pytest.raises(InferenceUpstreamError) as caught:
        await ai.run(LLAMA, {"prompt": "hi"})
    assert caught.value.status == 401
    assert "sk-wrong-secret-1234" not in str(caught.value)
    assert "sk-wrong-secret-1234" not in repr(ai)


async def test_an_unreachable_endpoint_is_an_inference_error_not_an_http_client_traceback(
    doemu_harness: HarnessFactory,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    h = await doemu_harness(
        {}, resources=RESOURCES, ai=settings(f"http://127.0.0.1:{port}", default_model="m")
    )
    for inputs in ({"prompt": "hi"}, {"prompt": "hi", "stream": True}, {"text": "x"}):
        with pytest.raises(InferenceUpstreamError) as caught:
            await h.env.AI.run(LLAMA, inputs)
        assert "could not reach the AI endpoint" in caught.value.message
        assert f"127.0.0.1:{port}" in caught.value.message and "Is the model server running" in (
            caught.value.message
        )
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert h.env.AI.lastRequestHttpStatusCode is None


async def test_a_stream_cut_mid_reply_errors_the_stream_with_an_inference_error(
    doemu_harness: HarnessFactory, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("one ", "two ", "three ", "four"), die_after=2))
    ai = await ai_of(doemu_harness, llm)
    stream = await ai.run(LLAMA, {"prompt": "count", "stream": True})
    received = b""
    with pytest.raises(InferenceUpstreamError) as caught:
        async for chunk in stream:
            received += bytes(chunk)
    assert b'"response": "one "' in received and b"[DONE]" not in received
    assert "mid-reply" in caught.value.message or "before [DONE]" in caught.value.message
    assert LLAMA in caught.value.message


def test_tool_doemu_ai_is_read_from_pyproject_and_checked(tmp_path: Any) -> None:
    from doemu.config import SettingsError, resolve_settings

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[tool.doemu]\nport = 9000\n[tool.doemu.ai]\nbase_url = "http://127.0.0.1:1234/v1/"\n'
        'default_model = "m"\n[tool.doemu.ai.models]\n"@cf/meta/llama-3.1-8b-instruct" = "l"\n'
    )
    ai = resolve_settings({}, {}, pyproject).ai
    assert ai == AiSettings("http://127.0.0.1:1234/v1", {LLAMA: "l"}, "m", None)
    assert resolve_settings({}, {}, None).ai is None
    bad = {
        'api_key = "sk-1"': "unknown key 'api_key'",
        'base_url = "localhost:1234"': "expected an http:// or https:// URL",
        'default_model = ""': "expected a non-empty string",
        "models = 3": "models must be a table",
    }
    for line, words in bad.items():
        base = "" if line.startswith("base_url") else 'base_url = "http://h/v1"\n'
        pyproject.write_text(f"[tool.doemu.ai]\n{base}{line}\n")
        with pytest.raises(SettingsError, match=words.replace("(", r"\(")):
            resolve_settings({}, {}, pyproject)
    pyproject.write_text('[tool.doemu.ai]\ndefault_model = "m"\n')
    with pytest.raises(SettingsError, match="base_url is required"):
        resolve_settings({}, {}, pyproject)


def test_an_ai_binding_is_emulated_not_warned_about(tmp_path: Any) -> None:
    from doemu.config import load_config

    (tmp_path / "wrangler.toml").write_text(
        'name = "w"\nmain = "src/entry.py"\ncompatibility_date = "2025-01-01"\n'
        'compatibility_flags = ["python_workers"]\n[ai]\nbinding = "AI"\n'
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "entry.py").write_text("")
    config = load_config(tmp_path)
    assert config.resources.ai == AiBinding("AI")
    assert not [w for w in config.warnings if '"ai"' in w]


async def test_a_project_harness_reads_tool_doemu_ai(
    doemu_harness: HarnessFactory, llm: FakeLLM, tmp_path: Any
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "entry.py").write_text("")
    (project / "wrangler.toml").write_text(
        'name = "w"\nmain = "src/entry.py"\ncompatibility_date = "2025-01-01"\n'
        'compatibility_flags = ["python_workers"]\n[ai]\nbinding = "BRAIN"\n'
    )
    (project / "pyproject.toml").write_text(
        f'[tool.doemu.ai]\nbase_url = "{llm.url}/v1"\ndefault_model = "local"\n'
    )
    h = await doemu_harness(config=project / "wrangler.toml", vars={"DOEMU_AI_API_KEY": "test-key"})
    assert (await h.env.BRAIN.run(LLAMA, {"prompt": "hi"})).response == "ok"
    assert llm.requests("chat")[0]["model"] == "local"
