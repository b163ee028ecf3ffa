//! `kubectl port-forward` on the CRI runtime, the way kubelet serves it:
//! the runtime's `PortForward` answers with a URL on its streaming server,
//! which connects to the port inside the pod's network namespace (so a
//! server that listens on the pod's own loopback is reached too). edged
//! connects to that URL with Kubernetes' WebSocket port forwarding
//! (`v4.channel.k8s.io`, the port in the `port` query): channel 0 carries
//! the connection's data both ways, channel 1 the server's errors, and the
//! server starts each channel with the port (two bytes), which edged
//! drops. One stream session is one port's connection.
//!
//! The WebSocket cannot half-close: the session's end from the cloud is
//! kept until the server ends the connection (its side closed), which
//! ends the WebSocket, which finishes the session.

use bytes::{Bytes, BytesMut};
use edgehive_viaduct::stream::MAX_DATA;
use edgehive_viaduct::{StreamRx, StreamTx};
use futures_util::{SinkExt, StreamExt};
use http::HeaderValue;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::stream::{CONNECT_DEADLINE, dial, resolve};

/// The port forwarding protocol asked of the streaming server.
const PROTOCOL: &str = "v4.channel.k8s.io";
/// Longest error message kept from the server.
const MAX_ERROR: usize = 4096;

/// Relays one connection to `port` through the streaming `url` (relative
/// ones against `base`) until either end closes it; a failure resets the
/// session with kubelet's words.
pub(crate) async fn run(base: &str, url: &str, port: u16, pod: &str, mut tx: StreamTx, mut rx: StreamRx) {
    let fail = |tx: &StreamTx, why: String| tx.reset(&format!("error forwarding port {port} to pod {pod}: {why}"));
    let mut target = match resolve(base, url) {
        Ok(t) => t,
        Err(e) => return fail(&tx, e),
    };
    target.path.push(if target.path.contains('?') { '&' } else { '?' });
    target.path.push_str(&format!("port={port}"));
    let connect = async {
        let tcp = dial(&target).await?;
        let uri = format!("ws://{}{}", target.authority, target.path);
        let mut req = uri.as_str().into_client_request().map_err(|e| format!("request: {e}"))?;
        req.headers_mut().insert("Sec-WebSocket-Protocol", HeaderValue::from_static(PROTOCOL));
        let config = WebSocketConfig::default().max_message_size(Some(4 << 20)).max_frame_size(Some(4 << 20));
        tokio_tungstenite::client_async_with_config(req, tcp, Some(config))
            .await
            .map(|(ws, _)| ws)
            .map_err(|e| format!("{}: websocket handshake: {e}", target.show()))
    };
    let ws = tokio::select! {
        r = tokio::time::timeout(CONNECT_DEADLINE, connect) => r,
        () = tx.reset_by_peer() => return,
    };
    let ws = match ws {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => return fail(&tx, e),
        Err(_) => return fail(&tx, format!("{}: no answer within {CONNECT_DEADLINE:?}", target.show())),
    };
    let (mut sink, mut source) = ws.split();
    let up = async move {
        loop {
            match rx.recv().await {
                Ok(Some(b)) => {
                    let mut f = BytesMut::with_capacity(b.len() + 1);
                    f.extend_from_slice(&[0]);
                    f.extend_from_slice(&b);
                    if sink.send(Frame::Binary(f.freeze())).await.is_err() {
                        return;
                    }
                }
                // No half-close over this WebSocket: wait for the server.
                Ok(None) => std::future::pending::<()>().await,
                Err(_) => {
                    let _ = sink.close().await;
                    return;
                }
            }
        }
    };
    let down = async {
        // The port each channel starts with, still to drop.
        let mut prefix = [2usize, 2usize];
        let mut error = Vec::new();
        loop {
            match source.next().await {
                Some(Ok(Frame::Binary(b))) if !b.is_empty() => {
                    let ch = usize::from(b[0]);
                    if ch > 1 {
                        continue;
                    }
                    let skip = prefix[ch].min(b.len() - 1);
                    prefix[ch] -= skip;
                    let data = b.slice(1 + skip..);
                    if data.is_empty() {
                        continue;
                    }
                    if ch == 1 {
                        error.extend_from_slice(&data[..data.len().min(MAX_ERROR - error.len().min(MAX_ERROR))]);
                        continue;
                    }
                    for part in data.chunks(MAX_DATA) {
                        if tx.send(Bytes::copy_from_slice(part)).await.is_err() {
                            return;
                        }
                    }
                }
                Some(Ok(Frame::Close(_))) | None | Some(Err(_)) => {
                    if error.is_empty() {
                        let _ = tx.finish().await;
                    } else {
                        fail(&tx, String::from_utf8_lossy(&error).trim().to_owned());
                    }
                    return;
                }
                Some(Ok(_)) => {}
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}
