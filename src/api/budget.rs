//! What one client can make Baton hold: a bound on concurrent inbound requests, and a memory
//! budget shared by every request in flight. A request is charged its body as it arrives and,
//! once read, an estimate of what parsing and translating it costs (measured by
//! `scripts/bench-memory` for every inbound API and upstream kind: at most eight copies of its
//! bytes, plus ~700 bytes per JSON value); a
//! body with more JSON values than `server.maxJsonValues` is refused before it is parsed. When
//! the budget is spent the request gets a 503 with `Retry-After` instead of memory (once the
//! large requests being freed after their answers, if any, are gone: `Inbound::free_later`,
//! `Inbound::charge_soon`). Bodies are
//! read here ([`read_body`]), under the size, stall and minimum-rate limits too.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;
use crate::config::ServerConfig;

mod values;
pub use values::json_values;

/// Bytes a parsed, translated request holds per byte of its body. Measured by
/// `BENCH_CROSS=1 scripts/bench-memory` for every inbound API to every upstream kind: up to
/// 7.7 for one long string (a Messages or Responses body translated for Gemini or Responses).
pub const BYTES_FACTOR: usize = 8;
/// Bytes a parsed, translated request holds per JSON value. Measured the same way: 190 for
/// Chat Completions passed through, ~670 for the worst translation (a Messages or Responses
/// body of 100,000 small parts to an `openai-responses`, `anthropic` or `gemini` upstream:
/// the client's body, the canonical request and the upstream's body are held at once).
pub const VALUE_COST: usize = 704;
/// The budget is counted in units of this many bytes.
const UNIT: usize = 1024;

/// The inbound limits of one gateway.
pub struct Inbound {
    requests: Arc<Semaphore>,
    memory: Arc<Semaphore>,
    memory_units: usize,
    pub max_values: usize,
    /// Large requests' parsed forms being freed after their answers (`free_later`), and the
    /// signal each gives when it is gone: a charge refused meanwhile waits for them.
    freeing: Arc<Freeing>,
}

#[derive(Default)]
struct Freeing {
    pending: std::sync::atomic::AtomicUsize,
    done: tokio::sync::Notify,
}

/// A body from this size on has its parsed form freed after the answer is on its way
/// (`Inbound::free_later`): freeing a 500 KB Messages request's values, canonical form and
/// copies took ~0.2 ms, which the client waited for.
const FREE_LATER_FROM: usize = 64 * 1024;

/// How long a charge refused while parsed forms are being freed waits for them (they take
/// about a millisecond; this bounds a runtime that is starved).
const FREEING_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Memory charged to one request; given back when dropped.
#[derive(Default)]
pub struct Charge {
    permit: Option<OwnedSemaphorePermit>,
}

impl Charge {
    /// The bytes this charge holds (whole units).
    pub fn units_bytes(&self) -> usize {
        self.permit.as_ref().map_or(0, |p| p.num_permits() * UNIT)
    }

    /// Keeps what `keep` bytes need and hands the rest over as a charge of its own.
    pub fn split_beyond(&mut self, keep: usize) -> Charge {
        let keep = keep.div_ceil(UNIT);
        let Some(p) = &mut self.permit else {
            return Charge::default();
        };
        let held = p.num_permits();
        if held <= keep {
            return Charge::default();
        }
        if keep == 0 {
            return std::mem::take(self);
        }
        Charge {
            permit: p.split(held - keep),
        }
    }
}

/// Why a request cannot be charged.
pub enum Refused {
    /// More than the whole budget: it could never be served.
    TooBig,
    /// Other requests hold the budget now.
    Busy,
}

impl Inbound {
    pub fn new(cfg: &ServerConfig) -> Self {
        let units = (cfg.memory_budget_bytes / UNIT).clamp(1, u32::MAX as usize);
        Self {
            requests: Arc::new(Semaphore::new(cfg.max_concurrent_requests.max(1))),
            memory: Arc::new(Semaphore::new(units)),
            memory_units: units,
            max_values: cfg.max_json_values,
            freeing: Arc::default(),
        }
    }

