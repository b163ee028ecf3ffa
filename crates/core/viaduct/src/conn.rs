//! A live connection: a bounded send queue drained by a writer task, a reader
//! task that decodes frames, answers viaduct control messages, hands responses
//! to pending requests and queues the rest for `recv`.
//!
//! Any read, decode or write failure closes the connection (KubeEdge's
//! behaviour), with the reason logged once, naming the peer.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use edgehive_model::{Content, Message, Text, new_msg_id, op};
use tokio::sync::oneshot;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tracing::Instrument;

use crate::config::ConnConfig;
use crate::error::{CloseReason, RequestError, WriteError};
use crate::queue;
use crate::stream::{self, IncomingStreams, Mux, QuicSessions, Stream, StreamError};
use crate::tls::CertIdentity;

/// Which transport carries a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// KubeEdge-compatible WebSocket over TLS.
    WebSocket,
    /// edgehive's mapping onto IETF QUIC.
    Quic,
}

/// Who is at the other end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    /// `node_id` from the handshake (on the client: our own node id).
    pub node_id: Text,
    /// `project_id` from the handshake.
    pub project_id: Text,
    /// Subject of the peer's verified certificate.
    pub cert: Option<CertIdentity>,
    /// The peer's address.
    pub remote_addr: SocketAddr,
    /// Our address.
    pub local_addr: SocketAddr,
    /// Transport.
    pub protocol: Protocol,
    /// The TLS session was resumed (QUIC: the handshake headers went out in
    /// accepted 0-RTT) rather than negotiated from scratch.
    pub resumed: bool,
    /// Both ends agreed that the connection's own liveness (WebSocket
    /// pings; QUIC keep-alives) carries the edge's instead of `keepalive`
    /// messages (an edgehive edge and cloud; never with KubeEdge peers). See
    /// [`crate::ws::HEADER_KEEPALIVE`] and the QUIC header's `keepalive`.
    pub ping_keepalive: bool,
    /// The features both ends agreed on ([`crate::features`]); empty with
    /// KubeEdge peers.
    pub features: Vec<Text>,
}

impl PeerInfo {
    /// Whether both ends agreed on `feature`.
    pub fn agreed(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f.as_str() == feature)
    }
}

/// State shared by the handles and the two tasks.
struct ConnState {
    info: PeerInfo,
    cfg: ConnConfig,
    cancel: CancellationToken,
    /// Set before `cancel` fires: what the send path checks per message
    /// (a token's check takes a lock).
    closed: std::sync::atomic::AtomicBool,
    reason: Mutex<Option<CloseReason>>,
    pending: Mutex<HashMap<Text, oneshot::Sender<Message>>>,
    pending_count: AtomicUsize,
    /// When the connection was made, and when something (a message, a ping
    /// or a pong) last arrived, in milliseconds after that.
    born: tokio::time::Instant,
    last_received_ms: std::sync::atomic::AtomicU64,
    /// On QUIC, the connection's datagram count when `idle_for` last looked.
    quic_datagrams: std::sync::atomic::AtomicU64,
    /// On QUIC, the connection.
    quic_conn: Option<quinn::Connection>,
    /// The connection's stream sessions carried as frames (on QUIC, none).
    mux: Arc<Mux>,
    /// The connection's stream sessions on QUIC streams of their own, when
    /// agreed.
    quic: Option<Arc<QuicSessions>>,
}

