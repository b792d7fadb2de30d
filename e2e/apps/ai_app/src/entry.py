"""A Worker that calls ``env.AI.run`` the way Cloudflare's Python examples do.

* ``POST /text``: ``{"prompt"}`` → the model's answer, as JSON (non-streaming);
* ``POST /stream``: ``{"prompt"}`` → the model's stream, returned as the response body;
* ``POST /embed``: ``{"text": [...]}`` → the embeddings;
* ``POST /tool``: ``{"prompt"}`` with a ``getWeather`` tool → the answer's ``tool_calls``;
* ``GET /raw``: a call whose error is not caught (the server answers 500 and keeps serving).

Errors the binding throws are JS errors (``JsException``): their ``name`` and ``message`` are
returned with status 502.
"""

import json

from pyodide.ffi import JsException
from workers import Response, WorkerEntrypoint

MODEL = "@cf/meta/llama-3.1-8b-instruct"
EMBEDDER = "@cf/baai/bge-base-en-v1.5"
WEATHER = {
    "name": "getWeather",
    "description": "Return the weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def as_json(value):
    return Response(json.dumps(value), headers={"content-type": "application/json"})


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = "/" + request.url.split("/", 3)[-1].split("?")[0]
        if path == "/raw":
            result = await self.env.AI.run(MODEL, {"prompt": "hi"})
            return as_json(result.response)
        body = json.loads(await request.text())
        try:
            if path == "/text":
                result = await self.env.AI.run(MODEL, {"prompt": body["prompt"]})
                return as_json({"response": result.response, "usage": result.usage})
            if path == "/stream":
                stream = await self.env.AI.run(
                    MODEL,
                    {"messages": [{"role": "user", "content": body["prompt"]}], "stream": True},
                )
                return Response(stream, headers={"content-type": "text/event-stream"})
            if path == "/embed":
                result = await self.env.AI.run(EMBEDDER, {"text": body["text"]})
                return as_json({"shape": result.shape, "data": result.data})
            if path == "/tool":
                result = await self.env.AI.run(
                    MODEL,
                    {"messages": [{"role": "user", "content": body["prompt"]}], "tools": [WEATHER]},
                )
                return as_json({"tool_calls": result.tool_calls})
        except JsException as error:
            return Response(json.dumps({"name": error.name, "message": error.message}), status=502)
        return Response("not found", status=404)
