// The Connect screen's one-click set-up: Baton writes a client's own config files (Claude
// Code's settings.json, Codex's config.toml, Gemini CLI's settings.json and .env, opencode's
// opencode.json) after showing the change,
// keeps the original, and puts it back on Undo. The same as `baton connect CLIENT [--undo]`.

import { api } from "./api.js";
import { el } from "./views.js";

/** The diff as lines, additions and removals marked (colour is not the only cue: +/- stay). */
function diffView(text) {
  const lines = text.split("\n").filter((l, i, all) => l || i < all.length - 1);
  return el("pre", { class: "diff", tabindex: "0", "aria-label": "The change" },
    lines.map((l) => el("span", {
      class: l.startsWith("+++") || l.startsWith("---") ? "diff-head" : l.startsWith("+") ? "diff-add" : l.startsWith("-") ? "diff-del" : l.startsWith("@@") ? "diff-hunk" : "",
    }, l + "\n")));
}

const ACTION = { create: "will be created", change: "will change", restore: "goes back to how it was", remove: "will be removed (Baton created it)", unchanged: "stays as it is" };

/**
 * The "Set it up for me" block of one client's card.
 * info: the client from GET /admin/connect; all: that answer; ctx: { toast, showError, rerender }.
 */
export function autoSetup(info, all, ctx) {
  const id = `auto-${info.id}`;
  const box = el("div", { class: "stack auto-setup", id });
  if (!info.available) {
    box.append(el("p", { class: "muted small" }, info.reason));
    return box;
  }
  // Every file it writes (Gemini CLI has two), each as code.
  const files = info.files.flatMap((f, i) => [i ? (i === info.files.length - 1 ? " and " : ", ") : "", el("code", {}, f)]);
  if (!all.writable) {
    box.append(el("p", { class: "muted small" }, "This browser is on another machine. On the machine Baton runs on, run ",
      el("code", {}, `baton connect ${info.id}`), " (it shows the change first) — or follow the steps below."));
    return box;
  }
  const preview = el("div", { class: "stack", id: `${id}-preview`, role: "region", "aria-label": `The change to ${info.name}'s settings` });
  const state = { mode: null, statusline: false };
  const options = [];
  if (!info.connected && info.loginProviders.length) {
    const mode = el("select", { id: `${id}-mode`, onchange: () => { state.mode = mode.value; } },
      el("option", { value: "login" }, `My own ${info.id === "codex" ? "ChatGPT" : "Claude"} login, through ${info.loginProviders.join(", ")}`),
      el("option", { value: "keys" }, "Baton's providers (the gateway key)"));
    state.mode = "login";
    options.push(el("label", { for: `${id}-mode` }, `${info.name} signs in with`), mode);
  }
  if (!info.connected && info.id === "claude-code" && all.statusline) {
    const cb = el("input", { type: "checkbox", id: `${id}-statusline`, onchange: () => { state.statusline = cb.checked; } });
    options.push(el("label", { class: "check" }, cb, " Also show Baton's status line under the prompt"));
  }
  const run = async (undo) => {
    const path = `/admin/connect/${info.id}${undo ? "/undo" : ""}`;
    const body = undo ? {} : { ...(state.mode ? { mode: state.mode } : {}), ...(state.statusline ? { statusline: true } : {}) };
    try {
      const p = await api("POST", path, { ...body, dryRun: true });
      showPreview(p, undo, async () => {
        try {
          await api("POST", path, { ...body, fingerprint: p.fingerprint });
          ctx.toast(undo ? `${info.name}'s files are back as they were.` : `Written: ${p.files.map((f) => f.path).join(", ")}. Undo is here, or: ${p.undoCommand}`);
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
    const cancel = el("button", { type: "button", onclick: () => { preview.replaceChildren(); go.focus(); } }, "Cancel");
    const ok = el("button", { type: "button", class: "primary", id: `${id}-write` }, undo ? "Put them back" : "Write it");
    ok.addEventListener("click", write);
    preview.replaceChildren(
      ...p.files.map((f) => el("div", { class: "stack" },
        el("p", { class: "small" }, el("code", {}, f.path), ` ${ACTION[f.action] || f.action}:`),
        f.diff ? diffView(f.diff) : null)),
      ...p.notes.map((n) => el("p", { class: "muted small" }, n)),
      p.changes || undo
        ? el("div", { class: "row" }, ok, cancel)
        : el("p", { class: "ok-text" }, `${info.name} already points at Baton.`));
    (p.changes || undo ? ok : go).focus();
  };
  const go = el("button", { type: "button", class: info.connected ? "" : "primary", id: `${id}-go`, onclick: () => run(false) },
    info.connected ? "Preview again" : `Set up ${info.name} for me…`);
  if (info.connected) {
    const when = new Date(info.connected.atMs).toLocaleString();
    box.append(
      el("p", { class: "ok-text", id: `${id}-done` }, `✓ Baton wrote ${info.connected.files.join(", ")} (${info.connected.mode === "login" ? "your own login" : "Baton's key"}) on ${when}.`),
      el("p", { class: "muted small" }, "The original is kept; Undo puts it back exactly (or, if you edited the file since, takes out only Baton's entries). Same as ", el("code", {}, `baton connect ${info.id} --undo`), "."),
      el("div", { class: "row" },
        el("button", { type: "button", id: `${id}-undo`, onclick: () => run(true) }, "Undo…"), go),
      preview);
  } else {
    box.append(
      el("p", { class: "small" }, "Baton writes ", ...files, " for you: you see the change first, the originals are kept, and Undo puts them back."),
      ...(options.length ? [el("div", { class: "row wrap" }, ...options)] : []),
      el("div", { class: "row" }, go),
      preview);
  }
  return box;
}
