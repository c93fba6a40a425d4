//! A provider's own outbound proxy: its requests, and only its, go through the proxy; a proxy
//! that does not answer fails the attempt before its first byte, so the request fails over.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::json;
use testkit::FakeUpstream;

/// The fake answers whatever reaches it, absolute-form requests included: as a forward proxy
/// it stands for a company's egress proxy in front of an upstream no one else can reach.
#[tokio::test]
async fn a_providers_requests_go_through_its_proxy_and_a_dead_one_fails_over() {
    let egress = FakeUpstream::start("behind-proxy").await;
    let direct = FakeUpstream::start("direct").await;
    let dir = tempfile::tempdir().unwrap();
    let mut proxied = provider("proxied", "http://llm.corp.invalid:8080/v1", 1);
    proxied["proxy"] = json!(egress.azure_endpoint());
    proxied["models"] = json!(["m"]);
    let mut dead = provider("dead", "http://llm.corp.invalid:8080/v1", 2);
    dead["proxy"] = json!("http://127.0.0.1:1");
    dead["models"] = json!(["m"]);
    let mut plain = provider("plain", &direct.base_url(), 3);
    plain["models"] = json!(["m"]);
    let baton = Baton::start(dir.path(), json!({"providers": [proxied, dead, plain]})).await;

    // The upstream's name does not even resolve here: only the proxy can reach it.
    let r = baton.chat("proxied/m", "hello").await;
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "behind-proxy: hello");
    assert_eq!(
        egress.received()[0].headers["host"],
        "llm.corp.invalid:8080",
        "the request was for the upstream, sent to the proxy"
    );

    // A proxy that does not answer: the next candidate serves, nothing was sent twice.
    let r = baton.chat("m", "again").await;
    assert_eq!(r.status(), 200);
    let r2 = baton.chat("dead/m", "x").await;
    assert!(r2.status().is_server_error(), "{}", r2.status());
    let details = header(&r2, "x-gateway-attempt-details").to_string();
    assert!(
        details.contains("dead/m=transient") || details.contains("dead/m=connect"),
        "{details}"
    );
    assert_eq!(
        direct.hits(),
        0,
        "the first candidate served `m` through its proxy"
    );

    // Only the provider that names a proxy uses it.
    let before = egress.hits();
    let r = baton.chat("plain/m", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(direct.hits(), 1);
    assert_eq!(egress.hits(), before);
    baton.stop().await;
}

#[test]
fn a_proxy_is_checked_as_an_address_without_secrets() {
    let check = |proxy: &str, kind: &str| {
        let mut p = provider("p", "https://api.example.com/v1", 1);
        p["proxy"] = json!(proxy);
        if kind != "openai-compatible" {
            p = json!({"id": "p", "kind": kind, "models": ["sonnet"], "proxy": proxy});
        }
        baton::config::parse_str(
            &json!({"providers": [p]}).to_string(),
            std::path::Path::new("c.json"),
        )
        .err()
        .map(|e| e.to_string())
    };
    assert_eq!(check("socks5h://10.0.0.1:1080", "openai-compatible"), None);
    assert_eq!(check("http://proxy.corp:3128", "openai-compatible"), None);
    let e = check("proxy.corp:3128", "openai-compatible").unwrap();
    assert!(
        e.contains("providers[0].proxy") && e.contains("socks5://"),
        "{e}"
    );
    let e = check("http://me:secret@proxy.corp:3128", "openai-compatible").unwrap();
    assert!(e.contains("secrets"), "{e}");
    let e = check("http://proxy.corp:3128", "claude-cli").unwrap();
    assert!(e.contains("proxy"), "{e}");
}

/// A proxy that asks for a login gets it from `proxyLogin`, a reference the configuration
/// names (never the login itself): without it the proxy answers 407 and the request fails
/// over; with it the request is served through the proxy. The login never shows in the
/// configuration Baton exports, nor in the admin view.
#[tokio::test]
async fn a_proxy_that_asks_for_a_login_gets_it_by_reference() {
    let egress = FakeUpstream::start("behind-login-proxy").await;
    egress.require_proxy_login("baton-svc:s3cret-proxy-pass");
    let direct = FakeUpstream::start("direct").await;
    std::env::set_var("BT_CORP_PROXY_LOGIN", "baton-svc:s3cret-proxy-pass");
    let dir = tempfile::tempdir().unwrap();
    let mut with_login = provider("with-login", "http://llm.corp.invalid:8080/v1", 1);
    with_login["proxy"] = json!(egress.azure_endpoint());
    with_login["proxyLogin"] = json!({"env": "BT_CORP_PROXY_LOGIN"});
    with_login["models"] = json!(["m"]);
    let mut without = provider("without-login", "http://llm.corp.invalid:8080/v1", 2);
    without["proxy"] = json!(egress.azure_endpoint());
    without["models"] = json!(["m"]);
    let mut plain = provider("plain", &direct.base_url(), 3);
    plain["models"] = json!(["m"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [with_login, without, plain]}),
    )
    .await;

    let r = baton.chat("with-login/m", "hello").await;
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "behind-login-proxy: hello"
    );

    // Without the login the proxy refuses (407) before the upstream: the provider cannot be
    // reached as configured (an auth failure, not the request's fault), so a request that has
    // another candidate goes on there.
    let r = baton.chat("without-login/m", "x").await;
    assert!(!r.status().is_success(), "{}", r.status());
    let details = header(&r, "x-gateway-attempt-details").to_string();
    assert!(details.contains("without-login/m=auth"), "{details}");
    let r = baton.chat("m", "hi").await;
    assert_eq!(r.status(), 200, "served by the provider with the login");

    // The login is a reference in every view of the configuration.
    let export = baton
        .http
        .get(format!("{}/admin/providers", baton.url))
        .header("x-admin-key", &baton.admin_key)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(export.contains("BT_CORP_PROXY_LOGIN"), "{export}");
    assert!(!export.contains("s3cret-proxy-pass"), "{export}");
    baton.stop().await;
}
