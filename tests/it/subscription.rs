//! `credentials: "client"`: a client's own subscription login (as Claude Code sends it) is
//! forwarded unchanged to that provider and nowhere else; its cap cools that account only and
//! fails over, translated, to the next provider; a request without a login skips the provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

const ALICE: &str = "sk-ant-oat01-alice-subscription-token";
const BOB: &str = "sk-ant-oat01-bob-subscription-token";

async fn setup() -> (tempfile::TempDir, FakeUpstream, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let sub = FakeUpstream::start("claude").await;
    sub.only_subscription(ALICE);
    let other = FakeUpstream::start("other").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            login_only(&sub),
            {"id": "other", "kind": "openai-compatible", "baseUrl": other.base_url(),
             "models": ["other-model"], "priority": 2}],
         "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    (dir, sub, other, baton)
}

/// A Messages request the way Claude Code sends it on a subscription, with Baton's key in
/// `x-baton-key` (ANTHROPIC_CUSTOM_HEADERS).
fn claude_code(baton: &Baton, token: &str, text: &str) -> reqwest::RequestBuilder {
    baton
        .http
        .post(format!("{}/v1/messages?beta=true", baton.url))
        .header("x-baton-key", &baton.key)
        .header("authorization", format!("Bearer {token}"))
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "claude-code-20250219,oauth-2025-04-20")
        .header("x-app", "cli")
        .header("user-agent", "claude-cli/2.1.197 (external, cli)")
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
            "messages": [{"role": "user", "content": text}]}))
}

#[tokio::test]
async fn the_clients_own_login_goes_to_its_provider_unchanged() {
    let (_d, sub, other, baton) = setup().await;
    let r = claude_code(&baton, ALICE, "hello").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "claude-sub");
    assert_eq!(header(&r, "x-gateway-model"), "claude-sonnet-4-5");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["content"][0]["text"], "claude: hello");
    let got = &sub.received()[0];
    assert_eq!(got.headers["authorization"], format!("Bearer {ALICE}"));
    assert!(!got.headers.contains_key("x-api-key"));
    assert!(
        !got.headers.contains_key("x-baton-key"),
        "Baton's key stays here"
    );
    assert_eq!(got.headers["x-app"], "cli");
    assert!(got.headers["anthropic-beta"]
        .to_str()
        .unwrap()
        .contains("oauth-2025-04-20"));
    assert_eq!(
        got.body["model"], "claude-sonnet-4-5",
        "any model: the name the client sent"
    );
    // Pinned with a model name, it serves that model; by its id alone it names none.
    let pinned = |model: &str| {
        let mut r = claude_code(&baton, ALICE, "pinned");
        r = r.json(&json!({"model": model, "max_tokens": 100,
            "messages": [{"role": "user", "content": "pinned"}]}));
        r
    };
    let r = pinned("claude-sub/claude-opus-4-1").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        sub.received().last().unwrap().body["model"],
        "claude-opus-4-1"
    );
    let r = pinned("claude-sub").send().await.unwrap();
    assert_eq!(r.status(), 400, "no model to send");
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("provider/model"),
        "{e}"
    );
    assert_eq!(
        sub.received().len(),
        2,
        "nothing sent with a provider id for a model"
    );
    // Without a login of its own (Baton's key as the API key), the provider is passed over.
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    assert_eq!(sub.received().len(), 2);
    assert_eq!(
        other.received()[0].headers.get("authorization"),
        None,
        "no client credential reaches another provider"
    );
    baton.stop().await;
}

