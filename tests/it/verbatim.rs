//! A client whose upstream speaks its own API is relayed its own bytes (issue #51): the body as
//! it came — key order, spacing, number forms, escapes, fields Baton has never heard of — with
//! only the model's value replaced. Whatever Baton must change (a key written twice, the output
//! cap, a stream's usage, a translation) is written out again instead, never relayed as it came.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

async fn post(baton: &Baton, path: &str, body: &str) -> Value {
    let bearer = format!("Bearer {}", baton.key);
    let headers = [
        ("authorization", bearer.as_str()),
        ("x-api-key", baton.key.as_str()),
        ("anthropic-version", "2023-06-01"),
    ];
    serde_json::from_str(&send(baton, path, body, &headers).await).unwrap_or(Value::Null)
}

/// `body` POSTed to `path` with `headers`, answered 200; the answer's text.
async fn send(baton: &Baton, path: &str, body: &str, headers: &[(&str, &str)]) -> String {
    let mut r = baton
        .http
        .post(format!("{}{path}", baton.url))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        r = r.header(*name, *value);
    }
    let r = r.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    text
}

/// What the upstream should get: the client's text with its model's value replaced.
fn with_model(body: &str, from: &str, to: &str) -> String {
    assert_eq!(body.matches(from).count(), 1, "one model in {body}");
    body.replacen(from, to, 1)
}

