//! `relay-floor`: the floors `bench --first-byte` measures Baton against, in the same run.
//!
//! - `RELAY_FLOOR=http`: the least an HTTP gateway on Baton's stack can do — axum's router on
//!   hyper, reqwest to the upstream, a multi-threaded tokio runtime — with none of a gateway's
//!   work: the body is parsed and written back as JSON, sent on, and the answer streamed back
//!   as it comes. It serves Chat Completions and Messages (`bench --scale`'s body sizes), each
//!   to the same path under the upstream's base URL, with the headers those APIs authenticate by.
//! - `RELAY_FLOOR=raw`: a TCP relay (tokio's `copy_bidirectional`), no HTTP at all: the cost of
//!   the extra hop itself (two more loopback sockets and the other core's wake-ups).
//!
//! Started like `baton serve --config FILE …` (the upstream is the config's first provider's
//! `baseUrl`); prints `listening on http://ADDR` as Baton does.

// A benchmark's fixture, like the bench itself: a broken setup should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let config = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1))
        .expect("--config FILE");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(config).expect("read the config"))
            .expect("a JSON config");
    let base = config["providers"][0]["baseUrl"]
        .as_str()
        .expect("providers[0].baseUrl")
        .trim_end_matches('/')
        .to_string();
    // reqwest is built without a TLS provider of its own in this workspace (Baton's choice).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let raw = std::env::var("RELAY_FLOOR").is_ok_and(|m| m == "raw");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("listening on http://{}", listener.local_addr().unwrap());
        if raw {
            tcp_relay(listener, &base).await
        } else {
            http_relay(listener, base).await
        }
    });
}

async fn tcp_relay(listener: tokio::net::TcpListener, base: &str) {
    let upstream = base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let Ok(mut out) = tokio::net::TcpStream::connect(&upstream).await else {
                return;
            };
            let _ = inbound.set_nodelay(true);
            let _ = out.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
        });
    }
}

#[derive(Clone)]
struct Relay {
    client: reqwest::Client,
    /// `{base}/chat/completions` and `{base}/messages`, written once.
    chat: String,
    messages: String,
}

async fn http_relay(listener: tokio::net::TcpListener, base: String) {
    use axum::serve::ListenerExt;
    let relay = Relay {
        client: reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .unwrap(),
        chat: format!("{base}/chat/completions"),
        messages: format!("{base}/messages"),
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(forward))
        .route("/v1/messages", axum::routing::post(forward))
        .with_state(relay);
    let listener = listener.tap_io(|t| {
        let _ = t.set_nodelay(true);
    });
    axum::serve(listener, app).await.unwrap();
}

async fn forward(
    State(relay): State<Relay>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return bad_gateway();
    };
    let url = if uri.path() == "/v1/messages" {
        &relay.messages
    } else {
        &relay.chat
    };
    let mut req = relay
        .client
        .post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json).unwrap());
    for name in ["authorization", "x-api-key", "anthropic-version"] {
        if let Some(value) = headers.get(name) {
            req = req.header(name, value);
        }
    }
    let Ok(answer) = req.send().await else {
        return bad_gateway();
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
    let content_type = answer.headers().get("content-type").cloned();
    let mut resp = Response::new(Body::from_stream(answer.bytes_stream()));
    *resp.status_mut() = status;
    if let Some(ct) = content_type {
        resp.headers_mut().insert("content-type", ct);
    }
    resp
}

fn bad_gateway() -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::BAD_GATEWAY;
    resp
}
