//! Sessions on QUIC: one bidirectional QUIC stream per session.
//!
//! When both ends of a QUIC connection agreed the `streams` feature, the
//! cloud (the QUIC server, the only end that opens sessions) opens a
//! bidirectional QUIC stream for each session and the edge accepts it;
//! the message stream is untouched. Each direction of a session stream
//! carries frames:
//!
//! ```text
//! kind (1 byte) | length (u32, big-endian) | payload
//! kind 1 OPEN   the opener's first frame, and only there: the header (at most MAX_HEADER)
//!      2 DATA   one frame of data (at most MAX_DATA)
//!      5 RESET  why (UTF-8, at most 1,024 bytes): the last frame of a direction ended by a reset
//! ```
//!
//! The kinds are the framed carrier's. Which stream is which is told by
//! who opened it (the message stream is the client's first); a stream that
//! does not start with OPEN is refused.
//!
//! - **FINISH** is the direction's QUIC FIN.
//! - **Flow control** is QUIC's: each stream's receive window is
//!   [`WINDOW`] (the transport's, on an end configured for sessions), and
//!   the connection's receive window covers every stream the peer may have
//!   open ([`CONN_RECEIVE_WINDOW`]), so a stuck reader stops its own
//!   sender only, never the message stream or another session.
//! - **RESET**: the resetting end writes a RESET frame and finishes its
//!   direction when the frame fits without waiting (the peer reads the
//!   reason after the data sent before it); otherwise (the window is full,
//!   a frame half written, or the direction already finished) it resets
//!   the direction (RESET_STREAM) with [`CODE_SESSION_RESET`], and the peer
//!   reads "stream session reset by the peer". Either way it stops the
//!   peer's direction (STOP_SENDING, same code), so the peer's sender
//!   learns at once, whatever its reader is doing.
//! - **Refusals** (the edge takes no sessions, too many, a header over its
//!   limit, a stream the cloud did not open) are a RESET frame with the
//!   reason and [`CODE_SESSION_REFUSED`]; the connection goes on.
//! - **Violations** (DATA over MAX_DATA, an unknown kind, a second OPEN, a
//!   direction that ends inside a frame) reset that session with the
//!   reason, never the connection.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use quinn::{RecvStream, SendStream, VarInt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{
    Carrier, Guard, IncomingStreams, MAX_DATA, MAX_HEADER, MAX_REASON, MAX_SESSIONS, RxState, Stream, StreamError,
    StreamStats, WINDOW, accept_queue, clip, either,
};
use crate::quic::{CODE_SESSION_REFUSED, CODE_SESSION_RESET};

/// Bidirectional streams an end lets its peer open when it does not take
/// sessions (every end at first, the cloud always): the message stream,
/// its resend after refused 0-RTT, and a few that are refused.
pub(crate) const PEER_STREAMS: u32 = 4;
/// Session streams the cloud may have open towards an edge at once:
/// [`MAX_SESSIONS`], and a few whose streams are still closing after their
/// session ended at the cloud.
pub(crate) const SESSION_STREAMS: u32 = MAX_SESSIONS as u32 + 4;
/// The connection's receive window once sessions are agreed: the window of
/// every stream that may be open on it, so no stuck reader can use up the
/// connection's window. It bounds memory too: at worst, every reader
/// stuck, (260 + 4) × 256 KiB = 66 MiB buffered for one connection — what a
/// WebSocket connection's sessions may buffer (256 × 256 KiB), and the
/// few extra streams.
pub(crate) const CONN_RECEIVE_WINDOW: u64 = (SESSION_STREAMS as u64 + PEER_STREAMS as u64) * WINDOW as u64;
/// The connection's room to send for the message stream (quinn's
/// `send_window` before sessions: `crate::quic`'s transport config).
const MESSAGE_SEND_WINDOW: u64 = 2 << 20;
/// How long an accepted session stream may take to send its OPEN frame.
const OPEN_DEADLINE: Duration = Duration::from_secs(10);

