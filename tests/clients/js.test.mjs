// The JavaScript clients people build with, through the real `baton serve`, against the strict
// fake upstreams: the official `openai` and `@anthropic-ai/sdk` SDKs and the Vercel AI SDK
// (`ai` with `@ai-sdk/openai` and `@ai-sdk/anthropic`), and a limited key's rate-limit headers
// read through both official SDKs. Each cell is a translator path: a
// client dialect to an upstream kind of another API (the same-format hops are the Python SDK
// suites'). Needs: BATON_BIN, FAKE_UPSTREAM_BIN, NPM_DIR (where scripts/test installs the pinned
// packages).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { procs, start } from "../support/procs.mjs";

const need = createRequire(join(process.env.NPM_DIR || join(process.env.HOME, ".cache/baton-npm"), "node_modules/"));
const OpenAI = need("openai").default;
const Anthropic = need("@anthropic-ai/sdk").default;
const { generateText, streamText, tool, Output, jsonSchema, stepCountIs } = need("ai");
const { createOpenAI } = need("@ai-sdk/openai");
const { createAnthropic } = need("@ai-sdk/anthropic");

after(() => procs.forEach((p) => p.kill("SIGTERM")));

const SUFFIX = { "openai-compatible": "/v1", anthropic: "/v1", gemini: "/v1beta", "openai-responses": "/v1" };
const made = {};

/** One fake upstream of `kind` and one Baton in front of it. */
async function gateway(kind) {
  if (made[kind]) return made[kind];
  const up = await start(process.env.FAKE_UPSTREAM_BIN, ["--name", "u", "--mode", "auto"]);
  const dir = mkdtempSync(join(tmpdir(), `baton-js-${kind}-`));
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({
    providers: [{ id: "u", kind, baseUrl: up + SUFFIX[kind], models: ["u-model"] }],
    modelMap: { "claude-*": "u", "gpt-*": "u" },
  }));
  const url = await start(process.env.BATON_BIN, ["serve", "--config", config, "--data-dir", join(dir, "data"), "--port", "0"]);
  const key = readFileSync(join(dir, "data", "gateway.key"), "utf8").trim();
  made[kind] = { url, key, dataDir: join(dir, "data") };
  return made[kind];
}

const weather = {
  type: "object",
  properties: { city: { type: "string" }, temp_c: { type: "number" } },
  required: ["city", "temp_c"],
  additionalProperties: false,
};

for (const kind of ["anthropic", "gemini"]) {
  test(`openai (JS): plain, streamed with usage, a tool call, json_schema — to ${kind}`, async () => {
    const { url, key } = await gateway(kind);
    const c = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
    const r = await c.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hello there" }] });
    assert.equal(r.choices[0].message.content, "u: hello there");
    const s = await c.chat.completions.create({ model: "gpt-test", stream: true, stream_options: { include_usage: true },
      messages: [{ role: "user", content: "one two" }] });
    let text = "";
    const usage = [];
    for await (const ch of s) {
      text += ch.choices[0]?.delta?.content ?? "";
      if (ch.usage) usage.push(ch.usage);
    }
    assert.equal(text, "u: one two");
    assert.equal(usage.length, 1, JSON.stringify(usage));
    const t = await c.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "weather?" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }] });
    assert.equal(t.choices[0].message.tool_calls[0].function.name, "get_weather");
    const j = await c.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "weather?" }],
      response_format: { type: "json_schema", json_schema: { name: "weather", schema: weather, strict: true } } });
    const parsed = JSON.parse(j.choices[0].message.content);
    assert.equal(typeof parsed.city, "string");
  });
}

