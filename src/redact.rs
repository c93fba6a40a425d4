//! The one redaction point for text that came from outside Baton (upstream error bodies and
//! reasons, CLI output): exact values of every secret Baton holds, and common credential shapes
//! it does not know, are replaced before the text is relayed to a client, logged, shown in the
//! admin API or UI, or stored in the database.
//!
//! An upstream that echoes the key it received (some proxies and misconfigured servers do) must
//! not turn Baton into the leak. Every upstream error text is read through [`Redactor::bytes`]
//! or [`Redactor::text`] where it enters the router, so everything downstream of that point
//! (classification reasons, relayed errors, the request log, cooldown rows, `/admin/state`,
//! events and notifications) only ever holds the redacted form.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use arc_swap::ArcSwap;
use regex::bytes::{Captures, Regex};

/// Secrets shorter than this are not matched verbatim (they would mask ordinary words).
const MIN_SECRET_LEN: usize = 8;

/// Credential shapes redacted whoever they belong to. Group 1 is the part that is kept (the
/// scheme or the recognisable prefix), so the reader still sees what kind of thing was there.
static SHAPES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    // ASCII rules (`(?-u)`): credentials are ASCII, and the bytes may not be UTF-8.
    Regex::new(concat!(
        r"(?-u)(?i:(bearer|basic)\s+)[A-Za-z0-9._~+/=\-]{8,}",
        r"|\b(sk-ant-|sk-or-|sk-proj-|sk-|gsk_|xai-|bta?-|AIza)[A-Za-z0-9_\-]{12,}",
        r"|\b(eyJ)[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
    ))
    .ok()
});

/// Whether `text` holds something shaped like a credential (a bearer token, a vendor key, a
/// JWT): what the redactor would mask even without knowing the value.
pub fn looks_like_credential(text: &str) -> bool {
    SHAPES
        .as_ref()
        .is_some_and(|re| re.is_match(text.as_bytes()))
}

/// The shortest piece of a known secret [`Redactor::strict`] masks on its own.
pub const FRAGMENT: usize = 6;

/// What a redacted value is replaced with, after its kept prefix.
pub const MASK: &str = "[redacted]";

/// Holds the exact secrets to look for; cheap to share, swapped whole when keys change.
#[derive(Default)]
pub struct Redactor {
    secrets: ArcSwap<Vec<String>>,
}

impl Redactor {
    /// Replaces the exact values looked for (provider keys, gateway, admin and client keys).
    pub fn set_secrets<I, S>(&self, secrets: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut v: Vec<String> = secrets
            .into_iter()
            .map(|s| s.as_ref().trim().to_string())
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        // Longest first, so a key that contains another is masked whole.
        v.sort_by_key(|s| std::cmp::Reverse(s.len()));
        v.dedup();
        self.secrets.store(Arc::new(v));
    }

