//! Streams to edge pods: `pods/log`, `pods/exec` and `pods/attach`, served
//! through a stream session over the pod's node's own connection to the
//! cloud (no other port, no route from the cloud to the node needed).
//!
//! The API checks the request as Kubernetes does (the pod, its container,
//! its node, the options), opens a session to the node with a
//! [`SessionRequest`] and waits, with a deadline, for the edge's
//! [`SessionReply`]: an edge that refuses (no such container, a container
//! that has not started) is answered with its status before anything is
//! upgraded, and a node that is offline or silent fails at once with a
//! clear error. Then:
//! - `log`: the session's bytes are the response body, streamed;
//! - `exec`, `attach`: the request is upgraded to a WebSocket speaking
//!   Kubernetes' remote command protocol (`v5.channel.k8s.io` or
//!   `v4.channel.k8s.io`), and each WebSocket message is relayed as one
//!   session frame both ways. SPDY (kubectl before 1.31) is refused with a
//!   message saying so.
//!
//! A client that goes away ends the session, which stops the edge's side.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use edgehive_model::session::{LogOptions, SessionKind, SessionReply, SessionRequest, channel};
use edgehive_store::resources::{NODES, PODS};
use edgehive_viaduct::stream::MAX_DATA;
use edgehive_viaduct::{Stream, StreamRx, StreamTx};
use futures_util::{SinkExt, StreamExt};
use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig, frame::coding::CloseCode};
use tokio_tungstenite::tungstenite::{Message as Frame, handshake::derive_accept_key};

use crate::context::ApiState;
use crate::handlers::store_err;
use crate::response::Body;
use crate::route::{Query, Target};
use crate::status::{ApiError, Cause};

/// Why a session to a node could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeStreamError {
    /// The node is not connected to the cloud now.
    NotConnected(String),
    /// The node's agent does not take stream sessions (a KubeEdge EdgeCore,
    /// or an older edgehive edge).
    Unsupported(String),
    /// Anything else.
    Failed(String),
}

/// Opens stream sessions to edge nodes (the binary wires CloudHub's).
pub trait EdgeStreams: Send + Sync + Debug {
    /// Opens a session to `node` with `header`.
    fn open<'a>(
        &'a self,
        node: &'a str,
        header: Bytes,
    ) -> Pin<Box<dyn Future<Output = Result<Stream, EdgeStreamError>> + Send + 'a>>;
}

/// Longest wait for a node's first answer on a new session.
pub const REPLY_DEADLINE: Duration = Duration::from_secs(10);

/// The WebSocket subprotocols of remote command, best first.
const REMOTE_COMMAND_PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

