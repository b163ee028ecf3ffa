//! WebSocket (RFC 6455) over an established TLS stream: the HTTP upgrade
//! and the framing, holding no buffer while a connection idles.
//!
//! tungstenite keeps a read buffer and a write buffer (the capacity of the
//! largest batch written) for the life of a connection: about 8 KiB on each
//! of the tens of thousands of idle edges a cloud holds, a quarter of what
//! a connection costs it. Here a frame's payload is read into a buffer of
//! its own size that leaves with the frame, and a batch is encoded into a
//! buffer that is freed once written. tungstenite stays for what it does
//! once per connection: the key and its accept value.
//!
//! What the peer wrote right behind the upgrade's head (a server's first
//! message behind its `101`) is kept and read first.
//!
//! The reading half is not cancel-safe inside a frame: the connection's
//! reader drops [`WsReader::next`] only when the connection ends.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Buf, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio_tungstenite::tungstenite::handshake::{client::generate_key, derive_accept_key};

use crate::conn::{FrameRead, FrameWrite, ReadEvent};
use crate::error::CloseReason;

/// Longest upgrade head (request or status line and headers) accepted.
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// Most header lines in an upgrade head.
const MAX_HEADERS: usize = 64;
/// Longest body of a refused upgrade that a client reads for its reason.
const MAX_REFUSAL_BODY: usize = 1024;
/// A batch longer than this is written out before more is encoded, so that
/// a batch of large messages is not held whole.
const WRITE_CHUNK: usize = 64 * 1024;

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;
/// Close status "normal closure".
const CLOSE_NORMAL: u16 = 1000;

/// Reads an HTTP head up to its blank line. Returns the head's bytes and
/// what was read after it.
async fn read_head<S: AsyncRead + Unpin>(io: &mut S) -> io::Result<(Vec<u8>, Bytes)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed before the upgrade's end"));
        }
        let searched = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
            let end = searched + at + 4;
            let tail = Bytes::copy_from_slice(&buf[end..]);
            buf.truncate(end);
            return Ok((buf, tail));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("upgrade head over {MAX_HEAD} bytes")));
        }
    }
}

/// Appends `headers` and the blank line that ends a head.
fn end_head(out: &mut Vec<u8>, headers: &HeaderMap) {
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether a comma-separated header holds `token` (case-insensitive).
fn has_token(headers: &HeaderMap, name: &str, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .any(|v| v.to_str().is_ok_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token))))
}

fn header_map(parsed: &[httparse::Header<'_>]) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::with_capacity(parsed.len());
    for h in parsed {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|e| format!("header name {:?}: {e}", h.name))?;
        let value = HeaderValue::from_bytes(h.value).map_err(|e| format!("header {:?}: {e}", h.name))?;
        map.append(name, value);
    }
    Ok(map)
}

/// Why a server's upgrade failed.
#[derive(Debug)]
pub(crate) enum UpgradeError {
    /// The connection failed or ended: nobody to answer.
    Io(io::Error),
    /// A request that is not a WebSocket upgrade: answered with `400`.
    Refused(String),
}

/// A WebSocket upgrade request read by a server.
pub(crate) struct UpgradeRequest {
    /// The request line and headers.
    pub request: http::Request<()>,
    key: String,
    tail: Bytes,
}

