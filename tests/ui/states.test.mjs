// The provider cards tell the truth: in every provider state (ready, cooling by key, by model,
// by account, breaker open, logged out, disabled, login-only) and while paused, each card's badge says what
// `/admin/state` says — and so do `baton status` (table, JSON, exit status), `baton statusline`
// and `baton probe`'s column of what Baton says now: one summary, every surface (the tray's
// matrix is tests/desktop/test_tray_states.py). Each state is brought
// about as it happens: cooldowns as `baton probe --apply` posts them, a breaker opened by an
// upstream answering 500, a CLI whose login is gone, a toggle, a pause. Screenshots at 1000 and
// 420 px go to tests/ui/artifacts/.
//
// Needs: BATON_BIN, FAKE_UPSTREAM_BIN, FAKE_CLI_BIN, PLAYWRIGHT_CORE, CHROMIUM.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { launch, signIn } from "../support/browser.mjs";
import { procs, start } from "../support/procs.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, "artifacts");
mkdirSync(artifacts, { recursive: true });

let browser, baton, adminKey, gatewayKey, configPath, env;
const admin = () => ({ "x-admin-key": adminKey, "content-type": "application/json" });
const hour = () => Date.now() + 3_600_000;

// What a card's badge says for each state of `/admin/state`: its words and its tone.
const BADGE = {
  ready: [/^ready$/, "ok"],
  partial: [/^ready$/, "ok"],
  // A subscription passed through: ready for clients that bring their own login only.
  "login-only": [/^login-only$/, "ok"],
  // A countdown reads as a duration, never like a clock time ("59 min", not "59:58").
  cooling: [/^cooling · (\d+ h \d\d min|\d+ min|\d+ s)$/, "warn"],
  "breaker-open": [/^breaker open · (\d+ min|\d+ s|now)$/, "bad"],
  "logged-out": [/^logged out$/, "bad"],
  unavailable: [/^unavailable$/, "bad"],
  disabled: [/^disabled$/, "off"],
};

before(async () => {
  const up = process.env.FAKE_UPSTREAM_BIN;
  const ok = await start(up, ["--name", "ok", "--mode", "ok"]);
  const flaky = await start(up, ["--name", "flaky", "--mode", "500"]);
  const dir = mkdtempSync(join(tmpdir(), "baton-states-"));
  // A Claude Code whose login is gone (the fake reads its mode from ../claude/modes).
  mkdirSync(join(dir, "bin"));
  mkdirSync(join(dir, "claude"));
  copyFileSync(process.env.FAKE_CLI_BIN, join(dir, "bin", "claude"));
  writeFileSync(join(dir, "claude", "modes"), "nologin\n");
  const key = [{ env: "BT_STATES_KEY" }];
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({
    server: { port: 0 },
    providers: [
      { id: "keys", kind: "openai-compatible", baseUrl: `${ok}/v1`, models: ["llama"], keys: [{ env: "BT_STATES_KEY" }, { env: "BT_STATES_KEY_2" }], priority: 1 },
      { id: "models", kind: "openai-compatible", baseUrl: `${ok}/v1`, models: ["small", "large"], keys: key, priority: 2 },
      { id: "account", kind: "anthropic", baseUrl: `${ok}/v1`, models: ["*"], credentials: "client", priority: 3 },
      { id: "flaky", kind: "openai-compatible", baseUrl: `${flaky}/v1`, models: ["m"], keys: key, priority: 4, auto: false },
      { id: "claude-code", kind: "claude-cli", executable: join(dir, "bin", "claude"), models: ["sonnet"], priority: 5 },
    ],
  }));
  const home = join(dir, "home");
  mkdirSync(home);
  configPath = config;
  env = {
    HOME: home, CLAUDE_CONFIG_DIR: "", CODEX_HOME: "", XDG_CONFIG_HOME: "", LANG: "C.UTF-8", LANGUAGE: "", LC_ALL: "",
    BT_STATES_KEY: "sk-states-first-0001", BT_STATES_KEY_2: "sk-states-second-0002",
  };
  baton = await start(process.env.BATON_BIN, ["serve", "--config", config, "--data-dir", join(dir, "data"), "--port", "0"], env);
  gatewayKey = readFileSync(join(dir, "data", "gateway.key"), "utf8").trim();
  adminKey = readFileSync(join(dir, "data", "admin.key"), "utf8").trim();
  browser = await launch();
});

