"""A continuation refused with 429 after a SIGKILL (issue 31, item 3), under a real ``doemu dev``
against the wire-format fake: the reply is killed mid-stream, the restart's continuation is
refused with ``429`` and ``Retry-After: 2``, and bounded recovery retries it after that wait — one
complete reply, no terminal error — instead of leaving the answer silently truncated.
"""

from __future__ import annotations

from doemu.testing.fake_providers import FakeLLM, Reply, Text
from tests.polling import eventually_sync

from .test_providers import Chat, DevServer, _clean, words
from .test_providers import counters as counters  # the fixtures the server fixture needs
from .test_providers import llm as llm
from .test_providers import server as server


def test_a_continuation_refused_with_429_after_a_kill_is_retried_after_retry_after(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(*words(0, 40)), hold_after=25))
    chat = Chat(server, "CompletionsChat", "refused")
    chat.send("tell me", until_chunks=20)
    llm.wait_held(timeout=10)
    eventually_sync(lambda: chat.persisted_text(), within=10, what="a persisted partial")
    server.kill()
    partial = chat.persisted_text()
    llm.script(
        Reply(fail=(429, "rate limited: slow down"), retry_after=2),
        Reply(Text(*words(len(partial.split()), 40))),
    )
    llm.release()
    server.start()
    whole = "".join(words(0, 40))
    eventually_sync(
        lambda: chat.texts() == [("user", "tell me"), ("assistant", whole)],
        within=40,
        what="one complete reply after the refusal",
    )
    assert len(llm.requests("chat")) == 3  # the cut one, the refused one, the retry
    kv = server.kv("CompletionsChat", "refused")
    assert "cf:chat:last-terminal" not in kv
    _clean(server)
