"""Bounded chat recovery with real SIGKILLs (``e2e/apps/chat_recovery``): nothing but the
persisted alarm brings an interrupted turn back, and every outcome is read through the admin
API's read-only SQL, which never wakes the object.

* killed before its first chunk → the user turn is retried: one new assistant message;
* a healthy turn that keeps making progress, killed three times mid-stream → one unbroken
  reply in one assistant message, never sealed;
* a provider that stalls on every attempt → the watchdog hands each stall to recovery, which
  gives up inside ``max_attempts``: ``on_exhausted`` ran once, the terminal frame is replayed
  to a client that connects afterwards, and no alarm keeps firing.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from tests.polling import eventually_sync

from .harness import DevServer

APP = Path(__file__).resolve().parent / "apps" / "chat_recovery"
ROOT = Path(__file__).resolve().parent.parent
TERMINAL = "The assistant was interrupted and could not recover. Please try again."


@pytest.fixture
def project(tmp_path: Path) -> Path:
    target = tmp_path / "app"
    shutil.copytree(APP, target, ignore=shutil.ignore_patterns(".doemu", "__pycache__"))
    return target


def _env() -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT)}


def _request(request_id: str, text: str) -> str:
    message = {"id": f"u-{request_id}", "role": "user", "parts": [{"type": "text", "text": text}]}
    body = {"messages": [message], "trigger": "submit-message"}
    return json.dumps(
        {
            "id": request_id,
            "type": "cf_agent_use_chat_request",
            "init": {"method": "POST", "body": json.dumps(body)},
        }
    )


class Chat:
    """One chat on one server: its WebSocket URL and read-only SQL through the admin API."""

    def __init__(self, server: DevServer, name: str) -> None:
        self.server = server
        self.name = name

    def sql(self, query: str) -> list[list[Any]]:
        response = httpx.post(
            f"{self.server.url}/__doemu/api/objects/RecoveryChat/{self.name}/sql",
            json={"query": query},
        )
        rows: list[list[Any]] = response.json()["rows"]
        return rows

    def messages(self) -> list[dict[str, Any]]:
        rows = self.sql("SELECT message FROM cf_ai_chat_agent_messages ORDER BY seq")
        return [json.loads(row[0]) for row in rows]

    def texts(self) -> list[tuple[str, str]]:
        return [
            (m["role"], "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text"))
            for m in self.messages()
        ]

    def kv(self, key: str) -> Any:
        response = httpx.get(
            f"{self.server.url}/__doemu/api/objects/RecoveryChat/{self.name}/kv",
            params={"prefix": key},
        )
        entries = response.json()["entries"] if response.status_code == 200 else []
        return next((e["value"] for e in entries if e["key"] == key), None)

    def progress(self) -> int:
        return int(self.kv("cf:chat-recovery:progress") or 0)

    def alarm(self) -> Any:
        response = httpx.get(
            f"{self.server.url}/__doemu/api/objects/RecoveryChat/{self.name}/alarm"
        )
        return response.json()["scheduled_time"]

    def send_then(self, frame: str, until: Callable[[list[dict[str, Any]]], bool]) -> None:
        """Send ``frame`` on a new connection and keep it open until ``until(frames)``."""

        async def go() -> None:
            url = f"{self.server.ws_url}/agents/recovery-chat/{self.name}?_pk={uuid.uuid4().hex}"
            async with websockets.connect(url) as ws:
                frames: list[dict[str, Any]] = []
                await ws.send(frame)
                async with asyncio.timeout(20):
                    while not until(frames):
                        frames.append(json.loads(await ws.recv()))

        asyncio.run(go())


def _chunks(frames: list[dict[str, Any]]) -> int:
    return sum(1 for f in frames if f.get("type") == "cf_agent_use_chat_response" and f["body"])


def test_a_turn_killed_before_its_first_chunk_is_retried(
    dev_server: Callable[..., DevServer], project: Path
) -> None:
    server = dev_server(project, env=_env())
    chat = Chat(server, "think")
    chat.send_then(_request("r1", "think"), lambda _: chat.kv("thought") is not None)
    server.kill()
    server.start()
    eventually_sync(
        lambda: chat.texts() == [("user", "think"), ("assistant", "thought")],
        within=20,
        what="the retried turn's answer, with no request",
    )
    assert chat.sql("SELECT count(*) FROM cf_agents_runs") == [[0]]
    assert "Traceback" not in server.output


def test_a_healthy_turn_killed_three_times_is_one_unbroken_reply(
    dev_server: Callable[..., DevServer], project: Path
) -> None:
    """Each kill lands after the reply made progress (the durable progress counter, one per
    flushed block of 10 chunks, moved): the turn is continued every time, never sealed, and
    ends as one unbroken count in one assistant message."""
    server = dev_server(project, env=_env())
    chat = Chat(server, "count")
    chat.send_then(_request("r1", "count 150"), lambda frames: _chunks(frames) >= 25)
    for kill in range(3):
        before = chat.progress()
        server.kill()
        server.start()
        eventually_sync(
            lambda n=before: chat.progress() >= n + 2,
            within=20,
            what=f"progress after kill {kill + 1}, with no request",
        )
    eventually_sync(
        lambda: len(chat.texts()) == 2 and chat.texts()[1][1].split()[-1:] == ["c149"],
        within=30,
        what="the whole count",
    )
    (user, reply) = chat.texts()
    assert user == ("user", "count 150")
    assert reply == ("assistant", " ".join(f"c{i}" for i in range(150)) + " ")
    assert chat.kv("exhausted") is None
    eventually_sync(lambda: chat.alarm() is None, within=10, what="no alarm left")
    assert chat.sql("SELECT count(*) FROM cf_agents_runs") == [[0]]
    assert "Traceback" not in server.output


def test_a_provider_that_stalls_every_time_is_given_up_within_budget(
    dev_server: Callable[..., DevServer], project: Path
) -> None:
    server = dev_server(project, env=_env())
    chat = Chat(server, "stall")
    chat.send_then(_request("r1", "stall"), lambda frames: _chunks(frames) >= 3)
    eventually_sync(lambda: chat.kv("exhausted") == 1, within=30, what="recovery giving up")
    eventually_sync(lambda: chat.alarm() is None, within=10, what="no alarm left")
    (user, reply) = chat.texts()
    assert user == ("user", "stall") and reply[1].split() == ["stalling"] * 4

    seen: list[dict[str, Any]] = []

    def terminal(frames: list[dict[str, Any]]) -> bool:
        seen[:] = frames
        return any(f.get("error") for f in frames)

    probe = json.dumps({"type": "cf_agent_stream_resume_request", "probeId": "late"})

    async def late_client() -> None:
        url = f"{server.ws_url}/agents/recovery-chat/stall?_pk=late"
        async with websockets.connect(url) as ws:
            await ws.send(probe)
            async with asyncio.timeout(10):
                while True:
                    frame = json.loads(await ws.recv())
                    seen.append(frame)
                    if frame.get("type") == "cf_agent_stream_resuming":
                        await ws.send(
                            json.dumps({"type": "cf_agent_stream_resume_ack", "id": frame["id"]})
                        )
                    if frame.get("error"):
                        return

    asyncio.run(late_client())
    last = seen[-1]
    assert last["done"] is True and last["error"] is True and last["body"] == TERMINAL
    assert chat.kv("exhausted") == 1  # once, however often the chat wakes
    assert "Traceback" not in server.output
