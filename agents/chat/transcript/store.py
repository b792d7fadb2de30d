"""The chat transcript and the request context, on the agent's SQLite.

:class:`MessageStore` keeps the transcript in ``cf_ai_chat_agent_messages`` (one row per
UIMessage, its JSON in ``message``) and mirrors it in memory, as ``AIChatAgent.messages`` does.
:meth:`MessageStore.persist` is ``persistMessages`` of ``@cloudflare/ai-chat`` 0.12.2 (research
§3.3): the incoming list is reconciled against the stored one, each message is written only when
its JSON changed, new messages go to the tail and known ones are updated **in place** (§3.2:
``q1, q2, q3, assistant(q1), assistant(q3)`` when submits overlap), a regenerate that sends a
subset of the transcript trims what it left out, and an optional cap drops the oldest rows.

Why an explicit ``seq`` column: the published package keeps the transcript in insertion order
(Sessions' per-session ``seq``), and a message updated in place must keep its position. The
DESIGN-era table orders by ``created_at``, a ``datetime`` with one-second resolution: messages of
the same second tie, and ``INSERT OR REPLACE`` (what the old SDK did) deletes and re-inserts, so
an update moved the message to the end. The implicit ``rowid`` is no fix either — ``VACUUM`` may
renumber it on a table without an ``INTEGER PRIMARY KEY``. So a row gets ``max(seq) + 1`` when it
is inserted, and updates (``ON CONFLICT DO UPDATE``) never touch it.

:class:`RequestContext` is ``cf_ai_chat_request_context`` (§3.6): the last request's custom body
and client tool schemas, which auto-continuations, ``save_messages`` and recovery reuse after a
restart.

The write path applies, like the published package, two normalisations: the agent's own
(:func:`truncate_provider_tool_payloads` plus its user hook, passed as ``prepare``) and the
transcript layer's hygiene (:func:`sanitize_message`, which Sessions applies to every write).
The tables are created from :data:`SCHEMA` (the agent's schema step, or :func:`create_tables`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from ...core.protocol import dumps
from ...core.sql import delete_in, execute, query_rows
from .incoming import is_valid_message
from .reconcile import reconcile_messages

__all__ = [
    "PROVIDER_TOOL_MAX_STRING_LENGTH",
    "SCHEMA",
    "MessageStore",
    "RequestContext",
    "UIMessage",
    "create_tables",
    "sanitize_message",
    "truncate_provider_tool_payloads",
]

_log = logging.getLogger("agents.chat")

#: An AI SDK ``UIMessage`` as JSON data: ``{"id", "role", "parts", ["metadata"]}``.
UIMessage = dict[str, Any]

SCHEMA: Final[tuple[str, ...]] = (
    """CREATE TABLE IF NOT EXISTS cf_ai_chat_agent_messages (
  id TEXT PRIMARY KEY,
  message TEXT NOT NULL,
  created_at DATETIME DEFAULT CURRENT_TIMESTAMP,
  seq INTEGER NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_cf_ai_chat_agent_messages_seq "
    "ON cf_ai_chat_agent_messages(seq)",
    """CREATE TABLE IF NOT EXISTS cf_ai_chat_request_context (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
)""",
)

#: ``PROVIDER_TOOL_MAX_STRING_LENGTH`` of ``AIChatAgent``.
PROVIDER_TOOL_MAX_STRING_LENGTH: Final = 500
#: Keys whose strings are opaque provider replay data, never truncated.
_OPAQUE_KEY_PREFIX = "encrypted"
#: Anthropic's web tools replay their outputs on later turns: never truncated.
_PRESERVED_PROVIDER_TOOLS = frozenset({"web_search", "web_fetch"})


def create_tables(sql: Any) -> None:
    """Run :data:`SCHEMA` on ``sql`` (``ctx.storage.sql``); idempotent."""
    for statement in SCHEMA:
        execute(sql, statement)


def truncate_provider_tool_payloads(message: UIMessage) -> UIMessage:
    """Shorten long strings of provider-executed tool parts (research §3.3).

    Tools the provider ran itself (Anthropic's code execution, text editor...) can return
    hundreds of kilobytes the model has already consumed, so ``AIChatAgent`` stores every string
    of such a part's ``input`` and ``output`` longer than 500 characters as its first
    ``500 - len(marker)`` characters plus ``marker = "… [truncated, original length: N]"`` (the
    result is within 500, so a second pass changes nothing). Kept verbatim: ``web_search`` and
    ``web_fetch`` parts (their outputs are replayed to the model) and every string under a key
    starting with ``encrypted``. Lengths count UTF-16 code units, as JavaScript does; a cut that
    would split a surrogate pair drops its first half (JavaScript would keep a lone surrogate,
    which Python cannot store).
    """
    parts = message.get("parts")
    if not isinstance(parts, list):
        return message
    return {**message, "parts": [_truncate_part(part) for part in parts]}


