"""The inspector's D1 view: each database's tables with their schema, a SQL box, migrations.

A binding kind of :mod:`.inspector_bindings`. Per database: its tables (row count, the
``CREATE`` statement, a button that queries the first 100 rows), the migrations folder's
applied (with when) and pending files with an "Apply" button (after a confirm), and a SQL box
that is read-only unless "write" is ticked, as the object view's is: a read runs on the
database file beside the binding and can change nothing; a write runs through the binding, with
D1's rules and error texts, after a confirm. A failed query replaces the last result with what
went wrong.
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["D1_SECTION"]

_HTML = """
<section id="bindings-d1" class="binding-kind" hidden>
  <h2>D1 databases</h2>
  <div class="binding-list"></div>
</section>
"""

_SCRIPT = r"""
(() => {
  const el = doemu.el;
  const quoted = (name) => '"' + String(name).replace(/"/g, '""') + '"';
  const TABLES = "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE " +
    "'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' ORDER BY name";

  function panel(item, self) {
    const b = item.binding;
    const base = "/d1/" + encodeURIComponent(b);
    const frame = doemu.panelBox(item, b, "d1 " + item.resource +
      (item.database_name ? " · " + item.database_name : ""));
    const tables = el("table", { className: "d1-tables", "data-result": "" });
    const folder = el("p", { className: "note d1-folder" });
    const migrations = el("table", { className: "d1-migrations", "data-result": "" });
    const apply = el("button", { type: "button", className: "d1-apply" }, "Apply pending");
    const applied = el("span", { className: "note d1-applied" });
    const query = el("textarea", { rows: "3", className: "d1-query", "aria-label": "SQL" },
      "SELECT name FROM sqlite_master WHERE type = 'table'");
    const write = el("input", { type: "checkbox", className: "d1-write" });
    const runButton = el("button", { type: "button", className: "d1-run" }, "Run query");
    const queryError = el("p", { className: "binding-error d1-query-error", role: "alert" });
    const result = el("table", { className: "d1-result", "data-result": "" });
    const resultNote = el("p", { className: "note d1-result-note", "data-result": "" });
    frame.node.append(el("h4", {}, "Tables"), tables,
      el("h4", {}, "Migrations"), folder, migrations,
      el("p", { className: "actions" }, apply, applied),
      el("h4", {}, "SQL"), query, el("p", { className: "actions" },
        el("label", {}, write, " write (runs through the binding)"), runButton),
      queryError, resultNote, result);

    async function load() {
      const listed = (await doemu.api("POST", base + "/sql", { query: TABLES })).rows;
      const counts = await Promise.all(listed.map(([name]) => doemu.api("POST", base + "/sql",
        { query: "SELECT count(*) FROM " + quoted(name) }).then((r) => r.rows[0][0])));
      const state = await doemu.api("GET", base + "/migrations");
      frame.count.textContent = "(" + listed.length + (listed.length === 1 ? " table" :
        " tables") + ")";
      tables.replaceChildren(el("tr", {}, ...["table", "rows", "schema", ""].map(
        (c) => el("th", {}, c))));
      listed.forEach(([name, schema], i) => {
        tables.append(el("tr", { className: "d1-table", "data-table": name },
          el("td", { className: "mono" }, name), el("td", {}, counts[i]),
          el("td", {}, el("details", { className: "schema" }, el("summary", {}, "schema"),
            el("pre", {}, schema || ""))),
          el("td", { className: "row-actions" }, el("button", { type: "button", onclick: () => {
            query.value = "SELECT * FROM " + quoted(name) + " LIMIT 100";
            write.checked = false;
            return runQuery();
          } }, "Query"))));
      });
      if (!listed.length) {
        tables.append(el("tr", {}, el("td", { colspan: 4, className: "empty" },
          "no tables yet: apply the migrations, or CREATE TABLE with “write” ticked")));
      }
      folder.textContent = "folder " + state.folder;
      migrations.replaceChildren(el("tr", {}, ...["migration", "status", "applied at (UTC)"]
        .map((c) => el("th", {}, c))));
      for (const m of state.applied) {
        migrations.append(el("tr", { className: "d1-migration applied", "data-name": m.name },
          el("td", { className: "mono" }, m.name), el("td", {}, "applied"),
          el("td", { className: "nowrap" }, m.applied_at)));
      }
      for (const name of state.pending) {
        migrations.append(el("tr", { className: "d1-migration pending", "data-name": name },
          el("td", { className: "mono" }, name), el("td", {}, "pending"), el("td", {}, "")));
      }
      if (!state.applied.length && !state.pending.length) {
        migrations.append(el("tr", {}, el("td", { colspan: 3, className: "empty" },
          "no migrations: no .sql files in the folder")));
      }
      apply.textContent = state.pending.length
        ? "Apply " + state.pending.length + " pending" : "Nothing pending";
      apply.disabled = !state.pending.length;
    }

    async function runQuery() {
      const sql = query.value;
      const writing = write.checked;
      result.replaceChildren();  // a failure must not leave the last result on screen
      resultNote.textContent = "";
      queryError.textContent = "";
      doemu.cleared(self);
      try {
        if (writing && !confirm("Run this SQL on D1 database " + b + "?")) return;
        const answer = await doemu.api("POST", base + "/sql", { query: sql, write: writing });
        doemu.fill(result, answer.columns, answer.rows,
          { empty: answer.columns.length ? "(no rows)" : "(done: no result rows)" });
        if (answer.meta) {
          resultNote.textContent = "changes " + answer.meta.changes + " · last_row_id " +
            answer.meta.last_row_id + " · rows read " + answer.meta.rows_read +
            " · rows written " + answer.meta.rows_written;
        }
      } catch (error) {
        queryError.textContent = "The query failed: " +
          doemu.sqlMessage(sql, error.message, "through the binding");
        return;
      }
      if (writing) await doemu.reloadBindings();
    }

    runButton.addEventListener("click", runQuery);
    apply.addEventListener("click", async () => {
      doemu.cleared(self);
      applied.textContent = "";
      if (!confirm("Apply the pending migrations to D1 database " + b + "?")) return;
      try {
        const done = await doemu.api("POST", base + "/migrations/apply", {});
        applied.textContent = "applied " + (done.applied.join(", ") || "nothing");
      } catch (error) {
        frame.error.textContent = "The migrations failed: " + error.message;
      }
      await doemu.reloadBindings();  // two bindings may name the same database
    });
    return { node: frame.node, error: frame.error, load };
  }

  doemu.bindingKind({ section: "bindings-d1", types: ["d1"], panel });
})();
"""

D1_SECTION = Section(name="d1", slot="overview", html=_HTML, script=_SCRIPT)
