"""The inspector's KV view: each KV namespace's keys, one entry's value, a put and a delete.

A binding kind of :mod:`.inspector_bindings`. Per namespace: its live keys 200 to a page with
their expiration and metadata (``(200 of 230 keys)``, Previous/Next through the API's cursors),
a prefix filter, an entry opened with its value (text as is, bytes as base64), metadata
(indented JSON) and expiration (a local time, the epoch seconds in the tooltip), a delete and a
put (value, metadata as JSON, ``expirationTtl``), each after a confirm. Writes go through the
binding (``PUT``/``DELETE /kv/{binding}/keys/{key}``), so Cloudflare's limits and error texts
apply; a refused one is shown in the panel's error line.
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["KV_SECTION"]

_HTML = """
<section id="bindings-kv" class="binding-kind" hidden>
  <h2>KV namespaces</h2>
  <div class="binding-list"></div>
</section>
"""

_SCRIPT = r"""
(() => {
  const el = doemu.el;
  const PAGE = 200;
  const keyPath = (b, key) => "/kv/" + encodeURIComponent(b) + "/keys/" +
    encodeURIComponent(key);

  function panel(item, self) {
    const b = item.binding;
    const frame = doemu.panelBox(item, b, "kv " + item.resource);
    const state = { prefix: "", page: 0, cursors: [null], open: null };
    const prefix = el("input", { type: "text", name: "prefix", placeholder: "key prefix",
      "aria-label": "key prefix" });
    const filter = el("form", { className: "kv-filter" }, el("label", {}, "Prefix "), prefix,
      el("button", { type: "submit" }, "Filter"));
    const keys = el("table", { className: "kv-keys", "data-result": "" });
    const pages = el("p", { className: "pager" });
    const entry = el("div", { className: "kv-entry", "data-result": "" });
    const putKey = el("input", { type: "text", name: "key", "aria-label": "key to put" });
    const putValue = el("textarea", { name: "value", rows: "3", "aria-label": "value" });
    const putMeta = el("textarea", { name: "metadata", rows: "2", "aria-label": "metadata",
      placeholder: "optional JSON, e.g. {\"owner\": \"ada\"}" });
    const putTtl = el("input", { type: "number", name: "expirationTtl",
      "aria-label": "expirationTtl", placeholder: "optional, seconds (≥ 60)" });
    const put = el("form", { className: "kv-put" }, el("fieldset", {},
      el("legend", {}, "Put a key"),
      el("div", { className: "grid" }, el("label", {}, "key"), putKey, el("label", {}, "value"),
        putValue, el("label", {}, "metadata"), putMeta, el("label", {}, "expirationTtl"),
        putTtl),
      el("p", { className: "actions" }, el("button", { type: "submit" }, "Put"))));
    frame.node.append(filter, doemu.scroll(keys), pages, entry, put);

    async function load() {
      const query = new URLSearchParams({ limit: String(PAGE) });
      if (state.prefix) query.set("prefix", state.prefix);
      const cursor = state.cursors[state.page];
      if (cursor) query.set("cursor", cursor);
      const listing = await doemu.api("GET", "/kv/" + encodeURIComponent(b) + "/keys?" + query);
      const noun = listing.count === 1 ? "key" : "keys";
      const shown = listing.keys.length;
      const filtered = state.prefix ? " with prefix “" + state.prefix + "”" : "";
      frame.count.textContent = shown < listing.count
        ? "(" + shown + " of " + listing.count + " " + noun + filtered + ")"
        : "(" + listing.count + " " + noun + filtered + ")";
      keys.replaceChildren(el("tr", {}, ...["key", "expiration", "metadata", ""].map(
        (c) => el("th", {}, c))));
      for (const k of listing.keys) {
        keys.append(el("tr", { className: "kv-key", "data-key": k.name },
          el("td", { className: "mono key" }, k.name),
          el("td", { className: "nowrap" }, doemu.seconds(k.expiration)),
          el("td", {}, doemu.json(k.metadata)),
          el("td", { className: "row-actions" },
            el("button", { type: "button", onclick: () => show(k.name) }, "Show"),
            el("button", { type: "button", onclick: () => remove(k.name) }, "Delete"))));
      }
      if (!shown) {
        keys.append(el("tr", {}, el("td", { colspan: 4, className: "empty" },
          state.prefix ? "no keys with prefix “" + state.prefix + "”" : "no keys")));
      }
      state.cursors[state.page + 1] = listing.cursor;
      const from = state.page * PAGE + 1;
      const where = (shown ? from + "–" + (from + shown - 1) : "0") + " of " + listing.count;
      doemu.pagerBox(pages, where, state.page > 0, !listing.list_complete, (step) => {
        doemu.cleared(self);
        state.page += step;
        self.reload();
      });
      if (state.open !== null) await renderEntry(state.open);
    }

    async function renderEntry(key) {
      let got;
      try {
        got = await doemu.api("GET", keyPath(b, key));
      } catch (error) {
        state.open = null;
        entry.replaceChildren();
        frame.error.textContent = "Could not read “" + key + "”: " + error.message;
        return;
      }
      const value = got.value !== null && typeof got.value === "object"
        ? "bytes (base64): " + got.value.$bytes : got.value;
      entry.replaceChildren(
        el("h4", {}, "“" + key + "”"),
        el("button", { type: "button", onclick: () => { state.open = null;
          entry.replaceChildren(); } }, "Close"),
        el("dl", {},
          el("dt", {}, "value"), el("dd", {}, el("pre", { className: "kv-value" }, value)),
          el("dt", {}, "metadata"), el("dd", {}, el("pre", { className: "kv-metadata" },
            got.metadata === null ? "(none)" : JSON.stringify(got.metadata, null, 2))),
          el("dt", {}, "expiration"), el("dd", { className: "kv-expiration" },
            doemu.seconds(got.expiration))));
    }

    async function show(key) {
      state.open = key;
      doemu.cleared(self);
      await renderEntry(key);
    }

    async function remove(key) {
      doemu.cleared(self);
      if (!confirm("Delete “" + key + "” from KV namespace " + b + "?")) return;
      try {
        await doemu.api("DELETE", keyPath(b, key));
      } catch (error) {
        doemu.failed(self, error, "Could not delete “" + key + "”");
        return;
      }
      if (state.open === key) { state.open = null; entry.replaceChildren(); }
      await doemu.reloadBindings();
    }

    filter.addEventListener("submit", (event) => {
      event.preventDefault();
      state.prefix = prefix.value;
      state.page = 0;
      state.cursors = [null];
      doemu.cleared(self);
      self.reload();
    });
    put.addEventListener("submit", async (event) => {
      event.preventDefault();
      const key = putKey.value;
      doemu.cleared(self);
      const body = { value: putValue.value };
      try {
        if (!key) throw new Error("give the key a name");
        if (putMeta.value.trim()) {
          try { body.metadata = JSON.parse(putMeta.value); } catch (error) {
            throw new Error("metadata is not valid JSON (" + error.message + ")");
          }
        }
        if (putTtl.value) body.expirationTtl = Number(putTtl.value);
        if (!confirm("Put “" + key + "” in KV namespace " + b + "?")) return;
        await doemu.api("PUT", keyPath(b, key), body);
      } catch (error) {
        frame.error.textContent = "Could not put “" + key + "”: " + error.message;
        return;
      }
      state.open = key;
      await doemu.reloadBindings();
    });
    return { node: frame.node, error: frame.error, load };
  }

  doemu.bindingKind({ section: "bindings-kv", types: ["kv"], panel });
})();
"""

KV_SECTION = Section(name="kv", slot="overview", html=_HTML, script=_SCRIPT)
