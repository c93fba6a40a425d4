// The Team screen: client keys with their limits, and usage per key or provider over time.

import { api, ApiError } from "./api.js";
import { N_, fmtDate, fmtDateTime, fmtList, fmtNumber, keep, t, tn } from "./i18n.js";
import { el, fmtClock, snippet } from "./views.js";

const $ = (id) => document.getElementById(id);
let ctx = { toast: () => {}, showError: () => {} };

const TIERS = ["free", "low", "medium", "high"];
// Form field -> where it lives in a policy.
const NUMBERS = [
  ["rpm", N_("Requests / minute"), null],
  ["tpm", N_("Tokens / minute"), null],
  ["dayTokens", N_("Tokens / day"), "budget"],
  ["monthTokens", N_("Tokens / month"), "budget"],
  ["dayUsd", N_("US$ / day"), "budget"],
  ["monthUsd", N_("US$ / month"), "budget"],
];

const money = (v) => {
  const digits = v >= 0.01 || v === 0 ? 2 : 4;
  return fmtNumber(v, { style: "currency", currency: "USD", currencyDisplay: "narrowSymbol", minimumFractionDigits: digits, maximumFractionDigits: digits });
};
const int = (v) => fmtNumber(Number(v || 0));

/** The limit fields, prefilled from `policy`; `prefix` keeps ids unique per form. */
function limitFields(prefix, policy = {}) {
  const b = policy.budget || {};
  const field = (name, label, input) => el("div", { class: "field" },
    el("label", { for: `${prefix}-${name}` }, label), input,
    el("p", { class: "field-error", id: `${prefix}-e-${name}`, role: "alert" }));
  const nums = NUMBERS.map(([name, label, group]) => {
    const v = group ? b[name] : policy[name];
    return field(name, t(label), el("input", { id: `${prefix}-${name}`, name, type: "number", min: "0", step: name.endsWith("Usd") ? "0.01" : "1", inputmode: "decimal", placeholder: t("no limit"), value: v ?? "", "aria-describedby": `${prefix}-e-${name}` }));
  });
  const tier = el("select", { id: `${prefix}-maxTier`, name: "maxTier", "aria-describedby": `${prefix}-e-maxTier` },
    el("option", { value: "" }, t("any tier")),
    ...TIERS.map((x) => el("option", { value: x, selected: policy.maxTier === x }, t("{tier} and cheaper", { tier: tierWords(x) }))));
  const expires = policy.expiresMs ? localDate(policy.expiresMs) : "";
  return el("div", { class: "limits-grid" },
    ...nums,
    field("maxTier", t("Price tier failover may use"), tier),
    field("allow", t("May use (routes, providers, provider/model)"), el("input", { id: `${prefix}-allow`, name: "allow", placeholder: t("everything"), value: (policy.allow || []).join(", "), autocomplete: "off", spellcheck: "false", "aria-describedby": `${prefix}-e-allow` })),
    field("expiresAt", t("Works until (the end of that day, your time)"), el("input", { id: `${prefix}-expiresAt`, name: "expiresAt", type: "date", value: expires, "aria-describedby": `${prefix}-e-expiresAt` })),
  );
}

/** The policy the fields say. With `clear`, emptied fields are sent as null (PATCH removes). */
function readLimits(prefix, clear) {
  const out = {};
  const budget = {};
  const put = (obj, k, v) => {
    if (v !== undefined) obj[k] = v;
    else if (clear) obj[k] = null;
  };
  for (const [name, , group] of NUMBERS) {
    const raw = $(`${prefix}-${name}`).value.trim();
    const v = raw === "" ? undefined : Number(raw);
    if (group) {
      if (v !== undefined) budget[name] = v;
    } else put(out, name, v);
  }
  if (Object.keys(budget).length) out.budget = budget;
  else if (clear) out.budget = null;
  put(out, "maxTier", $(`${prefix}-maxTier`).value || undefined);
  const allow = $(`${prefix}-allow`).value.split(",").map((s) => s.trim()).filter(Boolean);
  put(out, "allow", allow.length ? allow : undefined);
  const d = $(`${prefix}-expiresAt`).value;
  // The end of that day in this browser's zone, sent as an instant.
  put(out, "expiresAt", d ? new Date(`${d}T23:59:59`).toISOString() : undefined);
  return out;
}

