// End-to-end tests of the web UI in a real headless Chromium (Debian's, driven by
// playwright-core), against the real `baton serve` and two fake upstreams (real HTTP servers).
// Every change made in the browser is checked with a real chat request.
//
// Needs: BATON_BIN, FAKE_UPSTREAM_BIN, FAKE_CLI_BIN (built binaries), PLAYWRIGHT_CORE (module path),
// CHROMIUM (default /usr/bin/chromium). Screenshots go to tests/ui/artifacts/.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { launch } from "../support/browser.mjs";
import { procs, start } from "../support/procs.mjs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, "artifacts");
mkdirSync(artifacts, { recursive: true });

let browser, page, baton, upA, upB, upC, dataDir, gatewayKey, adminKey, home;
const errors = [];

async function chat() {
  const r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "auto", messages: [{ role: "user", content: "hi" }] }),
  });
  await r.text();
  return { status: r.status, provider: r.headers.get("x-gateway-provider") };
}

async function script(upstream, modes) {
  const r = await fetch(`${upstream.replace(/\/v1$/, "")}/_script`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(modes) });
  assert.equal(r.status, 204);
}

const rowIds = () => page.$$eval("#provider-list > li", (ls) => ls.map((l) => l.dataset.id));
const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });

before(async () => {
  const up = process.env.FAKE_UPSTREAM_BIN;
  upA = (await start(up, ["--name", "alpha", "--mode", "ok"])) + "/v1";
  upB = (await start(up, ["--name", "beta", "--mode", "ok"])) + "/v1";
  upC = (await start(up, ["--name", "gamma", "--mode", "ok"])) + "/v1";
  dataDir = mkdtempSync(join(tmpdir(), "baton-ui-"));
  const config = join(dataDir, "config.json");
  const fs = await import("node:fs");
  fs.writeFileSync(config, JSON.stringify({
    server: { port: 0 },
    providers: [
      { id: "alpha", name: "Alpha", kind: "openai-compatible", baseUrl: upA, models: ["alpha-model"], priority: 10 },
      { id: "beta", name: "Beta", kind: "openai-compatible", baseUrl: upB, models: ["beta-model"], priority: 20 },
    ],
  }));
  // A home of its own: Connect's one-click set-up writes the clients' files there, never into
  // the real user's.
  home = join(dataDir, "home");
  mkdirSync(home);
  baton = await start(process.env.BATON_BIN, ["serve", "--config", config, "--data-dir", join(dataDir, "data"), "--port", "0"],
    { HOME: home, CLAUDE_CONFIG_DIR: "", CODEX_HOME: "", XDG_CONFIG_HOME: "" });
  gatewayKey = readFileSync(join(dataDir, "data", "gateway.key"), "utf8").trim();
  adminKey = readFileSync(join(dataDir, "data", "admin.key"), "utf8").trim();
  browser = await launch(["--disable-quic"]);
  // One browser context: its tabs share storage, as a user's browser does.
  page = await (await browser.newContext({ viewport: { width: 1000, height: 760 } })).newPage();
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error" && !/status of (401|422|428)/.test(m.text())) errors.push(m.text());
  });
});

after(async () => {
  if (browser) await browser.close();
  for (const p of procs) p.kill("SIGTERM");
});

test("the admin key is asked for once, then the providers show", async () => {
  await page.goto(`${baton}/ui/`);
  await page.waitForSelector("#login:not([hidden])");
  // It names this Baton's own key file (its data directory is not the default one here), and
  // offers no links to sections it cannot show yet.
  await page.waitForFunction((f) => document.getElementById("admin-key-file").textContent === f, join(dataDir, "data", "admin.key"));
  assert.equal(await page.isHidden("header nav"), true);
  await shot("login");
  await page.fill("#admin-key", "wrong-key");
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#login-error:text('not accepted')");
  await page.fill("#admin-key", adminKey);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#provider-list > li");
  assert.deepEqual(await rowIds(), ["alpha", "beta"]);
  await page.waitForSelector("#live.on");
  assert.equal((await chat()).provider, "alpha");
  // The key is this tab's alone: a reload keeps it, a second tab asks for it, and nothing of
  // it is left where it would outlive the browser.
  await page.reload();
  await page.waitForSelector("#provider-list > li");
  const tab = await page.context().newPage();
  await tab.goto(`${baton}/ui/#activity`);
  await tab.waitForSelector("#login:not([hidden])");
  assert.equal(await tab.evaluate(() => localStorage.length), 0, "nothing in local storage");
  assert.equal(await page.evaluate(() => Object.values(localStorage).some((v) => v.includes("-"))), false);
  await tab.close();
});

test("a provider is added through the form: a wrong URL is refused next to the field", async () => {
  await page.click("#add-provider");
  await page.waitForSelector("#provider-dialog[open]");
  await page.selectOption("#f-kind", "openai-compatible");
  // An empty form: every problem is shown beside its field at once, not one per Save.
  await page.click("#form-save");
  await page.waitForFunction(() => ["e-id", "e-baseUrl", "e-models"].every((id) => document.getElementById(id)?.textContent));
  assert.equal(await page.evaluate(() => document.activeElement.id), "f-id", "focus on the first");
  await shot("add-provider-all-errors");
  await page.fill("#f-id", "gamma");
  await page.fill("#f-name", "Gamma");
  await page.fill("#f-baseUrl", "gamma.example/v1");
  await page.fill("#f-models", "gamma-model");
  await page.fill("#f-newKeys", "sk-gamma-typed-key-0001");
  await page.click("#form-save");
  const err = await page.waitForSelector("#e-baseUrl:text('https://')");
  assert.match(await err.textContent(), /must start with https:\/\//);
  assert.equal(await page.getAttribute("#f-baseUrl", "aria-invalid"), "true");
  await shot("add-provider-error");
  await page.fill("#f-baseUrl", upC);
  // A process variable is not a key: refused next to the variable field, nothing saved.
  await page.fill("#f-envKey", "PATH");
  await page.click("#form-save");
  const envErr = await page.waitForSelector("#e-envKey:text('API-key variable')");
  assert.match(await envErr.textContent(), /`PATH` does not look like an API-key variable/);
  assert.equal(await page.getAttribute("#f-envKey", "aria-invalid"), "true");
  await shot("add-provider-env-error");
  await page.fill("#f-envKey", "");
  await page.click("#form-test");
  await page.waitForSelector("#test-result.ok");
  await page.click("#form-save");
  await page.waitForSelector("#provider-dialog", { state: "hidden" });
  await page.waitForSelector("#provider-list > li[data-id=gamma]");
  assert.deepEqual(await rowIds(), ["alpha", "beta", "gamma"]);
  const html = await page.content();
  assert.ok(!html.includes("sk-gamma-typed-key-0001"), "the typed key is never shown again");
});

test("Test on an unreachable provider says Baton could not connect, not that the provider said so", async () => {
  await page.click("#add-provider");
  await page.waitForSelector("#provider-dialog[open]");
  await page.selectOption("#f-kind", "openai-compatible");
  await page.fill("#f-id", "nowhere");
  await page.fill("#f-baseUrl", "http://127.0.0.1:9/v1");
  await page.fill("#f-models", "m");
  await page.fill("#f-newKeys", "sk-nowhere-typed-key-0001");
  await page.click("#form-test");
  const box = await page.waitForSelector("#test-result.bad");
  const text = await box.textContent();
  assert.match(text, /Baton could not connect: /, text);
  assert.ok(!text.includes("The provider said"), text);
  await page.keyboard.press("Escape");
  await page.waitForSelector("#provider-dialog[open]", { state: "detached" });
});

test("toggling a provider off makes auto skip it on the next request", async () => {
  await page.click("#provider-list > li[data-id=alpha] .switch input");
  await page.waitForSelector("#provider-list > li[data-id=alpha] [data-testid=status]:text('disabled')");
  assert.equal((await chat()).provider, "beta");
  await page.click("#provider-list > li[data-id=alpha] .switch input");
  await page.waitForSelector("#provider-list > li[data-id=alpha] [data-testid=status]:text('ready')");
  assert.equal((await chat()).provider, "alpha");
});

test("dragging a provider to the top makes it serve the next request", async () => {
  await page.dragAndDrop("#provider-list > li[data-id=gamma] .grip", "#provider-list > li[data-id=alpha]", { targetPosition: { x: 40, y: 6 } });
  await page.waitForFunction(() => document.querySelector("#provider-list > li")?.dataset.id === "gamma");
  assert.deepEqual(await rowIds(), ["gamma", "alpha", "beta"]);
  assert.equal((await chat()).provider, "gamma");
});

test("the keyboard moves work too and keep focus on the moved row", async () => {
  await page.focus("#provider-list > li[data-id=gamma] [aria-label='Move Gamma down']");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector("#provider-list > li")?.dataset.id === "alpha");
  assert.deepEqual(await rowIds(), ["alpha", "gamma", "beta"]);
  const focused = await page.evaluate(() => document.activeElement?.closest("li")?.dataset.id);
  assert.equal(focused, "gamma");
  assert.equal((await chat()).provider, "alpha");
});

