// Settings: language, configuration export and import, notifications, the listen address,
// start at login and the session lock (routing, web search and updates have their own modules).

import { api, ApiError, lockEverywhere, openedByShell } from "./api.js";
import { LANGS, fmtList, t } from "./i18n.js";
import { renderRouting } from "./routing.js";
import { afterSave } from "./setup.js";
import { renderUpdates } from "./updates.js";
import { renderWebSearch } from "./websearch.js";
import { renderTelemetry } from "./telemetry.js";
import { el } from "./views.js";

const $ = (id) => document.getElementById(id);
/** The app's state and helpers: { state, toast, showError, loadProviders, routingCtx }. */
let ctx = null;

export function initSettings(context) {
  ctx = context;
  $("export").addEventListener("click", exportConfig);
  $("autostart").addEventListener("change", async (e) => {
    try {
      const r = await api("PUT", "/admin/desktop", { autostart: e.target.checked });
      e.target.checked = r.autostart;
      ctx.toast(r.autostart ? `${t("Baton starts at login.")}${r.warning ? ` ${r.warning}` : ""}` : t("Baton no longer starts at login."));
    } catch (err) {
      e.target.checked = !e.target.checked;
      ctx.showError(err);
    }
  });
  $("import-file").addEventListener("change", (e) => e.target.files[0] && importConfig(e.target.files[0]));
  $("logout").addEventListener("click", () => {
    lockEverywhere();
    location.hash = "#providers";
    location.reload();
  });
}

export async function renderSettings() {
  if (!ctx.state.providers.length) await ctx.loadProviders();
  let s, desktop;
  try {
    [s, desktop] = await Promise.all([api("GET", "/admin/settings"), api("GET", "/admin/desktop")]);
  } catch (e) {
    ctx.showError(e);
    return;
  }
  renderRouting(ctx.routingCtx);
  // Start at login belongs to the desktop app; in a plain browser on a headless Baton it is hidden.
  $("desktop-settings").hidden = !desktop.present;
  if (desktop.present) renderUpdates();
  else $("update-settings").hidden = true;
  renderWebSearch();
  renderTelemetry();
  // The desktop window is opened unlocked by the app; locking it would lock the user out.
  $("logout").hidden = openedByShell();
  $("logout-note").hidden = openedByShell();
  $("logout-desktop").hidden = !openedByShell();
  $("autostart").checked = Boolean(desktop.autostart);
  $("server-info").replaceChildren(
    el("dt", {}, t("Listening on")), el("dd", { translate: "no" }, s.server.address),
    el("dt", {}, t("UI")), el("dd", { translate: "no" }, `${location.origin}/ui/`),
  );
  renderListen(s.server, desktop.present);
  renderLanguage(s.language);
  const LABELS = {
    failover: t("A subscription or provider hits a limit and Baton moves on"),
    allExhausted: t("Every provider is out and requests fail"),
    cooldownEnded: t("A provider is back after a cooldown"),
    loggedOut: t("A subscription CLI is logged out"),
    quotaBack: t("A spent usage window (5 h, weekly…) is back"),
    quotaWarning: t("A usage window passes a threshold below"),
  };
  // In the order above (the thresholds' switch last, just over them), unknown ones after.
  const order = (k) => (k in LABELS ? Object.keys(LABELS).indexOf(k) : 99);
  const toggles = Object.entries(s.notifications).filter(([, on]) => typeof on === "boolean").sort(([a], [b]) => order(a) - order(b)).map(([k, on]) =>
    el("label", { class: "switch-row" }, el("input", { type: "checkbox", checked: on, "data-key": k, onchange: async (e) => {
      try {
        await api("PUT", "/admin/settings", { notifications: { [k]: e.target.checked } });
        ctx.toast(t("Saved."));
      } catch (err) {
        ctx.showError(err);
        e.target.checked = !e.target.checked;
      }
    } }), LABELS[k] || k));
  // The thresholds, as a short list of percentages ("80, 95"); a wrong one is said next to it.
  const thresholds = el("input", { id: "quota-thresholds", type: "text", inputmode: "numeric", autocomplete: "off", value: (s.notifications.quotaThresholds || []).join(", "), "aria-describedby": "quota-thresholds-help e-quota-thresholds", size: "10" });
  const thresholdsErr = el("p", { class: "field-error", id: "e-quota-thresholds", role: "alert" });
  const saveThresholds = async (e) => {
    e.preventDefault();
    thresholdsErr.textContent = "";
    const list = thresholds.value.split(/[\s,;%]+/).filter(Boolean).map(Number);
    try {
      const r = await api("PUT", "/admin/settings", { notifications: { quotaThresholds: list } });
      thresholds.value = r.notifications.quotaThresholds.join(", ");
      ctx.toast(t("Saved."));
    } catch (err) {
      thresholdsErr.textContent = err instanceof ApiError ? err.message : t("Baton did not answer (is it still running?). Nothing was saved.");
      thresholds.focus();
    }
  };
  const form = el("form", { class: "inline-form", id: "thresholds-form", novalidate: true, onsubmit: saveThresholds },
    el("label", { for: "quota-thresholds" }, t("Usage thresholds (% used)")), thresholds,
    el("button", { type: "submit" }, t("Save")),
    el("p", { id: "quota-thresholds-help", class: "muted small" }, t("One notification per threshold per window period, e.g. 80, 95.")),
    thresholdsErr);
  $("notify-list").replaceChildren(...toggles, form);
}

