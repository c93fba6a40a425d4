//! Limit intelligence end to end: key rotation, per-key and per-model cooldowns, same-target
//! retries, the circuit breaker, deadlines and waiting for a reset.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use baton::events::Event;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[tokio::test]
async fn keys_rotate_fairly_and_a_limited_key_is_not_called_before_its_reset() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let pa = keyed(
        "a",
        &a,
        10,
        &[("BT_ROT_K1", "k-one"), ("BT_ROT_K2", "k-two")],
    );
    let baton = Baton::start(dir.path(), json!({"providers": [pa]})).await;
    for _ in 0..4 {
        assert_eq!(baton.chat("auto", "x").await.status(), 200);
    }
    assert_eq!(
        auths(&a),
        ["k-one", "k-two", "k-one", "k-two"],
        "round-robin"
    );
    a.script([Behavior::rate_limited(Some(120))]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(
        (r.status().as_u16(), header(&r, "x-gateway-attempts")),
        (200, "2"),
        "the other key of the same provider answers"
    );
    for _ in 0..3 {
        assert_eq!(baton.chat("auto", "x").await.status(), 200);
    }
    assert_eq!(
        &auths(&a)[4..],
        ["k-one", "k-two", "k-two", "k-two", "k-two"],
        "k-one rests until its reset"
    );
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!(cd.len(), 1);
    assert_eq!(cd[0].scope.key.as_deref(), Some("env:BT_ROT_K1"));
    baton.stop().await;
}

#[tokio::test]
async fn a_rejected_key_is_disabled_alone() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let pa = keyed(
        "a",
        &a,
        10,
        &[("BT_AUTH_K1", "bad-key"), ("BT_AUTH_K2", "good-key")],
    );
    let baton = Baton::start(dir.path(), json!({"providers": [pa]})).await;
    let mut rx = baton.handle.events().subscribe();
    a.script([Behavior::Status { status: 401, body: json!({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}), headers: vec![] }]);
    assert_eq!(baton.chat("auto", "x").await.status(), 200);
    assert_eq!(baton.chat("auto", "x").await.status(), 200);
    assert_eq!(auths(&a), ["bad-key", "good-key", "good-key"]);
    let mut disabled = false;
    while let Ok(ev) = rx.try_recv() {
        disabled |= matches!(ev, Event::KeyDisabled { ref key, .. } if key == "env:BT_AUTH_K1");
    }
    assert!(disabled, "KeyDisabled event");
    baton.stop().await;
}

fn gemini_per_model_429() -> Behavior {
    Behavior::Status {
        status: 429,
        body: json!({"error": {"code": 429, "message": "You exceeded your current quota", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "45s"}]}}),
        headers: vec![],
    }
}

#[tokio::test]
async fn per_model_limit_moves_to_the_next_model_on_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let mut pa = keyed("a", &a, 10, &[("BT_PM_K1", "only-key")]);
    pa["models"] = json!(["m1", "m2"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa, provider("b", &b.base_url(), 20)]}),
    )
    .await;
    a.script([gemini_per_model_429()]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(
        (
            header(&r, "x-gateway-provider"),
            header(&r, "x-gateway-model")
        ),
        ("a", "m2")
    );
    assert_eq!(auths(&a), ["only-key", "only-key"]);
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!(
        (cd[0].scope.key.as_deref(), cd[0].scope.model.as_deref()),
        (Some("env:BT_PM_K1"), Some("m1"))
    );
    let left = cd[0].until_ms - baton::clock::unix_ms();
    assert!(
        (40_000..=45_500).contains(&left),
        "RetryInfo.retryDelay honoured: {left}"
    );
    assert_eq!(b.hits(), 0);
    baton.stop().await;
}

#[tokio::test]
async fn model_fallback_off_leaves_the_provider() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let mut pa = provider("a", &a.base_url(), 10);
    pa["models"] = json!(["m1", "m2"]);
    pa["modelFallback"] = json!(false);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa, provider("b", &b.base_url(), 20)]}),
    )
    .await;
    a.script([gemini_per_model_429()]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert_eq!(a.hits(), 1);
    baton.stop().await;
}

#[tokio::test]
async fn declared_provider_scope_cools_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let mut pa = keyed("a", &a, 10, &[("BT_PS_K1", "p1"), ("BT_PS_K2", "p2")]);
    pa["limitScope"] = json!("provider");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa, provider("b", &b.base_url(), 20)]}),
    )
    .await;
    a.script([Behavior::rate_limited(Some(60))]);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "b"
    );
    assert_eq!(
        a.hits(),
        1,
        "an account-wide limit is not retried with the other key"
    );
    baton.stop().await;
}