for (const kind of ["openai-compatible", "openai-responses"]) {
  test(`@anthropic-ai/sdk: message, stream, tool use — to ${kind}`, async () => {
    const { url, key } = await gateway(kind);
    const c = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
    const m = await c.messages.create({ model: "claude-sonnet-4-5", max_tokens: 100, messages: [{ role: "user", content: "hello there" }] });
    assert.equal(m.content[0].text, "u: hello there");
    const stream = c.messages.stream({ model: "claude-sonnet-4-5", max_tokens: 100, messages: [{ role: "user", content: "one two" }] });
    const final = await stream.finalMessage();
    assert.equal(final.content.map((b) => b.text ?? "").join(""), "u: one two");
    assert.ok(final.usage.input_tokens > 0);
    const t = await c.messages.create({ model: "claude-sonnet-4-5", max_tokens: 100, messages: [{ role: "user", content: "weather?" }],
      tools: [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }] });
    assert.equal(t.stop_reason, "tool_use");
    assert.equal(t.content.find((b) => b.type === "tool_use").name, "get_weather");
  });
}

test("Vercel AI SDK: generateText with a tool loop, streamText, structured output — OpenAI provider to Anthropic", async () => {
  const { url, key } = await gateway("anthropic");
  const openai = createOpenAI({ baseURL: `${url}/v1`, apiKey: key });
  const model = openai.chat("gpt-test");
  const r = await generateText({
    model,
    prompt: "weather in Paris?",
    tools: { get_weather: tool({ description: "Weather for a city", inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }), execute: async ({ city }) => `18 C in ${city}` }) },
    stopWhen: stepCountIs(3),
  });
  assert.equal(r.text, "u: weather in Paris?");
  assert.ok(r.steps.length >= 2, "the tool ran and the model answered after it");
  const s = streamText({ model, prompt: "one two" });
  let text = "";
  for await (const d of s.textStream) text += d;
  assert.equal(text, "u: one two");
  const o = await generateText({ model, prompt: "weather?", output: Output.object({ schema: jsonSchema(weather) }) });
  assert.equal(typeof o.output.city, "string");
});

test("Vercel AI SDK: the Anthropic provider to Gemini", async () => {
  const { url, key } = await gateway("gemini");
  const anthropic = createAnthropic({ baseURL: `${url}/v1`, apiKey: key });
  const model = anthropic("claude-sonnet-4-5");
  const r = await generateText({ model, prompt: "hello there" });
  assert.equal(r.text, "u: hello there");
  const s = streamText({ model, prompt: "one two" });
  let text = "";
  for await (const d of s.textStream) text += d;
  assert.equal(text, "u: one two");
});

test("the JS SDKs read what is left of a limited key's limits from every answer", async () => {
  const { url } = await gateway("openai-compatible");
  const dir = mkdtempSync(join(tmpdir(), "baton-js-limits-"));
  const adminKey = readFileSync(join(made["openai-compatible"].dataDir, "admin.key"), "utf8").trim();
  const r = await fetch(`${url}/admin/keys`, {
    method: "POST",
    headers: { "x-admin-key": adminKey, "content-type": "application/json" },
    body: JSON.stringify({ label: `paced-${dir.slice(-6)}`, rpm: 4, tpm: 40000 }),
  });
  const body = await r.text();
  assert.equal(r.status, 201, body);
  const key = JSON.parse(body).key;
  const o = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
  const { response } = await o.chat.completions.create({ model: "gpt-test", messages: [{ role: "user", content: "hi" }] }).withResponse();
  assert.equal(response.headers.get("x-ratelimit-limit-requests"), "4");
  assert.equal(response.headers.get("x-ratelimit-remaining-requests"), "3");
  assert.equal(response.headers.get("x-ratelimit-limit-tokens"), "40000");
  assert.match(response.headers.get("x-ratelimit-reset-requests"), /^\d+(\.\d+)?s$/);
  const a = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0 });
  const { response: m } = await a.messages.create({ model: "claude-sonnet-4-5", max_tokens: 50, messages: [{ role: "user", content: "hi" }] }).withResponse();
  assert.equal(m.headers.get("anthropic-ratelimit-requests-limit"), "4");
  assert.equal(m.headers.get("anthropic-ratelimit-requests-remaining"), "2");
  assert.ok(Date.parse(m.headers.get("anthropic-ratelimit-requests-reset")) > Date.now() - 5000);
});