impl ConnState {
    /// Records the first reason and stops both tasks.
    fn close(&self, reason: CloseReason) {
        let mut r = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if r.is_none() {
            match &reason {
                CloseReason::Local | CloseReason::PeerClosed => {
                    tracing::info!(node = %self.info.node_id, remote = %self.info.remote_addr, %reason, "connection closed")
                }
                _ => {
                    tracing::warn!(node = %self.info.node_id, remote = %self.info.remote_addr, %reason, "connection closed")
                }
            }
            *r = Some(reason);
        }
        let why = r.as_ref().map(ToString::to_string).unwrap_or_default();
        drop(r);
        self.closed.store(true, Ordering::Release);
        self.mux.close_all(&why);
        if let Some(q) = &self.quic {
            q.close_all(&why);
        }
        self.cancel.cancel();
        // Pending requests learn of the close through their dropped senders.
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Whether the connection is closing: `closed` is set before the token
    /// fires, and nothing else fires it.
    fn closing(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn reason(&self) -> Option<CloseReason> {
        self.reason.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Hands a response to the request waiting for it; gives it back if none is.
    fn take_response(&self, msg: Message) -> Option<Message> {
        if self.pending_count.load(Ordering::Acquire) == 0 || msg.header.parent_msg_id.is_empty() {
            return Some(msg);
        }
        let waiter = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(msg.header.parent_msg_id.as_str());
        match waiter {
            Some(tx) => tx.send(msg).err(),
            None => Some(msg),
        }
    }
}

/// The writing half: cheap to clone, usable from many tasks.
#[derive(Clone)]
pub struct ConnTx {
    shared: Arc<ConnState>,
    queue: queue::Sender<Outgoing>,
}

/// What the writer task takes from the send queue.
enum Outgoing {
    /// A message to write.
    Message(Message),
    /// A last message: written after everything queued before it, then the
    /// connection is closed.
    Last(Message),
}

impl Outgoing {
    fn into_message(self) -> Message {
        match self {
            Outgoing::Message(m) | Outgoing::Last(m) => m,
        }
    }
}

/// The reading half.
pub struct ConnRx {
    shared: Arc<ConnState>,
    incoming: queue::Receiver<Message>,
}

/// A connection to one peer.
pub struct Connection {
    /// Writing half.
    pub tx: ConnTx,
    /// Reading half.
    pub rx: ConnRx,
}

impl fmt::Debug for ConnTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnTx").field("peer", &self.shared.info).finish_non_exhaustive()
    }
}
impl fmt::Debug for ConnRx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnRx").field("peer", &self.shared.info).finish_non_exhaustive()
    }
}
impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection").field("peer", &self.tx.shared.info).finish_non_exhaustive()
    }
}

impl Connection {
    /// Who is at the other end.
    pub fn peer(&self) -> &PeerInfo {
        &self.tx.shared.info
    }

    /// Splits into the writing and reading halves.
    pub fn split(self) -> (ConnTx, ConnRx) {
        (self.tx, self.rx)
    }
}

impl ConnTx {
    /// Who is at the other end.
    pub fn peer(&self) -> &PeerInfo {
        &self.shared.info
    }

    fn closed_error(&self, msg: Message) -> WriteError {
        WriteError::Closed { peer: self.shared.info.node_id.clone(), message: Box::new(msg) }
    }

    /// Queues a message if there is room now.
    pub fn try_write(&self, msg: Message) -> Result<(), WriteError> {
        if self.shared.closing() {
            return Err(self.closed_error(msg));
        }
        self.queue.try_send(Outgoing::Message(msg)).map_err(|e| match e {
            queue::TrySendError::Full(m) => {
                WriteError::Full { peer: self.shared.info.node_id.clone(), message: Box::new(m.into_message()) }
            }
            queue::TrySendError::Closed(m) => self.closed_error(m.into_message()),
        })
    }

    /// Queues a message, waiting up to the write deadline for room.
    pub async fn write(&self, msg: Message) -> Result<(), WriteError> {
        let deadline = Instant::now() + self.shared.cfg.write_timeout;
        self.write_until(Outgoing::Message(msg), deadline).await
    }

    /// Queues a last message (say, why the peer is refused) and closes the
    /// connection once it and everything queued before it are written. The
    /// peer sees the message, then a clean close, instead of silence.
    pub async fn close_with(&self, last: Message) -> Result<(), WriteError> {
        let deadline = Instant::now() + self.shared.cfg.write_timeout;
        self.write_until(Outgoing::Last(last), deadline).await
    }

