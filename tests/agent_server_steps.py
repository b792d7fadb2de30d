"""A session of an in-process agent server, driven over its HTTP surface (shared by the agent
server's test files)."""

from __future__ import annotations

import json
from typing import Any

from agents.server import session_object_name

from .polling import eventually

__all__ = ["Session"]


class Session:
    """Session ``session_id`` of the harness's ``AGENTS`` namespace; ``default_agent`` is what
    :meth:`start` runs unless told otherwise."""

    def __init__(self, h: Any, session_id: str, default_agent: str = "researcher") -> None:
        self.h = h
        self.id = session_id
        self.default_agent = default_agent
        namespace = h.env.AGENTS
        self.stub = namespace.get(namespace.idFromName(session_object_name(session_id)))

    async def call(
        self, path: str, body: Any = None, *, method: str | None = None
    ) -> tuple[int, Any]:
        options: dict[str, Any] = {"method": method or ("POST" if body is not None else "GET")}
        if body is not None:
            options["body"] = body if isinstance(body, str) else json.dumps(body)
        response = await self.stub.fetch(f"http://agent{path}", **options)
        text = await response.text()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, text

    async def start(self, message: Any, agent_type: str | None = None, **extra: Any) -> Any:
        body = {"agentType": agent_type or self.default_agent, "sessionId": self.id,
                "input": {"message": message}, **extra}  # fmt: skip
        status, answer = await self.call("/start", body)
        assert status == 200, answer
        return answer

    async def status(self) -> dict[str, Any]:
        return (await self.call("/status"))[1]  # type: ignore[no-any-return]

    async def wait(self, *statuses: str) -> dict[str, Any]:
        async def reached() -> Any:
            current = await self.status()
            return current if current["status"] in statuses and not current["isExecuting"] else None

        return await eventually(reached, what=f"session {self.id} {statuses}")  # type: ignore[no-any-return]

    async def history(self) -> list[dict[str, Any]]:
        return (await self.call("/history?fromSequence=0&limit=1000"))[1]["chunks"]  # type: ignore[no-any-return]

    async def messages(self) -> list[dict[str, Any]]:
        return (await self.call("/messages?limit=100"))[1]["messages"]  # type: ignore[no-any-return]
