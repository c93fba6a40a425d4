//! Token counts a client can trust. Clients decide when to compact a conversation by its count,
//! and routing decides by it whether a model's context window can take a request: a count that
//! is low overflows the window, one that is high throws history away early.
//!
//! In order of trust: the provider's own count (Anthropic's `count_tokens`, Gemini's
//! `countTokens`, asked by `api::anthropic::count_tokens`); OpenAI's own tokenizer for OpenAI's
//! models (`tiktoken-rs`: `o200k_base` for GPT-4o and later, `cl100k_base` before), counted the way
//! the Chat Completions API counts a request; and, for every other model, an estimate
//! calibrated on a corpus of code, prose in four languages and tool schemas
//! (`tests/fixtures/tokens`): about four bytes a token for ASCII text, one token per other
//! character. The estimate is said to be one wherever it is shown.

use tiktoken_rs::CoreBPE;

use crate::canonical::{ChatRequest, Part, Role};

/// How a count was made, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// The provider counted it.
    Provider,
    /// OpenAI's tokenizer, for an OpenAI model.
    Tokenizer,
    /// The calibrated estimate.
    Estimate,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Provider => "provider",
            Method::Tokenizer => "tokenizer",
            Method::Estimate => "estimate",
        }
    }
}

/// OpenAI's tokenizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokenizer {
    /// GPT-4o, GPT-4.1, GPT-5, the o-series, Codex models.
    O200k,
    /// GPT-4 and GPT-3.5.
    Cl100k,
}

impl Tokenizer {
    /// OpenAI's tokenizer for `model`, when it is one of OpenAI's.
    pub fn for_model(model: &str) -> Option<Self> {
        let m = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let starts = |p: &[&str]| p.iter().any(|p| m.starts_with(p));
        if starts(&[
            "gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-6", "chatgpt-", "codex-",
        ]) || starts(&["o1", "o3", "o4"])
            || m.contains("-codex")
        {
            Some(Tokenizer::O200k)
        } else if starts(&["gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada"]) {
            Some(Tokenizer::Cl100k)
        } else {
            None
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        match self {
            Tokenizer::O200k => tiktoken_rs::o200k_base_singleton(),
            Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton(),
        }
    }

    pub fn count(self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        self.bpe().encode_ordinary(text).len() as u64
    }
}

/// What an image costs in the prompt when its size is not known here: OpenAI's count for a
/// 1024×1024 image in high detail (85 + 4 × 170).
const IMAGE_TOKENS: u64 = 765;
/// Each message's own tokens in OpenAI's chat format (its start, role and end).
const PER_MESSAGE: u64 = 3;
/// A message's `name`.
const PER_NAME: u64 = 1;
/// The reply's priming (`<|start|>assistant<|message|>`).
const REPLY_PRIMING: u64 = 3;
/// A tool definition's own tokens around its name, description and schema.
const PER_TOOL: u64 = 8;

/// The prompt tokens of a request, counted with `count` over every text in it, as OpenAI's
/// chat format lays them out.
fn layout(req: &ChatRequest, count: &dyn Fn(&str) -> u64) -> u64 {
    let mut n = REPLY_PRIMING;
    for s in &req.system {
        n += PER_MESSAGE + count("system") + count(s);
    }
    for m in &req.messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        n += PER_MESSAGE + count(role);
        if let Some(name) = &m.name {
            n += PER_NAME + count(name);
        }
        for p in &m.content {
            n += match p {
                Part::Text(t) | Part::Reasoning(t) => count(t),
                Part::Image { .. } => IMAGE_TOKENS,
                Part::ToolCall {
                    name, arguments, ..
                } => count(name) + count(arguments) + PER_MESSAGE,
                Part::ToolResult { content, .. } => count(content),
            };
        }
    }
    for t in &req.tools {
        n += PER_TOOL + count(&t.name) + count(&t.parameters.to_string());
        if let Some(d) = &t.description {
            n += count(d);
        }
    }
    n
}

/// The prompt tokens of a request with OpenAI's tokenizer.
pub fn count_request(t: Tokenizer, req: &ChatRequest) -> u64 {
    layout(req, &|s| t.count(s))
}

/// The calibrated estimate for a text: ASCII at about four bytes a token, one token per other
/// character (CJK, accented letters, symbols).
pub fn estimate_text(text: &str) -> u64 {
    let ascii = text.bytes().filter(u8::is_ascii).count() as u64;
    let other = text.chars().filter(|c| !c.is_ascii()).count() as u64;
    ascii.div_ceil(4) + other
}

/// The calibrated estimate for a whole request.
pub fn estimate_request(req: &ChatRequest) -> u64 {
    layout(req, &estimate_text)
}

/// The best count Baton can make itself for `model`: OpenAI's tokenizer for OpenAI's models,
/// else the estimate.
pub fn count_for(model: &str, req: &ChatRequest) -> (u64, Method) {
    match Tokenizer::for_model(model) {
        Some(t) => (count_request(t, req), Method::Tokenizer),
        None => (estimate_request(req), Method::Estimate),
    }
}

#[cfg(test)]
mod tests;
