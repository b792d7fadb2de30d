"""A Think agent's workspace: a small file tree in the agent's own SQLite, and its tools.

The SDK's Think gives the model a workspace to read and write; here it is the table
``cf_think_workspace(path, content, updated_at)`` — durable like every other table of the agent,
so a file written by a tool survives a kill, and a tool re-run after a recovery overwrites the
same path (idempotent). Paths are relative, ``/``-separated, without ``.``/``..`` segments;
anything else is refused with a message naming the rule, which the model reads.
"""

from __future__ import annotations

import posixpath
from typing import Any

from ..errors import AgentsError
from ..providers import Tool, ToolContext

__all__ = ["MAX_FILE_BYTES", "SCHEMA", "Workspace", "WorkspaceError", "workspace_tools"]

SCHEMA: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS cf_think_workspace (path TEXT PRIMARY KEY NOT NULL, "
    "content TEXT NOT NULL, updated_at INTEGER NOT NULL)",
)
#: A file's largest size (UTF-8 bytes): under the platform's 2 MB row limit.
MAX_FILE_BYTES = 1_000_000


class WorkspaceError(AgentsError):
    """A workspace path or file that cannot be used; the message says why."""


def _clean(path: Any) -> str:
    if not isinstance(path, str) or not path.strip():
        raise WorkspaceError(f"a workspace path is a non-empty string, got {path!r}")
    parts = [p for p in path.strip().strip("/").split("/") if p]
    if not parts or any(p in (".", "..") for p in parts) or "\\" in path or "\x00" in path:
        raise WorkspaceError(f"a workspace path is relative, without '.' or '..': {path!r}")
    return posixpath.join(*parts)


class Workspace:
    """``read``, ``write``, ``list``, ``delete`` over the agent's ``cf_think_workspace``."""

    def __init__(self, agent: Any) -> None:
        self._agent = agent

    def read(self, path: str) -> str | None:
        rows = self._agent.sql("SELECT content FROM cf_think_workspace WHERE path = ?",
                               _clean(path))  # fmt: skip
        return str(rows[0]["content"]) if rows else None

    def write(self, path: str, content: str) -> int:
        if not isinstance(content, str):
            raise WorkspaceError(f"a file's content is text, got {type(content).__name__}")
        size = len(content.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise WorkspaceError(f"{path}: {size} bytes; a file holds at most {MAX_FILE_BYTES}")
        self._agent.sql(
            "INSERT INTO cf_think_workspace (path, content, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET content = excluded.content, "
            "updated_at = excluded.updated_at",
            _clean(path),
            content,
            int(self._agent._core.now()),
        )
        return size

    def list(self, prefix: str = "") -> list[str]:
        rows = self._agent.sql("SELECT path FROM cf_think_workspace ORDER BY path")
        start = _clean(prefix) + "/" if prefix.strip("/ ") else ""
        return [str(r["path"]) for r in rows if str(r["path"]).startswith(start)]

    def delete(self, path: str) -> bool:
        clean = _clean(path)
        found = bool(self._agent.sql("SELECT 1 AS x FROM cf_think_workspace WHERE path = ?", clean))
        self._agent.sql("DELETE FROM cf_think_workspace WHERE path = ?", clean)
        return found


def _schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def workspace_tools(workspace: Workspace) -> list[Tool]:
    """The model's tools over ``workspace``: ``read_file``, ``write_file``, ``list_files``,
    ``delete_file``. Errors (a bad path, a missing file) reach the model as the tool's error."""

    async def read_file(args: dict[str, Any], _ctx: ToolContext) -> Any:
        content = workspace.read(args.get("path"))  # type: ignore[arg-type]
        if content is None:
            raise WorkspaceError(f"no file {args.get('path')!r} in the workspace")
        return content

    async def write_file(args: dict[str, Any], _ctx: ToolContext) -> Any:
        size = workspace.write(args.get("path"), args.get("content"))  # type: ignore[arg-type]
        return {"written": _clean(args.get("path")), "bytes": size}

    async def list_files(args: dict[str, Any], _ctx: ToolContext) -> Any:
        return workspace.list(str(args.get("prefix") or ""))

    async def delete_file(args: dict[str, Any], _ctx: ToolContext) -> Any:
        return {"deleted": workspace.delete(args.get("path"))}  # type: ignore[arg-type]

    text = {"type": "string"}
    return [
        Tool("read_file", "Read a file of your workspace.", _schema(path=text),
             execute=read_file, idempotent=True),
        Tool("write_file", "Create or replace a file of your workspace.",
             _schema(path=text, content=text), execute=write_file, idempotent=True),
        Tool("list_files", "List the files of your workspace (optionally under a folder).",
             {"type": "object", "properties": {"prefix": text}}, execute=list_files,
             idempotent=True),
        Tool("delete_file", "Delete a file of your workspace.", _schema(path=text),
             execute=delete_file, idempotent=True),
    ]  # fmt: skip
