//! Error classification: structured fields first (HTTP status, the provider's error
//! `type`/`code`/`status`/`details`), message text second. Covers OpenAI, Anthropic, Gemini,
//! OpenRouter, Groq, Cerebras, Mistral and the subscription CLIs' output.

use http::HeaderMap;
use serde_json::Value;

use super::classified::Classified;
use super::reset::{self, ResetContext};
use crate::verdict::ErrorClass;

/// The fields of an error body that decide its class.
#[derive(Default)]
struct Fields {
    etype: String,
    code: String,
    status: String,
    reasons: Vec<String>,
    quota_ids: Vec<String>,
    message: String,
}

fn fields(v: &Value) -> Fields {
    let err = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
    let s = |k: &str| match err.get(k) {
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let mut f = Fields {
        etype: s("type"),
        code: s("code"),
        status: s("status"),
        message: err
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| v.get("message").and_then(Value::as_str))
            .or_else(|| v.get("Message").and_then(Value::as_str))
            .or_else(|| err.as_str())
            .unwrap_or_default()
            .to_string(),
        ..Fields::default()
    };
    for d in err
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(r) = d.get("reason").and_then(Value::as_str) {
            f.reasons.push(r.to_ascii_uppercase());
        }
        for viol in d
            .get("violations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(q) = viol.get("quotaId").and_then(Value::as_str) {
                f.quota_ids.push(q.to_string());
            }
        }
    }
    f
}

/// Classifies an HTTP error answer. `ctx` fixes "now" and the zones for reset times.
pub fn classify_http(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    ctx: &ResetContext,
) -> Classified {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let mut f = json.as_ref().map(fields).unwrap_or_else(|| Fields {
        message: String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned(),
        ..Fields::default()
    });
    // AWS names its exception in a header (`ThrottlingException:http://internal…`).
    if f.etype.is_empty() {
        if let Some(t) = headers
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
        {
            f.etype = t.split(':').next().unwrap_or_default().to_ascii_lowercase();
        }
    }
    let lower = f.message.to_ascii_lowercase();
    let has = |w: &[&str]| w.iter().any(|x| lower.contains(x));

    let context_length = f.code == "context_length_exceeded"
        || has(&[
            "maximum context length",
            "context window",
            "prompt is too long",
            "context_length_exceeded",
            "too many tokens in the prompt",
        ]);
    // "Request too large … on tokens per min (TPM): Limit 6000, Requested 9000": the request
    // alone exceeds the per-minute limit. Waiting does not help, so it is not a rate limit.
    let too_large = requested_over_limit(&lower);
    // "You have reached your specified API usage limits. You will regain access on …": a
    // spending limit the account set, whatever the status says.
    let usage_cap = has(&[
        "reached your specified api usage limits",
        "will regain access on",
    ]);

    let class = structured_class(&f, too_large, usage_cap, context_length, &has)
        .unwrap_or_else(|| class_by_status(status, &has));
    let reset_at_ms = reset_of(class, headers, json.as_ref(), &f, ctx);
    Classified {
        class,
        reason: format!(
            "HTTP {status}: {}{}",
            subscription_cap(headers, &f).unwrap_or_default(),
            super::classified::truncate(f.message.trim(), 240)
        ),
        reset_at_ms,
        context_length: context_length && class == ErrorClass::Request,
        per_model: f.quota_ids.iter().any(|q| q.contains("PerModel"))
            || has(&["for model", "on model", "for this model", "on this model"]),
        timeout: false,
        too_large,
    }
}

/// A subscription's cap in words: a Claude plan's (`anthropic-ratelimit-unified-status:
/// rejected`, with the window its representative claim names) or a ChatGPT plan's (the Codex
/// backend's `usage_limit_reached`).
fn subscription_cap(headers: &HeaderMap, f: &Fields) -> Option<String> {
    let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    if f.etype == "usage_limit_reached" || f.code == "usage_limit_reached" {
        return Some("subscription limit reached: ".into());
    }
    if get("anthropic-ratelimit-unified-status") != Some("rejected") {
        return None;
    }
    let window = match get("anthropic-ratelimit-unified-representative-claim") {
        Some("five_hour") => " (5-hour window)",
        Some("seven_day" | "seven_day_opus" | "seven_day_sonnet") => " (weekly)",
        _ => "",
    };
    Some(format!("subscription limit reached{window}: "))
}