    async fn write_until(&self, out: Outgoing, deadline: Instant) -> Result<(), WriteError> {
        let msg = out;
        if self.shared.closing() {
            return Err(self.closed_error(msg.into_message()));
        }
        let permit = tokio::select! {
            r = timeout_at(deadline, self.queue.reserve()) => r,
            _ = self.shared.cancel.cancelled() => return Err(self.closed_error(msg.into_message())),
        };
        match permit {
            Ok(Ok(p)) => {
                p.send(msg);
                Ok(())
            }
            Ok(Err(_)) => Err(self.closed_error(msg.into_message())),
            Err(_) => Err(WriteError::Timeout {
                peer: self.shared.info.node_id.clone(),
                after: self.shared.cfg.write_timeout,
                message: Box::new(msg.into_message()),
            }),
        }
    }

    /// Sends a request and waits for the message whose `parent_msg_id` is the
    /// request's id. The waiter is registered before the request is queued,
    /// so a fast response cannot be missed.
    pub async fn request(&self, mut msg: Message, timeout_after: Duration) -> Result<Message, RequestError> {
        let deadline = Instant::now() + timeout_after;
        if msg.header.msg_id.is_empty() {
            msg.header.msg_id = new_msg_id();
        }
        let id = msg.header.msg_id.clone();
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.shared.pending.lock().unwrap_or_else(|p| p.into_inner());
            if pending.contains_key(id.as_str()) {
                return Err(RequestError::DuplicateId(id));
            }
            pending.insert(id.clone(), tx);
            self.shared.pending_count.fetch_add(1, Ordering::AcqRel);
        }
        let _guard = PendingGuard { shared: &self.shared, id: id.clone() };
        self.write_until(Outgoing::Message(msg), deadline).await?;
        match timeout_at(deadline, rx).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(_)) => {
                Err(RequestError::Closed { msg_id: id, reason: self.shared.reason().unwrap_or(CloseReason::Local) })
            }
            Err(_) => Err(RequestError::Timeout { msg_id: id, after: timeout_after }),
        }
    }

    /// Closes the connection; queued messages not yet written are dropped.
    pub fn close(&self) {
        self.shared.close(CloseReason::Local);
    }

    /// True once the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.closing()
    }

    /// Waits until the connection ends and says why.
    pub async fn closed(&self) -> CloseReason {
        self.shared.cancel.cancelled().await;
        self.shared.reason().unwrap_or(CloseReason::Local)
    }

    /// Opens a stream session with `header` (read by the peer's
    /// application); fails at once when the peer did not agree on sessions
    /// or the connection has ended ([`crate::stream`]).
    pub async fn open_stream(&self, header: bytes::Bytes) -> Result<Stream, StreamError> {
        match &self.shared.quic {
            Some(q) => q.open(header).await,
            None => self.shared.mux.open(header).await,
        }
    }

    /// Stream sessions open on this connection now.
    pub fn open_streams(&self) -> usize {
        match &self.shared.quic {
            Some(q) => q.open_count(),
            None => self.shared.mux.open_count(),
        }
    }

    /// Messages queued and not yet written.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

