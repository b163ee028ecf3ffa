//! The EdgeHub module (name `websocket`, group `hub`, as in KubeEdge): keeps
//! the link to the cloud, sends keepalives, routes what the cloud sends to
//! the edge modules and writes what they send to the cloud.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Module, ModuleContext, ModuleFuture};
use edgehive_model::{Content, Message, Text, group, op, source, well_known};
use edgehive_viaduct::quic::{QuicClient, QuicEndpoint};
use edgehive_viaduct::ws::WsClient;
use edgehive_viaduct::{ClientConfig, ConnConfig, ConnRx, ConnTx, ConnectError, Connection, IncomingStreams, Stream};
use std::future::Future;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::certs::EdgeCerts;
use crate::limiter::RateLimiter;
use crate::metrics::EdgeHubMetrics;
use crate::outbox::{Outbox, Refused, coalesce_key};
use crate::unanswered::Unanswered;

/// EdgeHub's module name: edge modules send to `websocket` what goes to the cloud.
pub const MODULE: &str = source::WEBSOCKET;

/// Upstream messages read past one the rate limit holds (see
/// `Link::connected`).
const LINE: usize = 256;

/// Edge modules told of connection changes (KubeEdge: twin, meta, bus;
/// here also edged, which reports the node's status).
const CONNECTION_GROUPS: [&str; 4] = [group::TWIN, group::META, group::BUS, group::EDGED];

/// How long a downstream message may wait for room in a module's mailbox;
/// past that it is dropped (the cloud re-sends what needs an ACK).
pub const DELIVERY_DEADLINE: Duration = Duration::from_secs(30);

/// How the edge reaches one cloud endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// WebSocket over TLS (KubeEdge's default, port 10000).
    WebSocket,
    /// QUIC (port 10001).
    Quic,
}

/// One cloud endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudEndpoint {
    /// WebSocket or QUIC.
    pub transport: Transport,
    /// `host:port`.
    pub server: String,
}

/// Settings of EdgeHub.
#[derive(Debug, Clone)]
pub struct EdgeHubConfig {
    /// This node's name (`node_id`).
    pub node_name: String,
    /// KubeEdge project id.
    pub project_id: String,
    /// Cloud endpoints, tried in turn.
    pub endpoints: Vec<CloudEndpoint>,
    /// Keepalive period (KubeEdge `heartbeat`: 15 s).
    pub heartbeat: Duration,
    /// Upstream messages a second (KubeEdge `messageQPS`: 30).
    pub message_qps: f64,
    /// Upstream burst (KubeEdge `messageBurst`: 60).
    pub message_burst: u32,
    /// First reconnect delay ceiling.
    pub backoff_base: Duration,
    /// Largest reconnect delay.
    pub backoff_cap: Duration,
    /// Objects whose status reports are kept while disconnected.
    pub outbox_capacity: usize,
    /// TCP + TLS + upgrade deadline (KubeEdge: 30 s).
    pub handshake_timeout: Duration,
    /// Deadline of one write (KubeEdge: 15 s).
    pub write_timeout: Duration,
    /// Offer the cloud to keep alive with WebSocket pings instead of
    /// `keepalive` messages (only an edgehive cloud accepts).
    pub ping_keepalive: bool,
    /// Features offered to the cloud (`edgehive_viaduct::features`); the
    /// agreed ones are listed in the `cloud_connected` event's type.
    pub features: Vec<String>,
    /// The local address to connect from (`None`: the system's choice).
    pub local_ip: Option<std::net::IpAddr>,
    /// A UDP socket QUIC connections go out through, shared with other
    /// links (`None`: one of this link's own).
    pub quic_endpoint: Option<QuicEndpoint>,
}

impl EdgeHubConfig {
    /// KubeEdge's defaults for a node and its endpoints.
    pub fn new(node_name: impl Into<String>, endpoints: Vec<CloudEndpoint>) -> EdgeHubConfig {
        EdgeHubConfig {
            node_name: node_name.into(),
            project_id: well_known::DEFAULT_PROJECT_ID.to_owned(),
            endpoints,
            heartbeat: Duration::from_secs(15),
            message_qps: 30.0,
            message_burst: 60,
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(30),
            outbox_capacity: 1024,
            handshake_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(15),
            ping_keepalive: true,
            features: vec![
                edgehive_viaduct::features::INVENTORY.to_owned(),
                edgehive_viaduct::features::DEVICE_REPORTS.to_owned(),
            ],
            local_ip: None,
            quic_endpoint: None,
        }
    }

