//! The immutable routing snapshot (providers in order, routes) and model-name resolution.
//! A new snapshot is built on every configuration change and swapped in atomically; requests
//! keep the snapshot they started with.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::config::{ProviderConfig, RouteConfig, RoutingConfig};
use crate::providers::{self, ModelInfo, ProviderEntry, ProviderRuntime};

#[derive(Debug)]
pub struct Snapshot {
    /// Every provider, enabled or not, in routing order (priority, then id).
    pub providers: Vec<Arc<ProviderEntry>>,
    pub routes: BTreeMap<String, RouteConfig>,
    pub routing: RoutingConfig,
    /// `modelMap`, most specific pattern first.
    pub model_map: Vec<(String, String)>,
    /// The search service hosted web search runs through on translated routes.
    pub web_search: Arc<crate::search::Service>,
    /// What `auto` resolves to (every enabled provider it may use, each of its models): made
    /// once here, copied by each request, instead of walked through on every one. An `auto`
    /// request's candidates are always some of these: a client's policy only removes, and a
    /// `*` model is dropped or given the name the client sent, nothing `Glance` looks at.
    auto: Vec<Target>,
    /// What all of them have in common (`router::able`'s shortcut).
    auto_glance: Glance,
}

/// What every candidate of a list has in common: whether a request passes all their checks
/// can then be told at once, whatever their number (`router::able`).
#[derive(Debug, Clone, Copy)]
pub struct Glance {
    /// Every one is called with Baton's own credentials, none is a CLI.
    plain: bool,
    tools: bool,
    images: bool,
    /// The smallest context window among those that state one.
    window: Option<u64>,
}

impl Glance {
    /// One candidate's.
    pub fn of_target(t: &Target) -> Self {
        let p = &t.provider.config;
        Glance {
            plain: p.credentials.is_baton() && !p.kind.is_cli(),
            tools: t.model.tools,
            images: t.model.images,
            window: t.model.context_window,
        }
    }

    /// What all of `targets` have in common.
    fn of(targets: &[Target]) -> Self {
        let all = Glance {
            plain: true,
            tools: true,
            images: true,
            window: None,
        };
        targets
            .iter()
            .map(Self::of_target)
            .fold(all, |g, t| Glance {
                plain: g.plain && t.plain,
                tools: g.tools && t.tools,
                images: g.images && t.images,
                window: match (g.window, t.window) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                },
            })
    }

    /// Called with Baton's own credentials, and not a CLI: no credential or prompt-shape check
    /// applies (what a request pinned to a candidate is held to).
    pub fn plain(&self) -> bool {
        self.plain
    }

    /// Whether every candidate takes a request with these needs, as the checks one by one
    /// would find: its tools and images, and a prompt far inside every window (within half of
    /// it the checks count the prompt as each model would; see `Counts::needs_for`).
    pub fn takes(&self, needs: &crate::canonical::Needs) -> bool {
        self.plain
            && (!needs.tools || self.tools)
            && (!needs.images || self.images)
            && self
                .window
                .is_none_or(|w| needs.estimated_tokens.saturating_mul(2) < w)
    }
}

/// One provider + model to try.
#[derive(Debug, Clone)]
pub struct Target {
    pub provider: Arc<ProviderEntry>,
    pub model: Arc<ModelInfo>,
}

impl Target {
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider.id(), self.model.id)
    }
}

/// How the candidates were chosen: explicit pins are sent even when capabilities look wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    Auto,
    Route,
    Provider,
    Pinned,
    ModelName,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ResolveError {
    #[error(
        "The model `{requested}` does not exist on this gateway. Use one of: {available}.{fix}"
    )]
    UnknownModel {
        requested: String,
        available: String,
        /// How to make a client's own names work, when it is one (" Map …").
        fix: String,
    },
    #[error("{0}")]
    Disabled(String),
}