struct PendingGuard<'a> {
    shared: &'a ConnState,
    id: Text,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        // Still there if no response came (timeout, cancellation, write error).
        self.shared.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(self.id.as_str());
        self.shared.pending_count.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ConnRx {
    /// Who is at the other end.
    pub fn peer(&self) -> &PeerInfo {
        &self.shared.info
    }

    /// The next message; `None` once the connection has ended and every
    /// received message has been taken.
    pub async fn recv(&mut self) -> Option<Message> {
        self.incoming.recv().await
    }

    /// Starts accepting the stream sessions the peer opens: `None` when
    /// sessions were not agreed or they are already being taken (and on
    /// QUIC at the server, which only opens them). Until this is called,
    /// every session the peer opens is reset.
    pub fn incoming_streams(&self) -> Option<IncomingStreams> {
        match &self.shared.quic {
            Some(q) => q.incoming(),
            None => self.shared.mux.incoming(),
        }
    }

    /// Why the connection ended, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.shared.reason()
    }

    /// How long since anything arrived (a message, a WebSocket ping or
    /// pong; on QUIC any datagram, keep-alives included, as seen when this
    /// was last asked); from the connection's start if nothing has.
    pub fn idle_for(&self) -> Duration {
        let now = self.shared.born.elapsed();
        if let Some(c) = &self.shared.quic_conn {
            let seen = c.stats().udp_rx.datagrams;
            if self.shared.quic_datagrams.swap(seen, Ordering::Relaxed) != seen {
                let ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
                self.shared.last_received_ms.fetch_max(ms, Ordering::Relaxed);
            }
        }
        let last = Duration::from_millis(self.shared.last_received_ms.load(Ordering::Relaxed));
        now.saturating_sub(last)
    }
}

/// What a transport's reader produced.
pub(crate) enum ReadEvent {
    /// One encoded message (the transport's own buffer, not a copy).
    Data(bytes::Bytes),
    /// Transport-level liveness (a WebSocket ping or pong); feeds the deadline.
    Alive,
    /// The transport ended, and why.
    End(CloseReason),
}

/// The reading side of a transport: yields whole frames.
pub(crate) trait FrameRead: Send + 'static {
    fn next(&mut self) -> impl std::future::Future<Output = ReadEvent> + Send;
}

/// The writing side of a transport.
pub(crate) trait FrameWrite: Send + 'static {
    /// Queues one encoded message (its JSON, UTF-8, plus the newline) for
    /// the next flush.
    fn feed(&mut self, line: &[u8]) -> impl std::future::Future<Output = Result<(), CloseReason>> + Send;
    /// Queues one stream session frame (binary) for the next flush.
    fn feed_binary(&mut self, frame: bytes::Bytes)
    -> impl std::future::Future<Output = Result<(), CloseReason>> + Send;
    /// Writes everything fed.
    fn flush(&mut self) -> impl std::future::Future<Output = Result<(), CloseReason>> + Send;
    /// Sends a transport-level ping, if the transport has one.
    fn ping(&mut self) -> impl std::future::Future<Output = Result<(), CloseReason>> + Send;
    /// Ends the transport politely.
    fn close(&mut self) -> impl std::future::Future<Output = ()> + Send;
    /// Frees what is kept between flushes: nothing more waits.
    fn release(&mut self) {}
}

/// How a connection carries its stream sessions.
pub(crate) enum Sessions {
    /// As binary frames among the messages (WebSocket).
    Framed,
    /// On QUIC streams of their own (`None`: not agreed); a session frame
    /// on the message stream breaks the protocol. With the QUIC connection,
    /// whose datagrams show the peer's liveness.
    Quic(quinn::Connection, Option<Arc<QuicSessions>>),
}

