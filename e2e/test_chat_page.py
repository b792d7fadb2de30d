"""The chat example's own browser page (``examples/chat/src/page.py``) in a real Chromium.

``e2e/test_chat.py`` proves the protocol with Cloudflare's client and a raw socket; this proves
what a newcomer following ``examples/chat/README.md`` actually sees: a real ``doemu dev`` serves
a copy of the example, Debian's Chromium (driven by Playwright, never Playwright's own
download) opens ``/?chat=<unique>``, and every assertion is on the page's DOM, cross-checked
against ``get-messages``. Waits are Playwright's ``expect`` (polling with a deadline).

Without Chromium the tests skip, naming what to install; ``.ci/run`` installs it and sets
``DOEMU_E2E_REQUIRE_BROWSER=1`` so that in CI a missing browser fails instead of passing
silently.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.polling import eventually_sync

from .browser import WITHIN_MS
from .browser import browser as browser  # the fixture: one Debian Chromium for the module
from .harness import DevServer
from .test_chat import _pythonpath
from .test_chat import chat_project as chat_project  # the fixture: a private copy of the example

#: The scripted model's "slow" reply: 25 words, 100 ms apart (the page sends no ``delayMs``).
WORDS = [f"w{i}" for i in range(25)]


#: Installed before the page's own script, on every load: ``window.chatFrames`` is every frame
#: this load's WebSocket received (a reload starts a new list, so a frame still in flight on the
#: previous load's socket is never mixed in), and ``window.mostReplies`` the most assistant lines
#: shown at once on any DOM change (a reply rendered twice for a moment is a bug a final-state
#: assertion would miss).
OBSERVER = """
window.chatFrames = [];
window.mostReplies = 0;
window.WebSocket = class extends window.WebSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", (event) => window.chatFrames.push(JSON.parse(event.data)));
  }
};
document.addEventListener("DOMContentLoaded", () => {
  new MutationObserver(() => {
    const shown = document.querySelectorAll("#log > div.assistant").length;
    window.mostReplies = Math.max(window.mostReplies, shown);
  }).observe(document.getElementById("log"), { childList: true });
});
"""
DONE = "window.chatFrames.some((f) => f.type === 'cf_agent_use_chat_response' && f.done)"


class ChatPage:
    """A fresh browser page on the example, with every chat frame the page received and every
    uncaught script error (a page that throws must fail the test, not just look stuck)."""

    def __init__(self, page: Page, server: DevServer, chat: str) -> None:
        self.page = page
        self.server = server
        self.chat = chat
        self.errors: list[str] = []
        page.add_init_script(OBSERVER)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.set_default_timeout(WITHIN_MS)

    @property
    def log(self) -> Locator:
        """The transcript as rendered: one ``div`` per message (plus the live reply, ``… ``)."""
        return self.page.locator("#log > div")

    def open(self) -> None:
        """Load (or reload) the page and wait until it has rendered ``get-messages`` (the status
        names the chat only after that)."""
        url = f"{self.server.url}/?chat={self.chat}"
        if self.page.url == url:
            self.page.reload()
        else:
            self.page.goto(url)
        expect(self.page.locator("#status")).to_have_text(f'chat "{self.chat}"')

    def send(self, text: str) -> None:
        self.page.fill("#text", text)
        self.page.get_by_role("button", name="Send").click()

    def wait_for_words(self, count: int) -> None:
        """Until the live reply shows at least ``count`` words."""
        expect(self.page.locator("#log > div.assistant").last).to_contain_text(f"w{count - 1} ")

    def settled_texts(self) -> list[str]:
        """The rendered messages once no reply is in progress (the live ``…`` line is gone:
        the page got ``done`` and re-rendered the transcript from ``get-messages``)."""
        expect(self.page.locator("#log > div", has_text="…")).to_have_count(0)
        return [text.strip() for text in self.log.all_inner_texts()]

    def transcript(self) -> list[tuple[str, str]]:
        """``get-messages`` over plain HTTP: (role, text) per stored message."""
        url = f"{self.server.url}/agents/chat-agent/{self.chat}/get-messages"
        return [
            (
                m["role"],
                "".join(p["text"] for p in m["parts"] if p["type"] == "text").strip(),
            )
            for m in httpx.get(url).json()
        ]

    def most_replies_shown(self) -> int:
        """The most assistant lines the current page load has shown at once."""
        return int(self.page.evaluate("window.mostReplies"))

    def wait_for_done(self) -> dict[str, Any]:
        """Until this page load's socket got a terminal (``done``) chat frame; returns it."""
        self.page.wait_for_function(DONE)
        return next(f for f in self.chat_responses() if f["done"])

    def frames(self) -> list[dict[str, Any]]:
        """Every frame this page load's socket received, in order."""
        frames: list[dict[str, Any]] = self.page.evaluate("window.chatFrames")
        return frames

    def chat_responses(self) -> list[dict[str, Any]]:
        return [f for f in self.frames() if f.get("type") == "cf_agent_use_chat_response"]