    fn conn(&self) -> ConnConfig {
        ConnConfig {
            write_timeout: self.write_timeout,
            // The cloud answers WebSocket pings; a link that carries nothing
            // for three heartbeats is dead even if TCP has not noticed.
            ping_interval: Some(self.heartbeat),
            read_timeout: Some(self.heartbeat * 3),
            ..ConnConfig::default()
        }
    }
}

/// What the link is attached to on the edge's side: where the messages
/// for the cloud come from, where the cloud's messages go, and who hears
/// of the link's state. The module attaches it to beehive ([`EdgeHub`]);
/// `edgehive sim` attaches each simulated node's link to that node, so a
/// fleet of simulated edges speaks through the same link code as a real
/// one ([`EdgeLink`]).
pub trait LocalSide: Send {
    /// The next message for the cloud; `None` when the edge stops. Must be
    /// cancel-safe: the link drops this future when something else happens
    /// first, and no message may be lost then.
    fn next_upstream(&mut self) -> impl Future<Output = Option<Message>> + Send;
    /// Hands a message from the cloud to the module `target`; false when
    /// it was not taken within [`DELIVERY_DEADLINE`].
    fn deliver(&mut self, target: &'static str, m: Message) -> impl Future<Output = bool> + Send;
    /// Hands an answer to the request that waits for it; gives it back when
    /// none waits.
    fn answer(&mut self, m: Message) -> Result<(), Message>;
    /// The link's state changed: `notice` is the `node/connection` message
    /// (`cloud_connected` or `cloud_disconnected`; when connected, its type
    /// lists what the link agreed, [`well_known::connection_has`]).
    fn link_changed(&mut self, notice: Message) -> impl Future<Output = ()> + Send;
}

/// The link attached to beehive: the edge modules' mailboxes.
struct Bus(ModuleContext);

impl LocalSide for Bus {
    async fn next_upstream(&mut self) -> Option<Message> {
        self.0.receive().await
    }

    async fn deliver(&mut self, target: &'static str, m: Message) -> bool {
        matches!(tokio::time::timeout(DELIVERY_DEADLINE, self.0.send(target, m)).await, Ok(Ok(())))
    }

    fn answer(&mut self, m: Message) -> Result<(), Message> {
        self.0.send_resp(m).map_err(|e| e.into_message())
    }

    async fn link_changed(&mut self, notice: Message) {
        let stats = self.0.stats();
        for g in CONNECTION_GROUPS {
            // A group with no module is fine: that part is not running.
            if stats.modules.iter().any(|s| s.group == g) {
                let _ = tokio::time::timeout(DELIVERY_DEADLINE, self.0.send_to_group(g, notice.clone())).await;
            }
        }
    }
}

/// The EdgeHub beehive module.
pub struct EdgeHub {
    cfg: EdgeHubConfig,
    certs: watch::Receiver<Arc<EdgeCerts>>,
    metrics: Arc<EdgeHubMetrics>,
    streams: Option<mpsc::Sender<Stream>>,
    /// The link's state: `Some(agreed features)` while connected.
    state: watch::Sender<Option<Text>>,
}

impl std::fmt::Debug for EdgeHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeHub").field("config", &self.cfg).finish_non_exhaustive()
    }
}

impl EdgeHub {
    /// A hub that connects with the certificates `certs` holds (and
    /// reconnects when a renewed one is published there).
    pub fn new(cfg: EdgeHubConfig, certs: watch::Receiver<Arc<EdgeCerts>>) -> EdgeHub {
        EdgeHub { cfg, certs, metrics: Arc::default(), streams: None, state: watch::Sender::new(None) }
    }

