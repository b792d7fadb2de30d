"""OpenAI embeddings: ``POST /v1/embeddings``, for the Workers AI binding's embedding models.

Not part of the scripted generations (an embedding is not a reply: nothing streams, nothing is
cut): each text gets a deterministic unit vector of ``dimensions`` floats (default
:data:`DIMENSIONS`) derived from its SHA-256, so equal texts embed equally and a test can
compute what it expects with :func:`embedding`. The answer is OpenAI's ``list`` of
``embedding`` objects with its ``usage``; the key and the body are refused as OpenAI refuses
them. :attr:`EmbeddingsApi.requests` keeps every parsed body, in order.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .errors import openai_error
from .intake import openai_authorized
from .state import Ledger

__all__ = ["DIMENSIONS", "EmbeddingsApi", "embedding"]

#: The width of a vector when the request does not ask for ``dimensions``.
DIMENSIONS = 8


def embedding(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The fake's vector for ``text``: unit length, the same for the same text."""
    digest = b""
    counter = 0
    while len(digest) < dimensions:
        digest += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    raw = [byte - 127.5 for byte in digest[:dimensions]]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


class EmbeddingsApi:
    """The route and what it received (see the module docstring)."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self.requests: list[dict[str, Any]] = []

    def route(self) -> Route:
        return Route("/v1/embeddings", self._create, methods=["POST"])

    async def _create(self, request: Request) -> Response:
        refused = openai_authorized(request, self._ledger)
        if refused is not None:
            return refused
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return openai_error(400, "We could not parse the JSON body of your request.")
        self.requests.append(body)
        for name in ("model", "input"):
            if body.get(name) is None:
                return openai_error(400, f"Missing required parameter: '{name}'.", param=name)
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return openai_error(400, "'input' must be a string or a list of strings", param="input")
        width = body.get("dimensions", DIMENSIONS)
        if not isinstance(width, int) or isinstance(width, bool) or not 1 <= width <= 4096:
            return openai_error(400, "'dimensions' must be an integer from 1 to 4096")
        tokens = sum(len(text.split()) for text in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": embedding(text, width)}
                    for i, text in enumerate(texts)
                ],
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
