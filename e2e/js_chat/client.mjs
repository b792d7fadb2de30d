// The client of e2e/test_chat_differential.py: Cloudflare's own `useAgentChat` (npm
// @cloudflare/ai-chat over `useAgent` from npm agents), rendered headless with
// react-test-renderer, so the resume probe, the ACK and the message building are the published
// packages' code on both the JavaScript and the Python agent. It records every frame crossing
// each socket, in order, and prints them; the test compares two runs.
//
// usage: node client.mjs <host:port> <agent class> <instance name> <turn|resume> <text> <until>
//   turn    mount A, send <text>, wait for <until>
//   resume  mount A, send <text>, unmount A after 3 text deltas, mount B (it resumes through the
//           handshake), wait on B for <until>
//   <until> done       a done frame that is not `outcome: "recovering"`
//           recovered  recovering:false and such a done frame
//           terminal   recovering:false and the terminal error frame (done, error)
//           approve    a done frame; then answer the tool part in `approval-requested` with the
//           deny       hook's addToolApprovalResponse (approved or not) and wait for the
//                      continuation's done frame and for the hook to render the settled part or
//                      fail (reported as `answer`)
// then until the hook is no longer submitted/streaming, and GET /get-messages. Prints ONE JSON
// line on stdout: {clients: {A: {frames, statuses, messages}, B?: …}, getMessages, answer,
// elapsedMs} (`answer`: null, or what an approval scenario answered and how the hook ended);
// logs go to stderr. Exit 1 after the 60 s watchdog (stderr says what it waited for), 2 on bad
// usage. No fixed sleeps: every wait polls observed state every 10 ms.

import { format } from "node:util";
import React from "react";
import TestRenderer from "react-test-renderer";
import WebSocket from "ws";
import { useAgent } from "agents/react";
import { useAgentChat } from "@cloudflare/ai-chat/react";

const RESPONSE = "cf_agent_use_chat_response";
const UNTIL = ["done", "recovered", "terminal", "approve", "deny"];
const started = Date.now();
const [host, agentClass, name, scenario, text, until] = process.argv.slice(2);
if (!host || !agentClass || !name || !["turn", "resume"].includes(scenario) || !text) {
  console.error("usage: node client.mjs <host:port> <class> <name> <turn|resume> <text> <until>");
  process.exit(2);
}
if (!UNTIL.includes(until)) {
  console.error(`<until> is one of ${UNTIL.join(", ")}, not ${JSON.stringify(until)}`);
  process.exit(2);
}

// stdout carries only the result line; React's notices for a headless renderer are dropped.
globalThis.IS_REACT_ACT_ENVIRONMENT = false;
const NOISE = [/react-test-renderer is deprecated/, /not configured to support act/];
for (const level of ["log", "info", "debug", "warn", "error"]) {
  console[level] = (...args) => {
    const line = format(...args);
    if (!NOISE.some((re) => re.test(line))) process.stderr.write(`${line}\n`);
  };
}

let waitingFor = "start";
const clients = {};
const watchdog = setTimeout(() => {
  const seen = Object.values(clients).map(
    (c) => `${c.label}: status ${c.api?.status} (${c.api?.error?.stack ?? c.api?.error}), messages ${JSON.stringify(c.api?.messages)}, last frames ${JSON.stringify(c.inbound().slice(-8))}`,
  );
  process.stderr.write(`timed out after 60 s waiting for: ${waitingFor}\n${seen.join("\n")}\n`);
  process.exit(1);
}, 60_000);
process.on("unhandledRejection", (error) => {
  process.stderr.write(`unhandled rejection: ${error?.stack ?? error}\n`);
  process.exit(1);
});

function wait(what, predicate) {
  waitingFor = what;
  return new Promise((resolve) => {
    const check = () => (predicate() ? resolve() : setTimeout(check, 10));
    check();
  });
}

function parse(data) {
  try {
    return JSON.parse(String(data));
  } catch {
    return String(data);
  }
}

const is = (type) => (frame) => frame?.type === type;

