"""The inspector's view of the Worker's service bindings and its static assets directory.

A binding kind of :mod:`.inspector_bindings`, from ``/bindings`` alone (these bindings hold no
data to browse): the service bindings with the entrypoint class each calls (or the other Worker
it names, which doemu does not run), and the ``[assets]`` directory with its binding and
settings (``html_handling``, ``not_found_handling``, ``run_worker_first``).
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["SERVICES_SECTION"]

_HTML = """
<section id="bindings-services" class="binding-kind" hidden>
  <h2>Services and assets</h2>
  <div class="binding-list"></div>
</section>
"""

_SCRIPT = r"""
(() => {
  const el = doemu.el;

  function list(all) {
    const services = all.filter((b) => b.type === "service");
    const assets = all.find((b) => b.type === "assets");
    const items = [];
    if (services.length) items.push({ binding: "Service bindings", services });
    if (assets) items.push({ binding: "Static assets", assets });
    return items;
  }

  function panel(item) {
    const frame = doemu.panelBox(item, item.binding, "");
    const body = el("div", { "data-result": "" });
    frame.node.append(body);

    function load(fresh) {
      if (fresh.services) {
        const table = el("table", { className: "services" });
        doemu.fill(table, ["binding", "service", "calls", "local"], fresh.services.map(
          (s) => [s.binding, s.resource, s.target, s.local ? "yes" : "no: doemu runs one Worker"]));
        frame.count.textContent = "(" + fresh.services.length + ")";
        body.replaceChildren(table);
        return;
      }
      const a = fresh.assets;
      const first = Array.isArray(a.run_worker_first) ? a.run_worker_first.join(", ")
        : String(a.run_worker_first);
      body.replaceChildren(el("dl", { className: "assets" },
        el("dt", {}, "directory"), el("dd", { className: "mono" }, a.directory),
        el("dt", {}, "binding"), el("dd", { className: "mono" }, a.binding),
        el("dt", {}, "html_handling"), el("dd", {}, a.resource),
        el("dt", {}, "not_found_handling"), el("dd", {}, a.not_found_handling),
        el("dt", {}, "run_worker_first"), el("dd", {}, first)));
    }
    return { node: frame.node, error: frame.error, load };
  }

  doemu.bindingKind({ section: "bindings-services", list, panel });
})();
"""

SERVICES_SECTION = Section(name="services", slot="overview", html=_HTML, script=_SCRIPT)