/// The class an error body states in its own fields (type, code, status, reasons), most
/// specific first; `None` when it states none and the status decides.
fn structured_class(
    f: &Fields,
    too_large: bool,
    usage_cap: bool,
    context_length: bool,
    has: &dyn Fn(&[&str]) -> bool,
) -> Option<ErrorClass> {
    if too_large {
        Some(ErrorClass::Request)
    } else if usage_cap || f.code == "insufficient_quota" || f.etype == "insufficient_quota" {
        Some(ErrorClass::Billing)
    } else if let Some(class) = aws_class(&f.etype, has) {
        Some(class)
    } else if f
        .reasons
        .iter()
        .any(|r| r == "API_KEY_INVALID" || r == "API_KEY_EXPIRED")
        || f.code == "invalid_api_key"
        || f.etype == "authentication_error"
        || f.etype == "permission_error"
    {
        Some(ErrorClass::Auth)
    } else if f.status == "resource_exhausted"
        || f.etype == "rate_limit_error"
        || f.code == "rate_limit_exceeded"
        || f.etype == "too_many_requests_error"
        || f.code == "request_quota_exceeded"
    {
        Some(ErrorClass::Rate)
    } else if f.etype == "overloaded_error" {
        Some(ErrorClass::Overloaded)
    } else if f.code == "content_policy_violation" || f.code == "content_filter" {
        Some(ErrorClass::ContentPolicy)
    } else if f.code == "model_not_found" || f.etype == "not_found_error" && has(&["model"]) {
        Some(ErrorClass::Model)
    } else if context_length {
        Some(ErrorClass::Request)
    } else {
        None
    }
}

/// The class of an AWS exception (Bedrock's), by its name.
fn aws_class(etype: &str, has: &dyn Fn(&[&str]) -> bool) -> Option<ErrorClass> {
    Some(match etype {
        "throttlingexception" | "servicequotaexceededexception" => ErrorClass::Rate,
        "serviceunavailableexception" | "modelnotreadyexception" => ErrorClass::Overloaded,
        "modeltimeoutexception" | "internalserverexception" | "modelerrorexception" => {
            ErrorClass::Transient
        }
        // "You don't have access to the model with the specified model ID.": that model only.
        "accessdeniedexception" if has(&["model"]) => ErrorClass::Model,
        "accessdeniedexception"
        | "unrecognizedclientexception"
        | "invalidsignatureexception"
        | "expiredtokenexception"
        | "missingauthenticationtokenexception"
        | "incompletesignatureexception" => ErrorClass::Auth,
        "resourcenotfoundexception" => ErrorClass::Model,
        "validationexception" if has(&["model identifier is invalid", "model id"]) => {
            ErrorClass::Model
        }
        _ => return None,
    })
}

/// The class from the HTTP status, with the message's words where a status is ambiguous.
fn class_by_status(status: u16, has: &dyn Fn(&[&str]) -> bool) -> ErrorClass {
    match status {
        402 => ErrorClass::Billing,
        _ if has(&[
            "credit balance is too low",
            "check your plan and billing",
            "insufficient balance",
            "insufficient credits",
        ]) =>
        {
            ErrorClass::Billing
        }
        429 => ErrorClass::Rate,
        401 => ErrorClass::Auth,
        // A provider's proxy asking for a login it lacks (`proxyLogin`): the provider cannot be
        // reached as configured, whatever the request.
        407 => ErrorClass::Auth,
        403 if has(&["quota", "rate limit"]) => ErrorClass::Rate,
        403 => ErrorClass::Auth,
        404 => ErrorClass::Model,
        400 if has(&[
            "model not found",
            "does not exist",
            "decommissioned",
            "not a valid model",
            "no such model",
        ]) =>
        {
            ErrorClass::Model
        }
        408 => ErrorClass::Transient,
        503 if has(&["overload", "capacity", "unavailable"]) => ErrorClass::Overloaded,
        529 => ErrorClass::Overloaded,
        503 => ErrorClass::Overloaded,
        500..=599 => ErrorClass::Transient,
        _ if has(&[
            "safety system",
            "content policy",
            "content management policy",
        ]) =>
        {
            ErrorClass::ContentPolicy
        }
        _ => ErrorClass::Request,
    }
}

/// When a rate, overload or billing limit ends: the headers, then the body's fields, then its
/// words, then (rate limits) the window its quota names.
fn reset_of(
    class: ErrorClass,
    headers: &HeaderMap,
    json: Option<&Value>,
    f: &Fields,
    ctx: &ResetContext,
) -> Option<i64> {
    if !matches!(
        class,
        ErrorClass::Rate | ErrorClass::Overloaded | ErrorClass::Billing
    ) {
        return None;
    }
    reset::from_headers(headers, ctx.now_ms)
        .or_else(|| json.and_then(|v| reset::from_body(v, ctx.now_ms)))
        .or_else(|| {
            if class == ErrorClass::Billing {
                reset::regain_access(&f.message)
            } else {
                reset::from_text(&f.message, ctx)
            }
        })
        .or_else(|| {
            if class != ErrorClass::Rate {
                return None;
            }
            let words = format!("{} {} {}", f.quota_ids.join(" "), f.etype, f.message);
            reset::from_window(&words, ctx)
        })
}

