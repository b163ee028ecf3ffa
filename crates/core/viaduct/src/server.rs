//! The server type shared by both transports: accepted connections, counters,
//! and closing; and the intake of handshakes, which bounds them in time, in
//! number and per source address.
//!
//! Handshakes in progress are kept in a [`ConnectionTable`], a plain table
//! that decides, without I/O, which handshake to cancel when a new connection
//! arrives at a limit: the oldest of the same source when that source is at
//! its own limit, otherwise the oldest of all when the server is at its
//! limit. A handshake leaves the table when it finishes (it is never
//! established there), so a new connection is never refused for want of
//! room in it, and a flood of silent connections (from one address or many) cannot
//! lock out an edge's reconnect: it only shortens how long the flood's own
//! connections live.
//!
//! While the server falls behind on its work (its runtime wakes a timer
//! late, or most handshakes take over a quarter of the deadline), a
//! [`HandshakeBudget`] runs fewer handshakes at once: a new one past
//! it is refused before any crypto, unless the oldest in progress has taken
//! half the deadline (that one is cancelled instead, so silent connections
//! hold the budget no longer than that).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::admission::{Admission, ConnectionTable, HandshakeBudget, Limit, LogThrottle};
use crate::config::ServerConfig;
use crate::conn::{Connection, Protocol};
use crate::error::ConnectError;

/// Counters of a server, for logs and metrics: read them with the accessors;
/// [`ServerStats::register`] exports those of every server of a process.
/// Each is one atomic (prometheus-client's [`Counter`] and [`Gauge`]).
#[derive(Debug, Default)]
pub struct ServerStats {
    pub(crate) accepted: Counter,
    pub(crate) tls_failures: Counter,
    pub(crate) upgrade_failures: Counter,
    pub(crate) handshake_timeouts: Counter,
    pub(crate) refused_busy: Counter,
    pub(crate) evicted_per_source: Counter,
    pub(crate) evicted_global: Counter,
    pub(crate) evicted_budget: Counter,
    pub(crate) refused_overload: Counter,
    pub(crate) quic_retries: Counter,
    pub(crate) quic_deferred: Counter,
    pub(crate) pending_handshakes: Gauge,
    pub(crate) waiting_handshakes: Gauge,
    pub(crate) handshake_budget: Gauge,
    pub(crate) budget_cuts: Counter,
    pub(crate) tls_resumed: Counter,
}

impl ServerStats {
    /// Connections handed to `accept`.
    pub fn accepted(&self) -> u64 {
        self.accepted.get()
    }

    /// TLS handshakes that failed (no, foreign or expired certificate, ...).
    pub fn tls_failures(&self) -> u64 {
        self.tls_failures.get()
    }

    /// Upgrades refused (bad headers, not WebSocket, bad QUIC header frame).
    pub fn upgrade_failures(&self) -> u64 {
        self.upgrade_failures.get()
    }

    /// Handshakes that did not finish in time.
    pub fn handshake_timeouts(&self) -> u64 {
        self.handshake_timeouts.get()
    }

    /// Connections that completed their handshake but were dropped because
    /// the accept queue was full or the server closed. (Handshakes are never
    /// refused for want of room in the table: the oldest pending one is
    /// evicted instead. A server behind on its work turns some away before
    /// any crypto: [`ServerStats::refused_overload`] on WebSocket,
    /// [`ServerStats::quic_deferred`] on QUIC.)
    pub fn refused_busy(&self) -> u64 {
        self.refused_busy.get()
    }

    /// Pending handshakes cancelled because a new connection came from a
    /// source already at [`ServerConfig::max_pending_handshakes_per_source`]
    /// (the source's oldest is cancelled).
    pub fn evicted_per_source(&self) -> u64 {
        self.evicted_per_source.get()
    }

    /// Pending handshakes cancelled because a new connection came while
    /// [`ServerConfig::max_pending_handshakes`] were in progress (the
    /// server's oldest is cancelled).
    pub fn evicted_global(&self) -> u64 {
        self.evicted_global.get()
    }

    /// Pending handshakes cancelled, while the server was behind, because
    /// a new connection came past the handshake budget and the oldest had
    /// taken half the deadline already.
    pub fn evicted_budget(&self) -> u64 {
        self.evicted_budget.get()
    }

