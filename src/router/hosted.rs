//! Hosted web search on a translated route. A client that declared its API's hosted search
//! (Claude Code's `WebSearch` asks Anthropic's `web_search_*` server tool, Codex the Responses
//! `web_search`, Gemini CLI `googleSearch`) keeps it on an upstream of its own API, which runs
//! it. On any other upstream Baton runs it: the model gets an ordinary `web_search` function,
//! each call it makes is searched through the configured service (`search/`), the results go
//! back to the model, and the model is asked again, until it answers without searching. The
//! client gets one answer with its API's own search blocks (`Part::WebSearch`), streamed if it
//! asked for a stream. With no service set up the model is told search is unavailable, and why.
//!
//! The rounds go to the one target the router picked (a failure fails the attempt over as any
//! other would); each is a complete answer, so the stream the client sees starts once the
//! last round is in.

use crate::canonical::search::{self, SearchRun, WebSearch};
use crate::canonical::{
    ChatRequest, ChatResponse, Message, Part, Role, StopReason, StreamEvent, ToolChoice, Usage,
};
use crate::providers::codec::Decoded;
use crate::providers::kinds;
use crate::providers::ApiKey;

use super::context::Routing;
use super::snapshot::Target;
use super::stream::source::Source;
use super::types::{Answer, Attempt, Held, Inbound, Reply};

/// Searches one answer may run when the client set no `max_uses`.
const DEFAULT_MAX_USES: u32 = 5;
/// Rounds past which the model is not asked again (a model that keeps calling a failing
/// search must still end).
const MAX_ROUNDS: u32 = 12;

/// Whether Baton runs the request's hosted search on this target: it asked for one, and the
/// target is no upstream of the client's own API (which runs it itself).
pub(super) fn serves(t: &Target, inbound: &Inbound) -> bool {
    inbound.canonical.web_search.is_some()
        && t.provider.config.kind.wire() != inbound.original.as_ref().map(|o| o.wire)
}

/// One attempt at `t` with Baton running the searches.
pub(super) async fn attempt(
    routing: &Routing,
    t: &Target,
    key: Option<&ApiKey>,
    inbound: &Inbound,
    request_id: &str,
) -> Attempt {
    let service = routing.snapshot.load().web_search.clone();
    let mut inner = inbound.clone();
    // Translated from the canonical request: the client's own body (with its hosted tool) is
    // for upstreams of its API only.
    inner.original = None;
    let opts = inner.canonical.web_search.take().unwrap_or_default();
    let why = if opts.live {
        super::searcher::unavailable(routing, &service)
    } else {
        Some("the client allows cached results only (`external_web_access: false`; Codex's default `web_search = \"cached\"`), an index only OpenAI has; with `web_search = \"live\"` Baton searches through its service".to_string())
    };
    if let Some(why) = why {
        tracing::info!(request_id, provider = %t.provider.id(), "web search unavailable: {why}");
        inner.canonical.system.push(format!(
            "The web search tool is unavailable here: {why}. Answer from what you know, and tell the user that you could not search the web."
        ));
        // A choice of the search tool (Claude Code's WebSearch forces it) names no tool now,
        // and one of any tool has none to choose when the client declared no other.
        let none_left = inner.canonical.tools.is_empty();
        lift_forced_search(&mut inner.canonical, none_left);
        inner.openai = Default::default();
        return Box::pin(super::attempt::attempt(routing, t, key, &inner, request_id)).await;
    }
    let client_stream = inner.canonical.stream;
    inner.canonical.stream = false;
    inner.canonical.stream_usage = false;
    inner.canonical.tools.push(opts.tool());
    let rounds = Rounds {
        opts,
        content: Vec::new(),
        usage: None,
        searches: 0,
    };
    let answer = match rounds
        .run(routing, t, key, inner, request_id, &service)
        .await
    {
        Ok(a) => ChatResponse {
            id: request_id.to_string(),
            model: t.model.id.clone(),
            ..a
        },
        Err(failed) => return failed,
    };
    if !client_stream {
        let usage = answer.usage;
        return Attempt::Served(Answer::Complete(Reply::Canonical(answer), usage, None));
    }
    Attempt::Served(Answer::Stream {
        source: Source::Finished,
        prelude: events(answer)
            .into_iter()
            .map(|e| Held {
                raw: bytes::Bytes::new(),
                decoded: Decoded::from_events(vec![e]),
            })
            .collect(),
    })
}

