//! Stream sessions: byte pipes multiplexed over a connection, for what does
//! not fit the message model — a container's log followed, an exec's stdin
//! and stdout, a forwarded port (docs/protocol.md, "Stream sessions").
//!
//! Both ends must have agreed the [`FEATURE`] at the handshake (so a KubeEdge
//! peer never sees a session frame). One end opens a session with a header
//! (what it is for, read by the applications at both ends); the other end
//! takes it from [`IncomingStreams`] if it asked for them, and resets it
//! otherwise. A session carries frames both ways, each delivered whole and
//! in order, until each end has finished its direction or either resets it.
//!
//! On the wire a session frame is one binary frame of the connection
//! (WebSocket: a binary message; QUIC: a length-prefixed frame on the
//! message stream) whose first byte is 0, which no message (JSON) starts
//! with:
//!
//! ```text
//! 0x00 | kind (1 byte) | session id (u32, big-endian) | payload
//! kind 1 OPEN    payload: the header (at most MAX_HEADER bytes)
//!      2 DATA    payload: one frame of data (at most MAX_DATA bytes)
//!      3 CREDIT  payload: u32, bytes the receiver has taken since its last credit
//!      4 FINISH  no payload: the sender's direction has ended
//!      5 RESET   payload: why (UTF-8): both directions end at once
//! ```
//!
//! Flow control is per session: an end may have at most [`WINDOW`] bytes of
//! data in flight that the other end's application has not taken; the
//! receiver returns credit as its application reads. So a session whose
//! reader is stuck stops its sender only, never the connection's messages or
//! another session; and the reader of the connection never waits on a
//! session (a peer sending past its credit gets the session reset). Session
//! frames wait in their own bounded queue, written after the messages queued
//! with them, so object deliveries and ACKs go first.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

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
/// Session frames waiting for the connection's writer.
pub(crate) const FRAME_QUEUE: usize = 64;
/// Longest reset reason kept.
const MAX_REASON: usize = 1024;

const MARK: u8 = 0;
const OPEN: u8 = 1;
const DATA: u8 = 2;
const CREDIT: u8 = 3;
const FINISH: u8 = 4;
const RESET: u8 = 5;
const FRAME_HEAD: usize = 6;

/// Whether a received frame is a session frame (not a message).
pub(crate) fn is_stream_frame(b: &[u8]) -> bool {
    b.first() == Some(&MARK)
}

fn frame(kind: u8, id: u32, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(FRAME_HEAD + payload.len());
    b.put_u8(MARK);
    b.put_u8(kind);
    b.put_u32(id);
    b.put_slice(payload);
    b.freeze()
}

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

/// What the connection's reader hands a session.
#[derive(Debug)]
enum Inbound {
    Data(Bytes),
    Finish,
    Reset(String),
}

/// One session's state, shared by the mux and the session's two halves.
struct Session {
    id: u32,
    inbound: mpsc::UnboundedSender<Inbound>,
    /// Data received and not yet taken by the application (bounded by the
    /// credit the peer was given: WINDOW).
    buffered: AtomicUsize,
    /// Bytes this end may still send.
    credit: AtomicI64,
    credit_notify: Notify,
    /// Set once either end reset the session, or the connection ended.
    ended: AtomicBool,
    end_reason: Mutex<Option<String>>,
    sent_finish: AtomicBool,
    got_finish: AtomicBool,
}

impl Session {
    fn new(id: u32, inbound: mpsc::UnboundedSender<Inbound>) -> Session {
        Session {
            id,
            inbound,
            buffered: AtomicUsize::new(0),
            credit: AtomicI64::new(i64::from(WINDOW)),
            credit_notify: Notify::new(),
            ended: AtomicBool::new(false),
            end_reason: Mutex::new(None),
            sent_finish: AtomicBool::new(false),
            got_finish: AtomicBool::new(false),
        }
    }

    /// Ends the session (reset or connection gone): readers and senders wake.
    fn end(&self, reason: String) {
        {
            let mut r = self.end_reason.lock().unwrap_or_else(|p| p.into_inner());
            if r.is_none() {
                *r = Some(reason.clone());
            }
        }
        self.ended.store(true, Ordering::Release);
        let _ = self.inbound.send(Inbound::Reset(reason));
        self.credit_notify.notify_one();
    }

