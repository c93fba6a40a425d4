//! Google Vertex AI's routes for Anthropic's and Google's models, and Google's OAuth token
//! endpoint, as strict as they are before a request reaches a model.
//!
//! The token endpoint (`POST /token`) takes a service account's JWT only when its RS256
//! signature verifies with the account's public key (checked here with ring) and its claims
//! are Google's (issuer, audience, scope, a lifetime of at most an hour around now), and issues
//! tokens that expire; a user's refresh token is taken when it is the account's.
//!
//! The model routes take only an unexpired token of its own, the account's project and region,
//! a model of the account's, the method that matches `stream`, and the Messages body as Vertex
//! takes it (its `anthropic_version`, no `model`); the answer is the Anthropic fake's, or for a
//! Gemini model the Gemini fake's.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{json, Value};

use crate::{FakeUpstream, Shared};

/// The Google Cloud account a fake Vertex AI serves.
#[derive(Default, Clone)]
pub(crate) struct Account {
    pub project: String,
    pub region: String,
    pub client_email: String,
    /// The service account's public key (PKCS#1 `RSAPublicKey`, DER).
    pub public_key: Vec<u8>,
    pub models: Vec<String>,
    /// Seconds a token lives.
    pub lifetime: u64,
    /// A user's refresh token it takes (application-default credentials).
    pub refresh_token: Option<String>,
    /// Tokens issued, with when each expires (Unix seconds).
    pub tokens: Vec<(String, u64)>,
    /// Token exchanges so far.
    pub exchanges: usize,
}

impl FakeUpstream {
    /// Its Vertex AI routes serve `project` in `region` for these models; its token endpoint
    /// takes JWTs of `client_email` signed by the key whose public half is `public_key_der`.
    pub fn vertex_account(
        &self,
        project: &str,
        region: &str,
        client_email: &str,
        public_key_der: &[u8],
        models: &[&str],
    ) {
        let mut a = self.shared.vertex.lock().unwrap();
        a.project = project.into();
        a.region = region.into();
        a.client_email = client_email.into();
        a.public_key = public_key_der.to_vec();
        a.models = models.iter().map(|m| m.to_string()).collect();
        a.lifetime = 3599;
    }

    /// Tokens it issues live this long; `token` is one it already issued, expiring in
    /// `expires_in` seconds (0: already expired).
    pub fn vertex_token(&self, token: &str, expires_in: u64) {
        self.shared
            .vertex
            .lock()
            .unwrap()
            .tokens
            .push((token.into(), now() + expires_in));
    }

    /// How many tokens its token endpoint has issued.
    pub fn vertex_exchanges(&self) -> usize {
        self.shared.vertex.lock().unwrap().exchanges
    }

