// What a demanding user tried and found wanting, each fixed and kept fixed, in a real headless
// Chromium against the real `baton serve`: limits editable in the provider form (and its errors
// in plain words), the Test result scrolled into view above the sticky buttons at 420 px, focus
// kept on a sensible control after Delete, Clear cooldown and Hide, countdowns as durations,
// usage windows and preset names in Japanese and Chinese, web search offered only through
// providers Baton can call, and an unreachable SearXNG said at once.
//
// Needs: BATON_BIN, FAKE_UPSTREAM_BIN, PLAYWRIGHT_CORE, CHROMIUM.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launch, signIn } from "../support/browser.mjs";
import { procs, start } from "../support/procs.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, "artifacts");
mkdirSync(artifacts, { recursive: true });

let browser, baton, adminKey, gatewayKey, up;
const admin = () => ({ "x-admin-key": adminKey, "content-type": "application/json" });

before(async () => {
  up = (await start(process.env.FAKE_UPSTREAM_BIN, ["--name", "alpha", "--mode", "ok"])) + "/v1";
  const dir = mkdtempSync(join(tmpdir(), "baton-polish-"));
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({
    server: { port: 0 },
    providers: [
      { id: "sub", name: "Claude Max", kind: "anthropic", baseUrl: up, models: ["*"], credentials: "client", priority: 1 },
    ],
  }));
  const home = join(dir, "home");
  mkdirSync(home);
  baton = await start(process.env.BATON_BIN, ["serve", "--config", config, "--data-dir", join(dir, "data"), "--port", "0"],
    { HOME: home, CLAUDE_CONFIG_DIR: "", CODEX_HOME: "", XDG_CONFIG_HOME: "", LANG: "C.UTF-8", LANGUAGE: "", LC_ALL: "" });
  adminKey = readFileSync(join(dir, "data", "admin.key"), "utf8").trim();
  gatewayKey = readFileSync(join(dir, "data", "gateway.key"), "utf8").trim();
  browser = await launch();
});

after(async () => {
  if (browser) await browser.close();
  for (const p of procs) p.kill("SIGTERM");
});

async function open(width, locale = "en-US") {
  const page = await (await browser.newContext({ locale, viewport: { width, height: 760 } })).newPage();
  await signIn(page, baton, adminKey);
  return page;
}

/** What has keyboard focus: its tag, its `data-focus` and its row's provider id. */
const focused = (page) => page.evaluate(() => {
  const a = document.activeElement;
  return { tag: a.tagName, focus: a.dataset.focus || a.id || "", row: a.closest("li[data-id]")?.dataset.id || null, text: a.textContent.trim() };
});

async function addProvider(page, { id, limits = {} }) {
  await page.click("#add-provider");
  await page.waitForSelector("#provider-dialog[open]");
  await page.fill("#f-id", id);
  await page.fill("#f-baseUrl", up);
  await page.fill("#f-models", `${id}-model`);
  await page.locator("#provider-dialog summary", { hasText: "Limits and timeouts" }).click();
  for (const [k, v] of Object.entries(limits)) await page.fill(`#f-limits\\.${k}`, String(v));
}

test("limits are set in the form, refused in plain words, and counted on the card", async () => {
  const page = await open(1000);
  await addProvider(page, { id: "limited", limits: { rpm: "1.5" } });
  await page.click("#form-save");
  const err = page.locator("#e-limits\\.rpm");
  await err.waitFor({ state: "visible" });
  const words = await err.textContent();
  assert.match(words, /whole number/, words);
  assert.doesNotMatch(words, /u32|line 1 column/, words);
  await page.fill("#f-limits\\.rpm", "30");
  await page.fill("#f-limits\\.rpd", "1000");
  await page.click("#form-save");
  await page.waitForSelector("#provider-dialog:not([open])", { state: "attached" });
  const s = await (await fetch(`${baton}/admin/providers`, { headers: admin() })).json();
  assert.deepEqual(s.providers.find((p) => p.id === "limited").config.limits, { rpm: 30, rpd: 1000 });
  // Counted by Baton: the card shows its windows, in one direction (used), and no second bar.
  const card = page.locator('#provider-list > li[data-id="limited"]');
  await card.locator("[data-window]").first().waitFor();
  const windows = await card.locator("[data-window] .window-name").allTextContents();
  assert.deepEqual(windows.sort(), ["1 min requests", "requests per day"]);
  assert.equal(await card.locator("[data-testid=used]").count(), 0);
  await page.close();
});

test("the Test result is scrolled into view above the sticky buttons at 420 px", async () => {
  const page = await open(420);
  await addProvider(page, { id: "tested" });
  await page.click("#form-test");
  const result = page.locator("#test-result.ok");
  await result.waitFor();
  const [box, bar] = await page.evaluate(() => [
    document.getElementById("test-result").getBoundingClientRect().toJSON(),
    document.querySelector("#provider-dialog .dialog-actions").getBoundingClientRect().toJSON(),
  ]);
  assert.ok(box.bottom <= bar.top + 1 && box.top >= 0, `the result (${JSON.stringify(box)}) is under the buttons (${JSON.stringify(bar)})`);
  await page.screenshot({ path: join(artifacts, "polish-test-result-420.png") });
  await page.click("#form-save");
  await page.waitForSelector("#provider-dialog:not([open])", { state: "attached" });
  await page.close();
});