    /// Pending handshakes cancelled to make room, for any limit.
    pub fn handshakes_evicted(&self) -> u64 {
        self.evicted_per_source() + self.evicted_global() + self.evicted_budget()
    }

    /// New WebSocket connections refused before any crypto because the
    /// server was behind and had its handshake budget in progress. (QUIC
    /// leaves such attempts unanswered: [`ServerStats::quic_deferred`].)
    pub fn refused_overload(&self) -> u64 {
        self.refused_overload.get()
    }

    /// QUIC connection attempts a server that is behind let go unanswered
    /// (their wait for a slot was over, or the waiting room was full):
    /// their packets were dropped, as a full TCP accept queue drops a SYN,
    /// and the client sends its Initial again at its retransmission timer,
    /// with the same ClientHello (a session ticket in it still resumes).
    pub fn quic_deferred(&self) -> u64 {
        self.quic_deferred.get()
    }

    /// Handshakes the server lets run at once now
    /// ([`HandshakeBudget::limit`]; the total limit when not behind).
    pub fn handshake_budget(&self) -> u64 {
        self.handshake_budget.get().max(0) as u64
    }

    /// Times the handshake budget was cut because the server was behind.
    pub fn budget_cuts(&self) -> u64 {
        self.budget_cuts.get()
    }

    /// TLS handshakes that resumed a session (from a ticket, or a session
    /// the server kept) instead of exchanging certificates; counted when
    /// the server accepts the ticket.
    pub fn tls_resumed(&self) -> u64 {
        self.tls_resumed.get()
    }

    /// QUIC connection attempts answered with a Retry (address validation)
    /// because admitting them would have evicted another handshake.
    pub fn quic_retries(&self) -> u64 {
        self.quic_retries.get()
    }

    /// Handshakes in progress now.
    pub fn pending_handshakes(&self) -> u64 {
        self.pending_handshakes.get().max(0) as u64
    }

    /// Connections waiting for a handshake slot now (the budget of a
    /// server that is behind had none free when they came), in the
    /// server's waiting room; on WebSocket, while it is full, more
    /// wait in the kernel's accept queue, uncounted.
    pub fn waiting_handshakes(&self) -> u64 {
        self.waiting_handshakes.get().max(0) as u64
    }

    /// Registers the counters of `servers` in `registry`, under the prefix
    /// `viaduct` (so `edgehive_viaduct_` in a process's registry), each
    /// sample labelled with its server's transport (`websocket` or `quic`).
    /// Pass every server of the process in one call: each metric is one
    /// family. The counters are read at each scrape.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use edgehive_viaduct::{Protocol, ServerStats};
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let (ws, quic) = (Arc::new(ServerStats::default()), Arc::new(ServerStats::default()));
    /// let mut registry = Registry::with_prefix("edgehive");
    /// ServerStats::register(&[(Protocol::WebSocket, ws), (Protocol::Quic, quic)], &mut registry);
    /// let mut out = String::new();
    /// encode(&mut out, &registry).unwrap();
    /// assert!(out.contains("edgehive_viaduct_handshakes_total{transport=\"websocket\",result=\"evicted\"} 0\n"));
    /// assert!(out.contains("edgehive_viaduct_pending_handshakes{transport=\"quic\"} 0\n"));
    /// ```
    pub fn register(servers: &[(Protocol, Arc<ServerStats>)], registry: &mut Registry) {
        registry
            .sub_registry_with_prefix("viaduct")
            .register_collector(Box::new(ServerMetrics { servers: servers.to_vec() }));
    }
}

/// The metrics of a process's servers, read at each scrape.
#[derive(Debug)]
struct ServerMetrics {
    servers: Vec<(Protocol, Arc<ServerStats>)>,
}

