#!/usr/bin/env python3
"""The chat rows' model: one local server speaking OpenAI's Chat Completions streaming wire format.

    python bench/fakeprovider.py --port 8899

``POST /v1/chat/completions`` with ``"stream": true`` answers ``text/event-stream``: a first
chunk with ``delta.role``, then N chunks ``{"choices":[{"index":0,"delta":{"content":"w<i> "}}]}``
as fast as the connection takes them, a last chunk with ``finish_reason: "stop"`` and ``usage``,
then ``data: [DONE]`` — the shape ``@ai-sdk/openai-compatible`` parses and the Python agents in
bench/app/chat and bench/app/server read (``OpenAIChatCompletions``). Both chat servers (doemu and
workerd) call this same process, so a difference between them is never the model's.

What to produce comes from the text of the last user message, so the load client steers it
through the chat request itself: ``chunks:N`` (N deltas, default 10) and the word ``stall``, which
keeps the response open after the N deltas without finishing it (the replay row needs a stream
that stays live with N stored chunks). A stalled response ends when the client goes away (the
agent's turn is cancelled) or at ``POST /release``, which finishes every stalled response.

Every event is written on its own (one ``write`` per delta), as a real provider's tokens arrive.
Loopback only; no other routes but ``GET /health``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from typing import Any

from aiohttp import web
from benchlib import install_fast_loop

_CHUNKS = re.compile(r"chunks:(\d+)")
_MAX_CHUNKS = 1_000_000


def _last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message (``content`` a string or a list of text parts)."""
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            parts = [p for p in content if isinstance(p, dict) and p.get("type") == "text"]
            return "".join(str(p.get("text", "")) for p in parts)
    return ""


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class Provider:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.served = 0
        self.stalled = 0

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        text = _last_user_text(body)
        found = _CHUNKS.search(text)
        n = min(int(found.group(1)), _MAX_CHUNKS) if found else 10
        stall = "stall" in text
        self.served += 1
        rid = f"chatcmpl-bench{self.served}"
        created = int(time.time())
        model = str(body.get("model") or "fake")
        base = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model}
        if not body.get("stream"):
            message = {"role": "assistant", "content": "".join(f"w{i} " for i in range(n))}
            return web.json_response(
                {**base, "object": "chat.completion",
                 "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
            )  # fmt: skip
        response = web.StreamResponse(
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
        )
        await response.prepare(request)
        first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        await response.write(_event({**base, "choices": [first]}))
        for i in range(n):
            delta = {"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}
            await response.write(_event({**base, "choices": [delta]}))
        if stall:
            self.stalled += 1
            try:
                await self.release.wait()  # until /release, or the client disconnects
            finally:
                self.stalled -= 1
        usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
        last = {"index": 0, "delta": {}, "finish_reason": "stop"}
        await response.write(_event({**base, "choices": [last], "usage": usage}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def release_all(self, request: web.Request) -> web.Response:
        """Finish every stalled response; later stalls wait for the next release."""
        stalled = self.stalled
        self.release.set()
        self.release = asyncio.Event()
        return web.json_response({"released": stalled})

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"served": self.served, "stalled": self.stalled})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    install_fast_loop()
    provider = Provider()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", provider.completions)
    app.router.add_post("/release", provider.release_all)
    app.router.add_get("/health", provider.health)
    # shutdown_timeout: SIGTERM must not wait for a stalled response to finish
    web.run_app(
        app, host="127.0.0.1", port=args.port, print=None, access_log=None, shutdown_timeout=0.5
    )


if __name__ == "__main__":
    main()
