//! Gemini `generateContent` <-> canonical model: requests, answers and streamed chunks.

pub mod schema;

use std::num::NonZeroUsize;
use std::sync::{Mutex, OnceLock};

use serde_json::{json, Map, Value};

use super::{ChatRequest, ChatResponse, Part, Role, StopReason, StreamEvent, Usage};

/// The thought signature Google documents for a function call whose own signature is not at
/// hand (a turn another provider made, or one from before a restart): Gemini 3 refuses a
/// current turn's function call without a signature ("missing a thought_signature").
pub const NO_SIGNATURE: &str = "skip_thought_signature_validator";

/// How many function calls' thought signatures are remembered.
const SIGNATURES: usize = 20_000;

/// The thought signatures Gemini put on its function calls, and the model that made each, by
/// the id Baton gave the call (the client sends the id back, never the signature). Bounded; the
/// oldest are forgotten, and a forgotten one, or one going to another model, is sent as
/// [`NO_SIGNATURE`].
fn signatures() -> &'static Mutex<lru::LruCache<String, (String, String)>> {
    static BOOK: OnceLock<Mutex<lru::LruCache<String, (String, String)>>> = OnceLock::new();
    BOOK.get_or_init(|| {
        Mutex::new(lru::LruCache::new(
            NonZeroUsize::new(SIGNATURES).unwrap_or(NonZeroUsize::MIN),
        ))
    })
}

fn remember_signature(id: &str, signature: &str, model: &str) {
    if let Ok(mut book) = signatures().lock() {
        book.put(
            id.to_string(),
            (signature.to_string(), bare(model).to_string()),
        );
    }
}

/// The signature of call `id`, when `model` made it (a signature goes back only to its maker).
fn signature_of(id: &str, model: &str) -> Option<String> {
    let mut book = signatures().lock().ok()?;
    let (sig, maker) = book.get(id)?;
    (maker.is_empty() || maker == bare(model)).then(|| sig.clone())
}

/// `models/gemini-3-pro` → `gemini-3-pro`.
fn bare(model: &str) -> &str {
    model.rsplit('/').next().unwrap_or(model)
}

/// A tool call id no other call has: Gemini's own when it gives one, else a fresh one (ids
/// made from a part's position repeat on every turn, and clients key tool results by id).
fn call_id(fc: &Value) -> String {
    match fc.get("id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => format!("call_{:024x}", rand::random::<u128>() >> 32),
    }
}

/// Gemini 3 models check thought signatures on function calls.
pub fn signs_calls(model: &str) -> bool {
    bare(model).starts_with("gemini-3")
}

