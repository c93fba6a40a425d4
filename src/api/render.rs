//! The last step of the inbound pipeline: the router's outcome in the client's format — a
//! complete answer (passed through or translated), a committed stream handed to the pump, or a
//! failure as the API error the client's SDK expects.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;

use super::dialect::contract::{Cx, Dialect};
use super::error::ApiError;
use super::failure::{candidates, failure_to_error};
use super::reply::gateway_headers;
use super::state::AppState;
use crate::router::record::Record;
use crate::router::{Completed, Failure, Inbound, Reply, Streamed};

/// Renders the router's outcome for the client, in its dialect.
pub(super) struct Out<'a> {
    pub state: &'a AppState,
    pub request_id: &'a str,
    pub dialect: &'a mut dyn Dialect,
    pub base: &'a mut HeaderMap,
}

impl<'a> Out<'a> {
    /// A complete answer: logged, counted, translated when the formats differ.
    pub(super) fn complete(
        self,
        served: Completed,
        inbound: &Inbound,
        mut rec: Record,
    ) -> Result<Response, ApiError> {
        let Completed {
            target,
            reply,
            usage,
            slot,
            output,
        } = served;
        let core = &self.state.core;
        drop(slot);
        gateway_headers(self.base, target.provider.id(), &target.model.id);
        output_said(self.base, &mut rec, output.as_ref());
        rec.served_by(&target);
        rec.first_byte();
        if let Some(u) = usage {
            rec.usage(u);
            core.routing.count_tokens(
                &target.provider,
                rec.served_key().unwrap_or_default(),
                u.input_tokens + u.output_tokens,
            );
        }
        if rec.wants_trace(false) {
            traced_answer(&mut rec, &reply);
        }
        rec.finish(200, None);
        // The client's format: the upstream's bytes as they are, or the canonical answer
        // rendered.
        let body = match reply {
            Reply::Wire(body, wire) if wire == self.dialect.wire() => {
                self.dialect.relayed(body, &target.model.id)
            }
            Reply::Wire(body, wire) => {
                let kind = crate::providers::kinds::of(wire);
                let mut answer =
                    crate::providers::kinds::answer_from(wire, &body).ok_or_else(|| {
                        ApiError::new(
                            StatusCode::BAD_GATEWAY,
                            "upstream_error",
                            "malformed_upstream_answer",
                            "The provider's answer could not be translated.",
                        )
                    })?;
                if !kind.names_answers() {
                    answer.id = self.request_id.to_string();
                    answer.model = target.model.id.clone();
                }
                self.render(answer, &target.model.id, inbound)
            }
            Reply::Canonical(answer) => self.render(answer, &target.model.id, inbound),
        };
        // The answer's headers are the ones gathered for it: taken, not copied (nothing else
        // reads them once there is an answer).
        let mut headers = std::mem::take(self.base);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let mut resp = Response::new(Body::from(body));
        *resp.headers_mut() = headers;
        Ok(resp)
    }

    /// A canonical answer in the client's format, its new calls with ids the conversation does
    /// not hold yet.
    fn render(
        &self,
        mut answer: crate::canonical::ChatResponse,
        served: &str,
        inbound: &Inbound,
    ) -> Bytes {
        crate::canonical::ids::Fresh::of(&inbound.canonical).answer(&mut answer);
        let cx = self.cx();
        answer.created = cx.now_s;
        let out = self.dialect.render(&answer, served, &cx);
        Bytes::from(serde_json::to_vec(&out).unwrap_or_default())
    }

