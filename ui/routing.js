// Routing: what each model name a client asks for leads to. `auto` follows the providers'
// order; named routes and modelMap entries made here are edited here (the config file's are
// shown, read-only). Also the one-click "map Claude Code's names" used by Connect.

import { api, ApiError } from "./api.js";
import { t, tn } from "./i18n.js";
import { el } from "./views.js";

const $ = (id) => document.getElementById(id);
const NO_ANSWER = () => t("Baton did not answer (is it still running?). Nothing was changed.");

/** Model names the agents send, as globs: one click maps them all. */
export const CLIENT_NAMES = {
  "Claude Code": ["claude-*"],
  Codex: ["gpt-*", "codex-*"],
  "Gemini CLI": ["gemini-*"],
};

/** Everything a route or a mapping may lead to: `auto`, routes, providers, provider/model. */
export function targetOptions(routes, providers, { exclude } = {}) {
  const out = [{ value: "auto", label: t("auto (providers in order)") }];
  for (const name of Object.keys(routes.routes || {})) if (name !== exclude) out.push({ value: name, label: t("route {name}", { name }) });
  for (const p of providers) {
    out.push({ value: p.id, label: t("{name} (any model)", { name: p.name }) });
    for (const m of p.models || []) out.push({ value: `${p.id}/${m.id}`, label: `${p.name} · ${m.id}` });
  }
  return out;
}

function select(options, value, attrs = {}) {
  const s = el("select", attrs, options.map((o) => el("option", { value: o.value }, o.label)));
  if (value !== undefined) s.value = value;
  return s;
}

/** Maps every name of one client to `target`; a pattern the config file maps is left alone. */
export async function mapClient(client, target) {
  for (const pattern of CLIENT_NAMES[client]) {
    await api("PUT", `/admin/model-map/${encodeURIComponent(pattern)}`, { target });
  }
}

/** Where a client's names go now, if every one of its patterns is mapped to the same place. */
export function clientTarget(routes, client) {
  const found = CLIENT_NAMES[client].map((p) => (routes.modelMap || []).find((m) => m.pattern === p));
  if (found.some((m) => !m)) return null;
  const to = new Set(found.map((m) => m.route));
  return to.size === 1 ? found[0].route : null;
}

