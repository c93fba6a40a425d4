//! Error classes that contradict their HTTP status: a 400 that is a spending limit with a date
//! cools the key until then and fails over; a 413 or 429 saying the request alone is over the
//! per-minute token limit cools nothing, tries a candidate that may take it, and otherwise
//! reaches the client as a 413.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::common::*;
use baton::clock::ManualClock;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

fn at(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

fn tpm_too_large(status: u16) -> Behavior {
    Behavior::Status {
        status,
        body: json!({"error": {"message": "Request too large for model `llama-3.3-70b-versatile` in organization `org_01hx` service tier `on_demand` on tokens per minute (TPM): Limit 6000, Requested 9000, please reduce your message size and try again.",
            "type": "tokens", "code": "rate_limit_exceeded"}}),
        headers: vec![("retry-after".into(), "60".into())],
    }
}

#[tokio::test]
async fn a_request_over_the_per_minute_limit_cools_nothing_and_moves_on() {
    let small = FakeUpstream::start("small").await;
    let large = FakeUpstream::start("large").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("small", &small.base_url(), 1), provider("large", &large.base_url(), 2)]}),
    )
    .await;
    for status in [413, 429] {
        small.script([tpm_too_large(status)]);
        let r = baton.chat("auto", "a long prompt").await;
        assert_eq!(r.status(), 200, "{status}");
        assert_eq!(header(&r, "x-gateway-provider"), "large");
        assert!(
            baton.handle.core.routing.cooldowns.active().is_empty(),
            "{status}: the small provider is not cooled: a smaller request still fits"
        );
        // The next (smaller) request goes to the first provider again.
        let r = baton.chat("auto", "short").await;
        assert_eq!(header(&r, "x-gateway-provider"), "small");
    }
    baton.stop().await;

    // With no candidate that takes it, the client hears why: 413 with the provider's text.
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("small", &small.base_url(), 1)]}),
    )
    .await;
    small.script([tpm_too_large(429)]);
    let r = baton.chat("auto", "a long prompt").await;
    assert_eq!(r.status(), 413);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "request_too_large", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Limit 6000, Requested 9000"),
        "{v}"
    );
    assert!(baton.handle.core.routing.cooldowns.active().is_empty());
    assert_eq!(baton.chat("auto", "short").await.status(), 200);
    baton.stop().await;
}

#[tokio::test]
async fn a_400_that_is_a_spending_limit_cools_the_key_until_its_date() {
    let capped = FakeUpstream::start("capped").await;
    let spare = FakeUpstream::start("spare").await;
    capped.always(Behavior::Status {
        status: 400,
        body: json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "You have reached your specified API usage limits. You will regain access on 2027-01-01 at 00:00 UTC."}}),
        headers: vec![],
    });
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(at("2026-12-14T09:30:00Z")));
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [provider("capped", &capped.base_url(), 1), provider("spare", &spare.base_url(), 2)]}),
        Some(clock.clone()),
    )
    .await;
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 200, "failed over instead of relaying the 400");
    assert_eq!(header(&r, "x-gateway-provider"), "spare");
    let cd = baton.handle.core.routing.cooldowns.active();
    let c = cd.iter().find(|c| c.scope.provider == "capped").unwrap();
    assert_eq!(c.until_ms, at("2027-01-01T00:00:00Z"));
    assert_eq!(c.class.as_str(), "billing");
    // The next request does not hit the same wall.
    let hits = capped.hits();
    assert_eq!(
        header(&baton.chat("auto", "again").await, "x-gateway-provider"),
        "spare"
    );
    assert_eq!(capped.hits(), hits);
    // And at the stated instant the key is back.
    clock.set(at("2027-01-01T00:00:00Z"));
    capped.always(Behavior::Ok);
    assert_eq!(
        header(&baton.chat("auto", "new year").await, "x-gateway-provider"),
        "capped"
    );
    baton.stop().await;
}

#[tokio::test]
async fn a_relayed_error_keeps_the_providers_type_code_and_param() {
    let up = FakeUpstream::start("strict").await;
    up.always(Behavior::Status {
        status: 400,
        body: json!({"error": {"message": "Your request was rejected as a result of our safety system.",
            "type": "invalid_request_error", "code": "content_policy_violation", "param": "messages"}}),
        headers: vec![],
    });
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("strict", &up.base_url(), 1)]}),
    )
    .await;
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "content_policy_violation", "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert_eq!(v["error"]["param"], "messages", "{v}");
    // A code that is not a plain identifier is not relayed.
    up.always(Behavior::Status {
        status: 400,
        body: json!({"error": {"message": "bad", "type": "x\ny", "code": "<script>"}}),
        headers: vec![],
    });
    let v: Value = baton.chat("auto", "hi").await.json().await.unwrap();
    assert_eq!(v["error"]["code"], "upstream_rejected", "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    baton.stop().await;
}