impl Snapshot {
    pub fn build(
        configs: Vec<ProviderConfig>,
        routes: BTreeMap<String, RouteConfig>,
        routing: RoutingConfig,
        runtimes: &mut HashMap<String, Arc<ProviderRuntime>>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let mut providers: Vec<Arc<ProviderEntry>> = configs
            .into_iter()
            .map(|c| {
                let rt = runtimes
                    .entry(c.id.clone())
                    .and_modify(|rt| {
                        if rt.limit != c.concurrency() {
                            *rt = Arc::new(ProviderRuntime::new(c.concurrency()));
                        }
                    })
                    .or_insert_with(|| Arc::new(ProviderRuntime::new(c.concurrency())))
                    .clone();
                Arc::new(providers::resolve::resolve(c, rt, env))
            })
            .collect();
        providers.sort_by(|a, b| (a.config.priority, a.id()).cmp(&(b.config.priority, b.id())));
        let live: Vec<&str> = providers.iter().map(|p| p.id()).collect();
        runtimes.retain(|id, _| live.contains(&id.as_str()));
        let mut auto = Vec::new();
        for p in providers
            .iter()
            .filter(|p| p.config.enabled && p.config.auto)
        {
            push_provider(p, &mut auto);
        }
        Self {
            providers,
            routes,
            routing,
            model_map: Vec::new(),
            web_search: Arc::default(),
            auto_glance: Glance::of(&auto),
            auto,
        }
    }

    /// What every `auto` candidate has in common.
    pub fn auto_glance(&self) -> Glance {
        self.auto_glance
    }

    /// Orders `modelMap` so that the most specific pattern is tried first: exact names, then
    /// globs with the most literal characters.
    pub fn set_model_map(&mut self, map: &BTreeMap<String, String>) {
        let mut v: Vec<(String, String)> =
            map.iter().map(|(k, t)| (k.clone(), t.clone())).collect();
        v.sort_by_key(|(k, _)| (k.contains('*'), std::cmp::Reverse(k.replace('*', "").len())));
        self.model_map = v;
    }

    /// What a client's model name routes to: an exact `modelMap` entry, else the name itself
    /// when it is Baton's own (`auto`, a route, a provider, `provider/model`), else the most
    /// specific matching glob, else the name. A glob covers the names it was written for even
    /// when some provider lists one of them (see [`Snapshot::resolve_requested`]).
    pub fn map_model<'a>(&'a self, requested: &'a str) -> &'a str {
        self.mapping(requested).0
    }

