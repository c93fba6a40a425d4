// The UI's language: English, Japanese or Simplified Chinese, from the catalogue the tray and
// the notifications read too (ui/locales/*.json, keyed by the English text). `t()` gives a text,
// `tn()` a fragment that keeps nodes (a name, a <code>) in a translated sentence, `N_()` marks a
// text that is translated later. Dates, times and numbers follow the locale (12/24 h as it says).

export const LANGS = [
  { id: "en", name: "English" },
  { id: "ja", name: "日本語" },
  { id: "zh-CN", name: "简体中文" },
];

let lang = "en";
let intlLocale = "en";
let catalogue = {};
let english = {};
// What the browser test reads: keys asked for that the language has no text for.
const misses = new Set();
const staticKeys = new Set();
globalThis.__batonI18n = { misses, staticKeys, lang: () => lang };

/** The shipped language a BCP 47 tag asks for (any Chinese → Simplified Chinese). */
export function matchLang(tag) {
  const primary = String(tag || "").toLowerCase().split(/[-_]/)[0];
  return { en: "en", ja: "ja", zh: "zh-CN" }[primary] || null;
}

export function currentLang() {
  return lang;
}

/** Loads the catalogue for `choice`: a language id, or "auto" (the browser's, which is the
 * system's in the desktop window). The gateway keeps the choice (`GET /` tells it). */
export async function loadLanguage(choice = "auto") {
  const wanted = choice !== "auto" && LANGS.some((l) => l.id === choice) ? choice : null;
  const fromBrowser = (navigator.languages || [navigator.language]).map(matchLang).find(Boolean);
  lang = wanted || fromBrowser || "en";
  // The browser's own locale when it is of the same language (en-GB keeps its 24 h clock).
  const own = (navigator.languages || []).find((l) => matchLang(l) === lang);
  intlLocale = own || lang;
  const get = (id) => fetch(`locales/${id}.json`).then((r) => (r.ok ? r.json() : {})).catch(() => ({}));
  [english, catalogue] = await Promise.all([get("en"), lang === "en" ? null : get(lang)]);
  if (lang === "en") catalogue = english;
  document.documentElement.lang = lang;
}

/** Marks an English text to be translated where it is shown (a table of words kept for later). */
export function N_(key) {
  return key;
}

function lookup(key, args) {
  let v = catalogue[key];
  if (v === undefined) {
    misses.add(key);
    v = english[key] ?? key;
  }
  if (v && typeof v === "object") {
    const n = Number(args?.n ?? 0);
    v = v[new Intl.PluralRules(intlLocale).select(n)] ?? v.other;
  }
  return String(v);
}

/** Whether the catalogue has a text for `key` (a name that is only a brand has none). */
export function has(key) {
  return key in catalogue || key in english;
}

function fmtValue(v) {
  return typeof v === "number" ? new Intl.NumberFormat(intlLocale).format(v) : String(v);
}

/** The text for `key` in the user's language, with `{name}` filled from `args`. */
export function t(key, args = {}) {
  return lookup(key, args).replace(/\{(\w+)\}/g, (m, name) => (name in args ? fmtValue(args[name]) : m));
}

/** Like `t`, as nodes: a value that is a Node (a link, a <code>, a name kept from translation)
 * is put in its place in the sentence, whatever order the language needs. */
export function tn(key, args = {}) {
  const out = document.createDocumentFragment();
  const text = lookup(key, args);
  let at = 0;
  for (const m of text.matchAll(/\{(\w+)\}/g)) {
    if (m.index > at) out.append(text.slice(at, m.index));
    const v = args[m[1]];
    out.append(v === undefined ? m[0] : v instanceof Node ? v : fmtValue(v));
    at = m.index + m[0].length;
  }
  if (at < text.length) out.append(text.slice(at));
  return out;
}

/** A value that is data, not words: kept out of translation (browsers' too). */
export function keep(text) {
  const s = document.createElement("span");
  s.setAttribute("translate", "no");
  s.textContent = text;
  return s;
}

// ---- dates, times, numbers -----------------------------------------------------------------

export function fmtNumber(n, opts) {
  return new Intl.NumberFormat(intlLocale, opts).format(n);
}

/** The user's clock as Baton's summary says (`hour12`): the tray and the window write a time
 * alike ("00:30" in both, or "12:30 AM" in both); `null` until it is known (the language's own). */
let hour12 = null;
export function setHour12(v) {
  hour12 = typeof v === "boolean" ? v : null;
}

export function fmtTime(ms, opts = { hour: "numeric", minute: "2-digit" }) {
  const clock = hour12 === null || !("hour" in opts) ? opts : { ...opts, hourCycle: hour12 ? "h12" : "h23" };
  return new Date(ms).toLocaleTimeString(intlLocale, clock);
}

export function fmtDate(ms, opts = { month: "short", day: "numeric" }) {
  return new Date(ms).toLocaleDateString(intlLocale, opts);
}

export function fmtDateTime(ms, opts) {
  // The same clock as every other time (the summary's `hour12`), where the format has a time.
  const clock = hour12 === null || (opts && !("hour" in opts) && !("timeStyle" in opts)) ? opts : { ...(opts || { year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "2-digit", second: "2-digit" }), hourCycle: hour12 ? "h12" : "h23" };
  return new Date(ms).toLocaleString(intlLocale, clock);
}

/** A list in the language's own way ("a, b and c", "a、b、c"). */
export function fmtList(items) {
  return new Intl.ListFormat(intlLocale, { style: "long", type: "conjunction" }).format(items.map(String));
}

// ---- the page's own words (index.html) -----------------------------------------------------

const SKIP = new Set(["SCRIPT", "STYLE", "CODE", "PRE", "KBD", "SAMP", "TEXTAREA"]);
const ATTRS = ["placeholder", "title", "aria-label", "alt"];

/** Translates the static page: each element with words of its own is one sentence, its child
 * elements `{0}`, `{1}`… in it (so a <code> stays where the language puts it); attributes people
 * read (placeholder, title, aria-label) by their value. */
export function translateStatic(root = document.body) {
  for (const a of ATTRS) {
    for (const n of root.querySelectorAll(`[${a}]`)) {
      if (n.closest("[translate=no]")) continue;
      const v = n.getAttribute(a).trim();
      if (!v || !/[A-Za-z]{2}/.test(v)) continue;
      staticKeys.add(v);
      n.setAttribute(a, t(v));
    }
  }
  walk(root);
}

function walk(node) {
  if (SKIP.has(node.tagName) || node.getAttribute?.("translate") === "no") return;
  const kids = [...node.childNodes];
  const own = kids.some((c) => c.nodeType === Node.TEXT_NODE && /[A-Za-z]/.test(c.textContent));
  const elements = kids.filter((c) => c.nodeType === Node.ELEMENT_NODE);
  if (own) {
    let i = 0;
    const key = kids
      .map((c) => (c.nodeType === Node.ELEMENT_NODE ? `{${i++}}` : c.nodeType === Node.TEXT_NODE ? c.textContent : ""))
      .join("")
      .replace(/\s+/g, " ")
      .trim();
    staticKeys.add(key);
    const args = Object.fromEntries(elements.map((e, j) => [String(j), e]));
    node.replaceChildren(tn(key, args));
  }
  for (const e of elements) walk(e);
}
