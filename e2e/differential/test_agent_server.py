"""examples/agent_server on doemu and on workerd: its endpoints, a client tool, a kill and /resume.

The example's Worker and ``AgentServer`` unchanged, its model the fake OpenAI-compatible provider
in this process (``FakeLLM`` with the ``--demo`` responder), reached through ``workers.fetch`` —
on workerd through the runner's network service, which allows loopback. The client is plain
HTTP and SSE (``httpx``), as the README's curl lines. Ids and clock readings are normalised
(:mod:`.normalise`); everything else must be what the other target answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from doemu.testing.fake_providers import FakeLLM
from doemu.testing.fake_providers.__main__ import demo_responder
from tests.polling import eventually_sync

from ..targets import AGENTS_VENDOR, ROOT, TargetServer
from .conftest import running
from .normalise import normalised

EXAMPLE = ROOT / "examples" / "agent_server"
COUNT_ANSWER = "Let me count the words. That message has 4 words, by the word_count tool's count."
OTTERS = (
    "You asked: “tell me about otters”. I am the demo model of doemu's fake provider, so I know "
    "nothing about it, but I answer word by word, slowly enough to watch. Every word is a chunk "
    "the session's Durable Object stored before you saw it. Reload the page, or kill the server "
    "and resume the run: the answer goes on from where it stopped."
)


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    """The demo model, in this process: it outlives every kill of the server."""
    with FakeLLM(api_key="test-key", responder=demo_responder) as server:
        yield server


@pytest.fixture(scope="module")
def agents(serve: Any, llm: FakeLLM) -> TargetServer:
    keys = {"OPENAI_BASE_URL": f"{llm.url}/v1", "OPENAI_API_KEY": "test-key"}
    server: TargetServer = serve(EXAMPLE, vendor=AGENTS_VENDOR, vars=keys)
    return server


class Session:
    """``/api/sessions/<id>/…`` of one server."""

    def __init__(self, server: TargetServer, session_id: str) -> None:
        self.server, self.id = server, session_id

    def url(self, path: str) -> str:
        return f"{running(self.server).url}/api/sessions/{self.id}{path}"

    def get(self, path: str) -> Any:
        answer = httpx.get(self.url(path), timeout=30)
        assert answer.status_code == 200, (path, answer.text)
        return answer.json()

    def post(self, path: str, body: Any) -> Any:
        answer = httpx.post(self.url(path), json=body, timeout=30)
        assert answer.status_code == 200, (path, answer.text)
        return answer.json()

    def start(self, message: str) -> Any:
        return self.post("/start", {"agentType": "researcher", "input": {"message": message}})

    def wait(self, status: str, within: float = 40) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            found: dict[str, Any] = self.get("/status")
            return found if found["status"] == status else None

        return eventually_sync(reached, within=within, what=f"{self.id} to be {status}")

    def sse(self, from_sequence: int = 0) -> list[dict[str, Any]]:
        """Every event of ``/sse`` until the server closes it (after the run's end)."""
        events = []
        with httpx.stream("GET", self.url(f"/sse?fromSequence={from_sequence}"), timeout=60) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line.removeprefix("data: ")))
        return events

    def history(self) -> list[dict[str, Any]]:
        page = self.get("/history?fromSequence=0&limit=1000")
        assert page["hasMore"] is False
        chunks: list[dict[str, Any]] = page["chunks"]
        return chunks


def deltas(chunks: list[dict[str, Any]]) -> str:
    return "".join(c.get("delta", "") for c in chunks if c["type"] == "text_delta")


