"""The example's browser page: plain HTML and the chat protocol over a WebSocket (no build step).

It is the protocol at its smallest: fetch ``get-messages`` and render them; probe for a stream
to resume (``cf_agent_stream_resume_request``) and acknowledge it (``cf_agent_stream_resume_ack``)
so a reload mid-reply replays the stored words and follows the live ones (a reply cut by a
crash is already in the transcript: while it is replayed, the live line stands in for it); send
``cf_agent_use_chat_request`` with the whole transcript; apply ``text-delta`` chunks; show an
``error: true`` frame (a failing model, a refused request) until the next send; ``Stop``
sends ``cf_agent_chat_request_cancel`` and ``Clear`` ``cf_agent_chat_clear``.

A message is shown by what it holds: its text, or a line naming its tool calls (``tool`` asks
the client to run ``getWeather``, which this page does not); a message with neither (a turn
that failed before its first word, as ``boom`` does) is not shown as an empty bubble. When the
server goes away (a restart, a crash) the page says so and reconnects by itself, every second or
two, then renders the transcript again and probes for a reply to resume, as on a reload.
"""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>doemu chat example</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; max-width: 42rem; margin: 2rem auto; }
  #log div { margin: .4rem 0; padding: .4rem .6rem; border-radius: .4rem; white-space: pre-wrap; }
  .user { background: #e8f0fe; } .assistant { background: #f1f3f4; }
  .error { background: #fde8e8; } form { display: flex; gap: .4rem; }
  input { flex: 1; padding: .4rem; }
</style>
</head>
<body>
<h1>doemu chat</h1>
<p id="status">connecting…</p>
<div id="log"></div>
<form id="form">
  <input id="text" autocomplete="off" placeholder='try "hi" or "slow"'>
  <button>Send</button> <button type="button" id="stop">Stop</button>
  <button type="button" id="clear">Clear</button>
</form>
<script>
const chat = new URLSearchParams(location.search).get("chat") || "demo";
const base = `/agents/chat-agent/${encodeURIComponent(chat)}`;
const pk = crypto.randomUUID();
const log = document.getElementById("log"), status = document.getElementById("status");
let messages = [], active = null, text = "", replyId = null, failure = null, continuing = false;

function textOf(m) {
  return (m.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("");
}

// What a message shows: its text, else its tool calls (a tool-only reply is not empty).
function shownText(m) {
  const text = textOf(m);
  if (text.trim()) return text;
  const tools = (m.parts || []).filter((p) => p.type === "dynamic-tool" ||
    p.type.startsWith("tool-"));
  return tools.map((p) => {
    const name = p.toolName || p.type.slice(5);
    const call = `${name}(${JSON.stringify(p.input === undefined ? {} : p.input)})`;
    if (p.state === "output-available") return `[tool ${call} → ${JSON.stringify(p.output)}]`;
    if (p.state === "output-error") return `[tool ${call} failed: ${p.errorText}]`;
    return `[tool ${call}: waiting for the client to run it]`;
  }).join("\\n");
}

function render() {
  // A replayed reply can already be in the transcript (a turn cut by a crash keeps its partial):
  // while it streams, the live line stands for it, so it is never shown twice.
  const last = messages.filter((m) => m.role === "assistant").pop();
  const hidden = continuing && last ? last.id : replyId;
  const shown = (active ? messages.filter((m) => m.id !== hidden) : messages)
    .filter((m) => shownText(m) !== "");  // a turn that failed before a word: no empty bubble
  log.replaceChildren(...shown.map((m) => {
    const div = document.createElement("div");
    div.className = m.role;
    div.textContent = shownText(m);
    return div;
  }));
  if (active) {
    const div = document.createElement("div");
    div.className = "assistant";
    div.textContent = (continuing && last ? textOf(last) : "") + text + " …";
    log.append(div);
  }
  if (failure) {  // not in the transcript: kept on screen until the next send or clear
    const div = document.createElement("div");
    div.className = "error";
    div.textContent = failure;
    log.append(div);
  }
}

let ws = null, retries = 0;

// Open the socket; when it closes (a restart, a crash), say so and open it again after a
// second or two: the server may need a moment to come back.
function connect() {
  ws = new WebSocket(`${location.origin.replace("http", "ws")}${base}?_pk=${pk}`);
  ws.onopen = async () => {
    retries = 0;
    messages = await (await fetch(`${base}/get-messages`)).json();
    render();
    ws.send(JSON.stringify({ type: "cf_agent_stream_resume_request", probeId: pk }));
    status.textContent = `chat "${chat}"`;
  };
  ws.onclose = () => {
    // A reply in progress is resumed (or already stored) when the socket is back.
    active = null; text = ""; replyId = null; continuing = false;
    render();
    status.textContent = "disconnected: reconnecting…";
    setTimeout(connect, Math.min(2000, 500 * 2 ** retries++));
  };
  ws.onmessage = onFrame;
}

function onFrame(event) {
  const frame = JSON.parse(event.data);
  if (frame.type === "cf_agent_stream_resuming" && active !== frame.id) {
    active = frame.id; text = ""; replyId = null;
    ws.send(JSON.stringify({ type: "cf_agent_stream_resume_ack", id: frame.id }));
  } else if (frame.type === "cf_agent_chat_messages") {
    messages = frame.messages; render();
  } else if (frame.type === "cf_agent_chat_clear") {
    messages = []; render();
  } else if (frame.type === "cf_agent_use_chat_response") {
    if (frame.error) {
      failure = frame.body; render();
    } else if (frame.body) {
      if (!active) { active = frame.id; text = ""; replyId = null; }  // a turn we did not send
      if (frame.id !== active) return;
      // A continuation (recovery picking a cut reply up) extends the last assistant message:
      // the live line stands for it, its stored words then the new ones.
      if (frame.continuation) continuing = true;
      const chunk = JSON.parse(frame.body);
      if (chunk.type === "start") replyId = chunk.messageId || null;
      if (chunk.type === "text-delta") { text += chunk.delta; render(); }
    }
    if (frame.done) {
      active = null; continuing = false;
      fetch(`${base}/get-messages`).then((r) => r.json()).then((m) => { messages = m; render(); });
    }
  }
}
connect();

document.getElementById("form").onsubmit = (event) => {
  event.preventDefault();
  const input = document.getElementById("text");
  if (!input.value || active || ws.readyState !== WebSocket.OPEN) return;
  const id = crypto.randomUUID().slice(0, 8);
  const parts = [{ type: "text", text: input.value }];
  messages.push({ id: crypto.randomUUID(), role: "user", parts });
  active = id; text = ""; replyId = null; failure = null; continuing = false;
  input.value = ""; render();
  ws.send(JSON.stringify({ id, type: "cf_agent_use_chat_request",
    init: { method: "POST", body: JSON.stringify({ messages, trigger: "submit-message" }) } }));
};
document.getElementById("stop").onclick = () => {
  if (active && ws.readyState === WebSocket.OPEN) {
    ws.send(JSON.stringify({ id: active, type: "cf_agent_chat_request_cancel" }));
  }
};
document.getElementById("clear").onclick = () => {
  if (ws.readyState !== WebSocket.OPEN) return;
  ws.send(JSON.stringify({ type: "cf_agent_chat_clear" }));
  messages = []; failure = null; render();
};
</script>
</body>
</html>
"""
