//! Usage windows: every header set and CLI event in the table gives its windows and binding
//! window; a subscription stepping 50 → 81 → 96 % → cap → reset notifies once per threshold and
//! once back; `/admin/state`, `/metrics` and `baton status` show the windows; forecast routing
//! moves traffic before a cap and a reserve holds for pinned requests; an account that resets
//! early is back at the next signal.

use std::sync::Arc;

use crate::common::*;
use baton::clock::{Clock, ManualClock};
use baton::events::Event;
use baton::limits::windows::{binding, from_cli_event, from_headers};
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ms(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

fn headers_of(v: &Value) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    for (k, v) in v.as_object().into_iter().flatten() {
        h.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.as_str().unwrap().parse().unwrap(),
        );
    }
    h
}

#[test]
fn every_header_set_and_cli_event_gives_its_windows() {
    let table = fixture("usage-windows.json");
    let shared = fixture("limit-messages.json");
    let mut failures = Vec::new();
    for c in table["cases"].as_array().unwrap() {
        let id = c["id"].as_str().unwrap();
        let windows = if let Some(f) = c.get("fixture").and_then(Value::as_str) {
            let s = shared["cases"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["id"] == f)
                .unwrap_or_else(|| panic!("{id}: no shared fixture {f}"));
            from_headers(&headers_of(&s["headers"]), ms(s["now"].as_str().unwrap()))
        } else if let Some(h) = c.get("headers") {
            from_headers(&headers_of(h), ms(c["now"].as_str().unwrap()))
        } else if let Some(sample) = c.get("cliSample").and_then(Value::as_str) {
            let path = format!("{}/tests/fixtures/cli/{sample}", env!("CARGO_MANIFEST_DIR"));
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|v| from_cli_event(&v))
                .collect()
        } else if let Some(sample) = c.get("appServer").and_then(Value::as_str) {
            let path = format!("{}/tests/fixtures/cli/{sample}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path).unwrap();
            let answer: Value = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["id"] == 2)
                .unwrap();
            baton::providers::cli::limits::from_app_server(&answer)
        } else {
            from_cli_event(&c["cliLine"]).into_iter().collect()
        };
        let want = c["expect"].as_array().unwrap();
        let mut ok = windows.len() == want.len();
        for (w, e) in windows.iter().zip(want) {
            ok &= w.id == e["id"].as_str().unwrap()
                && w.label == e["label"].as_str().unwrap()
                && (w.used.unwrap_or(-1.0) - e["used"].as_f64().unwrap()).abs() < 1e-6
                && w.resets_at_ms == e["resetsAt"].as_i64()
                && serde_json::to_value(w.status).unwrap() == e["status"];
        }
        let bind = binding(&windows).map(|w| w.id.clone());
        ok &= bind.as_deref() == c["binding"].as_str();
        if !ok {
            failures.push(format!("{id}: got {windows:?}, binding {bind:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub(crate) const ALICE: &str = "sk-ant-oat01-alice-usage-token";

pub(crate) fn unified(used: f64, reset_s: i64, status: &str) -> Vec<(String, String)> {
    vec![
        ("anthropic-ratelimit-unified-status".into(), status.into()),
        (
            "anthropic-ratelimit-unified-reset".into(),
            reset_s.to_string(),
        ),
        (
            "anthropic-ratelimit-unified-representative-claim".into(),
            "five_hour".into(),
        ),
        (
            "anthropic-ratelimit-unified-5h-utilization".into(),
            used.to_string(),
        ),
        (
            "anthropic-ratelimit-unified-5h-reset".into(),
            reset_s.to_string(),
        ),
        (
            "anthropic-ratelimit-unified-7d-utilization".into(),
            "0.2".into(),
        ),
        (
            "anthropic-ratelimit-unified-7d-reset".into(),
            (reset_s + 5 * 86_400).to_string(),
        ),
    ]
}

pub(crate) fn claude_code(baton: &Baton, text: &str) -> reqwest::RequestBuilder {
    claude_code_to(baton, "claude-sonnet-4-5", text)
}

fn claude_code_to(baton: &Baton, model: &str, text: &str) -> reqwest::RequestBuilder {
    baton
        .http
        .post(format!("{}/v1/messages?beta=true", baton.url))
        .header("x-baton-key", &baton.key)
        .header("authorization", format!("Bearer {ALICE}"))
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": model, "max_tokens": 100,
            "messages": [{"role": "user", "content": text}]}))
}

pub(crate) fn quota_events(
    rx: &mut tokio::sync::broadcast::Receiver<Event>,
) -> Vec<(String, Option<u8>, String)> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let Event::Quota {
            kind,
            percent,
            message,
            ..
        } = e
        {
            // Named on the wire as before (`threshold`, `capped`, `back`).
            let kind = serde_json::to_value(kind)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string();
            out.push((kind, percent, message));
        }
    }
    out
}

