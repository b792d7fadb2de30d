"""The inspector's bindings views, their shared part: one registry of binding kinds, fed from
``GET /bindings`` on every refresh, and the helpers the kinds' sections share.

Each kind of binding (KV, D1, R2, crons, services and assets, Queues, Workflows, Workers AI)
is a :class:`~.inspector_section.Section` of its own, in the ``overview`` slot: static markup
with a ``<section id="bindings-…" hidden>`` holding a ``.binding-list``, and a script that calls
``doemu.bindingKind({...})``:

* ``section``: the id of its ``<section>``; it is shown only while the kind has something.
* ``types``: the ``type`` values of ``/bindings`` it shows (``["kv"]``), or ``list(all)``: an
  async function returning its items itself (the crons read ``/crons``; services and assets are
  one item); each item needs a ``binding`` (its key among the kind's panels).
* ``panel(item, panel)``: builds the item's panel once (its markup, forms and buttons) and
  returns ``{node, error, load}`` (merged into ``panel``, whose ``reload()`` runs ``load`` again);
  ``load(item)`` fetches and shows the data, and runs again at every refresh.

A panel is built once and kept while its binding exists, so a refresh (every lifecycle event
causes one) reloads the lists without losing what the user typed, the page they were on or the
entry they opened. Loads of one panel run one after another, so the last one shown is the
latest. A failed load shows what went wrong in the panel's own error line (``doemu.failed``),
clearing what the panel showed before, and leaves the other panels alone.

Shared helpers on ``doemu``: ``panelBox(item, title, detail)`` (the panel's frame: a heading with
a count, an error line), ``failed(panel, error, what)`` / ``cleared(panel)``, ``seconds(s)``
(epoch seconds as a local time, the raw number in the tooltip), ``bytes(n)``, ``json(value)``,
``relative(ms, now)``, ``scroll(table)`` (a long list in a box of its own height),
``pagerBox(box, where, hasPrevious, hasNext, onPage)``, ``sqlMessage(query, message, where)``
and ``reloadBindings()``. A ``cron.fired`` event on the timeline reloads every panel (a
``scheduled()`` handler may have written to any binding).
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["BINDINGS_SECTION"]

_SCRIPT = r"""
(() => {
  const kinds = [];
  const panels = new Map();  // kind section id → Map(item key → {node, load, chain})

  // Loads of one panel run in order, so the last shown is the latest. A failed load says so in
  // the panel; the next load that succeeds takes the message away (an action's failure stays
  // until the user's next action: a background refresh does not hide it).
  function run(panel) {
    panel.chain = panel.chain.then(async () => {
      try {
        await panel.load(panel.item);
        if (panel.loadFailed) cleared(panel);
        panel.loadFailed = false;
      } catch (error) {
        failed(panel, error, "Could not load " + panel.item.binding);
        panel.loadFailed = true;
      }
    });
    return panel.chain;
  }

  async function renderKind(kind, all) {
    const section = document.getElementById(kind.section);
    const list = section.querySelector(".binding-list");
    const mine = panels.get(kind.section) || new Map();
    panels.set(kind.section, mine);
    let items;
    try {
      items = kind.list ? await kind.list(all) : all.filter((b) => kind.types.includes(b.type));
    } catch (error) {
      section.hidden = false;
      list.replaceChildren(doemu.el("p", { className: "binding-error", role: "alert" },
        "Could not list them: " + String(error.message || error)));
      mine.clear();
      return;
    }
    section.hidden = !items.length;
    const keep = new Set(items.map((item) => item.binding));
    for (const [key, panel] of mine) {
      if (!keep.has(key)) mine.delete(key);
    }
    const nodes = new Set([...mine.values()].map((panel) => panel.node));
    for (const child of [...list.children]) {
      if (!nodes.has(child)) child.remove();  // a removed binding's panel, an old error
    }
    const loads = [];
    for (const item of items) {
      let panel = mine.get(item.binding);
      if (!panel) {
        panel = { item, chain: Promise.resolve(), loadFailed: false };
        panel.reload = () => run(panel);
        Object.assign(panel, kind.panel(item, panel));
        mine.set(item.binding, panel);
      }
      panel.item = item;
      list.append(panel.node);  // (re)appended in the listing's order
      loads.push(run(panel));
    }
    await Promise.all(loads);
  }

  let listed = [];
  async function renderAll(fresh) {
    if (fresh) listed = await doemu.api("GET", "/bindings");
    await Promise.all(kinds.map((kind) => renderKind(kind, listed)));
  }

  function panelBox(item, title, detail) {
    const count = doemu.el("span", { className: "count" });
    const error = doemu.el("p", { className: "binding-error", role: "alert" });
    const node = doemu.el("div", { className: "binding", "data-binding": item.binding },
      doemu.el("h3", {}, title + " ", count, detail ? doemu.el("span",
        { className: "resource" }, detail) : ""), error);
    return { node, count, error };
  }

  // A failure says what went wrong and clears what the panel showed from before it.
  function failed(panel, error, what) {
    for (const old of panel.node.querySelectorAll("[data-result]")) old.replaceChildren();
    const box = panel.error || panel.node.querySelector(".binding-error");
    box.textContent = (what ? what + ": " : "") + String((error && error.message) || error);
  }

  function cleared(panel) {
    (panel.error || panel.node.querySelector(".binding-error")).textContent = "";
  }

  function pad(n) { return String(n).padStart(2, "0"); }

  // Epoch seconds (KV's expirations) as a local time; the raw seconds and UTC in the tooltip.
  function seconds(s) {
    if (s === null || s === undefined) return "never";
    const node = doemu.time(s * 1000);
    node.title = s + " s · " + new Date(s * 1000).toISOString();
    return node;
  }

  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
  function bytes(n) {
    let value = n, unit = 0;
    while (value >= 1024 && unit < UNITS.length - 1) { value /= 1024; unit += 1; }
    const text = unit ? value.toFixed(value < 10 ? 1 : 0) + " " + UNITS[unit] : n + " B";
    return doemu.el("span", { title: n + " bytes" }, text);
  }

  // A long list scrolls in a box of its own (its header stays), so the sections after it stay
  // a short scroll away.
  function scroll(table) { return doemu.el("div", { className: "scroll" }, table); }

  function json(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "object" && !Array.isArray(value) && !Object.keys(value).length) {
      return "";
    }
    return JSON.stringify(value);
  }

  function relative(ms, now) {
    const delta = Math.round((ms - now) / 1000);
    const size = Math.abs(delta);
    const text = size < 60 ? size + " s" : size < 3600
      ? Math.floor(size / 60) + " min " + pad(size % 60) + " s"
      : size < 172800 ? Math.floor(size / 3600) + " h " + pad(Math.floor(size / 60) % 60) + " min"
        : Math.floor(size / 86400) + " days";
    return delta >= 0 ? "in " + text : text + " ago";
  }

  // Where the page is ("1–200 of 230") and Previous/Next; nothing when all fits on one page.
  function pagerBox(box, where, hasPrevious, hasNext, onPage) {
    box.replaceChildren();
    if (!hasPrevious && !hasNext) return;
    box.append(
      doemu.el("span", { className: "range" }, where),
      doemu.el("button", { type: "button", onclick: () => onPage(-1),
        ...(hasPrevious ? {} : { disabled: "" }) }, "Previous"),
      doemu.el("button", { type: "button", onclick: () => onPage(1),
        ...(hasNext ? {} : { disabled: "" }) }, "Next"));
  }

  // The read-only route's advice is for the API and the CLI; on the page "write" is a checkbox,
  // and it only helps when the statement writes.
  const WRITES = /^\s*(insert|update|delete|replace|create|drop|alter|reindex|vacuum)\b/i;
  function sqlMessage(query, message, where) {
    const advice = message.indexOf(" Send \"write\": true");
    if (advice < 0) return message;
    const base = message.slice(0, advice);
    return WRITES.test(query) ? base + " Tick “write” to run it " + where + "." : base;
  }

  let soon = null;
  function reloadSoon() {
    if (soon) return;
    soon = setTimeout(() => { soon = null; renderAll(false).catch(doemu.showError); }, 100);
  }
  new MutationObserver((changes) => {
    for (const change of changes) {
      for (const node of change.addedNodes) {
        if (node.dataset && node.dataset.type === "cron.fired") reloadSoon();
      }
    }
  }).observe(document.getElementById("timeline"), { childList: true });

  Object.assign(doemu, {
    bindingKind: (kind) => kinds.push(kind),
    reloadBindings: () => renderAll(false),
    panelBox, failed, cleared, seconds, bytes, json, relative, pagerBox, sqlMessage, scroll,
  });
  doemu.onRefresh.push(() => renderAll(true));
})();
"""

_STYLE = """
.binding-kind > h2 { margin-top: 1.4em; }
.binding { margin: 0 0 1.2em; }
.binding .resource { color: #666; font-weight: normal; font-family: monospace; font-size: .9em;
  margin-left: .4em; }
