"""The inspector's Workers AI view: where ``env.AI`` is served from, and its last calls.

A binding kind of :mod:`.inspector_bindings` for the ``ai`` entry of ``/bindings``, reading
``GET /ai``: the endpoint (``[tool.doemu.ai] base_url``, or how to configure one), the default
models and the map from Workers AI model names to the endpoint's (never the key: the API does
not send it), and the last calls of ``run()`` newest first, from the binding's in-memory ring:
when, the model and the endpoint's model, the task, the HTTP status, the latency and the tokens
the answer counted, and the error of a call that failed.
"""

from __future__ import annotations

from .inspector_section import Section

__all__ = ["AI_SECTION"]

_HTML = """
<section id="bindings-ai" class="binding-kind" hidden>
  <h2>Workers AI</h2>
  <div class="binding-list"></div>
</section>
"""

_SCRIPT = r"""
(() => {
  const el = doemu.el;

  function tokens(t) {
    if (!t) return "";
    return t.prompt_tokens + " in · " + t.completion_tokens + " out · " + t.total_tokens;
  }

  function panel(item) {
    const frame = doemu.panelBox(item, item.binding, "ai " + item.resource);
    const settings = el("div", { className: "ai-settings", "data-result": "" });
    const models = el("table", { className: "ai-models", "data-result": "" });
    const calls = el("table", { className: "ai-calls", "data-result": "" });
    frame.node.append(settings, el("h4", {}, "Model map"), models,
      el("h4", {}, "Last calls"), doemu.scroll(calls));

    async function load() {
      const ai = await doemu.api("GET", "/ai");
      frame.count.textContent = "(" + ai.total_calls + (ai.total_calls === 1 ? " call"
        : " calls") + ")";
      settings.replaceChildren(ai.configured ? el("dl", {},
        el("dt", {}, "endpoint"), el("dd", { className: "mono ai-endpoint" }, ai.base_url),
        el("dt", {}, "default_model"), el("dd", {}, ai.default_model || "(none)"),
        el("dt", {}, "default_embedding_model"), el("dd", {},
          ai.default_embedding_model || "(none)"),
        el("dt", {}, "last HTTP status"), el("dd", {}, ai.lastRequestHttpStatusCode === null
          ? "(none yet)" : String(ai.lastRequestHttpStatusCode)))
        : el("p", { className: "binding-error ai-unconfigured" }, "not configured: every " +
          "run() fails until [tool.doemu.ai] base_url is set in pyproject.toml (the key, if " +
          "the endpoint needs one, goes in .dev.vars as DOEMU_AI_API_KEY)"));
      doemu.fill(models, ["Workers AI model", "endpoint model"], Object.entries(ai.models),
        { empty: "no models mapped: every text model goes to default_model" });
      calls.replaceChildren(el("tr", {}, ...["at", "model", "endpoint model", "task", "status",
        "latency", "tokens"].map((h) => el("th", {}, h))));
      for (const c of ai.calls) {
        const status = c.latency_ms === null ? "running" : c.ok ? String(c.status)
          : (c.status === null ? "failed" : String(c.status)) + ": " + c.error;
        calls.append(el("tr", { className: "ai-call" + (c.ok ? "" : " failed") },
          el("td", { className: "nowrap" }, doemu.time(c.at)),
          el("td", { className: "mono" }, c.model),
          el("td", { className: "mono" }, c.endpoint_model || ""),
          el("td", {}, (c.task || "") + (c.stream ? " (stream)" : "")),
          el("td", { className: c.ok ? "outcome-ok" : "outcome-exception" }, status),
          el("td", { className: "nowrap" }, c.latency_ms === null ? "" : c.latency_ms + " ms"),
          el("td", { className: "nowrap" }, tokens(c.tokens))));
      }
      if (!ai.calls.length) {
        calls.append(el("tr", {}, el("td", { colspan: 7, className: "empty" },
          "no calls yet")));
      }
    }
    return { node: frame.node, error: frame.error, load };
  }

  doemu.bindingKind({ section: "bindings-ai", types: ["ai"], panel });
})();
"""

AI_SECTION = Section(name="ai", slot="overview", html=_HTML, script=_SCRIPT)