function clearErrors(prefix) {
  for (const n of document.querySelectorAll(`[id^="${prefix}-e-"]`)) n.textContent = "";
  for (const n of document.querySelectorAll(`[id^="${prefix}-"][aria-invalid]`)) n.removeAttribute("aria-invalid");
}

/** Puts an API error next to its field (`budget.dayUsd` -> dayUsd, `allow[0]` -> allow). */
function fieldError(prefix, e, fallback) {
  const name = e instanceof ApiError && e.param ? e.param.replace(/^budget\./, "").replace(/\[\d+\]$/, "") : null;
  const slot = name && $(`${prefix}-e-${name}`);
  if (slot) {
    slot.textContent = e.message;
    $(`${prefix}-${name}`)?.setAttribute("aria-invalid", "true");
    $(`${prefix}-${name}`)?.focus();
  } else {
    fallback.textContent = e.message;
  }
}

/** A price tier's name in words. */
function tierWords(tier) {
  const words = { free: N_("free"), low: N_("low"), medium: N_("medium"), high: N_("high") };
  return words[tier] ? t(words[tier]) : tier;
}

function summary(k) {
  const p = k.policy || {};
  const b = p.budget || {};
  const parts = [];
  if (p.rpm) parts.push(t("{n} req/min", { n: int(p.rpm) }));
  if (p.tpm) parts.push(t("{n} tok/min", { n: int(p.tpm) }));
  if (b.dayTokens) parts.push(t("{n} tok/day", { n: int(b.dayTokens) }));
  if (b.monthTokens) parts.push(t("{n} tok/month", { n: int(b.monthTokens) }));
  if (b.dayUsd) parts.push(t("{money}/day", { money: money(b.dayUsd) }));
  if (b.monthUsd) parts.push(t("{money}/month", { money: money(b.monthUsd) }));
  if (p.maxTier) parts.push(t("tier ≤ {tier}", { tier: tierWords(p.maxTier) }));
  if (p.allow && p.allow.length) parts.push(t("only {list}", { list: fmtList(p.allow) }));
  if (p.expiresMs) parts.push(t("until {date}", { date: fmtDate(p.expiresMs, { year: "numeric", month: "short", day: "numeric" }) }));
  return parts.length ? parts.join(" · ") : t("no limits");
}

function usageLine(k) {
  const u = k.usage || {};
  const b = (k.policy && k.policy.budget) || {};
  const of = (v, limit, f) => (limit ? t("{used} of {limit}", { used: f(v), limit: f(limit) }) : f(v));
  return t("today {tokens} tokens, {money} · this month {monthTokens} tokens, {monthMoney}", {
    tokens: of(u.dayTokens || 0, b.dayTokens, int),
    money: of(u.dayUsd || 0, b.dayUsd, money),
    monthTokens: of(u.monthTokens || 0, b.monthTokens, int),
    monthMoney: of(u.monthUsd || 0, b.monthUsd, money),
  });
}

const STATES = { active: N_("active"), expired: N_("expired"), disabled: N_("disabled") };

function badge(state) {
  const cls = state === "active" ? "ok" : state === "expired" ? "bad" : "off";
  return el("span", { class: `badge ${cls}`, "data-state": state }, STATES[state] ? t(STATES[state]) : state);
}

