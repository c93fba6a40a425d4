//! Google access tokens for Vertex AI. A provider's key is an access token (`ya29.…`, sent as it
//! is) or a service account's JSON key; without a key, the application-default credentials
//! (`GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's
//! `~/.config/gcloud/application_default_credentials.json`: a service account or a user's
//! refresh token). A service account signs a JWT (RS256, by `jsonwebtoken`) and exchanges it at
//! its `token_uri`; a user's refresh token is exchanged there too. The exchange goes through the
//! provider's own HTTP client (its proxy applies) and is dated by the routing clock. Tokens are
//! kept in memory until five minutes before they expire, never written or logged.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use serde::Deserialize;
use serde_json::Value;

use crate::limits::{classify_transport, Classified, ErrorClass};

/// The scope Vertex AI takes.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Google's token endpoint, when a key file names none.
const TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// A token is renewed this long before it expires.
const EARLY_MS: i64 = 5 * 60_000;

/// The largest token answer read.
const MAX_ANSWER: u64 = 64 * 1024;

/// Tokens kept at most (one per credential in use).
const KEPT: usize = 64;

fn refused(why: impl Into<String>) -> Classified {
    let mut c = classify_transport(why);
    c.class = ErrorClass::Auth;
    c
}

/// What a key or a credentials file holds.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Credentials {
    ServiceAccount {
        client_email: String,
        private_key: String,
        #[serde(default)]
        private_key_id: Option<String>,
        #[serde(default)]
        token_uri: Option<String>,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        #[serde(default)]
        token_uri: Option<String>,
    },
}

/// Tokens by a digest of the credential they came from: (token, expiry in Unix ms).
static TOKENS: LazyLock<Mutex<HashMap<u64, (String, i64)>>> = LazyLock::new(Mutex::default);

fn digest(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// An access token for `key` (or the application-default credentials), fresh at `now_ms`.
pub async fn token(
    client: &reqwest::Client,
    key: Option<&str>,
    now_ms: i64,
) -> Result<String, Classified> {
    let text = match key.map(str::trim) {
        Some(k) if !k.starts_with('{') => return Ok(k.to_string()),
        Some(k) => k.to_string(),
        None => application_default()?,
    };
    let id = digest(&text);
    if let Some((token, _)) = TOKENS
        .lock()
        .ok()
        .and_then(|m| m.get(&id).cloned())
        .filter(|(_, expires)| now_ms < expires - EARLY_MS)
    {
        return Ok(token);
    }
    let creds: Credentials = serde_json::from_str(&text).map_err(|e| {
        refused(format!(
            "the Google credentials are neither a service account's key nor a user's: {e}"
        ))
    })?;
    let (token, expires_in) = exchange(client, &creds, now_ms).await?;
    if let Ok(mut map) = TOKENS.lock() {
        if map.len() >= KEPT {
            map.retain(|_, (_, e)| *e > now_ms);
        }
        if map.len() < KEPT {
            map.insert(id, (token.clone(), now_ms + expires_in * 1000));
        }
    }
    Ok(token)
}

/// The application-default credentials file's text.
fn application_default() -> Result<String, Classified> {
    let path = std::env::var("GOOGLE_APPLICATION_CREDENTIALS")
        .ok()
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            dirs::config_dir().map(|c| {
                c.join("gcloud")
                    .join("application_default_credentials.json")
            })
        });
    path.as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .ok_or_else(|| {
            refused("no Google credentials: give the provider a key (a service account's JSON key, or an access token), set GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`")
        })
}

#[derive(serde::Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: i64,
    exp: i64,
}

/// A token request's form fields.
type Form = Vec<(&'static str, String)>;

/// Where a credential is exchanged, and the form it sends there (a service account's JWT, signed
/// at `now_ms`, or a user's refresh token).
fn grant(creds: &Credentials, now_ms: i64) -> Result<(&str, Form), Classified> {
    Ok(match creds {
        Credentials::ServiceAccount {
            client_email,
            private_key,
            private_key_id,
            token_uri,
        } => {
            let uri = token_uri.as_deref().unwrap_or(TOKEN_URI);
            let now = now_ms.div_euclid(1000);
            let claims = Claims {
                iss: client_email,
                scope: SCOPE,
                aud: uri,
                iat: now,
                exp: now + 3600,
            };
            let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
            header.kid = private_key_id.clone();
            let key = jsonwebtoken::EncodingKey::from_rsa_pem(private_key.as_bytes())
                .map_err(|e| refused(format!("the service account's private key: {e}")))?;
            let jwt = jsonwebtoken::encode(&header, &claims, &key)
                .map_err(|e| refused(format!("signing the service account's JWT: {e}")))?;
            (
                uri,
                vec![
                    (
                        "grant_type",
                        "urn:ietf:params:oauth:grant-type:jwt-bearer".to_string(),
                    ),
                    ("assertion", jwt),
                ],
            )
        }
        Credentials::AuthorizedUser {
            client_id,
            client_secret,
            refresh_token,
            token_uri,
        } => (
            token_uri.as_deref().unwrap_or(TOKEN_URI),
            vec![
                ("grant_type", "refresh_token".to_string()),
                ("client_id", client_id.clone()),
                ("client_secret", client_secret.clone()),
                ("refresh_token", refresh_token.clone()),
            ],
        ),
    })
}

/// The credential exchanged at its token endpoint: the token and its lifetime in seconds.
async fn exchange(
    client: &reqwest::Client,
    creds: &Credentials,
    now_ms: i64,
) -> Result<(String, i64), Classified> {
    let (uri, form) = grant(creds, now_ms)?;
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&form)
        .finish();
    let resp = client
        .post(uri)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .timeout(std::time::Duration::from_secs(20))
        .send()
        .await
        .map_err(|e| {
            classify_transport(format!(
                "Google's token endpoint: {}",
                crate::providers::outbound::describe(&e)
            ))
        })?;
    let status = resp.status();
    // A token answer is a few hundred bytes; a larger one is not read.
    if resp.content_length().is_some_and(|n| n > MAX_ANSWER) {
        return Err(refused(
            "Google's token endpoint answered with more than a token",
        ));
    }
    let mut body = Vec::new();
    let mut resp = resp;
    while let Ok(Some(chunk)) = resp.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > MAX_ANSWER {
            return Err(refused(
                "Google's token endpoint answered with more than a token",
            ));
        }
    }
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let token = v.get("access_token").and_then(Value::as_str);
    match token {
        Some(t) if status.is_success() => Ok((
            t.to_string(),
            v.get("expires_in").and_then(Value::as_i64).unwrap_or(3600),
        )),
        _ => {
            let what = v
                .get("error_description")
                .or_else(|| v.get("error"))
                .and_then(Value::as_str)
                .unwrap_or("no token");
            Err(refused(format!(
                "Google's token endpoint refused the credentials (HTTP {}): {}",
                status.as_u16(),
                what
            )))
        }
    }
}
