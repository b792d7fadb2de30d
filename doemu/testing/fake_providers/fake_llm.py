""":class:`FakeLLM`: OpenAI Responses, OpenAI chat completions and Anthropic Messages on one port.

Adapters are tested against these servers, never against mocks of the SDKs: the fakes speak the
real wire formats (the tests drive them with the official ``openai`` and ``anthropic`` clients),
are scripted per generation (:class:`~.script.Reply`), and keep the books a test asserts on
(requests served, generations, tokens billed; see :mod:`.tokens` for the counting rules).

The server runs on 127.0.0.1 in a daemon thread of the test process, so it outlives any
``doemu dev`` subprocess that calls it: kill and restart that as often as the test needs.
``python -m doemu.testing.fake_providers`` serves one in the foreground instead (see its
``--help``), for running an example by hand with no API key.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.types import ASGIApp

from .anthropic import messages_route
from .embeddings import EmbeddingsApi
from .gate import apoll, poll
from .openai_chat import chat_route
from .openai_responses import ResponsesApi
from .relay import quiet_stream_cuts
from .script import Api, Reply, Responder, Stats
from .sdk_types import preload
from .server import LoopbackServer, Served
from .state import Ledger

__all__ = ["FakeLLM"]


class FakeLLM(Served):
    """The fake providers' server: script replies, point an SDK at :attr:`url`, read :attr:`stats`.

    ``url`` is ``http://127.0.0.1:PORT``: OpenAI clients use ``base_url=f"{llm.url}/v1"``,
    Anthropic clients ``base_url=llm.url``; both with ``api_key`` (any other key gets the
    provider's 401). ``with FakeLLM() as llm`` starts and stops it (or ``start()``/``close()``).

    ``responder(api, request_body) -> Reply | None`` answers the generations nothing was scripted
    for (see :data:`~.script.Responder`); scripted replies still come first.
    """

    def __init__(self, api_key: str = "test-key", *, responder: Responder | None = None) -> None:
        self.api_key = api_key
        self._ledger = Ledger(api_key, responder=responder)
        self._responses = ResponsesApi(self._ledger)
        #: ``POST /v1/embeddings`` (see :mod:`.embeddings`): deterministic vectors, its requests.
        self.embeddings = EmbeddingsApi(self._ledger)
        routes = [
            *self._responses.routes(),
            chat_route(self._ledger),
            messages_route(self._ledger),
            self.embeddings.route(),
        ]
        self._app = Starlette(routes=routes)
        self._server = LoopbackServer(self._app, name="fake-llm", on_stop=self._responses.forget)

    def _starting(self) -> None:
        quiet_stream_cuts()
        preload()  # the SDK types that check request bodies

    def _closing(self) -> None:
        self._ledger.gate.clear()

    # -- the script -----------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue replies (FIFO): each new generation takes the next; then ``Reply(Text("ok"))``."""
        self._ledger.script(replies)

    @property
    def responder(self) -> Responder | None:
        """What answers when the queue is empty; settable (``None``: :data:`DEFAULT_REPLY`).
        :meth:`reset` keeps it: it is configuration, not state."""
        return self._ledger.responder

    @responder.setter
    def responder(self, responder: Responder | None) -> None:
        self._ledger.responder = responder

    @property
    def app(self) -> ASGIApp:
        """The ASGI app itself, to serve on an address of your choosing (the CLI does: the
        loopback thread of :meth:`start` always takes a free port of 127.0.0.1)."""
        return self._app

    @property
    def queued(self) -> int:
        """How many scripted replies no generation has taken yet."""
        return self._ledger.queued

    def release(self) -> int:
        """Let every held generation go on (kept as a permit if none is held yet)."""
        return self._ledger.gate.release()

    def wait_held(self, timeout: float = 10.0) -> None:
        """Block until a generation is held (``hold_after``); :class:`TimeoutError` otherwise."""
        self._ledger.gate.wait_held(timeout)

    async def await_held(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """:meth:`wait_held` for async tests: polls with ``asyncio.sleep``."""
        await self._ledger.gate.await_held(timeout)

    def reset(self) -> None:
        """Forget the queue, the stats and every stored response (background ones stop)."""
        self._ledger.reset()
        self._server.call(self._responses.forget)

    # -- the books ------------------------------------------------------------------------------

    @property
    def stats(self) -> Stats:
        """A snapshot: requests per route, generations, billed tokens."""
        return self._ledger.stats()

    def requests(self, api: Api) -> list[dict[str, Any]]:
        """Every parsed JSON body received for ``api`` (``"responses"``, ``"chat"`` or
        ``"messages"``), in order, including those that started no generation."""
        return self._ledger.requests(api)

    def wait_for(self, predicate: Callable[[Stats], object], timeout: float = 10.0) -> Stats:
        """Poll :attr:`stats` until ``predicate(stats)`` is truthy; return that snapshot."""
        return poll(lambda: _matching(self.stats, predicate), timeout, _describe(predicate))

    async def await_for(
        self,
        predicate: Callable[[Stats], object],
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> Stats:
        """:meth:`wait_for` for async tests: polls with ``asyncio.sleep``."""
        return await apoll(lambda: _matching(self.stats, predicate), timeout, _describe(predicate))


def _matching(stats: Stats, predicate: Callable[[Stats], object]) -> Stats | None:
    return stats if predicate(stats) else None


def _describe(predicate: Callable[[Stats], object]) -> str:
    """The predicate's name, or a lambda's source line, for the timeout's message."""
    name = getattr(predicate, "__qualname__", None) or repr(predicate)
    if "<lambda>" in name:
        try:
            name = inspect.getsource(predicate).strip()
        except (OSError, TypeError):
            pass
    return f"stats matching {name}"
