"""The configured OpenAI-compatible endpoint: requests on httpx, streams read with httpx-sse.

Each call opens its own client and closes it when its answer (or its stream) ends: a stream may
outlive the request that started it, be read on another event loop after a harness restart, or
be dropped half-read, and a per-call client is closed in every one of those cases. Every
failure becomes an :class:`~.errors.InferenceUpstreamError` naming the Workers AI model, the
endpoint's model and URL: an unreachable endpoint, an HTTP error (with the endpoint's own
message, the key never echoed), an answer that is not what the API promises, a stream cut
before ``[DONE]``. Nothing from httpx reaches user code.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import InferenceUpstreamError

if TYPE_CHECKING:  # imported at the first call: a serving process starts without httpx (~60 ms)
    import httpx
    from httpx_sse import EventSource

__all__ = ["CONNECT_TIMEOUT_S", "Endpoint", "Target"]

#: Connecting may take this long; reading has no limit (a model may think for minutes).
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Target:
    """One call: the Workers AI model asked for, the endpoint's model and the URL."""

    model: str
    endpoint_model: str
    url: str

    def __str__(self) -> str:
        return f"{self.model} (served by {self.endpoint_model!r} at {self.url})"


def _message(text: str) -> str:
    """The endpoint's own words from an error body (OpenAI's shape), else the text."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:500] or "(empty body)"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return text.strip()[:500]


class Endpoint:
    """Calls to ``base_url``; ``api_key()`` gives the key at call time (``None``: none sent),
    ``on_status`` hears each answer's HTTP status (``env.AI.lastRequestHttpStatusCode``)."""

    def __init__(
        self,
        base_url: str,
        api_key: Callable[[], str | None],
        on_status: Callable[[int | None], None],
    ) -> None:
        self.base_url = base_url
        self._api_key = api_key
        self._on_status = on_status

    def target(self, model: str, endpoint_model: str, path: str) -> Target:
        return Target(model, endpoint_model, f"{self.base_url}{path}")

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        key = self._api_key()
        if key:
            headers["authorization"] = f"Bearer {key}"
        return headers

    def _redacted(self, text: str) -> str:
        key = self._api_key()
        return text.replace(key, "(DOEMU_AI_API_KEY)") if key else text

    def _client(self) -> httpx.AsyncClient:
        import httpx

        timeout = httpx.Timeout(None, connect=CONNECT_TIMEOUT_S)
        return httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    def _unreachable(self, target: Target, exc: Exception) -> InferenceUpstreamError:
        self._on_status(None)
        reason = str(exc) or type(exc).__name__
        return InferenceUpstreamError(
            f"doemu could not reach the AI endpoint for {target}: {reason}. Is the model "
            "server running? ([tool.doemu.ai] base_url in pyproject.toml)"
        )

    async def _refused(self, target: Target, response: httpx.Response) -> InferenceUpstreamError:
        await response.aread()
        text = self._redacted(_message(response.text))
        return InferenceUpstreamError(
            f"{response.status_code}: {text} (the AI endpoint refused {target})",
            status=response.status_code,
        )

    async def post_json(self, target: Target, body: Mapping[str, Any]) -> Any:
        """POST ``body``; the JSON answer (an error for anything else)."""
        import httpx

        async with self._client() as client:
            try:
                response = await client.post(target.url, json=body, headers=self._headers())
            except httpx.HTTPError as exc:
                raise self._unreachable(target, exc) from None
            self._on_status(response.status_code)
            if response.status_code >= 400:
                raise await self._refused(target, response)
            try:
                return response.json()
            except ValueError:
                raise InferenceUpstreamError(
                    f"the AI endpoint's answer for {target} is not JSON: {response.text[:200]!r}",
                    status=response.status_code,
                ) from None

    async def open_stream(
        self, target: Target, body: Mapping[str, Any]
    ) -> tuple[AsyncIterator[Any], Callable[[], Any]]:
        """POST ``body`` for a stream: once the endpoint has answered 200, its events' parsed
        ``data`` (``"[DONE]"`` as is) and a function that closes the connection. Refusals and
        an unreachable endpoint raise here, before any event."""
        import httpx
        from httpx_sse import EventSource

        client = self._client()
        request = client.build_request("POST", target.url, json=body, headers=self._headers())
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            await client.aclose()
            raise self._unreachable(target, exc) from None
        self._on_status(response.status_code)
        if response.status_code >= 400:
            try:
                raise await self._refused(target, response)
            finally:
                await response.aclose()
                await client.aclose()

        async def close() -> None:
            await response.aclose()
            await client.aclose()

        return self._events(target, EventSource(response), close), close

    async def _events(
        self, target: Target, source: EventSource, close: Callable[[], Any]
    ) -> AsyncIterator[Any]:
        import httpx
        from httpx_sse import SSEError

        done = False
        try:
            async for event in source.aiter_sse():
                if event.data.strip() == "[DONE]":
                    done = True
                    yield "[DONE]"
                    return
                try:
                    yield json.loads(event.data)
                except ValueError:
                    continue  # a comment-like line some servers send: not an event of the API
        except SSEError as exc:
            raise InferenceUpstreamError(
                f"the AI endpoint's answer for {target} is not a stream: {exc}"
            ) from None
        except httpx.HTTPError as exc:
            raise InferenceUpstreamError(
                f"the stream from the AI endpoint for {target} was cut mid-reply: "
                f"{str(exc) or type(exc).__name__}"
            ) from None
        finally:
            await close()
        if not done:
            raise InferenceUpstreamError(
                f"the stream from the AI endpoint for {target} ended before [DONE]"
            )
