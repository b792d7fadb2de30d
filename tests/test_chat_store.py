"""The chat transcript and request context on real SQLite (``agents.chat.transcript.store``).

A tiny Durable Object drives :class:`MessageStore` and :class:`RequestContext` over its own
``ctx.storage.sql``, wrapped to count the statements that write, so "unchanged messages are not
written" is asserted as a count of writes. Rules are those of ``persistMessages`` in
``@cloudflare/ai-chat`` 0.12.2 (research §3.3).
"""

from __future__ import annotations

import json
from typing import Any

from workers import DurableObject

from agents.chat.transcript.store import (
    MessageStore,
    RequestContext,
    create_tables,
    sanitize_message,
    truncate_provider_tool_payloads,
)
from doemu.testing.plugin import HarnessFactory


class CountingSql:
    """``ctx.storage.sql`` that counts the statements that write."""

    def __init__(self, sql: Any) -> None:
        self.sql = sql
        self.writes = 0

    def exec(self, query: str, *params: Any) -> Any:
        if query.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            self.writes += 1
        return self.sql.exec(query, *params)


class Transcript(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._sql = CountingSql(ctx.storage.sql)
        create_tables(self._sql)
        self._store = MessageStore(self._sql)
        self._context = RequestContext(self._sql)

    async def persist(
        self, messages: list[Any], delete_stale: bool = False, max_persisted: int | None = None
    ) -> dict[str, Any]:
        before = self._sql.writes
        merged = self._store.persist(
            messages, delete_stale=delete_stale, max_persisted=max_persisted
        )
        return {"merged": merged, "writes": self._sql.writes - before}

    async def mirror(self) -> list[Any]:
        return self._store.messages

    async def stored(self) -> list[Any]:
        """What a fresh store loads from SQLite (as after a wake)."""
        return MessageStore(self._sql).load()

    async def upsert(self, message: Any) -> dict[str, Any]:
        before = self._sql.writes
        written = self._store.upsert(message)
        return {"written": written, "writes": self._sql.writes - before}

    async def delete(self, ids: list[str]) -> int:
        return self._store.delete(ids)

    async def clear(self) -> None:
        self._store.clear()

    async def raw(self, query: str, *params: Any) -> list[dict[str, Any]]:
        return [dict(row) for row in self.ctx.storage.sql.exec(query, *params)]

    async def set_context(self, body: Any, tools: Any) -> int:
        before = self._sql.writes
        self._context.last_body = body
        self._context.last_client_tools = tools
        return self._sql.writes - before

    async def context(self) -> dict[str, Any]:
        fresh = RequestContext(self._sql)
        fresh.load()
        return {"body": fresh.last_body, "tools": fresh.last_client_tools}

    async def clear_context(self) -> None:
        self._context.clear()


def user(mid: str, text: str = "hi") -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def reply(mid: str, text: str) -> dict[str, Any]:
    return {
        "id": mid,
        "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": text, "state": "done"}],
    }


def tool_part(call: str, state: str, input: Any = None, **extra: Any) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": "tool-getWeather",
        "toolCallId": call,
        "toolName": "getWeather",
        "state": state,
        "input": {"city": "Paris"} if input is None else input,
    }
    part.update(extra)
    return part


