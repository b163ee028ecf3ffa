//! A node's live tunnel and the table of them: the [`Tunnels`] handle the
//! API server's sessions go through.
//!
//! One task reads the tunnel (frames, then messages) and hands each DATA
//! or REMOVE_CONNECT to the session its connect id names; another writes
//! what the sessions queue. KubeEdge's tunnel has no flow control: its
//! cloud writes each DATA to kube-apiserver inside its read loop, so a slow
//! client holds the whole tunnel, and TCP pushes back on the edge. Here
//! each session may have [`Settings::session_budget`] bytes received and
//! not yet taken; past that the reader waits for room (TCP pushes back on
//! the edge, as in KubeEdge) at most [`Settings::stall_timeout`], then ends
//! that session instead of holding the others any longer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use edgehive_viaduct::{Stream, StreamError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use edgehive_credentials::Credentials;

use crate::frames::{self, FrameReader, Incoming};
use crate::message::{MessageType, TunnelMessage};
use crate::metrics::TunnelMetrics;

/// Frames waiting for a tunnel's writer.
const OUT_QUEUE: usize = 256;
/// How long a closing tunnel's writer may take for what is queued.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// The least a DATA message costs of a session's budget, so that empty
/// messages cannot queue without bound.
pub(crate) const MIN_COST: usize = 64;

/// The settings sessions and tunnels run with (from the server's
/// configuration).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) edged_address: String,
    pub(crate) max_message: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) write_timeout: Duration,
    pub(crate) reply_timeout: Duration,
    pub(crate) stall_timeout: Duration,
    pub(crate) session_budget: usize,
    pub(crate) max_sessions: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the map whole, so a poisoned lock still
    // guards a consistent one.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the tunnel's reader hands a session.
#[derive(Debug)]
pub(crate) enum Event {
    /// Bytes from the edge; the permit is the session budget they hold
    /// until taken.
    Data(Bytes, OwnedSemaphorePermit),
    /// The edge ended the connection (REMOVE_CONNECT).
    Removed,
}

/// How a session learns that the tunnel gave up on it (the tunnel closed,
/// or its reader fell behind).
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionEnd {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
}

impl SessionEnd {
    fn end(&self, reason: &str) {
        lock(&self.reason).get_or_insert_with(|| reason.to_owned());
        self.token.cancel();
    }

    pub(crate) async fn ended(&self) -> String {
        self.token.cancelled().await;
        lock(&self.reason).clone().unwrap_or_else(|| "the tunnel closed".into())
    }
}

struct Slot {
    /// Unbounded, but never past the session budget (data holds permits)
    /// and one `Removed`.
    events: mpsc::UnboundedSender<Event>,
    /// `Removed` was handed over (more REMOVE_CONNECTs are ignored).
    removed: bool,
    budget: Arc<Semaphore>,
    end: SessionEnd,
}

/// A session's side of its slot.
#[derive(Debug)]
pub(crate) struct SessionLink {
    pub(crate) events: mpsc::UnboundedReceiver<Event>,
    pub(crate) end: SessionEnd,
}

/// One node's live tunnel.
pub(crate) struct Tunnel {
    pub(crate) id: u64,
    pub(crate) node: String,
    /// The serial of the certificate the edge connected with.
    serial: String,
    out: mpsc::Sender<Bytes>,
    slots: Mutex<HashMap<u64, Slot>>,
    cancel: CancellationToken,
    reason: Mutex<Option<String>>,
    pub(crate) settings: Arc<Settings>,
    pub(crate) metrics: Arc<TunnelMetrics>,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel").field("id", &self.id).field("node", &self.node).finish_non_exhaustive()
    }
}

impl Tunnel {
    fn reason(&self) -> String {
        lock(&self.reason).clone().unwrap_or_else(|| "the tunnel closed".into())
    }