/// The answers so far and what they searched.
struct Rounds {
    opts: WebSearch,
    /// The answer's content before the last round: each round's text and its searches.
    content: Vec<Part>,
    usage: Option<Usage>,
    searches: u32,
}

impl Rounds {
    /// Asks the model, runs the searches it calls for, and asks again with their results,
    /// until it answers without searching: the whole answer, or the attempt that failed.
    async fn run(
        mut self,
        routing: &Routing,
        t: &Target,
        key: Option<&ApiKey>,
        mut inner: Inbound,
        request_id: &str,
        service: &crate::search::Service,
    ) -> Result<ChatResponse, Attempt> {
        loop {
            // Made again from the canonical request, if an upstream needs it.
            inner.openai = Default::default();
            let answer = match Box::pin(super::attempt::attempt(
                routing, t, key, &inner, request_id,
            ))
            .await
            {
                Attempt::Served(Answer::Complete(reply, usage, _)) => {
                    let answer = match reply {
                        Reply::Canonical(a) => Some(a),
                        Reply::Wire(body, wire) => kinds::answer_from(wire, &body),
                    };
                    let Some(a) = answer else {
                        return Err(malformed());
                    };
                    self.add_usage(usage.or(a.usage));
                    a
                }
                other => return Err(other),
            };
            let calls = search_calls(&answer);
            if calls.is_empty() || self.rounds_over() {
                return Ok(self.finish(answer));
            }
            let others = answer
                .content
                .iter()
                .any(|p| matches!(p, Part::ToolCall { name, .. } if name != search::TOOL));
            let runs = self.search(&calls, service, routing, request_id).await;
            if others {
                // The client's own tools were called too: they run on its side, so the answer
                // goes back now, searches and all; the client's next turn carries the results.
                return Ok(self.finish_with_calls(answer, runs));
            }
            inner.canonical.messages.push(Message {
                role: Role::Assistant,
                content: answer.content.clone(),
                name: None,
            });
            // A choice that forced the search held for the first answer; with results in hand
            // the model decides (as Anthropic's own server tool loop does).
            lift_forced_search(&mut inner.canonical, true);
            inner.canonical.messages.push(Message {
                role: Role::Tool,
                content: runs
                    .iter()
                    .zip(&calls)
                    .map(|(r, (call_id, _))| Part::ToolResult {
                        call_id: call_id.clone(),
                        content: r.for_model(),
                    })
                    .collect(),
                name: None,
            });
            self.keep(answer, runs);
        }
    }

    fn add_usage(&mut self, u: Option<Usage>) {
        let Some(u) = u else { return };
        let t = self.usage.get_or_insert_with(Usage::default);
        t.input_tokens += u.input_tokens;
        t.output_tokens += u.output_tokens;
        t.cached_input_tokens += u.cached_input_tokens;
        t.cache_write_tokens += u.cache_write_tokens;
    }

    fn rounds_over(&self) -> bool {
        self.searches >= MAX_ROUNDS
    }

    fn max_uses(&self) -> u32 {
        self.opts.max_uses.unwrap_or(DEFAULT_MAX_USES)
    }

    /// The searches one answer asked for, each within the client's `max_uses`.
    async fn search(
        &mut self,
        calls: &[(String, String)],
        service: &crate::search::Service,
        routing: &Routing,
        request_id: &str,
    ) -> Vec<SearchRun> {
        let mut runs = Vec::new();
        for (_, arguments) in calls {
            let id = random_id();
            self.searches += 1;
            let query = search::query_of(arguments);
            let run = match query {
                Err(e) => SearchRun {
                    id,
                    query: String::new(),
                    hits: Vec::new(),
                    error: Some(e),
                },
                Ok(q) if self.searches > self.max_uses() => SearchRun {
                    id,
                    query: q,
                    hits: Vec::new(),
                    error: Some(search::SearchError {
                        code: "max_uses_exceeded",
                        message: format!(
                            "this answer may search {} times; answer with what was found",
                            self.max_uses()
                        ),
                    }),
                },
                Ok(q) => {
                    super::searcher::search(routing, service, id, q, &self.opts, request_id).await
                }
            };
            match &run.error {
                Some(e) => tracing::info!(
                    request_id,
                    code = e.code,
                    "web search failed: {}",
                    e.message
                ),
                None => tracing::debug!(request_id, hits = run.hits.len(), "web search"),
            }
            runs.push(run);
        }
        runs
    }

