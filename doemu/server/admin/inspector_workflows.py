"""The inspector's Workflows view: each workflow's instances, one instance's run, its actions.

A binding kind of :mod:`.inspector_bindings` for the ``workflow`` entries of ``/bindings``. Per
workflow: its instances newest first, 50 to a page, with how many have each status and a
status filter (``GET /workflows/{binding}/instances``); "Open" shows one instance (``GET
…/instances/{id}``): status, params, output or error, its times, its steps (kind, name, state,
attempts, a preview of the result or the error, when each last changed) and what it waits for
(a sleep, a retry, an event) on the doemu clock, with how far from its now; Pause, Resume,
Terminate and Restart (after a confirm) and an event to send (type and JSON payload) go through
the binding (``POST …/{action}``, ``POST …/events``); and a box creates an instance (optional
id, JSON params).
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["WORKFLOWS_SECTION"]

_HTML = """
<section id="bindings-workflows" class="binding-kind" hidden>
  <h2>Workflows</h2>
  <div class="binding-list"></div>
</section>
"""

_SCRIPT = r"""
(() => {
  const el = doemu.el;
  const PAGE = 50;
  const PREVIEW = 200;
  const STATUSES = ["queued", "running", "paused", "waiting", "waitingForPause", "errored",
    "terminated", "complete"];
  const ACTIONS = ["pause", "resume", "terminate", "restart"];

  function preview(value) {
    if (value === null || value === undefined) return "";
    const text = JSON.stringify(value);
    return text.length > PREVIEW ? text.slice(0, PREVIEW) + "…" : text;
  }

  function pretty(value) { return JSON.stringify(value, null, 2); }

  function pending(step, now) {
    const at = [doemu.time(step.wakeAt), " (" + doemu.relative(step.wakeAt, now) + ")"];
    if (step.kind === "sleep" && step.state === "sleeping") {
      return ["sleep “" + step.name + "” wakes at ", ...at];
    }
    if (step.kind === "wait" && step.state === "waiting") {
      return ["waits for event “" + step.eventType + "” (step “" + step.name + "”) until ",
        ...at];
    }
    if (step.kind === "do" && step.state === "retrying") {
      return ["step “" + step.name + "” retries (attempt " + (step.attempts + 1) + ") at ",
        ...at];
    }
    return null;
  }

  function panel(item, self) {
    const b = item.binding;
    const base = "/workflows/" + encodeURIComponent(b) + "/instances";
    const frame = doemu.panelBox(item, b, "workflow " + item.resource + " · " +
      item.class_name);
    const status = el("select", { name: "status", "aria-label": "status filter" },
      el("option", { value: "" }, "every status"),
      ...STATUSES.map((s) => el("option", { value: s }, s)));
    const filter = el("form", { className: "wf-filter" }, el("label", {}, "Status "), status,
      el("button", { type: "submit" }, "Filter"));
    const tally = el("p", { className: "note wf-statuses", "data-result": "" });
    const list = el("table", { className: "wf-instances", "data-result": "" });
    const pages = el("p", { className: "pager" });
    const opened = el("div", { className: "wf-instance", "data-result": "" });
    const newId = el("input", { type: "text", name: "id", "aria-label": "instance id",
      placeholder: "optional: a random UUID" });
    const params = el("textarea", { name: "params", rows: "3", "aria-label": "params",
      placeholder: "optional JSON, e.g. {\"key\": \"value\"}" });
    const create = el("form", { className: "wf-create" }, el("fieldset", {},
      el("legend", {}, "Create an instance"),
      el("div", { className: "grid" }, el("label", {}, "id"), newId, el("label", {}, "params"),
        params),
      el("p", { className: "actions" }, el("button", { type: "submit" }, "Create"))));
    frame.node.append(filter, tally, doemu.scroll(list), pages, opened, create);
    const view = { status: "", offset: 0, open: null, draft: null };

    async function load() {
      const query = new URLSearchParams({ limit: String(PAGE), offset: String(view.offset) });
      if (view.status) query.set("status", view.status);
      const page = await doemu.api("GET", base + "?" + query);
      frame.count.textContent = "(" + page.total + (page.total === 1 ? " instance"
        : " instances") + ")";
      tally.textContent = Object.keys(page.statuses).length ? Object.entries(page.statuses)
        .map(([s, n]) => s + " " + n).join(" · ") : "no instances yet";
      list.replaceChildren(el("tr", {}, ...["id", "status", "created", "started", "ended",
        ""].map((h) => el("th", {}, h))));
      for (const i of page.instances) {
        list.append(el("tr", { className: "wf-row", "data-id": i.id },
          el("td", { className: "mono" }, i.id),
          el("td", { className: "wf-status status-" + i.status }, i.status),
          el("td", { className: "nowrap" }, doemu.time(i.created)),
          el("td", { className: "nowrap" }, doemu.time(i.started)),
          el("td", { className: "nowrap" }, doemu.time(i.ended)),
          el("td", { className: "row-actions" }, el("button", { type: "button",
            onclick: () => open(i.id) }, "Open"))));
      }
      if (!page.instances.length) {
        list.append(el("tr", {}, el("td", { colspan: 6, className: "empty" },
          view.status ? "no " + view.status + " instances" : "no instances")));
      }
      const shown = page.instances.length;
      const where = (shown ? (view.offset + 1) + "–" + (view.offset + shown) : "0") + " of " +
        page.count;
      doemu.pagerBox(pages, where, view.offset > 0, view.offset + shown < page.count,
        (step) => { view.offset = Math.max(0, view.offset + step * PAGE); doemu.cleared(self);
          self.reload(); });
      if (view.open !== null) await renderInstance(view.open);
    }

    async function renderInstance(id) {
      let got;
      try {
        got = await doemu.api("GET", base + "/" + encodeURIComponent(id));
      } catch (error) {
        view.open = null;
        opened.replaceChildren();
        frame.error.textContent = "Could not read instance “" + id + "”: " + error.message;
        return;
      }
      const steps = el("table", { className: "wf-steps" });
      steps.append(el("tr", {}, ...["kind", "name", "state", "attempts", "result",
        "updated", "wakes"].map((h) => el("th", {}, h))));
      const waits = el("ul", { className: "wf-pending" });
      for (const s of got.steps) {
        const result = s.error ? s.error.name + ": " + s.error.message : preview(s.value);
        steps.append(el("tr", { className: "wf-step", "data-name": s.name },
          el("td", { className: "nowrap" }, s.kind), el("td", { className: "mono" }, s.name),
          el("td", { className: "nowrap" }, s.state), el("td", {}, String(s.attempts)),
          el("td", {}, el("pre", { className: "wf-value" }, result)),
          el("td", { className: "nowrap" }, doemu.time(s.updated)),
          el("td", { className: "nowrap" }, doemu.time(s.wakeAt))));
        const line = pending(s, got.now);
        if (line) waits.append(el("li", {}, ...line));
      }
      if (!got.steps.length) {
        steps.append(el("tr", {}, el("td", { colspan: 7, className: "empty" },
          "no steps yet")));
      }
      if (!waits.children.length) waits.append(el("li", { className: "empty" }, "nothing"));
      const buttons = ACTIONS.map((a) => el("button", { type: "button",
        onclick: () => act(id, a) }, a[0].toUpperCase() + a.slice(1)));
      const type = el("input", { type: "text", name: "type", "aria-label": "event type",
        placeholder: "e.g. approval" });
      const payload = el("textarea", { name: "payload", rows: "2",
        "aria-label": "event payload", placeholder: "optional JSON" });
      // The panel re-renders on every lifecycle event: what the user is typing into the event
      // form survives it (kept per instance), or a refresh between typing and Send would post
      // an empty form.
      const draft = view.draft && view.draft.id === id ? view.draft : { id, type: "", payload: "" };
      view.draft = draft;
      type.value = draft.type;
      payload.value = draft.payload;
      type.addEventListener("input", () => { draft.type = type.value; });
      payload.addEventListener("input", () => { draft.payload = payload.value; });
      const event = el("form", { className: "wf-event" }, el("fieldset", {},
        el("legend", {}, "Send an event"),
        el("div", { className: "grid" }, el("label", {}, "type"), type,
          el("label", {}, "payload"), payload),
        el("p", { className: "actions" }, el("button", { type: "submit" }, "Send event"))));
      event.addEventListener("submit", (e) => { e.preventDefault();
        sendEvent(id, type.value, payload.value); });
      opened.replaceChildren(
        el("h4", {}, "Instance “" + id + "”"),
        el("button", { type: "button", onclick: () => { view.open = null;
          opened.replaceChildren(); } }, "Close"),
        el("p", { className: "actions wf-actions" }, ...buttons),
        el("dl", {},
          el("dt", {}, "status"), el("dd", { className: "wf-instance-status" }, got.status),
          el("dt", {}, "params"), el("dd", {}, el("pre", { className: "wf-params" },
            pretty(got.params))),
          el("dt", {}, "output"), el("dd", {}, el("pre", { className: "wf-output" },
            got.output === null ? "(none)" : pretty(got.output))),
          el("dt", {}, "error"), el("dd", {}, el("pre", { className: "wf-error" },
            got.error ? got.error.name + ": " + got.error.message : "(none)")),
          el("dt", {}, "created"), el("dd", {}, doemu.time(got.created)),
          el("dt", {}, "started"), el("dd", {}, doemu.time(got.started)),
          el("dt", {}, "ended"), el("dd", {}, doemu.time(got.ended)),
          el("dt", {}, "now"), el("dd", { className: "wf-now" }, doemu.time(got.now),
            " on the doemu clock")),
        el("h4", {}, "Waiting on"), waits,
        el("h4", {}, "Steps"), doemu.scroll(steps), event);
    }

    async function open(id) {
      view.open = id;
      doemu.cleared(self);
      await renderInstance(id);
    }

    async function act(id, action) {
      doemu.cleared(self);
      if (!confirm(action[0].toUpperCase() + action.slice(1) + " instance “" + id +
        "” of " + b + "?")) return;
      try {
        await doemu.api("POST", base + "/" + encodeURIComponent(id) + "/" + action);
      } catch (error) {
        frame.error.textContent = "Could not " + action + " “" + id + "”: " + error.message;
      }
      await doemu.reloadBindings();
    }

    async function sendEvent(id, type, text) {
      doemu.cleared(self);
      try {
        if (!type) throw new Error("give the event a type");
        const body = { type };
        if (text.trim()) {
          try { body.payload = JSON.parse(text); } catch (error) {
            throw new Error("the payload is not valid JSON (" + error.message + ")");
          }
        }
        await doemu.api("POST", base + "/" + encodeURIComponent(id) + "/events", body);
      } catch (error) {
        frame.error.textContent = "Could not send the event: " + error.message;
        return;
      }
      view.draft = null;  // sent: the next render shows an empty form
      await doemu.reloadBindings();
    }

    filter.addEventListener("submit", (event) => {
      event.preventDefault();
      view.status = status.value;
      view.offset = 0;
      doemu.cleared(self);
      self.reload();
    });
    create.addEventListener("submit", async (event) => {
      event.preventDefault();
      doemu.cleared(self);
      const body = {};
      let created;
      try {
        if (newId.value.trim()) body.id = newId.value.trim();
        if (params.value.trim()) {
          try { body.params = JSON.parse(params.value); } catch (error) {
            throw new Error("params are not valid JSON (" + error.message + ")");
          }
        }
        created = await doemu.api("POST", base, body);
      } catch (error) {
        frame.error.textContent = "Could not create the instance: " + error.message;
        return;
      }
      view.open = created.id;
      await doemu.reloadBindings();
    });
    return { node: frame.node, error: frame.error, load };
  }

  doemu.bindingKind({ section: "bindings-workflows", types: ["workflow"], panel });
})();
"""

_STYLE = """
.binding .wf-pending { margin: .2em 0 .6em; padding-left: 1.4em; }
.binding .wf-pending li.empty { color: #777; font-style: italic; list-style: none; }
.binding td.status-errored, .binding td.status-terminated { color: #b00; }
.binding td.status-complete { color: #070; }
"""

WORKFLOWS_SECTION = Section(
    name="workflows", slot="overview", html=_HTML, script=_SCRIPT, style=_STYLE
)
