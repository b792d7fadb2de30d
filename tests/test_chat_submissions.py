"""Durable submissions: answered in order, exactly once per idempotency key, across a crash."""

from __future__ import annotations

import json
from typing import Any

from agents.chat import ChatMessageOptions
from doemu.testing.plugin import HarnessFactory

from .polling import eventually
from .test_chat_agent import Chat, _steps, step
from .test_chat_recovery import Recovering

__all__ = ["_steps"]


def user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


class Submitting(Recovering):
    async def submit(self, messages: Any, key: str | None = None) -> Any:
        return await self.submit_messages(messages, idempotency_key=key, metadata={"k": key})

    async def submit_as(self, sid: str, messages: Any) -> Any:
        return await self.submit_messages(messages, submission_id=sid)

    def inspect(self, sid: str) -> Any:
        return self.inspect_submission(sid)

    def listed(self, status: str | None = None) -> Any:
        return self.list_submissions(status)

    def cancel(self, sid: str) -> bool:
        return self.cancel_submission(sid)

    def delete(self, status: str | None = None) -> int:
        return self.delete_submissions(status)

    def transcript(self) -> list[Any]:
        return self.messages

    def clear(self) -> None:
        self._chat_clear_all()

    def _chat_clear_all(self) -> None:
        class Nobody:
            id = "nobody"

        self._chat_clear(Nobody())  # type: ignore[arg-type]


async def statuses(stub: Any) -> list[str]:
    return [s["status"] for s in await stub.listed()]


async def test_submissions_are_answered_in_order_and_once_per_key(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Submitting})
    stub = h.env.CHAT.getByName("room")
    first = await stub.submit([user("u1", "hi")], "k1")
    second = await stub.submit([user("u2", "hi")], "k2")
    again = await stub.submit([user("u1-again", "hi")], "k1")
    assert first["accepted"] and second["accepted"] and not again["accepted"]
    assert again["submissionId"] == first["submissionId"]
    named = await stub.submit_as("mine", [user("u3", "hi")])
    assert named["accepted"] and named["submissionId"] == "mine"
    taken = await stub.submit_as("mine", [user("u4", "hi")])  # the first one stands
    assert not taken["accepted"] and taken["messages"][0]["id"] == "u3"
    await eventually(lambda: _all(stub, "completed", 3), what="the three submissions answered")
    roles = [(m["id"], m["role"]) for m in await stub.transcript()]
    assert [r for r in roles if r[1] == "user"] == [("u1", "user"), ("u2", "user"), ("u3", "user")]
    assert [r[1] for r in roles] == ["user", "assistant"] * 3
    done = await stub.inspect(first["submissionId"])
    assert done["status"] == "completed" and done["metadata"] == {"k": "k1"}
    assert done["requestId"] and done["startedAt"] and done["completedAt"]
    assert await stub.delete() == 3 and await stub.listed() == []


async def _all(stub: Any, status: str, n: int) -> bool:
    found = await statuses(stub)
    return len(found) == n and all(s == status for s in found)


class Slow(Submitting):
    async def on_chat_message(self, on_finish: Any, options: ChatMessageOptions) -> Any:
        return self.model.response([user("x", "slow")], abort=options.abort_signal)


async def test_cancel_and_clear(doemu_harness: HarnessFactory) -> None:
    h = await doemu_harness({"CHAT": Slow})
    stub = h.env.CHAT.getByName("room")
    running = await stub.submit([user("u1", "slow")])
    queued = await stub.submit([user("u2", "slow")])
    later = await stub.submit([user("u3", "slow")])
    await eventually(
        lambda: _status(stub, running["submissionId"], "running"), what="the first running"
    )
    assert await stub.cancel(queued["submissionId"]) is True
    assert (await stub.inspect(queued["submissionId"]))["status"] == "aborted"
    await stub.clear()  # the first's turn is aborted, the pending one skipped
    await eventually(lambda: _status(stub, later["submissionId"], "skipped"), what="skipped")
    await eventually(lambda: _status(stub, running["submissionId"], "aborted"), what="aborted")
    assert await stub.cancel(running["submissionId"]) is False  # finished already


async def _status(stub: Any, sid: str, status: str) -> bool:
    return bool((await stub.inspect(sid))["status"] == status)


async def test_a_submission_cut_by_a_crash_completes_after_it_exactly_once(
    doemu_harness: HarnessFactory,
) -> None:
    h = await doemu_harness({"CHAT": Submitting})
    stub = h.env.CHAT.getByName("room")
    sub = await stub.submit([user("u1", "slow")], "once")
    step(12)
    await eventually(lambda: _status(stub, sub["submissionId"], "running"), what="running")
    await eventually(lambda: _stored_chunks(stub), what="a stored block of the reply")
    h.reset("CHAT", "room", "simulated crash")
    # The next activation: recovery continues the turn (its schedule needs the clock), and the
    # drain settles the submission once recovery is over.
    assert (await stub.inspect(sub["submissionId"]))["status"] == "running"
    await h.advance(1)
    await eventually(lambda: _status(stub, sub["submissionId"], "completed"), what="completed")
    again = await stub.submit([user("u1-dup", "slow")], "once")
    assert not again["accepted"]
    transcript = await stub.transcript()
    assert [m["id"] for m in transcript if m["role"] == "user"] == ["u1"]
    assert [m["role"] for m in transcript] == ["user", "assistant"]
    text = "".join(p.get("text", "") for p in transcript[1]["parts"] if p["type"] == "text")
    assert text.startswith("w0 w1 ") and text.endswith("It is sunny.")


async def _stored_chunks(stub: Any) -> bool:
    return bool(await stub.kv_get("cf:chat-recovery:progress"))


class Plain(Chat):
    pass


def test_the_table_has_the_sdks_columns() -> None:
    from agents.chat.requests.submissions import _DDL

    columns = json.dumps(_DDL)
    for name in (
        "submission_id", "idempotency_key", "request_id", "stream_id", "status", "messages_json",
        "metadata_json", "error_message", "created_at", "messages_applied_at", "started_at",
        "completed_at",
    ):  # fmt: skip
        assert name in columns