test("keyboard focus survives the live re-render: Space on a switch works twice in a row", async () => {
  const toggle = "#provider-list > li[data-id=beta] [data-focus=toggle]";
  await page.focus(toggle);
  await page.keyboard.press("Space");
  await page.waitForSelector("#provider-list > li[data-id=beta] [data-testid=status]:text('disabled')");
  // A request elsewhere makes the gateway send an event, and the list is rebuilt.
  await page.evaluate(() => (window.__oldRow = document.querySelector("#provider-list > li[data-id=beta]")));
  await chat();
  await page.waitForFunction(() => document.querySelector("#provider-list > li[data-id=beta]") !== window.__oldRow);
  const focused = await page.evaluate(() => `${document.activeElement?.closest("li")?.dataset.id}/${document.activeElement?.dataset.focus}`);
  assert.equal(focused, "beta/toggle");
  await page.keyboard.press("Space");
  await page.waitForSelector("#provider-list > li[data-id=beta] [data-testid=status]:text('ready')");
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.focus), "toggle");
});

test("a 429 shows a cooling countdown live, without a reload", async () => {
  await script(upA, ["429"]);
  assert.equal((await chat()).provider, "gamma");
  const badge = await page.waitForSelector("#provider-list > li[data-id=alpha] [data-testid=status]:text('cooling')");
  const first = await badge.textContent();
  // A countdown reads as a duration ("30 s"), never like a clock time ("0:30").
  assert.match(first, /cooling · (2\d|30) s$/);
  await page.waitForTimeout(2100);
  const later = await badge.textContent();
  assert.notEqual(later, first, "the countdown ticks");
  // A 30-second limit is not news: no toast (the desktop does not notify it either).
  assert.ok(await page.isHidden("#toast") || !(await page.textContent("#toast")).includes("Now using"), await page.textContent("#toast"));
  await shot("providers-cooling");
  // The detail says it in words, with Baton's clock format, and quotes the provider.
  // (A date comes first only when the 30 s cooldown ends after midnight.)
  assert.match(await page.textContent("#provider-list > li[data-id=alpha] [data-testid=detail]"), /^Rate limit — back at (\w{3} \d{1,2} )?\d{1,2}:\d\d(\s[AP]M)?\. The provider said: “/);
  // Test on a cooling provider asks first (it is a real request), then adopts what it finds.
  const test = "#provider-list > li[data-id=alpha] [data-focus=test]";
  await page.click(test);
  await page.waitForSelector("#provider-list > li[data-id=alpha] .test-result:text('press Test again')");
  await script(upA, ["429"]);
  await page.click(test);
  await page.waitForSelector("#provider-list > li[data-id=alpha] .test-result:has-text('Its row shows this now')");
  assert.match(await page.textContent("#provider-list > li[data-id=alpha] .test-result"), /Rate limit — back at (\w{3} \d{1,2} )?\d{1,2}:\d\d(\s[AP]M)?/);
  // A ten-minute limit is: toasted, in this browser's clock and the locale's own format.
  await script(upC, ["429:600"]);
  const served = (await chat()).provider;
  assert.notEqual(served, "gamma");
  const toast = await page.waitForSelector("#toast:has-text('Gamma: Rate limit — back at')");
  const text = await toast.textContent();
  assert.match(text, /^Gamma: Rate limit — back at (\w{3} \d{1,2} )?\d{1,2}:\d\d(\s[AP]M)?\. Now using \w+\.$/);
  const r = await fetch(`${baton}/admin/cooldowns?provider=gamma`, { method: "DELETE", headers: { "x-admin-key": adminKey } });
  assert.equal(r.status, 200);
});

test("after a reload everything is still there", async () => {
  await page.reload();
  await page.waitForSelector("#provider-list > li");
  assert.deepEqual(await rowIds(), ["alpha", "gamma", "beta"]);
  await page.waitForSelector("#provider-list > li[data-id=alpha] [data-testid=status]:text('cooling')");
  await page.waitForSelector("#provider-list > li[data-id=gamma] [data-testid=status]:text('ready')");
});

test("activity shows the route each request took", async () => {
  await page.click("nav a[data-tab=activity]");
  await page.waitForSelector("#log-rows tr .hop.fail");
  const chainText = await page.textContent("#log-rows");
  assert.match(chainText, /alpha\/alpha-model ✗ rate/);
  assert.match(chainText, /gamma\/gamma-model ✓/);
  await page.selectOption("#log-since", "3600000");
  await page.waitForSelector("#log-rows tr .hop.fail");
  await page.selectOption("#log-outcome", "error");
  await page.waitForSelector("#log-rows td:text('No requests yet.')");
  await page.selectOption("#log-outcome", "");
  await shot("activity");
  await page.click("nav a[data-tab=connect]");
  await page.waitForSelector("#connect-body pre");
  await shot("connect");
});

