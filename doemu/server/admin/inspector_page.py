"""The inspector page's source: HTML, CSS and vanilla script as Python strings, put together from
the core page and its sections.

Strings rather than package data so there is nothing to build, bundle or find at run time (and
the page works offline: no CDN). Every value from the API is rendered with ``textContent`` and
DOM nodes, never ``innerHTML``; :mod:`.inspector` serves it under a Content-Security-Policy that
admits only this script and style, by hash.

**Sections.** The core (:mod:`.inspector_script`) shows the namespaces and their objects, the
pending alarms, one object (KV, SQL tables with paging, sorting and their schema, a query box)
and the timeline. Anything else is a :class:`Section` in a module of its own, listed in
:data:`SECTIONS`: its HTML goes into one of the page's slots, its style and script after the
core's. A section's script uses the core's ``doemu`` object: ``doemu.api(method, path, body)``,
``doemu.sql(object, query)``, ``doemu.el(tag, attrs, ...children)``, ``doemu.fill(table,
columns, rows)``, ``doemu.time(ms)``, ``doemu.showError(error)``, ``doemu.API`` and
``doemu.headers(json)`` (for a ``fetch`` of its own, as a download needs), and the hooks
``doemu.onRefresh`` (called with the ``/objects`` listing after every refresh) and
``doemu.onObject`` (called with the opened object and the set of its SQL table names).
:mod:`.inspector_agents` (an agent's state, schedules, fibers and chat transcript) is one. The
bindings' views are kinds of :mod:`.inspector_bindings` (a module each: ``inspector_kv``,
``inspector_d1``, ``inspector_r2``, ``inspector_crons``, ``inspector_services``,
``inspector_queues``, ``inspector_workflows``, ``inspector_ai``), listed after the section they
share.
"""

from __future__ import annotations

from .inspector_agents import AGENT_SECTION
from .inspector_ai import AI_SECTION
from .inspector_bindings import BINDINGS_SECTION
from .inspector_crons import CRONS_SECTION
from .inspector_d1 import D1_SECTION
from .inspector_kv import KV_SECTION
from .inspector_queues import QUEUES_SECTION
from .inspector_r2 import R2_SECTION
from .inspector_script import CORE_SCRIPT
from .inspector_section import Section
from .inspector_services import SERVICES_SECTION
from .inspector_workflows import WORKFLOWS_SECTION

__all__ = ["SECTIONS", "STYLE", "TEMPLATE", "Section", "assemble"]

#: Every section of the page beyond the core, in order. Add one here to show something new.
SECTIONS: tuple[Section, ...] = (
    AGENT_SECTION,
    BINDINGS_SECTION,  # what the binding kinds below share: before them
    KV_SECTION,
    D1_SECTION,
    R2_SECTION,
    CRONS_SECTION,
    SERVICES_SECTION,
    QUEUES_SECTION,
    WORKFLOWS_SECTION,
    AI_SECTION,
)

TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
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
  <div id="content">
    <section id="overview">
      <h2>Objects</h2>
      <div id="namespaces"></div>
      <h2>Pending alarms</h2>
      <table id="alarms"></table>
      <!--overview-->
    </section>
    <section id="object" hidden>
      <div class="object-head">
        <h2 id="object-title"></h2>
        <button id="close-object" type="button" title="Back to the list">Close</button>
      </div>
      <p id="object-meta"></p>
      <p class="actions">
        <button id="run-alarm" type="button">Run alarm now</button>
        <button id="evict" type="button">Evict</button>
        <button id="reset" type="button">Reset</button>
        <button id="reload-object" type="button">Refresh object</button>
      </p>
      <!--object-->
      <h3>KV <span id="kv-count" class="count"></span></h3>
      <table id="kv"></table>
      <p class="pager" id="kv-pager"></p>
      <h3>SQL tables</h3>
      <div id="tables"></div>
      <h3>Query</h3>
      <textarea id="query" rows="3">SELECT name FROM sqlite_master</textarea>
      <p class="actions">
        <label><input id="write" type="checkbox"> write (runs inside the object)</label>
        <button id="run-query" type="button">Run query</button>
      </p>
      <p id="query-error" role="alert"></p>
      <table id="query-result"></table>
    </section>
  </div>
  <aside id="sidebar">
    <div class="timeline-head">
      <h2>Timeline</h2>
      <label><input id="show-requests" type="checkbox" checked> requests</label>
      <label><input id="show-logs" type="checkbox" checked> logs</label>
    </div>
    <ol id="timeline" reversed></ol>
    <!--sidebar-->
  </aside>
