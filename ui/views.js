import { N_, fmtDate, fmtDateTime, fmtNumber, fmtTime, has, keep, t, tn } from "./i18n.js";

// Rendering helpers and the views. DOM is built with `el`, never from HTML strings, so a
// provider name or an upstream error text can never inject markup.

export function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") n.className = v;
    else if (k === "text") n.textContent = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(n.dataset, v);
    // Through the CSSOM: the UI's Content-Security-Policy forbids style attributes.
    else if (k === "style") {
      for (const decl of String(v).split(";")) {
        const at = decl.indexOf(":");
        if (at > 0) n.style.setProperty(decl.slice(0, at).trim(), decl.slice(at + 1).trim());
      }
    }
    else n.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

/** The provider kinds, as the gateway lists them in /admin/state (`kinds`). */
let KINDS = [];

export function setKinds(list) {
  if (Array.isArray(list) && list.length) KINDS = list;
}

export function kinds() {
  return KINDS;
}

export function kindOf(kind) {
  const k = KINDS.find((x) => x.id === kind);
  // The gateway names kinds in English (a catalogue key): shown in the user's language.
  return k ? { ...k, label: t(k.label) } : { id: kind, label: kind, badge: "?", program: null, sampleModel: null };
}

export function kindLabel(kind) {
  return kindOf(kind).label;
}

/** Server clock offset, so countdowns match Baton's idea of "now". */
let skew = 0;
export function setServerNow(ms) {
  skew = ms - Date.now();
}
export function serverNow() {
  return Date.now() + skew;
}

export function fmtLeft(ms) {
  // A duration, never like a clock time ("14 min", not "14:58"): the same words the tray and
  // `baton status` use.
  if (ms <= 0) return t("now");
  const s = Math.ceil(ms / 1000);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return t("{d}d {h}h", { d, h });
  if (h > 0) return t("{h}h {m}m", { h, m: String(m).padStart(2, "0") });
  if (s >= 60) return t("{m} min", { m: Math.ceil(s / 60) });
  return t("{s} s", { s });
}

/** A clock time in the browser's zone and the locale's own style ("18:28", "6:28 PM"), with
 * the date when it is not today. */
export function fmtClock(ms) {
  const d = new Date(ms);
  const sameDay = new Date().toDateString() === d.toDateString();
  const time = fmtTime(ms);
  return sameDay ? time : t("{date} {time}", { date: fmtDate(ms), time });
}

/** Ticks every element with `data-until` once a second. */
export function startCountdowns() {
  setInterval(() => {
    // A gateway that is not answering has no countdowns to tell: the last known ones stand still.
    if (document.body.classList.contains("gateway-down")) return;
    for (const n of document.querySelectorAll("[data-until]")) {
      const left = Number(n.dataset.until) - serverNow();
      n.textContent = left > 0 ? fmtLeft(left) : t("any moment");
    }
  }, 1000);
}

/** Error classes in words. */
const CLASS_KEYS = {
  rate: N_("Rate limit"),
  billing: N_("Out of credit"),
  auth: N_("Key or login rejected"),
  overloaded: N_("Overloaded"),
  transient: N_("Failing"),
  model: N_("Model not served"),
  request: N_("Request refused"),
  content_policy: N_("Refused by its content policy"),
  invalid_output: N_("Answered JSON that does not fit"),
};

/** An error class in words ("Rate limit"); an unknown class as it is. */
export function classWords(cls) {
  return CLASS_KEYS[cls] ? t(CLASS_KEYS[cls]) : cls;
}

/** The same words for the middle of a sentence. */
function classWordsInline(cls) {
  const inline = {
    rate: N_("rate limit"),
    billing: N_("out of credit"),
    auth: N_("key or login rejected"),
    overloaded: N_("overloaded"),
    transient: N_("failing"),
    model: N_("model not served"),
    request: N_("request refused"),
    content_policy: N_("refused by its content policy"),
    invalid_output: N_("answered JSON that does not fit"),
  };
  return inline[cls] ? t(inline[cls]) : cls;
}

