//! The `bedrock` kind against a fake as strict as AWS (a SigV4 signature it checks with its own
//! code, the body Bedrock takes, the account's model ids, event-stream framing): a Messages
//! client's turn reaches a Bedrock model id with its thinking, tools and betas, streamed and
//! whole; the same model on Bedrock takes over from an Anthropic account at its limit; a wrong
//! secret, region or clock is refused with AWS's own text and fails over; Bedrock's throttling
//! is a rate limit; a Bedrock API key is a bearer token.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

const ID: &str = "AKIAIOSFODNN7EXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

fn fake_account(up: &FakeUpstream) {
    up.bedrock_account(ID, SECRET, None, "us-west-2", &[MODEL]);
}

/// A Bedrock provider whose key is `key` (typed as the UI's field takes it).
fn bedrock(id: &str, up: &FakeUpstream, key: &str, region: &str) -> Value {
    let var = format!("BT_BEDROCK_{}", id.to_uppercase().replace('-', "_"));
    std::env::set_var(&var, key);
    json!({"id": id, "kind": "bedrock", "baseUrl": format!("http://{}", up.addr), "region": region,
        // Its Anthropic names come with the id: `claude-sonnet-4-5-20250929`, `claude-sonnet-4-5`.
        "models": [MODEL],
        "keys": [{"env": var}], "priority": 1,
        "timeouts": {"connectMs": 2000, "firstByteMs": 3000, "idleMs": 3000}})
}

/// The text of a Messages stream's text deltas.
fn streamed_text(sse: &str) -> String {
    sse_data(sse)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v.pointer("/delta/text")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

fn turn(stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 2000, "stream": stream,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "read_file", "description": "read", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "hello"}]})
}

#[tokio::test]
async fn a_claude_turn_reaches_its_bedrock_model_signed_whole_and_streamed() {
    let up = FakeUpstream::start("bk").await;
    fake_account(&up);
    let dir = tempfile::tempdir().unwrap();
    let key = format!("{ID}:{SECRET}");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [bedrock("bk", &up, &key, "us-west-2")]}),
    )
    .await;

    let r = baton
        .messages(turn(false))
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "bk");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["model"], "claude-sonnet-4-5", "named as the client asked");
    assert_eq!(v["content"][0]["type"], "thinking");
    assert_eq!(v["content"][1]["text"], "bk: hello");

    let calls = up.bedrock_calls();
    assert_eq!(
        calls[0]["path"],
        format!("/model/{MODEL}/invoke"),
        "the model id is the path's"
    );
    let sent: Value = serde_json::from_str(calls[0]["body"].as_str().unwrap()).unwrap();
    let mut want = turn(false);
    let o = want.as_object_mut().unwrap();
    o.remove("model");
    o.remove("stream");
    o.insert("anthropic_version".into(), json!("bedrock-2023-05-31"));
    o.insert(
        "anthropic_beta".into(),
        json!(["interleaved-thinking-2025-05-14"]),
    );
    assert_eq!(sent, want, "the client's turn, as Bedrock takes it");
    let auth = calls[0]["headers"]["authorization"].as_str().unwrap();
    assert!(
        auth.starts_with(&format!("AWS4-HMAC-SHA256 Credential={ID}/")),
        "{auth}"
    );
    assert!(calls[0]["headers"].get("x-api-key").is_none());
    assert!(calls[0]["headers"].get("anthropic-version").is_none());

    // Streamed: event-stream frames in, the Messages API's events out.
    let r = baton.messages(turn(true)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("event: message_start"), "{text}");
    assert!(
        text.contains("signature_delta"),
        "thinking is signed: {text}"
    );
    assert_eq!(streamed_text(&text), "bk: hello", "{text}");
    assert!(
        text.trim_end()
            .ends_with("data: {\"type\":\"message_stop\"}"),
        "{text}"
    );
    assert_eq!(
        up.bedrock_calls()[1]["path"],
        format!("/model/{MODEL}/invoke-with-response-stream")
    );
    baton.stop().await;
}

#[tokio::test]
async fn the_same_model_on_bedrock_takes_over_from_an_anthropic_account_at_its_limit() {
    let anthropic = FakeUpstream::start("anthropic").await;
    anthropic.script([Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
        headers: vec![("retry-after".into(), "60".into())],
    }]);
    let up = FakeUpstream::start("bk").await;
    fake_account(&up);
    std::env::set_var("BT_BEDROCK_ANTHROPIC_KEY", "sk-ant-api03-test");
    let dir = tempfile::tempdir().unwrap();
    let mut bk = bedrock("bk2", &up, &format!("{ID}:{SECRET}"), "us-west-2");
    bk["priority"] = json!(5);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "anthropic", "kind": "anthropic", "baseUrl": format!("http://{}/v1", anthropic.addr),
             "models": ["claude-sonnet-4-5"], "keys": [{"env": "BT_BEDROCK_ANTHROPIC_KEY"}], "priority": 1},
            bk]}),
    )
    .await;
    let r = baton.messages(turn(true)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "bk2");
    let text = r.text().await.unwrap();
    assert_eq!(streamed_text(&text), "bk: hello", "{text}");
    assert_eq!(up.bedrock_calls().len(), 1);
    baton.stop().await;
}