/// A Claude subscription passed through (`claude-max`, Alice's login only) before an
/// OpenAI-compatible `other`, on a clock the test moves, at 2026-12-02 10:00 UTC.
pub(crate) struct Sub {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) start: i64,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) sub: FakeUpstream,
    pub(crate) _other: FakeUpstream,
    pub(crate) baton: Baton,
}

pub(crate) async fn subscription_then_other() -> Sub {
    let dir = tempfile::tempdir().unwrap();
    let start = ms("2026-12-02T10:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let sub = FakeUpstream::start("claude").await;
    sub.only_subscription(ALICE);
    let other = FakeUpstream::start("other").await;
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [
            {"id": "claude-max", "name": "Claude Max", "kind": "anthropic", "baseUrl": sub.base_url(),
             "credentials": "client", "models": ["*"], "priority": 1},
            {"id": "other", "kind": "openai-compatible", "baseUrl": other.base_url(),
             "models": ["other-model"], "priority": 2}],
         "modelMap": {"claude-*": "auto"}}),
        Some(clock.clone() as Arc<dyn Clock>),
    )
    .await;
    Sub {
        _dir: dir,
        start,
        clock,
        sub,
        _other: other,
        baton,
    }
}

#[tokio::test]
async fn a_subscription_stepping_to_its_cap_notifies_once_per_threshold_and_once_back() {
    // Every field bound: one left to `..` would be dropped here (the data directory with it).
    let Sub {
        _dir,
        start,
        clock,
        sub,
        _other,
        baton,
    } = subscription_then_other().await;
    let mut rx = baton.handle.events().subscribe();
    let reset = start / 1000 + 3 * 3600;
    let ok = |u: f64, st: &str| Behavior::OkHeaders(unified(u, reset, st));
    sub.script([
        ok(0.5, "allowed"),
        ok(0.81, "allowed"),
        ok(0.83, "allowed"),
        ok(0.96, "allowed_warning"),
        ok(0.97, "allowed_warning"),
        Behavior::Status {
            status: 429,
            body: json!({"type": "error", "error": {"type": "rate_limit_error",
                "message": "This request would exceed your account's rate limit. Please try again later."}}),
            headers: unified(1.0, reset, "rejected"),
        },
    ]);
    // Pinned, so the burn-rate forecast (tested below) does not move them elsewhere first.
    for i in 0..6 {
        let r = claude_code_to(&baton, "claude-max/claude-sonnet-4-5", &format!("turn {i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), if i < 5 { 200 } else { 429 }, "turn {i}");
        clock.advance(60_000);
    }
    // The account's next request goes elsewhere directly.
    assert_eq!(sub.hits(), 6);
    let r = claude_code(&baton, "while capped").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    assert_eq!(sub.hits(), 6);

    // What a user sees now: the bars in /admin/state, the gauges, the tray's words.
    let st = baton.admin_state().await;
    let usage = &st["providers"][0]["usage"][0];
    assert!(usage["account"].as_str().unwrap().starts_with("client:"));
    assert_eq!(usage["binding"], "5h");
    let five = usage["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "5h")
        .unwrap();
    assert_eq!(
        (five["used"].as_f64(), five["status"].as_str()),
        (Some(1.0), Some("rejected"))
    );
    assert_eq!(five["resetsAtMs"], reset * 1000);
    assert!(
        !st.to_string().contains(ALICE),
        "no credential in the state"
    );
    let metrics = baton.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("baton_quota_used_ratio{")
                && l.contains("provider=\"claude-max\"")
                && l.contains("window=\"5h\"")
                && l.ends_with(" 1.0")),
        "{metrics}"
    );
    assert!(metrics.contains("baton_quota_reset_seconds{"), "{metrics}");

    // The reset passes: the account is back, told once.
    clock.set(reset * 1000 + 1_000);
    sub.always(Behavior::OkHeaders(unified(
        0.01,
        reset + 5 * 3600,
        "allowed",
    )));
    let r = claude_code(&baton, "after the reset").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "claude-max");
    let r = claude_code(&baton, "and again").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "claude-max");
    let got = quota_events(&mut rx);
    let kinds: Vec<(String, Option<u8>)> = got.iter().map(|(k, p, _)| (k.clone(), *p)).collect();
    assert_eq!(
        kinds,
        [
            ("threshold".to_string(), Some(80)),
            ("threshold".to_string(), Some(95)),
            ("capped".to_string(), None),
            ("back".to_string(), None),
        ],
        "{got:?}"
    );
    // The gateway writes in the system's language and clock (scripts/test pins C.UTF-8).
    let loc = baton::i18n::Locale::with_choice("auto");
    let at = baton::limits::clock_time(reset * 1000, &jiff::tz::TimeZone::system(), start, loc);
    assert_eq!(
        got[0].2,
        format!("Claude Max: 81 % of the 5 h window used — resets {at}")
    );
    assert_eq!(got[3].2, "Claude Max: 5 h window is back");
}