    /// The link's state, as the `node/connection` notices say it:
    /// `Some(features agreed, comma-separated)` while connected, `None`
    /// while not. A notice can miss a module whose mailbox stays full past
    /// the delivery deadline; this cannot, so a module that must know
    /// (DeviceTwin, which reports only while connected) watches it too.
    pub fn link_state(&self) -> watch::Receiver<Option<Text>> {
        self.state.subscribe()
    }

    /// Takes the stream sessions the cloud opens (logs, exec, port-forward)
    /// and hands each to `sessions` (its reader serves them); offers the
    /// cloud the `streams` feature. A session that finds `sessions` full is
    /// refused with a reason. Without this, the edge offers no sessions.
    pub fn with_streams(mut self, sessions: mpsc::Sender<Stream>) -> EdgeHub {
        if !self.cfg.features.iter().any(|f| f == edgehive_viaduct::stream::FEATURE) {
            self.cfg.features.push(edgehive_viaduct::stream::FEATURE.to_owned());
        }
        self.streams = Some(sessions);
        self
    }

    /// The hub's metrics, to register in the process's registry
    /// ([`EdgeHubMetrics::register`]).
    pub fn metrics(&self) -> Arc<EdgeHubMetrics> {
        Arc::clone(&self.metrics)
    }
}

impl Module for EdgeHub {
    fn name(&self) -> &str {
        MODULE
    }

    fn group(&self) -> &str {
        group::HUB
    }

    fn run(self: Arc<Self>, ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            let mut link = EdgeLink::new(self.cfg.clone(), self.certs.clone(), Arc::clone(&self.metrics), Bus(ctx));
            link.streams = self.streams.clone();
            link.state = Some(self.state.clone());
            link.run(cancel).await;
            Ok(())
        })
    }
}

/// Why a connection ended.
#[derive(Debug)]
enum End {
    /// Shutdown.
    Stop,
    /// A renewed certificate is to be used.
    Renewed,
    /// The link broke.
    Lost(String),
}

enum Event {
    Stop,
    Reset,
    Certs,
    Down(Option<Message>),
    Beat,
    Wake,
    Up(Option<Message>),
}

/// One edge's link to the cloud, attached to its [`LocalSide`]: dials the
/// endpoints in turn with jittered backoff, keeps alive, routes what the
/// cloud sends, writes what the edge sends through the rate limit, and
/// keeps status reports while disconnected. [`EdgeHub`] runs one on
/// beehive; `edgehive sim` runs one per simulated node.
pub struct EdgeLink<L> {
    cfg: EdgeHubConfig,
    local: L,
    cancel: CancellationToken,
    certs: watch::Receiver<Arc<EdgeCerts>>,
    metrics: Arc<EdgeHubMetrics>,
    backoff: Backoff,
    limiter: RateLimiter,
    outbox: Outbox,
    /// One client per cloud endpoint (kept for TLS resumption, and for
    /// QUIC's 0-RTT), with the certificate generation it was made with.
    clients: Clients,
    /// Where the cloud's stream sessions go.
    streams: Option<mpsc::Sender<Stream>>,
    /// [`EdgeHub::link_state`].
    state: Option<watch::Sender<Option<Text>>>,
    /// [`EdgeLink::with_reset`].
    reset: Option<Arc<tokio::sync::Notify>>,
    /// What was written and not answered yet: one the cloud says it was
    /// too busy to take goes again ([`crate::unanswered`]).
    unanswered: Unanswered,
}

impl<L> std::fmt::Debug for EdgeLink<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EdgeLink").field("node", &self.cfg.node_name).finish_non_exhaustive()
    }
}

impl<L: LocalSide> EdgeLink<L> {
    /// A link for the edge `cfg` names, with the certificates `certs`
    /// holds (reconnecting when a renewed one is published), counted in
    /// `metrics` (several links may share them: the counters then add up).
    pub fn new(
        cfg: EdgeHubConfig,
        certs: watch::Receiver<Arc<EdgeCerts>>,
        metrics: Arc<EdgeHubMetrics>,
        local: L,
    ) -> EdgeLink<L> {
        EdgeLink {
            backoff: Backoff::new(cfg.backoff_base, cfg.backoff_cap),
            limiter: RateLimiter::new(cfg.message_qps, cfg.message_burst),
            outbox: Outbox::new(cfg.outbox_capacity),
            clients: HashMap::new(),
            certs,
            metrics,
            streams: None,
            state: None,
            reset: None,
            unanswered: Unanswered::default(),
            cfg,
            local,
            cancel: CancellationToken::new(),
        }
    }

