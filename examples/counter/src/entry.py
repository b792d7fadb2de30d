"""A Durable Object counter written against Cloudflare's Python Workers API only.

Without a ``Default`` entry worker, doemu's default router sends ``/COUNTER/<name>/<path>`` to the
object called ``<name>``:

    POST /COUNTER/<name>/incr        add 1 (SQL) and return the new value
    GET  /COUNTER/<name>/value       the current value
    PUT  /COUNTER/<name>/kv/<key>    store the request body in KV;  GET reads it back
    POST /COUNTER/<name>/alarm?in_ms=3000   set the object's alarm
    GET  /COUNTER/<name>/alarms      the alarm log (every alarm that fired)
    POST /COUNTER/<name>/echo        parse the JSON body and send it back
    GET  /COUNTER/<name>/ws          upgrade to a hibernatable WebSocket (echo + counter)
"""

from urllib.parse import parse_qs, urlparse

from js import Date, Object, WebSocketPair
from pyodide.ffi import to_js
from workers import DurableObject, Response


def js_object(value):
    """A plain JavaScript object, which is what JS APIs such as serializeAttachment clone."""
    return to_js(value, dict_converter=Object.fromEntries)


class Counter(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        sql = ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER)")
        sql.exec("INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0)")
        sql.exec(
            "CREATE TABLE IF NOT EXISTS alarm_log ("
            "fired_at REAL, scheduled REAL, retry_count INTEGER)"
        )
        sql.exec("CREATE TABLE IF NOT EXISTS boots (at REAL)")
        sql.exec("INSERT INTO boots (at) VALUES (?)", Date.now())

    async def fetch(self, request):
        url = urlparse(request.url)
        parts = url.path.strip("/").split("/", 3)
        action = parts[2] if len(parts) > 2 else "value"
        sql = self.ctx.storage.sql
        if action == "incr" and request.method == "POST":
            row = sql.exec(
                "UPDATE counter SET value = value + 1 WHERE id = 1 RETURNING value"
            ).one()
            return Response.json({"value": row["value"]})
        if action == "value":
            row = sql.exec("SELECT value FROM counter WHERE id = 1").one()
            return Response.json({"value": row["value"], "name": self.ctx.id.name})
        if action == "kv" and len(parts) == 4:
            key = parts[3]
            if request.method == "PUT":
                await self.ctx.storage.put(key, await request.text())
                return Response.json({"stored": key})
            return Response.json({"key": key, "value": await self.ctx.storage.get(key)})
        if action == "alarm" and request.method == "POST":
            in_ms = int(parse_qs(url.query).get("in_ms", ["1000"])[0])
            at = Date.now() + in_ms
            await self.ctx.storage.setAlarm(at)
            return Response.json({"alarm": at})
        if action == "alarms":
            rows = sql.exec("SELECT fired_at, scheduled, retry_count FROM alarm_log").toArray()
            return Response.json([dict(r) for r in rows])
        if action == "echo" and request.method == "POST":
            return Response.json({"echo": await request.json()})
        if action == "boots":
            return Response.json(sql.exec("SELECT count(*) AS n FROM boots").one()["n"])
        if action == "ws":
            if request.headers.get("upgrade") != "websocket":
                return Response("expected a WebSocket upgrade", status=426)
            client, server = WebSocketPair.new().object_values()
            # JavaScript wants an Array of tags and a clonable JS value: to_js makes them.
            self.ctx.acceptWebSocket(server, to_js(["counter"]))
            server.serializeAttachment(js_object({"joined_at": Date.now(), "messages": 0}))
            return Response(None, status=101, web_socket=client)
        return Response.json({"error": f"no action {action!r}"}, status=404)

    async def alarm(self, alarm_info=None):
        retry = alarm_info.retryCount if alarm_info is not None else 0
        scheduled = alarm_info.scheduledTime if alarm_info is not None else None
        self.ctx.storage.sql.exec(
            "INSERT INTO alarm_log (fired_at, scheduled, retry_count) VALUES (?, ?, ?)",
            Date.now(),
            scheduled,
            retry,
        )

    async def webSocketMessage(self, ws, message):
        attached = ws.deserializeAttachment()  # a JS object, or jsnull (falsy) if none
        state = attached.to_py() if attached else {"messages": 0}
        state["messages"] += 1
        ws.serializeAttachment(js_object(state))
        row = self.ctx.storage.sql.exec(
            "UPDATE counter SET value = value + 1 WHERE id = 1 RETURNING value"
        ).one()
        ws.send(f"{message} #{state['messages']} (counter {row['value']})")

    async def webSocketClose(self, ws, code, reason, was_clean):
        self.ctx.storage.sql.exec("INSERT INTO boots (at) VALUES (?)", -code)
