//! The usage book's unit tests.
use super::*;

fn five_h(used: f64, reset: i64, status: WindowStatus) -> Window {
    Window {
        id: "5h".into(),
        label: "5 h".into(),
        length_ms: Some(5 * 3_600_000),
        used: Some(used),
        resets_at_ms: Some(reset),
        status,
        source: "anthropic".into(),
    }
}

#[test]
fn one_notice_per_threshold_per_period_and_one_back() {
    let b = UsageBook::default();
    b.set_thresholds(DEFAULT_THRESHOLDS.to_vec());
    let r = 10_000_000;
    let kinds = |n: Vec<Notice>| -> Vec<String> {
        n.into_iter()
            .map(|n| match n {
                Notice::Threshold { percent, .. } => format!("t{percent}"),
                Notice::Capped { .. } => "cap".into(),
                Notice::Back { .. } => "back".into(),
            })
            .collect()
    };
    let mut seen = Vec::new();
    for (i, (u, st)) in [
        (0.5, WindowStatus::Allowed),
        (0.81, WindowStatus::Allowed),
        (0.82, WindowStatus::Allowed),
        (0.96, WindowStatus::Warning),
        (0.97, WindowStatus::Warning),
        (1.0, WindowStatus::Rejected),
        (1.0, WindowStatus::Rejected),
    ]
    .into_iter()
    .enumerate()
    {
        // The reset jitters by seconds: the same period.
        let jitter = (i as i64 % 2) * 3_000;
        seen.extend(kinds(b.observe(
            "c",
            "a",
            vec![five_h(u, r + jitter, st)],
            i as i64,
        )));
    }
    assert_eq!(seen, ["t80", "t95", "cap"]);
    assert_eq!(
        kinds(b.sweep(r - 1).into_iter().map(|x| x.2).collect()),
        Vec::<String>::new()
    );
    assert_eq!(
        kinds(b.sweep(r + 1).into_iter().map(|x| x.2).collect()),
        ["back"]
    );
    // The next period tells again.
    let next = b.observe(
        "c",
        "a",
        vec![five_h(0.85, r + 5 * 3_600_000, WindowStatus::Allowed)],
        r + 2,
    );
    assert_eq!(kinds(next), ["t80"]);
}

#[test]
fn the_status_line_names_the_binding_window() {
    let b = UsageBook::default();
    let tz = jiff::tz::TimeZone::UTC;
    assert_eq!(b.headline("c", 0, &tz, crate::i18n::Locale::ENGLISH), None);
    let reset = 15 * 3_600_000; // 15:00 UTC on the epoch's day
    let mut week = five_h(0.4, 6 * 86_400_000, WindowStatus::Allowed);
    week.id = "7d".into();
    week.label = "7 d".into();
    week.length_ms = Some(7 * 86_400_000);
    b.observe(
        "c",
        "a",
        vec![five_h(0.72, reset, WindowStatus::Allowed), week.clone()],
        0,
    );
    assert_eq!(
        b.headline("c", 0, &tz, crate::i18n::Locale::ENGLISH)
            .as_deref(),
        Some("5 h 72 % · resets 15:00")
    );
    // A spent weekly window decides, though the 5-hour one has room.
    week.status = WindowStatus::Rejected;
    week.used = Some(1.0);
    b.observe("c", "a", vec![week], 1);
    assert_eq!(
        b.headline("c", 1, &tz, crate::i18n::Locale::ENGLISH)
            .as_deref(),
        Some("7 d spent · resets Jan 7, 00:00")
    );
}

#[test]
fn windows_outlive_a_restart_without_telling_again() {
    let b = UsageBook::default();
    b.observe(
        "c",
        "a",
        vec![five_h(0.85, 9_000_000, WindowStatus::Allowed)],
        0,
    );
    let saved = b.to_save().expect("changed");
    assert!(b.to_save().is_none(), "nothing new since");
    let text = serde_json::to_string(&saved).unwrap();
    let again = UsageBook::default();
    again.set_thresholds(DEFAULT_THRESHOLDS.to_vec());
    again.restore(serde_json::from_str(&text).unwrap());
    assert_eq!(again.accounts("c", 1)[0].windows[0].used, Some(0.85));
    // 80 % was told before the restart; 95 % is still news.
    let n = again.observe(
        "c",
        "a",
        vec![five_h(0.86, 9_000_000, WindowStatus::Allowed)],
        2,
    );
    assert!(n.is_empty(), "{n:?}");
    let n = again.observe(
        "c",
        "a",
        vec![five_h(0.96, 9_000_000, WindowStatus::Allowed)],
        3,
    );
    assert!(
        matches!(n.as_slice(), [Notice::Threshold { percent: 95, .. }]),
        "{n:?}"
    );
}

#[test]
fn an_early_reset_is_back_at_the_next_signal() {
    let b = UsageBook::default();
    b.observe(
        "c",
        "a",
        vec![five_h(1.0, 1_000_000, WindowStatus::Rejected)],
        0,
    );
    let n = b.observe(
        "c",
        "a",
        vec![five_h(0.02, 9_000_000, WindowStatus::Allowed)],
        10,
    );
    assert!(matches!(n.as_slice(), [Notice::Back { .. }]), "{n:?}");
}

#[test]
fn a_fast_burn_forecasts_a_cap_before_the_reset() {
    let b = UsageBook::default();
    let reset = 5 * 3_600_000;
    b.observe("c", "a", vec![five_h(0.2, reset, WindowStatus::Allowed)], 0);
    b.observe(
        "c",
        "a",
        vec![five_h(0.4, reset, WindowStatus::Allowed)],
        600_000,
    );
    let f = b.forecast("c", "a", 600_000).expect("forecast");
    // 20 % per 10 minutes: the remaining 60 % lasts 30 minutes.
    assert_eq!(f.caps_at_ms, Some(600_000 + 1_800_000));
    assert!((f.room - 0.6).abs() < 1e-9);
    b.observe(
        "c",
        "slow",
        vec![five_h(0.2, reset, WindowStatus::Allowed)],
        0,
    );
    b.observe(
        "c",
        "slow",
        vec![five_h(0.21, reset, WindowStatus::Allowed)],
        600_000,
    );
    assert_eq!(
        b.forecast("c", "slow", 600_000).and_then(|f| f.caps_at_ms),
        None
    );
}

/// A window is shown until its reset and left out after it (its old reading no longer holds
/// and its new period is unknown until the provider reports it); a new reading brings it back.
#[test]
fn a_window_past_its_reset_is_left_out_of_views() {
    let b = UsageBook::default();
    let reset = 5 * 3_600_000;
    b.observe("c", "a", vec![five_h(0.7, reset, WindowStatus::Allowed)], 0);
    let shown = |now| -> Vec<String> {
        b.accounts("c", now)
            .into_iter()
            .flat_map(|a| a.windows)
            .map(|w| w.id)
            .collect()
    };
    assert_eq!(shown(reset - 1), vec!["5h".to_string()]);
    assert!(shown(reset).is_empty(), "dropped at its reset");
    assert_eq!(b.forecast("c", "a", reset + 1), None);
    b.observe(
        "c",
        "a",
        vec![five_h(0.1, 2 * reset, WindowStatus::Allowed)],
        reset + 10,
    );
    assert_eq!(shown(reset + 20), vec!["5h".to_string()]);
}