    fn end_reason(&self) -> String {
        self.end_reason.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_else(|| "reset".into())
    }
}

/// The sessions of one connection.
pub(crate) struct Mux {
    sessions: Mutex<HashMap<u32, Arc<Session>>>,
    out: mpsc::Sender<Bytes>,
    acceptor: Mutex<Option<mpsc::Sender<Stream>>>,
    next_id: AtomicU32,
    /// Whether the peer agreed on sessions.
    agreed: bool,
    cancel: CancellationToken,
    closed: Mutex<Option<String>>,
    stats: Option<Arc<StreamStats>>,
}

impl fmt::Debug for Mux {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mux").field("agreed", &self.agreed).finish_non_exhaustive()
    }
}

impl Mux {
    /// Sessions of a connection; `client` ends number theirs odd, servers even.
    pub(crate) fn new(
        out: mpsc::Sender<Bytes>,
        agreed: bool,
        client: bool,
        cancel: CancellationToken,
        stats: Option<Arc<StreamStats>>,
    ) -> Arc<Mux> {
        Arc::new(Mux {
            sessions: Mutex::new(HashMap::new()),
            out,
            acceptor: Mutex::new(None),
            next_id: AtomicU32::new(if client { 1 } else { 2 }),
            agreed,
            cancel,
            closed: Mutex::new(None),
            stats,
        })
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn closed_reason(&self) -> Option<String> {
        self.closed.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether `id` was numbered by the peer (the opener's parity).
    fn peer_numbered(&self, id: u32) -> bool {
        // Our own ids started at 1 (client) or 2 (server) and step by 2.
        let ours_odd = self.next_id.load(Ordering::Relaxed) % 2 == 1;
        (id % 2 == 1) != ours_odd
    }

    /// Queues a control frame without waiting (RESET, CREDIT of a session
    /// being dropped); dropped when the writer is this far behind, which
    /// only happens while the connection is failing.
    fn send_now(&self, f: Bytes) {
        let _ = self.out.try_send(f);
    }

    async fn send_frame(&self, f: Bytes) -> Result<(), StreamError> {
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(StreamError::Closed(self.closed_reason().unwrap_or_else(|| "closed".into()))),
            r = self.out.send(f) => r.map_err(|_| StreamError::Closed(self.closed_reason().unwrap_or_else(|| "closed".into()))),
        }
    }

    fn register(self: &Arc<Self>, id: u32, header: Bytes) -> Result<Stream, StreamError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let session = Arc::new(Session::new(id, tx));
        {
            let mut map = self.sessions();
            if map.len() >= MAX_SESSIONS {
                return Err(StreamError::TooMany(MAX_SESSIONS));
            }
            map.insert(id, Arc::clone(&session));
        }
        if let Some(s) = &self.stats {
            s.opened.inc();
            s.open.inc();
        }
        let guard = Arc::new(Guard { mux: Arc::clone(self), session: Arc::clone(&session) });
        Ok(Stream {
            header,
            tx: StreamTx { guard: Arc::clone(&guard) },
            rx: StreamRx { guard, inbound: rx, taken_since_credit: 0 },
        })
    }

    /// Opens a session with `header`.
    pub(crate) async fn open(self: &Arc<Self>, header: Bytes) -> Result<Stream, StreamError> {
        if !self.agreed {
            return Err(StreamError::NotAgreed);
        }
        if let Some(reason) = self.closed_reason() {
            return Err(StreamError::Closed(reason));
        }
        if header.len() > MAX_HEADER {
            return Err(StreamError::TooLarge { what: "session header", len: header.len(), max: MAX_HEADER });
        }
        let id = self.next_id.fetch_add(2, Ordering::Relaxed);
        let stream = self.register(id, header.clone())?;
        self.send_frame(frame(OPEN, id, &header)).await?;
        Ok(stream)
    }

    /// Starts taking the peer's session opens (at most once; later calls get
    /// `None`).
    pub(crate) fn incoming(&self) -> Option<IncomingStreams> {
        let mut acceptor = self.acceptor.lock().unwrap_or_else(|p| p.into_inner());
        if acceptor.is_some() || !self.agreed {
            return None;
        }
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        *acceptor = Some(tx);
        Some(IncomingStreams { rx })
    }

    /// Handles one session frame from the connection's reader; never waits.
    /// An error is a frame that breaks the protocol, which ends the
    /// connection.
    pub(crate) fn on_frame(self: &Arc<Self>, b: Bytes) -> Result<(), String> {
        if !self.agreed {
            return Err("a stream session frame, but sessions were not agreed".into());
        }
        if b.len() < FRAME_HEAD {
            return Err(format!("stream session frame of {} bytes is shorter than its header", b.len()));
        }
        let kind = b[1];
        let id = u32::from_be_bytes([b[2], b[3], b[4], b[5]]);
        let payload = b.slice(FRAME_HEAD..);
        let session = self.sessions().get(&id).cloned();
        match kind {
            OPEN => self.on_open(id, payload),
            DATA => {
                let Some(s) = session else {
                    self.send_now(frame(RESET, id, b"no such stream session"));
                    return Ok(());
                };
                if payload.len() > MAX_DATA
                    || s.buffered.load(Ordering::Acquire) + payload.len() > WINDOW as usize
                    || s.got_finish.load(Ordering::Acquire)
                {
                    let why = if payload.len() > MAX_DATA {
                        format!("data frame of {} bytes is over the limit of {MAX_DATA}", payload.len())
                    } else if s.got_finish.load(Ordering::Acquire) {
                        "data after the end of the stream".to_string()
                    } else {
                        "peer sent past its credit".to_string()
                    };
                    tracing::warn!(session = id, reason = %why, "stream session reset: protocol violation");
                    self.reset_session(&s, &why, true);
                    return Ok(());
                }
                s.buffered.fetch_add(payload.len(), Ordering::AcqRel);
                if let Some(st) = &self.stats {
                    st.bytes_received.inc_by(payload.len() as u64);
                }
                let _ = s.inbound.send(Inbound::Data(payload));
                Ok(())
            }
            CREDIT => {
                if payload.len() != 4 {
                    return Err(format!("stream credit frame with a payload of {} bytes", payload.len()));
                }
                if let Some(s) = session {
                    let n = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                    let now = s.credit.fetch_add(i64::from(n), Ordering::AcqRel) + i64::from(n);
                    if now > i64::from(WINDOW) {
                        tracing::warn!(session = id, "stream session reset: credit past the window");
                        self.reset_session(&s, "credit past the window", true);
                        return Ok(());
                    }
                    s.credit_notify.notify_one();
                }
                Ok(())
            }
            FINISH => {
                if let Some(s) = session
                    && !s.got_finish.swap(true, Ordering::AcqRel)
                {
                    let _ = s.inbound.send(Inbound::Finish);
                }
                Ok(())
            }
            RESET => {
                if let Some(s) = session {
                    let why = String::from_utf8_lossy(&payload[..payload.len().min(MAX_REASON)]).into_owned();
                    self.reset_session(&s, &why, false);
                }
                Ok(())
            }
            other => Err(format!("stream session frame of unknown kind {other}")),
        }
    }

    fn on_open(self: &Arc<Self>, id: u32, header: Bytes) -> Result<(), String> {
        if !self.peer_numbered(id) || self.sessions().contains_key(&id) {
            return Err(format!("stream session {id} opened with an id the peer may not use"));
        }
        let refuse = |why: &str| {
            tracing::info!(session = id, reason = why, "stream session refused");
            self.send_now(frame(RESET, id, why.as_bytes()));
            Ok(())
        };
        if header.len() > MAX_HEADER {
            return refuse("session header too large");
        }
        let acceptor = self.acceptor.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(acceptor) = acceptor else {
            return refuse("this end does not accept stream sessions");
        };
        let stream = match self.register(id, header) {
            Ok(s) => s,
            Err(e) => return refuse(&e.to_string()),
        };
        if let Err(e) = acceptor.try_send(stream) {
            let stream = match e {
                mpsc::error::TrySendError::Full(s) | mpsc::error::TrySendError::Closed(s) => s,
            };
            tracing::info!(session = id, "stream session refused: too many waiting to be accepted");
            self.reset_session(&stream.tx.guard.session, "too many stream sessions waiting to be accepted", true);
        }
        Ok(())
    }

    /// Ends a session at this end; `tell` sends the peer a RESET.
    fn reset_session(&self, s: &Arc<Session>, why: &str, tell: bool) {
        if s.ended.load(Ordering::Acquire) {
            return;
        }
        if tell {
            self.send_now(frame(RESET, s.id, clip(why).as_bytes()));
        }
        s.end(why.to_string());
    }

    /// The connection ended: every session ends with it.
    pub(crate) fn close_all(&self, reason: &str) {
        {
            let mut c = self.closed.lock().unwrap_or_else(|p| p.into_inner());
            if c.is_none() {
                *c = Some(reason.to_string());
            }
        }
        self.acceptor.lock().unwrap_or_else(|p| p.into_inner()).take();
        let all: Vec<_> = self.sessions().values().cloned().collect();
        for s in all {
            s.end(format!("connection closed: {reason}"));
        }
    }

    /// Sessions open now.
    pub(crate) fn open_count(&self) -> usize {
        self.sessions().len()
    }
}

/// Removes a session when both of its halves are gone, resetting it unless
/// both directions finished.
struct Guard {
    mux: Arc<Mux>,
    session: Arc<Session>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let s = &self.session;
        let clean = s.sent_finish.load(Ordering::Acquire) && s.got_finish.load(Ordering::Acquire);
        let ended = s.ended.load(Ordering::Acquire);
        if !clean && !ended {
            let reason = s.end_reason.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let why = reason.unwrap_or_else(|| "stream session closed".into());
            self.mux.send_now(frame(RESET, s.id, clip(&why).as_bytes()));
        }
        self.mux.sessions().remove(&s.id);
        if let Some(st) = &self.mux.stats {
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
    header: Bytes,
    tx: StreamTx,
    rx: StreamRx,
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").field("id", &self.tx.guard.session.id).finish_non_exhaustive()
    }
}

impl Stream {
    /// The header the opener sent.
    pub fn header(&self) -> &Bytes {
        &self.header
    }

