//! Sessions as frames on the connection: how WebSocket (and the in-memory
//! [`pair`](super::pair)) carry them.
//!
//! A session frame is one binary frame of the connection (a WebSocket
//! binary message) whose first byte is 0, which no message (JSON) starts
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
//! receiver returns credit as its application reads. The reader of the
//! connection never waits on a session (a peer sending past its credit gets
//! the session reset).
//!
//! Frames leave by two paths to the connection's writer. OPEN, DATA and
//! FINISH wait in a bounded queue ([`FRAME_QUEUE`]), written after the
//! messages queued with them, so object deliveries and ACKs go first.
//! RESET and CREDIT never wait and are never dropped: they go to the
//! [`Control`] path, at most one entry per session id (a RESET; CREDIT
//! added up), which the writer drains before the queue. A RESET is still
//! written after the frames of its session already queued, so the data
//! sent before a reset arrives before it. Entries are bounded by
//! [`MAX_CONTROL`]; a peer that makes us owe it more (it opens sessions
//! and does not read our answers) has its connection closed, so a RESET
//! is never lost while the connection lives.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::queue;
use bytes::{BufMut, Bytes, BytesMut};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::{
    Carrier, Guard, IncomingStreams, MAX_DATA, MAX_HEADER, MAX_REASON, MAX_SESSIONS, RxState, Stream, StreamError,
    StreamStats, WINDOW, accept_queue, clip,
};

/// Session frames (OPEN, DATA, FINISH) waiting for the connection's writer.
pub(crate) const FRAME_QUEUE: usize = 64;
/// Most session ids with a RESET or CREDIT waiting for the writer: every
/// session's, and as many again for answers to opens the peer makes while
/// earlier ones are still unwritten.
pub(crate) const MAX_CONTROL: usize = 2 * MAX_SESSIONS;

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

/// The session id of a frame this end made.
fn id_of(f: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(f.get(2..FRAME_HEAD)?.try_into().ok()?))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// RESET and CREDIT frames owed to the peer, by session id.
#[derive(Debug, Default)]
pub(crate) struct Control {
    state: Mutex<ControlState>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct ControlState {
    /// Ids with a RESET or CREDIT waiting, in the order they first had one.
    order: VecDeque<u32>,
    /// The RESET frame owed per id (at most one).
    resets: HashMap<u32, Bytes>,
    /// Credit owed per id, added up.
    credits: HashMap<u32, u32>,
    /// Frames per id in the frame queue, not yet taken by the writer; a
    /// RESET waits for them.
    queued: HashMap<u32, usize>,
    /// More ids were owed than [`MAX_CONTROL`]: the connection must close.
    overflow: bool,
}

impl ControlState {
    /// Makes room for `id` in the order; false (and `overflow`) when full.
    fn admit(&mut self, id: u32) -> bool {
        if self.resets.contains_key(&id) || self.credits.contains_key(&id) {
            return true;
        }
        if self.order.len() >= MAX_CONTROL {
            self.overflow = true;
            return false;
        }
        self.order.push_back(id);
        true
    }
}

impl Control {
    /// Owes the peer a RESET of `id` (the first reason counts).
    fn reset(&self, id: u32, why: &str) {
        {
            let mut s = lock(&self.state);
            if s.resets.contains_key(&id) {
                return;
            }
            if s.admit(id) {
                s.credits.remove(&id);
                s.resets.insert(id, frame(RESET, id, clip(why).as_bytes()));
            }
        }
        self.ready.notify_one();
    }

    /// Owes the peer `n` bytes of credit on `id`.
    fn credit(&self, id: u32, n: u32) {
        {
            let mut s = lock(&self.state);
            if s.resets.contains_key(&id) || !s.admit(id) {
                return;
            }
            let c = s.credits.entry(id).or_insert(0);
            *c = c.saturating_add(n);
        }
        self.ready.notify_one();
    }

    /// A frame of `id` went into the frame queue.
    fn queued(&self, id: u32) {
        *lock(&self.state).queued.entry(id).or_insert(0) += 1;
    }

