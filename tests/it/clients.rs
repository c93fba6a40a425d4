//! Client keys for teams: rate limits, token limits and budgets enforced before any upstream is
//! called, the price-tier cap on failover, allow lists, expiry and the disabled switch, the
//! bad-request throttle, streamed requests' tokens (usage and metrics: `client_usage.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

/// A provider whose one model has this price (USD per million tokens).
pub(crate) fn priced(id: &str, url: &str, priority: i64, input: f64, output: f64) -> Value {
    json!({"id": id, "kind": "openai-compatible", "baseUrl": url, "priority": priority,
        "models": [{"id": format!("{id}-model"), "price": {"input": input, "output": output}}],
        "timeouts": {"connectMs": 2000, "firstByteMs": 3000, "idleMs": 3000}})
}

/// Makes a client key with `policy`; returns (id, key).
pub(crate) async fn make_key(b: &Baton, label: &str, policy: Value) -> (String, String) {
    let mut body = policy;
    body["label"] = json!(label);
    let (st, v) = Admin(b).send(Method::POST, "/admin/keys", Some(body)).await;
    assert_eq!(st, 201, "{v}");
    (
        v["id"].as_str().unwrap().to_string(),
        v["key"].as_str().unwrap().to_string(),
    )
}

/// A gateway with one provider `a` in front of a fake upstream.
async fn one_provider() -> (FakeUpstream, Baton, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)]}),
    )
    .await;
    (up, baton, dir)
}

pub(crate) async fn error_of(r: reqwest::Response) -> (u16, String, Value) {
    let st = r.status().as_u16();
    let retry = header(&r, "retry-after").to_string();
    let v: Value = r.json().await.unwrap();
    (st, retry, v["error"].clone())
}

#[tokio::test]
async fn rate_and_token_limits_refuse_one_client_before_any_upstream_call() {
    let (up, baton, _dir) = one_provider().await;
    let (_, limited) = make_key(&baton, "script", json!({"rpm": 2})).await;
    let (_, other) = make_key(&baton, "alice", json!({})).await;
    for _ in 0..2 {
        assert_eq!(baton.chat_as(&limited, "auto").await.status(), 200);
    }
    let (st, retry, err) = error_of(baton.chat_as(&limited, "auto").await).await;
    assert_eq!(st, 429, "{err}");
    assert_eq!(err["code"], "client_rate_limited");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("2 requests per minute"),
        "{err}"
    );
    // A bucket of 2 per minute refills one request every 30 s.
    let secs: u64 = retry.parse().expect("Retry-After");
    assert!((29..=30).contains(&secs), "Retry-After {retry}");
    assert_eq!(
        up.hits(),
        2,
        "the refused request never reached the upstream"
    );
    // Everyone else, and the upstream key, are unaffected.
    assert_eq!(baton.chat_as(&other, "auto").await.status(), 200);
    assert_eq!(baton.chat_as(&baton.key, "auto").await.status(), 200);
    assert!(
        baton.handle.core.routing.cooldowns.active().is_empty(),
        "no upstream cooldown"
    );

    // Tokens per minute: each answer uses 18 tokens; a 20-token bucket admits two requests
    // (the second overdraws it) and refuses the third.
    let (_, tok) = make_key(&baton, "tokens", json!({"tpm": 20})).await;
    assert_eq!(baton.chat_as(&tok, "auto").await.status(), 200);
    assert_eq!(baton.chat_as(&tok, "auto").await.status(), 200);
    let (st, retry, err) = error_of(baton.chat_as(&tok, "auto").await).await;
    assert_eq!(
        (st, err["code"].as_str()),
        (429, Some("client_token_limited")),
        "{err}"
    );
    assert!(retry.parse::<u64>().unwrap() >= 1);
}

