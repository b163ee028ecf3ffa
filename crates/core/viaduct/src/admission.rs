//! Admission of connections before they authenticate: a table that bounds
//! them in number and per source, closing the oldest pending one to make
//! room rather than refusing the new one; a budget that runs fewer of them
//! at once while the server falls behind; and a throttle for the log lines
//! that go with them.
//!
//! A connection is *pending* from accept until its handshake is over (until
//! it has said who it is); from then on it is *established*. Only pending
//! connections are evicted: they have proved nothing yet, so the oldest of
//! them is the one most likely to be an idle connection of a flood. A new
//! connection is refused only when every open connection is established, so
//! a flood of silent connections, from one address or many, cannot lock a
//! legitimate client out: it only shortens how long its own connections
//! live.
//!
//! [`ConnectionTable`] makes the decisions without I/O or a clock; the
//! servers (viaduct's [`Server`](crate::Server), the join server) hold it
//! behind a lock, cancel what it evicts, and count and log the outcome.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, Ipv6Addr};
use std::time::Duration;

use tokio::time::Instant;

/// The limit a new connection reached, which made room by evicting a pending
/// connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The new connection's source had its most connections pending.
    Source,
    /// The table held its most connections (pending and established).
    Total,
}

/// What [`ConnectionTable::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission<T> {
    /// The connection is in, as pending, with this id; `evicted` is the
    /// pending connection evicted to make room (its value, to close it), and
    /// the limit that made it go.
    Admitted {
        /// The new connection's id, for [`ConnectionTable::establish`] and
        /// [`ConnectionTable::remove`].
        id: u64,
        /// The connection evicted to make room, and why.
        evicted: Option<(T, Limit)>,
    },
    /// The table is full and every connection in it is established: the new
    /// one is refused.
    Full,
}

/// The open connections, those still pending oldest first, overall and per
/// source; a plain table (no I/O, no clock) that decides which pending
/// connection to evict when a new one arrives at a limit.
///
/// Each pending entry carries a value `T` (a server stores the connection's
/// cancellation token in it), handed back when the entry is evicted or
/// removed. When the new connection's source has `max_per_source` pending,
/// that source's oldest pending connection is evicted ([`Limit::Source`]);
/// otherwise, when `max_total` are open, the oldest pending connection of all
/// is ([`Limit::Total`]); when none is pending, the new one is refused
/// ([`Admission::Full`]). A table whose entries are never established never
/// refuses.
///
/// Ids grow with arrival, so the smallest is the oldest. Every operation is
/// O(log n); the table never holds more than `max_total` entries.
///
/// ```
/// use edgehive_viaduct::admission::{Admission, ConnectionTable, Limit};
///
/// let mut table = ConnectionTable::new(2, 10);
/// let source = "192.0.2.1".parse().unwrap();
/// let Admission::Admitted { id: first, .. } = table.admit(source, "first") else { panic!() };
/// table.admit(source, "second");
/// // Full: the oldest pending connection makes room.
/// let third = table.admit(source, "third");
/// assert!(matches!(third, Admission::Admitted { evicted: Some(("first", Limit::Total)), .. }));
/// assert_eq!(table.remove(first), None, "already evicted");
/// ```
#[derive(Debug)]
pub struct ConnectionTable<T> {
    max_total: usize,
    max_per_source: usize,
    next_id: u64,
    pending: BTreeMap<u64, (IpAddr, T)>,
    by_source: HashMap<IpAddr, BTreeSet<u64>>,
    established: HashSet<u64>,
}

impl<T> ConnectionTable<T> {
    /// A table of at most `max_total` connections, at most `max_per_source`
    /// of them pending from one source (both at least 1).
    pub fn new(max_total: usize, max_per_source: usize) -> ConnectionTable<T> {
        ConnectionTable {
            max_total: max_total.max(1),
            max_per_source: max_per_source.max(1),
            next_id: 0,
            pending: BTreeMap::new(),
            by_source: HashMap::new(),
            established: HashSet::new(),
        }
    }