def tool_reply(mid: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": mid, "role": "assistant", "parts": [{"type": "step-start"}, *parts]}


async def transcript(doemu_harness: HarnessFactory, name: str) -> Any:
    h = await doemu_harness({"TRANSCRIPT": Transcript})
    return h, h.env.TRANSCRIPT.getByName(name)


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


# -- order, in-place updates, unchanged skip -------------------------------------------------------


async def test_new_messages_go_to_the_tail_and_updates_keep_their_position(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("order"))
    await stub.persist([user("q1")])
    await stub.persist([user("q1"), user("q2"), user("q3")])  # overlapping submits
    await stub.persist([user("q1"), user("q2"), user("q3"), reply("a1", "first")])
    await stub.persist([user("q1"), user("q2"), user("q3"), reply("a1", "first"), reply("a3", "x")])
    out = await stub.persist([user("q1", "edited"), reply("a1", "first, longer")])  # in place
    assert out["writes"] == 2
    expected = ["q1", "q2", "q3", "a1", "a3"]
    assert ids(await stub.mirror()) == expected
    assert ids(await stub.stored()) == expected
    assert (await stub.stored())[3]["parts"][1]["text"] == "first, longer"


async def test_order_and_key_order_survive_a_restart(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    name = unique_name("restart")
    h, stub = await transcript(doemu_harness, name)
    client_user = {"parts": [{"type": "text", "text": "hi"}], "id": "u1", "role": "user"}
    await stub.persist([client_user, reply("a1", "one"), user("u2")])
    await stub.persist([client_user, reply("a1", "one!"), user("u2")])
    await h.restart()
    stub = h.env.TRANSCRIPT.getByName(name)
    assert await stub.mirror() == [client_user, reply("a1", "one!"), user("u2")]
    (row,) = await stub.raw("SELECT message FROM cf_ai_chat_agent_messages WHERE id = 'u1'")
    # The JSON is stored as received: key order included.
    assert row["message"] == '{"parts":[{"type":"text","text":"hi"}],"id":"u1","role":"user"}'


async def test_unchanged_messages_are_not_written(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("unchanged"))
    messages = [user("u1"), reply("a1", "Hello"), user("u2")]
    assert (await stub.persist(messages))["writes"] == 3
    assert (await stub.persist(messages))["writes"] == 0
    messages[1] = reply("a1", "Hello, world")
    assert (await stub.persist(messages))["writes"] == 1
    assert (await stub.upsert(reply("a1", "Hello, world")))["written"] is False
    assert (await stub.upsert(reply("a1", "Bye")))["writes"] == 1


async def test_persist_returns_the_reconciled_incoming_list_not_the_transcript(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("broadcast"))
    await stub.persist([user("u1"), reply("a1", "x"), user("u2")])
    out = await stub.persist([user("u2")])  # a client's partial list (cf_agent_chat_messages)
    assert out["merged"] == [user("u2")]
    assert ids(await stub.stored()) == ["u1", "a1", "u2"]


# -- reconciliation --------------------------------------------------------------------------------


async def test_an_assistant_with_a_new_id_adopts_the_stored_row_with_the_same_tool_call(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("adopt-tool"))
    stored = tool_part("c1", "input-available", {"city": "Paris", "unit": "C"})
    await stub.persist([user("u1"), tool_reply("srv", stored)])
    # The client rebuilt the message under its own id, with the input's keys in another order.
    client = tool_reply("cli", tool_part("c1", "input-available", {"unit": "C", "city": "Paris"}))
    out = await stub.persist([user("u1"), client])
    assert ids(out["merged"]) == ["u1", "srv"]
    assert ids(await stub.stored()) == ["u1", "srv"]


async def test_a_reused_tool_call_id_with_another_input_is_a_new_message(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("reused-call"))
    await stub.persist(
        [user("u1"), tool_reply("srv", tool_part("c1", "output-available", output=1))]
    )
    other = tool_reply("cli", tool_part("c1", "input-available", {"city": "Rome"}))
    out = await stub.persist([user("u1"), other])
    assert ids(out["merged"]) == ["u1", "cli"]
    assert out["merged"][1]["parts"][1]["state"] == "input-available"  # no foreign output
    assert ids(await stub.stored()) == ["u1", "srv", "cli"]


async def test_tool_name_is_compared_only_when_both_parts_have_one(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("tool-name"))
    await stub.persist([user("u1"), tool_reply("srv", tool_part("c1", "input-available"))])
    static = tool_part("c1", "input-available")
    del static["toolName"]
    out = await stub.persist([user("u1"), tool_reply("cli", static)])
    assert ids(out["merged"]) == ["u1", "srv"]
    await stub.persist([user("u1"), tool_reply("srv", tool_part("c1", "input-available"))])
    renamed = tool_part("c1", "input-available", toolName="getClimate")
    out = await stub.persist([user("u1"), tool_reply("cli2", renamed)])
    assert ids(out["merged"]) == ["u1", "cli2"]


async def test_identical_replies_adopt_stored_ids_turn_by_turn(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("adopt-text"))
    await stub.persist([user("u1"), reply("A1", "ok"), user("u2"), reply("A2", "ok")])
    out = await stub.persist([user("u1"), reply("x", "ok"), user("u2"), reply("y", "ok")])
    assert ids(out["merged"]) == ["u1", "A1", "u2", "A2"]
    assert out["writes"] == 0
    assert ids(await stub.stored()) == ["u1", "A1", "u2", "A2"]
    # A reply with different text is a new message.
    out = await stub.persist([user("u1"), reply("z", "not ok")])
    assert ids(out["merged"]) == ["u1", "z"]


async def test_a_stored_assistant_with_tool_parts_is_not_matched_by_content(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("adopt-no-tools"))
    stored = tool_reply("srv", tool_part("c1", "output-available", output=1))
    await stub.persist([user("u1"), stored])
    mixed = {"type": "text", "text": "same"}
    await stub.persist([user("u1"), stored, {"id": "srv2", "role": "assistant", "parts": [mixed]}])
    text_only = {"id": "cli", "role": "assistant", "parts": [mixed]}
    out = await stub.persist([user("u1"), text_only])
    assert ids(out["merged"]) == ["u1", "srv2"]


async def test_server_tool_outputs_win_over_a_stale_client_copy(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("outputs-win"))
    server = tool_reply(
        "srv",
        tool_part("c1", "output-available", output={"temp": 21}, preliminary=False),
        tool_part("c2", "output-error", output="stray", errorText="failed"),
        tool_part("c3", "output-denied", approval={"id": "ap", "approved": False}),
    )
    await stub.persist([user("u1"), server])
    stale = tool_reply(
        "srv",
        tool_part("c1", "input-available"),
        tool_part("c2", "approval-requested", approval={"id": "ap2"}),
        tool_part("c3", "approval-responded", approval={"id": "ap", "approved": True}),
    )
    out = await stub.persist([user("u1"), stale])
    c1, c2, c3 = out["merged"][1]["parts"][1:]
    assert c1 == tool_part("c1", "output-available", output={"temp": 21})
    # Only the result field of the server's state rides along (no stray "output").
    assert c2 == tool_part("c2", "output-error", approval={"id": "ap2"}, errorText="failed")
    assert c3 == tool_part("c3", "output-denied", approval={"id": "ap", "approved": False})
    assert out["writes"] == 1  # the client's part shape differs, so the merged row is rewritten
    assert (await stub.stored())[1]["parts"][1:] == [c1, c2, c3]


async def test_a_stale_copy_of_a_settled_call_is_dropped_unless_it_is_last(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("stale-copy"))
    settled = tool_reply("srv", tool_part("c1", "output-available", output=1))
    await stub.persist([user("u1"), settled])
    copy = tool_reply("cli", tool_part("c1", "input-available"))
    out = await stub.persist(
        [user("u1"), copy, tool_reply("srv", tool_part("c1", "input-available")), user("u2")]
    )
    assert ids(out["merged"]) == ["u1", "srv", "u2"]
    assert out["merged"][1]["parts"][1]["state"] == "output-available"
    assert ids(await stub.stored()) == ["u1", "srv", "u2"]
    # As the last message it may be a new call awaiting its result: kept.
    out = await stub.persist([user("u1"), settled, user("u2"), copy])
    assert ids(out["merged"]) == ["u1", "srv", "u2", "cli"]
    # A copy that carries anything else (text) is kept too.
    _, stub = await transcript(doemu_harness, unique_name("stale-copy-text"))
    await stub.persist([user("u1"), settled])
    texty = tool_reply("cli2", tool_part("c1", "input-available"), {"type": "text", "text": "!"})
    out = await stub.persist([user("u1"), texty, settled, user("u2")])
    assert ids(out["merged"]) == ["u1", "cli2", "srv", "u2"]


# -- regenerate trim, retention --------------------------------------------------------------------


async def test_a_subset_request_trims_what_it_left_out_only_with_delete_stale(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("trim"))
    full = [user("u1"), reply("a1", "x"), user("u2"), reply("a2", "y")]
    await stub.persist(full)
    await stub.persist([user("u1")])  # no delete_stale (cf_agent_chat_messages): upsert only
    assert ids(await stub.stored()) == ["u1", "a1", "u2", "a2"]
    # A normal send (a new id) deletes nothing even on the chat-request path.
    await stub.persist([user("u1"), reply("a1", "x"), user("u3")], True)
    assert ids(await stub.stored()) == ["u1", "a1", "u2", "a2", "u3"]
    # Regenerate: every id is stored, so the rest goes.
    out = await stub.persist([user("u1")], True)
    assert out["writes"] == 1  # one DELETE for the four stale rows
    assert ids(await stub.stored()) == ["u1"]
    assert ids(await stub.mirror()) == ["u1"]


async def test_max_persisted_keeps_the_newest_rows(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("max"))
    await stub.persist(
        [user("u1"), reply("a1", "x"), user("u2"), reply("a2", "y"), user("u3")], False, 3
    )
    assert ids(await stub.stored()) == ["u2", "a2", "u3"]
    assert ids(await stub.mirror()) == ["u2", "a2", "u3"]
    await stub.persist([user("u4")], False, 3)
    assert ids(await stub.stored()) == ["a2", "u3", "u4"]


# -- normalisation on write ------------------------------------------------------------------------


def test_provider_executed_payloads_are_truncated_with_a_marker() -> None:
    long = "x" * 600
    emoji = "😀" * 300  # 600 UTF-16 code units, as JavaScript counts them
    part = {
        "type": "tool-code_execution",
        "toolCallId": "c1",
        "state": "output-available",
        "providerExecuted": True,
        "input": {"code": long, "encryptedContent": long, "nested": [long, {"encrypted_x": long}]},
        "output": emoji,
    }
    web = {**part, "type": "tool-web_search"}
    client = {**part, "providerExecuted": False}
    message = {"id": "a", "role": "assistant", "parts": [part, web, client, {"type": "step-start"}]}
    out = truncate_provider_tool_payloads(message)
    marker = "… [truncated, original length: 600]"
    cut = "x" * (500 - len(marker)) + marker
    assert len(cut) == 500
    truncated = out["parts"][0]
    assert truncated["input"] == {
        "code": cut,
        "encryptedContent": long,
        "nested": [cut, {"encrypted_x": long}],
    }
    assert truncated["output"] == "😀" * ((500 - len(marker)) // 2) + marker
    assert out["parts"][1:] == [web, client, {"type": "step-start"}]
    assert truncate_provider_tool_payloads(out) == out  # idempotent
    assert message["parts"][0]["input"]["code"] == long  # the input is not mutated


async def test_persist_stores_truncated_payloads_but_returns_what_was_sent(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("truncate"))
    big = tool_reply(
        "a1", tool_part("c1", "output-available", output="y" * 800, providerExecuted=True)
    )
    out = await stub.persist([user("u1"), big])
    assert out["merged"][1] == big
    stored = (await stub.stored())[1]["parts"][1]["output"]
    assert stored.endswith("… [truncated, original length: 800]") and len(stored) == 500
    assert (await stub.persist([user("u1"), big]))["writes"] == 0  # truncated form matches


def test_sanitize_message_strips_openai_ephemera_and_blank_reasoning() -> None:
    message = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {"type": "reasoning", "text": "  ", "state": "done"},
            {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"sig": "s"}}},
            {
                "type": "text",
                "text": "hi",
                "providerMetadata": {"openai": {"itemId": "i1", "other": 1}, "x": 2},
            },
            {
                "type": "tool-t",
                "callProviderMetadata": {
                    "openai": {"itemId": "i2", "reasoningEncryptedContent": "e"}
                },
                "toolCallId": "c",
            },
        ],
    }
    assert sanitize_message(message)["parts"] == [
        {"type": "reasoning", "text": "", "providerMetadata": {"anthropic": {"sig": "s"}}},
        {"type": "text", "text": "hi", "providerMetadata": {"x": 2, "openai": {"other": 1}}},
        {"type": "tool-t", "toolCallId": "c"},
    ]


