//! One attempt at one target: send the request, then read up to the first content event
//! (streaming) or the whole body, and classify whatever went wrong.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::time::timeout_at;

use super::snapshot::Target;
use super::sse::{self, SseError, SseReader};
use super::{Answer, Attempt, Inbound, MAX_ERROR_BODY, MAX_PRELUDE_EVENTS, MAX_UPSTREAM_BODY};
use crate::canonical;
use crate::gateway::Core;
use crate::limits::{self, Classified};
use crate::providers::{openai_compat, ApiKey};

/// One request to one target, up to the first content (streaming) or the whole body.
pub(super) async fn attempt(
    core: &Core,
    t: &Target,
    key: Option<&ApiKey>,
    inbound: &Inbound,
    request_id: &str,
) -> Attempt {
    let p = &t.provider;
    let timeouts = &p.config.timeouts;
    let client = match core.http.get(timeouts.connect_ms) {
        Ok(c) => c,
        Err(e) => return failed(limits::classify_transport(format!("HTTP client: {e}"))),
    };
    let stream = inbound.canonical.stream;
    let body =
        openai_compat::passthrough_body(&inbound.body, &t.model.id, t.model.max_output_tokens);
    let Some(url) = p.chat_url.clone() else {
        return failed(limits::classify_transport(
            "provider base URL is not a valid URL",
        ));
    };
    let rb = openai_compat::build(&client, url, p, key, body, stream, request_id);
    let first_byte = Duration::from_millis(timeouts.first_byte_ms);
    let idle = Duration::from_millis(timeouts.idle_ms);
    let first_deadline = tokio::time::Instant::now() + first_byte;
    p.runtime.quota.sent(
        key.map(|k| k.id.as_str()).unwrap_or_default(),
        core.clock.now_ms(),
        &p.config.limits,
    );
    let resp = match timeout_at(first_deadline, rb.send()).await {
        Err(_) => {
            return failed(limits::classify_timeout(format!(
                "no response within {} ms",
                timeouts.first_byte_ms
            )))
        }
        Ok(Err(e)) => return failed(limits::classify_transport(sse::describe(&e))),
        Ok(Ok(r)) => r,
    };
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let key_id = key.map(|k| k.id.as_str()).unwrap_or_default();
    p.runtime
        .quota
        .observe(key_id, &headers, core.clock.now_ms());
    let mut reader = SseReader::new(Box::pin(resp.bytes_stream()), idle);
    if !(200..300).contains(&status) {
        let body = read_all(&mut reader, MAX_ERROR_BODY)
            .await
            .unwrap_or_default();
        let c = limits::classify_http(status, &headers, &body, &core.reset_context(&t.provider));
        return Attempt::Failed {
            classified: c,
            status: Some(status),
            body: Some(body),
        };
    }
    if !stream {
        let body = match read_all(&mut reader, MAX_UPSTREAM_BODY).await {
            Ok(b) => b,
            Err(e) => return failed(sse_failure(&e)),
        };
        // One light parse: is it a completion, an error in a 200, or garbage? And its usage.
        #[derive(serde::Deserialize)]
        struct Peek {
            choices: Option<serde::de::IgnoredAny>,
            error: Option<Value>,
            usage: Option<Value>,
        }
        return match serde_json::from_slice::<Peek>(&body) {
            Ok(Peek {
                choices: Some(_),
                usage,
                ..
            }) => {
                let usage = usage
                    .as_ref()
                    .and_then(canonical::openai::usage_from_openai);
                Attempt::Served(Answer::Complete(body, usage))
            }
            Ok(Peek { error: Some(e), .. }) => {
                error_in_body(core, t, &serde_json::json!({ "error": e }), status)
            }
            _ => failed(limits::classify_transport(
                "upstream answered 2xx with a body that is not a chat completion",
            )),
        };
    }
    // Streaming: hold everything until the first content event so a failure can still fall over.
    let mut prelude = Vec::new();
    loop {
        let next = match timeout_at(first_deadline, reader.next_event()).await {
            Err(_) => {
                return failed(limits::classify_timeout(format!(
                    "no content within {} ms",
                    timeouts.first_byte_ms
                )))
            }
            Ok(r) => r,
        };
        let ev = match next {
            Err(e) => return failed(sse_failure(&e)),
            Ok(None) => {
                return failed(limits::classify_transport(
                    "stream ended before any content",
                ))
            }
            Ok(Some(ev)) => ev,
        };
        let Some(data) = ev.data.as_ref() else {
            continue; // comments and keep-alives before content are not forwarded
        };
        if ev.is_done() {
            return failed(limits::classify_transport(
                "stream ended before any content",
            ));
        }
        let v: Value = match serde_json::from_slice(data) {
            Ok(v) => v,
            Err(_) => {
                return failed(limits::classify_transport(
                    "upstream sent an event that is not JSON",
                ))
            }
        };
        if v.get("error").is_some() && v.get("choices").is_none() {
            return error_in_body(core, t, &v, status);
        }
        let content = canonical::openai::chunk_events(&v)
            .iter()
            .any(|e| e.is_content());
        prelude.push(ev.raw);
        if content || prelude.len() >= MAX_PRELUDE_EVENTS {
            return Attempt::Served(Answer::Stream { reader, prelude });
        }
    }
}

fn sse_failure(e: &SseError) -> Classified {
    match e {
        SseError::Idle(_) => limits::classify_timeout(e.to_string()),
        _ => limits::classify_transport(e.to_string()),
    }
}

fn failed(c: Classified) -> Attempt {
    Attempt::Failed {
        classified: c,
        status: None,
        body: None,
    }
}

/// Some services answer 200 with an `{"error": …}` body; classify it by its own code.
fn error_in_body(core: &Core, t: &Target, v: &Value, status: u16) -> Attempt {
    let code = v
        .pointer("/error/code")
        .and_then(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
        })
        .filter(|c| (400..600).contains(c))
        .map(|c| c as u16)
        .unwrap_or(if status >= 400 { status } else { 502 });
    let body = Bytes::from(serde_json::to_vec(v).unwrap_or_default());
    let c = limits::classify_http(
        code,
        &http::HeaderMap::new(),
        &body,
        &core.reset_context(&t.provider),
    );
    Attempt::Failed {
        classified: c,
        status: Some(code),
        body: Some(body),
    }
}

async fn read_all(reader: &mut SseReader, max: usize) -> Result<Bytes, SseError> {
    reader.read_to_end(max).await
}
