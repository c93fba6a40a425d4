// Settings → Web search: the service Baton searches through when a client's hosted web search
// (Claude Code's WebSearch, Codex's web_search, Gemini's grounding) is served by another kind of
// provider. A typed key goes to the OS credential store and is never shown again.
import { api } from "./api.js";
import { fmtList, keep, t, tn } from "./i18n.js";
import { el, kindLabel, kindOf, kinds, setKinds } from "./views.js";

const $ = (id) => document.getElementById(id);
let ctx;
let current;

export function initWebSearch(c) {
  ctx = c;
  $("ws-backend").addEventListener("change", () => showFields($("ws-backend").value));
  $("web-search-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = {
      backend: $("ws-backend").value,
      url: $("ws-url").value.trim(),
      maxResults: Number($("ws-max").value) || 5,
      provider: $("ws-backend").value === "provider" ? $("ws-provider").value : "",
    };
    const key = $("ws-key").value.trim();
    if (key) body.apiKey = key;
    else body.apiKeyEnv = $("ws-env").value.trim();
    try {
      const saved = await api("PUT", "/admin/web-search", body);
      render(saved);
      $("ws-key").value = "";
      // Saved, but the service did not answer: said where the status is, in the gateway's words.
      if (saved.warning) $("ws-status").append(el("p", { class: "warn-text", role: "alert", "data-testid": "ws-warning" }, saved.warning));
      ctx.toast(body.backend === "none" ? t("Web search turned off.") : saved.warning ? t("Web search saved, but its service does not answer.") : t("Web search saved."));
    } catch (err) {
      ctx.showError(err);
      const field = { url: "ws-url", apiKey: "ws-key", maxResults: "ws-max", provider: "ws-provider" }[err.param];
      if (field) $(field).focus();
    }
  });
  $("web-search-test").addEventListener("submit", async (e) => {
    e.preventDefault();
    const query = $("ws-query").value.trim();
    if (!query) {
      $("ws-query").focus();
      return;
    }
    const status = $("ws-status");
    status.replaceChildren(t("Searching…"));
    try {
      const r = await api("POST", "/admin/web-search/test", { query });
      if (r.error) {
        status.replaceChildren(el("p", { class: "warn-text", role: "alert", translate: "no" }, r.error.message));
      } else if (!r.results.length) {
        status.replaceChildren(el("p", {}, tn("No results for “{query}”.", { query: keep(r.query) })));
      } else {
        status.replaceChildren(
          el("p", { class: "muted small" }, tn("{n} results for “{query}”:", { n: r.results.length, query: keep(r.query) })),
          el("ol", { class: "ws-results", translate: "no" }, ...r.results.map((h) =>
            el("li", {}, el("a", { href: h.url, target: "_blank", rel: "noopener noreferrer" }, h.title || h.url),
              el("div", { class: "muted small" }, h.url)))),
        );
      }
    } catch (err) {
      status.replaceChildren();
      ctx.showError(err);
    }
  });
}

function showFields(backend) {
  $("ws-url-row").hidden = backend === "none" || backend === "provider";
  $("ws-provider-row").hidden = backend !== "provider";
  $("ws-url").placeholder = backend === "brave" ? t("{url} (default)", { url: "https://api.search.brave.com/res/v1/web/search" }) : "http://127.0.0.1:8888";
  $("ws-key-row").hidden = backend !== "brave";
  $("ws-env-row").hidden = backend !== "brave";
  $("web-search-test").hidden = !current || current.backend === "none" || backend !== current.backend;
}

/** Why searches cannot run: in words when no service is chosen, else as the gateway says it. */
export function unavailableWords(w) {
  return w.backend === "none" ? t("no search service is set up in Baton (Settings → Web search)") : keep(w.unavailable);
}


export async function renderWebSearch() {
  try {
    const [w, p] = await Promise.all([api("GET", "/admin/web-search"), api("GET", "/admin/providers")]);
    // The providers whose API searches by itself, as the gateway's kind registry says.
    setKinds(p.kinds);
    // …and that hold a key of their own: a provider on the client's own login has none for a
    // search Baton runs itself.
    const able = p.providers.filter((x) => kindOf(x.kind).searches && (x.config || {}).credentials !== "client");
    $("ws-provider").replaceChildren(...able.map((x) => el("option", { value: x.id, translate: "no" }, `${x.name || x.id} (${x.kind})`)));
    if (!able.length) $("ws-provider").append(el("option", { value: "" }, t("No provider of these kinds yet: {kinds}", { kinds: fmtList(kinds().filter((k) => k.searches).map((k) => kindLabel(k.id))) })));
    render(w);
  } catch (err) {
    ctx.showError(err);
  }
}

function render(w) {
  current = w;
  // The config file's `webSearch` wins at every start: shown, not edited here.
  for (const input of $("web-search-form").querySelectorAll("input, select, button")) input.disabled = w.fromFile;
  $("ws-backend").value = w.backend;
  $("ws-url").value = w.url || "";
  $("ws-env").value = w.apiKeyEnv || "";
  $("ws-key").placeholder = w.keyStored ? t("•••••••• (saved; type to replace)") : "";
  $("ws-max").value = w.maxResults;
  if (w.provider) $("ws-provider").value = w.provider;
  showFields(w.backend);
  $("ws-status").replaceChildren(
    ...(w.fromFile ? [el("p", { class: "muted small" }, t("Set in the config file (webSearch): change it there."))] : []),
    w.unavailable
      ? el("p", { class: w.backend === "none" ? "muted small" : "warn-text" }, tn("Translated routes cannot search: {why}.", { why: unavailableWords(w) }))
      : el("p", { class: "muted small" }, w.backend === "provider" ? t("Translated routes search through {provider}, on its own key.", { provider: w.provider }) : t("Translated routes search through this service.")),
  );
}
