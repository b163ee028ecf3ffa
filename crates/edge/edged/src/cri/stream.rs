//! `kubectl exec` on the CRI runtime, the way kubelet serves it: the
//! runtime's `Exec` answers with a URL on its streaming server (containerd:
//! plain HTTP on `stream_server_address`, a one-time token in the path);
//! edged connects to it as the client and relays Kubernetes' remote command
//! channels between it and the stream session (docs/protocol.md §9): the
//! client's stdin and terminal sizes go up, the command's stdout and stderr
//! come back, then the final status the server wrote on the error channel,
//! passed on as it is (it is kubelet's own `Status`, exit code included).
//!
//! The CRI streaming servers (kubelet's streaming code: containerd 1.6 and
//! 1.7 carry a copy as `pkg/cri/streaming`, later ones vendor
//! `k8s.io/cri-streaming`) speak two transports, and edged uses both:
//!
//! - **WebSocket**, for a command without stdin: `v5.channel.k8s.io` when
//!   the server has it (none had it yet, containerd's main branch
//!   included), else `v4.channel.k8s.io` (JSON status), else
//!   `channel.k8s.io`. One binary message per channel message, channel
//!   byte first: the session's own framing.
//! - **SPDY/3.1** (`v4.channel.k8s.io`, down to `channel.k8s.io`), for a
//!   command with stdin: one SPDY stream per channel. `kubectl exec -i`
//!   and `kubectl cp` close stdin at the end of their input (channel 255)
//!   and the command must see that end while its output and status still
//!   come back. The WebSocket protocols these servers speak cannot say it:
//!   v4 has no close signal, and closing the WebSocket ends the exec at the
//!   server, output and status with it (kubernetes/kubernetes#89899; this is
//!   why the API server of KEP-4006 turns a client's v5 into SPDY towards
//!   kubelet). A SPDY stream half-closes: the close becomes FIN on the stdin
//!   stream.
//!
//! SPDY is framed here by hand, the part the servers use (moby/spdystream):
//! SYN_STREAM for each channel (headers `streamtype: error|stdin|stdout|
//! stderr|resize`, the streams kubelet's protocol handler waits for), DATA
//! both ways, PING answered, GOAWAY as the end. Header blocks must be zlib
//! data for the server's dictionary-primed decompressor: they are written
//! as stored (uncompressed) deflate blocks, which need no compressor and
//! never refer to the dictionary; the server's header blocks (SYN_REPLY)
//! are skipped unread. There is no flow control (spdystream has none).
//!
//! Every wait is bounded: the `Exec` call by the runtime's request
//! deadline, the connection and its handshake by [`CONNECT_DEADLINE`], and
//! all of it by the session (a reset stops it). The relay lasts as long as
//! the session; a reset from the cloud closes the connection, which ends
//! the exec's streams at the runtime, the command's stdin with them (as a
//! client going away does with kubelet: a command that does not read its
//! input runs on until it ends).

use std::io;
use std::time::Duration;

use bytes::Bytes;
use edgehive_model::session::channel;
use edgehive_viaduct::stream::MAX_DATA;
use edgehive_viaduct::{StreamRx, StreamTx};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt as _, StreamExt as _};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_util::task::AbortOnDropHandle;

use super::api;
use crate::runtime::ExecSpec;
use crate::streams::{fail, framed, status};

/// Longest wait for the streaming server to accept the connection and
/// finish its handshake.
pub(crate) const CONNECT_DEADLINE: Duration = Duration::from_secs(10);
/// Largest status kept from the error channel (kubelet's are a few hundred
/// bytes).
const MAX_STATUS: usize = 64 * 1024;
/// Largest HTTP answer head read before the SPDY upgrade.
const MAX_ANSWER_HEAD: usize = 16 * 1024;

/// The `Exec` request for a session's command, as kubelet makes it (no
/// stderr with a terminal: it merges both outputs), or why there is none.
pub(crate) fn exec_request(container_id: &str, spec: &ExecSpec) -> Result<api::ExecRequest, String> {
    if spec.command.is_empty() {
        return Err("you must specify at least one command for the container".into());
    }
    let req = api::ExecRequest {
        container_id: container_id.to_owned(),
        cmd: spec.command.clone(),
        tty: spec.tty,
        stdin: spec.stdin,
        stdout: spec.stdout,
        stderr: spec.stderr && !spec.tty,
    };
    if !(req.stdin || req.stdout || req.stderr) {
        return Err("you must specify at least one of stdin, stdout, stderr".into());
    }
    Ok(req)
}

/// Connects to the streaming URL the runtime gave for `req` (relative
/// ones against `base`) and relays the session until the command's status
/// came back or the session is reset.
pub(crate) async fn run(base: &str, url: &str, req: &api::ExecRequest, tx: StreamTx, rx: StreamRx) {
    let target = match resolve(base, url) {
        Ok(t) => t,
        Err(e) => return fail(tx, format!("error executing command in container: {e}")).await,
    };
    let connect = async { if req.stdin { connect_spdy(&target, req).await } else { connect_ws(&target).await } };
    let up = tokio::select! {
        r = tokio::time::timeout(CONNECT_DEADLINE, connect) => r,
        () = tx.reset_by_peer() => return,
    };
    let up = match up {
        Ok(Ok(up)) => up,
        Ok(Err(e)) => return fail(tx, format!("error executing command in container: {}: {e}", target.show())).await,
        Err(_) => {
            let why = format!("no answer within {CONNECT_DEADLINE:?}");
            return fail(tx, format!("error executing command in container: {}: {why}", target.show())).await;
        }
    };
    tracing::info!(server = %target.authority, transport = %up.transport(), protocol = %up.protocol.name(), "exec stream connected");
    relay(up, tx, rx).await;
}

