"""``step``: what a Python ``WorkflowEntrypoint.run(event, step)`` receives.

The names and call shapes are those of the Python SDK's step wrapper (workers-runtime-sdk
1.9.5): ``step.do`` is a decorator factory; the decorated function becomes an awaitable step
whose parameters are its dependencies, resolved before it runs. Two forms exist and the
compatibility date chooses (``python_workflows_implicit_dependencies``, on from 2026-02-25):

* implicit: ``@step.do(name=None, *, concurrent=False, config=None)``; each parameter names an
  earlier step function (its result is passed), or is ``ctx`` (the step's context:
  ``attempt``, ``step``, ``config``); the name defaults to the function's;
* legacy: ``@step.do(name, depends=None, concurrent=False, config=None)``; ``depends`` lists
  the step functions, in the order of the non-``ctx`` parameters.

A dependency runs once per replay (its result is memoized); ``concurrent=True`` resolves the
dependencies together. ``sleep(name, duration)``, ``sleep_until(name, timestamp)`` and
``wait_for_event(name, event_type, /, timeout="24 hours")`` go to the engine
(:class:`~doemu.bindings.workflows.runner.Runner`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .durations import DEFAULT_EVENT_TIMEOUT
from .runner import Runner

__all__ = ["WorkflowStep"]


class WorkflowStep:
    """The ``step`` of one replay of ``run()`` (see the module docstring)."""

    def __init__(self, runner: Runner, *, implicit: bool) -> None:
        self._runner = runner
        self._results: dict[Callable[..., Any], Any] = {}
        self._in_flight: dict[Callable[..., Any], asyncio.Future[Any]] = {}
        #: The step functions declared so far, by step name (the implicit form's lookup).
        self.step_closures: dict[str, Callable[..., Any]] = {}
        self.do: Callable[..., Callable[[Callable[..., Any]], Callable[[], Awaitable[Any]]]]
        self.do = self._do_implicit if implicit else self._do_legacy

    def _do_legacy(
        self,
        name: str,
        depends: list[Any] | None = None,
        concurrent: bool = False,
        config: Any = None,
    ) -> Callable[[Callable[..., Any]], Callable[[], Awaitable[Any]]]:
        return self._decorator(name, depends, concurrent, config, implicit=False)

    def _do_implicit(
        self, name: str | None = None, *, concurrent: bool = False, config: Any = None
    ) -> Callable[[Callable[..., Any]], Callable[[], Awaitable[Any]]]:
        return self._decorator(name, None, concurrent, config, implicit=True)

    def _decorator(
        self,
        name: str | None,
        depends: list[Any] | None,
        concurrent: bool,
        config: Any,
        *,
        implicit: bool,
    ) -> Callable[[Callable[..., Any]], Callable[[], Awaitable[Any]]]:
        def decorate(func: Callable[..., Any]) -> Callable[[], Awaitable[Any]]:
            step_name = func.__name__ if name is None else name

            async def step_function() -> Any:
                sources = self._sources(func, depends, implicit)
                if concurrent:
                    values = list(await asyncio.gather(*(self._resolve(s) for s in sources)))
                else:
                    values = [await self._resolve(s) for s in sources]
                return await self._run(step_function, step_name, config, func, values)

            step_function._step_name = step_name  # type: ignore[attr-defined]
            self.step_closures[step_name] = step_function
            return step_function

        return decorate

    def _sources(
        self, func: Callable[..., Any], depends: list[Any] | None, implicit: bool
    ) -> list[Any]:
        """Per parameter: the step function that provides it, or the ``ctx`` parameter."""
        params = list(inspect.signature(func).parameters.values())
        if implicit:
            out: list[Any] = []
            for p in params:
                if p.name in self.step_closures:
                    out.append(self.step_closures[p.name])
                elif p.name == "ctx":
                    out.append(p)
                else:
                    raise TypeError(f"Received unexpected parameter {p.name}")
            return out
        others = [p for p in params if p.name != "ctx"]
        if depends is None and others:
            raise TypeError(
                f"Step has {len(others)} non-ctx parameter(s) but no 'depends' list provided"
            )
        if depends is not None and len(depends) != len(others):
            raise TypeError(
                f"Step declares {len(others)} non-ctx parameter(s) but 'depends' has "
                f"{len(depends)} item(s)"
            )
        pending = list(depends or [])
        out = []
        for p in params:
            if p.name == "ctx":
                out.append(p)
                continue
            dep = pending.pop(0)
            if not hasattr(dep, "_step_name"):
                raise TypeError(
                    f"'depends' entry for parameter {p.name!r} is not a function decorated "
                    "with step.do"
                )
            out.append(dep)
        return out

    async def _resolve(self, source: Any) -> Any:
        if isinstance(source, inspect.Parameter):
            return source  # ctx: filled in when the step runs
        if source in self._results:
            return self._results[source]
        if source in self._in_flight:
            return await self._in_flight[source]
        return await source()

    async def _run(
        self,
        key: Callable[..., Any],
        name: str,
        config: Any,
        func: Callable[..., Any],
        values: list[Any],
    ) -> Any:
        async def callback(context: Any) -> Any:
            args = [context if isinstance(v, inspect.Parameter) else v for v in values]
            result = func(*args)
            if inspect.isawaitable(result):
                result = await result
            return result

        future = asyncio.ensure_future(self._runner.do(name, config, callback))
        self._in_flight[key] = future
        try:
            result = await future
            self._results[key] = result
        finally:
            self._in_flight.pop(key, None)
        return result

    def sleep(self, name: Any, duration: Any) -> Awaitable[None]:
        """Pause the run for ``duration`` (ms, or ``"10 seconds"``), durably."""
        return self._runner.sleep(name, duration)

    def sleep_until(self, name: Any, timestamp: Any) -> Awaitable[None]:
        """Pause the run until ``timestamp`` (a ``datetime``, epoch ms or an ISO string)."""
        return self._runner.sleep_until(name, timestamp)

    async def wait_for_event(
        self,
        name: Any,
        event_type: Any,
        /,
        timeout: Any = DEFAULT_EVENT_TIMEOUT,  # noqa: ASYNC109 - the SDK's signature
    ) -> Any:
        """Wait for an event of ``event_type`` sent to this instance; its ``{payload, type,
        timestamp}``. A ``WorkflowTimeoutError`` when none came within ``timeout``."""
        return await self._runner.wait_for_event(name, event_type, timeout)
