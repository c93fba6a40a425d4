// The UI in English, Japanese and Simplified Chinese, in a real headless Chromium against the
// real `baton serve`: the catalogue covers every key the code and pages use in every language,
// every screen shows no English words in the other languages (a string left out of the
// catalogue shows as English), times follow the language's own format, the system's language is
// the default and Settings switches it. Screenshots of every screen, per language, at 1000 px
// and at the tray window's 420 px go to tests/ui/artifacts/i18n-*.png.
//
// Needs: BATON_BIN, FAKE_UPSTREAM_BIN (built binaries), PLAYWRIGHT_CORE, CHROMIUM.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { launch } from "../support/browser.mjs";
import { procs, start } from "../support/procs.mjs";
import { allKeys, problems } from "../../scripts/i18n-keys.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, "artifacts");
mkdirSync(artifacts, { recursive: true });

let browser, baton, adminKey, gatewayKey, upA, upB;
const admin = () => ({ "x-admin-key": adminKey, "content-type": "application/json" });

/** Words that are names, not English: products, formats, and this test's own data. */
const NAMES = new Set(`Baton Claude Code Codex Gemini CLI CLIs OpenAI Anthropic API SDK SDKs JSON CSV URL UI ID
  Brave Search SearXNG OpenTelemetry GenAI OTLP Ollama Responses Web opencode ChatGPT WebSearch Cursor Continue Linux macOS PATH auto
  Azure AWS Bedrock Converse Vertex Cloud Alpha Beta Gamma Groq Mistral Cerebras OpenRouter DeepSeek Google Max Pro Python curl TOML Copilot Studio UTC
  alice fast alpha beta alpha-model beta-model gpt-4o English`.split(/\s+/).filter(Boolean));

/** The catalog's service names (data the gateway sends, shown as published: "Hugging Face
 * Inference Providers (router)"), word by word. */