/// A key with limits answers, on every answer, what is left of them the way the vendors do:
/// OpenAI's `x-ratelimit-*` everywhere (a Go duration for the reset) and Anthropic's
/// `anthropic-ratelimit-*` on the Messages API (an RFC 3339 reset), streams included; its own
/// 429 carries `Retry-After`. A key without limits gets none.
#[tokio::test]
async fn a_limited_key_is_told_what_is_left_in_the_vendors_headers() {
    let (_up, baton, _dir) = one_provider().await;
    let (_, key) = make_key(&baton, "paced", json!({"rpm": 3, "tpm": 10000})).await;
    let r = baton.chat_as(&key, "auto").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ratelimit-limit-requests"), "3");
    assert_eq!(header(&r, "x-ratelimit-remaining-requests"), "2");
    // A bucket of 3 a minute is full again 20 s after one request.
    let reset = baton::limits::parse_go_duration_ms(header(&r, "x-ratelimit-reset-requests"));
    assert!(
        reset.is_some_and(|ms| (19_000..=20_000).contains(&ms)),
        "{reset:?}"
    );
    assert_eq!(header(&r, "x-ratelimit-limit-tokens"), "10000");
    assert_eq!(header(&r, "x-ratelimit-remaining-tokens"), "10000");
    // The Messages API, streamed: Anthropic's own headers too.
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &key)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "auto", "max_tokens": 16, "stream": true,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "anthropic-ratelimit-requests-limit"), "3");
    assert_eq!(header(&r, "anthropic-ratelimit-requests-remaining"), "1");
    let at: jiff::Timestamp = header(&r, "anthropic-ratelimit-requests-reset")
        .parse()
        .expect("an RFC 3339 reset");
    let in_ms = at.as_millisecond() - baton::clock::unix_ms();
    assert!((0..=41_000).contains(&in_ms), "{in_ms}");
    assert_eq!(header(&r, "x-ratelimit-remaining-requests"), "1");
    let _ = r.text().await;
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);
    let r = baton.chat_as(&key, "auto").await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after")
        .parse::<u64>()
        .is_ok_and(|s| s >= 1));
    // No limits, no headers.
    let r = baton.chat_as(&baton.key, "auto").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ratelimit-limit-requests"), "");
}

#[tokio::test]
async fn budgets_are_estimated_from_prices_and_renew_at_the_period_end() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("a").await;
    // The period decisions run on a pinned clock, never on the day the test runs.
    let now: i64 = "2026-12-01T09:00:00Z"
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_millisecond();
    let clock = std::sync::Arc::new(baton::clock::ManualClock::new(now));
    // $1000 per million tokens: an answer of 11 + 7 tokens costs $0.018.
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [priced("a", &up.base_url(), 1, 1000.0, 1000.0)]}),
        Some(clock.clone()),
    )
    .await;
    let (id, key) = make_key(&baton, "team", json!({"budget": {"dayUsd": 0.03}})).await;
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);
    let (st, retry, err) = error_of(baton.chat_as(&key, "auto").await).await;
    assert_eq!(
        (st, err["code"].as_str()),
        (429, Some("budget_exceeded")),
        "{err}"
    );
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("daily budget ($0.0360 of $0.03)"),
        "{err}"
    );
    assert_eq!(
        retry,
        (15 * 3600).to_string(),
        "Retry-After is the next UTC midnight"
    );
    assert_eq!(up.hits(), 2);
    let log = baton.log().await;
    let costs: Vec<f64> = log
        .iter()
        .filter(|r| r.client_key == id && r.status == 200)
        .map(|r| r.cost_usd.unwrap())
        .collect();
    assert_eq!(costs.len(), 2);
    assert!(costs.iter().all(|c| (c - 0.018).abs() < 1e-9), "{costs:?}");
    let (_, keys) = Admin(&baton).send(Method::GET, "/admin/keys", None).await;
    let k = &keys["ui"][0];
    assert_eq!(k["usage"]["dayTokens"], 36);
    assert!(
        (k["usage"]["dayUsd"].as_f64().unwrap() - 0.036).abs() < 1e-9,
        "{k}"
    );

    // Spending survives a restart: the budget is rebuilt from the request log.
    baton.stop().await;
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [priced("a", &up.base_url(), 1, 1000.0, 1000.0)]}),
        Some(clock.clone()),
    )
    .await;
    let (st, _, err) = error_of(baton.chat_as(&key, "auto").await).await;
    assert_eq!(
        (st, err["code"].as_str()),
        (429, Some("budget_exceeded")),
        "{err}"
    );
    // Raising the budget lets the key work again at once.
    let (st, v) = Admin(&baton)
        .send(
            Method::PATCH,
            &format!("/admin/keys/{id}"),
            Some(json!({"budget": {"dayUsd": 1.0}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);
}

#[tokio::test]
async fn failover_never_moves_a_capped_client_to_a_dearer_tier() {
    let dir = tempfile::tempdir().unwrap();
    let cheap = FakeUpstream::start("cheap").await;
    let dear = FakeUpstream::start("dear").await;
    cheap.always(Behavior::rate_limited(Some(60)));
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            priced("cheap", &cheap.base_url(), 1, 0.05, 0.08),
            priced("dear", &dear.base_url(), 2, 3.0, 15.0),
        ]}),
    )
    .await;
    let (_, capped) = make_key(&baton, "intern", json!({"maxTier": "low"})).await;
    let (st, retry, err) = error_of(baton.chat_as(&capped, "auto").await).await;
    assert_eq!(
        st, 429,
        "the cheap provider is rate-limited and the dear one is off limits: {err}"
    );
    assert!(!retry.is_empty());
    assert_eq!(dear.hits(), 0, "never sent to the dearer tier");
    let log = baton.log().await;
    let skipped = log[0]
        .attempts
        .iter()
        .find(|a| a.provider == "dear")
        .unwrap();
    assert_eq!(skipped.class.as_str(), "skipped");
    assert!(skipped
        .reason
        .as_deref()
        .unwrap()
        .contains("price tier high is above this key's limit (low)"));
    // An uncapped key fails over as usual.
    let r = baton.chat_as(&baton.key, "auto").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "dear");
    // Pinning the dear model with the capped key says why it cannot.
    let (st, _, err) = error_of(baton.chat_as(&capped, "dear/dear-model").await).await;
    assert_eq!(
        (st, err["code"].as_str()),
        (403, Some("price_tier_exceeded")),
        "{err}"
    );
}

