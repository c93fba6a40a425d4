//! Capture (opt-in, per provider or client key, for a while): the exact bytes of a request's
//! way through Baton — what the client sent, the canonical request, each upstream request and
//! response (streams as they came) and what the client got — kept as one file a user can
//! replay (`baton replay`) or attach to a bug report.
//!
//! Nothing is held unless a rule is live: a request then costs one load of an empty list. A
//! capture is written when its last holder lets go (the answer sent, or the client gone), to
//! `captures/<request id>.json` in the data directory, readable by the user only (0600), every
//! header and body passed through the redactor's strictest reading (`Redactor::strict`), bounded
//! in size (`record::MAX_PART` a body) and count ([`MAX_FILES`]), and deleted with the request
//! log's retention.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

mod body;
mod record;

pub use body::teed;
use record::{Budget, Held, Sink};
pub use record::{Capture, Part};

/// The settings table's key for the live rules.
pub const SETTING: &str = "captureRules";
/// The most capture files kept; the oldest go first.
pub const MAX_FILES: usize = 200;
/// The longest a rule may run.
pub const MAX_MINUTES: u32 = 24 * 60;

/// Headers whose values are credentials: never kept, whatever they hold (and so never sent
/// again by `baton replay`).
pub const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "x-admin-key",
    "cookie",
    "set-cookie",
    "x-amz-security-token",
    "chatgpt-account-id",
];

/// What is captured, until when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Requests sent to this provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Requests made with this client key (its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<String>,
    /// Unix ms when the rule ends.
    pub until_ms: i64,
}

/// The captures: the live rules and the files.
pub struct Captures {
    rules: ArcSwap<Vec<Rule>>,
    store: Arc<Store>,
    /// The bytes the captures in flight hold, together.
    budget: Arc<Budget>,
}

/// Where capture files are written, and how.
pub struct Store {
    dir: PathBuf,
    redactor: Arc<crate::redact::Redactor>,
    /// How long a capture is kept (the request log's retention), in ms.
    keep_ms: std::sync::atomic::AtomicI64,
    /// One writer at a time (pruning reads the directory).
    writing: Mutex<()>,
}

impl Captures {
    pub fn new(
        data_dir: &Path,
        redactor: Arc<crate::redact::Redactor>,
        retention_days: u32,
    ) -> Self {
        Self {
            rules: ArcSwap::from_pointee(Vec::new()),
            budget: Arc::default(),
            store: Arc::new(Store {
                dir: data_dir.join("captures"),
                redactor,
                keep_ms: (i64::from(retention_days.max(1)) * 86_400_000).into(),
                writing: Mutex::new(()),
            }),
        }
    }

    /// The rules in force (those still running at `now_ms`).
    pub fn rules(&self, now_ms: i64) -> Vec<Rule> {
        self.rules
            .load()
            .iter()
            .filter(|r| r.until_ms > now_ms)
            .cloned()
            .collect()
    }

    pub fn set_rules(&self, rules: Vec<Rule>) {
        self.rules.store(Arc::new(rules));
    }

    /// A capture for a request arriving under `client_key`, when a rule may want it.
    pub fn begin(&self, start: Start<'_>) -> Option<Arc<Capture>> {
        let rules = self.rules.load();
        if rules.is_empty() {
            return None;
        }
        let live: Vec<&Rule> = rules.iter().filter(|r| r.until_ms > start.now_ms).collect();
        let wanted = live
            .iter()
            .any(|r| r.client_key.as_deref() == Some(start.client_key));
        let providers: Vec<String> = live.iter().filter_map(|r| r.provider.clone()).collect();
        if !wanted && providers.is_empty() {
            return None;
        }
        let mut client = Part::head(Some(start.method), Some(start.path), start.headers);
        let mut taken = 0;
        self.budget.keep(&mut client, start.body, &mut taken);
        Some(Arc::new(Capture {
            id: start.request_id.to_string(),
            ts_ms: start.now_ms,
            client_key: start.client_key.to_string(),
            wanted,
            providers,
            held: Mutex::new(Held {
                client,
                taken,
                ..Held::default()
            }),
            budget: self.budget.clone(),
            sink: Arc::downgrade(&(self.store.clone() as Arc<dyn Sink>)),
        }))
    }

    /// The ids of the requests captured (one listing of the folder).
    pub fn ids(&self) -> std::collections::HashSet<String> {
        self.store
            .files()
            .into_iter()
            .filter_map(|(path, _, _)| Some(path.file_stem()?.to_string_lossy().into_owned()))
            .collect()
    }