test("team: a client key made with limits is enforced, edited, disabled and revoked at once", async () => {
  await page.click("nav a[data-tab=team]");
  await page.waitForSelector("#key-list .key-item");
  await page.fill("#key-label", "ci-bot");
  await page.click("#new-limits-box summary");
  // A wrong number is refused next to its field.
  await page.fill("#nk-dayUsd", "-5");
  await page.click("#key-form button[type=submit]");
  await page.waitForSelector("#nk-e-dayUsd:text('positive number')");
  await page.fill("#nk-dayUsd", "");
  await page.fill("#nk-rpm", "1");
  await page.selectOption("#nk-maxTier", "low");
  await page.click("#key-form button[type=submit]");
  const code = await page.waitForSelector("#new-key pre code");
  const key = (await code.textContent()).trim();
  assert.match(key, /^bt-/);
  const use = async () => {
    const r = await fetch(`${baton}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "auto", messages: [{ role: "user", content: "hi" }] }),
    });
    return { status: r.status, body: await r.json() };
  };
  assert.equal((await use()).status, 200);
  const limited = await use();
  assert.equal(limited.status, 429, "one request a minute");
  assert.equal(limited.body.error.code, "client_rate_limited");
  const item = "#key-list [data-key-id]";
  await page.click("nav a[data-tab=providers]");
  await page.click("nav a[data-tab=team]");
  await page.waitForSelector(`${item} [data-role=usage]:text('today 18 tokens')`);
  assert.match(await page.textContent(`${item} [data-role=limits]`), /1 req\/min · tier ≤ low/);
  // Named in usage as in the key list ("ci-bot", not the logs' "ui:ci-bot").
  await page.waitForSelector("#usage-rows td:text-is('ci-bot')");
  await shot("team");
  // Edit the limits in the dialog: lift the rate limit.
  await page.click(`${item} button[data-action=edit]`);
  await page.fill("#ek-rpm", "");
  await page.fill("#ek-dayTokens", "100000");
  await page.screenshot({ path: join(artifacts, "team-limits.png") });
  await page.click("#key-dialog button[type=submit]");
  await page.waitForSelector(`${item} [data-role=limits]:text('100,000 tok/day')`);
  assert.doesNotMatch(await page.textContent(`${item} [data-role=limits]`), /req\/min/);
  assert.equal((await use()).status, 200, "no rate limit any more");
  // Disable, then revoke.
  await page.click(`${item} button[data-action=toggle]`);
  await page.waitForSelector(`${item} .badge:text('disabled')`);
  assert.equal((await use()).status, 403);
  await page.click(`${item} button[data-action=revoke]`);
  assert.match(await page.textContent(`${item} button[data-action=revoke]`), /for good/);
  await page.click(`${item} button[data-action=revoke]`);
  await page.waitForFunction(() => !document.querySelector("#key-list [data-key-id]"));
  assert.equal((await use()).status, 401);
});

test("settings: routing facts and notification preferences", async () => {
  await page.click("nav a[data-tab=settings]");
  await page.waitForSelector("#routes-info p");
  assert.match(await page.textContent("#routes-info"), /auto → Alpha → Gamma → Beta/);
  await shot("settings");
  // Notification preferences persist.
  await page.click("#notify-list input[data-key=cooldownEnded]");
  await page.waitForSelector("#toast:text('Saved')");
  const r = await fetch(`${baton}/admin/settings`, { headers: { "x-admin-key": adminKey } });
  assert.equal((await r.json()).notifications.cooldownEnded, false, "was on by default, now off");
  // The address, without a config file: checked, kept for the next start.
  await page.fill("#listen-port", "70000");
  await page.click("#listen-form button[type=submit]");
  await page.waitForSelector("#e-listen-port:text('1 to 65535')");
  assert.equal(await page.evaluate(() => document.activeElement.id), "listen-port");
  await page.fill("#listen-port", "8799");
  await page.click("#listen-form button[type=submit]");
  await page.waitForSelector("#listen-result:text('127.0.0.1:8799 from its next start')");
  assert.match(await page.textContent("#listen-result"), /Restart baton serve/, "headless: no Restart now button");
  const after = await (await fetch(`${baton}/admin/settings`, { headers: { "x-admin-key": adminKey } })).json();
  assert.deepEqual(after.server.next, { host: "127.0.0.1", port: 8799 });
});

test("Connect: Claude Code is set up by clicking only, and its snippet is complete", async () => {
  await page.click("nav a[data-tab=connect]");
  await page.waitForSelector("#claude-code #cc-map");
  // Before: Claude Code's own model names are unknown here.
  const ask = (model) => fetch(`${baton}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": gatewayKey, "anthropic-version": "2023-06-01", "content-type": "application/json" },
    body: JSON.stringify({ model, max_tokens: 50, messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal((await ask("claude-sonnet-4-5-20250929")).status, 404);
  // The snippet reads the key from this Baton's own key file: nothing undefined to fill in.
  const keyFile = join(dataDir, "data", "gateway.key");
  assert.equal(await page.textContent("[data-testid=key-file]"), keyFile);
  const text = await page.textContent("#claude-code pre");
  assert.ok(text.includes(`ANTHROPIC_AUTH_TOKEN="$(cat '${keyFile}')"`), text);
  assert.ok(!(await page.textContent("#connect-body")).includes("$BATON_KEY"));
  // The optional status line is this setup's command: this binary, its address, its data directory.
  const statusLine = (await page.textContent("#claude-code")).match(/"statusLine": \{ "type": "command", "command": "([^"]+)" \}/);
  assert.ok(statusLine, await page.textContent("#claude-code"));
  assert.ok(statusLine[1].endsWith(`baton statusline --url ${baton} --data-dir ${join(dataDir, "data")}`), statusLine[1]);
  await page.selectOption("#cc-target", "beta");
  await page.focus("#cc-map");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#cc-mapped:text('go to beta')");
  await shot("connect-claude-code");
  for (const model of ["claude-sonnet-4-5-20250929", "claude-opus-4-1[1m]"]) {
    const r = await ask(model);
    assert.equal(r.status, 200, model);
    assert.equal(r.headers.get("x-gateway-provider"), "beta");
  }
});

test("Connect: Codex gets its names mapped and a config.toml provider that speaks the Responses API", async () => {
  await page.click("nav a[data-tab=connect]");
  await page.waitForSelector("#codex #cx-map");
  const ask = (model) => fetch(`${baton}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model, input: "hi" }),
  });
  assert.equal((await ask("gpt-5.5")).status, 404);
  const [toml, terminal] = await page.$$eval("#codex pre", (p) => p.map((x) => x.textContent));
  assert.ok(toml.includes(`base_url = "${baton}/v1"`), toml);
  assert.ok(toml.includes('wire_api = "responses"') && toml.includes('env_key = "BATON_KEY"'), toml);
  const keyFile = join(dataDir, "data", "gateway.key");
  assert.ok(terminal.includes(`export BATON_KEY="$(cat '${keyFile}')"`), terminal);
  await page.selectOption("#cx-target", "beta");
  await page.focus("#cx-map");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#cx-mapped:text('go to beta')");
  await shot("connect-codex");
  const r = await ask("gpt-5.5");
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("x-gateway-provider"), "beta");
  assert.equal((await r.json()).object, "response");
});

test("Connect: one click writes Claude Code's settings after showing the change, and Undo puts back the same bytes (keyboard only)", async () => {
  const fs = await import("node:fs");
  const settings = join(home, ".claude", "settings.json");
  mkdirSync(join(home, ".claude"), { recursive: true });
  const original = '{\n  // mine\n  "includeCoAuthoredBy": false\n}\n';
  fs.writeFileSync(settings, original);
  await page.click("nav a[data-tab=connect]");
  await page.waitForSelector("#auto-claude-code-go");
  assert.match(await page.textContent("#auto-claude-code"), new RegExp(`writes ${settings.replace(/\./g, "\\.")} for you`));
  await page.focus("#auto-claude-code-statusline");
  await page.keyboard.press("Space");
  await page.focus("#auto-claude-code-go");
  await page.keyboard.press("Enter");
  // The change is shown, the key is not, and focus is on the button that writes it.
  await page.waitForSelector("#auto-claude-code-preview .diff");
  const diff = await page.textContent("#auto-claude-code-preview .diff");
  assert.ok(diff.includes(`+    "ANTHROPIC_BASE_URL": "${baton}"`), diff);
  assert.ok(diff.includes("statusline"), diff);
  assert.ok(!diff.includes(gatewayKey) && !(await page.content()).includes(gatewayKey), "the key never reaches the page");
  assert.equal(fs.readFileSync(settings, "utf8"), original, "a preview writes nothing");
  assert.equal(await page.evaluate(() => document.activeElement.id), "auto-claude-code-write");
  await shot("connect-one-click-preview");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#auto-claude-code-done");
  const written = fs.readFileSync(settings, "utf8");
  assert.ok(written.startsWith('{\n  // mine\n  "includeCoAuthoredBy": false,\n'), written);
  const env = JSON.parse(written.replace("// mine", "")).env;
  assert.equal(env.ANTHROPIC_BASE_URL, baton);
  // What Claude Code will send with these settings is served.
  const r = await fetch(`${env.ANTHROPIC_BASE_URL}/v1/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${env.ANTHROPIC_AUTH_TOKEN}`, "anthropic-version": "2023-06-01", "content-type": "application/json" },
    body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 20, messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(r.status, 200, await r.text());
  assert.equal(await page.evaluate(() => document.activeElement.id), "auto-claude-code-undo");
  await page.setViewportSize({ width: 420, height: 760 });
  await shot("connect-one-click-done-420");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#auto-claude-code-preview .diff");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => !document.getElementById("auto-claude-code-done"));
  assert.equal(fs.readFileSync(settings, "utf8"), original, "byte for byte");
  await page.setViewportSize({ width: 1000, height: 760 });
});

test("Connect: a settings file that does not parse is named and left alone", async () => {
  const fs = await import("node:fs");
  const config = join(home, ".codex", "config.toml");
  mkdirSync(join(home, ".codex"), { recursive: true });
  fs.writeFileSync(config, "[model_providers\n");
  await page.click("nav a[data-tab=connect]");
  await page.click("#auto-codex-go");
  const toast = await page.waitForSelector(".toast:has-text('not valid TOML')");
  assert.match(await toast.textContent(), /config\.toml/);
  assert.equal(fs.readFileSync(config, "utf8"), "[model_providers\n");
  fs.rmSync(join(home, ".codex"), { recursive: true });
});

test("Activity says why a candidate was passed over (a model without tools, for Claude Code)", async () => {
  const admin = { "x-admin-key": adminKey, "content-type": "application/json" };
  let r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin, body: JSON.stringify({ id: "notools", kind: "openai-compatible", baseUrl: upC, models: [{ id: "plain", tools: false }], priority: 1 }) });
  assert.equal(r.status, 201, await r.text());
  r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "auto", messages: [{ role: "user", content: "hi" }], tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }] }),
  });
  assert.equal(r.status, 200);
  assert.notEqual(r.headers.get("x-gateway-provider"), "notools");
  await page.click("nav a[data-tab=activity]");
  const hop = await page.waitForSelector("#log-rows tr:first-child .hop.skip:text('notools: takes no tools')");
  // The log's whole reason is the provider name's tooltip.
  assert.match(await (await hop.$("[title]")).getAttribute("title"), /does not take tool calls/);
  r = await fetch(`${baton}/admin/providers/notools`, { method: "DELETE", headers: admin });
  assert.equal(r.status, 204);
});

test("prompt-cache reads show in Activity and as the provider's cached share", async () => {
  const admin = { "x-admin-key": adminKey, "content-type": "application/json" };
  const cachey = (await start(process.env.FAKE_UPSTREAM_BIN, ["--name", "cachey", "--mode", "ok", "--cache-usage"])) + "/v1";
  let r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin, body: JSON.stringify({ id: "cachey", kind: "openai-compatible", baseUrl: cachey, models: ["cachey-model"], priority: 99 }) });
  assert.equal(r.status, 201, await r.text());
  r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "cachey/cachey-model", messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(r.status, 200);
  await page.click("nav a[data-tab=activity]");
  const cell = await page.waitForSelector("#log-rows tr:first-child [data-testid=cached]");
  assert.equal((await cell.textContent()).trim(), "· 80 cached");
  assert.match(await page.getAttribute("#log-rows tr:first-child td:last-child span", "title"), /80 read from the provider's cache/);
  await page.click("nav a[data-tab=providers]");
  const stats = await page.waitForSelector("#provider-list > li[data-id=cachey] [data-testid=stats]:text('80 % cached')");
  assert.match(await stats.textContent(), /last hour: 1 call · .* 107 tokens · 80 % cached/, "one call, in the singular");
  await shot("cache-share");
  r = await fetch(`${baton}/admin/providers/cachey`, { method: "DELETE", headers: admin });
  assert.equal(r.status, 204);
});

test("Activity says how a JSON answer turned out, and the card how fast its provider answered", async () => {
  const admin = { "x-admin-key": adminKey, "content-type": "application/json" };
  const fenced = (await start(process.env.FAKE_UPSTREAM_BIN, ["--name", "fenced", "--mode", "text:```json\n{\"total\": 3}\n```"])) + "/v1";
  let r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin, body: JSON.stringify({ id: "fenced", kind: "openai-compatible", baseUrl: fenced, models: ["fenced-model"], priority: 97 }) });
  assert.equal(r.status, 201, await r.text());
  r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "fenced/fenced-model", messages: [{ role: "user", content: "total?" }], response_format: { type: "json_object" } }),
  });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("x-baton-output"), "repaired");
  assert.equal((await r.json()).choices[0].message.content, '{"total": 3}');
  await page.click("nav a[data-tab=activity]");
  const badge = await page.waitForSelector("#log-rows tr:first-child [data-testid=output]");
  assert.equal((await badge.textContent()).trim(), "JSON repaired");
  await shot("json-repaired");
  // Its card says how fast it answered (what a route ordered by speed goes by).
  await page.click("nav a[data-tab=providers]");
  const speed = await page.waitForSelector("#provider-list > li[data-id=fenced] [data-testid=speed]");
  assert.match(await speed.textContent(), /^\d+ ms to first token · [\d,]+ tokens\/s$/);
  assert.match(await speed.getAttribute("title"), /1 measured/);
  r = await fetch(`${baton}/admin/providers/fenced`, { method: "DELETE", headers: admin });
  assert.equal(r.status, 204);
});