    /// `text` with every known secret and credential shape masked.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
        }
    }

    /// [`Redactor::text`] for an owned string (no copy when nothing matches).
    pub fn string(&self, text: String) -> String {
        match self.text(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(s) => s,
        }
    }

    /// `body` with every known secret and credential shape masked, as written and as it reads
    /// once decoded: an echo written with JSON escapes (`custom\/…`, `\u0045…`) or
    /// percent-encoding is masked too (the JSON re-encoded, other text decoded).
    pub fn bytes<'a>(&self, body: &'a [u8]) -> Cow<'a, [u8]> {
        if memchr::memchr2(b'\\', b'%', body).is_none() {
            return self.raw(body);
        }
        // Read decoded first: masking the text as written would stop a credential at its
        // first escape and leave the rest of it to be read once decoded.
        match self.decoded(body) {
            Some(d) => Cow::Owned(self.raw(&d).into_owned()),
            None => self.raw(body),
        }
    }

    /// The strictest reading, for what is kept to be handed on (a capture a user attaches to a
    /// bug report): [`Redactor::bytes`] with `extra` secrets too (a client's own login), then
    /// every run of [`FRAGMENT`] bytes or more that is part of a known secret masked, wherever
    /// it stands — a key cut across stream events or chunks leaves no piece of itself.
    pub fn strict(&self, body: &[u8], extra: &[String]) -> Vec<u8> {
        let mut secrets: Vec<String> = self.secrets.load().as_ref().clone();
        secrets.extend(extra.iter().filter(|s| s.len() >= MIN_SECRET_LEN).cloned());
        let r = Redactor::default();
        r.set_secrets(&secrets);
        let first = r.bytes(body).into_owned();
        let view = if memchr::memchr2(b'\\', b'%', &first).is_some() {
            unescape(&String::from_utf8_lossy(&first)).into_bytes()
        } else {
            first.clone()
        };
        let grams: std::collections::HashSet<&[u8]> = secrets
            .iter()
            .flat_map(|s| s.as_bytes().windows(FRAGMENT))
            .collect();
        if grams.is_empty() || view.len() < FRAGMENT {
            return first;
        }
        let mut hit = vec![false; view.len()];
        let mut any = false;
        for (i, w) in view.windows(FRAGMENT).enumerate() {
            if grams.contains(w) {
                hit[i..i + FRAGMENT].iter_mut().for_each(|h| *h = true);
                any = true;
            }
        }
        if !any {
            return first;
        }
        let mut out = Vec::with_capacity(view.len());
        let mut i = 0;
        while i < view.len() {
            if hit[i] {
                out.extend_from_slice(MASK.as_bytes());
                while i < view.len() && hit[i] {
                    i += 1;
                }
            } else {
                out.push(view[i]);
                i += 1;
            }
        }
        out
    }

    /// The decoded reading of `body` with what it hides masked, when it hid something.
    fn decoded(&self, body: &[u8]) -> Option<Vec<u8>> {
        if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(body) {
            return self
                .json_strings(&mut v)
                .then(|| serde_json::to_vec(&v).unwrap_or_default());
        }
        let text = String::from_utf8_lossy(body);
        let view = unescape(&text);
        match self.raw(view.as_bytes()) {
            Cow::Owned(masked) => Some(masked),
            Cow::Borrowed(_) => None,
        }
    }

    /// Masks every string (and key) of a JSON value as decoded; whether any changed.
    fn json_strings(&self, v: &mut serde_json::Value) -> bool {
        use serde_json::Value;
        match v {
            Value::String(s) => {
                let view = unescape(s);
                match self.raw(view.as_bytes()) {
                    Cow::Owned(m) => {
                        *s = String::from_utf8_lossy(&m).into_owned();
                        true
                    }
                    Cow::Borrowed(_) => false,
                }
            }
            Value::Array(items) => {
                // Every item, not only up to the first that changed.
                let mut any = false;
                for i in items {
                    any |= self.json_strings(i);
                }
                any
            }
            Value::Object(map) => {
                let entries = std::mem::take(map);
                let mut any = false;
                for (k, mut val) in entries {
                    any |= self.json_strings(&mut val);
                    let key = match self.raw(unescape(&k).as_bytes()) {
                        Cow::Owned(m) => {
                            any = true;
                            String::from_utf8_lossy(&m).into_owned()
                        }
                        Cow::Borrowed(_) => k,
                    };
                    map.insert(key, val);
                }
                any
            }
            _ => false,
        }
    }

    /// `body` with every known secret and credential shape masked, as written.
    fn raw<'a>(&self, body: &'a [u8]) -> Cow<'a, [u8]> {
        let secrets = self.secrets.load();
        let mut out: Cow<'a, [u8]> = Cow::Borrowed(body);
        for s in secrets.iter() {
            let needle = s.as_bytes();
            if memchr::memmem::find(&out, needle).is_none() {
                continue;
            }
            let masked = mask_exact(s);
            let mut next = Vec::with_capacity(out.len());
            let mut rest: &[u8] = &out;
            while let Some(i) = memchr::memmem::find(rest, needle) {
                next.extend_from_slice(&rest[..i]);
                next.extend_from_slice(masked.as_bytes());
                rest = &rest[i + needle.len()..];
            }
            next.extend_from_slice(rest);
            out = Cow::Owned(next);
        }
        if let Some(re) = SHAPES.as_ref() {
            if re.is_match(&out) {
                let replaced = re
                    .replace_all(&out, |c: &Captures| {
                        let kept = c
                            .get(1)
                            .or_else(|| c.get(2))
                            .or_else(|| c.get(3))
                            .map(|m| m.as_bytes())
                            .unwrap_or_default();
                        let mut v = kept.to_vec();
                        if c.get(1).is_some() {
                            v.push(b' ');
                        }
                        v.extend_from_slice(MASK.as_bytes());
                        v
                    })
                    .into_owned();
                out = Cow::Owned(replaced);
            }
        }
        out
    }
}