/** The Settings card. `ctx` = { providers(), toast, showError, refresh }. */
export async function renderRouting(ctx) {
  let routes;
  try {
    routes = await api("GET", "/admin/routes");
  } catch (e) {
    ctx.showError(e);
    return;
  }
  const providers = ctx.providers();
  const box = $("routes-info");
  // A provider that calls with the client's own login never takes a request on a gateway key
  // alone: it is listed apart, for the clients that bring their login.
  const keyed = routes.auto.filter((a) => !a.loginOnly);
  const logins = routes.auto.filter((a) => a.loginOnly);
  const autoLine = el("p", {}, el("code", {}, "auto"), " → ",
    keyed.length ? el("span", { translate: "no", "data-testid": "auto-keyed" }, keyed.map((a) => a.name).join(" → ")) : t("no enabled provider"),
    el("span", { class: "muted small" }, " ", tn("(the providers' order: change it on {link})", { link: el("a", { href: "#providers" }, t("Providers")) })));
  const loginLine = logins.length
    ? el("p", { class: "muted small", "data-testid": "auto-login" }, tn("Also, for clients that bring their own login only: {names}", { names: el("span", { translate: "no" }, logins.map((a) => a.name).join(" → ")) }))
    : null;

  const routeRows = Object.entries(routes.routes).map(([name, r]) => {
    const file = r.owner === "file";
    return el("li", { class: "route-row", "data-route": name },
      el("div", { class: "grow" }, el("code", {}, name), " → ",
        r.targets.flatMap((x, i) => [i ? " → " : "", (r.missing || []).includes(x) ? el("span", { class: "bad-text", title: t("names no provider or route any more") }, t("{name} (missing)", { name: x })) : el("span", { translate: "no" }, x)]),
        r.resumeOnBreak ? el("span", { class: "muted small" }, ` · ${t("resumes a broken stream")}`) : null,
        r.order === "speed" ? el("span", { class: "muted small" }, ` · ${t("fastest first")}`) : null,
        (r.hedge ?? routes.hedgeDefault) ? el("span", { class: "muted small" }, ` · ${t("hedges a slow first token")}`) : null,
        file ? el("span", { class: "owner", title: t("Defined in the config file; change it there") }, t("file")) : null),
      file ? null : el("button", { type: "button", "aria-label": t("Edit route {name}", { name }), onclick: () => openRouteDialog(ctx, routes, name, r) }, t("Edit")));
  });

  const mapRows = (routes.modelMap || []).map((m) => {
    const file = m.owner === "file";
    return el("li", { class: "route-row", "data-pattern": m.pattern },
      el("div", { class: "grow" }, el("code", {}, m.pattern), " → ",
        m.missing ? el("span", { class: "bad-text" }, t("{name} (missing)", { name: m.route })) : el("code", {}, m.route),
        file ? el("span", { class: "owner", title: t("Defined in the config file; change it there") }, t("file")) : null),
      file ? null : el("button", { type: "button", "aria-label": t("Remove mapping {pattern}", { pattern: m.pattern }), onclick: async () => {
        try {
          await api("DELETE", `/admin/model-map/${encodeURIComponent(m.pattern)}`);
          ctx.toast(t("{pattern} is no longer mapped.", { pattern: m.pattern }));
        } catch (e) {
          ctx.showError(e);
        }
        renderRouting(ctx);
      } }, t("Remove")));
  });

  // Add a mapping: a name (or a glob, or a client's preset) and where it goes.
  const options = targetOptions(routes, providers);
  const pattern = el("input", { id: "map-pattern", autocomplete: "off", spellcheck: "false", placeholder: t("{a} or {b}", { a: "claude-*", b: "gpt-4o" }), "aria-describedby": "map-error" });
  const target = select(options, "auto", { id: "map-target" });
  const err = el("p", { class: "field-error", id: "map-error", role: "alert" });
  const addMap = el("form", { class: "stack", novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    err.textContent = "";
    const p = pattern.value.trim();
    if (!p) {
      err.textContent = t("Type the model name a client sends (a * matches anything).");
      pattern.focus();
      return;
    }
    try {
      await api("PUT", `/admin/model-map/${encodeURIComponent(p)}`, { target: target.value });
      ctx.toast(t("{pattern} now goes to {target}.", { pattern: p, target: target.value }));
      await renderRouting(ctx);
      $("map-pattern")?.focus();
    } catch (ex) {
      err.textContent = ex instanceof ApiError ? ex.message : NO_ANSWER();
    }
  } },
  el("div", { class: "row" },
    el("label", { class: "visually-hidden", for: "map-pattern" }, t("Model name a client sends")), pattern,
    el("span", { "aria-hidden": "true" }, "→"),
    el("label", { class: "visually-hidden", for: "map-target" }, t("Goes to")), target,
    el("button", { type: "submit" }, t("Map"))),
  el("div", { class: "row small" }, el("span", { class: "muted" }, t("Presets:")),
    Object.entries(CLIENT_NAMES).map(([client, pats]) => el("button", { type: "button", class: "link", onclick: async () => {
      try {
        await mapClient(client, target.value);
        ctx.toast(t("{client}'s model names now go to {target}.", { client, target: target.value }));
        renderRouting(ctx);
      } catch (ex) {
        err.textContent = ex instanceof ApiError ? ex.message : NO_ANSWER();
      }
    } }, tn("{client} → selected", { client: el("span", { translate: "no" }, `${client} (${pats.join(", ")})`) })))),
  err);

  box.replaceChildren(
    ...[autoLine, loginLine].filter(Boolean),
    el("h3", {}, t("Named routes")),
    el("p", { class: "muted small" }, tn("A route is a model name of your own (e.g. {example}) that tries its targets in order.", { example: el("code", {}, "fast") })),
    routeRows.length ? el("ul", { class: "route-list", "aria-label": t("Named routes") }, routeRows) : el("p", { class: "muted" }, t("No named routes yet.")),
    el("div", {}, el("button", { type: "button", id: "new-route", onclick: () => openRouteDialog(ctx, routes, null, null) }, t("New route"))),
    el("h3", {}, t("Model names clients send")),
    el("p", { class: "muted small" }, tn("Tools ask for their own model names; map them to {auto}, a route or a provider. The most specific pattern wins.", { auto: el("code", {}, "auto") })),
    mapRows.length ? el("ul", { class: "route-list", "aria-label": t("Model name mappings") }, mapRows) : el("p", { class: "muted" }, t("No mappings yet.")),
    addMap,
  );
}

