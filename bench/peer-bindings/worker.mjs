// The bindings bench's Worker for Miniflare: the routes of bench/app/bindings/src/entry.py.
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = Object.fromEntries(url.searchParams);
    switch (url.pathname) {
      case "/kv/get": {
        const value = await env.KV.get(q.k);
        return new Response(value ?? "", { status: value === null ? 404 : 200 });
      }
      case "/kv/put":
        await env.KV.put(q.k, await request.text());
        return new Response("ok");
      case "/d1/get": {
        const v = await env.DB.prepare("SELECT v FROM items WHERE id = ?").bind(Number(q.id)).first("v");
        return new Response(v ?? "", { status: v === null ? 404 : 200 });
      }
      case "/d1/insert":
        await env.DB.prepare("INSERT INTO log (v) VALUES (?)").bind(await request.text()).run();
        return new Response("ok");
      case "/d1/seed": {
        await env.DB.exec(
          "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, v TEXT);\n" +
          "CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, v TEXT)");
        const insert = env.DB.prepare("INSERT OR REPLACE INTO items (id, v) VALUES (?, ?)");
        const n = Number(q.n);
        await env.DB.batch(Array.from({ length: n }, (_, i) => insert.bind(i, `value-${i}`)));
        return new Response("ok");
      }
      case "/r2/put":
        await env.R2.put(q.k, await request.arrayBuffer());
        return new Response("ok");
      case "/r2/get": {
        const found = await env.R2.get(q.k);
        return found === null ? new Response("", { status: 404 }) : new Response(found.body);
      }
      case "/obj/__bench_ready__/ping":
        return new Response("ok");
      default:
        return new Response("not found", { status: 404 });
    }
  },
};