#[tokio::test]
async fn same_api_upstreams_get_the_clients_bytes_but_for_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let chat = FakeUpstream::start("chat").await;
    let claude = FakeUpstream::start("claude").await;
    std::env::set_var("BT_VERBATIM_UP_KEY", "sk-ant-verbatim-upstream");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "chat", "kind": "openai-compatible", "baseUrl": chat.base_url(), "models": ["served-chat"]},
            {"id": "claude", "kind": "anthropic", "baseUrl": claude.base_url(),
             "keys": [{"env": "BT_VERBATIM_UP_KEY"}], "models": [{"id": "served-claude", "maxOutputTokens": 4096}]}]}),
    )
    .await;

    // Chat Completions: the model in the middle, odd spacing, floats written `1.0` and `2.50`,
    // escapes (a `\/`, a `\u00e9`), keys in the client's order.
    let body = r#"{ "temperature":1.0,"messages" : [{"role":"user","content":"caf\u00e9 \/ \"quoted\"\n"}],
  "model":   "chat/served-chat" , "logit_bias": {"50256": -100}, "top_p": 0.50, "user":"u\u00e9", "n":1 }"#;
    post(&baton, "/v1/chat/completions", body).await;
    let got = chat.received().pop().unwrap();
    assert_eq!(
        std::str::from_utf8(&got.raw).unwrap(),
        with_model(body, r#""chat/served-chat""#, r#""served-chat""#),
        "the client's bytes, only the model's value replaced"
    );

    // A stream that did not name `stream_options` (the SDKs' default) is asked for its usage
    // (tokens and budgets count) with the member added at the end, the rest as it came.
    let body = "{\"stream\":true, \"model\":\"chat/served-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\\u00e9\"}]} \n";
    let bearer = format!("Bearer {}", baton.key);
    let text = send(
        &baton,
        "/v1/chat/completions",
        body,
        &[("authorization", &bearer)],
    )
    .await;
    assert!(
        !text.contains("\"usage\":{"),
        "the client did not ask for it: {text}"
    );
    let got = chat.received().pop().unwrap();
    let sent = with_model(body, r#""chat/served-chat""#, r#""served-chat""#).replace(
        "}]} \n",
        "}],\"stream_options\":{\"include_usage\":true}} \n",
    );
    assert_eq!(std::str::from_utf8(&got.raw).unwrap(), sent);

    // The Messages API to an Anthropic upstream, as a Claude Code turn sends it (model first).
    let body = r#"{"model":"claude/served-claude","max_tokens":1024,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hello"}],"metadata":{"user_id":"u-1"}}"#;
    post(&baton, "/v1/messages", body).await;
    let got = claude.received().pop().unwrap();
    assert_eq!(
        std::str::from_utf8(&got.raw).unwrap(),
        with_model(body, r#""claude/served-claude""#, r#""served-claude""#)
    );
    // Named by the model the upstream serves (Claude Code on its own account names the model
    // it wants): the upstream gets the very bytes, nothing replaced.
    let body = body.replace("claude/served-claude", "served-claude");
    post(&baton, "/v1/messages", &body).await;
    let got = claude.received().pop().unwrap();
    assert_eq!(std::str::from_utf8(&got.raw).unwrap(), body);
    baton.stop().await;
}

#[tokio::test]
async fn what_baton_must_change_is_written_out_again() {
    let dir = tempfile::tempdir().unwrap();
    let chat = FakeUpstream::start("chat").await;
    let claude = FakeUpstream::start("claude").await;
    std::env::set_var("BT_VERBATIM_UP_KEY2", "sk-ant-verbatim-upstream-2");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "chat", "kind": "openai-compatible", "baseUrl": chat.base_url(),
             "models": [{"id": "served-chat", "maxOutputTokens": 100}]},
            {"id": "claude", "kind": "anthropic", "baseUrl": claude.base_url(),
             "keys": [{"env": "BT_VERBATIM_UP_KEY2"}], "models": [{"id": "served-claude", "maxOutputTokens": 100}]}]}),
    )
    .await;

    // A top-level key written twice: Baton reads the last; an upstream might read the first.
    // Never relayed as it came: the upstream gets one model, Baton's, and one max_tokens.
    let body = r#"{"model":"chat/served-chat","model":"chat/served-chat","messages":[{"role":"user","content":"hi"}],"max_tokens":5000,"max_tokens":50}"#;
    post(&baton, "/v1/chat/completions", body).await;
    let got = chat.received().pop().unwrap();
    let raw = std::str::from_utf8(&got.raw).unwrap();
    assert_eq!(raw.matches("\"model\"").count(), 1, "{raw}");
    assert_eq!(raw.matches("\"max_tokens\"").count(), 1, "{raw}");
    assert_eq!(got.body["model"], "served-chat");
    assert_eq!(got.body["max_tokens"], 50);

    // The operator's output cap bites: written out again with the cap.
    let body = r#"{"model":"claude/served-claude","max_tokens":5000,"messages":[{"role":"user","content":"hi"}]}"#;
    post(&baton, "/v1/messages", body).await;
    let got = claude.received().pop().unwrap();
    assert_eq!(got.body["max_tokens"], 100);
    assert_eq!(got.body["model"], "served-claude");

    // A stream that said no to its usage is asked for it (tokens and budgets count).
    let r = baton
        .http
        .post(format!("{}/v1/chat/completions", baton.url))
        .bearer_auth(&baton.key)
        .json(&json!({"model": "chat/served-chat", "stream": true,
            "stream_options": {"include_usage": false}, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let _ = r.text().await.unwrap();
    let got = chat.received().pop().unwrap();
    assert_eq!(got.body["stream_options"], json!({"include_usage": true}));

    // A Chat Completions client to the Anthropic upstream: translated, not its bytes.
    post(
        &baton,
        "/v1/chat/completions",
        r#"{"model":"claude/served-claude","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    let got = claude.received().pop().unwrap();
    assert_eq!(got.body["model"], "served-claude");
    assert!(
        got.body["messages"][0].to_string().contains("\"hi\""),
        "{}",
        got.body
    );
    assert!(got.body.get("stream_options").is_none(), "{}", got.body);
    baton.stop().await;
}

/// Claude Code with thinking on: every tool turn sends back the thinking the account signed.
/// Nothing in it may not go there, so the client's bytes go as they came (they were once written
/// out again whole, a 600 KB turn costing Baton twice what the rest of it did); a block nobody
/// signed still cannot go, and then the body is written out again without it.
#[tokio::test]
async fn a_tool_turn_with_its_own_signed_thinking_goes_as_it_came() {
    let dir = tempfile::tempdir().unwrap();
    let claude = FakeUpstream::start("claude").await;
    std::env::set_var("BT_VERBATIM_UP_KEY3", "sk-ant-verbatim-upstream-3");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "claude", "kind": "anthropic", "baseUrl": claude.base_url(),
             "keys": [{"env": "BT_VERBATIM_UP_KEY3"}], "models": ["served-claude"]}]}),
    )
    .await;
    let first = post(
        &baton,
        "/v1/messages",
        r#"{"model":"claude/served-claude","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"read a.rs"}]}"#,
    )
    .await;
    let sig = first["content"][0]["signature"].as_str().unwrap();
    assert!(!sig.is_empty(), "{first}");
    let turn = r#"{"model":"claude/served-claude", "max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[EARLIER{"role":"user","content":"read a.rs"},{"role":"assistant","content":[{"type":"thinking","thinking":"claude thinks.","signature":"SIG"},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"path":"a.rs"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"fn main() {}\n"}]}]}"#
        .replace("SIG", sig);

    let body = turn.replace("EARLIER", "");
    post(&baton, "/v1/messages", &body).await;
    let got = claude.received().pop().unwrap();
    assert_eq!(
        std::str::from_utf8(&got.raw).unwrap(),
        with_model(&body, r#""claude/served-claude""#, r#""served-claude""#)
    );

    // An earlier turn's block that nobody signed goes nowhere: written out again without it.
    let body = turn.replace(
        "EARLIER",
        r#"{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"?","signature":""},{"type":"text","text":"hello"}]},"#,
    );
    post(&baton, "/v1/messages", &body).await;
    let got = claude.received().pop().unwrap();
    assert_eq!(
        got.body["messages"][1]["content"],
        json!([{"type": "text", "text": "hello"}])
    );
    assert_eq!(got.body["messages"][3]["content"][0]["signature"], sig);
    assert_eq!(got.body["model"], "served-claude");
    baton.stop().await;
}

