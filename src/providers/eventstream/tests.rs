use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use base64::Engine;
use bytes::Bytes;
use futures_util::StreamExt;

use super::as_sse;

fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut m = Message::new(Bytes::copy_from_slice(payload));
    for (n, v) in headers {
        m = m.add_header(Header::new(
            n.to_string(),
            HeaderValue::String(v.to_string().into()),
        ));
    }
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&m, &mut out).unwrap();
    out
}

fn chunk(event: &str) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(event);
    frame(
        &[
            (":event-type", "chunk"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        format!("{{\"bytes\":\"{b64}\",\"p\":\"abcd\"}}").as_bytes(),
    )
}

async fn read(chunks: Vec<Vec<u8>>) -> Vec<Result<String, String>> {
    let body = futures_util::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from(c))));
    as_sse(Box::pin(body), 1 << 20)
        .map(|r| r.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .collect()
        .await
}

#[tokio::test]
async fn chunks_become_the_models_own_events_whatever_the_network_splits() {
    let mut all = chunk(r#"{"type":"message_start","message":{"id":"m1"}}"#);
    all.extend(chunk(
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
    ));
    // Byte by byte: a frame is read only once it is whole.
    let split: Vec<Vec<u8>> = all.iter().map(|b| vec![*b]).collect();
    let got = read(split).await;
    assert_eq!(
        got,
        vec![
            Ok("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\"}}\n\n".into()),
            Ok("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n".into()),
        ]
    );
}

#[tokio::test]
async fn an_exception_is_the_messages_apis_error_event_with_the_type_its_status_means() {
    let throttled = frame(
        &[
            (":exception-type", "throttlingException"),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        br#"{"message":"Too many requests, please wait before trying again."}"#,
    );
    let got = read(vec![throttled]).await;
    let text = got[0].as_ref().unwrap();
    let data: serde_json::Value =
        serde_json::from_str(text.trim().split("data: ").nth(1).unwrap()).unwrap();
    assert!(text.starts_with("event: error\n"));
    assert_eq!(data["error"]["type"], "rate_limit_error");
    assert_eq!(
        data["error"]["message"],
        "Too many requests, please wait before trying again."
    );
}

#[tokio::test]
async fn a_corrupt_or_cut_frame_or_a_huge_one_is_an_error_not_an_event() {
    let mut bad = chunk(r#"{"type":"ping"}"#);
    let n = bad.len();
    bad[n - 6] ^= 0xff; // the payload no longer matches its checksum
    let got = read(vec![bad]).await;
    assert!(got[0].as_ref().unwrap_err().contains("corrupt"), "{got:?}");

    let whole = chunk(r#"{"type":"ping"}"#);
    let got = read(vec![whole[..whole.len() - 3].to_vec()]).await;
    assert_eq!(
        got,
        vec![Err("the event stream ended inside a frame".to_string())]
    );

    let huge = (u32::MAX - 1).to_be_bytes().to_vec();
    let got = read(vec![huge]).await;
    assert!(got[0].as_ref().unwrap_err().contains("larger"), "{got:?}");
}

#[tokio::test]
async fn a_typed_event_comes_under_its_type_as_the_aws_sdks_hand_it_on() {
    let typed = |kind: &str, payload: &str| {
        frame(
            &[
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.as_bytes(),
        )
    };
    let got = read(vec![
        typed(
            "contentBlockDelta",
            r#"{"contentBlockIndex":0,"delta":{"text":"hi"},"p":"abc"}"#,
        ),
        typed("messageStart", ""),
    ])
    .await;
    assert_eq!(
        got,
        vec![
            Ok("event: contentBlockDelta\ndata: {\"contentBlockDelta\":{\"contentBlockIndex\":0,\"delta\":{\"text\":\"hi\"},\"p\":\"abc\"}}\n\n".into()),
            Ok("event: messageStart\ndata: {\"messageStart\":{}}\n\n".into()),
        ]
    );
}
