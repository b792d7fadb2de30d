"""The agent server's customization points: lifecycle hooks, the execution state they see,
custom endpoints, and the LLM adapter factory — the seed's ``ServerHooks``, PEP 8 names.

Every hook is optional and may be sync or async. ``before_*`` hooks may refuse a request by
returning :class:`AbortResult` (or the seed's ``{"abort": True, "response": Response}``): its
response is sent and nothing changes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .contexts import EndpointContext

__all__ = [
    "AbortResult",
    "EndpointHandler",
    "ExecutionState",
    "LLMAdapterContext",
    "LLMAdapterFactory",
    "ServerHooks",
    "call_hook",
    "execution_status",
]


@dataclass(frozen=True, slots=True)
class AbortResult:
    response: Any


@dataclass(frozen=True, slots=True)
class LLMAdapterContext:
    session_id: str
    agent_type: str
    run_id: str


LLMAdapterFactory = Callable[[Any, LLMAdapterContext], Any]


def execution_status(session_status: str) -> str:
    """The seed's ``ExecutionState.status`` for a session status."""
    if session_status == "active":
        return "running"
    if session_status.startswith("suspended_"):
        return "paused"
    return session_status


class ExecutionState:
    """What a hook or endpoint may know and do about the session's current run."""

    def __init__(self, server: Any) -> None:
        self._server = server

    @property
    def session_id(self) -> str | None:
        return self._server.session.session_id  # type: ignore[no-any-return]

    @property
    def run_id(self) -> str | None:
        return self._server.session.run_id  # type: ignore[no-any-return]

    @property
    def is_executing(self) -> bool:
        return bool(self._server.is_executing)

    @property
    def status(self) -> str:
        """The seed's execution status: ``idle``, ``running``, ``paused`` (suspended at a
        human-in-the-loop boundary), ``interrupted``, ``completed`` or ``failed``. ``/status``
        keeps the finer session status (``active``, ``suspended_client_tool`` …)."""
        return execution_status(self._server.session.status)

    async def interrupt(self, reason: str = "interrupted") -> None:
        """A soft stop: the run ends after its current step (resumable)."""
        self._server.request_interrupt(reason)

    async def abort(self, reason: str = "aborted") -> None:
        """A hard stop: the run ends now (not resumable)."""
        await self._server.abort_run(reason)


EndpointHandler = Callable[[Any, "EndpointContext"], Awaitable[Any]]


@dataclass(frozen=True)
class ServerHooks:
    """The seed's ``ServerHooks``, each optional, sync or async, given one typed context
    (:mod:`.contexts`):

    * ``before_start(BeforeStartContext)`` / ``before_resume(BeforeResumeContext)`` /
      ``before_retry(BeforeRetryContext)`` — may refuse with an :class:`AbortResult`;
    * ``after_start(AfterStartContext)`` / ``after_resume(AfterResumeContext)`` /
      ``after_retry(AfterRetryContext)`` — the run is running;
    * ``on_complete(CompleteContext)`` — the run ended (completed, failed or interrupted);
    * ``transform_request(raw_body, env)`` → the seed's start body;
      ``transform_response(answer, TransformResponseContext)`` → what ``/start`` answers.
    """

    before_start: Callable[..., Any] | None = None
    after_start: Callable[..., Any] | None = None
    before_resume: Callable[..., Any] | None = None
    after_resume: Callable[..., Any] | None = None
    before_retry: Callable[..., Any] | None = None
    after_retry: Callable[..., Any] | None = None
    on_complete: Callable[..., Any] | None = None
    transform_request: Callable[..., Any] | None = None
    transform_response: Callable[..., Any] | None = None


async def call_hook(hook: Callable[..., Any] | None, *args: Any) -> Any:
    """Run ``hook(*args)`` (sync or async); an abort answer becomes :class:`AbortResult`."""
    if hook is None:
        return None
    result = hook(*args)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, Mapping) and result.get("abort") and "response" in result:
        return AbortResult(result["response"])
    return result
