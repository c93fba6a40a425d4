//! AWS Signature Version 4, checked the way AWS documents it ("Create a signed AWS API
//! request"): the canonical request (method, the path URI-encoded once more, the sorted query,
//! the signed headers trimmed, the payload's SHA-256), the string to sign, the key derived from
//! the secret by HMAC over date, region, service and `aws4_request`. Written from the
//! published algorithm with `ring`'s primitives, so it shares nothing with Baton's signer.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use ring::{digest, hmac};

use super::{aws_error, Account};

const MISMATCH: &str = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";

fn invalid(message: &str) -> Box<Response> {
    Box::new(aws_error(
        StatusCode::FORBIDDEN,
        "InvalidSignatureException",
        message,
    ))
}

fn unrecognized() -> Box<Response> {
    Box::new(aws_error(
        StatusCode::FORBIDDEN,
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    hmac::sign(&k, data.as_bytes()).as_ref().to_vec()
}

/// AWS's URI encoding: unreserved characters kept, every other byte `%XX` (upper-case); `/`
/// kept in a path.
fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn canonical_query(q: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> = q
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (uri_encode(k, false), uri_encode(v, false))
        })
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYYMMDDTHHMMSSZ` as Unix seconds.
fn parse_amz_date(s: &str) -> Option<i64> {
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    if s.len() != 16 || &s[8..9] != "T" || !s.ends_with('Z') {
        return None;
    }
    let days = days_from_civil(n(0..4)?, n(4..6)?, n(6..8)?);
    Some(days * 86_400 + n(9..11)? * 3600 + n(11..13)? * 60 + n(13..15)?)
}

/// Unix seconds as `YYYYMMDDTHHMMSSZ`.
fn amz_date(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The request's signature, checked. Long because it is AWS's checks in AWS's order, each
/// with its own answer.
pub(super) fn verify(
    a: &Account,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
    now: SystemTime,
) -> Result<(), Box<Response>> {
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let auth = h("authorization").unwrap_or_default();
    let Some(rest) = auth.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return Err(Box::new(aws_error(
            StatusCode::FORBIDDEN,
            "IncompleteSignatureException",
            "Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' parameter.",
        )));
    };
    let field = |name: &str| {
        rest.split(',')
            .map(str::trim)
            .find_map(|p| p.strip_prefix(name))
            .unwrap_or_default()
    };
    let (credential, signed, given) = (
        field("Credential="),
        field("SignedHeaders="),
        field("Signature="),
    );
    let scope: Vec<&str> = credential.split('/').collect();
    let [key_id, date, region, service, terminator] = scope[..] else {
        return Err(invalid("Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term"));
    };
    if key_id != a.access_key_id || a.access_key_id.is_empty() {
        return Err(unrecognized());
    }
    if a.session.is_some() && h("x-amz-security-token") != a.session.as_deref() {
        return Err(unrecognized());
    }
    if service != "bedrock" {
        return Err(invalid(
            "Credential should be scoped to correct service: 'bedrock'. ",
        ));
    }
    if region != a.region {
        return Err(invalid("Credential should be scoped to a valid region. "));
    }
    if terminator != "aws4_request" {
        return Err(invalid(&format!("Credential should be scoped with a valid terminator: 'aws4_request', not '{terminator}'. ")));
    }
    let Some(stamp) = h("x-amz-date") else {
        return Err(Box::new(aws_error(
            StatusCode::BAD_REQUEST,
            "IncompleteSignatureException",
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
        )));
    };
    let Some(at) = parse_amz_date(stamp) else {
        return Err(invalid("Invalid X-Amz-Date"));
    };
    let now = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    if at < now - 300 {
        return Err(invalid(&format!(
            "Signature expired: {stamp} is now earlier than {} ({} - 5 min.)",
            amz_date(now - 300),
            amz_date(now)
        )));
    }
    if at > now + 300 {
        return Err(invalid(&format!(
            "Signature not yet current: {stamp} is still later than {} ({} + 5 min.)",
            amz_date(now + 300),
            amz_date(now)
        )));
    }
    if !stamp.starts_with(date) || date.len() != 8 {
        return Err(invalid(&format!("Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '{date}' != '{}', from '{stamp}'.", &stamp[..8])));
    }
    let names: Vec<&str> = signed.split(';').collect();
    if !names.contains(&"host") {
        return Err(invalid(
            "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.",
        ));
    }
    let expected = signature(
        &a.secret,
        method,
        uri,
        headers,
        signed,
        body,
        stamp,
        [date, region, service],
    );
    if expected != given {
        return Err(invalid(MISMATCH));
    }
    Ok(())
}

/// The signature of a request, as AWS computes it.
#[allow(clippy::too_many_arguments)]
fn signature(
    secret: &str,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    signed: &str,
    body: &[u8],
    stamp: &str,
    [date, region, service]: [&str; 3],
) -> String {
    let mut canonical_headers = String::new();
    for name in signed.split(';') {
        let values: Vec<String> = headers
            .get_all(name)
            .iter()
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
        method.as_str(),
        uri_encode(uri.path(), true),
        canonical_query(uri.query()),
        sha256_hex(body)
    );
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let mut key = hmac(format!("AWS4{secret}").as_bytes(), date);
    for part in [region, service, "aws4_request"] {
        key = hmac(&key, part);
    }
    hex(&hmac(&key, &to_sign))
}
#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's own example ("get-vanilla" of the SigV4 test suite): its signature is reproduced.
    #[test]
    fn the_published_example_signs_to_the_published_signature() {
        let a = Account {
            access_key_id: "AKIDEXAMPLE".into(),
            secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            region: "us-east-1".into(),
            ..Account::default()
        };
        let mut headers = HeaderMap::new();
        headers.insert("host", "example.amazonaws.com".parse().unwrap());
        headers.insert("x-amz-date", "20150830T123600Z".parse().unwrap());
        headers.insert("authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31".parse().unwrap());
        let uri: Uri = "/".parse().unwrap();
        let sig = signature(
            &a.secret,
            &Method::GET,
            &uri,
            &headers,
            "host;x-amz-date",
            b"",
            "20150830T123600Z",
            ["20150830", "us-east-1", "service"],
        );
        assert_eq!(
            sig,
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
        let at = UNIX_EPOCH
            + std::time::Duration::from_secs(parse_amz_date("20150830T123600Z").unwrap() as u64);
        let r = verify(&a, &Method::GET, &uri, &headers, b"", at);
        assert!(r.is_err(), "another service's signature is refused");
        assert_eq!(
            amz_date(parse_amz_date("20150830T123600Z").unwrap()),
            "20150830T123600Z"
        );
        assert_eq!(
            amz_date(parse_amz_date("20261231T235959Z").unwrap()),
            "20261231T235959Z"
        );
    }
}
