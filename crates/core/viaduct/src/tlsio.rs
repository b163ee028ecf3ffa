//! TLS over a byte stream by rustls's unbuffered API, holding no buffer
//! while the connection idles: viaduct's WebSocket links, and any other
//! server that holds a connection per edge node (the stream tunnel).
//!
//! rustls's buffered connection (what tokio-rustls drives) keeps a 4 KiB
//! receive buffer for its whole life, whether anything flows or not: 4 KiB
//! of every WebSocket link, a sixth of what a cloud held per edge node
//! (BENCHMARKS.md, "Fleet scale"). Here what is read from the socket
//! lands in a buffer on the stack and its records are processed there; only
//! what does not make a whole record yet is kept, on the heap, until the
//! record is whole. Decrypted data the reader has not taken yet and
//! encrypted data the socket has not taken yet are kept the same way, so
//! while a connection idles all three buffers are empty and own no memory.
//!
//! The stream is shared by a reading and a writing task
//! (`tokio::io::split`), and only the writing side writes to the socket: a
//! record that reading calls for (a TLS 1.3 key update's answer, an alert)
//! waits in the outgoing buffer for the writer's next flush, so that the
//! reader never takes the writer's place as the one the socket wakes when
//! it has room. TLS 1.3 asks for a key update's answer only before the
//! next application data (RFC 8446 §4.6.3), which is what a flush carries;
//! a viaduct link also flushes at least every ping interval. An alert after
//! a failed read reaches the peer only if something writes after it.

use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use rustls::CommonState;
use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::tls::CertIdentity;

/// Bytes read from the socket at once: a record of the largest size, its
/// header and its tag (RFC 8446 §5.2) with room to spare.
const READ_CHUNK: usize = 18 * 1024;
/// Most bytes kept of records that are not whole yet: rustls joins a
/// handshake message of up to 64 KiB across records (and refuses more).
const MAX_INCOMING: usize = 64 * 1024 + READ_CHUNK;
/// Encrypted bytes the socket has not taken, past which a write waits for
/// it to take them.
const WRITE_BACKLOG: usize = 64 * 1024;
/// Most application data encrypted by one write call.
const MAX_WRITE: usize = 64 * 1024;

/// What the two sides of rustls's unbuffered API have in common.
pub trait Side: Unpin {
    /// The side's connection data.
    type Data;
    /// Processes the records in `incoming`.
    fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data>;
    /// The handshake's outcome: the peer's certificates, how it went.
    fn common(&self) -> &CommonState;
}

/// rustls gives both sides the same methods, each on its own type.
macro_rules! side {
    ($conn:ty, $data:ty) => {
        impl Side for $conn {
            type Data = $data;
            fn process<'c, 'i>(&'c mut self, incoming: &'i mut [u8]) -> UnbufferedStatus<'c, 'i, Self::Data> {
                self.process_tls_records(incoming)
            }
            fn common(&self) -> &CommonState {
                self
            }
        }
    };
}

side!(UnbufferedServerConnection, rustls::server::ServerConnectionData);
side!(UnbufferedClientConnection, rustls::client::ClientConnectionData);

/// A TLS connection over `IO`, as the server (`C` =
/// [`UnbufferedServerConnection`]) or the client.
pub struct TlsStream<IO, C> {
    io: IO,
    conn: C,
    /// Received bytes that do not make a whole record yet.
    incoming: Vec<u8>,
    bufs: Bufs,
    /// Whose read waits for the socket: woken when a write's processing
    /// finds data for it.
    reader: Option<Waker>,
    /// close_notify is queued: nothing more is written.
    closing: bool,
    /// The connection failed: every later read and write fails alike.
    failed: Option<(io::ErrorKind, String)>,
}

impl<IO, C: Side> std::fmt::Debug for TlsStream<IO, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("handshaking", &self.conn.common().is_handshaking())
            .field("incoming", &self.incoming.len())
            .field("unread", &(self.bufs.plain.len() - self.bufs.plain_at))
            .field("unsent", &self.bufs.out_pending())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// Decrypted data not read yet and encrypted data not written yet.
#[derive(Default)]
struct Bufs {
    plain: Vec<u8>,
    plain_at: usize,
    out: Vec<u8>,
    out_at: usize,
    /// The peer sent close_notify: after `plain`, the stream ends.
    peer_closed: bool,
}

impl Bufs {
    fn has_plain(&self) -> bool {
        self.plain_at < self.plain.len()
    }

