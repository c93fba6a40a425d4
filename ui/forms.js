// The add / edit provider form: one form whose fields follow the kind, presets from the
// built-in catalog, errors placed next to the field the API names.

import { api, ApiError } from "./api.js";
import { keep, t, tn } from "./i18n.js";
import { cliWords, el, explainNodes, kindOf, kinds, presetName, setKinds } from "./views.js";

const NO_ANSWER = () => t("Baton did not answer (is it still running?). Nothing was saved.");
const isCli = (k) => Boolean(kindOf(k).program);

/** A kind's own hint from the registry: its text translated, its values (addresses, variables,
 * commands) kept as they are. */
function hint(h, more = {}) {
  const values = {};
  for (const [name, v] of Object.entries({ ...more, ...(h.values || {}) })) values[name] = keep(v);
  return tn(h.text, values);
}

function field(id, label, input, hint) {
  input.id = `f-${id}`;
  const err = el("p", { class: "field-error", id: `e-${id}`, role: "alert" });
  input.setAttribute("aria-describedby", `e-${id}${hint ? ` h-${id}` : ""}`);
  return el("div", { class: "stack", "data-field": id },
    el("label", { for: `f-${id}` }, label),
    hint ? el("p", { class: "hint", id: `h-${id}` }, hint) : null,
    input, err);
}

