"""The inspector's cron view: the Worker's cron triggers, when each runs next, the last runs.

A binding kind of :mod:`.inspector_bindings` that reads ``GET /crons`` itself (crons are not
in ``/bindings``). Each trigger with its next run on the doemu clock (a local time and how far
from the clock's now: a manual clock's, with ``--clock manual``), its last run and "Run now"
(``POST /crons/run``: the Worker's ``scheduled()`` runs with that cron and now as its
``scheduledTime``); then the last runs, most recent first, with their outcome and error. Shown
when the Worker has cron triggers, or has runs to show (from ``/__scheduled``).
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["CRONS_SECTION"]

_HTML = """
<section id="bindings-crons" class="binding-kind" hidden>
  <h2>Cron triggers</h2>
  <div class="binding-list"></div>
</section>
"""

_SCRIPT = r"""
(() => {
  const el = doemu.el;

  function outcome(run) {
    return el("span", { className: "outcome-" + run.outcome }, run.outcome +
      (run.error ? ": " + run.error : ""));
  }

  function panel(item, self) {
    const frame = doemu.panelBox(item, "Default.scheduled()", "");
    const clock = el("p", { className: "note cron-clock", "data-result": "" });
    const missing = el("p", { className: "binding-error cron-no-handler" });
    const schedule = el("table", { className: "cron-schedule", "data-result": "" });
    const ran = el("p", { className: "note cron-ran" });
    const history = el("table", { className: "cron-history", "data-result": "" });
    frame.node.append(clock, missing, schedule, ran, el("h4", {}, "Last runs"),
      doemu.scroll(history));

    async function runNow(cron) {
      doemu.cleared(self);
      ran.textContent = "";
      try {
        const result = await doemu.api("POST", "/crons/run", { cron });
        ran.replaceChildren("Ran “" + cron + "” (scheduledTime ",
          doemu.time(result.scheduledTime), "): ", outcome(result));
      } catch (error) {
        frame.error.textContent = "Could not run “" + cron + "”: " + error.message;
      }
      await doemu.reloadBindings();  // the handler may have written to any binding
    }

    async function load() {
      const state = await doemu.api("GET", "/crons");
      frame.count.textContent = "(" + state.crons.length + (state.crons.length === 1
        ? " trigger" : " triggers") + ")";
      clock.replaceChildren("now on the doemu clock: ", doemu.time(state.now));
      missing.textContent = state.handler ? "" : "the Worker has no Default.scheduled() " +
        "handler: these triggers do not run";
      const last = {};
      for (const run of state.history) last[run.cron] = run;
      schedule.replaceChildren(el("tr", {}, ...["cron", "next run", "last run", ""].map(
        (c) => el("th", {}, c))));
      for (const { cron, next } of state.crons) {
        const previous = last[cron];
        schedule.append(el("tr", { className: "cron", "data-cron": cron },
          el("td", { className: "mono" }, cron),
          el("td", { className: "nowrap cron-next" }, ...(next === null || next === undefined
            ? ["not scheduled"] : [doemu.time(next), " (" + doemu.relative(next, state.now) +
              ")"])),
          el("td", { className: "cron-last" }, ...(previous ? [doemu.time(
            previous.scheduledTime), " ", outcome(previous)] : ["never"])),
          el("td", { className: "row-actions" }, el("button", { type: "button",
            onclick: () => runNow(cron) }, "Run now"))));
      }
      if (!state.crons.length) {
        schedule.append(el("tr", {}, el("td", { colspan: 4, className: "empty" },
          "no cron triggers ([triggers] crons in wrangler.toml)")));
      }
      history.replaceChildren(el("tr", {}, ...["scheduledTime", "cron", "outcome"].map(
        (c) => el("th", {}, c))));
      for (const run of state.history.slice().reverse()) {
        history.append(el("tr", { className: "cron-run" },
          el("td", { className: "nowrap" }, doemu.time(run.scheduledTime)),
          el("td", { className: "mono" }, run.cron), el("td", {}, outcome(run))));
      }
      if (!state.history.length) {
        history.append(el("tr", {}, el("td", { colspan: 3, className: "empty" },
          "no runs yet")));
      }
    }
    return { node: frame.node, error: frame.error, load };
  }

  async function list() {
    const state = await doemu.api("GET", "/crons");
    return state.crons.length || state.history.length ? [{ binding: "crons" }] : [];
  }

  doemu.bindingKind({ section: "bindings-crons", list, panel });
})();
"""

CRONS_SECTION = Section(name="crons", slot="overview", html=_HTML, script=_SCRIPT)