test("a subscription's usage windows show as bars, in the tray window too; thresholds are set with the keyboard", async () => {
  const admin = { "x-admin-key": adminKey, "content-type": "application/json" };
  const plus = (await start(process.env.FAKE_UPSTREAM_BIN, ["--name", "plus", "--mode", "codex-used:72"])) + "/v1";
  let r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin, body: JSON.stringify({ id: "plus", name: "ChatGPT Plus", kind: "openai-compatible", baseUrl: plus, models: ["plus-model"], priority: 98 }) });
  assert.equal(r.status, 201, await r.text());
  r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "plus/plus-model", messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(r.status, 200);
  await page.click("nav a[data-tab=providers]");
  const windows = await page.waitForSelector("#provider-list > li[data-id=plus] [data-testid=windows]");
  const five = await windows.$("li[data-window='5h']");
  // The reset is a clock time, with its day when that is not today (late in the evening).
  assert.match(await five.textContent(), /^5 h72 % · resets ([A-Z][a-z]{2} \d{1,2},? )?\d{1,2}:\d\d(\s[AP]M)?binding$/);
  assert.equal(await five.$eval("[role=meter]", (m) => m.getAttribute("aria-valuenow")), "72");
  assert.ok(await five.evaluate((li) => li.classList.contains("binding")));
  assert.match(await windows.$eval("li[data-window='7d']", (li) => li.textContent), /^7 d31 % · resets /);
  await page.$eval("#provider-list > li[data-id=plus]", (li) => li.scrollIntoView());
  await page.screenshot({ path: join(artifacts, "usage-windows.png") });
  // A window at 97 %: a full red bar of the same size, not a tall empty box (the class once
  // collided with the empty-state style).
  const hot = (await start(process.env.FAKE_UPSTREAM_BIN, ["--name", "hot", "--mode", "codex-used:97"])) + "/v1";
  r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin, body: JSON.stringify({ id: "hot", name: "Hot", kind: "openai-compatible", baseUrl: hot, models: ["hot-model"], priority: 99 }) });
  assert.equal(r.status, 201, await r.text());
  r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "hot/hot-model", messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(r.status, 200);
  const hotBar = await page.waitForSelector("#provider-list > li[data-id=hot] li[data-window='5h'] [role=meter]");
  const okBar = await page.waitForSelector("#provider-list > li[data-id=plus] li[data-window='5h'] [role=meter]");
  assert.deepEqual(
    [(await hotBar.boundingBox()).height, (await hotBar.boundingBox()).width],
    [(await okBar.boundingBox()).height, (await okBar.boundingBox()).width], "the same bar");
  const [fill, bad] = await hotBar.evaluate((m) => {
    const probe = document.createElement("span");
    probe.style.color = "var(--bad)";
    document.body.append(probe);
    const c = getComputedStyle(probe).color;
    probe.remove();
    return [getComputedStyle(m.firstElementChild).backgroundColor, c];
  });
  assert.equal(fill, bad, "filled in the warning red");
  await page.$eval("#provider-list > li[data-id=hot]", (li) => li.scrollIntoView());
  await page.screenshot({ path: join(artifacts, "usage-window-spent.png") });
  r = await fetch(`${baton}/admin/providers/hot`, { method: "DELETE", headers: admin });
  assert.equal(r.status, 204);
  // The 420 px tray window: the bars fit, nothing overflows sideways.
  const small = await browser.newPage({ viewport: { width: 420, height: 700 } });
  await small.goto(`${baton}/ui/#admin=${encodeURIComponent(adminKey)}`);
  const row = await small.waitForSelector("#provider-list > li[data-id=plus] [data-testid=windows]");
  await row.scrollIntoViewIfNeeded();
  assert.ok(await small.evaluate(() => document.documentElement.scrollWidth <= 420), "no sideways scroll");
  await small.screenshot({ path: join(artifacts, "usage-windows-tray.png") });
  await small.close();
  // Thresholds with the keyboard only: a wrong value is refused next to the field. (Settings
  // was open before: its form is built anew on the way in, so wait for the new field, not the
  // old one the typing would be lost in.)
  await page.evaluate(() => document.getElementById("quota-thresholds")?.setAttribute("data-stale", ""));
  await page.click("nav a[data-tab=settings]");
  await page.waitForSelector("#quota-thresholds:not([data-stale])");
  await page.focus("#quota-thresholds");
  await page.keyboard.press("Control+A");
  await page.keyboard.type("0, 250");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#e-quota-thresholds:text('whole percentages between 1 and 100')");
  assert.equal(await page.evaluate(() => document.activeElement.id), "quota-thresholds");
  await page.keyboard.press("Control+A");
  await page.keyboard.type("90, 70");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#toast:text('Saved')");
  assert.equal(await page.inputValue("#quota-thresholds"), "70, 90");
  const s = await (await fetch(`${baton}/admin/settings`, { headers: { "x-admin-key": adminKey } })).json();
  assert.deepEqual(s.notifications.quotaThresholds, [70, 90]);
  assert.equal(s.notifications.quotaWarning, true, "on by default");
  r = await fetch(`${baton}/admin/providers/plus`, { method: "DELETE", headers: admin });
  assert.equal(r.status, 204);
});

