//! What a client key's own policy does to a request before routing: its refusals as HTTP
//! errors, and the candidates its allow list and price-tier cap leave.

use axum::http::StatusCode;

use super::error::ApiError;
use crate::router::record::Record;

/// A client's refusal before routing, as an HTTP error.
pub(super) fn deny_error(d: &crate::clients::limiter::Deny, label: &str, now: i64) -> ApiError {
    use crate::clients::limiter::Deny;
    let message = d.message(label);
    let e = match d {
        Deny::Disabled => {
            ApiError::new(StatusCode::FORBIDDEN, "permission_error", d.code(), message)
        }
        Deny::Expired(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            d.code(),
            message,
        ),
        _ => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            d.code(),
            message,
        ),
    };
    match d.retry_ms(now) {
        Some(ms) => e.retry_after((ms.max(0) as u64).div_ceil(1000)),
        None => e,
    }
}

pub(super) enum Admits {
    Yes,
    NotAllowed,
    /// Above the key's price tier (or of unknown price), and why.
    TooDear(String),
}

/// Whether a client's policy lets `requested` be served by target `t`.
pub(super) fn admits(
    policy: &crate::clients::ClientPolicy,
    requested: &str,
    t: &crate::router::snapshot::Target,
) -> Admits {
    if !policy.allows(requested, t.provider.id(), &t.model.id) {
        return Admits::NotAllowed;
    }
    let Some(cap) = policy.max_tier else {
        return Admits::Yes;
    };
    match t.model.tier {
        Some(tier) if tier <= cap => Admits::Yes,
        Some(tier) => Admits::TooDear(format!(
            "price tier {} is above this key's limit ({})",
            tier.as_str(),
            cap.as_str()
        )),
        None => Admits::TooDear(format!(
            "price unknown (set `price` or `tier` on the model), and this key is limited to tier {}",
            cap.as_str()
        )),
    }
}

/// Keeps the targets this client may use: its allow list and its price-tier cap. Removed
/// targets are recorded as skipped; a 403 says why when none is left.
pub(super) fn client_targets(
    client: &crate::clients::Client,
    requested: &str,
    targets: Vec<crate::router::snapshot::Target>,
    rec: &mut Record,
) -> Result<Vec<crate::router::snapshot::Target>, ApiError> {
    let sifted = sift(client, requested, targets);
    for (t, why) in &sifted.too_dear {
        rec.push_attempt(crate::router::skipped(t, None, why, None, None));
    }
    sifted.kept(client, requested)
}

/// The targets this client may use, or the 403 that says why none is left (a token count, a
/// prewarm: what names a model without being routed).
pub(crate) fn allowed_targets(
    client: &crate::clients::Client,
    requested: &str,
    targets: Vec<crate::router::snapshot::Target>,
) -> Result<Vec<crate::router::snapshot::Target>, ApiError> {
    sift(client, requested, targets).kept(client, requested)
}

/// Targets sorted by a client's policy.
struct Sifted {
    kept: Vec<crate::router::snapshot::Target>,
    not_allowed: usize,
    too_dear: Vec<(crate::router::snapshot::Target, String)>,
}

fn sift(
    client: &crate::clients::Client,
    requested: &str,
    targets: Vec<crate::router::snapshot::Target>,
) -> Sifted {
    let policy = &client.policy;
    if policy.allow.is_empty() && policy.max_tier.is_none() {
        return Sifted {
            kept: targets,
            not_allowed: 0,
            too_dear: Vec::new(),
        };
    }
    let mut s = Sifted {
        kept: Vec::with_capacity(targets.len()),
        not_allowed: 0,
        too_dear: Vec::new(),
    };
    for t in targets {
        match admits(policy, requested, &t) {
            Admits::Yes => s.kept.push(t),
            Admits::NotAllowed => s.not_allowed += 1,
            Admits::TooDear(why) => s.too_dear.push((t, why)),
        }
    }
    s
}

impl Sifted {
    fn kept(
        self,
        client: &crate::clients::Client,
        requested: &str,
    ) -> Result<Vec<crate::router::snapshot::Target>, ApiError> {
        let policy = &client.policy;
        if !self.kept.is_empty() || (policy.allow.is_empty() && policy.max_tier.is_none()) {
            return Ok(self.kept);
        }
        let message = if !self.too_dear.is_empty() {
            let dear: Vec<String> = self
                .too_dear
                .iter()
                .map(|(t, why)| format!("{}: {why}", t.label()))
                .collect();
            format!(
                "No candidate for `{requested}` is within the price tier of key `{}`: {}.",
                client.label,
                dear.join("; ")
            )
        } else {
            format!(
                "The key `{}` may not use `{requested}`{}. It may use: {}.",
                client.label,
                if self.not_allowed > 0 {
                    ""
                } else {
                    " (no candidates)"
                },
                policy.allow.join(", ")
            )
        };
        let mut e = ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            if self.too_dear.is_empty() {
                "model_not_allowed"
            } else {
                "price_tier_exceeded"
            },
            message,
        );
        e.param = Some("model".into());
        Err(e)
    }
}

/// The client a model list is for: a valid key that is not disabled or expired (listing costs
/// no tokens: no metering).
pub(crate) fn listing_client(
    core: &crate::gateway::Core,
    presented: Option<&str>,
) -> Result<std::sync::Arc<crate::clients::Client>, ApiError> {
    let client = super::state::authenticate(core, presented)?;
    let now = core.routing.clock.now_ms();
    core.clients
        .gate(&client, now)
        .map_err(|d| deny_error(&d, &client.label, now))?;
    Ok(client)
}

/// Whether `client` may use the model name `name`: a key limited to some targets or a price
/// tier sees only the names it can use.
pub(crate) fn may_use(
    snap: &crate::router::snapshot::Snapshot,
    client: &crate::clients::Client,
    name: &str,
) -> bool {
    let p = &client.policy;
    if p.allow.is_empty() && p.max_tier.is_none() {
        return true;
    }
    snap.resolve(name).is_ok_and(|(targets, _)| {
        targets
            .iter()
            .any(|t| matches!(admits(p, name, t), Admits::Yes))
    })
}
