//! Routing and failover through a real gateway in front of real fake upstreams on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn two(a_priority: i64) -> (tempfile::TempDir, FakeUpstream, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), a_priority), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    (dir, a, b, baton)
}

#[tokio::test]
async fn auto_uses_priority_order_and_reports_what_served() {
    let (_d, a, b, baton) = two(10).await;
    let r = baton.chat("auto", "hello").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "a");
    assert_eq!(header(&r, "x-gateway-model"), "a-model");
    assert_eq!(header(&r, "x-gateway-attempts"), "1");
    assert!(header(&r, "x-request-id").starts_with("req_"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "a: hello");
    assert_eq!((a.hits(), b.hits()), (1, 0));
    assert_eq!(
        a.received()[0].body["model"],
        "a-model",
        "model rewritten for the upstream"
    );
    baton.stop().await;
}

#[tokio::test]
async fn every_field_the_client_sends_reaches_the_upstream() {
    let (_d, a, _b, baton) = two(10).await;
    let body = json!({"model": "auto", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}],
        "temperature": 0.3, "top_p": 0.9, "stop": ["X"], "max_completion_tokens": 64, "seed": 42,
        "user": "u1", "n": 1, "logprobs": false, "response_format": {"type": "json_object"},
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "none", "metadata": {"team": "a"}, "prompt_cache_key": "conv-1",
        "logit_bias": {"50256": -100}});
    let r = baton.post(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let got = &a.received()[0].body;
    for (k, v) in body.as_object().unwrap() {
        if k != "model" {
            assert_eq!(&got[k], v, "field {k} forwarded unchanged");
        }
    }
    baton.stop().await;
}

#[tokio::test]
async fn rate_limit_fails_over_and_cools_the_provider() {
    let (_d, a, _b, baton) = two(10).await;
    a.script([Behavior::rate_limited(Some(120))]);
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert_eq!(header(&r, "x-gateway-attempts"), "2");
    // The cooling provider is skipped without a request.
    let r = baton.chat("auto", "again").await;
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert_eq!(header(&r, "x-gateway-attempts"), "1");
    assert_eq!(a.hits(), 1);
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!(cd.len(), 1);
    let left = cd[0].until_ms - baton::clock::unix_ms();
    assert!(
        (110_000..=120_500).contains(&left),
        "Retry-After honoured: {left} ms"
    );
    let log = baton.log().await;
    assert_eq!(log.len(), 2);
    let (second, first) = (&log[0], &log[1]);
    assert_eq!(first.attempts[0].class.as_str(), "rate");
    assert_eq!(first.attempts[1].class.as_str(), "ok");
    assert_eq!(
        second.attempts[0].class.as_str(),
        "skipped",
        "cooling target recorded as skipped"
    );
    assert!(second.attempts[0].reset_at_ms.is_some());
    baton.stop().await;
}