#[tokio::test]
async fn a_capped_subscription_fails_over_for_that_account_only_and_says_so() {
    let logs = Captured::install();
    let (_d, sub, other, baton) = setup().await;
    let mut events = baton.handle.core.routing.events.subscribe();
    let reset = baton::clock::unix_ms() / 1000 + 3 * 3600;
    sub.script([Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Error"}}),
        headers: vec![
            (
                "anthropic-ratelimit-unified-status".into(),
                "rejected".into(),
            ),
            (
                "anthropic-ratelimit-unified-reset".into(),
                reset.to_string(),
            ),
        ],
    }]);
    let r = claude_code(&baton, ALICE, "hello").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "message", "translated back to the client's API");
    assert_eq!(v["content"][0]["text"], "other: hello");
    // That account cools until the stated reset; the failover is announced.
    let cooling = baton.handle.core.routing.cooldowns.active();
    let c = cooling
        .iter()
        .find(|c| c.scope.provider == "claude-sub")
        .unwrap();
    assert_eq!(c.until_ms, reset * 1000);
    let account = c.scope.key.clone().unwrap();
    assert!(account.starts_with("client:"), "{account}");
    let mut failovers = 0;
    while let Ok(e) = events.try_recv() {
        if let baton::events::Event::Failover { message, .. } = e {
            assert!(
                message.contains("subscription limit reached — back at"),
                "{message}"
            );
            failovers += 1;
        }
    }
    assert_eq!(failovers, 1);
    // The same account goes straight to the next provider while the cap lasts…
    let hits = sub.hits();
    let r = claude_code(&baton, ALICE, "again").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    assert_eq!(sub.hits(), hits);
    // …another user's subscription is not touched by it.
    sub.only_subscription(BOB);
    let r = claude_code(&baton, BOB, "mine").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "claude-sub");
    // No credential anywhere it could leak: the log, the admin state, the request log.
    let state = baton.admin_state().await.to_string();
    let log = String::from_utf8_lossy(&logs.bytes()).to_string();
    let rows = format!("{:?}", baton.log().await);
    for token in [ALICE, BOB] {
        assert!(!state.contains(token), "admin state");
        assert!(!log.contains(token), "logs");
        assert!(!rows.contains(token), "request log");
    }
    assert!(
        rows.contains(&account),
        "the attempt names the account, not the token"
    );
    let _ = other;
    baton.stop().await;
}

#[test]
fn client_credentials_are_configured_with_no_keys_and_any_model_only_there() {
    let parse = |p: Value| {
        baton::config::parse_str(
            &json!({"providers": [p]}).to_string(),
            std::path::Path::new("c.json"),
        )
    };
    let e = parse(
        json!({"id": "s", "kind": "anthropic", "baseUrl": "https://api.anthropic.com/v1",
        "credentials": "client", "keys": [{"env": "ANTHROPIC_API_KEY"}], "models": ["*"]}),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("providers[0].keys") && e.contains("no keys of its own"),
        "{e}"
    );
    let e = parse(
        json!({"id": "s", "kind": "anthropic", "baseUrl": "https://api.anthropic.com/v1",
        "models": ["*"]}),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("credentials: \"client\""), "{e}");
    let e = parse(
        json!({"id": "s", "kind": "claude-cli", "credentials": "client", "models": ["sonnet"]}),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("providers[0].credentials"), "{e}");
    assert!(parse(
        json!({"id": "s", "kind": "anthropic", "baseUrl": "https://api.anthropic.com/v1",
        "credentials": "client", "models": ["*"]})
    )
    .is_ok());
}

/// Codex asks its provider for its models' metadata (`GET /models?client_version=…`) in the
/// Codex backend's own shape; on its ChatGPT login Baton asks the subscription provider, with
/// that login only, and answers an empty list (never an error) when it cannot.
#[tokio::test]
async fn codex_gets_its_models_metadata_from_its_own_backend() {
    const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjb2RleCJ9.c2lnbmF0dXJl";
    let dir = tempfile::tempdir().unwrap();
    let backend = FakeUpstream::start("chatgpt").await;
    backend.only_subscription(TOKEN);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "chatgpt", "kind": "chatgpt", "baseUrl": backend.base_url(),
             "credentials": "client", "models": ["*"], "priority": 1}]}),
    )
    .await;
    let codex = |token: &str| {
        baton
            .http
            .get(format!("{}/v1/models?client_version=0.171.0", baton.url))
            .header("x-baton-key", &baton.key)
            .header("authorization", format!("Bearer {token}"))
            .header("chatgpt-account-id", "acct-1")
            .header("originator", "codex_exec")
    };
    let r = codex(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["models"][0]["slug"], "gpt-chatgpt-codex");
    assert_eq!(v["models"][0]["apply_patch_tool_type"], "freeform");
    assert_eq!(
        v["object"], "list",
        "still an OpenAI list for everyone else"
    );
    let names: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"chatgpt/*"),
        "`*` is not a model name: {names:?}"
    );
    let asked = backend.model_list_requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(asked[0]["chatgpt-account-id"], "acct-1");
    assert!(
        !asked[0].contains_key("x-baton-key"),
        "Baton's key stays here"
    );

    // A login the backend refuses, and no login at all: an empty list, still a 200.
    let r = codex("eyJhbGciOiJub25lIn0.eyJzdWIiOiJvdGhlciJ9.c2ln")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["models"], json!([]));
    let r = baton
        .http
        .get(format!("{}/v1/models?client_version=0.171.0", baton.url))
        .bearer_auth(&baton.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["models"], json!([]));
    assert_eq!(backend.model_list_requests().len(), 2, "no login, no call");
    // Other clients get the plain OpenAI list.
    let r = baton
        .http
        .get(format!("{}/v1/models", baton.url))
        .bearer_auth(&baton.key)
        .send()
        .await
        .unwrap();
    assert!(r.json::<Value>().await.unwrap().get("models").is_none());
    baton.stop().await;
}

