"""The JavaScript boundary's rules, one endpoint each, served the same way by doemu and workerd.

Each endpoint runs one rule and answers what the code observed (a value's kind, an exception's
class, JS name and text) as JSON, so ``e2e/differential/test_boundary.py`` asserts the same
answer on both targets. Nothing here works around a rule: this is the code a user would write,
and the answers are what Cloudflare's Python runtime makes of it.

    GET /do/<case>?name=N          a case run inside the Durable Object ``Probe`` named N
    GET /worker/<case>             a case run in the Default entry worker
    GET /headers/<case>            a case about ``request.headers`` (it is given the request)
    GET /ws?name=N                 a hibernatable WebSocket of ``Probe`` N (see webSocketMessage)
"""

import asyncio
import http.client
import json
from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

import workers
from js import Object, WebSocketPair
from pyodide.ffi import JsException, JsProxy, create_proxy, jsnull, to_js
from workers import DurableObject, Request, Response, WorkerEntrypoint

#: How long each waitUntil job waits before writing its marker.
JOB_DELAY = 0.05


def failure(exc):
    """What code can observe of an exception: its kind, JS name and text."""
    return {
        "raised": True,
        "js": isinstance(exc, JsException),
        "name": getattr(exc, "name", None) if isinstance(exc, JsException) else None,
        "type_error": isinstance(exc, TypeError),
        "attribute_error": isinstance(exc, AttributeError),
        "os_error": isinstance(exc, OSError),
        "value_error": isinstance(exc, ValueError),
        "text": str(exc),
    }


def attempt(fn):
    """``fn()``'s observation: its value (described) or its failure."""
    try:
        return {"raised": False, "value": fn()}
    except Exception as exc:
        return failure(exc)


async def attempt_async(fn):
    try:
        return {"raised": False, "value": await fn()}
    except Exception as exc:
        return failure(exc)


def kind(value):
    """A value's kind as code sees it: a JS proxy, jsnull, or a Python type's name."""
    if value is jsnull:
        return "jsnull"
    if isinstance(value, JsProxy):
        return "JsProxy"
    return type(value).__name__


def json_vars(value):
    return value.to_py() if isinstance(value, JsProxy) else value


