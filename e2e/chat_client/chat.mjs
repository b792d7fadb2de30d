// Drives an AIChatAgent with Cloudflare's own chat client, unchanged: the `useAgentChat` hook of
// npm `@cloudflare/ai-chat` (over `useAgent` from npm `agents`) rendered headless with
// `react-test-renderer` inside a `Suspense` boundary. So the `/get-messages` fetch, the resume
// probe, the ACK, the replay handling and the message building are Cloudflare's code, not ours;
// this file only mounts renderers, calls the hook's API and records what crossed each socket.
// Node 20 has no global WebSocket, so the `ws` package goes in through PartySocket's `WebSocket`
// option (as in `e2e/node_client/client.mjs`).
//
// usage: node chat.mjs <host:port> <agent class> <instance name> <scenario>
//   scenario: send|reload|clear|multi, or an approval one (README.md):
//   approve|deny|ask|answer-approve|answer-deny
// Prints ONE JSON line on stdout (README.md); everything else goes to stderr. Exit status 0 when
// every check of the scenario held; 1 when one failed (the JSON line is still printed), on an
// error, or after the 30 s watchdog; 2 on bad usage. No fixed sleeps: every wait polls observed
// state (frames, status, messages).

import { format } from "node:util";
import React from "react";
import TestRenderer from "react-test-renderer";
import WebSocket from "ws";
import { AgentClient } from "agents/client";
import { useAgent } from "agents/react";
import { useAgentChat } from "@cloudflare/ai-chat/react";

const APPROVALS = ["approve", "deny", "ask", "answer-approve", "answer-deny"];
const SCENARIOS = ["send", "reload", "clear", "multi", ...APPROVALS];
const RESPONSE = "cf_agent_use_chat_response";
const started = Date.now();

const [host, agentClass, name, scenario] = process.argv.slice(2);
if (!host || !agentClass || !name || !SCENARIOS.includes(scenario)) {
  const usage = `<host:port> <agent class> <instance name> <${SCENARIOS.join("|")}>`;
  console.error(`usage: node chat.mjs ${usage}`);
  process.exit(2);
}
// Milliseconds between chunks, sent as the request body's `delayMs` (the scripted test models
// honour it). Only `reload` sends it: its stream must still be live when the first tab goes.
const delayMs = Number(process.env.CHAT_DELAY_MS ?? 100);

// stdout carries only the result line: library logs go to stderr, and React's two expected
// notices for a headless renderer (react-test-renderer's deprecation, the act() environment) are
// dropped. The hook is driven outside act(), as a browser drives it.
globalThis.IS_REACT_ACT_ENVIRONMENT = false;
const NOISE = [/react-test-renderer is deprecated/, /not configured to support act/];
const toStderr = (...args) => {
  const text = format(...args);
  if (!NOISE.some((re) => re.test(text))) process.stderr.write(`${text}\n`);
};
for (const level of ["log", "info", "debug", "warn", "error"]) console[level] = toStderr;

let step = "start";
const clients = [];
const http = [];

const watchdog = setTimeout(() => {
  const seen = clients.map((c) => {
    const last = JSON.stringify(c.trace().slice(-12));
    return `${c.label}: status=${c.api?.status} last frames=${last}`;
  });
  process.stderr.write(`timed out after 30 s waiting for: ${step}\n${seen.join("\n")}\n`);
  process.exit(1);
}, 30_000);
process.on("unhandledRejection", (error) => fail(`unhandled rejection: ${error?.stack ?? error}`));

function fail(message) {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

/** Resolve once `predicate()` is truthy, polled on the event loop; the watchdog bounds it. */
function until(what, predicate) {
  step = what;
  return new Promise((resolve) => {
    const check = () => (predicate() ? resolve() : setTimeout(check, 10));
    check();
  });
}

// Every fetch the hook makes (its `/get-messages`) is recorded with its answer's status.
const realFetch = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  const response = await realFetch(url, init);
  http.push({ url: String(url), status: response.status });
  // The hook would quietly render an empty chat on a failed `/get-messages`; a test must not.
  if (!response.ok) fail(`GET ${url} answered ${response.status} ${response.statusText}`);
  return response;
};

