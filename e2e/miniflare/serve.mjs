// Serve one JavaScript Worker on Miniflare (what `wrangler dev` runs) over HTTP, for the
// differential tests of Queues and Workflows (e2e/test_queues_differential.py,
// e2e/test_workflows_differential.py).
//
//   node serve.mjs WORKER.mjs OPTIONS.json
//
// OPTIONS.json holds Miniflare options (queueProducers, queueConsumers, workflows, ...), made by
// the test from the Python twin's wrangler.toml so that both sides run the same configuration.
// Prints one JSON line {"url": ...} once the Worker answers on 127.0.0.1 (a free port), and runs
// until its standard input closes (the test ends it that way, or with a signal).
import fs from "node:fs";
import { Miniflare } from "miniflare";

const [script, optionsFile] = process.argv.slice(2);
const mf = new Miniflare({
  name: "main",
  modules: true,
  scriptPath: script,
  compatibilityDate: "2026-05-01",
  host: "127.0.0.1",
  port: 0,
  ...JSON.parse(fs.readFileSync(optionsFile, "utf8")),
});
const url = await mf.ready;
console.log(JSON.stringify({ url: url.href }));
let closing = false;
async function close() {
  if (closing) return;
  closing = true;
  await mf.dispose();
  process.exit(0);
}
process.stdin.on("end", close);
process.stdin.on("close", close);
process.stdin.resume();
process.on("SIGTERM", close);
process.on("SIGINT", close);
