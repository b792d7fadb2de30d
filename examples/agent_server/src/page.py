"""The example's browser page: plain HTML and one inline script over the session's HTTP API.

No build step and nothing fetched from elsewhere (the page must work with no internet). What it
does, in the order a session lives:

* **Send** — a new session id (kept in ``location.hash``) and ``POST …/start`` with
  ``agentType: "researcher"``; a later message on the same session is a new run.
* **Stream** — an ``EventSource`` on ``…/sse?fromSequence=N``: every ``chunk`` event is applied
  once, in sequence order (an event at or below the last applied sequence is ignored), text
  deltas appended, tool calls and their results shown, a sub-agent's chunks inside its section;
  the run's terminal event (``end``/``fail``/``suspended``/``interrupted``) closes it. A stream
  that breaks without one is re-opened from the last sequence applied.
* **Reload** — ``…/snapshot`` gives the status, the user messages and ``streamSequence``;
  ``…/history`` from 0 *up to* ``streamSequence`` rebuilds the answers, and the stream is
  re-attached from ``streamSequence + 1``: every chunk once, none missing. The answers come from
  the stream, not from ``snapshot.messages``, because an answer still running is not in those
  messages yet (the transcript stores it when its turn ends) while its chunks are in the stream.
* **Approve / Reject** — a run suspended on the ``approve`` client tool shows both buttons;
  either posts ``{toolCallId, result: {approved}}`` to ``…/chat/<id>/submit-tool-result`` (the
  object may have been evicted meanwhile: the result is durable and continues the run) and
  re-attaches to the stream.
* **Resume** — a run interrupted (say the server was killed mid-run) shows Resume:
  ``POST …/resume`` continues it, then the stream is re-attached.

Everything shown is set with ``textContent`` (never HTML), and the page is served with a
Content-Security-Policy that allows only its own inline script and style (by hash) and calls to
its own origin, as doemu's inspector page is.
"""