#[tokio::test]
async fn a_wrong_secret_region_or_clock_gets_awss_refusal_and_the_request_fails_over() {
    let up = FakeUpstream::start("bk").await;
    fake_account(&up);
    let backup = FakeUpstream::start("backup").await;
    let dir = tempfile::tempdir().unwrap();
    let wrong_secret = bedrock(
        "bad-secret",
        &up,
        &format!("{ID}:not-the-secret"),
        "us-west-2",
    );
    let wrong_region = bedrock("bad-region", &up, &format!("{ID}:{SECRET}"), "eu-west-1");
    let mut last = provider("backup", &format!("http://{}/v1", backup.addr), 9);
    last["models"] = json!(["claude-sonnet-4-5"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [wrong_secret, wrong_region, last]}),
    )
    .await;
    let r = baton.messages(turn(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "backup");
    let log = baton.log().await;
    let reasons = serde_json::to_string(&log[0].attempts).unwrap();
    assert!(
        reasons.contains("The request signature we calculated does not match"),
        "{reasons}"
    );
    assert!(
        reasons.contains("Credential should be scoped to a valid region"),
        "{reasons}"
    );
    baton.stop().await;

    // A clock ten minutes slow: the signature is dated by Baton's clock, and AWS refuses it.
    let dir = tempfile::tempdir().unwrap();
    let slow = baton::clock::unix_ms() - 10 * 60_000;
    let clock: Arc<dyn baton::clock::Clock> = Arc::new(baton::clock::ManualClock::new(slow));
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [bedrock("slow", &up, &format!("{ID}:{SECRET}"), "us-west-2")]}),
        Some(clock),
    )
    .await;
    let r = baton.messages(turn(false)).send().await.unwrap();
    assert_eq!(
        r.status(),
        502,
        "the only provider refused Baton's signature"
    );
    let body = r.text().await.unwrap();
    assert!(body.contains("Signature expired"), "{body}");
    baton.stop().await;
}

#[tokio::test]
async fn bedrock_throttling_is_a_rate_limit_and_an_api_key_is_a_bearer_token() {
    let up = FakeUpstream::start("bk").await;
    fake_account(&up);
    up.bedrock_api_key("ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlMTIz");
    up.script([Behavior::Status {
        status: 429,
        body: json!({"message": "Too many tokens per day, please wait before trying again."}),
        headers: vec![(
            "x-amzn-errortype".into(),
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/".into(),
        )],
    }]);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [bedrock("bk-key", &up, "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlMTIz", "us-west-2")]}),
    )
    .await;
    let r = baton.messages(turn(false)).send().await.unwrap();
    assert_eq!(r.status(), 429);
    let state = baton.admin_state().await;
    let text = state.to_string();
    assert!(text.contains("rate"), "cooling for a rate limit: {text}");
    let calls = up.bedrock_calls();
    assert_eq!(
        calls[0]["headers"]["authorization"],
        "Bearer ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlMTIz"
    );
    assert!(calls[0]["headers"].get("x-amz-date").is_none());
    baton.stop().await;
}

#[tokio::test]
async fn a_bedrock_provider_must_know_its_region() {
    let err = baton::config::parse_str(
        &json!({"providers": [{"id": "bk", "kind": "bedrock", "baseUrl": "https://vpce-1.example.internal",
            "models": [MODEL]}]})
        .to_string(),
        std::path::Path::new("c.json"),
    )
    .map(|_| ())
    .expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("region"), "{text}");
    assert!(baton::config::parse_str(
        &json!({"providers": [{"id": "bk", "kind": "bedrock", "baseUrl": "https://bedrock-runtime.us-east-1.amazonaws.com",
            "models": [MODEL]}]})
        .to_string(),
        std::path::Path::new("c.json"),
    )
    .is_ok());
}

