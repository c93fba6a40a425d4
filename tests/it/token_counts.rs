//! `count_tokens` by whoever counts best for the model the request would go to: the provider
//! (Anthropic, Gemini, on the client's own login for a subscription), OpenAI's tokenizer for
//! OpenAI's models, else the stated estimate; the header says which.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

async fn count(baton: &Baton, body: Value, extra: &[(&str, &str)]) -> (u64, String) {
    let mut r = baton
        .http
        .post(format!("{}/v1/messages/count_tokens", baton.url))
        .header("anthropic-version", "2023-06-01");
    let mut has_key = false;
    for (k, v) in extra {
        has_key |= *k == "x-baton-key";
        r = r.header(*k, *v);
    }
    if !has_key {
        r = r.header("x-api-key", &baton.key);
    }
    let r = r.json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let how = header(&r, "x-baton-token-count").to_string();
    let v: Value = r.json().await.unwrap();
    (v["input_tokens"].as_u64().unwrap(), how)
}

#[tokio::test]
async fn each_model_is_counted_by_whoever_counts_it_best() {
    let dir = tempfile::tempdir().unwrap();
    let (oa, ge, an, sub, other) = (
        FakeUpstream::start("oa").await,
        FakeUpstream::start("ge").await,
        FakeUpstream::start("an").await,
        FakeUpstream::start("sub").await,
        FakeUpstream::start("other").await,
    );
    sub.only_subscription("sk-ant-oat01-count-login");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "oa", "kind": "openai-compatible", "baseUrl": oa.base_url(),
             "models": ["gpt-3.5-turbo", "gpt-4o"]},
            {"id": "ge", "kind": "gemini", "baseUrl": ge.gemini_base_url(), "models": ["gemini-2.5-pro"]},
            {"id": "an", "kind": "anthropic", "baseUrl": an.base_url(), "models": ["claude-real"]},
            {"id": "sub", "kind": "anthropic", "baseUrl": sub.base_url(), "credentials": "client",
             "models": ["*"], "priority": 99},
            {"id": "other", "kind": "openai-compatible", "baseUrl": other.base_url(),
             "models": ["llama-3.3-70b"]}]}),
    )
    .await;
    let say = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "Say this is a test!"}]});
    // OpenAI's own count of this prompt, as its API reference shows it: 13 tokens.
    assert_eq!(
        count(&baton, say("oa/gpt-3.5-turbo"), &[]).await,
        (13, "tokenizer".into())
    );
    assert_eq!(
        count(&baton, say("oa/gpt-4o"), &[]).await,
        (13, "tokenizer".into())
    );
    // Gemini counts its own (this fake: a token a word, system instruction included).
    let mut body = say("ge/gemini-2.5-pro");
    body["system"] = json!("Be brief.");
    assert_eq!(count(&baton, body, &[]).await, (7, "provider".into()));
    let asked = &ge.received()[0].body;
    assert!(asked["path"]
        .as_str()
        .unwrap()
        .ends_with("gemini-2.5-pro:countTokens"));
    assert_eq!(
        asked["body"]["generateContentRequest"]["model"],
        "models/gemini-2.5-pro"
    );
    // Anthropic counts its own (the fake answers 4242).
    assert_eq!(
        count(&baton, say("an/claude-real"), &[]).await,
        (4242, "provider".into())
    );
    // A subscription counts on the client's own login, and only with one.
    let login = [
        ("x-baton-key", baton.key.as_str()),
        ("authorization", "Bearer sk-ant-oat01-count-login"),
    ];
    assert_eq!(
        count(&baton, say("sub/claude-x"), &login).await,
        (4242, "provider".into())
    );
    assert_eq!(
        sub.received()[0].headers["authorization"],
        "Bearer sk-ant-oat01-count-login"
    );
    let (_, how) = count(&baton, say("sub/claude-x"), &[]).await;
    assert_eq!(how, "estimate", "no login, no provider count");
    // Any other model: the estimate, said to be one.
    let (n, how) = count(&baton, say("other/llama-3.3-70b"), &[]).await;
    assert_eq!(how, "estimate");
    assert!((10..=16).contains(&n), "{n}");
    baton.stop().await;
}

/// Near a context window the bytes-a-token guess does not decide: a CJK prompt the guess says
/// fits a small window is counted at its real weight, and goes to the larger one.
#[tokio::test]
async fn a_prompt_near_a_context_window_is_counted_before_it_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (small, big) = (
        FakeUpstream::start("small").await,
        FakeUpstream::start("big").await,
    );
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "small", "kind": "openai-compatible", "baseUrl": small.base_url(),
             "models": [{"id": "llama-small", "contextWindow": 1000}], "priority": 1},
            {"id": "big", "kind": "openai-compatible", "baseUrl": big.base_url(),
             "models": [{"id": "llama-big", "contextWindow": 100000}], "priority": 2}]}),
    )
    .await;
    let ask = |text: String| {
        baton.post(json!({"model": "auto", "max_tokens": 100,
            "messages": [{"role": "user", "content": text}]}))
    };
    // 3,200 ASCII characters: about 800 tokens by any count; the small window takes it.
    let r = ask("word ".repeat(640)).send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "small");
    // 950 Chinese characters: 713 tokens by bytes, about 950 by weight: over 1,000 with the
    // answer's 100.
    let r = ask("网关".repeat(475)).send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "big");
    let rows = baton.log().await;
    let skip = &rows[0].attempts[0];
    assert_eq!(skip.provider, "small");
    assert!(
        skip.reason
            .as_deref()
            .unwrap_or("")
            .contains("context window"),
        "{skip:?}"
    );
    baton.stop().await;
}

/// A count goes where the request would: past a provider that is cooling for the model (its
/// 429 said for how long) to the next one, which counts it.
#[tokio::test]
async fn a_count_passes_over_a_provider_cooling_for_the_model_as_the_request_would() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (
        FakeUpstream::start("first").await,
        FakeUpstream::start("second").await,
    );
    first.script([testkit::Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
        headers: vec![("retry-after".into(), "60".into())],
    }]);
    std::env::set_var("BT_COUNT_FIRST_KEY", "sk-ant-api03-first");
    std::env::set_var("BT_COUNT_SECOND_KEY", "sk-ant-api03-second");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "first", "kind": "anthropic", "baseUrl": first.base_url(), "models": ["claude-real"],
             "keys": [{"env": "BT_COUNT_FIRST_KEY"}], "priority": 1},
            {"id": "second", "kind": "anthropic", "baseUrl": second.base_url(), "models": ["claude-real"],
             "keys": [{"env": "BT_COUNT_SECOND_KEY"}], "priority": 2}]}),
    )
    .await;
    let body = json!({"model": "claude-real", "messages": [{"role": "user", "content": "hello"}]});
    assert_eq!(
        count(&baton, body.clone(), &[]).await,
        (4242, "provider".into())
    );
    assert_eq!(
        first.received().len(),
        1,
        "counted by the first, which is not cooling yet"
    );
    // A request meets the first's limit and is served by the second.
    let mut turn = body.clone();
    turn["max_tokens"] = json!(50);
    let r = baton.messages(turn).send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "second");
    let (first_seen, second_seen) = (first.received().len(), second.received().len());
    assert_eq!(count(&baton, body, &[]).await, (4242, "provider".into()));
    assert_eq!(
        first.received().len(),
        first_seen,
        "the cooling provider is not asked"
    );
    assert_eq!(
        second.received().len(),
        second_seen + 1,
        "the next one counts it"
    );
    baton.stop().await;
}
