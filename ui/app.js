// Baton's web UI: providers (home), activity, connect, settings. Plain ES modules, no build.

import { api, adminKey, adoptKeyFromUrl, ApiError, followEvents, setAdminKey, whenKeyChangesElsewhere, whenUnauthorized } from "./api.js";
import { openProviderForm } from "./forms.js";
import { afterSave, ensureSetup, initSetup, presets, renderConnect, renderFirstRun } from "./setup.js";
import { initTeam, renderTeam } from "./team.js";
import { initSettings, renderSettings } from "./settings.js";
import { initUpdates } from "./updates.js";
import { initWebSearch } from "./websearch.js";
import { downloadCapture, initTelemetry } from "./telemetry.js";
import { N_, keep, loadLanguage, setHour12, t, translateStatic } from "./i18n.js";
import { chart, classWords, el, explainNodes, fmtClock, logRow, providerRow, setKinds, setServerNow, startCountdowns, status } from "./views.js";

const $ = (id) => document.getElementById(id);
const state = { providers: [], setup: null, testResults: new Map(), logOffset: 0, logRows: [] };

function toast(text) {
  const t = $("toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.hidden = true), 3500);
}

function showError(e) {
  toast(e instanceof ApiError ? e.message : t("Baton did not answer (is it still running?). Nothing was changed."));
}

// ---- navigation -------------------------------------------------------------------------

const TABS = ["providers", "activity", "team", "connect", "settings"];
const TAB_NAMES = { providers: N_("Providers"), activity: N_("Activity"), team: N_("Team"), connect: N_("Connect"), settings: N_("Settings") };
function currentTab() {
  const t = location.hash.replace("#", "");
  return TABS.includes(t) ? t : "providers";
}

function route() {
  const locked = !adminKey();
  // The sections are no use before unlocking: no links to them on the unlock screen.
  document.querySelector("header nav").hidden = locked;
  if (locked) {
    for (const t of TABS) $(`view-${t}`).hidden = true;
    $("login").hidden = false;
    $("admin-key").focus();
    showKeyFile();
    return;
  }
  $("login").hidden = true;
  const tab = currentTab();
  for (const t of TABS) $(`view-${t}`).hidden = t !== tab;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.tab === tab) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `Baton · ${t(TAB_NAMES[tab])}`;
  if (tab === "providers") loadProviders();
  if (tab === "activity") loadLog(true);
  if (tab === "team") renderTeam();
  if (tab === "connect") renderConnect();
  if (tab === "settings") renderSettings();
}

/** The unlock screen names the admin key file of this Baton (its data directory may be any). */
async function showKeyFile() {
  try {
    const r = await fetch("/", { headers: { accept: "application/json" } });
    const where = (await r.json()).adminKeyFile;
    if (where) $("admin-key-file").textContent = where;
  } catch {
    /* the generic name stays */
  }
}

// ---- providers --------------------------------------------------------------------------

let loading = null;
async function loadProviders() {
  if (loading) return loading;
  loading = (async () => {
    try {
      const s = await api("GET", "/admin/providers");
      setServerNow(s.nowMs);
      if (!state.statsAt || Date.now() - state.statsAt > 15000) {
        state.statsAt = Date.now();
        handlers.stats = await api("GET", "/admin/stats").catch(() => handlers.stats);
      }
      // Each card renders its line of the gateway's one summary (what the tray and `baton
      // status` show): its state, windows and share used.
      const rows = new Map(((s.summary && s.summary.providers) || []).map((r) => [r.id, r]));
      state.providers = s.providers.map((p) => ({ ...p, summary: rows.get(p.id) || null }));
      if (s.summary) setHour12(s.summary.hour12);
      setKinds(s.kinds);
      gatewayIs({ down: false, paused: Boolean(s.paused) });
      renderProviders();
      renderFirstRun();
    } catch (e) {
      // A network failure (not an HTTP answer) means the gateway is gone: say so once.
      if (!(e instanceof ApiError)) gatewayIs({ down: true });
      else if (e.status !== 401) showError(e);
    } finally {
      loading = null;
    }
  })();
  return loading;
}

// ---- the gateway itself: paused, or not answering ----------------------------------------

const gateway = { down: false, paused: false, since: 0, linked: false };

/** Shows a gateway that is down or paused as such, everywhere: a banner, the live badge, and
 * no edits while it is down (a switch that flipped and later snapped back would lie). */
