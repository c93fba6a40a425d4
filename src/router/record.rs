//! One request's record: its attempts, timing and usage. Finishing it hands the request-log row
//! to the gateway's [`Sink`](super::context::Sink) (log, stats, metrics, spending, the request event); dropping it unfinished (client went away) records a 499.

use std::sync::Arc;
use std::time::Instant;

use super::context::Routing;
use crate::canonical::Usage;
use crate::clients::Client;
use crate::pricing::Price;
use crate::store::{AttemptRecord, LogRow};

pub struct Record {
    row: Option<LogRow>,
    started: Instant,
    routing: Arc<Routing>,
    client: Arc<Client>,
    /// Price of the model that served, for the cost estimate.
    price: Option<Price>,
    /// Microseconds spent waiting on upstream attempts.
    upstream_us: u64,
    /// What attempts cancelled for a hedge are estimated to have cost (their prompts).
    outrun_cost: f64,
    /// Its trace, when Baton traces it (`telemetry`), and what the spans say beyond the row.
    trace: Option<Traced>,
    /// Its capture, when one is armed: told the log row when the request is over.
    capture: Option<Arc<crate::capture::Capture>>,
}

/// What a traced request's spans are made of besides its log row.
struct Traced {
    trace: Arc<crate::telemetry::Trace>,
    operation: &'static str,
    finish_reasons: Vec<String>,
    content: Option<(String, String)>,
}

impl Record {
    pub fn new(
        id: String,
        ts_ms: i64,
        client: Arc<Client>,
        requested_model: String,
        stream: bool,
        routing: &Arc<Routing>,
    ) -> Self {
        Self {
            row: Some(LogRow {
                id,
                ts_ms,
                client: client.label.clone(),
                client_key: client.id.clone(),
                cost_usd: None,
                upstream_ms: None,
                requested_model,
                provider: None,
                model: None,
                status: 0,
                stream,
                attempts: Vec::new(),
                ttfb_ms: None,
                total_ms: 0,
                input_tokens: None,
                output_tokens: None,
                cache_read_tokens: None,
                cache_write_tokens: None,
                error: None,
                output: None,
            }),
            started: Instant::now(),
            routing: routing.clone(),
            client,
            price: None,
            upstream_us: 0,
            outrun_cost: 0.0,
            trace: None,
            capture: None,
        }
    }

    /// Keeps the request's capture informed (its log row decides whether it is kept).
    pub fn captured(&mut self, capture: Option<&Arc<crate::capture::Capture>>) {
        self.capture = capture.cloned();
    }

    /// Traces this request (when Baton traces it): `operation` is the GenAI operation of the
    /// API the client spoke.
    pub fn traced(
        &mut self,
        trace: Option<&Arc<crate::telemetry::Trace>>,
        operation: &'static str,
    ) {
        self.trace = trace.filter(|t| t.traced()).map(|t| Traced {
            trace: t.clone(),
            operation,
            finish_reasons: Vec::new(),
            content: None,
        });
    }

    /// Whether the spans want the answer's finish reason and, with `content`, its text.
    pub fn wants_trace(&self, content: bool) -> bool {
        self.trace
            .as_ref()
            .is_some_and(|t| !content || t.trace.wants_content())
    }

    /// Why the answer ended (`gen_ai.response.finish_reasons`).
    pub fn finish_reason(&mut self, reason: &str) {
        if let Some(t) = &mut self.trace {
            if !t.finish_reasons.iter().any(|r| r == reason) {
                t.finish_reasons.push(reason.to_string());
            }
        }
    }

    /// The prompt and the answer, for spans that carry them (`captureContent`).
    pub fn content(&mut self, input: String, output: String) {
        if let Some(t) = self.trace.as_mut().filter(|t| t.trace.wants_content()) {
            t.content = Some((input, output));
        }
    }

    /// The answer's text, for spans that carry it (`captureContent`).
    pub fn answered(&mut self, output: String) {
        if let Some((_, o)) = self.trace.as_mut().and_then(|t| t.content.as_mut()) {
            *o = output;
        }
    }

    pub fn routing(&self) -> &Arc<Routing> {
        &self.routing
    }

