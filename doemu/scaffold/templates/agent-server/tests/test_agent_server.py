"""In-process tests against doemu's fake model server (a real local server speaking OpenAI's
chat-completions stream); `src` is on pytest's pythonpath (see pyproject.toml)."""

import asyncio
import json

from entry import AgentServer, Default

from doemu.testing.fake_providers import FakeLLM, Reply, Text, ToolUse


async def test_a_run_uses_its_tool_and_finishes(doemu_harness):
    with FakeLLM() as llm:
        llm.script(Reply(ToolUse("word_count", {"text": "one two three"})), Reply(Text("Three.")))
        h = await doemu_harness(
            {"AGENTS": AgentServer},
            vars={
                "OPENAI_BASE_URL": f"{llm.url}/v1",
                "OPENAI_API_KEY": "test-key",
                "MODEL": "demo",
            },
        )
        h.entry = Default
        async with h.client() as http:
            start = {
                "agentType": "assistant",
                "sessionId": "s1",
                "input": {"message": "count: one two three"},
            }
            answer = await http.post("/sessions/s1/start", content=json.dumps(start))
            assert answer.status_code == 200, answer.text
            for _ in range(500):  # poll with a deadline (5 s)
                status = (await http.get("/sessions/s1/status")).json()
                if status["status"] in ("completed", "failed") and not status["isExecuting"]:
                    break
                await asyncio.sleep(0.01)
            assert status["status"] == "completed", json.dumps(status)
