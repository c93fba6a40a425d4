//! `baton status`: asks a running Baton for its routing state and prints providers in routing
//! order — state, cooldown and reset time, share of its limit used, in-flight, last error — as aligned columns
//! (coloured on a terminal) or as stable JSON.

use std::io::IsTerminal;
use std::time::Duration;

use baton::api::views::AdminState;

/// Why the state could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("cannot reach Baton at {url}: {reason}. Is `baton serve` (or the tray app) running? Pass --url if it listens elsewhere.")]
    Unreachable { url: String, reason: String },
    #[error("Baton at {url} refused the admin key ({status}). The key is in admin.key in the data directory; pass --data-dir or --admin-key.")]
    Refused { url: String, status: u16 },
    #[error("cannot read the admin key {path}: {reason}. Pass --data-dir or --admin-key.")]
    Key { path: String, reason: String },
    #[error("unexpected answer from Baton: {0}")]
    Answer(String),
}

/// `GET {url}{path}` on a running Baton with the admin key, as JSON, or `None` when it cannot be
/// had within `timeout` (for answers that are a courtesy: a status line, a hint).
pub async fn admin_json(
    url: &str,
    admin_key: &str,
    path: &str,
    query: &[(&str, &str)],
    timeout: Duration,
) -> Option<serde_json::Value> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().timeout(timeout).build().ok()?;
    let mut endpoint = reqwest::Url::parse(&format!("{}{path}", url.trim_end_matches('/'))).ok()?;
    for (k, v) in query {
        endpoint.query_pairs_mut().append_pair(k, v);
    }
    let resp = client
        .get(endpoint)
        .header("x-admin-key", admin_key)
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    serde_json::from_slice(&resp.bytes().await.ok()?).ok()
}

/// The status line's text from a running Baton (`GET /admin/statusline`), or `None` when it
/// cannot be had within half a second (a status line must never hold up its client).
pub async fn statusline(url: &str, admin_key: &str, session: Option<&str>) -> Option<String> {
    let query: Vec<(&str, &str)> = session.map(|s| ("session", s)).into_iter().collect();
    let v = admin_json(
        url,
        admin_key,
        "/admin/statusline",
        &query,
        Duration::from_millis(500),
    )
    .await?;
    v.get("line")?.as_str().map(str::to_string)
}

/// Fetches `/admin/state`.
pub async fn fetch(url: &str, admin_key: &str) -> Result<AdminState, StatusError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| StatusError::Answer(e.to_string()))?;
    let endpoint = format!("{}/admin/state", url.trim_end_matches('/'));
    let resp = client
        .get(&endpoint)
        .header("x-admin-key", admin_key)
        .send()
        .await
        .map_err(|e| StatusError::Unreachable {
            url: url.to_string(),
            reason: baton::providers::outbound::describe(&e),
        })?;
    let status = resp.status().as_u16();
    if status == 401 || status == 403 {
        return Err(StatusError::Refused {
            url: url.to_string(),
            status,
        });
    }
    let body = resp
        .bytes()
        .await
        .map_err(|e| StatusError::Answer(e.to_string()))?;
    if status != 200 {
        return Err(StatusError::Answer(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        )));
    }
    serde_json::from_slice(&body).map_err(|e| StatusError::Answer(e.to_string()))
}

/// What a login-only provider's line says.
const LOGIN_ONLY: &str =
    "serves only clients that bring their own login (not a request on a gateway key alone)";

/// What `baton status --json` prints: the gateway's own summary (paused, whether a request
/// with a gateway key can be served now — the exit status —, where it goes, the soonest back)
/// and each provider's line.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub paused: bool,
    pub servable: bool,
    pub serving: Option<String>,
    pub serving_login: Option<String>,
    pub back: Option<baton::summary::Back>,
    pub look: baton::summary::Look,
    pub providers: Vec<Row>,
}

impl Summary {
    pub fn of(state: &AdminState) -> Summary {
        let s = &state.summary;
        Summary {
            paused: s.paused,
            servable: s.servable,
            serving: s.serving.clone(),
            serving_login: s.serving_login.clone(),
            back: s.back.clone(),
            look: s.look,
            providers: rows(state),
        }
    }

    /// The lines before the table: paused, or nothing a gateway key can use (and when the
    /// soonest provider is back).
    pub fn headline(&self, now_ms: i64) -> Option<String> {
        let back = self.back.as_ref().map(|b| {
            format!(
                " {} is back in {}.",
                b.provider,
                baton::i18n::duration(b.until_ms - now_ms, baton::i18n::Lang::En)
            )
        });
        if self.paused {
            Some("Routing is paused: every request gets 503 until it is resumed (Resume in the tray or the web UI).\n".into())
        } else if !self.servable && !self.providers.is_empty() {
            let login = match &self.serving_login {
                Some(id) => {
                    format!(" Only clients that bring their own login are served (by {id}).")
                }
                None => String::new(),
            };
            Some(format!(
                "No provider can take a request on a gateway key now.{login}{}\n",
                back.unwrap_or_default()
            ))
        } else {
            None
        }
    }
}

