// Talking to Baton's admin API. The admin key travels in a header (never a cookie), so no
// other web page can act with it. It is kept for this tab only (session storage): it is gone
// when the tab closes or the browser restarts, and a page another program serves later on the
// same port finds nothing. Another tab asks for it again; "Lock" in Settings locks every tab.

import { currentLang } from "./i18n.js";

const KEY = "baton.adminKey";
const LOCKS = "baton.admin";

// An older version kept the key in local storage, where it outlived the browser: forget it.
try {
  localStorage.removeItem(KEY);
} catch {
  // Storage disabled: nothing was kept there either.
}

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.param = e.param || null;
    this.code = e.code || null;
    /** Every field with a problem, when the API names more than one: [{param, message}]. */
    this.fields = (e.details && Array.isArray(e.details.fields) && e.details.fields) || null;
  }
}

let locks = null;
function lockChannel() {
  if (!locks && typeof BroadcastChannel === "function") locks = new BroadcastChannel(LOCKS);
  return locks;
}

/** "Lock" in another tab: `f()` is called so this one locks too (unlocking stays per tab). */
export function whenKeyChangesElsewhere(f) {
  const ch = lockChannel();
  if (!ch) return;
  ch.addEventListener("message", (e) => {
    if (e.data === "lock") {
      sessionStorage.removeItem(KEY);
      f();
    }
  });
}

export function adminKey() {
  return sessionStorage.getItem(KEY);
}

/** Keeps the key for this tab, or (null) forgets it in this tab. */
export function setAdminKey(k) {
  if (k) sessionStorage.setItem(KEY, k);
  else sessionStorage.removeItem(KEY);
}

/** "Lock": forgets the key in this tab and every other tab of this Baton. */
export function lockEverywhere() {
  sessionStorage.removeItem(KEY);
  lockChannel()?.postMessage("lock");
}

/** The desktop shell opens `/ui/#admin=KEY`: take it and clear it from the address bar. */
export function adoptKeyFromUrl() {
  const m = location.hash.match(/[#&]admin=([^&]+)/);
  if (m) {
    setAdminKey(decodeURIComponent(m[1]));
    sessionStorage.setItem(SHELL, "1");
    history.replaceState(null, "", location.pathname + "#providers");
  }
}

const SHELL = "baton.openedByShell";

/** Whether this page was opened with the key in its address (the desktop app's window). */
export function openedByShell() {
  return sessionStorage.getItem(SHELL) === "1";
}

let onUnauthorized = () => {};
export function whenUnauthorized(f) {
  onUnauthorized = f;
}

export async function api(method, path, body, { raw = false } = {}) {
  // The admin API writes its messages (a field's problem, a warning) in the page's language.
  const headers = { "x-admin-key": adminKey() || "", "accept-language": currentLang() };
  let payload;
  if (body !== undefined) {
    if (typeof body === "string") {
      payload = body;
    } else {
      payload = JSON.stringify(body);
    }
    headers["content-type"] = "application/json";
  }
  const r = await fetch(path, { method, headers, body: payload });
  if (r.status === 401) {
    onUnauthorized();
    throw new ApiError(401, await r.json().catch(() => null));
  }
  if (raw) return r;
  if (r.status === 204) return null;
  const data = await r.json().catch(() => null);
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

/**
 * Follows `/admin/events` (server-sent events read with fetch, since EventSource cannot send
 * the key header). Reconnects with a growing pause; `onState(true|false)` reports the link.
 */
export function followEvents(onEvent, onState) {
  let stopped = false;
  let pause = 500;
  async function run() {
    while (!stopped) {
      try {
        const r = await fetch("/admin/events", { headers: { "x-admin-key": adminKey() || "" } });
        if (r.status === 401) {
          onUnauthorized();
          return;
        }
        if (!r.ok || !r.body) throw new Error(`HTTP ${r.status}`);
        onState(true);
        pause = 500;
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let cut;
          while ((cut = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            let type = "message";
            const data = [];
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) type = line.slice(6).trim();
              else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
            }
            if (data.length) {
              try {
                onEvent(type, JSON.parse(data.join("\n")));
              } catch {
                /* a malformed event is skipped */
              }
            }
          }
        }
      } catch {
        /* fall through to reconnect */
      }
      onState(false);
      if (stopped) return;
      await new Promise((res) => setTimeout(res, pause));
      pause = Math.min(pause * 2, 10000);
    }
  }
  run();
  return () => {
    stopped = true;
  };
}