/** What Baton itself found (not words the provider sent): these reasons are Baton's own. */
const BATON_FINDINGS = [
  [/^(upstream )?connection failed:?\s*/i, N_("Baton could not connect")],
  [/^timed out:?\s*/i, N_("No answer in time")],
  [/^response body broke off:?\s*/i, N_("The answer broke off")],
  [/^request failed:?\s*/i, N_("The request could not be sent")],
  [/^no API key:?\s*/i, N_("No API key")],
  [/^no model configured/i, N_("No model configured")],
];

/** "Rate limit — back at 18:28. The provider said: …" (its own words quoted, its own times
 * kept); what Baton found itself is said as Baton's ("Baton could not connect: …"). */
export function explain(cls, reason, until) {
  return explainNodes(cls, reason, until).textContent;
}

/** The same as nodes: what the provider or the system said (English, or any language) is kept
 * as it was, marked as not to translate. */
export function explainNodes(cls, reason, until) {
  const out = document.createDocumentFragment();
  const what = classWords(cls);
  out.append(until ? t("{what} — back at {when}.", { what, when: fmtClock(until) }) : t("{what}.", { what }));
  if (!reason) return out;
  for (const [re, words] of BATON_FINDINGS) {
    const m = reason.match(re);
    if (!m) continue;
    const rest = reason.slice(m[0].length).trim();
    out.append(" ", rest ? tn("{finding}: {detail}.", { finding: t(words), detail: keep(`${rest.charAt(0).toUpperCase()}${rest.slice(1)}`) }) : t("{finding}.", { finding: t(words) }));
    return out;
  }
  out.append(" ", tn("The provider said: “{reason}”", { reason: keep(reason) }));
  return out;
}

/** What Baton found about a subscription CLI (not installed, logged out…), in the user's
 * language: the gateway writes it in English; the command names stay as they are. */
export function cliWords(text) {
  if (!text) return document.createDocumentFragment();
  const code = (s) => el("code", {}, s);
  let m = text.match(/^`(.+)` is not installed(?: \(not found on PATH\))?$/);
  if (m) return tn("{program} is not installed (not found on PATH).", { program: code(m[1]) });
  m = text.match(/^not logged in: (.+)$/);
  if (m) return tn("Not logged in: {how}", { how: loginHint(m[1]) });
  m = text.match(/^`(.+)` cannot be opened: (.+)$/);
  if (m) return tn("{program} cannot be opened: {error}", { program: code(m[1]), error: keep(m[2]) });
  return keep(text);
}

/** A CLI's login hint ("run `claude` and log in with /login…"), translated, its commands as code. */
export function loginHint(hint) {
  const out = document.createDocumentFragment();
  t(hint).split("`").forEach((part, i) => out.append(i % 2 ? el("code", {}, part) : part));
  return out;
}

/** A catalog entry's name: translated where it says more than a brand ("Claude (your Pro/Max
 * plan)"), kept as it is otherwise ("Groq"). */
export function presetName(name) {
  return name && has(name) ? t(name) : name;
}

/** A key's id as a person reads it: `env:GROQ_API_KEY` → "key $GROQ_API_KEY". */
export function keyWords(id) {
  if (!id) return "";
  if (id.startsWith("env:")) return t("key {name}", { name: `$${id.slice(4)}` });
  if (id.startsWith("stored:")) return t("typed key");
  // A client's own login (a digest of it, never shown as if it were a key of Baton's).
  if (id.startsWith("client:")) return t("your login");
  return t("key {name}", { name: id });
}

/** What a provider's badge says: [label, tone, untilMs, detail], from the state the gateway
 * computed (`status`: the same `baton status`, `/health` and the tray show). */
