//! A failure in words the client's SDK expects: the router's `Failure` as an API error, a
//! provider's own refusal relayed, each candidate's last state, an unknown model.

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::error::ApiError;
use crate::router::snapshot::ResolveError;
use crate::router::Failure;

/// Passes an upstream's own 4xx through when it is already an OpenAI error; wraps it otherwise.
/// A provider's refusal of the request, relayed: its message, parameter and (when they are
/// plain identifiers) its own type and code.
fn relayed_error(status: u16, body: &[u8]) -> ApiError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(500)]).into_owned());
    let param = parsed.as_ref().and_then(|v| {
        v.pointer("/error/param")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let code = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/code").and_then(Value::as_str))
        .map(|c| {
            if c == "context_length_exceeded" {
                "context_length_exceeded"
            } else {
                "upstream_rejected"
            }
        })
        .unwrap_or("upstream_rejected");
    let code = if status == 413 {
        "request_too_large"
    } else {
        code
    };
    let st = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut e = ApiError::new(st, "invalid_request_error", code, message);
    e.param = param;
    // The provider's own type and code, when they are plain identifiers (a 413 keeps
    // Baton's code: the provider's may call it a rate limit, which no wait fixes).
    let ident = |p: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.pointer(p))
            .and_then(Value::as_str)
            .filter(|s| {
                !s.is_empty()
                    && s.len() <= 64
                    && s.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
            })
            .map(str::to_string)
    };
    if let Some(t) = ident("/error/type") {
        e.relayed = Some((t, ident("/error/code").filter(|_| status != 413)));
    }
    e
}

/// From this long a wait on, every candidate being rate-limited is answered as a usage limit
/// the client shows with its reset time (Claude Code and Codex retry a rate limit silently, for
/// as long as it lasts); a shorter wait stays a rate limit the client retries by itself.
pub const LONG_WAIT_SECS: u64 = 300;

pub(super) fn failure_to_error(f: Failure, now_ms: i64) -> (u16, ApiError) {
    match f {
        Failure::Client { status, body } => (status, relayed_error(status, &body)),
        Failure::Exhausted { retry_at_ms: Some(at), summary } => {
            let secs = ((at - now_ms).max(0) as u64).div_ceil(1000);
            let mut e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "all_providers_rate_limited",
                format!("Every candidate provider is rate-limited; the soonest is back in {secs} s. {summary}"),
            )
            .retry_after(secs);
            // A wait this long is a usage limit to the user, not a retry for the client.
            if secs >= LONG_WAIT_SECS {
                e.limit_reset = Some(at.div_euclid(1000) + i64::from(at % 1000 != 0));
            }
            (429, e)
        }
        Failure::Unavailable { retry_at_ms, summary } => {
            let secs = ((retry_at_ms - now_ms).max(0) as u64).div_ceil(1000);
            let e = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded_error",
                "all_providers_unavailable",
                format!("Every candidate provider is unavailable for now; the soonest is back in {secs} s. {summary}"),
            )
            .retry_after(secs);
            (503, e)
        }
        Failure::Exhausted { retry_at_ms: None, summary } => (
            502,
            ApiError::new(StatusCode::BAD_GATEWAY, "upstream_error", "all_providers_failed", format!("Every candidate provider failed: {summary}")),
        ),
        Failure::NoProvider(m) => (503, ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "service_unavailable", "no_provider", m)),
        Failure::Unsupported(m) => {
            let mut e = ApiError::invalid("messages", m);
            e.code = "unsupported_request";
            (400, e)
        }
        Failure::ThreadNotFound(m) => {
            let mut e = ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "thread_not_found", m);
            e.details = Some(serde_json::json!({"error_code": "thread_not_found"}));
            (404, e)
        }
        Failure::NoStoredConversation(m) => {
            let mut e = ApiError::invalid("previous_response_id", m);
            e.code = "previous_response_not_found";
            (400, e)
        }
        Failure::Busy { retry_after_ms, message } => (
            429,
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", "gateway_busy", message).retry_after(retry_after_ms.div_ceil(1000)),
        ),
        Failure::Deadline(ms) => (
            504,
            ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout_error",
                "deadline_exceeded",
                format!("No provider answered within the request deadline ({ms} ms, routing.requestTimeoutMs)."),
            ),
        ),
    }
}

/// Each candidate's last state, for the body of a 429/502 when routing gave up.
pub(super) fn candidates(attempts: &[crate::store::AttemptRecord]) -> Value {
    let mut seen: Vec<(String, Value)> = Vec::new();
    for a in attempts {
        let target = format!("{}/{}", a.provider, a.model);
        let v = json!({"target": target, "state": a.class, "status": a.status, "reason": a.reason,
            "resetAt": a.reset_at_ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()).map(|t| t.to_string())});
        match seen.iter_mut().find(|(t, _)| *t == target) {
            Some(slot) => slot.1 = v,
            None => seen.push((target, v)),
        }
    }
    Value::Array(seen.into_iter().map(|(_, v)| v).collect())
}

/// Why a model name leads nowhere, as the client's error: 404 for a name the gateway does not
/// know, 503 for a provider that is switched off.
pub(crate) fn resolve_error(e: ResolveError) -> ApiError {
    match e {
        ResolveError::UnknownModel { .. } => {
            let mut err = ApiError::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "model_not_found",
                e.to_string(),
            );
            err.param = Some("model".into());
            err
        }
        ResolveError::Disabled(m) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "provider_disabled",
            m,
        ),
    }
}