test("the Add form shows a CLI's executable, version and login before saving, and the saved row has them at once", async () => {
  // A real executable named `claude` that prints the real CLI's outputs.
  const bin = mkdtempSync(join(tmpdir(), "baton-ui-cli-"));
  const fs = await import("node:fs");
  const claude = join(bin, "claude");
  fs.copyFileSync(process.env.FAKE_CLI_BIN, claude);
  fs.chmodSync(claude, 0o755);
  await page.click("nav a[data-tab=providers]");
  await page.click("#add-provider");
  await page.waitForSelector("#provider-dialog[open]");
  await page.selectOption("#f-kind", "claude-cli");
  // Not on Baton's PATH: said plainly, before anything is saved.
  await page.waitForSelector("[data-testid=cli-facts] .field-error");
  await page.fill("#f-executable", join(bin, "nothing-here"));
  await page.waitForSelector("[data-testid=cli-facts] .field-error:text('nothing-here')");
  await page.fill("#f-executable", claude);
  await page.waitForSelector(`[data-testid=cli-facts] code:text('${claude}')`);
  // Found, but not run until the user says so.
  assert.doesNotMatch(await page.textContent("[data-testid=cli-facts]"), /Version/);
  await page.focus("#cli-run");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=cli-facts] :text('Logged in')");
  const facts = await page.textContent("[data-testid=cli-facts]");
  assert.match(facts, /Version: \d+\.\d+/);
  assert.match(facts, /Logged in: yes/);
  await shot("add-cli-facts");
  await page.fill("#f-id", "cc");
  await page.fill("#f-models", "sonnet");
  // Testing it before saving asks first, naming what runs, and runs only after "Run it".
  await page.click("#form-test");
  await page.waitForSelector("#test-confirm");
  assert.match(await page.textContent("#test-result"), new RegExp(`Testing runs \`${claude} --version\``));
  await shot("cli-test-confirm");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#test-result.ok");
  await page.click("#form-save");
  await page.waitForSelector("#provider-list > li[data-id=cc]");
  // The row shows the version at once (it used to fill in minutes later).
  assert.match(await page.textContent("#provider-list > li[data-id=cc] .prov-detail"), /\d+\.\d+/);
  const admin = { "x-admin-key": adminKey };
  const r = await fetch(`${baton}/admin/providers/cc`, { method: "DELETE", headers: admin });
  assert.equal(r.status, 204);
});

test("a subscription preset calls with the client's own login, and Connect gives Claude Code's set-up for it", async () => {
  await page.click("nav a[data-tab=providers]");
  await page.click("#add-provider");
  await page.waitForSelector("#provider-dialog[open]");
  await page.selectOption("#f-preset", "claude-subscription");
  assert.equal(await page.isChecked("#f-clientLogin"), true, "the preset asks for the client's login");
  assert.equal(await page.inputValue("#f-models"), "*");
  assert.equal(await page.isHidden("#f-envKey"), true, "no key of its own to ask for");
  await page.uncheck("#f-clientLogin");
  assert.equal(await page.isVisible("#f-envKey"), true);
  await page.check("#f-clientLogin");
  await page.click("#form-save");
  await page.waitForSelector("#provider-list > li[data-id=claude-subscription]");
  const admin = { "x-admin-key": adminKey };
  const saved = await (await fetch(`${baton}/admin/state`, { headers: admin })).json();
  const p = saved.providers.find((x) => x.id === "claude-subscription");
  assert.equal(p.config.credentials, "client");
  assert.equal(p.config.keys, undefined, "no key of Baton's");
  // One state, every surface: the card says login-only, as `baton status` and the tray do.
  assert.equal(p.status.loginOnly, true);
  await page.waitForSelector("#provider-list > li[data-id=claude-subscription] [data-testid=status]:text('login-only')");
  await page.click("nav a[data-tab=connect]");
  await page.waitForSelector("#cc-subscription pre");
  const keyFile = join(dataDir, "data", "gateway.key");
  const text = await page.textContent("#cc-subscription pre");
  assert.ok(text.includes(`ANTHROPIC_CUSTOM_HEADERS="x-baton-key: $(cat '${keyFile}')"`), text);
  await shot("connect-claude-subscription");
  // A ChatGPT-plan provider: Codex's card gives the requires_openai_auth block.
  const made = await fetch(`${baton}/admin/providers`, {
    method: "POST",
    headers: { ...admin, "content-type": "application/json" },
    body: JSON.stringify({ id: "chatgpt-codex", kind: "openai-responses", baseUrl: "https://chatgpt.com/backend-api/codex", credentials: "client", models: ["*"] }),
  });
  assert.equal(made.status, 201, await made.text());
  await page.click("nav a[data-tab=providers]");
  await page.waitForSelector("#provider-list > li[data-id=chatgpt-codex]");
  await page.click("nav a[data-tab=connect]");
  await page.waitForSelector("#cx-subscription pre");
  const toml = await page.textContent("#cx-subscription pre");
  assert.ok(toml.includes("requires_openai_auth = true") && toml.includes('env_http_headers = { "x-baton-key" = "BATON_KEY" }'), toml);
  for (const id of ["claude-subscription", "chatgpt-codex"]) {
    const r = await fetch(`${baton}/admin/providers/${id}`, { method: "DELETE", headers: admin });
    assert.equal(r.status, 204);
  }
});

test("Settings: a named route is made, reordered and used with the keyboard; mappings are listed", async () => {
  await page.click("nav a[data-tab=settings]");
  await page.waitForSelector("#routes-info [data-pattern='claude-*']");
  await page.focus("#new-route");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#route-dialog[open]");
  await page.keyboard.type("fast");
  // No target yet: said next to the targets, nothing saved.
  await page.keyboard.press("Enter");
  await page.waitForSelector("#e-route-targets:text('at least one target')");
  await page.selectOption("#route-add-target", "beta");
  await page.click("#route-add");
  await page.selectOption("#route-add-target", "gamma/gamma-model");
  await page.click("#route-add");
  await page.click("[aria-label='Move gamma/gamma-model up']");
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute("aria-label")), "Move gamma/gamma-model down", "focus follows the moved target");
  await shot("route-dialog");
  await page.click("#route-form button[type=submit]");
  await page.waitForSelector("#routes-info [data-route=fast]");
  assert.match(await page.textContent("#routes-info [data-route=fast]"), /fast → gamma\/gamma-model → beta/);
  await shot("settings-routing");
  const r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "fast", messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("x-gateway-provider"), "gamma");
  // A mapping made by typing, then removed.
  await page.fill("#map-pattern", "my-model");
  await page.selectOption("#map-target", "fast");
  await page.click("#routes-info form button[type=submit]");
  await page.waitForSelector("#routes-info [data-pattern=my-model]");
  await page.click("[aria-label='Remove mapping my-model']");
  await page.waitForFunction(() => !document.querySelector("#routes-info [data-pattern=my-model]"));
  // Gone from its dialog, after a second press.
  await page.click("[aria-label='Edit route fast']");
  await page.waitForSelector("#route-dialog[open]");
  await page.click("#route-delete");
  assert.match(await page.textContent("#route-delete"), /for good\?/);
  await page.click("#route-delete");
  await page.waitForFunction(() => !document.querySelector("#routes-info [data-route=fast]"));
});