    /// The writer took `f` from the frame queue.
    pub(crate) fn taken(&self, f: &[u8]) {
        let Some(id) = id_of(f) else { return };
        let mut s = lock(&self.state);
        if let Some(n) = s.queued.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                s.queued.remove(&id);
            }
        }
    }

    /// Appends the frames owed now: every CREDIT, and every RESET whose
    /// session has no frame left in the queue before it.
    pub(crate) fn take(&self, out: &mut Vec<Bytes>) {
        let mut guard = lock(&self.state);
        let s = &mut *guard;
        let mut order = std::mem::take(&mut s.order);
        order.retain(|id| {
            if let Some(n) = s.credits.remove(id) {
                out.push(frame(CREDIT, *id, &n.to_be_bytes()));
            }
            if !s.queued.contains_key(id)
                && let Some(f) = s.resets.remove(id)
            {
                out.push(f);
            }
            s.resets.contains_key(id)
        });
        s.order = order;
    }

    /// Waits until frames may be owed.
    pub(crate) async fn ready(&self) {
        self.ready.notified().await;
    }

    /// Whether more was owed than the bound allows.
    pub(crate) fn overflowed(&self) -> bool {
        lock(&self.state).overflow
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
pub(super) struct Session {
    id: u32,
    inbound: mpsc::UnboundedSender<Inbound>,
    /// Data received and not yet taken by the application (bounded by the
    /// credit the peer was given: WINDOW).
    buffered: AtomicUsize,
    /// Bytes this end may still send.
    credit: AtomicI64,
    credit_notify: Notify,
    /// Set once either end reset the session, or the connection ended.
    pub(super) ended: AtomicBool,
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
            let mut r = lock(&self.end_reason);
            if r.is_none() {
                *r = Some(reason.clone());
            }
        }
        self.ended.store(true, Ordering::Release);
        let _ = self.inbound.send(Inbound::Reset(reason));
        self.credit_notify.notify_one();
    }

    fn end_reason(&self) -> String {
        lock(&self.end_reason).clone().unwrap_or_else(|| "reset".into())
    }
}

/// What the receiving half of a framed session keeps.
pub(super) struct Inbox {
    inbound: mpsc::UnboundedReceiver<Inbound>,
    taken_since_credit: u32,
}

