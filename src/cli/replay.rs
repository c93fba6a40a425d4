//! `baton replay ID [--provider P]`: sends a captured request (`/admin/captures/ID`) to a
//! running Baton again — as the client sent it, or pinned to another provider — and prints what
//! came back beside what came back then, as a unified diff of the two answers (ids and
//! timestamps, which differ on every call, set aside).

use std::time::Duration;

use serde_json::Value;

/// Request headers the replay does not send again besides the credentials the capture masked
/// (`capture::CREDENTIAL_HEADERS`): what the HTTP client sets itself, and the trace context
/// of the first call.
const NOT_REPLAYED: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "accept-encoding",
    "traceparent",
    "tracestate",
];

/// Fields that differ on every call, left out of the comparison.
const VOLATILE: &[&str] = &[
    "id",
    "created",
    "created_at",
    "system_fingerprint",
    "response_id",
    "item_id",
    "responseId",
];

/// What a replay needs.
pub struct Replay<'a> {
    pub url: &'a str,
    pub admin_key: &'a str,
    pub gateway_key: &'a str,
    pub id: &'a str,
    pub provider: Option<&'a str>,
}

/// The replay's report: the diff, and whether the answers are the same.
pub async fn run(r: Replay<'_>) -> Result<(String, bool), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .map_err(|e| e.to_string())?;
    let base = r.url.trim_end_matches('/');
    let capture = fetch(&http, base, &r).await?;
    let client = &capture["client"];
    let method = client["method"].as_str().unwrap_or("POST");
    let mut path = client["url"].as_str().unwrap_or("/").to_string();
    let mut body = client["body"].as_str().unwrap_or_default().to_string();
    if let Some(p) = r.provider {
        (path, body) = pinned(&path, &body, p)?;
    }
    let mut req = http
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?,
            format!("{base}{path}"),
        )
        .bearer_auth(r.gateway_key)
        .body(body);
    for h in client["headers"].as_array().into_iter().flatten() {
        let (Some(n), Some(v)) = (h[0].as_str(), h[1].as_str()) else {
            continue;
        };
        let credential = baton::capture::CREDENTIAL_HEADERS.contains(&n);
        if !credential && !NOT_REPLAYED.contains(&n) && v != baton::redact::MASK {
            req = req.header(n, v);
        }
    }
    let resp = req
        .send()
        .await
        .map_err(|e| baton::providers::outbound::describe(&e))?;
    let new_status = resp.status().as_u16();
    let served = resp
        .headers()
        .get("x-gateway-provider")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none")
        .to_string();
    let new_body = resp.text().await.map_err(|e| e.to_string())?;
    let old = &capture["answer"];
    let old_status = old["status"].as_u64().unwrap_or(0);
    let old_served = capture["log"]["provider"].as_str().unwrap_or("none");
    let before = reading(old["body"].as_str().unwrap_or_default());
    let after = reading(&new_body);
    let diff = similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("captured  HTTP {old_status} from {old_served}"),
            &format!("replayed  HTTP {new_status} from {served}"),
        )
        .to_string();
    let same = before == after && u64::from(new_status) == old_status;
    let mut out = format!(
        "Replayed {} ({method} {path}): HTTP {new_status} from {served}; captured: HTTP {old_status} from {old_served}.\n",
        r.id
    );
    if same {
        out.push_str("The answers are the same (ids and timestamps aside).\n");
    } else {
        out.push_str(&diff);
    }
    Ok((out, same))
}

/// The capture, from the running Baton's admin API.
async fn fetch(http: &reqwest::Client, base: &str, r: &Replay<'_>) -> Result<Value, String> {
    let resp = http
        .get(format!("{base}/admin/captures/{}", r.id))
        .header("x-admin-key", r.admin_key)
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot reach Baton at {base}: {}. Is `baton serve` (or the tray app) running? Pass --url if it listens elsewhere.",
                baton::providers::outbound::describe(&e)
            )
        })?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    match status {
        200 => {}
        401 | 403 => return Err(format!("Baton at {base} refused the admin key ({status}). The key is in admin.key in the data directory; pass --data-dir or --admin-key.")),
        404 => return Err(format!("no capture of request {}: capture its provider or client key first (Settings → Tracing, or POST /admin/captures/rules), then send the request again.", r.id)),
        s => return Err(format!("Baton answered {s}: {text}")),
    }
    serde_json::from_str(&text).map_err(|e| format!("the capture is not JSON: {e}"))
}

/// The request pinned to provider `p`: its body's `model` (or, for the Gemini API, the model in
/// the path) names the provider.
fn pinned(path: &str, body: &str, p: &str) -> Result<(String, String), String> {
    if let Some((head, tail)) = path.split_once("/models/") {
        let rest = tail.find(':').map(|i| &tail[i..]).unwrap_or_default();
        return Ok((format!("{head}/models/{p}{rest}"), body.to_string()));
    }
    let mut v: Value = serde_json::from_str(body).map_err(|e| {
        format!("the captured request's body is not JSON ({e}): it cannot be pinned to a provider")
    })?;
    match v.as_object_mut() {
        Some(o) => {
            o.insert("model".into(), Value::String(p.to_string()));
        }
        None => return Err("the captured request's body is not a JSON object".into()),
    }
    Ok((path.to_string(), v.to_string()))
}

/// An answer as compared: JSON pretty-printed, a stream one event a line, the fields that
/// differ on every call set aside.
fn reading(body: &str) -> String {
    if let Ok(mut v) = serde_json::from_str::<Value>(body) {
        calm(&mut v);
        return serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
    }
    let mut out = String::new();
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            if line.starts_with("event:") {
                out.push_str(line.trim());
                out.push('\n');
            }
            continue;
        };
        match serde_json::from_str::<Value>(data.trim()) {
            Ok(mut v) => {
                calm(&mut v);
                out.push_str(&v.to_string());
            }
            Err(_) => out.push_str(data.trim()),
        }
        out.push('\n');
    }
    out
}

fn calm(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if VOLATILE.contains(&k.as_str()) && !x.is_object() && !x.is_array() {
                    *x = Value::String("…".into());
                } else {
                    calm(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(calm),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_pinned_by_its_model_or_its_path() {
        let (path, body) = pinned(
            "/v1/chat/completions",
            r#"{"model":"auto","stream":true}"#,
            "alpha",
        )
        .unwrap();
        assert_eq!(path, "/v1/chat/completions");
        assert_eq!(
            serde_json::from_str::<Value>(&body).unwrap()["model"],
            "alpha"
        );
        let (path, _) = pinned(
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            "{}",
            "alpha",
        )
        .unwrap();
        assert_eq!(path, "/v1beta/models/alpha:streamGenerateContent?alt=sse");
        assert!(pinned("/v1/messages", "not json", "alpha").is_err());
    }

    #[test]
    fn answers_are_compared_without_what_differs_on_every_call() {
        let a = reading(r#"{"id":"a1","created":1,"choices":[{"message":{"content":"hi"}}]}"#);
        let b = reading(r#"{"id":"b2","created":2,"choices":[{"message":{"content":"hi"}}]}"#);
        assert_eq!(a, b);
        let s = reading("data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"h\"}}]}\n\ndata: [DONE]\n\n");
        assert_eq!(
            s,
            "{\"choices\":[{\"delta\":{\"content\":\"h\"}}],\"id\":\"…\"}\n[DONE]\n"
        );
    }
}
