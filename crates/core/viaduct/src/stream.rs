//! Stream sessions: byte pipes multiplexed over a connection, for what does
//! not fit the message model — a container's log followed, an exec's stdin
//! and stdout, a forwarded port (docs/protocol.md, "Stream sessions").
//!
//! Both ends must have agreed the [`FEATURE`] at the handshake (so a KubeEdge
//! peer never sees a session). One end opens a session with a header (what
//! it is for, read by the applications at both ends); the other end takes
//! it from [`IncomingStreams`] if it asked for them, and resets it
//! otherwise. A session carries frames both ways, each delivered whole and
//! in order, until each end has finished its direction or either resets it
//! (with a reason the other end reads).
//!
//! Two carriers give the same API:
//!
//! - **Frames on the connection** (`framed.rs`): WebSocket, and the
//!   in-memory [`pair`]. Each session frame is one binary frame of the
//!   connection, with per-session credit for flow control.
//! - **One QUIC stream per session** (`quic.rs`): on a QUIC connection, each
//!   session is a bidirectional QUIC stream that the cloud (the QUIC
//!   server) opens; QUIC's own flow control and stream states carry the
//!   window, FINISH and RESET.
//!
//! Either way, an end may have at most [`WINDOW`] bytes of a session's data
//! in flight that the other end's application has not taken, so a session
//! whose reader is stuck stops its sender only, never the connection's
//! messages or another session.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod framed;
mod quic;

pub(crate) use framed::{FRAME_QUEUE, Mux, is_stream_frame};
pub(crate) use quic::{PEER_STREAMS, QuicSessions};

/// The feature name both ends must agree on ([`crate::features`]).
pub const FEATURE: &str = "streams";
/// Bytes of data an end may send that the receiving application has not
/// taken yet.
pub const WINDOW: u32 = 256 * 1024;
/// Largest DATA payload.
pub const MAX_DATA: usize = 32 * 1024;
/// Largest OPEN header.
pub const MAX_HEADER: usize = 16 * 1024;
/// Most sessions open at once on one connection.
pub const MAX_SESSIONS: usize = 256;
/// Session opens waiting to be taken from [`IncomingStreams`]; more are reset.
pub const ACCEPT_QUEUE: usize = 32;
/// Longest reset reason kept.
const MAX_REASON: usize = 1024;

/// The longest prefix of `reason` that is at most [`MAX_REASON`] bytes.
fn clip(reason: &str) -> &str {
    if reason.len() <= MAX_REASON {
        return reason;
    }
    let mut end = MAX_REASON;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// Why a session operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The peer did not agree on sessions at the handshake (a KubeEdge peer,
    /// or an older edgehive).
    #[error("the peer does not support stream sessions")]
    NotAgreed,
    /// Too many sessions are open on this connection.
    #[error("too many stream sessions open on this connection (at most {0})")]
    TooMany(usize),
    /// A frame or header over its limit.
    #[error("{what} of {len} bytes is over the limit of {max}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The session was reset, by either end.
    #[error("stream session reset: {0}")]
    Reset(String),
    /// The connection under the session ended.
    #[error("connection closed: {0}")]
    Closed(String),
    /// This end already finished its direction.
    #[error("stream session already finished sending")]
    Finished,
}

/// Counters of sessions, for an operator.
#[derive(Debug, Default)]
pub struct StreamStats {
    /// Sessions opened (by either end).
    pub opened: Counter,
    /// Sessions ended.
    pub closed: Counter,
    /// Sessions reset (a subset of `closed`).
    pub reset: Counter,
    /// Sessions open now.
    pub open: Gauge,
    /// Data bytes sent.
    pub bytes_sent: Counter,
    /// Data bytes received.
    pub bytes_received: Counter,
}

impl StreamStats {
    /// Registers the counters under `prefix` (e.g. `cloudhub_streams`).
    pub fn register(self: &Arc<Self>, registry: &mut Registry, prefix: &str) {
        let r = registry.sub_registry_with_prefix(prefix);
        r.register("opened", "Stream sessions opened", self.opened.clone());
        r.register("closed", "Stream sessions ended", self.closed.clone());
        r.register("reset", "Stream sessions that ended in a reset", self.reset.clone());
        r.register("open", "Stream sessions open now", self.open.clone());
        r.register("sent_bytes", "Stream session data bytes sent", self.bytes_sent.clone());
        r.register("received_bytes", "Stream session data bytes received", self.bytes_received.clone());
    }
}

/// What carries one session.
enum Carrier {
    /// Frames on the connection.
    Framed { mux: Arc<Mux>, session: Arc<framed::Session> },
    /// A QUIC stream of its own.
    Quic(Arc<quic::Session>),
}

/// What the two halves of a session share: its header, and the carrier.
/// When both halves are gone the session ends, reset unless both
/// directions finished, and is counted.
struct Guard {
    header: Bytes,
    id: u32,
    stats: Option<Arc<StreamStats>>,
    carrier: Carrier,
}

impl Guard {
    /// A session that has just opened, counted as such.
    fn start(header: Bytes, id: u32, stats: Option<Arc<StreamStats>>, carrier: Carrier) -> Arc<Guard> {
        if let Some(s) = &stats {
            s.opened.inc();
            s.open.inc();
        }
        Arc::new(Guard { header, id, stats, carrier })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let clean = match &self.carrier {
            Carrier::Framed { mux, session } => mux.release(session),
            Carrier::Quic(s) => s.release(),
        };
        if let Some(st) = &self.stats {
            st.closed.inc();
            st.open.dec();
            if !clean {
                st.reset.inc();
            }
        }
    }
}

