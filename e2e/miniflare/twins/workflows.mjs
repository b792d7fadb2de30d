// The JavaScript twin of e2e/apps/workflows_differential/src/entry.py, run on Miniflare by
// e2e/test_workflows_differential.py: the same workflow (one class, a scenario per params.kind),
// the same HTTP surface, the same records. Miniflare runs no Python WorkflowEntrypoint, so this
// twin is the reference.
//
// POST /create {id, params}, GET /status?id=, POST /control {id, action} (pause, resume,
// terminate, restart), POST /event {id, type, payload}: the binding's calls; each answers JSON,
// {"error": message} when the call throws. GET /effects?id= answers every side effect the
// instance recorded, in order: {what, at} ("run" each time run() starts, a step's name each time
// its callback runs).
import { WorkflowEntrypoint } from "cloudflare:workers";
import { NonRetryableError } from "cloudflare:workflows";

const EFFECTS = [];

function effect(id, what) {
  EFFECTS.push({ id, what, at: Date.now() });
}

function attempts(id, what) {
  return EFFECTS.filter((e) => e.id === id && e.what === what).length;
}

function describe(error) {
  return `${error.name}: ${error.message}`;
}

export class Flow extends WorkflowEntrypoint {
  async run(event, step) {
    const id = event.instanceId;
    const params = event.payload;
    effect(id, "run");
    if (params.kind === "cache") {
      const a = await step.do("a", async () => (effect(id, "a"), 1));
      await step.sleep("nap", params.nap);
      const b = await step.do("b", async () => (effect(id, "b"), a + 1));
      return { a, b };
    }
    if (params.kind === "retries") {
      const out = {};
      for (const backoff of ["constant", "linear", "exponential"]) {
        const name = `flaky-${backoff}`;
        const config = { retries: { limit: 3, delay: params.delay, backoff } };
        out[backoff] = await step.do(name, config, async () => {
          effect(id, name);
          const attempt = attempts(id, name);
          if (attempt <= 3) throw new Error(`${name} failed on attempt ${attempt}`);
          return attempt;
        });
      }
      try {
        await step.do("doomed", { retries: { limit: 1, delay: params.delay, backoff: "constant" } }, async () => {
          effect(id, "doomed");
          throw new Error(`doomed on attempt ${attempts(id, "doomed")}`);
        });
      } catch (error) {
        out.doomed = error.message;
      }
      try {
        await step.do("refused", { retries: { limit: 5, delay: params.delay } }, async () => {
          effect(id, "refused");
          throw new NonRetryableError("refused for good");
        });
      } catch (error) {
        out.refused = error.message;
      }
      return out;
    }
    if (params.kind === "fatal") {
      await step.do("fatal", { retries: { limit: 5, delay: params.delay } }, async () => {
        effect(id, "fatal");
        throw new NonRetryableError("no point in retrying");
      });
      return "unreachable";
    }
    if (params.kind === "events") {
      const early = await step.waitForEvent("early", { type: "early", timeout: "1 hour" });
      effect(id, "waiting for approval");
      const approval = await step.waitForEvent("approval", { type: "approve", timeout: "1 hour" });
      let late;
      try {
        late = await step.waitForEvent("late", { type: "late", timeout: params.timeout });
      } catch (error) {
        late = describe(error);
      }
      return { early: early.payload, approval: approval.payload, type: approval.type, late };
    }
    if (params.kind === "lifecycle") {
      await step.do("work", async () => (effect(id, "work"), "worked"));
      const go = await step.waitForEvent("go", { type: "go", timeout: "1 hour" });
      return { done: go.payload };
    }
    throw new Error(`unknown kind ${params.kind}`);
  }
}

async function answer(work) {
  try {
    return Response.json((await work()) ?? { ok: true });
  } catch (error) {
    return Response.json({ error: error.message });
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const body = request.method === "POST" ? await request.json() : {};
    const id = body.id ?? url.searchParams.get("id");
    switch (url.pathname) {
      case "/create":
        return answer(async () => ({ id: (await env.FLOW.create({ id, params: body.params })).id }));
      case "/status":
        return answer(async () => {
          const { status, output, error } = await (await env.FLOW.get(id)).status();
          return { status, output: output ?? null, error: error ?? null };
        });
      case "/control":
        return answer(async () => void (await (await env.FLOW.get(id))[body.action]()));
      case "/event":
        return answer(async () => void (await (await env.FLOW.get(id)).sendEvent({ type: body.type, payload: body.payload })));
      case "/effects":
        return Response.json(EFFECTS.filter((e) => e.id === id).map(({ what, at }) => ({ what, at })));
    }
    return new Response("not found", { status: 404 });
  },
};
