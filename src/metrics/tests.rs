//! Unit tests of `metrics`: label sets, and the kept series counting where the scrape reads.

use super::kept::MAX_KEPT;
use super::*;

#[test]
fn equal_label_sets_are_one_series_however_their_values_were_made() {
    let mut registry = Registry::default();
    let family = Family::<L2, Counter>::default();
    registry.register("hits", "Hits", family.clone());
    let labels = |p: &str, c: String| Labels([("provider", Arc::from(p)), ("client", c.into())]);
    // Values equal by content but held in different allocations, as a label's value is
    // when it is not interned (a window id, a status outside the common ones).
    family.get_or_create(&labels("groq", "k_1".into())).inc();
    family
        .get_or_create(&labels("groq", format!("k_{}", 1)))
        .inc();
    family.get_or_create(&labels("groq", "k_2".into())).inc();
    family.get_or_create(&labels("k_1", "groq".into())).inc();
    let mut out = String::new();
    encode(&mut out, &registry).unwrap_or_default();
    assert!(
        out.contains("hits_total{provider=\"groq\",client=\"k_1\"} 2"),
        "{out}"
    );
    assert!(
        out.contains("hits_total{provider=\"groq\",client=\"k_2\"} 1"),
        "{out}"
    );
    assert!(
        out.contains("hits_total{provider=\"k_1\",client=\"groq\"} 1"),
        "{out}"
    );
    assert_eq!(out.matches("hits_total{").count(), 3, "{out}");
}

fn row(provider: &str, client: &str, status: u16, input: u64, key: &str) -> LogRow {
    LogRow {
        id: String::new(),
        ts_ms: 0,
        client: String::new(),
        requested_model: "auto".into(),
        provider: Some(provider.into()),
        model: Some("m".into()),
        status,
        stream: false,
        attempts: vec![crate::store::AttemptRecord {
            provider: provider.into(),
            model: "m".into(),
            key: Some(key.into()),
            class: if status == 200 {
                crate::limits::Outcome::Ok
            } else {
                crate::limits::Outcome::Failed(crate::limits::ErrorClass::Rate)
            },
            status: Some(status),
            latency_ms: 1,
            latency_us: 1_000,
            reason: None,
            reset_at_ms: None,
            streamed: false,
            hedge: false,
            input_tokens: None,
            started: None,
            span: 0,
        }],
        ttfb_ms: None,
        total_ms: 1,
        input_tokens: Some(input),
        output_tokens: Some(0),
        error: None,
        client_key: client.into(),
        cost_usd: None,
        upstream_ms: None,
        cache_read_tokens: None,
        cache_write_tokens: None,
        output: None,
    }
}

fn scrape(m: &Metrics) -> String {
    m.render(Scrape {
        now_ms: 0,
        providers: &[],
        cooldowns: Vec::new(),
        queued: 0,
        log_dropped: 0,
        shared_up: None,
        usage: Vec::new(),
    })
}

/// Sums the values of a counter's lines.
fn total(out: &str, name: &str) -> f64 {
    out.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn kept_series_count_where_the_scrape_reads() {
    let m = Metrics::default();
    for _ in 0..3 {
        m.observe(
            &row("groq", "k_1", 200, 10, "env:A"),
            Duration::from_millis(5),
            0,
        );
    }
    m.observe(
        &row("groq", "k_1", 429, 0, "env:A"),
        Duration::from_millis(5),
        0,
    );
    m.observe(
        &row("groq", "k_2", 200, 7, "env:B"),
        Duration::from_millis(5),
        0,
    );
    let out = scrape(&m);
    for line in [
        "baton_requests_total{provider=\"groq\",client=\"k_1\",status=\"200\"} 3",
        "baton_requests_total{provider=\"groq\",client=\"k_1\",status=\"429\"} 1",
        "baton_requests_total{provider=\"groq\",client=\"k_2\",status=\"200\"} 1",
        "baton_tokens_total{provider=\"groq\",client=\"k_1\",direction=\"input\"} 30",
        "baton_tokens_total{provider=\"groq\",client=\"k_2\",direction=\"input\"} 7",
        "baton_upstream_attempts_total{provider=\"groq\",key=\"env:A\",class=\"ok\"} 3",
        "baton_upstream_attempts_total{provider=\"groq\",key=\"env:A\",class=\"rate\"} 1",
        "baton_request_duration_seconds_count{provider=\"groq\"} 5",
    ] {
        assert!(out.contains(line), "{line} in {out}");
    }
    // No token counted in a direction: no series, as the family alone would have it.
    assert!(!out.contains("direction=\"output\""), "{out}");
    assert!(!out.contains("direction=\"cache_read\""), "{out}");
}

#[test]
fn pairs_past_the_kept_bound_are_still_counted() {
    let m = Metrics::default();
    // 65 x 64 distinct pairs: more than are kept, and more values than each label keeps.
    let mut n = 0;
    for p in 0..65 {
        for c in 0..64 {
            m.observe(
                &row(&format!("p{p}"), &format!("k_{c}"), 200, 1, "env:A"),
                Duration::from_millis(1),
                0,
            );
            n += 1;
        }
    }
    // A pair seen again once the bound is reached counts into the same series.
    m.observe(
        &row("p64", "k_63", 200, 1, "env:A"),
        Duration::from_millis(1),
        0,
    );
    n += 1;
    assert!(n > MAX_KEPT);
    let out = scrape(&m);
    assert_eq!(total(&out, "baton_requests_total{"), n as f64);
    assert_eq!(total(&out, "baton_tokens_total{"), n as f64);
    assert_eq!(total(&out, "baton_upstream_attempts_total{"), n as f64);
    assert!(
        out.contains("baton_requests_total{provider=\"p64\",client=\"k_63\",status=\"200\"} 2"),
        "{out}"
    );
}