import base64
import hashlib

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; }
.turn { margin: .8rem 0; }
.user, .assistant { padding: .4rem .6rem; border-radius: .4rem; white-space: pre-wrap; }
.user { background: #e8f0fe; } .assistant { background: #f1f3f4; margin-top: .3rem; }
.tool, .subagent { display: block; margin: .3rem 0; padding: .3rem .5rem; font-size: 13px;
  background: #fff; border: 1px solid #ddd; border-radius: .3rem; }
.subagent .body { display: block; }
#approvals .approval { margin: .5rem 0; padding: .5rem; background: #fff7e0; }
#approvals p { margin: 0 0 .4rem; } #approvals button { margin-right: .4rem; }
#error { color: #b00020; } form { display: flex; gap: .4rem; } input { flex: 1; padding: .4rem; }
"""

SCRIPT = """
"use strict";
const $ = (id) => document.getElementById(id);
const log = $("log"), statusLine = $("status"), errorLine = $("error");
let sessionId = null;   // the session shown (location.hash)
let lastSeq = -1;       // the last stream sequence applied: each chunk is applied once
let source = null;      // the open EventSource, if any
let retry = null;       // the timer re-opening a broken stream
let userTexts = [];     // the session's user messages, in order (one per run started)
let runCount = 0;       // runs rendered so far
let containers = {};    // agentId -> the element its chunks go into
let tools = {};         // toolCallId -> the element showing that call
let pending = {};       // toolCallId -> {toolName, input}: calls waiting for this browser

function setStatus(text) { statusLine.textContent = text; }
function showError(error) { errorLine.textContent = error ? String(error.message || error) : ""; }

async function api(path, init) {
  const response = await fetch(`/api/sessions/${sessionId}${path}`, init);
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new Error((body && body.error) || `HTTP ${response.status}`);
  return body;
}
function post(path, body) {
  return api(path, { method: "POST", headers: { "content-type": "application/json" },
                     body: JSON.stringify(body) });
}
function textOf(message) {
  return (message.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("");
}
function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}
function appendText(container, delta) {
  let last = container.lastElementChild;
  if (!last || !last.classList.contains("text")) {
    last = container.appendChild(element("span", "text", ""));
  }
  last.textContent += delta;
}

// -- applying the stream ------------------------------------------------------------------------
function newRun() {
  const turn = log.appendChild(element("div", "turn"));
  const index = runCount++;
  turn.appendChild(element("div", "user", userTexts[index] !== undefined ? userTexts[index] : "…"));
  containers[sessionId] = turn.appendChild(element("div", "assistant"));
}
function apply(chunk) {
  const own = chunk.agentId === sessionId;
  if (own && chunk.type === "run_started") { newRun(); return; }
  if (own && !containers[sessionId]) newRun();  // a stream that began before this page knew it
  const box = containers[chunk.agentId];
  if (!box) return;  // a sub-agent's own sub-agents: shown in their parent's section only
  if (chunk.type === "text_delta") {
    appendText(box, chunk.delta);
  } else if (chunk.type === "tool_call_start") {
    const call = box.appendChild(element("span", "tool"));
    call.dataset.tool = chunk.toolName;
    call.append(element("b", "", chunk.toolName),
                element("span", "input", `(${JSON.stringify(chunk.input)})`),
                element("span", "result", " …"));
    tools[chunk.toolCallId] = call;
  } else if (chunk.type === "tool_result") {
    const call = tools[chunk.toolCallId];
    const shown = chunk.error ? `error: ${chunk.error}` : JSON.stringify(chunk.result);
    if (call) call.querySelector(".result").textContent = ` → ${shown}`;
    delete pending[chunk.toolCallId];
    renderApprovals();
  } else if (chunk.type === "subagent_start") {
    const section = box.appendChild(element("span", "subagent"));
    section.dataset.session = chunk.subSessionId;
    section.append(element("b", "", `sub-agent ${chunk.agentType}`),
                   element("span", "state", " (running)"));
    containers[chunk.subSessionId] = section.appendChild(element("span", "body"));
  } else if (chunk.type === "subagent_end") {
    const section = containers[chunk.subSessionId];
    if (section) section.parentNode.querySelector(".state").textContent =
      chunk.error ? ` (failed: ${chunk.error})` : " (done)";
  } else if (own && chunk.type === "run_suspended") {
    pending = Object.assign({}, chunk.toolCalls || {});
    renderApprovals();
  }
}
function terminal(event) {
  if (event.type === "end") setStatus("completed");
  else if (event.type === "fail") setStatus(`failed: ${event.error}`);
  else if (event.type === "suspended") setStatus("waiting for your approval");
  else if (event.type === "interrupted") setStatus(`interrupted: ${event.reason}`);
  $("resume").hidden = event.type !== "interrupted";
  renderApprovals();
}
function handle(event) {
  if (event.type === "chunk") {
    if (event.sequence <= lastSeq) return;  // seen already (a replay overlapping what we have)
    lastSeq = event.sequence;
    document.body.dataset.lastSequence = String(lastSeq);
    apply(event.chunk);
  } else if (["end", "fail", "suspended", "interrupted"].includes(event.type)) {
    detach();
    terminal(event);
  }
}
function detach() {
  if (source) source.close();
  source = null;
  clearTimeout(retry);
}
function attach(statusText = "running…") {
  detach();
  setStatus(statusText);
  $("resume").hidden = true;
  const stream = new EventSource(`/api/sessions/${sessionId}/sse?fromSequence=${lastSeq + 1}`);
  source = stream;
  stream.onmessage = (message) => handle(JSON.parse(message.data));
  stream.onerror = () => {  // broken without a terminal event: read on from where we are
    if (source !== stream) return;
    stream.close();
    source = null;
    setStatus("reconnecting…");
    retry = setTimeout(() => attach("reconnecting…"), 1000);
  };
}
function renderApprovals() {
  const list = $("approvals");
  list.replaceChildren();
  for (const [id, call] of Object.entries(pending)) {
    if (call.toolName !== "approve") continue;
    const box = list.appendChild(element("div", "approval"));
    const action = (call.input && call.input.action) || JSON.stringify(call.input);
    box.append(element("p", "", `Approve: ${action}?`));
    for (const [label, approved] of [["Approve", true], ["Reject", false]]) {
      const button = box.appendChild(element("button", "", label));
      button.type = "button";
      button.onclick = () => answer(id, approved);
    }
  }
}

// -- what the user does -------------------------------------------------------------------------
async function answer(toolCallId, approved) {
  showError(null);
  setStatus("sending your answer…");
  try {
    await post(`/chat/${sessionId}/submit-tool-result`, { toolCallId, result: { approved } });
    delete pending[toolCallId];
    renderApprovals();
    attach();
  } catch (error) { showError(error); }
}
async function send(text) {
  showError(null);
  if (!sessionId) {
    reset(`s-${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`);
    history.replaceState(null, "", `#${sessionId}`);
  }
  userTexts.push(text);
  setStatus("starting…");  // at once: the last run's status is not this one's
  try {
    await post("/start", { agentType: "researcher", sessionId, input: { message: text } });
    attach();
  } catch (error) {
    userTexts.pop();
    showError(error);
  }
}
function reset(id) {
  detach();
  sessionId = id; lastSeq = -1; userTexts = []; runCount = 0;
  containers = {}; tools = {}; pending = {};
  log.replaceChildren();
  renderApprovals();
  $("resume").hidden = true;
  $("session").textContent = id || "(none yet: send a message)";
  setStatus("idle");
}
async function restore(id) {
  reset(id);
  try {
    const snapshot = await api("/snapshot");
    userTexts = snapshot.messages.filter((m) => m.role === "user").map(textOf);
    const upto = snapshot.streamSequence;
    while (lastSeq < upto) {  // the stored chunks up to the snapshot's sequence, each once
      const page = await api(`/history?fromSequence=${lastSeq + 1}&limit=1000`);
      for (const item of page.chunks) {
        if (item.sequence > upto) break;
        handle({ type: "chunk", sequence: item.sequence, chunk: item.chunk });
      }
      if (!page.chunks.length || !page.hasMore) break;
    }
    pending = Object.assign({}, snapshot.pendingClientToolCalls || {});
    renderApprovals();
    const said = { active: "running…", completed: "completed", idle: "idle",
                   suspended_client_tool: "waiting for your approval" }[snapshot.sessionStatus];
    setStatus(said || `${snapshot.sessionStatus}${snapshot.error ? `: ${snapshot.error}` : ""}`);
    // From streamSequence + 1: the live rest of a run, or the stored end of the last one.
    if (upto >= 0) attach(statusLine.textContent);
  } catch (error) { showError(error); }
}

$("form").onsubmit = (event) => {
  event.preventDefault();
  const input = $("text");
  if (!input.value.trim()) return;
  send(input.value);
  input.value = "";
};
$("resume").onclick = async () => {
  showError(null);
  setStatus("resuming…");
  try { await post("/resume", { options: { mode: "continue" } }); attach(); }
  catch (error) { showError(error); }
};
$("new").onclick = () => { history.replaceState(null, "", location.pathname); reset(null); };
window.addEventListener("hashchange", () => restore(location.hash.slice(1) || null));
if (location.hash.length > 1) restore(location.hash.slice(1)); else reset(null);
"""

TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>doemu agent server</title>
<style>/*STYLE*/</style>
</head>
<body>
<h1>doemu agent server</h1>
<p>Session <code id="session"></code> · <span id="status">idle</span>
  <button id="new" type="button">New session</button>
  <button id="resume" type="button" hidden>Resume</button></p>
<p id="error"></p>
<div id="log"></div>
<div id="approvals"></div>
<form id="form">
  <input id="text" autocomplete="off"
    placeholder='try "tell me about otters", "count these words", "summarize …", "approve it"'>
  <button>Send</button>
</form>
<script>/*SCRIPT*/</script>
</body>
</html>
"""


def _hash(source):
    return "sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()


PAGE = TEMPLATE.replace("/*STYLE*/", STYLE).replace("/*SCRIPT*/", SCRIPT)
PAGE_HEADERS = {
    "content-type": "text/html; charset=utf-8",
    "content-security-policy": (
        f"default-src 'none'; script-src '{_hash(SCRIPT)}'; style-src '{_hash(STYLE)}'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}