/// Serves a pod's `log`, `exec` or `attach`.
pub(crate) async fn serve(
    shared: &Arc<ApiState>,
    target: &Target,
    query: &Query,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let kind = match target.subresource.as_deref() {
        Some("log") => SessionKind::Log,
        Some("exec") => SessionKind::Exec,
        Some("attach") => SessionKind::Attach,
        Some("portforward") => return port_forward(shared, target, query, req).await,
        _ => return Err(ApiError::no_route()),
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let obj = shared.store.get(&PODS, &namespace, &name).await.map_err(store_err(&PODS))?;
    let pod = obj.parse().map_err(|e| ApiError::internal(format!("pod {namespace}/{name}: {e}")))?;
    let container = pick_container(&pod, &name, query.get("container"))?;
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default().to_owned();
    let mut request = SessionRequest {
        kind: Some(kind),
        namespace,
        pod: name.clone(),
        uid: obj.uid().unwrap_or_default().to_owned(),
        container,
        ..SessionRequest::default()
    };
    let protocol = match kind {
        SessionKind::Log => {
            request.log = log_options(query, &name)?;
            if node.is_empty() {
                // Kubernetes: a pod not yet on a node has no log to show.
                return Ok(log_response(None));
            }
            None
        }
        _ => {
            let phase = pod["status"]["phase"].as_str().unwrap_or_default();
            if matches!(phase, "Succeeded" | "Failed") {
                return Err(ApiError::bad_request(format!(
                    "cannot {} into a container in a completed pod; current phase is {phase}",
                    if kind == SessionKind::Exec { "exec" } else { "attach" }
                )));
            }
            if node.is_empty() {
                return Err(ApiError::bad_request(format!("pod {name} does not have a host assigned")));
            }
            request.command = query.all("command").map(str::to_owned).collect();
            if kind == SessionKind::Exec && request.command.is_empty() {
                return Err(ApiError::bad_request("you must specify at least one command for the container"));
            }
            request.stdin = query.flag("stdin");
            request.stdout = query.flag("stdout");
            request.stderr = query.flag("stderr");
            request.tty = query.flag("tty");
            if !(request.stdin || request.stdout || request.stderr) {
                return Err(ApiError::bad_request("you must specify at least 1 of stdin, stdout, stderr"));
            }
            // Checked after the node answers: a client that fell back to
            // SPDY after a failed WebSocket upgrade (kubectl does) then
            // sees why the first attempt failed, not only that SPDY is
            // not served.
            Some(websocket_protocol(&req))
        }
    };
    let streams = shared.config.edge_streams.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", "no edge connections are served here")
    })?;
    let header = Bytes::from(serde_json::to_vec(&request).map_err(|e| ApiError::internal(e.to_string()))?);
    let session = open(streams.as_ref(), &node, header).await?;
    let (tx, rx) = session.split();
    let protocol = match protocol {
        Some(Err(e)) => {
            tx.reset("the client's protocol is not served");
            return Err(e);
        }
        Some(Ok(p)) => Some(p),
        None => None,
    };
    match protocol {
        None => {
            let (out, body) = mpsc::channel(8);
            tokio::spawn(pump_log(tx, rx, out));
            Ok(log_response(Some(body)))
        }
        Some(protocol) => {
            let key = req.headers().get("sec-websocket-key").cloned().unwrap_or(HeaderValue::from_static(""));
            let upgrade = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                match upgrade.await {
                    Ok(upgraded) => relay(upgraded, protocol, tx, rx).await,
                    Err(e) => {
                        tracing::info!(error = %e, "stream upgrade failed");
                        tx.reset("the client's upgrade failed");
                    }
                }
            });
            Ok(switching(&key, protocol))
        }
    }
}

/// The WebSocket subprotocol of port forwarding.
const PORT_FORWARD_PROTOCOL: &str = "v4.channel.k8s.io";

/// `pods/portforward`: Kubernetes' WebSocket port forwarding
/// (`v4.channel.k8s.io`, the `ports` query): for the i-th port, channel 2i
/// carries its data both ways and channel 2i+1 its errors, each starting
/// with the port (two bytes, little-endian). One session per port carries
/// its TCP connection. kubectl's SPDY-based port forwarding is refused with
/// a message saying what is served.
async fn port_forward(
    shared: &Arc<ApiState>,
    target: &Target,
    query: &Query,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let obj = shared.store.get(&PODS, &namespace, &name).await.map_err(store_err(&PODS))?;
    let pod = obj.parse().map_err(|e| ApiError::internal(format!("pod {namespace}/{name}: {e}")))?;
    let upgrade = req.headers().get(header::UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let offered = offered_protocols(&req);
    if upgrade.to_ascii_lowercase().starts_with("spdy") || offered.iter().any(|p| p.starts_with("SPDY")) {
        return Err(ApiError::bad_request(
            "port forwarding over SPDY (kubectl port-forward) is not served: this server forwards ports over \
             Kubernetes' WebSocket protocol (v4.channel.k8s.io), as the Kubernetes client libraries speak it",
        ));
    }
    let mut ports = Vec::new();
    for value in query.all("ports").flat_map(|v| v.split(',')).map(str::trim).filter(|v| !v.is_empty()) {
        match value.parse::<u16>() {
            Ok(p) if p > 0 => ports.push(p),
            _ => return Err(ApiError::bad_request(format!("invalid port {value:?}: ports must be 1-65535"))),
        }
    }
    if ports.is_empty() {
        return Err(ApiError::bad_request("at least one port must be given (query parameter ports)"));
    }
    if ports.len() > 64 {
        return Err(ApiError::bad_request("at most 64 ports can be forwarded at once"));
    }
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default().to_owned();
    if node.is_empty() {
        return Err(ApiError::bad_request(format!("pod {name} does not have a host assigned")));
    }
    websocket_upgrade_checks(&req)?;
    if !offered.iter().any(|p| p == PORT_FORWARD_PROTOCOL) {
        return Err(ApiError::bad_request(format!(
            "none of the offered WebSocket subprotocols {offered:?} is served; port forwarding speaks {PORT_FORWARD_PROTOCOL}"
        )));
    }
    let streams = shared.config.edge_streams.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", "no edge connections are served here")
    })?;
    // Every port's session at once: the deadline is one, not one per port.
    let opens = ports.iter().map(|port| {
        let request = SessionRequest {
            kind: Some(SessionKind::Portforward),
            namespace: namespace.clone(),
            pod: name.clone(),
            uid: obj.uid().unwrap_or_default().to_owned(),
            port: Some(*port),
            ..SessionRequest::default()
        };
        let (streams, node) = (streams.as_ref(), node.as_str());
        async move {
            let header = Bytes::from(serde_json::to_vec(&request).map_err(|e| ApiError::internal(e.to_string()))?);
            open(streams, node, header).await.map(Stream::split)
        }
    });
    // An error drops the sessions already open, which resets them.
    let sessions = futures_util::future::try_join_all(opens).await?;
    let key = req.headers().get("sec-websocket-key").cloned().unwrap_or(HeaderValue::from_static(""));
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => relay_ports(upgraded, ports, sessions).await,
            Err(e) => tracing::info!(error = %e, "port-forward upgrade failed"),
        }
    });
    Ok(switching(&key, PORT_FORWARD_PROTOCOL))
}

