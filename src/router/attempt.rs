//! One attempt at one target: send the request, then read up to the first content event
//! (streaming) or the whole body, and classify whatever went wrong.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::timeout_at;

use super::context::Routing;
use super::snapshot::Target;
use super::stream::source::Source;
use super::types::{
    Answer, Attempt, Held, Inbound, Reply, MAX_ERROR_BODY, MAX_PRELUDE_EVENTS, MAX_UPSTREAM_BODY,
};
use crate::limits::{self, Classified};
use crate::providers::codec::{Complete, UpstreamError};
use crate::providers::kinds;
use crate::providers::outbound::Wire;
use crate::providers::sse::{SseError, SseReader};
use crate::providers::thinking::{self, Keep};
use crate::providers::ApiKey;

/// One request to one target, up to the first content (streaming) or the whole body.
pub(super) async fn attempt(
    routing: &Routing,
    t: &Target,
    key: Option<&ApiKey>,
    inbound: &Inbound,
    request_id: &str,
) -> Attempt {
    if t.provider.config.kind.is_cli() {
        return super::cli::attempt(routing, t, inbound, request_id).await;
    }
    let origin = origin(t, key);
    let mut keep = Keep::Own(&routing.thinking, &origin);
    let (reader, wire) = loop {
        let (mut reader, status, headers, wire) =
            match send(routing, t, key, inbound, request_id, keep).await {
                Ok(sent) => sent,
                Err(c) => return failed(c),
            };
        if (200..300).contains(&status) {
            break (reader, wire);
        }
        let body = read_all(&mut reader, MAX_ERROR_BODY)
            .await
            .unwrap_or_default();
        // The client's own login is no secret Baton holds (the redactor cannot know it), and a
        // login of no known shape passes the shape rules: masked by value here.
        let body = match inbound
            .client
            .as_ref()
            .filter(|_| !t.provider.config.credentials.is_baton())
        {
            Some(c) => crate::redact::mask_value(body, c.key.secret.expose()),
            None => body,
        };
        // The account refuses the conversation's thinking (a signature Baton could not place,
        // a turn it did not think the API's way): once more without any thinking block, and
        // thinking off for this request if it must be, rather than failing over or failing.
        let retry = !matches!(keep, Keep::None)
            && kinds::of(wire).signs_reasoning()
            && thinking::is_thinking_refusal(status, &body);
        if !retry {
            return upstream_error(routing, t, status, &headers, body);
        }
        tracing::info!(request_id, provider = %t.provider.id(), "the account refused the conversation's thinking; sending again without thinking blocks");
        keep = Keep::None;
    };
    if !inbound.canonical.stream {
        let read_text = inbound.expect().is_some();
        return complete(routing, t, reader, wire, &origin, read_text).await;
    }
    prelude(routing, t, reader, wire).await
}

/// The account an answer comes from, as the thinking book names it: `provider/key`.
pub(super) fn origin(t: &Target, key: Option<&ApiKey>) -> String {
    let (provider, key) = (t.provider.id(), key.map_or("", |k| k.id.as_str()));
    [provider, "/", key].concat()
}

