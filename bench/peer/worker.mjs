// The benchmark contract (bench/README.md) as a JavaScript Durable Object for bare workerd.
// The entry worker routes /obj/<name>/<op> to idFromName(name); BenchDO answers with its own SQL.
import { DurableObject } from "cloudflare:workers";

const TEXT = { "content-type": "text/plain; charset=utf-8" };
const JSONH = { "content-type": "application/json" };
const text = (body, status = 200) => new Response(body, { status, headers: TEXT });
const json = (value) => new Response(JSON.stringify(value), { headers: JSONH });

export class BenchDO extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)");
    this.sql.exec(
      "CREATE TABLE IF NOT EXISTS alarmlog (seq INTEGER PRIMARY KEY AUTOINCREMENT, " +
        "set_at INTEGER NOT NULL, scheduled INTEGER NOT NULL, fired INTEGER)",
    );
  }

  async fetch(request) {
    const url = new URL(request.url);
    const op = url.pathname.split("/")[3] || "";
    const method = request.method;
    const sql = this.sql;
    switch (`${method} ${op}`) {
      case "GET ping":
        return text("ok");
      case "POST incr": {
        const row = sql
          .exec(
            "INSERT INTO counter (id, value) VALUES (1, 1) " +
              "ON CONFLICT(id) DO UPDATE SET value = value + 1 RETURNING value",
          )
          .one();
        return text(String(row.value));
      }
      case "GET get": {
        const rows = sql.exec("SELECT value FROM counter WHERE id = 1").toArray();
        return text(String(rows.length ? rows[0].value : 0));
      }
      case "POST alarm": {
        const raw = url.searchParams.get("ms");
        const ms = raw === null ? 0 : Number(raw);
        if (!(ms >= 0) || !Number.isFinite(ms)) return text("bad ms", 400);
        const setAt = Date.now();
        const scheduled = setAt + Math.round(ms);
        sql.exec("INSERT INTO alarmlog (set_at, scheduled, fired) VALUES (?, ?, NULL)", setAt, scheduled);
        await this.ctx.storage.setAlarm(scheduled);
        return json({ set: setAt, scheduled });
      }
      case "GET alarmlog": {
        const rows = [];
        for (const r of sql.exec("SELECT set_at, scheduled, fired FROM alarmlog ORDER BY seq"))
          rows.push({ set: r.set_at, scheduled: r.scheduled, fired: r.fired });
        return json(rows);
      }
      case "GET ws": {
        if ((request.headers.get("upgrade") || "").toLowerCase() !== "websocket")
          return text("expected websocket upgrade", 426);
        const [client, server] = Object.values(new WebSocketPair());
        this.ctx.acceptWebSocket(server); // hibernation API
        return new Response(null, { status: 101, webSocket: client });
      }
      default:
        return text("not found", 404);
    }
  }

  async alarm() {
    this.sql.exec(
      "UPDATE alarmlog SET fired = ? WHERE seq = (SELECT max(seq) FROM alarmlog WHERE fired IS NULL)",
      Date.now(),
    );
  }

  webSocketMessage(ws, message) {
    ws.send(message);
  }

  webSocketClose(ws, code, reason) {
    try {
      ws.close(code === 1005 ? 1000 : code, reason);
    } catch {
      // already closed
    }
  }

  webSocketError() {}
}

export default {
  async fetch(request, env) {
    const parts = new URL(request.url).pathname.split("/"); // ["", "obj", name, op]
    if (parts.length !== 4 || parts[1] !== "obj" || !parts[2] || !parts[3]) return text("not found", 404);
    return env.BENCH.get(env.BENCH.idFromName(decodeURIComponent(parts[2]))).fetch(request);
  },
};
