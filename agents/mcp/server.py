"""An MCP server's registry and its methods: tools, resources, prompts, answered as JSON-RPC.

The TypeScript ``McpAgent`` registers on the MCP SDK's ``McpServer`` in ``init()``:
``this.server.tool(name, description, zodShape, handler)``. Here the same object is
:class:`McpServer`, and registration is a decorator, so a handler stays a plain function with
its name, signature and docstring (what Python users know from the official ``mcp`` SDK's
``@mcp.tool()``)::

    @self.server.tool(description="Add to the counter")
    def add(amount: int) -> str: ...

``tool()`` derives the input schema from the signature (``str``/``int``/``float``/``bool``/
``list``/``dict``; a parameter without a default is required) unless ``input_schema`` is given,
and validates arguments with ``fastjsonschema`` (pure Python, so it runs in a Worker). The
official SDK's server is not used: it needs anyio and Starlette, which a Worker does not have.

What a handler returns becomes MCP's shapes: a ``str`` is one text block; a ``dict`` is
``structuredContent`` (with its JSON as text, as the spec asks), unless it already is a
``CallToolResult`` (has ``content``); an exception is a result with ``isError: true`` and its
message, for the model to read. Arguments that fail the schema are such a result too (the
2025-11-25 revision: input validation errors are tool errors, so a model can correct itself);
an unknown tool, resource or prompt is a JSON-RPC error (``-32602``, ``-32002``).
"""

from __future__ import annotations

import base64
import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import McpError
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    JsonRpcError,
    Message,
    is_request,
    result_message,
)

__all__ = [
    "LATEST_PROTOCOL_VERSION",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "McpServer",
    "Prompt",
    "Resource",
    "Tool",
    "negotiate_version",
]

#: The revisions this server speaks; an unknown one is answered with the latest.
SUPPORTED_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[-1]

#: MCP 2025-11-25's advice for tool names, enforced at registration (a typo fails loudly).
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}

F = TypeVar("F", bound=Callable[..., Any])


def negotiate_version(requested: Any) -> str:
    """The requested revision when this server speaks it, else the latest (the spec's rule)."""
    return requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION


@dataclass
class Tool:
    name: str
    fn: Callable[..., Any]
    description: str | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    _check: Callable[[Any], Any] | None = field(default=None, repr=False)

    def describe(self) -> dict[str, Any]:
        tool: dict[str, Any] = {"name": self.name, "inputSchema": self.input_schema}
        if self.description:
            tool["description"] = self.description
        if self.output_schema is not None:
            tool["outputSchema"] = self.output_schema
        if self.annotations:
            tool["annotations"] = self.annotations
        return tool

    def check(self, arguments: dict[str, Any]) -> None:
        """Raise ``ValueError`` naming the problem when ``arguments`` fail the input schema."""
        import fastjsonschema  # here: a server with no tools never compiles a schema

        if self._check is None:
            self._check = fastjsonschema.compile(self.input_schema)
        try:
            self._check(arguments)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise ValueError(exc.message) from None


@dataclass
class Resource:
    uri: str
    fn: Callable[..., Any]
    name: str
    description: str | None
    mime_type: str | None

    def describe(self) -> dict[str, Any]:
        resource: dict[str, Any] = {"uri": self.uri, "name": self.name}
        if self.description:
            resource["description"] = self.description
        if self.mime_type:
            resource["mimeType"] = self.mime_type
        return resource


@dataclass
class Prompt:
    name: str
    fn: Callable[..., Any]
    description: str | None
    arguments: list[dict[str, Any]]

    def describe(self) -> dict[str, Any]:
        prompt: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.description:
            prompt["description"] = self.description
        return prompt


def _description(fn: Callable[..., Any], given: str | None) -> str | None:
    return given if given is not None else (inspect.getdoc(fn) or None)


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p for p in inspect.signature(fn).parameters.values() if p.kind in kinds]


