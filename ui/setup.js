// Getting started: what Baton found on this machine (the welcome screen, then a smaller card
// while anything found is not added yet), the catalog's presets, and the Connect screen's
// ready-to-paste set-ups (Claude Code, SDKs, curl). The app passes in what these share with it.

import { api } from "./api.js";
import { openProviderForm } from "./forms.js";
import { autoSetup } from "./connect.js";
import { clientTarget, mapClient, targetOptions } from "./routing.js";
import { fmtList, keep, t, tn } from "./i18n.js";
import { el, kindOf, loginHint, presetName, snippet } from "./views.js";
import { unavailableWords } from "./websearch.js";

const $ = (id) => document.getElementById(id);
/** The app's state and helpers: { state, toast, showError, loadProviders, routingCtx }. */
let app = null;

export function initSetup(ctx) {
  app = ctx;
}

const toast = (text) => app.toast(text);
const showError = (e) => app.showError(e);

export function presets() {
  return (app.state.setup && app.state.setup.presets) || [];
}

let setupGen = 0;
export async function ensureSetup() {
  if (app.state.setup) return app.state.setup;
  // An answer asked for before the last save is stale: used once, not kept.
  const gen = setupGen;
  const s = await api("GET", "/admin/setup");
  if (gen === setupGen) app.state.setup = s;
  return s;
}

const DISMISSED = "baton.foundDismissed";
/** Set once the Connect screen has been seen: the "Next" card has done its job. */
const CONNECT_SEEN = "baton.connectSeen";

/** Hides a first-run card for good; focus goes to the next sensible control (the other card's
 * first button, else the first provider's, else Add provider), never to the page's body. */
async function hideCard(key) {
  localStorage.setItem(key, "1");
  await renderFirstRun();
  // The first control that is still on screen (a hidden card keeps its buttons in the page).
  const next = [...document.querySelectorAll("#first-run button:not([disabled]), #provider-list button:not([disabled]), #provider-list input")]
    .find((b) => b.offsetParent !== null);
  (next || document.getElementById("add-provider")).focus();
}

/** After a save or delete: what was found may now be configured, so ask again. */
export function afterSave() {
  app.state.setup = null;
  setupGen += 1;
  app.loadProviders();
}

function foundRow(x) {
  return el("div", { class: "found" },
    el("div", {}, el("strong", { translate: "no" }, x.name), el("div", { class: "muted small" },
      tn(x.status === "key-found" ? "key in {where}" : x.status === "cli-logged-in" ? "logged in · {where}" : "installed · {where}", { where: keep(x.found) }))),
    el("button", { type: "button", class: "primary", "aria-label": t("Add {name}", { name: x.name }), onclick: () => openProviderForm({ preset: { id: x.id, provider: x.provider }, presets: presets(), onSaved: afterSave, toast }) }, t("Add")));
}

/** What Baton found on this machine, one click each: the welcome screen when nothing is
 * configured; afterwards, while anything found is not added yet, a smaller card the user can
 * hide (it used to vanish after the first Add). */
