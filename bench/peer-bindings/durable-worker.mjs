// The durable-work bench's Worker for Miniflare: the routes of bench/app/durable/src/entry.py
// (see bench/durableload.py), with the same queue and workflows.
import { WorkflowEntrypoint } from "cloudflare:workers";

const COUNTS = { acked: 0, batches: 0, completed: 0 };
const WOKE = {};

export class Steps extends WorkflowEntrypoint {
  async run(event, step) {
    const total = event.payload.steps;
    let value = 0;
    for (let i = 0; i < total; i++) value += await step.do(`s${i}`, async () => i);
    return await step.do("finish", async () => {
      COUNTS.completed += 1;
      return value;
    });
  }
}

export class Sleeper extends WorkflowEntrypoint {
  async run(event, step) {
    const me = event.instanceId;
    const armed = await step.do("armed", async () => Date.now());
    await step.sleep("nap", event.payload.ms);
    const woke = await step.do("woke", async () => {
      const now = Date.now();
      WOKE[me] = now;
      return now;
    });
    return { armed, woke };
  }
}

const json = (value) =>
  new Response(JSON.stringify(value ?? null), { headers: { "content-type": "application/json" } });

export default {
  async queue(batch) {
    COUNTS.batches += 1;
    COUNTS.acked += batch.messages.length;
    batch.ackAll();
  },
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = Object.fromEntries(url.searchParams);
    switch (url.pathname) {
      case "/q/send": {
        const n = Number(q.n);
        await env.Q.sendBatch(Array.from({ length: n }, (_, i) => ({ body: { i } })));
        return new Response("ok");
      }
      case "/counts":
        return json(COUNTS);
      case "/wf/create":
        await env.STEPS.create({ id: q.id, params: { steps: Number(q.steps) } });
        return new Response("ok");
      case "/wf/sleeper":
        await env.SLEEPER.create({ id: q.id, params: { ms: Number(q.ms) } });
        return new Response("ok");
      case "/wf/woke":
        return json(WOKE[q.id]);
      case "/wf/status": {
        const binding = q.kind === "sleeper" ? env.SLEEPER : env.STEPS;
        const status = await (await binding.get(q.id)).status();
        return json({ status: status.status, error: status.error ?? null, output: status.output ?? null });
      }
      case "/obj/__bench_ready__/ping":
        return new Response("ok");
      default:
        return new Response("not found", { status: 404 });
    }
  },
};
