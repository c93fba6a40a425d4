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
/// The most bytes all captures in flight hold together: past it, what comes is counted, not
/// kept (a busy provider being captured must not hold the machine's memory).
pub const MAX_HELD: usize = 64 * 1024 * 1024;

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

    /// Keeps what this part's bound and `room` allow of `bytes`, counts the rest; how many
    /// bytes it kept.
    pub fn push_within(&mut self, bytes: &[u8], room: usize) -> usize {
        let room = room.min(MAX_PART.saturating_sub(self.body.len()));
        let take = bytes.len().min(room);
        self.body.extend_from_slice(&bytes[..take]);
        self.cut_bytes += (bytes.len() - take) as u64;
        take
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
    /// Bytes it holds of the budget all captures share ([`MAX_HELD`]).
    pub taken: usize,
}

/// The bytes all captures in flight hold.
#[derive(Default)]
pub struct Budget(std::sync::atomic::AtomicUsize);

impl Budget {
    /// Up to `want` bytes taken from what is left.
    pub fn reserve(&self, want: usize) -> usize {
        use std::sync::atomic::Ordering;
        let mut now = self.0.load(Ordering::Relaxed);
        loop {
            let take = want.min(MAX_HELD.saturating_sub(now));
            match self
                .0
                .compare_exchange_weak(now, now + take, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return take,
                Err(seen) => now = seen,
            }
        }
    }

    pub fn release(&self, n: usize) {
        self.0.fetch_sub(n, std::sync::atomic::Ordering::AcqRel);
    }

    /// `bytes` into `part` within this budget: what is kept is counted to `taken`.
    pub fn keep(&self, part: &mut Part, bytes: &[u8], taken: &mut usize) {
        let room = self.reserve(bytes.len());
        let kept = part.push_within(bytes, room);
        self.release(room - kept);
        *taken += kept;
    }
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
    pub(super) budget: std::sync::Arc<Budget>,
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

    /// An upstream request about to be sent (`request` its head, `body` its body); its index
    /// for the answer.
    pub fn exchange(
        &self,
        provider: &str,
        model: &str,
        key: Option<&str>,
        mut request: Part,
        body: &[u8],
    ) -> Option<usize> {
        self.with(|h| {
            if h.exchanges.len() >= MAX_EXCHANGES {
                return None;
            }
            self.budget.keep(&mut request, body, &mut h.taken);
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
                self.budget.keep(r, bytes, &mut h.taken);
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
                self.budget.keep(a, bytes, &mut h.taken);
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
        // What it held of the shared budget is given back once written (at once if not kept).
        let (budget, taken) = (self.budget.clone(), held.taken);
        let keep = self.wanted || held.providers.iter().any(|p| self.providers.contains(p));
        let wanted = self.sink.upgrade().filter(|_| keep && held.row.is_some());
        let Some(store) = wanted else {
            budget.release(taken);
            return;
        };
        let (id, ts, key) = (
            std::mem::take(&mut self.id),
            self.ts_ms,
            std::mem::take(&mut self.client_key),
        );
        let write = move || {
            store.write(&id, ts, &key, held);
            budget.release(taken);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(write);
            }
            Err(_) => write(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_and_all_captures_together_are_bounded() {
        let b = Budget::default();
        let big = vec![b'x'; MAX_PART + 10];
        let mut p = Part::default();
        let mut taken = 0;
        b.keep(&mut p, &big, &mut taken);
        assert_eq!((p.body.len(), p.cut_bytes, taken), (MAX_PART, 10, MAX_PART));
        // Every capture together: past the shared bound, bytes are counted, not kept.
        for _ in 0..MAX_HELD / MAX_PART {
            let mut q = Part::default();
            b.keep(&mut q, &big, &mut taken);
        }
        assert_eq!(taken, MAX_HELD);
        let (mut r, mut more) = (Part::default(), 0);
        b.keep(&mut r, b"more", &mut more);
        assert_eq!((more, r.cut_bytes), (0, 4));
        // Given back, the room is there again.
        b.release(taken);
        assert_eq!(b.reserve(5), 5);
    }
}