/// Where a streaming URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `host:port` to connect to.
    pub(crate) addr: String,
    /// The `Host` header.
    pub(crate) authority: String,
    /// Path and query.
    pub(crate) path: String,
}

impl Target {
    pub(crate) fn show(&self) -> String {
        format!("http://{}{}", self.authority, self.path)
    }
}

/// Scheme, authority and the rest of an absolute URL.
fn split_absolute(u: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = u.split_once("://")?;
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some((scheme, &rest[..end], &rest[end..]))
}

/// The streaming server `url` names: an absolute URL as it is, a relative
/// one (`/exec/{token}`, `exec/{token}`, `//host:port/…`) against `base`
/// (RFC 3986's rules, without dot segments). Only plain HTTP is spoken.
pub(crate) fn resolve(base: &str, url: &str) -> Result<Target, String> {
    let url = url.trim();
    if url.is_empty() {
        return Err("the runtime gave no streaming URL".into());
    }
    let (scheme, authority, path) = match split_absolute(url) {
        Some((s, a, p)) => (s.to_owned(), a.to_owned(), p.to_owned()),
        None => {
            let (bs, ba, bp) = split_absolute(base)
                .ok_or_else(|| format!("streaming URL {url:?} is relative and the base {base:?} is not absolute"))?;
            if let Some(net) = url.strip_prefix("//") {
                let end = net.find(['/', '?', '#']).unwrap_or(net.len());
                (bs.to_owned(), net[..end].to_owned(), net[end..].to_owned())
            } else if url.starts_with('/') {
                (bs.to_owned(), ba.to_owned(), url.to_owned())
            } else {
                let bp = bp.split(['?', '#']).next().unwrap_or_default();
                let dir = bp.rfind('/').map_or("/", |i| &bp[..=i]);
                (bs.to_owned(), ba.to_owned(), format!("{dir}{url}"))
            }
        }
    };
    match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => {}
        "https" | "wss" => {
            return Err(format!(
                "streaming URL {url:?}: a TLS streaming server is not supported (the runtime's default is plain HTTP on loopback)"
            ));
        }
        other => return Err(format!("streaming URL {url:?}: scheme {other:?} is not supported")),
    }
    // No user information goes to the server; nor does a fragment.
    let authority = authority.rsplit_once('@').map_or(authority.as_str(), |(_, h)| h).to_owned();
    let path = path.split('#').next().unwrap_or_default();
    let path = if path.is_empty() || path.starts_with('?') { format!("/{path}") } else { path.to_owned() };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, Some(p)),
        _ => (authority.as_str(), None),
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("streaming URL {url:?} names no host"));
    }
    let addr = if port.is_some() { authority.clone() } else { format!("{authority}:80") };
    Ok(Target { addr, authority, path })
}

/// A remote command protocol version (`channel.k8s.io` is the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Protocol {
    V1,
    V2,
    V3,
    V4,
    V5,
}

impl Protocol {
    /// What a server answered; an empty answer is the first version.
    pub(crate) fn parse(name: &str) -> Option<Protocol> {
        match name.trim() {
            "" | "channel.k8s.io" => Some(Protocol::V1),
            "v2.channel.k8s.io" => Some(Protocol::V2),
            "v3.channel.k8s.io" => Some(Protocol::V3),
            "v4.channel.k8s.io" => Some(Protocol::V4),
            "v5.channel.k8s.io" => Some(Protocol::V5),
            _ => None,
        }
    }

    /// Its name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::V1 => "channel.k8s.io",
            Protocol::V2 => "v2.channel.k8s.io",
            Protocol::V3 => "v3.channel.k8s.io",
            Protocol::V4 => "v4.channel.k8s.io",
            Protocol::V5 => "v5.channel.k8s.io",
        }
    }
}

/// Asked of a WebSocket server, best first (no base64 variants).
pub(crate) const WS_PROTOCOLS: &str = "v5.channel.k8s.io, v4.channel.k8s.io, channel.k8s.io";
/// Asked of a SPDY server, best first.
pub(crate) const SPDY_PROTOCOLS: [&str; 4] =
    ["v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"];

/// How the connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// The server closed it (WebSocket close, SPDY GOAWAY).
    Clean,
    /// It broke, and why.
    Broken(String),
}

/// The session's final frame, from what the server wrote on the error
/// channel: from v4 on a JSON `Status` (kubelet's, exit code included),
/// passed on unchanged; before v4 a failure's message as text, and nothing
/// for success.
pub(crate) fn final_status(protocol: Protocol, error: &[u8], end: &End) -> Bytes {
    if !error.is_empty() {
        let json =
            protocol >= Protocol::V4 && serde_json::from_slice::<serde_json::Value>(error).is_ok_and(|v| v.is_object());
        return if json {
            framed(channel::ERROR, error)
        } else {
            status(Some(Err(String::from_utf8_lossy(error).trim().to_owned())))
        };
    }
    match end {
        End::Broken(why) => status(Some(Err(format!(
            "error executing command in container: the connection to the container runtime's streaming server broke: {why}"
        )))),
        End::Clean if protocol >= Protocol::V4 => status(Some(Err(
            "error executing command in container: the container runtime's streaming server ended without the command's status"
                .into(),
        ))),
        End::Clean => status(None),
    }
}

/// What goes to a WebSocket server for one frame of the client, if
/// anything: stdin and terminal sizes as they are; a close of stdin only
/// where the protocol has it (v5). (A command with stdin goes over SPDY, so
/// only a stdin the server never opened loses its close here.)
pub(crate) fn ws_input(protocol: Protocol, frame: &Bytes) -> Option<Bytes> {
    match frame.first() {
        Some(&channel::STDIN) if frame.len() > 1 => Some(frame.clone()),
        Some(&channel::RESIZE) => Some(frame.clone()),
        Some(&channel::CLOSE) if protocol >= Protocol::V5 => Some(frame.clone()),
        _ => None,
    }
}