/// Starts the reader and writer tasks of a connection over any transport.
pub(crate) fn spawn_conn<R: FrameRead, W: FrameWrite>(
    reader: R,
    writer: W,
    info: PeerInfo,
    cfg: ConnConfig,
    client: bool,
    sessions: Sessions,
) -> Connection {
    let (queue_tx, queue_rx) = queue::channel(cfg.send_queue);
    let (in_tx, in_rx) = queue::channel(cfg.recv_queue);
    let (frames_tx, frames_rx) = queue::channel(stream::FRAME_QUEUE);
    let cancel = CancellationToken::new();
    let (framed, quic, quic_conn) = match sessions {
        Sessions::Framed => (info.agreed(stream::FEATURE), None, None),
        Sessions::Quic(c, q) => (false, q, Some(c)),
    };
    let mux = Mux::new(frames_tx, framed, client, cancel.clone(), cfg.stream_stats.clone());
    let shared = Arc::new(ConnState {
        info,
        cfg,
        cancel,
        closed: std::sync::atomic::AtomicBool::new(false),
        reason: Mutex::new(None),
        pending: Mutex::new(HashMap::new()),
        pending_count: AtomicUsize::new(0),
        born: tokio::time::Instant::now(),
        last_received_ms: std::sync::atomic::AtomicU64::new(0),
        quic_datagrams: std::sync::atomic::AtomicU64::new(0),
        quic_conn,
        mux,
        quic,
    });
    let span = tracing::info_span!("conn", node = %shared.info.node_id, remote = %shared.info.remote_addr);
    let tx = ConnTx { shared: shared.clone(), queue: queue_tx };
    tokio::spawn(write_loop(writer, queue_rx, frames_rx, shared.clone()).instrument(span.clone()));
    tokio::spawn(read_loop(reader, in_tx, tx.clone(), shared.clone()).instrument(span));
    Connection { tx, rx: ConnRx { shared, incoming: in_rx } }
}

/// A message as one frame carries it: its JSON and a trailing newline, as
/// Go's `WriteJSON` writes it.
pub(crate) fn wire_line(m: &Message) -> String {
    let mut text = m.encode_string();
    text.push('\n');
    text
}

/// Most messages written per flush.
const WRITE_BATCH: usize = 64;

/// Most stream session bytes written in one flush after the messages of that
/// flush, so that a message never waits behind more than this much session
/// data.
const STREAM_BYTES_PER_FLUSH: usize = 256 * 1024;

async fn write_loop<W: FrameWrite>(
    mut writer: W,
    mut queue: queue::Receiver<Outgoing>,
    mut frames: queue::Receiver<bytes::Bytes>,
    shared: Arc<ConnState>,
) {
    let write_timeout = shared.cfg.write_timeout;
    let mut ping = shared.cfg.ping_interval.map(|d| tokio::time::interval_at(Instant::now() + d, d));
    // Allocated while messages flow, freed when the queue runs dry: an idle
    // connection holds no batch, and no encoding room.
    let mut batch = Vec::new();
    let mut line = Vec::new();
    let mut owed = Vec::new();
    let control = shared.mux.control();
    let cancelled = shared.cancel.clone().cancelled_owned();
    tokio::pin!(cancelled);
    watch(cancelled.as_mut()).await;
    loop {
        // Messages first; session frames when no message waits.
        let first_frame = tokio::select! {
            biased;
            () = once_closing(&shared, cancelled.as_mut()) => break,
            n = queue.recv_many(&mut batch, WRITE_BATCH) => {
                if n == 0 {
                    break;
                }
                None
            }
            () = control.ready() => None,
            f = frames.recv() => f,
            _ = async { match ping.as_mut() { Some(p) => { p.tick().await; } None => std::future::pending().await } } => {
                match timeout(write_timeout, Box::pin(writer.ping())).await {
                    Ok(Ok(())) => continue,
                    Ok(Err(reason)) => shared.close(reason),
                    Err(_) => shared.close(CloseReason::WriteTimeout(write_timeout)),
                }
                break;
            }
        };
        if control.overflowed() {
            shared.close(CloseReason::Transport(
                "the peer is owed more stream session resets than it reads; closing instead of dropping one".into(),
            ));
            break;
        }
        let mut last = false;
        let write = async {
            for out in batch.drain(..) {
                last |= matches!(out, Outgoing::Last(_));
                let m = out.into_message();
                line.clear();
                line.reserve(m.encoded_len_hint() + 1);
                m.encode_into(&mut line);
                line.push(b'\n');
                writer.feed(&line).await?;
                if last {
                    return writer.flush().await;
                }
            }
            // RESET and CREDIT go ahead of queued session frames (a RESET
            // still after its own session's), and again after them.
            control.take(&mut owed);
            for f in owed.drain(..) {
                writer.feed_binary(f).await?;
            }
            let mut budget = STREAM_BYTES_PER_FLUSH;
            let mut next = first_frame;
            loop {
                let f = match next.take() {
                    Some(f) => f,
                    None if budget > 0 => match frames.try_recv() {
                        Some(f) => f,
                        None => break,
                    },
                    None => break,
                };
                control.taken(&f);
                budget = budget.saturating_sub(f.len());
                writer.feed_binary(f).await?;
            }
            control.take(&mut owed);
            for f in owed.drain(..) {
                writer.feed_binary(f).await?;
            }
            writer.flush().await
        };
        // Boxed (one allocation a flush) so that the task, idle, does not
        // hold room for a write in progress.
        match timeout(write_timeout, Box::pin(write)).await {
            Ok(Ok(())) if last => {
                batch.clear();
                shared.close(CloseReason::Local);
                break;
            }
            Ok(Ok(())) => {
                if queue.is_empty() {
                    batch = Vec::new();
                    line = Vec::new();
                    writer.release();
                }
            }
            Ok(Err(reason)) => {
                shared.close(reason);
                break;
            }
            Err(_) => {
                shared.close(CloseReason::WriteTimeout(write_timeout));
                break;
            }
        }
    }
    // Best effort: tell the peer, but do not wait on a peer that is not reading.
    let _ = timeout(Duration::from_secs(1), Box::pin(writer.close())).await;
}

