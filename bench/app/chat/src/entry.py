"""The chat rows' agent (bench/README.md): an ``AIChatAgent`` answering from an OpenAI-compatible
provider, the same agent as the JavaScript peer's (bench/peer-chat/worker.src.mjs).

``on_chat_message`` returns the reply two ways, chosen by the chat request's body:

* by default, the agent a user writes: ``model_reply`` over ``OpenAIChatCompletions`` (the
  adapter streams ``{OPENAI_BASE_URL}/chat/completions`` through ``workers.fetch``; the loop
  records the model request in the operation ledger, keeps the turn's checkpoint and turns the
  deltas into UI-message chunks). This is the judged row, the counterpart of the JavaScript
  peer's ``streamText(...).toUIMessageStreamResponse()``.
* ``{"path": "light"}``: a hand-written reader of the provider's server-sent events whose
  ``delta.content`` strings go through ``text_stream`` (the chunks the AI SDK's
  ``toUIMessageStream`` emits, with its ``txt-0`` text id) as an async iterable: no ledger, no
  checkpoint, no SSE round trip. Shown beside the judged row as the lighter path, not judged.

The client's cancel (the turn's abort event) cancels the body reader, so a stalled provider does
not keep the turn alive.

Routes: ``/agents/chat-bench/<name>`` (WebSocket and ``…/get-messages``); anything else 404.
"""

import asyncio
import json

from workers import Response, WorkerEntrypoint, fetch

from agents import route_agent_request
from agents.chat import AIChatAgent, text_stream
from agents.providers import OpenAIChatCompletions, model_reply


def _model_messages(messages):
    """UI messages as Chat Completions messages: the text parts of each user/assistant message
    (what ``convertToModelMessages`` and the openai-compatible provider send for text turns)."""
    out = []
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            continue
        text = "".join(
            p.get("text", "") for p in message.get("parts", []) if p.get("type") == "text"
        )
        out.append({"role": role, "content": text})
    return out


def _as_bytes(value):
    to_bytes = getattr(value, "to_bytes", None)
    return bytes(to_bytes()) if to_bytes is not None else bytes(value)


async def _text_deltas(response, abort):
    """The ``delta.content`` strings of a Chat Completions SSE body, until ``[DONE]``."""
    reader = response.body.getReader()
    watcher = asyncio.ensure_future(abort.wait())
    watcher.add_done_callback(
        lambda w: None if w.cancelled() else asyncio.ensure_future(reader.cancel())
    )
    pending = b""
    try:
        while True:
            read = await reader.read()
            if read.done:
                return
            pending += _as_bytes(read.value)
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                for choice in json.loads(data).get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        yield content
    finally:
        watcher.cancel()
        if not abort.is_set():
            try:
                await reader.cancel()
            except Exception:
                pass


class ChatBench(AIChatAgent):
    async def on_chat_message(self, on_finish, options):
        if (options.body or {}).get("path") == "light":
            return await self._light_reply(options)
        provider = OpenAIChatCompletions.from_env(self.env, model="fake")
        return model_reply(self, options, provider)

    async def _light_reply(self, options):
        url = str(self.env.OPENAI_BASE_URL).rstrip("/") + "/chat/completions"
        payload = {"model": "fake", "stream": True, "messages": _model_messages(self.messages)}
        response = await fetch(
            url,
            method="POST",
            headers={"content-type": "application/json"},
            body=json.dumps(payload),
        )
        if response.status != 200:
            raise RuntimeError(f"provider answered {response.status}")
        # "txt-0": the text part id @ai-sdk/openai-compatible gives, so frames are byte-identical
        return text_stream(_text_deltas(response, options.abort_signal), text_id="txt-0")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
