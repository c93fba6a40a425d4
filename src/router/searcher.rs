//! Where one hosted search runs: the search service (`search/`), or, with `backend:
//! "provider"`, a configured provider whose API has web search built in, asked to search in its
//! own shape (`UpstreamKind::search_request`) and read back (`UpstreamKind::search_hits`). The
//! provider is reached like any attempt (its key, timeouts, limits and redaction), but not
//! failed over: a search that fails is a failed search, said to the model and the client.

use serde_json::Value;

use crate::canonical::search::{SearchError, SearchHit, SearchRun, WebSearch};
use crate::canonical::ChatRequest;
use crate::providers::kinds;
use crate::search::{Backend, Service};

use super::context::Routing;
use super::snapshot::Target;
use super::types::{Answer, Attempt, Inbound, Original, Reply};

/// Why searches cannot run with these settings, if they cannot (the provider is looked up
/// too).
pub(crate) fn unavailable(routing: &Routing, service: &Service) -> Option<String> {
    if let Some(why) = service.unavailable() {
        return Some(why);
    }
    if service.settings.backend != Backend::Provider {
        return None;
    }
    let id = &service.settings.provider;
    let snap = routing.snapshot.load();
    let Some(p) = snap.provider(id) else {
        return Some(format!("the search provider `{id}` is not configured"));
    };
    if !kinds::searches(p.config.kind) {
        let able: Vec<&str> = crate::config::ProviderKind::all()
            .iter()
            .filter(|k| kinds::searches(**k))
            .map(|k| k.as_str())
            .collect();
        return Some(format!(
            "the provider `{id}` has no web search built in (a provider of these kinds has: {})",
            able.join(", ")
        ));
    }
    if !p.config.enabled {
        return Some(format!("the search provider `{id}` is turned off"));
    }
    // It calls with the login a client brings, which Baton never holds: a search Baton runs
    // itself has none to send.
    if !p.config.credentials.is_baton() {
        return Some(format!(
            "the provider `{id}` calls with the client's own login, which Baton never holds, so it cannot run Baton's searches: choose one with a key of its own"
        ));
    }
    None
}

/// One search for `query`.
pub(crate) async fn search(
    routing: &Routing,
    service: &Service,
    id: String,
    query: String,
    opts: &WebSearch,
    request_id: &str,
) -> SearchRun {
    if service.settings.backend != Backend::Provider {
        let http = routing.http.get(5_000).unwrap_or_default();
        return service
            .search(&http, id, query, opts, &routing.redactor)
            .await;
    }
    let found = match unavailable(routing, service) {
        Some(why) => Err(why),
        None => by_provider(routing, service, &query, opts, request_id).await,
    };
    let found = found.map_err(|message| SearchError {
        code: "unavailable",
        message,
    });
    service.run(id, query, found, opts, &routing.redactor)
}

/// The search provider asked in its own API's shape: the pages its search found, or why none.
async fn by_provider(
    routing: &Routing,
    service: &Service,
    query: &str,
    opts: &WebSearch,
    request_id: &str,
) -> Result<Vec<SearchHit>, String> {
    let snap = routing.snapshot.load();
    let (p, wire) = snap
        .provider(&service.settings.provider)
        .and_then(|p| Some((p.clone(), p.config.kind.wire()?)))
        .ok_or("the search provider is gone")?;
    let model = p
        .models
        .first()
        .cloned()
        .ok_or_else(|| format!("the search provider `{}` lists no model", p.id()))?;
    let kind = kinds::of(wire);
    let body = kind
        .search_request(&model.id, query, opts)
        .ok_or("that provider cannot search")?;
    let inbound = Inbound {
        // Sent in its own API only: no Chat Completions form is made.
        openai: serde_json::Map::new().into(),
        original: Some(Original { wire, body }),
        verbatim: Default::default(),
        client: None,
        anthropic_beta: None,
        canonical: ChatRequest {
            model: model.id.clone(),
            ..ChatRequest::default()
        },
        needs: Default::default(),
        deadline_ms: None,
        conversation: None,
        follows: false,
        continues: None,
        expect: Default::default(),
        trace: None,
        capture: None,
    };
    let target = Target {
        provider: p.clone(),
        model,
    };
    let attempt = Box::pin(super::attempt::attempt(
        routing,
        &target,
        p.keys.first(),
        &inbound,
        request_id,
    ));
    match attempt.await {
        Attempt::Served(Answer::Complete(Reply::Wire(body, _), ..)) => {
            Ok(serde_json::from_slice::<Value>(&body)
                .map(|v| kind.search_hits(&v))
                .unwrap_or_default())
        }
        Attempt::Failed { classified, .. } => Err(format!(
            "the search provider `{}` failed: {}",
            p.id(),
            classified.reason
        )),
        _ => Err("the search provider's answer could not be read".into()),
    }
}