const OPEN: u8 = 1;
const DATA: u8 = 2;
const RESET: u8 = 5;
const HEAD: usize = 5;
/// `stop_code` when the peer has not stopped our direction.
const NOT_STOPPED: u64 = u64::MAX;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn frame(kind: u8, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(HEAD + payload.len());
    b.put_u8(kind);
    b.put_u32(u32::try_from(payload.len()).unwrap_or(u32::MAX));
    b.put_slice(payload);
    b.freeze()
}

fn stream_id(s: &SendStream) -> u32 {
    u32::try_from(u64::from(s.id())).unwrap_or(u32::MAX)
}

fn reason_for(code: VarInt) -> String {
    match code.into_inner() {
        c if c == u64::from(CODE_SESSION_RESET) => "stream session reset by the peer".into(),
        c if c == u64::from(CODE_SESSION_REFUSED) => "stream session refused by the peer".into(),
        c => format!("stream session reset by the peer (code {c})"),
    }
}

/// Writes all of `buf` if the stream takes it without waiting.
fn write_now(send: &mut SendStream, mut buf: &[u8]) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    while !buf.is_empty() {
        match Pin::new(&mut *send).poll_write(&mut cx, buf) {
            Poll::Ready(Ok(n)) if n > 0 => buf = &buf[n..],
            _ => return false,
        }
    }
    true
}

/// Ends a direction telling the peer `why`: a RESET frame and FIN when it
/// fits now, RESET_STREAM with `code` otherwise.
fn end_direction(send: &mut SendStream, clean_boundary: bool, why: &str, code: u32) {
    if clean_boundary && write_now(send, &frame(RESET, clip(why).as_bytes())) {
        let _ = send.finish();
    } else {
        let _ = send.reset(VarInt::from_u32(code));
    }
}

/// Refuses a stream the peer opened; the connection goes on.
fn refuse(mut send: SendStream, mut recv: RecvStream, why: &str) {
    tracing::debug!(session = stream_id(&send), reason = why, "stream session refused");
    end_direction(&mut send, true, why, CODE_SESSION_REFUSED);
    let _ = recv.stop(VarInt::from_u32(CODE_SESSION_REFUSED));
}

