"""``python -m doemu.testing.fake_providers``: a :class:`~.FakeLLM` in the foreground, by hand.

The fakes exist for tests, but an example that needs a model is best tried with no API key and
no network too, so this serves one until Ctrl-C (or SIGTERM), printing one line with its URL —
never its key, which is ``--api-key`` (``test-key`` by default) and goes in the example's
``.dev.vars`` with the URL::

    python -m doemu.testing.fake_providers --demo            # http://127.0.0.1:8788
    # .dev.vars:  OPENAI_BASE_URL=http://127.0.0.1:8788/v1   OPENAI_API_KEY=test-key

Without ``--demo`` every generation says ``ok`` (there is nobody to script it). With it,
:func:`demo_responder` answers what it is asked, for ``examples/agent_server``: a few sentences
about the last user message, streamed word by word ``DEMO_DELAY_MS`` apart — slow enough to watch
the stream, reload the page, or kill the server mid-answer. A message that mentions "approve"
asks the browser first (the ``approve`` client tool), "count" calls the ``word_count`` tool and
"summar…" the ``summarize`` sub-agent, when the request offers those tools; once the tool's
result is in the request the answer says what it was ("Approved: …" or "Not approved."). An
agent offered no tools whose system prompt mentions summarizing answers "In short: …". A run
continued after a crash (the adapter's "continue where it stopped" instruction after a partial
answer) gets the rest of the same answer, so the transcript reads as one.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from .fake_llm import FakeLLM
from .relay import quiet_stream_cuts
from .script import Api, Reply, Text, ToolUse
from .sdk_types import preload

__all__ = ["DEMO_DELAY_MS", "demo_responder", "main"]

#: Milliseconds between two words of a demo answer: a 50-word answer takes about three seconds.
DEMO_DELAY_MS = 60


@dataclass(frozen=True, slots=True)
class _Entry:
    """One step of the conversation, whatever the wire format: a user or assistant text, a tool
    call the assistant made, or a tool result sent back."""

    role: str  # "user" | "assistant" | "call" | "result"
    text: str = ""
    name: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)
    call_id: str = ""


@dataclass
class _Conversation:
    system: str = ""
    tools: set[str] = field(default_factory=set)
    entries: list[_Entry] = field(default_factory=list)


def _text(content: Any) -> str:
    """A message's text: a string, or the ``text`` of its parts (every format's text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        ).strip()
    return ""


def _args(arguments: Any) -> Mapping[str, Any]:
    if isinstance(arguments, Mapping):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, Mapping) else {}


def _call(name: Any, call_id: Any, arguments: Any) -> _Entry:
    return _Entry("call", name=str(name or ""), args=_args(arguments), call_id=str(call_id))


def _result(text: str, call_id: Any) -> _Entry:
    return _Entry("result", text, call_id=str(call_id))


def _chat(body: Mapping[str, Any], into: _Conversation) -> None:
    for message in body.get("messages") or ():
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            into.system += _text(content)
        elif role == "user":
            into.entries.append(_Entry("user", _text(content)))
        elif role == "assistant":
            if text := _text(content):
                into.entries.append(_Entry("assistant", text))
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                into.entries.append(
                    _call(function.get("name"), call.get("id"), function.get("arguments"))
                )
        elif role == "tool":
            into.entries.append(_result(_text(content), message.get("tool_call_id")))
    into.tools = {str((t.get("function") or {}).get("name")) for t in body.get("tools") or ()}


def _responses(body: Mapping[str, Any], into: _Conversation) -> None:
    into.system = str(body.get("instructions") or "")
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or ():
        kind, role = item.get("type"), item.get("role")
        if kind == "function_call":
            into.entries.append(_call(item.get("name"), item.get("call_id"), item.get("arguments")))
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            into.entries.append(_result(text, item.get("call_id")))
        elif role in ("system", "developer"):
            into.system += _text(item.get("content"))
        elif role in ("user", "assistant"):
            into.entries.append(_Entry(role, _text(item.get("content"))))
    into.tools = {str(t.get("name")) for t in body.get("tools") or ()}


def _messages(body: Mapping[str, Any], into: _Conversation) -> None:
    into.system = _text(body.get("system"))
    for message in body.get("messages") or ():
        role, content = message.get("role"), message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or ()
        texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
        for block in blocks:
            if block.get("type") == "tool_use":
                into.entries.append(_call(block.get("name"), block.get("id"), block.get("input")))
            elif block.get("type") == "tool_result":
                into.entries.append(_result(_text(block.get("content")), block.get("tool_use_id")))
        if texts and role in ("user", "assistant"):
            into.entries.append(_Entry(str(role), "".join(texts)))
    into.tools = {str(t.get("name")) for t in body.get("tools") or ()}


def _conversation(api: Api, body: Mapping[str, Any]) -> _Conversation:
    """The request as one conversation (tool results named after their calls)."""
    conversation = _Conversation()
    {"chat": _chat, "responses": _responses, "messages": _messages}[api](body, conversation)
    names = {e.call_id: e.name for e in conversation.entries if e.role == "call"}
    calls = {e.call_id: e.args for e in conversation.entries if e.role == "call"}
    conversation.entries = [
        _Entry(e.role, e.text, names.get(e.call_id, ""), calls.get(e.call_id, {}), e.call_id)
        if e.role == "result"
        else e
        for e in conversation.entries
    ]
    return conversation


# -- what the demo model says ---------------------------------------------------------------------

Plan = str | tuple[str, ToolUse]
"""An answer (its text), or a lead-in sentence and a tool call."""


