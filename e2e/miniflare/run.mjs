// Run one Python Worker scenario on Miniflare (what `wrangler dev` runs) and print its answers.
//
//   node run.mjs SCENARIO.py SDK_DIR [PATH ...]
//
// The scenario is a Python Worker (class Default(WorkerEntrypoint)); it runs on workerd with
// Pyodide, with the Python Workers SDK served as python_modules/ (as pywrangler bundles it), and
// with every binding the doemu side has: KV "KV", D1 "DB", R2 "R2", services "SVC" (its entrypoint
// "Named") and "SELF", a cron trigger. For each PATH (default "/") the Worker's answer is printed as
// one JSON line {path, status, headers, body}; "scheduled:CRON" runs its scheduled() handler, and
// "PATH|Name: value" sends that request header. The environment variable ASSETS (JSON: Miniflare's
// `assets` option) adds static assets. MINIFLARE_WORKERD_PATH must name a workerd that can run
// Python offline (see the test).
import fs from "node:fs";
import path from "node:path";
import { Miniflare } from "miniflare";

const [scenario, sdk, ...paths] = process.argv.slice(2);
const modules = [
  { type: "PythonModule", path: "worker.py", contents: fs.readFileSync(scenario, "utf8") },
  // The scenarios' shared recorder, beside the Worker.
  { type: "PythonModule", path: "record.py", contents: fs.readFileSync(path.join(path.dirname(scenario), "record.py"), "utf8") },
];
function addSdk(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!entry.name.includes("__pycache__") && !entry.name.endsWith(".dist-info")) addSdk(full);
      continue;
    }
    if (entry.name.endsWith(".pyc") || entry.name.endsWith(".pyi")) continue;
    const name = "python_modules/" + path.relative(sdk, full);
    modules.push(
      entry.name.endsWith(".py")
        ? { type: "PythonModule", path: name, contents: fs.readFileSync(full, "utf8") }
        : { type: "Data", path: name, contents: fs.readFileSync(full) },
    );
  }
}
addSdk(sdk);
const source = fs.readFileSync(scenario, "utf8");
const options = {
  name: "main",
  modules,
  compatibilityDate: "2026-05-01",
  compatibilityFlags: ["python_workers_development", "no_python_workers_20250116", "python_workers"],
  kvNamespaces: ["KV"],
  d1Databases: ["DB"],
  r2Buckets: ["R2"],
  serviceBindings: source.includes("class Named(") ? { SVC: { name: "main", entrypoint: "Named" }, SELF: "main" } : {},
  unsafeTriggerHandlers: true,
};
if (process.env.ASSETS) options.assets = JSON.parse(process.env.ASSETS);
const mf = new Miniflare(options);
try {
  for (const p of paths.length ? paths : ["/"]) {
    if (p.startsWith("scheduled:")) {
      const worker = await mf.getWorker();
      const result = await worker.scheduled({ cron: p.slice("scheduled:".length), scheduledTime: new Date(1700000000000) });
      console.log(JSON.stringify({ path: p, status: 200, headers: {}, body: JSON.stringify(result) }));
      continue;
    }
    const [target, header] = p.split("|");
    const headers = header ? { [header.split(":")[0].trim()]: header.split(":").slice(1).join(":").trim() } : {};
    const response = await mf.dispatchFetch("http://localhost" + target, { redirect: "manual", headers });
    console.log(JSON.stringify({
      path: p,
      status: response.status,
      headers: Object.fromEntries(response.headers),
      body: await response.text(),
    }));
  }
} finally {
  await mf.dispose();
}
