//! An answer checked against the JSON the client asked for (`structured`), before the pass
//! hands it on: one that is not what was asked fails as `invalid_output`, one with something
//! around its value goes on repaired. A stream is checked at its end (`stream::pump`), unless
//! `routing.validateStreams` has it read whole here first, so that it can still fail over.

use super::context::Routing;
use super::snapshot::Target;
use super::stream::source::{Next, Source};
use super::types::{Answer, Attempt, Held, Inbound, Reply};
use crate::canonical::{Part, StopReason, StreamEvent};
use crate::limits::{self, Classified, ErrorClass};
use crate::providers::codec::Decoded;
use crate::structured::Checked;

/// The most of a stream held back to check it whole; a longer one goes on as it is (checked at
/// its end), being no JSON value a client would take anyway.
const MAX_BUFFERED: usize = 8 * 1024 * 1024;

/// An attempt's answer checked before the pass hands it on: a complete one always, a stream
/// when `routing.validateStreams` holds it back whole first (bounded by the deadline).
pub(super) async fn verify(
    routing: &Routing,
    inbound: &Inbound,
    t: &Target,
    outcome: Attempt,
    request_id: &str,
    deadline: tokio::time::Instant,
) -> (Attempt, Option<Checked>) {
    let buffer = inbound.canonical.stream
        && inbound.expect().is_some()
        && routing.snapshot.load().routing.validate_streams;
    match outcome {
        Attempt::Served(Answer::Stream { source, prelude }) if buffer => {
            let whole = tokio::time::timeout_at(deadline, read_whole(source, prelude)).await;
            match whole {
                Ok(Ok((source, prelude))) => check_stream(routing, inbound, t, source, prelude),
                Ok(Err(why)) => (failed_before_check(ErrorClass::Transient, why), None),
                Err(_) => (
                    failed_before_check(ErrorClass::Transient, "request deadline reached".into()),
                    None,
                ),
            }
        }
        outcome => check(routing, inbound, t, outcome, request_id),
    }
}

/// The rest of a stream read into its prelude, up to its end (or `MAX_BUFFERED`).
async fn read_whole(
    mut source: Source,
    mut prelude: Vec<Held>,
) -> Result<(Source, Vec<Held>), String> {
    let mut size: usize = prelude.iter().map(|h| h.raw.len()).sum();
    if prelude.iter().any(|h| h.decoded.end) {
        return Ok((source, prelude));
    }
    while size <= MAX_BUFFERED {
        match source.next(true).await {
            Next::Event(_, None) => {}
            Next::Event(raw, Some(decoded)) => {
                size += raw.len();
                let end = decoded.end;
                prelude.push(Held { raw, decoded });
                if end {
                    break;
                }
            }
            Next::End => break,
            Next::Broke(why) => {
                return Err(format!("the stream broke before it was checked: {why}"))
            }
        }
    }
    Ok((source, prelude))
}

/// A stream read whole, checked like a complete answer: valid goes on as it came; repaired is
/// streamed again from its events with the value alone as its text; invalid fails over.
fn check_stream(
    routing: &Routing,
    inbound: &Inbound,
    t: &Target,
    source: Source,
    prelude: Vec<Held>,
) -> (Attempt, Option<Checked>) {
    let Some(expect) = inbound.expect() else {
        return (Attempt::Served(Answer::Stream { source, prelude }), None);
    };
    let mut seen = crate::structured::StreamText::default();
    for h in &prelude {
        seen.note(&h.decoded.events);
    }
    let Some(checked) = seen.check(expect) else {
        return (Attempt::Served(Answer::Stream { source, prelude }), None);
    };
    match checked {
        Checked::Valid => (
            Attempt::Served(Answer::Stream { source, prelude }),
            Some(Checked::Valid),
        ),
        Checked::Repaired { text, what } => {
            tracing::info!(target = %t.label(), repaired = what, "the streamed answer's JSON was repaired");
            let prelude = repaired(prelude, &text);
            (
                Attempt::Served(Answer::Stream {
                    source: Source::Finished,
                    prelude,
                }),
                Some(Checked::Repaired { text, what }),
            )
        }
        Checked::Invalid(why) => (invalid(routing, why), None),
    }
}