let firstRunGen = 0;
export async function renderFirstRun() {
  // Loads overlap (a save, then the event it causes): only the latest call may draw.
  const gen = ++firstRunGen;
  const box = $("first-run");
  const welcome = !app.state.providers.length;
  const next = !welcome && localStorage.getItem(CONNECT_SEEN) !== "1";
  const foundHidden = localStorage.getItem(DISMISSED) === "1";
  if (!welcome && foundHidden && !next) {
    box.hidden = true;
    return;
  }
  if (welcome && box.hidden) {
    box.hidden = false;
    box.replaceChildren(el("div", { class: "empty" }, t("Looking for what this machine has…")));
  }
  let s;
  try {
    s = await ensureSetup();
  } catch (e) {
    showError(e);
    return;
  }
  if (gen !== firstRunGen) return;
  const found = foundHidden && !welcome ? [] : s.suggestions.filter((x) => !x.configured && x.status !== "cli-logged-out");
  // Rebuilt only when what it shows changes: the list refreshes on every event, and a rebuild
  // would take keyboard focus off its buttons.
  const shown = JSON.stringify([welcome, next, found.map((x) => x.id), Boolean(s.ollama)]);
  if (box.dataset.shown === shown && !box.hidden) return;
  box.dataset.shown = shown;
  if (!welcome) {
    if (!found.length && !next) {
      box.hidden = true;
      return;
    }
    box.hidden = false;
    // (replaceChildren writes a null as the text "null": only the cards that are there.)
    box.replaceChildren(...[
      // After the first provider: the step the welcome card ended with, until Connect is seen.
      next ? el("div", { class: "card stack", id: "next-connect" },
        el("div", { class: "view-head" }, el("h2", {}, t("Next: point your tools at Baton")),
          el("button", { type: "button", onclick: () => hideCard(CONNECT_SEEN) }, t("Hide"))),
        el("p", {}, tn("Claude Code, Codex, Gemini CLI and opencode are set up in one click, and every SDK's settings are there: {link}.",
          { link: el("a", { href: "#connect", id: "next-connect-link" }, t("Connect")) }))) : null,
      found.length ? el("div", { class: "card stack", id: "also-found" },
        el("div", { class: "view-head" }, el("h2", {}, t("Also found on this machine")),
          el("button", { type: "button", onclick: () => hideCard(DISMISSED) }, t("Hide"))),
        ...found.map((x) => foundRow(x))) : null,
    ].filter(Boolean));
    return;
  }
  const items = found.map((x) => foundRow(x));
  const loggedOut = s.suggestions.filter((x) => x.status === "cli-logged-out");
  if (s.ollama) {
    items.push(el("div", { class: "found" },
      el("div", {}, el("strong", {}, t("Ollama on this machine")), el("div", { class: "muted small" }, t("{n} models", { n: s.ollama.models.length }))),
      el("button", { type: "button", class: "primary", onclick: () => openProviderForm({ preset: { id: "ollama", provider: { id: "ollama", name: "Ollama", kind: "openai-compatible", baseUrl: s.ollama.baseUrl, models: s.ollama.models.slice(0, 5) } }, presets: presets(), onSaved: afterSave, toast }) }, t("Add"))));
  }
  // Free tiers anyone can sign up for: the key arrives by e-mail in minutes, then one click.
  const offered = new Set([...found.map((x) => x.id), ...app.state.providers.map((p) => p.id)]);
  const free = (s.presets || []).filter((x) => x.freeTier && !kindOf(x.provider.kind || "").program && x.id !== "ollama" && !offered.has(x.id));
  const freeRows = free.map((x) => el("div", { class: "found" },
    el("div", {}, el("strong", { translate: "no" }, presetName(x.name)),
      // The catalog's note is Baton's own words (catalog/providers.json): in the catalogue too.
      el("div", { class: "muted small" }, [x.freeTier.rpm ? t("{n} requests/min", { n: x.freeTier.rpm }) : null, x.freeTier.rpd ? t("{n}/day", { n: x.freeTier.rpd }) : null,
        x.freeTier.note ? t(x.freeTier.note) : null].filter(Boolean).join(" · "))),
    el("div", { class: "row" },
      x.signup ? el("a", { class: "button", href: x.signup, target: "_blank", rel: "noopener noreferrer", "aria-label": t("Sign up for {name} (opens its site)", { name: x.name }) }, t("Sign up")) : null,
      el("button", { type: "button", "aria-label": t("Add {name}", { name: x.name }), onclick: () => openProviderForm({ preset: x, presets: s.presets, onSaved: afterSave, toast }) }, t("Add key")))));
  box.replaceChildren(
    el("div", { class: "card stack" },
      el("h2", {}, t("Welcome — let's give Baton something to route to")),
      items.length ? el("p", { class: "muted small" }, t("Found on this machine (one click each):")) : el("p", { class: "muted" }, t("Nothing found on this machine yet: no subscription CLI logged in, no provider key variables, no local Ollama.")),
      ...items,
      loggedOut.length ? el("p", { class: "muted small" }, tn("Installed but logged out: {list}", { list: loggedOutList(loggedOut) })) : null,
      freeRows.length ? el("h3", {}, t("Free tiers you can sign up for")) : null,
      ...freeRows,
      el("p", { class: "muted small" }, tn("Then point your tools at Baton: see {link}.", { link: el("a", { href: "#connect" }, t("Connect")) }))));
}


