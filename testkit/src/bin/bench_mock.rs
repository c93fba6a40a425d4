//! `bench-mock`: the cheapest upstream a benchmark can put behind Baton and its floors — HTTP/1.1
//! keep-alive over plain tokio sockets on one thread, the fake upstream's own answers canned
//! (Chat Completions plain and streamed, Messages, Responses), no checks, no records. The fake
//! upstream (axum, recording each request) costs ~40 µs a request on this machine, which makes
//! it the bottleneck of a 32-connection run and flatters every ratio to "direct"; this one costs
//! a few. Prints `listening on http://ADDR` as the fake does.
//!
//! A streamed request for the model `slow-<chunks>x<ms>` (e.g. `slow-600x100`) is answered
//! with that many content chunks, one every `<ms>` milliseconds (an agent's long stream).

// A benchmark's fixture: a broken setup should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CHAT: &str = r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"fake: hi","role":"assistant"}}],"created":1,"id":"chatcmpl-fake","model":"m","object":"chat.completion","usage":{"completion_tokens":7,"prompt_tokens":11,"total_tokens":18}}"#;
const MESSAGES: &str = r#"{"content":[{"text":"fake: hi","type":"text"}],"id":"msg_fake","model":"m","role":"assistant","stop_reason":"end_turn","stop_sequence":null,"type":"message","usage":{"input_tokens":11,"output_tokens":7}}"#;
const RESPONSES: &str = r#"{"created_at":1,"id":"resp_fake","incomplete_details":null,"model":"m","object":"response","output":[{"content":[{"annotations":[],"text":"fake: hi","type":"output_text"}],"id":"msg_fake","role":"assistant","status":"completed","type":"message"}],"parallel_tool_calls":true,"status":"completed","tool_choice":"auto","tools":[],"usage":{"input_tokens":11,"input_tokens_details":{"cached_tokens":3},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":18}}"#;
const STREAM: [&str; 5] = [
    r#"data: {"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-m","model":"m","object":"chat.completion.chunk"}"#,
    r#"data: {"choices":[{"delta":{"content":"fake: "},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-m","model":"m","object":"chat.completion.chunk"}"#,
    r#"data: {"choices":[{"delta":{"content":"hi"},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-m","model":"m","object":"chat.completion.chunk"}"#,
    r#"data: {"choices":[{"delta":{},"finish_reason":"stop","index":0}],"created":1,"id":"chatcmpl-m","model":"m","object":"chat.completion.chunk"}"#,
    "data: [DONE]",
];

fn plain(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The streamed answer: one chunk per event, written at once (as an upstream that has the
/// whole answer does).
fn streamed() -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for event in STREAM {
        let chunk = format!("{event}\n\n");
        out.extend_from_slice(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

struct Answers {
    chat: Vec<u8>,
    stream: Vec<u8>,
    messages: Vec<u8>,
    responses: Vec<u8>,
    not_found: Vec<u8>,
}

fn main() {
    let answers: &'static Answers = Box::leak(Box::new(Answers {
        chat: plain(CHAT),
        stream: streamed(),
        messages: plain(MESSAGES),
        responses: plain(RESPONSES),
        not_found: b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec(),
    }));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("listening on http://{}", listener.local_addr().unwrap());
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                continue;
            };
            let _ = sock.set_nodelay(true);
            tokio::spawn(serve(sock, answers));
        }
    });
}

/// One keep-alive connection: requests in turn, each read whole (head, then `content-length`
/// bytes of body) and answered by its path.
async fn serve(mut sock: tokio::net::TcpStream, answers: &'static Answers) {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    loop {
        let (head_end, length) = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break (end + 4, content_length(&buf[..end]));
            }
            if !read_more(&mut sock, &mut buf).await {
                return;
            }
        };
        while buf.len() < head_end + length {
            if !read_more(&mut sock, &mut buf).await {
                return;
            }
        }
        let body = &buf[head_end..head_end + length];
        if let Some((chunks, every)) = slow(body).filter(|_| contains(body, b"\"stream\":true")) {
            if paced(&mut sock, chunks, every).await.is_err() {
                return;
            }
            buf.drain(..head_end + length);
            continue;
        }
        let answer = pick(answers, &buf[..head_end], body);
        if sock.write_all(answer).await.is_err() {
            return;
        }
        buf.drain(..head_end + length);
    }
}

async fn read_more(sock: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    match sock.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

fn content_length(head: &[u8]) -> usize {
    let head = String::from_utf8_lossy(head);
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0)
}

fn pick<'a>(answers: &'a Answers, head: &[u8], body: &[u8]) -> &'a [u8] {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let path = line.split(|&b| b == b' ').nth(1).unwrap_or_default();
    let streamed = contains(body, b"\"stream\":true") || contains(body, b"\"stream\": true");
    if path.ends_with(b"/chat/completions") {
        if streamed {
            &answers.stream
        } else {
            &answers.chat
        }
    } else if path.ends_with(b"/messages") {
        &answers.messages
    } else if path.ends_with(b"/responses") {
        &answers.responses
    } else {
        &answers.not_found
    }
}

/// `"model":"slow-<chunks>x<ms>"` in a streamed request.
fn slow(body: &[u8]) -> Option<(u32, u64)> {
    let at = body.windows(15).position(|w| w == b"\"model\":\"slow-")?;
    let rest = &body[at + 15..];
    let end = rest.iter().position(|&b| b == b'"')?;
    let spec = std::str::from_utf8(&rest[..end]).ok()?;
    let (chunks, ms) = spec.split_once('x')?;
    Some((chunks.parse().ok()?, ms.parse().ok()?))
}

/// A slow stream: the head at once, then a content chunk every `every_ms`.
async fn paced(
    sock: &mut tokio::net::TcpStream,
    chunks: u32,
    every_ms: u64,
) -> std::io::Result<()> {
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .await?;
    let chunk = |event: &str| {
        let e = format!("{event}\n\n");
        format!("{:x}\r\n{e}\r\n", e.len()).into_bytes()
    };
    sock.write_all(&chunk(STREAM[0])).await?;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(every_ms));
    tick.tick().await;
    for _ in 0..chunks {
        tick.tick().await;
        sock.write_all(&chunk(STREAM[2])).await?;
    }
    sock.write_all(&chunk(STREAM[3])).await?;
    sock.write_all(&chunk(STREAM[4])).await?;
    sock.write_all(b"0\r\n\r\n").await
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