    /// Connections open (pending or established).
    pub fn len(&self) -> usize {
        self.pending.len() + self.established.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Connections still pending.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The oldest pending connection: its id and value.
    pub fn oldest_pending(&self) -> Option<(u64, &T)> {
        self.pending.first_key_value().map(|(id, (_, v))| (*id, v))
    }

    /// Whether admitting a connection from `source` now would evict another.
    pub fn would_evict(&self, source: IpAddr) -> bool {
        self.source_at_limit(source_key(source)) || (self.len() >= self.max_total && !self.pending.is_empty())
    }

    /// Adds a pending connection from `source`, evicting the pending
    /// connection that makes room when a limit is reached (see
    /// [`ConnectionTable`]), or refusing it when none is pending.
    pub fn admit(&mut self, source: IpAddr, value: T) -> Admission<T> {
        let key = source_key(source);
        let evicted = if self.source_at_limit(key) {
            let oldest = self.by_source.get(&key).and_then(|ids| ids.first().copied());
            oldest.and_then(|id| self.remove_pending(id)).map(|v| (v, Limit::Source))
        } else if self.len() >= self.max_total {
            let oldest = self.pending.first_key_value().map(|(id, _)| *id);
            match oldest.and_then(|id| self.remove_pending(id)) {
                Some(v) => Some((v, Limit::Total)),
                None => return Admission::Full,
            }
        } else {
            None
        };
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, (key, value));
        self.by_source.entry(key).or_default().insert(id);
        Admission::Admitted { id, evicted }
    }

    /// Marks a pending connection as past its handshake: it still counts
    /// against `max_total` but is never evicted, and no longer counts against
    /// its source's limit. `false` when it is not pending (evicted, removed
    /// or already established).
    pub fn establish(&mut self, id: u64) -> bool {
        if self.remove_pending(id).is_none() {
            return false;
        }
        self.established.insert(id);
        true
    }

    /// Removes a connection (closed, failed or evicted); its value when it
    /// was pending, `None` when it was established or not in the table.
    pub fn remove(&mut self, id: u64) -> Option<T> {
        self.established.remove(&id);
        self.remove_pending(id)
    }

    fn source_at_limit(&self, key: IpAddr) -> bool {
        self.by_source.get(&key).is_some_and(|ids| ids.len() >= self.max_per_source)
    }

    fn remove_pending(&mut self, id: u64) -> Option<T> {
        let (key, value) = self.pending.remove(&id)?;
        if let Some(ids) = self.by_source.get_mut(&key) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_source.remove(&key);
            }
        }
        Some(value)
    }
}

/// How many handshakes a server runs at once while it falls behind.
///
/// The table's limits bound what a flood can hold; they do not keep a
/// server's own fleet from overloading it. When every edge of a fleet
/// connects at once (a cloud restart, a bring-up), each handshake costs
/// crypto on both sides; once the server's cores are full, handshakes take
/// longer, pass their deadline and are retried, which costs more, and the
/// established sessions' keep-alives wait behind them until those sessions
/// expire too and join the reconnecting crowd. So the server watches its
/// own lag (how late its runtime wakes a timer) and how long handshakes
/// take to complete, and, while it is behind,
/// runs fewer handshakes: a new one past the budget is refused, cheaply
/// (QUIC's CONNECTION_REFUSED, a closed TCP socket), and its edge retries
/// after its jittered backoff. (On QUIC it first waits up to 2 s for a
/// slot, as a TCP connection waits in the kernel's accept queue.) What the budget frees goes to the
/// sessions already established.
///
/// The limit starts at the table's `ceiling` (no budget in effect). Each
/// time the server is found behind, at most once per [`CUT_EVERY`], it
/// drops to three quarters of the handshakes then in progress (so the first
/// cut binds at once), never below `floor`; each time it is found keeping
/// up, it grows by a sixteenth (at least one) back toward the ceiling.
/// A plain value: no I/O, no clock of its own.
///
/// ```
/// use std::time::Duration;
/// use edgehive_viaduct::admission::HandshakeBudget;
/// use tokio::time::Instant;
///
/// let mut budget = HandshakeBudget::new(16, 4096);
/// assert!(!budget.in_effect());
/// let now = Instant::now();
/// assert!(budget.behind(400, now));
/// assert_eq!(budget.limit(), 300);
/// // Not cut again before CUT_EVERY has passed.
/// assert!(!budget.behind(300, now + Duration::from_millis(10)));
/// budget.keeping_up();
/// assert_eq!(budget.limit(), 318);
/// ```
#[derive(Debug)]
pub struct HandshakeBudget {
    floor: usize,
    ceiling: usize,
    limit: usize,
    last_cut: Option<Instant>,
}

