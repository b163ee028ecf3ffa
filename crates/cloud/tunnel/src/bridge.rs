//! One session through a tunnel: the answering end of an edgehive stream
//! session (as `edged`'s `SessionServer` answers it) on one side, a
//! connection of KubeEdge's tunnel on the other.
//!
//! The bridge reads the [`SessionRequest`], sends the connect message
//! CloudStream would ([`crate::edged`]), and answers with a
//! [`SessionReply`] first:
//! - log: the edge relays only the body of its server's response, so the
//!   bridge cannot see an error status. A followed log is answered `200` at
//!   once (a quiet container sends nothing for a long time); any other
//!   waits for the first bytes or the end, so that an edge that never
//!   answers gets a timeout instead of an empty log. Then the bytes, and
//!   FINISH at the edge's REMOVE_CONNECT.
//! - exec, attach: the edge relays the raw connection to its server, so the
//!   bridge reads the HTTP response itself: `101` with the right
//!   `Sec-WebSocket-Accept` and a remote command protocol is `200`, any
//!   other status is a refusal with that status and the body's message.
//!   Then it speaks WebSocket as the client over the DATA bytes, each
//!   WebSocket message one session frame both ways (split at the session's
//!   frame limit, each part keeping its channel byte); with v4 the v5-only
//!   close frames are dropped. The server's close finishes the session.
//! - metrics, proxy: METRIC_CONNECT; the edge relays its server's body a
//!   line a message and REMOVE_CONNECT. The body is read whole (bounded),
//!   then answered: kubelet's Summary API as a usage summary for metrics,
//!   the body as it came for proxy.
//!
//! Either end stopping ends the connection with REMOVE_CONNECT, as
//! CloudStream sends it when kube-apiserver's request ends.

use std::sync::Arc;

use bytes::Bytes;
use edgehive_model::session::{SessionKind, SessionReply, SessionRequest, channel};
use edgehive_viaduct::stream::MAX_DATA;
use edgehive_viaduct::{Stream, StreamRx, StreamTx};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use crate::edged::{self, EdgedRequest, PROTOCOL_V4, PROTOCOL_V5};
use crate::message::{MessageType, TunnelMessage};
use crate::tunnel::{Event, SessionLink, Tunnel};

/// Bytes of the in-memory pipe between the tunnel's DATA and the WebSocket
/// client.
const PIPE: usize = 64 * 1024;
/// Largest DATA message the bridge sends.
const DATA_CHUNK: usize = 32 * 1024;
/// Longest response head of the edge's server.
const MAX_HEAD: usize = 16 * 1024;
/// Most of an error response's body kept for the message.
const MAX_BODY: usize = 64 * 1024;
/// Largest remote command message from the edge's server.
const MAX_WS_MESSAGE: usize = 4 << 20;

/// Removes the session from its tunnel however the bridge ends, and tells
/// the edge (REMOVE_CONNECT) when the bridge did not.
struct Cleanup {
    tunnel: Arc<Tunnel>,
    id: u64,
    removed: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.tunnel.unregister(self.id);
        if !self.removed && !self.tunnel.is_closed() {
            self.tunnel.try_send(&remove(self.id));
        }
    }
}

fn remove(id: u64) -> TunnelMessage {
    TunnelMessage::new(id, MessageType::RemoveConnect, Bytes::new())
}

