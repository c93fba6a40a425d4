//! Hosted web search: the tool a client asks the provider to run (Anthropic's `web_search_*`
//! server tool, the Responses API's `web_search`, Gemini's `googleSearch`), what one search
//! found, and how both look in each API. On an upstream of the client's own API the tool passes
//! through untouched; anywhere else Baton runs it (`router/hosted.rs`): the model sees an
//! ordinary function [`TOOL`], the client its API's own search blocks.

use base64::Engine as _;
use serde_json::{json, Map, Value};

pub use super::web::{SearchError, SearchHit, SearchRun, WebSearch};
use super::{Part, Tool};

/// The function a translated upstream's model calls to search.
pub const TOOL: &str = "web_search";

/// The longest query passed to a search service (Anthropic refuses longer ones too).
const MAX_QUERY: usize = 500;

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

impl WebSearch {
    /// Whether an Anthropic tool is the web search server tool (`web_search_20250305`, …).
    pub fn is_anthropic(tool: &Value) -> bool {
        tool.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("web_search_"))
    }

    /// Anthropic's server tool, when the request declares it.
    pub fn from_anthropic(body: &Map<String, Value>) -> Option<Self> {
        let t = body
            .get("tools")?
            .as_array()?
            .iter()
            .find(|t| Self::is_anthropic(t))?;
        Some(Self {
            live: true,
            max_uses: t
                .get("max_uses")
                .and_then(Value::as_u64)
                .map(|n| n.min(u32::MAX as u64) as u32),
            allowed_domains: strings(t.get("allowed_domains")),
            blocked_domains: strings(t.get("blocked_domains")),
        })
    }

    /// Whether a Responses tool is the hosted web search (`web_search`, `web_search_preview`
    /// and their dated names).
    pub fn is_responses(tool: &Value) -> bool {
        tool.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t == TOOL || t.starts_with("web_search_"))
    }

    /// The Responses tool's options.
    pub fn from_responses(tool: &Value) -> Self {
        Self {
            live: tool.get("external_web_access").and_then(Value::as_bool) != Some(false),
            allowed_domains: strings(tool.get("filters").and_then(|f| f.get("allowed_domains"))),
            ..Self::default()
        }
    }

    /// The function the model sees instead of the hosted tool.
    pub fn tool(&self) -> Tool {
        let mut description = "Search the web for current information. Returns numbered results with title, URL, age and an excerpt; cite the ones you use as [n].".to_string();
        if !self.allowed_domains.is_empty() {
            description.push_str(&format!(
                " Only these domains are searched: {}.",
                self.allowed_domains.join(", ")
            ));
        }
        Tool {
            name: TOOL.to_string(),
            description: Some(description),
            parameters: json!({"type": "object",
                "properties": {"query": {"type": "string", "description": "The search query."}},
                "required": ["query"], "additionalProperties": false}),
            freeform: None,
        }
    }

    /// Whether a result's address passes the client's domain filters.
    pub fn permits(&self, url: &str) -> bool {
        let host = url
            .split_once("://")
            .map_or(url, |(_, rest)| rest)
            .split(['/', '?', '#', ':'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let under = |d: &String| {
            let d = d.trim().trim_start_matches("*.").to_ascii_lowercase();
            host == d || host.ends_with(&format!(".{d}"))
        };
        (self.allowed_domains.is_empty() || self.allowed_domains.iter().any(under))
            && !self.blocked_domains.iter().any(under)
    }
}

/// The query of a model's `web_search` call, or why it has none.
pub fn query_of(arguments: &str) -> Result<String, SearchError> {
    let q = serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| v.get("query").and_then(Value::as_str).map(str::to_string))
        .map(|q| q.trim().to_string())
        .filter(|q| !q.is_empty())
        .ok_or_else(|| SearchError {
            code: "invalid_tool_input",
            message: "the search call needs a non-empty string `query`".into(),
        })?;
    if q.chars().count() > MAX_QUERY {
        return Err(SearchError {
            code: "query_too_long",
            message: format!("the query is over {MAX_QUERY} characters"),
        });
    }
    Ok(q)
}

