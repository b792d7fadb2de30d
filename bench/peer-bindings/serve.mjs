// Serve bench/peer-bindings/worker.mjs on Miniflare (what `wrangler dev` runs) with KV, D1 and
// R2 persisted under STATE_DIR, as `wrangler dev --persist-to` does: node serve.mjs PORT STATE_DIR
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";

const [port, state] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const mf = new Miniflare({
  modules: true,
  scriptPath: path.join(here, "worker.mjs"),
  compatibilityDate: "2026-01-01",
  kvNamespaces: ["KV"],
  d1Databases: ["DB"],
  r2Buckets: ["R2"],
  kvPersist: path.join(state, "kv"),
  d1Persist: path.join(state, "d1"),
  r2Persist: path.join(state, "r2"),
  host: "127.0.0.1",
  port: Number(port),
});
await mf.ready;
console.log(`miniflare ready on http://127.0.0.1:${port}`);
const stop = async () => { await mf.dispose(); process.exit(0); };
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