/// The SPDY streams of an exec, by id (the client's are odd, in the order
/// made): the error stream first, then those the request asked for —
/// exactly the number kubelet's protocol handler waits for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Streams {
    pub(crate) error: u32,
    pub(crate) stdin: Option<u32>,
    pub(crate) stdout: Option<u32>,
    pub(crate) stderr: Option<u32>,
    pub(crate) resize: Option<u32>,
}

impl Streams {
    /// The streams for `req` under `protocol` (a resize stream from v3 on).
    pub(crate) fn plan(req: &api::ExecRequest, protocol: Protocol) -> Streams {
        let mut next = 1;
        let mut take = |on: bool| {
            on.then(|| {
                let id = next;
                next += 2;
                id
            })
        };
        let error = take(true).unwrap_or(1);
        let stdin = take(req.stdin);
        let stdout = take(req.stdout);
        let stderr = take(req.stderr && !req.tty);
        let resize = take(req.tty && protocol >= Protocol::V3);
        Streams { error, stdin, stdout, stderr, resize }
    }

    /// Each stream with its `streamtype`, in the order to open them.
    pub(crate) fn opened(&self) -> Vec<(u32, &'static str)> {
        [
            (Some(self.error), "error"),
            (self.stdin, "stdin"),
            (self.stdout, "stdout"),
            (self.stderr, "stderr"),
            (self.resize, "resize"),
        ]
        .into_iter()
        .filter_map(|(id, kind)| id.map(|id| (id, kind)))
        .collect()
    }

    /// The channel a stream of the server's carries.
    pub(crate) fn channel(&self, id: u32) -> Option<u8> {
        if id == self.error {
            Some(channel::ERROR)
        } else if Some(id) == self.stdout {
            Some(channel::STDOUT)
        } else if Some(id) == self.stderr {
            Some(channel::STDERR)
        } else {
            None
        }
    }
}

/// What one frame of the client becomes towards a SPDY server.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SpdyInput<'a> {
    /// Data on this stream.
    Data(u32, &'a [u8]),
    /// FIN on the stdin stream.
    CloseStdin,
    /// Nothing (a channel the server did not open, or no data).
    Nothing,
}

/// Translates one frame of the client for a SPDY server.
pub(crate) fn spdy_input<'a>(streams: &Streams, frame: &'a [u8]) -> SpdyInput<'a> {
    let Some((&ch, data)) = frame.split_first() else { return SpdyInput::Nothing };
    let stream = match ch {
        channel::STDIN => streams.stdin,
        channel::RESIZE => streams.resize,
        channel::CLOSE if data == [channel::STDIN] && streams.stdin.is_some() => return SpdyInput::CloseStdin,
        _ => None,
    };
    match stream {
        Some(id) if !data.is_empty() => SpdyInput::Data(id, data),
        _ => SpdyInput::Nothing,
    }
}

/// SPDY/3 frames, the part a remote command client uses.
pub(crate) mod spdy {
    use bytes::Bytes;

    const VERSION: u16 = 3;
    pub(crate) const SYN_STREAM: u16 = 1;
    pub(crate) const RST_STREAM: u16 = 3;
    pub(crate) const PING: u16 = 6;
    pub(crate) const GOAWAY: u16 = 7;
    const FLAG_FIN: u8 = 1;

    /// Header blocks as one zlib stream (SPDY compresses every header
    /// block of a direction as one stream): the zlib header once, then each
    /// block as stored, non-final deflate blocks and a sync flush, as a
    /// compressor's flush ends each. A decompressor primed with SPDY's
    /// dictionary reads them (no dictionary flag: none is referred to).
    #[derive(Debug, Default)]
    pub(crate) struct Headers {
        started: bool,
    }

    impl Headers {
        /// One header block (`pairs`, names lower case).
        pub(crate) fn encode(&mut self, pairs: &[(&str, &str)]) -> Vec<u8> {
            let mut raw = Vec::new();
            let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes();
            raw.extend_from_slice(&len(pairs.len()));
            for (k, v) in pairs {
                raw.extend_from_slice(&len(k.len()));
                raw.extend_from_slice(k.as_bytes());
                raw.extend_from_slice(&len(v.len()));
                raw.extend_from_slice(v.as_bytes());
            }
            let mut out = Vec::with_capacity(raw.len() + 7);
            if !std::mem::replace(&mut self.started, true) {
                // CMF: deflate, 32 KiB window; FLG: no dictionary, check bits.
                out.extend_from_slice(&[0x78, 0x01]);
            }
            for chunk in raw.chunks(usize::from(u16::MAX)) {
                let n = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
                // BFINAL 0, BTYPE 00 (stored), padding to the byte.
                out.push(0);
                out.extend_from_slice(&n.to_le_bytes());
                out.extend_from_slice(&(!n).to_le_bytes());
                out.extend_from_slice(chunk);
            }
            // A sync flush (an empty stored block): a decompressor hands
            // out what it has only there, without reading past the frame.
            out.extend_from_slice(&[0, 0, 0, 0xff, 0xff]);
            out
        }
    }

    fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::with_capacity(8 + payload.len());
        f.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
        f.extend_from_slice(&kind.to_be_bytes());
        let len = u32::try_from(payload.len()).unwrap_or(u32::MAX) & 0x00ff_ffff;
        f.extend_from_slice(&((u32::from(flags) << 24) | len).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// Opens stream `id` with the header `streamtype: {kind}`.
    pub(crate) fn syn_stream(headers: &mut Headers, id: u32, kind: &str) -> Vec<u8> {
        let mut p = Vec::with_capacity(64);
        p.extend_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
        // No associated stream; priority 0, slot 0.
        p.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        p.extend_from_slice(&headers.encode(&[("streamtype", kind)]));
        control(SYN_STREAM, 0, &p)
    }

    /// Data on stream `id` (`fin`: its last).
    pub(crate) fn data(id: u32, fin: bool, data: &[u8]) -> Vec<u8> {
        let mut f = Vec::with_capacity(8 + data.len());
        f.extend_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX) & 0x00ff_ffff;
        let flags = if fin { FLAG_FIN } else { 0 };
        f.extend_from_slice(&((u32::from(flags) << 24) | len).to_be_bytes());
        f.extend_from_slice(data);
        f
    }