    /// The session's number on its connection.
    pub fn id(&self) -> u32 {
        self.tx.guard.session.id
    }

    /// Splits into the sending and receiving halves; the session lasts while
    /// either is held.
    pub fn split(self) -> (StreamTx, StreamRx) {
        (self.tx, self.rx)
    }

    /// Joins the halves [`Stream::split`] gave (of one session) again.
    pub fn join(tx: StreamTx, rx: StreamRx) -> Stream {
        Stream { header: Bytes::new(), tx, rx }
    }
}

/// The sending half of a session.
pub struct StreamTx {
    guard: Arc<Guard>,
}

impl fmt::Debug for StreamTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamTx").field("id", &self.guard.session.id).finish_non_exhaustive()
    }
}

impl StreamTx {
    fn ended_error(&self) -> StreamError {
        let s = &self.guard.session;
        match self.guard.mux.closed_reason() {
            Some(r) if s.end_reason().starts_with("connection closed") => StreamError::Closed(r),
            _ => StreamError::Reset(s.end_reason()),
        }
    }

    /// Sends one frame of data (at most [`MAX_DATA`] bytes), waiting while
    /// the peer's application has [`WINDOW`] bytes not yet taken. Ends with
    /// an error when the session is reset or the connection closes.
    pub async fn send(&mut self, data: Bytes) -> Result<(), StreamError> {
        let s = &self.guard.session;
        if data.len() > MAX_DATA {
            return Err(StreamError::TooLarge { what: "stream data frame", len: data.len(), max: MAX_DATA });
        }
        if s.sent_finish.load(Ordering::Acquire) {
            return Err(StreamError::Finished);
        }
        let need = i64::try_from(data.len()).unwrap_or(i64::MAX);
        loop {
            if s.ended.load(Ordering::Acquire) {
                return Err(self.ended_error());
            }
            let have = s.credit.load(Ordering::Acquire);
            if have >= need {
                if s.credit.compare_exchange(have, have - need, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    break;
                }
                continue;
            }
            tokio::select! {
                _ = s.credit_notify.notified() => {}
                _ = self.guard.mux.cancel.cancelled() => {}
            }
        }
        let len = data.len() as u64;
        self.guard.mux.send_frame(frame(DATA, s.id, &data)).await?;
        if let Some(st) = &self.guard.mux.stats {
            st.bytes_sent.inc_by(len);
        }
        Ok(())
    }