impl Collector for ServerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let mut family =
            encoder.encode_descriptor("handshakes", "Handshakes by how they ended.", None, MetricType::Counter)?;
        for (protocol, s) in &self.servers {
            let transport = transport_label(*protocol);
            for (result, value) in [
                ("accepted", s.accepted()),
                ("tls_failed", s.tls_failures()),
                ("upgrade_failed", s.upgrade_failures()),
                ("timeout", s.handshake_timeouts()),
                ("evicted", s.handshakes_evicted()),
                ("refused", s.refused_busy()),
                ("refused_overload", s.refused_overload()),
            ] {
                ConstCounter::new(value)
                    .encode(family.encode_family(&[("transport", transport), ("result", result)])?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "handshakes_evicted",
            "Pending handshakes cancelled to make room, by the limit that was reached.",
            None,
            MetricType::Counter,
        )?;
        for (protocol, s) in &self.servers {
            let transport = transport_label(*protocol);
            for (limit, counter) in [
                (limit_label(Limit::Source), &s.evicted_per_source),
                (limit_label(Limit::Total), &s.evicted_global),
                ("budget", &s.evicted_budget),
            ] {
                counter.encode(family.encode_family(&[("transport", transport), ("limit", limit)])?)?;
            }
        }
        let quic_only: [(&str, &str, MetricType, PickMetric); 2] = [
            (
                "quic_retries",
                "QUIC connection attempts asked to validate their address under pressure.",
                MetricType::Counter,
                |s| &s.quic_retries,
            ),
            (
                "quic_deferred",
                "QUIC connection attempts a server that is behind left unanswered for the client to retransmit.",
                MetricType::Counter,
                |s| &s.quic_deferred,
            ),
        ];
        if self.servers.iter().any(|(p, _)| *p == Protocol::Quic) {
            for (name, help, ty, metric) in quic_only {
                let mut family = encoder.encode_descriptor(name, help, None, ty)?;
                for (_, s) in self.servers.iter().filter(|(p, _)| *p == Protocol::Quic) {
                    metric(s).encode(family.encode_family(&[("transport", "quic")])?)?;
                }
            }
        }
        let each: [(&str, &str, MetricType, PickMetric); 5] = [
            ("pending_handshakes", "Handshakes in progress.", MetricType::Gauge, |s| &s.pending_handshakes),
            (
                "waiting_handshakes",
                "Connections waiting for a handshake slot of a server that is behind.",
                MetricType::Gauge,
                |s| &s.waiting_handshakes,
            ),
            (
                "handshake_budget",
                "Handshakes the server lets run at once (fewer while it is behind).",
                MetricType::Gauge,
                |s| &s.handshake_budget,
            ),
            (
                "handshake_budget_cuts",
                "Times the handshake budget was cut because the server was behind.",
                MetricType::Counter,
                |s| &s.budget_cuts,
            ),
            (
                "tls_resumed",
                "TLS handshakes that resumed a session instead of exchanging certificates.",
                MetricType::Counter,
                |s| &s.tls_resumed,
            ),
        ];
        for (name, help, ty, metric) in each {
            let mut family = encoder.encode_descriptor(name, help, None, ty)?;
            for (protocol, s) in &self.servers {
                metric(s).encode(family.encode_family(&[("transport", transport_label(*protocol))])?)?;
            }
        }
        Ok(())
    }
}

/// One metric of a server's counters.
type PickMetric = fn(&ServerStats) -> &dyn EncodeMetric;

fn transport_label(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::WebSocket => "websocket",
        Protocol::Quic => "quic",
    }
}

/// A listening server, WebSocket or QUIC.
#[derive(Debug)]
pub struct Server {
    pub(crate) protocol: Protocol,
    pub(crate) local_addr: SocketAddr,
    pub(crate) accepted: mpsc::Receiver<Connection>,
    pub(crate) cancel: CancellationToken,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) quic: Option<quinn::Endpoint>,
}

impl Server {
    /// Binds a KubeEdge-compatible WebSocket server (TCP).
    pub async fn bind_ws(cfg: ServerConfig) -> Result<Server, ConnectError> {
        crate::ws::bind(cfg).await
    }

    /// Binds a QUIC server (UDP).
    pub async fn bind_quic(cfg: ServerConfig) -> Result<Server, ConnectError> {
        crate::quic::bind(cfg).await
    }

    /// The transport.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The next connection that completed its handshake; `None` after `close`.
    pub async fn accept(&mut self) -> Option<Connection> {
        self.accepted.recv().await
    }

