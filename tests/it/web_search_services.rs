//! Web search's services and settings: Brave with a typed or named key, SearXNG, a provider
//! with search built in (each kind asked in its own shape), the config file's `webSearch`, and
//! what Settings refuses. The routes themselves are in `web_search.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use crate::web_search::{anthropic_search_request, setup, QUERY};
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[tokio::test]
async fn brave_with_a_typed_key_searches_and_the_key_never_shows() {
    let (_d, up, baton) = setup("openai-compatible", "gpt", false).await;
    let admin = Admin(&baton);
    let brave = format!("http://{}/res/v1/web/search", up.addr);
    let (s, v) = admin
        .send(
            Method::PUT,
            "/admin/web-search",
            Some(json!({"backend": "brave", "url": brave, "apiKey": "BSA-wrong"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["keyStored"], true);
    assert!(!v.to_string().contains("BSA-wrong"), "{v}");
    let (_, t) = admin
        .send(
            Method::POST,
            "/admin/web-search/test",
            Some(json!({"query": "x y"})),
        )
        .await;
    assert_eq!(
        t["error"]["message"], "Brave refused the key (HTTP 401)",
        "{t}"
    );
    let (s, _) = admin
        .send(
            Method::PUT,
            "/admin/web-search",
            Some(json!({"backend": "brave", "url": brave, "apiKey": testkit::BRAVE_KEY})),
        )
        .await;
    assert_eq!(s, 200);
    let (_, t) = admin
        .send(
            Method::POST,
            "/admin/web-search/test",
            Some(json!({"query": "x y"})),
        )
        .await;
    assert_eq!(t["error"], Value::Null, "{t}");
    assert_eq!(t["results"].as_array().unwrap().len(), 3);
    assert_eq!(
        t["results"][0]["snippet"],
        "Everything about x y, updated for 2026."
    );
    let (_, g) = admin.send(Method::GET, "/admin/web-search", None).await;
    assert!(!g.to_string().contains(testkit::BRAVE_KEY), "{g}");
    assert_eq!(g["keySet"], true);
    baton.stop().await;
}

#[tokio::test]
async fn web_search_settings_refuse_what_cannot_work_and_say_what_to_fix() {
    let (_d, _up, baton) = setup("openai-compatible", "gpt", false).await;
    let admin = Admin(&baton);
    for (body, param, words) in [
        (
            json!({"backend": "searxng"}),
            "url",
            "SearXNG needs its address",
        ),
        (
            json!({"backend": "searxng", "url": "http://search.example.com"}),
            "url",
            "must use https",
        ),
        (json!({"backend": "brave"}), "apiKey", "needs a key"),
        (
            json!({"backend": "searxng", "url": "https://s.example", "maxResults": 50}),
            "maxResults",
            "between 1 and 20",
        ),
        (json!({"backend": "bing"}), "body", "backend"),
        (json!({"backend": "none", "colour": 1}), "body", "colour"),
    ] {
        let (s, v) = admin
            .send(Method::PUT, "/admin/web-search", Some(body.clone()))
            .await;
        assert!(s == 400 || s == 422, "{body}: {s} {v}");
        assert_eq!(v["error"]["param"], param, "{body}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(words),
            "{body}: {v}"
        );
    }
    let (_, g) = admin.send(Method::GET, "/admin/web-search", None).await;
    assert_eq!(g["backend"], "none", "nothing refused was stored");
    baton.stop().await;
}

#[tokio::test]
async fn the_config_files_web_search_is_used_shown_and_not_editable_in_settings() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("gpt").await;
    up.always(Behavior::Auto);
    std::env::set_var("BT_WS_KEY", "sk-web-search-upstream");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "p", "kind": "openai-compatible", "baseUrl": up.base_url(),
            "keys": [{"env": "BT_WS_KEY"}], "models": ["m-1"]}], "modelMap": {"*": "auto"},
            "webSearch": {"backend": "searxng", "url": format!("http://{}", up.addr), "maxResults": 2}}),
    )
    .await;
    let v: Value = baton
        .messages(anthropic_search_request(false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        v["content"][1]["content"].as_array().unwrap().len(),
        2,
        "maxResults from the file: {v}"
    );
    let admin = Admin(&baton);
    let (_, g) = admin.send(Method::GET, "/admin/web-search", None).await;
    assert_eq!(g["fromFile"], true);
    let (s, e) = admin
        .send(
            Method::PUT,
            "/admin/web-search",
            Some(json!({"backend": "none"})),
        )
        .await;
    assert_eq!(s, 409, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("config file"),
        "{e}"
    );
    let (_, exported) = admin.send(Method::GET, "/admin/export", None).await;
    assert_eq!(exported["webSearch"]["backend"], "searxng", "{exported}");
    baton.stop().await;
}