test("focus stays on a sensible control after Delete, Clear cooldown and Hide", async () => {
  const page = await open(1000);
  // Hide the "Next: point your tools" card by keyboard: focus moves on, not to the body.
  const hide = page.locator("#next-connect button");
  await hide.focus();
  await page.keyboard.press("Enter");
  await page.waitForSelector("#next-connect", { state: "hidden" });
  await page.waitForFunction(() => document.activeElement !== document.body);
  const afterHide = await focused(page);
  assert.ok(afterHide.row || afterHide.focus === "add-provider", JSON.stringify(afterHide));

  // Clear cooldown by keyboard: the button goes, focus goes to the same row's Test.
  const r = await fetch(`${baton}/admin/cooldowns`, { method: "POST", headers: admin(), body: JSON.stringify({ provider: "limited", untilMs: Date.now() + 3_600_000, class: "rate", reason: "429 from the test" }) });
  assert.equal(r.status, 201, await r.text());
  const clear = page.locator('#provider-list > li[data-id="limited"] [data-focus=clear]');
  await clear.waitFor();
  // A countdown is a duration, not a clock time.
  const badge = await page.locator('#provider-list > li[data-id="limited"] [data-testid=status]').textContent();
  assert.match(badge, /^cooling · (59 min|1 h 00 min)$/, badge);
  await clear.focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => !document.querySelector('#provider-list > li[data-id="limited"] [data-focus=clear]'));
  assert.deepEqual(await focused(page).then((f) => [f.row, f.focus]), ["limited", "test"]);

  // Delete: the row that took its place gets the focus (its Edit), else Add provider.
  const ids = await page.$$eval("#provider-list > li", (ls) => ls.map((l) => l.dataset.id));
  const victim = ids.indexOf("limited");
  await page.locator('#provider-list > li[data-id="limited"] [data-focus=edit]').click();
  await page.waitForSelector("#provider-dialog[open]");
  await page.click("#form-delete");
  await page.click("#form-delete");
  await page.waitForFunction(() => !document.querySelector('#provider-list > li[data-id="limited"]'));
  const after = ids.filter((x) => x !== "limited");
  const want = after[Math.min(victim, after.length - 1)];
  await page.waitForFunction((w) => document.activeElement.closest("li[data-id]")?.dataset.id === w, want);
  const f = await focused(page);
  assert.equal(f.row, want);
  assert.ok(["edit", "test"].includes(f.focus), JSON.stringify(f));
  await page.close();
});

test("Japanese and Chinese: windows, countdowns and preset names in the user's language", async () => {
  await addLimited("kyoto");
  const until = Date.now() + 14 * 60_000;
  const r = await fetch(`${baton}/admin/cooldowns`, { method: "POST", headers: admin(), body: JSON.stringify({ provider: "kyoto", untilMs: until, class: "rate", reason: "429" }) });
  assert.equal(r.status, 201);
  for (const [locale, windowWords, minutes, preset] of [
    ["ja-JP", ["1分あたりのリクエスト", "1日あたりのリクエスト"], /^クールダウン中 · 1[34]分$/, "Claude(お使いの Pro/Max プラン)"],
    ["zh-CN", ["每1分钟请求", "每日请求"], /^冷却中 · 1[34]分钟$/, "Claude(你的 Pro/Max 套餐)"],
  ]) {
    const page = await open(420, locale);
    const card = page.locator('#provider-list > li[data-id="kyoto"]');
    await card.locator("[data-window]").first().waitFor();
    assert.deepEqual((await card.locator("[data-window] .window-name").allTextContents()).sort(), windowWords.sort());
    const badge = (await card.locator("[data-testid=status]").textContent()).trim();
    assert.match(badge, minutes, badge);
    await card.screenshot({ path: join(artifacts, `polish-${locale}-card-420.png`) });
    await page.click("#add-provider");
    await page.waitForSelector("#provider-dialog[open]");
    const options = await page.locator("#f-preset option").allTextContents();
    assert.ok(options.includes(preset), options.join(" | "));
    await page.keyboard.press("Escape");
    await page.close();
  }
});

async function addLimited(id) {
  const r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin(), body: JSON.stringify({ id, kind: "openai-compatible", baseUrl: up, models: [`${id}-model`], limits: { rpm: 30, rpd: 1000 } }) });
  assert.equal(r.status, 201, await r.text());
}

test("web search is offered only through providers Baton can call, and a dead SearXNG is said at once", async () => {
  const page = await open(1000);
  await page.goto(`${baton}/ui/#settings`);
  await page.waitForSelector("#web-search-form");
  await page.selectOption("#ws-backend", "provider");
  const offered = await page.locator("#ws-provider option").allTextContents();
  assert.ok(!offered.some((o) => o.startsWith("Claude Max")), `a login-only provider is offered: ${offered}`);

  const dead = await new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(`http://127.0.0.1:${port}`));
    });
  });
  await page.selectOption("#ws-backend", "searxng");
  await page.fill("#ws-url", dead);
  await page.click("#web-search-form button[type=submit]");
  const warning = page.locator("[data-testid=ws-warning]");
  await warning.waitFor();
  assert.match(await warning.textContent(), /could not reach/);
  await page.close();
});