    /// [`Snapshot::map_model`], and whether a glob (not an exact entry) mapped the name.
    fn mapping<'a>(&'a self, requested: &'a str) -> (&'a str, bool) {
        if let Some((_, t)) = self.model_map.iter().find(|(k, _)| k == requested) {
            return (t, false);
        }
        if self.model_map.is_empty() || self.names_baton_target(requested) {
            return (requested, false);
        }
        match self
            .model_map
            .iter()
            .find(|(k, _)| k.contains('*') && glob_match(k, requested))
        {
            Some((_, t)) => (t, true),
            None => (requested, false),
        }
    }

    /// Whether the name is one of Baton's own: `auto`, a route, a provider, `provider/model`.
    fn names_baton_target(&self, name: &str) -> bool {
        name == "auto"
            || self.routes.contains_key(name)
            || self.provider(name).is_some()
            || name
                .split_once('/')
                .is_some_and(|(h, m)| !m.is_empty() && self.provider(h).is_some())
    }

    /// The candidates for a client's model name, `modelMap` applied. When a glob (`claude-*`)
    /// maps a name that some providers serve — by that name, under their own id for it
    /// (`serves`: the same model on Bedrock), or any name (`"*"`: a subscription passed
    /// through) — those providers serve that very model first, by priority, and the glob's
    /// target follows (without their providers again): at their cap the request fails over to
    /// the rest instead of "every candidate is rate-limited".
    pub fn resolve_requested(
        &self,
        requested: &str,
    ) -> Result<(Vec<Target>, Selection), ResolveError> {
        let (mapped, by_glob) = self.mapping(requested);
        let listed: Vec<Target> = if by_glob {
            self.enabled()
                .filter_map(|p| {
                    let any = || p.models.iter().find(|m| m.id == "*");
                    p.model(requested).or_else(any).map(|m| Target {
                        provider: p.clone(),
                        model: m.clone(),
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        // Only a provider that serves the name by itself makes the glob's target wait.
        let named = listed.iter().any(|t| t.model.id != "*");
        match self.resolve(mapped) {
            Ok((rest, selection)) if named => {
                let mut out = listed;
                let first: std::collections::HashSet<String> =
                    out.iter().map(|t| t.provider.id().to_string()).collect();
                out.extend(
                    rest.into_iter()
                        .filter(|t| !first.contains(t.provider.id())),
                );
                Ok((out, selection))
            }
            Err(_) if named => Ok((listed, Selection::ModelName)),
            other => other,
        }
    }

    /// Whether a broken stream for this requested model may resume on another candidate.
    /// Whether the candidates for `requested` go fastest first: a route that says so, or
    /// `auto` when `routing.order` does.
    pub fn orders_by_speed(&self, selection: Selection, requested: &str) -> bool {
        use crate::config::Order;
        match selection {
            Selection::Auto => self.routing.order == Order::Speed,
            Selection::Route => self
                .routes
                .get(requested)
                .is_some_and(|r| r.order() == Order::Speed),
            _ => false,
        }
    }

    /// Whether requests routed this way are hedged (`routing.hedge`): a route's own `hedge`,
    /// else `routing.hedge.enabled` for `auto`, routes and a model several providers serve; a
    /// request pinned to a provider is hedged only when that provider says so.
    pub fn hedging(&self, selection: Selection, requested: &str) -> bool {
        let on = self.routing.hedge.enabled;
        match selection {
            Selection::Auto | Selection::ModelName => on,
            Selection::Route => self
                .routes
                .get(requested)
                .map_or(on, |r| r.hedge().unwrap_or(on)),
            _ => false,
        }
    }

    pub fn resumes_on_break(&self, requested: &str) -> bool {
        self.routes
            .get(requested)
            .is_some_and(RouteConfig::resume_on_break)
    }

    pub fn provider(&self, id: &str) -> Option<&Arc<ProviderEntry>> {
        self.providers.iter().find(|p| p.id() == id)
    }

    pub fn enabled(&self) -> impl Iterator<Item = &Arc<ProviderEntry>> {
        self.providers.iter().filter(|p| p.config.enabled)
    }

    /// Every name a client may put in `model`, for `/v1/models` and error messages.
    pub fn model_names(&self) -> Vec<String> {
        let mut names = vec!["auto".to_string()];
        names.extend(self.routes.keys().cloned());
        for p in self.enabled() {
            names.push(p.id().to_string());
            // `*` is not a name a client can send.
            names.extend(
                p.models
                    .iter()
                    .filter(|m| m.id != "*")
                    .map(|m| format!("{}/{}", p.id(), m.id)),
            );
        }
        names
    }

    /// Turns a requested model name into an ordered, de-duplicated candidate list.
    /// A provider that serves any model (`"*"`, with the client's own credential) serves the
    /// name the client sent; it sits out a request for `auto`, a route or the provider itself,
    /// which name none (`provider/model` names one).
    pub fn name_any_model(&self, targets: Vec<Target>, requested: &str) -> Vec<Target> {
        // `auto`, a route or a provider's id names no model.
        if !targets.iter().any(|t| t.model.id == "*") {
            return targets;
        }
        let named = requested != "auto"
            && !self.routes.contains_key(requested)
            && self.provider(requested).is_none();
        targets
            .into_iter()
            .filter_map(|mut t| {
                if t.model.id != "*" {
                    return Some(t);
                }
                named.then(|| {
                    Arc::make_mut(&mut t.model).id = requested.to_string();
                    t
                })
            })
            .collect()
    }

    pub fn resolve(&self, requested: &str) -> Result<(Vec<Target>, Selection), ResolveError> {
        let mut out = Vec::new();
        let selection = if requested == "auto" {
            self.push_auto(&mut out);
            Selection::Auto
        } else if self.routes.contains_key(requested) {
            self.push_route(requested, &mut out, 0);
            Selection::Route
        } else if let Some(p) = self.provider(requested) {
            self.check_enabled(p)?;
            push_provider(p, &mut out);
            Selection::Provider
        } else if let Some((head, model)) = requested
            .split_once('/')
            .filter(|(h, m)| !m.is_empty() && self.provider(h).is_some())
        {
            let p = self.provider(head).ok_or_else(|| self.unknown(requested))?;
            self.check_enabled(p)?;
            out.push(Target {
                provider: p.clone(),
                model: p.model_or_default(model),
            });
            Selection::Pinned
        } else {
            for p in self.enabled() {
                if let Some(m) = p.model(requested) {
                    out.push(Target {
                        provider: p.clone(),
                        model: m.clone(),
                    });
                }
            }
            if out.is_empty() {
                return Err(self.unknown(requested));
            }
            Selection::ModelName
        };
        // Only a route can name a target twice (an entry and a nested route, `auto` among its
        // entries): a provider is listed once and its models once each (the config's checks).
        if matches!(selection, Selection::Route) {
            dedupe(&mut out);
        }
        Ok((out, selection))
    }

    fn check_enabled(&self, p: &ProviderEntry) -> Result<(), ResolveError> {
        if p.config.enabled {
            Ok(())
        } else {
            Err(ResolveError::Disabled(format!(
                "The provider `{}` is disabled; enable it or use \"auto\"",
                p.id()
            )))
        }
    }

    fn unknown(&self, requested: &str) -> ResolveError {
        let names = self.model_names();
        let shown: Vec<&str> = names.iter().take(40).map(String::as_str).collect();
        let more = names.len().saturating_sub(shown.len());
        ResolveError::UnknownModel {
            requested: requested.to_string(),
            available: if more > 0 {
                format!("{} (and {more} more: GET /v1/models)", shown.join(", "))
            } else {
                shown.join(", ")
            },
            fix: client_name_fix(requested),
        }
    }

    fn push_auto(&self, out: &mut Vec<Target>) {
        out.extend_from_slice(&self.auto);
    }

    fn push_route(&self, name: &str, out: &mut Vec<Target>, depth: usize) {
        let Some(entries) = self.routes.get(name).map(RouteConfig::targets) else {
            return;
        };
        if depth > 8 {
            return;
        }
        for e in entries {
            if e == "auto" {
                self.push_auto(out);
            } else if let Some(p) = self.provider(e) {
                if p.config.enabled {
                    push_provider(p, out);
                }
            } else if self.routes.contains_key(e.as_str()) {
                self.push_route(e, out, depth + 1);
            } else if let Some((head, model)) = e.split_once('/') {
                if let Some(p) = self.provider(head).filter(|p| p.config.enabled) {
                    out.push(Target {
                        provider: p.clone(),
                        model: p.model_or_default(model),
                    });
                }
            }
        }
    }
}

/// Keeps the first of each provider and model (a route may name one twice): borrowed keys, no
/// allocation per target, whatever the number of providers.
fn dedupe(out: &mut Vec<Target>) {
    if out.len() < 2 {
        return;
    }
    let keep: Vec<bool> = {
        let mut seen = std::collections::HashSet::with_capacity(out.len());
        out.iter()
            .map(|t| seen.insert((Arc::as_ptr(&t.provider), t.model.id.as_str())))
            .collect()
    };
    let mut flags = keep.into_iter();
    out.retain(|_| flags.next().unwrap_or(true));
}

fn push_provider(p: &Arc<ProviderEntry>, out: &mut Vec<Target>) {
    for m in &p.models {
        out.push(Target {
            provider: p.clone(),
            model: m.clone(),
        });
    }
}

/// `*` matches any run of characters; everything else literally.
/// For a name an agent asks for on its own (Claude Code's `claude-…`, Codex's `gpt-…`, Gemini
/// CLI's `gemini-…`): how to send those names somewhere, as the 404 says it.
fn client_name_fix(requested: &str) -> String {
    let (client, glob) = match requested {
        r if r.starts_with("claude-") => ("Claude Code", "claude-*"),
        r if r.starts_with("gpt-") || r.starts_with("codex-") => ("Codex", "gpt-*"),
        r if r.starts_with("gemini-") => ("Gemini CLI", "gemini-*"),
        _ => return String::new(),
    };
    format!(" To send {client}'s model names to your providers, use \"Map {client}'s names\" on Baton's Connect screen, or add \"{glob}\": \"auto\" to modelMap.")
}

fn glob_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("claude-*", "claude-sonnet-4-5-20250929"));
        assert!(glob_match("claude-haiku-*", "claude-haiku-4-5"));
        assert!(!glob_match("claude-haiku-*", "claude-sonnet-4-5"));
        assert!(glob_match("*-mini", "gpt-4o-mini"));
        assert!(glob_match("a*b*c", "a-x-b-y-c"));
        assert!(!glob_match("a*b*c", "a-x-c"));
        assert!(glob_match("*", "anything"));
    }
}
