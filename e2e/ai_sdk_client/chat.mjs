// Drives the agent server's v7 chat routes with the AI SDK's own client, unchanged: `useChat`
// of npm `@ai-sdk/react` over `DefaultChatTransport` of npm `ai`, rendered headless with
// `react-test-renderer`. The request bodies, the UI-message stream parsing, the resume on mount
// (`GET <api>/<id>/stream`), the tool-approval state machine and the automatic re-send are the
// published packages' code; this file only mounts renderers, calls the hook's API and records
// every HTTP exchange the transport made.
//
// usage: node chat.mjs <base url> <session id> <send|reload|approve>
//   <base url>/chat is the chat API (POST), <base url>/chat/<id>/stream its re-attach route,
//   <base url>/sessions/<id>/messages the stored messages (read by the driver on reload).
// Prints ONE JSON line on stdout; everything else goes to stderr. Exit status 0 when every
// check held; 1 when one failed (the line is still printed), on an error, or after the 30 s
// watchdog; 2 on bad usage. No fixed sleeps: every wait polls the hook's observed state.

import { format } from "node:util";
import React from "react";
import TestRenderer from "react-test-renderer";
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";

const SCENARIOS = ["send", "reload", "approve"];
const [base, sessionId, scenario] = process.argv.slice(2);
if (!base || !sessionId || !SCENARIOS.includes(scenario)) {
  console.error(`usage: node chat.mjs <base url> <session id> <${SCENARIOS.join("|")}>`);
  process.exit(2);
}

globalThis.IS_REACT_ACT_ENVIRONMENT = false;
const NOISE = [/react-test-renderer is deprecated/, /not configured to support act/];
const toStderr = (...args) => {
  const text = format(...args);
  if (!NOISE.some((re) => re.test(text))) process.stderr.write(`${text}\n`);
};
for (const level of ["log", "info", "debug", "warn", "error"]) console[level] = toStderr;

let step = "start";
const started = Date.now();
const http = [];
const watchdog = setTimeout(() => {
  process.stderr.write(`timed out after 30 s waiting for: ${step}\n`);
  process.exit(1);
}, 30_000);
process.on("unhandledRejection", (error) => fail(`unhandled rejection: ${error?.stack ?? error}`));