/// The shortest time between two cuts of a [`HandshakeBudget`]: a cut takes
/// effect as handshakes in progress finish, within a few round trips.
pub const CUT_EVERY: Duration = Duration::from_millis(250);

impl HandshakeBudget {
    /// A budget between `floor` and `ceiling` (the table's total limit),
    /// starting at the ceiling.
    pub fn new(floor: usize, ceiling: usize) -> HandshakeBudget {
        let ceiling = ceiling.max(1);
        HandshakeBudget { floor: floor.clamp(1, ceiling), ceiling, limit: ceiling, last_cut: None }
    }

    /// Handshakes allowed in progress at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Whether the budget is below the ceiling, i.e. binds before the
    /// table's own limit.
    pub fn in_effect(&self) -> bool {
        self.limit < self.ceiling
    }

    /// Whether a new handshake, with `pending` in progress, is past the
    /// budget.
    pub fn exceeded(&self, pending: usize) -> bool {
        self.in_effect() && pending >= self.limit
    }

    /// The server was found behind at `now` with `pending` handshakes in
    /// progress; `true` when the limit was cut.
    pub fn behind(&mut self, pending: usize, now: Instant) -> bool {
        if self.last_cut.is_some_and(|at| now.saturating_duration_since(at) < CUT_EVERY) {
            return false;
        }
        let cut = (self.limit.min(pending) * 3 / 4).max(self.floor);
        if cut >= self.limit {
            return false;
        }
        self.limit = cut;
        self.last_cut = Some(now);
        true
    }

    /// The server was found keeping up.
    pub fn keeping_up(&mut self) {
        self.limit = (self.limit + (self.limit / 16).max(1)).min(self.ceiling);
    }
}

/// The source a per-source limit counts: the IPv4 address (also when it
/// arrives IPv4-mapped on a dual-stack socket), or the IPv6 /64, which is
/// what one IPv6 host is usually given.
///
/// ```
/// use std::net::IpAddr;
/// use edgehive_viaduct::admission::source_key;
///
/// let ip = |s: &str| s.parse::<IpAddr>().unwrap();
/// assert_eq!(source_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
/// assert_eq!(source_key(ip("2001:db8:1:2::7")), ip("2001:db8:1:2::"));
/// ```
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !u128::from(u64::MAX))),
        },
    }
}

/// Turns a stream of events into at most one log line per interval: the
/// first event logs, later ones are tallied until the interval has passed.
///
/// ```
/// use std::time::Duration;
/// use edgehive_viaduct::admission::LogThrottle;
/// use tokio::time::Instant;
///
/// let mut evictions = LogThrottle::new(Duration::from_secs(10));
/// let now = Instant::now();
/// assert_eq!(evictions.event(now), Some(1));
/// assert_eq!(evictions.event(now + Duration::from_secs(1)), None);
/// assert_eq!(evictions.event(now + Duration::from_secs(10)), Some(2));
/// ```
#[derive(Debug)]
pub struct LogThrottle {
    every: Duration,
    last: Option<Instant>,
    unlogged: u64,
}

impl LogThrottle {
    /// A throttle that lets one line through per `every`.
    pub fn new(every: Duration) -> LogThrottle {
        LogThrottle { every, last: None, unlogged: 0 }
    }

