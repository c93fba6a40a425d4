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

    /// `body` with every known secret and credential shape masked.
    pub fn bytes<'a>(&self, body: &'a [u8]) -> Cow<'a, [u8]> {
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

/// A known secret's masked form: its first three characters, then the mask.
fn mask_exact(s: &str) -> String {
    let head: String = s.chars().take(3).collect();
    format!("{head}…{MASK}")
}

#[cfg(test)]
mod tests {
    use super::*;

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