export function status(p) {
  const st = p.status || { state: p.enabled ? "ready" : "disabled" };
  switch (st.state) {
    case "disabled":
      return [t("disabled"), "off", null, null];
    case "logged-out":
      return [t("logged out"), "bad", null, cliWords(st.reason)];
    case "unavailable":
      return [t("unavailable"), "bad", null, st.class ? explainNodes(st.class, st.reason, null) : keep(st.reason)];
    case "breaker-open":
      return [t("breaker open"), "bad", st.untilMs, tn("{reason} — tried again at {when}.", { reason: keep(st.reason), when: fmtClock(st.untilMs) })];
    case "cooling":
      return [t("cooling"), "warn", st.untilMs, explainNodes(st.class, st.reason, st.untilMs)];
    default:
      // A subscription passed through: it serves clients that bring their own login only.
      if (st.loginOnly) return [t("login-only"), "ok", null, t("Serves only clients that bring their own login, never a request on a gateway key alone.")];
      return [t("ready"), "ok", null, null];
  }
}

/** The share of its limit used, 0..1, from its line of the gateway's summary (the binding
 * window, else the best key's quota spent): one measure in one direction on every surface. */
function usedOf(p) {
  const used = p.summary && p.summary.used;
  return typeof used === "number" ? used : null;
}

/** An account's name for people: a key, a passed-through subscription, or the CLI's login. */
function accountWords(id) {
  if (!id) return t("login");
  if (id.startsWith("client:")) return t("login {id}", { id: id.slice(7, 11) });
  return keyWords(id);
}

/** A bar of the share used (0–100), amber from 80 % and red from 95 %, named `label`. */
function usedBar(pct, label) {
  const tone = pct >= 95 ? " out" : pct >= 80 ? " low" : "";
  return el("span", { class: `quota-bar${tone}`, role: "meter", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(pct), "aria-label": label }, el("span", { style: `width:${pct}%` }));
}

/** The provider's usage windows (5 h, 7 d, per-minute…) as bars: share used, when it resets,
 * and which one decides now ("binding"). Nothing when the provider reported none. */
function usageWindows(p) {
  const accounts = (p.usage || []).filter((a) => (a.windows || []).length);
  if (!accounts.length) return null;
  const many = accounts.length > 1;
  const list = el("ul", { class: "windows", "aria-label": t("{name} usage windows", { name: p.name }), "data-testid": "windows" });
  for (const a of accounts) {
    for (const w of a.windows) {
      const spent = w.status === "rejected";
      const used = spent ? 1 : typeof w.used === "number" ? w.used : null;
      const pct = used === null ? null : Math.round(used * 100);
      const binding = a.binding === w.id;
      const name = `${w.label}${many ? ` · ${accountWords(a.account)}` : ""}`;
      const words = [];
      words.push(spent ? t("spent") : pct === null ? t("near its limit") : `${pct} %`);
      if (w.resetsAtMs) words.push(t("resets {when}", { when: fmtClock(w.resetsAtMs) }));
      if (binding && a.capsAtMs) words.push(t("runs out {when} at this rate", { when: fmtClock(a.capsAtMs) }));
      list.append(el("li", { class: `window${binding ? " binding" : ""}`, "data-window": w.id },
        el("span", { class: "window-name" }, name),
        usedBar(pct ?? 0, t("{name} used", { name })),
        el("span", { class: "window-words" }, words.join(" · ")),
        binding && accounts.length + a.windows.length > 2 ? el("span", { class: "badge", title: t("The window that decides now") }, t("binding")) : null));
    }
  }
  return list;
}