#[tokio::test]
async fn allow_lists_expiry_and_the_disabled_switch() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 1), provider("b", &b.base_url(), 2)]}),
    )
    .await;
    let admin = Admin(&baton);
    // Policies are checked: unknown targets, zero limits and bad dates name the field.
    for (body, param) in [
        (json!({"label": "x", "allow": ["nope"]}), "allow[0]"),
        (json!({"label": "x", "rpm": 0}), "rpm"),
        (json!({"label": "x", "maxTier": "cheapest"}), "maxTier"),
        (json!({"label": "x", "expiresAt": "tomorrow"}), "expiresAt"),
        (
            json!({"label": "x", "budget": {"dayUsd": -1}}),
            "budget.dayUsd",
        ),
        (json!({"label": "x", "rpn": 5}), "rpn"),
    ] {
        let (st, v) = admin
            .send(Method::POST, "/admin/keys", Some(body.clone()))
            .await;
        assert_eq!(st, 422, "{body} -> {v}");
        assert_eq!(v["error"]["param"], param, "{v}");
    }
    let (id, key) = make_key(&baton, "b-only", json!({"allow": ["b"]})).await;
    let r = baton.chat_as(&key, "auto").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "x-gateway-provider"),
        "b",
        "auto keeps to what the key may use"
    );
    let (st, _, err) = error_of(baton.chat_as(&key, "a/a-model").await).await;
    assert_eq!(
        (st, err["code"].as_str()),
        (403, Some("model_not_allowed")),
        "{err}"
    );
    assert!(
        err["message"].as_str().unwrap().contains("It may use: b"),
        "{err}"
    );
    assert_eq!(a.hits(), 0);
    // Its model list shows only what it may use.
    let models: Value = baton
        .http
        .get(format!("{}/v1/models", baton.url))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["auto", "b", "b/b-model"]);

    let patch = |body: Value| {
        let admin = Admin(&baton);
        let id = id.clone();
        async move {
            admin
                .send(Method::PATCH, &format!("/admin/keys/{id}"), Some(body))
                .await
        }
    };
    let (st, v) = patch(json!({"disabled": true})).await;
    assert_eq!((st, v["state"].as_str()), (200, Some("disabled")), "{v}");
    let (st, _, err) = error_of(baton.chat_as(&key, "auto").await).await;
    assert_eq!(
        (st, err["code"].as_str()),
        (403, Some("key_disabled")),
        "{err}"
    );
    patch(json!({"disabled": false})).await;
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);
    let (st, v) = patch(json!({"expiresAt": "2020-01-01T00:00:00Z"})).await;
    assert_eq!((st, v["state"].as_str()), (200, Some("expired")), "{v}");
    let (st, _, err) = error_of(baton.chat_as(&key, "auto").await).await;
    assert_eq!(
        (st, err["code"].as_str()),
        (401, Some("key_expired")),
        "{err}"
    );
    assert!(err["message"]
        .as_str()
        .unwrap()
        .contains("2020-01-01 00:00:00 UTC"));
    let (st, v) = patch(json!({"expiresAt": null, "allow": null})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["policy"], json!({}), "null removes a field");
    let (st, v) = patch(json!({"label": "renamed"})).await;
    assert_eq!((st, v["error"]["param"].as_str()), (422, Some("label")));
    let (st, _) = admin
        .send(Method::PATCH, "/admin/keys/k_nope", Some(json!({})))
        .await;
    assert_eq!(st, 404);
    // The Anthropic API refuses the same way, in its own error shape.
    patch(json!({"allow": ["b"]})).await;
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &key)
        .json(&json!({"model": "a/a-model", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], "permission_error", "{v}");
}