function fail(message) {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

function until(what, predicate) {
  step = what;
  return new Promise((resolve) => {
    const check = () => (predicate() ? resolve() : setTimeout(check, 10));
    check();
  });
}

// Every request the transport makes, with its answer's status (the body is the transport's).
const realFetch = globalThis.fetch;
async function recordingFetch(url, init) {
  const response = await realFetch(url, init);
  http.push({ method: init?.method ?? "GET", url: String(url), status: response.status });
  return response;
}

const textOf = (message) =>
  (message?.parts ?? [])
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("");

/** Mount one headless `useChat` (a browser tab) on the session. */
function mount(label, options = {}) {
  const c = { label, api: null, statuses: [], error: null };
  const transport = new DefaultChatTransport({
    api: `${base}/chat`,
    body: { agentType: "researcher" },
    fetch: recordingFetch,
  });
  function Tab() {
    const api = useChat({ id: sessionId, transport, ...options });
    c.api = api;
    if (c.statuses.at(-1) !== api.status) c.statuses.push(api.status);
    if (api.error && !c.error) c.error = String(api.error?.message ?? api.error);
    return null;
  }
  c.renderer = TestRenderer.create(React.createElement(Tab));
  c.assistant = () => c.api?.messages.findLast((m) => m.role === "assistant");
  c.unmount = () => c.renderer.unmount();
  return c;
}

async function storedMessages() {
  const response = await realFetch(`${base}/sessions/${sessionId}/messages?limit=100`);
  if (!response.ok) fail(`GET messages answered ${response.status}`);
  return (await response.json()).messages;
}

const report = { scenario, sessionId };
const checks = {};

if (scenario === "send") {
  const a = mount("A");
  await until("A mounted", () => a.api);
  a.api.sendMessage({ text: "hi" });
  await until("A's reply", () => a.api.status === "ready" && a.assistant());
  const stored = await storedMessages();
  report.client = { statuses: a.statuses, messages: a.api.messages, error: a.error };
  report.stored = stored;
  checks.twoMessages = a.api.messages.length === 2;
  // ready → submitted → (streaming, when a render fell between chunks) → ready
  checks.statusesInOrder =
    a.statuses[0] === "ready" && a.statuses.includes("submitted") && a.statuses.at(-1) === "ready";
  checks.endedReady = a.api.status === "ready" && !a.error;
  checks.replyMatchesServer = textOf(a.assistant()) === textOf(stored.at(-1));
  checks.sameMessageIds = a.api.messages.map((m) => m.id).join() === stored.map((m) => m.id).join();
} else if (scenario === "reload") {
  const a = mount("A");
  await until("A mounted", () => a.api);
  a.api.sendMessage({ text: "tell me a long story" });
  await until("A's first words", () => textOf(a.assistant()).split(" ").length > 3);
  const partial = textOf(a.assistant());
  a.api.stop(); // the tab goes away mid-answer: its request is cut, the run goes on
  a.unmount();
  const posts = http.filter((r) => r.method === "POST").length;
  const b = mount("B", { messages: await storedMessages(), resume: true });
  await until("B resumed the answer to its end", () => {
    const reply = b.assistant();
    return b.api?.status === "ready" && reply && textOf(reply).length > partial.length;
  });
  const stored = await storedMessages();
  report.partial = partial;
  report.b = { statuses: b.statuses, messages: b.api.messages, error: b.error };
  report.stored = stored;
  checks.cutMidAnswer = partial.length > 0 && stored.length === 2;
  checks.bSentNoMessage = http.filter((r) => r.method === "POST").length === posts;
  checks.bReattached = http.some((r) => r.url.endsWith(`/chat/${sessionId}/stream`) && r.status === 200);
  checks.bTextEqualsStored = textOf(b.assistant()) === textOf(stored.at(-1));
  checks.partialIsPrefix = textOf(stored.at(-1)).startsWith(partial);
  checks.sameMessageIds = b.api.messages.map((m) => m.id).join() === stored.map((m) => m.id).join();
  checks.noError = !b.error;
} else {
  const a = mount("A", {
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await until("A mounted", () => a.api);
  a.api.sendMessage({ text: "deploy the api" });
  const requested = () =>
    (a.assistant()?.parts ?? []).find((p) => p.type === "tool-deploy" && p.state === "approval-requested");
  await until("the approval request", () => a.api.status === "ready" && requested());
  const part = requested();
  report.requested = part;
  a.api.addToolApprovalResponse({ id: part.approval.id, approved: true });
  const deployed = () =>
    (a.assistant()?.parts ?? []).find((p) => p.type === "tool-deploy" && p.state === "output-available");
  await until("the approved tool's output and the answer", () => a.api.status === "ready" && deployed() && textOf(a.assistant()).includes("deployed"));
  const stored = await storedMessages();
  report.client = { statuses: a.statuses, messages: a.api.messages, error: a.error };
  report.stored = stored;
  checks.approvalRequested = part.toolCallId === "d1";
  checks.resentAutomatically = http.filter((r) => r.method === "POST").length === 2;
  checks.toolRanOnServer = JSON.stringify(deployed().output) === JSON.stringify({ deployed: "api" });
  checks.oneAssistantMessage = a.api.messages.filter((m) => m.role === "assistant").length === 1;
  checks.replyMatchesServer = textOf(a.assistant()) === textOf(stored.at(-1));
  checks.noError = !a.error;
}

clearTimeout(watchdog);
report.http = http;
report.checks = checks;
report.ok = Object.values(checks).every(Boolean);
report.elapsedMs = Date.now() - started;
process.stdout.write(`${JSON.stringify(report)}\n`);
const failed = Object.entries(checks).filter(([, ok]) => !ok).map(([name]) => name);
if (failed.length) process.stderr.write(`failed checks: ${failed.join(", ")}\n`);
process.exit(report.ok ? 0 : 1);