/// When the cap's stated reset passes, that account's requests go back to its subscription.
#[tokio::test]
async fn traffic_returns_to_the_subscription_when_its_reset_passes() {
    let dir = tempfile::tempdir().unwrap();
    let sub = FakeUpstream::start("claude").await;
    sub.only_subscription(ALICE);
    let other = FakeUpstream::start("other").await;
    let start = baton::clock::unix_ms();
    let clock = std::sync::Arc::new(baton::clock::ManualClock::new(start));
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [
            {"id": "claude-sub", "kind": "anthropic", "baseUrl": sub.base_url(),
             "credentials": "client", "models": ["*"], "priority": 1},
            {"id": "other", "kind": "openai-compatible", "baseUrl": other.base_url(),
             "models": ["other-model"], "priority": 2}],
         "modelMap": {"claude-*": "auto"}}),
        Some(clock.clone()),
    )
    .await;
    let reset_s = start / 1000 + 3600;
    // The account stays capped until its reset (a re-check meanwhile finds it so).
    let cap = Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Error"}}),
        headers: vec![
            (
                "anthropic-ratelimit-unified-status".into(),
                "rejected".into(),
            ),
            (
                "anthropic-ratelimit-unified-reset".into(),
                reset_s.to_string(),
            ),
        ],
    };
    sub.script([cap.clone(), cap]);
    let served = |r: &reqwest::Response| header(r, "x-gateway-provider").to_string();
    let r = claude_code(&baton, ALICE, "one").send().await.unwrap();
    assert_eq!(served(&r), "other");
    clock.advance(3_590_000);
    let r = claude_code(&baton, ALICE, "two").send().await.unwrap();
    assert_eq!(served(&r), "other", "ten seconds before the reset");
    assert_eq!(
        sub.hits(),
        2,
        "one re-check of the long cooldown, answered with the cap"
    );
    clock.set(reset_s as i64 * 1000 + 1);
    let r = claude_code(&baton, ALICE, "three").send().await.unwrap();
    assert_eq!(served(&r), "claude-sub", "back on the subscription");
    baton.stop().await;
}