export function providerRow(p, index, count, handlers) {
  const [label, tone, until, detail] = status(p);
  const { badge: abbr, label: kindName } = kindOf(p.kind);
  const badge = el("span", { class: `badge ${tone}`, "data-testid": "status" }, label);
  if (until) {
    badge.append(" · ", el("span", { dataset: { until: String(until) }, text: fmtLeft(until - serverNow()) }));
    badge.title = t("back at {when}", { when: fmtClock(until) });
  }
  const partial = (p.cooldowns || []).filter((c) => c.key || c.model);
  // The windows show the share used already: a second bar for the same limit would be noise.
  const windows = usageWindows(p);
  const q = windows ? null : usedOf(p);
  const models = (p.models || []).map((m) => m.id);
  const toggle = el("input", {
    type: "checkbox",
    role: "switch",
    dataset: { focus: "toggle" },
    // A switch is named for what it controls; its state is read as on/off.
    "aria-label": t("{name} enabled", { name: p.name }),
    checked: p.enabled,
    onchange: (e) => handlers.toggle(p, e.target.checked),
  });
  const row = el(
    "li",
    {
      class: `prov${p.enabled ? "" : " is-off"}`,
      draggable: "true",
      "data-id": p.id,
      "aria-label": t("{name}, {state}, position {n} of {count}", { name: p.name, state: label, n: index + 1, count }),
    },
    el("span", { class: "grip", "aria-hidden": "true", title: t("Drag to reorder") }, "⠿"),
    el("span", { class: `kind k-${p.kind}`, title: kindName, "aria-hidden": "true" }, abbr),
    el(
      "div",
      { class: "prov-main" },
      el("div", { class: "prov-name" }, el("span", { "data-testid": "name", translate: "no" }, p.name), badge,
        p.owner === "file" ? el("span", { class: "owner", title: t("Defined in the config file") }, t("file")) : null,
        p.owner === "detected" ? el("span", { class: "owner", "data-owner": "detected", title: t("Found at start-up") }, t("detected")) : null),
      el("div", { class: "prov-sub", title: models.join(", "), translate: "no" }, `${kindName} · ${models.join(", ")}`),
    ),
    el(
      "div",
      { class: "prov-actions" },
      el("button", { class: "icon", type: "button", dataset: { focus: "up" }, "aria-label": t("Move {name} up", { name: p.name }), disabled: index === 0 || !p.owner || p.owner === "detected", onclick: () => handlers.move(p, -1) }, "↑"),
      el("button", { class: "icon", type: "button", dataset: { focus: "down" }, "aria-label": t("Move {name} down", { name: p.name }), disabled: index === count - 1 || !p.owner || p.owner === "detected", onclick: () => handlers.move(p, 1) }, "↓"),
      el("label", { class: "switch" }, toggle, el("span", { "aria-hidden": "true" })),
    ),
  );
  const facts = [];
  facts.push(el("span", {}, t("in flight {n}", { n: `${p.inFlight}${p.maxConcurrency ? "/" + p.maxConcurrency : ""}` })));
  if (q !== null) {
    const pct = Math.round(q * 100);
    facts.push(
      el("span", { class: "quota", "data-testid": "used", title: t("Share of its limit used (best key)") }, t("used"),
        usedBar(pct, t("Share of its limit used")),
        `${pct} %`),
    );
  }
  if ((p.keys || []).length) {
    const ok = p.keys.filter((k) => !k.cooldown && !k.missing).length;
    facts.push(el("span", {}, t("keys {ok}/{all}", { ok, all: p.keys.length })));
  }
  const hour = handlers.stats && handlers.stats.hour && handlers.stats.hour[p.id];
  const day = handlers.stats && handlers.stats.day && handlers.stats.day[p.id];
  if (hour || day) {
    const h = hour || { calls: 0, failures: 0, inputTokens: 0, outputTokens: 0, cacheReadTokens: 0 };
    const d = day || h;
    // The share of prompt tokens its prompt cache served: low when conversations hop keys.
    const parts = (w) => [
      t("{n} calls", { n: w.calls }),
      t("{n} failed", { n: w.failures }),
      w.p50Ms != null ? t("p50 {n} ms", { n: w.p50Ms }) : null,
      t("{n} tokens", { n: w.inputTokens + w.outputTokens }),
      w.inputTokens && w.cacheReadTokens ? t("{n} % cached", { n: Math.round((100 * w.cacheReadTokens) / w.inputTokens) }) : null,
    ].filter(Boolean).join(" · ");
    facts.push(el("span", { "data-testid": "stats", title: t("Last day: {facts}", { facts: parts(d) }) }, t("last hour: {facts}", { facts: parts(h) })));
  }
  // How fast it answers now: what a route ordered by speed goes by.
  if (p.speed) {
    const words = p.speed.tokensPerS != null
      ? t("{ms} ms to first token · {tps} tokens/s", { ms: fmtNumber(Math.round(p.speed.ttftMs)), tps: fmtNumber(Math.round(p.speed.tokensPerS)) })
      : t("{ms} ms to first token", { ms: fmtNumber(Math.round(p.speed.ttftMs)) });
    facts.push(el("span", { "data-testid": "speed", title: t("Decaying average of its last answers ({n} measured)", { n: p.speed.samples }) }, words));
  }
  if (p.cli && p.cli.version) facts.push(el("span", { title: p.cli.executable || "", translate: "no" }, p.cli.version));
  if (partial.length) {
    const c = partial[0];
    facts.push(el("span", { class: "badge warn", title: explain(c.class, c.reason, c.untilMs) }, t("{what} cooling", { what: c.model ? t("model {name}", { name: c.model }) : keyWords(c.key) }), " · ", el("span", { dataset: { until: String(c.untilMs) } }, fmtLeft(c.untilMs - serverNow()))));
  }
  // The buttons wrap as one group, not one by one between the facts.
  const buttons = [];
  buttons.push(el("button", { type: "button", dataset: { focus: "test" }, "aria-label": t("Test {name}", { name: p.name }), onclick: () => handlers.test(p) }, t("Test")));
  if (p.owner !== "detected") {
    const view = p.owner === "file";
    buttons.push(el("button", { type: "button", dataset: { focus: "edit" }, "aria-label": view ? t("View {name}", { name: p.name }) : t("Edit {name}", { name: p.name }), onclick: () => handlers.edit(p) }, view ? t("View") : t("Edit")));
  }
  if ((p.cooldowns || []).length || (p.breaker && p.breaker.state !== "closed")) {
    buttons.push(el("button", { type: "button", dataset: { focus: "clear" }, "aria-label": t("Clear {name}'s cooldown", { name: p.name }), onclick: () => handlers.clear(p) }, t("Clear cooldown")));
  }
  row.append(el("div", { class: "prov-detail" }, facts));
  if (windows) row.append(windows);
  row.append(el("div", { class: "prov-detail prov-buttons" }, buttons));
  if (detail && tone !== "ok") row.append(el("div", { class: tone === "warn" ? "prov-detail" : "problem", "data-testid": "detail" }, el("span", {}, detail)));
  const result = handlers.testResults.get(p.id);
  if (result) row.append(result);
  return row;
}