def _quoted(text: str, words: int = 12) -> str:
    said = text.split()
    return " ".join(said[:words]) + (" …" if len(said) > words else "")


def _answer(question: str) -> str:
    return (
        f"You asked: “{_quoted(question)}”. I am the demo model of doemu's fake provider, so I "
        "know nothing about it, but I answer word by word, slowly enough to watch. Every word "
        "is a chunk the session's Durable Object stored before you saw it. Reload the page, or "
        "kill the server and resume the run: the answer goes on from where it stopped."
    )


def _after_tool(result: _Entry, question: str) -> str:
    if result.name == "approve":
        try:
            answer = json.loads(result.text)
        except ValueError:
            answer = None
        if isinstance(answer, Mapping) and answer.get("approved") is True:
            action = result.args.get("action") or question
            return f"Approved: {action}. Consider it done, in this demo at least."
        return "Not approved. Nothing was done."
    if result.name == "word_count":
        counted = _args(result.text).get("words")
        return f"That message has {counted} words, by the word_count tool's count."
    if result.name == "summarize":
        return f"The summarizer says: {result.text}"
    return f"The {result.name} tool answered: {result.text}"


def _plan(conversation: _Conversation, entries: Sequence[_Entry]) -> Plan | None:
    """What the demo model says next after ``entries`` (None: no user message to answer)."""
    users = [i for i, e in enumerate(entries) if e.role == "user"]
    if not users:
        return None
    question = entries[users[-1]].text
    results = [e for e in entries[users[-1] + 1 :] if e.role == "result"]
    if results:
        return _after_tool(results[-1], question)
    if not conversation.tools and "summar" in conversation.system.lower():  # a summarizer
        return f"In short: {_quoted(question, 8)}."
    lowered, tools = question.lower(), conversation.tools
    if "approve" in lowered and "approve" in tools:
        lead = "I need your approval before I do that. "
        return lead, ToolUse("approve", {"action": question})
    if "summar" in lowered and "summarize" in tools:
        return "Let me ask the summarizer. ", ToolUse("summarize", {"message": question})
    if "count" in lowered and "word_count" in tools:
        return "Let me count the words. ", ToolUse("word_count", {"text": question})
    return _answer(question)


def _continued(conversation: _Conversation) -> str | None:
    """The rest of a cut answer: a trailing partial answer (an Anthropic prefill), or a partial
    answer followed by the adapter's "continue where it stopped" instruction, that the answer to
    what came before it starts with."""
    entries = conversation.entries
    if entries and entries[-1].role == "assistant":
        before, partial = entries[:-1], entries[-1].text
    elif (
        len(entries) >= 2
        and entries[-2].role == "assistant"
        and entries[-1].role == "user"
        and re.search(r"\bcontinue\b", entries[-1].text, re.IGNORECASE)
    ):
        before, partial = entries[:-2], entries[-2].text
    else:
        return None
    full = _plan(conversation, before)
    if not isinstance(full, str):
        return None
    for prefix in (partial, partial.rstrip()):
        if prefix and full.startswith(prefix) and len(full) > len(prefix):
            return full[len(prefix) :]
    return None


def _words(text: str) -> tuple[str, ...]:
    """``text`` as its streamed deltas: one word each, with the whitespace around it."""
    return tuple(re.findall(r"\s*\S+\s*", text)) or (text,)


def demo_responder(api: Api, body: dict[str, Any]) -> Reply | None:
    """The ``--demo`` model (see the module docstring): a :data:`~.script.Responder`."""
    conversation = _conversation(api, body)
    rest = _continued(conversation)
    plan: Plan | None = rest if rest is not None else _plan(conversation, conversation.entries)
    if plan is None:
        return None
    if isinstance(plan, str):
        return Reply(Text(*_words(plan)), delay_ms=DEMO_DELAY_MS)
    lead, call = plan
    return Reply(Text(*_words(lead)), call, delay_ms=DEMO_DELAY_MS)


# -- the command ----------------------------------------------------------------------------------


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket: clients may connect (and queue) from the moment the URL is printed."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a FakeLLM until SIGINT or SIGTERM; 0 then, 2 for an address that cannot be used."""
    parser = argparse.ArgumentParser(
        prog="python -m doemu.testing.fake_providers",
        description="Serve doemu's fake LLM (OpenAI Responses and chat completions, Anthropic "
        "Messages) until Ctrl-C.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8788, help="port (0: a free one)")
    parser.add_argument("--api-key", default="test-key", help="the key clients must send")
    parser.add_argument(
        "--demo", action="store_true", help="answer what is asked (examples/agent_server)"
    )
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    llm = FakeLLM(api_key=options.api_key, responder=demo_responder if options.demo else None)
    try:
        sock = _listen(options.host, options.port)
    except OSError as exc:
        parser.exit(2, f"cannot listen on {options.host}:{options.port}: {exc.strerror}\n")
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    replies = "demo replies" if options.demo else 'every reply "ok"'
    sys.stdout.write(
        f"fake LLM on {url} (OpenAI base URL {url}/v1, Anthropic {url}; {replies}); "
        "Ctrl-C stops it\n"
    )
    sys.stdout.flush()
    quiet_stream_cuts()
    preload()
    config = uvicorn.Config(
        llm.app, lifespan="off", log_config=None, access_log=False, timeout_graceful_shutdown=1
    )
    # uvicorn shuts down gracefully on either signal, then raises it again: both end up as
    # KeyboardInterrupt here, which is this command's normal way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
