"""``env.AI``: ``run(model, inputs, options?)`` served by the endpoint of ``[tool.doemu.ai]``.

As through the Python SDK, arguments cross the JS boundary (keywords become one trailing
object: ``run(model, messages=[...])`` is ``run(model, {messages: [...]})``) and results come
back as JS objects do (``JsDict``, read as ``result["response"]`` or ``result.response``).
``stream: True`` resolves, once the endpoint has accepted the request, to a ``ReadableStream``
of Workers AI's server-sent events, which a Worker can return as a ``Response`` body or read
itself. The promise rejects with the binding's JS errors (:mod:`.errors`); without an endpoint
configured, every call rejects with a message that says how to configure one.

``lastRequestHttpStatusCode`` is the last answer's HTTP status, as on Cloudflare. ``options``
(``gateway``, ``prefix``, ``extraHeaders``…) are accepted and have no local meaning; AI
Gateway, ``returnRawResponse``, ``models()`` and ``toMarkdown()`` are not emulated.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import ContextVar
from typing import Any

from ...compat.readable import stream_from_iterator
from ...config.ai import AI_API_KEY_VAR, AiSettings
from ..boundary import call, js_arguments, js_string, to_python
from ..errors import BindingError
from .calls import AiCall, CallLog
from .errors import AiNotConfiguredError, InferenceUpstreamError
from .shapes import (
    StreamTranslator,
    chat_body,
    embeddings_body,
    embeddings_output,
    sse_event,
    task_of,
    text_output,
)
from .upstream import Endpoint

__all__ = ["Ai", "api_key_from", "not_configured_text"]

#: The record of the ``run()`` the current task is making (the endpoint reports its status).
_current: ContextVar[AiCall | None] = ContextVar("doemu_ai_call", default=None)


def not_configured_text(binding: str, model: str) -> str:
    """Why ``env.<binding>.run(model)`` cannot run, and how to make it run."""
    return (
        f"env.{binding}.run({model!r}): Workers AI's models run only on Cloudflare and cannot "
        "run locally. doemu serves env.AI from an OpenAI-compatible endpoint you choose (a "
        "local model server such as Ollama, llama.cpp or vLLM, a gateway, or "
        "`python -m doemu.testing.fake_providers`): add to pyproject.toml, next to the "
        'wrangler file, [tool.doemu.ai] base_url = "http://127.0.0.1:11434/v1" with '
        'default_model = "<the endpoint\'s model>" (or a [tool.doemu.ai.models] table: '
        f'"{model}" = "<the endpoint\'s model>"), and put the endpoint\'s key, if it needs '
        f"one, in .dev.vars as {AI_API_KEY_VAR}"
    )


class Ai:
    """The Workers AI binding (see the module docstring)."""

    def __init__(
        self, binding: str, settings: AiSettings | None, api_key: Callable[[], str | None]
    ) -> None:
        self._binding = binding
        self.settings = settings
        self._endpoint = (
            Endpoint(settings.base_url, api_key, self._status) if settings is not None else None
        )
        #: The HTTP status of the last answer from the endpoint (``None`` before any, or when
        #: it could not be reached).
        self.lastRequestHttpStatusCode: int | None = None
        #: The last calls (model, status, latency, tokens) for the admin API; never inputs.
        self.calls = CallLog()

    def __repr__(self) -> str:  # never the key
        where = self.settings.base_url if self.settings is not None else "not configured"
        return f"<Ai env.{self._binding} ({where})>"

    def _status(self, status: int | None) -> None:
        self.lastRequestHttpStatusCode = status
        record = _current.get()
        if record is not None:
            record.status = status

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """``await env.AI.run(model, inputs, options?)`` (see the module docstring)."""
        values = js_arguments(args, kwargs)
        model = js_string(values[0]) if values else "undefined"
        inputs = values[1] if len(values) > 1 else None
        options = values[2] if len(values) > 2 else None
        return call(lambda: self._run(model, inputs, options))

    async def _run(self, model: str, inputs: Any, options: Any) -> Any:
        stream = isinstance(inputs, Mapping) and inputs.get("stream") is True
        record, started = self.calls.start(model, stream)
        token = _current.set(record)  # this call's task: _status() fills in its HTTP status
        try:
            result = await self._answer(model, inputs, record)
        except Exception as exc:
            text = exc.message if isinstance(exc, BindingError) else f"{type(exc).__name__}: {exc}"
            self.calls.finish(record, started, text)
            raise
        finally:
            _current.reset(token)
        usage = result.get("usage") if isinstance(result, Mapping) else None
        tokens = dict(usage) if isinstance(usage, Mapping) else None
        self.calls.finish(record, started, tokens=tokens)
        return to_python(result) if isinstance(result, dict) else result

    async def _answer(self, model: str, inputs: Any, record: AiCall) -> Any:
        endpoint, settings = self._endpoint, self.settings
        if endpoint is None or settings is None:
            raise AiNotConfiguredError(not_configured_text(self._binding, model))
        task = task_of(model, inputs)
        assert isinstance(inputs, Mapping)
        endpoint_model = settings.endpoint_model(model, task == "embeddings")
        record.task, record.endpoint_model = task, endpoint_model
        if endpoint_model is None:
            default = "default_embedding_model" if task == "embeddings" else "default_model"
            raise InferenceUpstreamError(
                f"5007: No such model {model} or task (doemu: [tool.doemu.ai.models] in "
                f'pyproject.toml does not map it and no {default} is set; add "{model}" = '
                '"<the endpoint\'s model>" to [tool.doemu.ai.models])'
            )
        if task == "embeddings":
            target = endpoint.target(model, endpoint_model, "/embeddings")
            body = embeddings_body(model, endpoint_model, inputs)
            answer = await endpoint.post_json(target, body)
            return embeddings_output(model, answer, inputs.get("pooling"))
        target = endpoint.target(model, endpoint_model, "/chat/completions")
        body = chat_body(model, endpoint_model, inputs)
        if inputs.get("stream") is not True:
            return text_output(await endpoint.post_json(target, body))
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        events, close = await endpoint.open_stream(target, body)
        return stream_from_iterator(_workers_ai_events(events), on_cancel=close)

    # Not emulated; named so that a call says so rather than an AttributeError.
    def models(self, *args: Any, **kwargs: Any) -> Any:
        raise InferenceUpstreamError(
            f"env.{self._binding}.models() is not emulated: doemu serves only the models mapped "
            "in [tool.doemu.ai.models]"
        )

    def __getattr__(self, name: str) -> Any:
        if name in ("gateway", "autorag", "toMarkdown"):
            raise InferenceUpstreamError(f"env.{self._binding}.{name}() is not emulated by doemu")
        raise AttributeError(name)


async def _workers_ai_events(chunks: AsyncIterator[Any]) -> AsyncIterator[bytes]:
    """The endpoint's chunks as Workers AI's stream: response deltas, usage, ``[DONE]``."""
    translator = StreamTranslator()
    async for chunk in chunks:
        if chunk == "[DONE]":
            for event in translator.closing():
                yield sse_event(event)
            yield sse_event("[DONE]")
            return
        if isinstance(chunk, Mapping) and chunk.get("error"):
            error = chunk["error"]
            text = error.get("message") if isinstance(error, Mapping) else error
            raise InferenceUpstreamError(f"the AI endpoint reported an error mid-stream: {text}")
        for event in translator.feed(chunk):
            yield sse_event(event)


def api_key_from(values: Mapping[str, Any]) -> Callable[[], str | None]:
    """The key as the Worker's variables hold it (``.dev.vars``), read at each call."""

    def key() -> str | None:
        value = values.get(AI_API_KEY_VAR)
        return str(value) if value else None

    return key