    /// The answer to the server's PING `id`.
    pub(crate) fn ping(id: u32) -> Vec<u8> {
        control(PING, 0, &id.to_be_bytes())
    }

    /// A frame from the server, as far as a client cares.
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) enum Frame {
        Data { stream: u32, fin: bool, data: Bytes },
        Ping(u32),
        GoAway,
        Reset(u32),
        Other,
    }

    /// The length of the payload after a frame's 8 bytes of head.
    pub(crate) fn payload_len(head: &[u8; 8]) -> usize {
        u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize
    }

    /// A frame from its head and payload.
    pub(crate) fn parse(head: &[u8; 8], payload: Bytes) -> Frame {
        let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if word & 0x8000_0000 == 0 {
            return Frame::Data { stream: word, fin: head[4] & FLAG_FIN != 0, data: payload };
        }
        let first = payload.get(..4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        match (word & 0xffff) as u16 {
            PING => first.map_or(Frame::Other, Frame::Ping),
            GOAWAY => Frame::GoAway,
            RST_STREAM => first.map_or(Frame::Other, |s| Frame::Reset(s & 0x7fff_ffff)),
            _ => Frame::Other,
        }
    }
}

/// The status code and the negotiated protocol of the answer to a SPDY
/// upgrade (`head`: up to the blank line). No protocol header means the
/// first version (kubelet's rule).
pub(crate) fn upgrade_answer(head: &[u8]) -> Result<(u16, Protocol), String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let code = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP answer: {status_line:?}"))?;
    let mut protocol = Protocol::V1;
    for line in lines {
        if let Some((name, value)) = line.split_once(':')
            && name.trim().eq_ignore_ascii_case("x-stream-protocol-version")
        {
            protocol = Protocol::parse(value)
                .ok_or_else(|| format!("the server chose an unknown protocol {:?}", value.trim()))?;
        }
    }
    Ok((code, protocol))
}

/// A connected streaming server.
struct Upstream {
    protocol: Protocol,
    writer: Writer,
    reader: Reader,
}

impl Upstream {
    fn transport(&self) -> &'static str {
        match self.writer {
            Writer::Ws { .. } => "websocket",
            Writer::Spdy { .. } => "spdy",
        }
    }
}

type Ws = WebSocketStream<TcpStream>;

enum Writer {
    Ws { sink: SplitSink<Ws, Message>, protocol: Protocol },
    Spdy { w: OwnedWriteHalf, streams: Streams, stdin_open: bool },
}

enum Reader {
    Ws(SplitStream<Ws>),
    Spdy { r: Box<dyn AsyncRead + Send + Unpin>, streams: Streams },
}

pub(crate) async fn dial(target: &Target) -> Result<TcpStream, String> {
    let tcp = TcpStream::connect(&target.addr).await.map_err(|e| format!("dial tcp {}: {e}", target.addr))?;
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

async fn connect_ws(target: &Target) -> Result<Upstream, String> {
    let tcp = dial(target).await?;
    // The handshake takes ws:// (the same request on the wire as http://).
    let uri = format!("ws://{}{}", target.authority, target.path);
    let mut req = uri.as_str().into_client_request().map_err(|e| format!("request: {e}"))?;
    req.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static(WS_PROTOCOLS));
    let (ws, answer) =
        tokio_tungstenite::client_async(req, tcp).await.map_err(|e| format!("websocket handshake: {e}"))?;
    let chosen = answer.headers().get("Sec-WebSocket-Protocol").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let protocol = Protocol::parse(chosen).ok_or_else(|| format!("the server chose an unknown protocol {chosen:?}"))?;
    let (sink, stream) = ws.split();
    Ok(Upstream { protocol, writer: Writer::Ws { sink, protocol }, reader: Reader::Ws(stream) })
}

async fn connect_spdy(target: &Target, req: &api::ExecRequest) -> Result<Upstream, String> {
    let mut tcp = dial(target).await?;
    let mut ask = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n",
        target.path, target.authority
    );
    for p in SPDY_PROTOCOLS {
        ask.push_str("X-Stream-Protocol-Version: ");
        ask.push_str(p);
        ask.push_str("\r\n");
    }
    ask.push_str("Content-Length: 0\r\n\r\n");
    tcp.write_all(ask.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::with_capacity(1024);
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_ANSWER_HEAD {
            return Err(format!("the upgrade's answer is longer than {MAX_ANSWER_HEAD} bytes"));
        }
        let mut chunk = [0u8; 2048];
        match tcp.read(&mut chunk).await {
            Ok(0) => return Err("the server closed the connection before answering the upgrade".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("read: {e}")),
        }
    };
    let (code, protocol) = upgrade_answer(&buf[..end])?;
    if code != 101 {
        let line = String::from_utf8_lossy(&buf[..end]).lines().next().unwrap_or_default().to_owned();
        let body = String::from_utf8_lossy(&buf[end..]).trim().chars().take(300).collect::<String>();
        return Err(format!("upgrade refused: {line}: {body}"));
    }
    let streams = Streams::plan(req, protocol);
    let mut headers = spdy::Headers::default();
    let mut open = Vec::new();
    for (id, kind) in streams.opened() {
        open.extend_from_slice(&spdy::syn_stream(&mut headers, id, kind));
    }
    tcp.write_all(&open).await.map_err(|e| format!("write: {e}"))?;
    // What came after the answer's head is the server's first frames.
    let early = std::io::Cursor::new(buf.split_off(end));
    let (r, w) = tcp.into_split();
    Ok(Upstream {
        protocol,
        writer: Writer::Spdy { w, streams, stdin_open: streams.stdin.is_some() },
        reader: Reader::Spdy { r: Box::new(early.chain(r)), streams },
    })
}

