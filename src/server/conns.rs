//! Who holds the open client connections, so that slow ones cannot lock out the rest.
//!
//! A slowloris client opens many connections and trickles header bytes (or completes a
//! request and then idles): each costs it nothing and holds one of `server.maxConnections`.
//! The cap alone would then keep every legitimate client waiting for the header timeout, and
//! reopening a closed connection restarts that wait. So the table knows what each connection
//! is doing, and when it is full a new connection takes the place of the one that is costing
//! the least to close:
//!
//! 1. the oldest connection that has not sent a complete request's headers yet;
//! 2. else the longest-idle keep-alive connection (no request in flight);
//! 3. else (every connection is serving a request) the new one waits in the listen queue.
//!
//! Among connections of the same standing, the peer holding the most goes first, so one
//! address cannot push out everybody else's. A peer that is not on loopback also holds at
//! most `server.maxConnectionsPerPeer`: past that, its own least useful connection makes room,
//! or the new one is closed. Loopback is exempt from that share (every local client is the
//! same address there), and protected by the eviction order above instead.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Standing {
    /// No request's headers complete yet: the first to go.
    Opening,
    /// Between requests on a keep-alive connection.
    Idle,
    /// Requests in flight (streams count until they end): never closed to make room.
    Busy(u32),
}

struct Entry {
    peer: IpAddr,
    standing: Standing,
    /// When it entered its standing (a counter: older is smaller).
    since: u64,
    /// When it was accepted: a connection still opening is not closed before `grace` has
    /// passed, so a flood of new connections cannot push out a client before it could send.
    opened: Instant,
    evict: CancellationToken,
}

#[derive(Default)]
struct Table {
    // Touched twice a request: foldhash (seeded per process), not SipHash.
    entries: HashMap<u64, Entry, foldhash::fast::RandomState>,
    per_peer: HashMap<IpAddr, usize, foldhash::fast::RandomState>,
    next: u64,
}

impl Table {
    fn tick(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// The connection to close to make room: opening before idle, the peer holding the most
    /// first, then the oldest. `of` limits the choice to one peer's connections.
    fn victim(&self, of: Option<IpAddr>, grace: Duration) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(_, e)| !matches!(e.standing, Standing::Busy(_)))
            .filter(|(_, e)| e.standing != Standing::Opening || e.opened.elapsed() >= grace)
            .filter(|(_, e)| of.is_none_or(|p| p == e.peer))
            .min_by_key(|(_, e)| {
                let held = self.per_peer.get(&e.peer).copied().unwrap_or(0);
                (e.standing, std::cmp::Reverse(held), e.since)
            })
            .map(|(id, _)| *id)
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        if let Some(n) = self.per_peer.get_mut(&e.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&e.peer);
            }
        }
        Some(e)
    }

    fn evict(&mut self, id: u64) {
        if let Some(e) = self.remove(id) {
            e.evict.cancel();
        }
    }
}

/// Why a new connection was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Every connection is serving a request, or still within its grace to send one: wait
    /// until one closes, idles or ages.
    Full,
    /// This peer holds its whole share with requests in flight: close the new connection.
    PeerFull,
}

/// The open connections, shared by the accept loop and every connection's task.
pub(crate) struct Conns {
    table: Mutex<Table>,
    /// Woken when a connection closes or stops serving (room may be made now).
    changed: Notify,
    cap: usize,
    per_peer: usize,
    grace: Duration,
}

/// What the "room made" log line reports.
pub(crate) struct Placed {
    pub conn: Conn,
    pub evicted: bool,
}

impl Conns {
    pub(crate) fn new(cap: usize, per_peer: usize, grace: Duration) -> Arc<Self> {
        Arc::new(Self {
            table: Mutex::new(Table::default()),
            changed: Notify::new(),
            cap: cap.max(1),
            per_peer: per_peer.max(1),
            grace,
        })
    }

