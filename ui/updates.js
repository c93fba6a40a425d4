// Settings → Updates (desktop app only): off until turned on; a check asks the release's
// manifest, Install downloads, verifies the signature and restarts into the new version.
import { api } from "./api.js";
import { keep, t } from "./i18n.js";
import { el, fmtClock } from "./views.js";

const $ = (id) => document.getElementById(id);
let ctx;

export function initUpdates(c) {
  ctx = c;
  $("updates-on").addEventListener("change", async (e) => {
    try {
      render(await api("PUT", "/admin/update", { enabled: e.target.checked }));
      ctx.toast(e.target.checked ? t("Baton checks for updates once a day.") : t("Baton no longer checks for updates."));
    } catch (err) {
      e.target.checked = !e.target.checked;
      ctx.showError(err);
    }
  });
  $("update-url").addEventListener("change", async (e) => {
    try {
      render(await api("PUT", "/admin/update", { url: e.target.value.trim() }));
      ctx.toast(t("Update address saved."));
    } catch (err) {
      ctx.showError(err);
    }
  });
  $("update-check").addEventListener("click", () => act("POST", "/admin/update/check", t("Checking…")));
}

async function act(method, path, busy) {
  const status = $("update-status");
  status.replaceChildren(busy);
  try {
    render(await api(method, path));
  } catch (err) {
    await renderUpdates();
    ctx.showError(err);
  }
}

export async function renderUpdates() {
  try {
    render(await api("GET", "/admin/update"));
  } catch (err) {
    ctx.showError(err);
  }
}

function render(u) {
  $("update-settings").hidden = !u.supported;
  $("updates-on").checked = u.enabled;
  $("updates-on").disabled = !u.signed;
  $("update-url").value = u.url || "";
  $("update-url").placeholder = u.builtInUrl || "https://…/latest.json";
  $("update-check").disabled = !u.enabled || !u.signed;
  const parts = [el("p", {}, t("This is Baton {version}.", { version: u.current }))];
  if (!u.signed) {
    parts.push(el("p", { class: "warn-text" }, t("This build has no release signing key, so it cannot verify an update: install new versions from a release package.")));
  }
  if (u.lastCheckMs) {
    parts.push(el("p", { class: "muted small" }, t("Last checked {when}.", { when: fmtClock(u.lastCheckMs) })));
  }
  if (u.error) parts.push(el("p", { class: "warn-text", role: "alert", translate: "no" }, u.error));
  if (u.installed) {
    parts.push(el("p", {}, t("Baton {version} is installed; restarting into it…", { version: u.installed })));
  } else if (u.offer) {
    const install = el("button", { type: "button", class: "primary", id: "update-install" }, t("Install {version} and restart", { version: u.offer.version }));
    install.addEventListener("click", async () => {
      install.disabled = true;
      install.textContent = t("Downloading and verifying…");
      try {
        const r = await api("POST", "/admin/update/install");
        $("update-status").replaceChildren(el("p", {}, t("Baton {version} is installed; restarting into it…", { version: r.installed })));
      } catch (err) {
        await renderUpdates();
        ctx.showError(err);
      }
    });
    parts.push(el("h3", {}, u.offer.date ? t("Baton {version} is available ({date})", { version: u.offer.version, date: u.offer.date.slice(0, 10) }) : t("Baton {version} is available", { version: u.offer.version })));
    if (u.offer.notes) parts.push(el("pre", { class: "update-notes" }, keep(u.offer.notes)));
    parts.push(el("div", {}, install));
  } else if (u.lastCheckMs && !u.error) {
    parts.push(el("p", {}, t("Baton is up to date.")));
  }
  $("update-status").replaceChildren(...parts);
}
