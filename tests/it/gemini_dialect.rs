//! The Gemini API as a client speaks it (Gemini CLI, `google-genai`): served by every upstream
//! kind through the strict fakes, passed through untouched to a Gemini upstream, streamed as
//! SSE and as Google's JSON array, refused and failed over in Google's error shape.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

/// One upstream of `kind` serving every `gemini-*` name.
async fn setup(kind: &str) -> (tempfile::TempDir, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("up").await;
    std::env::set_var("BT_GEMINI_DIALECT_KEY", "sk-ant-upstream-secret");
    let base = up.base_url_for(kind);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "up", "kind": kind, "baseUrl": base,
            "keys": [{"env": "BT_GEMINI_DIALECT_KEY"}], "models": ["up-model"]}],
            "modelMap": {"gemini-*": "up"}}),
    )
    .await;
    (dir, up, baton)
}

fn gemini(baton: &Baton, method: &str, body: &Value) -> reqwest::RequestBuilder {
    baton
        .http
        .post(format!(
            "{}/v1beta/models/gemini-2.5-pro:{method}",
            baton.url
        ))
        .header("x-goog-api-key", &baton.key)
        .json(body)
}

/// `GET path` with the gateway key as Google's SDKs send it.
async fn get(baton: &Baton, path: &str) -> reqwest::Response {
    baton
        .http
        .get(format!("{}{path}", baton.url))
        .header("x-goog-api-key", &baton.key)
        .send()
        .await
        .unwrap()
}

fn tools() -> Value {
    json!([{"functionDeclarations": [{"name": "list_directory", "description": "Lists a directory.",
        "parametersJsonSchema": {"type": "object", "properties": {"dir_path": {"type": "string"}},
            "required": ["dir_path"]}}]}])
}

/// Turn one of a tool task as Gemini CLI sends it.
fn turn_one() -> Value {
    json!({
        "systemInstruction": {"role": "user", "parts": [{"text": "You are a coding agent."}]},
        "contents": [{"role": "user", "parts": [{"text": "What is in this folder?"}]}],
        "tools": tools(),
        "generationConfig": {"temperature": 0, "thinkingConfig": {"includeThoughts": true, "thinkingBudget": -1}},
    })
}

/// A Gemini client's tool loop on each kind that is not Gemini: the call comes back as a
/// `functionCall` with an id, and the next turn's `functionResponse` (named, without the id,
/// as Gemini CLI sends it) reaches the strict fake paired with its call.
#[tokio::test]
async fn a_tool_loop_runs_on_every_translated_kind() {
    for kind in ["openai-compatible", "anthropic", "openai-responses"] {
        let (_d, up, baton) = setup(kind).await;
        up.script([
            Behavior::ToolCall {
                name: "list_directory".into(),
                arguments: r#"{"dir_path":"."}"#.into(),
            },
            Behavior::Text("It holds a.txt.".into()),
        ]);
        let r = gemini(&baton, "generateContent", &turn_one())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{kind}: {:?}", up.refusals());
        assert_eq!(r.headers()["x-gateway-provider"], "up");
        let v: Value = r.json().await.unwrap();
        let cand = &v["candidates"][0];
        assert_eq!(cand["finishReason"], "STOP", "{kind}: {v}");
        let call = &cand["content"]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p.get("functionCall").is_some())
            .unwrap_or_else(|| panic!("{kind}: a call: {v}"))["functionCall"];
        assert_eq!(call["name"], "list_directory");
        assert_eq!(call["args"], json!({"dir_path": "."}));
        assert!(call["id"].as_str().is_some_and(|id| !id.is_empty()));
        assert!(v["usageMetadata"]["promptTokenCount"].as_u64().is_some());
        assert_eq!(v["modelVersion"], "up-model");

        let mut two = turn_one();
        two["contents"].as_array_mut().unwrap().extend([
            json!({"role": "model", "parts": [{"functionCall": {"name": "list_directory", "args": {"dir_path": "."}}}]}),
            json!({"role": "user", "parts": [{"functionResponse": {"name": "list_directory",
                "response": {"output": "a.txt"}}}]}),
        ]);
        let r = gemini(&baton, "generateContent", &two)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{kind}: {:?}", up.refusals());
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            v["candidates"][0]["content"]["parts"][0]["text"], "It holds a.txt.",
            "{kind}"
        );
        assert!(up.refusals().is_empty(), "{kind}: {:?}", up.refusals());
        let sent = serde_json::to_string(&up.received()[1].body).unwrap();
        assert!(sent.contains("a.txt"), "{kind}: the result went on: {sent}");
        assert!(sent.contains("You are a coding agent."), "{kind}: {sent}");
        baton.stop().await;
    }
}

fn sse_chunks(text: &str) -> Vec<Value> {
    text.replace("\r\n", "\n")
        .split("\n\n")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            serde_json::from_str(c.strip_prefix("data: ").unwrap_or_else(|| panic!("{c:?}")))
                .unwrap()
        })
        .collect()
}