    /// How long a new connection may take to send its first request before it can be closed
    /// to make room (a full table waiting on young connections re-checks this often).
    pub(crate) fn grace(&self) -> Duration {
        self.grace
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a place for a connection from `peer`, closing a less useful one if that is what
    /// makes room.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Placed, Refused> {
        let mut t = self.lock();
        let mut evicted = false;
        if !peer.is_loopback() && t.per_peer.get(&peer).copied().unwrap_or(0) >= self.per_peer {
            let id = t.victim(Some(peer), self.grace).ok_or(Refused::PeerFull)?;
            t.evict(id);
            evicted = true;
        }
        if t.entries.len() >= self.cap {
            let id = t.victim(None, self.grace).ok_or(Refused::Full)?;
            t.evict(id);
            evicted = true;
        }
        let id = t.tick();
        let evict = CancellationToken::new();
        t.entries.insert(
            id,
            Entry {
                peer,
                standing: Standing::Opening,
                since: id,
                opened: Instant::now(),
                evict: evict.clone(),
            },
        );
        *t.per_peer.entry(peer).or_default() += 1;
        Ok(Placed {
            conn: Conn {
                id,
                conns: self.clone(),
                evicted: evict,
            },
            evicted,
        })
    }

    /// Resolves when room may have been made (a connection closed or went idle).
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Open connections (for tests and the log line).
    pub(crate) fn open(&self) -> usize {
        self.lock().entries.len()
    }

    fn set(&self, id: u64, f: impl FnOnce(Standing) -> Standing) {
        let mut t = self.lock();
        let since = t.tick();
        let Some(e) = t.entries.get_mut(&id) else {
            return;
        };
        let now = f(e.standing);
        if now != e.standing {
            e.standing = now;
            e.since = since;
        }
        let idle = !matches!(now, Standing::Busy(_));
        drop(t);
        if idle {
            self.changed.notify_waiters();
        }
    }
}

/// One connection's place in the table; dropping it gives the place back.
pub(crate) struct Conn {
    id: u64,
    conns: Arc<Conns>,
    evicted: CancellationToken,
}

impl Conn {
    /// Resolves when the table closed this connection to make room.
    pub(crate) fn evicted(&self) -> CancellationToken {
        self.evicted.clone()
    }

    /// A request's headers are complete: the connection serves until the returned guard (held
    /// by the response body) is dropped.
    pub(crate) fn request(&self) -> InFlight {
        self.conns.set(self.id, |s| match s {
            Standing::Busy(n) => Standing::Busy(n + 1),
            _ => Standing::Busy(1),
        });
        InFlight {
            id: self.id,
            conns: self.conns.clone(),
        }
    }
}

/// An upgraded connection (a WebSocket) keeps its place through this.
impl crate::api::websocket::Connection for Conn {
    fn closed(&self) -> CancellationToken {
        self.evicted()
    }

    fn serving(&self) -> Box<dyn Send> {
        Box::new(self.request())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.conns.lock().remove(self.id);
        self.conns.changed.notify_waiters();
    }
}

/// A request in flight on a connection; the connection is idle again once none are.
pub(crate) struct InFlight {
    id: u64,
    conns: Arc<Conns>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conns.set(self.id, |s| match s {
            Standing::Busy(n) if n > 1 => Standing::Busy(n - 1),
            _ => Standing::Idle,
        });
    }
}