test("a route made to hedge by keyboard: a slow first token raced, both attempts in Activity", async () => {
  const admin = { "x-admin-key": adminKey, "content-type": "application/json" };
  const tortoise = (await start(process.env.FAKE_UPSTREAM_BIN, ["--name", "tortoise", "--mode", "delay:8000"])) + "/v1";
  const hare = (await start(process.env.FAKE_UPSTREAM_BIN, ["--name", "hare", "--mode", "ok"])) + "/v1";
  for (const [id, url] of [["tortoise", tortoise], ["hare", hare]]) {
    const r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin, body: JSON.stringify({ id, kind: "openai-compatible", baseUrl: url, models: [`${id}-model`], priority: 99, timeouts: { firstByteMs: 20000 } }) });
    assert.equal(r.status, 201, await r.text());
  }
  await page.click("nav a[data-tab=providers]");
  await page.waitForSelector("#provider-list > li[data-id=hare]");
  await page.click("nav a[data-tab=settings]");
  await page.waitForSelector("#routes-info [data-pattern='claude-*']");
  await page.focus("#new-route");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#route-dialog[open]");
  await page.keyboard.type("steady");
  await page.selectOption("#route-add-target", "tortoise");
  await page.click("#route-add");
  await page.selectOption("#route-add-target", "hare");
  await page.click("#route-add");
  assert.equal(await page.isChecked("#route-hedge"), false, "off unless turned on");
  await page.focus("#route-hedge");
  await page.keyboard.press("Space");
  await page.focus("#route-speed");
  await page.keyboard.press("Space");
  await shot("route-dialog-hedge");
  await page.click("#route-form button[type=submit]");
  const line = await page.waitForSelector("#routes-info [data-route=steady]");
  assert.match(await line.textContent(), /fastest first · hedges a slow first token/);
  const saved = await (await fetch(`${baton}/admin/routes`, { headers: admin })).json();
  assert.equal(saved.routes.steady.hedge, true);
  assert.equal(saved.routes.steady.order, "speed");
  // Unmeasured, the hedge goes after routing.hedge.unmeasuredMs (2 s): long before 8 s.
  const r = await fetch(`${baton}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "steady", messages: [{ role: "user", content: "hi" }] }),
  });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("x-gateway-provider"), "hare");
  await page.click("nav a[data-tab=activity]");
  const lost = await page.waitForSelector("#log-rows tr:first-child [data-testid=outrun]");
  assert.match(await lost.textContent(), /^tortoise\/tortoise-model ✗ slower, cancelled$/);
  assert.match(await lost.getAttribute("title"), /^Cancelled after [\d,]+ ms; prompt tokens counted: about [\d,]+$/);
  const won = await page.$("#log-rows tr:first-child .hop.ok");
  assert.match(await won.textContent(), /^hare\/hare-model ✓ \(hedge\)$/);
  await shot("activity-hedged");
  await fetch(`${baton}/admin/routes/steady`, { method: "DELETE", headers: admin });
  for (const id of ["tortoise", "hare"]) {
    const d = await fetch(`${baton}/admin/providers/${id}`, { method: "DELETE", headers: admin });
    assert.equal(d.status, 204);
  }
});

test("first run: what Baton found is one click away", async () => {
  const fresh = mkdtempSync(join(tmpdir(), "baton-ui-fresh-"));
  const url = await new Promise((resolve, reject) => {
    const p = spawn(process.env.BATON_BIN, ["serve", "--data-dir", fresh, "--port", "0"], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, GROQ_API_KEY: "gsk-test-not-real", OPENROUTER_API_KEY: "sk-or-test-not-real" },
    });
    procs.push(p);
    let out = "";
    p.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    p.on("exit", (c) => reject(new Error(`exited ${c}`)));
  });
  const key = readFileSync(join(fresh, "admin.key"), "utf8").trim();
  const p2 = await browser.newPage({ viewport: { width: 1000, height: 760 } });
  p2.on("pageerror", (e) => errors.push(String(e)));
  await p2.goto(`${url}/ui/#admin=${key}`);
  // Connect with nothing to route to says so first, instead of set-ups that end in 503s.
  await p2.click("nav a[data-tab=connect]");
  await p2.waitForSelector("#connect-no-provider");
  assert.equal(await p2.$("#claude-code"), null);
  await p2.evaluate(() => localStorage.removeItem("baton.connectSeen"));
  await p2.click("nav a[data-tab=providers]");
  const row = await p2.waitForSelector("#first-run .found:has-text('Groq')");
  assert.match(await row.textContent(), /GROQ_API_KEY/);
  // Free tiers not found here are offered with their sign-up page (Groq is found, not offered twice).
  const signup = await p2.waitForSelector("#first-run a[aria-label^='Sign up for Cerebras']");
  assert.match(await signup.getAttribute("href"), /^https:\/\/.*cerebras/);
  assert.equal(await p2.$$eval("#first-run [aria-label='Add Groq']", (b) => b.length), 1);
  await p2.screenshot({ path: join(artifacts, "first-run.png"), fullPage: true });
  // In the 420 px tray window the buttons stay whole (they wrapped letter by letter).
  await p2.setViewportSize({ width: 420, height: 760 });
  const heights = await p2.$$eval("#first-run .found .row > *", (bs) => bs.map((b) => b.getBoundingClientRect().height));
  assert.ok(heights.length && heights.every((h) => h < 44), `button heights ${heights}`);
  await p2.screenshot({ path: join(artifacts, "first-run-420.png"), fullPage: true });
  await p2.setViewportSize({ width: 1000, height: 760 });
  await (await row.$("button")).click();
  await p2.waitForSelector("#provider-dialog[open]");
  assert.equal(await p2.inputValue("#f-id"), "groq");
  assert.match(await p2.textContent("#form-body .key-list"), /\$GROQ_API_KEY/);
  await p2.click("#form-save");
  await p2.waitForSelector("#provider-list > li[data-id=groq]");
  // What else was found stays one click away after the first Add, until hidden.
  const also = await p2.waitForSelector("#also-found .found:has-text('OpenRouter')");
  assert.ok(!(await p2.$("#also-found .found:has-text('Groq')")), "Groq is added, not offered again");
  await p2.screenshot({ path: join(artifacts, "also-found.png"), fullPage: true });
  assert.ok(also);
  // The welcome card's last step carries on: a "Next" card leads to Connect.
  assert.ok(await p2.$("#next-connect a[href='#connect']"));
  await p2.click("#also-found button:text('Hide')");
  await p2.waitForSelector("#also-found", { state: "detached" });
  // With only the Next card left, nothing stands in for the hidden one (it once read "null").
  assert.doesNotMatch(await p2.textContent("#first-run"), /\bnull\b|undefined/);
  await p2.click("#next-connect-link");
  await p2.waitForSelector("#claude-code");
  await p2.click("nav a[data-tab=providers]");
  await p2.waitForSelector("#first-run", { state: "hidden" });
  await p2.reload();
  await p2.waitForSelector("#provider-list > li[data-id=groq]");
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(await p2.isHidden("#first-run"), true, "hidden stays hidden");
  await p2.close();
});

test("a catalog preset with a pasted key keeps only that key, not the preset's unset variable", async () => {
  assert.equal(process.env.GROQ_API_KEY, undefined, "this test needs GROQ_API_KEY unset");
  await page.click("nav a[data-tab=providers]");
  await page.click("#add-provider");
  await page.waitForSelector("#provider-dialog[open]");
  await page.selectOption("#f-preset", "groq");
  await page.fill("#f-newKeys", "gsk_pasted-into-the-preset-0001");
  await page.click("#form-save");
  await page.waitForSelector("#provider-dialog[open]", { state: "detached" });
  const admin = { "x-admin-key": adminKey };
  const state = await (await fetch(`${baton}/admin/providers`, { headers: admin })).json();
  const groq = state.providers.find((p) => p.id === "groq");
  assert.equal(groq.keys.length, 1, JSON.stringify(groq.keys));
  assert.ok(!JSON.stringify(groq.config.keys).includes("GROQ_API_KEY"), JSON.stringify(groq.config.keys));
  const r = await fetch(`${baton}/admin/providers/groq`, { method: "DELETE", headers: admin });
  assert.equal(r.status, 204);
});

test("the Mistral preset brings its tool call id rule, which the form has no field for", async () => {
  await page.click("nav a[data-tab=providers]");
  await page.click("#add-provider");
  await page.waitForSelector("#provider-dialog[open]");
  await page.selectOption("#f-preset", "mistral");
  await page.fill("#f-newKeys", "mistral-pasted-key-000000000001");
  await page.click("#form-save");
  await page.waitForSelector("#provider-dialog[open]", { state: "detached" });
  const admin = { "x-admin-key": adminKey };
  const state = await (await fetch(`${baton}/admin/providers`, { headers: admin })).json();
  const mistral = state.providers.find((p) => p.id === "mistral");
  assert.equal(mistral.config.capabilities.toolCallIds, "nine-alphanumerics", JSON.stringify(mistral.config));
  const r = await fetch(`${baton}/admin/providers/mistral`, { method: "DELETE", headers: admin });
  assert.equal(r.status, 204);
});

test("times follow the locale: 12-hour where it says so, 24-hour where it does not", async () => {
  const at = new Date(2026, 11, 3, 18, 5).getTime();
  const clockIn = async (locale) => {
    const ctx = await browser.newContext({ locale });
    const p = await ctx.newPage();
    await p.goto(`${baton}/ui/`);
    // The page's own start (its modules, the catalogue) is over before this one imports.
    await p.waitForSelector("#login:not([hidden])");
    const t = await p.evaluate(async (ms) => {
      const views = await import("/ui/views.js");
      return views.fmtClock(ms);
    }, at);
    await ctx.close();
    return t;
  };
  assert.match(await clockIn("en-US"), /^(\w{3} \d{1,2} )?6:05\sPM$/);
  assert.match(await clockIn("en-GB"), /^(\d{1,2} \w{3} )?18:05$/);
});

test("Team's hours, days and key expiry are the browser's own zone, as Activity's are", async () => {
  // A browser in Tokyo (UTC+9): usage is asked in its zone, labelled in its style, and a key
  // that "works until" a date stops at the end of that day in Tokyo, not in UTC.
  const admin = { "x-admin-key": adminKey, "content-type": "application/json" };
  const ctx = await browser.newContext({ locale: "en-US", timezoneId: "Asia/Tokyo", viewport: { width: 1000, height: 760 } });
  const p = await ctx.newPage();
  const asked = p.waitForRequest((r) => r.url().includes("/admin/usage?") && r.url().includes("tz=Asia%2FTokyo"));
  await p.goto(`${baton}/ui/#admin=${encodeURIComponent(adminKey)}`);
  await p.click("nav a[data-tab=team]");
  await asked;
  assert.match(await p.textContent("#view-team"), /your own time zone/);
  assert.doesNotMatch(await p.textContent("#view-team"), /UTC/);
  await p.fill("#key-label", "tokyo-bot");
  await p.click("#new-limits-box summary");
  await p.fill("#nk-expiresAt", "2030-06-30");
  await p.click("#key-form button[type=submit]");
  await p.waitForSelector("#key-list [data-key-id]:has-text('tokyo-bot')");
  const keys = await (await fetch(`${baton}/admin/keys`, { headers: admin })).json();
  const made = keys.ui.find((k) => k.label === "tokyo-bot");
  assert.equal(made.policy.expiresMs, Date.parse("2030-06-30T23:59:59+09:00"), JSON.stringify(made.policy));
  assert.match(await p.textContent("#key-list [data-key-id]:has-text('tokyo-bot') [data-role=limits]"), /until Jun 30, 2030/);
  await fetch(`${baton}/admin/keys/${made.id}`, { method: "DELETE", headers: admin });
  await ctx.close();
});