#[tokio::test]
async fn a_runaway_client_sending_bad_requests_is_throttled_alone() {
    let (up, baton, _dir) = one_provider().await;
    let (_, runaway) = make_key(&baton, "runaway", json!({})).await;
    let (_, good) = make_key(&baton, "good", json!({})).await;
    for _ in 0..baton::clients::limiter::BAD_REQUEST_LIMIT {
        let r = baton
            .http
            .post(format!("{}/v1/chat/completions", baton.url))
            .bearer_auth(&runaway)
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
    }
    // Now even a valid request from it is refused, with a reason and a wait.
    let (st, retry, err) = error_of(baton.chat_as(&runaway, "auto").await).await;
    assert_eq!(
        (st, err["code"].as_str()),
        (429, Some("too_many_bad_requests")),
        "{err}"
    );
    assert!(
        (59..=60).contains(&retry.parse::<u64>().unwrap()),
        "{retry}"
    );
    assert_eq!(
        baton.chat_as(&good, "auto").await.status(),
        200,
        "others unaffected"
    );
    assert_eq!(up.hits(), 1);
}

/// Streamed answers count their tokens whether or not the client asked for usage: Baton asks
/// the upstream every time, keeps the extra chunk from a client that did not ask, and estimates
/// when the upstream reports none — so a token budget holds for clients that stream.
#[tokio::test]
async fn streamed_requests_count_tokens_and_budgets_hold() {
    let (up, baton, _dir) = one_provider().await;
    let (_, key) = make_key(&baton, "streamer", json!({"budget": {"dayTokens": 60}})).await;
    let stream = |key: &str, usage: bool| {
        let mut body = chat_body("auto", "hi", true);
        if usage {
            body["stream_options"] = json!({"include_usage": true});
        }
        baton
            .http
            .post(format!("{}/v1/chat/completions", baton.url))
            .bearer_auth(key)
            .json(&body)
            .send()
    };
    // No usage asked: the upstream was asked anyway, the client sees no usage-only chunk.
    let r = stream(&key, false).await.unwrap();
    assert_eq!(r.status(), 200);
    let events = sse_data(&r.text().await.unwrap());
    assert!(
        !events.iter().any(|e| e.contains("\"usage\"")),
        "a client that did not ask gets no usage chunk: {events:?}"
    );
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(
        up.received()[0].body["stream_options"],
        json!({"include_usage": true})
    );
    let log = baton.log().await;
    assert_eq!(
        (log[0].input_tokens, log[0].output_tokens),
        (Some(11), Some(7))
    );
    // Asked: relayed as sent.
    let r = stream(&key, true).await.unwrap();
    let events = sse_data(&r.text().await.unwrap());
    assert!(
        events.iter().any(|e| e.contains("\"completion_tokens\":7")),
        "{events:?}"
    );
    // 36 of 60 spent: two more are admitted (36, then 54 < 60), the next is refused.
    for spent in [36, 54] {
        let r = stream(&key, false).await.unwrap();
        assert_eq!(r.status(), 200, "{spent} of 60 spent");
        let _ = r.text().await;
    }
    assert_eq!(
        stream(&key, false).await.unwrap().status(),
        429,
        "the day's tokens are spent, streamed or not"
    );

    // An upstream that reports no usage even when asked: estimated, not zero.
    up.script([Behavior::NoUsage]);
    let r = stream(&baton.key, false).await.unwrap();
    let _ = r.text().await;
    let log = baton.log().await;
    assert!(log[0].input_tokens.unwrap() > 0, "{:?}", log[0]);
    assert!(log[0].output_tokens.unwrap() > 0, "{:?}", log[0]);
}

/// `count_tokens` and `/v1/models` hold a key to its policy as chat does: a disabled key gets
/// 403 from both, and a key's rate limit counts its counts.
#[tokio::test]
async fn counting_and_listing_follow_the_keys_policy() {
    let (_up, baton, _d) = one_provider().await;
    let (id, key) = make_key(&baton, "counter", json!({"rpm": 1})).await;
    let count = |key: String| {
        let baton = &baton;
        async move {
            baton
                .http
                .post(format!("{}/v1/messages/count_tokens", baton.url))
                .header("x-api-key", key)
                .header("anthropic-version", "2023-06-01")
                .json(&json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(count(key.clone()).await.status(), 200);
    let r = count(key.clone()).await;
    assert_eq!(r.status(), 429, "the key's rpm counts its counts");
    let (st, _) = Admin(&baton)
        .send(
            Method::PATCH,
            &format!("/admin/keys/{id}"),
            Some(json!({"disabled": true})),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(count(key.clone()).await.status(), 403);
    let r = baton
        .http
        .get(format!("{}/v1/models", baton.url))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "key_disabled");
    baton.stop().await;
}