/// A Responses client to an upstream of its API: Codex's turn (its real body, pretty-printed
/// as the fixture keeps it) to the ChatGPT backend on its own login, and an SDK's turn to the
/// public API, each get the client's bytes with only the model's value replaced. Codex's
/// backend-only fields still leave for the public API, written out again.
#[tokio::test]
async fn responses_turns_go_as_they_came() {
    let dir = tempfile::tempdir().unwrap();
    let login = "chatgpt-login-token-verbatim-01";
    let backend = FakeUpstream::start("chatgpt").await;
    backend.only_subscription(login);
    let public = FakeUpstream::start("resp").await;
    std::env::set_var("BT_VERBATIM_RESP_KEY", "sk-responses-verbatim");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "chatgpt", "kind": "chatgpt", "baseUrl": backend.base_url(),
             "credentials": "client", "models": ["gpt-6.2-sol"]},
            {"id": "resp", "kind": "openai-responses", "baseUrl": public.base_url(),
             "keys": [{"env": "BT_VERBATIM_RESP_KEY"}], "models": ["gpt-real"]}]}),
    )
    .await;
    let bearer = format!("Bearer {}", baton.key);
    let gateway = [("authorization", bearer.as_str())];
    let login_bearer = format!("Bearer {login}");
    let own_login = [
        ("authorization", login_bearer.as_str()),
        ("x-baton-key", baton.key.as_str()),
        ("chatgpt-account-id", "acct-1"),
    ];
    let path = "/v1/responses";

    let codex = include_str!("../fixtures/codex/0.171-default-model-request.json").replacen(
        r#""gpt-6.2-sol""#,
        r#""chatgpt/gpt-6.2-sol""#,
        1,
    );
    send(&baton, path, &codex, &own_login).await;
    let got = backend.received().pop().unwrap();
    assert_eq!(
        std::str::from_utf8(&got.raw).unwrap(),
        with_model(&codex, r#""chatgpt/gpt-6.2-sol""#, r#""gpt-6.2-sol""#)
    );

    let sdk = r#"{"input":[{"role":"user","content":"caf\u00e9 \/ hi"}], "model":"resp/gpt-real","max_output_tokens":64,  "store":false}"#;
    send(&baton, path, sdk, &gateway).await;
    let got = public.received().pop().unwrap();
    assert_eq!(
        std::str::from_utf8(&got.raw).unwrap(),
        with_model(sdk, r#""resp/gpt-real""#, r#""gpt-real""#)
    );

    // Codex's turn to the public API: its backend's own fields cannot go there.
    let to_public = codex.replacen(r#""chatgpt/gpt-6.2-sol""#, r#""resp/gpt-real""#, 1);
    send(&baton, path, &to_public, &gateway).await;
    let got = public.received().pop().unwrap();
    assert!(got.body.get("client_metadata").is_none(), "{}", got.body);
    assert_eq!(got.body["model"], "gpt-real");
    baton.stop().await;
}

/// A Gemini client (its model in the URL) to a Gemini upstream: its very bytes. A body that
/// also names a model, or asks for more output than the model gives, is written out again.
#[tokio::test]
async fn gemini_turns_go_as_they_came() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("up").await;
    std::env::set_var("BT_VERBATIM_GEMINI_KEY", "gemini-verbatim-upstream-key");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "up", "kind": "gemini", "baseUrl": up.base_url_for("gemini"),
            "keys": [{"env": "BT_VERBATIM_GEMINI_KEY"}],
            "models": [{"id": "up-model", "maxOutputTokens": 1000}]}],
            "modelMap": {"gemini-*": "up"}}),
    )
    .await;
    let path = "/v1beta/models/gemini-2.5-pro:generateContent";
    let key = [("x-goog-api-key", baton.key.as_str())];
    let body = r#"{ "contents": [{"role":"user","parts":[{"text":"caf\u00e9 \/ list"}]},
  {"role":"model","parts":[{"functionCall":{"name":"ls","args":{}},"thoughtSignature":"c2ln"}]},
  {"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"a.txt"}}}]}],
 "generationConfig":{"temperature":1.0,"maxOutputTokens":500} }"#;
    send(&baton, path, body, &key).await;
    let got = up.received().pop().unwrap();
    assert_eq!(std::str::from_utf8(&got.raw).unwrap(), body);

    let capped = body.replace("500", "5000");
    send(&baton, path, &capped, &key).await;
    let got = up.received().pop().unwrap();
    assert_eq!(
        got.body["body"]["generationConfig"]["maxOutputTokens"],
        1000
    );

    let named = body.replacen("{ ", r#"{"model":"gemini-2.5-pro", "#, 1);
    send(&baton, path, &named, &key).await;
    let got = up.received().pop().unwrap();
    assert!(got.body["body"].get("model").is_none(), "{}", got.body);
    assert_eq!(
        got.body["body"]["contents"][0]["parts"][0]["text"],
        "café / list"
    );
    baton.stop().await;
}
