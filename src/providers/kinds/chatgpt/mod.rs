//! The ChatGPT backend Codex's own login reaches (`https://chatgpt.com/backend-api/codex`): the
//! Responses API as the backend Codex was written for speaks it, on the client's login only
//! (Baton never holds a ChatGPT token). What is its own beside the public API's:
//!
//! - the client's body goes as Codex wrote it: its backend's own fields (`client_metadata`,
//!   tools declared in `additional_tools` items, its input items' extra fields) stay, where the
//!   public `openai-responses` kind reshapes them for the public API;
//! - Codex's model list (`GET /models?client_version=…`) is asked of it, on the login, so
//!   Codex knows the plan's models and their tools (`api/dialect/codex.rs`);
//! - a provider written before this kind existed (`openai-responses` on the client's login at
//!   `chatgpt.com`) is this kind ([`adopts`]).

use super::contract::{Platform, UpstreamKind};
use super::openai_responses;
use crate::canonical::Wire;
use crate::config::kind::{Adoptable, Hint, KindSpec, Vendor};
use crate::config::ProviderKind;
use crate::i18n::n_;

/// The `chatgpt` kind.
pub static SPEC: KindSpec = KindSpec {
    name: "chatgpt",
    order: 25,
    doc: "The ChatGPT backend Codex's own login reaches (`baseUrl`\n`https://chatgpt.com/backend-api/codex`, with `credentials: \"client\"`): Codex's body\ngoes as it wrote it.",
    label: n_("ChatGPT (your Codex login)"),
    badge: "CG",
    wire: Some(Wire::Responses),
    vendor: Vendor::OpenAi,
    base_url_example: Some("https://chatgpt.com/backend-api/codex"),
    base_url_hint: Some(Hint {
        text: n_("The ChatGPT backend Codex's login reaches, e.g. {example}; Codex's own requests are forwarded on its login"),
        values: &[],
    }),
    client_login: true,
    login_only: true,
    adopts: Some(adopts),
    ..KindSpec::BASE
};

/// The `chatgpt` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

super::contract::register!(SPEC, &ChatGpt);

/// The ChatGPT backend's platform.
pub struct ChatGpt;

impl Platform for ChatGpt {
    fn api(&self) -> &'static dyn UpstreamKind {
        &openai_responses::OpenAiResponses
    }

    fn backend(&self) -> bool {
        true
    }

    /// It is called only on a client's login: it cannot be Baton's search service.
    fn searches(&self) -> bool {
        false
    }
}

/// A provider written as the public API's kind on the client's own login at ChatGPT's
/// backend (as the catalog and the README had it before this kind): this kind.
fn adopts(p: &Adoptable) -> bool {
    let host = reqwest::Url::parse(p.base_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
    p.kind == openai_responses::SPEC.name
        && p.client_login
        && host.is_some_and(|h| h == "chatgpt.com" || h.ends_with(".chatgpt.com"))
}

#[cfg(test)]
mod tests;
