"""The admin API at ``/__doemu/api``: inspect objects, run alarms now, evict, reset, move the clock.

``access`` decides who may call it, ``routes`` answers, ``events`` streams lifecycle events,
``openapi`` describes it and ``client`` is the CLI's side of it. This module only mounts it: the
Starlette app is built on the first admin request, because building it imports Starlette and the
route modules (tens of milliseconds) on the path from a restart to the first object request,
which never touches the admin API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.routing import BaseRoute
    from starlette.types import Receive, Scope, Send

    from ...runtime import Runtime

__all__ = ["ADMIN_PREFIX", "AdminApp"]

ADMIN_PREFIX = "/__doemu/api"


class AdminApp:
    """The admin ASGI app; the Starlette app behind it is built on the first request."""

    __slots__ = ("_app", "_runtime", "_token")

    def __init__(self, runtime: Runtime, token: str | None = None) -> None:
        self._runtime = runtime
        self._token = token
        self._app: Starlette | None = None

    @property
    def app(self) -> Starlette:
        """The Starlette app, built now if no request has needed it yet."""
        if self._app is None:
            from .routes import build_starlette

            self._app = build_starlette(self._runtime, self._token)
        return self._app

    @property
    def routes(self) -> list[BaseRoute]:
        """The admin routes (the OpenAPI document is checked against them)."""
        return self.app.routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