def schema_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """A JSON Schema object for ``fn``'s keyword parameters (see the module docstring)."""
    try:
        hints = inspect.get_annotations(fn, eval_str=True)
    except Exception:  # an annotation naming something unimportable: leave it untyped
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in _parameters(fn):
        hint = hints.get(parameter.name)
        origin = getattr(hint, "__origin__", hint)
        json_type = _JSON_TYPES.get(origin) if isinstance(origin, type) else None
        properties[parameter.name] = {"type": json_type} if json_type else {}
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    result = fn(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def _tool_result(value: Any) -> dict[str, Any]:
    """What a tool handler returned, as a ``CallToolResult``."""
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return value  # already a CallToolResult
    if value is None:
        return {"content": []}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    if isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False)
        return {"content": [{"type": "text", "text": text}], "structuredContent": value}
    return {"content": [{"type": "text", "text": json.dumps(value, ensure_ascii=False)}]}


def _resource_contents(resource: Resource, value: Any) -> list[dict[str, Any]]:
    if isinstance(value, list) and all(isinstance(v, dict) and "uri" in v for v in value):
        return value  # already ResourceContents
    if isinstance(value, bytes | bytearray):
        blob = base64.b64encode(bytes(value)).decode("ascii")
        return [
            {
                "uri": resource.uri,
                "mimeType": resource.mime_type or "application/octet-stream",
                "blob": blob,
            }
        ]
    if isinstance(value, str):
        return [
            {"uri": resource.uri, "mimeType": resource.mime_type or "text/plain", "text": value}
        ]
    return [
        {
            "uri": resource.uri,
            "mimeType": resource.mime_type or "application/json",
            "text": json.dumps(value, ensure_ascii=False),
        }
    ]


def _prompt_messages(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, dict) and "role" in item and "content" in item:
            messages.append(item)
        else:
            raise McpError(f"a prompt answered {item!r}: expected a str or a message")
    return messages


def _params(message: Message) -> dict[str, Any]:
    params = message.get("params")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: expected an object")
    return params


