//! The `vertex-anthropic` kind against a fake as strict as Google (a token endpoint that verifies
//! the service account's RS256 JWT and issues tokens that expire; model routes that take only a
//! live token, the project, region and models of the account, and the body Vertex takes): a
//! Claude turn reaches its Vertex model streamed and whole with one token exchange for both, an
//! expired token or a bad key is Google's refusal and fails over, and RESOURCE_EXHAUSTED is a
//! rate limit. The service account's key is a test-only key in tests/fixtures/vertex/.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

const MODEL: &str = "claude-sonnet-4-5@20250929";
const EMAIL: &str = "baton-test@acme-prod-1.iam.gserviceaccount.com";
const PRIVATE_KEY: &str = include_str!("../fixtures/vertex/sa-key.pem");
const PUBLIC_KEY: &[u8] = include_bytes!("../fixtures/vertex/sa-public.der");

fn fake_account(up: &FakeUpstream) {
    up.vertex_account("acme-prod-1", "us-east5", EMAIL, PUBLIC_KEY, &[MODEL]);
}

/// A service account's JSON key, as Google's console downloads it, for the fake's endpoint.
fn sa_key(up: &FakeUpstream) -> String {
    json!({"type": "service_account", "project_id": "acme-prod-1", "private_key_id": "k1",
        "private_key": PRIVATE_KEY, "client_email": EMAIL, "client_id": "1",
        "token_uri": up.token_uri()})
    .to_string()
}

fn vertex(id: &str, up: &FakeUpstream, key: &str) -> Value {
    let var = format!("BT_VERTEX_{}", id.to_uppercase().replace('-', "_"));
    std::env::set_var(&var, key);
    json!({"id": id, "kind": "vertex-anthropic", "baseUrl": format!("http://{}/v1", up.addr),
        "region": "us-east5", "project": "acme-prod-1", "models": [MODEL],
        "keys": [{"env": var}], "priority": 1,
        "timeouts": {"connectMs": 2000, "firstByteMs": 3000, "idleMs": 3000}})
}

fn turn(stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 2000, "stream": stream,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "hello"}]})
}

#[tokio::test]
async fn a_claude_turn_reaches_its_vertex_model_with_a_service_accounts_token() {
    let up = FakeUpstream::start("vx").await;
    fake_account(&up);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [vertex("vx", &up, &sa_key(&up))]}),
    )
    .await;
    let r = baton.messages(turn(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "vx");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["model"], "claude-sonnet-4-5");
    assert_eq!(v["content"][1]["text"], "vx: hello");
    let got = &up.received()[0];
    let mut want = turn(false);
    want["model"] = json!(MODEL);
    assert_eq!(got.body, want, "the client's turn, the model from the path");
    assert!(got.headers.get("anthropic-version").is_none());

    let r = baton.messages(turn(true)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("event: message_stop"), "{text}");
    assert!(text.contains("signature_delta"), "{text}");
    assert_eq!(up.vertex_exchanges(), 1, "one token for both requests");
    baton.stop().await;
}

#[tokio::test]
async fn an_expired_token_or_a_key_google_refuses_fails_over_with_googles_words() {
    let up = FakeUpstream::start("vx").await;
    fake_account(&up);
    up.vertex_token("ya29.expired-token-of-yesterday", 0);
    let backup = FakeUpstream::start("backup").await;
    let dir = tempfile::tempdir().unwrap();
    // A key of another account, and an account whose public key is not the one the JWT's
    // private key makes (its modulus changed in one byte).
    let wrong = sa_key(&up).replace(EMAIL, "someone-else@acme-prod-1.iam.gserviceaccount.com");
    let other = FakeUpstream::start("vx2").await;
    let mut public = PUBLIC_KEY.to_vec();
    public[40] ^= 0x01;
    other.vertex_account("acme-prod-1", "us-east5", EMAIL, &public, &[MODEL]);
    let mut b = provider("backup", &format!("http://{}/v1", backup.addr), 9);
    b["models"] = json!(["claude-sonnet-4-5"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [vertex("vx-expired", &up, "ya29.expired-token-of-yesterday"),
            vertex("vx-wrong", &up, &wrong), vertex("vx-unsigned", &other, &sa_key(&other)), b]}),
    )
    .await;
    let r = baton.messages(turn(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "backup");
    let log = baton.log().await;
    let reasons = serde_json::to_string(&log[0].attempts).unwrap();
    assert!(
        reasons.contains("Request had invalid authentication credentials"),
        "{reasons}"
    );
    assert!(reasons.contains("account not found"), "{reasons}");
    assert!(reasons.contains("Invalid JWT Signature."), "{reasons}");
    assert!(
        !reasons.contains("BEGIN PRIVATE KEY"),
        "no key material in a reason"
    );
    baton.stop().await;
}

#[tokio::test]
async fn resource_exhausted_is_a_rate_limit() {
    let up = FakeUpstream::start("vx").await;
    fake_account(&up);
    up.script([Behavior::Status {
        status: 429,
        body: json!({"error": {"code": 429, "message": "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: anthropic-claude-sonnet-4-5. Please submit a quota increase request.", "status": "RESOURCE_EXHAUSTED"}}),
        headers: vec![],
    }]);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [vertex("vx-rate", &up, &sa_key(&up))]}),
    )
    .await;
    let r = baton.messages(turn(false)).send().await.unwrap();
    assert_eq!(r.status(), 429);
    let log = baton.log().await;
    assert_eq!(log[0].attempts[0].class.as_str(), "rate");
    baton.stop().await;
}