/// Reads and checks a client's upgrade request.
pub(crate) async fn read_request<S: AsyncRead + Unpin>(io: &mut S) -> Result<UpgradeRequest, UpgradeError> {
    let (head, tail) = read_head(io).await.map_err(UpgradeError::Io)?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(UpgradeError::Refused("incomplete request head".into())),
        Err(e) => return Err(UpgradeError::Refused(format!("malformed request: {e}"))),
    }
    if req.method != Some("GET") {
        return Err(UpgradeError::Refused(format!("method {:?}: an upgrade is a GET", req.method.unwrap_or(""))));
    }
    if req.version != Some(1) {
        return Err(UpgradeError::Refused("an upgrade needs HTTP/1.1".into()));
    }
    let map = header_map(req.headers).map_err(UpgradeError::Refused)?;
    if !has_token(&map, "upgrade", "websocket") {
        return Err(UpgradeError::Refused("not a WebSocket upgrade: no \"Upgrade: websocket\"".into()));
    }
    if !has_token(&map, "connection", "upgrade") {
        return Err(UpgradeError::Refused("not a WebSocket upgrade: no \"Connection: Upgrade\"".into()));
    }
    if map.get("sec-websocket-version").map(HeaderValue::as_bytes) != Some(b"13") {
        return Err(UpgradeError::Refused("Sec-WebSocket-Version must be 13".into()));
    }
    let key = match map.get("sec-websocket-key").and_then(|v| v.to_str().ok()).map(str::trim) {
        Some(k) if !k.is_empty() => k.to_owned(),
        _ => return Err(UpgradeError::Refused("missing Sec-WebSocket-Key".into())),
    };
    let mut request = http::Request::builder()
        .method(http::Method::GET)
        .uri(req.path.unwrap_or("/"))
        .version(http::Version::HTTP_11)
        .body(())
        .map_err(|e| UpgradeError::Refused(format!("request target: {e}")))?;
    *request.headers_mut() = map;
    Ok(UpgradeRequest { request, key, tail })
}

impl UpgradeRequest {
    /// Accepts the upgrade with `extra` response headers; returns what the
    /// client sent after its head.
    pub(crate) async fn accept<S: AsyncWrite + Unpin>(self, io: &mut S, extra: &HeaderMap) -> io::Result<Bytes> {
        let mut resp = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n",
            derive_accept_key(self.key.as_bytes())
        )
        .into_bytes();
        end_head(&mut resp, extra);
        io.write_all(&resp).await?;
        io.flush().await?;
        Ok(self.tail)
    }
}

/// Refuses an upgrade with `400` and `reason` as the body, in one write.
pub(crate) async fn refuse<S: AsyncWrite + Unpin>(io: &mut S, reason: &str) -> io::Result<()> {
    let resp = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reason}",
        reason.len()
    );
    io.write_all(resp.as_bytes()).await?;
    io.flush().await?;
    io.shutdown().await
}

/// A client's upgrade: `GET path` on `host` with `headers`. Returns the
/// response's headers and what the server wrote after its head; an `Err`
/// says why the server or the exchange refused.
pub(crate) async fn upgrade_client<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    host: &str,
    path: &str,
    headers: &HeaderMap,
) -> Result<(HeaderMap, Bytes), String> {
    let key = generate_key();
    let mut req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n"
    )
    .into_bytes();
    end_head(&mut req, headers);
    io.write_all(&req).await.map_err(|e| format!("write the upgrade request: {e}"))?;
    io.flush().await.map_err(|e| format!("write the upgrade request: {e}"))?;
    let (head, mut tail) = read_head(io).await.map_err(|e| format!("read the upgrade response: {e}"))?;
    let mut parsed = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut parsed);
    match resp.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("incomplete upgrade response".into()),
        Err(e) => return Err(format!("malformed upgrade response: {e}")),
    }
    let code = resp.code.unwrap_or(0);
    let map = header_map(resp.headers)?;
    if code != 101 {
        // The reason a server gives in its body, when it is short.
        let len = map
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
            .filter(|&n| n <= MAX_REFUSAL_BODY)
            .unwrap_or(0);
        let mut body = tail.to_vec();
        if body.len() < len {
            let mut rest = vec![0u8; len - body.len()];
            if io.read_exact(&mut rest).await.is_ok() {
                body.extend_from_slice(&rest);
            }
        }
        body.truncate(len);
        let reason = String::from_utf8_lossy(&body);
        let status = resp.reason.unwrap_or("");
        return Err(if reason.trim().is_empty() {
            format!("upgrade refused: {code} {status}")
        } else {
            format!("upgrade refused: {code} {status}: {}", reason.trim())
        });
    }
    if !has_token(&map, "upgrade", "websocket") || !has_token(&map, "connection", "upgrade") {
        return Err("the server's 101 is not a WebSocket upgrade".into());
    }
    let accept = derive_accept_key(key.as_bytes());
    if map.get("sec-websocket-accept").map(HeaderValue::as_bytes) != Some(accept.as_bytes()) {
        return Err("the server's Sec-WebSocket-Accept does not match the key".into());
    }
    Ok((map, std::mem::take(&mut tail)))
}