    /// A record's data: straight to the reader's buffer when nothing is
    /// waiting before it, the rest after what waits.
    fn take_plain(&mut self, mut data: &[u8], dst: Option<&mut ReadBuf<'_>>) {
        if !self.has_plain()
            && let Some(dst) = dst
        {
            let n = dst.remaining().min(data.len());
            dst.put_slice(&data[..n]);
            data = &data[n..];
        }
        if !data.is_empty() {
            self.plain.extend_from_slice(data);
        }
    }

    fn read_plain(&mut self, dst: &mut ReadBuf<'_>) {
        let n = dst.remaining().min(self.plain.len() - self.plain_at);
        dst.put_slice(&self.plain[self.plain_at..self.plain_at + n]);
        self.plain_at += n;
        if self.plain_at == self.plain.len() {
            self.plain = Vec::new();
            self.plain_at = 0;
        }
    }

    fn out_pending(&self) -> usize {
        self.out.len() - self.out_at
    }
}

/// What to encrypt once the connection allows it.
enum Encrypt<'a> {
    Nothing,
    Data(&'a [u8]),
    CloseNotify,
}

/// Where processing stopped.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// The handshake needs more from the peer.
    Input,
    /// Every whole record is processed; application data may be written.
    Writable,
    /// Both sides sent close_notify.
    Closed,
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Appends what `f` writes into a buffer of at least `guess` bytes (or of
/// the size it says it needs) to `out`.
fn append(
    out: &mut Vec<u8>,
    guess: usize,
    mut f: impl FnMut(&mut [u8]) -> Result<usize, Option<usize>>,
    what: &'static str,
) -> io::Result<()> {
    let start = out.len();
    out.resize(start + guess, 0);
    let written = match f(&mut out[start..]) {
        Ok(n) => Ok(n),
        Err(Some(needed)) => {
            out.resize(start + needed, 0);
            f(&mut out[start..]).map_err(|_| ())
        }
        Err(None) => Err(()),
    };
    match written {
        Ok(n) => {
            out.truncate(start + n);
            Ok(())
        }
        Err(()) => {
            out.truncate(start);
            Err(io::Error::other(what))
        }
    }
}

fn encode_error(e: EncodeError) -> Option<usize> {
    match e {
        EncodeError::InsufficientSize(s) => Some(s.required_size),
        _ => None,
    }
}

fn encrypt_error(e: EncryptError) -> Option<usize> {
    match e {
        EncryptError::InsufficientSize(s) => Some(s.required_size),
        _ => None,
    }
}

/// Bytes to read after `kept`, the start of a record: the rest of the
/// record, if its header says (so that a record arriving slowly is kept in
/// a buffer of its size), and at least 4 KiB; a whole read otherwise (the
/// records kept are a handshake message's, joined across records).
fn read_size(kept: &[u8]) -> usize {
    match kept {
        [_, _, _, hi, lo, ..] => {
            let whole = 5 + usize::from(u16::from_be_bytes([*hi, *lo]));
            if whole > kept.len() { (whole - kept.len()).clamp(4096, READ_CHUNK) } else { READ_CHUNK }
        }
        _ => 4096,
    }
}

/// Room for `len` bytes of application data once encrypted: records of
/// up to 16 KiB, each with at most 29 bytes of header, nonce and tag.
fn sealed_size(len: usize) -> usize {
    len + 32 * (len / (16 * 1024) + 1)
}

/// Processes the records in `input`: their data goes to `dst` and `bufs`,
/// what the connection must send to `bufs.out`, and `send` is encrypted
/// there once allowed. Returns how many bytes of `input` are used up.
fn pump<C: Side>(
    conn: &mut C,
    input: &mut [u8],
    bufs: &mut Bufs,
    mut dst: Option<&mut ReadBuf<'_>>,
    mut send: Encrypt<'_>,
) -> io::Result<(usize, Next)> {
    let mut used = 0;
    loop {
        let UnbufferedStatus { discard, state } = conn.process(&mut input[used..]);
        let next = match state.map_err(tls_error)? {
            ConnectionState::ReadTraffic(mut r) => {
                while let Some(record) = r.next_record() {
                    bufs.take_plain(record.map_err(tls_error)?.payload, dst.as_deref_mut());
                }
                None
            }
            ConnectionState::EncodeTlsData(mut e) => {
                append(&mut bufs.out, 4096, |b| e.encode(b).map_err(encode_error), "encode a TLS record")?;
                None
            }
            // What is encoded goes out in order, before anything encoded
            // later: it counts as sent.
            ConnectionState::TransmitTlsData(t) => {
                t.done();
                None
            }
            ConnectionState::PeerClosed => {
                bufs.peer_closed = true;
                None
            }
            ConnectionState::BlockedHandshake => Some(Next::Input),
            ConnectionState::WriteTraffic(mut w) => {
                match std::mem::replace(&mut send, Encrypt::Nothing) {
                    Encrypt::Nothing => {}
                    Encrypt::Data(data) => append(
                        &mut bufs.out,
                        sealed_size(data.len()),
                        |b| w.encrypt(data, b).map_err(encrypt_error),
                        "encrypt (the traffic keys are used up)",
                    )?,
                    Encrypt::CloseNotify => {
                        append(&mut bufs.out, 64, |b| w.queue_close_notify(b).map_err(encrypt_error), "close")?;
                    }
                }
                Some(Next::Writable)
            }
            ConnectionState::Closed => Some(Next::Closed),
            // The configurations accept no early data.
            _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "unexpected TLS early data")),
        };
        used += discard;
        if let Some(next) = next {
            return Ok((used, next));
        }
    }
}

