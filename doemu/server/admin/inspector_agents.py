"""The inspector's agent section: an agent's state, schedules, fibers, recovery rows and chat
transcript, shown in an opened object's view when its tables are the Agents SDK's.

A :class:`~.inspector_section.Section` of its own (the pattern for any view added later): static
markup, and a script that registers a ``doemu.onObject`` hook and reads the tables with
read-only SQL. The table names are the SDK's (``cf_agents_state``, ``cf_agents_schedules``,
``cf_agents_runs``, ``cf_agents_fibers``, ``cf_agents_run_recovery``,
``cf_ai_chat_agent_messages``).
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["AGENT_SECTION"]

_HTML = """
<section id="agent" hidden>
  <h3>Agent</h3>
  <h4>State</h4><pre id="agent-state"></pre>
  <h4>Schedules</h4><table id="agent-schedules"></table>
  <h4>Fibers</h4><table id="agent-fibers"></table>
  <h4>Recovery</h4><table id="agent-recovery"></table>
  <h4>Chat transcript</h4><ol id="transcript"></ol>
</section>
"""

_SCRIPT = r"""
doemu.onObject.push(async (o, names) => {
  const $ = (id) => document.getElementById(id);
  const agent = ["cf_agents_state", "cf_agents_schedules", "cf_agents_runs",
    "cf_ai_chat_agent_messages"].some((t) => names.has(t));
  $("agent").hidden = !agent;
  if (!agent) return;
  const rows = async (table, query, target) => {
    if (!names.has(table)) return doemu.fill(target, ["(no " + table + " table)"], []);
    const result = await doemu.sql(o, query);
    doemu.fill(target, result.columns, result.rows);
  };
  let state = "(no state)";
  if (names.has("cf_agents_state")) {
    const result = await doemu.sql(o,
      "SELECT state FROM cf_agents_state WHERE id = 'cf_state_row_id'");
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
  await rows("cf_agents_run_recovery", "SELECT * FROM cf_agents_run_recovery",
    $("agent-recovery"));
  const transcript = $("transcript");
  transcript.replaceChildren();
  if (names.has("cf_ai_chat_agent_messages")) {
    const result = await doemu.sql(o,
      "SELECT message FROM cf_ai_chat_agent_messages ORDER BY seq");
    for (const [raw] of result.rows) {
      let message;
      try { message = JSON.parse(raw); } catch { message = { role: "?", parts: [] }; }
      const parts = (message.parts || []).filter((p) => p.type !== "step-start");
      const text = parts.map((p) => p.type === "text" ? p.text : "[" + p.type + "]");
      transcript.append(doemu.el("li", { className: "message " + message.role },
        message.role + ": " + text.join(" ")));
    }
    if (!result.rows.length) transcript.append(doemu.el("li", {}, "(no messages)"));
  }
});
"""

AGENT_SECTION = Section(name="agent", slot="object", html=_HTML, script=_SCRIPT)
