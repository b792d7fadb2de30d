"""The inspector page's source: HTML, CSS and one vanilla script, as Python strings.

Strings rather than package data so there is nothing to build, bundle or find at run time (and
the page works offline: no CDN). Every value from the API is rendered with ``textContent`` and
DOM nodes, never ``innerHTML``; :mod:`.inspector` serves it under a Content-Security-Policy that
admits only this script and style, by hash.

The script reaches the API only through ``fetch`` on its own origin: the JSON routes for data and
actions, and ``GET /events`` read as a stream (not ``EventSource``, which cannot send the
``Authorization`` header a token needs). Agent tables are read with read-only SQL; their names
are the Agents SDK's (``cf_agents_state``, ``cf_agents_schedules``, ``cf_agents_runs``,
``cf_agents_fibers``, ``cf_agents_run_recovery``, ``cf_ai_chat_agent_messages``).
"""

from __future__ import annotations

__all__ = ["SCRIPT", "STYLE", "TEMPLATE"]

TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>doemu inspector</title>
<style>/*STYLE*/</style>
</head>
<body>
<header>
  <h1>doemu inspector</h1>
  <span id="status">loading…</span>
  <span id="stream">events: connecting</span>
  <button id="refresh" type="button">Refresh</button>
</header>
<form id="token-form" hidden>
  <label>Admin token <input id="token" type="password" autocomplete="off"></label>
  <button type="submit">Use token</button>
</form>
<p id="error" role="alert"></p>
<main>
  <section id="left">
    <h2>Objects</h2>
    <div id="namespaces"></div>
    <h2>Pending alarms</h2>
    <table id="alarms"></table>
  </section>
  <section id="object" hidden>
    <h2 id="object-title"></h2>
    <p id="object-meta"></p>
    <p>
      <button id="run-alarm" type="button">Run alarm now</button>
      <button id="evict" type="button">Evict</button>
      <button id="reset" type="button">Reset</button>
      <button id="reload-object" type="button">Refresh object</button>
    </p>
    <section id="agent" hidden>
      <h3>Agent</h3>
      <h4>State</h4><pre id="agent-state"></pre>
      <h4>Schedules</h4><table id="agent-schedules"></table>
      <h4>Fibers</h4><table id="agent-fibers"></table>
      <h4>Recovery</h4><table id="agent-recovery"></table>
      <h4>Chat transcript</h4><ol id="transcript"></ol>
    </section>
    <h3>KV</h3><table id="kv"></table>
    <h3>SQL tables</h3><div id="tables"></div>
    <h3>Query</h3>
    <textarea id="query" rows="3" cols="60">SELECT name FROM sqlite_master</textarea>
    <label><input id="write" type="checkbox"> write (runs inside the object)</label>
    <button id="run-query" type="button">Run query</button>
    <table id="query-result"></table>
  </section>
  <section id="right">
    <h2>Timeline</h2>
    <ol id="timeline" reversed></ol>
  </section>
