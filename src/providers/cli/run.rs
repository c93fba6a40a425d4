//! One CLI call: spawn it in its own process group, feed the prompt on stdin, read its output
//! lines (bounded) and turn them into [`CliItem`]s. The group is killed when the reader goes
//! away (timeout, client disconnect, failover), when the call ends, and on shutdown.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use super::decode::{self, Decoder, Step};
use crate::canonical::{StopReason, Usage};
use crate::config::ProviderKind;
use crate::limits::{self, Classified, ResetContext};

/// Longest stdout line kept (a whole answer can arrive as one JSON line).
const MAX_LINE: usize = 16 * 1024 * 1024;
/// Longest stderr line kept.
const MAX_ERR_LINE: usize = 16 * 1024;
/// Output kept for classifying a failure.
const MAX_KEPT: usize = 64 * 1024;

/// What a running CLI produced, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum CliItem {
    Text(String),
    Usage(Usage),
    /// The answer is complete.
    Finish(StopReason),
    /// The CLI failed; nothing more follows.
    Failed(Classified),
    /// One of the login's limit windows, as the CLI reported it.
    Window(crate::limits::windows::Window),
}

/// Process groups of the CLIs running now, so shutdown can kill them all.
#[derive(Default)]
pub struct CliProcesses {
    groups: Mutex<HashSet<i32>>,
}

impl CliProcesses {
    /// Kills every running CLI's process group (shutdown).
    pub fn kill_all(&self) {
        let groups: Vec<i32> = self
            .groups
            .lock()
            .map(|g| g.iter().copied().collect())
            .unwrap_or_default();
        for g in groups {
            kill_group(g);
        }
    }

    /// How many CLI calls are running.
    pub fn running(&self) -> usize {
        self.groups.lock().map(|g| g.len()).unwrap_or(0)
    }
}

fn kill_group(pgid: i32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    // ESRCH (already gone) is the normal case after a clean exit.
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
}

/// Kills the process group when dropped, whatever ended the call.
struct Group {
    pgid: i32,
    procs: Arc<CliProcesses>,
}

impl Drop for Group {
    fn drop(&mut self) {
        kill_group(self.pgid);
        if let Ok(mut g) = self.procs.groups.lock() {
            g.remove(&self.pgid);
        }
    }
}

/// Everything needed to start one call.
pub struct Spawn {
    pub kind: ProviderKind,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: String,
    /// For classifying failures ("resets 1:19am", daily quotas).
    pub ctx: ResetContext,
}

/// A running call; dropping it kills the CLI.
pub struct CliRun {
    rx: mpsc::Receiver<CliItem>,
}

impl CliRun {
    /// The next item; `None` once the call is over.
    pub async fn next(&mut self) -> Option<CliItem> {
        self.rx.recv().await
    }

    /// An item already waiting, without waiting for one.
    pub fn try_next(&mut self) -> Option<CliItem> {
        self.rx.try_recv().ok()
    }
}

/// Starts the CLI. Fails only when it cannot be spawned at all.
pub fn start(spec: Spawn, procs: Arc<CliProcesses>) -> Result<CliRun, Classified> {
    let dir = tempfile::Builder::new()
        .prefix("baton-cli-")
        .tempdir()
        .map_err(|e| {
            limits::classify_transport(format!("cannot create a working directory: {e}"))
        })?;
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        limits::classify_transport(format!("cannot start `{}`: {e}", spec.program.display()))
    })?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    if pgid > 0 {
        if let Ok(mut g) = procs.groups.lock() {
            g.insert(pgid);
        }
    }
    let group = Group { pgid, procs };
    let (tx, rx) = mpsc::channel(64);
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let prompt = spec.stdin;
    tokio::spawn(async move {
        // Fed from its own task: a CLI that writes before reading all its input cannot
        // deadlock against us.
        if let Some(mut w) = stdin {
            let _ = w.write_all(prompt.as_bytes()).await;
            let _ = w.shutdown().await;
        }
    });
    tokio::spawn(async move {
        let _dir = dir;
        pump(&mut child, stdout, stderr, spec.kind, &spec.ctx, tx).await;
        // Done, failed, or nobody reads any more: the whole group goes, and the child is
        // reaped here (no zombie).
        drop(group);
        let _ = child.wait().await;
    });
    Ok(CliRun { rx })
}