#[test]
fn a_config_files_web_search_that_cannot_work_is_refused_at_start() {
    let text = json!({"providers": [], "webSearch": {"backend": "searxng", "url": "http://search.example.com"}}).to_string();
    let e = baton::config::parse_str(&text, std::path::Path::new("c.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("webSearch") && e.contains("https"), "{e}");
}

#[tokio::test]
async fn a_typed_brave_key_is_never_exported() {
    let (_d, up, baton) = setup("openai-compatible", "gpt", false).await;
    let admin = Admin(&baton);
    let (s, _) = admin
        .send(
            Method::PUT,
            "/admin/web-search",
            Some(json!({"backend": "brave", "apiKey": testkit::BRAVE_KEY,
            "url": format!("http://{}/res/v1/web/search", up.addr)})),
        )
        .await;
    assert_eq!(s, 200);
    let (_, exported) = admin.send(Method::GET, "/admin/export", None).await;
    assert_eq!(exported["webSearch"]["backend"], "brave");
    assert_eq!(exported["webSearch"]["apiKeyEnv"], "", "{exported}");
    assert!(!exported.to_string().contains(testkit::BRAVE_KEY));
    baton.stop().await;
}

/// A provider with web search built in as the search service: each kind asked in its own shape
/// (the fakes run their search as the real APIs do), its pages read back.
#[tokio::test]
async fn a_provider_with_built_in_search_searches_for_a_translated_route() {
    for (kind, name) in [
        ("anthropic", "claude"),
        ("openai-responses", "resp"),
        ("gemini", "gem"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let chat = FakeUpstream::start("gpt").await;
        chat.always(Behavior::Auto);
        let searcher = FakeUpstream::start(name).await;
        std::env::set_var("BT_WS_KEY", "sk-web-search-upstream");
        let base = searcher.base_url_for(kind);
        let baton = Baton::start(
            dir.path(),
            json!({"providers": [
                {"id": "p", "kind": "openai-compatible", "baseUrl": chat.base_url(),
                    "keys": [{"env": "BT_WS_KEY"}], "models": ["m-1"], "priority": 1},
                {"id": "s", "kind": kind, "baseUrl": base, "keys": [{"env": "BT_WS_KEY"}],
                    "models": ["search-model"], "priority": 9}],
                "modelMap": {"*": "p"}}),
        )
        .await;
        let (s, v) = Admin(&baton)
            .send(
                Method::PUT,
                "/admin/web-search",
                Some(json!({"backend": "provider", "provider": "s"})),
            )
            .await;
        assert_eq!(s, 200, "{kind}: {v}");
        let v: Value = baton
            .messages(anthropic_search_request(false))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let hits = v["content"][1]["content"]
            .as_array()
            .unwrap_or_else(|| panic!("{kind}: {v}"));
        assert_eq!(hits.len(), 3, "{kind}: {v}");
        assert_eq!(
            hits[0]["url"], "https://docs.example.org/rust-2026-edition",
            "{kind}"
        );
        assert_eq!(
            searcher.searches(),
            [QUERY],
            "{kind}: asked in its own shape"
        );
        let read = chat.received()[1].body["messages"].to_string();
        assert!(
            read.contains("Everything about rust 2026 edition"),
            "{kind}: the cited passage reaches the model: {read}"
        );
        assert!(chat.searches().is_empty());
        baton.stop().await;
    }
}

#[tokio::test]
async fn a_search_provider_must_exist_and_have_search_built_in() {
    let (_d, _up, baton) = setup("openai-compatible", "gpt", false).await;
    let admin = Admin(&baton);
    for (provider, words) in [("nope", "not configured"), ("p", "no web search built in")] {
        let (s, v) = admin
            .send(
                Method::PUT,
                "/admin/web-search",
                Some(json!({"backend": "provider", "provider": provider})),
            )
            .await;
        assert_eq!(s, 422, "{v}");
        assert_eq!(v["error"]["param"], "provider");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(words),
            "{v}"
        );
    }
    baton.stop().await;
}

/// A provider on the client's own login (a subscription passed through) has search built in
/// but no credential of Baton's to run a search with: it is refused, saying why.
#[tokio::test]
async fn a_login_only_provider_cannot_be_the_search_service() {
    let dir = tempfile::tempdir().unwrap();
    let sub = FakeUpstream::start("claude").await;
    let baton = Baton::start(dir.path(), json!({"providers": [login_only(&sub)]})).await;
    let (s, v) = Admin(&baton)
        .send(
            Method::PUT,
            "/admin/web-search",
            Some(json!({"backend": "provider", "provider": "claude-sub"})),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["error"]["param"], "provider");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("client's own login"),
        "{v}"
    );
    baton.stop().await;
}

/// A SearXNG address that does not answer is saved (it may be started later) with a warning
/// that says so at once; one that answers is saved without one.
#[tokio::test]
async fn an_unreachable_searxng_is_saved_with_a_warning() {
    let (_d, up, baton) = setup("openai-compatible", "gpt", false).await;
    let admin = Admin(&baton);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (s, v) = admin
        .send(
            Method::PUT,
            "/admin/web-search",
            Some(json!({"backend": "searxng", "url": dead})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let warning = v["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("could not reach") && warning.contains(&dead),
        "{v}"
    );
    let (_, g) = admin.send(Method::GET, "/admin/web-search", None).await;
    assert_eq!(g["url"], dead, "saved all the same");
    let (s, v) = admin
        .send(
            Method::PUT,
            "/admin/web-search",
            Some(json!({"backend": "searxng", "url": format!("http://{}", up.addr)})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["warning"], Value::Null, "{v}");
    baton.stop().await;
}
