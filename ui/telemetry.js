// Settings → Tracing: OpenTelemetry traces of the requests Baton serves, sent to the user's
// collector. A typed header value goes to the OS credential store and is never shown again.
import { api } from "./api.js";
import { keep, t, tn } from "./i18n.js";
import { el } from "./views.js";

const $ = (id) => document.getElementById(id);
let ctx;

export function initTelemetry(c) {
  ctx = c;
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
    render(await api("GET", "/admin/telemetry"));
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
