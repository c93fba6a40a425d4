//! What client keys are charged with: usage per client and provider that adds up to the log
//! (JSON and CSV), and `GET /metrics`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::clients::{error_of, make_key, priced};
use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[tokio::test]
async fn usage_per_client_and_provider_adds_up_to_the_log_and_exports_as_csv() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    a.script([Behavior::rate_limited(Some(60))]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [priced("a", &a.base_url(), 1, 2.0, 4.0), priced("b", &b.base_url(), 2, 0.5, 1.0)]}),
    )
    .await;
    let (alice_id, alice) = make_key(&baton, "alice", json!({})).await;
    let (bob_id, bob) = make_key(&baton, "bob, \"the builder\"", json!({})).await;
    // Alice's first request fails over from a (429) to b.
    for _ in 0..3 {
        assert_eq!(baton.chat_as(&alice, "auto").await.status(), 200);
    }
    for _ in 0..2 {
        assert_eq!(baton.chat_as(&bob, "b").await.status(), 200);
    }
    // A request for an unknown model is refused before routing, and logged (Activity shows
    // what a tool sent): a request and an error in the usage.
    let (st, _, _) = error_of(baton.chat_as(&bob, "nope").await).await;
    assert_eq!(st, 404);
    let log = baton.log().await;
    let admin = Admin(&baton);
    let (st, usage) = admin
        .send(Method::GET, "/admin/usage?by=client&bucket=hour", None)
        .await;
    assert_eq!(st, 200, "{usage}");
    for id in [&alice_id, &bob_id] {
        let mine: Vec<_> = log.iter().filter(|r| &r.client_key == id).collect();
        let rows: Vec<&Value> = usage["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["key"] == **id)
            .collect();
        let sum = |f: &str| rows.iter().map(|r| r[f].as_u64().unwrap()).sum::<u64>();
        assert_eq!(sum("requests"), mine.len() as u64);
        assert_eq!(
            sum("inputTokens"),
            mine.iter()
                .map(|r| r.input_tokens.unwrap_or(0))
                .sum::<u64>()
        );
        assert_eq!(
            sum("outputTokens"),
            mine.iter()
                .map(|r| r.output_tokens.unwrap_or(0))
                .sum::<u64>()
        );
        let cost: f64 = rows.iter().map(|r| r["costUsd"].as_f64().unwrap()).sum();
        let logged: f64 = mine.iter().map(|r| r.cost_usd.unwrap_or(0.0)).sum();
        assert!((cost - logged).abs() < 1e-12, "{cost} vs {logged}");
    }
    let alice_row = usage["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == alice_id)
        .unwrap();
    assert_eq!(alice_row["failovers"], 1, "{alice_row}");
    assert_eq!(alice_row["label"], "ui:alice");
    let bob_row = usage["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == bob_id)
        .unwrap();
    assert_eq!(bob_row["requests"], 3);
    assert_eq!(bob_row["errors"], 1);
    // 2 × (11 × $0.5 + 7 × $1.0) per million.
    assert!((bob_row["costUsd"].as_f64().unwrap() - 2.0 * 12.5e-6).abs() < 1e-12);
    let (_, by_provider) = admin
        .send(Method::GET, "/admin/usage?by=provider", None)
        .await;
    let b_row = by_provider["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "b")
        .unwrap();
    assert_eq!(b_row["requests"], 5, "{by_provider}");
    // The log can be filtered by client too.
    let (_, page) = admin
        .send(Method::GET, &format!("/admin/log?client={bob_id}"), None)
        .await;
    assert_eq!(page["rows"].as_array().unwrap().len(), 3, "{page}");

    let r = admin
        .req(Method::GET, "/admin/usage?by=client&format=csv")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(header(&r, "content-type").starts_with("text/csv"));
    assert!(header(&r, "content-disposition").contains("baton-usage-by-client.csv"));
    let csv = r.text().await.unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "start,key,label,requests,errors,failovers,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,estimated_cost_usd"
    );
    let bob_line = csv.lines().find(|l| l.contains(&bob_id)).unwrap();
    assert!(
        bob_line.contains(",\"ui:bob, \"\"the builder\"\"\",3,1,0,22,14,0,0,0.000025"),
        "{bob_line}"
    );
    for bad in ["bucket=week", "by=model", "format=xml"] {
        let (st, v) = admin
            .send(Method::GET, &format!("/admin/usage?{bad}"), None)
            .await;
        assert_eq!(st, 400, "{bad}: {v}");
    }
}

#[tokio::test]
async fn metrics_expose_requests_failovers_latency_and_state() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    a.script([Behavior::rate_limited(Some(120))]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [priced("a", &a.base_url(), 1, 1.0, 1.0), provider("b", &b.base_url(), 2)]}),
    )
    .await;
    let (id, key) = make_key(&baton, "ci", json!({"rpm": 1})).await;
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 429);
    let r = baton
        .http
        .get(format!("{}/metrics", baton.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "admin key required");
    let r = Admin(&baton)
        .req(Method::GET, "/metrics")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(header(&r, "content-type").starts_with("text/plain"));
    let text = r.text().await.unwrap();
    let has = |needle: &str| assert!(text.contains(needle), "missing {needle} in\n{text}");
    has(&format!(
        "baton_requests_total{{provider=\"b\",client=\"{id}\",status=\"200\"}} 1"
    ));
    has("baton_failovers_total{provider=\"a\"} 1");
    has("baton_upstream_attempts_total{provider=\"a\",key=\"none\",class=\"rate\"} 1");
    has(&format!(
        "baton_client_denied_total{{client=\"{id}\",reason=\"client_rate_limited\"}} 1"
    ));
    has(&format!(
        "baton_tokens_total{{provider=\"b\",client=\"{id}\",direction=\"input\"}} 11"
    ));
    has("baton_cooldowns_active{provider=\"a\"} 1");
    has("baton_breaker_open{provider=\"b\"} 0");
    has("baton_in_flight{provider=\"a\"} 0");
    has("baton_added_latency_seconds_count 1");
    has("baton_request_duration_seconds_bucket{le=");
    has("baton_shared_state_up -1");
    has("# EOF");
}