/// Serves one session until either end stops.
pub(crate) async fn run(tunnel: Arc<Tunnel>, id: u64, link: SessionLink, acceptor: Stream) {
    let mut cleanup = Cleanup { tunnel: Arc::clone(&tunnel), id, removed: false };
    let request: Result<SessionRequest, _> = serde_json::from_slice(acceptor.header());
    let (mut tx, mut rx) = acceptor.split();
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            let _ = reply(&mut tx, &SessionReply::refuse(400, "BadRequest", format!("session header: {e}"))).await;
            return;
        }
    };
    let key = generate_key();
    let edged = match edged::connect_request(&request, &tunnel.settings.edged_address, &key) {
        Ok(r) => r,
        Err(refusal) => {
            tracing::info!(message = %refusal.message, "session refused");
            let _ = reply(&mut tx, &refusal).await;
            return;
        }
    };
    tracing::info!(kind = %edged.kind, url = %edged.url(), "session through the tunnel");
    let SessionLink { events, end } = link;
    let served = tokio::select! {
        r = serve(&tunnel, id, &request, &edged, &key, events, &mut tx, &mut rx) => r,
        why = end.ended() => Err(why),
    };
    if let Err(why) = served {
        tracing::info!(reason = %why, "session ended");
        tx.reset(&why);
    }
    if !tunnel.is_closed() {
        let _ = tunnel.send(&remove(id)).await;
    }
    cleanup.removed = true;
}

/// Sends the session's first frame.
async fn reply(tx: &mut StreamTx, r: &SessionReply) -> Result<(), String> {
    tx.send(Bytes::from(serde_json::to_vec(r).unwrap_or_default())).await.map_err(|e| e.to_string())
}

/// Serves the session; `Ok` when it ended it itself (finished, or
/// answered with a refusal), `Err` with why it must be reset.
#[allow(clippy::too_many_arguments)]
async fn serve(
    tunnel: &Tunnel,
    id: u64,
    request: &SessionRequest,
    edged: &EdgedRequest,
    key: &str,
    events: mpsc::UnboundedReceiver<Event>,
    tx: &mut StreamTx,
    rx: &mut StreamRx,
) -> Result<(), String> {
    if let Err(why) = tunnel.send(&edged.connect_message(id)).await {
        let message = format!("the stream tunnel of node {:?}: {why}", tunnel.node);
        return reply(tx, &SessionReply::refuse(503, "ServiceUnavailable", message)).await;
    }
    match request.kind {
        Some(SessionKind::Log) => serve_log(tunnel, request.log.follow, events, tx, rx).await,
        Some(kind @ (SessionKind::Metrics | SessionKind::Proxy)) => serve_metric(tunnel, kind, edged, events, tx).await,
        _ => serve_command(tunnel, id, key, events, tx, rx).await,
    }
}

fn timed_out(tunnel: &Tunnel, what: &str) -> SessionReply {
    SessionReply::refuse(
        504,
        "Timeout",
        format!(
            "node {:?} did not answer the {what} request within {:?} (is its server at {} up?)",
            tunnel.node, tunnel.settings.reply_timeout, tunnel.settings.edged_address
        ),
    )
}

/// Waits for the client's direction to fail (a reset: the client went
/// away); a client that finished sending is simply done sending.
async fn client_gone(rx: &mut StreamRx) -> String {
    loop {
        match rx.recv().await {
            Ok(Some(_)) => {}
            // Done sending: a later reset is the client going away.
            Ok(None) => match rx.recv().await {
                Err(e) => return e.to_string(),
                Ok(_) => std::future::pending::<()>().await,
            },
            Err(e) => return e.to_string(),
        }
    }
}

async fn serve_log(
    tunnel: &Tunnel,
    follow: bool,
    mut events: mpsc::UnboundedReceiver<Event>,
    tx: &mut StreamTx,
    rx: &mut StreamRx,
) -> Result<(), String> {
    let mut first = None;
    if !follow {
        match tokio::time::timeout(tunnel.settings.reply_timeout, events.recv()).await {
            Ok(Some(ev)) => first = Some(ev),
            Ok(None) => return Err("the session was closed".into()),
            Err(_) => return reply(tx, &timed_out(tunnel, "log")).await,
        }
    }
    reply(tx, &SessionReply::ok()).await?;
    let down = async {
        let mut next = first;
        loop {
            let ev = match next.take() {
                Some(ev) => ev,
                None => events.recv().await.ok_or("the session was closed")?,
            };
            match ev {
                Event::Data(bytes, permit) => {
                    send_chunks(tx, bytes).await?;
                    drop(permit);
                }
                Event::Removed => {
                    let _ = tx.finish().await;
                    return Ok(());
                }
            }
        }
    };
    tokio::select! {
        r = down => r.map_err(|e: &str| e.to_owned()),
        why = client_gone(rx) => Err(why),
    }
}