#[tokio::test]
async fn lone_500_is_retried_once_on_the_same_target() {
    let (dir, a, b) = (
        tempfile::tempdir().unwrap(),
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
    );
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    a.script([Behavior::status(500)]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(
        (
            header(&r, "x-gateway-provider"),
            header(&r, "x-gateway-attempts")
        ),
        ("a", "2")
    );
    assert_eq!(b.hits(), 0);
    baton.stop().await;
}

#[tokio::test]
async fn a_short_reset_is_waited_out_on_the_first_choice() {
    let (dir, a, b) = (
        tempfile::tempdir().unwrap(),
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
    );
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    a.script([Behavior::Status {
        status: 429,
        body: json!({"error": {"message": "slow down"}}),
        headers: vec![("retry-after-ms".into(), "300".into())],
    }]);
    let t = std::time::Instant::now();
    let r = baton.chat("auto", "x").await;
    assert_eq!(
        (
            header(&r, "x-gateway-provider"),
            header(&r, "x-gateway-attempts")
        ),
        ("a", "2")
    );
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(300),
        "waited for the reset"
    );
    assert_eq!(b.hits(), 0);
    baton.stop().await;
}

#[tokio::test]
async fn breaker_opens_half_opens_with_one_trial_and_closes() {
    let (dir, a, b) = (
        tempfile::tempdir().unwrap(),
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
    );
    // The test moves the clock instead of sleeping through the open period.
    let clock = std::sync::Arc::new(baton::clock::ManualClock::new(baton::clock::unix_ms()));
    let baton = std::sync::Arc::new(
        Baton::start_with_clock(
            dir.path(),
            json!({"routing": {"breaker": {"failures": 3, "cooldownMs": 30000, "maxCooldownMs": 300000}},
                "providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
            Some(clock.clone()),
        )
        .await,
    );
    let mut rx = baton.handle.events().subscribe();
    a.always(Behavior::status(502));
    for _ in 0..3 {
        assert_eq!(
            header(&baton.chat("auto", "x").await, "x-gateway-provider"),
            "b"
        );
    }
    assert_eq!(a.hits(), 3);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "b"
    );
    assert_eq!(a.hits(), 3, "open: not called");
    // After the open period, parallel requests send exactly one trial.
    clock.advance(29_000);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "b"
    );
    assert_eq!(a.hits(), 3, "still open a second before the end");
    clock.advance(1_001);
    a.always(Behavior::Delay(200));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let bt = baton.clone();
        tasks.push(tokio::spawn(async move {
            header(&bt.chat("auto", "x").await, "x-gateway-provider").to_string()
        }));
    }
    let mut served = Vec::new();
    for t in tasks {
        served.push(t.await.unwrap());
    }
    assert_eq!(a.hits(), 4, "exactly one trial request");
    assert_eq!(served.iter().filter(|p| *p == "a").count(), 1);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "a",
        "closed after a good trial"
    );
    let (mut opened, mut closed) = (false, false);
    while let Ok(ev) = rx.try_recv() {
        opened |= matches!(ev, Event::BreakerOpened { ref provider, .. } if provider == "a");
        closed |= matches!(ev, Event::BreakerClosed { ref provider } if provider == "a");
    }
    assert!(opened && closed);
}

#[tokio::test]
async fn deadline_header_bounds_the_whole_chain() {
    let (dir, a) = (tempfile::tempdir().unwrap(), FakeUpstream::start("a").await);
    let mut pa = provider("a", &a.base_url(), 10);
    pa["timeouts"]["firstByteMs"] = json!(60_000);
    let baton = Baton::start(dir.path(), json!({"providers": [pa]})).await;
    a.script([Behavior::Hang]);
    let r = baton
        .post(chat_body("auto", "x", false))
        .header("x-gateway-timeout-ms", "300")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "deadline_exceeded");
    let r = baton
        .post(chat_body("auto", "x", false))
        .header("x-gateway-timeout-ms", "soon")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    baton.stop().await;
    // A client cannot run past the operator's bound with a longer header.
    let dir = tempfile::tempdir().unwrap();
    let mut pa = provider("a", &a.base_url(), 10);
    pa["timeouts"]["firstByteMs"] = json!(60_000);
    let baton = Baton::start(
        dir.path(),
        json!({"routing": {"requestTimeoutMs": 1500}, "providers": [pa]}),
    )
    .await;
    a.script([Behavior::Hang]);
    let r = baton
        .post(chat_body("auto", "x", false))
        .header("x-gateway-timeout-ms", "86400000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"].as_str().unwrap().contains("(1500 ms"),
        "the operator's bound, not the header's: {v}"
    );
    baton.stop().await;
}

