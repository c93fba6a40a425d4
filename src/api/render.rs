//! The last step of the inbound pipeline: the router's outcome in the client's format — a
//! complete answer (passed through or translated), a committed stream handed to the pump, or a
//! failure as the API error the client's SDK expects.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::pipeline::{candidates, failure_to_error, gateway_headers, Format};
use super::AppState;
use crate::canonical::responses::Echo;
use crate::router::record::Record;
use crate::router::{Completed, Failure, Inbound, Reply, Streamed, Wire};

/// Renders the router's outcome for the client.
pub(super) struct Out<'a> {
    pub state: &'a AppState,
    pub request_id: &'a str,
    pub format: Format,
    pub base: &'a mut HeaderMap,
    /// What a Responses answer echoes of its request.
    pub echo: Option<Echo>,
    /// An Anthropic client asked for thinking (it gets the upstream's reasoning as thinking).
    pub thinking: bool,
    /// The model name the client asked for.
    pub asked: &'a str,
}

impl Out<'_> {
    /// The model an answer names: for an Anthropic client the one it asked for (Claude Code
    /// drops a signed thinking block whose message names another model, and its next tool turn
    /// is then refused); others see the served one. The served one is always in
    /// `x-gateway-model`.
    fn named<'m>(&'m self, served: &'m str) -> &'m str {
        match self.format {
            Format::Anthropic if !self.asked.is_empty() && self.asked != "auto" => self.asked,
            _ => served,
        }
    }
}

impl Out<'_> {
    /// A complete answer: logged, counted, translated when the formats differ.
    pub(super) fn complete(self, served: Completed, mut rec: Record) -> Result<Response, ApiError> {
        let Completed {
            target,
            reply,
            usage,
            slot,
        } = served;
        let core = &self.state.core;
        drop(slot);
        gateway_headers(self.base, target.provider.id(), &target.model.id);
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
        rec.finish(200, None);
        // The client's format: the upstream's bytes as they are, or the canonical answer
        // rendered.
        let body = match reply {
            Reply::Wire(body, wire) if Some(wire) == self.format.wire() => body,
            Reply::Wire(body, wire) => {
                let mut answer = crate::providers::codec::answer(wire, &body).ok_or_else(|| {
                    ApiError::new(
                        StatusCode::BAD_GATEWAY,
                        "upstream_error",
                        "malformed_upstream_answer",
                        "The provider's answer could not be translated.",
                    )
                })?;
                if wire == Wire::Gemini {
                    // Gemini answers carry neither an id nor the model.
                    answer.id = self.request_id.to_string();
                    answer.model = target.model.id.clone();
                }
                self.render(answer, self.named(&target.model.id))
            }
            Reply::Canonical(answer) => self.render(answer, self.named(&target.model.id)),
        };
        let mut resp = (StatusCode::OK, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        resp.headers_mut().extend(self.base.clone());
        Ok(resp)
    }

    /// A canonical answer in the client's format.
    fn render(&self, mut answer: crate::canonical::ChatResponse, model: &str) -> Bytes {
        answer.created = self.state.core.routing.clock.now_ms() / 1000;
        let out = match (self.format, &self.echo) {
            (Format::Responses, Some(echo)) => {
                crate::canonical::responses::response_to_responses(&answer, echo)
            }
            (Format::OpenAi | Format::Responses, _) => {
                crate::canonical::openai::response_to_openai(&answer)
            }
            (Format::Anthropic, _) => {
                crate::canonical::anthropic::response_to_anthropic(&answer, model, self.thinking)
            }
        };
        Bytes::from(serde_json::to_vec(&out).unwrap_or_default())
    }

    /// A committed stream: the pump relays it in the client's format.
    pub(super) fn stream(self, served: Streamed, inbound: &Inbound, mut rec: Record) -> Response {
        let Streamed {
            target,
            source,
            prelude,
            slot,
            resume,
        } = served;
        gateway_headers(self.base, target.provider.id(), &target.model.id);
        rec.served_by(&target);
        // The estimate the router already made (no second walk of the messages).
        let prompt_tokens = inbound.needs.prompt_tokens();
        let resume = (!resume.is_empty()).then(|| crate::router::stream::Resume {
            routing: self.state.core.routing.clone(),
            body: inbound.body.clone(),
            targets: resume.into(),
            prompt_tokens,
        });
        let out = match self.format {
            Format::Responses => crate::router::stream::Out::Responses(Box::new(
                crate::canonical::responses::StreamEncoder::new(self.echo.unwrap_or_default()),
            )),
            Format::OpenAi => crate::router::stream::Out::OpenAi(Box::new(
                crate::canonical::openai::StreamEncoder::new(
                    self.request_id,
                    &target.model.id,
                    self.state.core.routing.clock.now_ms() / 1000,
                    inbound.canonical.stream_usage,
                ),
            )),
            Format::Anthropic => crate::router::stream::Out::Anthropic(Box::new(
                crate::canonical::anthropic::StreamEncoder::new(
                    self.request_id,
                    self.named(&target.model.id),
                )
                .with_thinking(self.thinking)
                .with_prompt_estimate(prompt_tokens),
            )),
        };
        let upstream = crate::router::stream::Upstream {
            source,
            prelude,
            client_wants_usage: inbound.canonical.stream_usage,
            prompt_tokens,
        };
        let body = crate::router::stream::body(upstream, slot, target, rec, resume, out);
        let mut resp = Response::new(Body::from_stream(body));
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        h.extend(self.base.clone());
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
