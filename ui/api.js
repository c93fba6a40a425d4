// Talking to Baton's admin API. The admin key travels in a header (never a cookie), so no
// other web page can act with it; it is kept in this browser's local storage, so every tab of
// this Baton shares one unlock, until "Lock" in Settings forgets it (for every tab).

const KEY = "baton.adminKey";

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.param = e.param || null;
    this.code = e.code || null;
  }
}

/** Another tab unlocked or locked: `f()` is called so this one follows. */
export function whenKeyChangesElsewhere(f) {
  window.addEventListener("storage", (e) => {
    if (e.key === KEY || e.key === null) f();
  });
}

export function adminKey() {
  return localStorage.getItem(KEY);
}

export function setAdminKey(k) {
  if (k) localStorage.setItem(KEY, k);
  else localStorage.removeItem(KEY);
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
  const headers = { "x-admin-key": adminKey() || "" };
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