    /// The captures kept, newest first: id, when, size.
    pub fn list(&self) -> Vec<Value> {
        let mut out: Vec<(std::time::SystemTime, Value)> = self
            .store
            .files()
            .into_iter()
            .map(|(path, modified, len)| {
                let id = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (modified, json!({"id": id, "bytes": len}))
            })
            .collect();
        out.sort_by_key(|b| std::cmp::Reverse(b.0));
        out.into_iter().map(|(_, v)| v).collect()
    }

    /// A capture's file, as written (already redacted).
    pub fn read(&self, id: &str) -> Option<Vec<u8>> {
        std::fs::read(self.store.path(id)?).ok()
    }

    pub fn delete(&self, id: &str) -> bool {
        self.store
            .path(id)
            .is_some_and(|p| std::fs::remove_file(p).is_ok())
    }

    /// Captures past the retention, and beyond the most kept, are deleted.
    pub fn prune(&self) {
        self.store.prune();
    }
}

/// A request arriving, as a capture starts from it.
pub struct Start<'a> {
    pub request_id: &'a str,
    pub client_key: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub headers: &'a http::HeaderMap,
    pub body: &'a [u8],
    pub now_ms: i64,
}

impl Store {
    /// The file of request `id`: ids are Baton's own (`req_…`), and nothing else is a path.
    fn path(&self, id: &str) -> Option<PathBuf> {
        let ok = !id.is_empty()
            && id.len() <= 100
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        ok.then(|| self.dir.join(format!("{id}.json")))
    }

    fn files(&self) -> Vec<(PathBuf, std::time::SystemTime, u64)> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((e.path(), m.modified().ok()?, m.len()))
            })
            .collect()
    }

    fn prune(&self) {
        let mut files = self.files();
        files.sort_by_key(|b| std::cmp::Reverse(b.1));
        let keep = std::time::Duration::from_millis(
            self.keep_ms
                .load(std::sync::atomic::Ordering::Relaxed)
                .max(0) as u64,
        );
        let now = std::time::SystemTime::now();
        for (i, (path, modified, _)) in files.iter().enumerate() {
            let old = now.duration_since(*modified).is_ok_and(|age| age > keep);
            if old || i >= MAX_FILES {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    fn document(&self, id: &str, ts_ms: i64, client_key: &str, held: Held) -> Value {
        let extra = &held.extra_secrets;
        let part = |p: &Part| self.part(p, extra);
        let attempts: Vec<Value> = held
            .exchanges
            .iter()
            .map(|x| {
                json!({
                    "provider": x.provider,
                    "model": x.model,
                    "key": x.key,
                    "request": part(&x.request),
                    "response": x.response.as_ref().map(part),
                })
            })
            .collect();
        let canonical = held
            .canonical
            .as_deref()
            .map(|c| self.text(c.as_bytes(), extra));
        json!({
            "baton": "capture",
            "version": 1,
            "id": id,
            "tsMs": ts_ms,
            "clientKey": client_key,
            "client": part(&held.client),
            "canonical": canonical,
            "attempts": attempts,
            "answer": held.answer.as_ref().map(part),
            "log": held.row,
        })
    }

    fn part(&self, p: &Part, extra: &[String]) -> Value {
        let headers: Vec<Value> = p
            .headers
            .iter()
            .map(|(n, v)| {
                let value = if CREDENTIAL_HEADERS.contains(&n.as_str()) {
                    crate::redact::MASK.to_string()
                } else {
                    self.text(v.as_bytes(), extra)
                };
                json!([n, value])
            })
            .collect();
        let mut v = serde_json::to_value(p).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            if let Some(url) = &p.url {
                o.insert(
                    "url".into(),
                    Value::String(self.text(url.as_bytes(), extra)),
                );
            }
            o.insert("headers".into(), Value::Array(headers));
            o.insert("body".into(), Value::String(self.text(&p.body, extra)));
        }
        v
    }

    fn text(&self, bytes: &[u8], extra: &[String]) -> String {
        String::from_utf8_lossy(&self.redactor.strict(bytes, extra)).into_owned()
    }
}

impl Sink for Store {
    /// Writes a capture: every header and body through the redactor's strictest reading, the
    /// file readable by the user only.
    fn write(&self, id: &str, ts_ms: i64, client_key: &str, held: Held) {
        let Some(path) = self.path(id) else {
            return;
        };
        let doc = self.document(id, ts_ms, client_key, held);
        let _one = self.writing.lock();
        let bytes = match serde_json::to_vec_pretty(&doc) {
            Ok(b) => b,
            Err(_) => return,
        };
        if let Err(e) = write_private(&self.dir, &path, &bytes) {
            tracing::warn!(request_id = id, "capture not written: {e}");
            return;
        }
        tracing::info!(request_id = id, bytes = bytes.len(), "request captured");
        self.prune();
    }
}

/// `bytes` to `path` in `dir` (made readable by the user only), the file 0600, whole or not at
/// all (written aside, then renamed).
fn write_private(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
