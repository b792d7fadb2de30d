"""What hooks, custom endpoints and tools are handed: typed, documented, the seed's fields.

Each context is a frozen dataclass — attribute access, no guessing at dict keys — with the
seed's field names in PEP 8 form (``executionState`` → ``execution_state``). Where the seed hands
a request body (``body`` of ``beforeStart``), it is the JSON object as the seed shapes it
(camelCase keys: ``body["agentType"]``, ``body["input"]["message"]``), and the parsed, checked
form is beside it (``start``, ``resume``).

Every context that runs during a run can ``record_metric(type, name, value)``: a custom usage
metric summed into ``/usage``'s ``custom`` (and across sub-agents in the roll-up).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..providers import ToolContext

if TYPE_CHECKING:
    from .hooks import ExecutionState
    from .requests import ResumeRequest, StartRequest

__all__ = [
    "AfterResumeContext",
    "AfterRetryContext",
    "AfterStartContext",
    "BeforeResumeContext",
    "BeforeRetryContext",
    "BeforeStartContext",
    "ChatContext",
    "CompleteContext",
    "EndpointContext",
    "Logger",
    "ServerToolContext",
    "TransformResponseContext",
    "as_logger",
]

MetricRecorder = Callable[[str, str, float], None]


def _no_metrics(kind: str, name: str, value: float) -> None:
    raise RuntimeError("this context records no metrics (it runs outside a session)")


class Logger(Protocol):
    """The seed's ``Logger``: four levels, a message and optional structured fields."""

    def debug(self, message: str, meta: Mapping[str, Any] | None = None) -> None: ...
    def info(self, message: str, meta: Mapping[str, Any] | None = None) -> None: ...
    def warn(self, message: str, meta: Mapping[str, Any] | None = None) -> None: ...
    def error(self, message: str, meta: Mapping[str, Any] | None = None) -> None: ...


class _StdLogger:
    """A :class:`Logger` over a :mod:`logging` logger (``meta`` goes in ``extra["meta"]``)."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def _log(self, level: int, message: str, meta: Mapping[str, Any] | None) -> None:
        if meta:
            self._logger.log(level, "%s %s", message, dict(meta), extra={"meta": dict(meta)})
        else:
            self._logger.log(level, "%s", message)

    def debug(self, message: str, meta: Mapping[str, Any] | None = None) -> None:
        self._log(logging.DEBUG, message, meta)

    def info(self, message: str, meta: Mapping[str, Any] | None = None) -> None:
        self._log(logging.INFO, message, meta)

    def warn(self, message: str, meta: Mapping[str, Any] | None = None) -> None:
        self._log(logging.WARNING, message, meta)

    warning = warn

    def error(self, message: str, meta: Mapping[str, Any] | None = None) -> None:
        self._log(logging.ERROR, message, meta)


def as_logger(logger: Any) -> Logger:
    """The server's logger: ``None`` → the ``agents.server`` :mod:`logging` logger; a
    :class:`logging.Logger` → wrapped; anything with ``debug/info/warn/error`` → itself."""
    if logger is None:
        return _StdLogger(logging.getLogger("agents.server"))
    if isinstance(logger, logging.Logger):
        return _StdLogger(logger)
    levels = ("debug", "info", "warn", "error")
    missing = [m for m in levels if not callable(getattr(logger, m, None))]
    if missing:
        raise TypeError(f"a logger needs debug, info, warn and error methods; missing {missing}")
    return logger  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class BeforeStartContext:
    """``before_start``: a ``/start`` about to begin a run; return an abort to refuse it.

    ``body`` is the request body as the seed shapes it (after ``transform_request``);
    ``start`` is the same, parsed and checked (snake_case, the input as UI messages)."""

    env: Any
    request: Any
    body: Mapping[str, Any]
    start: StartRequest
    execution_state: ExecutionState
    logger: Logger


@dataclass(frozen=True, slots=True)
class AfterStartContext:
    """``after_start``: the run is created and running in the background."""

    env: Any
    session_id: str
    run_id: str
    agent_type: str
    execution_state: ExecutionState
    logger: Logger
    record_metric: MetricRecorder = field(default=_no_metrics)


@dataclass(frozen=True, slots=True)
class BeforeResumeContext:
    """``before_resume`` / ``before_retry``: a ``/resume`` or ``/retry`` about to continue the
    run; return an abort to refuse it. ``body`` is the JSON body, ``resume`` it parsed."""

    env: Any
    request: Any
    body: Mapping[str, Any]
    resume: ResumeRequest
    mode: str
    execution_state: ExecutionState
    logger: Logger


BeforeRetryContext = BeforeResumeContext


@dataclass(frozen=True, slots=True)
class AfterResumeContext:
    """``after_resume`` / ``after_retry``: the run goes on as ``run_id`` (a resume is a new
    run of the session), continuing ``previous_run_id``."""

    env: Any
    session_id: str
    run_id: str
    previous_run_id: str | None
    agent_type: str
    mode: str
    execution_state: ExecutionState
    logger: Logger
    record_metric: MetricRecorder = field(default=_no_metrics)


AfterRetryContext = AfterResumeContext


@dataclass(frozen=True, slots=True)
class CompleteContext:
    """``on_complete``: the run ended — ``status`` ``completed`` (``result`` is its output),
    ``failed`` (``error`` says why; an abort is a failure) or ``interrupted``."""

    env: Any
    session_id: str
    run_id: str
    agent_type: str
    status: str
    result: Any
    error: str | None
    logger: Logger
    record_metric: MetricRecorder = field(default=_no_metrics)


@dataclass(frozen=True, slots=True)
class TransformResponseContext:
    """``transform_response``'s second argument: the session the ``/start`` answer is for."""

    session_id: str
    agent_type: str


@dataclass(frozen=True, slots=True)
class EndpointContext:
    """A custom endpoint's second argument: ``env``, the session's ``execution_state``, the
    server's ``logger``, and the session object itself (``server``) for what the seed's
    runtime does not expose (its stream, its messages)."""

    env: Any
    execution_state: ExecutionState
    logger: Logger
    server: Any


@dataclass(frozen=True, slots=True)
class ChatContext:
    """A ``chat_handler``'s second argument: which v7 chat route was asked for —
    ``session_id`` None and ``action`` ``"chat"`` for ``POST /chat``, else the ``{id}`` and
    ``stream`` / ``submit-tool-result`` / ``interrupt`` / ``abort`` — its query ``params``,
    and the session (``server``, ``execution_state``, ``env``, ``logger``)."""

    env: Any
    execution_state: ExecutionState
    logger: Logger
    server: Any
    session_id: str | None
    action: str
    params: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ServerToolContext(ToolContext):
    """What a tool of a served agent gets beside its arguments: the model loop's context
    (``agent``, ``call_id``, ``idempotency_key``) and the session's ``env``, ids and logger.

    ``record_metric(type, name, value)`` adds a custom usage metric, tied to this call's ledger
    operation: a call run again after a crash (an idempotent tool) records it once."""

    env: Any = None
    session_id: str = ""
    run_id: str = ""
    agent_type: str = ""
    logger: Logger | None = None
    record_metric: MetricRecorder = _no_metrics