/// Appends one frame: FIN set, masked with a fresh key when `mask`.
fn encode_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8], mask: bool) {
    let len = payload.len();
    out.reserve(len + 14);
    out.push(0x80 | opcode);
    let mask_bit = if mask { 0x80 } else { 0 };
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(mask_bit | 126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    if mask {
        let key = rand::random::<u32>().to_ne_bytes();
        out.extend_from_slice(&key);
        let start = out.len();
        out.extend_from_slice(payload);
        apply_mask(&mut out[start..], key);
    } else {
        out.extend_from_slice(payload);
    }
}

/// XORs `buf` with the masking key (RFC 6455 §5.3).
fn apply_mask(buf: &mut [u8], key: [u8; 4]) {
    let word = u64::from_ne_bytes([key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3]]);
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) ^ word;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i & 3];
    }
}

/// The writing half, shared by the writer and the reader (which answers
/// pings).
struct Shared<S> {
    io: tokio::sync::Mutex<WriteHalf<S>>,
    /// A close frame was written.
    closed: AtomicBool,
    /// Frames this side writes are masked (it is the client).
    client: bool,
}

impl<S: AsyncRead + AsyncWrite> Shared<S> {
    async fn write(&self, buf: &[u8]) -> Result<(), CloseReason> {
        let mut io = self.io.lock().await;
        io.write_all(buf).await.map_err(io_reason)?;
        io.flush().await.map_err(io_reason)
    }
}

fn io_reason(e: io::Error) -> CloseReason {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => CloseReason::Transport("connection reset without closing handshake".into()),
        _ => CloseReason::Transport(e.to_string()),
    }
}

/// Splits a stream that finished its upgrade into the two halves; `tail`
/// is what was read past the upgrade's head. `client`: this side dialled
/// (and masks what it writes, and refuses masked frames).
pub(crate) fn split<S: AsyncRead + AsyncWrite + Send + 'static>(
    io: S,
    tail: Bytes,
    client: bool,
    limit: usize,
) -> (WsReader<S>, WsWriter<S>) {
    let (r, w) = tokio::io::split(io);
    let shared = Arc::new(Shared { io: tokio::sync::Mutex::new(w), closed: AtomicBool::new(false), client });
    let reader = WsReader { io: r, tail, limit, message: None, shared: shared.clone() };
    (reader, WsWriter { shared, out: Vec::new() })
}

/// One frame as read.
struct RawFrame {
    fin: bool,
    opcode: u8,
    payload: Vec<u8>,
}

/// The reading half: yields whole messages.
pub(crate) struct WsReader<S> {
    io: ReadHalf<S>,
    tail: Bytes,
    limit: usize,
    /// A fragmented message so far: whether it is text, and its bytes.
    message: Option<(bool, Vec<u8>)>,
    shared: Arc<Shared<S>>,
}

impl<S: AsyncRead + AsyncWrite> WsReader<S> {
    /// Fills `buf`, from what the upgrade left over first.
    async fn fill(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let from_tail = self.tail.len().min(buf.len());
        if from_tail > 0 {
            buf[..from_tail].copy_from_slice(&self.tail[..from_tail]);
            self.tail.advance(from_tail);
        }
        if from_tail < buf.len() {
            self.io.read_exact(&mut buf[from_tail..]).await?;
        }
        Ok(())
    }

