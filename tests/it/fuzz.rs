//! Property-based fuzzing of what reads untrusted bytes: the SSE reader, the reset-time and
//! retry-after parsers, the CLI output decoders, each format's codec and stream decoders.
//!
//! CI runs 256 cases per property (proptest's default). A longer run:
//! `PROPTEST_CASES=50000 cargo test --release --test fuzz` — failures are saved under
//! `proptest-regressions/` and replayed first on every later run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use baton::canonical::{self, Message, Part, Role};
use baton::limits::{self, reset, ResetContext};
use baton::providers::cli::decode::{self, Decoder};
use baton::providers::sse::{SseError, SseReader};
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Field names the codecs look for, so random documents reach past the first check.
const KEYS: &[&str] = &[
    "model",
    "messages",
    "role",
    "content",
    "type",
    "text",
    "tools",
    "function",
    "name",
    "arguments",
    "tool_calls",
    "tool_call_id",
    "delta",
    "choices",
    "finish_reason",
    "usage",
    "index",
    "id",
    "stop_reason",
    "candidates",
    "parts",
    "system",
    "max_tokens",
    "stream",
    "image_url",
    "url",
    "tool_use",
    "tool_result",
    "input",
    "content_block",
    "message",
    "error",
    "thinking",
    "source",
    "data",
    "media_type",
    "functionCall",
    "usageMetadata",
    "finishReason",
    "prompt_tokens",
    "completion_tokens",
    "input_tokens",
    "output_tokens",
    "stop",
    "temperature",
    "tool_choice",
    "stream_options",
    "include_usage",
    "partial_json",
    // The CLIs' event lines.
    "event",
    "subtype",
    "is_error",
    "result",
    "item",
    "msg",
    "status",
    "resetsAt",
    "rateLimitType",
    "rate_limit_info",
    "stats",
    "models",
    "session_id",
];
const WORDS: &[&str] = &[
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "text",
    "image_url",
    "function",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "text_delta",
    "input_json_delta",
    "tool_use",
    "stop",
    "length",
    "tool_calls",
    "end_turn",
    "max_tokens",
    "STOP",
    "MAX_TOKENS",
    "image",
    "base64",
    "[DONE]",
    "",
    "auto",
    "stream_event",
    "result",
    "rate_limit_event",
    "success",
    "error_max_turns",
    "init",
    "thread.started",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "item.completed",
    "agent_message",
    "error",
    "delta",
    "message",
    "rejected",
    "allowed",
    "five_hour",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        ".{0,12}".prop_map(Value::from),
        prop::sample::select(WORDS).prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 96, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-z_]{1,8}",
    ]
}

fn json_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((key(), json_value()), 0..8).prop_map(|kv| kv.into_iter().collect())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Every event `bytes` yields when it arrives cut into pieces at `cuts`.
fn read_events(
    rt: &tokio::runtime::Runtime,
    bytes: &[u8],
    cuts: &[usize],
) -> Result<Vec<Option<Bytes>>, SseError> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    points.dedup();
    let mut chunks = Vec::new();
    let mut last = 0;
    for p in points.into_iter().chain([bytes.len()]) {
        chunks.push(Ok(Bytes::copy_from_slice(&bytes[last..p])));
        last = p;
    }
    let body = Box::pin(futures_util::stream::iter(chunks));
    let mut reader = SseReader::new(body, Duration::from_secs(5));
    rt.block_on(async {
        let mut out = Vec::new();
        while let Some(ev) = reader.next_event().await? {
            out.push(ev.data);
        }
        Ok(out)
    })
}

/// An SSE event: optional `event:` and comment lines, then data lines (no newlines inside).
fn sse_event() -> impl Strategy<Value = (Option<String>, bool, Vec<String>)> {
    (
        prop::option::of("[a-z_]{1,12}"),
        any::<bool>(),
        prop::collection::vec("[^\r\n]{0,40}", 1..4),
    )
}

fn encode(events: &[(Option<String>, bool, Vec<String>)], eol: &str) -> Vec<u8> {
    let mut s = String::new();
    for (name, comment, data) in events {
        if *comment {
            s.push_str(&format!(": keep-alive{eol}"));
        }
        if let Some(n) = name {
            s.push_str(&format!("event: {n}{eol}"));
        }
        for d in data {
            s.push_str(&format!("data: {d}{eol}"));
        }
        s.push_str(eol);
    }
    s.into_bytes()
}

