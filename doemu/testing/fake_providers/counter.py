""":class:`CounterServer`: a costly side effect over HTTP, for exactly-once (ledger) tests.

An agent that charges a card, sends an e-mail or calls a paid API must do it once even when its
process dies in the middle; the test needs something outside the process that counts. Each
``POST {url}/increment`` is one increment, answered ``{"count": n, "idempotency_key": key}``.
With ``honour_idempotency`` a repeated ``Idempotency-Key`` gets the first answer again and does
not increment, as a well-behaved payment API would; without it every request increments, which
is what shows a duplicate. ``hold_next()`` makes the next request increment and then wait for
``release()`` before answering: the window in which a test kills the caller, the effect done and
its answer not yet seen.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .gate import Gate
from .server import LoopbackServer, Served

__all__ = ["CounterServer"]


class CounterServer(Served):
    """Counts ``POST {url}/increment`` on its own loopback server: ``with CounterServer() as c``."""

    def __init__(self, honour_idempotency: bool = True) -> None:
        self.honour_idempotency = honour_idempotency
        self._lock = threading.Lock()
        self._count = 0
        self._calls = 0
        self._answers: dict[str, dict[str, Any]] = {}
        self._bodies: list[Any] = []
        self._hold_next = False
        self._gate = Gate("a held increment")
        app = Starlette(routes=[Route("/increment", self._increment, methods=["POST"])])
        self._server = LoopbackServer(app, name="counter-server")

    def _closing(self) -> None:
        self._gate.clear()

    @property
    def count(self) -> int:
        """How many increments happened (the side effect, as the outside world saw it)."""
        with self._lock:
            return self._count

    @property
    def calls(self) -> int:
        """How many requests arrived (replays of an idempotency key included)."""
        with self._lock:
            return self._calls

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies received, in order (``None`` for an empty or non-JSON body)."""
        with self._lock:
            return list(self._bodies)

    def hold_next(self) -> None:
        """The next request increments, then its answer waits for :meth:`release`."""
        with self._lock:
            self._hold_next = True

    def release(self) -> int:
        """Let the held answer go (kept as a permit if none is held yet)."""
        return self._gate.release()

    def wait_held(self, timeout: float = 10.0) -> None:
        """Block until an answer is held."""
        self._gate.wait_held(timeout)

    async def await_held(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """:meth:`wait_held` for async tests: polls with ``asyncio.sleep``."""
        await self._gate.await_held(timeout)

    def reset(self) -> None:
        """Back to zero: counts, remembered keys and bodies, a pending hold."""
        with self._lock:
            self._count = self._calls = 0
            self._answers.clear()
            self._bodies.clear()
            self._hold_next = False
        self._gate.clear()

    async def _increment(self, request: Request) -> JSONResponse:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        key = request.headers.get("idempotency-key")
        with self._lock:
            self._calls += 1
            self._bodies.append(body)
            if self.honour_idempotency and key is not None and key in self._answers:
                return JSONResponse(self._answers[key])
            self._count += 1
            answer = {"count": self._count, "idempotency_key": key}
            if self.honour_idempotency and key is not None:
                self._answers[key] = answer
            hold, self._hold_next = self._hold_next, False
        if hold:
            await self._gate.hold()
        return JSONResponse(answer)