    /// The rest of a frame whose first two bytes are `h`.
    async fn frame(&mut self, h: [u8; 2]) -> Result<RawFrame, CloseReason> {
        let inside = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof => CloseReason::Transport("connection ended inside a frame".into()),
            _ => CloseReason::Transport(e.to_string()),
        };
        let (fin, opcode, masked) = (h[0] & 0x80 != 0, h[0] & 0x0F, h[1] & 0x80 != 0);
        if h[0] & 0x70 != 0 {
            return Err(CloseReason::Transport("WebSocket frame with reserved bits set".into()));
        }
        let len = match h[1] & 0x7F {
            126 => {
                let mut b = [0u8; 2];
                self.fill(&mut b).await.map_err(inside)?;
                u64::from(u16::from_be_bytes(b))
            }
            127 => {
                let mut b = [0u8; 8];
                self.fill(&mut b).await.map_err(inside)?;
                u64::from_be_bytes(b)
            }
            n => u64::from(n),
        };
        let client = self.shared.client;
        if masked == client {
            return Err(CloseReason::Transport(if client {
                "masked frame from the server".into()
            } else {
                "unmasked frame from the client".into()
            }));
        }
        let control = opcode & 0x8 != 0;
        if control && (!fin || len > 125) {
            return Err(CloseReason::Transport("fragmented or oversize WebSocket control frame".into()));
        }
        let so_far = self.message.as_ref().map_or(0, |(_, b)| b.len());
        let len = match usize::try_from(len) {
            Ok(n) if control || n.saturating_add(so_far) <= self.limit => n,
            _ => return Err(CloseReason::FrameTooLarge { limit: self.limit }),
        };
        let mut key = [0u8; 4];
        if masked {
            self.fill(&mut key).await.map_err(inside)?;
        }
        let mut payload = vec![0u8; len];
        self.fill(&mut payload).await.map_err(inside)?;
        if masked {
            apply_mask(&mut payload, key);
        }
        Ok(RawFrame { fin, opcode, payload })
    }

    async fn read_event(&mut self, h: [u8; 2]) -> Result<ReadEvent, CloseReason> {
        let f = self.frame(h).await?;
        let (text, data) = match (f.opcode, self.message.take()) {
            (OP_TEXT | OP_BINARY, None) => (f.opcode == OP_TEXT, f.payload),
            (OP_CONTINUATION, Some((text, mut data))) => {
                data.extend_from_slice(&f.payload);
                (text, data)
            }
            (OP_CONTINUATION, None) => {
                return Err(CloseReason::Transport("continuation frame outside a message".into()));
            }
            (OP_TEXT | OP_BINARY, Some(_)) => {
                return Err(CloseReason::Transport("a new message inside a fragmented one".into()));
            }
            (OP_CLOSE, _) => return Ok(ReadEvent::End(CloseReason::PeerClosed)),
            (OP_PING, partial) => {
                self.message = partial;
                if !self.shared.closed.load(Ordering::Acquire) {
                    let mut pong = Vec::with_capacity(f.payload.len() + 14);
                    encode_frame(&mut pong, OP_PONG, &f.payload, self.shared.client);
                    self.shared.write(&pong).await?;
                }
                return Ok(ReadEvent::Alive);
            }
            (OP_PONG, partial) => {
                self.message = partial;
                return Ok(ReadEvent::Alive);
            }
            (op, _) => return Err(CloseReason::Transport(format!("WebSocket frame with unknown opcode {op:#x}"))),
        };
        if !f.fin {
            self.message = Some((text, data));
            return Ok(ReadEvent::Alive);
        }
        if text && let Err(e) = std::str::from_utf8(&data) {
            return Err(CloseReason::Malformed(format!("text frame is not UTF-8: {e}")));
        }
        Ok(ReadEvent::Data(Bytes::from(data)))
    }
}

impl<S: AsyncRead + AsyncWrite + Send + 'static> FrameRead for WsReader<S> {
    async fn next(&mut self) -> ReadEvent {
        // An idle connection waits here, in a small future; the rest of the
        // frame (and a pong to write) is read in a boxed one, allocated per
        // frame, so the reader task does not hold room for it while idle.
        let mut h = [0u8; 2];
        if let Err(e) = self.fill(&mut h).await {
            return ReadEvent::End(io_reason(e));
        }
        Box::pin(self.read_event(h)).await.unwrap_or_else(ReadEvent::End)
    }
}

