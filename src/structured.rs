//! Structured output checked before it is relayed. When the client asked for JSON (any API's
//! form of it: `response_format`, `output_config.format`, `text.format`, `responseJsonSchema`),
//! the answer's text must be one JSON value, valid against the schema when one was given.
//!
//! What is safely repairable is repaired, and said so: a byte-order mark, a Markdown fence
//! around the value, prose before or after the one value. What is not — no value at all, two
//! values, a value the schema refuses, a value cut off at the token limit — is invalid, and the
//! router tries the next candidate. The schema is compiled once (`jsonschema`, without its
//! remote or file `$ref` resolution), kept for the next request that sends the same one, and
//! bounded in size; a schema that does not compile leaves the check at "one JSON value".

use std::hash::Hasher;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use crate::canonical::OutputFormat;

mod tape;
use tape::Tape;

/// The largest schema compiled (its JSON text); a larger one is checked as "one JSON value".
const MAX_SCHEMA_BYTES: usize = 256 * 1024;

/// How many compiled schemas are kept for the requests that send them again.
const KEPT_SCHEMAS: usize = 64;
/// The largest schema kept compiled (its JSON text); a larger one is compiled per request.
const MAX_KEPT_SCHEMA_BYTES: usize = 64 * 1024;

type Compiled = Option<Arc<jsonschema::Validator<tape::Flat>>>;

/// Compiled schemas by a keyed hash of their tree: compiling costs more than the rest of a
/// request, and an application sends the same schema every time. The tree is hashed in place
/// (no text written, nothing allocated) with aHash under keys random per process: without the
/// keys nobody can make another schema land on one's entry, so the trees need not be kept and
/// compared (std's SipHash, as keyed, cost a JSON-mode request 2 % more CPU).
fn kept() -> &'static Mutex<lru::LruCache<u64, Compiled>> {
    static KEPT: OnceLock<Mutex<lru::LruCache<u64, Compiled>>> = OnceLock::new();
    KEPT.get_or_init(|| {
        Mutex::new(lru::LruCache::new(
            NonZeroUsize::new(KEPT_SCHEMAS).unwrap_or(NonZeroUsize::MIN),
        ))
    })
}

/// A hash of a JSON tree and its size in bytes as text (about: strings and numbers as they
/// are, a few bytes per structure), in one walk.
fn digest(v: &Value, h: &mut impl Hasher) -> usize {
    match v {
        Value::Null => {
            h.write_u8(0);
            4
        }
        Value::Bool(b) => {
            h.write_u8(1 + u8::from(*b));
            5
        }
        Value::Number(n) => {
            // Its kind and bits: 1 and 1.0 are different schemas' text, and stay apart.
            let (kind, bits) = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => (3, u),
                (None, Some(i)) => (7, i as u64),
                _ => (8, n.as_f64().map_or(0, f64::to_bits)),
            };
            h.write_u8(kind);
            h.write_u64(bits);
            8
        }
        Value::String(s) => {
            h.write_u8(4);
            h.write(s.as_bytes());
            h.write_u8(0xff);
            s.len() + 2
        }
        Value::Array(a) => {
            h.write_u8(5);
            h.write_usize(a.len());
            a.iter().map(|x| digest(x, h) + 1).sum::<usize>() + 2
        }
        Value::Object(o) => {
            h.write_u8(6);
            h.write_usize(o.len());
            o.iter()
                .map(|(k, x)| {
                    h.write(k.as_bytes());
                    h.write_u8(0xff);
                    k.len() + 4 + digest(x, h)
                })
                .sum::<usize>()
                + 2
        }
    }
}

/// `schema` compiled (`None`: too large, or it does not compile).
fn compiled(schema: &Value) -> Compiled {
    use std::hash::BuildHasher;
    static KEYS: OnceLock<ahash::RandomState> = OnceLock::new();
    let mut h = KEYS.get_or_init(ahash::RandomState::new).build_hasher();
    let size = digest(schema, &mut h);
    if size > MAX_SCHEMA_BYTES {
        return None;
    }
    let key = h.finish();
    if let Ok(mut k) = kept().lock() {
        if let Some(made) = k.get(&key) {
            return made.clone();
        }
    }
    let made = jsonschema::options_for::<tape::Flat>()
        .build(schema)
        .ok()
        .map(Arc::new);
    if size <= MAX_KEPT_SCHEMA_BYTES {
        if let Ok(mut k) = kept().lock() {
            k.put(key, made.clone());
        }
    }
    made
}

/// What a model with no structured-output setting is told when the client asked for JSON (a
/// subscription CLI; an HTTP model with `structuredOutput: false`), in its system prompt.
pub fn instruction(format: &OutputFormat) -> String {
    let mut out = String::from(
        "Answer with exactly one JSON value and nothing else: no prose, no Markdown code fence.",
    );
    if let OutputFormat::JsonSchema { schema, .. } = format {
        out.push_str(" It must be valid against this JSON Schema:\n");
        out.push_str(&schema.to_string());
    }
    out
}

/// What the client asked the answer to be.
#[derive(Clone, Default)]
pub struct Expect {
    schema: Compiled,
}

/// How an answer's text turned out.
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// One JSON value, as asked, as it came.
    Valid,
    /// One JSON value once what surrounded it was taken off (`what`); the value's text.
    Repaired { text: String, what: &'static str },
    /// Not what was asked, in words.
    Invalid(String),
}