/// The sessions of one connection.
pub(crate) struct Mux {
    sessions: Mutex<HashMap<u32, Arc<Session>>>,
    out: queue::Sender<Bytes>,
    control: Arc<Control>,
    acceptor: Mutex<Option<mpsc::Sender<Stream>>>,
    next_id: AtomicU32,
    /// Whether the peer agreed on sessions carried as frames.
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
        out: queue::Sender<Bytes>,
        agreed: bool,
        client: bool,
        cancel: CancellationToken,
        stats: Option<Arc<StreamStats>>,
    ) -> Arc<Mux> {
        Arc::new(Mux {
            sessions: Mutex::new(HashMap::new()),
            out,
            control: Arc::new(Control::default()),
            acceptor: Mutex::new(None),
            next_id: AtomicU32::new(if client { 1 } else { 2 }),
            agreed,
            cancel,
            closed: Mutex::new(None),
            stats,
        })
    }

    /// The RESET and CREDIT frames owed, for the connection's writer.
    pub(crate) fn control(&self) -> &Control {
        &self.control
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<u32, Arc<Session>>> {
        lock(&self.sessions)
    }

    fn closed_reason(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    fn closed_error(&self) -> StreamError {
        StreamError::Closed(self.closed_reason().unwrap_or_else(|| "closed".into()))
    }

    /// Whether `id` was numbered by the peer (the opener's parity).
    fn peer_numbered(&self, id: u32) -> bool {
        // Our own ids started at 1 (client) or 2 (server) and step by 2.
        let ours_odd = self.next_id.load(Ordering::Relaxed) % 2 == 1;
        (id % 2 == 1) != ours_odd
    }

    /// Queues an OPEN, DATA or FINISH of session `id`, waiting for room.
    async fn send_frame(&self, id: u32, f: Bytes) -> Result<(), StreamError> {
        let permit = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err(self.closed_error()),
            p = self.out.reserve() => p.map_err(|_| self.closed_error())?,
        };
        self.control.queued(id);
        permit.send(f);
        Ok(())
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
        let carrier = Carrier::Framed { mux: Arc::clone(self), session };
        let guard = Guard::start(header, id, self.stats.clone(), carrier);
        Ok(Stream::new(guard, RxState::Framed(Inbox { inbound: rx, taken_since_credit: 0 })))
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
        self.send_frame(id, frame(OPEN, id, &header)).await?;
        Ok(stream)
    }

    /// Starts taking the peer's session opens (at most once; later calls get
    /// `None`).
    pub(crate) fn incoming(&self) -> Option<IncomingStreams> {
        let mut acceptor = lock(&self.acceptor);
        if acceptor.is_some() || !self.agreed {
            return None;
        }
        let (tx, incoming) = accept_queue();
        *acceptor = Some(tx);
        Some(incoming)
    }

    /// Handles one session frame from the connection's reader; never waits.
    /// An error is a frame that breaks the protocol, which ends the
    /// connection.
    pub(crate) fn on_frame(self: &Arc<Self>, b: Bytes) -> Result<(), String> {
        if !self.agreed {
            return Err("a stream session frame on a connection that carries none".into());
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
                    self.control.reset(id, "no such stream session");
                    return Ok(());
                };
                // An empty frame carries nothing and costs the reader a
                // queue entry its credit does not count: refused.
                if payload.is_empty()
                    || payload.len() > MAX_DATA
                    || s.buffered.load(Ordering::Acquire) + payload.len() > WINDOW as usize
                    || s.got_finish.load(Ordering::Acquire)
                {
                    let why = if payload.is_empty() {
                        "empty data frame".to_string()
                    } else if payload.len() > MAX_DATA {
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
            self.control.reset(id, why);
            Ok(())
        };
        if header.len() > MAX_HEADER {
            return refuse("session header too large");
        }
        let acceptor = lock(&self.acceptor).clone();
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
            stream.tx.reset("too many stream sessions waiting to be accepted");
        }
        Ok(())
    }

    /// Ends a session at this end; `tell` owes the peer a RESET.
    pub(super) fn reset_session(&self, s: &Arc<Session>, why: &str, tell: bool) {
        if s.ended.load(Ordering::Acquire) {
            return;
        }
        if tell {
            self.control.reset(s.id, why);
        }
        s.end(why.to_string());
    }

    /// The connection ended: every session ends with it.
    pub(crate) fn close_all(&self, reason: &str) {
        {
            let mut c = lock(&self.closed);
            if c.is_none() {
                *c = Some(reason.to_string());
            }
        }
        lock(&self.acceptor).take();
        let all: Vec<_> = self.sessions().values().cloned().collect();
        for s in all {
            s.end(format!("connection closed: {reason}"));
        }
    }

    /// Sessions open now.
    pub(crate) fn open_count(&self) -> usize {
        self.sessions().len()
    }

    /// Both halves of `s` are gone: it leaves the table, reset unless both
    /// directions finished. Whether it ended cleanly.
    pub(super) fn release(&self, s: &Session) -> bool {
        let clean = s.sent_finish.load(Ordering::Acquire) && s.got_finish.load(Ordering::Acquire);
        if !clean && !s.ended.load(Ordering::Acquire) {
            let why = lock(&s.end_reason).clone().unwrap_or_else(|| "stream session closed".into());
            self.control.reset(s.id, &why);
        }
        self.sessions().remove(&s.id);
        clean
    }

    fn ended_error(&self, s: &Session) -> StreamError {
        match self.closed_reason() {
            Some(r) if s.end_reason().starts_with("connection closed") => StreamError::Closed(r),
            _ => StreamError::Reset(s.end_reason()),
        }
    }

    pub(super) async fn send(&self, s: &Session, data: Bytes) -> Result<(), StreamError> {
        if s.sent_finish.load(Ordering::Acquire) {
            return Err(StreamError::Finished);
        }
        let need = i64::try_from(data.len()).unwrap_or(i64::MAX);
        loop {
            if s.ended.load(Ordering::Acquire) {
                return Err(self.ended_error(s));
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
                _ = self.cancel.cancelled() => {}
            }
        }
        self.send_frame(s.id, frame(DATA, s.id, &data)).await
    }

    pub(super) async fn finish(&self, s: &Session) -> Result<(), StreamError> {
        if s.ended.load(Ordering::Acquire) {
            return Err(self.ended_error(s));
        }
        if s.sent_finish.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.send_frame(s.id, frame(FINISH, s.id, &[])).await
    }

    pub(super) async fn reset_by_peer(&self, s: &Session) {
        while !s.ended.load(Ordering::Acquire) {
            tokio::select! {
                _ = s.credit_notify.notified() => {}
                _ = self.cancel.cancelled() => return,
            }
        }
    }

    pub(super) async fn recv(&self, s: &Session, inbox: &mut Inbox) -> Result<Option<Bytes>, StreamError> {
        let next = tokio::select! {
            biased;
            n = inbox.inbound.recv() => n,
            _ = self.cancel.cancelled() => None,
        };
        match next {
            Some(Inbound::Data(b)) => {
                s.buffered.fetch_sub(b.len(), Ordering::AcqRel);
                inbox.taken_since_credit += u32::try_from(b.len()).unwrap_or(u32::MAX);
                if inbox.taken_since_credit >= WINDOW / 4 {
                    // Owed, never waited for: the writer sends it ahead of
                    // queued data.
                    self.control.credit(s.id, std::mem::take(&mut inbox.taken_since_credit));
                }
                Ok(Some(b))
            }
            Some(Inbound::Finish) => Ok(None),
            Some(Inbound::Reset(r)) => Err(match self.closed_reason() {
                Some(c) if r.starts_with("connection closed") => StreamError::Closed(c),
                _ => StreamError::Reset(r),
            }),
            None => Err(self.closed_error()),
        }
    }
}