/** The route editor: a name, targets in order (arrows to reorder), resume on break. */
function openRouteDialog(ctx, routes, name, route) {
  const dialog = $("route-dialog");
  const body = $("route-form-body");
  const formErr = $("route-form-error");
  const editing = Boolean(name);
  const targets = route ? [...route.targets] : [];
  const nameInput = el("input", { id: "route-name", required: true, autocomplete: "off", spellcheck: "false", placeholder: "fast", "aria-describedby": "e-route-name" });
  nameInput.value = name || "";
  nameInput.disabled = editing;
  const resume = el("input", { type: "checkbox", id: "route-resume" });
  resume.checked = Boolean(route && route.resumeOnBreak);
  const fastest = el("input", { type: "checkbox", id: "route-speed" });
  fastest.checked = Boolean(route && route.order === "speed");
  const hedge = el("input", { type: "checkbox", id: "route-hedge" });
  // A route without its own word follows routing.hedge.enabled (the config file's).
  const ownHedge = route && route.hedge != null ? route.hedge : null;
  hedge.checked = ownHedge ?? Boolean(routes.hedgeDefault);
  const list = el("ol", { class: "target-list", "aria-label": t("Targets, tried in this order") });
  const targetErr = el("p", { class: "field-error", id: "e-route-targets", role: "alert" });
  const options = targetOptions(routes, ctx.providers(), { exclude: name });
  const adder = select(options, undefined, { id: "route-add-target" });

  function draw(focus) {
    list.replaceChildren(...targets.map((x, i) => {
      const up = t("Move {name} up", { name: x });
      const down = t("Move {name} down", { name: x });
      return el("li", { class: "route-row" },
        el("span", { class: "grow" }, el("code", {}, x)),
        el("button", { type: "button", class: "icon", "aria-label": up, disabled: i === 0, onclick: () => { [targets[i - 1], targets[i]] = [targets[i], targets[i - 1]]; draw([up, down]); } }, "↑"),
        el("button", { type: "button", class: "icon", "aria-label": down, disabled: i === targets.length - 1, onclick: () => { [targets[i + 1], targets[i]] = [targets[i], targets[i + 1]]; draw([down, up]); } }, "↓"),
        el("button", { type: "button", class: "icon danger", "aria-label": t("Remove {name}", { name: x }), onclick: () => { targets.splice(i, 1); draw(); adder.focus(); } }, "✕"));
    }));
    if (!targets.length) list.append(el("li", { class: "muted" }, t("No targets yet: add one below.")));
    // After a move, focus stays on the moved target: its same arrow, else (at an end) the other.
    if (focus) {
      const btn = focus.map((label) => list.querySelector(`[aria-label="${CSS.escape(label)}"]:not([disabled])`)).find(Boolean);
      (btn || adder).focus();
    }
  }
  draw();

  body.replaceChildren(
    el("div", { class: "stack" }, el("label", { for: "route-name" }, t("Name")),
      el("p", { class: "hint" }, tn("What clients put in {field}; lowercase letters, digits, - and _.", { field: el("code", {}, "model") })), nameInput,
      el("p", { class: "field-error", id: "e-route-name", role: "alert" })),
    el("div", { class: "stack" }, el("span", { class: "label" }, t("Targets, tried in this order")), list, targetErr,
      el("div", { class: "row" }, el("label", { class: "visually-hidden", for: "route-add-target" }, t("Target to add")), adder,
        el("button", { type: "button", id: "route-add", onclick: () => { if (!targets.includes(adder.value)) targets.push(adder.value); draw(); adder.focus(); } }, t("Add target")))),
    el("label", { class: "switch-row" }, resume, ` ${t("Continue a broken stream on the next target (needs providers with prefill)")}`),
    el("label", { class: "switch-row" }, fastest, ` ${t("Fastest first among targets of equal priority (measured time to first token)")}`),
    el("label", { class: "switch-row" }, hedge, ` ${t("Hedge a slow first token: after a wait, send the request to the next target too; the first answer wins")}`),
  );
  $("route-dialog-title").textContent = editing ? t("Route {name}", { name }) : t("New route");
  formErr.textContent = "";
  const del = $("route-delete");
  del.hidden = !editing;
  del.textContent = t("Delete");
  del.dataset.armed = "";
  del.onclick = async () => {
    if (del.dataset.armed !== "1") {
      del.dataset.armed = "1";
      del.textContent = t("Delete {name} for good?", { name });
      return;
    }
    try {
      await api("DELETE", `/admin/routes/${encodeURIComponent(name)}`);
      dialog.close();
      ctx.toast(t("Route {name} deleted.", { name }));
      renderRouting(ctx);
    } catch (e) {
      formErr.textContent = e instanceof ApiError ? e.message : NO_ANSWER();
    } finally {
      del.dataset.armed = "";
      del.textContent = t("Delete");
    }
  };
  $("route-cancel").onclick = () => dialog.close();
  $("route-form").onsubmit = async (ev) => {
    ev.preventDefault();
    formErr.textContent = "";
    targetErr.textContent = "";
    $("e-route-name").textContent = "";
    const n = nameInput.value.trim();
    if (!n) {
      $("e-route-name").textContent = t("Give the route a name.");
      nameInput.focus();
      return;
    }
    try {
      // Hedging left unset follows routing.hedge; ticked or unticked here, the route decides.
      const own = ownHedge == null && hedge.checked === Boolean(routes.hedgeDefault) ? {} : { hedge: hedge.checked };
      await api("PUT", `/admin/routes/${encodeURIComponent(n)}`, { targets, resumeOnBreak: resume.checked, order: fastest.checked ? "speed" : "priority", ...own });
      dialog.close();
      ctx.toast(t("Route {name} saved — clients can ask for model \"{name}\" now.", { name: n }));
      renderRouting(ctx);
    } catch (e) {
      if (!(e instanceof ApiError)) formErr.textContent = NO_ANSWER();
      else if (e.param === "name") {
        $("e-route-name").textContent = targets.length ? e.message : t("Add at least one target.");
        (targets.length ? nameInput : adder).focus();
      } else if ((e.param || "").startsWith("targets")) {
        targetErr.textContent = e.message;
        adder.focus();
      } else formErr.textContent = e.message;
    }
  };
  dialog.showModal();
  (editing ? adder : nameInput).focus();
}