def test_a_run_streams_over_sse_and_is_accounted(
    agents: TargetServer, llm: FakeLLM, target: str
) -> None:
    """1. POST /start answers at once: started, from sequence 0.
    2. /sse from 0: every chunk in order — text, the server tool's call and result, text —
       then `end` with the final output; the response closes after it.
    3. /status, /history (paged) and /usage agree with the stream; the tokens are what the
       provider billed."""
    session = Session(agents, f"count-{target}")
    billed_before = llm.stats.billed_output_tokens
    since = len(agents.lines)
    started = normalised(session.start("count these four words"))
    assert started == {
        "sessionId": session.id,
        "streamId": "<run1>",
        "status": "started",
        "startSequence": 0,
    }
    events = normalised(session.sse())
    who = {"agentId": session.id, "agentType": "researcher"}
    words = ["Let ", "me ", "count ", "the ", "words. "]
    after = ["That ", "message ", "has ", "4 ", "words, ", "by ", "the ", "word_count ", "tool's "]
    call = {"toolCallId": "<call1>"}
    chunks = [
        {
            "type": "run_started",
            "runId": "<run1>",
            "agentType": "researcher",
            "agentId": session.id,
        },
        {"type": "message_start", "messageId": "<msg1>", **who},
        *({"type": "text_delta", "delta": word, **who} for word in words),
        {
            "type": "tool_call_start",
            **call,
            "toolName": "word_count",
            "input": {"text": "count these four words"},
            **who,
        },
        # the step's tool results before its end, as the AI SDK's streamText sends them
        {"type": "tool_result", **call, "result": {"words": 4}, **who},
        {"type": "step_completed", **who},
        *({"type": "text_delta", "delta": word, **who} for word in [*after, "count."]),
        {"type": "step_completed", **who},
        {"type": "run_completed", "output": COUNT_ANSWER, "runId": "<run1>", "agentId": session.id},
    ]
    assert events == [
        *({"type": "chunk", "sequence": seq, "chunk": chunk} for seq, chunk in enumerate(chunks)),
        {"type": "end", "finalOutput": COUNT_ANSWER},
    ]
    status = normalised(session.get("/status"))
    assert status == {
        "sessionId": session.id,
        "status": "completed",
        "stepCount": 2,
        "output": COUNT_ANSWER,
        "error": None,
        "checkpointId": "cp-<run1>-2",
        "isExecuting": False,
        "runId": "<run1>",
        "agentType": "researcher",
        "interruptRequested": None,
    }
    first = normalised(session.get("/history?fromSequence=0&limit=3"))
    assert first == {
        "chunks": [{"sequence": seq, "chunk": chunks[seq]} for seq in range(3)],
        "hasMore": True,
        "latestSequence": len(chunks) - 1,
    }
    usage = session.get("/usage")
    completion = llm.stats.billed_output_tokens - billed_before
    assert usage["tokens"]["completion"] == completion == 16
    assert (usage["tokens"]["prompt"], usage["toolStats"]["byTool"]["word_count"]["calls"]) == (
        74,
        1,
    )
    # A cancelled background task (the SSE heartbeat, once the stream ends) is not an error:
    # on workerd it was logged as an uncaught CancelledError (agents.wait_until's fix).
    assert "CancelledError" not in "\n".join(agents.lines[since:])


def test_a_client_tool_is_answered(agents: TargetServer, target: str) -> None:
    """1. "approve the deploy": the run suspends on the client tool `approve`.
    2. /snapshot names the pending call; submit-tool-result answers it: accepted, active.
    3. The run goes on by itself and completes with the approval in its output."""
    session = Session(agents, f"approve-{target}")
    session.start("approve the deploy")
    suspended = normalised(session.wait("suspended_client_tool"))
    assert (suspended["stepCount"], suspended["isExecuting"]) == (1, False)
    snapshot = session.get("/snapshot")
    (call_id,) = snapshot["pendingClientToolCalls"]
    assert normalised(snapshot["pendingClientToolCalls"]) == {
        "<call1>": {"toolName": "approve", "input": {"action": "approve the deploy"}}
    }
    answer = session.post(
        f"/chat/{session.id}/submit-tool-result",
        {"toolCallId": call_id, "result": {"approved": True}},
    )
    assert answer == {"accepted": True, "status": "active", "ownerSessionId": session.id}
    done = session.wait("completed")
    assert done["output"] == (
        "I need your approval before I do that. "
        "Approved: approve the deploy. Consider it done, in this demo at least."
    )


def test_a_killed_run_is_resumed(agents: TargetServer, target: str) -> None:
    """1. A run streams a long answer (a word every 60 ms); after a few stored chunks the server
       is SIGKILLed and restarted on the same state.
    2. /status says interrupted; POST /resume {"mode": "continue"} answers resumed, from the
       next sequence, as a new run.
    3. It completes: /history has run_interrupted and run_resumed, no gap in the sequence, and
       the whole answer once."""
    session = Session(agents, f"kill-{target}")
    session.start("tell me about otters")
    eventually_sync(
        lambda: session.get("/history?fromSequence=0&limit=1")["latestSequence"] >= 6,
        within=20,
        what="a few stored chunks",
    )
    agents.kill()
    agents.restart()
    status = session.get("/status")
    interrupted, resumed = normalised(
        [status, session.post("/resume", {"options": {"mode": "continue"}})]
    )
    assert (interrupted["status"], interrupted["isExecuting"]) == ("interrupted", False)
    assert interrupted["runId"] == "<run1>"
    assert (resumed["status"], resumed["mode"], resumed["previousRunId"]) == (
        "resumed",
        "continue",
        "<run1>",
    )
    assert resumed["runId"] == resumed["streamId"] == "<run2>"
    done = session.wait("completed")
    assert done["output"] == OTTERS
    history = session.history()
    assert [row["sequence"] for row in history] == list(range(len(history)))
    kinds = [row["chunk"]["type"] for row in history]
    assert kinds.count("run_interrupted") == kinds.count("run_resumed") == 1
    assert kinds.index("run_resumed") == kinds.index("run_interrupted") + 1
    assert resumed["startSequence"] == kinds.index("run_resumed")
    assert deltas([row["chunk"] for row in history]) == OTTERS