/// Most of a node endpoint's answer read through the tunnel.
const MAX_METRIC_BODY: usize = edgehive_model::session::MAX_SUMMARY;

/// A `METRIC_CONNECT`: the edge GETs the path of its server and relays the
/// body (line by line), then REMOVE_CONNECT. The whole body is read
/// (bounded, within the reply deadline), then answered: a usage summary
/// made of kubelet's Summary API for `metrics`, the body itself for
/// `proxy`. The edge does not relay its server's status: an error shows as
/// what its body says.
async fn serve_metric(
    tunnel: &Tunnel,
    kind: SessionKind,
    edged: &EdgedRequest,
    mut events: mpsc::UnboundedReceiver<Event>,
    tx: &mut StreamTx,
) -> Result<(), String> {
    let read = async {
        let mut body = Vec::new();
        loop {
            match events.recv().await {
                Some(Event::Data(bytes, _permit)) => {
                    if body.len() + bytes.len() > MAX_METRIC_BODY {
                        return Err(format!("the node's answer is over {MAX_METRIC_BODY} bytes"));
                    }
                    body.extend_from_slice(&bytes);
                }
                Some(Event::Removed) => return Ok(body),
                None => return Err("the session was closed".to_owned()),
            }
        }
    };
    let body = match tokio::time::timeout(tunnel.settings.reply_timeout, read).await {
        Ok(Ok(b)) => b,
        Ok(Err(why)) => return reply(tx, &SessionReply::refuse(502, "InternalError", why)).await,
        Err(_) => return reply(tx, &timed_out(tunnel, "metrics")).await,
    };
    let (content_type, body) = if kind == SessionKind::Metrics {
        match edged::usage_from_summary(&body) {
            Ok(s) => ("application/json", serde_json::to_vec(&s).unwrap_or_default()),
            Err(why) => return reply(tx, &SessionReply::refuse(502, "InternalError", why)).await,
        }
    } else {
        let json = body.first().is_some_and(|b| *b == b'{' || *b == b'[');
        (if json { "application/json" } else { "text/plain; charset=utf-8" }, body)
    };
    tracing::debug!(path = %edged.path, bytes = body.len(), "node endpoint read through the tunnel");
    reply(tx, &SessionReply::ok_with(content_type)).await?;
    send_chunks(tx, Bytes::from(body)).await?;
    let _ = tx.finish().await;
    Ok(())
}

async fn send_chunks(tx: &mut StreamTx, bytes: Bytes) -> Result<(), &'static str> {
    let mut at = 0;
    while at < bytes.len() {
        let end = (at + MAX_DATA).min(bytes.len());
        tx.send(bytes.slice(at..end)).await.map_err(|_| "the client's session ended")?;
        at = end;
    }
    Ok(())
}

