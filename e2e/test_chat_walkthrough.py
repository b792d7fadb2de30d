"""``examples/chat/README.md``, followed step by step, as a newcomer would (issue 30).

Every step of the README runs as written against a real ``doemu dev`` on a copy of the example:
the page in Debian's Chromium, ``get-messages`` over plain HTTP, the ``websockets`` command-line
client with the README's JSON line pasted into it, the README's own ``kill -9 "$(lsof …)"``
(with the test server's port), the same command again to restart, a reload. The walkthrough
sends ``hi`` before ``slow``, so the interrupted turn comes after an earlier one — the case whose
recovery skipped itself as ``conversation_changed`` and left the turn "recovering" for ever.

``e2e/test_chat_later_turn.py`` is the same crash without a browser.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect

from .browser import browser as browser  # the fixture: one Debian Chromium for the module
from .harness import DevServer
from .test_chat import _pythonpath
from .test_chat import chat_project as chat_project  # the fixture: a private copy of the example
from .test_chat_page import WORDS, ChatPage

#: The README's pasted line (the request's ``body`` is a JSON string, as in the SDK).
README_LINE = (
    '{"type":"cf_agent_use_chat_request","id":"r1","init":{"method":"POST","body":"{\\"messages'
    '\\":[{\\"id\\":\\"u1\\",\\"role\\":\\"user\\",\\"parts\\":[{\\"type\\":\\"text\\",\\"text\\'
    '":\\"slow\\"}]}]}"}}'
)
SUNNY = "It is sunny."


@pytest.fixture
def server(dev_server: Callable[..., DevServer], chat_project: Path) -> Iterator[DevServer]:
    started = dev_server(chat_project, env=_pythonpath())
    yield started
    assert "Traceback" not in started.output, started.output


def _readme() -> str:
    return (Path(__file__).resolve().parent.parent / "examples/chat/README.md").read_text()


def restart(server: DevServer) -> None:
    """ "Start the server again, with the same command, in the same folder": same state, and
    the same port (the page and the README's commands name it)."""
    port = server.port
    server.args = [*server.args, "--port", str(port)]  # after the harness's --port 0: it wins
    server.start()
    assert server.port == port


def _readme_kill(server: DevServer) -> None:
    """The README's ``kill -9 "$(lsof -t -iTCP:8787 -sTCP:LISTEN)"``, on the server's port;
    then the harness reaps the process group (nothing of the old server may outlive it)."""
    command = f'kill -9 "$(lsof -t -iTCP:{server.port} -sTCP:LISTEN)"'
    assert command.replace(str(server.port), "8787") in _readme()
    subprocess.run(["sh", "-c", command], check=True, timeout=10)
    server.kill()


def test_the_readme_walkthrough_works_as_written(
    browser: Browser, server: DevServer, chat_project: Path
) -> None:
    readme = _readme()
    context = browser.new_context()
    try:
        page = ChatPage(context.new_page(), server, "demo")
        # "Run it": open the page; it says chat "demo"; hi → Hello, world; reload keeps it.
        page.page.goto(f"{server.url}/")
        expect(page.page.locator("#status")).to_have_text('chat "demo"')
        page.send("hi")
        expect(page.log).to_have_text(["hi", "Hello, world"])
        page.open()
        expect(page.log).to_have_text(["hi", "Hello, world"])

        # "Without the page": the transcript over plain HTTP, in the README's shape.
        stored = httpx.get(f"{server.url}/agents/chat-agent/demo/get-messages").json()
        assert [m["role"] for m in stored] == ["user", "assistant"]
        assert stored[0]["parts"] == [{"type": "text", "text": "hi"}]
        assert stored[1]["id"].startswith("assistant_")
        assert stored[1]["parts"] == [
            {"type": "step-start"},
            {"type": "text", "text": "Hello, world", "state": "done"},
        ]
        # … and the WebSocket, with the websockets package's own client and the README's line.
        assert README_LINE in readme
        frames = _websockets_cli(server, README_LINE)
        kinds = [f["type"] for f in frames]
        assert kinds[:2] == ["cf_agent_identity", "cf_agent_mcp_servers"], kinds
        bodies = [json.loads(f["body"])["type"] for f in frames[2:] if f.get("body")]
        assert bodies[:3] == ["start", "start-step", "text-start"], bodies
        assert bodies.count("text-delta") == 25
        assert frames[-1]["done"] is True and "seq" in frames[2]

        # "Kill it mid-reply" 1: send slow on the page; kill -9 while the words appear.
        page.send("slow")
        page.wait_for_words(13)  # 16+ chunks: a block of ten is stored
        _readme_kill(server)
        expect(page.page.locator("#status")).not_to_have_text('chat "demo"')
        # 2: the same command again; about two seconds later, with no request, the log says
        # the turn is being recovered.
        restart(server)
        quoted = re.search(r"the server logs\s+`([^`]+)`", readme)
        assert quoted is not None, "the README quotes the recovery's log line"
        pattern = r"\s+".join(re.escape(word) for word in quoted[1].split())
        server.wait_for_line(pattern.replace(re.escape("…"), ".*"))
        # 3: reload: hi, Hello, world, slow, and ONE reply: the stored words then the
        # continuation; get-messages holds the same; hi goes on.
        page.open()
        reply = re.compile(r"^w0 w1 .*It is sunny\.$")
        expect(page.log).to_have_text(["hi", "Hello, world", "slow", reply])
        texts = page.settled_texts()
        words = texts[3].removesuffix(SUNNY).split()
        assert words == WORDS[: len(words)] and 7 <= len(words) < len(WORDS), texts
        assert page.transcript() == [
            ("user", "hi"),
            ("assistant", "Hello, world"),
            ("user", "slow"),
            ("assistant", texts[3]),
        ]
        page.send("hi")
        expect(page.log).to_have_text(["hi", "Hello, world", "slow", texts[3], "hi",
                                       "Hello, world"])  # fmt: skip
        assert page.errors == [], page.errors
    finally:
        context.close()


def _websockets_cli(server: DevServer, line: str) -> list[dict[str, Any]]:
    """``python -m websockets ws://…/agents/chat-agent/raw``, the line typed in; every frame
    it prints (``< {json}``, inside its terminal escapes) until the turn's ``done``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "websockets", f"{server.ws_url}/agents/chat-agent/raw"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    frames: list[dict[str, Any]] = []
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        for raw in proc.stdout:
            start = raw.find("< {")  # after the client's terminal escapes
            if start < 0:
                continue  # "Connected to …", the prompt
            frames.append(json.loads(raw[start + 2 :]))
            if frames[-1].get("type") == "cf_agent_use_chat_response" and frames[-1]["done"]:
                break
    finally:
        proc.kill()
        proc.wait(timeout=10)
    return frames