/// Canonical request -> Gemini body: system prompt to `systemInstruction`, `assistant` to the
/// `model` role, tools to `functionDeclarations`, images to `inlineData`, tool results to
/// `functionResponse` (named after the call they answer). Long because it is one walk over the
/// messages with an arm per part kind, building the turns as it goes.
pub fn request_to_gemini(req: &ChatRequest, model: &str) -> Map<String, Value> {
    let signed = signs_calls(model);
    let mut body = Map::new();
    let system = req.system.join("\n\n");
    if !system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }
    // Tool results only carry the call id; Gemini wants the function's name.
    let names: Vec<(&str, &str)> = req
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match p {
            Part::ToolCall { id, name, .. } => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    let mut contents: Vec<(String, Vec<Value>)> = Vec::new();
    for m in &req.messages {
        let role = if m.role == Role::Assistant {
            "model"
        } else {
            "user"
        };
        let parts: Vec<Value> = m
            .content
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) if !t.is_empty() => Some(json!({"text": t})),
                Part::Text(_) => None,
                Part::Image { url, .. } => Some(match url.strip_prefix("data:").and_then(|r| r.split_once(";base64,")) {
                    Some((mime, data)) => json!({"inlineData": {"mimeType": mime, "data": data}}),
                    None => json!({"fileData": {"fileUri": url}}),
                }),
                Part::ToolCall { id, name, arguments } => {
                    let mut part = json!({"functionCall": {"name": name,
                        "args": serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!({}))}});
                    // The signature Gemini gave this call goes back with it; a model that
                    // checks them gets the documented stand-in for one it did not make.
                    match signature_of(id, model) {
                        Some(sig) => part["thoughtSignature"] = json!(sig),
                        None if signed => part["thoughtSignature"] = json!(NO_SIGNATURE),
                        None => {}
                    }
                    Some(part)
                }
                Part::ToolResult { call_id, content } => {
                    let name = names.iter().find(|(id, _)| id == call_id).map_or(call_id.as_str(), |(_, n)| n);
                    Some(json!({"functionResponse": {"name": name, "response": {"content": content}}}))
                }
                // Reasoning is the answering model's, not part of the conversation sent on.
                Part::Reasoning(_) | Part::WebSearch(_) => None,
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((r, p)) if r == role => p.extend(parts),
            _ => contents.push((role.to_string(), parts)),
        }
    }
    body.insert(
        "contents".into(),
        Value::Array(
            contents
                .into_iter()
                .map(|(role, parts)| json!({"role": role, "parts": parts}))
                .collect(),
        ),
    );
    if !req.tools.is_empty() {
        let decls: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                // `parameters` takes only Gemini's OpenAPI-subset `Schema`; the JSON Schema
                // that clients write (additionalProperties, $schema, const…) goes here.
                let mut d = json!({"name": t.name,
                    "parametersJsonSchema": schema::for_gemini(&t.parameters)});
                if let Some(desc) = &t.description {
                    d["description"] = json!(desc);
                }
                d
            })
            .collect();
        body.insert("tools".into(), json!([{"functionDeclarations": decls}]));
        if let Some(tc) = &req.tool_choice {
            body.insert("toolConfig".into(), tc.to_gemini());
        }
    }
    let mut cfg = Map::new();
    if let Some(n) = req.max_tokens {
        cfg.insert("maxOutputTokens".into(), json!(n));
    }
    if let Some(t) = req.temperature {
        cfg.insert("temperature".into(), json!(t));
    }
    if let Some(p) = req.top_p {
        cfg.insert("topP".into(), json!(p));
    }
    if !req.stop.is_empty() {
        cfg.insert("stopSequences".into(), json!(req.stop));
    }
    if let Some(f) = &req.output {
        f.to_gemini(&mut cfg);
    }
    if !cfg.is_empty() {
        body.insert("generationConfig".into(), Value::Object(cfg));
    }
    body
}

fn stop_from_gemini(s: &str, has_calls: bool) -> StopReason {
    match s {
        _ if has_calls => StopReason::ToolCalls,
        "STOP" => StopReason::Stop,
        "MAX_TOKENS" => StopReason::Length,
        "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" => {
            StopReason::ContentFilter
        }
        other => StopReason::Other(other.to_ascii_lowercase()),
    }
}

pub fn usage_from_gemini(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("promptTokenCount"),
        output_tokens: n("candidatesTokenCount") + n("thoughtsTokenCount"),
        cached_input_tokens: n("cachedContentTokenCount"),
        cache_write_tokens: 0,
    }
}