/** A skipped candidate's reason in a few words: what the request needed that it lacks, or
 * the state it was in ("cooling", "breaker open"…); the whole reason is the hop's tooltip. */
const SKIP_WORDS = {
  skipped: N_("skipped"),
  cooling: N_("cooling"),
  "breaker open": N_("breaker open"),
  unavailable: N_("unavailable"),
  deferred: N_("deferred"),
  reserve: N_("kept in reserve"),
};

function skipWhy(reason) {
  const r = reason || "skipped";
  if (!r.startsWith("cannot take this request")) {
    const head = r.split(":")[0];
    return SKIP_WORDS[head] ? t(SKIP_WORDS[head]) : head;
  }
  if (/tool/.test(r)) return t("takes no tools");
  if (/image/.test(r)) return t("takes no images");
  if (/one user message|multi-turn/.test(r)) return t("takes one turn only");
  if (/context window/.test(r)) return t("too long for it");
  return t("cannot take this request");
}

/** One log row's route: `claude ✗ rate (back 01:19) → codex ✓`; a provider skipped for
 * several models shows once. */
export function chain(row) {
  const parts = [];
  const hops = [];
  for (const a of row.attempts || []) {
    const prev = hops[hops.length - 1];
    if (prev && a.class === "skipped" && prev.class === "skipped" && prev.provider === a.provider) continue;
    hops.push(a);
  }
  hops.forEach((a, i) => {
    if (i) parts.push(el("span", { class: "muted", "aria-hidden": "true" }, "→"));
    // A hedge: sent beside a first attempt that was slow to answer (routing.hedge).
    const hedge = a.hedge ? el("span", { class: "muted", "data-testid": "hedge" }, ` (${t("hedge")})`) : null;
    if (a.class === "ok") {
      parts.push(el("span", { class: "hop ok", title: t("{n} ms", { n: a.latencyMs }) }, keep(`${a.provider}/${a.model}`), " ✓", hedge));
    } else if (a.class === "outrun") {
      // Cancelled because the other attempt answered first; its prompt may still be billed.
      const title = a.inputTokens ? t("Cancelled after {n} ms; prompt tokens counted: about {tokens}", { n: a.latencyMs, tokens: fmtNumber(a.inputTokens) }) : t("{n} ms", { n: a.latencyMs });
      parts.push(el("span", { class: "hop skip", "data-testid": "outrun", title }, keep(`${a.provider}/${a.model}`), ` ✗ ${t("slower, cancelled")}`, hedge));
    } else if (a.class === "skipped") {
      const why = skipWhy(a.reason);
      // The states that have their own "… until" say it as the tray does ("冷却至 18:28").
      const until = { cooling: N_("cooling until {when}"), "breaker open": N_("breaker open until {when}") }[(a.reason || "").split(":")[0]];
      const when = a.resetAtMs && fmtClock(a.resetAtMs);
      const words = !when ? why : until ? t(until, { when }) : t("{why} until {when}", { why, when });
      // The log's own reason (as the gateway or the provider wrote it) is the name's tooltip.
      parts.push(el("span", { class: "hop skip" }, el("span", { translate: "no", title: a.reason || "" }, a.provider), `: ${words}`));
    } else {
      const what = classWordsInline(a.class);
      const words = a.resetAtMs ? t("{what} (back {when})", { what, when: fmtClock(a.resetAtMs) }) : what;
      parts.push(el("span", { class: "hop fail" }, el("span", { translate: "no", title: a.reason || "" }, `${a.provider}/${a.model}`), ` ✗ ${words}`, hedge));
    }
  });
  if (!parts.length) parts.push(el("span", { class: "muted", translate: row.error ? "no" : null }, row.error || t("not routed")));
  return el("span", { class: "chain" }, parts);
}