async def test_the_stored_form_is_sanitized_and_rewrites_of_it_are_skipped(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("hygiene"))
    text = {"type": "text", "text": "hi", "providerMetadata": {"openai": {"itemId": "i1"}}}
    message = {"id": "a1", "role": "assistant", "parts": [text]}
    assert (await stub.persist([message]))["writes"] == 1
    assert (await stub.stored())[0]["parts"] == [{"type": "text", "text": "hi"}]
    assert (await stub.persist([message]))["writes"] == 0


# -- load, upsert, delete, clear -------------------------------------------------------------------


async def test_load_skips_rows_that_are_not_messages_and_a_write_replaces_them_in_place(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("invalid"))
    insert = "INSERT INTO cf_ai_chat_agent_messages (id, message, seq) VALUES (?, ?, ?)"
    await stub.raw(insert, "u1", json.dumps(user("u1")), 1)  # before the store reads the table
    await stub.raw(insert, "bad1", "not json", 2)
    await stub.raw(insert, "bad2", json.dumps({"id": "bad2", "role": "tool", "parts": []}), 3)
    await stub.raw(insert, "bad3", json.dumps({"id": "bad3", "role": "user"}), 4)
    await stub.raw(insert, "u5", json.dumps(user("u5")), 5)
    assert ids(await stub.stored()) == ["u1", "u5"]
    await stub.persist([user("u1"), user("u6")])
    await stub.upsert(user("bad2", "repaired"))
    assert ids(await stub.stored()) == ["u1", "bad2", "u5", "u6"]
    assert ids(await stub.mirror()) == ["u1", "bad2", "u5", "u6"]