function gatewayIs(change) {
  if (change.down && !gateway.down) gateway.since = Date.now();
  Object.assign(gateway, change);
  document.body.classList.toggle("gateway-down", gateway.down);
  for (const id of ["provider-list", "first-run"]) $(id).inert = gateway.down;
  $("add-provider").disabled = gateway.down;
  const b = $("gateway-banner");
  // Rebuilt only when what it says changes: an event repeating the same state must not replace
  // the Resume button under a keyboard user's focus (Enter would then press nothing).
  const says = gateway.down ? `down ${gateway.since}` : gateway.paused ? "paused" : "";
  if (says !== b.dataset.says) {
    b.dataset.says = says;
    if (gateway.down) {
      b.className = "banner bad";
      b.replaceChildren(el("strong", {}, t("Baton is not answering.")),
        ` ${t("This is how things stood at {when}; changes are off until it is back.", { when: fmtClock(gateway.since) })}`);
    } else if (gateway.paused) {
      b.className = "banner warn";
      b.replaceChildren(el("strong", {}, t("Routing is paused.")), ` ${t("Every request gets 503 until you resume.")} `,
        el("button", { type: "button", class: "primary", id: "resume", onclick: () => setPaused(false) }, t("Resume routing")));
    }
  }
  b.hidden = !gateway.down && !gateway.paused;
  const live = $("live");
  live.classList.toggle("on", gateway.linked && !gateway.down);
  live.classList.toggle("paused", gateway.paused);
  live.textContent = gateway.down ? t("offline") : !gateway.linked ? t("reconnecting…") : gateway.paused ? t("paused") : t("live");
}

async function setPaused(paused) {
  try {
    const r = await api("PUT", "/admin/pause", { paused });
    gatewayIs({ paused: r.paused });
    toast(r.paused ? t("Routing paused: requests get 503 until you resume.") : t("Routing resumed."));
  } catch (e) {
    showError(e);
  }
}

/** The event stream dropped: is the gateway gone, or was it a hiccup? */
async function checkGateway() {
  try {
    const r = await fetch("/health", { cache: "no-store" });
    if (gateway.down) {
      gatewayIs({ down: false });
      loadProviders();
    }
    if (r.status === 503) gatewayIs({ paused: true });
  } catch {
    gatewayIs({ down: true });
  }
}

const handlers = {
  testResults: state.testResults,
  async toggle(p, on) {
    try {
      await api("PATCH", `/admin/providers/${encodeURIComponent(p.id)}`, { enabled: on });
      toast(on ? t("{name} enabled.", { name: p.name }) : t("{name} disabled.", { name: p.name }));
    } catch (e) {
      showError(e);
    }
    loadProviders();
  },
  async move(p, delta) {
    const ids = orderable();
    const i = ids.indexOf(p.id);
    const j = i + delta;
    if (i < 0 || j < 0 || j >= ids.length) return;
    [ids[i], ids[j]] = [ids[j], ids[i]];
    await saveOrder(ids, p.id, delta < 0 ? "up" : "down");
  },
  async test(p) {
    // A provider that is out (cooling, breaker open) is tested only when asked twice: the test
    // is a real request and may count against the limit it is waiting out.
    const [, , until] = status(p);
    if (until && state.testArmed !== p.id) {
      state.testArmed = p.id;
      state.testResults.set(p.id, el("div", { class: "test-result wait prov-detail", role: "status" },
        t("{name} is out until {when}. A test sends a real request now, which may count against its limit — press Test again to send it.", { name: p.name, when: fmtClock(until) })));
      renderProviders();
      return;
    }
    state.testArmed = null;
    state.testResults.set(p.id, el("div", { class: "test-result wait prov-detail", role: "status" }, t("Testing {name}…", { name: p.name })));
    renderProviders();
    try {
      const r = await api("POST", `/admin/providers/${encodeURIComponent(p.id)}/test`);
      const text = r.ok
        ? (r.passthrough ? [`${p.name}: `, keep(r.note)] : t("{name} works: {model} answered in {n} ms.", { name: p.name, model: r.model, n: r.latencyMs }))
        : [`${p.name}: `, explainNodes(r.class, r.reason, r.resetAtMs), r.adopted ? ` ${t("Its row shows this now.")}` : ""];
      state.testResults.set(p.id, el("div", { class: `test-result ${r.ok ? "ok" : "bad"} prov-detail`, role: "status" }, el("span", {}, text)));
      if (r.adopted) loadProviders();
    } catch (e) {
      state.testResults.delete(p.id);
      showError(e);
    }
    renderProviders();
    setTimeout(() => {
      state.testResults.delete(p.id);
      renderProviders();
    }, 15000);
  },
  edit(p) {
    openProviderForm({ p, presets: presets(), onSaved: afterSave, onDeleted: focusAfterDelete, toast });
  },
  async clear(p) {
    try {
      await api("DELETE", `/admin/cooldowns?provider=${encodeURIComponent(p.id)}`);
      toast(t("{name} is back in rotation.", { name: p.name }));
    } catch (e) {
      showError(e);
    }
    loadProviders();
  },
};

/** After a provider is deleted its row is gone: focus goes to the row that took its place (its
 * Edit, else its Test), the one before it at the end of the list, else Add provider — never to
 * the page's body. */