#[tokio::test]
async fn claude_code_on_its_subscription_goes_on_with_the_same_model_on_bedrock_at_its_cap() {
    // `claude-*` goes to whoever serves that very model, by priority: the subscription passed
    // through (any model) first, then the same model on Bedrock — ahead of a provider of another
    // model, though that one's priority is higher than Bedrock's.
    const LOGIN: &str = "sk-ant-oat01-alice-subscription-token";
    let sub = FakeUpstream::start("claude").await;
    sub.only_subscription(LOGIN);
    sub.script([Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "This request would exceed your account's rate limit. Please try again later."}}),
        headers: vec![
            ("anthropic-ratelimit-unified-status".into(), "rejected".into()),
            ("anthropic-ratelimit-unified-representative-claim".into(), "five_hour".into()),
        ],
    }]);
    let other = FakeUpstream::start("other").await;
    let up = FakeUpstream::start("bk").await;
    fake_account(&up);
    let dir = tempfile::tempdir().unwrap();
    let mut bk = bedrock("bk3", &up, &format!("{ID}:{SECRET}"), "us-west-2");
    bk["priority"] = json!(3);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "claude-sub", "kind": "anthropic", "baseUrl": sub.base_url(),
             "credentials": "client", "models": ["*"], "priority": 1},
            provider("other", &format!("http://{}/v1", other.addr), 2), bk],
            "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    let send = || {
        baton
            .http
            .post(format!("{}/v1/messages?beta=true", baton.url))
            .header("x-baton-key", &baton.key)
            .header("authorization", format!("Bearer {LOGIN}"))
            .header("anthropic-version", "2023-06-01")
            .json(&turn(false))
    };
    let r = send().send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "bk3");
    let log = baton.log().await;
    let tried: Vec<&str> = log[0]
        .attempts
        .iter()
        .map(|a| a.provider.as_str())
        .collect();
    assert_eq!(
        tried,
        ["claude-sub", "bk3"],
        "the subscription, then the same model"
    );
    assert_eq!(
        other.received().len(),
        0,
        "not another model while one is there"
    );
    let sent = serde_json::to_string(&up.bedrock_calls()).unwrap();
    assert!(!sent.contains(LOGIN), "the login stays with its own vendor");
    baton.stop().await;
}

#[tokio::test]
async fn a_throttling_exception_inside_the_stream_fails_over_before_any_content() {
    let up = FakeUpstream::start("bk").await;
    fake_account(&up);
    up.bedrock_throttle_streams(1);
    let backup = FakeUpstream::start("bk-backup").await;
    fake_account(&backup);
    let dir = tempfile::tempdir().unwrap();
    let mut second = bedrock("bk-two", &backup, &format!("{ID}:{SECRET}"), "us-west-2");
    second["priority"] = json!(2);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [bedrock("bk-one", &up, &format!("{ID}:{SECRET}"), "us-west-2"), second]}),
    )
    .await;
    let r = baton.messages(turn(true)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "bk-two");
    let text = r.text().await.unwrap();
    assert_eq!(streamed_text(&text), "bk-backup: hello", "{text}");
    assert!(
        !text.contains("Too many tokens"),
        "the client never sees the first one's error"
    );
    let log = baton.log().await;
    let first = &log[0].attempts[0];
    assert_eq!(first.provider, "bk-one");
    assert_eq!(first.class.as_str(), "rate", "{first:?}");
    baton.stop().await;
}

#[tokio::test]
async fn the_catalogs_bedrock_key_variable_goes_to_bedrock_in_any_region_and_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": []})).await;
    let admin = Admin(&baton);
    let p = |id: &str, base: &str| {
        json!({"id": id, "kind": "bedrock", "baseUrl": base, "region": "eu-west-1",
            "models": [MODEL], "keys": [{"env": "AWS_BEARER_TOKEN_BEDROCK"}]})
    };
    let (st, v) = admin
        .send(
            reqwest::Method::POST,
            "/admin/providers",
            Some(p(
                "bk-eu",
                "https://bedrock-runtime.eu-west-1.amazonaws.com",
            )),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = admin
        .send(
            reqwest::Method::POST,
            "/admin/providers",
            Some(p(
                "bk-evil",
                "https://bedrock-runtime.eu-west-1.amazonaws.com.evil.example",
            )),
        )
        .await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["error"]["param"], "keys[0].env");
    baton.stop().await;
}

/// A Messages client's `count_tokens` for a Claude model on Bedrock is Bedrock's own count:
/// CountTokens for the foundation model the inference profile names, the InvokeModel body it
/// would take base64-encoded, signed like any request.
#[tokio::test]
async fn count_tokens_is_bedrocks_own_count_for_the_profiles_foundation_model() {
    let up = FakeUpstream::start("bk").await;
    fake_account(&up);
    let dir = tempfile::tempdir().unwrap();
    let key = format!("{ID}:{SECRET}");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [bedrock("bk", &up, &key, "us-west-2")]}),
    )
    .await;
    let r = baton
        .count_tokens(json!({"model": "claude-sonnet-4-5", "system": "Be brief.",
            "messages": [{"role": "user", "content": "hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["input_tokens"], 4242,
        "Bedrock's own count, not an estimate"
    );
    let calls = up.bedrock_calls();
    assert_eq!(
        calls[0]["path"],
        "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/count-tokens"
    );
    let counted = &up.received()[0].body;
    assert_eq!(counted["system"], "Be brief.");
    assert_eq!(
        counted["model"],
        "anthropic.claude-sonnet-4-5-20250929-v1:0"
    );
    baton.stop().await;
}