    /// Its token endpoint (a service account key's `token_uri`).
    pub fn token_uri(&self) -> String {
        format!("http://{}/token", self.addr)
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn oauth_error(error: &str, description: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

/// Google's error body.
pub(crate) fn google_error(status: StatusCode, state: &str, message: &str) -> Response {
    let body = json!({"error": {"code": status.as_u16(), "message": message, "status": state}});
    (status, axum::Json(body)).into_response()
}

fn b64url(part: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()
}

/// `POST /token`: a JWT bearer grant or a refresh token, as Google's OAuth endpoint takes them.
pub(crate) async fn token(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form: std::collections::HashMap<String, String> =
        form_urlencoded::parse(&body).into_owned().collect();
    // The audience a JWT must name: this endpoint's own address.
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let uri = format!("http://{host}/token");
    let mut a = s.vertex.lock().unwrap();
    match form.get("grant_type").map(String::as_str) {
        Some("urn:ietf:params:oauth:grant-type:jwt-bearer") => {
            let jwt = form.get("assertion").cloned().unwrap_or_default();
            if let Err(r) = check_jwt(&a, &jwt, &uri) {
                return *r;
            }
        }
        Some("refresh_token") => {
            if a.refresh_token.is_none() || form.get("refresh_token") != a.refresh_token.as_ref() {
                return oauth_error("invalid_grant", "Bad Request");
            }
        }
        _ => return oauth_error("unsupported_grant_type", "Invalid grant_type: "),
    }
    a.exchanges += 1;
    let token = format!("ya29.fake-{}-{}", s.name, a.exchanges);
    let lifetime = a.lifetime;
    a.tokens.push((token.clone(), now() + lifetime));
    axum::Json(json!({"access_token": token, "expires_in": lifetime, "token_type": "Bearer"}))
        .into_response()
}

/// A service account's JWT: signature, issuer, audience, scope, and times. Google's texts.
fn check_jwt(a: &Account, jwt: &str, uri: &str) -> Result<(), Box<Response>> {
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(Box::new(oauth_error(
            "invalid_request",
            "Invalid JWT: malformed",
        )));
    };
    let head: Value = b64url(header)
        .and_then(|h| serde_json::from_slice(&h).ok())
        .unwrap_or(Value::Null);
    if head["alg"] != "RS256" {
        return Err(Box::new(oauth_error(
            "invalid_grant",
            "Invalid JWT Signature.",
        )));
    }
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        &a.public_key,
    );
    let signed = format!("{header}.{claims}");
    let ok = b64url(signature).is_some_and(|sig| key.verify(signed.as_bytes(), &sig).is_ok());
    if !ok {
        return Err(Box::new(oauth_error(
            "invalid_grant",
            "Invalid JWT Signature.",
        )));
    }
    let c: Value = b64url(claims)
        .and_then(|c| serde_json::from_slice(&c).ok())
        .unwrap_or(Value::Null);
    if c["iss"] != a.client_email.as_str() {
        return Err(Box::new(oauth_error(
            "invalid_grant",
            "Invalid grant: account not found",
        )));
    }
    if c["aud"] != uri {
        return Err(Box::new(oauth_error(
            "invalid_grant",
            "Invalid JWT: Failed audience check.",
        )));
    }
    let scoped = c["scope"].as_str().is_some_and(|s| {
        s.split(' ')
            .any(|x| x == "https://www.googleapis.com/auth/cloud-platform")
    });
    if !scoped {
        return Err(Box::new(oauth_error(
            "invalid_scope",
            "Invalid OAuth scope or ID token audience provided.",
        )));
    }
    let (iat, exp) = (
        c["iat"].as_i64().unwrap_or(0),
        c["exp"].as_i64().unwrap_or(0),
    );
    let now = now() as i64;
    if exp <= now || iat > now + 300 || exp - iat > 3600 || exp <= iat {
        return Err(Box::new(oauth_error("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")));
    }
    Ok(())
}

/// `POST /v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model:method}`.
/// Long because it is Vertex AI's checks in its order, each with Google's own answer.
pub(crate) async fn predict(
    State(s): State<Arc<Shared>>,
    Path((project, region, publisher, rest)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let a = s.vertex.lock().unwrap().clone();
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let live = a.tokens.iter().any(|(t, exp)| t == bearer && *exp > now());
    if !live {
        return google_error(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.");
    }
    let Some((model, method)) = rest.rsplit_once(':') else {
        return google_error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "The requested URL was not found on this server.",
        );
    };
    let resource =
        format!("projects/{project}/locations/{region}/publishers/{publisher}/models/{model}");
    if project != a.project {
        return google_error(StatusCode::FORBIDDEN, "PERMISSION_DENIED", &format!("Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/{resource}' (or it may not exist)."));
    }
    let known = matches!(publisher.as_str(), "anthropic" | "google");
    // Claude's token count: the `count-tokens` publisher model, the model named in the body.
    if publisher == "anthropic" && model == "count-tokens" && region == a.region {
        return count_tokens(s, &a, method, headers, &body).await;
    }
    if region != a.region || !known || !a.models.contains(&model.to_string()) {
        return google_error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            &format!("Publisher Model `{resource}` not found."),
        );
    }
    // Google's own models take the Gemini API's body at `:generateContent`.
    if publisher == "google" {
        if !matches!(
            method,
            "generateContent" | "streamGenerateContent" | "countTokens"
        ) {
            return google_error(
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                "The requested URL was not found on this server.",
            );
        }
        // Vertex's CountTokensRequest has the contents themselves, no Gemini API wrapper.
        let wrapped = serde_json::from_slice::<Value>(&body)
            .is_ok_and(|v| v.get("generateContentRequest").is_some());
        if method == "countTokens" && wrapped {
            return google_error(
                StatusCode::BAD_REQUEST,
                "INVALID_ARGUMENT",
                "Invalid JSON payload received. Unknown name \"generateContentRequest\": Cannot find field.",
            );
        }
        let rest = rest.clone();
        return crate::gemini::generate(State(s), Path(rest), headers, body).await;
    }
    let Ok(Value::Object(mut b)) = serde_json::from_slice::<Value>(&body) else {
        return google_error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "Invalid JSON payload received.",
        );
    };
    if b.contains_key("model") {
        return google_error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "model: Extra inputs are not permitted",
        );
    }
    let version = b.remove("anthropic_version");
    if !matches!(
        version.as_ref().and_then(Value::as_str),
        Some("vertex-2023-10-16" | "2026-10-21")
    ) {
        return google_error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "anthropic_version: Input should be 'vertex-2023-10-16'",
        );
    }
    let stream = b.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let expected = if stream {
        "streamRawPredict"
    } else {
        "rawPredict"
    };
    if method != expected {
        return google_error(
            StatusCode::BAD_REQUEST,
            "FAILED_PRECONDITION",
            &format!("Stream must be {} for {method}.", !stream),
        );
    }
    b.insert("model".into(), json!(model));
    let answer = crate::anthropic::messages(
        State(s),
        headers,
        Bytes::from(serde_json::to_vec(&b).unwrap()),
    )
    .await;
    let mut answer = answer;
    answer.headers_mut().insert(
        "x-vertex-ai-llm-request-type",
        HeaderValue::from_static("shared"),
    );
    answer
}

/// `…/publishers/anthropic/models/count-tokens:rawPredict`: the Messages API's count body with
/// the model in it (one this account serves), counted by the Anthropic fake.
async fn count_tokens(
    s: Arc<Shared>,
    a: &Account,
    method: &str,
    headers: HeaderMap,
    body: &[u8],
) -> Response {
    if method != "rawPredict" {
        return google_error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "The requested URL was not found on this server.",
        );
    }
    let Ok(Value::Object(b)) = serde_json::from_slice::<Value>(body) else {
        return google_error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "Invalid JSON payload received.",
        );
    };
    let model = b.get("model").and_then(Value::as_str).unwrap_or_default();
    if !a.models.iter().any(|m| m == model) {
        return google_error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            "model: the model to count tokens against is required and must be a publisher model",
        );
    }
    let mut headers = headers;
    headers.remove("authorization");
    crate::anthropic::count_tokens(State(s), headers, Bytes::from(body.to_vec())).await
}
