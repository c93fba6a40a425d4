//! Bad input: malformed and hostile requests on every inbound endpoint and the admin API, sent
//! as raw bytes over TCP (so nothing is tidied by a client library). Each gets a 4xx in its
//! API's error shape — OpenAI's `{"error": {...}}`, Anthropic's `{"type": "error", ...}` — and
//! the server keeps serving: a normal request succeeds after every batch.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Reply {
    status: u16,
    head: String,
    body: Vec<u8>,
}

/// Writes `raw` and reads the whole answer (the request asks to close); `None` when the server
/// closed without answering.
async fn raw(addr: &str, raw: &[u8]) -> Option<Reply> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    // A server may answer and close before it reads everything (413 on Content-Length).
    let _ = s.write_all(raw).await;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "no answer within 20 s to {:?}", preview(raw));
    parse(&buf)
}

fn preview(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(160)]).into_owned()
}

fn parse(buf: &[u8]) -> Option<Reply> {
    let end = memchr::memmem::find(buf, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let mut body = buf[end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Some(Reply { status, head, body })
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = memchr::memmem::find(b, b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..nl]).unwrap().trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + size]);
        b = &b[nl + 2 + size + 2..];
    }
    out
}

fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    let mut out = r.into_bytes();
    out.extend_from_slice(body);
    out
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Shape {
    OpenAi,
    Anthropic,
    Gemini,
}

/// The answer is a 4xx, JSON, in the endpoint's error shape, with a message.
fn assert_refused(r: Option<Reply>, shape: Shape, what: &str) {
    let r = r.unwrap_or_else(|| panic!("{what}: connection closed without an answer"));
    assert!(
        (400..500).contains(&r.status),
        "{what}: {} {}",
        r.head,
        String::from_utf8_lossy(&r.body)
    );
    let v: Value = serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", preview(&r.body)));
    let message = v.pointer("/error/message").and_then(Value::as_str);
    assert!(message.is_some_and(|m| !m.is_empty()), "{what}: {v}");
    if shape == Shape::Anthropic {
        assert_eq!(v["type"], "error", "{what}: Anthropic shape: {v}");
    }
    if shape == Shape::Gemini {
        assert_eq!(v["error"]["code"], r.status, "{what}: Google's shape: {v}");
        assert!(
            v["error"]["status"].is_string(),
            "{what}: Google's shape: {v}"
        );
    }
}

fn nested(depth: usize, open: &str, close: &str) -> String {
    format!("{}{}", open.repeat(depth), close.repeat(depth))
}

