//! The spans of a finished request, built with the OpenTelemetry SDK and sent by its batch
//! processor and OTLP/HTTP (protobuf) exporter over Baton's own HTTP client.
//!
//! A request span (`SERVER`) and a child span per upstream attempt sent (`CLIENT`), named and
//! attributed by the GenAI semantic conventions (`gen_ai.operation.name`,
//! `gen_ai.provider.name`, request and response model, token usage, finish reasons,
//! `error.type`), with Baton's own beside them (`baton.*`). Their ids are the ones the request
//! already used on the wire (the attempt's `traceparent`), so the SDK is handed them through
//! its id generator. Every text that came from outside passes the one redaction point.

use std::cell::Cell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, IdGenerator, RandomIdGenerator, Sampler,
    SamplingDecision, SdkTracer, SdkTracerProvider, ShouldSample,
};

use super::context::{Ours, Parent};
use crate::config::telemetry::TelemetrySettings;
use crate::redact::Redactor;
use crate::store::LogRow;

/// What one finished request hands its trace.
pub struct Finished<'a> {
    pub row: &'a LogRow,
    /// When the request's record started (the attempts' `started` are measured from it).
    pub started: Instant,
    pub total: Duration,
    /// `gen_ai.operation.name` of the API the client spoke (`chat`, `generate_content`).
    pub operation: &'static str,
    /// `gen_ai.provider.name` of a provider id (the kind's, `providers::gen_ai_system`).
    pub system_of: &'a dyn Fn(&str) -> &'static str,
    pub finish_reasons: &'a [String],
    /// The prompt and the answer, when `captureContent` is on (the redactor still reads them).
    pub content: Option<(&'a str, &'a str)>,
    pub redactor: &'a Redactor,
}

/// The most content a span carries of the prompt or the answer.
const MAX_CONTENT: usize = 16 * 1024;

/// The spans' way to the collector.
pub struct Exporter {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    sampler: Sampler,
    content: bool,
}