    /// Queues a message for the edge, waiting for room at most the write
    /// deadline; the error is why the tunnel is gone.
    pub(crate) async fn send(&self, m: &TunnelMessage) -> Result<(), String> {
        if self.cancel.is_cancelled() {
            return Err(self.reason());
        }
        let frame = frames::text(&m.encode());
        let sent = tokio::select! {
            () = self.cancel.cancelled() => return Err(self.reason()),
            r = tokio::time::timeout(self.settings.write_timeout, self.out.send(frame)) => r,
        };
        match sent {
            Ok(Ok(())) => {
                if m.kind == MessageType::Data {
                    self.metrics.bytes_to_edge.inc_by(m.data.len() as u64);
                }
                Ok(())
            }
            Ok(Err(_)) => Err(self.reason()),
            Err(_) => {
                let why =
                    format!("the tunnel's writer did not take a message within {:?}", self.settings.write_timeout);
                self.close(1011, &why);
                Err(why)
            }
        }
    }

    /// Queues a message without waiting (a REMOVE_CONNECT from a session
    /// being dropped); lost only when the tunnel is this far behind.
    pub(crate) fn try_send(&self, m: &TunnelMessage) {
        let _ = self.out.try_send(frames::text(&m.encode()));
    }

    /// Adds session `id`; refused when the tunnel is closed or full.
    pub(crate) fn register(&self, id: u64) -> Result<SessionLink, crate::OpenError> {
        let (events, rx) = mpsc::unbounded_channel();
        let end = SessionEnd::default();
        let mut slots = lock(&self.slots);
        if self.cancel.is_cancelled() {
            return Err(crate::OpenError::NotConnected(self.node.clone()));
        }
        if slots.len() >= self.settings.max_sessions {
            return Err(crate::OpenError::TooMany { node: self.node.clone(), max: self.settings.max_sessions });
        }
        let budget = Arc::new(Semaphore::new(self.settings.session_budget));
        slots.insert(id, Slot { events, removed: false, budget, end: end.clone() });
        self.metrics.sessions_opened.inc();
        self.metrics.sessions_open.inc();
        Ok(SessionLink { events: rx, end })
    }

    /// Removes session `id` (its bridge ended).
    pub(crate) fn unregister(&self, id: u64) {
        if lock(&self.slots).remove(&id).is_some() {
            self.metrics.sessions_open.dec();
        }
    }

    /// Closes the tunnel with a WebSocket close `code` and why: the edge
    /// gets the close frame, every session ends with the reason.
    pub(crate) fn close(&self, code: u16, reason: &str) {
        {
            let mut r = lock(&self.reason);
            if r.is_some() {
                return;
            }
            *r = Some(reason.to_owned());
        }
        let _ = self.out.try_send(frames::close(code, reason));
        self.cancel.cancel();
        for slot in lock(&self.slots).values() {
            slot.end.end(&format!("the tunnel of node {:?} closed: {reason}", self.node));
        }
    }

    /// Whether the tunnel is closing or closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Hands one message from the edge to its session.
    async fn dispatch(&self, m: TunnelMessage) {
        match m.kind {
            MessageType::Data => {
                self.metrics.bytes_from_edge.inc_by(m.data.len() as u64);
                let slot = lock(&self.slots).get(&m.connect_id).map(|s| (s.events.clone(), s.budget.clone()));
                let Some((events, budget)) = slot else {
                    tracing::debug!(connect_id = m.connect_id, "data for no open connection; ignored");
                    return;
                };
                let cost = m.data.len().clamp(MIN_COST, self.settings.session_budget);
                let cost = u32::try_from(cost).unwrap_or(u32::MAX);
                let permit = tokio::select! {
                    () = self.cancel.cancelled() => return,
                    p = tokio::time::timeout(self.settings.stall_timeout, budget.acquire_many_owned(cost)) => p,
                };
                match permit {
                    Ok(Ok(permit)) => {
                        let _ = events.send(Event::Data(m.data, permit));
                    }
                    _ => {
                        self.metrics.sessions_stalled.inc();
                        let why = format!(
                            "its reader fell {} bytes behind the node for {:?}",
                            self.settings.session_budget, self.settings.stall_timeout
                        );
                        tracing::info!(node = %self.node, connect_id = m.connect_id, reason = %why, "session ended");
                        // Out of the table: later data for it is dropped
                        // at once instead of waiting again.
                        if let Some(slot) = lock(&self.slots).remove(&m.connect_id) {
                            self.metrics.sessions_open.dec();
                            slot.end.end(&why);
                        }
                    }
                }
            }
            MessageType::RemoveConnect => {
                if let Some(slot) = lock(&self.slots).get_mut(&m.connect_id)
                    && !std::mem::replace(&mut slot.removed, true)
                {
                    let _ = slot.events.send(Event::Removed);
                }
            }
            other => {
                tracing::debug!(node = %self.node, connect_id = m.connect_id, kind = %other, "unexpected message from the edge; ignored");
            }
        }
    }
}