/** How the JSON a request asked for turned out: valid, repaired (something around it was
 * taken off), or invalid. */
const OUTPUT_WORDS = {
  valid: [N_("JSON valid"), "ok"],
  repaired: [N_("JSON repaired"), "warn"],
  invalid: [N_("JSON invalid"), "bad"],
};

function outputBadge(output) {
  const o = OUTPUT_WORDS[output];
  if (!o) return null;
  return el("span", { class: `badge ${o[1]}`, style: "margin-left:.35rem", "data-testid": "output" }, t(o[0]));
}

export function logRow(r, onCapture) {
  const read = r.cacheReadTokens || 0;
  const written = r.cacheWriteTokens || 0;
  const tokens = r.inputTokens != null
    ? el("span", { title: t("{input} prompt tokens ({read} read from the provider's cache, {written} written to it) → {output} answer tokens", { input: r.inputTokens, read, written, output: r.outputTokens ?? 0 }) },
        `${fmtNumber(r.inputTokens)} → ${fmtNumber(r.outputTokens ?? 0)}`,
        read ? el("span", { class: "muted", "data-testid": "cached" }, ` · ${t("{n} cached", { n: read })}`) : null)
    : "";
  return el(
    "tr",
    {},
    el("td", { class: "when", title: fmtDateTime(r.tsMs) }, fmtTime(r.tsMs, { hour: "numeric", minute: "2-digit", second: "2-digit" })),
    el("td", {}, keep(r.requestedModel), r.status >= 400 ? el("span", { class: "badge bad", style: "margin-left:.35rem" }, String(r.status)) : null, outputBadge(r.output),
      r.captured && onCapture ? el("button", { type: "button", class: "link small", style: "margin-left:.35rem", "data-testid": "capture",
        title: t("Download this request's capture (replay it with: baton replay {id})", { id: r.id }), onclick: () => onCapture(r.id) }, t("Capture")) : null),
    el("td", {}, chain(r)),
    el("td", { class: "num", "data-label": t("Latency") }, t("{n} ms", { n: r.totalMs })),
    el("td", { class: "num", "data-label": t("Tokens") }, tokens),
  );
}

