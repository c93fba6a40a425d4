//! One attempt at one target: send the request, then read up to the first content event
//! (streaming) or the whole body, and classify whatever went wrong.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use tokio::time::timeout_at;

use super::snapshot::Target;
use super::sse::{self, SseError, SseReader};
use super::{
    Answer, Attempt, Inbound, Wire, MAX_ERROR_BODY, MAX_PRELUDE_EVENTS, MAX_UPSTREAM_BODY,
};
use crate::canonical;
use crate::gateway::Core;
use crate::limits::{self, Classified};
use crate::providers::ApiKey;

/// One request to one target, up to the first content (streaming) or the whole body.
pub(super) async fn attempt(
    core: &Core,
    t: &Target,
    key: Option<&ApiKey>,
    inbound: &Inbound,
    request_id: &str,
) -> Attempt {
    let p = &t.provider;
    if p.config.kind.is_cli() {
        return super::cli::attempt(core, t, inbound, request_id).await;
    }
    let timeouts = &p.config.timeouts;
    let client = match core.http.get(timeouts.connect_ms) {
        Ok(c) => c,
        Err(e) => return failed(limits::classify_transport(format!("HTTP client: {e}"))),
    };
    let stream = inbound.canonical.stream;
    let outbound = crate::providers::outbound::Outbound {
        openai_body: &inbound.body,
        anthropic_body: inbound.anthropic_body.as_ref(),
        anthropic_beta: inbound.anthropic_beta.as_deref(),
        canonical: &inbound.canonical,
        stream,
        request_id,
    };
    let (rb, wire) = match crate::providers::outbound::build(&client, p, &t.model, key, &outbound) {
        Ok(built) => built,
        Err(c) => return failed(c),
    };
    // A stream's headers come at once; a whole answer's only when the model is done.
    let headers_ms = timeouts.headers_ms(stream);
    let headers_within = Duration::from_millis(headers_ms);
    let idle = Duration::from_millis(timeouts.idle_ms);
    let first_deadline = tokio::time::Instant::now() + headers_within;
    let key_id = key.map(|k| k.id.as_str()).unwrap_or_default();
    p.runtime
        .quota
        .sent(key_id, core.clock.now_ms(), &p.config.limits);
    core.shared.quota(p, key_id, 1, 0, core.clock.now_ms());
    let resp = match timeout_at(first_deadline, rb.send()).await {
        Err(_) => {
            return failed(limits::classify_timeout(format!(
                "no response within {headers_ms} ms"
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
    let body =
        futures_util::StreamExt::map(resp.bytes_stream(), |r| r.map_err(|e| sse::describe(&e)));
    let mut reader = SseReader::new(Box::pin(body), idle);
    if !(200..300).contains(&status) {
        let body = read_all(&mut reader, MAX_ERROR_BODY)
            .await
            .unwrap_or_default();
        return upstream_error(core, t, status, &headers, body);
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
        if wire == Wire::Gemini {
            return match serde_json::from_slice::<Value>(&body) {
                Ok(v) if v.get("candidates").is_some() => {
                    let usage = v
                        .get("usageMetadata")
                        .map(canonical::gemini::usage_from_gemini);
                    Attempt::Served(Answer::Complete(body, usage, Wire::Gemini))
                }
                Ok(v) if v.get("error").is_some() => error_in_body(core, t, &v, status),
                _ => failed(limits::classify_transport(
                    "upstream answered 2xx with a body that is not an answer",
                )),
            };
        }
        if wire == Wire::Anthropic {
            return match serde_json::from_slice::<Value>(&body) {
                Ok(v) if v.get("type").and_then(Value::as_str) == Some("message") => {
                    let usage = v
                        .get("usage")
                        .map(canonical::anthropic::usage_from_anthropic);
                    Attempt::Served(Answer::Complete(body, usage, Wire::Anthropic))
                }
                Ok(v) if v.get("type").and_then(Value::as_str) == Some("error") => {
                    anthropic_error(core, t, &v)
                }
                _ => failed(limits::classify_transport(
                    "upstream answered 2xx with a body that is not a message",
                )),
            };
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
                Attempt::Served(Answer::Complete(body, usage, Wire::OpenAi))
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
    let mut decoder = canonical::anthropic::StreamDecoder::default();
    let mut gemini = canonical::gemini::StreamDecoder::default();
    loop {
        // Bounded by the reader's idle timeout: silence fails over, activity (keep-alives,
        // reasoning deltas) does not.
        let next = reader.next_event().await;
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
        let content = match wire {
            Wire::OpenAi => {
                if v.get("error").is_some() && v.get("choices").is_none() {
                    return error_in_body(core, t, &v, status);
                }
                canonical::openai::chunk_events(&v)
                    .iter()
                    .any(|e| e.is_content())
            }
            Wire::Gemini => {
                if v.get("error").is_some() && v.get("candidates").is_none() {
                    return error_in_body(core, t, &v, status);
                }
                gemini.push(&v).iter().any(|e| e.is_content())
            }
            Wire::Anthropic => {
                let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
                if kind == "error" {
                    return anthropic_error(core, t, &v);
                }
                kind == "message_stop" || decoder.push(&v).iter().any(|e| e.is_content())
            }
        };
        prelude.push(ev.raw);
        if content || prelude.len() >= MAX_PRELUDE_EVENTS {
            return Attempt::Served(Answer::Stream {
                reader,
                prelude,
                wire,
            });
        }
    }
}

/// An Anthropic `{"type":"error"}` answer (in a 200 body or mid-stream), classified by its type.
fn anthropic_error(core: &Core, t: &Target, v: &Value) -> Attempt {
    let status = match v
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "invalid_request_error" => 400,
        "request_too_large" => 413,
        _ => 500,
    };
    let body = Bytes::from(serde_json::to_vec(v).unwrap_or_default());
    upstream_error(core, t, status, &http::HeaderMap::new(), body)
}

/// Every upstream error body enters Baton here: redacted once (an upstream may echo the key it
/// was sent), then classified. The reason, the relayed error, the log and the cooldown row are
/// all made from the redacted bytes.
fn upstream_error(
    core: &Core,
    t: &Target,
    status: u16,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Attempt {
    let body = match core.redactor.bytes(&body) {
        std::borrow::Cow::Borrowed(_) => body,
        std::borrow::Cow::Owned(b) => Bytes::from(b),
    };
    let c = limits::classify_http(status, headers, &body, &core.reset_context(&t.provider));
    Attempt::Failed {
        classified: c,
        status: Some(status),
        body: Some(body),
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
    upstream_error(core, t, code, &http::HeaderMap::new(), body)
}

async fn read_all(reader: &mut SseReader, max: usize) -> Result<Bytes, SseError> {
    reader.read_to_end(max).await
}
