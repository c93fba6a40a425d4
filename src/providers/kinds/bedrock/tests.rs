use std::sync::Arc;

use serde_json::{json, Value};

use super::{anthropic_names, Bedrock};
use crate::providers::kinds::anthropic::platform_body;
use crate::providers::kinds::{Framing, Platform};
use crate::providers::resolve::resolve;
use crate::providers::{ProviderEntry, ProviderRuntime};

fn entry(base: &str, region: Option<&str>) -> ProviderEntry {
    let mut v = json!({"id": "bk", "kind": "bedrock", "baseUrl": base,
        "models": ["us.anthropic.claude-sonnet-4-5-20250929-v1:0"]});
    if let Some(r) = region {
        v["region"] = json!(r);
    }
    let config = serde_json::from_value(v).expect("a provider");
    resolve(config, Arc::new(ProviderRuntime::new(None)), &|_| None)
}

#[test]
fn the_model_id_is_one_path_segment_and_the_stream_has_its_own_address() {
    let p = entry("https://bedrock-runtime.us-west-2.amazonaws.com/", None);
    let id = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    assert_eq!(
        Bedrock.url(&p, id, false).unwrap().as_str(),
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke"
    );
    assert_eq!(
        Bedrock.url(&p, "arn:aws:bedrock:us-west-2:1:inference-profile/x", true).unwrap().as_str(),
        "https://bedrock-runtime.us-west-2.amazonaws.com/model/arn:aws:bedrock:us-west-2:1:inference-profile%2Fx/invoke-with-response-stream"
    );
    assert_eq!(
        Bedrock.models_url(&p),
        None,
        "its list is on the control plane"
    );
}

#[test]
fn the_region_is_given_or_read_from_the_runtime_endpoint() {
    assert_eq!(
        super::region("https://bedrock-runtime.eu-central-1.amazonaws.com", None).as_deref(),
        Some("eu-central-1")
    );
    assert_eq!(
        super::region("https://bedrock-runtime-fips.us-east-1.amazonaws.com", None).as_deref(),
        Some("us-east-1")
    );
    assert_eq!(
        super::region("http://127.0.0.1:9", Some("ap-northeast-1")).as_deref(),
        Some("ap-northeast-1")
    );
    assert_eq!(
        super::region("https://vpce-1.bedrock-runtime.example.internal", None),
        None
    );
}

#[test]
fn the_body_loses_model_and_stream_and_gains_the_version_and_betas_byte_for_byte_otherwise() {
    let client_body = br#"{"model":"claude-sonnet-4-5","max_tokens":10,"stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"h\u00e9 \"x\"","cache_control":{"type":"ephemeral"}}]}],"thinking":{"type":"enabled","budget_tokens":1024}}"#;
    let betas = ["interleaved-thinking-2025-05-14".into(), "".into()];
    let out = platform_body(
        client_body,
        "bedrock-2023-05-31",
        &betas,
        &["model", "stream"],
    )
    .ok()
    .unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["anthropic_version"], "bedrock-2023-05-31");
    assert_eq!(
        v["anthropic_beta"],
        json!(["interleaved-thinking-2025-05-14"])
    );
    assert!(v.get("model").is_none() && v.get("stream").is_none());
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(r#""text":"h\u00e9 \"x\"""#),
        "members are kept as sent: {text}"
    );
    assert!(platform_body(b"[1]", "v", &[], &[]).is_err());
}

#[test]
fn only_an_event_stream_answer_is_read_as_one() {
    assert_eq!(
        Bedrock.framing(Some("application/vnd.amazon.eventstream")),
        Framing::AwsEventStream
    );
    assert_eq!(Bedrock.framing(Some("application/json")), Framing::Sse);
    assert_eq!(Bedrock.framing(None), Framing::Sse);
}

#[test]
fn a_bedrock_id_serves_its_anthropic_names() {
    assert_eq!(
        anthropic_names("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ["claude-sonnet-4-5-20250929", "claude-sonnet-4-5"]
    );
    assert_eq!(
        anthropic_names("anthropic.claude-opus-4-6-v1"),
        ["claude-opus-4-6"]
    );
    assert_eq!(
        anthropic_names("arn:aws:bedrock:us-east-1:123:inference-profile/global.anthropic.claude-haiku-4-5-20251001-v1:0"),
        ["claude-haiku-4-5-20251001", "claude-haiku-4-5"]
    );
    assert!(anthropic_names("amazon.nova-pro-v1:0").is_empty());
    assert!(anthropic_names("meta.llama3-70b-instruct-v1:0").is_empty());
}

#[test]
fn a_profile_is_counted_as_its_foundation_model_and_an_arn_not_at_all() {
    use super::foundation_model;
    assert_eq!(
        foundation_model("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        Some("anthropic.claude-sonnet-4-5-20250929-v1:0")
    );
    assert_eq!(
        foundation_model("anthropic.claude-3-haiku-20240307-v1:0"),
        Some("anthropic.claude-3-haiku-20240307-v1:0")
    );
    assert_eq!(
        foundation_model("arn:aws:bedrock:us-west-2:1:application-inference-profile/x"),
        None
    );
}