export async function renderTeam() {
  let keys;
  try {
    keys = await api("GET", "/admin/keys");
  } catch (e) {
    ctx.showError(e);
    return;
  }
  const fixed = keys.fixed.map((k) => el("li", { class: "key-item" },
    el("div", { class: "grow stack tight" },
      el("span", {}, k.source === "data-dir" ? el("strong", {}, t("generated")) : el("strong", { translate: "no" }, k.label), " ", keep(k.masked), el("span", { class: "muted small" }, " · ",
        k.source === "data-dir" ? tn("from the data directory ({file})", { file: keep("gateway.key") })
          : k.source === "config" ? tn("from the configuration ({label})", { label: keep(k.label) }) : keep(k.from))),
      el("span", { class: "muted small" }, summary(k)))));
  const made = keys.ui.map((k) => el("li", { class: "key-item", "data-key-id": k.id },
    el("div", { class: "grow stack tight" },
      el("span", {}, el("strong", { translate: "no" }, k.label), " ", badge(k.state), " ", keep(k.hint), el("span", { class: "muted small" }, ` · ${t("made {when}", { when: fmtClock(k.createdMs) })}`)),
      el("span", { class: "small", "data-role": "limits" }, summary(k)),
      el("span", { class: "muted small", "data-role": "usage" }, usageLine(k))),
    el("div", { class: "row" },
      el("button", { type: "button", "data-action": "edit", onclick: () => editKey(k) }, t("Limits…")),
      el("button", { type: "button", "data-action": "toggle", onclick: () => toggleKey(k) }, k.policy.disabled ? t("Enable") : t("Disable")),
      el("button", { type: "button", class: "danger", "data-action": "revoke", onclick: async (e) => {
        // Asks in place, no blocking confirm() (the desktop window has none): the first press
        // says what happens, the second does it.
        const b = e.currentTarget;
        if (b.dataset.armed !== "1") {
          b.dataset.armed = "1";
          b.textContent = t("Revoke for good? Clients using it stop at once");
          return;
        }
        try {
          await api("DELETE", `/admin/keys/${encodeURIComponent(k.id)}`);
          ctx.toast(t("Key “{label}” revoked.", { label: k.label }));
        } catch (e) {
          ctx.showError(e);
        }
        renderTeam();
      } }, t("Revoke")))));
  $("key-list").replaceChildren(...fixed, ...made);
  if (!$("new-limits").childElementCount) $("new-limits").append(limitFields("nk"));
  renderUsage();
}

async function toggleKey(k) {
  try {
    await api("PATCH", `/admin/keys/${encodeURIComponent(k.id)}`, { disabled: !k.policy.disabled });
    ctx.toast(k.policy.disabled ? t("Key “{label}” enabled.", { label: k.label }) : t("Key “{label}” disabled.", { label: k.label }));
  } catch (e) {
    ctx.showError(e);
  }
  renderTeam();
}

function editKey(k) {
  const dlg = $("key-dialog");
  $("key-dialog-title").textContent = t("Limits for {label}", { label: k.label });
  $("key-dialog-body").replaceChildren(limitFields("ek", k.policy));
  $("key-dialog-error").textContent = "";
  const form = $("key-dialog-form");
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    clearErrors("ek");
    try {
      await api("PATCH", `/admin/keys/${encodeURIComponent(k.id)}`, readLimits("ek", true));
      dlg.close();
      ctx.toast(t("Limits for “{label}” saved.", { label: k.label }));
      renderTeam();
    } catch (e) {
      fieldError("ek", e, $("key-dialog-error"));
    }
  };
  $("key-dialog-cancel").onclick = () => dlg.close();
  dlg.showModal();
}

async function createKey(ev) {
  ev.preventDefault();
  const label = $("key-label");
  $("e-key-label").textContent = "";
  label.removeAttribute("aria-invalid");
  clearErrors("nk");
  try {
    const body = { label: label.value, ...readLimits("nk", false) };
    const k = await api("POST", "/admin/keys", body);
    label.value = "";
    $("new-limits").replaceChildren(limitFields("nk"));
    $("new-key").replaceChildren(snippet(t("New key for {label} — copy it now, it is not shown again", { label: k.label }), k.key));
    renderTeam();
  } catch (e) {
    if (e instanceof ApiError && e.param && e.param !== "label") {
      $("new-limits-box").open = true;
      fieldError("nk", e, $("e-key-label"));
    } else {
      $("e-key-label").textContent = e.message;
      label.setAttribute("aria-invalid", "true");
    }
  }
}