impl Exporter {
    /// An exporter for `settings`, its headers' values looked up (`headers`), sending through
    /// `client` on the runtime `rt`.
    pub fn new(
        settings: &TelemetrySettings,
        headers: HashMap<String, String>,
        client: reqwest::Client,
        rt: tokio::runtime::Handle,
    ) -> Result<Self, String> {
        use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
        let url = settings.url()?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(Send { client, rt })
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(url.as_str())
            .with_headers(headers)
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("OTLP exporter: {e}"))?;
        let batch = BatchConfigBuilder::default()
            .with_scheduled_delay(Duration::from_secs(2))
            .with_max_queue_size(4096)
            .build();
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch)
            .build();
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_service_name(settings.service_name.trim().to_string())
            .with_attributes([KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))])
            .build();
        // Sampled when the request arrived (`Telemetry::start`): every span built is kept.
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_id_generator(Chosen::default())
            .with_sampler(Sampler::AlwaysOn)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("baton");
        Ok(Self {
            provider,
            tracer,
            sampler: Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                settings.sample_rate,
            ))),
            content: settings.capture_content,
        })
    }

    /// Whether a request of this trace is traced: the caller's decision when it sent one,
    /// else the configured share (decided by the trace id, as every SDK does).
    pub(super) fn samples(&self, parent: Option<&Parent>, trace_id: u128) -> bool {
        let cx = parent.map(|p| Context::new().with_remote_span_context(remote(p, None)));
        let r = self.sampler.should_sample(
            cx.as_ref(),
            TraceId::from(trace_id),
            "",
            &SpanKind::Server,
            &[],
            &[],
        );
        r.decision == SamplingDecision::RecordAndSample
    }

    pub(super) fn captures_content(&self) -> bool {
        self.content
    }

    /// Sends what is held and stops (blocking: called on a thread of its own).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!("telemetry exporter stopped: {e}");
        }
    }

    /// The request's spans: its own, then one per attempt sent, each ending when it ended.
    pub(super) fn emit(&self, o: &Ours, done: &Finished<'_>) {
        let row = done.row;
        let red = |s: &str| done.redactor.text(s).into_owned();
        let parent = match &o.parent {
            Some(p) => {
                Context::new().with_remote_span_context(remote(p, o.state.as_ref().cloned()))
            }
            None => Context::new(),
        };
        let request_model = red(&row.requested_model);
        let mut attrs = request_attributes(done, &request_model);
        let failed = row.status >= 400;
        if failed {
            attrs.push(KeyValue::new("error.type", error_type(row)));
        }
        let name = format!("{} {request_model}", done.operation);
        next_ids(o.trace_id, o.span_id);
        let mut span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_start_time(o.started)
            .with_attributes(attrs)
            .start_with_context(&self.tracer, &parent);
        if failed {
            let why = row.error.as_deref().map(red).unwrap_or_default();
            span.set_status(Status::error(why));
        }
        for a in row.attempts.iter().filter(|a| !a.class.sent()) {
            span.add_event(
                "baton.skipped",
                vec![
                    KeyValue::new("baton.provider", a.provider.clone()),
                    KeyValue::new("gen_ai.request.model", red(&a.model)),
                    KeyValue::new(
                        "baton.reason",
                        a.reason.as_deref().map(red).unwrap_or_default(),
                    ),
                ],
            );
        }
        let cx = parent.with_span(span);
        for a in row.attempts.iter().filter(|a| a.class.sent()) {
            self.attempt(o, done, a, &cx);
        }
        cx.span().end_with_timestamp(o.started + done.total);
    }

    /// One attempt's span, a child of the request's.
    fn attempt(
        &self,
        o: &Ours,
        done: &Finished<'_>,
        a: &crate::store::AttemptRecord,
        cx: &Context,
    ) {
        let red = |s: &str| done.redactor.text(s).into_owned();
        let system = (done.system_of)(&a.provider);
        let class = a.class.as_str();
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", done.operation),
            KeyValue::new("gen_ai.provider.name", system),
            KeyValue::new("gen_ai.system", system),
            KeyValue::new("gen_ai.request.model", red(&a.model)),
            KeyValue::new("baton.provider", a.provider.clone()),
            KeyValue::new("baton.attempt.class", class),
        ];
        if let Some(k) = &a.key {
            attrs.push(KeyValue::new("baton.key", k.clone()));
        }
        if let Some(s) = a.status {
            attrs.push(KeyValue::new("http.response.status_code", i64::from(s)));
        }
        if a.hedge {
            attrs.push(KeyValue::new("baton.hedge", true));
        }
        if let Some(r) = &a.reason {
            attrs.push(KeyValue::new("baton.reason", red(r)));
        }
        let ok = a.class == crate::verdict::Outcome::Ok;
        if ok {
            attrs.push(KeyValue::new("gen_ai.response.model", red(&a.model)));
            usage(done.row, &mut attrs);
        } else {
            attrs.push(KeyValue::new("error.type", class));
        }
        let offset = a
            .started
            .map(|s| s.saturating_duration_since(done.started))
            .unwrap_or_default();
        let start = o.started + offset;
        // A served stream's attempt lasts until the stream ended.
        let took = if ok && done.row.stream {
            done.total.saturating_sub(offset)
        } else {
            Duration::from_micros(a.latency_us)
        };
        next_ids(o.trace_id, a.span);
        let mut span = self
            .tracer
            .span_builder(format!("{} {}", done.operation, red(&a.model)))
            .with_kind(SpanKind::Client)
            .with_start_time(start)
            .with_attributes(attrs)
            .start_with_context(&self.tracer, cx);
        if !ok {
            let why = a.reason.as_deref().map(red).unwrap_or_default();
            span.set_status(Status::error(why));
        }
        span.end_with_timestamp(start + took);
    }
}

/// The request span's attributes: what was asked, what served it, what it cost.
fn request_attributes(done: &Finished<'_>, request_model: &str) -> Vec<KeyValue> {
    let row = done.row;
    let red = |s: &str| done.redactor.text(s).into_owned();
    let mut attrs = vec![
        KeyValue::new("gen_ai.operation.name", done.operation),
        KeyValue::new("gen_ai.request.model", request_model.to_string()),
        KeyValue::new("baton.request.id", row.id.clone()),
        KeyValue::new("baton.client", red(&row.client)),
        KeyValue::new("http.response.status_code", i64::from(row.status)),
        KeyValue::new("baton.attempts", sent(row) as i64),
    ];
    if let (Some(p), Some(m)) = (&row.provider, &row.model) {
        let system = (done.system_of)(p);
        attrs.push(KeyValue::new("gen_ai.provider.name", system));
        attrs.push(KeyValue::new("gen_ai.system", system));
        attrs.push(KeyValue::new("gen_ai.response.model", red(m)));
        attrs.push(KeyValue::new("baton.provider", p.clone()));
    }
    usage(row, &mut attrs);
    if !done.finish_reasons.is_empty() {
        let v: Vec<StringValue> = done
            .finish_reasons
            .iter()
            .map(|r| StringValue::from(red(r)))
            .collect();
        attrs.push(KeyValue::new(
            "gen_ai.response.finish_reasons",
            Value::Array(Array::String(v)),
        ));
    }
    if let Some(ms) = row.ttfb_ms {
        attrs.push(KeyValue::new("baton.time_to_first_byte_ms", ms as i64));
    }
    if let Some(c) = row.cost_usd {
        attrs.push(KeyValue::new("baton.cost_usd", c));
    }
    if let Some((input, output)) = done.content {
        attrs.push(KeyValue::new("gen_ai.input.messages", cut(red(input))));
        attrs.push(KeyValue::new("gen_ai.output.messages", cut(red(output))));
    }
    attrs
}

