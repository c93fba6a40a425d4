#!/usr/bin/env node
// Every text Baton shows, against the catalogue (ui/locales/*.json): the keys the code asks for
// (t/tn/N_ in ui/*.js, tr/n_/msg in the Rust that writes tray, notification and usage lines, the
// catalog's free-tier notes) and
// the static pages' own sentences (index.html, port-busy.html, derived by the same walker the
// page runs, in a real browser).
//
//   node scripts/i18n-keys.mjs            list problems; exit 1 when there are any
//   node scripts/i18n-keys.mjs --write-en add new keys to en.json (English is the key) and drop unused ones
//
// Uses PLAYWRIGHT_CORE (playwright-core's index.mjs) and CHROMIUM as the UI tests do (default:
// scripts/test's npm cache and /usr/bin/chromium).
import { readFileSync, readdirSync, writeFileSync, statSync } from "node:fs";
import { join, dirname } from "node:path";
import { homedir } from "node:os";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const UI = join(root, "ui");
export const LANGS = ["en", "ja", "zh-CN"];

function walk(dir, ext) {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p, ext) : p.endsWith(ext) ? [p] : [];
  });
}

/** A JS string literal's value ("…" or `…` without ${}). */
function unquote(q, body) {
  if (q === "`") return body.includes("${") ? null : body;
  return JSON.parse(`"${body.replace(/\\'/g, "'")}"`);
}

/** Keys in the UI's modules: t("…"), tn("…"), N_("…"). */
export function jsKeys() {
  const out = new Map();
  for (const f of walk(UI, ".js")) {
    const src = readFileSync(f, "utf8");
    for (const m of src.matchAll(/\b(?:t|tn|N_)\(\s*(["`])((?:\\.|(?!\1).)*)\1/gs)) {
      const k = unquote(m[1], m[2]);
      if (k !== null) out.set(k, f);
    }
  }
  return out;
}

/** Keys in the Rust code that writes for people: tr(lang, "…"), n_("…") and
 * msg("…") (the admin API's messages). */
export function rustKeys() {
  const out = new Map();
  for (const f of [...walk(join(root, "src"), ".rs"), ...walk(join(root, "src-tauri", "src"), ".rs")]) {
    const src = readFileSync(f, "utf8");
    for (const m of src.matchAll(/\b(?:tr\(\s*[\w.]+,|n_\(|msg\()\s*"((?:\\.|[^"\\])*)"/gs)) {
      // A Rust string: \" and \\ and \u{…} escapes; a line continuation joins lines.
      const k = m[1]
        .replace(/\\\n\s*/g, "")
        .replace(/\\u\{([0-9a-fA-F]+)\}/g, (_, h) => String.fromCodePoint(parseInt(h, 16)))
        .replace(/\\(["\\])/g, "$1")
        .replace(/\\n/g, "\n");
      if (f.includes("/tests") || /fn a_translation|no such key/.test(k)) continue;
      out.set(k, f);
    }
  }
  return out;
}

/** The catalog's free-tier notes (catalog/providers.json), which the welcome screen shows, and
 * the names that say more than a brand ("Claude (your Pro/Max plan)"), which the presets show. */
export function catalogKeys() {
  const file = join(root, "catalog", "providers.json");
  const out = new Map();
  for (const p of JSON.parse(readFileSync(file, "utf8")).providers) {
    if (p.freeTier?.note) out.set(p.freeTier.note, file);
    if (/[(,]/.test(p.name)) out.set(p.name, file);
  }
  return out;
}

/** The static pages' keys, from the walker in i18n.js, in a browser. */
export async function staticKeys() {
  const core = process.env.PLAYWRIGHT_CORE || join(homedir(), ".cache/baton-npm/node_modules/playwright-core/index.mjs");
  const { chromium } = await import(core);
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage();
    await page.route("http://baton.invalid/**", (route) => {
      const name = new URL(route.request().url()).pathname.slice(1) || "blank.html";
      if (name === "blank.html") return route.fulfill({ contentType: "text/html", body: "<!doctype html><title>keys</title>" });
      try {
        const type = name.endsWith(".js") ? "text/javascript" : name.endsWith(".json") ? "application/json" : "text/html";
        return route.fulfill({ contentType: type, body: readFileSync(join(UI, name), "utf8") });
      } catch {
        return route.fulfill({ status: 404, body: "" });
      }
    });
    await page.goto("http://baton.invalid/blank.html");
    const keys = new Map();
    for (const file of ["index.html", "port-busy.html"]) {
      const html = readFileSync(join(UI, file), "utf8");
      const found = await page.evaluate(async (html) => {
        const doc = new DOMParser().parseFromString(html, "text/html");
        document.body.replaceWith(document.adoptNode(doc.body));
        const m = await import("/i18n.js");
        globalThis.__batonI18n.staticKeys.clear();
        m.translateStatic();
        return [...globalThis.__batonI18n.staticKeys];
      }, html);
      for (const k of found) keys.set(k, join(UI, file));
    }
    return keys;
  } finally {
    await browser.close();
  }
}

export function catalogue(lang) {
  return JSON.parse(readFileSync(join(UI, "locales", `${lang}.json`), "utf8"));
}

const holes = (v) => [...new Set(JSON.stringify(v).match(/\{\w+\}/g) || [])].sort().join(" ");

/** What is wrong: keys the code uses that a language lacks, keys no code uses, and texts whose
 * {placeholders} differ from English's. */
export function problems(used) {
  const out = [];
  const en = catalogue("en");
  for (const lang of LANGS) {
    const c = catalogue(lang);
    for (const [k, where] of used) if (!(k in c)) out.push(`${lang}: missing ${JSON.stringify(k)} (used in ${where.replace(root + "/", "")})`);
    for (const k of Object.keys(c)) if (!used.has(k)) out.push(`${lang}: ${JSON.stringify(k)} is used nowhere`);
    for (const k of Object.keys(c)) {
      if (k in en && holes(c[k]) !== holes(en[k])) out.push(`${lang}: ${JSON.stringify(k)} has {${holes(c[k])}} where English has {${holes(en[k])}}`);
      if (typeof c[k] !== "string" && (typeof c[k] !== "object" || typeof c[k].other !== "string")) out.push(`${lang}: ${JSON.stringify(k)} is neither a text nor {one, other}`);
    }
  }
  return out;
}

export async function allKeys() {
  return new Map([...jsKeys(), ...rustKeys(), ...catalogKeys(), ...(await staticKeys())]);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const used = await allKeys();
  if (process.argv.includes("--write-en")) {
    const en = catalogue("en");
    const next = {};
    for (const k of [...used.keys()].sort()) next[k] = en[k] ?? k;
    writeFileSync(join(UI, "locales", "en.json"), `${JSON.stringify(next, null, 2)}\n`);
    console.log(`en.json: ${Object.keys(next).length} keys`);
  }
  const found = problems(used);
  for (const p of found) console.log(p);
  console.log(`${used.size} keys; ${found.length} problems`);
  process.exit(found.length ? 1 : 0);
}