/// `alt=sse` streams SSE chunks; without it Google streams one JSON array. Both end with the
/// finish and the usage, and a Gemini CLI needs nothing else.
#[tokio::test]
async fn streams_come_as_sse_or_as_one_json_array() {
    let (_d, up, baton) = setup("openai-compatible").await;
    up.always(Behavior::Text("streamed words".into()));
    let r = baton
        .http
        .post(format!(
            "{}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            baton.url
        ))
        .header("x-goog-api-key", &baton.key)
        .json(&turn_one())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let chunks = sse_chunks(&r.text().await.unwrap());
    let text: String = chunks
        .iter()
        .filter_map(|c| c["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "streamed words");
    let last = chunks.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert!(last["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0);
    assert!(
        chunks[..chunks.len() - 1]
            .iter()
            .all(|c| c.get("usageMetadata").is_none()),
        "usage once, at the end"
    );
    assert_eq!(
        up.received()[0].body["stream"],
        true,
        "the upstream was asked to stream"
    );

    let r = gemini(&baton, "streamGenerateContent", &turn_one())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let v: Value = serde_json::from_str(&r.text().await.unwrap()).expect("one JSON array");
    let chunks = v.as_array().unwrap();
    assert_eq!(
        chunks.last().unwrap()["candidates"][0]["finishReason"],
        "STOP"
    );
    baton.stop().await;
}

/// To a Gemini upstream the client's body goes as it came — thought signatures, safety
/// settings, Google's own tools, snake_case names — and the answer comes back byte for byte.
#[tokio::test]
async fn a_gemini_upstream_gets_the_clients_own_body() {
    let (_d, up, baton) = setup("gemini").await;
    up.always(Behavior::Ok);
    let body = json!({
        "contents": [
            {"role": "user", "parts": [{"text": "search and list"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "list_directory", "args": {"dir_path": "."}},
                "thoughtSignature": "c2lnbmVkIGJ5IGdlbWluaQ=="}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "list_directory", "response": {"output": "a.txt"}}}]},
        ],
        "tools": [{"googleSearch": {}}],
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "generationConfig": {"maxOutputTokens": 64},
    });
    let r = gemini(&baton, "generateContent", &body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    let got: Value = r.json().await.unwrap();
    let sent = &up.received()[0].body;
    assert_eq!(sent["path"], "up-model:generateContent");
    assert_eq!(sent["body"], body, "untouched");
    assert_eq!(
        got["candidates"][0]["content"]["parts"][0]["text"],
        "up: search and list"
    );

    let r = baton
        .http
        .post(format!(
            "{}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            baton.url
        ))
        .header("x-goog-api-key", &baton.key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    let chunks = sse_chunks(&r.text().await.unwrap());
    assert!(chunks
        .iter()
        .any(|c| c["candidates"][0]["finishReason"] == "STOP"));
    assert_eq!(up.received()[1].body["body"], body);
    baton.stop().await;
}

async fn google_error(r: reqwest::Response, status: u16, name: &str) -> Value {
    assert_eq!(r.status(), status);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], status, "{v}");
    assert_eq!(v["error"]["status"], name, "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    v
}

/// Every refusal is Google's shape, with words that say what to fix; the key also works as
/// `?key=`, as in Google's REST examples.
#[tokio::test]
async fn refusals_are_in_googles_shape_and_the_key_may_be_in_the_query() {
    let (_d, up, baton) = setup("openai-compatible").await;
    up.always(Behavior::Ok);
    let url = |rest: &str| format!("{}/v1beta/models/{rest}", baton.url);
    let r = baton
        .http
        .post(url("gemini-2.5-pro:generateContent"))
        .json(&turn_one())
        .send()
        .await
        .unwrap();
    google_error(r, 401, "UNAUTHENTICATED").await;
    let r = baton
        .http
        .post(url(&format!(
            "gemini-2.5-pro:generateContent?key={}",
            baton.key
        )))
        .json(&turn_one())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let mut bad = turn_one();
    bad["generationConfig"]["max_tokens"] = json!(5);
    let r = gemini(&baton, "generateContent", &bad)
        .send()
        .await
        .unwrap();
    let v = google_error(r, 400, "INVALID_ARGUMENT").await;
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Unknown name \"max_tokens\""));
    let r = gemini(&baton, "embedContent", &turn_one())
        .send()
        .await
        .unwrap();
    google_error(r, 404, "NOT_FOUND").await;
    let r = baton
        .http
        .post(url("gemini-2.5-pro:generateContent"))
        .header("x-goog-api-key", &baton.key)
        .body("{not json")
        .send()
        .await
        .unwrap();
    google_error(r, 400, "INVALID_ARGUMENT").await;
    let r = baton
        .http
        .get(format!("{}/v1beta/nothing-here", baton.url))
        .send()
        .await
        .unwrap();
    google_error(r, 404, "NOT_FOUND").await;
    let r = baton
        .http
        .post(url("no-such-model:generateContent"))
        .header("x-goog-api-key", &baton.key)
        .json(&turn_one())
        .send()
        .await
        .unwrap();
    google_error(r, 404, "NOT_FOUND").await;
    assert_eq!(up.hits(), 1, "only the one good request went upstream");
    baton.stop().await;
}

