"""``Think``: a chat agent defined by its model, system prompt and tools (``@cloudflare/think``).

Subclass it and say *what* the agent is; the turn is the existing machinery — durable turns and
bounded recovery of :class:`~agents.chat.AIChatAgent`, the recoverable model loop of
:func:`agents.providers.model_reply` (a tool never silently runs twice):

* ``get_model()`` — the provider (required); ``system`` / ``get_system_prompt()``; ``tools`` /
  ``get_tools()``; ``max_steps``.
* **Workspace.** The model also gets ``read_file``/``write_file``/``list_files``/``delete_file``
  over the agent's own durable file tree (:mod:`agents.think.workspace`; ``workspace = False``
  turns them off), and every ready MCP server's tools (:func:`agents.think.tools.mcp_tools`).
* **A session that compacts between turns.** Once the transcript holds more than
  ``compact_after_messages`` messages, the turn that crossed the line schedules a compaction
  (an idempotent durable schedule, so a kill mid-summary only delays it): the older messages are
  summarized by the model into one message and the last ``keep_recent_messages`` are kept as
  they are. The same ``compact_messages`` answers the chat layer's context-overflow recovery.
* **Sub-agents.** :meth:`Think.chat` runs a whole turn for a message and answers the reply's
  text — what a parent agent calls over RPC on a child Think (``await
  env.RESEARCHER.getByName(name).chat("…")``), the SDK's sub-agent ``chat()``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ..chat import AIChatAgent, ChatMessageOptions, UIMessage
from ..chat.recovery.overflow import compact_transcript
from ..providers import ModelCall, Provider, TextDelta, Tool, model_reply
from ..providers.transcript import Text
from .tools import mcp_tools
from .workspace import SCHEMA as WORKSPACE_SCHEMA
from .workspace import Workspace, workspace_tools

__all__ = ["SUMMARY_PROMPT", "Think"]

_log = logging.getLogger("agents.think")

#: The instruction the model summarizes older messages with.
SUMMARY_PROMPT = (
    "Summarize the conversation below for your own later use: the user's goals, facts and "
    "decisions, files and results, open questions. Be concise; write only the summary."
)


def _text_of(message: Mapping[str, Any]) -> str:
    parts = message.get("parts") or []
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


class Think(AIChatAgent):
    """See the module docstring. Override :meth:`get_model`; set ``system`` and ``tools``."""

    #: The system prompt (or override :meth:`get_system_prompt`).
    system: ClassVar[str] = "You are a helpful assistant."
    #: The agent's own tools (or override :meth:`get_tools`).
    tools: ClassVar[Sequence[Tool]] = ()
    #: Model steps per turn (a step is one model call; tool results start the next).
    max_steps: ClassVar[int] = 10
    #: Give the model the workspace tools.
    workspace: ClassVar[bool] = True
    #: Compact once the transcript holds more messages than this (0: never between turns).
    compact_after_messages: ClassVar[int] = 40
    #: How many of the newest messages a compaction keeps verbatim.
    keep_recent_messages: ClassVar[int] = 6
    #: How long a turn waits for MCP servers that are still connecting (seconds).
    mcp_wait_seconds: ClassVar[float] = 10.0

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        for statement in WORKSPACE_SCHEMA:
            ctx.storage.sql.exec(statement)
        self.files = Workspace(self)

    # -- the definition -------------------------------------------------------------------------
    def get_model(self) -> Provider:
        """The provider every turn (and every summary) uses. Override it."""
        raise NotImplementedError(
            f"{type(self).__name__}: a Think agent names its model — override get_model() to "
            "return a provider (agents.providers.OpenAIResponses.from_env(self.env, model=…))"
        )

    def get_system_prompt(self) -> str:
        return self.system

    def get_tools(self) -> list[Tool]:
        return list(self.tools)

    def all_tools(self) -> list[Tool]:
        """What the model gets: :meth:`get_tools`, the workspace's, the MCP servers'."""
        own = self.get_tools()
        extra = [*(workspace_tools(self.files) if self.workspace else []), *mcp_tools(self)]
        names = {t.name for t in own}
        return [*own, *(t for t in extra if t.name not in names)]

    # -- a turn -----------------------------------------------------------------------------------
    async def on_chat_message(
        self, on_finish: Callable[..., Any], options: ChatMessageOptions
    ) -> Any:
        await self.mcp.wait_for_connections(self.mcp_wait_seconds)
        return model_reply(
            self,
            options,
            self.get_model(),
            tools=self.all_tools(),
            system=self.get_system_prompt(),
            max_steps=self.max_steps,
        )

    async def on_chat_response(self, result: Mapping[str, Any]) -> None:
        """After each turn: schedule a compaction once the transcript is long enough."""
        limit = self.compact_after_messages
        if limit and len(self.messages) > limit:
            await self.schedule(0, "compact_session", idempotent=True)

    # -- compaction -------------------------------------------------------------------------------
    async def compact_session(self, payload: Any = None, schedule: Any = None) -> bool:
        """Summarize the older messages now; True when the transcript got shorter."""
        return await compact_transcript(self, "", "between_turns")

    async def compact_messages(self, messages: list[UIMessage]) -> list[UIMessage] | None:
        """The older messages as one summary message, then the newest kept verbatim; messages
        that arrived while the model summarized are kept after them."""
        keep = max(1, self.keep_recent_messages)
        if len(messages) <= keep + 1:
            return None
        old, recent = messages[:-keep], messages[-keep:]
        summary = await self.summarize(old)
        if not summary:
            return None
        note: UIMessage = {
            "id": f"summary_{secrets.token_hex(6)}",
            "role": "assistant",
            "parts": [{"type": "text", "text": f"Summary of the earlier conversation: {summary}"}],
            "metadata": {"compaction": {"messages": len(old)}},
        }
        seen = {m.get("id") for m in messages}
        arrived = [m for m in self.messages if m.get("id") not in seen]
        return [note, *recent, *arrived]

    async def summarize(self, messages: Sequence[UIMessage]) -> str:
        """The model's summary of ``messages`` (override to summarize another way)."""
        lines = [f"{m.get('role')}: {_text_of(m)}" for m in messages if _text_of(m)]
        call = ModelCall([Text("user", "\n".join(lines))], system=SUMMARY_PROMPT)
        text = ""
        async for event in self.get_model().stream(call):
            if isinstance(event, TextDelta):
                text += event.delta
        return text.strip()

    # -- sub-agents -------------------------------------------------------------------------------
    async def chat(self, message: str) -> dict[str, Any]:
        """Run a turn for ``message`` and answer ``{"status", "text", "messageId"}``: what a
        parent calls on a child Think over RPC."""
        if not isinstance(message, str) or not message.strip():
            raise ValueError(f"chat() takes the message text, got {message!r}")
        user: UIMessage = {
            "id": f"user_{secrets.token_hex(6)}",
            "role": "user",
            "parts": [{"type": "text", "text": message}],
        }
        result = await self.save_messages([user])
        reply = self.messages[-1] if self.messages else {}
        answered = reply.get("role") == "assistant"
        return {
            "status": result.get("status"),
            "text": _text_of(reply) if answered else "",
            "messageId": reply.get("id") if answered else None,
        }