impl SearchRun {
    /// The tool result the model reads: numbered results, or why there are none.
    pub fn for_model(&self) -> String {
        if let Some(e) = &self.error {
            return format!("Web search failed ({}): {}", e.code, e.message);
        }
        if self.hits.is_empty() {
            return format!("No results for {:?}.", self.query);
        }
        let mut out = format!("Results for {:?}:\n", self.query);
        for (n, h) in self.hits.iter().enumerate() {
            out.push_str(&format!("\n[{}] {}\n{}\n", n + 1, h.title, h.url));
            if let Some(age) = &h.age {
                out.push_str(&format!("Age: {age}\n"));
            }
            if !h.snippet.is_empty() {
                out.push_str(&h.snippet);
                out.push('\n');
            }
        }
        out
    }

    /// The call as Anthropic's `server_tool_use` block.
    pub fn anthropic_call(&self) -> Value {
        json!({"type": "server_tool_use", "id": self.anthropic_id(), "name": TOOL,
            "input": {"query": self.query}})
    }

    /// The results as Anthropic's `web_search_tool_result` block. The excerpt travels in
    /// `encrypted_content` (opaque to clients, which send it back), so a later turn on a
    /// translated upstream reads the same text.
    pub fn anthropic_result(&self) -> Value {
        let content = match &self.error {
            Some(e) => json!({"type": "web_search_tool_result_error", "error_code": e.code}),
            None => Value::Array(
                self.hits
                    .iter()
                    .map(|h| {
                        json!({"type": "web_search_result", "url": h.url, "title": h.title,
                            "encrypted_content": seal(&h.snippet), "page_age": h.age})
                    })
                    .collect(),
            ),
        };
        json!({"type": "web_search_tool_result", "tool_use_id": self.anthropic_id(), "content": content})
    }

    fn anthropic_id(&self) -> String {
        format!("srvtoolu_{}", self.id)
    }

    /// The search as a Responses `web_search_call` item.
    pub fn responses_item(&self) -> Value {
        let status = if self.error.is_some() {
            "failed"
        } else {
            "completed"
        };
        let sources: Vec<Value> = self
            .hits
            .iter()
            .map(|h| json!({"type": "url", "url": h.url}))
            .collect();
        json!({"type": "web_search_call", "id": format!("ws_{}", self.id), "status": status,
            "action": {"type": "search", "query": self.query, "sources": sources}})
    }
}

/// Baton's own `encrypted_content`: the excerpt, marked as Baton's.
const SEAL: &str = "baton1:";

fn seal(snippet: &str) -> String {
    format!(
        "{SEAL}{}",
        base64::engine::general_purpose::STANDARD.encode(snippet)
    )
}

/// The excerpt in an `encrypted_content` Baton wrote; none in one a provider wrote.
fn unseal(v: &str) -> Option<String> {
    let b = base64::engine::general_purpose::STANDARD
        .decode(v.strip_prefix(SEAL)?)
        .ok()?;
    String::from_utf8(b).ok()
}

/// Whether an Anthropic block is a search Baton served (its result sealed by Baton), which an
/// Anthropic upstream could not verify.
pub fn is_bridged_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("web_search_tool_result")
        && match block.get("content") {
            Some(Value::Array(hits)) => hits.iter().any(|h| {
                h.get("encrypted_content")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.starts_with(SEAL))
            }),
            _ => false,
        }
}