const COLORS = ["#3457d5", "#10a37f", "#c15f3c", "#8b5cf6", "#d97706", "#0891b2", "#be185d"];

/** Requests per provider in 5-minute buckets over the last hour, failures in red on top. */
export function chart(rows, box, legend) {
  box.replaceChildren();
  legend.replaceChildren();
  const now = Date.now();
  const buckets = Array.from({ length: 12 }, () => ({ byProvider: {}, fail: 0, failover: 0 }));
  const providers = [];
  for (const r of rows) {
    const age = now - r.tsMs;
    if (age < 0 || age >= 3600e3) continue;
    const b = buckets[11 - Math.floor(age / 300e3)];
    const p = r.provider || t("not served");
    if (r.status < 400 && !providers.includes(p)) providers.push(p);
    if (r.status >= 400) {
      b.fail++;
      continue;
    }
    b.byProvider[p] = (b.byProvider[p] || 0) + 1;
    if ((r.attempts || []).some((a) => !["ok", "skipped", "outrun"].includes(a.class))) b.failover++;
  }
  const max = Math.max(1, ...buckets.map((b) => b.fail + Object.values(b.byProvider).reduce((x, y) => x + y, 0)));
  for (const b of buckets) {
    const col = el("div", { class: "col" });
    providers.forEach((p, i) => {
      const n = b.byProvider[p] || 0;
      if (n) col.append(el("div", { class: "seg", translate: "no", style: `height:${(n / max) * 100}%;background:${COLORS[i % COLORS.length]}`, title: `${p}: ${fmtNumber(n)}` }));
    });
    if (b.fail) col.append(el("div", { class: "seg fail", style: `height:${(b.fail / max) * 100}%`, title: t("failed: {n}", { n: b.fail }) }));
    // Failovers are part of the served counts: a marker above the column.
    col.title = b.failover ? t("{n} served after a failover", { n: b.failover }) : "";
    if (b.failover) col.append(el("div", { class: "seg failover", style: "height:3px" }));
    box.append(col);
  }
  providers.forEach((p, i) => legend.append(el("span", { class: "legend-swatch", style: `background:${COLORS[i % COLORS.length]}` }), keep(p)));
  legend.append(el("span", { class: "legend-swatch", style: "background:var(--bad)" }), t("failed"));
  legend.append(el("span", { class: "legend-swatch", style: "background:var(--warn)" }), t("after a failover"));
  legend.append(el("span", { class: "muted" }, ` · ${t("last hour, 5-minute steps")}`));
}

export function snippet(title, text) {
  const copy = el("button", { type: "button", onclick: async () => {
    try {
      await navigator.clipboard.writeText(text);
      copy.textContent = t("Copied");
    } catch {
      copy.textContent = t("Select and copy");
    }
    setTimeout(() => (copy.textContent = t("Copy")), 1500);
  } }, t("Copy"));
  return el("div", { class: "stack" }, el("h2", {}, title), el("div", { class: "snippet" }, el("pre", {}, el("code", {}, text)), copy));
}