/// A cap on the first provider fails over before the client notices; when every provider is
/// out, the 429 carries Google's `RetryInfo`, which Gemini CLI waits by.
#[tokio::test]
async fn a_cap_fails_over_and_everything_out_says_when_in_retry_info() {
    let dir = tempfile::tempdir().unwrap();
    let first = FakeUpstream::start("first").await;
    let second = FakeUpstream::start("second").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "first", "kind": "openai-compatible", "baseUrl": first.base_url(), "models": ["m1"], "priority": 1},
            {"id": "second", "kind": "openai-compatible", "baseUrl": second.base_url(), "models": ["m2"], "priority": 2}],
            "modelMap": {"gemini-*": "auto"}}),
    )
    .await;
    first.always(Behavior::rate_limited(Some(40)));
    second.always(Behavior::Ok);
    let r = gemini(&baton, "generateContent", &turn_one())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-gateway-provider"], "second");
    second.always(Behavior::rate_limited(Some(30)));
    let r = gemini(&baton, "generateContent", &turn_one())
        .send()
        .await
        .unwrap();
    let retry = r.headers()["retry-after"].to_str().unwrap().to_string();
    let v = google_error(r, 429, "RESOURCE_EXHAUSTED").await;
    let info = &v["error"]["details"][0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.RetryInfo");
    assert_eq!(info["retryDelay"], format!("{retry}s"));
    baton.stop().await;
}

/// `:countTokens` counts as `/v1/messages/count_tokens` does, in either of Google's bodies;
/// `/v1beta/models` lists the names the key may use.
#[tokio::test]
async fn tokens_are_counted_and_models_listed() {
    let (_d, up, baton) = setup("gemini").await;
    let r = gemini(
        &baton,
        "countTokens",
        &json!({"contents": [{"parts": [{"text": "count these words please"}]}]}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    assert_eq!(r.headers()["x-baton-token-count"], "provider");
    let v: Value = r.json().await.unwrap();
    assert!(v["totalTokens"].as_u64().unwrap() > 0, "{v}");
    let r = gemini(
        &baton,
        "countTokens",
        &json!({"generateContentRequest": {"model": "models/gemini-2.5-pro",
            "contents": [{"parts": [{"text": "count these"}]}]}}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);

    let r = get(&baton, "/v1beta/models").await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let names: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"models/up/up-model"), "{names:?}");
    // Google's SDKs list at /v1/models with their own key header: Gemini's shape there too.
    let r = get(&baton, "/v1/models").await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(v["models"].as_array().is_some_and(|m| !m.is_empty()), "{v}");
    let r = get(&baton, "/v1beta/models/up").await;
    assert_eq!(r.status(), 200);
    let r = baton
        .http
        .get(format!("{}/v1beta/models", baton.url))
        .send()
        .await
        .unwrap();
    google_error(r, 401, "UNAUTHENTICATED").await;
    baton.stop().await;
}

/// A Gemini client on its own Google key (`credentials: "client"`): Baton's key rides in
/// `x-baton-key`, the client's own reaches the Gemini provider, and no key of Baton's goes there.
#[tokio::test]
async fn a_client_s_own_google_key_is_passed_through_to_a_gemini_provider() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("g").await;
    up.strict_auth();
    up.always(Behavior::Ok);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "g", "kind": "gemini", "baseUrl": up.gemini_base_url(),
            "credentials": "client", "models": ["*"]}], "modelMap": {"gemini-*": "g"}}),
    )
    .await;
    let r = baton
        .http
        .post(format!(
            "{}/v1beta/models/gemini-2.5-flash:generateContent",
            baton.url
        ))
        .header("x-goog-api-key", "AIza-the-users-own-key")
        .header("x-baton-key", &baton.key)
        .json(&json!({"contents": [{"parts": [{"text": "hi"}]}]}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    assert_eq!(
        status,
        200,
        "{:?} {}",
        up.refusals(),
        r.text().await.unwrap()
    );
    let got = &up.received()[0];
    assert_eq!(
        got.body["path"], "gemini-2.5-flash:generateContent",
        "its own model name"
    );
    let got = &got.headers;
    assert_eq!(got["x-goog-api-key"], "AIza-the-users-own-key");
    assert!(got.get("x-baton-key").is_none(), "Baton's key never leaves");
    // Without Baton's key, the user's own Google key is no key of Baton's.
    let r = baton
        .http
        .post(format!(
            "{}/v1beta/models/gemini-2.5-flash:generateContent",
            baton.url
        ))
        .header("x-goog-api-key", "AIza-the-users-own-key")
        .json(&json!({"contents": [{"parts": [{"text": "hi"}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    baton.stop().await;
}