fn sent(row: &LogRow) -> usize {
    row.attempts.iter().filter(|a| a.class.sent()).count()
}

fn usage(row: &LogRow, attrs: &mut Vec<KeyValue>) {
    if let Some(n) = row.input_tokens {
        attrs.push(KeyValue::new("gen_ai.usage.input_tokens", n as i64));
    }
    if let Some(n) = row.output_tokens {
        attrs.push(KeyValue::new("gen_ai.usage.output_tokens", n as i64));
    }
    if let Some(n) = row.cache_read_tokens.filter(|n| *n > 0) {
        attrs.push(KeyValue::new(
            "gen_ai.usage.cache_read.input_tokens",
            n as i64,
        ));
    }
}

/// `error.type` of a failed request: the last sent attempt's class, else its status.
fn error_type(row: &LogRow) -> String {
    row.attempts
        .iter()
        .rev()
        .find(|a| a.class.sent() && a.class != crate::verdict::Outcome::Ok)
        .map(|a| a.class.as_str().to_string())
        .unwrap_or_else(|| row.status.to_string())
}

fn cut(mut s: String) -> String {
    if s.len() > MAX_CONTENT {
        let mut end = MAX_CONTENT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

fn remote(p: &Parent, state: Option<http::HeaderValue>) -> SpanContext {
    let state = state
        .and_then(|s| s.to_str().ok().map(str::to_string))
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let flags = if p.sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    SpanContext::new(
        TraceId::from(p.trace_id),
        SpanId::from(p.span_id),
        flags,
        true,
        state,
    )
}

thread_local! {
    /// The ids the next span built on this thread takes (the ones already on the wire).
    static NEXT: Cell<(u128, u64)> = const { Cell::new((0, 0)) };
}

fn next_ids(trace: u128, span: u64) {
    NEXT.with(|n| n.set((trace, span)));
}

/// The SDK's id generator, handed the ids Baton already chose; random ones otherwise.
#[derive(Debug, Default)]
struct Chosen(RandomIdGenerator);

impl IdGenerator for Chosen {
    fn new_trace_id(&self) -> TraceId {
        match NEXT.with(|n| n.get().0) {
            0 => self.0.new_trace_id(),
            t => TraceId::from(t),
        }
    }

    fn new_span_id(&self) -> SpanId {
        match NEXT.with(|n| n.replace((n.get().0, 0)).1) {
            0 => self.0.new_span_id(),
            s => SpanId::from(s),
        }
    }
}

/// The exporter's HTTP client: Baton's reqwest, its requests run on the gateway's runtime
/// (the batch processor exports from a thread of its own).
#[derive(Debug)]
struct Send {
    client: reqwest::Client,
    rt: tokio::runtime::Handle,
}

/// The most of a collector's answer read (it says "accepted" or why not).
const MAX_ANSWER: usize = 64 * 1024;

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Send {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let job = self.rt.spawn(async move {
            let (parts, body) = request.into_parts();
            let url = parts.uri.to_string();
            let mut resp = client
                .request(parts.method, url)
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let status = resp.status();
            let headers = std::mem::take(resp.headers_mut());
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await? {
                let room = MAX_ANSWER.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if room <= chunk.len() {
                    break;
                }
            }
            let mut out = http::Response::new(bytes::Bytes::from(body));
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            Ok::<_, reqwest::Error>(out)
        });
        match job.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(Box::new(e)),
            Err(e) => Err(Box::new(e)),
        }
    }
}