#[tokio::test]
async fn transient_failures_fail_over() {
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refused = format!("http://{}/v1", dead.local_addr().unwrap());
    drop(dead);
    for (name, behavior) in [
        ("500", Some(Behavior::status(500))),
        ("503", Some(Behavior::status(503))),
        ("529", Some(Behavior::status(529))),
        ("408", Some(Behavior::status(408))),
        ("reset", Some(Behavior::Reset)),
        ("hang", Some(Behavior::Hang)),
        ("refused", None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let a = FakeUpstream::start("a").await;
        let b = FakeUpstream::start("b").await;
        let mut pa = provider("a", &a.base_url(), 10);
        pa["timeouts"]["firstByteMs"] = json!(400);
        if behavior.is_none() {
            pa["baseUrl"] = json!(refused);
        }
        let baton = Baton::start(
            dir.path(),
            json!({"providers": [pa, provider("b", &b.base_url(), 20)]}),
        )
        .await;
        // A lone 500 or reset is retried once on the same target, so script it twice.
        let twice = |b: Behavior| vec![b.clone(), b];
        if let Some(bh) = behavior {
            a.script(twice(bh));
        }
        for stream in [false, true] {
            let r = baton
                .post(chat_body("auto", "x", stream))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{name} stream={stream}");
            assert_eq!(
                header(&r, "x-gateway-provider"),
                "b",
                "{name} stream={stream}"
            );
            let _ = r.text().await;
            a.script(match name {
                "500" => twice(Behavior::status(500)),
                "reset" => twice(Behavior::Reset),
                "hang" => vec![Behavior::Hang],
                "408" => vec![Behavior::status(408)],
                _ => vec![],
            });
        }
        baton.stop().await;
    }
}

#[tokio::test]
async fn client_errors_go_back_without_failover_or_cooldown() {
    let (_d, a, b, baton) = two(10).await;
    a.script([Behavior::Status {
        status: 400,
        body: json!({"error": {"message": "temperature must be at most 2", "type": "invalid_request_error", "param": "temperature", "code": null}}),
        headers: vec![],
    }]);
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 400);
    assert_eq!(header(&r, "x-gateway-provider"), "a");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["message"], "temperature must be at most 2");
    assert_eq!(v["error"]["param"], "temperature");
    assert_eq!(b.hits(), 0, "no fallback on 400");
    assert!(
        baton.handle.core.routing.cooldowns.active().is_empty(),
        "a 400 cools nothing"
    );
    let r = baton.chat("auto", "next").await;
    assert_eq!(
        header(&r, "x-gateway-provider"),
        "a",
        "provider still healthy"
    );
    baton.stop().await;
}

#[tokio::test]
async fn context_length_goes_once_to_a_larger_window() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
        FakeUpstream::start("c").await,
    );
    let mut pa = provider("a", &a.base_url(), 10);
    pa["models"] = json!([{"id": "small", "contextWindow": 8000}]);
    let mut pb = provider("b", &b.base_url(), 20);
    pb["models"] = json!([{"id": "same", "contextWindow": 8000}]);
    let mut pc = provider("c", &c.base_url(), 30);
    pc["models"] = json!([{"id": "big", "contextWindow": 200000}]);
    let baton = Baton::start(dir.path(), json!({"providers": [pa, pb, pc]})).await;
    let ctx = Behavior::Status {
        status: 400,
        body: json!({"error": {"message": "This model's maximum context length is 8000 tokens", "code": "context_length_exceeded"}}),
        headers: vec![],
    };
    a.script([ctx.clone()]);
    let r = baton.chat("auto", "long").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "x-gateway-provider"),
        "c",
        "b's window is not larger, so it is skipped"
    );
    assert_eq!(b.hits(), 0);
    // If the larger candidate also says too long, the client gets the error.
    a.script([ctx.clone()]);
    c.script([ctx]);
    let r = baton.chat("auto", "longer").await;
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "context_length_exceeded");
    baton.stop().await;
}

#[tokio::test]
async fn named_routes_pins_and_provider_ids() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let mut pb = provider("b", &b.base_url(), 20);
    pb["models"] = json!(["b1", "b2"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), pb], "routes": {"coding": ["b/b2", "a"]}}),
    )
    .await;
    let r = baton.chat("coding", "x").await;
    assert_eq!(
        (
            header(&r, "x-gateway-provider"),
            header(&r, "x-gateway-model")
        ),
        ("b", "b2")
    );
    let r = baton.chat("b", "x").await;
    assert_eq!(header(&r, "x-gateway-model"), "b1");
    let r = baton.chat("b/custom-model", "x").await;
    assert_eq!(header(&r, "x-gateway-model"), "custom-model");
    assert_eq!(b.received().last().unwrap().body["model"], "custom-model");
    let r = baton.chat("b1", "x").await;
    assert_eq!(
        header(&r, "x-gateway-provider"),
        "b",
        "bare model name finds its provider"
    );
    // The route falls back to `a` when b is limited.
    b.script([Behavior::rate_limited(Some(60))]);
    let r = baton.chat("coding", "x").await;
    assert_eq!(header(&r, "x-gateway-provider"), "a");
    baton.stop().await;
}