/// The WebSocket subprotocols a request offers.
fn offered_protocols(req: &Request<Incoming>) -> Vec<String> {
    req.headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .collect()
}

/// The `101 Switching Protocols` answer to a WebSocket upgrade.
fn switching(key: &HeaderValue, protocol: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::Full(http_body_util::Full::new(Bytes::new())));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert("sec-websocket-accept", v);
    }
    h.insert("sec-websocket-protocol", HeaderValue::from_static(protocol));
    r
}

/// What one port's session says to the relay.
enum PortEvent {
    Data(usize, Bytes),
    /// The pod's side of the connection ended (`None`) or failed (why).
    End(usize, Option<String>),
}

/// Relays a port-forward WebSocket and one session per port.
async fn relay_ports(upgraded: hyper::upgrade::Upgraded, ports: Vec<u16>, sessions: Vec<(StreamTx, StreamRx)>) {
    let config = WebSocketConfig::default().max_message_size(Some(4 << 20)).max_frame_size(Some(4 << 20));
    let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
    let (mut sink, mut source) = ws.split();
    // Each channel starts with its port.
    for (i, port) in ports.iter().enumerate() {
        for ch in [2 * i, 2 * i + 1] {
            let [lo, hi] = port.to_le_bytes();
            let ch = u8::try_from(ch).unwrap_or(u8::MAX);
            if sink.send(Frame::Binary(Bytes::copy_from_slice(&[ch, lo, hi]))).await.is_err() {
                return;
            }
        }
    }
    let (events_tx, mut events) = mpsc::channel::<PortEvent>(16);
    let mut txs = Vec::with_capacity(sessions.len());
    let mut readers = Vec::with_capacity(sessions.len());
    for (i, (tx, mut rx)) in sessions.into_iter().enumerate() {
        txs.push(tx);
        let events = events_tx.clone();
        readers.push(AbortOnDrop(tokio::spawn(async move {
            loop {
                let ev = match rx.recv().await {
                    Ok(Some(b)) => PortEvent::Data(i, b),
                    Ok(None) => PortEvent::End(i, None),
                    Err(e) => PortEvent::End(i, Some(e.to_string())),
                };
                let last = matches!(ev, PortEvent::End(..));
                if events.send(ev).await.is_err() || last {
                    return;
                }
            }
        })));
    }
    drop(events_tx);
    // As for exec, the two directions run on their own.
    let up = async {
        loop {
            match source.next().await {
                Some(Ok(Frame::Binary(b))) if !b.is_empty() => {
                    let ch = usize::from(b[0]);
                    // Data channels only; the client writes nothing else.
                    if ch % 2 == 1 || ch / 2 >= txs.len() {
                        continue;
                    }
                    for part in b[1..].chunks(MAX_DATA) {
                        if txs[ch / 2].send(Bytes::copy_from_slice(part)).await.is_err() {
                            break;
                        }
                    }
                }
                Some(Ok(Frame::Close(_))) | None | Some(Err(_)) => {
                    for tx in &mut txs {
                        let _ = tx.finish().await;
                    }
                    return;
                }
                Some(Ok(_)) => {}
            }
        }
    };
    let down = async {
        let mut open = ports.len();
        while open > 0 {
            match events.recv().await {
                Some(PortEvent::Data(i, b)) => {
                    let ch = u8::try_from(2 * i).unwrap_or(u8::MAX);
                    let mut f = BytesMut::with_capacity(b.len() + 1);
                    f.extend_from_slice(&[ch]);
                    f.extend_from_slice(&b);
                    if sink.send(Frame::Binary(f.freeze())).await.is_err() {
                        return;
                    }
                }
                Some(PortEvent::End(i, why)) => {
                    open -= 1;
                    if let Some(why) = why {
                        let ch = u8::try_from(2 * i + 1).unwrap_or(u8::MAX);
                        let mut f = BytesMut::from(&[ch][..]);
                        f.extend_from_slice(why.trim_start_matches("stream session reset: ").as_bytes());
                        let _ = sink.send(Frame::Binary(f.freeze())).await;
                    }
                }
                None => return,
            }
        }
    };
    // The forward ends when every port's connection has ended, or the
    // client closes.
    tokio::select! {
        () = up => {}
        () = down => {}
    }
    let close = CloseFrame { code: CloseCode::Normal, reason: "".into() };
    let _ = sink.send(Frame::Close(Some(close))).await;
    let _ = sink.close().await;
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Opens the session and reads the edge's answer, each within its deadline.
async fn open(streams: &dyn EdgeStreams, node: &str, header: Bytes) -> Result<Stream, ApiError> {
    open_session(streams, node, header).await.map(|(s, _)| s)
}

/// [`open`], with the edge's accepting reply.
pub(crate) async fn open_session(
    streams: &dyn EdgeStreams,
    node: &str,
    header: Bytes,
) -> Result<(Stream, SessionReply), ApiError> {
    let unavailable = |m: String| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", m);
    let session = match tokio::time::timeout(REPLY_DEADLINE, streams.open(node, header)).await {
        Ok(Ok(s)) => s,
        Ok(Err(EdgeStreamError::NotConnected(_))) => {
            return Err(unavailable(format!("node {node:?} is not connected to the cloud")));
        }
        Ok(Err(EdgeStreamError::Unsupported(_))) => {
            return Err(unavailable(format!(
                "node {node:?} does not take stream sessions over its connection (its agent is not edgehive's)"
            )));
        }
        Ok(Err(EdgeStreamError::Failed(m))) => return Err(unavailable(m)),
        Err(_) => return Err(timeout(node)),
    };
    let (tx, mut rx) = session.split();
    let first = match tokio::time::timeout(REPLY_DEADLINE, rx.recv()).await {
        Ok(Ok(Some(b))) => b,
        Ok(Ok(None)) => return Err(unavailable(format!("node {node:?} ended the session without an answer"))),
        Ok(Err(e)) => return Err(unavailable(format!("node {node:?}: {e}"))),
        Err(_) => {
            tx.reset("no answer in time");
            return Err(timeout(node));
        }
    };
    let reply: SessionReply = serde_json::from_slice(&first)
        .map_err(|e| ApiError::internal(format!("node {node:?} answered the session with something else: {e}")))?;
    if reply.code != 200 {
        return Err(reply_error(&reply));
    }
    Ok((Stream::join(tx, rx), reply))
}

/// Reads a session to its end (at most `max` bytes, within
/// [`REPLY_DEADLINE`]): a body the edge sends whole.
pub(crate) async fn read_body(session: Stream, max: usize, node: &str) -> Result<Vec<u8>, ApiError> {
    let (tx, mut rx) = session.split();
    let read = async {
        let mut body = Vec::new();
        while let Some(b) = rx.recv().await.map_err(|e| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", format!("node {node:?}: {e}"))
        })? {
            if body.len() + b.len() > max {
                tx.reset("answer too large");
                return Err(ApiError::internal(format!("node {node:?} answered with more than {max} bytes")));
            }
            body.extend_from_slice(&b);
        }
        Ok(body)
    };
    match tokio::time::timeout(REPLY_DEADLINE, read).await {
        Ok(r) => r,
        Err(_) => {
            tx.reset("no answer in time");
            Err(timeout(node))
        }
    }
}

