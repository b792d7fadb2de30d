// The JavaScript twin of e2e/apps/queues_differential/src/entry.py, run on Miniflare by
// e2e/test_queues_differential.py: the same HTTP surface, the same consumer, the same records.
//
// POST /send {binding, messages: [{body, contentType, delaySeconds}], batch, delaySeconds}
//   sends through env[binding] (sendBatch when `batch`), answers {at: Date.now()}; a body
//   {"$bytes": [...]} is sent as bytes.
// GET /log answers {deliveries: [{queue, at, messages: [{id, attempts, timestamp, body}]}]}: every
//   batch the consumer received, in order; a body is recorded as {kind, value} (kind "text" for
//   a string, "bytes" for an ArrayBuffer, its value the list of byte values, "json" otherwise).
// The consumer acts on a message whose body has a "plan": plan[attempts - 1] is what it does on
// that attempt: "ack", "retry", "retry:N" (delaySeconds N), "ackAll", "retryAll", "retryAll:N",
// "throw" (queue() throws after the rest), or nothing ("none", or no entry).
const DELIVERIES = [];

function toBody(value) {
  if (value && typeof value === "object" && Array.isArray(value.$bytes)) return new Uint8Array(value.$bytes);
  return value;
}

function describe(body) {
  if (typeof body === "string") return { kind: "text", value: body };
  if (body instanceof ArrayBuffer) return { kind: "bytes", value: [...new Uint8Array(body)] };
  if (ArrayBuffer.isView(body)) return { kind: "bytes", value: [...new Uint8Array(body.buffer, body.byteOffset, body.byteLength)] };
  return { kind: "json", value: body };
}

function split(action) {
  const [verb, arg] = action.split(":");
  return [verb, arg === undefined ? undefined : { delaySeconds: Number(arg) }];
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/send") {
      const order = await request.json();
      const queue = env[order.binding];
      const messages = order.messages.map((m) => {
        const out = { body: toBody(m.body) };
        if (m.contentType !== undefined) out.contentType = m.contentType;
        if (m.delaySeconds !== undefined) out.delaySeconds = m.delaySeconds;
        return out;
      });
      const at = Date.now();
      if (order.batch) {
        await queue.sendBatch(messages, order.delaySeconds === undefined ? undefined : { delaySeconds: order.delaySeconds });
      } else {
        for (const { body, ...options } of messages) await queue.send(body, options);
      }
      return Response.json({ at });
    }
    if (url.pathname === "/log") return Response.json({ deliveries: DELIVERIES });
    return new Response("not found", { status: 404 });
  },

  async queue(batch) {
    const record = { queue: batch.queue, at: Date.now(), messages: [] };
    DELIVERIES.push(record);
    const batchActions = [];
    let fail = false;
    for (const message of batch.messages) {
      record.messages.push({
        id: message.id,
        attempts: message.attempts,
        timestamp: message.timestamp.getTime(),
        body: describe(message.body),
      });
      const plan = message.body && Array.isArray(message.body.plan) ? message.body.plan : [];
      const [verb, options] = split(plan[message.attempts - 1] ?? "none");
      if (verb === "ack") message.ack();
      else if (verb === "retry") message.retry(options);
      else if (verb === "ackAll" || verb === "retryAll") batchActions.push([verb, options]);
      else if (verb === "throw") fail = true;
    }
    for (const [verb, options] of batchActions) {
      if (verb === "ackAll") batch.ackAll();
      else batch.retryAll(options);
    }
    if (fail) throw new Error("the consumer failed on purpose");
  },
};