</main>
<script>/*SCRIPT*/</script>
</body>
</html>
"""

STYLE = """
* { box-sizing: border-box; }
body { font: 13px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { display: flex; gap: 1.2em; align-items: baseline; padding: .5em 1em; background: #eee;
  flex-wrap: wrap; }
h1 { font-size: 1.2em; margin: 0; }
h2 { font-size: 1.1em; margin: 1em 0 .4em; }
h3 { font-size: 1em; margin: 1em 0 .3em; }
h4 { display: inline-block; font-size: 1em; margin: .8em .6em .3em 0; }
main { display: grid; grid-template-columns: minmax(0, 1fr) minmax(18rem, 26rem); gap: 1.2em;
  padding: 0 1em 1em; align-items: start; }
#content { min-width: 0; }
#sidebar { position: sticky; top: 0; max-height: 100vh; overflow-y: auto; min-width: 0; }
table { border-collapse: collapse; margin-bottom: .4em; width: 100%; }
td, th { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; white-space: nowrap; font-weight: 600; }
th.sortable { cursor: pointer; user-select: none; }
th.sortable:hover { background: #e6e6e6; }
td { max-width: 36em; overflow-wrap: anywhere; }
td.id, td.nowrap { white-space: nowrap; }
td.id { font-family: monospace; }
td.empty { color: #777; font-style: italic; }
button { white-space: nowrap; }
.count { color: #666; font-weight: normal; font-size: .9em; }
.pager { margin: 0 0 .6em; display: flex; gap: .6em; align-items: center; color: #555; }
.pager:empty { display: none; }
.actions { display: flex; gap: .6em; align-items: center; flex-wrap: wrap; }
.object-head { display: flex; gap: 1em; align-items: baseline; }
details.schema { margin: 0 0 .4em; }
details.schema pre { margin: .3em 0; }
.state-live { color: #070; font-weight: bold; }
.state-evicted { color: #777; }
#error, #query-error { color: #b00; margin: .3em 1em; white-space: pre-wrap; }
#query-error { margin: .3em 0; }
#query { width: 100%; font-family: monospace; }
.timeline-head { display: flex; gap: .8em; align-items: baseline; }
#timeline { font-family: monospace; font-size: 12px; padding-left: 2.2em; margin: 0; }
#timeline li { padding: 1px 0; overflow-wrap: anywhere; }
#timeline li.request { color: #345; }
#timeline li.log { color: #555; }
#timeline li.log.level-WARNING, #timeline li.log.level-ERROR,
#timeline li.log.level-CRITICAL { color: #a40; }
#timeline li.placeholder { color: #777; font-style: italic; list-style: none; }
pre { background: #f6f6f6; padding: .4em; white-space: pre-wrap; }
time { white-space: nowrap; }
"""


def assemble(sections: tuple[Section, ...] = SECTIONS) -> tuple[str, str, str]:
    """The page's HTML (style and script still as placeholders), script and style."""
    html = TEMPLATE
    for slot in ("overview", "object", "sidebar"):
        parts = [s.html for s in sections if s.slot == slot]
        html = html.replace(f"<!--{slot}-->", "\n".join(parts))
    script = "\n".join([CORE_SCRIPT, *(s.script for s in sections if s.script)])
    style = "\n".join([STYLE, *(s.style for s in sections if s.style)])
    return html, script, style