#[tokio::test]
async fn baton_status_prints_the_windows_and_their_json() {
    let dir = tempfile::tempdir().unwrap();
    let sub = FakeUpstream::start("codexish").await;
    let reset = baton::clock::unix_ms() / 1000 + 3600;
    sub.always(Behavior::OkHeaders(vec![
        ("x-codex-primary-used-percent".into(), "72".into()),
        ("x-codex-primary-window-minutes".into(), "300".into()),
        ("x-codex-primary-reset-at".into(), reset.to_string()),
        ("x-codex-secondary-used-percent".into(), "31".into()),
        ("x-codex-secondary-window-minutes".into(), "10080".into()),
        (
            "x-codex-secondary-reset-at".into(),
            (reset + 86_400).to_string(),
        ),
    ]));
    let config = json!({"providers": [provider("plus", &sub.base_url(), 1)]});
    let baton = Baton::start(dir.path(), config.clone()).await;
    assert_eq!(baton.chat("auto", "hi").await.status(), 200);
    let base = baton.status_args(dir.path());
    let (code, out, err) = run_baton(base.clone(), vec![]).await;
    assert_eq!(code, 0, "{err}");
    let line = |w: &str| {
        out.lines()
            .find(|l| l.starts_with("plus ") && l.contains(&format!(" {w} ")))
            .unwrap_or_else(|| panic!("no {w} window line:\n{out}"))
            .to_string()
    };
    assert!(out.contains("Usage windows"), "{out}");
    let five = line("5 h");
    assert!(five.contains("72 %") && five.contains("binding"), "{five}");
    assert!(five.contains("███████░░░"), "{five}");
    assert!(line("7 d").contains("31 %"));
    let mut json_args = base;
    json_args.push("--json".into());
    let (_, out, _) = run_baton(json_args, vec![]).await;
    let summary: Value = serde_json::from_str(&out).unwrap();
    let windows = &summary["providers"][0]["usage"][0]["windows"];
    assert_eq!(windows[0]["id"], "5h");
    assert_eq!(windows[0]["used"], 0.72);
    assert_eq!(windows[1]["id"], "7d");
    // After a restart (the desktop app at login) the bars are there before any request.
    baton.stop().await;
    let baton = Baton::start(dir.path(), config).await;
    let st = baton.admin_state().await;
    assert_eq!(st["providers"][0]["usage"][0]["windows"][0]["used"], 0.72);
    assert_eq!(sub.hits(), 1);
}