impl<IO, C: Side> TlsStream<IO, C> {
    fn new(io: IO, conn: C) -> Self {
        TlsStream { io, conn, incoming: Vec::new(), bufs: Bufs::default(), reader: None, closing: false, failed: None }
    }

    /// The handshake's outcome.
    pub fn common(&self) -> &CommonState {
        self.conn.common()
    }

    /// The identity of the peer's certificate (the first of its chain),
    /// when it sent one and it parses.
    pub fn peer_identity(&self) -> Option<CertIdentity> {
        self.common().peer_certificates()?.first().and_then(|c| CertIdentity::from_der(c))
    }

    /// Bytes of buffers held (their capacity).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.incoming.capacity() + self.bufs.plain.capacity() + self.bufs.out.capacity()
    }

    fn failure(&self) -> Option<io::Error> {
        self.failed.as_ref().map(|(kind, msg)| io::Error::new(*kind, msg.clone()))
    }

    /// Records `e` as the connection's end; a TLS error queues the alert
    /// that tells the peer.
    fn fail(&mut self, e: io::Error) -> io::Error {
        if self.failed.is_none() {
            self.failed = Some((e.kind(), e.to_string()));
            // Only while rustls has a record to send: processing goes no
            // further (the handshake's reassembly may point into a buffer
            // that is gone).
            while self.conn.common().wants_write() {
                let Ok(ConnectionState::EncodeTlsData(mut enc)) = self.conn.process(&mut []).state else { break };
                if append(&mut self.bufs.out, 64, |b| enc.encode(b).map_err(encode_error), "alert").is_err() {
                    break;
                }
            }
        }
        e
    }

    fn closed_early(&self) -> io::Error {
        let what = if self.conn.common().is_handshaking() {
            "the peer closed the connection during the TLS handshake"
        } else {
            "the peer closed the connection without sending TLS close_notify"
        };
        io::Error::new(io::ErrorKind::UnexpectedEof, what)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, C: Side> TlsStream<IO, C> {
    /// Reads once from the socket and processes the records, giving their
    /// data to `dst` first.
    fn poll_receive(&mut self, cx: &mut Context<'_>, dst: Option<&mut ReadBuf<'_>>) -> Poll<io::Result<()>> {
        let result = if self.incoming.is_empty() {
            // Not zeroed: the read says how much it filled.
            let mut chunk = [MaybeUninit::<u8>::uninit(); READ_CHUNK];
            let mut rb = ReadBuf::uninit(&mut chunk);
            if let Err(e) = ready!(Pin::new(&mut self.io).poll_read(cx, &mut rb)) {
                return Poll::Ready(Err(self.fail(e)));
            }
            let read = rb.filled_mut();
            if read.is_empty() {
                let e = self.closed_early();
                return Poll::Ready(Err(self.fail(e)));
            }
            pump(&mut self.conn, read, &mut self.bufs, dst, Encrypt::Nothing).map(|(used, _)| {
                // A record that is not whole yet.
                self.incoming.extend_from_slice(&read[used..]);
            })
        } else {
            let start = self.incoming.len();
            if start >= MAX_INCOMING {
                let e = io::Error::new(io::ErrorKind::InvalidData, "TLS records too large");
                return Poll::Ready(Err(self.fail(e)));
            }
            self.incoming.resize(start + read_size(&self.incoming).min(MAX_INCOMING - start), 0);
            let mut rb = ReadBuf::new(&mut self.incoming[start..]);
            let read = Pin::new(&mut self.io).poll_read(cx, &mut rb);
            let n = rb.filled().len();
            self.incoming.truncate(start + n);
            match read {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(self.fail(e))),
                Poll::Ready(Ok(())) if n == 0 => {
                    let e = self.closed_early();
                    return Poll::Ready(Err(self.fail(e)));
                }
                Poll::Ready(Ok(())) => {}
            }
            pump(&mut self.conn, &mut self.incoming, &mut self.bufs, dst, Encrypt::Nothing).map(|(used, _)| {
                self.incoming.drain(..used);
                if self.incoming.is_empty() {
                    self.incoming = Vec::new();
                }
            })
        };
        Poll::Ready(result.map_err(|e| self.fail(e)))
    }

    /// Writes what is queued to the socket.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.bufs.out_pending() > 0 {
            match ready!(Pin::new(&mut self.io).poll_write(cx, &self.bufs.out[self.bufs.out_at..])) {
                Ok(0) => return Poll::Ready(Err(self.fail(io::ErrorKind::WriteZero.into()))),
                Ok(n) => self.bufs.out_at += n,
                Err(e) => return Poll::Ready(Err(self.fail(e))),
            }
        }
        self.bufs.out = Vec::new();
        self.bufs.out_at = 0;
        Poll::Ready(Ok(()))
    }

    /// Processes what was received with `send` to encrypt.
    fn process_with(&mut self, send: Encrypt<'_>) -> io::Result<Next> {
        let had = (self.bufs.has_plain(), self.bufs.peer_closed);
        let (used, next) = match pump(&mut self.conn, &mut self.incoming, &mut self.bufs, None, send) {
            Ok(r) => r,
            Err(e) => return Err(self.fail(e)),
        };
        if used > 0 {
            self.incoming.drain(..used);
            if self.incoming.is_empty() {
                self.incoming = Vec::new();
            }
        }
        if had != (self.bufs.has_plain(), self.bufs.peer_closed)
            && let Some(w) = self.reader.take()
        {
            w.wake();
        }
        Ok(next)
    }

    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            // The client's hello, at first; after that, nothing new.
            if let Err(e) = self.process_with(Encrypt::Nothing) {
                let _ = self.poll_send(cx);
                return Poll::Ready(Err(e));
            }
            ready!(self.poll_send(cx))?;
            if !self.conn.common().is_handshaking() {
                return Poll::Ready(Ok(()));
            }
            if let Err(e) = ready!(self.poll_receive(cx, None)) {
                // The alert, if the socket takes it now.
                let _ = self.poll_send(cx);
                return Poll::Ready(Err(e));
            }
        }
    }

    /// Completes the handshake.
    async fn handshake(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_handshake(cx)).await
    }
}