/// The writing half: encodes a batch, writes it at flush, keeps nothing.
pub(crate) struct WsWriter<S> {
    shared: Arc<Shared<S>>,
    out: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite> WsWriter<S> {
    async fn put(&mut self, opcode: u8, payload: &[u8]) -> Result<(), CloseReason> {
        encode_frame(&mut self.out, opcode, payload, self.shared.client);
        if self.out.len() >= WRITE_CHUNK {
            self.write_out().await?;
        }
        Ok(())
    }

    async fn write_out(&mut self) -> Result<(), CloseReason> {
        if self.out.is_empty() {
            return Ok(());
        }
        // Kept for the next flush once written; a write given up on (its
        // connection closes) takes what it did not write with it.
        let mut buf = std::mem::take(&mut self.out);
        self.shared.write(&buf).await?;
        buf.clear();
        self.out = buf;
        Ok(())
    }
}

impl<S: AsyncRead + AsyncWrite + Send + 'static> FrameWrite for WsWriter<S> {
    async fn feed(&mut self, line: &[u8]) -> Result<(), CloseReason> {
        self.put(OP_TEXT, line).await
    }
    async fn feed_binary(&mut self, frame: Bytes) -> Result<(), CloseReason> {
        self.put(OP_BINARY, &frame).await
    }
    async fn flush(&mut self) -> Result<(), CloseReason> {
        self.write_out().await
    }
    async fn ping(&mut self) -> Result<(), CloseReason> {
        encode_frame(&mut self.out, OP_PING, &[], self.shared.client);
        self.write_out().await
    }
    async fn close(&mut self) {
        if !self.shared.closed.swap(true, Ordering::AcqRel) {
            encode_frame(&mut self.out, OP_CLOSE, &CLOSE_NORMAL.to_be_bytes(), self.shared.client);
            let _ = self.write_out().await;
        }
        let _ = self.shared.io.lock().await.shutdown().await;
    }
    fn release(&mut self) {
        self.out = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masking_twice_restores_the_payload_at_every_length() {
        let key = [0x12, 0x34, 0x56, 0x78];
        for len in 0..40 {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut buf = data.clone();
            apply_mask(&mut buf, key);
            for (i, (m, d)) in buf.iter().zip(&data).enumerate() {
                assert_eq!(*m, d ^ key[i % 4], "byte {i} of {len}");
            }
            apply_mask(&mut buf, key);
            assert_eq!(buf, data);
        }
    }

    #[test]
    fn lengths_take_the_shortest_form() {
        for (len, header) in [(0usize, 2usize), (125, 2), (126, 4), (65_535, 4), (65_536, 10)] {
            let mut out = Vec::new();
            encode_frame(&mut out, OP_BINARY, &vec![7u8; len], false);
            assert_eq!(out.len(), header + len, "{len}");
            let mut masked = Vec::new();
            encode_frame(&mut masked, OP_BINARY, &vec![7u8; len], true);
            assert_eq!(masked.len(), header + 4 + len, "{len} masked");
            assert_eq!(masked[1] & 0x80, 0x80);
        }
    }

    use tokio::io::DuplexStream;

    /// A frame as a client writes it, with FIN as given.
    fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(&mut out, opcode, payload, true);
        if !fin {
            out[0] &= 0x7F;
        }
        out
    }

    /// A server's reading half on one end, the client's raw end.
    fn server_side(limit: usize) -> (WsReader<DuplexStream>, WsWriter<DuplexStream>, DuplexStream) {
        let (ours, peer) = tokio::io::duplex(1 << 20);
        let (r, w) = split(ours, Bytes::new(), false, limit);
        (r, w, peer)
    }

    async fn event_after(bytes: &[u8], limit: usize) -> ReadEvent {
        let (mut r, _w, mut peer) = server_side(limit);
        peer.write_all(bytes).await.unwrap();
        drop(peer);
        loop {
            match r.next().await {
                ReadEvent::Alive => continue,
                e => return e,
            }
        }
    }

    fn end_reason(e: ReadEvent) -> CloseReason {
        match e {
            ReadEvent::End(r) => r,
            ReadEvent::Data(d) => panic!("data {d:?} where an end was due"),
            ReadEvent::Alive => unreachable!(),
        }
    }

    #[tokio::test]
    async fn fragments_assemble_around_a_ping_which_is_answered() {
        let (mut r, _w, mut peer) = server_side(1024);
        let mut bytes = client_frame(false, OP_TEXT, b"{\"he");
        bytes.extend(client_frame(true, OP_PING, b"p"));
        bytes.extend(client_frame(false, OP_CONTINUATION, b"llo"));
        bytes.extend(client_frame(true, OP_CONTINUATION, b"\":1}"));
        bytes.extend(client_frame(true, OP_BINARY, b"bin"));
        peer.write_all(&bytes).await.unwrap();
        assert!(matches!(r.next().await, ReadEvent::Alive));
        assert!(matches!(r.next().await, ReadEvent::Alive));
        // The pong, unmasked from a server, with the ping's payload.
        let mut pong = [0u8; 3];
        peer.read_exact(&mut pong).await.unwrap();
        assert_eq!(pong, [0x80 | OP_PONG, 1, b'p']);
        assert!(matches!(r.next().await, ReadEvent::Alive));
        assert!(matches!(r.next().await, ReadEvent::Data(d) if d == b"{\"hello\":1}"[..]));
        assert!(matches!(r.next().await, ReadEvent::Data(d) if d == b"bin"[..]));
        peer.write_all(&client_frame(true, OP_CLOSE, &CLOSE_NORMAL.to_be_bytes())).await.unwrap();
        assert_eq!(end_reason(r.next().await), CloseReason::PeerClosed);
    }