#[tokio::test]
async fn wait_for_reset_holds_the_request_when_the_reset_is_near() {
    let (dir, a) = (tempfile::tempdir().unwrap(), FakeUpstream::start("a").await);
    let baton = Baton::start(
        dir.path(),
        json!({"routing": {"waitForResetMs": 3000, "shortWaitMs": 0}, "providers": [provider("a", &a.base_url(), 10)]}),
    )
    .await;
    a.script([Behavior::rate_limited(Some(1))]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(r.status(), 200, "held until the reset, then served");
    assert_eq!(a.hits(), 2);
    baton.stop().await;
}

#[tokio::test]
async fn nearly_exhausted_quota_is_demoted_before_any_429() {
    let (dir, a, b) = (
        tempfile::tempdir().unwrap(),
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
    );
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    a.script([Behavior::OkHeaders(vec![
        ("x-ratelimit-remaining-requests".into(), "2".into()),
        ("x-ratelimit-limit-requests".into(), "100".into()),
    ])]);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "a"
    );
    // 2 % left on a: b goes first, with no failed attempt.
    let r = baton.chat("auto", "x").await;
    assert_eq!(
        (
            header(&r, "x-gateway-provider"),
            header(&r, "x-gateway-attempts")
        ),
        ("b", "1")
    );
    assert_eq!(a.hits(), 1);
    baton.stop().await;
}

#[tokio::test]
async fn declared_rpm_is_counted_locally() {
    let (dir, a, b) = (
        tempfile::tempdir().unwrap(),
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
    );
    let mut pa = provider("a", &a.base_url(), 10);
    pa["limits"] = json!({"rpm": 2});
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa, provider("b", &b.base_url(), 20)]}),
    )
    .await;
    let served: Vec<String> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(header(&baton.chat("auto", "x").await, "x-gateway-provider").to_string());
        }
        v
    };
    assert_eq!(
        served,
        ["a", "a", "b", "b"],
        "a's two requests per minute are used, then b"
    );
    baton.stop().await;
}

#[tokio::test]
async fn declared_tpm_counts_the_tokens_answers_used() {
    let (dir, a, b) = (
        tempfile::tempdir().unwrap(),
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
    );
    let mut pa = provider("a", &a.base_url(), 10);
    pa["limits"] = json!({"tpm": 30});
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa, provider("b", &b.base_url(), 20)]}),
    )
    .await;
    // Each fake answer uses 18 tokens: after two, a's 30 tokens a minute are gone.
    let mut served = Vec::new();
    for stream in [false, true, false] {
        let mut body = chat_body("auto", "x", stream);
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        let r = baton.post(body).send().await.unwrap();
        served.push(header(&r, "x-gateway-provider").to_string());
        let _ = r.text().await;
    }
    assert_eq!(served, ["a", "a", "b"]);
    baton.stop().await;
}

#[tokio::test]
async fn content_policy_refusals_go_back_unless_configured_to_fall_over() {
    let refusal = || Behavior::Status {
        status: 400,
        body: json!({"error": {"message": "Your request was rejected as a result of our safety system.", "code": "content_policy_violation"}}),
        headers: vec![],
    };
    for (fallback, want_status, want_b_hits) in [(false, 400, 0), (true, 200, 1)] {
        let (dir, a, b) = (
            tempfile::tempdir().unwrap(),
            FakeUpstream::start("a").await,
            FakeUpstream::start("b").await,
        );
        let baton = Baton::start(
            dir.path(),
            json!({"routing": {"contentPolicyFallback": fallback},
                "providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
        )
        .await;
        a.script([refusal()]);
        assert_eq!(
            baton.chat("auto", "x").await.status(),
            want_status,
            "fallback={fallback}"
        );
        assert_eq!(b.hits(), want_b_hits);
        assert!(
            baton.handle.core.routing.cooldowns.active().is_empty(),
            "a refusal cools nothing"
        );
        baton.stop().await;
    }
}

#[tokio::test]
async fn a_cooldown_ends_exactly_at_its_reset() {
    let (dir, a, b) = (
        tempfile::tempdir().unwrap(),
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
    );
    let clock = std::sync::Arc::new(baton::clock::ManualClock::new(baton::clock::unix_ms()));
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
        Some(clock.clone()),
    )
    .await;
    a.script([Behavior::rate_limited(Some(120))]);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "b"
    );
    clock.advance(119_000);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "b",
        "still cooling"
    );
    clock.advance(1_000);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "a",
        "eligible at the reset instant"
    );
    assert_eq!(a.hits(), 2);
    baton.stop().await;
}

#[tokio::test]
async fn a_success_already_on_its_way_does_not_lift_a_newer_cooldown() {
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 1), provider("b", &b.base_url(), 2)]}),
    )
    .await;
    // The first request is slow on a; while it is on its way, the second hits a's limit.
    a.script([Behavior::Delay(600), Behavior::rate_limited(Some(30))]);
    let slow = baton.chat("auto", "slow");
    let limited = async {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        baton.chat("auto", "limited").await
    };
    let (slow, limited) = tokio::join!(slow, limited);
    assert_eq!(header(&slow, "x-gateway-provider"), "a");
    assert_eq!(header(&limited, "x-gateway-provider"), "b");
    // The slow success was sent before the limit: a stays cooling.
    let r = baton.chat("auto", "after").await;
    assert_eq!(header(&r, "x-gateway-provider"), "b", "a is still cooling");
    assert_eq!(a.hits(), 2);
    baton.stop().await;
}
