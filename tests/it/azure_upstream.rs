//! The `azure-openai` kind against a fake as strict as Azure (key in `api-key`, `api-version` on
//! the deployments form, the deployment one of the resource's): a Chat Completions client's body
//! relayed as it came to the deployment's URL, streamed alike, a Messages client translated with
//! its tools, the v1 API's form with its deployments discovered, and Azure's refusals and limits
//! classified so the request fails over.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

const KEY: &str = "0123456789abcdef0123456789abcdef";

fn azure(id: &str, base: &str, models: Value) -> Value {
    std::env::set_var("BT_AZURE_TEST_KEY", KEY);
    json!({"id": id, "kind": "azure-openai", "baseUrl": base, "models": models,
        "keys": [{"env": "BT_AZURE_TEST_KEY"}], "priority": 1,
        "timeouts": {"connectMs": 2000, "firstByteMs": 3000, "idleMs": 3000}})
}

#[tokio::test]
async fn a_chat_client_reaches_a_deployment_as_azure_wants_it() {
    let up = FakeUpstream::start("az").await;
    up.azure_deployments(&["gpt-4o-prod"]);
    let dir = tempfile::tempdir().unwrap();
    let mut p = azure("az", &up.azure_endpoint(), json!(["gpt-4o-prod"]));
    p["apiVersion"] = json!("2025-04-01-preview");
    let baton = Baton::start(dir.path(), json!({"providers": [p]})).await;

    let body = json!({"model": "az/gpt-4o-prod", "messages": [{"role": "user", "content": "hello"}],
        "temperature": 0.2, "user": "u-1", "logit_bias": {"50256": -100}});
    let r = baton.post(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "az");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "az: hello");
    assert_eq!(
        up.azure_calls(),
        ["/openai/deployments/gpt-4o-prod/chat/completions?api-version=2025-04-01-preview"]
    );
    let got = &up.received()[0];
    assert_eq!(got.headers["api-key"], KEY);
    assert!(
        got.headers.get("authorization").is_none(),
        "no bearer beside the key"
    );
    let mut expected = body.clone();
    expected["model"] = json!("gpt-4o-prod");
    assert_eq!(got.body, expected, "the client's body, but for the model");

    // Streamed alike.
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let r = baton.post(streamed).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert_eq!(stream_text(&sse_data(&text)), "az: hello");
    assert!(text.trim_end().ends_with("data: [DONE]"));
    baton.stop().await;
}

#[tokio::test]
async fn a_messages_client_uses_tools_through_azure() {
    let up = FakeUpstream::start("az").await;
    up.azure_deployments(&["gpt-4o-prod"]);
    up.always(Behavior::ToolCall {
        name: "get_weather".into(),
        arguments: r#"{"city":"Paris"}"#.into(),
    });
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [azure("az", &up.azure_endpoint(), json!(["gpt-4o-prod"]))],
            "modelMap": {"claude-*": "az/gpt-4o-prod"}}),
    )
    .await;
    let r = baton
        .messages(json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
            "tools": [{"name": "get_weather", "description": "weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "messages": [{"role": "user", "content": "weather in Paris?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["stop_reason"], "tool_use", "{v}");
    let call = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "tool_use")
        .unwrap();
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["input"]["city"], "Paris");
    let sent = &up.received()[0].body;
    assert_eq!(
        sent["tools"][0]["function"]["name"], "get_weather",
        "{sent}"
    );
    baton.stop().await;
}

/// The v1 API: the deployment goes as `model`, no `api-version`, and the deployments are
/// discovered from its model list with the same key.
#[tokio::test]
async fn the_v1_api_lists_its_deployments_and_takes_one_as_model() {
    let up = FakeUpstream::start("az").await;
    up.azure_deployments(&["gpt-4o-prod", "o4-mini-eu"]);
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{}/openai/v1", up.azure_endpoint());
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [azure("az1", &base, json!(["gpt-4o-prod"]))]}),
    )
    .await;
    let r = baton.chat("az1/gpt-4o-prod", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(up.azure_calls(), ["/openai/v1/chat/completions"]);
    assert_eq!(up.received()[0].body["model"], "gpt-4o-prod");
    assert_eq!(up.received()[0].headers["api-key"], KEY);
    let (st, v) = Admin(&baton)
        .send(reqwest::Method::POST, "/admin/discover?provider=az1", None)
        .await;
    assert_eq!(st, 200, "{v}");
    assert!(v.to_string().contains("o4-mini-eu"), "{v}");
    assert_eq!(up.model_list_requests()[0]["api-key"], KEY);
    baton.stop().await;
}