function parse(data) {
  try {
    return JSON.parse(String(data));
  } catch {
    return String(data);
  }
}

/** The UI-message chunk in a response frame's `body`; undefined for control and error frames. */
function chunkOf(frame) {
  if (frame?.type !== RESPONSE || !frame.body || frame.error) return undefined;
  try {
    return JSON.parse(frame.body);
  } catch {
    return undefined;
  }
}

/** One short line per frame, e.g. `< use_chat_response text-delta seq=3 replay`. */
function describe({ dir, frame }) {
  const arrow = dir === "in" ? "<" : ">";
  if (typeof frame !== "object" || frame === null) return `${arrow} <not json>`;
  const words = [arrow, String(frame.type).replace(/^cf_agent_/, "")];
  if (frame.type === RESPONSE) {
    const chunk = chunkOf(frame);
    if (chunk) words.push(chunk.type);
    if (frame.error) words.push(`error=${JSON.stringify(frame.body)}`);
    if (frame.seq !== undefined) words.push(`seq=${frame.seq}`);
    if (frame.replay) words.push("replay");
    if (frame.replayComplete) words.push("replayComplete");
    if (frame.continuation) words.push("continuation");
    if (frame.done) words.push("done");
    if (frame.outcome) words.push(`outcome=${frame.outcome}`);
  } else if (frame.type === "cf_agent_chat_messages") {
    words.push(`n=${frame.messages?.length}`);
  } else if (frame.type === "cf_agent_stream_resume_none" && frame.reason) {
    words.push(`reason=${frame.reason}`);
  }
  if (frame.probeId !== undefined) words.push("probeId");
  return words.join(" ");
}

