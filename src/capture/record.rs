//! One request's capture (a leaf of `capture`): what the client sent, the canonical request,
//! each upstream request and response (streams as they came), and what the client got, held
//! in memory within bounds while the request runs.

use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

/// The most of one body a capture keeps.
pub const MAX_PART: usize = 4 * 1024 * 1024;
/// The most upstream exchanges a capture keeps.
pub const MAX_EXCHANGES: usize = 16;

/// A message as captured: start line, headers and body (bounded; the rest counted).
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The client's path, or the upstream's whole URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub headers: Vec<(String, String)>,
    #[serde(skip)]
    pub body: Vec<u8>,
    /// Bytes of the body beyond [`MAX_PART`], not kept.
    #[serde(skip_serializing_if = "is_zero")]
    pub cut_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Part {
    pub fn head(method: Option<&str>, url: Option<&str>, headers: &http::HeaderMap) -> Part {
        Part {
            method: method.map(str::to_string),
            url: url.map(str::to_string),
            headers: headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            ..Part::default()
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        let room = MAX_PART.saturating_sub(self.body.len());
        let take = bytes.len().min(room);
        self.body.extend_from_slice(&bytes[..take]);
        self.cut_bytes += (bytes.len() - take) as u64;
    }
}

/// One upstream request and its answer.
#[derive(Debug, Default, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exchange {
    pub provider: String,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub request: Part,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<Part>,
}

/// Everything a capture holds while its request runs.
#[derive(Debug, Default)]
pub struct Held {
    pub client: Part,
    pub canonical: Option<String>,
    pub exchanges: Vec<Exchange>,
    pub answer: Option<Part>,
    /// The request's log row, once it is finished.
    pub row: Option<Value>,
    /// The providers its attempts were sent to.
    pub providers: Vec<String>,
    /// Secrets Baton does not hold that this request carried (a client's own login).
    pub extra_secrets: Vec<String>,
}

/// A capture in progress.
pub struct Capture {
    pub(super) id: String,
    pub(super) ts_ms: i64,
    pub(super) client_key: String,
    /// Kept whatever it was sent to (its client key is being captured).
    pub(super) wanted: bool,
    /// Kept when it was sent to one of these providers.
    pub(super) providers: Vec<String>,
    pub(super) held: Mutex<Held>,
    pub(super) sink: std::sync::Weak<dyn Sink>,
}

/// Where a finished capture goes (the capture store).
pub trait Sink: Send + Sync {
    fn write(&self, id: &str, ts_ms: i64, client_key: &str, held: Held);
}

impl Capture {
    fn with<R>(&self, f: impl FnOnce(&mut Held) -> R) -> Option<R> {
        self.held.lock().ok().map(|mut h| f(&mut h))
    }

    /// The canonical request, as Baton holds it.
    pub fn canonical(&self, text: String) {
        self.with(|h| h.canonical = Some(text));
    }

    /// A secret this request carried that Baton does not hold (masked like its own).
    pub fn mask(&self, secret: &str) {
        self.with(|h| h.extra_secrets.push(secret.to_string()));
    }

    /// An upstream request about to be sent; its index for the answer.
    pub fn exchange(
        &self,
        provider: &str,
        model: &str,
        key: Option<&str>,
        request: Part,
    ) -> Option<usize> {
        self.with(|h| {
            if h.exchanges.len() >= MAX_EXCHANGES {
                return None;
            }
            h.exchanges.push(Exchange {
                provider: provider.to_string(),
                model: model.to_string(),
                key: key.map(str::to_string),
                request,
                response: None,
            });
            Some(h.exchanges.len() - 1)
        })
        .flatten()
    }

    /// The upstream's answer's status and headers.
    pub fn response(&self, i: usize, status: u16, headers: &http::HeaderMap) {
        self.with(|h| {
            if let Some(x) = h.exchanges.get_mut(i) {
                let mut p = Part::head(None, None, headers);
                p.status = Some(status);
                x.response = Some(p);
            }
        });
    }

    /// Bytes of the upstream's answer, as they came.
    pub fn response_bytes(&self, i: usize, bytes: &[u8]) {
        self.with(|h| {
            if let Some(r) = h.exchanges.get_mut(i).and_then(|x| x.response.as_mut()) {
                r.push(bytes);
            }
        });
    }

    /// What the client got: its status and headers.
    pub fn answer(&self, status: u16, headers: &http::HeaderMap) {
        self.with(|h| {
            let mut p = Part::head(None, None, headers);
            p.status = Some(status);
            h.answer = Some(p);
        });
    }

    /// Bytes the client got, as sent.
    pub fn answer_bytes(&self, bytes: &[u8]) {
        self.with(|h| {
            if let Some(a) = h.answer.as_mut() {
                a.push(bytes);
            }
        });
    }

    /// The request's log row: whether it is kept is decided by where it was sent.
    pub fn finished(&self, row: &crate::store::LogRow) {
        let sent: Vec<String> = row
            .attempts
            .iter()
            .filter(|a| a.class.sent())
            .map(|a| a.provider.clone())
            .collect();
        let value = serde_json::to_value(row).ok();
        self.with(|h| {
            h.row = value;
            h.providers = sent;
        });
    }

    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for Capture {
    /// The last holder is gone (the answer is sent, or the client left): kept if it was wanted.
    fn drop(&mut self) {
        let held = match self.held.get_mut() {
            Ok(h) => std::mem::take(h),
            Err(_) => return,
        };
        let keep = self.wanted || held.providers.iter().any(|p| self.providers.contains(p));
        let Some(store) = self.sink.upgrade() else {
            return;
        };
        if !keep || held.row.is_none() {
            return;
        }
        let (id, ts, key) = (
            std::mem::take(&mut self.id),
            self.ts_ms,
            std::mem::take(&mut self.client_key),
        );
        let write = move || store.write(&id, ts, &key, held);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(write);
            }
            Err(_) => write(),
        }
    }
}