async function focusAfterDelete(id) {
  const ids = state.providers.map((p) => p.id);
  const at = ids.indexOf(id);
  await loadProviders();
  // A load already under way when the provider went (an event's, the refresh timer's) may
  // predate the delete: then one more, which starts afresh.
  if (state.providers.some((p) => p.id === id)) await loadProviders();
  const left = state.providers.map((p) => p.id);
  const next = left[Math.min(Math.max(at, 0), left.length - 1)];
  const row = next && document.querySelector(`.prov[data-id="${CSS.escape(next)}"]`);
  const target = row && (row.querySelector("[data-focus=edit]") || row.querySelector("[data-focus=test]"));
  (target || $("add-provider")).focus();
}

/** Providers the order covers (the detected local server always stays last). */
function orderable() {
  return state.providers.filter((p) => p.owner !== "detected").map((p) => p.id);
}

async function saveOrder(ids, focusId, dir) {
  try {
    await api("PUT", "/admin/order", { order: ids });
    toast(t("Order saved — the next request uses it."));
  } catch (e) {
    showError(e);
  }
  await loadProviders();
  if (focusId) {
    const row = document.querySelector(`.prov[data-id="${CSS.escape(focusId)}"]`);
    const btn = row && (row.querySelector(`[data-focus="${dir}"]:not([disabled])`) || row.querySelector("[data-focus=up]:not([disabled]), [data-focus=down]:not([disabled])"));
    if (btn) btn.focus();
  }
}

let renderAfterDrag = false;
function renderProviders() {
  // Rebuilding the list under a drag in progress would drop it (live traffic sends events all
  // the time): the rebuild waits for the drag to end.
  if (dragged) {
    renderAfterDrag = true;
    return;
  }
  const list = $("provider-list");
  // The list is rebuilt on every gateway event and on the refresh timer: keep keyboard focus on
  // the same control of the same provider, so Space on a switch works twice in a row.
  const active = document.activeElement;
  const held = active && list.contains(active) ? active.closest("li[data-id]") : null;
  const keep = held && { id: held.dataset.id, focus: active.dataset.focus };
  const count = state.providers.length;
  list.replaceChildren(...state.providers.map((p, i) => providerRow(p, i, count, handlers)));
  for (const row of list.children) wireDrag(row);
  if (keep) {
    const row = list.querySelector(`li[data-id="${CSS.escape(keep.id)}"]`);
    // The same control, else (a Clear cooldown that has nothing left to clear) the row's Test.
    const target = row && ((keep.focus ? row.querySelector(`[data-focus="${keep.focus}"]:not([disabled])`) : null) || row.querySelector("[data-focus=test]"));
    (target || row)?.focus({ preventScroll: true });
  }
}

let dragged = null;
function wireDrag(row) {
  row.addEventListener("dragstart", (e) => {
    if (row.querySelector(".owner[data-owner=detected]")) return e.preventDefault();
    dragged = row;
    row.classList.add("dragging");
    e.dataTransfer.effectAllowed = "move";
    e.dataTransfer.setData("text/plain", row.dataset.id);
  });
  row.addEventListener("dragend", () => {
    row.classList.remove("dragging");
    for (const r of document.querySelectorAll(".drop-before, .drop-after")) r.classList.remove("drop-before", "drop-after");
    dragged = null;
    if (renderAfterDrag) {
      renderAfterDrag = false;
      renderProviders();
    }
  });
  row.addEventListener("dragover", (e) => {
    if (!dragged || dragged === row) return;
    e.preventDefault();
    const before = e.offsetY < row.offsetHeight / 2 || e.clientY < row.getBoundingClientRect().top + row.offsetHeight / 2;
    row.classList.toggle("drop-before", before);
    row.classList.toggle("drop-after", !before);
  });
  row.addEventListener("dragleave", () => row.classList.remove("drop-before", "drop-after"));
  row.addEventListener("drop", (e) => {
    e.preventDefault();
    const id = e.dataTransfer.getData("text/plain") || (dragged && dragged.dataset.id);
    const before = row.classList.contains("drop-before");
    row.classList.remove("drop-before", "drop-after");
    if (!id || id === row.dataset.id) return;
    const ids = orderable().filter((x) => x !== id);
    let at = ids.indexOf(row.dataset.id);
    if (at < 0) return;
    if (!before) at += 1;
    ids.splice(at, 0, id);
    saveOrder(ids);
  });
}

// ---- activity ---------------------------------------------------------------------------

async function loadLog(reset) {
  if (reset) {
    state.logOffset = 0;
    state.logRows = [];
  }
  const params = new URLSearchParams({ limit: "50", offset: String(state.logOffset) });
  if ($("log-provider").value) params.set("provider", $("log-provider").value);
  if ($("log-outcome").value) params.set("outcome", $("log-outcome").value);
  if ($("log-since").value) params.set("sinceMs", String(Date.now() - Number($("log-since").value)));
  try {
    const r = await api("GET", `/admin/log?${params}`);
    state.logRows = reset ? r.rows : state.logRows.concat(r.rows);
    state.logOffset += r.rows.length;
    $("log-more").hidden = r.rows.length < 50;
    const body = $("log-rows");
    body.replaceChildren(...state.logRows.map((row) => logRow(row, downloadCapture)));
    if (!state.logRows.length) body.append(el("tr", {}, el("td", { colspan: "5", class: "muted" }, t("No requests yet."))));
    chart(state.logRows, $("chart"), $("chart-legend"));
    const sel = $("log-provider");
    const known = new Set([...sel.options].map((o) => o.value));
    for (const p of state.providers.length ? state.providers : (await api("GET", "/admin/providers")).providers) {
      if (!known.has(p.id)) sel.append(el("option", { value: p.id }, p.name));
    }
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) showError(e);
  }
}

// ---- connect & settings (settings.js) ----------------------------------------------------

const routingCtx = { providers: () => state.providers.filter((p) => p.owner !== "detected" || p.enabled), toast, showError: (e) => showError(e) };
initSetup({ state, toast, showError, loadProviders, routingCtx });

// ---- live updates -----------------------------------------------------------------------

let stopEvents = null;
let refreshTimer = null;
function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => {
    if (currentTab() === "providers") loadProviders();
    if (currentTab() === "activity" && state.logOffset <= 50) loadLog(true);
  }, 150);
}

/** "Groq: Rate limit — back at 6:28 PM. Now using Beta." from a failover event. */
function failoverText(ev) {
  const name = (label) => {
    const id = String(label || "").split("/")[0];
    return (state.providers.find((p) => p.id === id) || {}).name || id;
  };
  const what = classWords(ev.class);
  const head = ev.reset_at_ms ? t("{what} — back at {when}.", { what, when: fmtClock(ev.reset_at_ms) }) : t("{what}.", { what });
  return `${name(ev.from)}: ${head} ${t("Now using {name}.", { name: name(ev.to) })}`;
}

function startLive() {
  if (stopEvents) return;
  stopEvents = followEvents(
    (type, ev) => {
      // Only what the desktop would notify (a limit of seconds is not news), in this browser's
      // clock rather than the gateway's.
      if (type === "failover" && ev.notable !== false) toast(failoverText(ev));
      if (type === "quota" && ev.message) toast(ev.message);
      if (type === "paused") gatewayIs({ paused: ev.paused });
      refreshSoon();
    },
    (on) => {
      const wasDown = gateway.down;
      gatewayIs({ linked: on, down: on ? false : gateway.down });
      if (on && wasDown) loadProviders();
      if (!on) setTimeout(checkGateway, 300);
    },
  );
}

// ---- start ------------------------------------------------------------------------------

whenUnauthorized(() => {
  setAdminKey(null);
  if (stopEvents) stopEvents();
  stopEvents = null;
  $("login-error").textContent = t("That key was not accepted.");
  route();
});

$("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const key = $("admin-key").value.trim();
  setAdminKey(key);
  $("login-error").textContent = "";
  try {
    await api("GET", "/admin/providers");
    $("admin-key").value = "";
    startLive();
    route();
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) $("login-error").textContent = String(err.message || err);
  }
});

$("add-provider").addEventListener("click", async () => {
  try {
    await ensureSetup();
  } catch {
    /* presets are a convenience */
  }
  openProviderForm({ presets: presets(), onSaved: afterSave, toast });
});
$("log-provider").addEventListener("change", () => loadLog(true));
$("log-outcome").addEventListener("change", () => loadLog(true));
$("log-since").addEventListener("change", () => loadLog(true));
$("log-more").addEventListener("click", () => loadLog(false));
initTeam({ toast, showError });
initUpdates({ toast, showError });
initWebSearch({ toast, showError });
initTelemetry({ toast, showError });
initSettings({ state, toast, showError, loadProviders, routingCtx });
window.addEventListener("hashchange", route);
// Locked in another tab: this one locks too.
whenKeyChangesElsewhere(() => {
  if (stopEvents) {
    stopEvents();
    stopEvents = null;
  }
  route();
});

adoptKeyFromUrl();
// The language first (the unlock page speaks it too): chosen in Settings, else the browser's.
const about = await fetch("/", { headers: { accept: "application/json" } }).then((r) => r.json()).catch(() => ({}));
await loadLanguage(about.language);
translateStatic();
startCountdowns();
if (adminKey()) startLive();
route();
// Cooldowns end and breakers close without an event when nobody asks: refresh now and then.
setInterval(() => {
  if (adminKey() && currentTab() === "providers" && !document.hidden) loadProviders();
}, 10000);