/// Most bytes of an answer of a node's own endpoint.
const MAX_PROXY_BODY: usize = 16 << 20;

/// `nodes/{name}/proxy/{path}`: a GET of one of the node's own endpoints
/// (`/healthz`, `/pods`, `/stats/summary`, `/metrics/resource`), asked
/// through a `proxy` session. RBAC has authorized `nodes/proxy` (only
/// `cluster-admin` holds it by default, as in Kubernetes).
pub(crate) async fn node_proxy(
    shared: &Arc<ApiState>,
    _user: &crate::context::User,
    node: &str,
    path: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    if req.method() != http::Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "a node's endpoints are read with GET only, not {}",
            req.method()
        )));
    }
    shared.store.get(&NODES, "", node).await.map_err(store_err(&NODES))?;
    let streams = shared.config.edge_streams.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", "no edge connections are served here")
    })?;
    let path = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    let request = SessionRequest { kind: Some(SessionKind::Proxy), path, ..SessionRequest::default() };
    let header = Bytes::from(serde_json::to_vec(&request).map_err(|e| ApiError::internal(e.to_string()))?);
    let (session, reply) = open_session(streams.as_ref(), node, header).await?;
    let body = read_body(session, MAX_PROXY_BODY, node).await?;
    let mut r = Response::new(Body::Full(http_body_util::Full::new(Bytes::from(body))));
    let content_type = HeaderValue::from_str(&reply.content_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    r.headers_mut().insert(header::CONTENT_TYPE, content_type);
    Ok(r)
}

