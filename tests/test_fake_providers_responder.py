"""A responder answers what nothing was scripted for; the ``--demo`` model and the
``python -m doemu.testing.fake_providers`` command built on it."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import anthropic
import openai
import pytest

from doemu.testing.fake_providers import (
    FakeLLM,
    Reply,
    Text,
    ToolUse,
)

from . import fake_llm_support as support
from .fake_llm_support import KEY, USER, statuses

# The shared fixtures (tests/fake_llm_support.py): one server per module.
server, llm, oai, claude = support.server, support.llm, support.oai, support.claude

APPROVE_TOOL: Any = {"type": "function", "function": {"name": "approve", "parameters": {}}}


def _chat_text(client: openai.OpenAI, messages: Any, **extra: Any) -> tuple[str, list[Any]]:
    """A streamed chat completion's text and its tool calls as ``(id, name, arguments)`` (the
    SDK's own parser reads the stream)."""
    stream = client.chat.completions.create(model="m", messages=messages, stream=True, **extra)
    deltas = [chunk.choices[0].delta for chunk in stream if chunk.choices]
    calls: dict[int, list[str]] = {}
    for call in (call for delta in deltas for call in delta.tool_calls or ()):
        seen = calls.setdefault(call.index, [call.id or "", "", ""])
        seen[1] += (call.function and call.function.name) or ""
        seen[2] += (call.function and call.function.arguments) or ""
    text = "".join(delta.content or "" for delta in deltas)
    return text, [(i, n, json.loads(a or "{}")) for i, n, a in calls.values()]


def test_a_responder_answers_what_nothing_was_scripted_for_in_every_format() -> None:
    asked: list[tuple[str, Any]] = []

    def echo(api: str, body: dict[str, Any]) -> Reply | None:
        asked.append((api, body))
        body.clear()  # its own copy: what the fake recorded is untouched
        return None if len(asked) == 2 else Reply(Text("echo ", api))

    with (
        FakeLLM(api_key=KEY, responder=echo) as llm,
        openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client,
        anthropic.Anthropic(base_url=llm.url, api_key=KEY, max_retries=0) as claude,
    ):
        llm.script(Reply(Text("scripted")))
        assert _chat_text(client, USER)[0] == "scripted"  # the script comes first
        assert _chat_text(client, USER)[0] == "echo chat"
        assert _chat_text(client, USER)[0] == "ok"  # None: the default reply
        assert client.responses.create(model="m", input="hi").output_text == "echo responses"
        reply = claude.messages.create(model="c", max_tokens=8, messages=USER)
        assert reply.content[0].type == "text" and reply.content[0].text == "echo messages"
        assert [api for api, _ in asked] == ["chat", "chat", "responses", "messages"]
        assert llm.requests("chat")[1]["messages"] == USER
        llm.responder = None
        assert _chat_text(client, USER)[0] == "ok" and len(asked) == 4


BOOM: Any = [{"role": "user", "content": "boom"}]


def test_a_failing_responder_is_the_providers_500_and_the_server_goes_on() -> None:
    def broken(api: str, body: dict[str, Any]) -> Reply | None:
        if "boom" in json.dumps(body):
            raise ValueError("no answer for boom")
        return "not a reply"  # type: ignore[return-value]

    with (
        FakeLLM(api_key=KEY, responder=broken) as llm,
        openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        with pytest.raises(openai.InternalServerError, match="ValueError: no answer for boom"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "boom"}]
            )
        with pytest.raises(openai.InternalServerError, match="returned str"):
            client.chat.completions.create(model="m", messages=USER)
        assert statuses(llm.stats) == ["failed", "failed"]
        llm.script(Reply(Text("still here")))
        assert _chat_text(client, USER)[0] == "still here"


def test_concurrent_requests_each_get_their_own_body() -> None:
    def echo(api: str, body: dict[str, Any]) -> Reply:
        return Reply(Text(*body["messages"][-1]["content"].split()), delay_ms=5)

    with (
        FakeLLM(api_key=KEY, responder=echo) as llm,
        openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        said = [f"caller{i} says {i}" for i in range(8)]
        heard: dict[int, str] = {}

        def call(i: int) -> None:
            heard[i] = _chat_text(client, [{"role": "user", "content": said[i]}])[0]

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(said))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        assert heard == {i: text.replace(" ", "") for i, text in enumerate(said)}


