"""In-process tests: doemu's pytest plugin provides `doemu_harness` and runs `async def` tests;
`src` is on pytest's pythonpath (see pyproject.toml)."""

import json

from entry import Chat, Default


def chat_request(request_id, text):
    parts = [{"type": "text", "text": text}]
    message = {"id": f"user-{request_id}", "role": "user", "parts": parts}
    body = json.dumps({"messages": [message], "trigger": "submit-message"})
    return json.dumps(
        {
            "type": "cf_agent_use_chat_request",
            "id": request_id,
            "init": {"method": "POST", "body": body},
        }
    )


async def test_a_turn_is_streamed_and_stored(doemu_harness):
    h = await doemu_harness({"Chat": Chat})
    h.entry = Default
    async with h.websocket("/agents/chat/alice") as ws:
        await ws.send_text(chat_request("r1", "hi"))
        text = ""
        while True:
            frame = json.loads(await ws.receive_text())
            if frame.get("type") != "cf_agent_use_chat_response":
                continue
            if frame["body"]:
                chunk = json.loads(frame["body"])
                text += chunk.get("delta", "") if chunk["type"] == "text-delta" else ""
            if frame["done"]:
                break
    assert text == "Hello, world"
    async with h.client() as http:
        messages = (await http.get("/agents/chat/alice/get-messages")).json()
    assert [m["role"] for m in messages] == ["user", "assistant"]