    #[tokio::test]
    async fn protocol_violations_end_the_connection_with_a_reason() {
        let transport =
            |want: &'static str| move |r: CloseReason| matches!(&r, CloseReason::Transport(m) if m.contains(want));
        let mut unmasked = Vec::new();
        encode_frame(&mut unmasked, OP_TEXT, b"{}", false);
        let mut reserved = client_frame(true, OP_TEXT, b"{}");
        reserved[0] |= 0x40;
        let mut over = client_frame(false, OP_BINARY, &[1; 600]);
        over.extend(client_frame(true, OP_CONTINUATION, &[1; 600]));
        let mut two_starts = client_frame(false, OP_TEXT, b"a");
        two_starts.extend(client_frame(true, OP_TEXT, b"b"));
        let truncated = client_frame(true, OP_BINARY, &[1; 100])[..50].to_vec();
        type Check = Box<dyn Fn(CloseReason) -> bool>;
        let cases: Vec<(&str, Vec<u8>, Check)> = vec![
            ("unmasked", unmasked, Box::new(transport("unmasked frame from the client"))),
            ("reserved bits", reserved, Box::new(transport("reserved bits"))),
            ("lone continuation", client_frame(true, OP_CONTINUATION, b"x"), Box::new(transport("outside a message"))),
            ("two starts", two_starts, Box::new(transport("inside a fragmented one"))),
            ("big ping", client_frame(true, OP_PING, &[0; 126]), Box::new(transport("control frame"))),
            ("split ping", client_frame(false, OP_PING, b"x"), Box::new(transport("control frame"))),
            ("opcode 3", client_frame(true, 0x3, b"x"), Box::new(transport("unknown opcode"))),
            (
                "big frame",
                client_frame(true, OP_BINARY, &[1; 1025]),
                Box::new(|r| r == CloseReason::FrameTooLarge { limit: 1024 }),
            ),
            ("big message", over, Box::new(|r| r == CloseReason::FrameTooLarge { limit: 1024 })),
            (
                "text not UTF-8",
                client_frame(true, OP_TEXT, &[0xC3, 0x28]),
                Box::new(|r| matches!(r, CloseReason::Malformed(m) if m.contains("UTF-8"))),
            ),
            ("cut inside a frame", truncated, Box::new(transport("inside a frame"))),
            ("no close frame", Vec::new(), Box::new(transport("without closing handshake"))),
        ];
        for (what, bytes, expected) in cases {
            let reason = end_reason(event_after(&bytes, 1024).await);
            assert!(expected(reason.clone()), "{what}: {reason:?}");
        }
    }

    #[tokio::test]
    async fn a_client_refuses_a_masked_frame_and_masks_its_own() {
        let (ours, mut peer) = tokio::io::duplex(1 << 16);
        let (mut r, mut w) = split(ours, Bytes::new(), true, 1024);
        w.feed(b"{}").await.unwrap();
        w.flush().await.unwrap();
        let mut head = [0u8; 8];
        peer.read_exact(&mut head).await.unwrap();
        assert_eq!(head[1], 0x80 | 2, "masked, two bytes");
        let key = [head[2], head[3], head[4], head[5]];
        assert_eq!([head[6] ^ key[0], head[7] ^ key[1]], *b"{}");
        peer.write_all(&client_frame(true, OP_TEXT, b"{}")).await.unwrap();
        assert!(
            matches!(end_reason(r.next().await), CloseReason::Transport(m) if m.contains("masked frame from the server"))
        );
    }

