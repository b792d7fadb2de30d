// Drives a doemu (Python) agent with Cloudflare's own JavaScript client, unchanged:
// `AgentClient` from the npm `agents` package. Node 20 has no global WebSocket, so the `ws`
// package is passed in through PartySocket's `WebSocket` option.
//
// usage: node client.mjs <host:port> <instance name>
// Prints one JSON line with everything observed; exits non-zero on failure or after 30 s.

import { AgentClient } from "agents/client";
import WebSocket from "ws";

const [host, name] = process.argv.slice(2);
if (!host || !name) {
  console.error("usage: node client.mjs <host:port> <instance name>");
  process.exit(2);
}

const watchdog = setTimeout(() => {
  console.error("timed out after 30 s");
  process.exit(1);
}, 30_000);

/** Resolve when `predicate()` is truthy; polled on the event loop, bounded by the watchdog. */
function until(predicate) {
  return new Promise((resolve) => {
    const check = () => (predicate() ? resolve() : setTimeout(check, 10));
    check();
  });
}

function open(updates) {
  return new AgentClient({
    agent: "CounterAgent", // the class name: the client kebab-cases it to `counter-agent`
    name,
    host,
    WebSocket,
    onStateUpdate: (state, source) => updates.push({ state, source }),
  });
}

const aUpdates = [];
const bUpdates = [];
const a = open(aUpdates);
const b = open(bUpdates);
await Promise.all([a.ready, b.ready]);

const result = {
  identity: { identified: a.identified, name: a.name, agent: a.agent },
  initialState: a.state,
};

// A client-side state change is persisted by the agent and broadcast to the other client.
const mine = { count: 5, history: ["set by node"] };
a.setState(mine);
await until(() => bUpdates.some((u) => u.state?.count === 5));
result.broadcastToB = bUpdates.find((u) => u.state?.count === 5);

// @callable methods over the SDK's RPC frames.
result.increment = await a.call("increment", [2]);
await until(() => aUpdates.some((u) => u.source === "server" && u.state?.count === 7));
result.stateAfterIncrement = a.state;
result.greet = await a.call("greet", ["node"]);
try {
  await a.call("missing", []);
  result.missing = "resolved?!";
} catch (error) {
  result.missing = error.message;
}
const chunks = [];
result.countdownDone = await new Promise((resolve, reject) => {
  a.call("countdown", [3], {
    stream: { onChunk: (c) => chunks.push(c), onDone: resolve, onError: reject },
  }).catch(reject);
});
result.countdownChunks = chunks;

a.close();
b.close();
clearTimeout(watchdog);
console.log(JSON.stringify(result));
process.exit(0);