    /// Like `charge`, but a request the budget is busy for while other requests' parsed forms
    /// are being freed (`free_later`) waits for them instead of being refused: a client that
    /// sends its next large body as soon as it has an answer must not get the 503 its
    /// previous request would cause. A charge that fits costs what `charge` does.
    pub async fn charge_soon(&self, charge: &mut Charge, bytes: usize) -> Result<(), Refused> {
        let waits = |r: &Result<(), Refused>| {
            matches!(r, Err(Refused::Busy)) && self.freeing.pending.load(Ordering::Acquire) > 0
        };
        let first = self.charge(charge, bytes);
        if !waits(&first) {
            return first;
        }
        let until = tokio::time::Instant::now() + FREEING_WAIT;
        loop {
            // Registered before the check, so a free finishing in between is not missed.
            let freed = self.freeing.done.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let again = self.charge(charge, bytes);
            if !waits(&again) {
                return again;
            }
            if tokio::time::timeout_at(until, freed).await.is_err() {
                return Err(Refused::Busy);
            }
        }
    }

    /// Frees `parsed` (a request's parsed forms) and then gives back `charge`, on a task of
    /// its own when the body was large (`FREE_LATER_FROM`), so the answer goes out first.
    pub fn free_later<T: Send + 'static>(&self, parsed: T, charge: Charge, body_len: usize) {
        if body_len < FREE_LATER_FROM || tokio::runtime::Handle::try_current().is_err() {
            drop(parsed);
            drop(charge);
            return;
        }
        let freeing = self.freeing.clone();
        freeing.pending.fetch_add(1, Ordering::AcqRel);
        tokio::spawn(async move {
            drop(parsed);
            drop(charge);
            freeing.pending.fetch_sub(1, Ordering::AcqRel);
            freeing.done.notify_waiters();
        });
    }

    /// A slot among the concurrent requests, or `None` when all are taken.
    pub fn request_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.requests.clone().try_acquire_owned().ok()
    }

    /// Adds `bytes` to what `charge` holds.
    pub fn charge(&self, charge: &mut Charge, bytes: usize) -> Result<(), Refused> {
        let units = bytes.div_ceil(UNIT);
        if units == 0 {
            return Ok(());
        }
        let held = charge.permit.as_ref().map_or(0, |p| p.num_permits());
        if held + units > self.memory_units {
            return Err(Refused::TooBig);
        }
        let more = self
            .memory
            .clone()
            .try_acquire_many_owned(units as u32)
            .map_err(|_| Refused::Busy)?;
        match &mut charge.permit {
            Some(p) => p.merge(more),
            None => charge.permit = Some(more),
        }
        Ok(())
    }

    /// What a body costs once parsed and translated, beyond its own bytes.
    pub fn parse_cost(len: usize, values: usize) -> usize {
        len.saturating_mul(BYTES_FACTOR - 1)
            .saturating_add(values.saturating_mul(VALUE_COST))
    }
}

/// A response body that keeps its request's concurrency slot until it has been sent.
pub struct Held {
    body: axum::body::Body,
    _slot: OwnedSemaphorePermit,
}

impl Held {
    pub fn new(body: axum::body::Body, slot: OwnedSemaphorePermit) -> Self {
        Self { body, _slot: slot }
    }
}

impl http_body::Body for Held {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Refused {
    /// The answer to a request the budget cannot take: 413 when it could never fit, 503 with
    /// `Retry-After` when others hold the budget now.
    pub fn error(self, budget_bytes: usize) -> ApiError {
        match self {
            Refused::TooBig => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request_too_large",
                format!(
                    "This request would need more memory than Baton may use for all requests together (server.memoryBudgetBytes = {budget_bytes}); send a smaller one."
                ),
            ),
            Refused::Busy => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "service_unavailable",
                "memory_budget",
                "Baton is holding as much request data as it may at once (server.memoryBudgetBytes); retry in a second.",
            )
            .retry_after(1),
        }
    }
}

