//! The real upstreams behind the fallback loop's [`Upstream`]: an HTTP attempt, a CLI's, or one
//! with a hosted search Baton runs around it.

use super::context::Routing;
use super::snapshot::Target;
use super::types::{Attempt, Inbound, Upstream};
use super::{attempt, hosted};

/// The real upstreams.
pub(crate) struct Live<'a>(pub &'a Routing);

impl Upstream for Live<'_> {
    fn attempt<'a>(
        &'a self,
        t: &'a Target,
        key: Option<&'a crate::providers::ApiKey>,
        inbound: &'a Inbound,
        request_id: &'a str,
    ) -> impl std::future::Future<Output = Attempt> + Send + 'a {
        use futures_util::future::Either;
        use std::future::Future;
        use std::pin::Pin;
        type Boxed<'a> = Pin<Box<dyn Future<Output = Attempt> + Send + 'a>>;
        // A hosted search the target cannot run itself: Baton runs it around the attempts (its
        // future boxed, so the plain attempt's is neither wrapped nor grown by it).
        if hosted::serves(t, inbound) {
            let b: Boxed<'a> = Box::pin(hosted::attempt(self.0, t, key, inbound, request_id));
            Either::Left(b)
        } else if let Some(told) = inbound.instructed_for(&t.model) {
            // A model without structured output: told the schema (its answer checked as any).
            let routing = self.0;
            let b: Boxed<'a> =
                Box::pin(async move { attempt::attempt(routing, t, key, &told, request_id).await });
            Either::Left(b)
        } else {
            Either::Right(attempt::attempt(self.0, t, key, inbound, request_id))
        }
    }
}