/// A place among a connection's sessions taken by an open still under
/// way: given back when dropped.
struct Place<'a> {
    sessions: &'a QuicSessions,
    /// Still the open's (not yet the session's).
    held: bool,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if self.held {
            self.sessions.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The sessions of one QUIC connection that agreed them.
#[derive(Debug)]
pub(crate) struct QuicSessions {
    conn: quinn::Connection,
    /// This end is the QUIC server: it opens sessions and takes none.
    server: bool,
    acceptor: Mutex<Option<mpsc::Sender<Stream>>>,
    open: AtomicUsize,
    cancel: CancellationToken,
    closed: Mutex<Option<String>>,
    stats: Option<Arc<StreamStats>>,
}

impl QuicSessions {
    /// Starts serving the streams the peer opens on `conn` (refusing them
    /// all unless sessions were `agreed` and this end is the client), and
    /// when agreed, opens the connection's windows to sessions.
    pub(crate) fn start(
        conn: &quinn::Connection,
        server: bool,
        agreed: bool,
        stats: Option<Arc<StreamStats>>,
    ) -> Option<Arc<QuicSessions>> {
        let sessions = agreed.then(|| {
            conn.set_receive_window(VarInt::from_u64(CONN_RECEIVE_WINDOW).unwrap_or(VarInt::MAX));
            // Room to send for every session stream besides the messages'
            // own: each session's unacknowledged data is bounded by the
            // peer's stream window, so sessions never fill the room the
            // message stream needs.
            conn.set_send_window(MESSAGE_SEND_WINDOW + u64::from(SESSION_STREAMS) * u64::from(WINDOW));
            if !server {
                conn.set_max_concurrent_bi_streams(VarInt::from_u32(SESSION_STREAMS));
            }
            Arc::new(QuicSessions {
                conn: conn.clone(),
                server,
                acceptor: Mutex::new(None),
                open: AtomicUsize::new(0),
                cancel: CancellationToken::new(),
                closed: Mutex::new(None),
                stats,
            })
        });
        tokio::spawn(serve_peer_streams(conn.clone(), sessions.clone(), server).in_current_span());
        sessions
    }

    fn closed_reason(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    fn closed_error(&self) -> StreamError {
        StreamError::Closed(self.closed_reason().unwrap_or_else(|| "closed".into()))
    }

    fn lost(&self, e: &quinn::ConnectionError) -> StreamError {
        StreamError::Closed(self.closed_reason().unwrap_or_else(|| e.to_string()))
    }

    /// Takes a place among the sessions open, if there is one.
    fn reserve(&self) -> bool {
        self.open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_SESSIONS).then_some(n + 1)).is_ok()
    }

    /// A session on its stream, counted (its place already reserved).
    fn session(
        self: &Arc<Self>,
        header: Bytes,
        send: SendStream,
        recv: RecvStream,
        reader: FrameReader,
    ) -> (Stream, Arc<Session>) {
        let id = stream_id(&send);
        let session = Arc::new(Session {
            id,
            sessions: Arc::clone(self),
            send: Mutex::new(SendHalf { stream: send, pending: Bytes::new() }),
            recv: Mutex::new(recv),
            ended: CancellationToken::new(),
            reason: Mutex::new(None),
            stop_code: AtomicU64::new(NOT_STOPPED),
            sent_finish: AtomicBool::new(false),
            got_finish: AtomicBool::new(false),
        });
        let guard = Guard::start(header, id, self.stats.clone(), Carrier::Quic(Arc::clone(&session)));
        (Stream::new(guard, RxState::Quic(reader)), session)
    }

    /// Opens a session with `header` on a new stream.
    pub(crate) async fn open(self: &Arc<Self>, header: Bytes) -> Result<Stream, StreamError> {
        if let Some(reason) = self.closed_reason() {
            return Err(StreamError::Closed(reason));
        }
        if header.len() > MAX_HEADER {
            return Err(StreamError::TooLarge { what: "session header", len: header.len(), max: MAX_HEADER });
        }
        if !self.reserve() {
            return Err(StreamError::TooMany(MAX_SESSIONS));
        }
        // The place goes back if the open fails or is given up (its
        // future dropped while it waits, as a deadline does).
        let mut place = Place { sessions: self, held: true };
        // Waits while the peer has as many of our streams open as it allows.
        let (send, recv) = tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(self.closed_error()),
            r = self.conn.open_bi() => r.map_err(|e| self.lost(&e)),
        }?;
        // The session owns the place from here on.
        place.held = false;
        let (stream, session) = self.session(header.clone(), send, recv, FrameReader::default());
        // On failure, dropping the stream resets it.
        session.write(frame(OPEN, &header)).await?;
        Ok(stream)
    }

    /// Starts taking the peer's sessions (at most once; never on the
    /// server, which only opens them).
    pub(crate) fn incoming(&self) -> Option<IncomingStreams> {
        let mut acceptor = lock(&self.acceptor);
        if acceptor.is_some() || self.server {
            return None;
        }
        let (tx, incoming) = accept_queue();
        *acceptor = Some(tx);
        Some(incoming)
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
        self.cancel.cancel();
    }

    /// Sessions open now.
    pub(crate) fn open_count(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Reads the OPEN of a stream the peer opened and hands the session to
    /// the acceptor, or refuses it.
    async fn accept(self: Arc<Self>, send: SendStream, recv: RecvStream) {
        let recv = Mutex::new(recv);
        let mut reader = FrameReader::default();
        let first = tokio::select! {
            () = self.cancel.cancelled() => return,
            r = tokio::time::timeout(OPEN_DEADLINE, reader.next(&recv)) => r,
        };
        let recv = recv.into_inner().unwrap_or_else(|p| p.into_inner());
        let header = match first {
            Ok(Ok(Frame::Open(h))) => h,
            Ok(Err(ReadFail::TooLarge { kind: OPEN, .. })) => return refuse(send, recv, "session header too large"),
            // Reset by the peer, or the connection is gone.
            Ok(Err(ReadFail::Read(_))) => return,
            Ok(_) => return refuse(send, recv, "a stream that does not open a stream session"),
            Err(_) => return refuse(send, recv, "no stream session header in time"),
        };
        let acceptor = lock(&self.acceptor).clone();
        let Some(acceptor) = acceptor else {
            return refuse(send, recv, "this end does not accept stream sessions");
        };
        if !self.reserve() {
            return refuse(send, recv, &StreamError::TooMany(MAX_SESSIONS).to_string());
        }
        let (stream, _) = self.session(header, send, recv, reader);
        if let Err(e) = acceptor.try_send(stream) {
            let stream = match e {
                mpsc::error::TrySendError::Full(s) | mpsc::error::TrySendError::Closed(s) => s,
            };
            tracing::info!(session = stream.id(), "stream session refused: too many waiting to be accepted");
            stream.tx.reset("too many stream sessions waiting to be accepted");
        }
    }
}