after(async () => {
  if (browser) await browser.close();
  for (const p of procs) p.kill("SIGTERM");
});

async function cool(provider, { key = null, model = null, cls = "rate" } = {}) {
  const r = await fetch(`${baton}/admin/cooldowns`, {
    method: "POST",
    headers: admin(),
    body: JSON.stringify({ provider, key, model, untilMs: hour(), class: cls, reason: "429 from the test" }),
  });
  assert.equal(r.status, 201, await r.text());
}

/** `/admin/state`: paused, and each provider's state (`partial` folded in). */
async function gateway() {
  const s = await (await fetch(`${baton}/admin/state`, { headers: admin() })).json();
  const fold = (st) => (st.state !== "ready" ? st.state : st.loginOnly ? "login-only" : st.partial ? "partial" : "ready");
  const states = Object.fromEntries(s.providers.map((p) => [p.id, fold(p.status)]));
  return { paused: s.paused, states };
}

/** `baton status --json` (its exit status too) and `baton statusline`, against this Baton. */
function cli(args) {
  return new Promise((resolve) => {
    const child = execFile(process.env.BATON_BIN, [...args, "--url", baton, "--admin-key", adminKey], { timeout: 60_000, env: { ...process.env, ...env } }, (err, stdout) =>
      resolve({ code: err ? err.code : 0, stdout }));
    child.stdin.end();
  });
}

/** The gateway's summary, and whether `baton status` (JSON, exit status) and `baton statusline`
 * say what it says; `null` when they agree, else what each said. */
async function cliDisagrees() {
  const s = (await (await fetch(`${baton}/admin/state`, { headers: admin() })).json()).summary;
  const status = await cli(["status", "--json"]);
  const json = JSON.parse(status.stdout);
  const line = (await cli(["statusline"])).stdout.trim();
  // The table says each provider's state on its row, and the headline says paused.
  const text = (await cli(["status"])).stdout;
  const rowSays = (id, st) => text.split("\n").some((l) => l.startsWith(`${id} `) && l.split(/\s+/)[1] === st);
  const tableAgrees = s.providers.every((p) => rowSays(p.id, p.shown)) && text.startsWith("Routing is paused") === s.paused;
  const states = Object.fromEntries(s.providers.map((p) => [p.id, p.shown]));
  const said = Object.fromEntries(json.providers.map((r) => [r.id, r.state]));
  const serving = s.providers.find((p) => p.id === (s.serving || s.servingLogin));
  // The probe's "what Baton says now" beside each verdict is the same summary's.
  const probed = JSON.parse((await cli(["probe", "--config", configPath, "--json"])).stdout);
  const probeAgrees = probed.every((r) => r.gateway && r.gateway.state === states[r.provider]);
  const agree = tableAgrees && probeAgrees && JSON.stringify(said) === JSON.stringify(states)
    && json.paused === s.paused && json.servable === s.servable && (json.serving ?? null) === (s.serving ?? null)
    && status.code === (s.servable ? 0 : 1)
    && line.split(" · ").includes("paused") === s.paused
    && (serving ? line.includes(serving.name) : line.includes("nothing available"));
  return agree ? null : { summary: s, status: json, code: status.code, line, text, probed };
}

/** Each card's badge: its words and tone. */
const badges = (page) =>
  page.$$eval("#provider-list > li", (ls) =>
    Object.fromEntries(ls.map((l) => {
      const b = l.querySelector("[data-testid=status]");
      return [l.dataset.id, [b.textContent.trim(), ["ok", "warn", "bad", "off"].find((t) => b.classList.contains(t))]];
    })));

/** Waits until `/admin/state` says `want`, then until every card agrees with it (both read afresh
 * until they do), and the paused banner with the pause. */