    /// A round that searched: its text, then its searches, join the answer.
    fn keep(&mut self, answer: ChatResponse, runs: Vec<SearchRun>) {
        self.content.extend(answer.content.into_iter().filter(|p| {
            matches!(p, Part::Text(t) if !t.is_empty()) || matches!(p, Part::Reasoning(_))
        }));
        self.content.extend(runs.into_iter().map(Part::WebSearch));
    }

    /// The last round: the rounds before it, then its content.
    fn finish(mut self, answer: ChatResponse) -> ChatResponse {
        self.content.extend(answer.content.into_iter().filter(|p| {
            // A search call past the last round has no result to show: left out.
            !matches!(p, Part::ToolCall { name, .. } if name == search::TOOL)
        }));
        let stop = match answer.stop {
            Some(StopReason::ToolCalls)
                if !self
                    .content
                    .iter()
                    .any(|p| matches!(p, Part::ToolCall { .. })) =>
            {
                Some(StopReason::Stop)
            }
            s => s,
        };
        ChatResponse {
            content: self.content,
            stop,
            usage: self.usage,
            ..answer
        }
    }

    /// A round that searched and called the client's tools: its text and searches, then its
    /// other calls, for the client to run.
    fn finish_with_calls(mut self, answer: ChatResponse, runs: Vec<SearchRun>) -> ChatResponse {
        let (calls, rest): (Vec<Part>, Vec<Part>) = answer
            .content
            .iter()
            .cloned()
            .partition(|p| matches!(p, Part::ToolCall { .. }));
        self.keep(
            ChatResponse {
                content: rest,
                ..answer.clone()
            },
            runs,
        );
        self.content.extend(
            calls
                .into_iter()
                .filter(|p| !matches!(p, Part::ToolCall { name, .. } if name == search::TOOL)),
        );
        ChatResponse {
            content: self.content,
            stop: Some(StopReason::ToolCalls),
            usage: self.usage,
            ..answer
        }
    }
}

/// Lifts a tool choice that forces the search by name, and one that forces any call when
/// `required` too: the model decides.
fn lift_forced_search(req: &mut ChatRequest, required: bool) {
    let forced = match &req.tool_choice {
        Some(ToolChoice::Tool(n)) => n == search::TOOL,
        Some(ToolChoice::Required) => required,
        _ => false,
    };
    if forced {
        req.tool_choice = None;
    }
}

/// The search calls in an answer: (call id, arguments).
fn search_calls(a: &ChatResponse) -> Vec<(String, String)> {
    a.content
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall {
                id,
                name,
                arguments,
            } if name == search::TOOL => Some((id.clone(), arguments.clone())),
            _ => None,
        })
        .collect()
}

fn malformed() -> Attempt {
    Attempt::Failed {
        classified: crate::limits::classify_transport("the provider's answer could not be read"),
        status: None,
        body: None,
    }
}

fn random_id() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 24)
}

/// A complete answer as the events of a stream, in order.
fn events(a: ChatResponse) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    if let Some(u) = a.usage {
        out.push(StreamEvent::Usage(u));
    }
    let mut index = 0;
    for p in a.content {
        match p {
            Part::Text(t) => out.push(StreamEvent::TextDelta(t)),
            Part::Reasoning(t) => out.push(StreamEvent::ReasoningDelta(t)),
            Part::WebSearch(r) => out.push(StreamEvent::WebSearch(r)),
            Part::ToolCall {
                id,
                name,
                arguments,
            } => {
                out.push(StreamEvent::ToolCallStart { index, id, name });
                out.push(StreamEvent::ToolCallDelta { index, arguments });
                index += 1;
            }
            Part::Image { .. } | Part::ToolResult { .. } => {}
        }
    }
    out.push(StreamEvent::Finish(a.stop.unwrap_or(StopReason::Stop)));
    out
}