/// Whether a (lower-cased) message says the request asked for more than the limit itself:
/// "… Limit 6000, Requested 9000 …" with the requested amount above the limit.
fn requested_over_limit(lower: &str) -> bool {
    let number_after = |marker: &str| -> Option<u64> {
        let i = lower.find(marker)? + marker.len();
        let digits: String = lower[i..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    matches!(
        (number_after("limit "), number_after("requested ")),
        (Some(limit), Some(requested)) if requested > limit
    )
}

/// Classifies what a subscription CLI printed when it failed: JSON event lines (Claude's
/// `rate_limit_event` / `result`, Codex's `turn.failed` / `error`, Gemini's `error`) or plain text.
pub fn classify_cli(output: &str, exit_code: Option<i32>, ctx: &ResetContext) -> Classified {
    let CliSignals {
        texts,
        mut reset_at_ms,
        api_status,
    } = cli_signals(output);
    let text = texts.join("\n");
    let lower = text.to_ascii_lowercase();
    let has = |w: &[&str]| w.iter().any(|x| lower.contains(x));
    let class = cli_class(&has, exit_code, api_status);
    if class == ErrorClass::Rate && reset_at_ms.is_none() {
        reset_at_ms = reset::from_text(&text, ctx).or_else(|| reset::from_window(&text, ctx));
    }
    let first = texts.first().map(String::as_str).unwrap_or("no output");
    Classified {
        class,
        reason: super::classified::truncate(first, 240).to_string(),
        reset_at_ms,
        context_length: false,
        // Gemini CLI: "You have exhausted your daily quota on this model."
        per_model: has(&["on this model", "for this model"]),
        timeout: false,
        too_large: false,
    }
}

/// What a failed CLI's output says: its messages, a reset instant and an API status, from the
/// JSON event lines (Claude's `rate_limit_event` / `result`, Codex's `turn.failed` / `error`,
/// Gemini's `result`), with every other non-empty line kept as text.
struct CliSignals {
    texts: Vec<String>,
    reset_at_ms: Option<i64>,
    api_status: Option<u16>,
}

fn cli_signals(output: &str) -> CliSignals {
    let mut texts: Vec<String> = Vec::new();
    let mut reset_at_ms = None;
    let mut api_status: Option<u16> = None;
    for line in output.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            if !line.trim().is_empty() {
                texts.push(line.trim().to_string());
            }
            continue;
        };
        match v.get("type").and_then(Value::as_str).unwrap_or_default() {
            "rate_limit_event" => {
                let info = v.get("rate_limit_info").unwrap_or(&Value::Null);
                if info.get("status").and_then(Value::as_str) == Some("rejected") {
                    reset_at_ms = info
                        .get("resetsAt")
                        .and_then(Value::as_i64)
                        .map(|s| s * 1000);
                    api_status.get_or_insert(429);
                }
            }
            "result" if v.get("is_error").and_then(Value::as_bool) == Some(true) => {
                if let Some(s) = v.get("api_error_status").and_then(Value::as_u64) {
                    api_status = Some(s as u16);
                }
                if let Some(r) = v.get("result").and_then(Value::as_str) {
                    texts.push(r.to_string());
                }
            }
            // Gemini CLI: {"type":"result","status":"error","error":{"message":…}}
            "result" if v.get("status").and_then(Value::as_str) == Some("error") => {
                if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
                    texts.push(m.to_string());
                }
            }
            "turn.failed" | "error" => {
                let msg = v
                    .pointer("/error/message")
                    .or_else(|| v.get("message"))
                    .and_then(Value::as_str);
                if let Some(m) = msg {
                    texts.push(m.to_string());
                }
            }
            _ => {}
        }
    }
    CliSignals {
        texts,
        reset_at_ms,
        api_status,
    }
}

/// The class from the CLI's words, its exit code (Gemini CLI: 41 is auth, 173 is HTTP 429 mod 256) and the
/// API status it reported.
fn cli_class(
    has: &dyn Fn(&[&str]) -> bool,
    exit_code: Option<i32>,
    api_status: Option<u16>,
) -> ErrorClass {
    if has(&[
        "not logged in",
        "please run /login",
        "set an auth method",
        "invalid api key",
        "authentication_error",
        "please login",
        "run `codex login`",
        "incorrect api key",
        "401 unauthorized",
    ]) || exit_code == Some(41)
    {
        ErrorClass::Auth
    } else if has(&[
        "quota exceeded. check your plan and billing",
        "credit balance is too low",
    ]) {
        ErrorClass::Billing
    } else if api_status == Some(429)
        || has(&[
            "usage limit",
            "session limit",
            "weekly limit",
            "limit reached",
            "exhausted your",
            "rate limit",
            "quota will reset",
            "hit your limit",
        ])
        || exit_code == Some(173)
    {
        ErrorClass::Rate
    } else if has(&["overloaded", "529", "capacity"]) || api_status == Some(529) {
        ErrorClass::Overloaded
    } else {
        ErrorClass::Transient
    }
}