proptest! {
    /// However the network cuts the bytes, and with LF or CRLF line ends, the reader yields the
    /// same events with their data lines joined by `\n`.
    #[test]
    fn sse_events_survive_any_chunking(
        events in prop::collection::vec(sse_event(), 0..8),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        crlf in any::<bool>(),
    ) {
        let rt = runtime();
        let bytes = encode(&events, if crlf { "\r\n" } else { "\n" });
        let got = read_events(&rt, &bytes, &cuts).unwrap();
        let want: Vec<Option<Bytes>> = events
            .iter()
            .map(|(_, _, data)| Some(Bytes::from(data.join("\n"))))
            .collect();
        prop_assert_eq!(got, want);
    }

    /// Arbitrary bytes in arbitrary pieces: the reader ends (events, a clean end or an error),
    /// never panics, and never yields more data than it was given.
    #[test]
    fn sse_reader_takes_any_bytes(
        bytes in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), any::<u8>()], 0..600),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let rt = runtime();
        if let Ok(events) = read_events(&rt, &bytes, &cuts) {
            let total: usize = events.iter().flatten().map(Bytes::len).sum();
            prop_assert!(total <= bytes.len());
        }
    }

    /// Reset texts from any provider, however garbled: no panic, and a reset that is found lies
    /// within a year (a limit that resets in a decade is a garbled text, not a cooldown).
    #[test]
    fn reset_texts_never_panic_and_stay_in_range(
        text in prop_oneof![
            ".{0,80}",
            // Fragments of real messages, recombined.
            prop::collection::vec(prop::sample::select(&[
                "Please try again in ", "resets at ", "try again after ", "regain access on ",
                "Retry after ", "quota will reset ", "in ", "at ",
                "1h", "20m", "3.5s", "90ms", "2m30.5s", "-5s", "999999999h", "0s",
                "12:00", "23:59", "25:61", "3pm", "11:30 PM", "(UTC)", "(America/Los_Angeles)",
                "(Mars/Olympus)", "Feb 29", "Dec 31", "Jan 1", "2027-01-01", "2026-13-45",
                "2026-02-29T00:00:00Z", "tomorrow", "next week", "seconds", "minutes", "hours",
                "days", " ", ".", ",", "1", "60", "86400", "1e308", "NaN",
            ][..]), 0..10).prop_map(|v| v.concat()),
        ],
        now in 1_700_000_000_000i64..1_900_000_000_000i64,
    ) {
        let ctx = ResetContext::new(now);
        for found in [reset::from_text(&text, &ctx), reset::from_window(&text, &ctx)].into_iter().flatten() {
            prop_assert!(found <= now + 400 * 86_400_000, "{text:?} -> {found}, over a year ahead");
        }
        if let Some(at) = reset::regain_access(&text) {
            prop_assert!(at > 0);
        }
        let _ = limits::parse_go_duration_ms(&text);
        let body: Value = serde_json::json!({"error": {"message": text}});
        let _ = reset::from_body(&body, now);
    }

    /// Go durations (OpenAI's `x-ratelimit-reset-*`) parse to what they say.
    #[test]
    fn go_durations_parse_to_their_value(h in 0i64..48, m in 0i64..60, s in 0i64..60, ms in 0i64..1000) {
        let text = format!("{h}h{m}m{s}.{ms:03}s");
        prop_assert_eq!(limits::parse_go_duration_ms(&text), Some(((h * 60 + m) * 60 + s) * 1000 + ms));
    }

    /// Rate-limit headers with any values: no panic, and a reset found is within a year.
    #[test]
    fn reset_headers_never_panic(
        values in prop::collection::vec((prop::sample::select(&[
            "retry-after", "retry-after-ms", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens",
            "x-ratelimit-reset", "anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset",
            "anthropic-ratelimit-unified-reset", "x-ratelimit-remaining-requests",
        ][..]), prop_oneof![
            "[ -~]{0,30}",
            prop::sample::select(&["1e308", "-1", "NaN", "inf", "9223372036854775807", "-9223372036854775808",
                "0", "0.5", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
                "2026-12-01T00:00:00Z", "9999-12-31T23:59:59Z", "1h2m3s", "999999999h"][..]).prop_map(str::to_string),
        ]), 0..4),
        now in 1_700_000_000_000i64..1_900_000_000_000i64,
    ) {
        let mut headers = HeaderMap::new();
        for (k, v) in &values {
            if let Ok(v) = HeaderValue::from_str(v) {
                headers.append(HeaderName::from_static(k), v);
            }
        }
        if let Some(at) = reset::from_headers(&headers, now) {
            prop_assert!(at <= now + reset::MAX_AHEAD_MS, "{values:?} -> {at}, over a year ahead");
        }
        let _ = limits::classify_http(429, &headers, b"{}", &ResetContext::new(now));
    }

    /// Any JSON document as an OpenAI or Anthropic request: a request or a clear error, never a
    /// panic; and whatever was accepted translates to every upstream format.
    #[test]
    fn request_codecs_take_any_json(body in json_object()) {
        for parsed in [canonical::openai::request_from_openai(&body), canonical::anthropic::request_from_anthropic(&body)] {
            match parsed {
                Ok(req) => {
                    let _ = canonical::openai::request_to_openai(&req);
                    let _ = canonical::anthropic::request_to_anthropic(&req, "m", 1024);
                    let _ = canonical::gemini::request_to_gemini(&req, "gemini-3-pro");
                    let _ = req.needs();
                }
                Err(e) => prop_assert!(!e.message.is_empty()),
            }
        }
    }

    /// Any JSON as an upstream answer or stream event, in every format: no panic; and the
    /// Anthropic encoder turns whatever events come out into well-formed SSE.
    #[test]
    fn answer_and_stream_codecs_take_any_json(values in prop::collection::vec(json_value(), 0..12)) {
        let mut anthropic = canonical::anthropic::stream::StreamDecoder::default();
        let mut gemini = canonical::gemini::StreamDecoder::default();
        let mut encoder = canonical::anthropic::stream::StreamEncoder::new("req_1", "m");
        let mut out = String::new();
        for v in &values {
            let _ = canonical::openai::response_from_openai(v);
            let _ = canonical::anthropic::response_from_anthropic(v);
            let _ = canonical::gemini::response_from_gemini(v);
            let _ = canonical::openai::usage_from_openai(v);
            let mut events = canonical::openai::chunk_events(v);
            events.extend(anthropic.push(v));
            events.extend(gemini.push(v));
            for ev in &events {
                let _ = canonical::openai::event_to_chunk(ev, "req_1", "m", 0);
                encoder.push(ev, &mut out);
            }
        }
        encoder.finish(&mut out);
        for frame in out.split("\n\n").filter(|f| !f.is_empty()) {
            let data = frame.lines().find_map(|l| l.strip_prefix("data: "));
            let data = data.unwrap_or_else(|| panic!("a frame without data: {frame:?}"));
            prop_assert!(serde_json::from_str::<Value>(data).is_ok(), "not JSON: {data}");
        }
    }

    /// A conversation survives OpenAI -> canonical -> OpenAI and -> Anthropic -> canonical.
    #[test]
    fn text_conversations_round_trip(
        system in prop::option::of("[^\u{0}]{1,40}"),
        turns in prop::collection::vec("[^\u{0}]{1,60}", 1..7),
        max_tokens in prop::option::of(1u64..100_000),
    ) {
        let req = canonical::ChatRequest {
            model: "m".into(),
            system: system.into_iter().collect(),
            messages: turns
                .iter()
                .enumerate()
                .map(|(i, t)| Message {
                    role: if i % 2 == 0 { Role::User } else { Role::Assistant },
                    content: vec![Part::Text(t.clone())],
                    name: None,
                })
                .collect(),
            max_tokens,
            ..Default::default()
        };
        let back = canonical::openai::request_from_openai(&canonical::openai::request_to_openai(&req)).unwrap();
        prop_assert_eq!(&back.messages, &req.messages);
        prop_assert_eq!(&back.system, &req.system);
        prop_assert_eq!(back.max_tokens, req.max_tokens);
        let via = canonical::anthropic::request_from_anthropic(&canonical::anthropic::request_to_anthropic(&req, "m", 1024)).unwrap();
        prop_assert_eq!(&via.messages, &req.messages);
        prop_assert_eq!(via.system.join("\n\n"), req.system.join("\n\n"));
    }

    /// Any JSON lines from any CLI — and real output lines with a part replaced by junk — decode
    /// without a panic; stderr lines of any text are judged without one.
    #[test]
    fn cli_decoders_take_any_lines(
        lines in prop::collection::vec(json_value(), 0..12),
        real in prop::sample::select(&[
            r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"Hi","usage":{"input_tokens":3,"output_tokens":1}}"#,
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1767225600,"rateLimitType":"five_hour"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Hi"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":3,"cached_input_tokens":0,"output_tokens":1}}"#,
            r#"{"type":"turn.failed","error":{"message":"You've hit your usage limit."}}"#,
            r#"{"type":"message","role":"assistant","content":"Hi","delta":true}"#,
            r#"{"type":"result","status":"success","stats":{"total_tokens":4,"input_tokens":3,"output_tokens":1}}"#,
        ][..]),
        pointer in prop::sample::select(&["/event", "/event/delta", "/usage", "/rate_limit_info", "/item", "/error", "/content", "/stats", "/type", "/result"][..]),
        junk in json_value(),
        stderr in ".{0,80}",
    ) {
        let mut mutated: Value = serde_json::from_str(real).unwrap();
        if let Some(slot) = mutated.pointer_mut(pointer) {
            *slot = junk;
        }
        for kind in [baton::providers::cli::claude::KIND, baton::providers::cli::codex::KIND, baton::providers::cli::gemini::KIND] {
            let mut d = Decoder::new(kind);
            for v in lines.iter().chain([&mutated]) {
                let _ = d.line(v);
            }
            let _ = decode::stderr_worth_keeping(&stderr);
            let _ = decode::stderr_is_fatal(kind, &stderr);
            let _ = limits::classify_cli(&stderr, Some(1), &ResetContext::new(1_800_000_000_000));
        }
    }
}