fn keyed_subscription(id: &str, fake: &FakeUpstream, reserve: Option<Value>) -> Value {
    let mut p = json!({"id": id, "kind": "anthropic", "baseUrl": fake.base_url(),
        "keys": [{"env": format!("BT_USAGE_{}", id.to_uppercase())}],
        "models": ["claude-sonnet-4-5"], "priority": 1});
    std::env::set_var(
        format!("BT_USAGE_{}", id.to_uppercase()),
        format!("sk-ant-api-{id}"),
    );
    if let Some(r) = reserve {
        p["reserve"] = r;
    }
    p
}

fn steps(fake: &FakeUpstream, used: &[f64], reset_s: i64) {
    fake.script(
        used.iter()
            .map(|u| Behavior::OkHeaders(unified(*u, reset_s, "allowed")))
            .collect::<Vec<_>>(),
    );
}

#[tokio::test]
async fn a_fast_burn_moves_traffic_before_the_cap_and_the_reserve_holds_for_pinned_requests() {
    let dir = tempfile::tempdir().unwrap();
    let start = ms("2026-12-02T10:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let (fast, slow) = (
        FakeUpstream::start("fast").await,
        FakeUpstream::start("slow").await,
    );
    let reset = start / 1000 + 4 * 3600;
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [keyed_subscription("fast", &fast, Some(json!({"5h": 0.3}))),
                             keyed_subscription("slow", &slow, None)]}),
        Some(clock.clone() as Arc<dyn Clock>),
    )
    .await;
    steps(&fast, &[0.2, 0.4, 0.5, 0.75], reset);
    steps(&slow, &[0.3, 0.31, 0.32, 0.33, 0.34], reset);
    let served = |r: &reqwest::Response| header(r, "x-gateway-provider").to_string();
    // Equal priority, nothing known: the configured order (fast, then slow).
    let r = baton.chat("claude-sonnet-4-5", "one").await;
    assert_eq!(served(&r), "fast");
    clock.advance(600_000);
    // Fast has 80 % left, slow is unknown and keeps its place behind it.
    let r = baton.chat("claude-sonnet-4-5", "two").await;
    assert_eq!(served(&r), "fast");
    clock.advance(60_000);
    // 20 % in 10 minutes: fast runs out in about half an hour, hours before its reset.
    let r = baton.chat("claude-sonnet-4-5", "three").await;
    assert_eq!(served(&r), "slow", "traffic moved before the cap");
    let log = baton.log().await;
    let deferred = log[0]
        .attempts
        .iter()
        .find(|a| a.provider == "fast")
        .and_then(|a| a.reason.clone())
        .unwrap();
    // Attempt reasons are the log's: English, 24-hour.
    let runs_out = baton::limits::clock_time(
        start + 600_000 + 1_800_000,
        &jiff::tz::TimeZone::system(),
        start,
        baton::i18n::Locale::ENGLISH,
    );
    assert!(
        deferred.starts_with(&format!(
            "deferred: 5 h window 40 % used; at the recent rate it runs out at {runs_out}"
        )),
        "{deferred}"
    );
    // Pinned requests still go to fast, into its reserve too.
    let pinned = baton.chat("fast/claude-sonnet-4-5", "pinned").await;
    assert_eq!(served(&pinned), "fast");
    let pinned = baton.chat("fast/claude-sonnet-4-5", "pinned again").await;
    assert_eq!(served(&pinned), "fast");
    // 75 % used with the last 30 % reserved: unpinned traffic skips it, and says why.
    clock.advance(3 * 3_600_000);
    let r = baton.chat("claude-sonnet-4-5", "four").await;
    assert_eq!(served(&r), "slow");
    let log = baton.log().await;
    let skip = log[0]
        .attempts
        .iter()
        .find(|a| a.provider == "fast")
        .and_then(|a| a.reason.clone())
        .unwrap();
    assert_eq!(
        skip,
        "reserve: 5h 75 % used; the last 30 % is kept for requests pinned to fast"
    );
}