/// A Messages request for an Anthropic upstream, when its history holds searches Baton ran
/// (whose sealed results Anthropic would refuse): each as text in the turn, as it read to the
/// model. `None` when there is none (the body goes as it is).
pub fn unbridge(body: &Map<String, Value>) -> Option<Map<String, Value>> {
    let messages = body.get("messages")?.as_array()?;
    let bridged = |m: &Value| {
        m.get("content")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(is_bridged_result))
    };
    if !messages.iter().any(bridged) {
        return None;
    }
    let mut out = body.clone();
    for m in out.get_mut("messages")?.as_array_mut()? {
        if !bridged(m) {
            continue;
        }
        let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        let ours: Vec<String> = blocks
            .iter()
            .filter(|b| is_bridged_result(b))
            .map(|b| super::str_at(b, "tool_use_id"))
            .collect();
        let queries: Vec<(String, String)> = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("server_tool_use"))
            .map(|b| {
                (
                    super::str_at(b, "id"),
                    b.pointer("/input/query")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        blocks.retain(|b| {
            !(b.get("type").and_then(Value::as_str) == Some("server_tool_use")
                && ours.contains(&super::str_at(b, "id")))
        });
        for b in blocks.iter_mut().filter(|b| is_bridged_result(b)) {
            let id = super::str_at(b, "tool_use_id");
            let query = queries
                .iter()
                .find(|(i, _)| *i == id)
                .map(|(_, q)| q.as_str())
                .unwrap_or_default();
            let Part::ToolResult { content, .. } = anthropic_result_part(b) else {
                continue;
            };
            let text = format!("(Web search for {query:?})\n{content}");
            *b = json!({"type": "text", "text": text});
        }
    }
    Some(out)
}

/// An Anthropic `web_search_tool_result` block in a request's history, as the result the model
/// read: titles and addresses (and the excerpts Baton sealed).
pub fn anthropic_result_part(b: &Value) -> Part {
    let content = match b.get("content") {
        Some(Value::Array(hits)) => {
            let hits: Vec<SearchHit> = hits
                .iter()
                .map(|h| SearchHit {
                    url: super::str_at(h, "url"),
                    title: super::str_at(h, "title"),
                    snippet: h
                        .get("encrypted_content")
                        .and_then(Value::as_str)
                        .and_then(unseal)
                        .unwrap_or_default(),
                    age: h
                        .get("page_age")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                })
                .collect();
            SearchRun {
                id: String::new(),
                query: String::new(),
                hits,
                error: None,
            }
            .for_model()
        }
        Some(e) => format!(
            "Web search failed ({}).",
            e.get("error_code")
                .and_then(Value::as_str)
                .unwrap_or("unavailable")
        ),
        None => "Web search returned nothing.".to_string(),
    };
    Part::ToolResult {
        call_id: super::str_at(b, "tool_use_id"),
        content,
    }
}

/// A Responses `web_search_call` input item as the call and what the model can still read of
/// its result (the sources, when the client kept them).
pub fn responses_history(item: &Value) -> (Part, Part) {
    let id = super::str_at(item, "id");
    let action = item.get("action").unwrap_or(&Value::Null);
    let query = action
        .get("query")
        .and_then(Value::as_str)
        .or_else(|| action.get("url").and_then(Value::as_str))
        .unwrap_or_default();
    let sources: Vec<&str> = action
        .get("sources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("url").and_then(Value::as_str))
        .collect();
    let result = if super::str_at(item, "status") == "failed" {
        "Web search failed.".to_string()
    } else if sources.is_empty() {
        "The search ran; its results are not kept in this conversation.".to_string()
    } else {
        format!("Sources found:\n{}", sources.join("\n"))
    };
    (
        Part::ToolCall {
            id: id.clone(),
            name: TOOL.to_string(),
            arguments: json!({ "query": query }).to_string(),
        },
        Part::ToolResult {
            call_id: id,
            content: result,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_filters_match_the_host_and_its_subdomains_only() {
        let w = WebSearch {
            allowed_domains: vec!["rust-lang.org".into()],
            blocked_domains: vec!["blog.rust-lang.org".into()],
            ..WebSearch::default()
        };
        assert!(w.permits("https://doc.rust-lang.org/std/"));
        assert!(w.permits("https://rust-lang.org"));
        assert!(!w.permits("https://blog.rust-lang.org/2026/"));
        assert!(!w.permits("https://evil-rust-lang.org/"));
        assert!(!w.permits("https://example.com/?rust-lang.org"));
    }

    #[test]
    fn a_sealed_excerpt_comes_back_and_a_providers_does_not_decode() {
        let run = SearchRun {
            id: "1".into(),
            query: "q".into(),
            hits: vec![SearchHit {
                url: "https://a.example/".into(),
                title: "A".into(),
                snippet: "the excerpt".into(),
                age: None,
            }],
            error: None,
        };
        let block = run.anthropic_result();
        assert!(is_bridged_result(&block));
        let Part::ToolResult { content, call_id } = anthropic_result_part(&block) else {
            panic!()
        };
        assert_eq!(call_id, "srvtoolu_1");
        assert!(content.contains("the excerpt") && content.contains("https://a.example/"));
        let theirs = json!({"type": "web_search_tool_result", "tool_use_id": "x",
            "content": [{"type": "web_search_result", "url": "u", "title": "t", "encrypted_content": "EqgfCioIARgBIiQ3"}]});
        assert!(!is_bridged_result(&theirs));
    }

    #[test]
    fn queries_are_checked_as_anthropic_checks_them() {
        assert_eq!(query_of(r#"{"query":" rust 2026 "}"#).unwrap(), "rust 2026");
        assert_eq!(query_of("{}").unwrap_err().code, "invalid_tool_input");
        let long = json!({"query": "x".repeat(501)}).to_string();
        assert_eq!(query_of(&long).unwrap_err().code, "query_too_long");
    }
}