export async function renderConnect() {
  const box = $("connect-body");
  let s, routes, clients, search;
  try {
    [s, routes, clients, search] = await Promise.all([ensureSetup(), api("GET", "/admin/routes"), api("GET", "/admin/connect"), api("GET", "/admin/web-search")]);
    if (!app.state.providers.length) await app.loadProviders();
  } catch (e) {
    showError(e);
    return;
  }
  localStorage.setItem(CONNECT_SEEN, "1");
  // The address this page came from is the one clients on this machine reach.
  const base = `${location.origin}/v1`;
  if (!app.state.providers.some((p) => p.enabled)) {
    // Nothing to route to: every set-up below would end in 503s. Say that first, and offer
    // the catalog.
    box.replaceChildren(
      el("div", { class: "card stack", id: "connect-no-provider" },
        el("h2", {}, t("First give Baton a provider")),
        el("p", {}, t("Baton has no enabled provider yet, so a tool pointed at it would only get “no provider available” errors. Add one (a key, a subscription CLI or a local model), then come back here.")),
        el("div", { class: "row" }, el("a", { class: "button primary", href: "#providers" }, t("Providers")))),
      el("div", { class: "card stack" }, el("h2", {}, t("Providers Baton knows")),
        el("p", { class: "muted small" }, t("Add one from the catalog (its URL, models and key variable are filled in):")),
        el("div", { class: "row" }, presets().map((x) => el("button", { type: "button", translate: "no", onclick: () => openProviderForm({ preset: x, presets: presets(), onSaved: afterSave, toast }) }, presetName(x.name))))));
    return;
  }
  // Snippets read the key where it lives: the UI never holds the gateway key itself.
  const k = s.gatewayKey || { file: s.gatewayKeyFile };
  const shellKey = k.env ? `$${k.env}` : `$(cat '${k.file}')`;
  const pyKey = k.env ? `os.environ["${k.env}"]` : `open(${JSON.stringify(k.file)}).read().strip()`;
  const keyNote = k.env
    ? el("p", { class: "muted small" }, tn("Clients use the gateway key as their API key: it is in the environment variable {name} (from the config file).", { name: el("code", {}, k.env) }))
    : el("p", { class: "muted small" }, tn("Clients use the gateway key as their API key. It is in {file}; the snippets below read it from there.", { file: el("code", { "data-testid": "key-file" }, k.file) }));
  box.replaceChildren(
    el("div", { class: "card stack" },
      snippet(t("Base URL for OpenAI-compatible clients (Cursor, Continue, SDKs)"), base),
      snippet(t("Base URL for Anthropic clients"), location.origin),
      keyNote),
    claudeCodeCard(routes, shellKey, auto(clients, "claude-code"), clients.statuslineCommand),
    codexCard(routes, shellKey, base, auto(clients, "codex")),
    el("div", { class: "card stack", id: "opencode" }, el("h2", { translate: "no" }, "opencode"), auto(clients, "opencode")),
    geminiCard(routes, shellKey, auto(clients, "gemini-cli")),
    webSearchCard(search),
    el("div", { class: "card stack" }, snippet(keep("OpenAI Python SDK"), `from openai import OpenAI\n\nclient = OpenAI(base_url="${base}", api_key=${pyKey})\nreply = client.chat.completions.create(\n    model="auto", messages=[{"role": "user", "content": "Hello"}]\n)\nprint(reply.choices[0].message.content)`.replace("from openai", pyKey.startsWith("os.") ? "import os\nfrom openai" : "from openai"))),
    el("div", { class: "card stack" }, snippet(keep("curl"), `curl ${base}/chat/completions \\\n  -H "Authorization: Bearer ${shellKey}" -H "Content-Type: application/json" \\\n  -d '{"model": "auto", "messages": [{"role": "user", "content": "Hello"}]}'`)),
    el("div", { class: "card stack" }, el("h2", {}, t("Providers Baton knows")),
      el("p", { class: "muted small" }, t("Add one from the catalog (its URL, models and key variable are filled in):")),
      el("div", { class: "row" }, presets().map((x) => el("button", { type: "button", translate: "no", onclick: () => openProviderForm({ preset: x, presets: presets(), onSaved: afterSave, toast }) }, presetName(x.name))))),
  );
}