fn timeout(node: &str) -> ApiError {
    ApiError::new(
        StatusCode::GATEWAY_TIMEOUT,
        "Timeout",
        format!("node {node:?} did not answer within {}s", REPLY_DEADLINE.as_secs()),
    )
}

/// The API's answer for an edge's refusal.
fn reply_error(reply: &SessionReply) -> ApiError {
    let code = StatusCode::from_u16(reply.code)
        .ok()
        .filter(|c| c.is_client_error() || c.is_server_error())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = match reply.reason.as_str() {
        "NotFound" => "NotFound",
        "BadRequest" => "BadRequest",
        "Conflict" => "Conflict",
        "Forbidden" => "Forbidden",
        "ServiceUnavailable" => "ServiceUnavailable",
        "Timeout" => "Timeout",
        _ if code == StatusCode::BAD_REQUEST => "BadRequest",
        _ => "InternalError",
    };
    ApiError::new(code, reason, reply.message.clone())
}

/// The container a request names, or the pod's only one, as Kubernetes
/// chooses it.
fn pick_container(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names = |field: &str| -> Vec<String> {
        pod["spec"][field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect()
    };
    let containers = names("containers");
    let init = names("initContainers");
    match asked.filter(|c| !c.is_empty()) {
        Some(c) if containers.iter().chain(&init).any(|n| n == c) => Ok(c.to_owned()),
        Some(c) => Err(ApiError::bad_request(format!("container {c} is not valid for pod {name}"))),
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None => {
            let mut m =
                format!("a container name must be specified for pod {name}, choose one of: [{}]", containers.join(" "));
            if !init.is_empty() {
                m.push_str(&format!(" or one of the init containers: [{}]", init.join(" ")));
            }
            Err(ApiError::bad_request(m))
        }
    }
}

/// `pods/log`'s query, checked as Kubernetes checks `PodLogOptions`.
fn log_options(query: &Query, name: &str) -> Result<LogOptions, ApiError> {
    let mut causes = Vec::new();
    let mut bad = |field: &str, value: &str, why: &str| {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("{field}: Invalid value: {value}: {why}"),
            field: field.into(),
        });
    };
    let tail_lines = query.int("tailLines")?;
    let since_seconds = query.int("sinceSeconds")?;
    let limit_bytes = query.int("limitBytes")?;
    let since_time = query.get("sinceTime").filter(|s| !s.is_empty()).map(str::to_owned);
    if let Some(t) = tail_lines
        && t < 0
    {
        bad("tailLines", &t.to_string(), "must be greater than or equal to 0");
    }
    if let Some(s) = since_seconds
        && s < 1
    {
        bad("sinceSeconds", &s.to_string(), "must be greater than 0");
    }
    if let Some(l) = limit_bytes
        && l < 1
    {
        bad("limitBytes", &l.to_string(), "must be greater than 0");
    }
    if since_seconds.is_some() && since_time.is_some() {
        bad("sinceSeconds", "", "at most one of `sinceTime` or `sinceSeconds` may be specified");
    }
    if let Some(t) = &since_time
        && time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).is_err()
    {
        return Err(ApiError::bad_request(format!("parsing time {t:?}: not an RFC 3339 time")));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid("PodLogOptions", "", name, causes));
    }
    Ok(LogOptions {
        follow: query.flag("follow"),
        previous: query.flag("previous"),
        timestamps: query.flag("timestamps"),
        tail_lines: tail_lines.map(|t| t.unsigned_abs()),
        since_seconds: since_seconds.map(|s| s.unsigned_abs()),
        since_time,
        limit_bytes: limit_bytes.map(|l| l.unsigned_abs()),
    })
}