    pub fn id(&self) -> &str {
        self.row.as_ref().map(|r| r.id.as_str()).unwrap_or_default()
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    pub fn push_attempt(&mut self, a: AttemptRecord) {
        self.upstream_us += a.latency_us;
        if let Some(r) = &mut self.row {
            r.attempts.push(a);
        }
    }

    /// An attempt cancelled because a hedge beside it answered first: logged with the prompt
    /// tokens it is estimated to have cost, priced at its model's price.
    pub fn push_outrun(&mut self, a: AttemptRecord, price: Option<Price>) {
        if let (Some(p), Some(n)) = (price, a.input_tokens) {
            self.outrun_cost += p.cost(&Usage {
                input_tokens: n,
                ..Usage::default()
            });
        }
        self.push_attempt(a);
    }

    pub fn attempts(&self) -> &[AttemptRecord] {
        self.row
            .as_ref()
            .map(|r| r.attempts.as_slice())
            .unwrap_or_default()
    }

    /// Number of upstream requests actually sent (skipped candidates do not count).
    pub fn sent_count(&self) -> usize {
        self.attempts().iter().filter(|a| a.class.sent()).count()
    }

    pub fn served_by(&mut self, target: &crate::router::snapshot::Target) {
        self.price = target.model.price;
        if let Some(r) = &mut self.row {
            r.provider = Some(target.provider.id().to_string());
            r.model = Some(target.model.id.clone());
        }
    }

    pub fn first_byte(&mut self) {
        let ms = self.started.elapsed().as_millis() as u64;
        if let Some(r) = &mut self.row {
            r.ttfb_ms.get_or_insert(ms);
        }
    }

    pub fn usage(&mut self, u: Usage) {
        if let Some(r) = &mut self.row {
            r.input_tokens = Some(u.input_tokens);
            r.output_tokens = Some(u.output_tokens);
            r.cache_read_tokens = Some(u.cached_input_tokens);
            r.cache_write_tokens = Some(u.cache_write_tokens);
        }
    }

    /// How the JSON the client asked for turned out (`structured::Checked::word`).
    pub fn output(&mut self, word: &str) {
        if let Some(r) = &mut self.row {
            r.output = Some(word.to_string());
        }
    }

    /// The key of the attempt that served, if any.
    pub fn served_key(&self) -> Option<&str> {
        self.attempts()
            .iter()
            .rev()
            .find(|a| a.class == crate::limits::Outcome::Ok || a.streamed)
            .and_then(|a| a.key.as_deref())
    }

    /// The serving attempt's stream broke (or stalled, or turned malformed) after content
    /// reached the client: it was a failure, not a success, for health, the breaker and the
    /// log; its tokens still count.
    pub fn serving_attempt_broke(&mut self, reason: &str) {
        if let Some(r) = &mut self.row {
            if let Some(a) = r
                .attempts
                .iter_mut()
                .rev()
                .find(|a| a.class == crate::limits::Outcome::Ok)
            {
                a.class = crate::limits::Outcome::Failed(crate::limits::ErrorClass::Transient);
                a.status = None;
                a.reason = Some(format!("stream broke after content: {reason}"));
                a.streamed = true;
            }
        }
    }

    /// Tokens of the answer so far (prompt + completion).
    pub fn total_tokens(&self) -> u64 {
        self.row
            .as_ref()
            .map(|r| r.input_tokens.unwrap_or(0) + r.output_tokens.unwrap_or(0))
            .unwrap_or(0)
    }

    /// Completes the log row and hands it to the gateway.
    pub fn finish(&mut self, status: u16, error: Option<String>) {
        let Some(mut row) = self.row.take() else {
            return;
        };
        row.status = status;
        row.error = error;
        let total = self.started.elapsed();
        row.total_ms = total.as_millis() as u64;
        row.upstream_ms = Some(self.upstream_us / 1000);
        let served = self.price.map(|p| {
            p.cost(&crate::canonical::Usage {
                input_tokens: row.input_tokens.unwrap_or(0),
                output_tokens: row.output_tokens.unwrap_or(0),
                cached_input_tokens: row.cache_read_tokens.unwrap_or(0),
                cache_write_tokens: row.cache_write_tokens.unwrap_or(0),
            })
        });
        row.cost_usd = match (served, self.outrun_cost) {
            (c, x) if x <= 0.0 => c,
            (c, x) => Some(c.unwrap_or(0.0) + x),
        };
        if let Some(c) = self.capture.take() {
            c.finished(&row);
        }
        if let Some(t) = self.trace.take() {
            let snap = self.routing.snapshot.load();
            let system_of = |id: &str| {
                snap.provider(id)
                    .map(|p| gen_ai_system(p.config.kind))
                    .unwrap_or("openai")
            };
            t.trace.finish(&crate::telemetry::Finished {
                row: &row,
                started: self.started,
                total,
                operation: t.operation,
                system_of: &system_of,
                finish_reasons: &t.finish_reasons,
                content: t.content.as_ref().map(|(i, o)| (i.as_str(), o.as_str())),
                redactor: &self.routing.redactor,
            });
        }
        self.routing
            .finished(&self.client, row, total, self.upstream_us);
    }
}

/// A provider kind's service as OpenTelemetry's GenAI conventions name it
/// (`gen_ai.provider.name`), as its folder says.
fn gen_ai_system(kind: crate::config::ProviderKind) -> &'static str {
    use crate::providers::{cli, kinds};
    match (kinds::platform(kind), cli::program::of(kind)) {
        (Some(p), _) => p.gen_ai_system(),
        (None, Some(p)) => p.gen_ai_system(),
        (None, None) => "openai",
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        if self.row.is_some() {
            self.finish(499, Some("client closed the connection".into()));
        }
    }
}