#[tokio::test]
async fn every_candidate_rate_limited_gives_429_with_soonest_reset() {
    let (_d, a, b, baton) = two(10).await;
    a.script([Behavior::rate_limited(Some(300))]);
    b.script([Behavior::rate_limited(Some(40))]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(r.status(), 429);
    let ra: u64 = header(&r, "retry-after").parse().unwrap();
    assert!((38..=40).contains(&ra), "soonest reset, got {ra}");
    let details = header(&r, "x-gateway-attempt-details").to_string();
    assert!(
        details.starts_with("a/a-model=rate@") && details.contains(", b/b-model=rate@"),
        "{details}"
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "all_providers_rate_limited");
    let c = v["error"]["candidates"].as_array().unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(
        (c[1]["target"].as_str(), c[1]["state"].as_str()),
        (Some("b/b-model"), Some("rate"))
    );
    assert!(c[1]["resetAt"].is_string());
    // While both cool, nothing is sent upstream and the answer stays 429.
    let r = baton.chat("auto", "x").await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "x-gateway-attempts"), "0");
    assert_eq!((a.hits(), b.hits()), (1, 1));
    baton.stop().await;
}

#[tokio::test]
async fn every_candidate_failing_gives_502_listing_attempts() {
    let (_d, a, b, baton) = two(10).await;
    // A lone 500 is retried once on the same target; the second 500 moves on.
    a.script([Behavior::status(500), Behavior::status(500)]);
    b.script([Behavior::status(502)]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("a/a-model") && msg.contains("b/b-model"),
        "{msg}"
    );
    assert_eq!(v["error"]["type"], "upstream_error");
    baton.stop().await;
}

#[tokio::test]
async fn cooldowns_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let config =
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]});
    let baton = Baton::start(dir.path(), config.clone()).await;
    a.script([Behavior::rate_limited(Some(3600))]);
    assert_eq!(
        header(&baton.chat("auto", "x").await, "x-gateway-provider"),
        "b"
    );
    baton.stop().await;

    let baton = Baton::start(dir.path(), config).await;
    let r = baton.chat("auto", "after restart").await;
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert_eq!(
        a.hits(),
        1,
        "the cooling provider was not called after the restart"
    );
    let log = baton.log().await;
    assert!(log.len() >= 2, "request log persisted across restart");
    baton.stop().await;
}

#[tokio::test]
async fn concurrency_limit_holds_under_parallel_load() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    a.always(Behavior::Delay(150));
    let mut pa = provider("a", &a.base_url(), 10);
    pa["maxConcurrency"] = json!(2);
    let baton = std::sync::Arc::new(Baton::start(dir.path(), json!({"providers": [pa]})).await);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let b = baton.clone();
        tasks.push(tokio::spawn(async move {
            b.chat("auto", &format!("n{i}")).await.status()
        }));
    }
    for t in tasks {
        assert_eq!(
            t.await.unwrap(),
            200,
            "queued requests are served, not refused"
        );
    }
    assert_eq!(a.hits(), 8);
    assert_eq!(
        a.max_in_flight(),
        2,
        "never more than maxConcurrency upstream"
    );
}