#[tokio::test]
async fn an_account_that_resets_early_is_back_at_the_next_signal() {
    // Every field bound: one left to `..` would be dropped here (the data directory with it).
    let Sub {
        _dir,
        start,
        clock,
        sub,
        _other,
        baton,
    } = subscription_then_other().await;
    let reset = start / 1000 + 4 * 3600;
    sub.script([Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "rate limited"}}),
        headers: unified(1.0, reset, "rejected"),
    }]);
    let r = claude_code(&baton, "capped").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    // Within the re-check interval the account stays out.
    clock.advance(60_000);
    let r = claude_code(&baton, "still capped").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    assert_eq!(sub.hits(), 1);
    // Anthropic reset the account early: the next re-check finds room and it is back.
    sub.always(Behavior::OkHeaders(unified(0.02, reset + 3600, "allowed")));
    clock.advance(5 * 60_000);
    let r = claude_code(&baton, "re-checked").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "claude-max");
    let st = baton.admin_state().await;
    assert_eq!(
        st["providers"][0]["cooldowns"],
        json!([]),
        "no stale cooldown"
    );
    clock.advance(1_000);
    let r = claude_code(&baton, "stays").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "claude-max");
    assert_eq!(sub.hits(), 3, "hours before the old reset");
}

#[tokio::test]
async fn the_clis_report_their_logins_windows_codex_without_a_request() {
    let clis = crate::cli::FakeClis::new();
    std::fs::write(clis.dir.path().join("codex/codex-limits"), "81 17").unwrap();
    clis.modes("claude", &["used:85"]);
    let (_d, baton, _clock) = crate::cli::start(
        &clis,
        vec![clis.provider("claude", 1), clis.provider("codex", 2)],
    )
    .await;
    let window = |st: &Value, id: &str, w: &str| -> Option<Value> {
        st["providers"].as_array()?.iter().find(|p| p["id"] == id)?["usage"]
            .as_array()?
            .first()?["windows"]
            .as_array()?
            .iter()
            .find(|x| x["id"] == w)
            .cloned()
    };
    // Codex's app server told its windows at the login check: no answer was asked for.
    let mut st = baton.admin_state().await;
    for _ in 0..100 {
        if window(&st, "codex", "5h").is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        st = baton.admin_state().await;
    }
    let five = window(&st, "codex", "5h").expect("codex 5h window");
    assert_eq!(
        (five["used"].as_f64(), five["source"].as_str()),
        (Some(0.81), Some("codex-cli"))
    );
    assert_eq!(window(&st, "codex", "7d").unwrap()["used"], 0.17);
    assert!(clis.calls("codex").is_empty(), "no billed call");
    // Claude prints its window with an answer.
    let r = baton.chat("claude/sonnet", "hi").await;
    assert_eq!(r.status(), 200);
    let st = baton.admin_state().await;
    let five = window(&st, "claude", "5h").expect("claude 5h window");
    assert_eq!(
        (five["used"].as_f64(), five["status"].as_str()),
        (Some(0.85), Some("warning"))
    );
    assert_eq!(
        st["providers"][0]["usage"][0]["account"], "",
        "the CLI's own login"
    );
}

#[tokio::test]
async fn a_cap_named_only_by_its_body_is_a_spent_window_until_its_reset() {
    let dir = tempfile::tempdir().unwrap();
    let start = ms("2026-12-02T10:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let (plus, other) = (
        FakeUpstream::start("plus").await,
        FakeUpstream::start("other").await,
    );
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [provider("plus", &plus.base_url(), 1), provider("other", &other.base_url(), 2)]}),
        Some(clock.clone() as Arc<dyn Clock>),
    )
    .await;
    // The Codex backend's cap: no usage headers, the reset in its body.
    plus.script([Behavior::Status {
        status: 429,
        body: json!({"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached",
            "plan_type": "plus", "resets_in_seconds": 7200}}),
        headers: vec![],
    }]);
    let r = baton.chat("auto", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    let st = baton.admin_state().await;
    let w = &st["providers"][0]["usage"][0]["windows"][0];
    assert_eq!(
        (w["status"].as_str(), w["used"].as_f64()),
        (Some("rejected"), Some(1.0))
    );
    assert_eq!(w["resetsAtMs"], start + 7_200_000);
    assert_eq!(st["providers"][0]["usage"][0]["binding"], w["id"]);
}