function usageQuery() {
  const by = $("usage-by").value;
  const span = $("usage-span").value;
  const [bucket, ms] = span === "day" ? ["hour", 86_400_000] : ["day", Number(span) * 86_400_000];
  // Hours and days are this browser's own, as everywhere else on the page.
  const tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  return `by=${by}&bucket=${bucket}&sinceMs=${Date.now() - ms}&tz=${encodeURIComponent(tz)}`;
}

/** A date as an `<input type="date">` value, in this browser's zone. */
function localDate(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
}

async function renderUsage() {
  let u;
  try {
    u = await api("GET", `/admin/usage?${usageQuery()}`);
  } catch (e) {
    ctx.showError(e);
    return;
  }
  const hourly = u.bucketMs < 86_400_000;
  // The locale's own style (12 or 24 hours as it says), in the zone the buckets were cut in.
  // The year only when it is not this one (the table is at most 30 days long, and narrow).
  const thisYear = (ms) => new Date(ms).getFullYear() === new Date().getFullYear();
  const when = (ms) => fmtDateTime(ms, hourly
    ? { timeZone: u.tz, month: "short", day: "numeric", hour: "numeric", minute: "2-digit" }
    : { timeZone: u.tz, year: thisYear(ms) ? undefined : "numeric", month: "short", day: "numeric" });
  const rows = [...u.rows].reverse().map((r) => el("tr", {},
    el("td", {}, when(r.startMs)),
    // Keys made here are "ui:alice" in logs and metrics; here they read as in the list above.
    // The gateway's own generated key is "generated" in the log: said in the page's language.
    r.label === "generated" || r.key === "generated" ? el("td", {}, t("generated")) : el("td", { translate: "no" }, (r.label || r.key || "—").replace(/^ui:/, "")),
    el("td", { class: "num" }, int(r.requests)),
    el("td", { class: "num" }, r.errors ? int(r.errors) : "·"),
    el("td", { class: "num col-failovers" }, r.failovers ? int(r.failovers) : "·"),
    el("td", { class: "num", title: cacheWords(r) }, int(r.inputTokens + r.outputTokens)),
    el("td", { class: "num" }, money(r.costUsd))));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "7", class: "muted" }, t("No requests in this period."))));
  $("usage-rows").replaceChildren(...rows);
  const total = u.total;
  $("usage-total").replaceChildren(el("tr", {},
    el("th", { scope: "row", colspan: "2" }, t("Total")),
    el("td", { class: "num" }, int(total.requests)),
    el("td", { class: "num" }, int(total.errors)),
    el("td", { class: "num col-failovers" }, int(total.failovers)),
    el("td", { class: "num", title: cacheWords(total) }, int(total.inputTokens + total.outputTokens)),
    el("td", { class: "num" }, money(total.costUsd))));
  $("usage-key-head").textContent = u.by === "provider" ? t("Provider") : t("Key");
}

/** Tokens in words, with the prompt-cache share (cost counts it at cache prices). */
function cacheWords(r) {
  const read = r.cacheReadTokens || 0;
  const share = r.inputTokens ? Math.round((100 * read) / r.inputTokens) : 0;
  return t("{input} prompt ({read} read from cache, {share} %; {written} written) + {output} answer tokens", {
    input: int(r.inputTokens), read: int(read), share, written: int(r.cacheWriteTokens || 0), output: int(r.outputTokens),
  });
}

async function downloadCsv() {
  try {
    const r = await api("GET", `/admin/usage?${usageQuery()}&format=csv`, undefined, { raw: true });
    if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => null));
    const blob = new Blob([await r.text()], { type: "text/csv" });
    const a = el("a", { href: URL.createObjectURL(blob), download: `baton-usage-by-${$("usage-by").value}.csv` });
    document.body.append(a);
    a.click();
    a.remove();
  } catch (e) {
    ctx.showError(e);
  }
}

export function initTeam(context) {
  ctx = context;
  $("key-form").addEventListener("submit", createKey);
  $("usage-by").addEventListener("change", renderUsage);
  $("usage-span").addEventListener("change", renderUsage);
  $("usage-csv").addEventListener("click", downloadCsv);
}
