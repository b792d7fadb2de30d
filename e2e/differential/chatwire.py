"""Cloudflare's chat protocol from a client's side, for the differential suite's chat tests.

A raw WebSocket client (``websockets``) speaking the frames ``@cloudflare/ai-chat`` speaks, and
:func:`normalised`: the frames with every assistant message id replaced by ``<m1>``, ``<m2>``…
in order of appearance. Those ids are made of a time and random letters, different on every run
and on every target; everything else a client observes is compared as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from websockets.sync.client import ClientConnection, connect

__all__ = [
    "RESPONSE",
    "ChatSocket",
    "chunks",
    "normalised",
    "request_frame",
    "text_of",
]

RESPONSE = "cf_agent_use_chat_response"


def request_frame(request_id: str, text: str, message_id: str, *, delay_ms: int = 0) -> str:
    """A ``cf_agent_use_chat_request`` as Cloudflare's client sends it (the body is a string)."""
    body = {
        "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}],
        "trigger": "submit-message",
        "delayMs": delay_ms,
    }
    init = {"method": "POST", "body": json.dumps(body)}
    return json.dumps({"id": request_id, "type": "cf_agent_use_chat_request", "init": init})


def chunks(frames: list[dict[str, Any]], request_id: str) -> list[dict[str, Any]]:
    """The UI-message chunks of ``request_id``'s response frames, decoded."""
    return [
        json.loads(f["body"])
        for f in frames
        if f.get("type") == RESPONSE and f.get("id") == request_id and f.get("body")
    ]


def text_of(frames: list[dict[str, Any]], request_id: str) -> str:
    return "".join(c["delta"] for c in chunks(frames, request_id) if c["type"] == "text-delta")


def normalised(value: Any) -> Any:
    """``value`` (frames, messages) with assistant message ids replaced by ``<m1>``, ``<m2>``…"""
    text = json.dumps(value)
    ids: list[str] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "start" and isinstance(node.get("messageId"), str):
                ids.append(node["messageId"])
            if node.get("role") == "assistant" and isinstance(node.get("id"), str):
                ids.append(node["id"])
            if isinstance(node.get("body"), str) and node["body"].startswith("{"):
                collect(json.loads(node["body"]))
            for child in node.values():
                collect(child)
        elif isinstance(node, list):
            for child in node:
                collect(child)

    collect(value)
    for index, found in enumerate(dict.fromkeys(ids), start=1):
        text = text.replace(found, f"<m{index}>")
    return json.loads(text)


class ChatSocket:
    """One client connection to a chat agent: every frame it received, in order."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.frames: list[dict[str, Any]] = []
        self._stack = ExitStack()

    def __enter__(self) -> ChatSocket:
        # max_queue=None: a test often stops reading mid-reply (after N chunks) and closes. With
        # the client's default (16), its reader pauses once 16 frames wait unread, so the
        # server's close reply behind them is never read and close() waits its full 10 s
        # timeout, then reports 1006. Buffering every frame lets the close handshake finish.
        ws = connect(self.url, open_timeout=30, max_queue=None)
        self.ws: ClientConnection = self._stack.enter_context(ws)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def send(self, frame: str) -> None:
        self.ws.send(frame)

    def until(self, done: Callable[[list[dict[str, Any]]], bool], within: float = 20) -> None:
        """Receive frames until ``done(frames)`` holds (each ``recv`` waits at most ``within``)."""
        while not done(self.frames):
            self.frames.append(json.loads(self.ws.recv(timeout=within)))

    def until_done(self, request_id: str, within: float = 20) -> None:
        self.until(
            lambda frames: any(
                f.get("type") == RESPONSE and f.get("id") == request_id and f.get("done")
                for f in frames
            ),
            within,
        )