/// A session: its header and its two halves.
pub struct Stream {
    tx: StreamTx,
    rx: StreamRx,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").field("id", &self.id()).finish_non_exhaustive()
    }
}

impl Stream {
    fn new(guard: Arc<Guard>, rx: RxState) -> Stream {
        Stream { tx: StreamTx { guard: Arc::clone(&guard) }, rx: StreamRx { guard, state: rx } }
    }

    /// The header the opener sent.
    pub fn header(&self) -> &Bytes {
        &self.tx.guard.header
    }

    /// The session's number on its connection.
    pub fn id(&self) -> u32 {
        self.tx.guard.id
    }

    /// Splits into the sending and receiving halves; the session lasts while
    /// either is held.
    pub fn split(self) -> (StreamTx, StreamRx) {
        (self.tx, self.rx)
    }

    /// Joins the halves [`Stream::split`] gave (of one session) again; the
    /// header is the session's.
    pub fn join(tx: StreamTx, rx: StreamRx) -> Stream {
        Stream { tx, rx }
    }
}

/// Two ends of one session joined in memory, for an adapter that serves a
/// session itself instead of a peer across a connection (a bridge to
/// another tunnel): `opener` is the end that opened it with `header`, and
/// `acceptor` the end that answers. Flow control and limits are those of a
/// connection's sessions; the pair ends when both of its ends are gone.
pub fn pair(header: Bytes) -> Result<(Stream, Stream), StreamError> {
    framed::pair(header)
}

/// The sending half of a session.
pub struct StreamTx {
    guard: Arc<Guard>,
}

impl fmt::Debug for StreamTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamTx").field("id", &self.guard.id).finish_non_exhaustive()
    }
}

impl StreamTx {
    /// Sends one frame of data (at most [`MAX_DATA`] bytes), waiting while
    /// the peer's application has [`WINDOW`] bytes not yet taken. Ends with
    /// an error when the session is reset or the connection closes.
    pub async fn send(&mut self, data: Bytes) -> Result<(), StreamError> {
        if data.len() > MAX_DATA {
            return Err(StreamError::TooLarge { what: "stream data frame", len: data.len(), max: MAX_DATA });
        }
        // Nothing to carry (and the peer refuses empty frames).
        if data.is_empty() {
            return Ok(());
        }
        let len = data.len() as u64;
        match &self.guard.carrier {
            Carrier::Framed { mux, session } => mux.send(session, data).await?,
            Carrier::Quic(s) => s.send(data).await?,
        }
        if let Some(st) = &self.guard.stats {
            st.bytes_sent.inc_by(len);
        }
        Ok(())
    }

    /// Ends this direction: the peer reads what was sent, then the end.
    pub async fn finish(&mut self) -> Result<(), StreamError> {
        match &self.guard.carrier {
            Carrier::Framed { mux, session } => mux.finish(session).await,
            Carrier::Quic(s) => s.finish().await,
        }
    }

    /// Ends both directions at once, telling the peer why.
    pub fn reset(&self, reason: &str) {
        match &self.guard.carrier {
            Carrier::Framed { mux, session } => mux.reset_session(session, reason, true),
            Carrier::Quic(s) => s.reset(reason),
        }
    }

    /// Whether the session has been reset (or its connection closed).
    pub fn is_reset(&self) -> bool {
        match &self.guard.carrier {
            Carrier::Framed { session, .. } => session.ended.load(Ordering::Acquire),
            Carrier::Quic(s) => s.is_reset(),
        }
    }

    /// Waits until the session is reset or its connection closes.
    pub async fn reset_by_peer(&self) {
        match &self.guard.carrier {
            Carrier::Framed { mux, session } => mux.reset_by_peer(session).await,
            Carrier::Quic(s) => s.reset_by_peer().await,
        }
    }
}

/// What the receiving half keeps between calls.
enum RxState {
    Framed(framed::Inbox),
    Quic(quic::FrameReader),
}

/// The receiving half of a session.
pub struct StreamRx {
    guard: Arc<Guard>,
    state: RxState,
}

impl fmt::Debug for StreamRx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamRx").field("id", &self.guard.id).finish_non_exhaustive()
    }
}

impl StreamRx {
    /// The next frame; `Ok(None)` once the peer finished its direction and
    /// everything before it was taken.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, StreamError> {
        match (&self.guard.carrier, &mut self.state) {
            (Carrier::Framed { mux, session }, RxState::Framed(inbox)) => mux.recv(session, inbox).await,
            (Carrier::Quic(s), RxState::Quic(reader)) => s.recv(reader).await,
            _ => Err(StreamError::Closed("stream session halves of different carriers".into())),
        }
    }
}

/// Sessions the peer opens, for the end that accepts them.
#[derive(Debug)]
pub struct IncomingStreams {
    rx: mpsc::Receiver<Stream>,
}

impl IncomingStreams {
    /// The next session the peer opened; `None` once the connection ended.
    pub async fn accept(&mut self) -> Option<Stream> {
        self.rx.recv().await
    }
}

/// The acceptor's end of [`IncomingStreams`], shared by the carriers.
fn accept_queue() -> (mpsc::Sender<Stream>, IncomingStreams) {
    let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
    (tx, IncomingStreams { rx })
}

/// Waits for either token (a session's end or its connection's).
async fn either(a: &CancellationToken, b: &CancellationToken) {
    tokio::select! {
        () = a.cancelled() => {}
        () = b.cancelled() => {}
    }
}