/// Serves the bidirectional streams the peer opens, for the life of the
/// connection: sessions where this end takes them, refusals otherwise.
async fn serve_peer_streams(conn: quinn::Connection, sessions: Option<Arc<QuicSessions>>, server: bool) {
    let cancel = sessions.as_ref().map(|s| s.cancel.clone()).unwrap_or_default();
    loop {
        let (send, recv) = tokio::select! {
            () = cancel.cancelled() => break,
            r = conn.accept_bi() => match r {
                Ok(s) => s,
                Err(_) => break,
            },
        };
        match &sessions {
            Some(s) if !server => {
                tokio::spawn(Arc::clone(s).accept(send, recv).in_current_span());
            }
            // The cloud opens sessions; an edge may not.
            Some(_) => refuse(send, recv, "this end does not accept stream sessions"),
            None => refuse(send, recv, "stream sessions were not agreed on this connection"),
        }
    }
}

/// The sending direction, and what a cancelled write left of its frame.
struct SendHalf {
    stream: SendStream,
    pending: Bytes,
}

/// One session on its QUIC stream, shared by its two halves.
pub(super) struct Session {
    id: u32,
    sessions: Arc<QuicSessions>,
    send: Mutex<SendHalf>,
    recv: Mutex<RecvStream>,
    /// Cancelled once the session ended at this end: reset by either end,
    /// or broke the protocol.
    ended: CancellationToken,
    reason: Mutex<Option<String>>,
    /// The code of the peer's STOP_SENDING on our direction (its reset,
    /// seen by our sender before our reader saw why).
    stop_code: AtomicU64,
    sent_finish: AtomicBool,
    got_finish: AtomicBool,
}

impl Session {
    fn stopped(&self) -> Option<VarInt> {
        let c = self.stop_code.load(Ordering::Acquire);
        (c != NOT_STOPPED).then(|| VarInt::from_u64(c).unwrap_or(VarInt::MAX))
    }

    fn peer_stopped(&self, code: VarInt) {
        let _ = self.stop_code.compare_exchange(NOT_STOPPED, code.into_inner(), Ordering::AcqRel, Ordering::Acquire);
    }

    fn over(&self) -> bool {
        self.ended.is_cancelled() || self.stopped().is_some() || self.sessions.cancel.is_cancelled()
    }

    fn ended_error(&self) -> StreamError {
        if let Some(r) = lock(&self.reason).clone() {
            return StreamError::Reset(r);
        }
        if let Some(code) = self.stopped() {
            return StreamError::Reset(reason_for(code));
        }
        self.sessions.closed_error()
    }

    fn write_failed(&self, e: quinn::WriteError) -> StreamError {
        match e {
            quinn::WriteError::Stopped(code) => {
                self.peer_stopped(code);
                self.ended_error()
            }
            quinn::WriteError::ConnectionLost(c) => self.sessions.lost(&c),
            quinn::WriteError::ClosedStream | quinn::WriteError::ZeroRttRejected => self.ended_error(),
        }
    }

    /// Writes what a cancelled write left.
    fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<Result<(), quinn::WriteError>> {
        let mut half = lock(&self.send);
        let SendHalf { stream, pending } = &mut *half;
        while !pending.is_empty() {
            let n = ready!(Pin::new(&mut *stream).poll_write(cx, pending))?;
            pending.advance(n);
        }
        Poll::Ready(Ok(()))
    }

    async fn flush(&self) -> Result<(), StreamError> {
        let r = tokio::select! {
            r = poll_fn(|cx| self.poll_flush(cx)) => r,
            () = either(&self.ended, &self.sessions.cancel) => return Err(self.ended_error()),
        };
        r.map_err(|e| self.write_failed(e))
    }

