"""The inspector page's core script (vanilla JavaScript, no build step).

It reaches the API only through ``fetch`` on its own origin: the JSON routes for data and
actions, and ``GET /events`` read as a stream (not ``EventSource``, which cannot send the
``Authorization`` header a token needs). The API lives at ``/__doemu/api``; the page is served
there and at ``/__doemu/``, and finds the API from its own address.

What it shows: every namespace's objects (sortable, 200 to a page, "200 of N"), the pending
alarms with "Run now", one object at a time (its KV and SQL tables, each paged and sortable with
its schema, a query box whose failure replaces the old result), and a timeline of lifecycle
events, requests and log lines. Epoch-millisecond values in time-like columns are shown as local
times (the number stays in the tooltip). Every empty list says it is empty. Sections from other
modules plug in through ``doemu.onRefresh`` and ``doemu.onObject`` (see :mod:`.inspector_page`).
"""

from __future__ import annotations

__all__ = ["CORE_SCRIPT"]

CORE_SCRIPT = r"""
"use strict";
const HERE = location.pathname.replace(/\/+$/, "");
const API = HERE.endsWith("/api") ? HERE : HERE + "/api";
const TOKEN_KEY = "doemu-admin-token";
const PAGE_SIZE = 200;
const LIFECYCLE = new Set(["constructed", "evicted", "reset", "alarm.fired", "alarm.retried",
  "alarm.dropped"]);
const $ = (id) => document.getElementById(id);
let current = null;  // the opened object: {binding, id, name, ...}
let objects = [];
const listing = {};  // per binding: {sort: [column, direction], page}

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

function pad(n, width) { return String(n).padStart(width || 2, "0"); }

// A local, readable time for epoch milliseconds; the raw number and UTC in the tooltip.
function time(ms) {
  if (ms === null || ms === undefined) return "";
  const d = new Date(ms);
  const text = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
    pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." +
    pad(d.getMilliseconds(), 3);
  return el("time", { title: Math.round(ms) + " ms · " + d.toISOString(),
    datetime: d.toISOString() }, text);
}

// Epoch milliseconds (2001-2100) in a column whose name says it is a time.
const TIME_COLUMN = new RegExp("(^|_)(at|time|ts|date|timestamp|scheduled|created|updated|" +
  "expires)(_|$)|[a-z](At|Time|Ms)$", "");
function isTime(column, value) {
  return typeof value === "number" && value >= 1e12 && value < 4.1e12 &&
    TIME_COLUMN.test(String(column));
}

function cell(column, value) {
  if (isTime(column, value)) return el("td", { className: "nowrap" }, time(value));
  return el("td", {}, show(value));
}

function headerRow(columns, sort, onSort) {
  return el("tr", {}, ...columns.map((c) => {
    if (!onSort) return el("th", {}, c);
    const mark = sort && sort[0] === c ? (sort[1] === "asc" ? " ▲" : " ▼") : "";
    return el("th", { className: "sortable", title: "sort by " + c,
      onclick: () => onSort(c) }, c + mark);
  }));
}

function fill(table, columns, rows, options) {
  const opts = options || {};
  table.replaceChildren(headerRow(columns, opts.sort, opts.onSort));
  for (const row of rows) {
    table.append(el("tr", {}, ...row.map((v, i) => cell(columns[i], v))));
  }
  if (!rows.length) {
    table.append(el("tr", {}, el("td", { colspan: Math.max(columns.length, 1),
      className: "empty" }, opts.empty || "(none)")));
  }
}

function pager(box, total, page, onPage) {
  box.replaceChildren();
  if (total === null || total === undefined) return;
  const from = total ? page * PAGE_SIZE + 1 : 0;
  const to = Math.min(total, (page + 1) * PAGE_SIZE);
  if (total <= PAGE_SIZE) return;
  box.append(
    el("span", { className: "range" }, from + "–" + to + " of " + total),
    el("button", { type: "button", onclick: () => onPage(page - 1),
      ...(page > 0 ? {} : { disabled: "" }) }, "Previous"),
    el("button", { type: "button", onclick: () => onPage(page + 1),
      ...(to < total ? {} : { disabled: "" }) }, "Next"));
}

function countText(shown, total, noun) {
  if (total === null || total === undefined) return "";
  if (shown < total) return "(" + shown + " of " + total + " " + noun + ")";
  return "(" + total + " " + noun + ")";
}

function short(id) { return id.slice(0, 12) + "…"; }

function label(o) { return (o.name === null ? short(o.id) : o.name) + " (" + o.binding + ")"; }

function action(text, run) {
  return el("button", { type: "button", onclick: () => run().catch(showError) }, text);
}

function compare(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  return a < b ? -1 : 1;
}

const OBJECT_COLUMNS = [["name", "name"], ["id", "id"], ["state", "state"], ["alarm", "alarm"],
  ["sockets", "sockets"], ["last activity", "last_activity"]];

function objectsTable(ns, items) {
  const view = listing[ns.binding] || (listing[ns.binding] = { sort: null, page: 0 });
  const sorted = items.slice();
  if (view.sort) {
    const key = OBJECT_COLUMNS.find((c) => c[0] === view.sort[0])[1];
    sorted.sort((x, y) => compare(x[key], y[key]) * (view.sort[1] === "asc" ? 1 : -1));
  }
  const pages = Math.max(1, Math.ceil(sorted.length / PAGE_SIZE));
  view.page = Math.min(view.page, pages - 1);
  const shown = sorted.slice(view.page * PAGE_SIZE, (view.page + 1) * PAGE_SIZE);
  const table = el("table", { "data-binding": ns.binding });
  const onSort = (column) => {
    view.sort = view.sort && view.sort[0] === column && view.sort[1] === "asc"
      ? [column, "desc"] : [column, "asc"];
    view.page = 0;
    renderObjects();
  };
  table.append(headerRow([...OBJECT_COLUMNS.map((c) => c[0]), ""], view.sort,
    (c) => c && onSort(c)));
  for (const o of shown) {
    table.append(el("tr", { className: "object", "data-id": o.id },
      el("td", {}, o.name === null ? "" : o.name), el("td", { className: "id", title: o.id },
        short(o.id)),
      el("td", { className: "state-" + o.state }, o.state), el("td", { className: "nowrap" },
        time(o.alarm)),
      el("td", {}, o.sockets), el("td", { className: "nowrap" }, time(o.last_activity)),
      el("td", {}, action("Open", async () => {
        await openObject(o);
        $("object").scrollIntoView();
      }))));
  }
  if (!items.length) {
    table.append(el("tr", {}, el("td", { colspan: 7, className: "empty" },
      "no objects yet: the first request to one creates it")));
  }
  const box = el("p", { className: "pager" });
  pager(box, sorted.length, view.page, (page) => { view.page = page; renderObjects(); });
  return [table, box];
}

let spaces = [];

function renderObjects() {
  const box = $("namespaces");
  box.replaceChildren();
  if (!spaces.length) box.append(el("p", { className: "empty" }, "no Durable Object bindings"));
  for (const ns of spaces) {
    const items = objects.filter((item) => item.binding === ns.binding);
    box.append(el("h3", {}, ns.binding + " → " + ns.class_name + " ",
      el("span", { className: "count" }, "(" + ns.live + " live, " + ns.stored + " stored)")));
    box.append(...objectsTable(ns, items));
  }
}

async function refresh() {
  const [health, listedSpaces, listed] = await Promise.all([
    api("GET", "/health"), api("GET", "/namespaces"), api("GET", "/objects"),
  ]);
  showError(null);
  $("token-form").hidden = true;
  $("status").textContent = health.worker + ": " + health.live_objects + " live, " +
    health.pending_alarms + " pending alarms" + (health.clock.manual ? " · manual clock" : "");
  objects = listed;
  spaces = listedSpaces;
  renderObjects();
  const alarms = $("alarms");
  alarms.replaceChildren(headerRow(["object", "due", ""]));
  const pending = listed.filter((item) => item.alarm !== null)
    .sort((x, y) => compare(x.alarm, y.alarm));
  for (const o of pending) {
    alarms.append(el("tr", { className: "alarm", "data-id": o.id }, el("td", {}, label(o)),
      el("td", { className: "nowrap" }, time(o.alarm)),
      el("td", {}, action("Run now", () => runAlarm(o)))));
  }
  if (!pending.length) {
    alarms.append(el("tr", {}, el("td", { colspan: 3, className: "empty" },
      "no pending alarms")));
  }
  if (current) {
    const fresh = listed.find((o) => o.id === current.id && o.binding === current.binding);
    if (fresh) renderMeta(fresh);
  }
  for (const hook of doemu.onRefresh) await hook(listed);
}

function path(o) { return "/objects/" + encodeURIComponent(o.binding) + "/" + o.id; }

async function sql(o, query, params) {
  return api("POST", path(o) + "/sql", { query, params: params || [] });
}

function renderMeta(o) {
  current = o;
  $("object-title").textContent = label(o);
  const meta = $("object-meta");
  meta.replaceChildren("id " + o.id + " · " + o.state + " · alarm ",
    o.alarm === null ? "none" : time(o.alarm), " · " + o.sockets + " sockets");
  $("run-alarm").disabled = o.alarm === null;
}

function quoted(name) { return '"' + String(name).replace(/"/g, '""') + '"'; }

const kvView = { page: 0, pages: [""] };  // pages[n]: the last key before page n

async function renderKv(o) {
  let total = null;
  try {
    total = (await sql(o, "SELECT count(*) FROM _cf_KV")).rows[0][0];
  } catch (error) {
    total = null;  // no KV table yet: the listing below says so
  }
  const after = kvView.pages[kvView.page] || "";
  const query = "?limit=" + PAGE_SIZE + (after ? "&after=" + encodeURIComponent(after) : "");
  const kv = await api("GET", path(o) + "/kv" + query);
  fill($("kv"), ["key", "value"], kv.entries.map((e) => [e.key, e.value]),
    { empty: "no KV entries" });
  $("kv-count").textContent = countText(kv.entries.length, total, "entries");
  if (kv.entries.length) kvView.pages[kvView.page + 1] = kv.entries[kv.entries.length - 1].key;
  pager($("kv-pager"), total, kvView.page, (page) => {
    kvView.page = page;
    renderKv(o).catch(showError);
  });
}

const tableViews = {};  // per table name: {sort, page}

async function renderTable(o, name, schema, box) {
  const view = tableViews[name] || (tableViews[name] = { sort: null, page: 0 });
  const count = (await sql(o, "SELECT count(*) FROM " + quoted(name))).rows[0][0];
  const order = view.sort ? " ORDER BY " + quoted(view.sort[0]) + " " + view.sort[1] : "";
  const result = await sql(o, "SELECT * FROM " + quoted(name) + order + " LIMIT " + PAGE_SIZE +
    " OFFSET " + view.page * PAGE_SIZE);
  const table = el("table", { "data-table": name });
  const rerender = () => renderTable(o, name, schema, box).catch(showError);
  fill(table, result.columns, result.rows, {
    sort: view.sort, empty: "(empty table)",
    onSort: (column) => {
      view.sort = view.sort && view.sort[0] === column && view.sort[1] === "asc"
        ? [column, "desc"] : [column, "asc"];
      view.page = 0;
      rerender();
    },
  });
  const pages = el("p", { className: "pager" });
  pager(pages, count, view.page, (page) => { view.page = page; rerender(); });
  box.replaceChildren(
    el("h4", {}, name), el("span", { className: "count" },
      countText(result.rows.length, count, count === 1 ? "row" : "rows")),
    el("details", { className: "schema" }, el("summary", {}, "schema"),
      el("pre", {}, schema || "")),
    table, pages);
}

async function openObject(o) {
  if (!current || current.id !== o.id) {
    for (const key of Object.keys(tableViews)) delete tableViews[key];
    kvView.page = 0;
    kvView.pages = [""];
    $("query-result").replaceChildren();
    $("query-error").textContent = "";
  }
  renderMeta(o);
  $("object").hidden = false;
  await renderKv(o);
  const tables = $("tables");
  tables.replaceChildren();
  let listed = [];
  try {
    listed = (await sql(o, "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name " +
      "NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY 1"))
      .rows;
  } catch (error) {
    tables.append(el("p", { className: "empty" }, String(error.message)));
  }
  if (!listed.length) tables.append(el("p", { className: "empty" }, "no SQL tables"));
  for (const [name, schema] of listed) {
    const box = el("div", { className: "sql-table", "data-name": name });
    tables.append(box);
    await renderTable(o, name, schema, box);
  }
  for (const hook of doemu.onObject) await hook(o, new Set(listed.map((r) => r[0])));
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

function describe(type, event) {
  if (type === "request") {
    return event.method + " " + event.path + " " + event.status + " " +
      Number(event.ms).toFixed(1) + " ms";
  }
  if (type === "log") return event.level + " " + event.logger + ": " + event.message;
  const known = objects.find((o) => o.id === event.id);
  const who = event.name || (known && known.name) || (event.id || "").slice(0, 12);
  const extra = ["reason", "retryCount", "error"].filter((k) => event[k] !== undefined)
    .map((k) => k + "=" + show(event[k])).join(" ");
  return type + " " + (event.binding || "") + " " + who + " " + extra;
}

function applyFilters() {
  for (const item of $("timeline").children) {
    const kind = item.dataset.kind;
    item.hidden = (kind === "request" && !$("show-requests").checked) ||
      (kind === "log" && !$("show-logs").checked);
  }
}

function onEvent(block) {
  let type = "message", data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event: ")) type = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (!data) return;
  const event = JSON.parse(data);
  const kind = type === "request" || type === "log" ? type : "event";
  const classes = kind + (kind === "log" ? " level-" + event.level : "");
  const item = el("li", { className: classes, "data-type": type, "data-kind": kind },
    time(event.timestamp), " " + describe(type, event));
  const timeline = $("timeline");
  const placeholder = timeline.querySelector(".placeholder");
  if (placeholder) placeholder.remove();
  timeline.prepend(item);
  applyFilters();
  while (timeline.children.length > 500) timeline.lastChild.remove();
  if (LIFECYCLE.has(type)) refreshSoon();
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

// The read-only route's advice is for the API and the CLI; here, "write" is a checkbox, and it
// only helps when the statement writes.
const WRITES = /^\s*(insert|update|delete|replace|create|drop|alter|reindex|vacuum)\b/i;
function queryMessage(query, message) {
  const advice = message.indexOf(" Send \"write\": true");
  if (advice < 0) return message;
  const base = message.slice(0, advice);
  return WRITES.test(query) ? base + " Tick “write” to run it inside the object." : base;
}

$("refresh").addEventListener("click", () => refreshAll().catch(showError));
$("reload-object").addEventListener("click", () => refreshAll().catch(showError));
$("close-object").addEventListener("click", () => { $("object").hidden = true; current = null; });
$("run-alarm").addEventListener("click", () => current && runAlarm(current).catch(showError));
$("evict").addEventListener("click", () => control("Evict").catch(showError));
$("reset").addEventListener("click", () => control("Reset").catch(showError));
$("show-requests").addEventListener("change", applyFilters);
$("show-logs").addEventListener("change", applyFilters);
$("run-query").addEventListener("click", async () => {
  const query = $("query").value;
  const write = $("write").checked;
  $("query-result").replaceChildren();  // a failure must not leave the last result on screen
  $("query-error").textContent = "";
  try {
    if (write && !confirm("Run this SQL inside " + label(current) + "?")) return;
    const result = await api("POST", path(current) + "/sql", { query, write });
    fill($("query-result"), result.columns, result.rows,
      { empty: result.columns.length ? "(no rows)" : "(done: no result rows)" });
  } catch (error) {
    $("query-error").textContent = "The query failed: " + queryMessage(query, error.message);
  }
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
$("timeline").append(el("li", { className: "placeholder" },
  "no events yet: requests, lifecycle events and log lines appear here as they happen"));

// What sections from other modules use (see doemu/server/admin/inspector_page.py).
const doemu = { api, sql, el, fill, time, show, label, headers, API, showError,
  onRefresh: [], onObject: [] };
window.doemu = doemu;
// Sections' scripts follow this one; start once they have registered their hooks.
setTimeout(() => refresh().catch(showError).then(startStream), 0);
"""
