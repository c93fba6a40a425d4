//! The mode names the `fake-upstream` binary and the `/_script` control endpoint accept.

use serde_json::json;

use crate::Behavior;

/// An answer carrying the Codex backend's usage windows: the 5-hour one `n` % used, the weekly
/// one 31 % (mode "codex-used:N").
fn codex_used(n: f64) -> Behavior {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    Behavior::OkHeaders(vec![
        ("x-codex-primary-used-percent".into(), n.to_string()),
        ("x-codex-primary-window-minutes".into(), "300".into()),
        ("x-codex-primary-reset-at".into(), (now + 7200).to_string()),
        ("x-codex-secondary-used-percent".into(), "31".into()),
        ("x-codex-secondary-window-minutes".into(), "10080".into()),
        (
            "x-codex-secondary-reset-at".into(),
            (now + 3 * 86_400).to_string(),
        ),
    ])
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A Claude subscription's cap as the API answers it: the unified status rejected, the
/// 5-hour window binding, back in `secs`.
fn claude_cap(secs: u64) -> Behavior {
    Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "This request would exceed your account's rate limit. Please try again later."}}),
        headers: vec![
            (
                "anthropic-ratelimit-unified-status".into(),
                "rejected".into(),
            ),
            (
                "anthropic-ratelimit-unified-reset".into(),
                (unix_now() + secs).to_string(),
            ),
            (
                "anthropic-ratelimit-unified-representative-claim".into(),
                "five_hour".into(),
            ),
        ],
    }
}

/// A Claude subscription past its window, served from paid extra usage: the answer comes
/// (200) with the unified status rejected and the overage allowed and in use (the headers
/// Claude Code 2.1.197 reads), the window back in an hour.
fn claude_overage() -> Behavior {
    let reset = (unix_now() + 3600).to_string();
    Behavior::OkHeaders(vec![
        (
            "anthropic-ratelimit-unified-status".into(),
            "rejected".into(),
        ),
        ("anthropic-ratelimit-unified-reset".into(), reset.clone()),
        (
            "anthropic-ratelimit-unified-representative-claim".into(),
            "five_hour".into(),
        ),
        (
            "anthropic-ratelimit-unified-overage-status".into(),
            "allowed".into(),
        ),
        (
            "anthropic-ratelimit-unified-overage-in-use".into(),
            "true".into(),
        ),
        (
            "anthropic-ratelimit-unified-5h-utilization".into(),
            "1.0".into(),
        ),
        ("anthropic-ratelimit-unified-5h-reset".into(), reset),
    ])
}

/// The Codex backend's subscription cap, back in `secs`.
fn usage_limit(secs: u64) -> Behavior {
    Behavior::Status {
        status: 429,
        body: json!({"error": {"type": "usage_limit_reached",
            "message": "The usage limit has been reached", "plan_type": "plus",
            "resets_in_seconds": secs}}),
        headers: Vec::new(),
    }
}

/// The Gemini API's free-tier daily quota, as it answers it (the fixture
/// `gemini-429-per-day-pacific-midnight`): back at midnight in Mountain View.
fn gemini_daily_quota() -> Behavior {
    Behavior::Status {
        status: 429,
        body: json!({"error": {"code": 429, "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
            "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                    "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                    "quotaDimensions": {"location": "global", "model": "gemini-2.5-pro"}, "quotaValue": "100"}]}]}}),
        headers: Vec::new(),
    }
}

/// Parses the mode names the `fake-upstream` binary accepts.
pub fn behavior_from_name(name: &str) -> Option<Behavior> {
    Some(match name {
        "ok" => Behavior::Ok,
        "auto" => Behavior::Auto,
        "429" => Behavior::rate_limited(Some(30)),
        // A rate limit with that many seconds in Retry-After ("429:600").
        other if other.starts_with("429:") => {
            Behavior::rate_limited(Some(other["429:".len()..].parse().ok()?))
        }
        "429-no-retry-after" => Behavior::rate_limited(None),
        // A Claude subscription's cap as the API answers it, back in an hour
        // ("claude-cap:SECS": back in that many seconds).
        "claude-cap" => claude_cap(3600),
        other if other.starts_with("claude-cap:") => {
            claude_cap(other["claude-cap:".len()..].parse().ok()?)
        }
        "claude-overage" => claude_overage(),
        "gemini-daily-quota" => gemini_daily_quota(),
        // The Codex backend's subscription cap, back in an hour ("usage-limit:SECS").
        "usage-limit" => usage_limit(3600),
        other if other.starts_with("usage-limit:") => {
            usage_limit(other["usage-limit:".len()..].parse().ok()?)
        }
        other if other.starts_with("codex-used:") => {
            codex_used(other["codex-used:".len()..].parse().ok()?)
        }
        "500" => Behavior::status(500),
        "503" => Behavior::status(503),
        "400" => Behavior::status(400),
        "401" => Behavior::status(401),
        "reset" => Behavior::Reset,
        "stream-dies" => Behavior::StreamDies(2),
        "stream-malformed" => Behavior::StreamMalformed(2),
        "hang" => Behavior::Hang,
        "thinks" => Behavior::Thinks(300),
        // "delay:MS": the answer after that many milliseconds (a slow first token).
        other if other.starts_with("delay:") => {
            Behavior::Delay(other["delay:".len()..].parse().ok()?)
        }
        "tool" => Behavior::ToolCall {
            name: "get_weather".into(),
            arguments: "{\"city\":\"Paris\"}".into(),
        },
        other if other.starts_with("stream:") => {
            // "stream:N" streams N content chunks back to back (the benchmark's stream shape).
            let chunks = other["stream:".len()..].parse().ok()?;
            Behavior::SlowStream {
                chunks,
                delay_ms: 0,
            }
        }
        // "text:WORDS" answers with exactly those words.
        other if other.starts_with("text:") => Behavior::Text(other["text:".len()..].to_string()),
        other => {
            // "tool:NAME:{json arguments}" answers with that tool call.
            let rest = other.strip_prefix("tool:")?;
            let (name, args) = rest.split_once(':')?;
            Behavior::ToolCall {
                name: name.to_string(),
                arguments: args.to_string(),
            }
        }
    })
}

impl Behavior {
    pub fn status(status: u16) -> Self {
        Behavior::Status {
            status,
            body: json!({"error": {"message": format!("fake error {status}"), "type": "fake", "code": null}}),
            headers: Vec::new(),
        }
    }

    pub fn rate_limited(retry_after_secs: Option<u64>) -> Self {
        Behavior::Status {
            status: 429,
            body: json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}),
            headers: retry_after_secs
                .map(|s| vec![("retry-after".to_string(), s.to_string())])
                .unwrap_or_default(),
        }
    }
}
