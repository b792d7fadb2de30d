"""The bindings that hand work on: ``[[workflows]]``, ``[[queues.producers]]`` /
``[[queues.consumers]]`` and ``[ai]``, read as wrangler reads them.

Split from :mod:`doemu.config.bindings` (which calls :func:`check_work_bindings`) because each of
these carries settings of its own (a consumer's batching and retries, a workflow's class) rather
than only a resource name. Limits and defaults are wrangler's and Cloudflare's documented ones:
a batch of at most 100 messages (default 10), a batch timeout of at most 60 s (default 5), at most
100 retries (default 3), a retry delay of at most 12 hours (``43200`` s, default 0), at most 250
concurrent consumer invocations.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checker import Checker, show, unexpected

__all__ = [
    "IMPLICIT_DEPENDENCIES_DATE",
    "AiBinding",
    "QueueConsumer",
    "QueueProducer",
    "WorkBindings",
    "WorkflowBinding",
    "check_work_bindings",
]

#: From this compatibility date (with ``python_workers``) a Python step's dependencies are its
#: parameters' names (workerd's ``python_workflows_implicit_dependencies``).
IMPLICIT_DEPENDENCIES_DATE = "2026-02-25"

#: Cloudflare's names for queues and workflows: letters, digits, ``-`` and ``_``.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class WorkflowBinding:
    """``env.<binding>`` starts and reads instances of the workflow ``name`` (``class_name``).

    ``implicit_dependencies``: ``step.do`` resolves dependencies from parameter names (the
    SDK's keyword-only form) rather than from an explicit ``depends`` list. ``step_limit`` is
    the most ``step.do`` calls one instance may make (``limits.steps``, default 10 000).
    """

    binding: str
    name: str
    class_name: str
    implicit_dependencies: bool = True
    step_limit: int = 10_000


@dataclass(frozen=True)
class QueueProducer:
    """``env.<binding>`` sends to ``queue``; ``delivery_delay`` (s) applies to every message."""

    binding: str
    queue: str
    delivery_delay: int = 0


@dataclass(frozen=True)
class QueueConsumer:
    """The entry Worker's ``queue()`` handler consumes ``queue`` with these settings."""

    queue: str
    max_batch_size: int = 10
    max_batch_timeout: float = 5.0
    max_retries: int = 3
    retry_delay: int = 0
    dead_letter_queue: str | None = None
    max_concurrency: int | None = None


@dataclass(frozen=True)
class AiBinding:
    """``[ai] binding``: ``env.<binding>.run(model, inputs)``."""

    binding: str


@dataclass(frozen=True)
class WorkBindings:
    """What :func:`check_work_bindings` found."""

    workflows: tuple[WorkflowBinding, ...] = ()
    producers: tuple[QueueProducer, ...] = ()
    consumers: tuple[QueueConsumer, ...] = ()
    ai: AiBinding | None = None


_WORKFLOW_KEYS = ("binding", "name", "class_name", "script_name", "limits", "remote")
_PRODUCER_KEYS = ("binding", "queue", "delivery_delay", "remote", "experimental_remote")
_CONSUMER_KEYS = (
    "queue", "max_batch_size", "max_batch_timeout", "max_retries", "retry_delay",
    "dead_letter_queue", "max_concurrency", "type", "visibility_timeout_ms",
)  # fmt: skip
_QUEUES_KEYS = ("producers", "consumers")
_AI_KEYS = ("binding", "remote", "experimental_remote", "staging")


def check_work_bindings(check: Checker, raw: Mapping[str, Any]) -> WorkBindings:
    """Workflows, queues and AI of ``raw`` (the decoded config); problems go to ``check``."""
    producers, consumers = _queues(check, raw.get("queues"))
    return WorkBindings(
        workflows=tuple(_workflows(check, raw)),
        producers=tuple(producers),
        consumers=tuple(consumers),
        ai=_ai(check, raw.get("ai")),
    )


def _implicit(raw: Mapping[str, Any]) -> bool:
    flags = raw.get("compatibility_flags") or []
    flags = flags if isinstance(flags, list) else []
    if "no_python_workflows_implicit_dependencies" in flags:
        return False
    if "python_workflows_implicit_dependencies" in flags:
        return True
    date = raw.get("compatibility_date")
    if isinstance(date, dt.date):
        date = date.isoformat()
    return isinstance(date, str) and date >= IMPLICIT_DEPENDENCIES_DATE


def _binding(check: Checker, item: Mapping[str, Any], where: str) -> str | None:
    name = check.string(item.get("binding"), f"{where}.binding", required=True)
    if name is not None and not name.isidentifier():
        check.errors.append(
            f"{where}.binding must be a name usable as env.<binding>, got {show(name)}"
        )
        return None
    return name


def _name(check: Checker, value: Any, where: str) -> str | None:
    name = check.string(value, where, required=True)
    if name is not None and not _NAME.fullmatch(name):
        check.errors.append(
            f"{where} must be 1-64 letters, digits, '-' or '_' (not starting with '-'), "
            f"got {show(name)}"
        )
        return None
    return name


def _tables(
    check: Checker, value: Any, key: str, known: tuple[str, ...]
) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for index, entry in enumerate(check.array_of_tables(value, key) or []):
        where = f"{key}[{index}]"
        item = check.table(entry, where)
        if item is None:
            continue
        warning = unexpected(where, item, known)
        if warning:
            check.warnings.append(warning)
        out.append((where, item))
    return out


def _number(
    check: Checker, item: Mapping[str, Any], key: str, where: str, low: float, high: float
) -> Any:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        check.errors.append(
            f"{where}.{key} must be a number from {low:g} to {high:g}, got {show(value)}"
        )
        return None
    return value


def _workflows(check: Checker, raw: Mapping[str, Any]) -> list[WorkflowBinding]:
    out = []
    implicit = _implicit(raw)
    names: set[str] = set()
    for where, item in _tables(check, raw.get("workflows"), "workflows", _WORKFLOW_KEYS):
        binding = _binding(check, item, where)
        name = _name(check, item.get("name"), f"{where}.name")
        class_name = check.string(item.get("class_name"), f"{where}.class_name", required=True)
        if class_name is not None and not class_name.isidentifier():
            check.errors.append(f"{where}.class_name must be a class name, got {show(class_name)}")
            class_name = None
        script = check.string(item.get("script_name"), f"{where}.script_name")
        limits = item.get("limits") or {}
        steps = 10_000
        if isinstance(limits, dict):
            value = _number(check, limits, "steps", f"{where}.limits", 1, 25_000)
            steps = int(value) if value is not None else steps
        else:
            check.errors.append(f"{where}.limits must be a table, got {show(limits)}")
        if script is not None and script != raw.get("name"):
            check.warnings.append(
                f'{where} "{binding}" names the Worker "{script}": doemu runs one Worker per '
                "process, so its workflow class must be in this Worker's main module"
            )
        if name is not None and name in names:
            check.errors.append(f'{where}.name: the workflow "{name}" is defined twice')
            continue
        if binding is None or name is None or class_name is None:
            continue
        names.add(name)
        out.append(WorkflowBinding(binding, name, class_name, implicit, steps))
    return out


def _queues(check: Checker, value: Any) -> tuple[list[QueueProducer], list[QueueConsumer]]:
    if value is None:
        return [], []
    table = check.table(value, "queues")
    if table is None:
        return [], []
    warning = unexpected("queues", table, _QUEUES_KEYS)
    if warning:
        check.warnings.append(warning)
    producers = []
    for where, item in _tables(check, table.get("producers"), "queues.producers", _PRODUCER_KEYS):
        binding = _binding(check, item, where)
        queue = _name(check, item.get("queue"), f"{where}.queue")
        delay = _number(check, item, "delivery_delay", where, 0, 43_200)
        if binding is not None and queue is not None:
            producers.append(QueueProducer(binding, queue, int(delay or 0)))
    consumers: list[QueueConsumer] = []
    for where, item in _tables(check, table.get("consumers"), "queues.consumers", _CONSUMER_KEYS):
        queue = _name(check, item.get("queue"), f"{where}.queue")
        size = _number(check, item, "max_batch_size", where, 1, 100)
        timeout = _number(check, item, "max_batch_timeout", where, 0, 60)
        retries = _number(check, item, "max_retries", where, 0, 100)
        delay = _number(check, item, "retry_delay", where, 0, 43_200)
        concurrency = _number(check, item, "max_concurrency", where, 1, 250)
        dlq = item.get("dead_letter_queue")
        if dlq is not None:
            dlq = _name(check, dlq, f"{where}.dead_letter_queue")
        if item.get("type") not in (None, "worker"):
            check.warnings.append(
                f"{where}.type {show(item.get('type'))}: pull consumers are not emulated; "
                "doemu delivers to the Worker's queue() handler"
            )
        if queue is None:
            continue
        if any(c.queue == queue for c in consumers):
            check.errors.append(f'{where}.queue: the queue "{queue}" has two consumers')
            continue
        if dlq is not None and dlq == queue:
            check.errors.append(f"{where}.dead_letter_queue cannot be the queue itself")
            continue
        consumers.append(
            QueueConsumer(
                queue,
                int(size) if size is not None else 10,
                float(timeout) if timeout is not None else 5.0,
                int(retries) if retries is not None else 3,
                int(delay or 0),
                dlq,
                int(concurrency) if concurrency is not None else None,
            )
        )
    return producers, consumers


def _ai(check: Checker, value: Any) -> AiBinding | None:
    if value is None:
        return None
    table = check.table(value, "ai")
    if table is None:
        return None
    warning = unexpected("ai", table, _AI_KEYS)
    if warning:
        check.warnings.append(warning)
    binding = _binding(check, table, "ai")
    return None if binding is None else AiBinding(binding)