test("Connect's by-hand status line is this setup's command (its address and data directory)", async () => {
  const page = await open(1000);
  await page.click("nav a[data-tab=connect]");
  const snippet = page.locator("#claude-code pre", { hasText: "statusLine" });
  await snippet.waitFor();
  const text = await snippet.textContent();
  assert.ok(text.includes(`statusline --url ${baton}`), text);
  assert.ok(text.includes("--data-dir"), text);
  await page.close();
});

test("Settings → Tracing turns traces on by keyboard at 420 px, keeps the header value secret, says a dead collector, in Japanese too", async () => {
  const dead = await new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(`http://127.0.0.1:${port}/v1/traces`));
    });
  });
  const page = await open(420);
  await page.goto(`${baton}/ui/#settings`);
  // The card is filled in from the gateway first (its status line is the last thing drawn).
  await page.waitForSelector("#tel-status p");
  await page.waitForSelector("#cap-status p");
  await page.focus("#tel-enabled");
  await page.keyboard.press("Space");
  await page.keyboard.press("Tab");
  await page.keyboard.type(dead);
  await page.fill("#tel-header", "x-collector-token");
  await page.fill("#tel-value", "secret-token-value-123");
  await page.focus("#telemetry-form button[type=submit]");
  await page.keyboard.press("Enter");
  const warning = page.locator("[data-testid=tel-warning]");
  await warning.waitFor();
  assert.match(await warning.textContent(), /did not take a test export/);
  assert.equal(await page.inputValue("#tel-value"), "", "the typed value is not kept on screen");
  const saved = await (await fetch(`${baton}/admin/telemetry`, { headers: admin() })).json();
  assert.equal(saved.enabled, true);
  assert.equal(saved.headers[0].stored, true);
  assert.ok(!JSON.stringify(saved).includes("secret-token-value-123"));
  // Nothing wider than the window.
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than 420 px`);
  await page.locator("#telemetry").screenshot({ path: join(artifacts, "settings-tracing-420.png") });
  await page.close();

  const ja = await open(420, "ja-JP");
  await ja.goto(`${baton}/ui/#settings`);
  await ja.waitForSelector("#telemetry-form");
  const heading = await ja.locator("#telemetry h2").textContent();
  assert.equal(heading.trim(), "トレース");
  await ja.locator("#telemetry").screenshot({ path: join(artifacts, "settings-tracing-ja.png") });
  await ja.close();
  // Off again, for the tests after this one.
  await fetch(`${baton}/admin/telemetry`, { method: "PUT", headers: admin(), body: JSON.stringify({ enabled: false, headers: [] }) });
});

test("a provider's requests are captured from Settings by keyboard and downloaded from their Activity row", async () => {
  const r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin(), body: JSON.stringify({ id: "capme", kind: "openai-compatible", baseUrl: up, models: ["capme-model"] }) });
  assert.equal(r.status, 201, await r.text());
  const page = await open(420);
  await page.goto(`${baton}/ui/#settings`);
  await page.waitForSelector("#capture-form option[value='p:capme']", { state: "attached" });
  await page.selectOption("#cap-target", "p:capme");
  await page.selectOption("#cap-minutes", "15");
  await page.focus("#capture-form button[type=submit]");
  await page.keyboard.press("Enter");
  await page.locator("[data-testid=cap-rule]", { hasText: "capme" }).waitFor();
  // A request to it, made by a client.
  const sent = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "capme/capme-model", messages: [{ role: "user", content: "capture me" }] }),
  });
  assert.equal(sent.status, 200, await sent.text());
  const id = sent.headers.get("x-request-id");
  let listed = false;
  for (let i = 0; i < 50 && !listed; i++) {
    const caps = await (await fetch(`${baton}/admin/captures`, { headers: admin() })).json();
    listed = caps.captures.some((c) => c.id === id);
    if (!listed) await new Promise((res) => setTimeout(res, 100));
  }
  assert.ok(listed, "the capture was kept");
  await page.click("nav a[data-tab=activity]");
  const button = page.locator("#log-rows [data-testid=capture]").first();
  await button.waitFor();
  const [download] = await Promise.all([page.waitForEvent("download"), button.click()]);
  assert.equal(download.suggestedFilename(), `baton-capture-${id}.json`);
  const text = readFileSync(await download.path(), "utf8");
  const capture = JSON.parse(text);
  assert.equal(capture.id, id);
  assert.ok(!text.includes(gatewayKey), "the gateway key is not in the capture");
  await page.goto(`${baton}/ui/#settings`);
  await page.locator("[data-testid=cap-stop]").click();
  await page.locator("#cap-status", { hasText: "Nothing is being captured." }).waitFor();
  await page.close();
});