/// Moves bytes between the tunnel's DATA and the pipe's far end: what the
/// edge sends into the pipe (its REMOVE_CONNECT closes the pipe's
/// direction), what the WebSocket client writes out as DATA.
async fn pump(tunnel: &Tunnel, id: u64, mut events: mpsc::UnboundedReceiver<Event>, far: DuplexStream) {
    let (mut read, mut write) = tokio::io::split(far);
    let inbound = async move {
        while let Some(ev) = events.recv().await {
            match ev {
                Event::Data(bytes, permit) => {
                    // Waits while the client has not read the pipe: the
                    // permit keeps the session's budget taken meanwhile.
                    if write.write_all(&bytes).await.is_err() {
                        return;
                    }
                    drop(permit);
                }
                Event::Removed => break,
            }
        }
        let _ = write.shutdown().await;
    };
    let outbound = async move {
        let mut buf = vec![0u8; DATA_CHUNK];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let m = TunnelMessage::new(id, MessageType::Data, Bytes::copy_from_slice(&buf[..n]));
                    if tunnel.send(&m).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    tokio::join!(inbound, outbound);
}

async fn serve_command(
    tunnel: &Tunnel,
    id: u64,
    key: &str,
    events: mpsc::UnboundedReceiver<Event>,
    tx: &mut StreamTx,
    rx: &mut StreamRx,
) -> Result<(), String> {
    let (near, far) = tokio::io::duplex(PIPE);
    let command = async {
        let mut near = near;
        let deadline = Instant::now() + tunnel.settings.reply_timeout;
        let (head, rest) = match tokio::time::timeout_at(deadline, read_head(&mut near)).await {
            Ok(Ok(h)) => h,
            Ok(Err(why)) => {
                let message = format!("node {:?}: its server did not answer the upgrade: {why}", tunnel.node);
                return reply(tx, &SessionReply::refuse(502, "InternalError", message)).await;
            }
            Err(_) => return reply(tx, &timed_out(tunnel, "exec")).await,
        };
        let head = match edged::parse_head(&head) {
            Ok(h) => h,
            Err(why) => {
                let message = format!("node {:?}: its server answered the upgrade with {why}", tunnel.node);
                return reply(tx, &SessionReply::refuse(502, "InternalError", message)).await;
            }
        };
        if head.status != 101 {
            let body = read_body(&mut near, &head, rest, deadline).await;
            let refusal = edged::refusal(head.status, &body);
            tracing::info!(status = head.status, message = %refusal.message, "the node's server refused");
            return reply(tx, &refusal).await;
        }
        let accepted = head.header("sec-websocket-accept") == Some(derive_accept_key(key.as_bytes()).as_str());
        let protocol = head.header("sec-websocket-protocol").unwrap_or_default();
        if !accepted || !head.has_token("upgrade", "websocket") || ![PROTOCOL_V5, PROTOCOL_V4].contains(&protocol) {
            let message = format!(
                "node {:?}: its server's upgrade is not a WebSocket speaking {PROTOCOL_V5} or {PROTOCOL_V4} \
                 (protocol {protocol:?}, accept key {})",
                tunnel.node,
                if accepted { "right" } else { "wrong" }
            );
            return reply(tx, &SessionReply::refuse(502, "InternalError", message)).await;
        }
        reply(tx, &SessionReply::ok()).await?;
        let config =
            WebSocketConfig::default().max_message_size(Some(MAX_WS_MESSAGE)).max_frame_size(Some(MAX_WS_MESSAGE));
        let ws = WebSocketStream::from_partially_read(near, rest, Role::Client, Some(config)).await;
        relay(ws, protocol == PROTOCOL_V5, tx, rx).await
    };
    tokio::select! {
        r = command => r,
        () = pump(tunnel, id, events, far) => Err("the session was closed".into()),
    }
}

/// Reads a response head: (the head, the bytes after it).
async fn read_head<R: AsyncRead + Unpin>(r: &mut R) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(format!("a response head over {MAX_HEAD} bytes"));
        }
        let n = r.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the connection ended before a response".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads an error response's body (by its length, chunked, or to the end),