/// The tunnels by node, and the numbering of connections.
#[derive(Debug)]
pub(crate) struct Registry {
    tunnels: Mutex<HashMap<String, Arc<Tunnel>>>,
    /// CloudStream numbers connections from 1 (`nextMessageID`).
    next_connect_id: AtomicU64,
    next_tunnel_id: AtomicU64,
    pub(crate) settings: Arc<Settings>,
    pub(crate) metrics: Arc<TunnelMetrics>,
    max_tunnels: usize,
    /// Whose certificates are checked again while their tunnel lives.
    credentials: Option<Arc<Credentials>>,
}

/// How often a live tunnel's certificate is checked again (a revoke or a
/// replaced certificate closes it within this).
const RECHECK: Duration = Duration::from_secs(60);
/// Longest wait for one check.
const CHECK_DEADLINE: Duration = Duration::from_secs(5);

impl Registry {
    pub(crate) fn new(
        settings: Settings,
        metrics: Arc<TunnelMetrics>,
        max_tunnels: usize,
        credentials: Option<Arc<Credentials>>,
    ) -> Registry {
        Registry {
            tunnels: Mutex::new(HashMap::new()),
            next_connect_id: AtomicU64::new(1),
            next_tunnel_id: AtomicU64::new(1),
            settings: Arc::new(settings),
            metrics,
            max_tunnels,
            credentials,
        }
    }

    /// Whether the certificate `tunnel` connected with is still accepted:
    /// `Err(why)` when the credentials refuse it (a check that cannot be
    /// made in time does not close a live tunnel).
    async fn still_accepted(&self, tunnel: &Tunnel) -> Result<(), String> {
        let Some(credentials) = &self.credentials else { return Ok(()) };
        match tokio::time::timeout(CHECK_DEADLINE, credentials.check_certificate(&tunnel.node, &tunnel.serial)).await {
            Ok(Err(edgehive_credentials::Refusal::Store(e))) => {
                tracing::warn!(node = %tunnel.node, error = %e, "tunnel certificate check");
                Ok(())
            }
            Ok(Err(refusal)) => Err(refusal.to_string()),
            Ok(Ok(())) | Err(_) => Ok(()),
        }
    }

    /// Whether a tunnel of `node` may be added (it has one, or the table
    /// has room).
    pub(crate) fn has_room_for(&self, node: &str) -> bool {
        let t = lock(&self.tunnels);
        t.contains_key(node) || t.len() < self.max_tunnels
    }

    fn get(&self, node: &str) -> Option<Arc<Tunnel>> {
        lock(&self.tunnels).get(node).filter(|t| !t.is_closed()).cloned()
    }