    /// Writes one whole frame, waiting for QUIC's flow control. Cancelled,
    /// the frame is either not taken or finished by the next write.
    async fn write(&self, f: Bytes) -> Result<(), StreamError> {
        self.flush().await?;
        lock(&self.send).pending = f;
        self.flush().await
    }

    pub(super) async fn send(&self, data: Bytes) -> Result<(), StreamError> {
        if self.sent_finish.load(Ordering::Acquire) {
            return Err(StreamError::Finished);
        }
        if self.over() {
            return Err(self.ended_error());
        }
        self.write(frame(DATA, &data)).await
    }

    pub(super) async fn finish(&self) -> Result<(), StreamError> {
        if self.over() {
            return Err(self.ended_error());
        }
        if self.sent_finish.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.flush().await?;
        lock(&self.send).stream.finish().map_err(|_| self.ended_error())
    }

    /// Ends the session at this end, keeping the first reason: our
    /// direction ends (telling the peer why when `tell`), and the peer's is
    /// stopped.
    fn end(&self, why: &str, tell: bool) {
        {
            let mut reason = lock(&self.reason);
            if self.ended.is_cancelled() {
                return;
            }
            *reason = Some(clip(why).to_owned());
            self.ended.cancel();
        }
        let code = CODE_SESSION_RESET;
        // A direction already finished stays so: resetting it would make
        // QUIC discard what it carried and the peer has not read yet (the
        // end of a log, an exec's status). The peer learns of the end from
        // our reader's stop.
        if !self.sent_finish.load(Ordering::Acquire) {
            let mut half = lock(&self.send);
            let SendHalf { stream, pending } = &mut *half;
            // The peer that reset us hears nothing back (no reset storms).
            let boundary = tell && pending.is_empty();
            end_direction(stream, boundary, why, code);
            pending.clear();
        }
        let _ = lock(&self.recv).stop(VarInt::from_u32(code));
    }

    pub(super) fn reset(&self, why: &str) {
        self.end(why, true);
    }

    /// A frame that breaks the protocol: that session is reset, with why.
    fn violation(&self, why: String) -> StreamError {
        tracing::warn!(session = self.id, reason = %why, "stream session reset: protocol violation");
        self.end(&why, true);
        self.ended_error()
    }

    pub(super) fn is_reset(&self) -> bool {
        if self.over() {
            return true;
        }
        // A STOP_SENDING that no send has met yet.
        let stopped = lock(&self.send).stream.stopped();
        let mut stopped = std::pin::pin!(stopped);
        match stopped.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(Some(code))) => {
                self.peer_stopped(code);
                true
            }
            Poll::Ready(Err(_)) => true,
            _ => false,
        }
    }

    pub(super) async fn reset_by_peer(&self) {
        if self.is_reset() {
            return;
        }
        let stopped = lock(&self.send).stream.stopped();
        tokio::select! {
            () = either(&self.ended, &self.sessions.cancel) => {}
            r = stopped => match r {
                Ok(Some(code)) => self.peer_stopped(code),
                Err(_) => {}
                // Our direction finished and the peer has all of it: only
                // our reader can learn of a reset now.
                Ok(None) => either(&self.ended, &self.sessions.cancel).await,
            },
        }
    }

    pub(super) async fn recv(&self, reader: &mut FrameReader) -> Result<Option<Bytes>, StreamError> {
        if self.got_finish.load(Ordering::Acquire) {
            return Ok(None);
        }
        if self.ended.is_cancelled() {
            return Err(self.ended_error());
        }
        let next = tokio::select! {
            biased;
            r = reader.next(&self.recv) => r,
            () = either(&self.ended, &self.sessions.cancel) => return Err(self.ended_error()),
        };
        match next {
            Ok(Frame::Data(b)) => {
                if let Some(st) = &self.sessions.stats {
                    st.bytes_received.inc_by(b.len() as u64);
                }
                Ok(Some(b))
            }
            Ok(Frame::Finished) => {
                self.got_finish.store(true, Ordering::Release);
                Ok(None)
            }
            Ok(Frame::Reset(why)) => {
                self.end(&String::from_utf8_lossy(&why), false);
                Err(self.ended_error())
            }
            Ok(Frame::Open(_)) => Err(self.violation("a second stream session header".into())),
            Err(ReadFail::TooLarge { kind: DATA, len, max }) => {
                Err(self.violation(format!("data frame of {len} bytes is over the limit of {max}")))
            }
            Err(ReadFail::TooLarge { kind, len, max }) => {
                Err(self.violation(format!("session frame of kind {kind} and {len} bytes is over the limit of {max}")))
            }
            Err(ReadFail::UnknownKind(k)) => Err(self.violation(format!("stream session frame of unknown kind {k}"))),
            Err(ReadFail::Truncated) => Err(self.violation("the stream ended inside a frame".into())),
            Err(ReadFail::Read(quinn::ReadError::Reset(code))) => {
                self.end(&reason_for(code), false);
                Err(self.ended_error())
            }
            Err(ReadFail::Read(quinn::ReadError::ConnectionLost(c))) => Err(self.sessions.lost(&c)),
            Err(ReadFail::Read(_)) => Err(self.ended_error()),
        }
    }

    /// Both halves are gone: the session ends, reset unless both directions
    /// finished. Whether it ended cleanly.
    pub(super) fn release(&self) -> bool {
        let clean = self.sent_finish.load(Ordering::Acquire) && self.got_finish.load(Ordering::Acquire);
        if !clean && !self.sessions.cancel.is_cancelled() {
            self.end("stream session closed", true);
        }
        self.sessions.open.fetch_sub(1, Ordering::AcqRel);
        clean
    }
}