def _truncate_part(part: Any) -> Any:
    if not isinstance(part, dict) or not part.get("providerExecuted"):
        return part
    if _tool_name(part) in _PRESERVED_PROVIDER_TOOLS:
        return part
    result = dict(part)
    for key in ("input", "output"):
        if key in result:
            result[key] = _truncate_strings(result[key], opaque=False)
    return result


def _tool_name(part: Mapping[str, Any]) -> str | None:
    name = part.get("toolName")
    if isinstance(name, str):
        return name
    kind = part.get("type")
    return kind[len("tool-") :] if isinstance(kind, str) and kind.startswith("tool-") else None


def _truncate_strings(value: Any, *, opaque: bool) -> Any:
    if isinstance(value, str):
        if opaque:
            return value
        units = value.encode("utf-16-le", "surrogatepass")
        length = len(units) // 2
        if length <= PROVIDER_TOOL_MAX_STRING_LENGTH:
            return value
        marker = f"… [truncated, original length: {length}]"
        keep = max(0, PROVIDER_TOOL_MAX_STRING_LENGTH - len(marker))
        return units[: 2 * keep].decode("utf-16-le", "ignore") + marker
    if isinstance(value, list):
        return [_truncate_strings(item, opaque=opaque) for item in value]
    if isinstance(value, dict):
        return {
            key: _truncate_strings(item, opaque=opaque or key.startswith(_OPAQUE_KEY_PREFIX))
            for key, item in value.items()
        }
    return value


def sanitize_message(message: UIMessage) -> UIMessage:
    """The transcript layer's hygiene on every write (Sessions' ``sanitizeMessage``, §3.2).

    Strips OpenAI's ephemeral ``itemId`` and ``reasoningEncryptedContent`` from a part's
    ``providerMetadata.openai`` / ``callProviderMetadata.openai`` (they must not be replayed to
    the provider), and drops ``reasoning`` parts whose text is blank and that carry no other
    provider metadata.
    """
    parts = message.get("parts")
    if not isinstance(parts, list):
        return message
    kept: list[Any] = []
    for part in parts:
        if isinstance(part, dict):
            for key in ("providerMetadata", "callProviderMetadata"):
                metadata = part.get(key)
                if isinstance(metadata, dict) and "openai" in metadata:
                    part = _strip_openai(part, key)
            if part.get("type") == "reasoning":
                text = part.get("text")
                if not isinstance(text, str) or not text.strip():
                    metadata = part.get("providerMetadata")
                    if not (isinstance(metadata, dict | list) and metadata):
                        continue
        kept.append(part)
    return {**message, "parts": kept}


def _strip_openai(part: dict[str, Any], key: str) -> dict[str, Any]:
    metadata: dict[str, Any] = part[key]
    openai = metadata["openai"]
    if not openai:
        return part
    rest_openai = (
        {k: v for k, v in openai.items() if k not in ("itemId", "reasoningEncryptedContent")}
        if isinstance(openai, dict)
        else {}
    )
    rest_metadata = {k: v for k, v in metadata.items() if k != "openai"}
    replacement = {**rest_metadata, "openai": rest_openai} if rest_openai else rest_metadata
    rest = {k: v for k, v in part.items() if k != key}
    return {**rest, key: replacement} if replacement else rest


# -- reconciliation (message-reconciler.ts) --------------------------------------------------------