/** Whether the agents' web search works on every provider, and where that is set. */
function webSearchCard(search) {
  const works = !search.unavailable;
  return el("div", { class: "card stack", id: "connect-web-search" },
    el("h2", {}, t("Web search in these tools")),
    el("p", { class: "muted small" }, t("Claude Code's WebSearch, Codex's web search (web_search = \"live\" in its config) and Gemini's grounding search on their own provider. On any other provider Baton searches for them.")),
    el("p", { class: works ? "ok-text" : "warn-text", id: "connect-web-search-status" },
      works ? `✓ ${t("Baton searches through {service} on other providers.", { service: search.backend === "brave" ? "Brave Search" : search.backend === "provider" ? search.provider : "SearXNG" })}` : tn("On other providers these tools cannot search: {why}.", { why: unavailableWords(search) })),
    el("div", {}, el("a", { class: "button", href: "#settings" }, t("Web search settings"))));
}

/** The "set it up for me" block of a client's card (see connect.js). */
function auto(clients, id) {
  const info = clients.clients.find((c) => c.id === id);
  return autoSetup(info, clients, { toast, showError, rerender: renderConnect });
}

/** Step 1 for an agent: its own model names (claude-…, gpt-5…) mapped to a target, one click. */
function mapStep(routes, client, id, why) {
  const now = clientTarget(routes, client);
  const options = targetOptions(routes, app.routingCtx.providers());
  const target = el("select", { id: `${id}-target` }, options.map((o) => el("option", { value: o.value }, o.label)));
  target.value = now || "auto";
  const result = el("p", { role: "status", id: `${id}-mapped`, class: now ? "ok-text" : "muted small" },
    now ? `✓ ${t("{client}'s model names go to {target}.", { client, target: now })}` : why);
  return [
    el("p", {}, el("strong", {}, "1. "), t("Send its model names to")),
    el("div", { class: "row" },
      el("label", { class: "visually-hidden", for: `${id}-target` }, t("Where {client}'s model names go", { client })), target,
      el("button", { type: "button", class: now ? "" : "primary", id: `${id}-map`, onclick: async () => {
        try {
          await mapClient(client, target.value);
          toast(t("{client}'s model names now go to {target}.", { client, target: target.value }));
          await renderConnect();
          $(`${id}-map`)?.focus();
        } catch (e) {
          showError(e);
        }
      } }, now ? t("Change") : t("Map {client}'s names", { client }))),
    result,
  ];
}

/** Claude Code in two steps: its model names mapped (one click), then the environment. */
function claudeCodeCard(routes, shellKey, oneClick, statuslineCommand) {
  const cli = app.state.providers.filter((p) => kindOf(p.kind).program && p.enabled);
  const subscription = app.state.providers.filter((p) => kindOf(p.kind).vendor === "anthropic" && p.config?.credentials === "client");
  return el("div", { class: "card stack", id: "claude-code" },
    el("h2", { translate: "no" }, "Claude Code"),
    ...mapStep(routes, "Claude Code", "cc", t("Claude Code asks for its own model names (claude-sonnet-…, claude-opus-…[1m]); without this step they get 404.")),
    el("p", {}, el("strong", {}, "2. "), t("Point it at Baton:")),
    oneClick,
    el("p", { class: "muted small" }, t("Or by hand:")),
    cli.length ? el("p", { class: "muted small" }, tn("Claude Code always sends tools, which subscription CLI providers ({names}) cannot take: they are skipped for it, and Activity says so on each request.", { names: keep(fmtList(cli.map((p) => p.name))) })) : null,
    snippet(t("In a terminal"), `export ANTHROPIC_BASE_URL=${location.origin}\nexport ANTHROPIC_AUTH_TOKEN="${shellKey}"\nclaude`),
    subscription.length
      ? el("div", { class: "stack", id: "cc-subscription" },
          el("p", {}, tn("Or on your own Claude plan: {names} calls with Claude Code's login, forwarded unchanged, and Baton's key goes in a header of its own.",
            { names: el("strong", { translate: "no" }, fmtList(subscription.map((p) => p.name))) })),
          snippet(t("In a terminal, logged in to Claude Code"), `export ANTHROPIC_BASE_URL=${location.origin}\nexport ANTHROPIC_CUSTOM_HEADERS="x-baton-key: ${shellKey}"\nclaude`))
      : null,
    el("p", {}, tn("{optional} a status line under Claude Code's prompt — the provider serving the session, its usage window, today's cost — from {file}:",
      { optional: el("strong", {}, t("Optional:")), file: el("code", {}, "~/.claude/settings.json") })),
    snippet(keep("~/.claude/settings.json"), `"statusLine": { "type": "command", "command": ${JSON.stringify(statuslineCommand || "baton statusline")} }`));
}

