//! How a request to Bedrock is authenticated. A provider's key is either a Bedrock API key
//! (`ABSK…`, or a short-term `bedrock-api-key-…`), sent as a bearer token, or an access key
//! typed as `ACCESS_KEY_ID:SECRET_ACCESS_KEY` (`:SESSION_TOKEN` after it for temporary
//! credentials), signed with SigV4 by `aws-sigv4`. A provider with no key uses what the AWS
//! tools would: `AWS_BEARER_TOKEN_BEDROCK`, then `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`
//! (`AWS_SESSION_TOKEN`), then a profile of the shared credentials file (`awsProfile`, else
//! `AWS_PROFILE`, else `default`; the file `AWS_SHARED_CREDENTIALS_FILE`, else
//! `~/.aws/credentials`). Read at each request, so a refreshed profile is used at once;
//! nothing read is kept or logged.

use std::time::{Duration, SystemTime};

use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;

use crate::limits::{classify_transport, Classified};

/// The SigV4 service name of Bedrock's runtime.
pub const SERVICE: &str = "bedrock";

/// What authenticates one request.
pub enum Auth {
    /// A Bedrock API key: `Authorization: Bearer`.
    ApiKey(String),
    /// An access key for SigV4.
    Keys {
        id: String,
        secret: String,
        session: Option<String>,
    },
}

/// A refusal to sign: the request cannot be sent, and the provider's setup is what to fix.
fn refused(why: impl Into<String>) -> Classified {
    let mut c = classify_transport(why);
    c.class = crate::limits::ErrorClass::Auth;
    c
}

impl Auth {
    /// A provider's key, as typed.
    pub fn from_key(secret: &str) -> Result<Self, Classified> {
        let secret = secret.trim();
        let mut parts = secret.splitn(3, ':');
        let first = parts.next().unwrap_or_default();
        match (parts.next(), parts.next()) {
            (Some(s), session) if is_access_key_id(first) && !s.is_empty() => Ok(Auth::Keys {
                id: first.to_string(),
                secret: s.to_string(),
                session: session.filter(|t| !t.is_empty()).map(str::to_string),
            }),
            _ if is_access_key_id(first) => Err(refused(
                "the key is an AWS access key id alone: give it as ACCESS_KEY_ID:SECRET_ACCESS_KEY",
            )),
            _ => Ok(Auth::ApiKey(secret.to_string())),
        }
    }

    /// The AWS environment's credentials, or a profile's.
    pub fn from_environment(profile: Option<&str>) -> Result<Self, Classified> {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.trim().is_empty());
        if profile.is_none() {
            if let Some(token) = var("AWS_BEARER_TOKEN_BEDROCK") {
                return Ok(Auth::ApiKey(token));
            }
            if let (Some(id), Some(secret)) =
                (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"))
            {
                return Ok(Auth::Keys {
                    id,
                    secret,
                    session: var("AWS_SESSION_TOKEN"),
                });
            }
        }
        let name = profile
            .map(str::to_string)
            .or_else(|| var("AWS_PROFILE"))
            .unwrap_or_else(|| "default".into());
        let file = var("AWS_SHARED_CREDENTIALS_FILE")
            .map(std::path::PathBuf::from)
            .or_else(|| dirs::home_dir().map(|h| h.join(".aws").join("credentials")));
        let text = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .unwrap_or_default();
        profile_keys(&text, &name).ok_or_else(|| {
            refused(format!(
                "no AWS credentials: give the provider a key (a Bedrock API key, or ACCESS_KEY_ID:SECRET_ACCESS_KEY), set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or put profile `{name}` with aws_access_key_id and aws_secret_access_key in the shared credentials file (an SSO profile: `aws configure export-credentials --profile {name} --format env`)"
            ))
        })
    }

    /// Its authentication on `req`, for Bedrock in `region`, signed at `now_ms`.
    pub fn apply(
        &self,
        req: &mut reqwest::Request,
        region: &str,
        now_ms: i64,
    ) -> Result<(), Classified> {
        let (id, secret, session) = match self {
            Auth::ApiKey(key) => {
                let bearer = format!("Bearer {key}");
                return super::super::contract::put_secret(
                    req,
                    reqwest::header::AUTHORIZATION,
                    &bearer,
                );
            }
            Auth::Keys {
                id,
                secret,
                session,
            } => (id, secret, session),
        };
        let identity = aws_credential_types::Credentials::new(
            id.clone(),
            secret.clone(),
            session.clone(),
            None,
            "baton",
        )
        .into();
        let time = SystemTime::UNIX_EPOCH + Duration::from_millis(now_ms.max(0) as u64);
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name(SERVICE)
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| refused(format!("SigV4: {e}")))?
            .into();
        let headers: Vec<(&str, &str)> = req
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?)))
            .collect();
        let body = req
            .body()
            .and_then(reqwest::Body::as_bytes)
            .unwrap_or_default();
        let signable = SignableRequest::new(
            req.method().as_str(),
            req.url().as_str(),
            headers.into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| refused(format!("SigV4: {e}")))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| refused(format!("SigV4: {e}")))?
            .into_parts();
        let signed: Vec<(String, String)> = instructions
            .headers()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        for (name, value) in signed {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| refused("SigV4 made an invalid header"))?;
            super::super::contract::put_secret(req, name, &value)?;
        }
        Ok(())
    }
}

/// `AKIA…`/`ASIA…`: an access key id (20 upper-case letters and digits).
fn is_access_key_id(s: &str) -> bool {
    s.len() == 20
        && (s.starts_with("AKIA") || s.starts_with("ASIA"))
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// A profile's keys in a shared credentials file (`[name]`, `key = value` lines).
fn profile_keys(text: &str, name: &str) -> Option<Auth> {
    let mut in_profile = false;
    let (mut id, mut secret, mut session) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = section.trim() == name;
            continue;
        }
        if !in_profile {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = Some(v.trim().to_string()).filter(|v| !v.is_empty());
        match k.trim() {
            "aws_access_key_id" => id = v,
            "aws_secret_access_key" => secret = v,
            "aws_session_token" => session = v,
            _ => {}
        }
    }
    Some(Auth::Keys {
        id: id?,
        secret: secret?,
        session,
    })
}

#[cfg(test)]
mod tests;
