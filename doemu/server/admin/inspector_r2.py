"""The inspector's R2 view: each bucket's objects, browsed by prefix and delimiter, downloaded.

A binding kind of :mod:`.inspector_bindings`. Per bucket: how many objects and bytes are under
the current prefix; a page of 200 entries of the listing (``delimiter`` "/" by default, so
"folders" are delimited prefixes that open with a click, with a path to go back up), each
object with its size (readable, the bytes in the tooltip), etag (the first 8 characters, all of
it in the tooltip), upload time, ``httpMetadata`` and ``customMetadata``; "Download" fetches
the body through the admin API (with the token, if any) and saves it under the key's last
segment.
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["R2_SECTION"]

_HTML = """
<section id="bindings-r2" class="binding-kind" hidden>
  <h2>R2 buckets</h2>
  <div class="binding-list"></div>
</section>
"""

_SCRIPT = r"""
(() => {
  const el = doemu.el;
  const PAGE = 200;
  const COLUMNS = ["key", "size", "etag", "uploaded", "httpMetadata", "customMetadata", ""];

  async function download(b, key) {
    const response = await fetch(doemu.API + "/r2/" + encodeURIComponent(b) + "/objects/" +
      encodeURIComponent(key) + "?body=1", { headers: doemu.headers(false), cache: "no-store" });
    if (!response.ok) {
      const data = await response.json().catch(() => null);
      throw new Error((data && data.error) || response.status + " " + response.statusText);
    }
    const url = URL.createObjectURL(await response.blob());
    const link = el("a", { href: url, download: key.split("/").pop() || "object", hidden: "" });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);  // after the browser has taken it
  }

  function panel(item, self) {
    const b = item.binding;
    const frame = doemu.panelBox(item, b, "r2 " + item.resource);
    const state = { prefix: "", delimiter: "/", page: 0, cursors: [null] };
    const prefix = el("input", { type: "text", name: "prefix", "aria-label": "prefix",
      placeholder: "key prefix" });
    const delimiter = el("input", { type: "text", name: "delimiter", value: "/", size: "3",
      "aria-label": "delimiter" });
    const form = el("form", { className: "r2-browse" }, el("label", {}, "Prefix "), prefix,
      el("label", {}, "delimiter "), delimiter, el("button", { type: "submit" }, "List"));
    const crumbs = el("p", { className: "toolbar r2-path" });
    const objects = el("table", { className: "r2-objects", "data-result": "" });
    const pages = el("p", { className: "pager" });
    frame.node.append(form, crumbs, doemu.scroll(objects), pages);

    function go(newPrefix) {
      doemu.cleared(self);
      state.prefix = newPrefix;
      state.page = 0;
      state.cursors = [null];
      prefix.value = newPrefix;
      return self.reload();
    }

    function path() {  // the prefix as clickable steps, to go back up
      crumbs.replaceChildren();
      if (!state.delimiter) return;
      const steps = [["(top)", ""]];
      let upTo = "";
      for (const part of state.prefix.split(state.delimiter).slice(0, -1)) {
        upTo += part + state.delimiter;
        steps.push([part + state.delimiter, upTo]);
      }
      if (steps.length === 1) return;
      crumbs.append(el("span", { className: "note" }, "in"));
      steps.forEach(([text, target], i) => {
        crumbs.append(i === steps.length - 1 ? el("strong", {}, text)
          : el("button", { type: "button", onclick: () => go(target) }, text));
      });
    }

    async function load() {
      const query = new URLSearchParams({ limit: String(PAGE) });
      if (state.prefix) query.set("prefix", state.prefix);
      if (state.delimiter) query.set("delimiter", state.delimiter);
      const cursor = state.cursors[state.page];
      if (cursor) query.set("cursor", cursor);
      const listing = await doemu.api("GET", "/r2/" + encodeURIComponent(b) + "/objects?" +
        query);
      const under = state.prefix ? " under “" + state.prefix + "”" : "";
      frame.count.textContent = "(" + listing.count + (listing.count === 1 ? " object, " :
        " objects, ") + doemu.bytes(listing.bytes).textContent + under + ")";
      frame.count.title = listing.bytes + " bytes";
      path();
      objects.replaceChildren(el("tr", {}, ...COLUMNS.map((c) => el("th", {}, c))));
      for (const p of listing.delimitedPrefixes) {
        objects.append(el("tr", { className: "r2-prefix", "data-prefix": p },
          el("td", { className: "mono key" }, p), el("td", { colspan: 5, className: "note" },
            "prefix"),
          el("td", { className: "row-actions" }, el("button", { type: "button",
            onclick: () => go(p) }, "Open"))));
      }
      for (const o of listing.objects) {
        objects.append(el("tr", { className: "r2-object", "data-key": o.key },
          el("td", { className: "mono key" }, o.key), el("td", { className: "nowrap" },
            doemu.bytes(o.size)),
          el("td", { className: "mono etag", title: o.etag }, o.etag.slice(0, 8) + "…"),
          el("td", { className: "nowrap" }, doemu.time(o.uploaded)),
          el("td", {}, doemu.json(o.httpMetadata)), el("td", {}, doemu.json(o.customMetadata)),
          el("td", { className: "row-actions" }, el("button", { type: "button", onclick: () => {
            doemu.cleared(self);
            return download(b, o.key).catch((error) => {
              frame.error.textContent = "Could not download “" + o.key + "”: " + error.message;
            });
          } }, "Download"))));
      }
      const shown = listing.objects.length + listing.delimitedPrefixes.length;
      if (!shown) {
        objects.append(el("tr", {}, el("td", { colspan: COLUMNS.length, className: "empty" },
          state.prefix ? "nothing under “" + state.prefix + "”" : "no objects")));
      }
      state.cursors[state.page + 1] = listing.cursor;
      doemu.pagerBox(pages, "page " + (state.page + 1) + " · " + shown + " entries",
        state.page > 0, listing.truncated, (step) => {
          doemu.cleared(self);
          state.page += step;
          self.reload();
        });
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      state.delimiter = delimiter.value;
      go(prefix.value);
    });
    return { node: frame.node, error: frame.error, load };
  }

  doemu.bindingKind({ section: "bindings-r2", types: ["r2"], panel });
})();
"""

R2_SECTION = Section(name="r2", slot="overview", html=_HTML, script=_SCRIPT)