@pytest.fixture
def server(dev_server: Callable[..., DevServer], chat_project: Path) -> Iterator[DevServer]:
    """A real ``doemu dev`` on a copy of the example; no traceback may appear in its log."""
    started = dev_server(chat_project, env=_pythonpath())
    yield started
    assert "Traceback" not in started.output, started.output


@pytest.fixture
def chat(browser: Browser, server: DevServer, request: pytest.FixtureRequest) -> Iterator[ChatPage]:
    """A fresh browser context and page per test, on a chat of its own."""
    context = browser.new_context()
    try:
        name = f"{request.node.name.removeprefix('test_')[:24]}-{uuid.uuid4().hex[:8]}"
        page = ChatPage(context.new_page(), server, name)
        yield page
        assert page.errors == [], page.errors
    finally:
        context.close()


def _partial(text: str) -> list[str]:
    """The words of a cut reply, checked to be the reply's first words and not all of them."""
    words = text.split()
    assert words == WORDS[: len(words)] and 0 < len(words) < len(WORDS), text
    return words


def test_a_turn_is_shown_and_survives_a_reload(chat: ChatPage) -> None:
    """1. Open the page; send "hi": the log shows the user's message and "Hello, world".
    2. ``get-messages`` holds the same two messages.  3. Reload: the page renders them again
    from ``get-messages``."""
    chat.open()
    chat.send("hi")
    expect(chat.log).to_have_text(["hi", "Hello, world"])
    assert chat.transcript() == [("user", "hi"), ("assistant", "Hello, world")]
    chat.open()
    expect(chat.log).to_have_text(["hi", "Hello, world"])


def test_a_model_error_is_shown_and_stays_shown(chat: ChatPage) -> None:
    """Send "boom": the model fails in-band (an ``error: true`` frame, then ``done``). The page
    shows the error, and still shows it after ``done`` re-renders the transcript from
    ``get-messages`` (which holds no error: it is not part of the conversation)."""
    chat.open()
    chat.send("boom")
    done = chat.wait_for_done()
    assert done.get("outcome") == "error", done
    chat.settled_texts()
    expect(chat.page.locator("#log > div.error")).to_have_text("custom error: model exploded")
    expect(chat.log).to_have_text(["boom", "custom error: model exploded"])  # no empty bubble
    expect(chat.page.locator("#log > div:empty")).to_have_count(0)
    chat.send("hi")  # the next message clears it
    expect(chat.page.locator("#log > div.user")).to_have_text(["boom", "hi"])
    expect(chat.page.locator("#log > div.assistant").last).to_have_text("Hello, world")
    expect(chat.page.locator("#log > div.error")).to_have_count(0)


def test_a_reload_mid_reply_resumes_the_stream_to_the_end(chat: ChatPage) -> None:
    """1. Send "slow" and wait for the first words.  2. Reload mid-reply: the new page is told
    ``cf_agent_stream_resuming``, acknowledges, and gets the stored words (``replay: true``) and
    then the live rest while it streams (its live ``…`` line shows).  3. The complete reply is
    shown, once: the transcript has one assistant message, not a replayed duplicate."""
    chat.open()
    chat.send("slow")
    chat.wait_for_words(3)
    chat.open()
    expect(chat.page.locator("#log > div.assistant", has_text="…")).to_have_count(1)
    assert chat.settled_texts() == ["slow", " ".join(WORDS)]
    assert chat.most_replies_shown() == 1
    assert chat.transcript() == [("user", "slow"), ("assistant", " ".join(WORDS))]
    assert any(f["type"] == "cf_agent_stream_resuming" for f in chat.frames()), chat.frames()
    responses = chat.chat_responses()
    assert responses[0].get("replay") is True, responses[0]
    assert responses[-1]["done"] is True and not responses[-1].get("replay"), responses[-1]