    /// What the dialect is told: the request's id, and now (once per answer).
    fn cx(&self) -> Cx<'a> {
        Cx {
            request_id: self.request_id,
            now_s: self.state.core.routing.clock.now_ms() / 1000,
        }
    }

    /// A committed stream: the pump relays it in the client's format.
    pub(super) fn stream(self, served: Streamed, inbound: &Inbound, mut rec: Record) -> Response {
        let Streamed {
            target,
            source,
            prelude,
            slot,
            resume,
            output,
        } = served;
        gateway_headers(self.base, target.provider.id(), &target.model.id);
        rec.served_by(&target);
        // A stream read whole to check it says how it turned out now, and is not checked again.
        output_said(self.base, &mut rec, output.as_ref());
        // The estimate the router already made (no second walk of the messages).
        let prompt_tokens = inbound.needs.prompt_tokens();
        let resume = (!resume.is_empty()).then(|| crate::router::stream::Resume {
            routing: self.state.core.routing.clone(),
            body: inbound.openai_body().clone(),
            targets: resume.into(),
            prompt_tokens,
        });
        let cx = self.cx();
        let out = self.dialect.encoder(&target.model.id, &cx, inbound);
        // A translated answer's new calls get ids the conversation does not hold yet.
        let out: Box<dyn crate::canonical::StreamEncode> = Box::new(
            crate::canonical::ids::FreshIds::new(out, &inbound.canonical),
        );
        let content_type = out.content_type();
        let upstream = crate::router::stream::Upstream {
            source,
            prelude,
            client_wants_usage: inbound.canonical.stream_usage,
            prompt_tokens,
            expect: inbound.expect().filter(|_| output.is_none()).cloned(),
        };
        let body = crate::router::stream::body(upstream, slot, target, rec, resume, out);
        let mut h = std::mem::take(self.base);
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        let mut resp = Response::new(Body::from_stream(body));
        *resp.headers_mut() = h;
        resp
    }

    /// No answer: the error for the client (with the candidates when every one failed), logged,
    /// and announced when everything is exhausted.
    pub(super) fn failure(self, f: Failure, inbound: &Inbound, mut rec: Record) -> ApiError {
        let core = &self.state.core;
        let now = core.routing.clock.now_ms();
        let (status, mut err) = failure_to_error(f, now);
        let exhausted = matches!(
            err.code,
            "all_providers_rate_limited" | "all_providers_failed"
        );
        if exhausted {
            err.candidates = Some(candidates(rec.attempts()));
        }
        if let Some(last) = rec.attempts().iter().rev().find(|a| a.class.sent()) {
            gateway_headers(self.base, &last.provider, &last.model);
        }
        let invalid = crate::limits::Outcome::Failed(crate::limits::ErrorClass::InvalidOutput);
        if rec.attempts().iter().any(|a| a.class == invalid) {
            rec.output("invalid");
            self.base.insert(
                super::reply::OUTPUT_HEADER,
                HeaderValue::from_static("invalid"),
            );
        }
        rec.finish(status, Some(err.message.clone()));
        if exhausted {
            core.routing
                .events
                .emit(crate::events::Event::AllExhausted {
                    request_id: self.request_id.to_string(),
                    requested_model: inbound.canonical.model.clone(),
                    retry_at_ms: err.retry_after_secs.map(|s| now + s as i64 * 1000),
                });
        }
        err
    }
}

/// How the JSON the client asked for turned out, in the log and the `x-baton-output` header.
fn output_said(
    base: &mut HeaderMap,
    rec: &mut Record,
    output: Option<&crate::structured::Checked>,
) {
    if let Some(checked) = output {
        rec.output(checked.word());
        base.insert(
            super::reply::OUTPUT_HEADER,
            HeaderValue::from_static(checked.word()),
        );
    }
}

/// What a traced request's spans say of its answer: why it ended and, with
/// `captureContent`, its text.
fn traced_answer(rec: &mut Record, reply: &Reply) {
    let answer = match reply {
        Reply::Wire(body, wire) => crate::providers::kinds::answer_from(*wire, body),
        Reply::Canonical(a) => Some(a.clone()),
    };
    let Some(answer) = answer else {
        return;
    };
    if let Some(stop) = &answer.stop {
        rec.finish_reason(stop.as_openai());
    }
    if rec.wants_trace(true) {
        rec.answered(answer.text());
    }
}