#[tokio::test]
async fn saturated_provider_is_skipped_and_full_queue_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    a.always(Behavior::Delay(800));
    let mut pa = provider("a", &a.base_url(), 10);
    pa["maxConcurrency"] = json!(1);
    let mut pb = provider("b", &b.base_url(), 20);
    pb["maxConcurrency"] = json!(1);
    b.always(Behavior::Delay(800));
    let baton = std::sync::Arc::new(
        Baton::start(
            dir.path(),
            json!({"providers": [pa, pb], "routing": {"queueTimeoutMs": 200}}),
        )
        .await,
    );
    let b1 = baton.clone();
    let first = tokio::spawn(async move { b1.chat("auto", "1").await });
    assert!(eventually(5, || a.in_flight() == 1).await);
    let b2 = baton.clone();
    let second = tokio::spawn(async move { b2.chat("auto", "2").await });
    assert!(
        eventually(5, || b.in_flight() == 1).await,
        "saturated a is skipped for b"
    );
    let third = baton.chat("auto", "3").await;
    assert_eq!(third.status(), 429, "both saturated past the queue timeout");
    assert!(header(&third, "retry-after").parse::<u64>().is_ok());
    let v: Value = third.json().await.unwrap();
    assert_eq!(v["error"]["code"], "gateway_busy");
    assert_eq!(header(&first.await.unwrap(), "x-gateway-provider"), "a");
    assert_eq!(header(&second.await.unwrap(), "x-gateway-provider"), "b");
}

#[tokio::test]
async fn request_log_records_attempt_chain_and_usage() {
    let (_d, a, _b, baton) = two(10).await;
    a.script([Behavior::status(503)]);
    let r = baton.chat("auto", "x").await;
    let id = header(&r, "x-request-id").to_string();
    assert_eq!(r.status(), 200);
    let log = baton.log().await;
    let row = log
        .iter()
        .find(|r| r.id == id)
        .expect("row for the request id");
    assert_eq!(row.status, 200);
    assert_eq!(row.provider.as_deref(), Some("b"));
    assert_eq!(row.client, "generated");
    assert_eq!(
        row.attempts
            .iter()
            .map(|a| a.class.as_str())
            .collect::<Vec<_>>(),
        ["overloaded", "ok"]
    );
    assert_eq!(row.attempts[0].status, Some(503));
    assert_eq!((row.input_tokens, row.output_tokens), (Some(11), Some(7)));
    assert!(row.ttfb_ms.is_some());
    baton.stop().await;
}

#[tokio::test]
async fn failover_events_are_broadcast() {
    let (_d, a, _b, baton) = two(10).await;
    let mut rx = baton.handle.events().subscribe();
    a.script([Behavior::rate_limited(Some(60))]);
    let _ = baton.chat("auto", "x").await;
    let mut seen = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        seen.push(ev);
    }
    assert!(seen.iter().any(|e| matches!(e, baton::events::Event::CooldownStarted { provider, class, .. } if provider == "a" && *class == baton::limits::ErrorClass::Rate)));
    assert!(seen.iter().any(|e| matches!(e, baton::events::Event::Failover { from, to, .. } if from == "a/a-model" && to == "b/b-model")));
    baton.stop().await;
}

/// `{"claude-*": "auto"}` covers Claude Code's names even when a provider lists the exact one:
/// that provider serves the very model first, and at its cap the request fails over to the
/// rest of `auto` instead of "every candidate is rate-limited".
#[tokio::test]
async fn a_model_map_glob_covers_a_name_a_provider_lists() {
    let dir = tempfile::tempdir().unwrap();
    let sub = FakeUpstream::start("sub").await;
    let other = FakeUpstream::start("other").await;
    let mut listed = provider("sub", &sub.base_url(), 1);
    listed["models"] = json!(["claude-opus-4-8", "sub-model"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [listed, provider("other", &other.base_url(), 2)],
            "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    let r = baton.chat("claude-opus-4-8", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "sub");
    assert_eq!(
        header(&r, "x-gateway-model"),
        "claude-opus-4-8",
        "the very model it asked for, not the provider's default"
    );
    sub.script([Behavior::rate_limited(Some(3600))]);
    let r = baton.chat("claude-opus-4-8", "again").await;
    assert_eq!(r.status(), 200, "failed over at the cap");
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    let r = baton.chat("claude-opus-4-8", "and again").await;
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    assert_eq!(sub.hits(), 2, "the capped one is not asked again");
    // A name no glob covers still goes only where it is listed.
    let r = baton.chat("sub-model", "x").await;
    assert_eq!(r.status(), 429);
    baton.stop().await;
}