    /// Records one event at `now`; `Some(n)` when a line is due, `n` being
    /// the events since the last line (this one included).
    pub fn event(&mut self, now: Instant) -> Option<u64> {
        self.unlogged += 1;
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.every => None,
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.unlogged))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// The id and eviction of an admission that must not be refused.
    fn admitted<T>(a: Admission<T>) -> (u64, Option<(T, Limit)>) {
        match a {
            Admission::Admitted { id, evicted } => (id, evicted),
            Admission::Full => panic!("refused"),
        }
    }

    #[test]
    fn the_total_limit_evicts_the_oldest_of_all() {
        let mut t = ConnectionTable::new(3, 10);
        let (a, a_evicted) = admitted(t.admit(ip("10.0.0.1"), "a"));
        let (_, b_evicted) = admitted(t.admit(ip("10.0.0.2"), "b"));
        let (c, c_evicted) = admitted(t.admit(ip("10.0.0.3"), "c"));
        assert_eq!([a_evicted, b_evicted, c_evicted], [None, None, None]);
        assert_eq!(t.len(), 3);
        assert!(t.would_evict(ip("10.0.0.9")));
        assert_eq!(admitted(t.admit(ip("10.0.0.4"), "d")).1, Some(("a", Limit::Total)));
        assert_eq!(admitted(t.admit(ip("10.0.0.4"), "e")).1, Some(("b", Limit::Total)));
        assert_eq!(t.len(), 3);
        // The evicted are gone: removing them again finds nothing.
        assert_eq!(t.remove(a), None);
        assert_eq!(t.remove(c), Some("c"));
        assert!(!t.would_evict(ip("10.0.0.9")));
        assert_eq!(admitted(t.admit(ip("10.0.0.9"), "f")).1, None);
    }

    #[test]
    fn established_connections_are_never_evicted() {
        let mut t = ConnectionTable::new(3, 10);
        let (a, _) = admitted(t.admit(ip("10.0.0.1"), "a"));
        let (b, _) = admitted(t.admit(ip("10.0.0.2"), "b"));
        assert_eq!(admitted(t.admit(ip("10.0.0.3"), "c")).1, None);
        // The oldest, a, is established: b is the oldest pending.
        assert!(t.establish(a));
        assert_eq!(admitted(t.admit(ip("10.0.0.4"), "d")).1, Some(("b", Limit::Total)));
        assert_eq!(admitted(t.admit(ip("10.0.0.4"), "e")).1, Some(("c", Limit::Total)));
        assert_eq!((t.len(), t.pending_len()), (3, 2));
        assert!(!t.establish(b), "an evicted connection cannot be established");
        assert_eq!(t.remove(b), None);
    }

    #[test]
    fn a_full_table_of_established_connections_refuses() {
        let mut t = ConnectionTable::new(2, 10);
        let (a, _) = admitted(t.admit(ip("10.0.0.1"), 1));
        let (b, _) = admitted(t.admit(ip("10.0.0.1"), 2));
        assert!(t.establish(a) && t.establish(b));
        assert!(!t.establish(a), "only once");
        // Nothing to evict: refused, not evicting.
        assert!(!t.would_evict(ip("10.0.0.2")));
        assert_eq!(t.admit(ip("10.0.0.2"), 3), Admission::Full);
        assert_eq!(t.len(), 2);
        // A closed connection makes room.
        assert_eq!(t.remove(a), None);
        assert_eq!(t.len(), 1);
        assert_eq!(admitted(t.admit(ip("10.0.0.2"), 4)).1, None);
    }

    #[test]
    fn a_source_at_its_limit_loses_its_own_oldest_pending() {
        let mut t = ConnectionTable::new(100, 2);
        let (other, _) = admitted(t.admit(ip("192.0.2.7"), "other"));
        let (a1, _) = admitted(t.admit(ip("10.0.0.1"), "a1"));
        admitted(t.admit(ip("10.0.0.1"), "a2"));
        assert!(t.would_evict(ip("10.0.0.1")));
        assert!(!t.would_evict(ip("10.0.0.2")));
        assert_eq!(admitted(t.admit(ip("10.0.0.1"), "a3")).1, Some(("a1", Limit::Source)));
        assert_eq!(admitted(t.admit(ip("10.0.0.1"), "a4")).1, Some(("a2", Limit::Source)));
        // The other source's older connection was not touched.
        assert_eq!((t.len(), t.pending_len()), (3, 3));
        assert_eq!(t.remove(other), Some("other"));
        assert_eq!(t.remove(a1), None);
        // Established connections do not count against the source's limit.
        let mut t = ConnectionTable::new(100, 1);
        let (a, _) = admitted(t.admit(ip("10.0.0.1"), "a"));
        assert!(t.establish(a));
        assert!(!t.would_evict(ip("10.0.0.1")));
        assert_eq!(admitted(t.admit(ip("10.0.0.1"), "b")).1, None);
    }

    #[test]
    fn the_source_limit_is_checked_before_the_total_limit() {
        // Full, and the new source at its limit: its own oldest goes, not
        // the older connection of another source.
        let mut t = ConnectionTable::new(3, 2);
        admitted(t.admit(ip("10.0.0.9"), "other"));
        admitted(t.admit(ip("10.0.0.1"), "a1"));
        admitted(t.admit(ip("10.0.0.1"), "a2"));
        assert_eq!(admitted(t.admit(ip("10.0.0.1"), "a3")).1, Some(("a1", Limit::Source)));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn closed_connections_leave_the_table() {
        let mut t = ConnectionTable::new(2, 2);
        let (a, _) = admitted(t.admit(ip("2001:db8::1"), 1));
        let (b, _) = admitted(t.admit(ip("2001:db8::2"), 2));
        assert!(t.establish(b));
        assert_eq!(t.remove(a), Some(1));
        assert_eq!(t.remove(b), None);
        assert_eq!((t.len(), t.pending_len()), (0, 0));
        assert!(t.is_empty());
        assert!(t.by_source.is_empty() && t.established.is_empty(), "nothing is left behind");
        // Room again: nothing is evicted.
        for n in 0..2 {
            assert_eq!(admitted(t.admit(ip("2001:db8::1"), n)).1, None);
        }
        let mut t = ConnectionTable::new(2, 2);
        let (a, _) = admitted(t.admit(ip("10.0.0.1"), 1));
        let (b, _) = admitted(t.admit(ip("10.0.0.1"), 2));
        assert_eq!((t.remove(a), t.remove(b)), (Some(1), Some(2)));
        assert!(t.is_empty() && t.by_source.is_empty());
    }

    #[test]
    fn sources_are_ipv4_addresses_and_ipv6_prefixes() {
        let mut t = ConnectionTable::new(100, 1);
        admitted(t.admit(ip("2001:db8:1:2::1"), "v6"));
        // Another address of the same /64 counts as the same source.
        assert_eq!(admitted(t.admit(ip("2001:db8:1:2::ffff"), "v6b")).1, Some(("v6", Limit::Source)));
        assert_eq!(admitted(t.admit(ip("2001:db8:1:3::1"), "other /64")).1, None);
        admitted(t.admit(ip("10.0.0.1"), "v4"));
        assert_eq!(admitted(t.admit(ip("::ffff:10.0.0.1"), "mapped")).1, Some(("v4", Limit::Source)));
    }

    #[test]
    fn the_budget_follows_the_load_between_floor_and_ceiling() {
        let t0 = Instant::now();
        let mut b = HandshakeBudget::new(64, 4096);
        assert_eq!(b.limit(), 4096);
        assert!(!b.exceeded(4095), "at the ceiling the table's own limit applies");
        // Behind with 100 in progress: cut below what is in progress.
        assert!(b.behind(100, t0));
        assert_eq!(b.limit(), 75);
        assert!(b.in_effect() && b.exceeded(75) && !b.exceeded(74));
        // At most one cut per CUT_EVERY: a burst of lag samples is one cut.
        assert!(!b.behind(75, t0 + CUT_EVERY / 2));
        assert!(b.behind(75, t0 + CUT_EVERY));
        assert_eq!(b.limit(), 64, "never below the floor");
        assert!(!b.behind(64, t0 + CUT_EVERY * 3), "at the floor there is nothing to cut");
        // Few in progress: the cut is from them, not from an unused limit.
        let mut b = HandshakeBudget::new(1, 4096);
        assert!(b.behind(8, t0));
        assert_eq!(b.limit(), 6);
        // Keeping up: back to the ceiling, by a sixteenth at a time.
        b.keeping_up();
        assert_eq!(b.limit(), 7);
        let mut steps = 1;
        while b.in_effect() {
            b.keeping_up();
            steps += 1;
        }
        assert_eq!(b.limit(), 4096);
        assert!((40..200).contains(&steps), "{steps} steps from 6 to 4096");
        // A floor above the ceiling is the ceiling; a zero ceiling is one.
        assert_eq!(HandshakeBudget::new(10, 5).floor, 5);
        assert_eq!(HandshakeBudget::new(0, 0).limit(), 1);
    }

    #[test]
    fn log_throttle_logs_the_first_then_tallies() {
        let mut log = LogThrottle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(log.event(t0), Some(1));
        for s in 1..10 {
            assert_eq!(log.event(t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(log.event(t0 + Duration::from_secs(10)), Some(10));
        assert_eq!(log.event(t0 + Duration::from_secs(11)), None);
    }
}