/** Mount one headless `useAgentChat` (a browser tab); its socket is tapped before it opens. */
function mount(label) {
  const c = { label, socket: null, api: null, frames: [], statuses: [], closes: 0 };
  c.inbound = () => c.frames.filter((f) => f.dir === "in").map((f) => f.frame);
  c.outbound = () => c.frames.filter((f) => f.dir === "out").map((f) => f.frame);
  c.deltas = () =>
    c.inbound().filter((f) => f.type === RESPONSE && !f.error && f.body?.includes('"text-delta"'));
  c.settled = () =>
    c.outbound().some(is("cf_agent_stream_resume_request")) &&
    c.inbound().some((f) => is("cf_agent_stream_resume_none")(f) || is("cf_agent_stream_resuming")(f)) &&
    c.api?.status === "ready";

  function tap(socket) {
    c.socket = socket;
    const send = socket.send.bind(socket);
    socket.send = (data) => {
      c.frames.push({ dir: "out", frame: parse(data) });
      return send(data);
    };
    socket.addEventListener("message", (event) => c.frames.push({ dir: "in", frame: parse(event.data) }));
    socket.addEventListener("close", () => c.closes++);
  }

  function Chat() {
    const agent = useAgent({ agent: agentClass, name, host, WebSocket });
    if (c.socket !== agent) tap(agent); // the committed render's socket (a suspended one never opens)
    const chat = useAgentChat({ agent });
    c.api = chat;
    if (c.statuses.at(-1) !== chat.status) c.statuses.push(chat.status);
    return null;
  }

  const suspense = React.createElement(React.Suspense, { fallback: null }, React.createElement(Chat));
  c.renderer = TestRenderer.create(suspense);
  clients[label] = c;
  return c;
}

/** Whether `c` has seen the end `until` names. */
function ended(c) {
  const frames = c.inbound();
  const recovered = frames.some((f) => is("cf_agent_chat_recovering")(f) && f.recovering === false);
  const done = frames.some((f) => f.type === RESPONSE && f.done && !f.error && f.outcome !== "recovering");
  const terminal = frames.some((f) => f.type === RESPONSE && f.done && f.error);
  if (until === "done" || until === "approve" || until === "deny") return done;
  if (until === "recovered") return recovered && done;
  return recovered && terminal;
}

async function getMessages(c) {
  const url = new URL(c.socket.getHttpUrl());
  url.searchParams.delete("_pk");
  url.pathname += "/get-messages";
  const response = await fetch(url);
  return { status: response.status, body: parse(await response.text()) };
}

/**
 * The approval scenarios: answer the tool part the hook renders in `approval-requested` with the
 * hook's own `addToolApprovalResponse({id: part.approval.id, approved})` — the id the server sent
 * in `tool-approval-request` — and wait for the continuation's done frame, then until the hook has
 * either rendered the settled part (ready) or given up (`error`: how the published hook meets the
 * package's replayed continuation; the test names it). What was answered and how the hook ended is
 * reported beside the frames.
 */
async function answerApproval(c, approved) {
  const tools = () => c.api.messages.flatMap((m) => m.parts.filter((p) => p.toolCallId));
  await wait("a tool part waiting for approval", () => tools().some((p) => p.state === "approval-requested"));
  const part = tools().find((p) => p.state === "approval-requested");
  const from = c.frames.length;
  await c.api.addToolApprovalResponse({ id: part.approval.id, approved });
  const after = () => c.frames.slice(from).filter((f) => f.dir === "in").map((f) => f.frame);
  await wait("the continuation's done frame", () => after().some((f) => f.type === RESPONSE && f.done));
  const settled = ["output-available", "output-denied", "output-error"];
  const now = () => tools().find((p) => p.toolCallId === part.toolCallId);
  await wait("the hook renders the settled part, or fails", () => {
    return (settled.includes(now()?.state) && c.api.status === "ready") || c.api.status === "error";
  });
  return {
    approvalId: part.approval.id,
    toolCallId: part.toolCallId,
    hook: { status: c.api.status, error: c.api.error?.message ?? null, part: now() },
  };
}

const a = mount("A");
await wait("A mounts and its resume probe is answered", a.settled);
a.api.sendMessage({ text }).catch((error) => {
  process.stderr.write(`sendMessage: ${error?.stack ?? error}\n`);
  process.exit(1);
});
let last = a;
if (scenario === "resume") {
  await wait("A receives 3 text deltas", () => a.deltas().length >= 3);
  a.renderer.unmount(); // the reload: A's socket closes, the turn goes on
  await wait("A's socket closes", () => a.closes > 0);
  last = mount("B");
}
await wait(`${last.label} sees the end (${until})`, () => ended(last));
await wait(`${last.label}'s hook settles`, () => !["submitted", "streaming"].includes(last.api?.status));
let answer = null;
if (until === "approve" || until === "deny") answer = await answerApproval(last, until === "approve");
const stored = await getMessages(last);
const report = (c) => ({ frames: c.frames, statuses: c.statuses, messages: c.api?.messages ?? [] });
const result = {
  clients: Object.fromEntries(Object.values(clients).map((c) => [c.label, report(c)])),
  getMessages: stored,
  answer,
  elapsedMs: Date.now() - started,
};
for (const c of Object.values(clients)) if (c !== a || scenario !== "resume") c.renderer.unmount();
clearTimeout(watchdog);
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