/// One frame read from a session stream.
#[derive(Debug)]
enum Frame {
    Open(Bytes),
    Data(Bytes),
    Reset(Bytes),
    /// The peer finished its direction.
    Finished,
}

#[derive(Debug)]
enum ReadFail {
    TooLarge { kind: u8, len: usize, max: usize },
    UnknownKind(u8),
    Truncated,
    Read(quinn::ReadError),
}

/// A frame being read, kept between calls so a cancelled read loses
/// nothing.
#[derive(Debug, Default)]
pub(super) struct FrameReader {
    head: [u8; HEAD],
    have: usize,
    body: Option<(u8, BytesMut, usize)>,
}

impl FrameReader {
    async fn next(&mut self, recv: &Mutex<RecvStream>) -> Result<Frame, ReadFail> {
        poll_fn(|cx| self.poll_next(cx, recv)).await
    }

    fn poll_next(&mut self, cx: &mut Context<'_>, recv: &Mutex<RecvStream>) -> Poll<Result<Frame, ReadFail>> {
        loop {
            if self.body.is_none() {
                if self.have < HEAD {
                    let n = ready!(lock(recv).poll_read(cx, &mut self.head[self.have..])).map_err(ReadFail::Read)?;
                    if n == 0 {
                        return Poll::Ready(if self.have == 0 {
                            Ok(Frame::Finished)
                        } else {
                            Err(ReadFail::Truncated)
                        });
                    }
                    self.have += n;
                    continue;
                }
                let kind = self.head[0];
                let len = u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]]) as usize;
                let max = match kind {
                    OPEN => MAX_HEADER,
                    DATA => MAX_DATA,
                    RESET => MAX_REASON,
                    other => return Poll::Ready(Err(ReadFail::UnknownKind(other))),
                };
                if len > max {
                    return Poll::Ready(Err(ReadFail::TooLarge { kind, len, max }));
                }
                self.body = Some((kind, BytesMut::zeroed(len), 0));
            }
            if let Some((_, buf, filled)) = &mut self.body
                && *filled < buf.len()
            {
                let n = ready!(lock(recv).poll_read(cx, &mut buf[*filled..])).map_err(ReadFail::Read)?;
                if n == 0 {
                    return Poll::Ready(Err(ReadFail::Truncated));
                }
                *filled += n;
                continue;
            }
            let Some((kind, buf, _)) = self.body.take() else { continue };
            self.have = 0;
            let payload = buf.freeze();
            return Poll::Ready(Ok(match kind {
                OPEN => Frame::Open(payload),
                DATA => Frame::Data(payload),
                _ => Frame::Reset(payload),
            }));
        }
    }
}
