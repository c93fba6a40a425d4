//! The one admission. Every unit of work the router is given passes here first, whatever
//! carried it: an HTTP request to an inbound API, each message on Codex's WebSocket, a token
//! count. In this order, each step before anything costlier:
//!
//! 1. the client key, checked at this moment (a key disabled or deleted since a WebSocket
//!    opened is refused on its next message);
//! 2. a slot among `server.maxConcurrentRequests`, held until the answer has been sent (a
//!    stream until it ends): 503 with `Retry-After` when none is free;
//! 3. the key's own policy (disabled, expired, the bad-request throttle, rate, token and
//!    budget limits) and the tray's pause;
//! 4. the body's bytes, within `server.maxBodyBytes`, charged to the memory budget as they
//!    arrive: an HTTP body is read here under the body timeouts; a WebSocket message was
//!    metered and charged frame by frame as it arrived (`websocket::meter`) and comes with
//!    that charge;
//! 5. its JSON values counted (`server.maxJsonValues`) and what parsing it will cost charged,
//!    before it is parsed.
//!
//! What comes out is an [`Admitted`], which only this module makes: `pipeline` serves nothing
//! else, and the model allow-list is applied there once the body names its model.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use tokio::sync::OwnedSemaphorePermit;

use super::budget::{self, Charge};
use super::error::ApiError;
use super::state::AppState;
use crate::clients::Client;

/// A unit of work's bytes, as its transport brings them.
pub(crate) enum Source {
    /// An HTTP request's body, still to be read, and the length its headers declare.
    Http {
        body: axum::body::Body,
        declared: Option<usize>,
    },
    /// A message already read whole, with the charge its bytes took as they arrived.
    Message { bytes: Bytes, charge: Charge },
}

impl Source {
    pub(crate) fn http(body: axum::body::Body, headers: &HeaderMap) -> Self {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        Source::Http { body, declared }
    }
}

/// A unit of work let in: its client, its body, and what it holds (memory, a concurrency
/// slot) until it is done.
pub(crate) struct Admitted {
    pub client: Arc<Client>,
    pub request_id: String,
    pub body: Bytes,
    charge: Charge,
    slot: OwnedSemaphorePermit,
    /// What is left of the key's per-minute limits, for the answer's rate-limit headers.
    pub headroom: crate::clients::limiter::Headroom,
    /// The capture armed for it (`capture`), set where the transport knows its path.
    pub capture: Option<Arc<crate::capture::Capture>>,
}

/// A unit refused, and whose it was when the key was known (its log row, its throttle).
pub(crate) struct Refusal {
    pub error: ApiError,
    pub client: Option<Arc<Client>>,
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Self {
        Refusal {
            error,
            client: None,
        }
    }
}

/// The admission (see the module's comment): `presented` is the key where the client's API
/// presents it; every other gateway key leaves `headers` (see [`scrub`]).
pub(crate) async fn admit(
    state: &AppState,
    presented: Option<String>,
    headers: &mut HeaderMap,
    source: Source,
    request_id: String,
) -> Result<Admitted, Refusal> {
    let core = &state.core;
    let client = super::state::authenticate(core, presented.as_deref())?;
    if let Some(p) = &presented {
        scrub(core, p, headers);
    }
    let refused = |error: ApiError| Refusal {
        error,
        client: Some(client.clone()),
    };
    let slot = state.inbound.request_slot().ok_or_else(|| busy(state))?;
    let headroom = policy(core, &client).await.map_err(refused)?;
    let (body, mut charge) = match source {
        Source::Http { body, declared } => {
            let mut charge = Charge::default();
            let bytes = budget::read_body(&state.core, &state.inbound, declared, body, &mut charge)
                .await
                .map_err(refused)?;
            (bytes, charge)
        }
        Source::Message { bytes, charge } => {
            if bytes.len() > core.server.max_body_bytes {
                return Err(refused(budget::too_large(core.server.max_body_bytes)));
            }
            (bytes, charge)
        }
    };
    budget::charge_parse(
        &state.inbound,
        core.server.memory_budget_bytes,
        &body,
        &mut charge,
    )
    .await
    .map_err(refused)?;
    Ok(Admitted {
        client,
        request_id,
        body,
        charge,
        slot,
        headroom,
        capture: None,
    })
}

/// Headers that carry a login where a client's own is forwarded (to a `credentials: "client"`
/// provider): one holding a gateway key other than the one the unit was admitted with is
/// removed, so a second key of Baton's never reaches an upstream. (The admitted key itself is
/// never forwarded: `ClientCredential` leaves it out.)
fn scrub(core: &crate::gateway::Core, presented: &str, headers: &mut HeaderMap) {
    for name in [
        &header::AUTHORIZATION,
        &crate::providers::client::X_API_KEY,
        &crate::providers::client::X_GOOG_API_KEY,
    ] {
        let other_key = headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(crate::providers::client::strip_scheme)
            .is_some_and(|v| v != presented && core.keys.client(v).is_some());
        if other_key {
            headers.remove(name);
        }
    }
}

/// The key's own policy and the tray's pause, before anything is read.
async fn policy(
    core: &crate::gateway::Core,
    client: &Client,
) -> Result<crate::clients::limiter::Headroom, ApiError> {
    let headroom = core.admit(client).await.map_err(|d| {
        super::admission::deny_error(&d, &client.label, core.routing.clock.now_ms())
    })?;
    if core.is_paused() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "paused",
            "Baton is paused (from the tray, the web UI or the admin API): every request gets 503 until routing is resumed. Choose Resume routing in the tray or the web UI, or send `PUT /admin/pause` with {\"paused\": false}.",
        ));
    }
    Ok(headroom)
}

fn busy(state: &AppState) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "service_unavailable",
        "gateway_busy",
        format!(
            "Baton is handling as many requests as it may at once (server.maxConcurrentRequests = {}); retry in a second.",
            state.core.server.max_concurrent_requests
        ),
    )
    .retry_after(1)
}

impl Admitted {
    /// The body replaced by a larger one built from it (a WebSocket turn with the
    /// conversation it continues), under the same limits and charged likewise.
    pub(crate) async fn rebody(&mut self, state: &AppState, body: Bytes) -> Result<(), ApiError> {
        let server = &state.core.server;
        if body.len() > server.max_body_bytes {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request_too_large",
                format!(
                    "This turn, with the conversation it continues on this connection, is larger than the {}-byte limit (server.maxBodyBytes): start a new conversation, or compact this one.",
                    server.max_body_bytes
                ),
            ));
        }
        state
            .inbound
            .charge_soon(&mut self.charge, body.len())
            .await
            .map_err(|r| r.error(server.memory_budget_bytes))?;
        budget::charge_parse(
            &state.inbound,
            server.memory_budget_bytes,
            &body,
            &mut self.charge,
        )
        .await?;
        self.body = body;
        Ok(())
    }

    /// Its parts: the client, the body and its memory charge (held while the body's parsed
    /// forms live), and the concurrency slot (held until the answer is sent).
    pub(crate) fn into_parts(self) -> (Arc<Client>, Bytes, Charge, OwnedSemaphorePermit) {
        (self.client, self.body, self.charge, self.slot)
    }
}