/// One provider's line, as data (the JSON output and the table come from this).
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub id: String,
    pub kind: String,
    /// ready | login-only | cooling | breaker-open | logged-out | unavailable | disabled (the
    /// gateway's own; `login-only`: ready, for clients that bring their own login only)
    pub state: String,
    pub detail: Option<String>,
    /// Whose words the detail is: `provider`, `baton` or `probe`.
    pub said_by: Option<baton::summary::SaidBy>,
    pub reset_at_ms: Option<i64>,
    pub keys_ready: usize,
    pub keys_total: usize,
    /// How much of its limit is used, 0..=1 (the binding window, else the best key's quota).
    pub used: Option<f64>,
    pub in_flight: u64,
    pub max_concurrency: Option<u64>,
    pub last_error: Option<String>,
    /// Each account's limit windows (5-hour, weekly…), the binding one named; a window past
    /// its reset is left out.
    pub usage: Vec<baton::limits::usage::AccountUsage>,
}

/// Turns `/admin/state` into rows, in routing order: each provider's line of the gateway's
/// summary, with its keys and in-flight count.
pub fn rows(state: &AdminState) -> Vec<Row> {
    let now = state.now_ms;
    state
        .summary
        .providers
        .iter()
        .map(|s| {
            let view = state.providers.iter().find(|p| p.id == s.id);
            let usable: Vec<_> = view
                .map(|p| p.keys.iter().filter(|k| !k.missing).collect())
                .unwrap_or_default();
            let st = &s.status;
            let login_only = s.shown == baton::summary::Shown::LoginOnly;
            let detail = match (
                st.class.map(baton::limits::Cause::as_str),
                st.reason.as_deref(),
            ) {
                _ if login_only => Some(LOGIN_ONLY.to_string()),
                (Some("breaker"), Some(r)) => Some(r.to_string()),
                (Some(c), Some(r)) => Some(format!("{c}: {r}")),
                (None, Some(r)) => Some(r.to_string()),
                _ => None,
            };
            Row {
                id: s.id.clone(),
                kind: s.kind.clone(),
                state: s.shown.as_str().to_string(),
                said_by: if login_only { None } else { s.said_by },
                detail,
                reset_at_ms: st.until_ms.filter(|r| *r > now),
                keys_ready: usable.iter().filter(|k| k.cooldown.is_none()).count(),
                keys_total: usable.len(),
                used: s.used,
                in_flight: view.map_or(0, |p| p.in_flight),
                max_concurrency: view.and_then(|p| p.max_concurrency).map(u64::from),
                last_error: view.and_then(|p| p.health.last_error.clone()),
                usage: s.windows.clone(),
            }
        })
        .collect()
}