    /// Ends this direction: the peer reads what was sent, then the end.
    pub async fn finish(&mut self) -> Result<(), StreamError> {
        let s = &self.guard.session;
        if s.ended.load(Ordering::Acquire) {
            return Err(self.ended_error());
        }
        if s.sent_finish.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.guard.mux.send_frame(frame(FINISH, s.id, &[])).await
    }

    /// Ends both directions at once, telling the peer why.
    pub fn reset(&self, reason: &str) {
        self.guard.mux.reset_session(&self.guard.session, reason, true);
    }

    /// Whether the session has been reset (or its connection closed).
    pub fn is_reset(&self) -> bool {
        self.guard.session.ended.load(Ordering::Acquire)
    }

    /// Waits until the session is reset or its connection closes.
    pub async fn reset_by_peer(&self) {
        let s = &self.guard.session;
        while !s.ended.load(Ordering::Acquire) {
            tokio::select! {
                _ = s.credit_notify.notified() => {}
                _ = self.guard.mux.cancel.cancelled() => return,
            }
        }
    }
}

/// The receiving half of a session.
pub struct StreamRx {
    guard: Arc<Guard>,
    inbound: mpsc::UnboundedReceiver<Inbound>,
    taken_since_credit: u32,
}

impl fmt::Debug for StreamRx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamRx").field("id", &self.guard.session.id).finish_non_exhaustive()
    }
}