/// A login goes only to its own vendor: with a Claude subscription and a ChatGPT subscription
/// on one route, a capped Claude login never reaches the ChatGPT backend (nor a ChatGPT token
/// Anthropic); and Baton's own key never leaves, in whatever header or case it comes.
#[tokio::test]
async fn a_login_never_reaches_another_vendor_nor_batons_key_any_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let claude = FakeUpstream::start("claude").await;
    claude.only_subscription(ALICE);
    let chatgpt = FakeUpstream::start("chatgpt").await;
    chatgpt.only_subscription("eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl");
    let keyed = FakeUpstream::start("keyed").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "claude-sub", "kind": "anthropic", "baseUrl": claude.base_url(),
             "credentials": "client", "models": ["*"], "priority": 1},
            {"id": "chatgpt-sub", "kind": "chatgpt", "baseUrl": chatgpt.base_url(),
             "credentials": "client", "models": ["*"], "priority": 2},
            {"id": "keyed", "kind": "openai-compatible", "baseUrl": keyed.base_url(),
             "models": ["keyed-model"], "priority": 3}],
         "routes": {"subs": ["claude-sub", "chatgpt-sub", "keyed"]},
         "modelMap": {"claude-*": "subs"}}),
    )
    .await;
    claude.script([Behavior::rate_limited(Some(3600))]);
    let r = claude_code(&baton, ALICE, "hi").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "x-gateway-provider"),
        "keyed",
        "past the ChatGPT backend"
    );
    assert_eq!(
        chatgpt.hits(),
        0,
        "the Claude login never went to the ChatGPT backend"
    );
    // A login of no known shape, spoken in Anthropic's API, counts as Anthropic's.
    let r = claude_code(&baton, "opaque-login-42", "hi")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(chatgpt.hits(), 0);
    // Baton's key in x-api-key beside the login, and as the login in an upper-case scheme.
    claude.script([Behavior::Ok]);
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-baton-key", &baton.key)
        .header("x-api-key", &baton.key)
        .header("authorization", format!("Bearer {ALICE}"))
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for (fake, name) in [
        (&claude, "claude"),
        (&chatgpt, "chatgpt"),
        (&keyed, "keyed"),
    ] {
        for got in fake.received() {
            for (h, v) in got.headers.iter() {
                let v = v.to_str().unwrap_or_default();
                assert!(
                    !v.contains(baton.key.as_str()),
                    "Baton's key reached {name} in {h}"
                );
            }
        }
    }
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-baton-key", &baton.key)
        .header("authorization", format!("BEARER {}", baton.key))
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_ne!(r.status(), 500);
    for got in claude.received() {
        let auth = got
            .headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_string());
        assert!(!auth.unwrap_or_default().contains(baton.key.as_str()));
    }
    baton.stop().await;
}

/// A login of no recognisable shape that the upstream echoes is masked by value: it reaches
/// neither the client's error, nor the log, nor the admin state.
#[tokio::test]
async fn an_echoed_login_of_no_known_shape_is_masked() {
    const ODD: &str = "opaque4f7e1c2b9a8d6e5f4a3b2c1d0e9f8a7b";
    let dir = tempfile::tempdir().unwrap();
    let sub = FakeUpstream::start("claude").await;
    sub.script([Behavior::Status {
        status: 400,
        body: json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": format!("token {ODD} is not valid for this model")}}),
        headers: Vec::new(),
    }]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "claude-sub", "kind": "anthropic", "baseUrl": sub.base_url(),
            "credentials": "client", "models": ["*"]}], "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    let r = claude_code(&baton, ODD, "hi").send().await.unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(!text.contains(ODD), "{text}");
    let log = baton.log().await;
    assert!(!format!("{log:?}").contains(ODD));
    assert!(!baton.admin_state().await.to_string().contains(ODD));
    baton.stop().await;
}

/// Test on a provider that calls with the client's login: Baton holds no login, so it checks
/// what it can (the endpoint answers, as an API refusing a request without one should) and
/// says what it cannot — no false "key or login rejected", no prompt sent with model `*`.
#[tokio::test]
async fn test_on_a_passthrough_provider_checks_the_endpoint_and_says_it_cannot_check_the_login() {
    let (_d, sub, _other, baton) = setup().await;
    // As the real API: a request without credentials is refused.
    sub.strict_auth();
    let admin = Admin(&baton);
    let (status, v) = admin
        .send(
            reqwest::Method::POST,
            "/admin/providers/claude-sub/test",
            None,
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["ok"].as_bool(), v["passthrough"].as_bool()),
        (Some(true), Some(true)),
        "{v}"
    );
    let note = v["note"].as_str().unwrap();
    assert!(
        note.contains("HTTP 401") && note.contains("cannot test your login"),
        "{note}"
    );
    assert!(sub.received().is_empty(), "no prompt was sent");
    // Unreachable: Baton says so, in its own words.
    let (status, v) = admin
        .send(
            reqwest::Method::POST,
            "/admin/test",
            Some(
                json!({"id": "gone", "kind": "anthropic", "baseUrl": "http://127.0.0.1:9/v1",
                "credentials": "client", "models": ["*"]}),
            ),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (v["ok"].as_bool(), v["class"].as_str()),
        (Some(false), Some("transient")),
        "{v}"
    );
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .starts_with("connection failed"),
        "{v}"
    );
    baton.stop().await;
}