test("Settings → Web search: a SearXNG is set up and tried with the keyboard; a missing key is said and focused", async () => {
  const p = await browser.newPage({ viewport: { width: 420, height: 760 } });
  p.on("pageerror", (e) => errors.push(String(e)));
  await p.goto(`${baton}/ui/#admin=${encodeURIComponent(adminKey)}`);
  await p.click("nav a[data-tab=settings]");
  await p.waitForSelector("#ws-status p");
  assert.match(await p.textContent("#ws-status"), /no search service is set up/);
  assert.equal(await p.isHidden("#ws-url-row"), true, "no address to give for None");
  await p.focus("#ws-backend");
  await p.selectOption("#ws-backend", "searxng");
  assert.equal(await p.isVisible("#ws-url-row"), true);
  assert.equal(await p.isHidden("#ws-key-row"), true, "SearXNG takes no key");
  await p.fill("#ws-url", upA.replace(/\/v1$/, ""));
  await p.press("#ws-url", "Enter");
  await p.waitForSelector("#ws-status:has-text('search through this service')");
  const saved = await (await fetch(`${baton}/admin/web-search`, { headers: { "x-admin-key": adminKey } })).json();
  assert.equal(saved.backend, "searxng");
  // Connect says the agents' searches work on every provider now.
  await p.click("nav a[data-tab=connect]");
  await p.waitForSelector("#connect-web-search-status:has-text('searches through SearXNG')");
  await p.click("nav a[data-tab=settings]");
  await p.waitForSelector("#ws-status p");
  await p.fill("#ws-query", "tokio runtime");
  await p.press("#ws-query", "Enter");
  await p.waitForSelector("#ws-status ol li");
  assert.equal(await p.locator("#ws-status ol li").count(), 3);
  assert.match(await p.textContent("#ws-status"), /tokio runtime — Example Docs/);
  const overflow = await p.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  assert.equal(overflow, false, "no horizontal scrolling at 420 px");
  await p.locator("#web-search").screenshot({ path: join(artifacts, "web-search.png") });
  // A provider with search built in: only the kinds whose API searches where it is called
  // (the registry's word: not Bedrock) are offered (this gateway has none yet, and says so).
  await p.selectOption("#ws-backend", "provider");
  assert.equal(await p.isVisible("#ws-provider-row"), true);
  assert.equal(await p.isHidden("#ws-url-row"), true);
  assert.match(await p.textContent("#ws-provider"), /No provider of these kinds yet: OpenAI Responses API, Anthropic API, Gemini API, Claude on Google Vertex AI(,)? and Gemini on Google Vertex AI/);
  // Brave with no key: refused, said, and the key field focused; nothing stored.
  await p.selectOption("#ws-backend", "brave");
  assert.equal(await p.isVisible("#ws-key-row"), true);
  await p.fill("#ws-url", "");
  await p.click("#web-search-form button[type=submit]");
  await p.waitForFunction(() => document.activeElement && document.activeElement.id === "ws-key");
  const after = await (await fetch(`${baton}/admin/web-search`, { headers: { "x-admin-key": adminKey } })).json();
  assert.equal(after.backend, "searxng", "a refused change stores nothing");
  await fetch(`${baton}/admin/web-search`, { method: "PUT", headers: { "x-admin-key": adminKey, "content-type": "application/json" }, body: JSON.stringify({ backend: "none" }) });
  await p.close();
});

test("narrow tray window and dark mode render without errors", async () => {
  const small = await browser.newPage({ viewport: { width: 420, height: 720 }, colorScheme: "dark" });
  small.on("pageerror", (e) => errors.push(String(e)));
  await small.goto(`${baton}/ui/#admin=${encodeURIComponent(adminKey)}`);
  await small.waitForSelector("#provider-list > li");
  assert.equal(await small.evaluate(() => location.hash), "#providers", "the key is taken out of the address bar");
  const overflow = await small.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  assert.equal(overflow, false, "no horizontal scrolling at 420 px");
  // The header is one line (it took three), every section link still there.
  const header = await small.$eval("header.top", (h) => ({ height: h.getBoundingClientRect().height, links: [...h.querySelectorAll("nav a")].filter((a) => a.getBoundingClientRect().width > 0).length }));
  assert.ok(header.height < 48, `header ${header.height}px tall`);
  assert.equal(header.links, 5);
  await small.screenshot({ path: join(artifacts, "tray-dark.png"), fullPage: true });
  // Connect: the agents' set-ups (long config lines) scroll inside their boxes, not the page.
  await small.click("nav a[data-tab=connect]");
  await small.waitForSelector("#codex pre");
  const connectOverflow = await small.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  assert.equal(connectOverflow, false, "Connect: no horizontal scrolling at 420 px");
  await small.screenshot({ path: join(artifacts, "tray-connect.png"), fullPage: true });
  // The Team screen's key list, limit fields and usage table fit too.
  await small.click("nav a[data-tab=team]");
  await small.waitForSelector("#usage-rows tr");
  await small.click("#new-limits-box summary");
  const teamOverflow = await small.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  assert.equal(teamOverflow, false, "Team: no horizontal scrolling at 420 px");
  // Each visible header sits over its own column in the rows and in the total: the Tokens
  // total is under Tokens (it showed the failover count there).
  const columns = await small.evaluate(() => {
    const visible = (cells) => [...cells].filter((c) => getComputedStyle(c).display !== "none");
    const head = visible(document.querySelectorAll(".usage thead th")).map((c) => c.textContent.trim());
    const x = (cells) => visible(cells).map((c) => Math.round(c.getBoundingClientRect().right));
    return { head, headX: x(document.querySelectorAll(".usage thead th")), totalX: x(document.querySelectorAll("#usage-total tr > *")) };
  });
  assert.ok(!columns.head.includes("Failovers"), `${columns.head}`);
  const tokens = columns.head.indexOf("Tokens");
  assert.equal(columns.totalX.at(-2), columns.headX[tokens], "the Tokens total is under Tokens");
  assert.equal(columns.totalX.at(-1), columns.headX.at(-1), "the Cost total is under Cost");
  await small.screenshot({ path: join(artifacts, "team-dark.png"), fullPage: true });
  // Activity: each row's latency and tokens are on screen (the Tokens column was off it).
  await small.click("nav a[data-tab=activity]");
  await small.waitForSelector("#log-rows tr td.num");
  const cells = await small.$$eval("#log-rows tr:first-child td.num", (tds) => tds.map((td) => ({ text: td.textContent, label: td.dataset.label, before: getComputedStyle(td, "::before").content, right: td.getBoundingClientRect().right })));
  assert.equal(cells.length, 2);
  for (const c of cells) assert.ok(c.right <= 420, `${c.text} ends at ${c.right}px`);
  // Each number says what it is, in the page's language (the label is the cell's own).
  assert.deepEqual(cells.map((c) => c.label), ["Latency", "Tokens"]);
  for (const c of cells) assert.equal(c.before, `"${c.label} "`, "shown before the number");
  const activityOverflow = await small.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  assert.equal(activityOverflow, false, "Activity: no horizontal scrolling at 420 px");
  await small.screenshot({ path: join(artifacts, "activity-420.png"), fullPage: true });
  await small.close();
  assert.deepEqual(errors, []);
});

