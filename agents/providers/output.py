"""Structured output: the final answer as a JSON value that a schema accepts.

An agent (or a ``model_reply``) with an :class:`OutputSchema` asks the provider for JSON in
that shape through the provider's own structured-output mode — chat completions'
``response_format``, the Responses API's ``text.format``, Anthropic's ``output_config.format``
— and checks the answer here, whatever the provider promised: a model without constrained
decoding (a local server, a model that ignores the mode, a reply cut at ``max_tokens``) can
still answer something else. What fails the check becomes a correction the model reads on its
next step (:func:`correction`), within the reply's step budget.

Validation: a pydantic model validates with its own ``model_validate`` (the output is its
``model_dump(mode="json")``); a JSON Schema with ``fastjsonschema`` — pure Python, so it runs in
a Cloudflare Python Worker too, where ``jsonschema``'s Rust dependency (``rpds-py``) cannot be
vendored — compiled once per schema.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ProviderError
from .transcript import CORRECTION_PART, OUTPUT_PART

__all__ = [
    "CORRECTION_PART",
    "OUTPUT_PART",
    "OutputSchema",
    "OutputSchemaError",
    "anthropic_schema",
    "correction",
    "output_schema",
]

#: A schema name as OpenAI takes it: a-z, A-Z, 0-9, ``_`` and ``-``, up to 64 characters.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: How much of a refused answer a correction or an error quotes.
_QUOTE = 300


class OutputSchemaError(ProviderError, ValueError):
    """The model's answer is not a value the output schema accepts: ``violation`` says where
    and why (``$.sentiment must be one of […]``, ``not JSON: …``); ``text`` is the answer."""

    def __init__(self, name: str, violation: str, text: str) -> None:
        super().__init__(f"output {name!r} does not match its schema: {violation}")
        self.name = name
        self.violation = violation
        self.text = text


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """What the final answer must be: ``schema`` (a JSON Schema, sent to the provider), its
    ``name`` (OpenAI's format name), ``strict`` (OpenAI's constrained decoding, which needs a
    schema with every property required and ``additionalProperties: false``), and the pydantic
    ``model`` it came from, if any. Build one with :func:`output_schema`."""

    schema: Mapping[str, Any]
    name: str = "output"
    strict: bool = False
    model: Any = None
    _check: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)

    def validate(self, text: str) -> Any:
        """The answer ``text`` as the JSON value the schema accepts (a pydantic model's
        ``model_dump(mode="json")``); :class:`OutputSchemaError` naming the violation."""
        try:
            value = json.loads(_unfenced(text))
        except ValueError as exc:
            raise OutputSchemaError(self.name, f"not JSON ({exc})", text) from None
        if self.model is not None:
            try:
                return self.model.model_validate(value).model_dump(mode="json")
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                raise OutputSchemaError(self.name, _pydantic_text(exc), text) from None
        assert self._check is not None
        import fastjsonschema  # here: only agents with an output schema need it

        try:
            self._check(value)
        except fastjsonschema.JsonSchemaValueException as exc:
            message = str(exc.message)  # "data.topics[0] must be string": the root is "$"
            message = "$" + message[4:] if message.startswith("data") else message
            raise OutputSchemaError(self.name, message, text) from None
        return value


def output_schema(spec: Any, *, name: str | None = None, strict: bool = False) -> OutputSchema:
    """An :class:`OutputSchema` from ``spec``: a JSON Schema (a mapping), a pydantic model
    class (its ``model_json_schema()``; its name the format's name), or an ``OutputSchema``
    (returned as it is). A schema that is not one is refused here, naming the problem."""
    if isinstance(spec, OutputSchema):
        return spec
    model = None
    as_schema = getattr(spec, "model_json_schema", None)
    if callable(as_schema) and callable(getattr(spec, "model_validate", None)):
        model, schema = spec, as_schema()
        name = name or str(getattr(spec, "__name__", "") or "output")
    elif isinstance(spec, Mapping):
        schema = copy.deepcopy(dict(spec))
    else:
        raise ValueError(
            f"an output schema is a JSON Schema (a dict) or a pydantic model class, got {spec!r}"
        )
    name = name or str(schema.get("title") or "output")
    name = name if _NAME.match(name) else re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "output"
    check = None
    if model is None:
        import fastjsonschema

        try:
            check = fastjsonschema.compile(schema)
        except fastjsonschema.JsonSchemaDefinitionException as exc:
            raise ValueError(f"output schema {name!r} is not a valid JSON Schema: {exc}") from None
    return OutputSchema(schema, name, bool(strict), model, check)


def correction(error: OutputSchemaError) -> str:
    """What the model reads after an answer the schema refused: the violation, and how to
    answer instead."""
    return (
        f"Your answer does not match the required output schema {error.name!r}: "
        f"{error.violation}. Answer again with only a JSON value that matches the schema — "
        "no prose and no code fences."
    )


#: Keywords Anthropic's structured outputs do not take; moved into the description instead,
#: as its SDKs do (the answer is still checked against the full schema here).
_ANTHROPIC_UNSUPPORTED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                          "multipleOf", "minLength", "maxLength", "pattern", "minItems",
                          "maxItems", "uniqueItems", "minProperties", "maxProperties")  # fmt: skip


def anthropic_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as Anthropic's ``output_config.format`` takes it: every object closed
    (``additionalProperties: false``, which it requires) and the constraints it does not
    support moved into the description."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, Mapping):
            return node
        out = {k: walk(v) for k, v in node.items() if k not in _ANTHROPIC_UNSUPPORTED}
        dropped = {k: node[k] for k in _ANTHROPIC_UNSUPPORTED if k in node}
        if dropped:
            said = ", ".join(f"{k}: {json.dumps(v)}" for k, v in dropped.items())
            out["description"] = f"{out.get('description', '')}\n{{{said}}}".strip()
        if out.get("type") == "object" or "properties" in out:
            out["additionalProperties"] = False
        return out

    result: dict[str, Any] = walk(schema)
    return result


def _unfenced(text: str) -> str:
    """The answer without a Markdown code fence around it (```json … ```), which models add
    when no constrained decoding holds them to the bare value."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6:
        body = stripped[3:-3]
        first, _, rest = body.partition("\n")
        return rest if first.strip().isalnum() or not first.strip() else body
    return stripped


def _pydantic_text(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)[:_QUOTE]
    parts = []
    for error in errors()[:5]:
        where = "$" + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.get("loc") or ()
        )
        parts.append(f"{where}: {error.get('msg')}")
    return "; ".join(parts)