async fn read_loop<R: FrameRead>(mut reader: R, incoming: queue::Sender<Message>, tx: ConnTx, shared: Arc<ConnState>) {
    let read_timeout = shared.cfg.read_timeout;
    // One timer for the connection's life rather than one per read (each
    // registered with the runtime's timer wheel and taken out again, for
    // every message): a read must end within `read_timeout` of its start,
    // and the timer, armed for an earlier read, is moved only when it fires
    // early — at most once per `read_timeout` while messages flow.
    let cancelled = shared.cancel.clone().cancelled_owned();
    let timer = tokio::time::sleep(read_timeout.unwrap_or(Duration::MAX / 4));
    tokio::pin!(cancelled, timer);
    watch(cancelled.as_mut()).await;
    loop {
        let started = Instant::now();
        let next = {
            let read = reader.next();
            tokio::pin!(read);
            loop {
                tokio::select! {
                    biased;
                    () = once_closing(&shared, cancelled.as_mut()) => break None,
                    n = &mut read => break Some(n),
                    () = &mut timer, if read_timeout.is_some() => {
                        let d = read_timeout.unwrap_or_default();
                        if started.elapsed() >= d {
                            break Some(ReadEvent::End(CloseReason::ReadTimeout(d)));
                        }
                        timer.as_mut().reset(started + d);
                    }
                }
            }
        };
        let Some(next) = next else { break };
        if !matches!(next, ReadEvent::End(_)) {
            let ms = u64::try_from(shared.born.elapsed().as_millis()).unwrap_or(u64::MAX);
            shared.last_received_ms.store(ms, Ordering::Relaxed);
        }
        let bytes = match next {
            ReadEvent::End(reason) => {
                shared.close(reason);
                break;
            }
            ReadEvent::Alive => continue,
            ReadEvent::Data(b) => b,
        };
        if stream::is_stream_frame(&bytes) {
            if let Err(e) = shared.mux.on_frame(bytes) {
                shared.close(CloseReason::Malformed(e));
                break;
            }
            continue;
        }
        let msg = match Message::decode(&bytes) {
            Ok(m) => m,
            Err(e) => {
                shared.close(CloseReason::Malformed(e.to_string()));
                break;
            }
        };
        if is_control(&msg) {
            // viaduct control messages are answered with "ack" and not passed on.
            let _ = tx.try_write(msg.response(Content::string("ack")));
            continue;
        }
        let Some(msg) = shared.take_response(msg) else { continue };
        tokio::select! {
            biased;
            () = once_closing(&shared, cancelled.as_mut()) => break,
            r = incoming.send(msg) => if r.is_err() {
                // Nobody reads this connection any more.
                shared.close(CloseReason::Local);
                break;
            },
        }
    }
}