/// Reads a request body up to `server.maxBodyBytes` (the same limit on every inbound route),
/// refusing a larger one with a 413 in the API's error shape (before reading it when the
/// client declared its length). A body that stalls for `server.bodyTimeoutMs`, or after that
/// long arrives slower than [`MIN_BODY_RATE`] on average, gets a 408: a trickling upload
/// cannot hold a connection and its memory for ever.
///
/// The body is charged to `charge` as it arrives; the caller (`api::admit`) then charges what
/// parsing it will cost.
pub(crate) async fn read_body(
    core: &crate::gateway::Core,
    inbound: &Inbound,
    declared: Option<usize>,
    body: axum::body::Body,
    charge: &mut Charge,
) -> Result<Bytes, ApiError> {
    use futures_util::StreamExt;
    let over_budget = |r: Refused| r.error(core.server.memory_budget_bytes);
    let max = core.server.max_body_bytes;
    let too_large = || too_large(max);
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    if let Some(n) = declared {
        inbound.charge_soon(charge, n).await.map_err(over_budget)?;
    }
    let idle = std::time::Duration::from_millis(core.server.body_timeout_ms);
    let too_slow = |got: usize| too_slow(got, idle);
    let mut stream = body.into_data_stream();
    let mut buf = bytes::BytesMut::with_capacity(declared.unwrap_or(0));
    let started = tokio::time::Instant::now();
    loop {
        let next = match tokio::time::timeout(idle, stream.next()).await {
            Ok(n) => n,
            Err(_) => return Err(too_slow(buf.len())),
        };
        match next {
            None => break,
            Some(Ok(chunk)) => {
                if buf.len() + chunk.len() > max {
                    return Err(too_large());
                }
                if declared.is_none_or(|n| buf.len() + chunk.len() > n) {
                    inbound
                        .charge_soon(charge, chunk.len())
                        .await
                        .map_err(over_budget)?;
                }
                buf.extend_from_slice(&chunk);
            }
            Some(Err(e)) => return Err(broken(&e)),
        }
        let late = started.elapsed().saturating_sub(idle).as_secs_f64();
        if late > 0.0 && (buf.len() as f64) < late * MIN_BODY_RATE {
            return Err(too_slow(buf.len()));
        }
    }
    Ok(buf.freeze())
}

/// Charges what parsing `body` will cost, after counting its JSON values: a body of many small
/// values multiplies many times over when parsed, so one with more than `server.maxJsonValues`
/// is refused unparsed.
pub(crate) async fn charge_parse(
    inbound: &Inbound,
    budget_bytes: usize,
    body: &[u8],
    charge: &mut Charge,
) -> Result<(), ApiError> {
    let values = json_values(body, inbound.max_values);
    if values > inbound.max_values {
        return Err(too_many_values(inbound.max_values));
    }
    inbound
        .charge_soon(charge, Inbound::parse_cost(body.len(), values))
        .await
        .map_err(|r| r.error(budget_bytes))
}

pub(crate) fn too_large(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        "request_too_large",
        format!("The request body is larger than the {max}-byte limit (server.maxBodyBytes)."),
    )
}

/// A body that stalled or trickles: the connection closes after the answer.
fn too_slow(got: usize, idle: std::time::Duration) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "invalid_request_error",
        "request_timeout",
        format!(
            "The request body arrived too slowly ({got} bytes so far; server.bodyTimeoutMs is {} ms). Send the whole body at once.",
            idle.as_millis()
        ),
    );
    e.headers
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    e
}