async function catalogNames(url, key) {
  const s = await (await fetch(`${url}/admin/setup`, { headers: { "x-admin-key": key } })).json();
  return new Set([...NAMES, ...s.presets.flatMap((p) => p.name.match(/[A-Za-z][A-Za-z0-9'’-]*[A-Za-z0-9]/g) || [])]);
}

before(async () => {
  const up = process.env.FAKE_UPSTREAM_BIN;
  upA = (await start(up, ["--name", "alpha", "--mode", "ok"])) + "/v1";
  upB = (await start(up, ["--name", "beta", "--mode", "ok"])) + "/v1";
  const dir = mkdtempSync(join(tmpdir(), "baton-i18n-"));
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({
    server: { port: 0 },
    providers: [
      { id: "alpha", name: "Alpha", kind: "openai-compatible", baseUrl: upA, models: ["alpha-model"], priority: 10 },
      { id: "beta", name: "Beta", kind: "openai-compatible", baseUrl: upB, models: ["beta-model"], priority: 20 },
    ],
  }));
  const home = join(dir, "home");
  mkdirSync(home);
  // The system's language is English here: "auto" follows the browser in the UI.
  baton = await start(process.env.BATON_BIN, ["serve", "--config", config, "--data-dir", join(dir, "data"), "--port", "0"],
    { HOME: home, CLAUDE_CONFIG_DIR: "", CODEX_HOME: "", XDG_CONFIG_HOME: "", LANG: "C.UTF-8", LANGUAGE: "", LC_ALL: "", LC_MESSAGES: "" });
  gatewayKey = readFileSync(join(dir, "data", "gateway.key"), "utf8").trim();
  adminKey = readFileSync(join(dir, "data", "admin.key"), "utf8").trim();
  browser = await launch();
  // Something on every screen: requests (one failed over from a limit), a client key, a route
  // and a mapping.
  await fetch(`${upA.replace(/\/v1$/, "")}/_script`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(["429"]) });
  for (let i = 0; i < 3; i++) {
    const r = await fetch(`${baton}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "auto", messages: [{ role: "user", content: "hi" }] }),
    });
    await r.text();
  }
  await fetch(`${baton}/admin/keys`, { method: "POST", headers: admin(), body: JSON.stringify({ label: "alice", rpm: 30, budget: { dayUsd: 2 } }) });
  await fetch(`${baton}/admin/routes/fast`, { method: "PUT", headers: admin(), body: JSON.stringify({ targets: ["beta", "alpha"] }) });
  await fetch(`${baton}/admin/model-map/${encodeURIComponent("claude-*")}`, { method: "PUT", headers: admin(), body: JSON.stringify({ target: "auto" }) });
});

after(async () => {
  if (browser) await browser.close();
  for (const p of procs) p.kill("SIGTERM");
  await fetch(`${baton}/admin/settings`, { method: "PUT", headers: admin(), body: JSON.stringify({ language: "auto" }) }).catch(() => {});
});

test("the catalogue has every key the code and the pages use, in every language, and no other", async () => {
  const used = await allKeys();
  assert.ok(used.size > 300, `${used.size} keys found`);
  assert.deepEqual(problems(used), []);
});

async function setLanguage(language) {
  const r = await fetch(`${baton}/admin/settings`, { method: "PUT", headers: admin(), body: JSON.stringify({ language }) });
  assert.equal(r.status, 200, await r.text());
}

/** Visible words that are neither in the page's language nor names: English left untranslated.
 * Text marked translate="no" (names, models, paths, what a provider said) and code are data. */
function englishOnScreen(page, names) {
  return page.evaluate((names) => {
    const found = [];
    const visible = (e) => e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
    const data = (e) => e.closest("[translate=no], code, pre, kbd, script, style");
    const words = (text, where) => {
      for (const m of text.matchAll(/[A-Za-z][A-Za-z0-9'’-]*[A-Za-z0-9]/g)) {
        const w = m[0];
        const before = text[m.index - 1] || "";
        const after = text[m.index + w.length] || "";
        // Part of a path, a file name, an identifier or a name pattern (provider/model,
        // gateway.key, x_y, gpt-…, claude-*, model@version, --host, :free, https://), or a quoted
        // literal ("live").
        if (w.length < 3 || names.includes(w) || /[/._@]/.test(before + after) || after === "-" || /[-:0-9]/.test(before) || text.startsWith("://", m.index + w.length) || (before === '"' && after === '"')) continue;
        found.push(`${w} in “${text.trim().slice(0, 80)}” (${where})`);
      }
    };
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const e = n.parentElement;
      if (!e || data(e) || !visible(e)) continue;
      words(n.textContent, e.tagName.toLowerCase() + (e.id ? `#${e.id}` : ""));
    }
    for (const e of document.querySelectorAll("[placeholder], [title], [aria-label], option")) {
      if (data(e)) continue;
      for (const a of ["placeholder", "title", "aria-label"]) if (e.getAttribute(a)) words(e.getAttribute(a), `${e.tagName.toLowerCase()}[${a}]`);
      if (e.tagName === "OPTION") words(e.textContent, "option");
    }
    // Keys asked for that the language lacks (shown in English).
    for (const k of globalThis.__batonI18n.misses) found.push(`no ${document.documentElement.lang} text for “${k}”`);
    return found;
  }, [...names]);
}

const SCREENS = [
  ["providers", "#provider-list > li"],
  ["activity", "#log-rows tr td.num"],
  ["team", "#usage-rows tr"],
  ["connect", "#claude-code"],
  ["settings", "#routes-info li"],
];

for (const [lang, width] of [["ja", 1000], ["ja", 420], ["zh-CN", 1000], ["zh-CN", 420], ["en", 1000], ["en", 420]]) {
  test(`every screen in ${lang} at ${width} px: no word left in another language, times in its own format`, async () => {
    await setLanguage(lang);
    // A browser in US English: only the setting makes the page Japanese or Chinese.
    const ctx = await browser.newContext({ locale: "en-US", viewport: { width, height: 760 } });
    const page = await ctx.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`${baton}/ui/#admin=${encodeURIComponent(adminKey)}`);
    await page.waitForSelector("#provider-list > li");
    assert.equal(await page.getAttribute("html", "lang"), lang);
    for (const [tab, ready] of SCREENS) {
      await page.click(`nav a[data-tab=${tab}]`);
      await page.waitForSelector(ready);
      if (tab === "team") await page.click("#new-limits-box summary");
      if (lang !== "en") assert.deepEqual(await englishOnScreen(page, NAMES), [], `${tab} in ${lang}`);
      // In English too, every text asked for is in the catalogue.
      else assert.deepEqual(await page.evaluate(() => [...globalThis.__batonI18n.misses]), [], `${tab}: keys not in en.json`);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
      assert.equal(overflow, false, `${tab} in ${lang}: no horizontal scrolling at ${width} px`);
      await page.screenshot({ path: join(artifacts, `i18n-${lang}-${tab}-${width}.png`), fullPage: true });
    }
    // The Add provider form, and the cooling provider's words and countdown on Providers.
    await page.click("nav a[data-tab=providers]");
    await page.click("#add-provider");
    await page.waitForSelector("#provider-dialog[open] #f-kind");
    if (lang !== "en") assert.deepEqual(await englishOnScreen(page, NAMES), [], `Add provider in ${lang}`);
    await page.screenshot({ path: join(artifacts, `i18n-${lang}-add-provider-${width}.png`), fullPage: true });
    // The company clouds are kinds like any other: Azure OpenAI chosen, the form follows.
    await page.selectOption("#f-kind", "azure-openai");
    if (lang !== "en") assert.deepEqual(await englishOnScreen(page, NAMES), [], `Add Azure provider in ${lang}`);
    await page.screenshot({ path: join(artifacts, `i18n-${lang}-add-azure-${width}.png`), fullPage: true });
    // Bedrock asks for a region only; Vertex AI for its project too, refused without it beside
    // the field, in the page's language.
    await page.selectOption("#f-kind", "bedrock");
    assert.equal(await page.isVisible("#f-region"), true, "Bedrock's region");
    assert.equal(await page.isVisible("#f-project"), false, "no project for Bedrock");
    // Every other Bedrock model, through the Converse API: the same region and keys.
    await page.selectOption("#f-kind", "bedrock-converse");
    assert.equal(await page.isVisible("#f-region"), true, "Bedrock Converse's region");
    if (lang !== "en") assert.deepEqual(await englishOnScreen(page, NAMES), [], `Add Bedrock Converse provider in ${lang}`);
    await page.screenshot({ path: join(artifacts, `i18n-${lang}-add-bedrock-converse-${width}.png`), fullPage: true });
    await page.selectOption("#f-kind", "vertex-anthropic");
    assert.equal(await page.isVisible("#f-project"), true, "Vertex AI's project");
    await page.fill("#f-id", "vx");
    await page.fill("#f-baseUrl", "https://us-east5-aiplatform.googleapis.com/v1");
    await page.fill("#f-models", "claude-sonnet-4-5@20250929");
    await page.click("#form-save");
    await page.waitForFunction(() => document.getElementById("e-project")?.textContent);
    if (lang !== "en") assert.deepEqual(await englishOnScreen(page, NAMES), [], `Add Vertex provider in ${lang}`);
    if (lang === "en") assert.match(await page.textContent("#e-project"), /id of the Google Cloud project/);
    await page.screenshot({ path: join(artifacts, `i18n-${lang}-add-vertex-${width}.png`), fullPage: true });
    await page.fill("#f-id", "");
    await page.fill("#f-baseUrl", "");
    await page.fill("#f-models", "");
    // ChatGPT's backend is called only on the client's login: the form says so and keeps it.
    await page.selectOption("#f-kind", "chatgpt");
    assert.equal(await page.isChecked("#f-clientLogin"), true, "chatgpt: the client's login");
    assert.equal(await page.isDisabled("#f-clientLogin"), true, "chatgpt: no key of Baton's");
    await page.selectOption("#f-kind", "openai-compatible");
    assert.equal(await page.isChecked("#f-clientLogin"), false, "the choice is given back");
    assert.equal(await page.isVisible("#f-project"), false, "the other kinds have no project");
    // Saved empty, then with a wrong address: the gateway's own findings, beside each field, in
    // the page's language too (the UI asks the admin API for it).
    await page.click("#form-save");
    await page.waitForFunction(() => ["e-id", "e-baseUrl", "e-models"].every((id) => document.getElementById(id)?.textContent));
    await page.fill("#f-id", "delta");
    await page.fill("#f-baseUrl", "delta.example/v1");
    await page.fill("#f-models", "m");
    await page.click("#form-save");
    await page.waitForFunction(() => /delta\.example/.test(document.getElementById("e-baseUrl")?.textContent || ""));
    if (lang !== "en") assert.deepEqual(await englishOnScreen(page, NAMES), [], `Add provider's errors in ${lang}`);
    if (lang === "ja") assert.match(await page.textContent("#e-baseUrl"), /https:\/\/（ローカルサーバーなら http:\/\/）で始まる必要があります/);
    if (lang === "en") assert.match(await page.textContent("#e-baseUrl"), /must start with https:\/\//);
    await page.screenshot({ path: join(artifacts, `i18n-${lang}-add-provider-errors-${width}.png`), fullPage: true });
    await page.keyboard.press("Escape");
    if (lang !== "en" && width === 1000) {
      // The dialogs and the banners: a route's editor, a key's limits, routing paused.
      await page.click("nav a[data-tab=settings]");
      await page.click("#routes-info [data-route=fast] button");
      await page.waitForSelector("#route-dialog[open]");
      assert.deepEqual(await englishOnScreen(page, NAMES), [], `route dialog in ${lang}`);
      await page.screenshot({ path: join(artifacts, `i18n-${lang}-route-dialog.png`) });
      await page.keyboard.press("Escape");
      await page.click("nav a[data-tab=team]");
      await page.click("#key-list [data-key-id] [data-action=edit]");
      await page.waitForSelector("#key-dialog[open]");
      assert.deepEqual(await englishOnScreen(page, NAMES), [], `limits dialog in ${lang}`);
      await page.keyboard.press("Escape");
      await fetch(`${baton}/admin/pause`, { method: "PUT", headers: admin(), body: JSON.stringify({ paused: true }) });
      await page.click("nav a[data-tab=providers]");
      await page.waitForSelector("#gateway-banner:not([hidden]) #resume");
      assert.deepEqual(await englishOnScreen(page, NAMES), [], `paused in ${lang}`);
      await page.screenshot({ path: join(artifacts, `i18n-${lang}-paused.png`) });
      await page.click("#resume");
      await page.waitForSelector("#gateway-banner", { state: "hidden" });
    }
    // Activity's clock: the one the tray writes too (the summary's `hour12`, from the system's
    // locale: 24-hour here, in C.UTF-8, whatever the browser's region), never the browser's own.
    await page.click("nav a[data-tab=activity]");
    const when = await page.textContent("#log-rows tr:first-child td.when");
    const { summary } = await (await fetch(`${baton}/admin/state`, { headers: admin() })).json();
    assert.equal(summary.hour12, false);
    assert.match(when, /^\d{1,2}:\d\d:\d\d$/, when);
    assert.deepEqual(errors, []);
    await ctx.close();
  });
}

test("the first run's welcome screen in Japanese: what was found, the free tiers, the next step", async () => {
  // A Baton with nothing configured (its own data directory and home).
  const dir = mkdtempSync(join(tmpdir(), "baton-i18n-first-"));
  mkdirSync(join(dir, "home"));
  const fresh = await start(process.env.BATON_BIN, ["serve", "--data-dir", join(dir, "data"), "--port", "0"],
    { HOME: join(dir, "home"), CLAUDE_CONFIG_DIR: "", CODEX_HOME: "", XDG_CONFIG_HOME: "", PATH: "/usr/bin:/bin", LANG: "C.UTF-8" });
  const key = readFileSync(join(dir, "data", "admin.key"), "utf8").trim();
  const r = await fetch(`${fresh}/admin/settings`, { method: "PUT", headers: { "x-admin-key": key, "content-type": "application/json" }, body: JSON.stringify({ language: "ja" }) });
  assert.equal(r.status, 200);
  const names = await catalogNames(fresh, key);
  for (const width of [1000, 420]) {
    const ctx = await browser.newContext({ locale: "en-US", viewport: { width, height: 760 } });
    const page = await ctx.newPage();
    await page.goto(`${fresh}/ui/#admin=${encodeURIComponent(key)}`);
    await page.waitForSelector("#first-run:not([hidden]) h2");
    await page.waitForSelector("#first-run .found");
    assert.equal(await page.textContent("#first-run h2"), "ようこそ — Baton のルーティング先を追加しましょう");
    assert.deepEqual(await englishOnScreen(page, names), []);
    await page.screenshot({ path: join(artifacts, `i18n-ja-welcome-${width}.png`), fullPage: true });
    // Connect with no provider says so first, in Japanese too.
    await page.click("nav a[data-tab=connect]");
    await page.waitForSelector("#connect-no-provider");
    assert.deepEqual(await englishOnScreen(page, names), []);
    await ctx.close();
  }
});

test("the unlock page speaks the chosen language before the key is given", async () => {
  await setLanguage("zh-CN");
  const ctx = await browser.newContext({ locale: "en-US" });
  const page = await ctx.newPage();
  await page.goto(`${baton}/ui/`);
  await page.waitForSelector("#login:not([hidden])");
  assert.equal(await page.textContent("#login h1"), "解锁 Baton");
  assert.deepEqual(await englishOnScreen(page, NAMES), []);
  await page.screenshot({ path: join(artifacts, "i18n-zh-CN-unlock.png") });
  await ctx.close();
});

test("automatic follows the system's (browser's) language, and Settings switches it with the keyboard", async () => {
  await setLanguage("auto");
  const ctx = await browser.newContext({ locale: "ja-JP", viewport: { width: 1000, height: 760 } });
  const page = await ctx.newPage();
  await page.goto(`${baton}/ui/#admin=${encodeURIComponent(adminKey)}`);
  await page.waitForSelector("#provider-list > li");
  assert.equal(await page.getAttribute("html", "lang"), "ja");
  assert.equal(await page.textContent("nav a[data-tab=settings]"), "設定");
  await page.click("nav a[data-tab=settings]");
  await page.waitForSelector("#language option[value=zh-CN]", { state: "attached" });
  assert.equal(await page.inputValue("#language"), "auto");
  // Keyboard only: focus the switch, pick 简体中文; the page comes back in Chinese.
  await page.focus("#language");
  const reloaded = page.waitForEvent("load");
  await page.selectOption("#language", "zh-CN");
  await reloaded;
  await page.waitForSelector("#routes-info li");
  assert.equal(await page.getAttribute("html", "lang"), "zh-CN");
  assert.equal(await page.textContent("nav a[data-tab=settings]"), "设置");
  assert.equal(await page.inputValue("#language"), "zh-CN");
  const s = await (await fetch(`${baton}/admin/settings`, { headers: admin() })).json();
  assert.equal(s.language.chosen, "zh-CN");
  assert.deepEqual(s.language.available.map((l) => l.id), ["en", "ja", "zh-CN"]);
  await ctx.close();
});

test("a language Baton does not have is refused with what to send", async () => {
  const r = await fetch(`${baton}/admin/settings`, { method: "PUT", headers: admin(), body: JSON.stringify({ language: "fr" }) });
  assert.equal(r.status, 422);
  const e = (await r.json()).error;
  assert.equal(e.param, "language");
  assert.match(e.message, /`fr` is not a language Baton has; send "auto" \(the system's language\) or one of en, ja, zh-CN/);
});

test("failover lines are written in the chosen language for the tray, the notifications and the toasts", async () => {
  await setLanguage("ja");
  const events = [];
  const ac = new AbortController();
  const stream = fetch(`${baton}/admin/events`, { headers: admin(), signal: ac.signal }).then(async (r) => {
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      for (const m of buf.matchAll(/^data: (.*)$/gm)) events.push(m[1]);
    }
  }).catch(() => {});
  await new Promise((r) => setTimeout(r, 200));
  await fetch(`${baton}/admin/cooldowns`, { method: "DELETE", headers: admin() });
  await fetch(`${upA.replace(/\/v1$/, "")}/_script`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(["429"]) });
  const r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "auto", messages: [{ role: "user", content: "hi" }] }),
  });
  await r.text();
  await new Promise((r) => setTimeout(r, 300));
  ac.abort();
  await stream;
  const failover = events.map((e) => JSON.parse(e)).find((e) => e.type === "failover" || e.from);
  assert.ok(failover, events.join("\n"));
  // The date is named when the reset falls on another day (a run just before midnight).
  assert.match(failover.message, /^Alpha がレート制限に達しました(( — (\d{1,2}月\d{1,2}日 )?\d{1,2}:\d\d に復帰。)|。)現在は Beta を使用中$/, failover.message);
});