fn log_response(body: Option<mpsc::Receiver<Bytes>>) -> Response<Body> {
    let body = match body {
        Some(rx) => Body::Stream(rx),
        None => Body::Full(http_body_util::Full::new(Bytes::new())),
    };
    let mut r = Response::new(body);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r.headers_mut().insert("transfer-encoding", HeaderValue::from_static("chunked"));
    r
}

/// Copies the log session into the response body until either ends.
async fn pump_log(tx: StreamTx, mut rx: StreamRx, out: mpsc::Sender<Bytes>) {
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Ok(Some(b)) => {
                    if out.send(b).await.is_err() {
                        tx.reset("the client went away");
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::info!(error = %e, "log session ended");
                    return;
                }
            },
            () = out.closed() => {
                tx.reset("the client went away");
                return;
            }
        }
    }
}

/// A WebSocket upgrade's required headers.
fn websocket_upgrade_checks(req: &Request<Incoming>) -> Result<(), ApiError> {
    let h = req.headers();
    let has = |name: header::HeaderName, token: &str| {
        h.get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    if h.get("sec-websocket-key").is_none() {
        return Err(ApiError::bad_request("WebSocket upgrade without Sec-WebSocket-Key"));
    }
    Ok(())
}

/// Whether a request asks for a WebSocket and which subprotocol it gets.
fn websocket_protocol(req: &Request<Incoming>) -> Result<&'static str, ApiError> {
    let h = req.headers();
    let upgrade = h.get(header::UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if upgrade.to_ascii_lowercase().starts_with("spdy") {
        return Err(ApiError::bad_request(
            "SPDY/3.1 streams are not served: this server speaks Kubernetes' WebSocket stream protocols \
             (v5.channel.k8s.io, v4.channel.k8s.io); use kubectl 1.31 or later",
        ));
    }
    websocket_upgrade_checks(req)?;
    let offered = offered_protocols(req);
    REMOTE_COMMAND_PROTOCOLS.into_iter().find(|p| offered.iter().any(|o| o == p)).ok_or_else(|| {
        ApiError::bad_request(format!(
            "none of the offered WebSocket subprotocols {offered:?} is served; this server speaks {}",
            REMOTE_COMMAND_PROTOCOLS.join(", ")
        ))
    })
}

/// Relays a remote command WebSocket and a session, message for frame,
/// until the session ends; then closes the WebSocket.
async fn relay(upgraded: hyper::upgrade::Upgraded, protocol: &'static str, mut tx: StreamTx, mut rx: StreamRx) {
    let config = WebSocketConfig::default().max_message_size(Some(4 << 20)).max_frame_size(Some(4 << 20));
    let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
    let (mut sink, mut source) = ws.split();
    let v5 = protocol == REMOTE_COMMAND_PROTOCOLS[0];
    // The two directions run on their own: input waiting for the node's
    // credit never holds the command's output back (which could hold the
    // command, and so its input, forever).
    let up = async {
        loop {
            match source.next().await {
                Some(Ok(Frame::Binary(b))) => {
                    // Not a v4 channel: ignored, as Kubernetes does.
                    if b.is_empty() || (!v5 && b[0] == channel::CLOSE) {
                        continue;
                    }
                    if let Err(e) = send_split(&mut tx, &b).await {
                        return e.to_string();
                    }
                }
                Some(Ok(Frame::Close(_))) | None => {
                    // The client closed its connection (stdin alone is
                    // closed on channel 255): nothing more can reach it, so
                    // the session ends, which stops the command's side even
                    // if it never writes again.
                    tx.reset("the client closed the connection");
                    return "the client closed the connection".to_owned();
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tx.reset("the client's connection failed");
                    return e.to_string();
                }
            }
        }
    };
    let down = async {
        loop {
            match rx.recv().await {
                Ok(Some(b)) => {
                    if sink.send(Frame::Binary(b)).await.is_err() {
                        return Err(None);
                    }
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(Some(e.to_string())),
            }
        }
    };
    let end: Option<String> = tokio::select! {
        why = up => Some(why),
        r = down => r.err().flatten(),
    };
    if let Some(why) = end {
        // Tell the client why, on the error channel, as a Status.
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("stream to the node ended: {why}"), "reason": "InternalError", "code": 500,
        });
        let mut b = BytesMut::from(&[channel::ERROR][..]);
        b.extend_from_slice(&serde_json::to_vec(&status).unwrap_or_default());
        let _ = sink.send(Frame::Binary(b.freeze())).await;
    }
    let close = CloseFrame { code: CloseCode::Normal, reason: "".into() };
    let _ = sink.send(Frame::Close(Some(close))).await;
    let _ = sink.close().await;
}

