//! `GET /admin/statusline?session=ID`: what a client's status line shows (Claude Code runs
//! `baton statusline` with its session's JSON): the provider serving that session (where it
//! was last served, else the first usable one), its binding usage window, and today's
//! estimated cost, as fields and as one short line.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::state::AppState;
use crate::router::affinity::Conversation;

#[derive(Deserialize)]
pub struct StatusQuery {
    /// The client's session id (Claude Code's `session_id`).
    #[serde(default)]
    session: Option<String>,
}

/// Where `session` was last served, by any client key's conversation of that name.
fn served_session(core: &crate::gateway::Core, session: &str) -> Option<String> {
    let conversation = Conversation::named(Some(session), &serde_json::Map::new())?;
    let snap = core.routing.snapshot.load();
    let ttl = snap.routing.affinity.ttl_ms;
    let now = core.routing.clock.now_ms();
    let mut ids: Vec<String> = core.keys.managed().iter().map(|c| c.id.clone()).collect();
    ids.extend(core.keys.fixed().into_iter().map(|(c, _)| c.id.clone()));
    ids.into_iter().find_map(|id| {
        core.routing
            .affinity
            .get(&conversation.of_client(&id), now, ttl)
            .map(|s| s.provider)
    })
}

/// The start of today in the user's zone, in ms.
fn start_of_today(now_ms: i64, tz: &jiff::tz::TimeZone) -> i64 {
    jiff::Timestamp::from_millisecond(now_ms)
        .ok()
        .map(|t| t.to_zoned_datetime(tz.clone()))
        .and_then(|z| z.start_of_day().ok())
        .map(|z| z.timestamp().as_millisecond())
        .unwrap_or(now_ms - now_ms.rem_euclid(86_400_000))
}

pub async fn statusline(
    State(state): State<AppState>,
    super::json::ApiQuery(q): super::json::ApiQuery<StatusQuery>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let session = q
        .session
        .filter(|s| !s.is_empty() && s.len() <= 200)
        .and_then(|s| served_session(core, &s));
    // The gateway's one summary: what `baton status`, the tray and the UI show too.
    let summary = core.summary();
    let now = summary.now_ms;
    let serving = match &session {
        Some(id) => summary.provider(id),
        None => summary.serving_any(),
    };
    let tz = &core.routing.local_tz;
    let usage = serving.and_then(|p| core.routing.usage.headline(&p.id, now, tz, core.locale()));
    // Rows written a moment ago are still in the writer's batch; a status line can do without.
    let cost = core
        .store
        .cost_since(start_of_today(now, tz))
        .unwrap_or(0.0);
    let paused = summary.paused;
    let mut parts = vec!["Baton".to_string()];
    if paused {
        parts.push("paused".into());
    }
    match (serving, &summary.back) {
        (Some(p), _) => parts.push(p.name.clone()),
        (None, Some(b)) => parts.push(format!(
            "nothing available · {} back in {}",
            b.name,
            crate::i18n::duration(b.until_ms - now, crate::i18n::Lang::En)
        )),
        (None, None) => parts.push("nothing available".into()),
    }
    parts.extend(usage.clone());
    parts.push(format!("today ${cost:.2}"));
    Ok(Json(json!({
        "provider": serving.map(|p| &p.id),
        "name": serving.map(|p| &p.name),
        "state": serving.map(|p| p.shown),
        "servable": summary.servable,
        "thisSession": session.is_some(),
        "usage": usage,
        "costTodayUsd": cost,
        "paused": paused,
        "line": parts.join(" · "),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Today" starts at midnight in the user's zone, on a DST day too.
    #[test]
    fn today_starts_at_local_midnight() {
        let ny = jiff::tz::TimeZone::get("America/New_York").unwrap_or(jiff::tz::TimeZone::UTC);
        // 2026-11-01 (DST ends at 02:00 local): 15:00 UTC is 10:00 EST.
        let now = crate::clock::ms("2026-11-01T15:00:00Z");
        assert_eq!(
            start_of_today(now, &ny),
            crate::clock::ms("2026-11-01T04:00:00Z")
        );
        let utc = jiff::tz::TimeZone::UTC;
        let leap = crate::clock::ms("2028-02-29T23:59:59Z");
        assert_eq!(
            start_of_today(leap, &utc),
            crate::clock::ms("2028-02-29T00:00:00Z")
        );
    }
}
