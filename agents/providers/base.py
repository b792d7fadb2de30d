"""The seam between the model loop and a provider's wire format.

An adapter turns one model request into a stream of :data:`ProviderEvent` values — text
deltas, completed tool calls, the provider's handle for the request, the finish with its
usage — and says which recovery :attr:`Provider.strategy` it offers when that stream is cut:

* ``"retrieve"`` — the provider kept generating and stored the response (OpenAI Responses in
  background mode): recovery re-attaches after the last event it persisted; nothing is paid
  twice.
* ``"prefill"`` — the provider continues from a partial assistant message given as the last
  message (Anthropic Messages): one more request, re-reading the partial, no repeated output.
* ``"retry"`` — neither: the request runs again, with the partial as the last assistant
  message (OpenAI-compatible chat completions: the AI SDK's continuation prompt, plus an
  instruction to continue when ``prefill_instruction`` asks for one), else from scratch.

Adapters speak HTTP through ``workers.fetch`` (injectable), so the same code runs under doemu
and in a Cloudflare Python Worker, where the official SDKs' HTTP clients do not.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .errors import ProviderError, ProviderHTTPError, ProviderStreamError, retry_after_seconds
from .output import OutputSchema
from .sse import SseEvent, SseEventDecoder
from .transcript import Item

__all__ = [
    "Fetch",
    "Finished",
    "ModelCall",
    "Provider",
    "ProviderEvent",
    "Started",
    "Strategy",
    "TextDelta",
    "ToolCallDone",
    "ToolSpec",
    "Usage",
    "post_sse",
    "tool_arguments",
]

Strategy = Literal["retrieve", "prefill", "retry"]
Fetch = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Usage:
    """What the provider reported it billed for one request."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Started:
    """The provider accepted the request: its handle (e.g. ``{"responseId": …}``), which the
    loop stores durably before it can be needed, and the input tokens when the provider says
    them up front (Anthropic's ``message_start``), recorded at once: a request cut later was
    still billed for them."""

    handle: Mapping[str, Any]
    input_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Text for block ``block``; ``seq`` is the provider's event sequence number, if any."""

    block: str
    delta: str
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCallDone:
    """A complete tool call: its id, tool name and parsed arguments."""

    call_id: str
    name: str
    args: dict[str, Any]
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """The request ended: ``reason`` in the AI SDK's words, and the usage when reported."""

    reason: str
    usage: Usage | None = None


ProviderEvent = Started | TextDelta | ToolCallDone | Finished


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One request to the model.

    ``items`` is the conversation (see :mod:`agents.providers.transcript`); when it ends with
    assistant text, that text is a partial answer to continue (a prefill). ``resume`` is the
    handle of a stored response to re-attach to, with ``after`` the last sequence number
    already persisted. ``idempotency_key`` is the operation id of the request. ``output``: the
    answer must be JSON in this shape (the provider's structured-output mode).
    """

    items: Sequence[Item]
    system: str | None = None
    tools: Sequence[ToolSpec] = ()
    idempotency_key: str | None = None
    resume: Mapping[str, Any] | None = None
    output: OutputSchema | None = None


class Provider(Protocol):
    """What the model loop needs of an adapter."""

    #: Short stable name, used in operation kinds and usage entries (``"openai-responses"``).
    name: str
    model: str
    strategy: Strategy
    #: Whether the upstream collapses two requests with one idempotency key.
    honours_idempotency: bool

    def stream(self, call: ModelCall) -> AsyncIterator[ProviderEvent]:
        """The events of ``call``; closing the iterator closes the upstream connection."""
        ...


def tool_arguments(provider: str, name: str, raw: str) -> dict[str, Any]:
    """A tool call's arguments as the provider sent them (JSON text), as an object; a cut-off
    or non-object value is refused naming the provider and the tool (a clear turn error)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError as exc:
        raise ProviderStreamError(
            provider,
            f"the arguments of tool call {name!r} are not valid JSON ({exc}): {raw[:200]!r}",
        ) from None
    if not isinstance(value, dict):
        raise ProviderStreamError(
            provider, f"the arguments of tool call {name!r} are not a JSON object: {raw[:200]!r}"
        )
    return value


def _error_message(text: str) -> tuple[str, str | None]:
    """The provider's own message and error type from an error body (OpenAI's and
    Anthropic's shapes), or the raw text."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:500] or "(empty body)", None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code")
        return str(error.get("message") or text), str(kind) if kind else None
    return text.strip()[:500], None


def _as_bytes(piece: Any) -> bytes:
    if isinstance(piece, bytes | bytearray | memoryview):
        return bytes(piece)
    to_bytes = getattr(piece, "to_bytes", None)  # a JS Uint8Array in a Worker
    if to_bytes is not None:
        return bytes(to_bytes())
    return piece.encode() if isinstance(piece, str) else bytes(piece)


async def post_sse(
    fetch: Fetch,
    provider: str,
    url: str,
    headers: Mapping[str, str],
    body: Any = None,
    *,
    method: str = "POST",
) -> AsyncGenerator[SseEvent, None]:
    """Send a request and yield the SSE events of its answer.

    An HTTP error raises :class:`ProviderHTTPError` with the provider's message; a body that
    ends without the provider's terminal event is for the caller to notice. Closing this
    generator early cancels the response body, which closes the upstream connection — a
    watchdog's abort must not leave the provider generating for nobody.
    """
    options: dict[str, Any] = {"method": method, "headers": dict(headers)}
    if body is not None:
        options["body"] = json.dumps(body)
    response = await fetch(url, **options)
    if not response.ok:
        message, kind = _error_message(await response.text())
        retry_after = retry_after_seconds(response.headers.get("retry-after"))
        raise ProviderHTTPError(
            provider, int(response.status), message, kind, retry_after=retry_after
        )
    stream = response.body
    if stream is None:
        raise ProviderStreamError(provider, "the response has no body")
    decoder = SseEventDecoder()
    iterator = stream.__aiter__()
    finished = False
    try:
        while True:
            try:
                piece = await iterator.__anext__()
            except StopAsyncIteration:
                finished = True
                break
            except (ProviderError, asyncio.CancelledError):
                raise
            except Exception as exc:  # the connection dropped mid-reply: transient
                raise ProviderStreamError(
                    provider, f"the connection dropped mid-reply: {exc}", transient=True
                ) from exc
            for event in decoder.feed(_as_bytes(piece)):
                yield event
        decoder.finish()
    finally:
        if not finished:
            cancel = getattr(stream, "cancel", None)
            if cancel is not None:
                try:
                    result = cancel()
                    if hasattr(result, "__await__"):
                        await result
                except Exception:
                    pass
