// The Connect screen's one-click set-up: Baton writes a client's own config files (Claude
// Code's settings.json, Codex's config.toml, Gemini CLI's settings.json and .env, opencode's
// opencode.json) after showing the change,
// keeps the original, and puts it back on Undo. The same as `baton connect CLIENT [--undo]`.

import { api } from "./api.js";
import { N_, fmtDateTime, fmtList, keep, t, tn } from "./i18n.js";
import { el } from "./views.js";

/** The diff as lines, additions and removals marked (colour is not the only cue: +/- stay). */
function diffView(text) {
  const lines = text.split("\n").filter((l, i, all) => l || i < all.length - 1);
  return el("pre", { class: "diff", tabindex: "0", "aria-label": t("The change") },
    lines.map((l) => el("span", {
      class: l.startsWith("+++") || l.startsWith("---") ? "diff-head" : l.startsWith("+") ? "diff-add" : l.startsWith("-") ? "diff-del" : l.startsWith("@@") ? "diff-hunk" : "",
    }, l + "\n")));
}

const ACTION = {
  create: N_("{file} will be created:"),
  change: N_("{file} will change:"),
  restore: N_("{file} goes back to how it was:"),
  remove: N_("{file} will be removed (Baton created it):"),
  unchanged: N_("{file} stays as it is:"),
};

/**
 * The "Set it up for me" block of one client's card.
 * info: the client from GET /admin/connect; all: that answer; ctx: { toast, showError, rerender }.
 */
export function autoSetup(info, all, ctx) {
  const id = `auto-${info.id}`;
  const box = el("div", { class: "stack auto-setup", id });
  if (!info.available) {
    box.append(el("p", { class: "muted small", translate: "no" }, info.reason));
    return box;
  }
  // Every file it writes (Gemini CLI has two), each as code.
  const files = el("code", {}, fmtList(info.files));
  if (!all.writable) {
    box.append(el("p", { class: "muted small" }, tn("This browser is on another machine. On the machine Baton runs on, run {command} (it shows the change first) — or follow the steps below.",
      { command: el("code", {}, `baton connect ${info.id}`) })));
    return box;
  }
  const preview = el("div", { class: "stack", id: `${id}-preview`, role: "region", "aria-label": t("The change to {name}'s settings", { name: info.name }) });
  const state = { mode: null, statusline: false };
  const options = [];
  if (!info.connected && info.loginProviders.length) {
    const mode = el("select", { id: `${id}-mode`, onchange: () => { state.mode = mode.value; } },
      el("option", { value: "login" }, t("My own {plan} login, through {providers}", { plan: info.plan || info.name, providers: fmtList(info.loginProviders) })),
      el("option", { value: "keys" }, t("Baton's providers (the gateway key)")));
    state.mode = "login";
    options.push(el("label", { for: `${id}-mode` }, t("{name} signs in with", { name: info.name })), mode);
  }
  if (!info.connected && info.id === "claude-code" && all.statusline) {
    const cb = el("input", { type: "checkbox", id: `${id}-statusline`, onchange: () => { state.statusline = cb.checked; } });
    options.push(el("label", { class: "check" }, cb, ` ${t("Also show Baton's status line under the prompt")}`));
  }
  const run = async (undo) => {
    const path = `/admin/connect/${info.id}${undo ? "/undo" : ""}`;
    const body = undo ? {} : { ...(state.mode ? { mode: state.mode } : {}), ...(state.statusline ? { statusline: true } : {}) };
    try {
      const p = await api("POST", path, { ...body, dryRun: true });
      showPreview(p, undo, async () => {
        try {
          await api("POST", path, { ...body, fingerprint: p.fingerprint });
          ctx.toast(undo ? t("{name}'s files are back as they were.", { name: info.name }) : t("Written: {files}. Undo is here, or: {command}", { files: fmtList(p.files.map((f) => f.path)), command: p.undoCommand }));
          await ctx.rerender();
          document.getElementById(undo ? `${id}-go` : `${id}-undo`)?.focus();
        } catch (e) {
          ctx.showError(e);
        }
      });
    } catch (e) {
      ctx.showError(e);
    }
  };
  const showPreview = (p, undo, write) => {
    const cancel = el("button", { type: "button", onclick: () => { preview.replaceChildren(); go.focus(); } }, t("Cancel"));
    const ok = el("button", { type: "button", class: "primary", id: `${id}-write` }, undo ? t("Put them back") : t("Write it"));
    ok.addEventListener("click", write);
    preview.replaceChildren(
      ...p.files.map((f) => el("div", { class: "stack" },
        el("p", { class: "small" }, ACTION[f.action] ? tn(ACTION[f.action], { file: el("code", {}, f.path) }) : [el("code", {}, f.path), ` ${f.action}:`]),
        f.diff ? diffView(f.diff) : null)),
      // Baton's own notes, in the catalogue (connect/mod.rs marks them).
      ...p.notes.map((n) => el("p", { class: "muted small" }, t(n))),
      p.changes || undo
        ? el("div", { class: "row" }, ok, cancel)
        : el("p", { class: "ok-text" }, t("{name} already points at Baton.", { name: info.name })));
    (p.changes || undo ? ok : go).focus();
  };
  const go = el("button", { type: "button", class: info.connected ? "" : "primary", id: `${id}-go`, onclick: () => run(false) },
    info.connected ? t("Preview again") : t("Set up {name} for me…", { name: info.name }));
  if (info.connected) {
    const when = fmtDateTime(info.connected.atMs);
    const how = info.connected.mode === "login" ? t("your own login") : t("Baton's key");
    box.append(
      el("p", { class: "ok-text", id: `${id}-done` }, "✓ ", tn("Baton wrote {files} ({how}) on {when}.", { files: keep(fmtList(info.connected.files)), how, when })),
      el("p", { class: "muted small" }, tn("The original is kept; Undo puts it back exactly (or, if you edited the file since, takes out only Baton's entries). Same as {command}.", { command: el("code", {}, `baton connect ${info.id} --undo`) })),
      el("div", { class: "row" },
        el("button", { type: "button", id: `${id}-undo`, onclick: () => run(true) }, t("Undo…")), go),
      preview);
  } else {
    box.append(
      el("p", { class: "small" }, tn("Baton writes {files} for you: you see the change first, the originals are kept, and Undo puts them back.", { files })),
      ...(options.length ? [el("div", { class: "row wrap" }, ...options)] : []),
      el("div", { class: "row" }, go),
      preview);
  }
  return box;
}
