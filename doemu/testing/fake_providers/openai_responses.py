"""OpenAI Responses: ``POST /v1/responses``, ``GET /v1/responses/{id}``, ``POST …/{id}/cancel``.

The point of this fake is background mode, where a durable agent's resumption logic lives:

* ``background: true`` (needs ``store`` not false) runs the generation as a server-side task.
  The create request's stream relays it live; if that connection drops (the client died, or
  ``die_after`` cut it) the generation goes on.
  ``GET /v1/responses/{id}?stream=true&starting_after=N`` replays the stored events with
  ``sequence_number > N`` and follows the live ones to the end; without ``stream`` it returns
  the response object with its current ``status`` and output.
  Without background, a client that goes away stops the generation (status ``incomplete``).
* ``Idempotency-Key`` on create: a second create with the same key starts nothing and bills
  nothing; it answers with the first response (streamed from its first event when
  ``stream: true``). It still counts in ``requests["responses.create"]``.
* Retrieval and cancellation never bill. An unknown id is a 404 with OpenAI's error body. Each
  streamed retrieval is kept in :attr:`~.script.Stats.retrievals`: its ``starting_after`` and
  the sequence number of every event it was sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .engine import Run, launch
from .errors import openai_error
from .intake import begin, lower_headers, openai_authorized, openai_intake
from .relay import EventStream, FinalJSON
from .responses_format import ResponseState
from .state import Ledger, Record
from .tokens import responses_input_tokens

__all__ = ["ResponsesApi"]


@dataclass
class _Stored:
    state: ResponseState
    run: Run


class ResponsesApi:
    """The routes and the stored responses (touched on the server's loop only)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.stored: dict[str, _Stored] = {}
        self.by_key: dict[str, _Stored] = {}

    def routes(self) -> list[Route]:
        return [
            Route("/v1/responses", self.create, methods=["POST"]),
            Route("/v1/responses/{response_id}", self.retrieve, methods=["GET"]),
            Route("/v1/responses/{response_id}/cancel", self.cancel, methods=["POST"]),
        ]

    def forget(self) -> None:
        """Drop every stored response, stopping the background ones still generating."""
        for stored in self.stored.values():
            stored.run.cancel()
        self.stored.clear()
        self.by_key.clear()

    async def create(self, request: Request) -> Response:
        body = await openai_intake(
            request, self.ledger, "responses", "responses.create", ("model", "input")
        )
        if isinstance(body, Response):
            return body
        headers = lower_headers(request)
        background = body.get("background") is True
        store = body.get("store") is not False
        stream = body.get("stream") is True
        if background and not store:
            return openai_error(
                400, "Background mode requires 'store' to be true.", param="background"
            )
        key = headers.get("idempotency-key")
        if key is not None and key in self.by_key:
            return self._replay(self.by_key[key], stream)
        input_tokens = responses_input_tokens(body)
        state = ResponseState(body, background=background, input_tokens=input_tokens)
        record = Record(state.id, "responses", body, headers, key)
        reply = begin(self.ledger, record, input_tokens, openai_error)
        if isinstance(reply, Response):
            return reply
        run = launch(self.ledger, record, reply, state, detached=background)
        stored = _Stored(state, run)
        if store:
            self.stored[state.id] = stored
        if key is not None:
            self.by_key[key] = stored
        if stream:
            return EventStream(run, die=True, on_disconnect=None if background else run.cancel)
        if background:
            return JSONResponse(state.obj())
        return FinalJSON(run, state.obj, die=True, on_disconnect=run.cancel)

    def _replay(self, stored: _Stored, stream: bool) -> Response:
        if stream:
            return EventStream(stored.run)
        if stored.state.background:
            return JSONResponse(stored.state.obj())
        return FinalJSON(stored.run, stored.state.obj)

    def _find(self, request: Request, route: str) -> _Stored | Response:
        self.ledger.count(route)
        refused = openai_authorized(request, self.ledger)
        if refused is not None:
            return refused
        response_id = request.path_params["response_id"]
        stored = self.stored.get(response_id)
        if stored is None:
            return openai_error(404, f"Response with id '{response_id}' not found.")
        return stored

    async def retrieve(self, request: Request) -> Response:
        stored = self._find(request, "responses.retrieve")
        if isinstance(stored, Response):
            return stored
        if request.query_params.get("stream", "false").lower() != "true":
            return JSONResponse(stored.state.obj())
        after = request.query_params.get("starting_after")
        try:
            start = int(after if after is not None else -1) + 1
        except ValueError:
            return openai_error(
                400, f"Invalid 'starting_after': {after!r}.", param="starting_after"
            )
        record = self.ledger.retrieval(
            request.path_params["response_id"], None if after is None else start - 1
        )
        return EventStream(
            stored.run,
            start=max(start, 0),
            on_sent=lambda position: self.ledger.retrieved(record, position),
        )

    async def cancel(self, request: Request) -> Response:
        stored = self._find(request, "responses.cancel")
        if isinstance(stored, Response):
            return stored
        if not stored.state.background:
            return openai_error(
                400, "Only responses created with background=true can be cancelled."
            )
        stored.run.cancel("cancelled")
        await stored.run.done()
        return JSONResponse(stored.state.obj())