class MessageStore:
    """``cf_ai_chat_agent_messages`` and its in-memory mirror, in insertion order.

    The mirror holds messages as stored (after :func:`sanitize_message`), which is also what
    :meth:`load` returns after a restart. Every write goes through this class, so mirror and
    table never disagree; :meth:`load` re-reads the table.
    """

    __slots__ = ("_invalid_ids", "_json", "_loaded", "_messages", "_sql")

    def __init__(self, sql: Any) -> None:
        self._sql = sql
        self._messages: list[UIMessage] = []
        #: id -> the stored JSON text of that message (what "unchanged" is compared with).
        self._json: dict[str, str] = {}
        #: ids of stored rows that are not valid messages (skipped by load, kept on disk).
        self._invalid_ids: set[str] = set()
        self._loaded = False

    def load(self) -> list[UIMessage]:
        """Read the transcript from SQLite (skipping rows that are not valid messages)."""
        messages: list[UIMessage] = []
        texts: dict[str, str] = {}
        invalid: set[str] = set()
        rows = query_rows(
            self._sql, "SELECT id, message FROM cf_ai_chat_agent_messages ORDER BY seq, rowid"
        )
        for row in rows:
            try:
                message = json.loads(row["message"])
            except (TypeError, ValueError):
                message = None
            if not is_valid_message(message):
                _log.warning("skipping stored chat message %r: not a valid UIMessage", row["id"])
                invalid.add(str(row["id"]))
                continue
            messages.append(message)
            texts[message["id"]] = row["message"]
        self._messages, self._json, self._invalid_ids = messages, texts, invalid
        self._loaded = True
        return list(messages)

    @property
    def messages(self) -> list[UIMessage]:
        """The transcript (a new list; the messages themselves are the mirror's)."""
        self._ensure_loaded()
        return list(self._messages)

    def get(self, message_id: str) -> UIMessage | None:
        self._ensure_loaded()
        return next((m for m in self._messages if m["id"] == message_id), None)

    def persist(
        self,
        messages: Sequence[UIMessage],
        *,
        delete_stale: bool = False,
        max_persisted: int | None = None,
        prepare: Callable[[UIMessage], UIMessage] | None = None,
    ) -> list[UIMessage]:
        """``persistMessages`` (research §3.3 steps 1, 2, 4, 5); returns the reconciled list.

        ``prepare`` is the agent's normaliser (default :func:`truncate_provider_tool_payloads`;
        the agent adds its ``sanitize_message_for_persistence`` hook). A message is skipped when
        its prepared JSON equals the stored one; otherwise it is inserted at the tail (new id) or
        updated in place. With ``delete_stale`` (the chat-request path), a list whose every id is
        already stored is a regenerate: stored messages it does not name are deleted. With
        ``max_persisted``, the oldest rows beyond it are deleted. The returned list is what the
        agent broadcasts as ``cf_agent_chat_messages``: the reconciled incoming list, not the
        stored transcript. Messages without a valid id/role/parts are not stored (logged).
        """
        prepare = prepare or truncate_provider_tool_payloads
        prior = self.messages
        prior_json = dict(self._json)
        merged = reconcile_messages(messages, prior, prepare)
        for message in merged:
            resolved = prepare(message)
            if not is_valid_message(resolved):
                _log.warning("not persisting chat message %r: not a valid UIMessage", resolved)
                continue
            if prior_json.get(resolved["id"]) == dumps(resolved):
                continue
            self._write(resolved)
        if delete_stale:
            stored_ids = {m["id"] for m in prior}
            if all(m.get("id") in stored_ids for m in merged):
                keep = {m.get("id") for m in merged}
                self.delete([m["id"] for m in self._messages if m["id"] not in keep])
        if max_persisted is not None:
            self._trim(max_persisted)
        return merged

    def upsert(self, message: UIMessage) -> bool:
        """Write one (already prepared) message: in place if stored, else at the tail.

        Returns False when nothing was written: its stored JSON is unchanged, or it is not a
        valid message (logged, as :meth:`persist` does).
        """
        self._ensure_loaded()
        if not is_valid_message(message):
            _log.warning("not persisting chat message %r: not a valid UIMessage", message)
            return False
        return self._write(message)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete these messages; returns how many of them were in the transcript."""
        self._ensure_loaded()
        doomed = list(dict.fromkeys(ids))
        delete_in(self._sql, "cf_ai_chat_agent_messages", "id", doomed)
        gone = set(doomed)
        before = len(self._messages)
        self._messages = [m for m in self._messages if m["id"] not in gone]
        for message_id in gone:
            self._json.pop(message_id, None)
            self._invalid_ids.discard(message_id)
        return before - len(self._messages)

    def clear(self) -> None:
        """Delete the whole transcript (``cf_agent_chat_clear``)."""
        execute(self._sql, "DELETE FROM cf_ai_chat_agent_messages")
        self._messages, self._json, self._invalid_ids = [], {}, set()
        self._loaded = True

    # -- internals ---------------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    def _write(self, message: UIMessage) -> bool:
        stored = sanitize_message(message)
        message_id: str = stored["id"]
        text = dumps(stored)
        if self._json.get(message_id) == text:
            return False  # what Sessions' content hash catches: the stored row is identical
        execute(
            self._sql,
            "INSERT INTO cf_ai_chat_agent_messages (id, message, seq) VALUES (?, ?, "
            "(SELECT coalesce(max(seq), 0) + 1 FROM cf_ai_chat_agent_messages)) "
            "ON CONFLICT(id) DO UPDATE SET message = excluded.message",
            message_id,
            text,
        )
        if message_id in self._invalid_ids:
            self.load()  # it replaced a corrupt row, in that row's position
            return True
        self._json[message_id] = text
        for index, existing in enumerate(self._messages):
            if existing["id"] == message_id:
                self._messages[index] = stored
                break
        else:
            self._messages.append(stored)
        return True

    def _trim(self, max_persisted: int) -> None:
        """Keep the newest ``max_persisted`` rows (counting stored rows, not the mirror)."""
        count = query_rows(self._sql, "SELECT count(*) AS n FROM cf_ai_chat_agent_messages")
        excess = int(count[0]["n"]) - max(0, max_persisted)
        if excess <= 0:
            return
        rows = query_rows(
            self._sql,
            "SELECT id FROM cf_ai_chat_agent_messages ORDER BY seq, rowid LIMIT ?",
            excess,
        )
        self.delete(str(row["id"]) for row in rows)


# -- the request context ---------------------------------------------------------------------------


class RequestContext:
    """``cf_ai_chat_request_context``: the last request's ``body`` and ``clientTools`` (§3.6).

    Rows ``('lastBody', <JSON>)`` and ``('lastClientTools', <JSON>)``. Setting a value writes its
    row (``INSERT OR REPLACE``); setting ``None`` deletes it. A row whose JSON does not parse
    is ignored on load (the next request overwrites it).
    """

    __slots__ = ("_json", "_loaded", "_sql", "_values")

    _BODY: Final = "lastBody"
    _TOOLS: Final = "lastClientTools"

    def __init__(self, sql: Any) -> None:
        self._sql = sql
        self._values: dict[str, Any] = {}
        self._json: dict[str, str] = {}
        self._loaded = False

    def load(self) -> None:
        """Read both rows (the constructor's ``_restoreRequestContext``)."""
        values: dict[str, Any] = {}
        texts: dict[str, str] = {}
        for row in query_rows(self._sql, "SELECT key, value FROM cf_ai_chat_request_context"):
            key = row["key"]
            if key not in (self._BODY, self._TOOLS):
                continue
            try:
                values[key] = json.loads(row["value"])
            except (TypeError, ValueError):
                _log.warning("ignoring corrupt chat request context row %r", key)
                continue
            texts[key] = row["value"]
        self._values, self._json, self._loaded = values, texts, True

    @property
    def last_body(self) -> Any:
        """The custom fields of the last request's body (``None`` when it had none)."""
        return self._get(self._BODY)

    @last_body.setter
    def last_body(self, value: Any) -> None:
        self._set(self._BODY, value)

    @property
    def last_client_tools(self) -> Any:
        """The client tool schemas of the last request (``None`` when it sent none)."""
        return self._get(self._TOOLS)

    @last_client_tools.setter
    def last_client_tools(self, value: Any) -> None:
        self._set(self._TOOLS, value)

    def clear(self) -> None:
        """Forget both (``cf_agent_chat_clear``)."""
        self._set(self._BODY, None)
        self._set(self._TOOLS, None)

    def _get(self, key: str) -> Any:
        if not self._loaded:
            self.load()
        return self._values.get(key)

    def _set(self, key: str, value: Any) -> None:
        if not self._loaded:
            self.load()
        if value is None:
            execute(self._sql, "DELETE FROM cf_ai_chat_request_context WHERE key = ?", key)
            self._values.pop(key, None)
            self._json.pop(key, None)
            return
        text = dumps(value)
        if self._json.get(key) == text:
            return
        execute(
            self._sql,
            "INSERT OR REPLACE INTO cf_ai_chat_request_context (key, value) VALUES (?, ?)",
            key,
            text,
        )
        self._values[key] = json.loads(text)  # a copy, as a reload would give
        self._json[key] = text
