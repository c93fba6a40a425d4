// Settings → Updates (desktop app only): off until turned on; a check asks the release's
// manifest, Install downloads, verifies the signature and restarts into the new version.
import { api } from "./api.js";
import { el, fmtClock } from "./views.js";

const $ = (id) => document.getElementById(id);
let ctx;

export function initUpdates(c) {
  ctx = c;
  $("updates-on").addEventListener("change", async (e) => {
    try {
      render(await api("PUT", "/admin/update", { enabled: e.target.checked }));
      ctx.toast(e.target.checked ? "Baton checks for updates once a day." : "Baton no longer checks for updates.");
    } catch (err) {
      e.target.checked = !e.target.checked;
      ctx.showError(err);
    }
  });
  $("update-url").addEventListener("change", async (e) => {
    try {
      render(await api("PUT", "/admin/update", { url: e.target.value.trim() }));
      ctx.toast("Update address saved.");
    } catch (err) {
      ctx.showError(err);
    }
  });
  $("update-check").addEventListener("click", () => act("POST", "/admin/update/check", "Checking…"));
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
  const parts = [el("p", {}, `This is Baton ${u.current}.`)];
  if (!u.signed) {
    parts.push(el("p", { class: "warn-text" }, "This build has no release signing key, so it cannot verify an update: install new versions from a release package."));
  }
  if (u.lastCheckMs) {
    parts.push(el("p", { class: "muted small" }, `Last checked ${fmtClock(u.lastCheckMs)}.`));
  }
  if (u.error) parts.push(el("p", { class: "warn-text", role: "alert" }, u.error));
  if (u.installed) {
    parts.push(el("p", {}, `Baton ${u.installed} is installed; restarting into it…`));
  } else if (u.offer) {
    const install = el("button", { type: "button", class: "primary", id: "update-install" }, `Install ${u.offer.version} and restart`);
    install.addEventListener("click", async () => {
      install.disabled = true;
      install.textContent = "Downloading and verifying…";
      try {
        const r = await api("POST", "/admin/update/install");
        $("update-status").replaceChildren(el("p", {}, `Baton ${r.installed} is installed; restarting into it…`));
      } catch (err) {
        await renderUpdates();
        ctx.showError(err);
      }
    });
    parts.push(el("h3", {}, `Baton ${u.offer.version} is available${u.offer.date ? ` (${u.offer.date.slice(0, 10)})` : ""}`));
    if (u.offer.notes) parts.push(el("pre", { class: "update-notes" }, u.offer.notes));
    parts.push(el("div", {}, install));
  } else if (u.lastCheckMs && !u.error) {
    parts.push(el("p", {}, "Baton is up to date."));
  }
  $("update-status").replaceChildren(...parts);
}