</main>
<script>/*SCRIPT*/</script>
</body>
</html>
"""

STYLE = """
body { font: 13px system-ui, sans-serif; margin: 0; color: #222; }
header { display: flex; gap: 1em; align-items: baseline; padding: .4em 1em; background: #eee; }
h1 { font-size: 1.2em; margin: 0; }
main { display: grid; grid-template-columns: minmax(22em, 1fr) 2fr minmax(16em, 1fr);
  gap: 1em; padding: 0 1em; }
table { border-collapse: collapse; margin-bottom: .6em; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top;
  max-width: 40em; overflow-wrap: anywhere; }
.state-live { color: #070; font-weight: bold; }
.state-evicted { color: #777; }
#error { color: #b00; margin: .3em 1em; }
#timeline { font-family: monospace; font-size: 12px; }
pre { background: #f6f6f6; padding: .4em; white-space: pre-wrap; }
"""

SCRIPT = r"""
"use strict";
const API = location.pathname.replace(/\/+$/, "");
const TOKEN_KEY = "doemu-admin-token";
const $ = (id) => document.getElementById(id);
let current = null;  // {binding, id, name}
let objects = [];

(function takeToken() {  // from #token= or ?token=, into sessionStorage, out of the address bar
  const url = new URL(location.href);
  const fromHash = new URLSearchParams(url.hash.slice(1)).get("token");
  const token = fromHash || url.searchParams.get("token");
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  url.searchParams.delete("token");
  history.replaceState(null, "", url.pathname + url.search);
})();

function headers(json) {
  const h = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) h.authorization = "Bearer " + token;
  if (json) h["content-type"] = "application/json";
  return h;
}

async function api(method, path, body) {
  const response = await fetch(API + path, {
    method, headers: headers(body !== undefined), cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) needToken();
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const message = (data && data.error) || response.status + " " + response.statusText;
    throw new Error(message);
  }
  return data;
}

function needToken() {
  $("token-form").hidden = false;
  $("status").textContent = "this server needs its admin token";
}

function showError(error) { $("error").textContent = error ? String(error.message || error) : ""; }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "onclick") node.addEventListener("click", value);
    else if (key === "className") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "object" && value.$bytes !== undefined) return "bytes " + value.$bytes;
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function time(ms) { return ms === null || ms === undefined ? "" : new Date(ms).toISOString(); }

function fill(table, columns, rows) {
  table.replaceChildren(el("tr", {}, ...columns.map((c) => el("th", {}, c))));
  for (const row of rows) table.append(el("tr", {}, ...row.map((v) => el("td", {}, show(v)))));
  if (!rows.length) table.append(el("tr", {}, el("td", { colspan: columns.length }, "(none)")));
}

function short(id) { return id.slice(0, 12) + "…"; }

function label(o) { return (o.name === null ? short(o.id) : o.name) + " (" + o.binding + ")"; }

function action(text, run) {
  return el("button", { type: "button", onclick: () => run().catch(showError) }, text);
}

async function refresh() {
  const [health, spaces, listed] = await Promise.all([
    api("GET", "/health"), api("GET", "/namespaces"), api("GET", "/objects"),
  ]);
  showError(null);
  $("token-form").hidden = true;
  $("status").textContent = health.worker + ": " + health.live_objects + " live, " +
    health.pending_alarms + " pending alarms";
  objects = listed;
  const box = $("namespaces");
  box.replaceChildren();
  for (const ns of spaces) {
    box.append(el("h3", {}, ns.binding + " → " + ns.class_name + " (" + ns.live + " live, " +
      ns.stored + " stored)"));
    const table = el("table", { "data-binding": ns.binding });
    table.append(el("tr", {}, ...["name", "id", "state", "alarm", "sockets", "last activity", ""]
      .map((c) => el("th", {}, c))));
    for (const o of listed.filter((item) => item.binding === ns.binding)) {
      table.append(el("tr", { className: "object", "data-id": o.id },
        el("td", {}, o.name === null ? "" : o.name), el("td", { title: o.id }, short(o.id)),
        el("td", { className: "state-" + o.state }, o.state), el("td", {}, time(o.alarm)),
        el("td", {}, o.sockets), el("td", {}, time(o.last_activity)),
        el("td", {}, action("Open", () => openObject(o)))));
    }
    box.append(table);
  }
  const alarms = $("alarms");
  alarms.replaceChildren(el("tr", {}, ...["object", "due", ""].map((c) => el("th", {}, c))));
  for (const o of listed.filter((item) => item.alarm !== null)) {
    alarms.append(el("tr", { className: "alarm", "data-id": o.id }, el("td", {}, label(o)),
      el("td", {}, time(o.alarm)), el("td", {}, action("Run now", () => runAlarm(o)))));
  }
  if (current) {
    const fresh = listed.find((o) => o.id === current.id && o.binding === current.binding);
    if (fresh) renderMeta(fresh);
  }
}

function path(o) { return "/objects/" + encodeURIComponent(o.binding) + "/" + o.id; }

async function sql(o, query, params) {
  return api("POST", path(o) + "/sql", { query, params: params || [] });
}

function renderMeta(o) {
  current = o;
  $("object-title").textContent = label(o);
  $("object-meta").textContent = "id " + o.id + " · " + o.state + " · alarm " +
    (o.alarm === null ? "none" : time(o.alarm)) + " · " + o.sockets + " sockets";
  $("run-alarm").disabled = o.alarm === null;
}

async function openObject(o) {
  renderMeta(o);
  $("object").hidden = false;
  const kv = await api("GET", path(o) + "/kv");
  fill($("kv"), ["key", "value"], kv.entries.map((e) => [e.key, e.value]));
  const tables = $("tables");
  tables.replaceChildren();
  let names = [];
  try {
    const listed = await sql(o, "SELECT name FROM sqlite_master WHERE type = 'table' AND name " +
      "NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY 1");
    names = listed.rows.map((r) => r[0]);
  } catch (error) {
    tables.append(el("p", {}, String(error.message)));  // e.g. live, nothing written yet
  }
  for (const name of names) {
    const result = await sql(o, 'SELECT * FROM "' + name.replace(/"/g, '""') + '" LIMIT 200');
    const table = el("table", { "data-table": name });
    fill(table, result.columns, result.rows);
    tables.append(el("h4", {}, name), table);
  }
  await renderAgent(o, new Set(names));
}

async function renderAgent(o, names) {
  const agent = ["cf_agents_state", "cf_agents_schedules", "cf_agents_runs",
    "cf_ai_chat_agent_messages"].some((t) => names.has(t));
  $("agent").hidden = !agent;
  if (!agent) return;
  const rows = async (table, query, target) => {
    if (!names.has(table)) return fill(target, ["(no " + table + " table)"], []);
    const result = await sql(o, query);
    fill(target, result.columns, result.rows);
  };
  let state = "(no state)";
  if (names.has("cf_agents_state")) {
    const result = await sql(o, "SELECT state FROM cf_agents_state WHERE id = 'cf_state_row_id'");
    if (result.rows.length) {
      try { state = JSON.stringify(JSON.parse(result.rows[0][0]), null, 2); }
      catch { state = String(result.rows[0][0]); }
    }
  }
  $("agent-state").textContent = state;
  await rows("cf_agents_schedules", "SELECT id, callback, type, time, cron, intervalSeconds, " +
    "running, payload FROM cf_agents_schedules ORDER BY time", $("agent-schedules"));
  if (names.has("cf_agents_fibers")) {
    await rows("cf_agents_fibers", "SELECT fiber_id, name, status, error_message, created_at, " +
      "completed_at FROM cf_agents_fibers ORDER BY created_at", $("agent-fibers"));
  } else {
    await rows("cf_agents_runs", "SELECT id, name, snapshot, created_at FROM cf_agents_runs " +
      "ORDER BY created_at", $("agent-fibers"));
  }
  await rows("cf_agents_run_recovery", "SELECT * FROM cf_agents_run_recovery", $("agent-recovery"));
  const transcript = $("transcript");
  transcript.replaceChildren();
  if (names.has("cf_ai_chat_agent_messages")) {
    const result = await sql(o, "SELECT message FROM cf_ai_chat_agent_messages ORDER BY seq");
    for (const [raw] of result.rows) {
      let message;
      try { message = JSON.parse(raw); } catch { message = { role: "?", parts: [] }; }
      const parts = (message.parts || []).filter((p) => p.type !== "step-start");
      const text = parts.map((p) => p.type === "text" ? p.text : "[" + p.type + "]");
      transcript.append(el("li", { className: "message " + message.role },
        message.role + ": " + text.join(" ")));
    }
  }
}

async function runAlarm(o) {
  await api("POST", path(o) + "/alarm/run", {});
  await refreshAll();
}

async function control(verb) {
  const o = current;
  if (!o || !confirm(verb + " " + label(o) + "?")) return;
  await api("POST", path(o) + "/" + verb.toLowerCase(), {});
  await refreshAll();
}

async function refreshAll() {
  await refresh();
  if (current && !$("object").hidden) await openObject(current);
}

let pending = null;
function refreshSoon() {  // many events in a burst make one refresh
  if (pending) return;
  pending = setTimeout(() => { pending = null; refreshAll().catch(showError); }, 100);
}

function onEvent(block) {
  let type = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) type = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const event = JSON.parse(data);
  const known = objects.find((o) => o.id === event.id);
  const who = event.name || (known && known.name) || (event.id || "").slice(0, 12);
  const extra = ["reason", "retryCount", "error"].filter((k) => event[k] !== undefined)
    .map((k) => k + "=" + show(event[k])).join(" ");
  const item = el("li", { className: "event", "data-type": type },
    time(event.timestamp) + " " + type + " " + (event.binding || "") + " " + who + " " + extra);
  const timeline = $("timeline");
  timeline.prepend(item);
  while (timeline.children.length > 500) timeline.lastChild.remove();
  refreshSoon();
}

async function stream() {
  for (;;) {
    try {
      const response = await fetch(API + "/events", { headers: headers(false), cache: "no-store" });
      if (response.status === 401) { needToken(); return; }
      if (!response.ok) throw new Error("events: " + response.status);
      $("stream").textContent = "events: connected";
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          onEvent(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      showError(error);
    }
    $("stream").textContent = "events: disconnected, retrying";
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

$("refresh").addEventListener("click", () => refreshAll().catch(showError));
$("reload-object").addEventListener("click", () => refreshAll().catch(showError));
$("run-alarm").addEventListener("click", () => current && runAlarm(current).catch(showError));
$("evict").addEventListener("click", () => control("Evict").catch(showError));
$("reset").addEventListener("click", () => control("Reset").catch(showError));
$("run-query").addEventListener("click", async () => {
  try {
    const write = $("write").checked;
    if (write && !confirm("Run this SQL inside " + label(current) + "?")) return;
    const result = await api("POST", path(current) + "/sql", { query: $("query").value, write });
    fill($("query-result"), result.columns, result.rows);
    showError(null);
  } catch (error) { showError(error); }
});
$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value);
  $("token").value = "";
  refreshAll().catch(showError).then(startStream);
});
let streaming = false;
function startStream() {
  if (streaming) return;
  streaming = true;
  stream().finally(() => { streaming = false; });
}
refresh().catch(showError).then(startStream);
"""