/// Sends one channel message as session frames of at most [`MAX_DATA`]
/// bytes, each starting with the channel byte.
async fn send_split(tx: &mut StreamTx, msg: &[u8]) -> Result<(), edgehive_viaduct::StreamError> {
    if msg.len() <= MAX_DATA {
        return tx.send(Bytes::copy_from_slice(msg)).await;
    }
    let (ch, data) = (msg[0], &msg[1..]);
    for part in data.chunks(MAX_DATA - 1) {
        let mut b = BytesMut::with_capacity(part.len() + 1);
        b.extend_from_slice(&[ch]);
        b.extend_from_slice(part);
        tx.send(b.freeze()).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn the_container_is_chosen_as_kubernetes_chooses_it() {
        let one = json!({"spec": {"containers": [{"name": "app"}]}});
        assert_eq!(pick_container(&one, "p", None).unwrap(), "app");
        assert_eq!(pick_container(&one, "p", Some("")).unwrap(), "app");
        let e = pick_container(&one, "p", Some("nope")).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (StatusCode::BAD_REQUEST, "container nope is not valid for pod p"));
        let two = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]}});
        assert_eq!(
            pick_container(&two, "p", None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        assert_eq!(pick_container(&two, "p", Some("i")).unwrap(), "i");
    }

    #[test]
    fn log_options_are_checked_as_kubernetes_checks_them() {
        let q = Query::parse(Some("follow=true&tailLines=5&timestamps=1&limitBytes=100"));
        let o = log_options(&q, "p").unwrap();
        assert!(o.follow && o.timestamps && !o.previous);
        assert_eq!((o.tail_lines, o.limit_bytes), (Some(5), Some(100)));
        for (raw, field) in [
            ("tailLines=-1", "tailLines"),
            ("sinceSeconds=0", "sinceSeconds"),
            ("limitBytes=0", "limitBytes"),
            ("sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", "sinceSeconds"),
        ] {
            let e = log_options(&Query::parse(Some(raw)), "p").unwrap_err();
            assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY, "{raw}");
            assert!(e.message.starts_with("PodLogOptions \"p\" is invalid"), "{raw}: {}", e.message);
            assert!(e.message.contains(field), "{raw}: {}", e.message);
        }
        assert_eq!(
            log_options(&Query::parse(Some("sinceTime=yesterday")), "p").unwrap_err().code,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(log_options(&Query::parse(Some("tailLines=x")), "p").unwrap_err().code, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn refusals_keep_the_edges_status() {
        let e = reply_error(&SessionReply::refuse(404, "NotFound", "container \"x\" not found"));
        assert_eq!((e.code, e.reason), (StatusCode::NOT_FOUND, "NotFound"));
        let e = reply_error(&SessionReply::refuse(400, "Whatever", "waiting to start"));
        assert_eq!((e.code, e.reason), (StatusCode::BAD_REQUEST, "BadRequest"));
        let e = reply_error(&SessionReply::refuse(999, "", "odd"));
        assert_eq!(e.code, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
