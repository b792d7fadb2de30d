"""The inspector's Queues view: each queue's backlog, consumer, dead letters, and its actions.

A binding kind of :mod:`.inspector_bindings` that lists its items itself from ``GET /queues``
(every queue a producer, a consumer or a dead-letter setting names, so a dead-letter queue with
no producer is shown too). Per queue: the backlog split into ready, delayed, in flight and dead
letters; the consumer's settings (or that there is none, so messages wait); the waiting messages
(up to 100) with their attempts and when each becomes deliverable; the dead letters 50 to a
page (``GET /queues/{queue}/dead-letters``) with a body preview, attempts and times, each with
"Move back" (``POST …/dead-letters/{id}/replay``, after a confirm); "Purge" (``POST
…/purge``, after a confirm); and a box that sends a test message (JSON or text, an optional
delay) through a producer (``POST …/messages``), so Cloudflare's limits and texts apply. A
``queue.batch`` event on the timeline (a delivery settled) reloads the views.
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["QUEUES_SECTION"]

_HTML = """
<section id="bindings-queues" class="binding-kind" hidden>
  <h2>Queues</h2>
  <div class="binding-list"></div>
</section>
"""

_SCRIPT = r"""
(() => {
  const el = doemu.el;
  const PAGE = 50;
  const path = (q) => "/queues/" + encodeURIComponent(q);

  function state(message, now) {
    if (message.inFlight) return "in flight";
    return message.visibleAt > now ? "delayed" : "ready";
  }

  function panel(item, self) {
    const q = item.binding;
    const frame = doemu.panelBox(item, q, item.producers.length
      ? "producers: " + item.producers.join(", ") : "no producer binding");
    const counts = el("table", { className: "queue-counts", "data-result": "" });
    const consumer = el("div", { className: "queue-consumer", "data-result": "" });
    const purge = el("button", { type: "button", className: "queue-purge" }, "Purge");
    const done = el("p", { className: "note queue-done" });
    const messages = el("table", { className: "queue-messages", "data-result": "" });
    const dead = el("table", { className: "queue-dead", "data-result": "" });
    const pages = el("p", { className: "pager" });
    const body = el("textarea", { name: "body", rows: "3", "aria-label": "message body",
      placeholder: "{\"job\": 1}" });
    const type = el("select", { name: "contentType", "aria-label": "content type" },
      el("option", { value: "json" }, "json"), el("option", { value: "text" }, "text"));
    const delay = el("input", { type: "number", name: "delaySeconds", min: "0",
      "aria-label": "delaySeconds", placeholder: "optional, seconds" });
    const send = el("form", { className: "queue-send" }, el("fieldset", {},
      el("legend", {}, "Send a test message"),
      el("div", { className: "grid" }, el("label", {}, "body"), body,
        el("label", {}, "contentType"), type, el("label", {}, "delaySeconds"), delay),
      el("p", { className: "actions" }, el("button", { type: "submit" }, "Send"))));
    frame.node.append(counts, consumer, el("p", { className: "toolbar" }, purge, done),
      el("h4", {}, "Waiting messages"), doemu.scroll(messages),
      el("h4", {}, "Dead letters"), doemu.scroll(dead), pages, send);
    const view = { offset: 0 };

    async function load(fresh) {
      const now = fresh.now;  // the doemu clock's (a manual clock's, with --clock manual)
      const c = fresh.counts;
      frame.count.textContent = "(" + fresh.backlog + (fresh.backlog === 1 ? " message"
        : " messages") + ")";
      doemu.fill(counts, ["ready", "delayed", "in flight", "dead letters"],
        [[c.ready, c.delayed, c.inFlight, c.deadLetters]]);
      const k = fresh.consumer;
      if (!k) {
        consumer.replaceChildren(el("p", { className: "note" },
          "no consumer: messages wait here until something reads them"));
      } else {
        consumer.replaceChildren(el("dl", {},
          el("dt", {}, "consumer"), el("dd", {}, k.handler ? "Default.queue()"
            : "the Worker has no Default.queue(): messages wait"),
          el("dt", {}, "max_batch_size"), el("dd", {}, String(k.max_batch_size)),
          el("dt", {}, "max_batch_timeout"), el("dd", {}, k.max_batch_timeout + " s"),
          el("dt", {}, "max_retries"), el("dd", {}, String(k.max_retries)),
          el("dt", {}, "retry_delay"), el("dd", {}, k.retry_delay + " s"),
          el("dt", {}, "dead_letter_queue"), el("dd", {}, k.dead_letter_queue ||
            "(none: failed messages are dropped)"),
          el("dt", {}, "max_concurrency"), el("dd", {}, k.max_concurrency === null ||
            k.max_concurrency === undefined ? "(default)" : String(k.max_concurrency)),
          el("dt", {}, "delivered"), el("dd", {}, String(k.delivered))));
      }
      messages.replaceChildren(el("tr", {}, ...["id", "type", "state", "attempts",
        "enqueued", "deliverable", "size"].map((h) => el("th", {}, h))));
      for (const m of fresh.messages) {
        messages.append(el("tr", { className: "queue-message", "data-id": m.id },
          el("td", { className: "mono" }, m.id), el("td", {}, m.contentType),
          el("td", {}, state(m, now)), el("td", {}, String(m.attempts)),
          el("td", { className: "nowrap" }, doemu.time(m.enqueued)),
          el("td", { className: "nowrap" }, doemu.time(m.visibleAt)),
          el("td", { className: "nowrap" }, doemu.bytes(m.bytes))));
      }
      if (!fresh.messages.length) {
        messages.append(el("tr", {}, el("td", { colspan: 7, className: "empty" },
          "no messages waiting")));
      }
      await loadDead();
    }

    async function loadDead() {
      const query = new URLSearchParams({ limit: String(PAGE), offset: String(view.offset) });
      const page = await doemu.api("GET", path(q) + "/dead-letters?" + query);
      dead.replaceChildren(el("tr", {}, ...["id", "body", "attempts", "enqueued", "died",
        "moved to", ""].map((h) => el("th", {}, h))));
      for (const d of page.deadLetters) {
        dead.append(el("tr", { className: "queue-dead-letter", "data-id": d.id },
          el("td", { className: "mono" }, d.id),
          el("td", {}, el("pre", { className: "queue-body", title: d.contentType + ", " +
            d.bytes + " bytes" }, d.body + (d.truncated ? "…" : ""))),
          el("td", {}, String(d.attempts)),
          el("td", { className: "nowrap" }, doemu.time(d.enqueued)),
          el("td", { className: "nowrap" }, doemu.time(d.died)),
          el("td", {}, d.movedTo || "(dropped)"),
          el("td", { className: "row-actions" }, el("button", { type: "button",
            onclick: () => replay(d.id) }, "Move back"))));
      }
      if (!page.deadLetters.length) {
        dead.append(el("tr", {}, el("td", { colspan: 7, className: "empty" },
          "no dead letters")));
      }
      const shown = page.deadLetters.length;
      const where = (shown ? (view.offset + 1) + "–" + (view.offset + shown) : "0") + " of " +
        page.count;
      doemu.pagerBox(pages, where, view.offset > 0, view.offset + shown < page.count,
        (step) => { view.offset = Math.max(0, view.offset + step * PAGE); loadDead()
          .catch((error) => doemu.failed(self, error, "Could not load the dead letters")); });
    }

    async function act(question, method, route, body, what) {
      doemu.cleared(self);
      done.textContent = "";
      if (!confirm(question)) return null;
      try {
        return await doemu.api(method, route, body);
      } catch (error) {
        frame.error.textContent = what + ": " + error.message;
        return null;
      } finally {
        await doemu.reloadBindings();
      }
    }

    async function replay(id) {
      const result = await act("Move dead letter “" + id + "” back into queue " + q + "?",
        "POST", path(q) + "/dead-letters/" + encodeURIComponent(id) + "/replay", undefined,
        "Could not move “" + id + "” back");
      if (result) {
        done.textContent = "Moved “" + id + "” back into " + q + (result.removedFrom
          ? " (taken out of " + result.removedFrom + ")" : "") + ".";
      }
    }

    purge.addEventListener("click", async () => {
      const result = await act("Purge queue " + q + "? Every waiting message is deleted.",
        "POST", path(q) + "/purge", undefined, "Could not purge " + q);
      if (result) done.textContent = "Purged " + result.purged + " message(s).";
    });
    send.addEventListener("submit", async (event) => {
      event.preventDefault();
      doemu.cleared(self);
      done.textContent = "";
      const payload = { contentType: type.value };
      try {
        if (type.value === "json") {
          try { payload.body = JSON.parse(body.value); } catch (error) {
            throw new Error("the body is not valid JSON (" + error.message + "); choose " +
              "“text” to send it as a string");
          }
        } else {
          payload.body = body.value;
        }
        if (delay.value) payload.delaySeconds = Number(delay.value);
        await doemu.api("POST", path(q) + "/messages", payload);
      } catch (error) {
        frame.error.textContent = "Could not send: " + error.message;
        return;
      }
      done.textContent = "Sent a " + type.value + " message to " + q + ".";
      await doemu.reloadBindings();
    });
    return { node: frame.node, error: frame.error, load };
  }

  async function list() {
    const [queues, clock] = await Promise.all([doemu.api("GET", "/queues"),
      doemu.api("GET", "/clock")]);
    return queues.map((q) => ({ binding: q.queue, now: clock.now, ...q }));
  }

  doemu.bindingKind({ section: "bindings-queues", list, panel });

  // A delivery settled (acked, retried, dead): the backlogs moved.
  let soon = null;
  new MutationObserver((changes) => {
    for (const change of changes) {
      for (const node of change.addedNodes) {
        if (node.dataset && node.dataset.type === "queue.batch" && !soon) {
          soon = setTimeout(() => { soon = null; doemu.reloadBindings()
            .catch(doemu.showError); }, 100);
        }
      }
    }
  }).observe(document.getElementById("timeline"), { childList: true });
})();
"""

_STYLE = """
.binding pre.queue-body, .binding pre.wf-value { margin: 0; max-height: 8em; overflow: auto; }
"""

QUEUES_SECTION = Section(name="queues", slot="overview", html=_HTML, script=_SCRIPT, style=_STYLE)
