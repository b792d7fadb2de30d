"""Structured output (issue 32, item 4) under a real ``doemu dev`` with real SIGKILLs
(``e2e/apps/structured_output``; the model is the fake OpenAI Responses API, in this process):

1. an answer the schema refuses is corrected within the step budget; ``/status.output``, the
   ``run_completed`` chunk and the SSE stream's ``end`` carry the validated object — and after a
   SIGKILL of the finished server, ``/status`` still does (it is stored with the run);
2. a SIGKILL in the middle of the corrected step: after the restart the run is interrupted;
   ``/resume`` re-attaches to the stored response (nothing generated twice) and the output is
   validated as if nothing happened;
3. a model that never complies: the run ends ``failed`` with the violation named, on ``/status``
   and as the SSE stream's ``fail`` event — no traceback — and the server serves on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doemu.testing.devserver import DevServer, DevServerFactory
from doemu.testing.fake_providers import FakeLLM, Reply, Text
from tests.polling import eventually_sync

from .agent_server_fixtures import Session, openai_vars, serve
from .agent_server_fixtures import llm as llm  # the fixture: the fake OpenAI Responses API

APP = Path(__file__).resolve().parent / "apps" / "structured_output"
VALID = {"sentiment": "positive", "topics": ["otters", "rivers"]}
INVALID = '{"sentiment": "meh", "topics": ["otters"]}'
VIOLATION = "$.sentiment must be one of ['positive', 'negative', 'neutral']"


@pytest.fixture
def server(tmp_path: Path, doemu_dev: DevServerFactory, llm: FakeLLM) -> DevServer:
    return serve(doemu_dev, APP, tmp_path, openai_vars(llm))


def test_a_corrected_answer_is_the_output_and_survives_a_sigkill(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text(INVALID)), Reply(Text(json.dumps(VALID))))
    s = Session(server, "so-fixed")
    s.start("how do people feel about otters?", "analyst")
    status = s.wait("completed")
    assert status["output"] == VALID and status["error"] is None
    history = s.chunks()
    rejected = [(c["step"], c["retry"], c["error"]) for c in history
                if c["type"] == "output_rejected"]  # fmt: skip
    assert rejected == [(0, True, f"output 'output' does not match its schema: {VIOLATION}")]
    assert [c["output"] for c in history if c["type"] == "run_completed"] == [VALID]
    events = s.sse_events()
    assert events[-1] == {"type": "end", "finalOutput": VALID}
    second = llm.requests("responses")[1]
    assert second["text"]["format"] == {"type": "json_schema", "name": "output", "strict": False,
                                        "schema": second["text"]["format"]["schema"]}  # fmt: skip
    assert VIOLATION in second["input"][-1]["content"]  # the correction the model read
    server.kill()
    server.start()
    after = s.get("/status")
    assert after["status"] == "completed" and after["output"] == VALID


def test_a_sigkill_mid_correction_resumes_to_a_validated_output(
    server: DevServer, llm: FakeLLM
) -> None:
    pieces = ['{"sentiment": ', '"positive", ', '"topics": ', '["otters", ', '"rivers"]}']
    llm.script(Reply(Text(INVALID)), Reply(Text(*pieces), hold_after=2))
    s = Session(server, "so-killed")
    s.start("how do people feel about otters?", "analyst")
    llm.wait_held(timeout=10)
    eventually_sync(lambda: any(c["type"] == "output_rejected" for c in s.chunks()),
                    within=10, what="the correction stored")  # fmt: skip
    server.kill()
    llm.release()  # the stored response completes while the server is down
    server.start()
    s.wait("interrupted")
    status, body = s.call("/resume", {"options": {"mode": "continue"}})
    assert status == 200, body
    done = s.wait("completed")
    assert done["output"] == VALID
    assert len(llm.stats.generations) == 2  # the cut step re-attached, not generated again
    server.kill()
    server.start()
    assert s.get("/status")["output"] == VALID


def test_a_model_that_never_complies_fails_with_the_violation_named(
    server: DevServer, llm: FakeLLM
) -> None:
    llm.script(Reply(Text("People love otters!")), Reply(Text(INVALID)))
    s = Session(server, "so-never")
    s.start("how do people feel about otters?", "terse")
    status = s.wait("failed")
    expected = (f"output 'output' does not match its schema: {VIOLATION} — no answer matched "
                "the output schema within max_steps=2")  # fmt: skip
    assert status["error"] == expected and status["output"] is None
    assert s.sse_events()[-1] == {"type": "fail", "error": expected}
    assert len(llm.requests("responses")) == 2
    llm.script(Reply(Text(json.dumps(VALID))))  # the session serves on
    s.start("and now?", "terse")
    assert s.wait("completed")["output"] == VALID