/// at most [`MAX_BODY`] bytes and until `deadline`; what arrived by then.
async fn read_body<R: AsyncRead + Unpin>(
    r: &mut R,
    head: &edged::ResponseHead,
    mut body: Vec<u8>,
    deadline: Instant,
) -> Vec<u8> {
    let length = head.header("content-length").and_then(|v| v.parse::<usize>().ok());
    let chunked = head.has_token("transfer-encoding", "chunked");
    let complete = |b: &[u8]| match (length, chunked) {
        (Some(n), _) => b.len() >= n,
        (None, true) => dechunk(b).is_some(),
        (None, false) => false,
    };
    let mut chunk = [0u8; 4096];
    while !complete(&body) && body.len() < MAX_BODY {
        match tokio::time::timeout_at(deadline, r.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => body.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    match (length, chunked) {
        (Some(n), _) => {
            body.truncate(n);
            body
        }
        (None, true) => dechunk(&body).unwrap_or(body),
        (None, false) => body,
    }
}

/// A whole chunked body, decoded; `None` while it is incomplete.
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = b.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&b[..line_end]).ok()?.split(';').next()?.trim();
        let size = usize::from_str_radix(size, 16).ok()?;
        b = &b[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        // A size past what is there (or past any memory) is incomplete.
        if b.len() < size.checked_add(2)? {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// Relays remote command messages between the edge's server (the
/// WebSocket) and the session until the server closes; `Err` when the
/// client reset the session or the server failed.
async fn relay(
    ws: WebSocketStream<DuplexStream>,
    v5: bool,
    tx: &mut StreamTx,
    rx: &mut StreamRx,
) -> Result<(), String> {
    let (mut sink, mut source) = ws.split();
    let up = async {
        loop {
            match rx.recv().await {
                Ok(Some(f)) => {
                    if f.is_empty() || (!v5 && f[0] == channel::CLOSE) {
                        continue;
                    }
                    if sink.send(WsMessage::Binary(f)).await.is_err() {
                        // The server's side is ending: its close decides.
                        return std::future::pending().await;
                    }
                }
                // The client is done sending; its output may still come,
                // until the client goes away (a reset of the session).
                Ok(None) => {
                    return match rx.recv().await {
                        Err(e) => Err(e.to_string()),
                        Ok(_) => std::future::pending().await,
                    };
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    };
    let down = async {
        loop {
            match source.next().await {
                Some(Ok(WsMessage::Binary(b))) => {
                    if b.is_empty() {
                        continue;
                    }
                    send_split(tx, &b).await.map_err(|e| e.to_string())?;
                }
                Some(Ok(WsMessage::Close(_))) | None => {
                    let _ = tx.finish().await;
                    return Ok(());
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(format!("the node's remote command stream failed: {e}")),
            }
        }
    };
    tokio::select! {
        r = up => r,
        r = down => r,
    }
}

/// Sends one channel message as session frames of at most [`MAX_DATA`]
/// bytes, each starting with the channel byte.
async fn send_split(tx: &mut StreamTx, msg: &Bytes) -> Result<(), edgehive_viaduct::StreamError> {
    if msg.len() <= MAX_DATA {
        return tx.send(msg.clone()).await;
    }
    let ch = msg[0];
    for part in msg[1..].chunks(MAX_DATA - 1) {
        let mut b = Vec::with_capacity(part.len() + 1);
        b.push(ch);
        b.extend_from_slice(part);
        tx.send(Bytes::from(b)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn chunked_bodies_decode_only_when_whole() {
        assert_eq!(dechunk(b"5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n").unwrap(), b"hello world");
        assert_eq!(dechunk(b"5\r\nhel"), None);
        assert_eq!(dechunk(b"5\r\nhello\r\n"), None);
        // A chunk size near the top of usize is incomplete, not a crash.
        assert_eq!(dechunk(b"ffffffffffffffff\r\nx"), None);
        assert_eq!(dechunk(b"fffffffffffffffe\r\nx"), None);
    }

    #[tokio::test]
    async fn heads_and_bodies_are_read_within_their_bounds() {
        let mut r: &[u8] = b"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nhello and more";
        let (head, rest) = read_head(&mut r).await.unwrap();
        let head = edged::parse_head(&head).unwrap();
        let body = read_body(&mut r, &head, rest, Instant::now() + std::time::Duration::from_secs(1)).await;
        assert_eq!(body, b"hello");
        let mut endless: &[u8] = &[b'x'; MAX_HEAD + 5000];
        assert!(read_head(&mut endless).await.unwrap_err().contains("over"));
        let mut cut: &[u8] = b"HTTP/1.1 101";
        assert!(read_head(&mut cut).await.unwrap_err().contains("ended"));
    }
}