async function agree(pages, want, name) {
  // The gateway first: a CLI's login check at start may take a moment.
  for (let tries = 0; ; tries++) {
    const g = await gateway();
    if (Object.entries(want).every(([id, state]) => g.states[id] === state)) break;
    assert.ok(tries < 75, `${name}: /admin/state says ${JSON.stringify(g.states)}, not ${JSON.stringify(want)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const [width, page] of pages) {
    let seen;
    const until = Date.now() + 15_000;
    for (;;) {
      const g = await gateway();
      const cards = await badges(page);
      const banner = await page.isVisible("#gateway-banner #resume");
      seen = { gateway: g, cards, banner };
      const cardsAgree = Object.entries(g.states).every(([id, st]) => cards[id] && BADGE[st][0].test(cards[id][0]) && cards[id][1] === BADGE[st][1]);
      if (cardsAgree && Object.keys(cards).length === Object.keys(g.states).length && banner === g.paused) break;
      assert.ok(Date.now() < until, `${name} at ${width} px: the cards and /admin/state disagree: ${JSON.stringify(seen)}`);
      await page.waitForTimeout(200);
    }
    await page.screenshot({ path: join(artifacts, `states-${name}-${width}.png`), fullPage: true });
  }
  // The CLI renders the same summary: `baton status` (JSON and exit status) and the status line.
  let differs;
  for (let tries = 0; (differs = await cliDisagrees()) && tries < 50; tries++) await new Promise((r) => setTimeout(r, 200));
  assert.equal(differs, null, `${name}: the CLI and the gateway's summary disagree: ${JSON.stringify(differs)}`);
}

test("every provider card says what /admin/state says, in every state, at 1000 and 420 px", async () => {
  const pages = [];
  for (const width of [1000, 420]) {
    const page = await (await browser.newContext({ viewport: { width, height: 900 } })).newPage();
    await signIn(page, baton, adminKey);
    pages.push([width, page]);
  }
  await agree(pages, { keys: "ready", models: "ready", account: "login-only", flaky: "ready", "claude-code": "logged-out" }, "logged-out");

  // The probe tests what it can and says what the gateway says beside it: a login-only provider
  // is not Baton's to test, a CLI whose login is gone is logged out (its own check, not a 401).
  const probe = await cli(["probe", "--config", configPath, "--json"]);
  const verdicts = Object.fromEntries(JSON.parse(probe.stdout).map((r) => [r.provider, [r.class, r.gateway && r.gateway.state]]));
  assert.deepEqual(verdicts.account, ["login-only", "login-only"], probe.stdout);
  assert.deepEqual(verdicts["claude-code"], ["logged-out", "logged-out"], probe.stdout);
  assert.deepEqual(verdicts.keys, ["ok", "ready"], probe.stdout);

  await cool("keys", { key: "env:BT_STATES_KEY" });
  await agree(pages, { keys: "partial" }, "one-key-cooling");
  await cool("keys", { key: "env:BT_STATES_KEY_2" });
  await agree(pages, { keys: "cooling" }, "every-key-cooling");

  await cool("models", { model: "small" });
  await agree(pages, { models: "partial" }, "one-model-cooling");
  await cool("models", { model: "large", cls: "overloaded" });
  await agree(pages, { models: "cooling" }, "every-model-cooling");

  await cool("account", { key: "client:16e89a16dc0f" });
  await agree(pages, { account: "cooling" }, "account-cooling");

  for (let i = 0; i < 6 && (await gateway()).states.flaky !== "breaker-open"; i++) {
    const r = await fetch(`${baton}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gatewayKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "flaky/m", messages: [{ role: "user", content: "hi" }] }),
    });
    await r.text();
  }
  await agree(pages, { flaky: "breaker-open" }, "breaker-open");

  const off = await fetch(`${baton}/admin/providers/claude-code`, { method: "PATCH", headers: admin(), body: JSON.stringify({ enabled: false }) });
  assert.equal(off.status, 200, await off.text());
  await agree(pages, { "claude-code": "disabled" }, "disabled");

  assert.equal((await fetch(`${baton}/admin/pause`, { method: "PUT", headers: admin(), body: JSON.stringify({ paused: true }) })).status, 200);
  await agree(pages, {}, "paused");
  assert.equal((await fetch(`${baton}/admin/pause`, { method: "PUT", headers: admin(), body: JSON.stringify({ paused: false }) })).status, 200);
  const cleared = await fetch(`${baton}/admin/cooldowns?provider=keys`, { method: "DELETE", headers: admin() });
  assert.ok(cleared.ok, await cleared.text());
  await agree(pages, { keys: "ready" }, "cleared");
});
