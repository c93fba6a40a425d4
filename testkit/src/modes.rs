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

/// Parses the mode names the `fake-upstream` binary accepts.
pub fn behavior_from_name(name: &str) -> Option<Behavior> {
    Some(match name {
        "ok" => Behavior::Ok,
        "auto" => Behavior::Auto,
        "429" => Behavior::rate_limited(Some(30)),
        "429-no-retry-after" => Behavior::rate_limited(None),
        // A Claude subscription's cap as the API answers it: the unified status rejected, the
        // 5-hour window binding, back in an hour ("claude-cap:SECS": back in that many seconds).
        other if other == "claude-cap" || other.starts_with("claude-cap:") => {
            let secs: u64 = match other.strip_prefix("claude-cap:") {
                Some(n) => n.parse().ok()?,
                None => 3600,
            };
            let reset = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() + secs)
                .unwrap_or_default();
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
                        reset.to_string(),
                    ),
                    (
                        "anthropic-ratelimit-unified-representative-claim".into(),
                        "five_hour".into(),
                    ),
                ],
            }
        }
        // The Codex backend's subscription cap: back in an hour ("usage-limit:SECS": back in
        // that many seconds).
        other if other == "usage-limit" || other.starts_with("usage-limit:") => {
            let secs: u64 = match other.strip_prefix("usage-limit:") {
                Some(n) => n.parse().ok()?,
                None => 3600,
            };
            Behavior::Status {
                status: 429,
                body: json!({"error": {"type": "usage_limit_reached",
                    "message": "The usage limit has been reached", "plan_type": "plus",
                    "resets_in_seconds": secs}}),
                headers: Vec::new(),
            }
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