def test_the_demo_model_answers_asks_for_approval_and_continues_a_cut_answer() -> None:
    from doemu.testing.fake_providers.__main__ import DEMO_DELAY_MS, demo_responder

    def undelayed(api: Any, body: dict[str, Any]) -> Reply | None:
        reply = demo_responder(api, body)
        assert reply is not None and reply.delay_ms == DEMO_DELAY_MS
        return Reply(*reply.items)  # the same words, without the demo's pauses

    with (
        FakeLLM(api_key=KEY, responder=undelayed) as llm,
        openai.OpenAI(base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        question = [{"role": "user", "content": "tell me about otters"}]
        answer, calls = _chat_text(client, question, tools=[APPROVE_TOOL])
        assert answer.startswith("You asked: “tell me about otters”.") and calls == []
        (generation,) = llm.stats.generations
        assert generation.output_tokens == len(answer.split()) > 30  # one word per delta

        ask = [{"role": "user", "content": "please approve the deploy"}]
        lead, calls = _chat_text(client, ask, tools=[APPROVE_TOOL])
        assert lead == "I need your approval before I do that. "
        ((call_id, name, args),) = calls
        assert (name, args) == ("approve", {"action": "please approve the deploy"})
        asked = [*ask, {"role": "assistant", "content": lead, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "approve", "arguments": json.dumps(args)}}]}]  # fmt: skip
        for result, said in (({"approved": True}, "Approved: please approve the deploy."),
                             ({"approved": False}, "Not approved.")):  # fmt: skip
            answered = [*asked, {"role": "tool", "tool_call_id": call_id,
                                 "content": json.dumps(result)}]  # fmt: skip
            text, more = _chat_text(client, answered, tools=[APPROVE_TOOL])
            assert text.startswith(said) and more == [], text
        assert _chat_text(client, ask)[0].startswith("You asked:")  # no approve tool offered

        cut = answer[: answer.index("Durable")]
        instruction = "Your previous answer was cut off. Continue exactly where it stopped."
        rest = _chat_text(client, [*question, {"role": "assistant", "content": cut},
                                   {"role": "user", "content": instruction}])[0]  # fmt: skip
        assert cut + rest == answer


def test_the_demo_model_reads_every_wire_format_and_the_example_tools() -> None:
    from doemu.testing.fake_providers.__main__ import demo_responder

    def said(api: Any, body: dict[str, Any]) -> tuple[str, list[tuple[str, Any]]]:
        reply = demo_responder(api, body)
        assert reply is not None
        texts = "".join(d for item in reply.items if isinstance(item, Text) for d in item.chunks)
        return texts, [(i.name, dict(i.arguments)) for i in reply.items if isinstance(i, ToolUse)]

    tools = [{"type": "function", "name": n} for n in ("approve", "word_count", "summarize")]
    assert said("responses", {"input": "count these words", "tools": tools})[1] == [
        ("word_count", {"text": "count these words"})
    ]
    counted = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "count"}]},
                         {"type": "function_call", "call_id": "c1", "name": "word_count",
                          "arguments": "{}"},
                         {"type": "function_call_output", "call_id": "c1",
                          "output": '{"words": 1}'}], "tools": tools}  # fmt: skip
    assert said("responses", counted)[0].startswith("That message has 1 words")
    otters = {"messages": [{"role": "user", "content": "summarize otters"}], "tools": tools}
    assert said("messages", otters)[1] == [("summarize", {"message": "summarize otters"})]
    child = {"system": "You summarize.", "messages": [{"role": "user", "content": "a b c"}]}
    assert said("messages", child)[0] == "In short: a b c."
    approved = {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "approve it"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "approve",
                                           "input": {"action": "ship it"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": '{"approved": true}'}]}]}  # fmt: skip
    assert said("messages", approved)[0].startswith("Approved: ship it.")
    prefill = {"messages": [{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": "You asked: “hi”. I"}]}  # fmt: skip
    assert said("messages", prefill)[0].startswith(" am the demo model")
    assert demo_responder("chat", {"messages": [{"role": "system", "content": "x"}]}) is None


def _first_line(proc: subprocess.Popen[str], within: float = 15.0) -> str:
    """The process's first stdout line, read against a deadline (a hung start fails the test)."""
    import selectors

    assert proc.stdout is not None
    deadline = time.monotonic() + within
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while not selector.select(timeout=0.1):
            assert proc.poll() is None, f"it exited with {proc.returncode}"
            assert time.monotonic() < deadline, "no line within the deadline"
    return proc.stdout.readline()


def test_the_cli_serves_a_demo_fake_until_terminated_and_never_prints_the_key() -> None:
    command = [sys.executable, "-m", "doemu.testing.fake_providers", "--port", "0", "--demo",
               "--api-key", "sk-cli-secret"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _first_line(proc)
        url = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert url is not None and "sk-cli-secret" not in line, line
        with openai.OpenAI(base_url=f"{url[0]}/v1", api_key="sk-cli-secret", max_retries=0,
                           timeout=15) as client:  # fmt: skip
            words: list[tuple[float, str]] = []  # the first words, as they arrive
            hello: Any = [{"role": "user", "content": "hello cli"}]
            with client.chat.completions.create(model="m", messages=hello, stream=True) as stream:
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        words.append((time.monotonic(), chunk.choices[0].delta.content))
                        if len(words) == 4:
                            break  # and leave mid-answer: the server stops that generation
            assert "".join(w for _, w in words) == "You asked: “hello cli”. "
            # word by word: each delta one word (a timed assertion would be flaky; the pacing,
            # DEMO_DELAY_MS, is the responder's, asserted on its Reply in the tests above)
            assert [len(w.split()) for _, w in words] == [1, 1, 1, 1]
            with pytest.raises(openai.AuthenticationError):
                client.with_options(api_key="wrong").chat.completions.create(
                    model="m", messages=USER
                )
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "sk-cli-secret" not in out + err and "Traceback" not in err, (out, err)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        busy = subprocess.run([*command[:4], str(port)], capture_output=True, text=True,
                              timeout=15)  # fmt: skip
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr
