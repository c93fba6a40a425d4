// Settings → Tracing: OpenTelemetry traces of the requests Baton serves, sent to the user's
// collector (a typed header value goes to the OS credential store and is never shown again),
// and capture: a provider's or a client key's requests kept for a while, each downloadable
// from its Activity row.
import { ApiError, api } from "./api.js";
import { fmtTime, keep, t, tn } from "./i18n.js";
import { el } from "./views.js";

const $ = (id) => document.getElementById(id);
let ctx;

export function initTelemetry(c) {
  ctx = c;
  initCapture();
  $("telemetry-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = {
      enabled: $("tel-enabled").checked,
      endpoint: $("tel-endpoint").value.trim(),
      sampleRate: $("tel-rate").value === "" ? 1 : Number($("tel-rate").value),
      captureContent: $("tel-content").checked,
    };
    const name = $("tel-header").value.trim();
    const value = $("tel-value").value.trim();
    const env = $("tel-env").value.trim();
    body.headers = name ? [value ? { name, value } : env ? { name, env } : { name }] : [];
    try {
      const saved = await api("PUT", "/admin/telemetry", body);
      render(saved);
      $("tel-value").value = "";
      if (saved.warning) $("tel-status").append(el("p", { class: "warn-text", role: "alert", translate: "no", "data-testid": "tel-warning" }, saved.warning));
      ctx.toast(!body.enabled ? t("Tracing turned off.") : saved.warning ? t("Tracing saved, but the collector does not answer.") : t("Tracing saved."));
    } catch (err) {
      ctx.showError(err);
      const field = { endpoint: "tel-endpoint", sampleRate: "tel-rate", headers: "tel-header" }[err.param];
      if (field) $(field).focus();
    }
  });
}

export async function renderTelemetry() {
  try {
    const [tel, caps, providers, keys] = await Promise.all([
      api("GET", "/admin/telemetry"), api("GET", "/admin/captures"), api("GET", "/admin/providers"), api("GET", "/admin/keys"),
    ]);
    render(tel);
    $("cap-target").replaceChildren(
      el("optgroup", { label: t("Requests sent to") }, ...providers.providers.map((p) => el("option", { value: `p:${p.id}`, translate: "no" }, p.name || p.id))),
      el("optgroup", { label: t("Requests made with the client key") }, ...keys.fixed.concat(keys.ui).map((k) => el("option", { value: `k:${k.id}`, translate: "no" }, k.label))),
    );
    renderCaptures(caps);
  } catch (err) {
    ctx.showError(err);
  }
}

function initCapture() {
  $("capture-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const [kind, id] = [$("cap-target").value.slice(0, 1), $("cap-target").value.slice(2)];
    const body = { minutes: Number($("cap-minutes").value), ...(kind === "p" ? { provider: id } : { clientKey: id }) };
    try {
      renderCaptures(await api("POST", "/admin/captures/rules", body));
      ctx.toast(t("Capturing."));
    } catch (err) {
      ctx.showError(err);
    }
  });
}

function renderCaptures(c) {
  const stop = el("button", { type: "button", "data-testid": "cap-stop", onclick: async () => {
    try {
      renderCaptures(await api("DELETE", "/admin/captures/rules"));
      ctx.toast(t("Capture stopped."));
      $("cap-target").focus();
    } catch (err) {
      ctx.showError(err);
    }
  } }, t("Stop capturing"));
  const rules = c.rules.map((r) => el("li", { "data-testid": "cap-rule" },
    tn("{what} until {when}", { what: keep(r.provider || r.clientKey), when: fmtTime(r.untilMs, { hour: "numeric", minute: "2-digit" }) })));
  $("cap-status").replaceChildren(
    c.rules.length ? el("ul", { class: "small" }, ...rules) : el("p", { class: "muted small" }, t("Nothing is being captured.")),
    ...(c.rules.length ? [stop] : []),
    el("p", { class: "muted small" }, t("{n} captures kept.", { n: c.captures.length })),
  );
}

/** Downloads the capture of request `id` (a file with no secret in it). */
export async function downloadCapture(id) {
  try {
    const r = await api("GET", `/admin/captures/${encodeURIComponent(id)}`, undefined, { raw: true });
    if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => null));
    const blob = new Blob([await r.text()], { type: "application/json" });
    const a = el("a", { href: URL.createObjectURL(blob), download: `baton-capture-${id}.json` });
    document.body.append(a);
    a.click();
    a.remove();
  } catch (err) {
    ctx.showError(err);
  }
}

function render(s) {
  // The config file's `telemetry` wins at every start: shown, not edited here.
  for (const input of $("telemetry-form").querySelectorAll("input, button")) input.disabled = s.fromFile;
  $("tel-enabled").checked = s.enabled;
  $("tel-endpoint").value = s.endpoint || "";
  $("tel-rate").value = s.sampleRate;
  $("tel-content").checked = s.captureContent;
  const h = s.headers[0];
  $("tel-header").value = h ? h.name : "";
  $("tel-env").value = h ? h.env : "";
  $("tel-value").placeholder = h && h.stored ? t("•••••••• (saved; type to replace)") : "";
  $("tel-status").replaceChildren(
    ...(s.fromFile ? [el("p", { class: "muted small" }, t("Set in the config file (telemetry): change it there."))] : []),
    el("p", { class: s.exporting ? "ok-text" : "muted small" },
      s.exporting ? tn("Sending traces to {url}.", { url: keep(s.endpoint) }) : t("No traces are sent.")),
  );
}