const textOf = (message) =>
  (message?.parts ?? [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");

const view = (messages) =>
  messages.map(({ id, role, parts, metadata }) =>
    metadata === undefined ? { id, role, parts } : { id, role, parts, metadata },
  );

const isType =
  (...types) =>
  (frame) =>
    types.includes(frame?.type);

/** An error thrown while rendering (e.g. the `/get-messages` fetch rejected) ends the run. */
class Failing extends React.Component {
  static getDerivedStateFromError() {
    return { failed: true };
  }
  componentDidCatch(error) {
    fail(`${this.props.label}: rendering failed: ${error?.stack ?? error}`);
  }
  render() {
    return this.state?.failed ? null : this.props.children;
  }
}

/**
 * Mount one headless `useAgentChat` (a browser tab) on the chat. Its socket is tapped on the
 * committed render, before the hook's effects open it, so every frame in both directions is
 * recorded in order.
 */
function mount(label, { body } = {}) {
  const c = { label, socket: null, api: null, frames: [], statuses: [], serverStreaming: [] };
  c.closes = 0;
  c.inbound = () => c.frames.filter((f) => f.dir === "in").map((f) => f.frame);
  c.outbound = () => c.frames.filter((f) => f.dir === "out").map((f) => f.frame);
  c.trace = () => c.frames.map(describe);
  c.requestId = () => c.outbound().find(isType("cf_agent_use_chat_request"))?.id;
  c.responses = (id) => c.inbound().filter((f) => f.type === RESPONSE && f.id === id);
  c.deltas = (id) =>
    c
      .responses(id)
      .map(chunkOf)
      .filter((chunk) => chunk?.type === "text-delta")
      .map((chunk) => chunk.delta);
  c.done = (id) => c.responses(id).some((f) => f.done);
  // The mount probe was answered and the hook settled: the chat is usable, as for a user.
  c.settled = () =>
    c.outbound().some(isType("cf_agent_stream_resume_request")) &&
    c.inbound().some(isType("cf_agent_identity")) &&
    c.inbound().some(isType("cf_agent_stream_resume_none", "cf_agent_stream_resuming")) &&
    c.api?.status === "ready";
  c.unmount = () => {
    if (!c.unmounted) c.renderer.unmount();
    c.unmounted = true;
  };

  function tap(socket) {
    c.socket = socket;
    const send = socket.send.bind(socket);
    socket.send = (data) => {
      c.frames.push({ dir: "out", frame: parse(data) });
      return send(data);
    };
    socket.addEventListener("message", (event) => {
      c.frames.push({ dir: "in", frame: parse(event.data) });
    });
    socket.addEventListener("close", () => c.closes++);
  }

  function Chat() {
    const agent = useAgent({ agent: agentClass, name, host, WebSocket });
    // A render that suspends on `/get-messages` throws its (never opened) socket away; the
    // committed render's socket is the one tapped.
    if (c.socket !== agent) tap(agent);
    const chat = useAgentChat({ agent, body });
    c.api = chat;
    if (c.statuses.at(-1) !== chat.status) c.statuses.push(chat.status);
    if (c.serverStreaming.at(-1) !== chat.isServerStreaming) {
      c.serverStreaming.push(chat.isServerStreaming);
    }
    return null;
  }

  const chat = React.createElement(Chat);
  const suspense = React.createElement(React.Suspense, { fallback: null }, chat);
  c.renderer = TestRenderer.create(React.createElement(Failing, { label }, suspense));
  clients.push(c);
  return c;
}

async function mountSettled(label, options) {
  const c = mount(label, options);
  await until(`${label} mounts and its resume probe is answered`, c.settled);
  return c;
}

/** A fresh GET of the chat's `/get-messages`, at the URL the hook derives from its socket. */
async function getMessages(c) {
  const url = new URL(c.socket.getHttpUrl());
  url.searchParams.delete("_pk");
  url.pathname += "/get-messages";
  const response = await realFetch(url);
  const text = await response.text();
  if (response.status !== 200) fail(`GET ${url} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}

/** `sendMessage(text)` through the hook; resolves with the chat request's id once it is sent. */
async function send(c, text) {
  c.api.sendMessage({ text }).catch((error) => {
    fail(`${c.label}.sendMessage: ${error?.stack ?? error}`);
  });
  await until(`${c.label} sends the chat request`, () => c.requestId() !== undefined);
  return c.requestId();
}

/** Wait for request `id` to end on `c`: its done frame, `status` ready, the reply rendered. */
async function finish(c, id) {
  await until(`${c.label} receives the done frame of ${id}`, () => {
    const error = c.responses(id).find((f) => f.error);
    if (error) fail(`${c.label}: the server ended ${id} with an error: ${JSON.stringify(error)}`);
    return c.done(id);
  });
  await until(`${c.label} renders the reply of ${id} and is ready`, () => {
    const last = c.api.messages.at(-1);
    const rendered = last?.role === "assistant" && textOf(last) === c.deltas(id).join("");
    return c.api.status === "ready" && rendered;
  });
}

function report(c, extra = {}) {
  const messages = view(c.api?.messages ?? []);
  return { statuses: c.statuses, messages, trace: c.trace(), frames: c.frames, ...extra };
}

async function sendScenario() {
  const a = await mountSettled("A");
  const requestId = await send(a, "hi");
  await finish(a, requestId);
  const stored = await getMessages(a);
  const [first, last] = a.api.messages;
  return {
    requestId,
    client: report(a),
    getMessages: stored,
    checks: {
      twoMessages: a.api.messages.length === 2,
      userFirst: first?.role === "user" && textOf(first) === "hi",
      sawStreamingStatus: a.statuses.includes("streaming"),
      endedReady: a.api.status === "ready",
      replyMatchesServer:
        stored.length === 2 && stored[1].id === last?.id && textOf(stored[1]) === textOf(last),
    },
  };
}

/** Index in `c.frames` of the first frame with `dir` matching `predicate` (after `from`). */
function indexOf(c, dir, predicate, from = -1) {
  return c.frames.findIndex((f, i) => i > from && f.dir === dir && predicate(f.frame));
}

async function reloadScenario() {
  const a = await mountSettled("A", { body: { delayMs } });
  const requestId = await send(a, "slow");
  await until("A receives 3 text deltas", () => a.deltas(requestId).length >= 3);
  // The reload: A's tree is unmounted, which closes its socket; the server turn keeps running.
  a.unmount();
  await until("A's socket closes", () => a.closes > 0);
  const partial = a.deltas(requestId);
  const aSawDone = a.done(requestId);
  if (aSawDone) {
    fail(`the reply to "slow" ended before the reload; the model must pace it by body.delayMs`);
  }

  const b = mount("B", { body: { delayMs } });
  const resuming = (f) => isType("cf_agent_stream_resuming")(f) && f.id === requestId;
  await until("B is told a stream can be resumed (or that none can)", () => {
    return b.inbound().some((f) => resuming(f) || isType("cf_agent_stream_resume_none")(f));
  });
  if (!b.inbound().some(resuming)) {
    fail(`B was told nothing can be resumed: ${JSON.stringify(b.trace())}`);
  }
  await finish(b, requestId);
  const stored = await getMessages(b);
  const fullText = textOf(stored.at(-1));
  const bText = textOf(b.api.messages.at(-1));
  const mine = (f) => f.id === requestId;
  const chunk = (f) => f.type === RESPONSE && mine(f) && chunkOf(f) !== undefined;
  const order = {
    probe: indexOf(b, "out", isType("cf_agent_stream_resume_request")),
    resuming: indexOf(b, "in", resuming),
    ack: indexOf(b, "out", (f) => isType("cf_agent_stream_resume_ack")(f) && mine(f)),
    firstReplay: indexOf(b, "in", (f) => chunk(f) && f.replay),
    replayComplete: indexOf(b, "in", (f) => f.type === RESPONSE && mine(f) && f.replayComplete),
    done: indexOf(b, "in", (f) => f.type === RESPONSE && mine(f) && f.done),
  };
  order.firstLiveAfterReplay = indexOf(b, "in", (f) => chunk(f) && !f.replay, order.replayComplete);
  const sequence = [
    "resuming",
    "ack",
    "firstReplay",
    "replayComplete",
    "firstLiveAfterReplay",
    "done",
  ];
  const acks = b.outbound().filter(isType("cf_agent_stream_resume_ack"));
  return {
    requestId,
    a: {
      deltasSeen: partial.length,
      partialText: partial.join(""),
      sawDone: aSawDone,
      trace: a.trace(),
    },
    b: report(b, { order }),
    fullText,
    bText,
    getMessages: stored,
    checks: {
      unmountedMidStream: !aSawDone,
      bSentNoRequest: !b.outbound().some(isType("cf_agent_use_chat_request")),
      handshakeInOrder:
        order.probe >= 0 &&
        order.resuming >= 0 &&
        sequence.every((key, i) => i === 0 || order[key] > order[sequence[i - 1]]),
      ackedOnce: acks.length === 1 && acks[0].id === requestId,
      textEqualsFull: fullText.length > 0 && bText === fullText,
      partialIsPrefix: fullText.startsWith(partial.join("")),
      twoMessages: b.api.messages.length === 2 && stored.length === 2,
    },
  };
}

async function clearScenario() {
  const a = await mountSettled("A");
  // A second connection (Cloudflare's plain AgentClient): the server tells the *other*
  // connections about a clear once it has cleared, which orders the GET below after it.
  const observer = new AgentClient({ agent: agentClass, name, host, WebSocket });
  const seen = [];
  observer.addEventListener("message", (event) => seen.push(parse(event.data)));
  await observer.ready;
  const requestId = await send(a, "hi");
  await finish(a, requestId);
  const before = view(a.api.messages);
  a.api.clearHistory();
  await until("A's messages are empty and the clear frame is sent", () => {
    return a.api.messages.length === 0 && a.outbound().some(isType("cf_agent_chat_clear"));
  });
  await until("the other connection receives cf_agent_chat_clear", () => {
    return seen.some(isType("cf_agent_chat_clear"));
  });
  const stored = await getMessages(a);
  observer.close();
  return {
    requestId,
    messagesBeforeClear: before,
    client: report(a),
    observerTrace: seen.map((frame) => describe({ dir: "in", frame })),
    getMessagesAfterClear: stored,
    checks: {
      hadTwoMessages: before.length === 2,
      clientEmpty: a.api.messages.length === 0,
      serverEmpty: Array.isArray(stored) && stored.length === 0,
    },
  };
}

async function multiScenario() {
  const a = await mountSettled("A");
  const b = await mountSettled("B");
  const requestId = await send(a, "hi");
  await finish(a, requestId);
  const summary = (c) => JSON.stringify(c.api.messages.map((m) => [m.id, m.role, textOf(m)]));
  await until("B shows both messages of A's turn", () => {
    return b.done(requestId) && summary(b) === summary(a);
  });
  return {
    requestId,
    a: { statuses: a.statuses, messages: view(a.api.messages), trace: a.trace() },
    b: report(b, { serverStreaming: b.serverStreaming }),
    checks: {
      bShowsBoth: b.api.messages.length === 2,
      bSentNoRequest: !b.outbound().some(isType("cf_agent_use_chat_request")),
      bSawLiveChunks: b.deltas(requestId).length > 0,
      bStayedReady: b.statuses.every((s) => s === "ready"),
    },
  };
}

// -- approval before a server tool runs ----------------------------------------------------------
// The server's model calls a tool that needs approval: the reply ends with the tool part in
// `approval-requested`. The hook's `addToolApprovalResponse({id, approved})` answers: it sends
// `cf_agent_tool_approval {toolCallId, approved, autoContinue}` and resumes the server's
// continuation through the stream-resume handshake, as in a browser.

const isToolPart = (p) => p.type === "dynamic-tool" || String(p.type).startsWith("tool-");
const toolParts = (c) => c.api.messages.flatMap((m) => m.parts.filter(isToolPart));
const partOf = (c, callId) => toolParts(c).find((p) => p.toolCallId === callId);
const TERMINAL = ["output-available", "output-denied", "output-error"];
const approvalRequests = (c, id) =>
  c
    .responses(id)
    .map(chunkOf)
    .filter((chunk) => chunk?.type === "tool-approval-request");

/** Send the prompt and wait for the reply to end waiting for an approval; the pending part. */
async function askForApproval(c) {
  const requestId = await send(c, "refund me");
  await finish(c, requestId);
  await until(`${c.label} shows a tool part waiting for approval`, () => {
    return toolParts(c).some((p) => p.state === "approval-requested");
  });
  return { requestId, part: toolParts(c).find((p) => p.state === "approval-requested") };
}

/** Answer `part` through the hook and wait for the continuation to end on `c`. */
async function answerApproval(c, part, approved) {
  const from = c.frames.length;
  await c.api.addToolApprovalResponse({ id: part.approval.id, approved });
  await until(`${c.label} sends cf_agent_tool_approval`, () => {
    return c.outbound().some(isType("cf_agent_tool_approval"));
  });
  await until(`${c.label} receives the continuation's done frame`, () => {
    const after = c.frames.slice(from).filter((f) => f.dir === "in").map((f) => f.frame);
    const error = after.find((f) => f.type === RESPONSE && f.error);
    if (error) fail(`${c.label}: the continuation ended with an error: ${JSON.stringify(error)}`);
    return after.some((f) => f.type === RESPONSE && f.done);
  });
  // The done frame is seen on the socket before the hook has applied the stream: wait until it
  // renders the continuation's text too (a denied part is settled by the approval alone).
  const continued = c.frames
    .slice(from)
    .filter((f) => f.dir === "in")
    .map((f) => chunkOf(f.frame))
    .filter((chunk) => chunk?.type === "text-delta")
    .map((chunk) => chunk.delta)
    .join("");
  await until(`${c.label} renders the settled tool part and the continuation`, () => {
    const last = c.api.messages.at(-1);
    const shown = last?.role === "assistant" && textOf(last).endsWith(continued);
    const settled = TERMINAL.includes(partOf(c, part.toolCallId)?.state);
    return settled && shown && c.api.status === "ready";
  });
  return continued;
}

/** The same transcript: ids, roles, and each part's type, state, text and output. */
function same(stored, rendered) {
  const shape = (messages) =>
    JSON.stringify(
      messages.map((m) => [
        m.id,
        m.role,
        m.parts.map((p) => [p.type, p.state ?? null, p.text ?? null, p.output ?? null]),
      ]),
    );
  return shape(stored) === shape(rendered);
}

function approvalChecks(c, part, approved, stored) {
  const sent = c.outbound().filter(isType("cf_agent_tool_approval"));
  const settled = partOf(c, part.toolCallId);
  const storedPart = stored
    .flatMap((m) => m.parts)
    .find((p) => isToolPart(p) && p.toolCallId === part.toolCallId);
  const assistants = c.api.messages.filter((m) => m.role === "assistant");
  return {
    sentOneApproval:
      sent.length === 1 &&
      sent[0].toolCallId === part.toolCallId &&
      sent[0].approved === approved &&
      sent[0].autoContinue === true,
    partSettled: settled?.state === (approved ? "output-available" : "output-denied"),
    approvalRecorded: settled?.approval?.id === part.approval.id && settled?.approval?.approved === approved,
    serverAgrees: storedPart?.state === settled?.state && same(stored, c.api.messages),
    oneAssistantMessage: assistants.length === 1,
    endedReady: c.api.status === "ready",
  };
}

/** One tab: ask, then answer (approve or deny) in the same session. */
async function approvalScenario(approved) {
  const a = await mountSettled("A");
  const { requestId, part } = await askForApproval(a);
  const asked = view(a.api.messages);
  const requests = approvalRequests(a, requestId);
  const continued = await answerApproval(a, part, approved);
  const stored = await getMessages(a);
  return {
    requestId,
    toolCallId: part.toolCallId,
    continued,
    askedMessages: asked,
    client: report(a),
    getMessages: stored,
    checks: {
      oneApprovalRequest: requests.length === 1 && requests[0].toolCallId === part.toolCallId,
      ...approvalChecks(a, part, approved, stored),
    },
  };
}

/** Only ask: the reply ends waiting for the approval, and the server stored it so. */
async function askScenario() {
  const a = await mountSettled("A");
  const { requestId, part } = await askForApproval(a);
  const stored = await getMessages(a);
  const storedPart = stored.flatMap((m) => m.parts).find((p) => p.toolCallId === part.toolCallId);
  return {
    requestId,
    toolCallId: part.toolCallId,
    client: report(a),
    getMessages: stored,
    checks: {
      oneApprovalRequest: approvalRequests(a, requestId).length === 1,
      storedWaiting: storedPart?.state === "approval-requested",
      endedReady: a.api.status === "ready",
    },
  };
}

/** A new tab on a chat that waits for an approval (e.g. after a restart): it loads the
 * transcript, shows the pending part and answers it. */
async function answerScenario(approved) {
  const a = await mountSettled("A");
  await until("A shows the stored tool part waiting for approval", () => {
    return toolParts(a).some((p) => p.state === "approval-requested");
  });
  const part = toolParts(a).find((p) => p.state === "approval-requested");
  const asked = view(a.api.messages);
  const continued = await answerApproval(a, part, approved);
  const stored = await getMessages(a);
  return {
    toolCallId: part.toolCallId,
    continued,
    askedMessages: asked,
    client: report(a),
    getMessages: stored,
    checks: {
      ...approvalChecks(a, part, approved, stored),
      sentNoChatRequest: !a.outbound().some(isType("cf_agent_use_chat_request")),
    },
  };
}

const scenarios = {
  send: sendScenario,
  reload: reloadScenario,
  clear: clearScenario,
  multi: multiScenario,
  approve: () => approvalScenario(true),
  deny: () => approvalScenario(false),
  ask: askScenario,
  "answer-approve": () => answerScenario(true),
  "answer-deny": () => answerScenario(false),
};
const result = await scenarios[scenario]();
step = "unmount";
for (const c of clients) c.unmount();
clearTimeout(watchdog);
const failed = Object.keys(result.checks).filter((check) => !result.checks[check]);
const elapsedMs = Date.now() - started;
const ok = failed.length === 0;
const head = { scenario, agent: agentClass, name, host, elapsedMs, ok };
const line = JSON.stringify({ ...head, ...result, http });
process.stdout.write(`${line}\n`, () => {
  if (!ok) process.stderr.write(`checks failed: ${failed.join(", ")}\n`);
  process.exit(ok ? 0 : 1);
});