async def test_upsert_delete_and_clear(doemu_harness: HarnessFactory, unique_name: Any) -> None:
    _, stub = await transcript(doemu_harness, unique_name("crud"))
    await stub.persist([user("u1"), reply("a1", "x"), user("u2")])
    assert (await stub.upsert(reply("a1", "approval pending")))["writes"] == 1
    assert (await stub.upsert(reply("a9", "new")))["written"] is True
    assert (await stub.upsert({"id": "x", "role": "tool", "parts": []}))["writes"] == 0
    assert ids(await stub.stored()) == ["u1", "a1", "u2", "a9"]
    assert await stub.delete(["a1", "nope", "a1"]) == 1
    assert ids(await stub.stored()) == ["u1", "u2", "a9"]
    await stub.persist([user("a1")])
    assert ids(await stub.stored()) == ["u1", "u2", "a9", "a1"]  # a deleted id comes back last
    await stub.clear()
    assert await stub.stored() == []
    assert await stub.mirror() == []


async def test_many_ids_are_deleted_in_batches(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("batches"))
    await stub.persist([user(f"u{i}") for i in range(250)])
    assert await stub.delete([f"u{i}" for i in range(1, 250)]) == 249
    assert ids(await stub.stored()) == ["u0"]


# -- request context -------------------------------------------------------------------------------