pub(super) fn pair(header: Bytes) -> Result<(Stream, Stream), StreamError> {
    let cancel = CancellationToken::new();
    let (a_out, a_rx) = queue::channel(FRAME_QUEUE);
    let (b_out, b_rx) = queue::channel(FRAME_QUEUE);
    let a = Mux::new(a_out, true, false, cancel.clone(), None);
    let b = Mux::new(b_out, true, true, cancel.clone(), None);
    let incoming = b.incoming().ok_or_else(|| StreamError::Closed("session pair has no acceptor".into()))?;
    // Each pump writes what one end owes and queues to the other, as a
    // connection's writer would, and holds the receiving mux weakly, so
    // the pair ends (every sender gone) once both ends are dropped.
    fn pump(
        control: Arc<Control>,
        mut from: queue::Receiver<Bytes>,
        to: std::sync::Weak<Mux>,
        cancel: CancellationToken,
    ) {
        tokio::spawn(async move {
            let mut batch = Vec::new();
            loop {
                let next = tokio::select! {
                    biased;
                    () = control.ready() => None,
                    f = from.recv() => match f {
                        Some(f) => Some(f),
                        // The sending end is gone: what it owed last
                        // still goes.
                        None => {
                            control.take(&mut batch);
                            if let Some(to) = to.upgrade() {
                                for f in batch.drain(..) {
                                    if to.on_frame(f).is_err() {
                                        break;
                                    }
                                }
                            }
                            break;
                        }
                    },
                };
                control.take(&mut batch);
                if let Some(f) = next {
                    control.taken(&f);
                    batch.push(f);
                    control.take(&mut batch);
                }
                let Some(to) = to.upgrade() else { break };
                for f in batch.drain(..) {
                    if let Err(e) = to.on_frame(f) {
                        to.close_all(&e);
                        cancel.cancel();
                        return;
                    }
                }
            }
            cancel.cancel();
        });
    }
    pump(Arc::clone(&a.control), a_rx, Arc::downgrade(&b), cancel.clone());
    pump(Arc::clone(&b.control), b_rx, Arc::downgrade(&a), cancel);
    // The open goes straight to the accepting end, so both ends exist
    // before this returns.
    let id = a.next_id.fetch_add(2, Ordering::Relaxed);
    let opener = a.register(id, header.clone())?;
    b.on_frame(frame(OPEN, id, &header)).map_err(StreamError::Closed)?;
    let mut incoming = incoming;
    let acceptor = incoming.rx.try_recv().map_err(|_| StreamError::Closed("session pair refused its open".into()))?;
    Ok((opener, acceptor))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A server-side mux taking sessions, and what it queues.
    fn mux() -> (Arc<Mux>, queue::Receiver<Bytes>, IncomingStreams) {
        let (tx, rx) = queue::channel(FRAME_QUEUE);
        let m = Mux::new(tx, true, false, CancellationToken::new(), None);
        let inc = m.incoming().unwrap();
        (m, rx, inc)
    }

    fn kind_of(f: &Bytes) -> (u8, u32, Bytes) {
        (f[1], u32::from_be_bytes([f[2], f[3], f[4], f[5]]), f.slice(FRAME_HEAD..))
    }

    /// What the connection's writer would write now, in order: the control
    /// path, the frame queue, then the control path again.
    fn written(m: &Mux, out: &mut queue::Receiver<Bytes>) -> Vec<(u8, u32, Bytes)> {
        let mut all = Vec::new();
        m.control().take(&mut all);
        while let Some(f) = out.try_recv() {
            m.control().taken(&f);
            all.push(f);
        }
        m.control().take(&mut all);
        all.iter().map(kind_of).collect()
    }

    /// The RESETs among what would be written now.
    fn resets(m: &Mux, out: &mut queue::Receiver<Bytes>) -> Vec<(u32, Bytes)> {
        written(m, out).into_iter().filter(|f| f.0 == RESET).map(|f| (f.1, f.2)).collect()
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
        assert_eq!(resets(&m, &mut out), [(1, Bytes::from_static(b"peer sent past its credit"))]);
        // What arrived within the credit is still read, then the reset.
        for _ in 0..(WINDOW as usize / MAX_DATA) {
            assert_eq!(rx.recv().await.unwrap().unwrap().len(), MAX_DATA);
        }
        assert_eq!(rx.recv().await.unwrap_err(), StreamError::Reset("peer sent past its credit".into()));
        // The other session is untouched.
        m.on_frame(frame(DATA, 3, b"fine")).unwrap();
        assert_eq!(rx3.recv().await.unwrap().unwrap().as_ref(), b"fine");

        // Empty data (a queue entry no credit counts) resets its session.
        m.on_frame(frame(OPEN, 5, b"")).unwrap();
        let (_tx5, mut rx5) = inc.accept().await.unwrap().split();
        m.on_frame(frame(DATA, 5, b"")).unwrap();
        assert_eq!(resets(&m, &mut out), [(5, Bytes::from_static(b"empty data frame"))]);
        assert_eq!(rx5.recv().await.unwrap_err(), StreamError::Reset("empty data frame".into()));
        // Oversize data, data after the end, data for no session.
        m.on_frame(frame(DATA, 3, &vec![0; MAX_DATA + 1])).unwrap();
        assert_eq!(resets(&m, &mut out).len(), 1);
        m.on_frame(frame(DATA, 99, b"x")).unwrap();
        assert_eq!(resets(&m, &mut out), [(99, Bytes::from_static(b"no such stream session"))]);
        // A reset for no session is not answered (no reset storms).
        m.on_frame(frame(RESET, 77, b"x")).unwrap();
        assert!(written(&m, &mut out).is_empty());
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
        let (k, _, n) = written(&m, &mut out).remove(0);
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
        for i in 0..super::super::ACCEPT_QUEUE as u32 {
            m.on_frame(frame(OPEN, 2 * i + 1, b"")).unwrap();
        }
        m.on_frame(frame(OPEN, 1001, b"")).unwrap();
        let r = resets(&m, &mut out);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, 1001);
        assert!(String::from_utf8_lossy(&r[0].1).contains("waiting to be accepted"));
        // A header over its limit.
        m.on_frame(frame(OPEN, 1003, &vec![b' '; MAX_HEADER + 1])).unwrap();
        assert_eq!(resets(&m, &mut out)[0].0, 1003);
    }

    /// The frame queue is full (the writer is behind): a RESET and CREDIT
    /// still go, ahead of the queue, CREDIT added up; a RESET of a session
    /// with frames in the queue goes right after them; none is dropped.
    #[tokio::test]
    async fn resets_and_credit_are_never_lost_when_the_frame_queue_is_full() {
        let (m, mut out, mut inc) = mux();
        let open = |id: u32| {
            m.on_frame(frame(OPEN, id, b"")).unwrap();
        };
        open(1);
        open(3);
        open(5);
        let (mut a_tx, _a_rx) = inc.accept().await.unwrap().split();
        let (_b_tx, mut b_rx) = inc.accept().await.unwrap().split();
        let (c_tx, _c_rx) = inc.accept().await.unwrap().split();
        // Session 1 fills the frame queue; its next frame waits.
        for i in 0..FRAME_QUEUE {
            a_tx.send(Bytes::from(vec![i as u8])).await.unwrap();
        }
        let mut waiting = Box::pin(a_tx.send(Bytes::from_static(b"last")));
        assert!(tokio::time::timeout(std::time::Duration::from_millis(20), &mut waiting).await.is_err());
        drop(waiting);
        // Session 3 reads half a window: two credits owed, added up.
        for _ in 0..(WINDOW as usize / 2 / MAX_DATA) {
            m.on_frame(frame(DATA, 3, &[1; MAX_DATA])).unwrap();
            b_rx.recv().await.unwrap();
        }
        // Session 5 is reset, and session 1 behind its queued frames.
        c_tx.reset("pod deleted");
        a_tx.reset("client went away");
        let all = written(&m, &mut out);
        assert_eq!(all[0], (CREDIT, 3, Bytes::from((WINDOW / 2).to_be_bytes().to_vec())), "credit added up");
        assert_eq!(all[1], (RESET, 5, Bytes::from_static(b"pod deleted")), "ahead of the full queue");
        assert!(all[2..2 + FRAME_QUEUE].iter().all(|f| f.0 == DATA && f.1 == 1));
        assert_eq!(all[2 + FRAME_QUEUE], (RESET, 1, Bytes::from_static(b"client went away")), "after its data");
        assert_eq!(all.len(), 3 + FRAME_QUEUE);
    }

    /// Owing more than the bound (a peer that opens and opens without
    /// reading our answers) is reported, for the writer to close the
    /// connection, instead of dropping a RESET.
    #[tokio::test]
    async fn owing_more_than_the_bound_is_reported_not_dropped() {
        let (tx, mut out) = queue::channel(FRAME_QUEUE);
        let m = Mux::new(tx, true, false, CancellationToken::new(), None);
        for i in 0..MAX_CONTROL as u32 {
            m.on_frame(frame(OPEN, 2 * i + 1, b"")).unwrap();
        }
        assert!(!m.control().overflowed());
        m.on_frame(frame(OPEN, 9_999, b"")).unwrap();
        assert!(m.control().overflowed());
        assert_eq!(resets(&m, &mut out).len(), MAX_CONTROL);
    }

    #[tokio::test]
    async fn a_pair_carries_data_both_ways_and_ends_with_its_ends() {
        let (opener, acceptor) = pair(Bytes::from_static(b"hello")).unwrap();
        assert_eq!(acceptor.header().as_ref(), b"hello");
        let (mut otx, mut orx) = opener.split();
        let (mut atx, mut arx) = acceptor.split();
        // More than a window each way: credit flows back as each end reads.
        let sender = tokio::spawn(async move {
            for _ in 0..(2 * WINDOW as usize / MAX_DATA) {
                otx.send(Bytes::from(vec![1; MAX_DATA])).await.unwrap();
            }
            otx.finish().await.unwrap();
            otx
        });
        let mut got = 0;
        while let Some(b) = arx.recv().await.unwrap() {
            got += b.len();
        }
        assert_eq!(got, 2 * WINDOW as usize);
        let _otx = sender.await.unwrap();
        atx.send(Bytes::from_static(b"back")).await.unwrap();
        assert_eq!(orx.recv().await.unwrap().unwrap().as_ref(), b"back");
        // The halves join again with the header.
        let joined = Stream::join(atx, arx);
        assert_eq!(joined.header().as_ref(), b"hello");
        // Dropping one end resets the other.
        drop(joined);
        assert!(matches!(orx.recv().await, Err(StreamError::Reset(_))));
    }
}