/** The language switch: the system's (the browser's here) or one chosen, for the UI, the tray
 * and the notifications alike. The page reloads in the new language. */
function renderLanguage(lang) {
  const sel = $("language");
  const system = LANGS.find((l) => l.id === lang?.system);
  sel.replaceChildren(
    el("option", { value: "auto" }, system ? t("Automatic (system: {name})", { name: system.name }) : t("Automatic (system)")),
    ...LANGS.map((l) => el("option", { value: l.id, lang: l.id, translate: "no" }, l.name)),
  );
  sel.value = lang?.chosen || "auto";
  sel.onchange = async () => {
    try {
      await api("PUT", "/admin/settings", { language: sel.value });
      location.reload();
    } catch (e) {
      ctx.showError(e);
    }
  };
}

/** The address Baton listens on, editable without a config file; used from the next start
 * (the desktop app restarts at once on request). */
function renderListen(server, desktop) {
  const next = server.next || { host: server.host, port: server.port };
  const host = el("input", { id: "listen-host", autocomplete: "off", spellcheck: "false", value: next.host, "aria-describedby": "e-listen-host" });
  const port = el("input", { id: "listen-port", type: "number", min: "1", max: "65535", step: "1", value: String(next.port), "aria-describedby": "e-listen-port" });
  const result = el("p", { id: "listen-result", role: "status", class: "muted small" },
    server.next && `${server.next.host}:${server.next.port}` !== server.address ? t("From the next start: {address}.", { address: `${server.next.host}:${server.next.port}` }) : "");
  const errs = { host: el("p", { class: "field-error", id: "e-listen-host", role: "alert" }), port: el("p", { class: "field-error", id: "e-listen-port", role: "alert" }) };
  const form = el("form", { class: "stack", id: "listen-form", novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    errs.host.textContent = errs.port.textContent = "";
    try {
      const r = await api("PUT", "/admin/settings", { listen: { host: host.value.trim(), port: Number(port.value) } });
      const at = `${r.listen.host}:${r.listen.port}`;
      result.replaceChildren(t("Saved: Baton listens on {address} from its next start.", { address: at }), r.warning ? el("strong", { class: "warn-text" }, ` ${r.warning}`) : "", desktop ? " " : "",
        desktop ? el("button", { type: "button", id: "restart-now", onclick: async () => {
          try {
            await api("POST", "/admin/desktop/restart");
            ctx.toast(t("Restarting on {address}…", { address: at }));
          } catch (err) {
            ctx.showError(err);
          }
        } }, t("Restart now")) : el("span", {}, ` ${t("Restart baton serve to use it.")}`));
    } catch (err) {
      const which = err instanceof ApiError && err.param === "listen.port" ? "port" : "host";
      errs[which].textContent = err instanceof ApiError ? err.message : t("Baton did not answer (is it still running?). Nothing was saved.");
      (which === "port" ? port : host).focus();
    }
  } },
  el("div", { class: "row" },
    el("div", { class: "stack grow" }, el("label", { for: "listen-host" }, t("Address")), host, errs.host),
    el("div", { class: "stack" }, el("label", { for: "listen-port" }, t("Port")), port, errs.port)),
  el("p", { class: "hint" }, t("127.0.0.1 keeps Baton on this machine. Another address needs gateway keys from the config file. A --host or --port on the command line wins.")),
  el("div", {}, el("button", { type: "submit" }, t("Save address"))),
  result);
  $("listen-box").replaceChildren(form);
}

async function exportConfig() {
  try {
    const r = await api("GET", "/admin/export", undefined, { raw: true });
    if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => null));
    const blob = new Blob([await r.text()], { type: "application/json" });
    const a = el("a", { href: URL.createObjectURL(blob), download: "baton-config.json" });
    document.body.append(a);
    a.click();
    a.remove();
    ctx.toast(t("Exported (no secrets inside)."));
  } catch (e) {
    ctx.showError(e);
  }
}

async function importConfig(file, replace = false) {
  const out = $("import-result");
  const text = await file.text();
  try {
    const r = await api("POST", `/admin/import${replace ? "?replace=true" : ""}`, text);
    const parts = [r.imported.length ? t("Imported {n} providers: {names}.", { n: r.imported.length, names: fmtList(r.imported) }) : t("Imported no providers.")];
    if (r.replaced.length) parts.push(t("Replaced: {names}.", { names: fmtList(r.replaced) }));
    if (r.skipped.length) parts.push(t("Skipped (defined in the config file Baton runs with): {names}.", { names: fmtList(r.skipped.map((x) => x.id)) }));
    out.replaceChildren(parts.join(" "));
    afterSave();
  } catch (e) {
    if (e instanceof ApiError && e.code === "import_conflict") {
      // Ask before overwriting what is already here.
      out.replaceChildren(e.message, " ",
        el("button", { type: "button", class: "danger", id: "import-replace", onclick: () => importConfig(file, true) }, t("Replace them")));
      $("import-replace").focus();
      return;
    }
    const where = e instanceof ApiError && e.param && e.param !== "body" ? `${e.param}: ` : "";
    out.textContent = e instanceof ApiError ? t("Not imported: {why}", { why: `${where}${e.message}` }) : t("Not imported: Baton did not answer (is it still running?).");
  }
}