/// Builds the request for the target's kind and sends it; the answer's status, headers and
/// body reader (bounded by the provider's idle timeout), or why there is none.
async fn send(
    routing: &Routing,
    t: &Target,
    key: Option<&ApiKey>,
    inbound: &Inbound,
    request_id: &str,
    thinking: Keep<'_>,
) -> Result<(SseReader, u16, http::HeaderMap, Wire), Classified> {
    let p = &t.provider;
    let timeouts = &p.config.timeouts;
    let client = routing
        .http
        .for_provider(p)
        .map_err(|e| limits::classify_transport(format!("HTTP client: {e}")))?;
    let stream = inbound.canonical.stream;
    let outbound = crate::providers::outbound::Outbound {
        openai: &inbound.openai,
        original: inbound.original.as_ref().map(|o| (o.wire, &o.body)),
        verbatim: inbound.verbatim.0.as_ref(),
        client: inbound.client.as_ref(),
        anthropic_beta: inbound.anthropic_beta.as_deref(),
        canonical: &inbound.canonical,
        stream,
        request_id,
        thinking,
        now_ms: routing.clock.now_ms(),
    };
    // An error from a platform's token endpoint is outside text, redacted like an upstream's.
    let (rb, wire) = crate::providers::outbound::build_signed(&client, p, &t.model, key, &outbound)
        .await
        .map_err(|mut c| {
            c.reason = routing.redactor.string(c.reason);
            c
        })?;
    // A stream's headers come at once; a whole answer's only when the model is done.
    let headers_ms = timeouts.headers_ms(stream);
    let first_deadline = tokio::time::Instant::now() + Duration::from_millis(headers_ms);
    let key_id = key.map(|k| k.id.as_str()).unwrap_or_default();
    let now = routing.clock.now_ms();
    p.runtime.quota.sent(key_id, now, &p.config.limits);
    routing.shared.quota(p, key_id, 1, 0, now);
    let sending = dispatch(traced(rb, inbound), inbound, t, key);
    let (mut resp, captured) = match timeout_at(first_deadline, sending).await {
        Err(_) => {
            return Err(limits::classify_timeout(format!(
                "no response within {headers_ms} ms"
            )))
        }
        Ok(Err(e)) => {
            return Err(limits::classify_transport(
                crate::providers::outbound::describe(&e),
            ))
        }
        Ok(Ok(r)) => r,
    };
    let status = resp.status().as_u16();
    // The body needs no headers: they are taken, not copied.
    let headers = std::mem::take(resp.headers_mut());
    observe_limits(routing, t, key_id, status, &headers);
    let body = futures_util::StreamExt::map(resp.bytes_stream(), |r| {
        r.map_err(|e| crate::providers::outbound::describe(&e))
    });
    let body = kept(Box::pin(body), inbound, captured, status, &headers);
    let idle = Duration::from_millis(timeouts.idle_ms);
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let framing = kinds::framing(&p.config, content_type);
    let reader = SseReader::framed(framing, body, idle);
    Ok((reader, status, headers, wire))
}

/// Every answer's limit headers are read as usage windows: one pass over the names decides
/// whether any is there (most answers, from local models and many OpenAI-compatible hosts,
/// carry none and cost no lookups).
fn observe_limits(
    routing: &Routing,
    t: &Target,
    key_id: &str,
    status: u16,
    headers: &http::HeaderMap,
) {
    let p = &t.provider;
    let limits = crate::limits::windows::LimitHeaders::scan(headers);
    if limits.any() {
        let now = routing.clock.now_ms();
        p.runtime.quota.observe(key_id, headers, now);
        routing.usage_signal(p, key_id, limits.windows(headers, now));
        if (200..300).contains(&status) && p.config.overage.is_avoid() {
            if let Some(reset) = crate::limits::windows::overage_in_use(headers) {
                routing.overage_spent(p, key_id, reset);
            }
        }
    }
}

/// The answer's body, also kept in the request's capture (as it comes) when one is armed.
fn kept(
    body: crate::providers::sse::ByteStream,
    inbound: &Inbound,
    captured: Option<usize>,
    status: u16,
    headers: &http::HeaderMap,
) -> crate::providers::sse::ByteStream {
    let (Some(c), Some(i)) = (&inbound.capture, captured) else {
        return body;
    };
    c.response(i, status, headers);
    let c = c.clone();
    Box::pin(futures_util::StreamExt::inspect(body, move |r| {
        if let Ok(b) = r {
            c.response_bytes(i, b);
        }
    }))
}

/// Sends the request; with a capture armed, the request as it goes on the wire is kept first
/// (its index returned for the answer).
async fn dispatch(
    rb: reqwest::RequestBuilder,
    inbound: &Inbound,
    t: &Target,
    key: Option<&ApiKey>,
) -> Result<(reqwest::Response, Option<usize>), reqwest::Error> {
    let Some(capture) = &inbound.capture else {
        return rb.send().await.map(|r| (r, None));
    };
    let (client, req) = rb.build_split();
    let req = req?;
    let head = crate::capture::Part::head(
        Some(req.method().as_str()),
        Some(req.url().as_str()),
        req.headers(),
    );
    let body = req.body().and_then(|b| b.as_bytes()).unwrap_or_default();
    let i = capture.exchange(
        t.provider.id(),
        &t.model.id,
        key.map(|k| k.id.as_str()),
        head,
        body,
    );
    client.execute(req).await.map(|r| (r, i))
}

