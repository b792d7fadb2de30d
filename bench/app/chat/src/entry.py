"""The chat rows' agent (bench/README.md): an ``AIChatAgent`` answering from an OpenAI-compatible
provider, the same agent as the JavaScript peer's (bench/peer-chat/worker.src.mjs).

``on_chat_message`` POSTs the transcript to ``{PROVIDER_URL}/chat/completions`` with
``stream: true`` through ``workers.fetch`` and reads the server-sent events as they arrive; the
text deltas become the reply through ``text_stream``, which emits exactly the chunks the AI SDK's
``streamText(...).toUIMessageStream()`` does (start, start-step, text-start, one text-delta per
delta, text-end, finish-step, finish). The JavaScript peer does the same with ``streamText`` and
``@ai-sdk/openai-compatible``. A request body ``{"reply": "response"}`` returns the same chunks
as an SSE ``Response`` (``ui_message_response``), the shape the JavaScript SDK returns, which the
agent then reads back; the default is the async iterable (no SSE round trip), the Python idiom.

The client's cancel (the turn's abort event) cancels the body reader, so a stalled provider does
not keep the turn alive.

Routes: ``/agents/chat-bench/<name>`` (WebSocket and ``…/get-messages``); anything else 404.
"""

import asyncio
import json

from workers import Response, WorkerEntrypoint, fetch

from agents import route_agent_request
from agents.chat import AIChatAgent, text_stream, ui_message_response


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
        url = str(self.env.PROVIDER_URL).rstrip("/") + "/chat/completions"
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
        chunks = text_stream(_text_deltas(response, options.abort_signal), text_id="txt-0")
        if (options.body or {}).get("reply") == "response":
            return ui_message_response(chunks)
        return chunks


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        routed = await route_agent_request(request, self.env)
        return routed if routed is not None else Response("not found", status=404)