/// Hostile bodies for any JSON endpoint: each must be refused with a 4xx.
fn hostile_bodies() -> Vec<(&'static str, Vec<u8>)> {
    let msg = |m: Value| {
        json!({"model": "auto", "max_tokens": 16, "messages": m})
            .to_string()
            .into_bytes()
    };
    let with = |k: &str, v: Value| {
        let mut b = json!({"model": "auto", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]});
        b[k] = v;
        b.to_string().into_bytes()
    };
    let mut many = String::from("{\"model\":\"auto\",\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"x\":[");
    many.push_str(&"0,".repeat(600_000));
    many.push_str("0]}");
    vec![
        ("empty body", b"".to_vec()),
        ("truncated object", b"{\"model\": \"auto\", \"messages\": [".to_vec()),
        ("null", b"null".to_vec()),
        ("array", b"[]".to_vec()),
        ("string", b"\"hello\"".to_vec()),
        ("number", b"42".to_vec()),
        ("deeply nested arrays", nested(100_000, "[", "]").into_bytes()),
        ("deeply nested objects", format!("{}1{}", "{\"a\":".repeat(50_000), "}".repeat(50_000)).into_bytes()),
        ("model is a number", with("model", json!(5))),
        ("model is null", with("model", Value::Null)),
        ("model is an object", with("model", json!({"id": "auto"}))),
        ("model is empty", with("model", json!(""))),
        ("messages is a string", msg(json!("hi"))),
        ("messages is empty", msg(json!([]))),
        ("messages holds null", msg(json!([null]))),
        ("role is a number", msg(json!([{"role": 7, "content": "hi"}]))),
        ("unknown role", msg(json!([{"role": "wizard", "content": "hi"}]))),
        ("content is an object", msg(json!([{"role": "user", "content": {"a": 1}}]))),
        ("content part without type", msg(json!([{"role": "user", "content": [{"text": "hi"}]}]))),
        ("negative max_tokens", with("max_tokens", json!(-5))),
        ("huge max_tokens", br#"{"model":"auto","max_tokens":99999999999999999999999999,"messages":[{"role":"user","content":"hi"}]}"#.to_vec()),
        ("number overflowing f64", br#"{"model":"auto","max_tokens":16,"temperature":1e999,"messages":[{"role":"user","content":"hi"}]}"#.to_vec()),
        ("temperature is a string", with("temperature", json!("hot"))),
        ("stream is a string", with("stream", json!("yes"))),
        ("max_tokens is a float", with("max_tokens", json!(1.5))),
        ("tools is a string", with("tools", json!("x"))),
        ("tool without a name", with("tools", json!([{"type": "function", "function": {}}]))),
        ("invalid UTF-8", b"{\"model\":\"auto\",\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}".to_vec()),
        ("raw NUL byte", b"{\"model\":\"auto\",\0\"messages\":[]}".to_vec()),
        ("lone surrogate", br#"{"model":"auto","max_tokens":16,"messages":[{"role":"user","content":"\ud800"}]}"#.to_vec()),
        ("trailing garbage", b"{\"model\":\"auto\",\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]} xyz".to_vec()),
        ("two documents", b"{\"model\":\"auto\"}{\"model\":\"auto\"}".to_vec()),
        ("comments", b"{/* hi */\"model\":\"auto\",\"max_tokens\":16,\"messages\":[]}".to_vec()),
        ("single quotes", b"{'model':'auto'}".to_vec()),
        ("NaN literal", b"{\"model\":\"auto\",\"max_tokens\":16,\"temperature\":NaN,\"messages\":[]}".to_vec()),
        ("Infinity literal", b"{\"model\":\"auto\",\"max_tokens\":Infinity,\"messages\":[]}".to_vec()),
        ("UTF-16 body", "{\"model\":\"auto\"}".encode_utf16().flat_map(|u| u.to_le_bytes()).collect()),
        ("model with a header injection", with("model", json!("auto\r\nx-evil: 1"))),
        ("model of 100,000 characters", with("model", json!("m".repeat(100_000)))),
        ("600,000 JSON values", many.into_bytes()),
        ("oversized body", {
            let mut b = b"{\"model\":\"auto\",\"messages\":[{\"role\":\"user\",\"content\":\"".to_vec();
            b.extend(std::iter::repeat_n(b'x', 40 * 1024 * 1024));
            b.extend_from_slice(b"\"}]}");
            b
        }),
    ]
}

/// Protocol-level abuse, the same on any endpoint: (name, raw request, refused in JSON?).
fn hostile_requests(path: &str, auth: (&str, &str)) -> Vec<(String, Vec<u8>)> {
    let ok_body =
        br#"{"model":"auto","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#;
    let json_ct = ("content-type", "application/json");
    vec![
        (
            "a declared body of 10 GB".into(),
            format!("POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n{}: {}\r\ncontent-type: application/json\r\ncontent-length: 10737418240\r\n\r\n{{", auth.0, auth.1).into_bytes(),
        ),
        (
            "a header of 100 KB".into(),
            request("POST", path, &[auth, json_ct, ("x-big", &"y".repeat(100_000))], ok_body),
        ),
        (
            "a query of 20,000 characters".into(),
            request("POST", &format!("{path}?q={}", "x".repeat(20_000)), &[auth, json_ct], ok_body),
        ),
        (
            "a wrong method".into(),
            request("DELETE", path, &[auth, json_ct], b""),
        ),
        (
            "a malformed chunked body".into(),
            format!("POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n{}: {}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{{\r\n0\r\n\r\n", auth.0, auth.1).into_bytes(),
        ),
    ]
}

async fn healthy(baton: &Baton) {
    let r = baton.chat("auto", "still there?").await;
    assert_eq!(r.status(), 200, "the server keeps serving");
}

async fn start() -> (Baton, FakeUpstream, tempfile::TempDir) {
    let up = FakeUpstream::start("up").await;
    up.forget_requests();
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("up", &up.base_url(), 1)],
            // Short body and header timeouts, so a request that never completes ends its case
            // quickly.
            "server": {"bodyTimeoutMs": 2000, "headerTimeoutMs": 3000}}),
    )
    .await;
    (baton, up, dir)
}