class Probe(DurableObject):
    async def fetch(self, request):
        url = urlsplit(request.url)
        case = url.path.strip("/").split("/")[-1]
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if case == "ws":
            return self.upgrade()
        handler = getattr(self, f"case_{case}", None)
        if handler is None:
            return Response.json({"error": f"no case {case!r}"}, status=404)
        return Response.json(await handler(query))

    # -- waitUntil ------------------------------------------------------------------------------
    def job(self, marker):
        async def job():
            await asyncio.sleep(JOB_DELAY)
            await self.ctx.storage.put(f"marker:{marker}", True)

        return job

    async def case_waituntil(self, query):
        """One way of handing work to ``ctx.waitUntil``, then a control that works on both: the
        test waits for the control's marker, then reads whether the variant's job ran."""
        variant = query["variant"]
        job = self.job(variant)
        call = {
            "coroutine": lambda: self.ctx.waitUntil(job()),
            "task": lambda: self.ctx.waitUntil(asyncio.ensure_future(job())),
            "function": lambda: self.ctx.waitUntil(job),
            "workers_coroutine": lambda: workers.waitUntil(job()),
            "proxied_task": lambda: self.ctx.waitUntil(create_proxy(asyncio.ensure_future(job()))),
        }[variant]
        returned = attempt(lambda: kind(call()))
        control = asyncio.ensure_future(self.job(f"control-{variant}")())
        self.ctx.waitUntil(create_proxy(control))
        return {"call": returned}

    async def case_mark(self, query):
        await self.ctx.storage.put(f"marker:{query['key']}", True)
        return {"marked": query["key"]}

    async def case_markers(self, query):
        stored = await self.ctx.storage.list(prefix="marker:")
        return sorted(key.removeprefix("marker:") for key in stored)

    # -- WebSockets and attachments --------------------------------------------------------------
    def pair(self):
        client, server = WebSocketPair.new().object_values()
        return client, server

    async def case_accept_list(self, query):
        _client, server = self.pair()
        listed = attempt(lambda: self.ctx.acceptWebSocket(server, ["room"]))
        _client, server = self.pair()
        converted = attempt(lambda: kind(self.ctx.acceptWebSocket(server, to_js(["room"]))))
        tags = [list(self.ctx.getTags(ws)) for ws in self.ctx.getWebSockets("room")]
        return {"list": listed, "to_js": converted, "tags": tags}

    async def case_attachments(self, query):
        _client, server = self.pair()
        self.ctx.acceptWebSocket(server)
        nothing = server.deserializeAttachment()
        as_dict = attempt(lambda: server.serializeAttachment({"a": 1}))
        kept = server.deserializeAttachment()
        server.serializeAttachment(to_js({"a": 1, "n": None}, dict_converter=Object.fromEntries))
        back = server.deserializeAttachment()
        return {
            "nothing": {
                "kind": kind(nothing),
                "is_none": nothing is None,
                "falsy": not nothing,
                "or_default": nothing or {},
                "json": json.dumps(nothing),
            },
            "dict": as_dict,
            "after_refusal": kind(kept),
            "object": {
                "kind": kind(back),
                "subscript": attempt(lambda: back["a"]),
                "attribute": back.a,
                "to_py": back.to_py()["a"],
            },
        }

    def upgrade(self):
        client, server = self.pair()
        self.ctx.acceptWebSocket(server)
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws, message):
        """``bytes`` sends ``ws.send(b"\\x01\\x02bytes")``; ``binary`` sends ``to_js`` of it."""
        if message == "bytes":
            ws.send(b"\x01\x02bytes")
        elif message == "binary":
            ws.send(to_js(b"\x01\x02bytes"))

    # -- storage and SQL --------------------------------------------------------------------------
    async def case_sql_ints(self, query):
        sql = self.ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS big (n INTEGER)")
        sql.exec("DELETE FROM big")

        def one(statement, *bindings):
            return dict(sql.exec(statement, *bindings).one())

        return {
            "typeof": one("SELECT typeof(?) AS t", 5)["t"],
            "half": one("SELECT ? / 2 AS h", 5)["h"],
            "column": attempt(lambda: (sql.exec("INSERT INTO big VALUES (?)", 7), "ok")[1]),
            "stored": one("SELECT typeof(n) AS t, n FROM big"),
            "below_limit": attempt(lambda: one("SELECT ? AS v", 2**53 - 2)["v"]),
            "at_limit": attempt(lambda: one("SELECT ? AS v", 2**53 - 1)),
            "negative_limit": attempt(lambda: one("SELECT ? AS v", -(2**53 - 1))),
            "big_read_back": kind(one("SELECT 9007199254740993 AS v")["v"]),
        }

    async def case_cursor(self, query):
        cursor = self.ctx.storage.sql.exec("SELECT 1 AS a UNION ALL SELECT 2")
        as_next = attempt(lambda: next(cursor))
        step = cursor.next()
        rest = [dict(row) for row in cursor]
        return {
            "next_builtin": as_next,
            "next_method": {"kind": kind(step), "done": step.done, "value": dict(step.value)},
            "rest": rest,
        }

    async def case_alarm(self, query):
        at = 4_102_444_800_000  # 2100-01-01: never fires during the test
        await self.ctx.storage.setAlarm(at)
        got = await self.ctx.storage.getAlarm()
        await self.ctx.storage.deleteAlarm()
        return {"kind": kind(got), "value": got}

    async def case_alarm_soon(self, query):
        from js import Date

        await self.ctx.storage.setAlarm(Date.now() + 200)
        return {"set": True}

    async def case_js_errors(self, query):
        async def set_alarm_with_a_string():
            try:
                await self.ctx.storage.setAlarm("soon")
            except TypeError:
                return "caught by except TypeError"
            except JsException as exc:
                return failure(exc)
            return "no error"

        return {
            "set_alarm": await set_alarm_with_a_string(),
            "accept_string": attempt(lambda: self.ctx.acceptWebSocket("x")),
            "bad_id": attempt(lambda: self.env.PROBE.idFromString("bad")),
        }

    async def case_storage_values(self, query):
        await self.ctx.storage.put("d", {"a": {"b": 1}, "l": [1, None]})
        got = await self.ctx.storage.get("d")
        refused = await attempt_async(lambda: self.ctx.storage.put("t", (1, 2)))
        return {
            "kind": kind(got),
            "attribute": got.a.b,
            "nested": kind(got["a"]),
            "tuple": refused,
        }

    # -- ids --------------------------------------------------------------------------------------
    async def case_ids(self, query):
        a, b = self.env.PROBE.idFromName("x"), self.env.PROBE.idFromName("x")
        return {
            "equal": a == b,
            "equals": a.equals(b),
            "same": self.ctx.id == self.ctx.id,
            "hash": attempt(lambda: hash(a)),
            "str": str(a) == a.toString() and len(str(a)) == 64,
        }