/// A held stream's events again, its text the repaired value alone (in the first text event's
/// place), its usage kept: streamed by the client's encoder, as a hosted search's answer is.
fn repaired(prelude: Vec<Held>, value: &str) -> Vec<Held> {
    let mut usage = None;
    let mut first = true;
    let mut out = Vec::new();
    for h in prelude {
        usage = h.decoded.usage.or(usage);
        for e in h.decoded.events {
            let e = match e {
                StreamEvent::TextDelta(_) if first => {
                    first = false;
                    StreamEvent::TextDelta(value.to_string())
                }
                StreamEvent::TextDelta(_) | StreamEvent::Usage(_) => continue,
                e => e,
            };
            out.push(e);
        }
    }
    usage
        .into_iter()
        .map(StreamEvent::Usage)
        .chain(out)
        .map(|e| Held {
            raw: bytes::Bytes::new(),
            decoded: Decoded::from_events(vec![e]),
        })
        .collect()
}

/// A failure before the answer could be checked (or because of it).
fn failed_before_check(class: ErrorClass, why: String) -> Attempt {
    Attempt::Failed {
        classified: Classified {
            class,
            reason: limits::truncate(&why, 300).to_string(),
            ..limits::classify_transport("")
        },
        status: None,
        body: None,
    }
}

/// An answer that is not the JSON asked for: `invalid_output`, its problem in words (redacted).
fn invalid(routing: &Routing, why: String) -> Attempt {
    failed_before_check(ErrorClass::InvalidOutput, routing.redactor.string(why))
}

/// A complete answer to a request for JSON, checked (`structured`) before it is relayed: one
/// that is not what the client asked for fails as `invalid_output` (the next candidate is
/// tried, nothing cools), one with a fence, prose or a byte-order mark around its value goes
/// on repaired. An answer that calls a tool is the model's choice, not its output: unchecked.
pub(super) fn check(
    routing: &Routing,
    inbound: &Inbound,
    t: &Target,
    outcome: Attempt,
    request_id: &str,
) -> (Attempt, Option<Checked>) {
    let Some(expect) = inbound.expect() else {
        return (outcome, None);
    };
    let Attempt::Served(Answer::Complete(reply, usage, read)) = outcome else {
        return (outcome, None);
    };
    // An answer that came as asked is checked from its text alone, read with the body where
    // its kind can (`complete_with_text`), without building the canonical answer (the relay
    // never needs it).
    if let (Reply::Wire(..), Some((text, cut))) = (&reply, &read) {
        match expect.check(text, *cut) {
            Checked::Valid => {
                return (
                    Attempt::Served(Answer::Complete(reply, usage, None)),
                    Some(Checked::Valid),
                )
            }
            Checked::Invalid(why) => return (invalid(routing, why), None),
            // A repair to make: the whole answer is read below. (A tool call, several
            // answers or another shape come without text, and are read below too.)
            Checked::Repaired { .. } => {}
        }
    }
    let (answer, named) = match &reply {
        Reply::Wire(body, wire) => (
            crate::providers::kinds::answer_from(*wire, body),
            crate::providers::kinds::of(*wire).names_answers(),
        ),
        Reply::Canonical(a) => (Some(a.clone()), true),
    };
    let Some(mut answer) =
        answer.filter(|a| !a.content.iter().any(|p| matches!(p, Part::ToolCall { .. })))
    else {
        return (Attempt::Served(Answer::Complete(reply, usage, None)), None);
    };
    match expect.check(&answer.text(), answer.stop == Some(StopReason::Length)) {
        Checked::Valid => (
            Attempt::Served(Answer::Complete(reply, usage, None)),
            Some(Checked::Valid),
        ),
        Checked::Repaired { text, what } => {
            tracing::info!(request_id, target = %t.label(), repaired = what, "the answer's JSON was repaired");
            let mut first = true;
            answer.content.retain_mut(|p| match p {
                Part::Text(x) if first => {
                    first = false;
                    x.clone_from(&text);
                    true
                }
                Part::Text(_) => false,
                _ => true,
            });
            if !named {
                answer.id = request_id.to_string();
                answer.model = t.model.id.clone();
            }
            let reply = Reply::Canonical(answer);
            (
                Attempt::Served(Answer::Complete(reply, usage, None)),
                Some(Checked::Repaired { text, what }),
            )
        }
        Checked::Invalid(why) => (invalid(routing, why), None),
    }
}
