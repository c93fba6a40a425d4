//! The `chatgpt` kind (ChatGPT's backend, on Codex's own login) beside the public
//! `openai-responses` kind: what each is sent, how a provider written before the split is
//! read, and that the backend is never called on a key of Baton's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::json;
use testkit::FakeUpstream;

/// The ChatGPT backend and the public Responses API are two kinds: Codex's body, written for
/// its backend (its `client_metadata`, ids on its own messages), reaches a `chatgpt` provider on
/// Codex's login as Codex wrote it, and a public `openai-responses` provider on the same kind
/// of login in the public API's shapes. A provider written the old way (`openai-responses` on
/// the login at chatgpt.com) is read as `chatgpt`.
#[tokio::test]
async fn the_chatgpt_backend_gets_codexs_body_as_codex_wrote_it() {
    const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjb2RleCJ9.c2lnbmF0dXJl";
    let body = json!({"model": "gpt-5-codex", "stream": false, "store": false,
        "client_metadata": {"session": "s1"}, "instructions": "be brief",
        "input": [{"type": "message", "role": "user", "id": "msg_01b",
            "content": [{"type": "input_text", "text": "hi"}]}]});
    for (kind, public) in [("chatgpt", false), ("openai-responses", true)] {
        let dir = tempfile::tempdir().unwrap();
        let backend = FakeUpstream::start("chatgpt").await;
        backend.only_subscription(TOKEN);
        let baton = Baton::start(
            dir.path(),
            json!({"providers": [
                {"id": "sub", "kind": kind, "baseUrl": backend.base_url(),
                 "credentials": "client", "models": ["*"]}],
                "modelMap": {"gpt-*": "auto"}}),
        )
        .await;
        let r = baton
            .http
            .post(format!("{}/v1/responses", baton.url))
            .header("x-baton-key", &baton.key)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("chatgpt-account-id", "acct-1")
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, 200, "{kind}: {text} {:?}", backend.refusals());
        let sent = &backend.received()[0].body;
        assert_eq!(
            sent.get("client_metadata").is_none(),
            public,
            "{kind}: {sent}"
        );
        assert_eq!(sent["input"][0].get("id").is_none(), public, "{kind}");
        baton.stop().await;
    }

    let old = json!({"id": "chatgpt-codex", "kind": "openai-responses",
        "baseUrl": "https://chatgpt.com/backend-api/codex", "credentials": "client",
        "models": ["*"]});
    let config = baton::config::parse_str(
        &json!({"providers": [old]}).to_string(),
        std::path::Path::new("c.json"),
    )
    .unwrap();
    assert_eq!(
        config.providers[0].kind,
        baton::providers::kinds::chatgpt::KIND
    );
    // On a key of Baton's it cannot be: Baton never holds a ChatGPT login.
    let keyed = json!({"providers": [{"id": "c", "kind": "chatgpt",
        "baseUrl": "https://chatgpt.com/backend-api/codex", "models": ["gpt-5-codex"],
        "keys": [{"env": "SOME_KEY"}]}]});
    let err = baton::config::parse_str(&keyed.to_string(), std::path::Path::new("c.json"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("calls only with the client's own login"),
        "{err}"
    );
}