    /// Runs a node's tunnel over an upgraded connection until it ends or
    /// `stop`. A newer tunnel of the node replaces (closes) an older one, as
    /// in KubeEdge, whose table keeps the newest.
    pub(crate) async fn run<IO>(
        self: Arc<Self>,
        io: IO,
        node: String,
        internal_ip: String,
        serial: String,
        stop: CancellationToken,
    ) where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (r, mut w) = tokio::io::split(io);
        let (out, out_rx) = mpsc::channel(OUT_QUEUE);
        let tunnel = Arc::new(Tunnel {
            id: self.next_tunnel_id.fetch_add(1, Ordering::Relaxed),
            node: node.clone(),
            serial,
            out,
            slots: Mutex::new(HashMap::new()),
            cancel: stop.child_token(),
            reason: Mutex::new(None),
            settings: Arc::clone(&self.settings),
            metrics: Arc::clone(&self.metrics),
        });
        // The room checked before the upgrade is checked again where the
        // tunnel goes in: upgrades at the same time cannot pass the limit.
        let old = {
            let mut tunnels = lock(&self.tunnels);
            if !tunnels.contains_key(&node) && tunnels.len() >= self.max_tunnels {
                None
            } else {
                Some(tunnels.insert(node.clone(), Arc::clone(&tunnel)))
            }
        };
        let Some(old) = old else {
            self.metrics.refused_limit.inc();
            tracing::warn!(node = %node, "tunnel refused: the cloud serves no more tunnels");
            let close = frames::close(1013, "the cloud serves no more tunnels");
            let _ = tokio::time::timeout(CLOSE_GRACE, w.write_all(&close)).await;
            return;
        };
        match old {
            Some(old) => {
                self.metrics.replaced.inc();
                tracing::info!(node = %node, "a newer tunnel replaces the node's tunnel");
                old.close(1000, "replaced by a newer tunnel of the node");
            }
            None => {
                self.metrics.connected.inc();
            }
        }
        self.metrics.accepted.inc();
        tracing::info!(node = %node, internal_ip = %internal_ip, "stream tunnel connected");
        let writer = tokio::spawn(write_loop(w, out_rx, Arc::clone(&tunnel)).in_current_span());
        // The certificate, checked again while the tunnel lives.
        let watcher = tokio::spawn({
            let (registry, tunnel) = (Arc::clone(&self), Arc::clone(&tunnel));
            async move {
                loop {
                    tokio::select! {
                        () = tunnel.cancel.cancelled() => return,
                        () = tokio::time::sleep(RECHECK) => {}
                    }
                    if let Err(why) = registry.still_accepted(&tunnel).await {
                        tracing::warn!(node = %tunnel.node, reason = %why, "tunnel closed: certificate no longer accepted");
                        tunnel.close(1008, &why);
                        return;
                    }
                }
            }
            .in_current_span()
        });
        let reason = read_loop(FrameReader::new(r, self.settings.max_message), &tunnel).await;
        tunnel.close(1000, &reason);
        watcher.abort();
        let _ = writer.await;
        let current = {
            let mut tunnels = lock(&self.tunnels);
            match tunnels.get(&node) {
                Some(t) if t.id == tunnel.id => tunnels.remove(&node).is_some(),
                _ => false,
            }
        };
        if current {
            self.metrics.connected.dec();
        }
        tracing::info!(node = %node, reason = %tunnel.reason(), "stream tunnel closed");
    }
}

/// Reads the tunnel until it ends; returns why.
async fn read_loop<R: AsyncRead + Unpin>(mut reader: FrameReader<R>, tunnel: &Tunnel) -> String {
    let idle = tunnel.settings.idle_timeout;
    loop {
        let next = tokio::select! {
            () = tunnel.cancel.cancelled() => return tunnel.reason(),
            n = tokio::time::timeout(idle, reader.next()) => n,
        };
        match next {
            Err(_) => return format!("nothing received from the edge for {idle:?}"),
            Ok(Err(e)) => {
                let why = e.to_string();
                if e.is_violation() {
                    tunnel.metrics.malformed.inc();
                    tracing::warn!(node = %tunnel.node, reason = %why, "tunnel closed: malformed frame");
                    let code = if matches!(e, crate::frames::FrameError::TooLarge { .. }) { 1009 } else { 1002 };
                    tunnel.close(code, &why);
                }
                return why;
            }
            Ok(Ok(Incoming::Ping(p))) => {
                let _ = tunnel.out.try_send(frames::pong(&p));
            }
            Ok(Ok(Incoming::Close(code))) => {
                return match code {
                    Some(code) => format!("the edge closed the tunnel (code {code})"),
                    None => "the edge closed the tunnel".into(),
                };
            }
            Ok(Ok(Incoming::Message(b))) => match TunnelMessage::decode(b) {
                Ok(m) => tunnel.dispatch(m).await,
                Err(e) => {
                    tunnel.metrics.malformed.inc();
                    let why = e.to_string();
                    tracing::warn!(node = %tunnel.node, reason = %why, "tunnel closed: malformed message");
                    tunnel.close(1002, &why);
                    return why;
                }
            },
        }
    }
}

