"""The benchmark contract (see bench/README.md) written against Cloudflare's Python Workers API.

``Default`` routes ``/obj/<name>/<op>`` to the object ``idFromName(name)``, as the JavaScript peer
(bench/peer/worker.mjs) does; ``BenchDO`` implements the operations with its own SQL storage.
"""

import json
from urllib.parse import parse_qs, unquote, urlparse

from js import Date, WebSocketPair
from workers import DurableObject, Response, WorkerEntrypoint

TEXT = {"content-type": "text/plain; charset=utf-8"}
JSON = {"content-type": "application/json"}


def _text(body, status=200):
    return Response(body, status=status, headers=TEXT)


def _json(value):
    return Response(json.dumps(value, separators=(",", ":")), headers=JSON)


class BenchDO(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        sql = ctx.storage.sql
        sql.exec(
            "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)"
        )
        sql.exec(
            "CREATE TABLE IF NOT EXISTS alarmlog (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "set_at INTEGER NOT NULL, scheduled INTEGER NOT NULL, fired INTEGER)"
        )

    async def fetch(self, request):
        url = urlparse(request.url)
        parts = url.path.split("/")
        op = parts[3] if len(parts) > 3 else ""
        method = request.method
        sql = self.ctx.storage.sql

        if op == "ping" and method == "GET":
            return _text("ok")

        if op == "incr" and method == "POST":
            row = sql.exec(
                "INSERT INTO counter (id, value) VALUES (1, 1) "
                "ON CONFLICT(id) DO UPDATE SET value = value + 1 RETURNING value"
            ).one()
            return _text(str(row["value"]))

        if op == "get" and method == "GET":
            rows = sql.exec("SELECT value FROM counter WHERE id = 1").toArray()
            return _text(str(rows[0]["value"] if rows else 0))

        if op == "alarm" and method == "POST":
            raw = parse_qs(url.query).get("ms", ["0"])[0]
            try:
                ms = float(raw)
            except ValueError:
                ms = -1.0
            if not ms >= 0 or ms == float("inf"):
                return _text("bad ms", 400)
            set_at = int(Date.now())
            scheduled = set_at + round(ms)
            sql.exec(
                "INSERT INTO alarmlog (set_at, scheduled, fired) VALUES (?, ?, NULL)",
                set_at,
                scheduled,
            )
            await self.ctx.storage.setAlarm(scheduled)
            return _json({"set": set_at, "scheduled": scheduled})

        if op == "alarmlog" and method == "GET":
            rows = sql.exec("SELECT set_at, scheduled, fired FROM alarmlog ORDER BY seq").toArray()
            return _json(
                [
                    {"set": r["set_at"], "scheduled": r["scheduled"], "fired": r["fired"]}
                    for r in rows
                ]
            )

        if op == "ws" and method == "GET":
            if (request.headers.get("upgrade") or "").lower() != "websocket":
                return _text("expected websocket upgrade", 426)
            client, server = WebSocketPair.new().object_values()
            self.ctx.acceptWebSocket(server)  # hibernation API
            return Response(None, status=101, web_socket=client)

        return _text("not found", 404)

    async def alarm(self, alarm_info=None):
        self.ctx.storage.sql.exec(
            "UPDATE alarmlog SET fired = ? WHERE seq = "
            "(SELECT max(seq) FROM alarmlog WHERE fired IS NULL)",
            int(Date.now()),
        )

    async def webSocketMessage(self, ws, message):
        ws.send(message)  # echo, text or binary unchanged

    async def webSocketClose(self, ws, code, reason, was_clean):
        try:
            ws.close(1000 if code == 1005 else code, reason)
        except Exception:
            pass

    async def webSocketError(self, ws, error):
        pass


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlparse(request.url).path.split("/")  # ["", "obj", name, op]
        if len(parts) != 4 or parts[1] != "obj" or not parts[2] or not parts[3]:
            return _text("not found", 404)
        ns = self.env.BENCH
        return await ns.get(ns.idFromName(unquote(parts[2]))).fetch(request)