/// Azure's refusals in its own words: a deployment the resource does not have, a key it does
/// not take, a rate limit with `retry-after-ms`: each classified, and the request goes on to the
/// next candidate.
#[tokio::test]
async fn azures_refusals_are_classified_and_fail_over() {
    let az = FakeUpstream::start("az").await;
    az.azure_deployments(&["gpt-4o-prod"]);
    let other = FakeUpstream::start("other").await;
    let dir = tempfile::tempdir().unwrap();
    let mut backup = provider("other", &other.base_url(), 9);
    backup["models"] = json!(["gpt-4o-prod", "gone-deployment"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [azure("az", &az.azure_endpoint(), json!(["gpt-4o-prod", "gone-deployment"])), backup]}),
    )
    .await;
    // A deployment the resource does not have: Azure's 404, the model passed over.
    let r = baton.chat("gone-deployment", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    let details = header(&r, "x-gateway-attempt-details").to_string();
    assert!(details.contains("az"), "{details}");

    // A rate limit with Azure's headers: a cooldown as long as it says, then the next one.
    az.script([Behavior::Status {
        status: 429,
        body: json!({"error": {"code": "429", "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}),
        headers: vec![("retry-after-ms".into(), "6000".into()), ("retry-after".into(), "6".into())],
    }]);
    let r = baton.chat("gpt-4o-prod", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    // Classified as a rate limit, cooling until when Azure said (6 s from now).
    let details = header(&r, "x-gateway-attempt-details").to_string();
    let at = details
        .split(", ")
        .find_map(|a| a.strip_prefix("az/gpt-4o-prod=rate@"))
        .unwrap_or_else(|| panic!("{details}"));
    let until = at.parse::<jiff::Timestamp>().unwrap().as_millisecond();
    let now = jiff::Timestamp::now().as_millisecond();
    assert!((until - now - 6000).abs() < 2500, "cooling until {at}");
    baton.stop().await;

    // A key Azure does not take (none at all here): its 401, classified as auth.
    std::env::remove_var("BT_AZURE_MISSING_KEY");
    let dir = tempfile::tempdir().unwrap();
    let mut nokey = azure("az", &az.azure_endpoint(), json!(["gpt-4o-prod"]));
    nokey["credentials"] = json!("baton");
    nokey["keys"] = json!([]);
    let mut backup = provider("other", &other.base_url(), 9);
    backup["models"] = json!(["gpt-4o-prod"]);
    let baton = Baton::start(dir.path(), json!({"providers": [nokey, backup]})).await;
    let r = baton.chat("gpt-4o-prod", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    let details = header(&r, "x-gateway-attempt-details").to_string();
    assert!(details.contains("auth"), "{details}");
    baton.stop().await;
}

#[tokio::test]
async fn an_azure_provider_is_checked_as_azure_needs_it() {
    for (extra, field) in [
        (json!({"apiVersion": "latest"}), "apiVersion"),
        (
            json!({"baseUrl": "https://acme.openai.azure.com/openai/deployments/gpt-4o"}),
            "baseUrl",
        ),
    ] {
        let mut p = azure(
            "az",
            "https://acme.openai.azure.com",
            json!(["gpt-4o-prod"]),
        );
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        let err = baton::config::parse_str(
            &json!({"providers": [p]}).to_string(),
            std::path::Path::new("c.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(field), "{err}");
    }
    let mut p = provider("x", "https://api.openai.com/v1", 1);
    p["apiVersion"] = json!("2024-10-21");
    let err = baton::config::parse_str(
        &json!({"providers": [p]}).to_string(),
        std::path::Path::new("c.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("only these kinds take `apiVersion`: azure-openai"),
        "{err}"
    );
}

/// The same model on another platform: a request for `gpt-4o` goes to OpenAI's `gpt-4o` and,
/// while that is rate-limited, to the Azure deployment that serves it (under its own name).
#[tokio::test]
async fn a_model_fails_over_to_the_azure_deployment_that_serves_it() {
    let openai = FakeUpstream::start("openai").await;
    openai.script([Behavior::rate_limited(Some(30))]);
    let az = FakeUpstream::start("az").await;
    az.azure_deployments(&["gpt-4o-prod"]);
    let dir = tempfile::tempdir().unwrap();
    let mut direct = provider("openai", &openai.base_url(), 1);
    direct["models"] = json!(["gpt-4o"]);
    let company = azure(
        "az",
        &az.azure_endpoint(),
        json!([{"id": "gpt-4o-prod", "serves": ["gpt-4o"]}]),
    );
    let mut company = company;
    company["priority"] = json!(2);
    let baton = Baton::start(dir.path(), json!({"providers": [direct, company]})).await;
    let r = baton.chat("gpt-4o", "hello").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "az");
    assert_eq!(header(&r, "x-gateway-model"), "gpt-4o-prod");
    assert_eq!(
        az.azure_calls(),
        ["/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"]
    );
    assert_eq!(az.received()[0].body["model"], "gpt-4o-prod");
    // While OpenAI cools, the deployment serves the name directly; and it is still its own.
    let r = baton.chat("gpt-4o", "again").await;
    assert_eq!(header(&r, "x-gateway-provider"), "az");
    assert_eq!(openai.hits(), 1);
    assert_eq!(baton.chat("az/gpt-4o-prod", "hi").await.status(), 200);
    baton.stop().await;
}
