//! A provider's prompt cache, modelled per key (`FakeUpstream::model_prompt_cache`), and the
//! usage a chat answer reports.

use axum::http::HeaderMap;
use serde_json::{json, Value};

use crate::{FakeUpstream, Shared};

impl FakeUpstream {
    /// Models a provider's prompt cache, which lives per key (organisation): a chat request
    /// whose prompt starts with a prompt the same key sent before (the previous turn of its
    /// conversation: every message but the last assistant answer and the new user turn) reads
    /// that prefix from the cache, and its usage says so (`prompt_tokens_details.cached_tokens`,
    /// about four bytes a token). Another key's cache does not count.
    pub fn model_prompt_cache(&self) {
        *self.shared.prompt_cache.lock().unwrap() = Some(Default::default());
    }
}

impl Shared {
    /// The usage a chat answer reports: from the per-key prompt cache model when it is on
    /// (`model_prompt_cache`), else fixed numbers (with a cache read under `report_cache_usage`).
    pub(crate) fn chat_usage(&self, headers: &HeaderMap, body: &Value) -> Value {
        let mut cache = self.prompt_cache.lock().unwrap();
        let Some(cache) = cache.as_mut() else {
            return if self.cached() {
                json!({"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
                    "prompt_tokens_details": {"cached_tokens": 80}})
            } else {
                json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18})
            };
        };
        let digest = |v: &[Value]| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(v).unwrap_or_default().hash(&mut h);
            h.finish()
        };
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let tokens = |v: &[Value]| (serde_json::to_string(v).unwrap_or_default().len() / 4) as u64;
        let key = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let seen = cache.entry(key).or_default();
        let prompt = tokens(&messages).max(1);
        let cached =
            if messages.len() > 2 && seen.contains(&digest(&messages[..messages.len() - 2])) {
                tokens(&messages[..messages.len() - 2]).min(prompt)
            } else {
                0
            };
        seen.insert(digest(&messages));
        json!({"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7,
            "prompt_tokens_details": {"cached_tokens": cached}})
    }
}