def test_a_reply_cut_by_sigkill_is_continued_after_the_restart_and_the_page_works(
    chat: ChatPage, server: DevServer
) -> None:
    """1. Send "slow" and wait for 13 words (16+ chunks, so a block of 10 is stored).
    2. SIGKILL the server's process group (no shutdown hook runs); the page says it is
    disconnected and reconnecting.  3. Restart on the same state and the same port; the page
    reconnects by itself (no reload).  4. Bounded recovery continues the reply: the page shows
    one assistant line, the stored first words (not all 25) then the model's continuation "It
    is sunny.", and the transcript holds exactly it.  5. Sending "hi" works: the agent answers
    "Hello, world"."""
    chat.open()
    chat.send("slow")
    chat.wait_for_words(13)
    port = server.port
    server.kill()
    expect(chat.page.locator("#status")).to_have_text("disconnected: reconnecting…")
    server.args = [*server.args, "--port", str(port)]  # after the harness's --port 0: it wins
    server.start()
    assert server.port == port
    expect(chat.page.locator("#status")).to_have_text(f'chat "{chat.chat}"')  # by itself
    expect(chat.log).to_have_text(["slow", re.compile(r"^w0 w1 .*It is sunny\.$")])
    texts = chat.settled_texts()
    assert texts[0] == "slow" and len(texts) == 2, texts
    assert chat.most_replies_shown() == 1  # one coherent turn, never two replies
    words = _partial(texts[1].removesuffix("It is sunny."))
    assert len(words) >= 7, texts  # the first block: start, start-step, text-start, w0…w6
    assert chat.transcript() == [("user", "slow"), ("assistant", texts[1])]
    chat.send("hi")
    expect(chat.log).to_have_text(["slow", texts[1], "hi", "Hello, world"])


def test_a_tool_call_is_shown_not_an_empty_bubble(chat: ChatPage) -> None:
    """Send "tool": the model asks the client to run ``getWeather``, which this page does not;
    the reply holds no text, and the page shows the call instead of an empty bubble."""
    chat.open()
    chat.send("tool")
    chat.wait_for_done()
    expect(chat.log).to_have_text(
        ["tool", '[tool getWeather({"city":"Paris"}): waiting for the client to run it]']
    )
    expect(chat.page.locator("#log > div:empty")).to_have_count(0)


def test_stop_keeps_the_partial_reply_and_clear_empties_the_chat(chat: ChatPage) -> None:
    """1. Send "slow", wait for some words, click Stop (``cf_agent_chat_request_cancel``): the
    page gets ``done`` and shows the cut reply, which the transcript keeps.  2. Send "hi": turns
    run one at a time, so its answer proves the slow turn is over, and the cut reply has not
    grown.  3. Clear (``cf_agent_chat_clear``): the log empties, the transcript too, and a
    reload shows an empty chat."""
    chat.open()
    chat.send("slow")
    chat.wait_for_words(3)
    chat.page.get_by_role("button", name="Stop").click()
    done = chat.wait_for_done()
    assert done.get("outcome") == "aborted" and not done.get("replay"), done
    texts = chat.settled_texts()
    assert texts[0] == "slow" and len(texts) == 2, texts
    _partial(texts[1])
    assert chat.transcript() == [("user", "slow"), ("assistant", texts[1])]
    chat.send("hi")
    expect(chat.log).to_have_text(["slow", texts[1], "hi", "Hello, world"])
    assert chat.transcript()[1] == ("assistant", texts[1])
    chat.page.get_by_role("button", name="Clear").click()
    expect(chat.log).to_have_count(0)
    eventually_sync(lambda: chat.transcript() == [], what="the server to clear the transcript")
    chat.open()
    expect(chat.log).to_have_count(0)