    /// A notification on `reset` breaks the link's current connection as a
    /// network fault would: the link counts it lost and reconnects after
    /// its backoff (a fleet simulator's storm).
    pub fn with_reset(mut self, reset: Arc<tokio::sync::Notify>) -> EdgeLink<L> {
        self.reset = Some(reset);
        self
    }

    /// Runs until `cancel`: connects, serves, reconnects.
    ///
    /// Not an `async fn`: that would keep the link twice in the future, as
    /// its argument and as the local it moves into (a fleet simulator keeps
    /// one such future per node).
    pub fn run(mut self, cancel: CancellationToken) -> impl Future<Output = ()> {
        self.cancel = cancel;
        async move { self.run_link().await }
    }

    async fn run_link(&mut self) {
        let node = self.cfg.node_name.clone();
        let mut next = 0usize;
        let mut cert_generation = 0usize;
        loop {
            if self.cfg.endpoints.is_empty() {
                tracing::error!(node = %node, "no cloud endpoint configured");
                Box::pin(self.serve_offline_until(None)).await;
                return;
            }
            let endpoint = self.cfg.endpoints[next % self.cfg.endpoints.len()].clone();
            next += 1;
            if self.certs.has_changed().unwrap_or(false) {
                cert_generation += 1;
                self.certs.mark_unchanged();
            }
            let certs = Arc::clone(&self.certs.borrow());
            // Boxed, as every future this loop awaits: a TLS handshake's
            // state is large, and each is held only for a while, where the
            // task's own room is held for the link's life (a fleet simulator
            // keeps thousands of links).
            let dial = Box::pin(dial(&self.cfg, &endpoint, &certs, &mut self.clients, cert_generation, &self.metrics));
            let dialed = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return,
                r = dial => r,
            };
            match dialed {
                Ok(conn) => {
                    self.backoff.reset();
                    self.metrics.connects.inc();
                    tracing::info!(node = %node, server = %endpoint.server, transport = ?endpoint.transport, "connected to the cloud");
                    let end = Box::pin(self.connected(conn)).await;
                    self.metrics.connected.dec();
                    Box::pin(self.publish(well_known::CLOUD_DISCONNECTED, "")).await;
                    match end {
                        End::Stop => return,
                        End::Renewed => {
                            self.metrics.cert_reconnects.inc();
                            tracing::info!(node = %node, "reconnecting with the renewed certificate");
                            next -= 1; // same endpoint, at once
                            continue;
                        }
                        End::Lost(why) => {
                            self.metrics.disconnects.inc();
                            tracing::warn!(node = %node, server = %endpoint.server, reason = %why, "connection to the cloud lost");
                        }
                    }
                }
                Err(e) => {
                    self.metrics.dial_failures.inc();
                    tracing::warn!(node = %node, server = %endpoint.server, error = %e, failures = self.backoff.failures() + 1, "cannot reach the cloud");
                }
            }
            let delay = self.backoff.next_delay();
            tracing::debug!(node = %node, delay_ms = delay.as_millis() as u64, "next connection attempt");
            if !Box::pin(self.serve_offline_until(Some(Instant::now() + delay))).await {
                return;
            }
        }
    }

    /// Handles what edge modules send while there is no link, until
    /// `deadline` (or shutdown: returns false).
    async fn serve_offline_until(&mut self, deadline: Option<Instant>) -> bool {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return false,
                () = &mut sleep => return true,
                m = self.local.next_upstream() => match m {
                    Some(m) => self.offline(m),
                    None => return false,
                },
            }
        }
    }

    /// One upstream message while disconnected: status reports wait
    /// (coalesced), requests are refused, the rest is counted as not sent.
    fn offline(&mut self, m: Message) {
        let sync = m.header.sync;
        match self.outbox.push(m) {
            Ok(replaced) => {
                self.metrics.outbox_kept.inc();
                if replaced {
                    self.metrics.outbox_coalesced.inc();
                }
                self.metrics.outbox_depth.set(self.outbox.len() as i64);
            }
            Err((Refused::Full, m)) => {
                self.metrics.outbox_overflow.inc();
                tracing::warn!(node = %self.cfg.node_name, resource = %m.route.resource, capacity = self.cfg.outbox_capacity, "disconnected and the status buffer is full: report refused");
                if sync {
                    let _ = self.local.answer(m.error_response("not connected, and the status buffer is full"));
                }
            }
            Err((Refused::NotCoalescible, m)) => {
                if sync {
                    self.metrics.refused_disconnected.inc();
                    let _ = self.local.answer(m.error_response("not connected"));
                } else {
                    self.metrics.dropped_disconnected.inc();
                    tracing::debug!(node = %self.cfg.node_name, operation = %m.route.operation, resource = %m.route.resource, "not connected: message not sent");
                }
            }
        }
    }

    /// Tells the connection groups the link's state and, when connected,
    /// what it agreed (comma-separated, in the message's type).
    async fn publish(&mut self, state: &str, agreed: &str) {
        let up = (state == well_known::CLOUD_CONNECTED).then(|| Text::copy_from(agreed));
        if let Some(s) = &self.state {
            s.send_replace(up);
        }
        let mut m = Message::new()
            .with_route(source::EDGEHUB, group::META, well_known::NODE_CONNECTION, op::CONNECT)
            .with_content(Content::string(state));
        m.header.message_type = Text::copy_from(agreed);
        self.local.link_changed(m).await;
    }

    async fn connected(&mut self, conn: Connection) -> End {
        let (tx, mut rx) = conn.split();
        // The cloud's stream sessions go to their server while this
        // connection lasts.
        let _sessions = match (&self.streams, rx.incoming_streams()) {
            (Some(to), Some(incoming)) => Some(AbortOnDrop(tokio::spawn(hand_over(incoming, to.clone())))),
            _ => None,
        };
        // Pings (every heartbeat, sent by viaduct) keep the session alive
        // when the cloud agreed; otherwise `keepalive` messages do.
        let pings = rx.peer().ping_keepalive;
        let mut agreed = Vec::new();
        if pings {
            agreed.push(well_known::SESSION_LIVENESS);
        }
        if rx.peer().agreed(edgehive_viaduct::features::INVENTORY) {
            agreed.push(well_known::INVENTORY_AGREED);
        }
        if rx.peer().agreed(edgehive_viaduct::features::DEVICE_REPORTS) {
            agreed.push(well_known::DEVICE_REPORTS_AGREED);
        }
        self.metrics.connected.inc();
        self.publish(well_known::CLOUD_CONNECTED, &agreed.join(",")).await;
        if !pings && let Err(e) = self.keepalive(&tx).await {
            return e;
        }
        let mut beat = tokio::time::interval_at(Instant::now() + self.cfg.heartbeat, self.cfg.heartbeat);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // What the rate limit holds back: the message next in line, then
        // the ones read behind it. The mailbox is read while the line is
        // shorter than `LINE`, so an ACK or an answer behind a held report
        // is written at once (it is exempt); past that the mailbox waits.
        let mut held: Option<Message> = None;
        let mut line: VecDeque<Message> = VecDeque::new();
        let mut wake: Option<Instant> = None;
        loop {
            if held.is_none() {
                if let Some(m) = self.outbox.pop() {
                    self.metrics.outbox_depth.set(self.outbox.len() as i64);
                    held = Some(m);
                } else {
                    held = line.pop_front();
                }
            }
            // Woken by something else while the limit still holds it: no new try.
            let limited = wake.is_some_and(|at| at > Instant::now());
            if !limited && let Some(m) = held.take() {
                match self.limiter.try_take() {
                    Ok(()) => {
                        if let Err(end) = self.write(&tx, m).await {
                            self.set_aside(None, &mut line);
                            return end;
                        }
                        continue;
                    }
                    Err(at) => {
                        self.metrics.throttled.inc();
                        held = Some(m);
                        wake = Some(at);
                    }
                }
            }
            self.metrics.upstream_line.set(line.len() as i64);
            let waiting = held.is_some();
            let room = line.len() < LINE;
            let reset = self.reset.as_deref();
            let event = tokio::select! {
                biased;
                () = self.cancel.cancelled() => Event::Stop,
                () = async { match reset { Some(r) => r.notified().await, None => std::future::pending().await } } => Event::Reset,
                r = self.certs.changed() => if r.is_ok() { Event::Certs } else { Event::Stop },
                m = rx.recv() => Event::Down(m),
                _ = beat.tick() => Event::Beat,
                () = sleep_until_opt(wake), if waiting => Event::Wake,
                m = self.local.next_upstream(), if room => Event::Up(m),
            };
            match event {
                Event::Stop => {
                    tx.close();
                    return End::Stop;
                }
                Event::Reset => {
                    self.set_aside(held.take(), &mut line);
                    tx.close();
                    return End::Lost("reset".to_owned());
                }
                Event::Certs => {
                    self.set_aside(held.take(), &mut line);
                    tx.close();
                    return End::Renewed;
                }
                Event::Down(Some(m)) => {
                    if let Some(refused) = self.downstream(m).await {
                        self.send_again(refused, held.as_ref(), &mut line);
                    }
                }
                Event::Down(None) => {
                    self.set_aside(held.take(), &mut line);
                    return End::Lost(closed_reason(&rx));
                }
                Event::Beat => {
                    self.unanswered.expire();
                    if !pings && let Err(e) = self.keepalive(&tx).await {
                        self.set_aside(held.take(), &mut line);
                        return e;
                    }
                }
                Event::Wake => wake = None,
                Event::Up(None) => return End::Stop,
                Event::Up(Some(m)) => {
                    if exempt(&m) {
                        if let Err(end) = self.write(&tx, m).await {
                            self.set_aside(held.take(), &mut line);
                            return end;
                        }
                    } else if held.is_none() {
                        held = Some(m);
                    } else {
                        line.push_back(m);
                    }
                }
            }
        }
    }

    /// The link is gone with messages still in line: the held one goes
    /// back to the front of the outbox, and the rest are handled as if
    /// they had come while disconnected (status reports wait, requests are
    /// told, the rest is counted).
    fn set_aside(&mut self, held: Option<Message>, line: &mut VecDeque<Message>) {
        if let Some(m) = held {
            self.outbox.unpop(m);
        }
        for m in line.drain(..) {
            self.offline(m);
        }
        self.metrics.upstream_line.set(0);
    }

    async fn keepalive(&self, tx: &ConnTx) -> Result<(), End> {
        let m = Message::new()
            .with_route(source::WEBSOCKET, group::RESOURCE, well_known::NODE_PREFIX, op::KEEPALIVE)
            .with_content(Content::string(well_known::KEEPALIVE_PING));
        tx.write(m).await.map_err(|e| End::Lost(format!("keepalive: {e}")))?;
        self.metrics.keepalives.inc();
        Ok(())
    }

    async fn write(&mut self, tx: &ConnTx, mut m: Message) -> Result<(), End> {
        let sync = m.header.sync;
        // What no module waits on is kept in case the cloud is too busy for it.
        let keep = (!sync && !exempt(&m)).then(|| m.clone());
        // KubeEdge writes every message as asynchronous.
        m.header.sync = false;
        match tx.write(m).await {
            Ok(()) => {
                self.metrics.upstream.inc();
                if let Some(m) = keep {
                    self.unanswered.written(m);
                }
                Ok(())
            }
            Err(e) => {
                // Not written (viaduct hands it back): a status report waits
                // for the next link, a request is told, anything else is counted.
                let reason = format!("write: {e}");
                let mut m = e.into_message();
                m.header.sync = sync;
                self.offline(m);
                Err(End::Lost(reason))
            }
        }
    }

    /// The message `refusal` says the cloud was too busy for, if it is kept
    /// (taken out: a message goes again once per refusal).
    fn refused(&mut self, refusal: &Message) -> Option<Message> {
        let parent = refusal.parent_id()?;
        if !refusal.content.as_text().is_some_and(|t| t.ends_with(well_known::CLOUD_BUSY)) {
            return None;
        }
        self.unanswered.answered(parent)
    }

    /// A message the cloud was too busy for goes again: behind what is in
    /// line, or, a status report, into the outbox unless a newer one of its
    /// object waits to be written (held by the rate limit, in line behind
    /// it, or in the outbox): that one stands, and the older must not
    /// follow it. The line may so hold more than [`LINE`], by at most the
    /// messages kept unanswered.
    fn send_again(&mut self, m: Message, held: Option<&Message>, line: &mut VecDeque<Message>) {
        let Some(key) = coalesce_key(&m) else {
            self.metrics.busy_retried.inc();
            tracing::info!(node = %self.cfg.node_name, operation = %m.route.operation, resource = %m.route.resource, "the cloud was too busy for a message; it goes again");
            line.push_back(m);
            return;
        };
        if held.into_iter().chain(line.iter()).any(|m| coalesce_key(m).as_ref() == Some(&key)) {
            tracing::debug!(node = %self.cfg.node_name, resource = %m.route.resource, "a refused status report since replaced; the newer one goes");
            return;
        }
        match self.outbox.push_unless_newer(m) {
            Ok(true) => {
                self.metrics.busy_retried.inc();
                self.metrics.outbox_depth.set(self.outbox.len() as i64);
                tracing::info!(node = %self.cfg.node_name, "the cloud was too busy for a status report; it goes again");
            }
            Ok(false) => {}
            Err((_, report)) => {
                self.metrics.outbox_overflow.inc();
                tracing::warn!(node = %self.cfg.node_name, resource = %report.route.resource, "the status buffer is full: a refused report is not sent again");
            }
        }
    }

    /// Routes one message from the cloud (KubeEdge's EdgeHub rules); hands
    /// back a message of the edge's the cloud was too busy for.
    async fn downstream(&mut self, m: Message) -> Option<Message> {
        self.metrics.downstream.inc();
        if m.route.operation == op::ERROR && m.parent_id().is_some() {
            // The cloud was too busy for a message (well_known::CLOUD_BUSY:
            // CloudHub could not hand it to its controller in time, or the
            // controller had this node's share of requests waiting): what
            // no module waits on goes again (a status report as the newest
            // of its object; one since replaced does not), and a request's
            // asker is told below.
            if let Some(refused) = self.refused(&m) {
                return Some(refused);
            }
        } else if m.route.operation == op::ERROR && m.route.source == source::CLOUDHUB {
            // CloudHub says why it refuses this edge before it closes
            // (another node's certificate, a revoked or replaced one, the
            // node limit): the operator of the edge must read it here.
            let reason =
                m.content.as_text().map(|t| t.into_owned()).unwrap_or_else(|| m.content.to_value().to_string());
            tracing::warn!(node = %self.cfg.node_name, %reason, "the cloud refused this edge");
            return None;
        }
        let g = m.route.group.as_str();
        if let Some(parent) = m.parent_id()
            && let Some(sent) = self.unanswered.answered(parent)
            && sent.route.operation == op::INVENTORY
        {
            // A message answered is done with; an inventory's answer says
            // only that it was taken (or why not), and no module waits for it.
            if m.route.operation == op::ERROR {
                tracing::warn!(node = %self.cfg.node_name, reason = %m.content.as_json(), "the cloud refused this edge's inventory");
            }
            return None;
        }
        if m.parent_id().is_some() && g != group::TWIN {
            // The answer to a request some module is waiting for. If it gave
            // up, the answer still goes to its module below (MetaManager
            // stores a late query answer and ACKs it).
            match self.local.answer(m) {
                Ok(()) => return None,
                Err(m) => {
                    self.deliver(crate::METAMANAGER, m).await;
                    return None;
                }
            }
        }
        let target = match g {
            group::RESOURCE | group::FUNC => crate::METAMANAGER,
            group::TWIN => source::TWIN,
            group::USER => match m.route.source.as_str() {
                source::ROUTER_EVENTBUS => source::EVENTBUS,
                source::ROUTER_SERVICEBUS => source::SERVICEBUS,
                // KubeEdge sends these to group `bus`, whose one module is EventBus.
                _ => source::EVENTBUS,
            },
            _ => {
                self.metrics.downstream_undeliverable.inc();
                tracing::warn!(node = %self.cfg.node_name, group = g, operation = %m.route.operation, resource = %m.route.resource, "message from the cloud for an unknown group; dropped");
                return None;
            }
        };
        self.deliver(target, m).await;
        None
    }

    async fn deliver(&mut self, target: &'static str, m: Message) {
        if !self.local.deliver(target, m).await {
            self.metrics.downstream_undeliverable.inc();
            tracing::warn!(node = %self.cfg.node_name, target, "message from the cloud not delivered");
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Hands the sessions the cloud opens to their server; one that finds it
/// busy is refused.
async fn hand_over(mut incoming: IncomingStreams, to: mpsc::Sender<Stream>) {
    while let Some(s) = incoming.accept().await {
        if let Err(e) = to.try_send(s) {
            let s = match e {
                mpsc::error::TrySendError::Full(s) | mpsc::error::TrySendError::Closed(s) => s,
            };
            tracing::warn!(session = s.id(), "stream session refused: the edge's session server is busy");
            let (tx, _rx) = s.split();
            tx.reset("the edge is busy: too many stream sessions waiting");
        }
    }
}

/// ACKs and other answers to the cloud skip the rate limit: the cloud paces
/// what it sends (its ACK window), and holding back an ACK only makes it
/// re-send. Everything the edge starts itself is limited.
fn exempt(m: &Message) -> bool {
    m.route.operation == op::RESPONSE && m.parent_id().is_some()
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn closed_reason(rx: &ConnRx) -> String {
    rx.close_reason().map_or_else(|| "closed".to_owned(), |r| r.to_string())
}

/// A client of one cloud endpoint, kept between connections: a QUIC
/// endpoint holds the session tickets for 0-RTT, a WebSocket client the
/// TLS session to resume.
enum Client {
    WebSocket(WsClient),
    Quic(QuicClient),
}

/// Clients by endpoint, with the certificate generation each was made with.
/// Boxed: a map's first insert makes room for three entries, and a client
/// (its configuration inline) is large, which a fleet simulator pays per
/// node.
type Clients = HashMap<String, (usize, Box<Client>)>;

async fn dial(
    cfg: &EdgeHubConfig,
    endpoint: &CloudEndpoint,
    certs: &EdgeCerts,
    clients: &mut Clients,
    generation: usize,
    metrics: &EdgeHubMetrics,
) -> Result<Connection, ConnectError> {
    let stale = clients.get(&endpoint.server).is_none_or(|(g, _)| *g != generation);
    if stale {
        let mut client = ClientConfig::new(endpoint.server.clone(), cfg.node_name.clone(), certs.client_tls());
        client.project_id = cfg.project_id.clone();
        client.conn = cfg.conn();
        client.conn.stream_stats = Some(Arc::clone(&metrics.streams));
        client.conn.wire_bytes = Some(Arc::clone(&metrics.wire));
        client.handshake_timeout = cfg.handshake_timeout;
        client.ping_keepalive = cfg.ping_keepalive;
        client.features = cfg.features.clone();
        client.local_ip = cfg.local_ip;
        let made = match endpoint.transport {
            Transport::WebSocket => Client::WebSocket(WsClient::new(client)?),
            Transport::Quic => Client::Quic(match &cfg.quic_endpoint {
                Some(shared) => QuicClient::on(client, shared.clone())?,
                None => {
                    let bind: SocketAddr = match cfg.local_ip {
                        Some(ip) => (ip, 0).into(),
                        None if endpoint.server.starts_with('[') => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
                        None => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
                    };
                    QuicClient::new(client, bind)?
                }
            }),
        };
        clients.insert(endpoint.server.clone(), (generation, Box::new(made)));
    }
    match clients.get(&endpoint.server).map(|(_, c)| &**c) {
        Some(Client::WebSocket(c)) => c.connect().await,
        Some(Client::Quic(c)) => c.connect().await,
        None => Err(ConnectError::Invalid("no client for the endpoint".into())),
    }
}