/// The upload broke off (a client that went away, a dropped connection): not a malformed
/// request, so it does not feed the bad-request throttle.
fn broken(e: &dyn std::fmt::Display) -> ApiError {
    let mut err = ApiError::invalid("body", format!("Could not read the request body: {e}"));
    err.code = "body_incomplete";
    err
}

fn too_many_values(max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        "request_too_large",
        format!(
            "The request body holds more than {max} JSON values (server.maxJsonValues); send fewer messages or content parts."
        ),
    )
}

/// Bytes per second a body must average once `server.bodyTimeoutMs` has passed.
const MIN_BODY_RATE: f64 = 16.0 * 1024.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn budget_of(units: usize) -> Inbound {
        Inbound::new(&ServerConfig {
            memory_budget_bytes: units * UNIT,
            ..ServerConfig::default()
        })
    }

    #[tokio::test]
    async fn a_charge_waits_for_a_large_request_being_freed() {
        let b = budget_of(10);
        let mut first = Charge::default();
        assert!(b.charge(&mut first, 8 * UNIT).is_ok());
        // The first request's answer is out; its parsed form is freed on a task that has not
        // run yet, so the budget is still held when the next body arrives.
        b.free_later(vec![0u8; 64], first, FREE_LATER_FROM);
        let mut next = Charge::default();
        assert!(matches!(b.charge(&mut next, 6 * UNIT), Err(Refused::Busy)));
        let started = tokio::time::Instant::now();
        assert!(b.charge_soon(&mut next, 6 * UNIT).await.is_ok());
        assert!(
            started.elapsed() < FREEING_WAIT,
            "given back, not timed out"
        );
        assert_eq!(next.units_bytes(), 6 * UNIT);
    }

    #[tokio::test]
    async fn a_busy_budget_with_nothing_being_freed_refuses_at_once() {
        let b = budget_of(10);
        let mut held = Charge::default();
        assert!(b.charge(&mut held, 8 * UNIT).is_ok());
        let started = tokio::time::Instant::now();
        let mut next = Charge::default();
        assert!(matches!(
            b.charge_soon(&mut next, 6 * UNIT).await,
            Err(Refused::Busy)
        ));
        assert!(started.elapsed() < FREEING_WAIT, "refused, not timed out");
        // Nor does what is freed but still too little make it wait past the bound.
        let mut other = Charge::default();
        assert!(b.charge(&mut other, UNIT).is_ok());
        b.free_later((), other, FREE_LATER_FROM);
        assert!(matches!(
            b.charge_soon(&mut next, 6 * UNIT).await,
            Err(Refused::Busy)
        ));
        assert!(started.elapsed() < FREEING_WAIT, "nothing left to wait for");
        drop(held);
    }

    #[tokio::test]
    async fn a_small_request_is_freed_in_place() {
        let b = budget_of(10);
        let mut first = Charge::default();
        assert!(b.charge(&mut first, 8 * UNIT).is_ok());
        b.free_later(vec![0u8; 64], first, FREE_LATER_FROM - 1);
        let mut next = Charge::default();
        assert!(
            b.charge(&mut next, 6 * UNIT).is_ok(),
            "given back before it returned"
        );
    }

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let cfg = ServerConfig {
            memory_budget_bytes: 10 * UNIT,
            ..ServerConfig::default()
        };
        let b = Inbound::new(&cfg);
        let mut one = Charge::default();
        assert!(b.charge(&mut one, 6 * UNIT).is_ok());
        let mut two = Charge::default();
        assert!(matches!(b.charge(&mut two, 6 * UNIT), Err(Refused::Busy)));
        assert!(matches!(
            b.charge(&mut two, 11 * UNIT),
            Err(Refused::TooBig)
        ));
        assert!(b.charge(&mut one, 4 * UNIT).is_ok(), "charges add up");
        assert!(matches!(b.charge(&mut one, UNIT), Err(Refused::TooBig)));
        drop(one);
        assert!(
            b.charge(&mut two, 10 * UNIT).is_ok(),
            "given back when dropped"
        );
    }
}