#[tokio::test]
async fn an_overloaded_model_cools_alone_unless_the_provider_says_otherwise() {
    let up = FakeUpstream::start("multi").await;
    let overloaded = || Behavior::Status {
        status: 529,
        body: json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        headers: vec![],
    };
    for (scope, other_model_serves) in [(None, true), (Some("provider"), false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut p = provider("multi", &up.base_url(), 1);
        p["models"] = json!(["big", "small"]);
        if let Some(s) = scope {
            p["limitScope"] = json!(s);
        }
        let baton = Baton::start(dir.path(), json!({"providers": [p]})).await;
        up.script([overloaded()]);
        let r = baton.chat("multi/big", "hi").await;
        assert!(
            r.status().is_server_error(),
            "{scope:?}: the pinned model was overloaded"
        );
        let cd = baton.handle.core.routing.cooldowns.active();
        assert_eq!(cd.len(), 1, "{cd:?}");
        assert_eq!(cd[0].class.as_str(), "overloaded");
        if other_model_serves {
            assert_eq!(cd[0].scope.model.as_deref(), Some("big"));
            let r = baton.chat("multi/small", "hi").await;
            assert_eq!(r.status(), 200, "the other model is not cooling");
        } else {
            assert_eq!(
                cd[0].scope.model, None,
                "limitScope provider: provider-wide"
            );
            let hits = up.hits();
            let r = baton.chat("multi/small", "hi").await;
            assert_ne!(r.status(), 200, "the whole provider is cooling");
            assert_eq!(up.hits(), hits);
        }
        baton.stop().await;
    }
}

#[tokio::test]
async fn the_breaker_follows_limit_scope() {
    let up = FakeUpstream::start("multi").await;
    for (scope, other_model_serves) in [(None, true), (Some("provider"), false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut p = provider("multi", &up.base_url(), 1);
        p["models"] = json!(["big", "small"]);
        p["retries"] = json!(0);
        if let Some(s) = scope {
            p["limitScope"] = json!(s);
        }
        let baton = Baton::start(dir.path(), json!({"providers": [p]})).await;
        // Three transient failures of one model in a row open its breaker (the default).
        up.script((0..3).map(|_| Behavior::status(500)));
        for _ in 0..3 {
            let r = baton.chat("multi/big", "hi").await;
            assert!(r.status().is_server_error(), "{scope:?}");
        }
        let state = baton.admin_state().await;
        let p = &state["providers"][0];
        let hits = up.hits();
        let r = baton.chat("multi/big", "hi").await;
        assert_ne!(
            r.status(),
            200,
            "{scope:?}: the failing model's breaker is open"
        );
        assert_eq!(up.hits(), hits, "{scope:?}: not called while open");
        let r = baton.chat("multi/small", "hi").await;
        if other_model_serves {
            assert_eq!(r.status(), 200, "the other model keeps serving");
            assert_eq!(p["breaker"]["state"], "closed", "{p}");
            assert_eq!(p["breaker"]["models"][0]["model"], "big", "{p}");
            assert_eq!(p["breaker"]["models"][0]["state"], "open", "{p}");
        } else {
            assert_ne!(
                r.status(),
                200,
                "limitScope provider: the whole provider is out"
            );
            assert_eq!(p["breaker"]["state"], "open", "{p}");
        }
        // Clearing the provider's cooldowns closes its breakers.
        let r = baton
            .http
            .delete(format!("{}/admin/cooldowns?provider=multi", baton.url))
            .bearer_auth(&baton.admin_key)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let r = baton.chat("multi/big", "hi").await;
        assert_eq!(r.status(), 200, "{scope:?}: closed by hand");
        baton.stop().await;
    }
}

#[tokio::test]
async fn an_unreachable_host_is_reported_as_failing_not_as_rate_limited() {
    // A port nothing listens on: every attempt is refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let mut p = provider("gone", &url, 1);
    p["retries"] = json!(0);
    let baton = Baton::start(dir.path(), json!({"providers": [p]})).await;
    for _ in 0..3 {
        let r = baton.chat("auto", "hi").await;
        assert_eq!(r.status(), 502);
    }
    // The breaker is open now: the answer still says the provider fails, not that it is
    // rate-limited (which would tell the client to wait and retry).
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "all_providers_failed", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(!msg.contains("rate-limited"), "{msg}");
    baton.stop().await;
}

/// Model names are the client's to invent: each one an upstream refuses cools that model, but a
/// provider keeps at most `MAX_SCOPES` cooling scopes, in memory and in the database.
#[tokio::test]
async fn invented_model_names_cannot_grow_the_cooldown_table_without_bound() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("a").await;
    up.always(Behavior::Status {
        status: 404,
        body: json!({"error": {"message": "The model does not exist", "type": "invalid_request_error",
            "code": "model_not_found"}}),
        headers: Vec::new(),
    });
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)]}),
    )
    .await;
    let n = baton::limits::MAX_SCOPES + 40;
    for i in 0..n {
        let r = baton.chat(&format!("a/invented-{i}"), "x").await;
        assert!(r.status().is_client_error() || r.status().is_server_error());
    }
    let core = &baton.handle.core;
    assert!(
        up.hits() >= n,
        "each invented name reached the upstream once"
    );
    assert_eq!(
        core.routing.cooldowns.active().len(),
        baton::limits::MAX_SCOPES
    );
    core.routing.cooldowns.flush().await;
    let rows = core.store.load_cooldowns(0).unwrap();
    assert!(
        rows.len() <= baton::limits::MAX_SCOPES,
        "{} rows",
        rows.len()
    );
    baton.stop().await;
}
