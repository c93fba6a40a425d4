//! An answer checked against the JSON the client asked for (`structured`), before the pass
//! hands it on: one that is not what was asked fails as `invalid_output`, one with something
//! around its value goes on repaired.

use super::context::Routing;
use super::snapshot::Target;
use super::types::{Answer, Attempt, Inbound, Reply};
use crate::canonical::{Part, StopReason};
use crate::limits::{self, Classified, ErrorClass};
use crate::structured::Checked;

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
    let Attempt::Served(Answer::Complete(reply, usage)) = outcome else {
        return (outcome, None);
    };
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
        return (Attempt::Served(Answer::Complete(reply, usage)), None);
    };
    match expect.check(&answer.text(), answer.stop == Some(StopReason::Length)) {
        Checked::Valid => (
            Attempt::Served(Answer::Complete(reply, usage)),
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
                Attempt::Served(Answer::Complete(reply, usage)),
                Some(Checked::Repaired { text, what }),
            )
        }
        Checked::Invalid(why) => {
            let why = routing.redactor.string(why);
            let reason = limits::truncate(&why, 300).to_string();
            let classified = Classified {
                class: ErrorClass::InvalidOutput,
                reason,
                ..limits::classify_transport("")
            };
            (
                Attempt::Failed {
                    classified,
                    status: None,
                    body: None,
                },
                None,
            )
        }
    }
}