/** Opens the dialog for a new provider (`p` undefined, maybe a `preset`) or an existing one. */
export async function openProviderForm({ p, preset, presets, onSaved, onDeleted, toast }) {
  // The kinds come from the gateway with the provider list; a form opened first asks for them.
  if (!kinds().length) setKinds((await api("GET", "/admin/providers").catch(() => ({}))).kinds);
  const dialog = document.getElementById("provider-dialog");
  const body = document.getElementById("form-body");
  const formError = document.getElementById("form-error");
  const testBox = document.getElementById("test-result");
  const save = document.getElementById("form-save");
  const editing = Boolean(p);
  const readOnly = editing && p.owner === "file";
  const base = editing ? structuredClone(p.config) : structuredClone((preset && preset.provider) || { kind: "openai-compatible", models: [] });
  document.getElementById("dialog-title").textContent = readOnly ? t("{name} (from the config file)", { name: p.name }) : editing ? t("Edit {name}", { name: p.name }) : t("Add provider");
  formError.textContent = "";
  testBox.textContent = "";
  testBox.className = "test-result";
  save.hidden = readOnly;

  const keptKeys = [...(base.keys || [])];
  const inputs = {
    preset: el("select", {}, el("option", { value: "" }, t("Custom")), (presets || []).map((x) => el("option", { value: x.id, translate: "no" }, presetName(x.name)))),
    kind: el("select", { required: true }, kinds().map((k) => el("option", { value: k.id }, t(k.label)))),
    id: el("input", { required: true, autocomplete: "off", spellcheck: "false", translate: "no", placeholder: "groq" }),
    name: el("input", { autocomplete: "off", placeholder: t("shown in the list") }),
    baseUrl: el("input", { type: "url", autocomplete: "off", spellcheck: "false", translate: "no", placeholder: "https://api.example.com/v1" }),
    project: el("input", { autocomplete: "off", spellcheck: "false", translate: "no", placeholder: "my-project-123" }),
    region: el("input", { autocomplete: "off", spellcheck: "false", translate: "no", placeholder: t("from the base URL") }),
    models: el("textarea", { spellcheck: "false", placeholder: t("one model per line, preferred first") }),
    envKey: el("input", { autocomplete: "off", spellcheck: "false", translate: "no", placeholder: "GROQ_API_KEY" }),
    newKey: el("input", { type: "password", autocomplete: "off", spellcheck: "false", placeholder: t("paste a key (stored on this machine, never shown again)") }),
    executable: el("input", { autocomplete: "off", spellcheck: "false", translate: "no" }),
    flattenHistory: el("input", { type: "checkbox" }),
    clientLogin: el("input", { type: "checkbox", id: "f-clientLogin", "aria-describedby": "h-clientLogin" }),
    headerName: el("input", { autocomplete: "off", spellcheck: "false", translate: "no", placeholder: "X-Proxy-Token" }),
    headerValue: el("input", { type: "password", autocomplete: "off", spellcheck: "false", placeholder: t("its value (stored on this machine, never shown again)"), "aria-label": t("Secret header value") }),
    maxConcurrency: el("input", { type: "number", min: "1", step: "1", placeholder: t("no limit") }),
    // Limits the provider states for this key (a free tier's): Baton counts them itself and
    // stops sending before the provider's 429.
    rpm: el("input", { type: "number", min: "1", step: "1", inputmode: "numeric", placeholder: t("no limit") }),
    rpd: el("input", { type: "number", min: "1", step: "1", inputmode: "numeric", placeholder: t("no limit") }),
    tpm: el("input", { type: "number", min: "1", step: "1", inputmode: "numeric", placeholder: t("no limit") }),
    firstByteMs: el("input", { type: "number", min: "100", step: "100" }),
  };
  inputs.kind.value = base.kind || "openai-compatible";
  inputs.id.value = base.id || "";
  inputs.id.disabled = editing;
  inputs.name.value = base.name || "";
  inputs.baseUrl.value = base.baseUrl || "";
  inputs.project.value = base.project || "";
  inputs.region.value = base.region || "";
  inputs.models.value = (base.models || []).map((m) => (typeof m === "string" ? m : m.id)).join("\n");
  inputs.executable.value = base.executable || "";
  inputs.flattenHistory.checked = Boolean(base.flattenHistory);
  inputs.clientLogin.checked = base.credentials === "client";
  inputs.maxConcurrency.value = base.maxConcurrency || "";
  for (const k of ["rpm", "rpd", "tpm"]) inputs[k].value = (base.limits && base.limits[k]) || "";
  // A preset's free tier, as the welcome card says it: offered, not set.
  const tier = preset && preset.freeTier;
  if (tier && tier.rpm) inputs.rpm.placeholder = t("{n} on its free tier", { n: tier.rpm });
  if (tier && tier.rpd) inputs.rpd.placeholder = t("{n} on its free tier", { n: tier.rpd });
  inputs.firstByteMs.value = (base.timeouts && base.timeouts.firstByteMs) || "";
  if (preset) inputs.preset.value = preset.id;

  const keyList = el("div", { class: "key-list", "data-field": "keys" });
  function renderKeys() {
    keyList.replaceChildren(
      ...keptKeys.map((k, i) => {
        const live = editing && (p.keys || []).find((x) => x.id === (k.stored ? `stored:${k.stored}` : `env:${k.env}`));
        const label = k.stored ? t("typed key {masked}", { masked: live && live.masked ? live.masked : "" }).trim() : live && live.missing ? t("{name} (not set)", { name: `$${k.env}` }) : `$${k.env}`;
        return el("div", { class: "key-item" }, el("span", {}, label),
          readOnly ? null : el("button", { type: "button", class: "icon danger", "aria-label": t("Remove key {name}", { name: label }), onclick: () => { keptKeys.splice(i, 1); renderKeys(); } }, "✕"));
      }),
    );
    if (!keptKeys.length) {
      const k = inputs.kind.value;
      const own = kindOf(k).hints || {};
      keyList.append(el("p", { class: "hint" }, own.noKey ? hint(own.noKey) : t("No key yet (fine for a local server).")));
    }
  }
  renderKeys();

  const cliFacts = el("div", { class: "cli-facts", "data-testid": "cli-facts" });
  function renderCliFacts(cli) {
    if (!cli) {
      cliFacts.textContent = t("Baton looks for the CLI when you test or save.");
      return;
    }
    // Found but not run yet: running it is the user's call.
    const unrun = cli.ran === false && !cli.problem;
    cliFacts.replaceChildren(
      ...[
        el("div", {}, tn("Executable: {path}", { path: cli.executable ? el("code", {}, cli.executable) : t("not found") })),
        unrun ? null : el("div", {}, t("Version: {version}", { version: cli.version || t("unknown") })),
        unrun ? null : el("div", {}, t("Logged in: {answer}", { answer: cli.loggedIn === true ? t("yes") : cli.loggedIn === false ? t("no") : t("could not tell (it is tried)") })),
        unrun ? el("button", { type: "button", id: "cli-run", onclick: () => checkCli(true) }, t("Check its version and login (runs it)")) : null,
        cli.problem ? el("div", { class: "field-error" }, cliWords(cli.problem)) : null,
      ].filter(Boolean),
    );
  }
  renderCliFacts(editing ? p.cli : null);

  // A provider that calls with the client's own login has no keys of its own.
  const keyFields = el("div", { class: "stack" },
    el("div", { class: "stack" }, el("label", {}, t("API keys")), keyList,
      el("p", { class: "field-error", id: "e-keys", role: "alert" })),
    readOnly ? null : field("envKey", t("Add a key from an environment variable"), inputs.envKey, t("The provider's own variable (OPENAI_API_KEY for api.openai.com), one your config file sends here, or one you named BATON_SOMETHING. Baton reads it at start; the key never enters the configuration.")),
    readOnly ? null : field("newKeys", t("…or paste a key"), inputs.newKey, el("span", { id: "newKeys-kind" })),
    readOnly ? null : el("details", {}, el("summary", {}, t("A secret header (for a proxy that wants its token in a header)")),
      el("div", { class: "stack", style: "margin-top:.5rem" },
        field("newHeaders", t("Header name"), inputs.headerName, t("Its value is stored like a key: sent only to this provider's host, masked everywhere.")),
        inputs.headerValue)));
  const syncLogin = () => { keyFields.hidden = inputs.clientLogin.checked; };
  inputs.clientLogin.addEventListener("change", syncLogin);
  syncLogin();
  const groups = {
    http: el("div", { class: "stack" },
      field("baseUrl", t("Base URL"), inputs.baseUrl, el("span", { id: "baseUrl-hint" })),
      field("project", t("Google Cloud project"), inputs.project, t("The project's id, as in the console's project picker.")),
      field("region", t("Region"), inputs.region, t("Empty: the one the base URL names. Needed for a private endpoint.")),
      el("label", { class: "switch-row", id: "clientLogin-row" }, inputs.clientLogin, ` ${t("Call with the client's own login (its subscription) instead of a key")}`),
      el("p", { class: "hint", id: "h-clientLogin" }, tn("Claude Code's or Codex's login is forwarded unchanged to this provider only; the client sends Baton's key in {header}. Model \"*\" serves any model it names.", { header: el("code", {}, "x-baton-key") })),
      keyFields),
    cli: el("div", { class: "stack" },
      field("executable", t("Executable"), inputs.executable, t("A name on PATH or an absolute path; empty means the CLI's own name.")),
      cliFacts,
      el("label", { class: "switch-row" }, inputs.flattenHistory, ` ${t("Send multi-turn chats as one transcript (flattenHistory)")}`)),
  };
  body.replaceChildren(...[
    editing ? null : field("preset", t("Start from"), inputs.preset, t("Known services fill in the URL, models and key variable.")),
    field("kind", t("Kind"), inputs.kind),
    el("div", { class: "row" },
      el("div", { style: "flex:1;min-width:10rem" }, field("id", t("Id"), inputs.id, t("Lowercase; used as provider/model"))),
      el("div", { style: "flex:1;min-width:10rem" }, field("name", t("Display name"), inputs.name))),
    groups.http,
    groups.cli,
    field("models", t("Models"), inputs.models),
    el("details", {}, el("summary", {}, t("Limits and timeouts")),
      el("div", { class: "stack", style: "margin-top:.5rem" },
        field("maxConcurrency", t("Requests at once"), inputs.maxConcurrency),
        el("p", { class: "hint" }, t("The provider's own limits for each key (a free tier's, for example): Baton counts them and sends no more, so the provider never has to refuse.")),
        el("div", { class: "row limits-row" },
          field("limits.rpm", t("Requests per minute"), inputs.rpm),
          field("limits.rpd", t("Requests per day"), inputs.rpd),
          field("limits.tpm", t("Tokens per minute"), inputs.tpm)),
        field("timeouts.firstByteMs", t("First answer within (ms)"), inputs.firstByteMs))),
    readOnly ? el("p", { class: "hint" }, t("This provider is defined in the config file, which wins at every start. Edit it there; here you can enable, disable, reorder and test it.")) : null,
  ].filter(Boolean));
  for (const i of Object.values(inputs)) if (readOnly) i.disabled = true;

  // What Baton finds for this CLI, before anything is saved: asked again when the kind or the
  // executable changes (only the newest answer is shown).
  let checkGen = 0;
  let checkTimer = null;
  async function checkCli(run = false) {
    const k = inputs.kind.value;
    if (!isCli(k) || readOnly) return;
    const gen = ++checkGen;
    const program = inputs.executable.value.trim() || kindOf(k).program;
    cliFacts.replaceChildren(el("div", { class: "muted" }, run ? t("Running {program}…", { program }) : t("Looking for {program}…", { program })));
    try {
      const st = await api("POST", "/admin/cli-check", { kind: k, executable: inputs.executable.value.trim() || null, run });
      if (run && gen === checkGen) document.getElementById("f-executable")?.focus();
      if (gen === checkGen) renderCliFacts(st);
    } catch (e) {
      if (gen === checkGen) cliFacts.replaceChildren(el("div", { class: "field-error" }, e instanceof ApiError ? e.message : NO_ANSWER()));
    }
  }
  inputs.executable.addEventListener("input", () => {
    clearTimeout(checkTimer);
    checkTimer = setTimeout(() => checkCli(false), 400);
  });

  let forcedLogin = false;
  function syncKind() {
    const k = inputs.kind.value;
    groups.http.hidden = isCli(k);
    groups.cli.hidden = !isCli(k);
    const { program, sampleModel, baseUrlExample, clientLogin } = kindOf(k);
    // The address and the login follow the kind: Azure's is a resource's endpoint, and it
    // takes no client login.
    const example = baseUrlExample || "https://api.groq.com/openai/v1";
    inputs.baseUrl.placeholder = example;
    const urlHint = body.querySelector("#baseUrl-hint");
    if (urlHint) {
      const own = kindOf(k).hints || {};
      urlHint.replaceChildren(own.baseUrl
        ? hint(own.baseUrl, { example, model: sampleModel || "" })
        : tn("Up to and including the version, e.g. {example}", { example: keep(example) }));
    }
    // The kind's own fields (Bedrock's region, Vertex AI's project and region).
    const own = kindOf(k).fields || [];
    for (const f of ["project", "region"]) {
      const box = body.querySelector(`[data-field="${f}"]`);
      if (box) box.hidden = !own.includes(f);
    }
    // The kind's own word on a typed key (Bedrock's key pair, Vertex AI's JSON key).
    const keyHint = body.querySelector("#newKeys-kind");
    if (keyHint) {
      const own = kindOf(k).hints || {};
      keyHint.replaceChildren(own.key ? hint(own.key) : "");
      keyHint.parentElement.hidden = !keyHint.textContent;
    }
    renderKeys();
    const login = clientLogin !== false;
    for (const id of ["clientLogin-row", "h-clientLogin"]) { const n = body.querySelector(`#${id}`); if (n) n.hidden = !login; }
    if (!login && inputs.clientLogin.checked) { inputs.clientLogin.checked = false; syncLogin(); }
    // A subscription's backend (ChatGPT's) is called only on the client's login; leaving it for
    // another kind gives back the choice it took.
    const only = Boolean(kindOf(k).loginOnly);
    if (only && !inputs.clientLogin.checked) { inputs.clientLogin.checked = true; forcedLogin = true; syncLogin(); }
    if (!only && forcedLogin) { inputs.clientLogin.checked = false; forcedLogin = false; syncLogin(); }
    inputs.clientLogin.disabled = only || readOnly;
    inputs.executable.placeholder = program || "";
    inputs.id.placeholder = program || "groq";
    inputs.models.placeholder = sampleModel ? t("one model per line, preferred first, e.g. {model}", { model: sampleModel }) : t("one model per line, preferred first");
    if (isCli(k) && !(editing && p.cli)) checkCli(false);
  }
  syncKind();
  inputs.kind.addEventListener("change", syncKind);
  inputs.preset.addEventListener("change", () => {
    const x = (presets || []).find((y) => y.id === inputs.preset.value);
    if (!x) return;
    const pv = x.provider;
    inputs.kind.value = pv.kind;
    inputs.id.value = pv.id;
    inputs.name.value = pv.name || "";
    inputs.baseUrl.value = pv.baseUrl || "";
    inputs.models.value = (pv.models || []).join("\n");
    inputs.clientLogin.checked = pv.credentials === "client";
    syncLogin();
    keptKeys.splice(0, keptKeys.length, ...(pv.keys || []));
    renderKeys();
    syncKind();
  });

  function clearErrors() {
    formError.textContent = "";
    for (const n of body.querySelectorAll("[aria-invalid]")) n.removeAttribute("aria-invalid");
    for (const n of body.querySelectorAll(".field-error")) if (n.id) n.textContent = "";
  }

  /** Each problem beside its field, all at once; focus on the first. */
  function showError(e) {
    if (e.fields && e.fields.length > 1) {
      const first = e.fields[0];
      for (const f of [...e.fields].reverse()) showOne({ param: f.param, message: f.message });
      showOne({ param: first.param, message: first.message });
      return;
    }
    showOne(e);
  }

  function showOne(e) {
    let param = e.param || "";
    // A key variable that may not be used belongs next to the variable field; a stored key
    // that must be typed again (a new host) next to the paste field.
    if (/^keys\[\d+\]\.env$/.test(param) && body.querySelector('[data-field="envKey"]')) param = "envKey";
    else if (/^keys\[\d+\](\.stored)?$/.test(param) && body.querySelector('[data-field="newKeys"]')) param = "newKeys";
    else if (/^(newHeaders|headers)\./.test(param) && body.querySelector('[data-field="newHeaders"]')) param = "newHeaders";
    const key = param.replace(/\[\d+\].*$/, "").replace(/^keys.*/, "keys");
    const target = body.querySelector(`[data-field="${CSS.escape(param)}"]`) || body.querySelector(`[data-field="${CSS.escape(key)}"]`);
    const errBox = target && (target.querySelector(".field-error") || document.getElementById(`e-${key}`));
    if (target && errBox && !target.hidden) {
      errBox.textContent = e.message;
      const input = target.querySelector("input, select, textarea");
      if (input) {
        input.setAttribute("aria-invalid", "true");
        input.focus();
      }
      target.closest("details")?.setAttribute("open", "");
    } else {
      formError.textContent = param ? `${param}: ${e.message}` : e.message;
    }
  }

  function collect() {
    const k = inputs.kind.value;
    // A new provider keeps what its preset says that the form has no field for (Mistral's
    // tool call ids).
    const chosen = (presets || []).find((y) => y.id === inputs.preset.value);
    const out = editing ? structuredClone(p.config)
      : chosen && chosen.provider.capabilities ? { capabilities: structuredClone(chosen.provider.capabilities) } : {};
    out.id = inputs.id.value.trim();
    out.kind = k;
    const name = inputs.name.value.trim();
    if (name) out.name = name; else delete out.name;
    // A model kept by name keeps what the form does not show (its price, context window, the
    // names it serves): only the list is edited here.
    const detailed = new Map((base.models || []).filter((m) => typeof m !== "string").map((m) => [m.id, m]));
    out.models = inputs.models.value.split("\n").map((s) => s.trim()).filter(Boolean).map((id) => detailed.get(id) || id);
    const mc = inputs.maxConcurrency.value.trim();
    if (mc) out.maxConcurrency = Number(mc); else delete out.maxConcurrency;
    const limits = { ...(out.limits || {}) };
    for (const k of ["rpm", "rpd", "tpm"]) {
      const v = inputs[k].value.trim();
      if (v) limits[k] = Number(v); else delete limits[k];
    }
    if (Object.keys(limits).length) out.limits = limits; else delete out.limits;
    const fb = inputs.firstByteMs.value.trim();
    if (fb) out.timeouts = { ...(out.timeouts || {}), firstByteMs: Number(fb) };
    if (isCli(k)) {
      delete out.baseUrl;
      delete out.keys;
      delete out.headers;
      const exe = inputs.executable.value.trim();
      if (exe) out.executable = exe; else delete out.executable;
      if (inputs.flattenHistory.checked) out.flattenHistory = true; else delete out.flattenHistory;
    } else {
      out.baseUrl = inputs.baseUrl.value.trim();
      const own = kindOf(k).fields || [];
      for (const f of ["project", "region"]) {
        const v = inputs[f].value.trim();
        if (own.includes(f) && v) out[f] = v; else delete out[f];
      }
      delete out.executable;
      delete out.env;
      delete out.flattenHistory;
      let keys = [...keptKeys];
      const env = inputs.envKey.value.trim();
      if (env) keys.push({ env });
      const typed = inputs.newKey.value.trim();
      if (typed) out.newKeys = [typed];
      // A key pasted into a new provider from a preset whose variable is not set here replaces
      // that variable (it would only sit beside the key as "keys 1/2", looking half broken).
      const chosen = (presets || []).find((y) => y.id === inputs.preset.value);
      if (!editing && typed && chosen && chosen.keyFound === false) {
        const unset = new Set((chosen.provider.keys || []).map((x) => x.env));
        keys = keys.filter((x) => !unset.has(x.env));
      }
      out.keys = keys;
      const hName = inputs.headerName.value.trim();
      const hValue = inputs.headerValue.value.trim();
      if (hName || hValue) out.newHeaders = { [hName]: hValue };
      if (inputs.clientLogin.checked) {
        out.credentials = "client";
        out.keys = [];
        delete out.newKeys;
      } else delete out.credentials;
    }
    if (!editing) out.enabled = true;
    return out;
  }

  // Testing a CLI that is not saved yet runs a program: Baton says which, and runs it only
  // after a second, explicit press.
  async function runTest(confirmRun) {
    clearErrors();
    testBox.className = "test-result wait";
    testBox.textContent = t("Sending one tiny request…");
    testBox.scrollIntoView({ block: "nearest" });
    try {
      const body = readOnly ? null : { ...collect(), ...(confirmRun ? { confirmRun: true } : {}) };
      const r = editing && readOnly ? await api("POST", `/admin/providers/${encodeURIComponent(p.id)}/test`) : await api("POST", "/admin/test", body);
      testBox.className = `test-result ${r.ok ? "ok" : "bad"}`;
      testBox.replaceChildren(r.ok ? (r.passthrough ? keep(r.note) : t("Works: {model} answered in {n} ms.", { model: r.model, n: r.latencyMs })) : explainNodes(r.class, r.reason, r.resetAtMs));
      // The answer is where the eye is: scrolled above the sticky buttons (scroll-margin).
      testBox.scrollIntoView({ block: "nearest" });
    } catch (e) {
      if (e instanceof ApiError && e.code === "confirmation_required") {
        const run = el("button", { type: "button", id: "test-confirm", onclick: () => runTest(true) }, t("Run it"));
        testBox.className = "test-result wait";
        // The API's second sentence is for scripts; here the button says it.
        const forScripts = t("Send the same body with \"confirmRun\": true once you agree.");
        testBox.replaceChildren(el("span", {}, `${e.message.replace(` ${forScripts}`, "")} `), run);
        testBox.scrollIntoView({ block: "nearest" });
        run.focus();
        return;
      }
      testBox.textContent = "";
      testBox.className = "test-result";
      if (e instanceof ApiError) showError(e); else formError.textContent = NO_ANSWER();
    }
  }
  document.getElementById("form-test").onclick = () => runTest(false);
  const cancel = document.getElementById("form-cancel");
  cancel.onclick = () => dialog.close();
  // A read-only view has nothing to save or cancel: it is closed.
  save.hidden = readOnly;
  cancel.textContent = readOnly ? t("Close") : t("Cancel");
  // Deleting asks twice in place (no blocking confirm() in the desktop window): the first press
  // says what will happen, the second does it.
  const del = document.getElementById("form-delete");
  del.hidden = !editing || readOnly;
  del.textContent = t("Delete");
  del.onclick = async () => {
    if (del.dataset.armed !== "1") {
      del.dataset.armed = "1";
      del.textContent = t("Delete {name} for good?", { name: p.name });
      return;
    }
    del.disabled = true;
    try {
      await api("DELETE", `/admin/providers/${encodeURIComponent(p.id)}`);
      dialog.close();
      toast(t("{name} deleted — routing no longer uses it.", { name: p.name }));
      onSaved();
      // The button that opened the dialog went with the row: focus goes somewhere sensible.
      if (onDeleted) onDeleted(p.id);
    } catch (e) {
      if (e instanceof ApiError) showError(e); else formError.textContent = NO_ANSWER();
    } finally {
      del.disabled = false;
      del.dataset.armed = "";
    }
  };
  dialog.addEventListener("close", () => { del.dataset.armed = ""; del.textContent = t("Delete"); }, { once: true });
  document.getElementById("provider-form").onsubmit = async (ev) => {
    ev.preventDefault();
    if (readOnly) return dialog.close();
    clearErrors();
    save.disabled = true;
    try {
      const bodyJson = collect();
      const saved = editing
        ? await api("PUT", `/admin/providers/${encodeURIComponent(p.id)}`, bodyJson)
        : await api("POST", "/admin/providers", bodyJson);
      dialog.close();
      toast(t("{name} saved — routing uses it now.", { name: saved.name }));
      onSaved();
    } catch (e) {
      if (e instanceof ApiError) showError(e); else formError.textContent = NO_ANSWER();
    } finally {
      save.disabled = false;
    }
  };
  dialog.showModal();
  (editing ? inputs.name : preset ? inputs.id : inputs.preset).focus();
}
