// Serve bench/peer-bindings/durable-worker.mjs on Miniflare (what `wrangler dev` runs) with its
// queue and workflows persisted under STATE_DIR, the batch settings of bench/app/durable:
// node durable-serve.mjs PORT STATE_DIR
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";

const [port, state] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const mf = new Miniflare({
  modules: true,
  scriptPath: path.join(here, "durable-worker.mjs"),
  compatibilityDate: "2026-01-01",
  queueProducers: { Q: { queueName: "bench-q" } },
  queueConsumers: { "bench-q": { maxBatchSize: 100, maxBatchTimeout: 1, maxRetries: 3 } },
  workflows: {
    STEPS: { name: "bench-steps", className: "Steps" },
    SLEEPER: { name: "bench-sleeper", className: "Sleeper" },
  },
  workflowsPersist: path.join(state, "workflows"),
  durableObjectsPersist: path.join(state, "do"),
  host: "127.0.0.1",
  port: Number(port),
});
await mf.ready;
console.log(`miniflare ready on http://127.0.0.1:${port}`);
const stop = async () => { await mf.dispose(); process.exit(0); };
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