impl Writer {
    /// One frame of the client (channel byte, data).
    async fn input(&mut self, frame: &Bytes) -> io::Result<()> {
        match self {
            Writer::Ws { sink, protocol } => match ws_input(*protocol, frame) {
                Some(m) => sink.send(Message::Binary(m)).await.map_err(io::Error::other),
                None => Ok(()),
            },
            Writer::Spdy { w, streams, stdin_open } => match spdy_input(streams, frame) {
                SpdyInput::Data(id, data) if Some(id) != streams.stdin || *stdin_open => {
                    w.write_all(&spdy::data(id, false, data)).await
                }
                SpdyInput::CloseStdin => self.close_stdin().await,
                SpdyInput::Data(..) | SpdyInput::Nothing => Ok(()),
            },
        }
    }

    /// The client's input ended: the command's stdin is closed where the
    /// protocol can say it.
    async fn close_stdin(&mut self) -> io::Result<()> {
        match self {
            Writer::Ws { sink, protocol } if *protocol >= Protocol::V5 => sink
                .send(Message::Binary(Bytes::from_static(&[channel::CLOSE, channel::STDIN])))
                .await
                .map_err(io::Error::other),
            Writer::Ws { .. } => Ok(()),
            Writer::Spdy { w, streams, stdin_open } => match streams.stdin {
                Some(id) if std::mem::take(stdin_open) => w.write_all(&spdy::data(id, true, &[])).await,
                _ => Ok(()),
            },
        }
    }

    async fn pong(&mut self, id: u32) -> io::Result<()> {
        match self {
            Writer::Spdy { w, .. } => w.write_all(&spdy::ping(id)).await,
            Writer::Ws { .. } => Ok(()),
        }
    }
}

/// What the server sent.
enum Event {
    /// A channel message (channel, data).
    Output(u8, Bytes),
    /// The connection ended.
    End(End),
}

/// What the client sent.
enum Input {
    Frame(Bytes),
    /// The client finished its direction.
    End,
}

/// Relays until the server ends the exec (then its status goes to the
/// client and the session finishes) or the session is reset. Each direction
/// runs on its own, so a command that writes before it reads never waits
/// for its own input.
async fn relay(up: Upstream, mut tx: StreamTx, rx: StreamRx) {
    let Upstream { protocol, writer, reader } = up;
    let (event_tx, mut events) = mpsc::channel::<Event>(8);
    let (pong_tx, pongs) = mpsc::channel::<u32>(4);
    let (input_tx, inputs) = mpsc::channel::<Input>(8);
    let read = AbortOnDropHandle::new(match reader {
        Reader::Ws(s) => tokio::spawn(read_ws(s, event_tx)),
        Reader::Spdy { r, streams } => tokio::spawn(read_spdy(r, streams, event_tx, pong_tx)),
    });
    let write = AbortOnDropHandle::new(tokio::spawn(write_up(writer, inputs, pongs)));
    let pump = AbortOnDropHandle::new(tokio::spawn(pump(rx, input_tx)));
    let mut error = Vec::new();
    let end = loop {
        let event = tokio::select! {
            e = events.recv() => e,
            // Dropping the connection ends the exec's streams at the runtime.
            () = tx.reset_by_peer() => return,
        };
        match event {
            Some(Event::Output(channel::ERROR, data)) => {
                if error.len() + data.len() <= MAX_STATUS {
                    error.extend_from_slice(&data);
                }
            }
            Some(Event::Output(ch @ (channel::STDOUT | channel::STDERR), data)) => {
                for part in data.chunks(MAX_DATA - 1) {
                    if tx.send(framed(ch, part)).await.is_err() {
                        return;
                    }
                }
            }
            Some(Event::Output(..)) => {}
            Some(Event::End(end)) => break end,
            None => break End::Broken("its reader stopped".into()),
        }
    };
    drop((read, write, pump));
    let _ = tx.send(final_status(protocol, &error, &end)).await;
    let _ = tx.finish().await;
}

/// The client's frames, in order, for the writer. Holds the session's
/// receiving half until the relay ends.
async fn pump(mut rx: StreamRx, inputs: mpsc::Sender<Input>) {
    loop {
        let (next, last) = match rx.recv().await {
            Ok(Some(f)) => (Input::Frame(f), false),
            Ok(None) => (Input::End, true),
            // A reset: the relay sees it too.
            Err(_) => break,
        };
        if inputs.send(next).await.is_err() || last {
            break;
        }
    }
    std::future::pending::<()>().await;
}

/// Writes the client's input and the answers to pings; holds the
/// connection's writing half until the relay ends (closing it would end
/// the exec).
async fn write_up(mut writer: Writer, mut inputs: mpsc::Receiver<Input>, mut pongs: mpsc::Receiver<u32>) {
    let (mut inputs_open, mut pongs_open) = (true, true);
    while inputs_open || pongs_open {
        let r = tokio::select! {
            i = inputs.recv(), if inputs_open => match i {
                Some(Input::Frame(f)) => writer.input(&f).await,
                Some(Input::End) => writer.close_stdin().await,
                None => {
                    inputs_open = false;
                    Ok(())
                }
            },
            p = pongs.recv(), if pongs_open => match p {
                Some(id) => writer.pong(id).await,
                None => {
                    pongs_open = false;
                    Ok(())
                }
            },
        };
        if let Err(e) = r {
            // The reader sees the connection end.
            tracing::debug!(error = %e, "writing to the runtime's streaming server");
            break;
        }
    }
    std::future::pending::<()>().await;
    drop(writer);
}

