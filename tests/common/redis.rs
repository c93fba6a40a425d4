//! A real `redis-server` on a loopback port and two gateways sharing it, for the shared-state
//! tests. Included with `#[path]` by the test crates that need it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use baton::clock::ManualClock;
use redis::AsyncCommands;
use serde_json::{json, Value};

use crate::common::*;

/// A `redis-server` child with append-only persistence in a temporary directory.
pub struct RedisServer {
    pub port: u16,
    pub dir: PathBuf,
    pub child: Option<Child>,
}

impl RedisServer {
    pub fn start(dir: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut r = RedisServer {
            port,
            dir: dir.to_path_buf(),
            child: None,
        };
        r.run();
        r
    }

    pub fn run(&mut self) {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--dir",
                self.dir.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/test installs Debian's redis-server)");
        self.child = Some(child);
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("redis-server did not start on port {}", self.port);
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = c.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

pub const OPS_KEY: &str = "bt-ops-key-for-shared-state-tests-0000000";
pub const TEAM_KEY: &str = "bt-team-key-for-shared-state-tests-000000";

pub fn config(redis: &RedisServer, prefix: &str, providers: Value) -> Value {
    // The same keys on every instance, as a shared config file would declare them.
    std::env::set_var("BATON_TEST_OPS_KEY", OPS_KEY);
    std::env::set_var("BATON_TEST_TEAM_KEY", TEAM_KEY);
    json!({
        "state": {"backend": "redis", "redis": {"url": redis.url(), "prefix": prefix}},
        "gatewayKeys": [
            {"env": "BATON_TEST_OPS_KEY", "label": "ops"},
            {"env": "BATON_TEST_TEAM_KEY", "label": "team", "policy": {"budget": {"dayTokens": 50}}}
        ],
        "providers": providers,
    })
}

/// The instant the pair's clock shows unless a test pins another: the 1st of a month, when
/// the day and the month start together (the case that once counted every request twice).
pub const PINNED: &str = "2026-12-01T09:00:00Z";

/// Unix ms of an RFC 3339 instant.
pub fn at(rfc3339: &str) -> i64 {
    rfc3339.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// Two gateways on one Redis, each with its own data directory, on a clock pinned at
/// [`PINNED`]: no period decision depends on the day the test runs.
pub async fn pair(
    redis: &RedisServer,
    prefix: &str,
    providers: Value,
) -> (Baton, Baton, Vec<tempfile::TempDir>) {
    let clock = Arc::new(ManualClock::new(at(PINNED)));
    pair_at(redis, prefix, providers, clock).await
}

/// [`pair`] with both instances on `clock`.
pub async fn pair_at(
    redis: &RedisServer,
    prefix: &str,
    providers: Value,
    clock: Arc<ManualClock>,
) -> (Baton, Baton, Vec<tempfile::TempDir>) {
    let mut dirs = Vec::new();
    let mut out = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gateway.key"), OPS_KEY).unwrap();
        out.push(
            Baton::start_with_clock(
                dir.path(),
                config(redis, prefix, providers.clone()),
                Some(clock.clone()),
            )
            .await,
        );
        dirs.push(dir);
    }
    let b = out.pop().unwrap();
    let a = out.pop().unwrap();
    assert!(
        eventually(5, || a.handle.core.routing.shared.is_up() == Some(true)
            && b.handle.core.routing.shared.is_up() == Some(true))
        .await,
        "both instances reach Redis"
    );
    (a, b, dirs)
}

/// Waits until `key`'s field `f` in Redis equals `want` (spending is written in the background).
pub async fn field_becomes(redis: &RedisServer, key: &str, f: &str, want: i64) -> i64 {
    let mut conn = redis.conn().await;
    let mut got = 0;
    // Up to 10 s: the resync after an outage runs on a timer, and a loaded CI machine (the
    // chaos and fuzz suites run alongside) has seen it take over 3 s.
    for _ in 0..500 {
        got = conn
            .hget::<_, _, Option<i64>>(key, f)
            .await
            .unwrap()
            .unwrap_or(0);
        if got == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    got
}