    /// Counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// The counters, as a handle that outlives the server (for a metrics
    /// endpoint that keeps reading them after the server moved elsewhere).
    pub fn shared_stats(&self) -> Arc<ServerStats> {
        Arc::clone(&self.stats)
    }

    /// Stops accepting. Established connections are not affected.
    pub fn close(&self) {
        self.cancel.cancel();
        if let Some(ep) = &self.quic {
            ep.set_server_config(None);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The label of the limit that made room, in logs and metrics: a server's
/// total limit is `server`.
fn limit_label(limit: Limit) -> &'static str {
    match limit {
        Limit::Source => "source",
        Limit::Total => "server",
    }
}

/// How often, at most, evictions and timeouts are logged at `warn`
/// (each one is logged at `debug` and counted in [`ServerStats`]).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// A pending handshake's entry: where it came from and how to cancel it.
#[derive(Debug)]
struct Victim {
    remote: SocketAddr,
    cancel: CancellationToken,
    since: Instant,
}

/// The table and the log throttles, behind one lock held only for table
/// operations (never across an `.await`).
#[derive(Debug)]
struct PendingState {
    /// Handshakes in progress; none is ever established.
    table: ConnectionTable<Victim>,
    /// How many may be in progress while the server is behind.
    budget: HandshakeBudget,
    /// Handshakes completed since the budget was last looked at, and how
    /// many of them took over a quarter of the deadline.
    completed: u32,
    slow: u32,
    evictions: LogThrottle,
    timeouts: LogThrottle,
    refusals: LogThrottle,
    deferrals: LogThrottle,
}

type SharedPending = Arc<Mutex<PendingState>>;

fn lock(pending: &SharedPending) -> std::sync::MutexGuard<'_, PendingState> {
    // A panic elsewhere while holding the lock leaves a consistent table:
    // every operation completes before it can panic.
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What an accept loop needs to run handshakes: the table of handshakes in
/// progress, their deadline, the counters and the queue `accept` reads.
#[derive(Clone)]
pub(crate) struct Intake {
    out: mpsc::Sender<Connection>,
    pub(crate) stats: Arc<ServerStats>,
    pending: SharedPending,
    deadline: Duration,
    /// Told each time a pending handshake leaves the table.
    freed: Arc<tokio::sync::Notify>,
}

/// A new connection refused because the server is behind and has its
/// handshake budget in progress.
#[derive(Debug)]
pub(crate) struct Overloaded;

/// Longest a connection waits for a handshake slot of a server that is
/// behind before it is turned away (on QUIC left unanswered for its
/// retransmission, on WebSocket closed before any crypto). Well within an
/// edge's own wait for the handshake (a third of its 30 s deadline), so one
/// that gets a slot in time still has most of it.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(2);
/// Most connections waiting for a slot at once. A QUIC one holds the
/// Initial packets quinn keeps for it, a WebSocket one its socket and its
/// unread ClientHello: a few KiB each.
pub(crate) const MAX_WAITING: usize = 1024;
/// How often waiting connections are looked at while no slot frees (the
/// budget may have grown; the oldest handshake may have gone stale).
pub(crate) const WAITING_RECHECK: Duration = Duration::from_millis(50);

/// Connections a server that is behind has no handshake slot for yet,
/// oldest first, first come first served, each for up to [`MAX_WAIT`]. A
/// refused client backs off, and after a few refusals in a reconnection
/// storm it waited seconds while slots stood free; it had also spent the
/// single-use session ticket in its ClientHello, so its next handshake was
/// a full one, a certificate signed and verified on each side when the
/// server was busiest. One source (an IPv4 address or an IPv6 /64, as for
/// the pending handshakes) holds at most its per-source share of the room,
/// so a flood from a few addresses cannot queue everyone else behind it.
/// Counted in [`ServerStats::waiting_handshakes`].
pub(crate) struct WaitingRoom<T> {
    queue: std::collections::VecDeque<(T, SocketAddr, Instant)>,
    per_source: std::collections::HashMap<std::net::IpAddr, usize>,
    max_per_source: usize,
    stats: Arc<ServerStats>,
}

impl<T> WaitingRoom<T> {
    pub(crate) fn new(intake: &Intake, max_per_source: usize) -> WaitingRoom<T> {
        WaitingRoom {
            queue: Default::default(),
            per_source: Default::default(),
            max_per_source: max_per_source.max(1),
            stats: intake.stats.clone(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.queue.len() >= MAX_WAITING
    }

    /// Keeps `item` (a connection from `remote`) waiting; gives it back when
    /// the room, or its source's share of it, is full.
    pub(crate) fn push(&mut self, item: T, remote: SocketAddr) -> Result<(), T> {
        let source = crate::admission::source_key(remote.ip());
        let held = self.per_source.get(&source).copied().unwrap_or(0);
        if self.is_full() || held >= self.max_per_source {
            return Err(item);
        }
        self.per_source.insert(source, held + 1);
        self.queue.push_back((item, remote, Instant::now()));
        self.count();
        Ok(())
    }

    fn pop(&mut self) -> Option<(T, SocketAddr, Instant)> {
        let (item, remote, since) = self.queue.pop_front()?;
        let source = crate::admission::source_key(remote.ip());
        if let Some(n) = self.per_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
        Some((item, remote, since))
    }

    /// Starts the oldest waiting connections (`start`) while the server has
    /// slots; gives those that waited past [`MAX_WAIT`] to `expired`.
    pub(crate) fn admit(
        &mut self,
        intake: &Intake,
        mut start: impl FnMut(PendingHandshake, T, SocketAddr),
        mut expired: impl FnMut(T, SocketAddr),
    ) {
        while let Some((item, remote, since)) = self.pop() {
            if since.elapsed() > MAX_WAIT {
                expired(item, remote);
                continue;
            }
            match intake.admit(remote) {
                Ok(pending) => start(pending, item, remote),
                Err(Overloaded) => {
                    // Still no slot: it stays first.
                    let source = crate::admission::source_key(remote.ip());
                    *self.per_source.entry(source).or_default() += 1;
                    self.queue.push_front((item, remote, since));
                    break;
                }
            }
        }
        self.count();
    }

    /// Everyone waiting, the room emptied (the server stops).
    pub(crate) fn drain(&mut self) -> Vec<T> {
        self.per_source.clear();
        let all = self.queue.drain(..).map(|(item, _, _)| item).collect();
        self.count();
        all
    }

    fn count(&self) {
        self.stats.waiting_handshakes.set(self.queue.len() as i64);
    }
}

/// One admitted handshake: its cancellation (fired when it is evicted) and
/// its entry in the table, removed when this is dropped.
#[derive(Debug)]
pub(crate) struct PendingHandshake {
    id: u64,
    since: Instant,
    cancel: CancellationToken,
    pending: SharedPending,
    stats: Arc<ServerStats>,
    freed: Arc<tokio::sync::Notify>,
}

impl Drop for PendingHandshake {
    fn drop(&mut self) {
        let mut state = lock(&self.pending);
        state.table.remove(self.id);
        self.stats.pending_handshakes.set(state.table.len() as i64);
        drop(state);
        self.freed.notify_one();
    }
}

/// Makes the `Server` handle and the `Intake` its accept loop uses.
pub(crate) fn new_server(
    protocol: Protocol,
    local_addr: SocketAddr,
    cfg: &ServerConfig,
    stats: Arc<ServerStats>,
    quic: Option<quinn::Endpoint>,
) -> (Server, Intake) {
    let (out, accepted) = mpsc::channel(cfg.accept_queue.max(1));
    let table = ConnectionTable::new(cfg.max_pending_handshakes, cfg.max_pending_handshakes_per_source);
    let state = PendingState {
        table,
        budget: HandshakeBudget::new(cfg.min_handshake_budget, cfg.max_pending_handshakes),
        completed: 0,
        slow: 0,
        evictions: LogThrottle::new(WARN_EVERY),
        timeouts: LogThrottle::new(WARN_EVERY),
        refusals: LogThrottle::new(WARN_EVERY),
        deferrals: LogThrottle::new(WARN_EVERY),
    };
    stats.handshake_budget.set(state.budget.limit() as i64);
    let intake = Intake {
        out,
        stats: stats.clone(),
        pending: Arc::new(Mutex::new(state)),
        deadline: cfg.handshake_timeout,
        freed: Arc::new(tokio::sync::Notify::new()),
    };
    let cancel = CancellationToken::new();
    if let Some(max_lag) = cfg.max_lag {
        let watch = Watch { pending: intake.pending.clone(), stats: stats.clone(), max_lag, protocol };
        tokio::spawn(watch.run(cancel.clone()));
    }
    tracing::info!(addr = %local_addr, ?protocol, "server listening");
    (Server { protocol, local_addr, accepted, cancel, stats, quic }, intake)
}

/// How often [`Watch`] looks at the server's load.
const LOAD_SAMPLE: Duration = Duration::from_millis(100);

/// Looks, every [`LOAD_SAMPLE`], at how far behind the server is, and cuts
/// the handshake budget while it is behind: when the runtime woke its timer
/// more than `max_lag` late, or when most handshakes completed since the
/// last look took over a quarter of the deadline (one socket's reader, or
/// the peers, can be the bottleneck while the runtime itself is on time).
/// Otherwise, once the lag is under half of `max_lag`, the budget grows.
/// The lag is the whole process's: whatever fills the cores (handshakes,
/// the sessions' traffic, the store) makes every task wait, the sockets'
/// readers among them. Only completed handshakes are timed (their peers
/// passed TLS with a certificate of the fleet and sent valid headers):
/// a stranger's silent or failed handshakes never move the budget.
struct Watch {
    pending: SharedPending,
    stats: Arc<ServerStats>,
    max_lag: Duration,
    protocol: Protocol,
}

impl Watch {
    async fn run(self, cancel: CancellationToken) {
        loop {
            let asked = Instant::now() + LOAD_SAMPLE;
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep_until(asked) => {}
            }
            let now = Instant::now();
            self.look(now.saturating_duration_since(asked), now);
        }
    }

    fn look(&self, lag: Duration, now: Instant) {
        let mut state = lock(&self.pending);
        let (completed, slow) = (std::mem::take(&mut state.completed), std::mem::take(&mut state.slow));
        let slow_majority = slow > 0 && slow * 2 > completed;
        if lag > self.max_lag || slow_majority {
            let in_progress = state.table.pending_len();
            if state.budget.behind(in_progress, now) {
                self.stats.budget_cuts.inc();
                tracing::info!(
                    transport = transport_label(self.protocol),
                    lag_ms = lag.as_millis() as u64,
                    completed,
                    slow,
                    in_progress,
                    budget = state.budget.limit(),
                    "the server is behind; fewer handshakes at once"
                );
            }
        } else if lag < self.max_lag / 2 && state.budget.in_effect() {
            state.budget.keeping_up();
            if !state.budget.in_effect() {
                tracing::info!(
                    transport = transport_label(self.protocol),
                    "the server keeps up; handshake budget lifted"
                );
            }
        }
        self.stats.handshake_budget.set(state.budget.limit() as i64);
    }
}

impl Intake {
    /// Whether admitting a handshake from `remote` now would evict another
    /// or be refused: its sender should first prove its address, where the
    /// transport can ask that.
    pub(crate) fn under_pressure(&self, remote: SocketAddr) -> bool {
        let state = lock(&self.pending);
        state.table.would_evict(remote.ip()) || state.budget.exceeded(state.table.pending_len())
    }

    /// Admits a handshake from `remote`, evicting (cancelling) the oldest
    /// pending one of the same source, or of all, when a limit is reached.
    /// Past the budget of a server that is behind, the oldest pending one
    /// is evicted if it has taken half the deadline already; otherwise the
    /// new one is refused.
    pub(crate) fn admit(&self, remote: SocketAddr) -> Result<PendingHandshake, Overloaded> {
        let cancel = CancellationToken::new();
        let now = Instant::now();
        let mut state = lock(&self.pending);
        if !state.table.would_evict(remote.ip()) && state.budget.exceeded(state.table.pending_len()) {
            let stale = state
                .table
                .oldest_pending()
                .filter(|(_, v)| now.saturating_duration_since(v.since) >= self.deadline / 2);
            match stale.map(|(id, _)| id) {
                Some(id) => {
                    if let Some(victim) = state.table.remove(id) {
                        victim.cancel.cancel();
                        self.stats.evicted_budget.inc();
                        tracing::debug!(remote = %victim.remote, new = %remote, "a slow handshake given up for a new one");
                    }
                }
                None => return Err(Overloaded),
            }
        }
        let victim = Victim { remote, cancel: cancel.clone(), since: now };
        let (id, evicted) = match state.table.admit(remote.ip(), victim) {
            Admission::Admitted { id, evicted } => (id, evicted),
            // Refused only when every entry is established, and handshakes
            // never are: a full table always has a pending one to evict.
            Admission::Full => unreachable!("a table of handshakes only is never full of established ones"),
        };
        self.stats.pending_handshakes.set(state.table.len() as i64);
        if let Some((victim, limit)) = evicted {
            victim.cancel.cancel();
            let counter = match limit {
                Limit::Source => &self.stats.evicted_per_source,
                Limit::Total => &self.stats.evicted_global,
            };
            counter.inc();
            tracing::debug!(remote = %victim.remote, limit = limit_label(limit), new = %remote, "pending handshake evicted to make room");
            if let Some(evicted) = state.evictions.event(Instant::now()) {
                tracing::warn!(
                    evicted,
                    limit = limit_label(limit),
                    %remote,
                    pending = state.table.len(),
                    "handshakes in progress at their limit; evicting the oldest (a flood of idle connections?)"
                );
            }
        }
        drop(state);
        Ok(PendingHandshake {
            id,
            since: now,
            cancel,
            pending: self.pending.clone(),
            stats: self.stats.clone(),
            freed: self.freed.clone(),
        })
    }

    /// Counts and logs a connection refused because the server is behind
    /// ([`Intake::admit`] said [`Overloaded`] and it is not kept waiting).
    pub(crate) fn refused(&self, remote: SocketAddr) {
        self.stats.refused_overload.inc();
        self.behind(remote, |s| &mut s.refusals, "new connections refused (they retry after their backoff)");
    }

    /// Counts and logs a QUIC connection attempt left unanswered because
    /// the server is behind (the client retransmits it).
    pub(crate) fn deferred(&self, remote: SocketAddr) {
        self.stats.quic_deferred.inc();
        self.behind(remote, |s| &mut s.deferrals, "new QUIC connection attempts left for their retransmission");
    }

    /// Logs one connection turned away by a server that is behind: every
    /// one at debug, a line per [`WARN_EVERY`] of each kind at warn.
    fn behind(&self, remote: SocketAddr, throttle: fn(&mut PendingState) -> &mut LogThrottle, what: &str) {
        tracing::debug!(%remote, what, "server behind");
        let mut state = lock(&self.pending);
        if let Some(count) = throttle(&mut state).event(Instant::now()) {
            let budget = state.budget.limit();
            tracing::warn!(count, %remote, budget, "the server is behind with its handshake budget in progress; {what}");
        }
    }

    /// Returns once a pending handshake has left the table since the last
    /// call (at once if one has).
    pub(crate) async fn freed(&self) {
        self.freed.notified().await;
    }

    /// Runs a handshake in its own task under the deadline, and hands the
    /// connection it yields to `accept`. Eviction drops the handshake's
    /// future at once, closing its socket.
    pub(crate) fn spawn(
        &self,
        pending: PendingHandshake,
        remote: SocketAddr,
        handshake: impl Future<Output = Option<Connection>> + Send + 'static,
    ) {
        let intake = self.clone();
        tokio::spawn(async move {
            let cancel = pending.cancel.clone();
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    tracing::debug!(%remote, "handshake evicted; connection closed");
                    return;
                }
                outcome = tokio::time::timeout(intake.deadline, handshake) => outcome,
            };
            // The handshake is over: leave the table before handing over.
            let took = pending.since.elapsed();
            drop(pending);
            match outcome {
                Err(_) => intake.timed_out(remote),
                Ok(None) => {}
                Ok(Some(conn)) => {
                    intake.completed(took);
                    intake.hand_over(conn);
                }
            }
        });
    }

    /// A handshake completed after `took`, for the budget's next look.
    fn completed(&self, took: Duration) {
        let mut state = lock(&self.pending);
        state.completed = state.completed.saturating_add(1);
        if took > self.deadline / 4 {
            state.slow = state.slow.saturating_add(1);
        }
    }

    fn timed_out(&self, remote: SocketAddr) {
        self.stats.handshake_timeouts.inc();
        tracing::debug!(%remote, deadline = ?self.deadline, "handshake did not finish in time; connection dropped");
        if let Some(timeouts) = lock(&self.pending).timeouts.event(Instant::now()) {
            tracing::warn!(timeouts, %remote, deadline = ?self.deadline, "handshakes did not finish in time; connections dropped");
        }
    }

    /// Hands a connection to `accept`, or drops it (logged and counted) when
    /// the queue is full or the server is closed.
    fn hand_over(&self, conn: Connection) {
        match self.out.try_send(conn) {
            Ok(()) => {
                self.stats.accepted.inc();
            }
            Err(mpsc::error::TrySendError::Full(c) | mpsc::error::TrySendError::Closed(c)) => {
                self.stats.refused_busy.inc();
                tracing::warn!(remote = %c.peer().remote_addr, node = %c.peer().node_id, "accept queue full or server closed; connection dropped");
                c.tx.close();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_openmetrics_text() {
        let (ws, quic) = (Arc::new(ServerStats::default()), Arc::new(ServerStats::default()));
        ws.evicted_per_source.inc_by(5);
        ws.evicted_global.inc_by(2);
        ws.handshake_timeouts.inc_by(3);
        quic.quic_retries.inc_by(4);
        quic.quic_deferred.inc_by(7);
        quic.waiting_handshakes.set(3);
        quic.evicted_budget.inc_by(1);
        quic.refused_overload.inc_by(6);
        quic.handshake_budget.set(96);
        quic.budget_cuts.inc_by(2);
        ws.tls_resumed.inc_by(9);
        let mut registry = Registry::with_prefix("edgehive");
        ServerStats::register(&[(Protocol::WebSocket, ws), (Protocol::Quic, quic)], &mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        for line in [
            "edgehive_viaduct_handshakes_total{transport=\"websocket\",result=\"evicted\"} 7",
            "edgehive_viaduct_handshakes_total{transport=\"websocket\",result=\"timeout\"} 3",
            "edgehive_viaduct_handshakes_total{transport=\"quic\",result=\"accepted\"} 0",
            "edgehive_viaduct_handshakes_evicted_total{transport=\"websocket\",limit=\"source\"} 5",
            "edgehive_viaduct_handshakes_evicted_total{transport=\"websocket\",limit=\"server\"} 2",
            "edgehive_viaduct_quic_retries_total{transport=\"quic\"} 4",
            "edgehive_viaduct_quic_deferred_total{transport=\"quic\"} 7",
            "edgehive_viaduct_waiting_handshakes{transport=\"quic\"} 3",
            "edgehive_viaduct_pending_handshakes{transport=\"websocket\"} 0",
            "edgehive_viaduct_handshakes_evicted_total{transport=\"quic\",limit=\"budget\"} 1",
            "edgehive_viaduct_handshakes_total{transport=\"quic\",result=\"evicted\"} 1",
            "edgehive_viaduct_handshakes_total{transport=\"quic\",result=\"refused_overload\"} 6",
            "edgehive_viaduct_handshake_budget{transport=\"quic\"} 96",
            "edgehive_viaduct_handshake_budget_cuts_total{transport=\"quic\"} 2",
            "edgehive_viaduct_tls_resumed_total{transport=\"websocket\"} 9",
            "edgehive_viaduct_tls_resumed_total{transport=\"quic\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in\n{out}");
        }
        // One HELP and one TYPE per metric family, each before its samples.
        let mut seen = std::collections::HashSet::new();
        for line in out.lines().filter(|l| *l != "# EOF") {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap_or_default();
                assert!(seen.insert(name.to_owned()), "HELP for {name} twice");
            } else if !line.starts_with("# TYPE ") {
                let name = line.split(['{', ' ']).next().unwrap_or_default();
                assert!(seen.contains(name.trim_end_matches("_total")), "{line} before its HELP");
            }
        }
        assert_eq!(seen.len(), 9);
        assert!(out.ends_with("# EOF\n"));
    }
}