/// Writes what the sessions queue, a batch per flush, each batch within the
/// write deadline; when the tunnel closes, what is queued (its close frame
/// last) within [`CLOSE_GRACE`].
async fn write_loop<W: AsyncWrite + Unpin>(mut w: W, mut out: mpsc::Receiver<Bytes>, tunnel: Arc<Tunnel>) {
    let deadline = tunnel.settings.write_timeout;
    loop {
        let first = tokio::select! {
            biased;
            f = out.recv() => match f { Some(f) => f, None => break },
            () = tunnel.cancel.cancelled() => break,
        };
        let batch = async {
            w.write_all(&first).await?;
            while let Ok(f) = out.try_recv() {
                w.write_all(&f).await?;
            }
            w.flush().await
        };
        let failed = match tokio::time::timeout(deadline, batch).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("writing to the edge: {e}")),
            Err(_) => Some(format!("a write to the edge took longer than {deadline:?}")),
        };
        if let Some(why) = failed {
            tunnel.close(1011, &why);
            return;
        }
    }
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        while let Ok(f) = out.try_recv() {
            w.write_all(&f).await?;
        }
        w.flush().await?;
        w.shutdown().await
    })
    .await;
}

/// Opens sessions to nodes through their tunnels; cheap to clone.
#[derive(Debug, Clone)]
pub struct Tunnels {
    pub(crate) registry: Arc<Registry>,
}

impl Tunnels {
    /// Whether `node` has a live tunnel.
    pub fn is_connected(&self, node: &str) -> bool {
        self.registry.get(node).is_some()
    }

    /// The nodes with a live tunnel, sorted.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> =
            lock(&self.registry.tunnels).iter().filter(|(_, t)| !t.is_closed()).map(|(n, _)| n.clone()).collect();
        nodes.sort();
        nodes
    }

    /// Opens a session to `node` with `header` (a
    /// [`SessionRequest`](edgehive_model::session::SessionRequest), JSON)
    /// and returns the opener's end: the tunnel answers it as an edgehive
    /// edge would (a `SessionReply` first, then the session's data),
    /// translating to and from the node's tunnel. Fails at once when the
    /// node has no tunnel or too many sessions open; checks the tunnel's
    /// certificate first (a revoked or replaced one closes the tunnel).
    pub async fn open(&self, node: &str, header: Bytes) -> Result<Stream, crate::OpenError> {
        let tunnel = self.registry.get(node).ok_or_else(|| crate::OpenError::NotConnected(node.to_owned()))?;
        if let Err(why) = self.registry.still_accepted(&tunnel).await {
            tracing::warn!(node = %node, reason = %why, "tunnel closed: certificate no longer accepted");
            tunnel.close(1008, &why);
            return Err(crate::OpenError::Revoked { node: node.to_owned(), why });
        }
        let id = self.registry.next_connect_id.fetch_add(1, Ordering::Relaxed);
        let link = tunnel.register(id)?;
        let (opener, acceptor) = match edgehive_viaduct::stream::pair(header) {
            Ok(p) => p,
            Err(e) => {
                tunnel.unregister(id);
                return Err(crate::OpenError::Stream(e));
            }
        };
        let span = tracing::info_span!("tunnel_session", node = %node, connect_id = id);
        tokio::spawn(crate::bridge::run(tunnel, id, link, acceptor).instrument(span));
        Ok(opener)
    }
}

/// Why [`Tunnels::open`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The node has no live tunnel.
    #[error("node {0:?} has no stream tunnel connected")]
    NotConnected(String),
    /// The node's tunnel carries its most sessions.
    #[error("node {node:?} has {max} sessions open through its tunnel, the most it may")]
    TooMany {
        /// The node.
        node: String,
        /// The limit.
        max: usize,
    },
    /// The session pair could not be made.
    #[error("stream session: {0}")]
    Stream(StreamError),
    /// The tunnel's certificate is no longer accepted (the node's
    /// certificates were revoked or replaced): the tunnel was closed.
    #[error("the stream tunnel of node {node:?} was closed: {why}")]
    Revoked {
        /// The node.
        node: String,
        /// Why.
        why: String,
    },
}