#[tokio::test]
async fn hostile_bodies_on_every_inbound_endpoint_get_a_4xx_in_its_api_shape() {
    let (baton, _up, _dir) = start().await;
    let addr = baton.url.trim_start_matches("http://").to_string();
    let bearer = format!("Bearer {}", baton.key);
    let endpoints = [
        (
            "/v1/chat/completions",
            Shape::OpenAi,
            ("authorization", bearer.as_str()),
        ),
        (
            "/chat/completions",
            Shape::OpenAi,
            ("authorization", bearer.as_str()),
        ),
        (
            "/v1/messages",
            Shape::Anthropic,
            ("x-api-key", baton.key.as_str()),
        ),
        (
            "/v1/messages/count_tokens",
            Shape::Anthropic,
            ("x-api-key", baton.key.as_str()),
        ),
        (
            "/v1beta/models/up:generateContent",
            Shape::Gemini,
            ("x-goog-api-key", baton.key.as_str()),
        ),
        (
            "/v1beta/models/up:streamGenerateContent",
            Shape::Gemini,
            ("x-goog-api-key", baton.key.as_str()),
        ),
        (
            "/v1beta/models/up:countTokens",
            Shape::Gemini,
            ("x-goog-api-key", baton.key.as_str()),
        ),
    ];
    let bodies = hostile_bodies();
    assert!(bodies.len() >= 40);
    let mut cases = 0;
    for (path, shape, auth) in endpoints {
        for (name, body) in &bodies {
            let r = raw(
                &addr,
                &request(
                    "POST",
                    path,
                    &[
                        auth,
                        ("content-type", "application/json"),
                        ("anthropic-version", "2023-06-01"),
                    ],
                    body,
                ),
            )
            .await;
            assert_refused(r, shape, &format!("POST {path}: {name}"));
            cases += 1;
        }
        for (name, req) in hostile_requests(path, auth) {
            assert_refused(raw(&addr, &req).await, shape, &format!("{path}: {name}"));
            cases += 1;
        }
        // A valid JSON body labelled text/plain, or not labelled at all (curl's default), is
        // read as JSON: lenient where nothing is ambiguous.
        let ok_body: &[u8] = if shape == Shape::Gemini {
            br#"{"contents":[{"parts":[{"text":"hi"}]}]}"#
        } else {
            br#"{"model":"auto","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#
        };
        for ct in [Some("text/plain"), None] {
            let mut headers = vec![auth, ("anthropic-version", "2023-06-01")];
            headers.extend(ct.map(|c| ("content-type", c)));
            let r = raw(&addr, &request("POST", path, &headers, ok_body))
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{path} with content type {ct:?}: {}", r.head);
        }
        healthy(&baton).await;
    }
    // GET /v1/models with junk: a bad key, a body, a wrong method.
    for (name, req) in [
        (
            "models without a key",
            request("GET", "/v1/models", &[], b""),
        ),
        (
            "models by POST",
            request("POST", "/v1/models", &[("authorization", &bearer)], b"{}"),
        ),
    ] {
        assert_refused(raw(&addr, &req).await, Shape::OpenAi, name);
        cases += 1;
    }
    // A control character in a header is refused by the HTTP parser itself: a bare 400, as
    // for any request that is not valid HTTP.
    let r = raw(
        &addr,
        &request(
            "GET",
            "/v1/models",
            &[("authorization", "Bearer \u{1}")],
            b"",
        ),
    )
    .await;
    assert!(r.is_none_or(|r| r.status == 400));
    eprintln!("{cases} hostile requests refused");
    healthy(&baton).await;
    baton.stop().await;
}

