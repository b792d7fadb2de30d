"""A chat turn that comes after earlier turns, killed by SIGKILL mid-reply (issue 30): with no
request, the persisted alarm wakes the chat and recovery continues *that* turn's reply — not the
earlier one, and never "skipped" as ``conversation_changed``. Every outcome is read through the
admin API's read-only SQL and KV, which never wake the object.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from tests.polling import eventually_sync

from .harness import DevServer
from .test_chat import _pythonpath
from .test_chat import chat_project as chat_project  # the fixture: a private copy of the example
from .test_chat_walkthrough import SUNNY, restart


@pytest.fixture
def server(dev_server: Callable[..., DevServer], chat_project: Path) -> Iterator[DevServer]:
    started = dev_server(chat_project, env=_pythonpath())
    yield started
    assert "Traceback" not in started.output, started.output


class Chat:
    """The example's chat ``name`` read through the admin API (never waking the object)."""

    def __init__(self, server: DevServer, name: str) -> None:
        self.server, self.name = server, name

    def _get(self, what: str, **params: Any) -> Any:
        url = f"{self.server.url}/__doemu/api/objects/ChatAgent/{self.name}/{what}"
        return httpx.get(url, params=params).json()

    def texts(self) -> list[tuple[str, str]]:
        response = httpx.post(
            f"{self.server.url}/__doemu/api/objects/ChatAgent/{self.name}/sql",
            json={"query": "SELECT message FROM cf_ai_chat_agent_messages ORDER BY seq"},
        )
        messages = [json.loads(row[0]) for row in response.json()["rows"]]
        return [
            (m["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
            for m in messages
        ]

    def kv(self, key: str) -> Any:
        entries = self._get("kv", prefix=key).get("entries", [])
        return next((e["value"] for e in entries if e["key"] == key), None)


def test_a_later_turn_killed_by_sigkill_is_continued_with_no_request(server: DevServer) -> None:
    name = f"later-{uuid.uuid4().hex[:8]}"
    chat = Chat(server, name)

    async def turns() -> None:
        url = f"{server.ws_url}/agents/chat-agent/{name}?_pk=a"
        async with websockets.connect(url) as ws, asyncio.timeout(20):
            history: list[dict[str, Any]] = []
            for request_id, text, until in (("r0", "hi", None), ("r1", "slow", 16)):
                history.append(
                    {"id": f"u-{request_id}", "role": "user",
                     "parts": [{"type": "text", "text": text}]}
                )  # fmt: skip
                body = json.dumps({"messages": history, "trigger": "submit-message"})
                await ws.send(json.dumps({"type": "cf_agent_use_chat_request", "id": request_id,
                                          "init": {"method": "POST", "body": body}}))  # fmt: skip
                seen = 0
                while True:
                    frame = json.loads(await ws.recv())
                    if frame.get("type") != "cf_agent_use_chat_response":
                        continue
                    seen += 1
                    if frame["done"] or (until is not None and seen >= until):
                        break
                if until is None:
                    async with httpx.AsyncClient() as http:
                        url = f"{server.url}/agents/chat-agent/{name}/get-messages"
                        history = (await http.get(url)).json()

    asyncio.run(turns())
    server.kill()
    restart(server)
    eventually_sync(
        lambda: len(chat.texts()) == 4 and chat.texts()[3][1].endswith(SUNNY),
        within=30,
        what="the later turn's reply continued, with no request",
    )
    eventually_sync(
        lambda: chat.kv("cf:chat:recovering") is None, within=10, what="recovery to end"
    )
    (u0, a0, u1, a1) = chat.texts()
    assert (u0, a0, u1) == (("user", "hi"), ("assistant", "Hello, world"), ("user", "slow"))
    assert a1[1].startswith("w0 w1 ")