    #[tokio::test]
    async fn a_frame_written_behind_the_101_is_read_first() {
        let (mut ours, mut server) = tokio::io::duplex(1 << 16);
        let serve = tokio::spawn(async move {
            let req = read_request(&mut server).await.unwrap();
            assert_eq!(req.request.uri().path(), "/p/edge-1/events");
            assert_eq!(req.request.headers()["node_id"], "edge-1");
            // The 101 and the first message in one write.
            let mut resp = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\nX-Extra: 1\r\n\r\n",
                derive_accept_key(req.key.as_bytes())
            )
            .into_bytes();
            encode_frame(&mut resp, OP_TEXT, b"{\"first\":1}", false);
            server.write_all(&resp).await.unwrap();
            server
        });
        let mut headers = HeaderMap::new();
        headers.insert("node_id", HeaderValue::from_static("edge-1"));
        let (resp, tail) = upgrade_client(&mut ours, "cloud:10000", "/p/edge-1/events", &headers).await.unwrap();
        assert_eq!(resp["x-extra"], "1");
        assert!(!tail.is_empty(), "the frame came with the head");
        let _server = serve.await.unwrap();
        let (mut r, _w) = split(ours, tail, true, 1024);
        assert!(matches!(r.next().await, ReadEvent::Data(d) if d == b"{\"first\":1}"[..]));
    }

    async fn request_outcome(head: &str) -> Result<UpgradeRequest, UpgradeError> {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        b.write_all(head.as_bytes()).await.unwrap();
        read_request(&mut a).await
    }

    #[tokio::test]
    async fn requests_that_are_not_upgrades_are_refused_with_a_reason() {
        let good = "Host: h\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
        let ok = request_outcome(&format!("GET /x HTTP/1.1\r\n{good}\r\n")).await.unwrap();
        assert_eq!(ok.key, "dGhlIHNhbXBsZSBub25jZQ==");
        for (what, head, want) in [
            ("POST", format!("POST /x HTTP/1.1\r\n{good}\r\n"), "GET"),
            ("HTTP/1.0", format!("GET /x HTTP/1.0\r\n{good}\r\n"), "HTTP/1.1"),
            (
                "no upgrade",
                "GET /x HTTP/1.1\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: k\r\n\r\n"
                    .into(),
                "Upgrade: websocket",
            ),
            (
                "no connection",
                "GET /x HTTP/1.1\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: k\r\n\r\n"
                    .into(),
                "Connection: Upgrade",
            ),
            (
                "version 8",
                format!("GET /x HTTP/1.1\r\n{}\r\n", good.replace("Version: 13", "Version: 8")),
                "must be 13",
            ),
            (
                "no key",
                "GET /x HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n"
                    .into(),
                "Sec-WebSocket-Key",
            ),
            ("garbage", "\x01\x02 nonsense\r\n\r\n".into(), "malformed"),
        ] {
            match request_outcome(&head).await {
                Err(UpgradeError::Refused(reason)) => assert!(reason.contains(want), "{what}: {reason}"),
                Err(UpgradeError::Io(e)) => panic!("{what}: {e}"),
                Ok(_) => panic!("{what}: accepted"),
            }
        }
        // A head that never ends is cut at the limit.
        let endless = format!("GET /x HTTP/1.1\r\nX: {}\r\n", "a".repeat(MAX_HEAD));
        assert!(
            matches!(request_outcome(&endless).await, Err(UpgradeError::Io(e)) if e.kind() == io::ErrorKind::InvalidData)
        );
    }

    #[tokio::test]
    async fn a_client_reports_a_refusal_and_a_wrong_accept_key() {
        let refusal = "HTTP/1.1 400 Bad Request\r\nContent-Length: 22\r\n\r\nmissing node_id header";
        let wrong_key = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: nope\r\n\r\n";
        for (resp, want) in
            [(refusal, "upgrade refused: 400 Bad Request: missing node_id header"), (wrong_key, "does not match")]
        {
            let (mut a, mut b) = tokio::io::duplex(1 << 16);
            let server = tokio::spawn(async move {
                read_head(&mut b).await.unwrap();
                b.write_all(resp.as_bytes()).await.unwrap();
                b
            });
            let err = upgrade_client(&mut a, "h", "/x", &HeaderMap::new()).await.err().unwrap();
            assert!(err.contains(want), "{err}");
            drop(server.await);
        }
    }
}