async def test_request_context_round_trips_and_none_deletes_the_row(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    name = unique_name("context")
    h, stub = await transcript(doemu_harness, name)
    tools = [{"name": "getWeather", "description": "w", "parameters": {"type": "object"}}]
    assert await stub.set_context({"foo": "bar"}, tools) == 2
    assert await stub.set_context({"foo": "bar"}, tools) == 0  # unchanged: not rewritten
    await h.restart()
    stub = h.env.TRANSCRIPT.getByName(name)
    assert await stub.context() == {"body": {"foo": "bar"}, "tools": tools}
    rows = await stub.raw("SELECT key, value FROM cf_ai_chat_request_context ORDER BY key")
    assert rows == [
        {"key": "lastBody", "value": '{"foo":"bar"}'},
        {"key": "lastClientTools", "value": json.dumps(tools, separators=(",", ":"))},
    ]
    await stub.set_context(None, tools)
    assert await stub.context() == {"body": None, "tools": tools}
    assert [r["key"] for r in await stub.raw("SELECT key FROM cf_ai_chat_request_context")] == [
        "lastClientTools"
    ]
    await stub.clear_context()
    assert await stub.raw("SELECT key FROM cf_ai_chat_request_context") == []


async def test_corrupt_request_context_json_is_ignored_on_load(
    doemu_harness: HarnessFactory, unique_name: Any
) -> None:
    _, stub = await transcript(doemu_harness, unique_name("corrupt"))
    insert = "INSERT INTO cf_ai_chat_request_context (key, value) VALUES (?, ?)"
    await stub.raw(insert, "lastBody", "{not json")
    await stub.raw(insert, "lastClientTools", '[{"name":"t"}]')
    assert await stub.context() == {"body": None, "tools": [{"name": "t"}]}
