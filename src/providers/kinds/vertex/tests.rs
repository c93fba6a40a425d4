use std::sync::Arc;

use serde_json::json;

use super::ANTHROPIC as VertexAnthropic;
use crate::providers::kinds::Platform;
use crate::providers::resolve::resolve;
use crate::providers::{ProviderEntry, ProviderRuntime};

fn entry(base: &str, region: Option<&str>) -> ProviderEntry {
    let mut v = json!({"id": "vx", "kind": "vertex-anthropic", "baseUrl": base,
        "project": "acme-prod-1", "models": ["claude-sonnet-4-5@20250929"]});
    if let Some(r) = region {
        v["region"] = json!(r);
    }
    let config = serde_json::from_value(v).expect("a provider");
    resolve(config, Arc::new(ProviderRuntime::new(None)), &|_| None)
}

#[test]
fn a_model_is_a_publisher_model_of_the_project_and_region_with_its_method() {
    let p = entry("https://us-east5-aiplatform.googleapis.com/v1/", None);
    assert_eq!(
        VertexAnthropic.url(&p, "claude-sonnet-4-5@20250929", false).unwrap().as_str(),
        "https://us-east5-aiplatform.googleapis.com/v1/projects/acme-prod-1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
    );
    let p = entry("https://aiplatform.googleapis.com/v1", None);
    assert_eq!(
        VertexAnthropic.url(&p, "claude-opus-4-8", true).unwrap().as_str(),
        "https://aiplatform.googleapis.com/v1/projects/acme-prod-1/locations/global/publishers/anthropic/models/claude-opus-4-8:streamRawPredict"
    );
    let p = entry("http://127.0.0.1:9/v1", Some("europe-west1"));
    assert!(VertexAnthropic
        .url(&p, "a/b", false)
        .unwrap()
        .as_str()
        .ends_with("/locations/europe-west1/publishers/anthropic/models/a%2Fb:rawPredict"));
    assert_eq!(super::region("https://private.example/v1", None), None);
}

#[test]
fn a_versioned_vertex_id_serves_its_anthropic_names() {
    assert_eq!(
        VertexAnthropic.serves("claude-sonnet-4-5@20250929"),
        ["claude-sonnet-4-5-20250929", "claude-sonnet-4-5"]
    );
    assert!(VertexAnthropic.serves("claude-opus-4-8").is_empty());
}

#[test]
fn the_body_loses_its_model_keeps_stream_and_gains_vertexs_version() {
    let client = crate::providers::kinds::tests::client();
    let mut req = client
        .post("http://x/v1/m:streamRawPredict")
        .header("anthropic-version", "2023-06-01")
        .body(r#"{"model":"claude-x","stream":true,"max_tokens":5,"messages":[]}"#)
        .build()
        .unwrap();
    VertexAnthropic.shape(&mut req).ok().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(req.body().unwrap().as_bytes().unwrap()).unwrap();
    assert_eq!(
        v,
        json!({"anthropic_version": "vertex-2023-10-16", "stream": true, "max_tokens": 5, "messages": []})
    );
    assert!(req.headers().get("anthropic-version").is_none());
}

#[test]
fn gemini_on_vertex_is_the_collection_of_googles_models_and_serves_no_other_name() {
    let p = entry(
        "https://us-central1-aiplatform.googleapis.com/v1",
        Some("us-central1"),
    );
    assert_eq!(
        super::GEMINI.url(&p, "gemini-2.5-pro", true).unwrap().as_str(),
        "https://us-central1-aiplatform.googleapis.com/v1/projects/acme-prod-1/locations/us-central1/publishers/google/models"
    );
    assert!(super::GEMINI.serves("gemini-2.5-pro@001").is_empty());
}