/// The server's side of a TLS handshake over `io`.
pub async fn accept<IO: AsyncRead + AsyncWrite + Unpin>(
    io: IO,
    config: Arc<rustls::ServerConfig>,
) -> io::Result<TlsStream<IO, UnbufferedServerConnection>> {
    let conn = UnbufferedServerConnection::new(config).map_err(tls_error)?;
    let mut stream = TlsStream::new(io, conn);
    stream.handshake().await?;
    Ok(stream)
}

/// The client's side of a TLS handshake with `name` over `io`.
pub async fn connect<IO: AsyncRead + AsyncWrite + Unpin>(
    io: IO,
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
) -> io::Result<TlsStream<IO, UnbufferedClientConnection>> {
    let conn = UnbufferedClientConnection::new(config, name).map_err(tls_error)?;
    let mut stream = TlsStream::new(io, conn);
    stream.handshake().await?;
    Ok(stream)
}

impl<IO: AsyncRead + AsyncWrite + Unpin, C: Side> AsyncRead for TlsStream<IO, C> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(e) = this.failure() {
                return Poll::Ready(Err(e));
            }
            if this.bufs.has_plain() {
                this.bufs.read_plain(buf);
                return Poll::Ready(Ok(()));
            }
            if this.bufs.peer_closed || buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            let before = buf.filled().len();
            match this.poll_receive(cx, Some(buf)) {
                Poll::Pending => {
                    this.reader = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Poll::Ready(r) => r?,
            }
            if buf.filled().len() > before {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, C: Side> AsyncWrite for TlsStream<IO, C> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(e) = this.failure() {
            return Poll::Ready(Err(e));
        }
        if this.closing {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "the TLS stream is closed")));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if this.bufs.out_pending() >= WRITE_BACKLOG {
            ready!(this.poll_send(cx))?;
        }
        let data = &data[..data.len().min(MAX_WRITE)];
        match this.process_with(Encrypt::Data(data))? {
            Next::Writable => {}
            Next::Input => return Poll::Ready(Err(io::Error::other("the TLS handshake is not complete"))),
            Next::Closed => {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "the TLS stream is closed")));
            }
        }
        // Out now if the socket has room; else at the flush.
        if let Poll::Ready(Err(e)) = this.poll_send(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closing {
            this.closing = true;
            if this.failed.is_none() && !this.conn.common().is_handshaking() {
                // A connection that cannot say goodbye still closes.
                let _ = this.process_with(Encrypt::CloseNotify);
            }
        }
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use edgehive_testkit::pki::TestCa;
    use prometheus_client::metrics::counter::Counter;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

    use super::*;
    use crate::config::{ClientTls, Identity, ServerTls};
    use crate::tls::{client_config_for, server_config, server_config_for};

    type Versions = &'static [&'static rustls::SupportedProtocolVersion];
    const TLS13: Versions = &[&rustls::version::TLS13];
    const TLS12: Versions = &[&rustls::version::TLS12];

    struct Pki {
        ca: TestCa,
        server: Arc<rustls::ServerConfig>,
        client: Arc<rustls::ClientConfig>,
    }

    impl Pki {
        /// A client that trusts this server, with a certificate of `ca`.
        fn client_of(&self, ca: &TestCa) -> Arc<rustls::ClientConfig> {
            let node = ca.node("intruder");
            let tls = ClientTls {
                identity: Identity { cert_chain: vec![node.cert], key: node.key },
                server_ca: vec![self.ca.cert.clone()],
            };
            Arc::new(client_config_for(&tls, TLS13).unwrap())
        }
    }

    fn pki(versions: Versions) -> Pki {
        let ca = TestCa::new("tlsio-test-ca");
        let (server, node) = (ca.server(), ca.node("edge-1"));
        let server_tls = ServerTls {
            identity: Identity { cert_chain: vec![server.cert], key: server.key },
            client_ca: vec![ca.cert.clone()],
        };
        let client_tls = ClientTls {
            identity: Identity { cert_chain: vec![node.cert], key: node.key },
            server_ca: vec![ca.cert.clone()],
        };
        let server = if versions.len() == 1 && versions[0].version == rustls::ProtocolVersion::TLSv1_2 {
            Arc::new(server_config_for(&server_tls, versions).unwrap())
        } else {
            server_config(&server_tls, Counter::default(), None).unwrap()
        };
        Pki { ca, server, client: Arc::new(client_config_for(&client_tls, versions).unwrap()) }
    }

    fn name() -> ServerName<'static> {
        ServerName::try_from("localhost").unwrap()
    }

    /// An in-memory pipe whose every read and write moves at most `cut`
    /// bytes, so that records arrive and leave in pieces.
    struct Cut {
        io: DuplexStream,
        cut: usize,
    }

    impl AsyncRead for Cut {
        fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            let n = buf.remaining().min(self.cut);
            let mut part = ReadBuf::new(buf.initialize_unfilled_to(n));
            ready!(Pin::new(&mut self.io).poll_read(cx, &mut part))?;
            let got = part.filled().len();
            buf.advance(got);
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Cut {
        fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
            let n = data.len().min(self.cut);
            Pin::new(&mut self.io).poll_write(cx, &data[..n])
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.io).poll_flush(cx)
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.io).poll_shutdown(cx)
        }
    }

    type Server = TlsStream<Cut, UnbufferedServerConnection>;
    type Client = TlsStream<Cut, UnbufferedClientConnection>;

    /// Both ends over an in-memory pipe that moves `cut` bytes at a time.
    async fn pair(pki: &Pki, cut: usize) -> (Client, Server) {
        let (a, b) = duplex(1 << 20);
        let (client, server) = tokio::join!(
            connect(Cut { io: a, cut }, pki.client.clone(), name()),
            accept(Cut { io: b, cut }, pki.server.clone())
        );
        (client.unwrap(), server.unwrap())
    }

    fn data(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    /// Writes `sent` on one end and reads it on the other `step` bytes at a time.
    async fn carry<W: AsyncWrite + Unpin, R: AsyncRead + Unpin>(w: &mut W, r: &mut R, sent: &[u8], step: usize) {
        let write = async {
            w.write_all(sent).await.unwrap();
            w.flush().await.unwrap();
        };
        let read = async {
            let mut got = Vec::with_capacity(sent.len());
            let mut buf = vec![0u8; step];
            while got.len() < sent.len() {
                let n = r.read(&mut buf).await.unwrap();
                assert!(n > 0, "the stream ended after {} of {} bytes", got.len(), sent.len());
                got.extend_from_slice(&buf[..n]);
            }
            got
        };
        let ((), got) = tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(write, read) })
            .await
            .expect("the data crossed in time");
        assert!(got == sent, "{} bytes came through changed", sent.len());
    }

    #[tokio::test]
    async fn data_crosses_whole_at_every_size_and_cut_and_an_idle_stream_holds_no_buffer() {
        for versions in [TLS13, TLS12] {
            let pki = pki(versions);
            for cut in [5, 64, 1 << 20] {
                let (mut client, mut server) = pair(&pki, cut).await;
                let cn = |id: Option<CertIdentity>| id.and_then(|c| c.common_name);
                assert_eq!(cn(client.peer_identity()).as_deref(), Some("edgehive-cloud"), "the server's certificate");
                assert_eq!(
                    cn(server.peer_identity()).as_deref(),
                    Some("system:node:edge-1"),
                    "the client's certificate"
                );
                for (i, len) in
                    [1, 2, 100, 16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 100_000, 300_000].into_iter().enumerate()
                {
                    let sent = data(len, i as u8);
                    for step in [1, 7, 4096, 64 * 1024] {
                        if step == 1 && len > 20_000 {
                            continue;
                        }
                        carry(&mut client, &mut server, &sent, step).await;
                        carry(&mut server, &mut client, &sent, step).await;
                    }
                }
                assert_eq!(client.held(), 0, "an idle client holds no buffer ({versions:?}, cut {cut})");
                assert_eq!(server.held(), 0, "an idle server holds no buffer ({versions:?}, cut {cut})");
            }
        }
    }

    #[test]
    fn a_record_arriving_slowly_is_kept_in_a_buffer_of_its_size() {
        // A 300-byte record of which 10 bytes came: 4 KiB more at most.
        let mut kept = vec![0x17, 0x03, 0x03, 0x01, 0x2c];
        kept.resize(10, 0);
        assert_eq!(read_size(&kept), 4096);
        // A 16 KiB record of which 100 bytes came: the rest of it.
        kept[3..5].copy_from_slice(&16_401u16.to_be_bytes());
        kept.resize(100, 0);
        assert_eq!(read_size(&kept), 16_406 - 100);
        // A header cut short; records kept whole (a handshake message
        // joined across them).
        assert_eq!(read_size(&[0x16, 0x03]), 4096);
        kept[3..5].copy_from_slice(&50u16.to_be_bytes());
        assert_eq!(read_size(&kept), READ_CHUNK);
    }

    #[tokio::test]
    async fn close_notify_ends_the_stream_and_an_end_without_it_is_an_error() {
        let pki = pki(TLS13);
        let (mut client, mut server) = pair(&pki, 4096).await;
        carry(&mut client, &mut server, b"last words", 64).await;
        client.shutdown().await.unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(server.read(&mut buf).await.unwrap(), 0, "close_notify reads as the end");
        assert_eq!(server.read(&mut buf).await.unwrap(), 0, "and stays the end");
        assert!(client.write_all(b"more").await.is_err(), "nothing is written after the close");

        let (client, mut server) = pair(&pki, 4096).await;
        drop(client);
        let e = server.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        assert!(e.to_string().contains("close_notify"), "{e}");
        assert!(server.write_all(b"x").await.is_err(), "a failed stream stays failed");
    }

    #[tokio::test]
    async fn a_key_update_from_a_buffered_peer_is_followed_and_answered() {
        let pki = pki(TLS13);
        let (a, b) = duplex(4096);
        let (peer, ours) = tokio::join!(
            tokio_rustls::TlsConnector::from(pki.client.clone()).connect(name(), a),
            accept(b, pki.server.clone())
        );
        let (mut peer, mut ours) = (peer.unwrap(), ours.unwrap());
        for round in 0..3u8 {
            peer.get_mut().1.refresh_traffic_keys().unwrap();
            let sent = data(50_000, round);
            carry(&mut peer, &mut ours, &sent, 1000).await;
            // Our answer to the update goes out with our next write; the
            // peer then reads under its new keys.
            carry(&mut ours, &mut peer, &sent, 1000).await;
        }
        assert_eq!(ours.held(), 0);
    }

    #[tokio::test]
    async fn both_ends_work_with_rustls_buffered_peers_and_resume_their_sessions() {
        for versions in [TLS13, TLS12] {
            let pki = pki(versions);
            // Our server, a buffered client (tokio-rustls).
            for round in 0..2 {
                let (a, b) = duplex(4096);
                let (mut peer, ours) = tokio::join!(
                    tokio_rustls::TlsConnector::from(pki.client.clone()).connect(name(), a),
                    accept(b, pki.server.clone())
                );
                let mut ours = ours.unwrap();
                let peer = peer.as_mut().unwrap();
                let kind = ours.common().handshake_kind();
                let want = if round == 0 { rustls::HandshakeKind::Full } else { rustls::HandshakeKind::Resumed };
                assert_eq!(kind, Some(want), "{versions:?} round {round}");
                carry(peer, &mut ours, &data(40_000, 1), 333).await;
                carry(&mut ours, peer, &data(40_000, 2), 333).await;
            }
            // Our client, a buffered server.
            let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
            for round in 0..2 {
                let (a, b) = duplex(4096);
                let (ours, mut peer) = tokio::join!(connect(a, pki.client.clone(), name()), acceptor.accept(b));
                let mut ours = ours.unwrap();
                let peer = peer.as_mut().unwrap();
                let kind = ours.common().handshake_kind();
                if round == 1 {
                    assert_eq!(kind, Some(rustls::HandshakeKind::Resumed), "{versions:?}");
                }
                carry(peer, &mut ours, &data(40_000, 3), 333).await;
                carry(&mut ours, peer, &data(40_000, 4), 333).await;
                ours.shutdown().await.unwrap();
                let mut end = Vec::new();
                peer.read_to_end(&mut end).await.unwrap();
                assert!(end.is_empty());
            }
        }
    }

    #[tokio::test]
    async fn garbage_an_oversize_record_or_a_foreign_certificate_fails_with_a_clear_error() {
        let pki = pki(TLS13);
        // Not TLS at all.
        let (mut a, b) = duplex(4096);
        let (_, ours) = tokio::join!(a.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), accept(b, pki.server.clone()));
        let e = ours.err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");

        // A record header that claims more than a record may hold; the
        // server reads no further than the header.
        let (mut a, b) = duplex(4096);
        let (_, ours) = tokio::join!(a.write_all(&[0x16, 0x03, 0x01, 0xff, 0xff]), accept(b, pki.server.clone()));
        let e = ours.err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");

        // A peer that ends inside the handshake.
        let (a, b) = duplex(4096);
        drop(a);
        let e = accept(b, pki.server.clone()).await.err().unwrap();
        assert!(e.to_string().contains("during the TLS handshake"), "{e}");

        // A client certificate of another CA: the server refuses it and
        // tells the client why.
        let intruder = pki.client_of(&TestCa::new("someone-else"));
        let (a, b) = duplex(4096);
        let (client, server) = tokio::join!(
            async {
                let mut c = connect(a, intruder, name()).await?;
                // TLS 1.3: the client learns at its first read.
                let mut buf = [0u8; 1];
                c.read(&mut buf).await.map(|_| ())
            },
            accept(b, pki.server.clone())
        );
        let e = server.err().unwrap();
        assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
        let e = client.unwrap_err();
        assert!(e.to_string().contains("received fatal alert"), "{e}");

        // A server of another CA: the client refuses it, and the server
        // hears why.
        let (a, b) = duplex(4096);
        let (client, server) = tokio::join!(connect(a, self::pki(TLS13).client, name()), accept(b, pki.server.clone()));
        let e = client.err().unwrap();
        assert!(e.to_string().contains("invalid peer certificate"), "{e}");
        let e = server.err().unwrap();
        assert!(e.to_string().contains("received fatal alert"), "{e}");
    }
}