class Callee(DurableObject):
    """The far side of the RPC cases."""

    async def echo(self, value):
        return {"seen": kind(value), "value": value if not isinstance(value, memoryview) else None}

    async def echo_raw(self, value):
        return value

    async def give(self, what):
        return {"tuple": (1, 2), "dict": {"a": {"b": 1}}, "bytes": b"ab"}[what]

    async def boom(self):
        raise ValueError("boom value")

    async def fetch(self, request):
        raise ValueError("Callee.fetch raised on purpose")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlsplit(request.url)
        parts = url.path.strip("/").split("/")
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if parts[0] in ("do", "ws"):
            stub = self.env.PROBE.getByName(query.get("name", "probe"))
            return await stub.fetch(request)
        if parts[0] == "headers" and len(parts) == 2:
            handler = getattr(self, f"headers_{parts[1]}", None)
            if handler is not None:
                return await handler(request)
        if parts[0] == "worker" and len(parts) == 2:
            handler = getattr(self, f"case_{parts[1]}", None)
            if handler is not None:
                return Response.json(await handler(query))
        return Response.json({"error": f"no route {url.path}"}, status=404)

    async def case_rpc(self, query):
        stub = self.env.CALLEE.getByName(query.get("name", "callee"))
        echoed = await stub.echo({"a": 1})
        raw = await stub.echo_raw({"a": {"b": 1}})
        given = await stub.give("dict")
        data = await stub.echo_raw(b"ab")
        return {
            "dict_arg": echoed["seen"],
            "dict_result": {"kind": kind(raw), "attribute": raw.a.b, "nested": kind(raw["a"])},
            "returned_dict": kind(given),
            "bytes": {"kind": kind(data), "value": bytes(data).decode()},
            "tuple_arg": await attempt_async(lambda: stub.echo((1, 2))),
            "tuple_result": await attempt_async(lambda: stub.give("tuple")),
        }

    async def case_rpc_error(self, query):
        stub = self.env.CALLEE.getByName(query.get("name", "callee"))
        return {
            "rpc": await attempt_async(stub.boom),
            "fetch": await attempt_async(lambda: stub.fetch("http://callee/")),
        }

    async def case_env(self, query):
        env = self.env
        before = "PROBE" in dir(env)
        env.PROBE  # noqa: B018 - reading it is the point
        after = "PROBE" in dir(env)
        return {
            "listed_before_read": before,
            "listed_after_read": after,
            "missing": attempt(lambda: env.MISSING),
            "hasattr": [hasattr(env, "PROBE"), hasattr(env, "MISSING")],
            "iter": attempt(lambda: list(iter(env))),
            "in": attempt(lambda: "PROBE" in env),
            "text_var": kind(env.GREETING),
            "json_var": json_vars(env.LIMITS),
        }

    async def case_waituntil(self, query):
        """The entry worker's ``waitUntil``: the SDK patches it, so a coroutine runs there."""
        stub = self.env.PROBE.getByName(query.get("name", "probe"))

        async def job():
            await asyncio.sleep(JOB_DELAY)
            await stub.fetch("http://probe/do/mark?key=worker")

        self.ctx.waitUntil(job())
        return {"handed": True}

    # -- request.headers / response.headers ------------------------------------------------------
    async def headers_type(self, request):
        """What ``request.headers`` is: its type, a new copy per access, case-insensitive reads."""
        h = request.headers
        copy = request.headers
        copy["x-added"] = "1"
        return Response.json(
            {
                "mro": [c.__name__ for c in type(h).__mro__],
                "http_message": isinstance(h, http.client.HTTPMessage),
                "mapping": isinstance(h, Mapping),
                "dict": isinstance(h, dict),
                "fresh_per_access": request.headers is not request.headers,
                "mutation_kept": request.headers.get("x-added"),
                "get": [h.get("x-test"), h.get("X-TEST"), h["X-Test"], h["x-missing"]],
                "get_default": h.get("x-missing", "d"),
                "contains": ["X-TEST" in h, "x-missing" in h],
                "repeated": [h.get_all("x-dup"), h["x-dup"]],
                "keys": [k for k in h.keys() if k.startswith("x-")],
                "items": [[k, v] for k, v in h.items() if k.startswith("x-")],
                "as_dict": {k: v for k, v in dict(h).items() if k.startswith("x-")},
                "equals_dict": h == dict(h),
            }
        )

    async def headers_setitem(self, request):
        """``h[name] = value`` adds a header (email.message), it does not replace one."""
        h = request.headers
        h["x-set"] = "1"
        h["X-Set"] = "2"
        h["x-test"] = "again"
        del h["x-dup"]
        return Response.json(
            {
                "set": [h.get_all("x-set"), h["x-set"]],
                "over_existing": h.get_all("x-test"),
                "deleted": h.get_all("x-dup"),
            }
        )

    async def headers_request_arg(self, request):
        """Which ``headers=`` values ``Request(...)`` takes."""
        url = "http://example.com/"
        h = request.headers

        def build(headers):
            return lambda: Request(url, headers=headers).headers.get("x-test")

        return Response.json(
            {
                "message": attempt(lambda: kind(Request(request, headers=request.headers))),
                "message_new_url": attempt(build(h)),
                "dict_of_it": attempt(build(dict(h))),
                "pairs": attempt(build(list(h.items()))),
                "dict": attempt(build({"x-test": "d"})),
                "tuple": attempt(build((("x-test", "t"),))),
                "none": attempt(build(None)),
                "request_from_request": attempt(lambda: Request(request).headers.get("x-test")),
            }
        )

    async def headers_response_arg(self, request):
        """Which ``headers=`` values ``Response(...)`` takes (a falsy one is not looked at)."""
        built = Response("x", headers={"x-a": "1"})

        def build(headers):
            return lambda: Response("x", headers=headers).headers.get("x-a")

        return Response.json(
            {
                "message": attempt(build(built.headers)),
                "empty_message": attempt(build(http.client.HTTPMessage())),
                "dict_of_it": attempt(build(dict(built.headers))),
                "pairs": attempt(build(list(built.headers.items()))),
                "tuple": attempt(build((("x-a", "t"),))),
                "json": attempt(
                    lambda: Response.json({}, headers=built.headers).headers.get("x-a")
                ),
            }
        )

    async def headers_echo(self, request):
        """A response with repeated headers, for ``headers_fetched``."""
        return Response(
            "echo",
            headers=[
                ("x-multi", "1"),
                ("x-multi", "2"),
                ("set-cookie", "a=1"),
                ("set-cookie", "b=2"),
                ("content-type", "text/plain"),
            ],
        )

    async def headers_fetched(self, request):
        """``response.headers`` of a Response built here and of one ``fetch`` returned."""
        origin = request.url.split("/headers/")[0]
        fetched = await workers.fetch(f"{origin}/headers/echo")
        built = Response("x", headers=[("x-multi", "1"), ("x-multi", "2")])

        def seen(h):
            return {
                "mro": [c.__name__ for c in type(h).__mro__][:3],
                "multi": h.get_all("x-multi"),
                "cookies": h.get_all("set-cookie"),
                "content_type": h.get("Content-Type"),
            }

        return Response.json(
            {
                "fetched": seen(fetched.headers),
                "built": seen(built.headers),
            }
        )