test("a secret header is typed into the form: stored like a key, never shown again", async () => {
  await page.goto(`${baton}/ui/#providers`);
  await page.click("#provider-list > li[data-id=gamma] [data-focus=edit]");
  await page.waitForSelector("#provider-dialog[open]");
  await page.click("text=A secret header");
  await page.fill("#f-newHeaders", "X-Proxy-Token");
  await page.click("#form-save");
  // No value: refused next to the header's field, nothing saved.
  const err = await page.waitForSelector("#e-newHeaders:text('visible ASCII')");
  assert.match(await err.textContent(), /one line of visible ASCII/);
  await page.fill("[aria-label='Secret header value']", "proxy-token-typed-in-the-ui-4242");
  await page.click("#form-save");
  await page.waitForSelector("#provider-dialog", { state: "hidden" });
  const admin = { "x-admin-key": adminKey };
  const list = await (await fetch(`${baton}/admin/providers`, { headers: admin })).json();
  const gamma = list.providers.find((x) => x.id === "gamma");
  assert.equal(typeof gamma.config.headers["X-Proxy-Token"].stored, "string", JSON.stringify(gamma.config));
  assert.ok(!JSON.stringify(list).includes("proxy-token-typed-in-the-ui-4242"));
  await page.click("#provider-list > li[data-id=gamma] [data-focus=edit]");
  await page.waitForSelector("#provider-dialog[open]");
  assert.ok(!(await page.content()).includes("proxy-token-typed-in-the-ui-4242"), "never shown again");
  await page.click("#form-cancel");
});

test("editing a provider's model list keeps what the form does not show of each model", async () => {
  const admin = { "x-admin-key": adminKey, "content-type": "application/json" };
  const made = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin, body: JSON.stringify({
    id: "detailed", kind: "openai-compatible", baseUrl: "https://api.example.com/v1", enabled: false,
    models: [{ id: "big", contextWindow: 200000, price: { input: 1, output: 2 }, serves: ["big-alias"] }, "small"],
  }) });
  assert.equal(made.status, 201, await made.text());
  await page.goto(`${baton}/ui/#providers`);
  await page.waitForSelector("#provider-list > li[data-id=detailed]");
  await page.click("#provider-list > li[data-id=detailed] [data-focus=edit]");
  await page.waitForSelector("#provider-dialog[open] #f-models");
  assert.equal(await page.inputValue("#f-models"), "big\nsmall");
  await page.fill("#f-models", "big\nsmall\nnew-one");
  await page.click("#form-save");
  await page.waitForFunction(() => !document.querySelector("#provider-dialog[open]"));
  const st = await (await fetch(`${baton}/admin/state`, { headers: admin })).json();
  const models = st.providers.find((x) => x.id === "detailed").config.models;
  assert.deepEqual(models, [{ id: "big", contextWindow: 200000, price: { input: 1, output: 2 }, serves: ["big-alias"] }, "small", "new-one"]);
  await fetch(`${baton}/admin/providers/detailed`, { method: "DELETE", headers: admin });
});

test("a provider made in the UI is deleted from its Edit dialog, after a second press", async () => {
  await page.goto(`${baton}/ui/#providers`);
  await page.waitForSelector("#provider-list > li[data-id=gamma]");
  await page.click("#provider-list > li[data-id=gamma] [data-focus=edit]");
  await page.waitForSelector("#provider-dialog[open]");
  const del = page.locator("#form-delete");
  await del.click();
  assert.match(await del.textContent(), /for good\?/);
  assert.ok(await page.$("#provider-dialog[open]"), "the first press only asks");
  await shot("delete-confirm");
  await del.click();
  await page.waitForFunction(() => !document.querySelector("#provider-list > li[data-id=gamma]"));
  assert.ok(!(await page.$("#provider-dialog[open]")));
  for (let i = 0; i < 3; i++) assert.notEqual((await chat()).provider, "gamma");
  // A provider from the config file has no Delete: the file owns it.
  await page.click("#provider-list > li[data-id=alpha] [data-focus=edit]");
  assert.ok(await page.locator("#form-delete").isHidden());
  // A read-only view: nothing to save, and it is closed rather than cancelled.
  assert.ok(await page.locator("#form-save").isHidden());
  assert.equal(await page.textContent("#form-cancel"), "Close");
  await shot("view-file-provider");
  await page.click("#form-cancel");
});

test("export then import on the same machine: the file's providers are skipped, and a replace is asked first", async () => {
  const admin = { "x-admin-key": adminKey, "content-type": "application/json" };
  let r = await fetch(`${baton}/admin/providers`, { method: "POST", headers: admin, body: JSON.stringify({ id: "delta", name: "Delta", kind: "openai-compatible", baseUrl: upC, models: ["gamma-model"] }) });
  assert.equal(r.status, 201);
  const exported = await (await fetch(`${baton}/admin/export`, { headers: admin })).text();
  await page.goto(`${baton}/ui/#settings`);
  await page.waitForSelector("#import-file", { state: "attached" });
  await page.setInputFiles("#import-file", { name: "baton-config.json", mimeType: "application/json", buffer: Buffer.from(exported) });
  await page.waitForSelector("#import-result >> text=already exist");
  // Focus lands on Replace them, so Enter confirms.
  await page.waitForFunction(() => document.activeElement?.id === "import-replace");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /Replaced|Not imported/.test(document.getElementById("import-result").textContent));
  assert.match(await page.textContent("#import-result"), /Replaced: (\w+, )*(\w+ and )?delta\./);
  assert.match(await page.textContent("#import-result"), /Skipped \(defined in the config file Baton runs with\): alpha and beta\./);
  await shot("import-replaced");
});

test("the desktop window, opened unlocked by the app, offers no lock that would lock the user out", async () => {
  const win = await browser.newPage({ viewport: { width: 480, height: 720 } });
  await win.goto(`${baton}/ui/#admin=${encodeURIComponent(adminKey)}`);
  await win.waitForSelector("#provider-list > li");
  await win.click("nav a[data-tab=settings]");
  await win.waitForSelector("#logout-desktop:not([hidden])");
  assert.equal(await win.isHidden("#logout"), true);
  await win.close();
  // A tab where the key was typed can still be locked, and locking locks every tab of it.
  await page.goto(`${baton}/ui/#settings`);
  await page.waitForSelector("#logout:not([hidden])");
  // What the page says is what it does: the key is kept per tab.
  assert.match(await page.textContent("#logout-note"), /kept for this tab only/);
  const other = await page.context().newPage();
  await other.goto(`${baton}/ui/#providers`);
  await other.fill("#admin-key", adminKey);
  await other.click("#login-form button[type=submit]");
  await other.waitForSelector("#provider-list > li");
  await page.click("#logout");
  await page.waitForSelector("#login:not([hidden])");
  await other.waitForSelector("#login:not([hidden])");
  assert.match(await page.textContent("#login"), /Kept for this tab only/);
  // Unlocking one tab leaves the other locked: the key is typed per tab.
  await page.fill("#admin-key", adminKey);
  await page.click("#login-form button[type=submit]");
  await page.waitForSelector("#provider-list > li");
  await other.reload();
  await other.waitForSelector("#login:not([hidden])");
  await other.close();
});

test("pause shows everywhere in the UI and Resume is one click", async () => {
  await page.goto(`${baton}/ui/#providers`);
  await page.waitForSelector("#provider-list > li");
  // Paused from elsewhere (the tray, a script): the open page learns it from the event.
  const r = await fetch(`${baton}/admin/pause`, { method: "PUT", headers: { "x-admin-key": adminKey, "content-type": "application/json" }, body: JSON.stringify({ paused: true }) });
  assert.equal(r.status, 200);
  await page.waitForSelector("#gateway-banner:not([hidden]) >> text=Routing is paused");
  assert.equal(await page.textContent("#live"), "paused");
  assert.equal((await chat()).status, 503);
  await shot("paused");
  await page.focus("#resume");
  // Anything else happening meanwhile (here a settings change from elsewhere) refreshes the
  // page; the banner must keep the button the keyboard is on, or Enter presses nothing.
  const refreshed = page.waitForResponse((res) => res.url().endsWith("/admin/providers") && res.request().method() === "GET");
  const same = await fetch(`${baton}/admin/settings`, { method: "PUT", headers: { "x-admin-key": adminKey, "content-type": "application/json" }, body: JSON.stringify({ language: "auto" }) });
  assert.equal(same.status, 200);
  await refreshed;
  assert.equal(await page.evaluate(() => document.activeElement.id), "resume");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#gateway-banner", { state: "hidden" });
  assert.equal((await chat()).status, 200);
});

test("with the gateway stopped the page says so, freezes and allows no edits", async () => {
  await page.goto(`${baton}/ui/#providers`);
  await page.waitForSelector("#provider-list > li[data-id=alpha]");
  const gw = procs.find((p) => p.spawnargs.includes("serve"));
  gw.kill("SIGKILL");
  await page.waitForSelector("#gateway-banner:not([hidden]) >> text=Baton is not answering", { timeout: 15000 });
  assert.equal(await page.textContent("#live"), "offline");
  assert.equal(await page.$eval("#provider-list", (l) => l.inert), true, "no switch can flip and snap back");
  assert.equal(await page.$eval("#add-provider", (b) => b.disabled), true);
  await shot("gateway-down");
});