#[tokio::test]
async fn hostile_bodies_on_the_admin_api_get_a_4xx_and_change_nothing() {
    let (baton, _up, _dir) = start().await;
    let addr = baton.url.trim_start_matches("http://").to_string();
    let admin = format!("Bearer {}", baton.admin_key);
    let before = baton.admin_state().await;
    let endpoints = [
        ("POST", "/admin/providers"),
        ("PUT", "/admin/providers/up"),
        ("PATCH", "/admin/providers/up"),
        ("POST", "/admin/test"),
        ("PUT", "/admin/order"),
        ("POST", "/admin/import"),
        ("POST", "/admin/keys"),
        ("PUT", "/admin/settings"),
        ("POST", "/admin/cooldowns"),
        ("PUT", "/admin/desktop"),
        ("PUT", "/admin/routes/fast"),
        ("PUT", "/admin/model-map/claude-%2A"),
        ("POST", "/admin/cli-check"),
    ];
    let mut cases = 0;
    for (method, path) in endpoints {
        for (name, body) in hostile_bodies() {
            let r = raw(
                &addr,
                &request(
                    method,
                    path,
                    &[
                        ("authorization", &admin),
                        ("content-type", "application/json"),
                    ],
                    &body,
                ),
            )
            .await;
            assert_refused(r, Shape::OpenAi, &format!("{method} {path}: {name}"));
            cases += 1;
        }
        healthy(&baton).await;
    }
    eprintln!("{cases} hostile admin requests refused");
    let after = baton.admin_state().await;
    assert_eq!(
        before["providers"][0]["enabled"], after["providers"][0]["enabled"],
        "nothing changed"
    );
    assert_eq!(after["providers"].as_array().unwrap().len(), 1);
    assert!(baton.handle.core.ui_routes().is_empty());
    assert!(baton.handle.core.ui_model_map().is_empty());
    baton.stop().await;
}

#[tokio::test]
async fn old_http_pipelining_and_slow_or_broken_requests_are_handled() {
    let (baton, _up, _dir) = start().await;
    let addr = baton.url.trim_start_matches("http://").to_string();
    let bearer = format!("Bearer {}", baton.key);
    let body = br#"{"model":"auto","messages":[{"role":"user","content":"hi"}]}"#;

    // HTTP/1.0: answered, then closed.
    let mut req = format!("POST /v1/chat/completions HTTP/1.0\r\nhost: 127.0.0.1\r\nauthorization: {bearer}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
    req.extend_from_slice(body);
    let r = raw(&addr, &req).await.expect("an HTTP/1.0 answer");
    assert_eq!(r.status, 200, "{}", r.head);
    assert!(r.head.starts_with("HTTP/1.0 200") || r.head.starts_with("HTTP/1.1 200"));

    // Pipelining: two requests in one write, two answers in order on one connection.
    let one = |text: &str, close: bool| {
        let b =
            json!({"model": "auto", "messages": [{"role": "user", "content": text}]}).to_string();
        format!("POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: {bearer}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{}\r\n{b}", b.len(), if close { "connection: close\r\n" } else { "" })
    };
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(format!("{}{}", one("first", false), one("second", true)).as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&buf);
    assert_eq!(text.matches("HTTP/1.1 200").count(), 2, "{text}");
    let (a, b) = (
        text.find("up: first").unwrap(),
        text.find("up: second").unwrap(),
    );
    assert!(a < b, "answers in order");

    // Garbage instead of HTTP, an unknown version, a bare LF flood: 400 or a closed connection,
    // never a hang or a crash.
    for junk in [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
        b"GET / HTTP/9.9\r\n\r\n".to_vec(),
        b"POST /v1/chat/completions HTTP/1.1\r\nhost x\r\n\r\n".to_vec(),
        vec![b'\n'; 100_000],
    ] {
        if let Some(r) = raw(&addr, &junk).await {
            assert!((400..500).contains(&r.status), "{}", r.head);
        }
    }

    // Slow headers: a client that sends half a request and waits is cut off (headerTimeoutMs),
    // and everyone else is served meanwhile.
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    healthy(&baton).await;

    // A body shorter than its Content-Length: 408 once the body stops coming.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(format!("POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\nauthorization: {bearer}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"model\"").as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let r = parse(&buf).expect("an answer");
    assert_eq!(r.status, 408, "{}", r.head);
    assert_refused(Some(r), Shape::OpenAi, "short body");
    drop(slow);
    healthy(&baton).await;
    baton.stop().await;
}
