"""``GET /workspace``: the operator's view of a session's workspaces (the seed's route, wired).

The seed's DO runtime lists the route but leaves it unwired; here it answers from the
``workspaces`` option of :func:`~agents.server.create_agent_server`: a factory ``(env,
WorkspaceContext) -> WorkspaceRegistry`` whose ``snapshot(session_id)`` (sync or async) returns
the session's workspaces as a JSON list (or None). The seed's 404 disambiguation:

* no ``workspaces`` option — ``404 RUNTIME_NO_WORKSPACE_SUPPORT``: this server has none at all;
* a registry that knows no workspace of this session — ``404 WORKSPACES_NOT_FOUND``.

:class:`SessionWorkspaces` is a registry kept in the session object's own SQLite: tools record
the workspaces they create (``ctx.agent.workspaces.register(...)``) and release them.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..core.sql import query_rows
from .errors import RequestError

if TYPE_CHECKING:
    from .server import AgentServer

__all__ = [
    "SessionWorkspaces",
    "WorkspaceContext",
    "WorkspaceRegistry",
    "WorkspacesFactory",
    "workspace_report",
]


class WorkspaceRegistry(Protocol):
    def snapshot(self, session_id: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class WorkspaceContext:
    """What a ``workspaces`` factory is given beside ``env``: the session and its object."""

    session_id: str
    server: Any


WorkspacesFactory = Callable[[Any, WorkspaceContext], WorkspaceRegistry]


class SessionWorkspaces:
    """Workspaces recorded in the session object's SQLite (``cf_server_workspaces``); usable as
    the ``workspaces`` factory itself: ``create_agent_server(workspaces=SessionWorkspaces)``."""

    SCHEMA: ClassVar[str] = (
        "CREATE TABLE IF NOT EXISTS cf_server_workspaces (id TEXT PRIMARY KEY, kind TEXT NOT "
        "NULL, status TEXT NOT NULL, capabilities TEXT NOT NULL, metadata TEXT NOT NULL, "
        "created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)"
    )

    def __init__(self, env: Any, ctx: WorkspaceContext) -> None:
        self._server = ctx.server
        self._sql = ctx.server.ctx.storage.sql
        query_rows(self._sql, self.SCHEMA)

    def register(
        self,
        workspace_id: str,
        kind: str,
        *,
        capabilities: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Record (or re-open) workspace ``workspace_id`` of provider ``kind``."""
        if not workspace_id or not kind:
            raise ValueError("a workspace needs an id and a kind")
        now = int(self._server._core.now())
        query_rows(
            self._sql,
            "INSERT INTO cf_server_workspaces VALUES (?, ?, 'active', ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET status = 'active', kind = excluded.kind, "
            "capabilities = excluded.capabilities, metadata = excluded.metadata, "
            "updated_at = excluded.updated_at",
            workspace_id,
            kind,
            json.dumps(list(capabilities)),
            json.dumps(dict(metadata or {})),
            now,
            now,
        )

    def release(self, workspace_id: str) -> bool:
        """The run no longer holds it (its data stays until deleted); False if unknown."""
        rows = query_rows(
            self._sql,
            "UPDATE cf_server_workspaces SET status = 'released', updated_at = ? WHERE id = ? "
            "RETURNING id",
            int(self._server._core.now()),
            workspace_id,
        )
        return bool(rows)

    def snapshot(self, session_id: str) -> list[dict[str, Any]]:
        rows = query_rows(self._sql, "SELECT * FROM cf_server_workspaces ORDER BY created_at, id")
        return [
            {"id": r["id"], "kind": r["kind"], "status": r["status"],
             "capabilities": json.loads(r["capabilities"]), "metadata": json.loads(r["metadata"]),
             "createdAt": int(r["created_at"]), "updatedAt": int(r["updated_at"])}
            for r in rows
        ]  # fmt: skip


async def workspace_report(server: AgentServer) -> dict[str, Any]:
    """``/workspace``'s answer, or the seed's two 404s (see the module docstring)."""
    registry = server.workspaces
    session_id = server.session.session_id or server.name
    if registry is None:
        raise RequestError(
            404,
            "RUNTIME_NO_WORKSPACE_SUPPORT",
            "this agent server has no workspace support: give create_agent_server(workspaces=…)",
        )
    found = registry.snapshot(session_id)
    if inspect.isawaitable(found):
        found = await found
    if not found:
        raise RequestError(
            404,
            "WORKSPACES_NOT_FOUND",
            f"session {session_id!r} has no workspace",
            sessionId=session_id,
        )
    return {"sessionId": session_id, "workspaces": list(found)}