/** Codex: its names mapped, then a provider in its config file that speaks the Responses API. */
function geminiCard(routes, shellKey, oneClick) {
  const env = `GOOGLE_GEMINI_BASE_URL=${location.origin}\nGEMINI_API_KEY=…the gateway key…`;
  return el("div", { class: "card stack", id: "gemini-cli" },
    el("h2", { translate: "no" }, "Gemini CLI"),
    ...mapStep(routes, "Gemini CLI", "gm", t("Gemini CLI asks for its own model names (gemini-…); without this step they get 404.")),
    el("p", {}, el("strong", {}, "2. "), t("Point it at Baton:")),
    oneClick,
    el("p", { class: "muted small" }, tn("Or by hand: choose the Gemini API key as its sign-in in {file}:", { file: el("code", {}, "~/.gemini/settings.json") })),
    snippet(keep("~/.gemini/settings.json"), `{ "security": { "auth": { "selectedType": "gemini-api-key" } } }`),
    el("p", { class: "muted small" }, tn("and give it Baton's address and the gateway key in {file} (read in folders you trust), or in a terminal:", { file: el("code", {}, "~/.gemini/.env") })),
    snippet(keep("~/.gemini/.env"), env),
    snippet(t("In a terminal"), `export GOOGLE_GEMINI_BASE_URL=${location.origin}\nexport GEMINI_API_KEY="${shellKey}"\ngemini`));
}

function codexCard(routes, shellKey, base, oneClick) {
  const subscription = app.state.providers.filter((p) => kindOf(p.kind).vendor === "openai" && p.config?.credentials === "client");
  const subToml = `model_provider = "baton"\n\n[model_providers.baton]\nname = "Baton"\nbase_url = "${base}"\nwire_api = "responses"\nrequires_openai_auth = true\nenv_http_headers = { "x-baton-key" = "BATON_KEY" }`;
  const toml = `model_provider = "baton"\n\n[model_providers.baton]\nname = "Baton"\nbase_url = "${base}"\nenv_key = "BATON_KEY"\nwire_api = "responses"`;
  return el("div", { class: "card stack", id: "codex" },
    el("h2", { translate: "no" }, "Codex"),
    ...mapStep(routes, "Codex", "cx", t("Codex asks for its own model names (gpt-…, codex-…); without this step they get 404.")),
    el("p", {}, el("strong", {}, "2. "), t("Point it at Baton:")),
    oneClick,
    el("p", { class: "muted small" }, tn("Or by hand: add Baton as a model provider in {file}:", { file: el("code", {}, "~/.codex/config.toml") })),
    snippet(keep("~/.codex/config.toml"), toml),
    el("p", { class: "muted small" }, t("and start it with the gateway key:")),
    snippet(t("In a terminal"), `export BATON_KEY="${shellKey}"\ncodex`),
    subscription.length
      ? el("div", { class: "stack", id: "cx-subscription" },
          el("p", {}, tn("Or on your own ChatGPT plan: {names} calls with Codex's login, forwarded unchanged, and Baton's key goes in a header of its own. Use this provider block instead (and log in with {command}):",
            { names: el("strong", { translate: "no" }, fmtList(subscription.map((p) => p.name))), command: el("code", {}, "codex login") })),
          snippet(tn("{file}, on your ChatGPT login", { file: keep("~/.codex/config.toml") }), subToml))
      : null);
}

/** "Claude Code (subscription) (run `claude` and log in…); …": each CLI with how to log it in. */
function loggedOutList(list) {
  const out = document.createDocumentFragment();
  list.forEach((x, i) => {
    if (i) out.append("; ");
    out.append(el("span", { translate: "no" }, presetName(x.name)), " (", loginHint(x.hint), ")");
  });
  return out;
}