.binding-error { color: #b00; margin: .3em 0; white-space: pre-wrap; }
.binding-error:empty { display: none; }
.binding form, .binding .toolbar { display: flex; gap: .6em; align-items: center;
  flex-wrap: wrap; margin: .3em 0 .5em; }
.binding form input[type=text], .binding form input:not([type]) { min-width: 12em; }
.binding textarea { width: 100%; font-family: monospace; }
.binding dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .2em 1em;
  margin: .3em 0 .6em; }
.binding dt { color: #555; }
.binding dd { margin: 0; overflow-wrap: anywhere; }
.binding .scroll { max-height: 24em; overflow-y: auto; margin-bottom: .4em;
  border-bottom: 1px solid #ddd; }
.binding .scroll table { margin-bottom: 0; }
.binding .scroll th { position: sticky; top: 0; z-index: 1; }
.binding td.row-actions { white-space: nowrap; width: 1%; }
.binding td.row-actions button + button { margin-left: .4em; }
.binding td.key { min-width: 10em; }
.binding td.mono, .binding dd.mono { font-family: monospace; }
.binding .note { color: #555; margin: .3em 0; }
.binding .outcome-ok { color: #070; }
.binding .outcome-exception { color: #b00; }
.binding fieldset { border: 1px solid #ccc; margin: .4em 0 .8em; padding: .3em .8em .6em;
  flex: 1 1 100%; max-width: 52em; min-width: 0; }
.binding fieldset input, .binding fieldset textarea { width: 100%; }
.binding fieldset .grid { display: grid; grid-template-columns: max-content minmax(0, 1fr);
  gap: .3em .8em; align-items: start; }
"""

BINDINGS_SECTION = Section(name="bindings", slot="overview", html="", script=_SCRIPT, style=_STYLE)