/// A response body that keeps its request counted as in flight until it is sent or dropped.
pub(crate) struct Tracked {
    pub inner: axum::body::Body,
    pub _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([127, 0, 0, 1]))
    }

    fn admit(c: &Arc<Conns>, peer: &str) -> Conn {
        match c.admit(ip(peer)) {
            Ok(a) => a.conn,
            Err(e) => panic!("{peer} refused: {e:?}"),
        }
    }

    #[test]
    fn a_full_table_closes_an_opening_connection_before_an_idle_one_and_never_a_busy_one() {
        let c = Conns::new(3, 100, Duration::ZERO);
        let busy = admit(&c, "127.0.0.1");
        let _serving = busy.request();
        let idle = admit(&c, "127.0.0.1");
        drop(idle.request());
        let opening = admit(&c, "127.0.0.1");

        let fourth = admit(&c, "127.0.0.1");
        assert!(
            opening.evicted().is_cancelled(),
            "the opening one made room"
        );
        assert!(!idle.evicted().is_cancelled() && !busy.evicted().is_cancelled());
        let _fifth = admit(&c, "127.0.0.1");
        assert!(
            fourth.evicted().is_cancelled(),
            "then the newer opening one"
        );
        assert!(!idle.evicted().is_cancelled());
        let _sixth = admit(&c, "127.0.0.1");
        // Opening ones go first whatever their age; the idle one only when none is left.
        assert_eq!(c.open(), 3);
        assert!(!busy.evicted().is_cancelled());
    }

    #[test]
    fn when_every_connection_is_serving_the_next_waits() {
        let c = Conns::new(2, 100, Duration::ZERO);
        let a = admit(&c, "127.0.0.1");
        let _ra = a.request();
        let b = admit(&c, "127.0.0.1");
        let rb = b.request();
        assert_eq!(c.admit(ip("127.0.0.1")).err(), Some(Refused::Full));
        drop(rb);
        assert!(c.admit(ip("127.0.0.1")).is_ok(), "an idle one makes room");
        assert!(b.evicted().is_cancelled());
    }

    #[test]
    fn the_peer_holding_the_most_gives_way_first() {
        let c = Conns::new(4, 100, Duration::ZERO);
        let other = admit(&c, "10.0.0.2");
        let hog: Vec<Conn> = (0..3).map(|_| admit(&c, "10.0.0.9")).collect();
        let _new = admit(&c, "10.0.0.3");
        assert!(
            !other.evicted().is_cancelled(),
            "the older lone connection stays"
        );
        assert_eq!(hog.iter().filter(|h| h.evicted().is_cancelled()).count(), 1);
    }

    #[test]
    fn a_remote_peer_holds_its_share_at_most_and_loopback_is_exempt() {
        let c = Conns::new(100, 2, Duration::ZERO);
        let a = admit(&c, "10.0.0.9");
        let _ra = a.request();
        let b = admit(&c, "10.0.0.9");
        let _rb = b.request();
        assert_eq!(c.admit(ip("10.0.0.9")).err(), Some(Refused::PeerFull));
        let other = admit(&c, "10.0.0.2");
        let _ro = other.request();
        let local: Vec<Conn> = (0..5).map(|_| admit(&c, "127.0.0.1")).collect();
        assert!(local.iter().all(|l| !l.evicted().is_cancelled()));
        // An idle one of its own makes room for the peer's next; nobody else's does.
        let d = admit(&c, "10.0.0.2");
        drop(d.request());
        let _e = admit(&c, "10.0.0.2");
        assert!(d.evicted().is_cancelled());
        assert!(local.iter().all(|l| !l.evicted().is_cancelled()));
    }

    /// A connection just accepted keeps its place for the grace period, however many new ones
    /// arrive; after it, it may be closed to make room like any other that sent nothing.
    #[test]
    fn a_new_connection_has_its_grace_to_send_a_request() {
        let c = Conns::new(1, 100, Duration::from_millis(50));
        let first = admit(&c, "127.0.0.1");
        assert_eq!(c.admit(ip("127.0.0.1")).err(), Some(Refused::Full));
        assert!(!first.evicted().is_cancelled());
        std::thread::sleep(Duration::from_millis(60));
        let _second = admit(&c, "127.0.0.1");
        assert!(first.evicted().is_cancelled());
    }

    #[test]
    fn a_closed_connection_gives_its_place_back() {
        let c = Conns::new(1, 1, Duration::ZERO);
        let a = admit(&c, "10.0.0.9");
        let _r = a.request();
        assert!(c.admit(ip("10.0.0.8")).is_err());
        drop(_r);
        drop(a);
        assert_eq!(c.open(), 0);
        let _b = admit(&c, "10.0.0.9");
    }
}