/// Reads the CLI's output until it finishes, fails, or the reader goes away.
/// Long because it is one `select!` loop over stdout, stderr, the exit and the reader going
/// away; split, the arms would share half a dozen pieces of state through arguments.
async fn pump(
    child: &mut tokio::process::Child,
    stdout: Option<tokio::process::ChildStdout>,
    stderr: Option<tokio::process::ChildStderr>,
    kind: ProviderKind,
    ctx: &ResetContext,
    tx: mpsc::Sender<CliItem>,
) {
    let (Some(stdout), Some(stderr)) = (stdout, stderr) else {
        return;
    };
    let mut out = Lines::new(stdout, MAX_LINE);
    let mut err = Lines::new(stderr, MAX_ERR_LINE);
    let mut dec = Decoder::new(kind);
    let mut kept = String::new();
    let mut errs = String::new();
    let (mut out_done, mut err_done) = (false, false);
    let mut finished = false;
    let fail = |kept: &str, errs: &str, code: Option<i32>| {
        let text = format!("{kept}{errs}");
        limits::classify_cli(&text, code, ctx)
    };
    while !out_done {
        tokio::select! {
            _ = tx.closed() => return,
            line = out.next() => {
                let Some(line) = line else {
                    out_done = true;
                    continue;
                };
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                    keep(&mut kept, &line);
                    continue;
                };
                let (steps, worth) = dec.line(&v);
                if worth {
                    keep(&mut kept, &line);
                }
                for step in steps {
                    let item = match step {
                        Step::Text(t) => CliItem::Text(t),
                        Step::Usage(u) => CliItem::Usage(u),
                        Step::Finish(s) => {
                            finished = true;
                            CliItem::Finish(s)
                        }
                        Step::Failed => CliItem::Failed(fail(&kept, &errs, None)),
                        Step::Transient(reason) => {
                            CliItem::Failed(limits::classify_transport(reason))
                        }
                        Step::Window(w) => CliItem::Window(w),
                    };
                    let last = matches!(item, CliItem::Failed(_));
                    if tx.send(item).await.is_err() || last {
                        return;
                    }
                }
                if finished {
                    break;
                }
            }
            line = err.next(), if !err_done => {
                let Some(line) = line else {
                    err_done = true;
                    continue;
                };
                if decode::stderr_worth_keeping(&line) {
                    keep(&mut errs, &line);
                }
                if decode::stderr_is_fatal(kind, &line) {
                    let _ = tx.send(CliItem::Failed(fail(&kept, &errs, None))).await;
                    return;
                }
            }
        }
    }
    // Let it exit by itself briefly (the guard kills it either way).
    let code = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(status)) => status.code(),
        _ => None,
    };
    if finished {
        return;
    }
    // Whatever it said on stderr before exiting.
    while !err_done {
        match tokio::time::timeout(Duration::from_millis(200), err.next()).await {
            Ok(Some(line)) if decode::stderr_worth_keeping(&line) => keep(&mut errs, &line),
            Ok(Some(_)) => {}
            _ => err_done = true,
        }
    }
    let _ = tx.send(CliItem::Failed(fail(&kept, &errs, code))).await;
}

fn keep(into: &mut String, line: &str) {
    if into.len() + line.len() < MAX_KEPT {
        into.push_str(line);
        into.push('\n');
    }
}

/// Line reader with a bound per line: the rest of an over-long line is dropped, not buffered.
struct Lines<R> {
    r: BufReader<R>,
    max: usize,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    fn new(r: R, max: usize) -> Self {
        Self {
            r: BufReader::with_capacity(64 * 1024, r),
            max,
            buf: Vec::new(),
        }
    }

    /// The next line without its newline; `None` at the end. Cancel-safe.
    async fn next(&mut self) -> Option<String> {
        loop {
            let avail = match self.r.fill_buf().await {
                Ok(b) => b,
                Err(_) => &[],
            };
            if avail.is_empty() {
                if self.buf.is_empty() {
                    return None;
                }
                return Some(self.take());
            }
            let (chunk, used, complete) = match memchr::memchr(b'\n', avail) {
                Some(i) => (&avail[..i], i + 1, true),
                None => (avail, avail.len(), false),
            };
            let room = self.max.saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            self.r.consume(used);
            if complete {
                return Some(self.take());
            }
        }
    }

    fn take(&mut self) -> String {
        let line = String::from_utf8_lossy(&self.buf)
            .trim_end_matches('\r')
            .to_string();
        self.buf.clear();
        line
    }
}