impl Checked {
    /// The word for the client's header and the log: `valid`, `repaired`, `invalid`.
    pub fn word(&self) -> &'static str {
        match self {
            Checked::Valid => "valid",
            Checked::Repaired { .. } => "repaired",
            Checked::Invalid(_) => "invalid",
        }
    }
}

impl Expect {
    /// The check for `format`, its schema compiled once (and kept for the next request that
    /// sends the same schema, as an application's every request does).
    pub fn new(format: &OutputFormat) -> Expect {
        let schema = match format {
            OutputFormat::JsonObject => None,
            OutputFormat::JsonSchema { schema, .. } => compiled(schema),
        };
        Expect { schema }
    }

    /// Checks an answer's `text`; `cut` when the answer stopped at its token limit.
    pub fn check(&self, text: &str, cut: bool) -> Checked {
        let bare = text.strip_prefix('\u{feff}').unwrap_or(text).trim();
        if let Ok(v) = Tape::read(bare) {
            return match self.fits(&v) {
                Err(why) => Checked::Invalid(why),
                Ok(()) if bare.len() == text.len() => Checked::Valid,
                Ok(()) if text.starts_with('\u{feff}') => Checked::Repaired {
                    text: bare.to_string(),
                    what: "a byte-order mark",
                },
                // Whitespace around a value is still the value.
                Ok(()) => Checked::Valid,
            };
        }
        if cut {
            return Checked::Invalid(
                "the answer stopped at its token limit before its JSON value was complete".into(),
            );
        }
        let (found, what) = match fenced(bare) {
            Some(inner) => (one_value(inner), "a Markdown fence"),
            None => (one_value(bare), "prose around the JSON value"),
        };
        match found {
            Ok((v, slice)) => match self.fits(&v) {
                Ok(()) => Checked::Repaired {
                    text: slice.to_string(),
                    what,
                },
                Err(why) => Checked::Invalid(why),
            },
            Err(why) => Checked::Invalid(why),
        }
    }

    /// Whether `v` is what the schema asks (the first problem, with where it is).
    fn fits(&self, v: &Tape<'_>) -> Result<(), String> {
        let Some(schema) = &self.schema else {
            return Ok(());
        };
        if schema.is_valid(v.root()) {
            return Ok(());
        }
        schema.validate(v.root()).map_err(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            format!("the JSON value does not fit the schema at {at}: {e}")
        })
    }
}

/// The most text of a streamed answer gathered to check it (past it, the answer is not one
/// value a client would take).
const MAX_STREAM_TEXT: usize = 8 * 1024 * 1024;

/// A streamed answer's text, gathered from its events to be checked when it ends: by the
/// stream's pump at its end, or before it is relayed when `routing.validateStreams` holds it.
#[derive(Default)]
pub struct StreamText {
    text: String,
    /// It stopped at its token limit.
    cut: bool,
    /// It calls a tool: not its output, not checked.
    tool_call: bool,
}

impl StreamText {
    pub fn note(&mut self, events: &[crate::canonical::StreamEvent]) {
        use crate::canonical::{StopReason, StreamEvent};
        for e in events {
            match e {
                StreamEvent::TextDelta(t) if self.text.len() + t.len() <= MAX_STREAM_TEXT => {
                    self.text.push_str(t)
                }
                StreamEvent::ToolCallStart { .. } => self.tool_call = true,
                StreamEvent::Finish(StopReason::Length) => self.cut = true,
                _ => {}
            }
        }
    }

    /// How the gathered answer turned out; `None` when it calls a tool (the model's choice,
    /// not its output: unchecked).
    pub fn check(&self, expect: &Expect) -> Option<Checked> {
        (!self.tool_call).then(|| expect.check(&self.text, self.cut))
    }
}

/// The inside of the one Markdown code fence in `text` (```` ```json ```` or a bare fence).
fn fenced(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    // The fence's info string (`json`) runs to the end of its line.
    let body = &after[after.find('\n')? + 1..];
    let close = body.rfind("```")?;
    Some(body[..close].trim())
}

/// The one JSON object or array in `text`, with prose around it allowed; two values, or none,
/// are not one.
fn one_value(text: &str) -> Result<(Tape<'_>, &str), String> {
    let found = text
        .match_indices(['{', '['])
        .find_map(|(i, _)| value_at(&text[i..]));
    let Some(slice) = found else {
        return Err("the answer holds no JSON value".into());
    };
    let end = slice.as_ptr() as usize - text.as_ptr() as usize + slice.len();
    let rest = &text[end..];
    if rest
        .match_indices(['{', '['])
        .any(|(i, _)| value_at(&rest[i..]).is_some())
    {
        return Err("the answer holds more than one JSON value".into());
    }
    let v = Tape::read(slice).map_err(|e| format!("the answer's JSON value does not read: {e}"))?;
    Ok((v, slice))
}

/// The JSON object or array `text` starts with (it starts with `{` or `[`), as its text.
fn value_at(text: &str) -> Option<&str> {
    let mut it = serde_json::Deserializer::from_str(text).into_iter::<serde::de::IgnoredAny>();
    match it.next() {
        Some(Ok(_)) => Some(&text[..it.byte_offset()]),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