/// Registers the calling task with the connection's token by polling its
/// wait once: the token then wakes the task when the connection closes. The
/// task's loops look at the wait again only through [`once_closing`]: each
/// poll of a token's wait takes the token's lock, which a connection's
/// reader and writer share across the runtime's threads (a lock per message
/// and per pass, on a cache line the other thread had last).
async fn watch(mut cancelled: Pin<&mut WaitForCancellationFutureOwned>) {
    std::future::poll_fn(|cx| {
        let _ = cancelled.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await;
}

/// The token's wait, polled only once the connection is closing (`closed`
/// is set before the token fires). Pending before that without registering
/// anything: [`watch`] registered the task, which the token wakes.
fn once_closing<'a>(
    shared: &'a ConnState,
    mut cancelled: Pin<&'a mut WaitForCancellationFutureOwned>,
) -> impl Future<Output = ()> + 'a {
    std::future::poll_fn(move |cx| if shared.closing() { cancelled.as_mut().poll(cx) } else { Poll::Pending })
}

fn is_control(m: &Message) -> bool {
    matches!(m.route.operation.as_str(), op::VIADUCT_CONFIG | op::VIADUCT_PING | op::VIADUCT_PONG)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A transport whose reads never end, flagging when each side is dropped.
    struct Silent(Arc<AtomicBool>);

    impl Drop for Silent {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }

    impl FrameRead for Silent {
        async fn next(&mut self) -> ReadEvent {
            std::future::pending().await
        }
    }

    impl FrameWrite for Silent {
        async fn feed(&mut self, _: &[u8]) -> Result<(), CloseReason> {
            Ok(())
        }
        async fn feed_binary(&mut self, _: bytes::Bytes) -> Result<(), CloseReason> {
            Ok(())
        }
        async fn flush(&mut self) -> Result<(), CloseReason> {
            Ok(())
        }
        async fn ping(&mut self) -> Result<(), CloseReason> {
            Ok(())
        }
        async fn close(&mut self) {}
    }

    fn info() -> PeerInfo {
        let addr: SocketAddr = "127.0.0.1:1".parse().expect("address");
        PeerInfo {
            node_id: "edge-1".into(),
            project_id: "default".into(),
            cert: None,
            remote_addr: addr,
            local_addr: addr,
            protocol: crate::Protocol::WebSocket,
            resumed: false,
            ping_keepalive: false,
            features: Vec::new(),
        }
    }

    /// Nothing but the close can end either task here (no read deadline, no
    /// pings, a peer that never closes): the reader, blocked in a read, and
    /// the writer, after messages and idle, both end when the connection is
    /// closed, whether it was busy or idle before.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_local_close_ends_both_tasks_of_a_busy_or_an_idle_connection() {
        for busy in [false, true] {
            let (read_gone, write_gone) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
            let cfg = ConnConfig { read_timeout: None, ping_interval: None, ..ConnConfig::default() };
            let mut conn =
                spawn_conn(Silent(read_gone.clone()), Silent(write_gone.clone()), info(), cfg, false, Sessions::Framed);
            if busy {
                for i in 0..100 {
                    conn.tx
                        .write(Message::new().with_route("edgehub", "", format!("r{i}"), "update"))
                        .await
                        .expect("write");
                }
            }
            tokio::task::yield_now().await;
            conn.tx.close();
            let ended = tokio::time::timeout(Duration::from_secs(10), async {
                while !(read_gone.load(Ordering::Acquire) && write_gone.load(Ordering::Acquire)) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
            assert!(ended.is_ok(), "busy {busy}: reader ended {read_gone:?}, writer ended {write_gone:?}");
            assert!(conn.rx.recv().await.is_none(), "busy {busy}: nothing more comes in");
        }
    }
}