impl StreamRx {
    /// The next frame; `Ok(None)` once the peer finished its direction and
    /// everything before it was taken.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, StreamError> {
        let s = Arc::clone(&self.guard.session);
        let next = tokio::select! {
            biased;
            n = self.inbound.recv() => n,
            _ = self.guard.mux.cancel.cancelled() => None,
        };
        match next {
            Some(Inbound::Data(b)) => {
                s.buffered.fetch_sub(b.len(), Ordering::AcqRel);
                self.taken_since_credit += u32::try_from(b.len()).unwrap_or(u32::MAX);
                if self.taken_since_credit >= WINDOW / 4 {
                    let n = std::mem::take(&mut self.taken_since_credit);
                    // Waits for room in the writer's queue (bounded), never
                    // for the peer.
                    self.guard.mux.send_frame(frame(CREDIT, s.id, &n.to_be_bytes())).await?;
                }
                Ok(Some(b))
            }
            Some(Inbound::Finish) => Ok(None),
            Some(Inbound::Reset(r)) => Err(match self.guard.mux.closed_reason() {
                Some(c) if r.starts_with("connection closed") => StreamError::Closed(c),
                _ => StreamError::Reset(r),
            }),
            None => Err(StreamError::Closed(self.guard.mux.closed_reason().unwrap_or_else(|| "closed".into()))),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A server-side mux taking sessions, and what it writes.
    fn mux() -> (Arc<Mux>, mpsc::Receiver<Bytes>, IncomingStreams) {
        let (tx, rx) = mpsc::channel(FRAME_QUEUE);
        let m = Mux::new(tx, true, false, CancellationToken::new(), None);
        let inc = m.incoming().unwrap();
        (m, rx, inc)
    }

    fn kind_of(f: &Bytes) -> (u8, u32, Bytes) {
        (f[1], u32::from_be_bytes([f[2], f[3], f[4], f[5]]), f.slice(FRAME_HEAD..))
    }

    /// The next frame written that is not a CREDIT.
    async fn next_reset(out: &mut mpsc::Receiver<Bytes>) -> (u8, u32, Bytes) {
        loop {
            let f = kind_of(&out.recv().await.unwrap());
            if f.0 != CREDIT {
                return f;
            }
        }
    }

    #[tokio::test]
    async fn frames_that_break_the_protocol_end_the_session_or_the_connection() {
        let (m, mut out, mut inc) = mux();
        // Broken framing ends the connection (an error for the reader).
        assert!(m.on_frame(Bytes::from_static(&[0, 2, 0])).is_err(), "short frame");
        assert!(m.on_frame(frame(9, 1, b"")).is_err(), "unknown kind");
        assert!(m.on_frame(frame(OPEN, 2, b"")).is_err(), "an id of our own parity");
        assert!(m.on_frame(frame(CREDIT, 1, b"12345")).is_err(), "credit of the wrong size");

        // A peer session: data past the credit resets that session only.
        m.on_frame(frame(OPEN, 1, b"h")).unwrap();
        let (_tx, mut rx) = inc.accept().await.unwrap().split();
        assert!(m.on_frame(frame(OPEN, 1, b"h")).is_err(), "an id already open");
        m.on_frame(frame(OPEN, 3, b"other")).unwrap();
        let (_tx3, mut rx3) = inc.accept().await.unwrap().split();
        for _ in 0..(WINDOW as usize / MAX_DATA) {
            m.on_frame(frame(DATA, 1, &[7; MAX_DATA])).unwrap();
        }
        m.on_frame(frame(DATA, 1, b"one byte too many")).unwrap();
        let (k, id, why) = kind_of(&out.recv().await.unwrap());
        assert_eq!((k, id), (RESET, 1));
        assert_eq!(why.as_ref(), b"peer sent past its credit");
        // What arrived within the credit is still read, then the reset.
        for _ in 0..(WINDOW as usize / MAX_DATA) {
            assert_eq!(rx.recv().await.unwrap().unwrap().len(), MAX_DATA);
        }
        assert_eq!(rx.recv().await.unwrap_err(), StreamError::Reset("peer sent past its credit".into()));
        // The other session is untouched.
        m.on_frame(frame(DATA, 3, b"fine")).unwrap();
        assert_eq!(rx3.recv().await.unwrap().unwrap().as_ref(), b"fine");

        // Oversize data, data after the end, data for no session.
        m.on_frame(frame(DATA, 3, &vec![0; MAX_DATA + 1])).unwrap();
        assert_eq!(next_reset(&mut out).await.0, RESET);
        m.on_frame(frame(DATA, 99, b"x")).unwrap();
        let (k, id, why) = next_reset(&mut out).await;
        assert_eq!((k, id, why.as_ref()), (RESET, 99, &b"no such stream session"[..]));
        // A reset for no session is not answered (no reset storms).
        m.on_frame(frame(RESET, 77, b"x")).unwrap();
        assert!(out.try_recv().is_err());
    }

    #[tokio::test]
    async fn credit_returns_as_the_application_reads_and_never_past_the_window() {
        let (m, mut out, mut inc) = mux();
        m.on_frame(frame(OPEN, 1, b"")).unwrap();
        let (mut tx, mut rx) = inc.accept().await.unwrap().split();
        for _ in 0..(WINDOW as usize / 4 / MAX_DATA) {
            m.on_frame(frame(DATA, 1, &[1; MAX_DATA])).unwrap();
            rx.recv().await.unwrap();
        }
        let (k, _, n) = kind_of(&out.recv().await.unwrap());
        assert_eq!(k, CREDIT);
        assert_eq!(u32::from_be_bytes([n[0], n[1], n[2], n[3]]), WINDOW / 4);
        // Our own sends stop at the peer's window until it returns credit.
        for _ in 0..(WINDOW as usize / MAX_DATA) {
            tx.send(Bytes::from(vec![0; MAX_DATA])).await.unwrap();
            out.recv().await.unwrap();
        }
        let mut blocked = Box::pin(tx.send(Bytes::from_static(b"x")));
        assert!(tokio::time::timeout(std::time::Duration::from_millis(50), &mut blocked).await.is_err());
        m.on_frame(frame(CREDIT, 1, &1u32.to_be_bytes())).unwrap();
        blocked.await.unwrap();
        // Credit beyond the window is a lie: the session is reset.
        m.on_frame(frame(CREDIT, 1, &(WINDOW + 1).to_be_bytes())).unwrap();
        assert!(tx.send(Bytes::from_static(b"y")).await.is_err());
    }

    #[tokio::test]
    async fn opens_beyond_the_limits_are_refused_with_a_reason() {
        let (m, mut out, _inc) = mux();
        for i in 0..ACCEPT_QUEUE as u32 {
            m.on_frame(frame(OPEN, 2 * i + 1, b"")).unwrap();
        }
        m.on_frame(frame(OPEN, 1001, b"")).unwrap();
        let (k, id, why) = kind_of(&out.recv().await.unwrap());
        assert_eq!((k, id), (RESET, 1001));
        assert!(String::from_utf8_lossy(&why).contains("waiting to be accepted"));
        // A header over its limit.
        m.on_frame(frame(OPEN, 1003, &vec![b' '; MAX_HEADER + 1])).unwrap();
        assert_eq!(kind_of(&out.recv().await.unwrap()).1, 1003);
    }
}
