//! Token counts a client can trust. Clients decide when to compact a conversation by its count,
//! and routing decides by it whether a model's context window can take a request: a count that
//! is low overflows the window, one that is high throws history away early.
//!
//! In order of trust: the provider's own count (Anthropic's `count_tokens`, Gemini's
//! `countTokens`, asked by `api::count`); OpenAI's own tokenizer for OpenAI's
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

    /// The exact count of an ordinary text; see [`Tokenizer::count_within`] for one that may
    /// be huge or hostile.
    pub fn count(self, text: &str) -> u64 {
        self.count_within(text, &std::cell::Cell::new(usize::MAX))
    }

    /// The count of `text`, exact within `budget` bytes of tokenizing (which it spends), the
    /// rest estimated. BPE's cost grows with the square of a word's length, so a word longer
    /// than [`MAX_WORD`] is always estimated: one request of a single 15 MB "word" cost 800 MB
    /// and 12 s of CPU before. Text is tokenized in chunks cut before whitespace, where the
    /// tokenizer's own splitting cuts it too.
    pub fn count_within(self, text: &str, budget: &std::cell::Cell<usize>) -> u64 {
        // The usual case, exact to the token: within the budget and no word too long.
        if text.len() <= budget.get() && text.split_whitespace().all(|w| w.len() <= MAX_WORD) {
            budget.set(budget.get() - text.len());
            return self.bpe().encode_ordinary(text).len() as u64;
        }
        let mut n = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(chunk_end(rest, CHUNK));
            let longest = chunk.split_whitespace().map(str::len).max().unwrap_or(0);
            if longest <= MAX_WORD && budget.get() >= chunk.len() {
                budget.set(budget.get() - chunk.len());
                n += self.bpe().encode_ordinary(chunk).len() as u64;
            } else {
                n += estimate_text(chunk);
            }
            rest = tail;
        }
        n
    }
}

/// Bytes tokenized at a time.
const CHUNK: usize = 16 * 1024;
/// A longer run without whitespace is estimated, never tokenized.
pub const MAX_WORD: usize = 1024;
/// Bytes of one request tokenized exactly; the rest is estimated.
pub const EXACT_BYTES: usize = 2 * 1024 * 1024;

/// Where the next chunk of at most about `max` bytes ends: before a whitespace character
/// (a run without any ends at its end).
fn chunk_end(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    match s[..cut].rfind(char::is_whitespace).filter(|&i| i > 0) {
        Some(i) => i,
        None => s[cut..]
            .find(char::is_whitespace)
            .map_or(s.len(), |i| cut + i),
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
                Part::WebSearch(run) => count(&run.for_model()),
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

/// The prompt tokens of a request with OpenAI's tokenizer, exact for its first
/// [`EXACT_BYTES`] of text and ordinary words, estimated past them (time and memory bounded
/// whatever the request holds).
pub fn count_request(t: Tokenizer, req: &ChatRequest) -> u64 {
    let budget = std::cell::Cell::new(EXACT_BYTES);
    layout(req, &|s| t.count_within(s, &budget))
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