/// Renders the table; `color` adds ANSI colours to the state column.
pub fn render(rows: &[Row], now_ms: i64, color: bool) -> String {
    let local = jiff::tz::TimeZone::system();
    let today = jiff::Timestamp::from_millisecond(now_ms)
        .unwrap_or_default()
        .to_zoned_datetime(local.clone())
        .date();
    // A time today as a time; another day's with its date ("cooling until 2026-12-13 23:19").
    let when = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms)
            .map(|t| {
                let z = t.to_zoned_datetime(local.clone());
                let format = if z.date() == today {
                    "%H:%M:%S"
                } else {
                    "%Y-%m-%d %H:%M"
                };
                z.strftime(format).to_string()
            })
            .unwrap_or_default()
    };
    let mut table: Vec<[String; 6]> = vec![[
        "PROVIDER".into(),
        "STATE".into(),
        "KEYS".into(),
        "USED".into(),
        "IN-FLIGHT".into(),
        "DETAIL".into(),
    ]];
    for r in rows {
        let state = match r.reset_at_ms {
            Some(ms) => format!(
                "{} until {} (in {})",
                r.state,
                when(ms),
                baton::i18n::duration(ms - now_ms, baton::i18n::Lang::En)
            ),
            None => r.state.clone(),
        };
        let keys = if r.keys_total == 0 {
            "-".to_string()
        } else {
            format!("{}/{}", r.keys_ready, r.keys_total)
        };
        let used = r
            .used
            .map(|q| format!("{:.0} %", q * 100.0))
            .unwrap_or_else(|| "-".into());
        let in_flight = match r.max_concurrency {
            Some(m) => format!("{}/{m}", r.in_flight),
            None => r.in_flight.to_string(),
        };
        let detail = r
            .detail
            .clone()
            .or_else(|| r.last_error.clone().map(|e| format!("last error: {e}")))
            .unwrap_or_default();
        let detail: String = detail.chars().take(100).collect();
        table.push([r.id.clone(), state, keys, used, in_flight, detail]);
    }
    let code = |row: usize| match rows[row].state.as_str() {
        "ready" => "32",
        "login-only" => "36",
        "cooling" | "breaker-open" => "33",
        "disabled" => "90",
        _ => "31",
    };
    let table: Vec<Vec<String>> = table.into_iter().map(Vec::from).collect();
    super::table::render(
        &table,
        color.then_some((1, &code as &dyn Fn(usize) -> &'static str)),
    )
}

/// The usage windows under the table: one line per window, with a bar, the share used, the
/// reset and which window binds ("" when no provider reported any).
pub fn render_windows(rows: &[Row], now_ms: i64) -> String {
    let tz = jiff::tz::TimeZone::system();
    let mut table: Vec<Vec<String>> = vec![vec![
        "PROVIDER".into(),
        "ACCOUNT".into(),
        "WINDOW".into(),
        "USED".into(),
        "".into(),
        "RESETS".into(),
        "".into(),
    ]];
    for r in rows {
        for a in &r.usage {
            for w in &a.windows {
                let used = w.used_or_status();
                let filled = (used * 10.0).round() as usize;
                let bar = format!(
                    "{}{}",
                    "█".repeat(filled.min(10)),
                    "░".repeat(10 - filled.min(10))
                );
                let pct = match (w.used, w.status) {
                    (Some(u), _) => format!("{:.0} %", u * 100.0),
                    (None, baton::limits::windows::WindowStatus::Rejected) => "spent".into(),
                    (None, _) => "?".into(),
                };
                let resets = w
                    .resets_at_ms
                    .map(|ms| {
                        baton::limits::clock_time(ms, &tz, now_ms, baton::i18n::Locale::ENGLISH)
                    })
                    .unwrap_or_else(|| "-".into());
                let mut note = Vec::new();
                if a.binding.as_deref() == Some(w.id.as_str()) {
                    note.push("binding".to_string());
                    if let Some(at) = a.caps_at_ms {
                        note.push(format!(
                            "runs out at {} at this rate",
                            baton::limits::clock_time(
                                at,
                                &tz,
                                now_ms,
                                baton::i18n::Locale::ENGLISH
                            )
                        ));
                    }
                }
                // "" is a CLI's own login, or a provider without keys.
                let account = match (a.account.is_empty(), is_cli(&r.kind)) {
                    (false, _) => a.account.clone(),
                    (true, true) => "login".to_string(),
                    (true, false) => "-".to_string(),
                };
                table.push(vec![
                    r.id.clone(),
                    account,
                    w.label.clone(),
                    pct,
                    bar,
                    resets,
                    note.join(", "),
                ]);
            }
        }
    }
    if table.len() == 1 {
        return String::new();
    }
    format!("\nUsage windows\n{}", super::table::render(&table, None))
}

/// Whether to colour: a terminal, and `NO_COLOR` unset.
pub fn use_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Whether a provider of the kind named `kind` runs a subscription CLI (with its own login).
fn is_cli(kind: &str) -> bool {
    baton::config::ProviderKind::named(kind).is_some_and(|k| k.is_cli())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, reset_at_ms: Option<i64>) -> Row {
        Row {
            id: id.into(),
            kind: "openai-compatible".into(),
            state: "cooling".into(),
            detail: None,
            reset_at_ms,
            keys_ready: 0,
            keys_total: 1,
            used: None,
            said_by: None,
            in_flight: 0,
            max_concurrency: None,
            last_error: None,
            usage: Vec::new(),
        }
    }

    #[test]
    fn a_reset_today_is_a_time_and_one_days_away_has_its_date() {
        let local = jiff::tz::TimeZone::system();
        // Noon today, local: a minute later is today whatever the zone.
        let noon = jiff::Timestamp::now()
            .to_zoned_datetime(local.clone())
            .date()
            .at(12, 0, 0, 0)
            .to_zoned_datetime(local)
            .unwrap()
            .timestamp()
            .as_millisecond();
        let soon = noon + 60_000;
        let far = noon + 8 * 86_400_000;
        let out = render(
            &[row("soon", Some(soon)), row("far", Some(far))],
            noon,
            false,
        );
        let line = |id: &str| out.lines().find(|l| l.starts_with(id)).unwrap().to_string();
        assert!(
            line("soon").contains("cooling until 12:01:00 (in 1 min)"),
            "{out}"
        );
        assert!(
            line("far").contains("cooling until ")
                && line("far").matches('-').count() >= 2
                && line("far").contains("(in 8 d 0 h)"),
            "{out}"
        );
    }
}