/// The trace goes on upstream: the attempt's span as the provider's parent, or the client's
/// own context as it came (tracing off).
fn traced(rb: reqwest::RequestBuilder, inbound: &Inbound) -> reqwest::RequestBuilder {
    match &inbound.trace {
        Some(trace) => trace
            .upstream_headers(crate::telemetry::attempt_span())
            .into_iter()
            .fold(rb, |rb, (name, value)| rb.header(name, value)),
        None => rb,
    }
}

/// A whole (non-streamed) 2xx answer, read by the kind's codec; with `read_text` (the client
/// asked for JSON), its text read in the same pass for the check.
async fn complete(
    routing: &Routing,
    t: &Target,
    mut reader: SseReader,
    wire: Wire,
    origin: &str,
    read_text: bool,
) -> Attempt {
    let body = match read_all(&mut reader, MAX_UPSTREAM_BODY).await {
        Ok(b) => b,
        Err(e) => return failed(sse_failure(&e)),
    };
    let kind = kinds::of(wire);
    if kind.signs_reasoning() {
        routing.thinking.record_answer(&body, origin);
    }
    let (complete, text) = match read_text {
        true => kind.complete_with_text(&body),
        false => (kind.complete(&body), None),
    };
    match complete {
        Complete::Answer(usage) => {
            Attempt::Served(Answer::Complete(Reply::Wire(body, wire), usage, text))
        }
        Complete::Error(e) => error_in_answer(routing, t, e),
        Complete::NotAnswer(what) => failed(limits::classify_transport(what)),
    }
}

/// A stream, held back up to its first content event so a failure can still fall over. Each
/// event is decoded once; the pump takes the decoded events and the codec.
async fn prelude(routing: &Routing, t: &Target, mut reader: SseReader, wire: Wire) -> Attempt {
    let mut codec = kinds::of(wire).decoder();
    let mut prelude = Vec::new();
    loop {
        // Bounded by the reader's idle timeout: silence fails over, activity (keep-alives,
        // reasoning deltas) does not.
        let ev = match reader.next_event().await {
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
        let decoded = match codec.decode(data, true) {
            Ok(d) => d,
            Err(_) => {
                return failed(limits::classify_transport(
                    "upstream sent an event that is not JSON",
                ))
            }
        };
        if let Some(e) = decoded.error {
            return error_in_answer(routing, t, e);
        }
        if decoded.end {
            return failed(limits::classify_transport(
                "stream ended before any content",
            ));
        }
        let content = decoded.content;
        prelude.push(Held {
            raw: ev.raw,
            decoded,
        });
        if content || prelude.len() >= MAX_PRELUDE_EVENTS {
            return Attempt::Served(Answer::Stream {
                source: Source::Sse { reader, codec },
                prelude,
            });
        }
    }
}

/// An error the upstream put in a 2xx answer or a stream, classified by its own code.
fn error_in_answer(routing: &Routing, t: &Target, e: UpstreamError) -> Attempt {
    let body = Bytes::from(serde_json::to_vec(&e.body).unwrap_or_default());
    upstream_error(routing, t, e.status, &http::HeaderMap::new(), body)
}

/// Every upstream error body enters Baton here: redacted once (an upstream may echo the key it
/// was sent), then classified. The reason, the relayed error, the log and the cooldown row are
/// all made from the redacted bytes.
fn upstream_error(
    routing: &Routing,
    t: &Target,
    status: u16,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Attempt {
    let body = match routing.redactor.bytes(&body) {
        std::borrow::Cow::Borrowed(_) => body,
        std::borrow::Cow::Owned(b) => Bytes::from(b),
    };
    let c = limits::classify_http(status, headers, &body, &routing.reset_context(&t.provider));
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

async fn read_all(reader: &mut SseReader, max: usize) -> Result<Bytes, SseError> {
    reader.read_to_end(max).await
}