/// Gemini answer -> canonical (first candidate).
pub fn response_from_gemini(v: &Value) -> Option<ChatResponse> {
    let cand = v.get("candidates")?.get(0)?;
    let mut content = Vec::new();
    for p in super::at(cand, &["content", "parts"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            // A thought summary (`includeThoughts`) is the model's reasoning, not its answer.
            if p.get("thought").and_then(Value::as_bool) == Some(true) {
                content.push(Part::Reasoning(t.to_string()));
            } else {
                content.push(Part::Text(t.to_string()));
            }
        }
        if let Some(fc) = p.get("functionCall") {
            let id = call_id(fc);
            if let Some(sig) = p.get("thoughtSignature").and_then(Value::as_str) {
                let maker = v.get("modelVersion").and_then(Value::as_str).unwrap_or("");
                remember_signature(&id, sig, maker);
            }
            content.push(Part::ToolCall {
                id,
                name: fc
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                arguments: fc.get("args").map_or_else(|| "{}".into(), Value::to_string),
            });
        }
    }
    let has_calls = content.iter().any(|p| matches!(p, Part::ToolCall { .. }));
    Some(ChatResponse {
        id: v
            .get("responseId")
            .and_then(Value::as_str)
            .unwrap_or("gemini")
            .to_string(),
        model: v
            .get("modelVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        created: 0,
        stop: cand
            .get("finishReason")
            .and_then(Value::as_str)
            .map(|r| stop_from_gemini(r, has_calls)),
        content,
        usage: v.get("usageMetadata").map(usage_from_gemini),
    })
}

/// Streamed Gemini chunks -> canonical events. Gemini repeats `usageMetadata` on every chunk
/// (the prompt's count at once, the answer's growing): it becomes one `Usage` event, the
/// last one, with the finish — a client that sums usage chunks counts the prompt once.
#[derive(Default)]
pub struct StreamDecoder {
    calls: u32,
    usage: Option<Usage>,
    usage_sent: bool,
}

impl StreamDecoder {
    pub fn push(&mut self, v: &Value) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        let Some(resp) = response_from_gemini(v) else {
            // A trailing usage-only chunk, after the finish.
            if let (Some(u), false) = (v.get("usageMetadata"), self.usage_sent) {
                self.usage_sent = true;
                out.push(StreamEvent::Usage(usage_from_gemini(u)));
            }
            return out;
        };
        for p in resp.content {
            match p {
                Part::Text(t) if !t.is_empty() => out.push(StreamEvent::TextDelta(t)),
                Part::Reasoning(t) if !t.is_empty() => out.push(StreamEvent::ReasoningDelta(t)),
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    let index = self.calls;
                    self.calls += 1;
                    out.push(StreamEvent::ToolCallStart { index, id, name });
                    out.push(StreamEvent::ToolCallDelta { index, arguments });
                }
                _ => {}
            }
        }
        if resp.usage.is_some() {
            self.usage = resp.usage;
        }
        if let Some(r) = resp.stop {
            let r = if self.calls > 0 {
                StopReason::ToolCalls
            } else {
                r
            };
            out.push(StreamEvent::Finish(r));
            if let (Some(u), false) = (self.usage.take(), self.usage_sent) {
                self.usage_sent = true;
                out.push(StreamEvent::Usage(u));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{Message, Tool};

    #[test]
    fn requests_and_answers_map_both_ways() {
        let req = ChatRequest {
            system: vec!["be brief".into()],
            messages: vec![
                Message {
                    role: Role::User,
                    content: vec![
                        Part::Text("weather?".into()),
                        Part::Image {
                            url: "data:image/png;base64,AAAA".into(),
                            detail: None,
                        },
                    ],
                    name: None,
                },
                Message {
                    role: Role::Assistant,
                    content: vec![Part::ToolCall {
                        id: "c1".into(),
                        name: "get".into(),
                        arguments: "{\"city\":\"Paris\"}".into(),
                    }],
                    name: None,
                },
                Message {
                    role: Role::Tool,
                    content: vec![Part::ToolResult {
                        call_id: "c1".into(),
                        content: "18 C".into(),
                    }],
                    name: None,
                },
            ],
            tools: vec![Tool {
                name: "get".into(),
                description: None,
                parameters: json!({"type": "object"}),
                freeform: None,
            }],
            max_tokens: Some(50),
            ..ChatRequest::default()
        };
        let b = request_to_gemini(&req, "gemini-2.5-pro");
        assert_eq!(
            b["systemInstruction"],
            json!({"parts": [{"text": "be brief"}]})
        );
        assert_eq!(
            b["contents"][0]["parts"][1],
            json!({"inlineData": {"mimeType": "image/png", "data": "AAAA"}})
        );
        assert_eq!(
            b["contents"][1],
            json!({"role": "model", "parts": [{"functionCall": {"name": "get", "args": {"city": "Paris"}}}]})
        );
        assert_eq!(
            b["contents"][2]["parts"][0]["functionResponse"]["name"],
            "get"
        );
        assert_eq!(b["tools"][0]["functionDeclarations"][0]["name"], "get");
        assert_eq!(b["generationConfig"]["maxOutputTokens"], 50);

        let v = json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "get", "args": {"city": "Paris"}}}]},
            "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2}});
        let r = response_from_gemini(&v).expect("answer");
        assert_eq!(r.stop, Some(StopReason::ToolCalls));
        assert_eq!(
            r.usage.map(|u| (u.input_tokens, u.output_tokens)),
            Some((5, 2))
        );
    }
}
