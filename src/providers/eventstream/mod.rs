//! The AWS event-stream framing (`application/vnd.amazon.eventstream`), read as server-sent
//! events so the attempt, the pump and the API's decoder see one framing. Bedrock streams a
//! model's own events in it: each `chunk` message carries one event's JSON, base64-encoded in
//! `{"bytes": …}`, which becomes `event: <its type>` / `data: <its JSON>`; the Converse API's
//! typed events (`:event-type` `contentBlockDelta`…) become `data: {"contentBlockDelta": …}`. An `exception`
//! message (`throttlingException`, `serviceUnavailableException`…) becomes the Messages API's
//! `error` event with the type its status means, so a limit met mid-stream is classified and
//! fails over like any other. Frames are decoded and their checksums verified by AWS's own
//! crate; a frame is bounded (`max`) before it is buffered.

use base64::Engine;
use bytes::{Buf, Bytes, BytesMut};
use futures_util::StreamExt;
use serde_json::{json, Value};

/// A body of bytes (`providers::sse::ByteStream`).
type ByteStream = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Bytes, String>> + Send>>;

/// The content type of an event-stream body.
pub const CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";

struct Reader {
    body: ByteStream,
    max: usize,
    buf: BytesMut,
    done: bool,
}

/// `body` (event-stream frames) as a body of server-sent events; a frame larger than `max` is
/// an error.
pub fn as_sse(body: ByteStream, max: usize) -> ByteStream {
    let state = Reader {
        body,
        max,
        buf: BytesMut::new(),
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut r| async move {
        if r.done {
            return None;
        }
        let item = r.next().await;
        match item {
            Some(Ok(b)) => Some((Ok(b), r)),
            Some(Err(e)) => {
                r.done = true;
                Some((Err(e), r))
            }
            None => None,
        }
    }))
}

impl Reader {
    /// The next message as SSE bytes; `None` at a clean end.
    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        loop {
            match self.frame() {
                Err(e) => return Some(Err(e)),
                Ok(Some(sse)) => return Some(Ok(sse)),
                Ok(None) => {}
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(e)) => return Some(Err(e)),
                None if self.buf.is_empty() => return None,
                None => return Some(Err("the event stream ended inside a frame".into())),
            }
        }
    }

    /// A complete frame from the buffer, as SSE; `None` until one has arrived.
    fn frame(&mut self) -> Result<Option<Bytes>, String> {
        loop {
            if self.buf.len() < 4 {
                return Ok(None);
            }
            let total = (&self.buf[..4]).get_u32() as usize;
            if total > self.max {
                return Err("upstream event is larger than Baton accepts".into());
            }
            if self.buf.len() < total {
                return Ok(None);
            }
            let mut frame = self.buf.split_to(total).freeze();
            let message = aws_smithy_eventstream::frame::read_message_from(&mut frame)
                .map_err(|e| format!("the upstream's event stream is corrupt: {e}"))?;
            if let Some(sse) = to_sse(&message)? {
                return Ok(Some(sse));
            }
        }
    }
}

fn header<'a>(m: &'a aws_smithy_types::event_stream::Message, name: &str) -> Option<&'a str> {
    m.headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|s| s.as_str())
}

/// One message as an SSE event; `None` for one that carries nothing (an unknown event).
fn to_sse(m: &aws_smithy_types::event_stream::Message) -> Result<Option<Bytes>, String> {
    match header(m, ":message-type").unwrap_or("event") {
        "exception" => {
            let kind = header(m, ":exception-type").unwrap_or("internalServerException");
            let message = serde_json::from_slice::<Value>(m.payload())
                .ok()
                .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_else(|| kind.to_string());
            Ok(Some(error_event(kind, &message)))
        }
        "error" => {
            let code = header(m, ":error-code").unwrap_or("InternalError");
            let message = header(m, ":error-message").unwrap_or(code).to_string();
            Ok(Some(error_event(code, &message)))
        }
        _ => {
            let kind = header(m, ":event-type").unwrap_or_default();
            let data = if kind == "chunk" {
                let c: Chunk = serde_json::from_slice(m.payload())
                    .map_err(|_| "an event-stream chunk is not JSON".to_string())?;
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(c.bytes.as_bytes())
                    .map_err(|_| "an event-stream chunk's bytes are not base64".to_string())?;
                Bytes::from(raw)
            } else if kind.is_empty() {
                return Ok(None);
            } else {
                named(kind, m.payload())
            };
            // The event's name is its `type`, read without building its tree (the API's
            // decoder reads the event itself).
            let name = if kind == "chunk" {
                serde_json::from_slice::<Typed>(&data)
                    .ok()
                    .and_then(|t| t.r#type.map(|t| t.into_owned()))
                    .unwrap_or_else(|| "message".into())
            } else {
                kind.to_string()
            };
            Ok(Some(sse(&name, &data)))
        }
    }
}

/// A typed event's payload (Converse's `{"contentBlockIndex": 0, "delta": …}`) under its type,
/// `{"contentBlockDelta": …}`, as the AWS SDKs hand a stream's events to their callers: the
/// payload alone does not say what it is.
fn named(kind: &str, payload: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(payload.len() + kind.len() + 8);
    out.extend_from_slice(b"{\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(if payload.is_empty() { b"{}" } else { payload });
    out.push(b'}');
    Bytes::from(out)
}

/// A `chunk` message's payload: the model's event, base64-encoded (other members, such as
/// Bedrock's padding `p`, are skipped).
#[derive(serde::Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    bytes: std::borrow::Cow<'a, str>,
}

/// An event's `type`, its other members skipped.
#[derive(serde::Deserialize)]
struct Typed<'a> {
    #[serde(borrow, default)]
    r#type: Option<std::borrow::Cow<'a, str>>,
}

/// `event: name` and `data:` lines (one per line of `data`, as SSE joins them back).
fn sse(name: &str, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + name.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    for line in data.split(|b| *b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.push(b'\n');
    }
    out.push(b'\n');
    Bytes::from(out)
}

/// The Messages API's `error` event for an AWS exception, typed as its status means.
fn error_event(kind: &str, message: &str) -> Bytes {
    let etype = match kind.to_ascii_lowercase().as_str() {
        "throttlingexception" | "servicequotaexceededexception" => "rate_limit_error",
        "serviceunavailableexception" | "modelnotreadyexception" => "overloaded_error",
        "validationexception" => "invalid_request_error",
        "accessdeniedexception" => "permission_error",
        _ => "api_error",
    };
    let body = json!({"type": "error", "error": {"type": etype, "message": message}});
    sse("error", body.to_string().as_bytes())
}

#[cfg(test)]
mod tests;