#[test]
fn a_vertex_provider_needs_its_project_and_region() {
    let parse = |p: Value| {
        baton::config::parse_str(
            &json!({"providers": [p]}).to_string(),
            std::path::Path::new("c.json"),
        )
        .map(|_| ())
    };
    let base = json!({"id": "vx", "kind": "vertex-anthropic",
        "baseUrl": "https://us-east5-aiplatform.googleapis.com/v1", "models": [MODEL]});
    let err = parse(base.clone()).expect_err("no project");
    assert!(err.to_string().contains("project"), "{err}");
    let mut ok = base.clone();
    ok["project"] = json!("acme-prod-1");
    assert!(parse(ok.clone()).is_ok());
    ok["baseUrl"] = json!("https://vertex.internal.example/v1");
    let err = parse(ok).expect_err("no region");
    assert!(err.to_string().contains("region"), "{err}");
}

#[tokio::test]
async fn a_gemini_client_reaches_gemini_on_vertex_with_its_own_body_and_a_chat_client_translated() {
    let up = FakeUpstream::start("vg").await;
    up.vertex_account(
        "acme-prod-1",
        "us-central1",
        EMAIL,
        PUBLIC_KEY,
        &["gemini-2.5-pro"],
    );
    std::env::set_var("BT_VERTEX_GEMINI", sa_key(&up));
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "vg", "kind": "vertex-gemini",
            "baseUrl": format!("http://{}/v1", up.addr), "region": "us-central1",
            "project": "acme-prod-1", "models": ["gemini-2.5-pro"],
            "keys": [{"env": "BT_VERTEX_GEMINI"}]}]}),
    )
    .await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hello"}]}],
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]});
    let r = baton
        .http
        .post(format!(
            "{}/v1beta/models/gemini-2.5-pro:generateContent",
            baton.url
        ))
        .header("x-goog-api-key", &baton.key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"],
        "vg: hello"
    );
    let got = &up.received()[0];
    assert_eq!(got.body["path"], "gemini-2.5-pro:generateContent");
    assert_eq!(got.body["body"], body, "the client's body, as it came");
    let auth = got.headers["authorization"].to_str().unwrap();
    assert!(auth.starts_with("Bearer ya29.fake-vg-"), "{auth}");
    assert!(got.headers.get("x-goog-api-key").is_none());

    let r = baton
        .post(chat_body("gemini-2.5-pro", "hi", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert_eq!(stream_text(&sse_data(&text)), "vg: hi");
    assert_eq!(
        up.received()[1].body["path"],
        "gemini-2.5-pro:streamGenerateContent"
    );
    baton.stop().await;
}

#[tokio::test]
async fn a_service_accounts_key_file_pasted_in_the_form_is_kept_and_used() {
    let up = FakeUpstream::start("vx").await;
    fake_account(&up);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": []})).await;
    let admin = Admin(&baton);
    // As the key file is laid out on disk, pasted into a one-line field (newlines become
    // spaces).
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<Value>(&sa_key(&up)).unwrap())
            .unwrap()
            .replace('\n', " ");
    let mut p = json!({"id": "vx-form", "kind": "vertex-anthropic",
        "baseUrl": format!("http://{}/v1", up.addr), "region": "us-east5",
        "project": "acme-prod-1", "models": [MODEL]});
    // Not a key file: refused beside the key field, saying what to paste.
    p["newKeys"] = json!([r#"{"type": "something_else"}"#]);
    let (st, v) = admin
        .send(Method::POST, "/admin/providers", Some(p.clone()))
        .await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["error"]["param"], "newKeys");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("service account"),
        "{v}"
    );
    p["newKeys"] = json!([pretty]);
    let (st, v) = admin.send(Method::POST, "/admin/providers", Some(p)).await;
    assert_eq!(st, 201, "{v}");
    assert!(
        !v.to_string().contains("PRIVATE KEY"),
        "no key material echoed: {v}"
    );
    let r = baton.messages(turn(false)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "vx-form");
    assert_eq!(up.vertex_exchanges(), 1);
    let state = baton.admin_state().await.to_string();
    assert!(
        !state.contains("PRIVATE KEY"),
        "no key material in the state"
    );
    baton.stop().await;
}

/// `count_tokens` on Vertex AI is Google's own count: Claude's at the `count-tokens` publisher
/// model with the model in the body, Gemini's at the model's `:countTokens` with the contents
/// themselves; both with the service account's token.
#[tokio::test]
async fn count_tokens_is_vertexs_own_count_for_claude_and_gemini() {
    let up = FakeUpstream::start("vx").await;
    up.vertex_account(
        "acme-prod-1",
        "us-east5",
        EMAIL,
        PUBLIC_KEY,
        &[MODEL, "gemini-2.5-pro"],
    );
    std::env::set_var("BT_VERTEX_COUNT_G", sa_key(&up));
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [vertex("vx-count", &up, &sa_key(&up)),
            {"id": "vg", "kind": "vertex-gemini", "baseUrl": format!("http://{}/v1", up.addr),
             "region": "us-east5", "project": "acme-prod-1", "models": ["gemini-2.5-pro"],
             "keys": [{"env": "BT_VERTEX_COUNT_G"}], "priority": 2}]}),
    )
    .await;
    let r = baton
        .count_tokens(json!({"model": "claude-sonnet-4-5",
            "messages": [{"role": "user", "content": "hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["input_tokens"], 4242, "Vertex AI's own count");
    assert_eq!(up.received()[0].body["model"], MODEL);

    let r = baton
        .http
        .post(format!(
            "{}/v1beta/models/gemini-2.5-pro:countTokens",
            baton.url
        ))
        .header("x-goog-api-key", &baton.key)
        .json(&json!({"contents": [{"role": "user", "parts": [{"text":
            "supercalifragilisticexpialidocious antidisestablishmentarianism"}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["totalTokens"], 2,
        "the fake's count (one per word), not Baton's estimate of two long words"
    );
    baton.stop().await;
}