def _string_param(params: Mapping[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {key!r} must be a non-empty string")
    return value


class McpServer:
    """The tools, resources and prompts of one MCP server, and the methods that serve them.

    ``name``/``version`` are the ``serverInfo`` of ``initialize``; ``instructions`` its
    ``instructions``. Register in ``McpAgent.init()`` (see the module docstring)."""

    def __init__(
        self, name: str, version: str = "0.1.0", *, instructions: str | None = None
    ) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.prompts: dict[str, Prompt] = {}

    # -- registration -----------------------------------------------------------------------------
    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
    ) -> Callable[[F], F]:
        """Register a tool (a decorator; ``name`` defaults to the function's, ``description`` to
        its docstring). The handler is called with the arguments as keywords, sync or async."""

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            if not _TOOL_NAME.match(tool_name):
                raise McpError(
                    f"an MCP tool name must match {_TOOL_NAME.pattern}, got {tool_name!r}"
                )
            schema = dict(input_schema) if input_schema is not None else schema_of(fn)
            if schema.get("type") != "object":
                raise McpError(f"tool {tool_name!r}: input_schema must be a JSON Schema object")
            self.tools[tool_name] = Tool(
                tool_name,
                fn,
                _description(fn, description),
                schema,
                dict(output_schema) if output_schema is not None else None,
                dict(annotations) if annotations is not None else None,
            )
            return fn

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Register a resource at ``uri``; the handler (no arguments) answers its contents: a
        ``str`` (text), ``bytes`` (a blob) or anything JSON."""

        def register(fn: F) -> F:
            if not isinstance(uri, str) or ":" not in uri:
                raise McpError(f"an MCP resource needs a URI with a scheme, got {uri!r}")
            self.resources[uri] = Resource(
                uri, fn, name or fn.__name__, _description(fn, description), mime_type
            )
            return fn

        return register

    def prompt(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        arguments: list[Mapping[str, Any]] | None = None,
    ) -> Callable[[F], F]:
        """Register a prompt; the handler gets the arguments as keywords and answers a ``str``
        (one user message) or a list of messages. ``arguments`` default to the signature's."""

        def register(fn: F) -> F:
            listed = (
                [dict(a) for a in arguments]
                if arguments is not None
                else [
                    {"name": p.name, "required": p.default is inspect.Parameter.empty}
                    for p in _parameters(fn)
                ]
            )
            prompt_name = name or fn.__name__
            self.prompts[prompt_name] = Prompt(
                prompt_name, fn, _description(fn, description), listed
            )
            return fn

        return register

    # -- the methods ------------------------------------------------------------------------------
    def capabilities(self) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
        if self.resources:
            capabilities["resources"] = {"subscribe": False, "listChanged": False}
        if self.prompts:
            capabilities["prompts"] = {"listChanged": False}
        return capabilities

    def initialize_result(self, params: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {
            "protocolVersion": negotiate_version(params.get("protocolVersion")),
            "capabilities": self.capabilities(),
            "serverInfo": {"name": self.name, "version": self.version},
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    async def handle(self, message: Message) -> Message | None:
        """The response to one message; ``None`` for a notification or a client's response."""
        if not is_request(message):
            return None
        request_id = message["id"]
        try:
            return result_message(
                request_id, await self._answer(message["method"], _params(message))
            )
        except JsonRpcError as exc:
            return exc.to_message(request_id)

    async def _answer(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            return self.initialize_result(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [t.describe() for t in self.tools.values()]}
        if method == "tools/call":
            return await self._call_tool(params)
        if method == "resources/list":
            return {"resources": [r.describe() for r in self.resources.values()]}
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method == "resources/read":
            return await self._read_resource(params)
        if method == "prompts/list":
            return {"prompts": [p.describe() for p in self.prompts.values()]}
        if method == "prompts/get":
            return await self._get_prompt(params)
        raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _call_tool(self, params: Mapping[str, Any]) -> dict[str, Any]:
        name = _string_param(params, "name")
        tool = self.tools.get(name)
        if tool is None:
            raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise JsonRpcError(
                INVALID_PARAMS, f"Invalid params: {name}'s arguments must be an object"
            )
        try:
            tool.check(arguments)
        except ValueError as exc:
            return _error_result(f"Invalid arguments for tool {name}: {exc}")
        try:
            return _tool_result(await _call(tool.fn, **arguments))
        except Exception as exc:  # the tool failed: the model reads why
            return _error_result(str(exc) or type(exc).__name__)

    async def _read_resource(self, params: Mapping[str, Any]) -> dict[str, Any]:
        uri = _string_param(params, "uri")
        resource = self.resources.get(uri)
        if resource is None:
            raise JsonRpcError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        try:
            return {"contents": _resource_contents(resource, await _call(resource.fn))}
        except Exception as exc:
            raise JsonRpcError(INTERNAL_ERROR, f"Reading {uri} failed: {exc}") from exc

    async def _get_prompt(self, params: Mapping[str, Any]) -> dict[str, Any]:
        name = _string_param(params, "name")
        prompt = self.prompts.get(name)
        if prompt is None:
            raise JsonRpcError(INVALID_PARAMS, f"Unknown prompt: {name}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise JsonRpcError(
                INVALID_PARAMS, f"Invalid params: {name}'s arguments must be an object"
            )
        missing = [
            a["name"] for a in prompt.arguments if a.get("required") and a["name"] not in arguments
        ]
        if missing:
            raise JsonRpcError(
                INVALID_PARAMS,
                f"Missing required arguments for prompt {name}: {', '.join(missing)}",
            )
        try:
            messages = _prompt_messages(await _call(prompt.fn, **arguments))
        except Exception as exc:
            raise JsonRpcError(INTERNAL_ERROR, f"Prompt {name} failed: {exc}") from exc
        result: dict[str, Any] = {"messages": messages}
        if prompt.description:
            result["description"] = prompt.description
        return result


def _error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}