async fn read_ws(mut stream: SplitStream<Ws>, events: mpsc::Sender<Event>) {
    let end = loop {
        match stream.next().await {
            // One channel message; an empty one (the server's "connected")
            // carries nothing.
            Some(Ok(Message::Binary(b))) => {
                if b.len() > 1 && events.send(Event::Output(b[0], b.slice(1..))).await.is_err() {
                    return;
                }
            }
            Some(Ok(Message::Close(_))) => break End::Clean,
            Some(Ok(_)) => {}
            Some(Err(e)) => break End::Broken(e.to_string()),
            None => break End::Broken("the connection closed".into()),
        }
    };
    let _ = events.send(Event::End(end)).await;
}

async fn read_spdy(
    mut r: Box<dyn AsyncRead + Send + Unpin>,
    streams: Streams,
    events: mpsc::Sender<Event>,
    pongs: mpsc::Sender<u32>,
) {
    let broken = |e: io::Error| {
        End::Broken(if e.kind() == io::ErrorKind::UnexpectedEof {
            "the connection closed".into()
        } else {
            e.to_string()
        })
    };
    let end = loop {
        let mut head = [0u8; 8];
        if let Err(e) = r.read_exact(&mut head).await {
            break broken(e);
        }
        let mut payload = vec![0u8; spdy::payload_len(&head)];
        if let Err(e) = r.read_exact(&mut payload).await {
            break broken(e);
        }
        match spdy::parse(&head, Bytes::from(payload)) {
            spdy::Frame::Data { stream, data, .. } => {
                if let Some(ch) = streams.channel(stream)
                    && !data.is_empty()
                    && events.send(Event::Output(ch, data)).await.is_err()
                {
                    return;
                }
            }
            spdy::Frame::Ping(id) => {
                let _ = pongs.try_send(id);
            }
            // At the end the server resets every stream (the error stream
            // after the status, which follows all output), then goes away.
            spdy::Frame::GoAway => break End::Clean,
            spdy::Frame::Reset(id) if id == streams.error => break End::Clean,
            spdy::Frame::Reset(_) | spdy::Frame::Other => {}
        }
    };
    let _ = events.send(Event::End(end)).await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn target(addr: &str, authority: &str, path: &str) -> Target {
        Target { addr: addr.into(), authority: authority.into(), path: path.into() }
    }

    #[test]
    fn absolute_and_relative_streaming_urls() {
        let base = "http://127.0.0.1:10010";
        // containerd's: absolute, the actual port.
        assert_eq!(
            resolve(base, "http://127.0.0.1:38211/exec/AbC-12_x").unwrap(),
            target("127.0.0.1:38211", "127.0.0.1:38211", "/exec/AbC-12_x")
        );
        // Relative: against the base.
        assert_eq!(resolve(base, "/exec/tok").unwrap(), target("127.0.0.1:10010", "127.0.0.1:10010", "/exec/tok"));
        assert_eq!(resolve(base, "exec/tok").unwrap(), target("127.0.0.1:10010", "127.0.0.1:10010", "/exec/tok"));
        let prefixed = "http://node:9/cri/streams";
        assert_eq!(resolve(prefixed, "exec/tok").unwrap(), target("node:9", "node:9", "/cri/exec/tok"));
        assert_eq!(resolve(prefixed, "/exec/tok").unwrap(), target("node:9", "node:9", "/exec/tok"));
        assert_eq!(resolve(prefixed, "//other:7/exec/t").unwrap(), target("other:7", "other:7", "/exec/t"));
        // No port: HTTP's; IPv6; a query kept, a fragment and user information dropped.
        assert_eq!(resolve(base, "http://h/exec/t").unwrap(), target("h:80", "h", "/exec/t"));
        assert_eq!(resolve(base, "http://[::1]:5/exec/t").unwrap(), target("[::1]:5", "[::1]:5", "/exec/t"));
        assert_eq!(resolve(base, "http://[::1]/x").unwrap(), target("[::1]:80", "[::1]", "/x"));
        assert_eq!(resolve(base, "http://u:p@h:1/x?a=b#f").unwrap(), target("h:1", "h:1", "/x?a=b"));
        assert_eq!(resolve(base, "http://h:1").unwrap(), target("h:1", "h:1", "/"));
        // What cannot be reached.
        assert!(resolve(base, "").unwrap_err().contains("no streaming URL"));
        assert!(resolve(base, "https://h:1/exec/t").unwrap_err().contains("TLS"));
        assert!(resolve(base, "ftp://h/x").unwrap_err().contains("scheme"));
        assert!(resolve("not-a-url", "/exec/t").unwrap_err().contains("relative"));
        assert!(resolve(base, "http://:80/x").unwrap_err().contains("no host"));
    }

    #[test]
    fn protocol_names() {
        assert_eq!(Protocol::parse("v4.channel.k8s.io"), Some(Protocol::V4));
        assert_eq!(Protocol::parse(" v5.channel.k8s.io "), Some(Protocol::V5));
        assert_eq!(Protocol::parse(""), Some(Protocol::V1));
        assert_eq!(Protocol::parse("channel.k8s.io"), Some(Protocol::V1));
        assert_eq!(Protocol::parse("base64.channel.k8s.io"), None);
        for name in WS_PROTOCOLS.split(',').chain(SPDY_PROTOCOLS) {
            assert_eq!(Protocol::parse(name).map(Protocol::name), Some(name.trim()));
        }
    }

    #[test]
    fn the_status_is_passed_on_from_v4_and_made_before() {
        let kubelet = br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 7], exit code 7","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"7"}]}}"#;
        // v4/v5: kubelet's JSON, unchanged, on the error channel.
        for p in [Protocol::V4, Protocol::V5] {
            let f = final_status(p, kubelet, &End::Clean);
            assert_eq!(f[0], channel::ERROR);
            assert_eq!(&f[1..], kubelet);
            assert_eq!(final_status(p, kubelet, &End::Broken("x".into())), f);
        }
        // v4 always writes one: none is a failure, saying why.
        let none = final_status(Protocol::V4, b"", &End::Clean);
        let v: serde_json::Value = serde_json::from_slice(&none[1..]).unwrap();
        assert_eq!(v["status"], "Failure");
        assert!(v["message"].as_str().unwrap().contains("without the command's status"), "{v}");
        let broken = final_status(Protocol::V5, b"", &End::Broken("reset by peer".into()));
        let v: serde_json::Value = serde_json::from_slice(&broken[1..]).unwrap();
        assert!(v["message"].as_str().unwrap().contains("reset by peer"), "{v}");
        // Before v4: a failure's message as text, nothing for success.
        assert_eq!(final_status(Protocol::V1, b"", &End::Clean), status(None));
        assert_eq!(
            final_status(Protocol::V3, b"command terminated\n", &End::Clean),
            status(Some(Err("command terminated".into())))
        );
        // Not JSON under v4: a failure with the text.
        assert_eq!(final_status(Protocol::V4, b"oops", &End::Clean), status(Some(Err("oops".into()))));
    }

    #[test]
    fn websocket_input_by_protocol() {
        let stdin = Bytes::from_static(b"\x00abc");
        let resize = Bytes::from_static(br#"{"Width":80,"Height":24}"#);
        let resize = Bytes::from([&[channel::RESIZE][..], &resize[..]].concat());
        let close = Bytes::from_static(&[channel::CLOSE, channel::STDIN]);
        for p in [Protocol::V1, Protocol::V4, Protocol::V5] {
            assert_eq!(ws_input(p, &stdin), Some(stdin.clone()));
            assert_eq!(ws_input(p, &resize), Some(resize.clone()));
            assert_eq!(ws_input(p, &Bytes::from_static(&[channel::STDIN])), None);
            assert_eq!(ws_input(p, &Bytes::from_static(b"\x01out")), None);
            assert_eq!(ws_input(p, &Bytes::new()), None);
        }
        assert_eq!(ws_input(Protocol::V5, &close), Some(close.clone()));
        assert_eq!(ws_input(Protocol::V4, &close), None);
    }

    fn req(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> api::ExecRequest {
        api::ExecRequest { container_id: "c".into(), cmd: vec!["sh".into()], tty, stdin, stdout, stderr }
    }

    #[test]
    fn spdy_streams_are_those_kubelet_waits_for() {
        // kubectl exec -i: error, stdin, stdout, stderr.
        let s = Streams::plan(&req(true, true, true, false), Protocol::V4);
        assert_eq!(s.opened(), vec![(1, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr")]);
        assert_eq!((s.channel(1), s.channel(5), s.channel(7), s.channel(3)), (Some(3), Some(1), Some(2), None));
        // -it: no stderr (the terminal merges it), a resize stream from v3 on.
        let s = Streams::plan(&req(true, true, true, true), Protocol::V4);
        assert_eq!(s.opened(), vec![(1, "error"), (3, "stdin"), (5, "stdout"), (7, "resize")]);
        let s = Streams::plan(&req(true, true, false, true), Protocol::V2);
        assert_eq!(s.opened(), vec![(1, "error"), (3, "stdin"), (5, "stdout")]);
        let s = Streams::plan(&req(true, false, false, false), Protocol::V4);
        assert_eq!(s.opened(), vec![(1, "error"), (3, "stdin")]);
    }

    #[test]
    fn spdy_input_by_channel() {
        let s = Streams::plan(&req(true, true, true, true), Protocol::V4);
        assert_eq!(spdy_input(&s, b"\x00hi"), SpdyInput::Data(3, b"hi"));
        assert_eq!(spdy_input(&s, b"\x04{}"), SpdyInput::Data(7, b"{}"));
        assert_eq!(spdy_input(&s, &[channel::CLOSE, channel::STDIN]), SpdyInput::CloseStdin);
        assert_eq!(spdy_input(&s, &[channel::CLOSE, channel::STDOUT]), SpdyInput::Nothing);
        assert_eq!(spdy_input(&s, b"\x00"), SpdyInput::Nothing);
        assert_eq!(spdy_input(&s, b"\x01x"), SpdyInput::Nothing);
        assert_eq!(spdy_input(&s, b""), SpdyInput::Nothing);
        let no_stdin = Streams::plan(&req(false, true, true, false), Protocol::V4);
        assert_eq!(spdy_input(&no_stdin, b"\x00hi"), SpdyInput::Nothing);
        assert_eq!(spdy_input(&no_stdin, &[channel::CLOSE, channel::STDIN]), SpdyInput::Nothing);
        assert_eq!(spdy_input(&no_stdin, b"\x04{}"), SpdyInput::Nothing);
    }

    /// Reads back stored deflate blocks (what `Headers` writes).
    fn inflate_stored(mut z: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        while !z.is_empty() {
            assert_eq!(z[0], 0, "a stored, non-final block");
            let n = u16::from_le_bytes([z[1], z[2]]);
            assert_eq!(!n, u16::from_le_bytes([z[3], z[4]]));
            out.extend_from_slice(&z[5..5 + usize::from(n)]);
            z = &z[5 + usize::from(n)..];
        }
        out
    }

    #[test]
    fn spdy_syn_stream_frames() {
        let mut h = spdy::Headers::default();
        let first = spdy::syn_stream(&mut h, 1, "error");
        // Control bit, version 3, SYN_STREAM, no flags, length.
        assert_eq!(&first[..4], &[0x80, 0x03, 0x00, 0x01]);
        assert_eq!(first[4], 0);
        assert_eq!(spdy::payload_len(&first[..8].try_into().unwrap()), first.len() - 8);
        assert_eq!(&first[8..12], &1u32.to_be_bytes());
        assert_eq!(&first[12..18], &[0; 6]);
        // The zlib header once (a valid one, no dictionary flag), then the block.
        let z = &first[18..];
        assert_eq!(&z[..2], &[0x78, 0x01]);
        assert_eq!(u16::from_be_bytes([z[0], z[1]]) % 31, 0);
        // Ends with a sync flush.
        assert_eq!(&z[z.len() - 5..], &[0, 0, 0, 0xff, 0xff]);
        let block = inflate_stored(&z[2..]);
        let mut want = Vec::new();
        want.extend_from_slice(&1u32.to_be_bytes());
        want.extend_from_slice(&10u32.to_be_bytes());
        want.extend_from_slice(b"streamtype");
        want.extend_from_slice(&5u32.to_be_bytes());
        want.extend_from_slice(b"error");
        assert_eq!(block, want);
        // The next one continues the same zlib stream: no second header.
        let second = spdy::syn_stream(&mut h, 3, "stdin");
        assert_eq!(&second[8..12], &3u32.to_be_bytes());
        let block = inflate_stored(&second[18..]);
        assert_eq!(&block[block.len() - 5..], b"stdin");
        // A long block is split in stored blocks of at most 65535 bytes.
        let long = "x".repeat(70_000);
        let z = h.encode(&[("k", &long)]);
        assert_eq!(inflate_stored(&z).len(), 4 + 4 + 1 + 4 + 70_000);
    }

    #[test]
    fn spdy_data_ping_and_parse() {
        let d = spdy::data(3, false, b"abc");
        assert_eq!(d, [0, 0, 0, 3, 0, 0, 0, 3, b'a', b'b', b'c']);
        let fin = spdy::data(3, true, b"");
        assert_eq!(fin, [0, 0, 0, 3, 1, 0, 0, 0]);
        let head: [u8; 8] = d[..8].try_into().unwrap();
        assert_eq!(
            spdy::parse(&head, Bytes::from_static(b"abc")),
            spdy::Frame::Data { stream: 3, fin: false, data: Bytes::from_static(b"abc") }
        );
        let head: [u8; 8] = fin[..8].try_into().unwrap();
        assert!(matches!(spdy::parse(&head, Bytes::new()), spdy::Frame::Data { stream: 3, fin: true, .. }));
        // The server's ping is answered with the same frame.
        let p = spdy::ping(2);
        assert_eq!(p, [0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 2]);
        let head: [u8; 8] = p[..8].try_into().unwrap();
        assert_eq!(spdy::parse(&head, Bytes::copy_from_slice(&p[8..])), spdy::Frame::Ping(2));
        let goaway = [0x80, 3, 0, 7, 0, 0, 0, 8];
        assert_eq!(spdy::parse(&goaway, Bytes::from_static(&[0; 8])), spdy::Frame::GoAway);
        let rst = [0x80, 3, 0, 3, 0, 0, 0, 8];
        assert_eq!(spdy::parse(&rst, Bytes::from_static(&[0, 0, 0, 5, 0, 0, 0, 5])), spdy::Frame::Reset(5));
        // SYN_REPLY, WINDOW_UPDATE, a short payload: nothing for a client.
        assert_eq!(spdy::parse(&[0x80, 3, 0, 2, 0, 0, 0, 4], Bytes::from_static(&[0; 4])), spdy::Frame::Other);
        assert_eq!(spdy::parse(&[0x80, 3, 0, 9, 0, 0, 0, 8], Bytes::from_static(&[0; 8])), spdy::Frame::Other);
        assert_eq!(spdy::parse(&[0x80, 3, 0, 6, 0, 0, 0, 2], Bytes::from_static(&[0; 2])), spdy::Frame::Other);
    }

    #[test]
    fn spdy_upgrade_answers() {
        let ok = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n";
        assert_eq!(upgrade_answer(ok).unwrap(), (101, Protocol::V4));
        let lower = b"HTTP/1.1 101 Switching Protocols\r\nx-stream-protocol-version:v3.channel.k8s.io\r\n\r\n";
        assert_eq!(upgrade_answer(lower).unwrap(), (101, Protocol::V3));
        let legacy = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n\r\n";
        assert_eq!(upgrade_answer(legacy).unwrap(), (101, Protocol::V1));
        let refused = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n\r\n";
        assert_eq!(upgrade_answer(refused).unwrap().0, 404);
        assert!(upgrade_answer(b"garbage\r\n\r\n").is_err());
        assert!(upgrade_answer(b"HTTP/1.1 101 X\r\nX-Stream-Protocol-Version: v9.x\r\n\r\n").is_err());
    }

    #[test]
    fn exec_requests_follow_kubelets_rules() {
        let spec = |stdin, tty| ExecSpec { command: vec!["sh".into()], stdin, stdout: true, stderr: true, tty };
        let r = exec_request("c1", &spec(false, false)).unwrap();
        assert_eq!((r.container_id.as_str(), r.stdin, r.stdout, r.stderr, r.tty), ("c1", false, true, true, false));
        // A terminal merges the outputs: no stderr.
        let r = exec_request("c1", &spec(true, true)).unwrap();
        assert_eq!((r.stdin, r.stdout, r.stderr, r.tty), (true, true, false, true));
        assert!(exec_request("c1", &ExecSpec::default()).unwrap_err().contains("at least one command"));
        let silent = ExecSpec { command: vec!["true".into()], ..ExecSpec::default() };
        assert!(exec_request("c1", &silent).unwrap_err().contains("stdin, stdout, stderr"));
    }
}