/// Text as it reads with its escapes decoded: JSON's (`\/`, `\uXXXX`, `\"`, `\\`) and
/// percent-encoding, so a secret written in them is seen.
fn unescape(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let hex = |s: &[u8]| {
        std::str::from_utf8(s)
            .ok()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
    };
    while i < b.len() {
        match b[i] {
            b'\\' if i + 1 < b.len() => match b[i + 1] {
                b'u' if i + 6 <= b.len() => match hex(&b[i + 2..i + 6]).and_then(char::from_u32) {
                    Some(c) => {
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        i += 6;
                    }
                    None => {
                        out.push(b[i]);
                        i += 1;
                    }
                },
                c @ (b'/' | b'"' | b'\\') => {
                    out.push(c);
                    i += 2;
                }
                _ => {
                    out.push(b[i]);
                    i += 1;
                }
            },
            b'%' if i + 3 <= b.len() => match hex(&b[i + 1..i + 3]) {
                Some(v) => {
                    out.push(v as u8);
                    i += 3;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `body` with one secret that Baton does not hold (a client's own login, for this request)
/// masked, as written and as it reads decoded.
pub fn mask_value(body: bytes::Bytes, secret: &str) -> bytes::Bytes {
    let r = Redactor::default();
    r.set_secrets([secret]);
    match r.bytes(&body) {
        Cow::Borrowed(_) => body,
        Cow::Owned(b) => bytes::Bytes::from(b),
    }
}

/// A known secret's masked form: its first three characters, then the mask.
fn mask_exact(s: &str) -> String {
    let head: String = s.chars().take(3).collect();
    format!("{head}…{MASK}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strictest reading leaves no run of six characters of any key, whatever its
    /// disguise: whole, JSON-escaped, percent-encoded, in a bearer token, cut across stream
    /// events, and a login Baton does not hold.
    #[test]
    fn the_strict_reading_leaves_no_piece_of_a_key() {
        let key = "gsk_Zq81mXv0Lp3Rt6Yw9Nc2Hd5Fj7Kb4Gs";
        let login = "client-login-ABCDEF0123456789xyz";
        let r = Redactor::default();
        r.set_secrets([key]);
        let corpus = [
            format!("{{\"error\":\"bad key {key}\"}}"),
            format!("Authorization: Bearer {key}"),
            key.replace('Z', "\\u005a"),
            key.replace('_', "%5F"),
            format!(
                "data: {{\"delta\":\"{}\"}}\n\ndata: {{\"delta\":\"{}\"}}\n\n",
                &key[..11],
                &key[11..]
            ),
            format!("logged in as {login}"),
        ];
        for text in corpus {
            let out = String::from_utf8(r.strict(text.as_bytes(), &[login.to_string()])).unwrap();
            for secret in [key, login] {
                for w in secret.as_bytes().windows(FRAGMENT) {
                    let w = std::str::from_utf8(w).unwrap();
                    assert!(!out.contains(w), "{w:?} left in {out:?} (from {text:?})");
                }
            }
        }
        // Text with no secret in it is left as it was.
        let plain = "an answer about keys and tokens";
        assert_eq!(r.strict(plain.as_bytes(), &[]), plain.as_bytes());
    }

    /// One escaped character in the middle of a key must not stop the mask there: nothing of
    /// the key after its prefix is left, known to Baton or not.
    #[test]
    fn a_credential_with_an_escape_inside_is_masked_whole() {
        let key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345";
        let escaped = key.replace('I', "\\u0049");
        for known in [true, false] {
            let r = Redactor::default();
            if known {
                r.set_secrets([key]);
            }
            for body in [
                format!(r#"{{"error":{{"message":"Incorrect API key: Bearer {escaped}"}}}}"#),
                format!("upstream said: Authorization: Bearer {escaped} was refused"),
                format!(r#"{{"detail":"key {escaped}"}}"#),
            ] {
                let out = String::from_utf8_lossy(&r.bytes(body.as_bytes())).into_owned();
                for tail in ["ABCDEFGH", "JKLMNOP", "QRSTUVWXYZ012345", "u0049"] {
                    assert!(!out.contains(tail), "known={known}: {out}");
                }
            }
        }
    }

    #[test]
    fn echoes_written_with_escapes_are_masked_too() {
        let r = Redactor::default();
        r.set_secrets(["custom/proxy-Echo-token-9876"]);
        for body in [
            r#"{"error":{"message":"bad key custom\/proxy-Echo-token-9876"}}"#,
            r#"{"error":{"message":"bad key custom/proxy-\u0045cho-token-9876"}}"#,
            "bad key custom%2Fproxy-Echo-token-9876 in the query",
        ] {
            let out = r.bytes(body.as_bytes());
            let s = String::from_utf8_lossy(&out);
            assert!(!s.contains("token-9876"), "{body} -> {s}");
            assert!(!unescape(&s).contains("token-9876"), "{body} -> {s}");
        }
        let plain = br#"{"error":{"message":"line one\nline two"}}"#;
        assert!(
            matches!(r.bytes(plain), Cow::Borrowed(_)),
            "nothing hidden: untouched"
        );
    }

    #[test]
    fn exact_secrets_and_credential_shapes_are_masked() {
        let r = Redactor::default();
        r.set_secrets(["my-private-proxy-token-1234", "short"]);
        let body = br#"{"error":{"message":"bad key my-private-proxy-token-1234 (short)"}}"#;
        let out = r.bytes(body);
        let s = String::from_utf8_lossy(&out);
        assert!(!s.contains("proxy-token-1234"), "{s}");
        assert!(s.contains("my-…[redacted]"), "{s}");
        assert!(
            s.contains("(short)"),
            "secrets under 8 characters are not matched"
        );
        // Valid JSON stays valid JSON.
        assert!(serde_json::from_slice::<serde_json::Value>(&out).is_ok());

        for (leak, kept) in [
            (
                "Authorization: Bearer abcdefghijklmnop.qrs",
                "Bearer [redacted]",
            ),
            (
                "key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv was rejected",
                "sk-ant-[redacted]",
            ),
            (
                "Incorrect API key provided: sk-proj-abcdefghijklmnop1234",
                "sk-proj-[redacted]",
            ),
            (
                "API key AIzaSyA1234567890abcdefghijklmnopqrstu invalid",
                "AIza[redacted]",
            ),
            (
                "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig-nature",
                "eyJ[redacted]",
            ),
            (
                "gateway key bt-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd",
                "bt-[redacted]",
            ),
            ("groq gsk_ABCDEFGHIJKLMNOPQRSTUV", "gsk_[redacted]"),
        ] {
            let out = r.text(leak);
            assert!(out.contains(kept), "{leak} → {out}");
            assert!(
                !out.contains("abcdefghijklmnop") && !out.contains("1234567890"),
                "{out}"
            );
        }
        // Ordinary text is untouched and not copied.
        assert!(matches!(
            r.text("Rate limit reached for requests; try again in 20s"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            r.text("a task-list of sk- items"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_secret_containing_another_is_masked_whole() {
        let r = Redactor::default();
        r.set_secrets(["abcdefgh", "abcdefgh-and-more-secret"]);
        let out = r.text("x abcdefgh-and-more-secret y");
        assert_eq!(out, "x abc…[redacted] y");
    }
}
