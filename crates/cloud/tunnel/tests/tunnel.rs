//! The tunnel server against a fake EdgeStream speaking KubeEdge's tunnel
//! byte for byte: who may open a tunnel, what breaks one, and how each
//! stream session is translated both ways.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use edgehive_model::session::{LogOptions, SessionKind, SessionReply, SessionRequest};
use edgehive_testkit::pki::{Issued, TestCa};
use edgehive_tunnel::message::{MessageType, TunnelMessage};
use edgehive_tunnel::{OpenError, TunnelConfig, TunnelServer, Tunnels};
use edgehive_viaduct::{Identity, ServerTls, Stream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};
use tokio::time::{Instant, timeout};
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

struct Cloud {
    ca: TestCa,
    addr: std::net::SocketAddr,
    tunnels: Tunnels,
    metrics: Arc<edgehive_tunnel::TunnelMetrics>,
    stop: CancellationToken,
}

impl Drop for Cloud {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn cloud(tune: impl FnOnce(&mut TunnelConfig)) -> Cloud {
    let ca = TestCa::new("tunnel-test-ca");
    let server = ca.server();
    let tls = ServerTls {
        identity: Identity { cert_chain: vec![server.cert.clone()], key: server.key.clone_key() },
        client_ca: vec![ca.cert.clone()],
    };
    let mut config = TunnelConfig::new("127.0.0.1:0".parse().unwrap(), tls);
    tune(&mut config);
    let server = TunnelServer::bind(config, None).await.unwrap();
    let (addr, tunnels, metrics) = (server.local_addr(), server.tunnels(), server.metrics());
    let stop = CancellationToken::new();
    tokio::spawn(server.serve(stop.clone()));
    Cloud { ca, addr, tunnels, metrics, stop }
}

async fn tls_connect(
    addr: std::net::SocketAddr,
    ca: &TestCa,
    cert: Option<&Issued>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match cert {
        Some(c) => builder.with_client_auth_cert(vec![c.cert.clone()], c.key.clone_key()).unwrap(),
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await
}

/// EdgeStream's upgrade request; (status, body) of a refusal, or the
/// stream after a 101.
async fn upgrade<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, node: &str) -> Result<(), (u16, String)> {
    let req = format!(
        "GET /v1/kubeedge/connect HTTP/1.1\r\nHost: cloud\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         SessionHostNameOverride: {node}\r\nSessionInternalIP: 192.0.2.7\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.map_err(|e| (0, e.to_string()))?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            Ok(_) => return Err((0, "closed".into())),
            Err(e) => return Err((0, e.to_string())),
        }
    }
    let text = String::from_utf8(head).unwrap();
    let status: u16 = text[9..12].parse().unwrap();
    if status == 101 {
        let accept = derive_accept_key(b"dGhlIHNhbXBsZSBub25jZQ==").to_ascii_lowercase();
        let lower = text.to_ascii_lowercase();
        for line in
            [format!("sec-websocket-accept: {accept}"), "connection: upgrade".into(), "upgrade: websocket".into()]
        {
            assert!(lower.contains(&format!("{line}\r\n")), "{line:?} in {text}");
        }
        return Ok(());
    }
    let mut body = Vec::new();
    let _ = timeout(Duration::from_secs(2), s.read_to_end(&mut body)).await;
    Err((status, String::from_utf8_lossy(&body).into_owned()))
}

/// A masked client frame.
fn client_frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut b = vec![first];
    match payload.len() {
        n if n < 126 => b.push(0x80 | n as u8),
        n if n <= 65535 => {
            b.push(0x80 | 126);
            b.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            b.push(0x80 | 127);
            b.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    b.extend_from_slice(&mask);
    b.extend(payload.iter().enumerate().map(|(i, x)| x ^ mask[i % 4]));
    b
}

/// What the fake edge got: a tunnel message, or the close frame's code.
#[derive(Debug)]
enum Got {
    Message(TunnelMessage),
    Close(u16),
}

/// A fake EdgeStream: writes tunnel messages as text frames, as KubeEdge
/// does; its reader hands over what the cloud sends.
struct Edge {
    w: Mutex<WriteHalf<TlsStream<TcpStream>>>,
    got: Mutex<mpsc::Receiver<Got>>,
}

impl Edge {
    async fn connect(cloud: &Cloud, node: &str, cert: &Issued) -> Result<Edge, (u16, String)> {
        let mut s = tls_connect(cloud.addr, &cloud.ca, Some(cert)).await.map_err(|e| (0, e.to_string()))?;
        upgrade(&mut s, node).await?;
        let (r, w) = tokio::io::split(s);
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(read_frames(r, tx));
        Ok(Edge { w: Mutex::new(w), got: Mutex::new(rx) })
    }

    async fn raw(&self, bytes: &[u8]) {
        let mut w = self.w.lock().await;
        w.write_all(bytes).await.unwrap();
        w.flush().await.unwrap();
    }

    async fn send(&self, id: u64, kind: MessageType, data: &[u8]) {
        let m = TunnelMessage::new(id, kind, Bytes::copy_from_slice(data));
        self.raw(&client_frame(0x81, &m.encode())).await;
    }

    async fn next(&self) -> Got {
        timeout(WAIT, self.got.lock().await.recv()).await.expect("the cloud sent nothing").expect("tunnel ended")
    }

    async fn next_message(&self) -> TunnelMessage {
        match self.next().await {
            Got::Message(m) => m,
            Got::Close(code) => panic!("tunnel closed with {code}"),
        }
    }
}

async fn read_frames(mut r: ReadHalf<TlsStream<TcpStream>>, tx: mpsc::Sender<Got>) {
    loop {
        let mut head = [0u8; 2];
        if r.read_exact(&mut head).await.is_err() {
            return;
        }
        assert_eq!(head[1] & 0x80, 0, "server frames are not masked");
        let len = match head[1] & 0x7f {
            126 => u64::from(r.read_u16().await.unwrap()),
            127 => r.read_u64().await.unwrap(),
            n => u64::from(n),
        };
        let mut payload = vec![0u8; len as usize];
        r.read_exact(&mut payload).await.unwrap();
        let got = match head[0] & 0x0f {
            0x1 => Got::Message(TunnelMessage::decode(Bytes::from(payload)).unwrap()),
            0x8 => Got::Close(u16::from_be_bytes([payload[0], payload[1]])),
            op => panic!("unexpected opcode {op} (KubeEdge's cloud sends text messages)"),
        };
        if tx.send(got).await.is_err() {
            return;
        }
    }
}

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn connected(cloud: &Cloud, node: &str) -> Edge {
    let edge = Edge::connect(cloud, node, &cloud.ca.node(node)).await.unwrap();
    eventually("the tunnel registered", || cloud.tunnels.is_connected(node)).await;
    edge
}

fn request(kind: SessionKind) -> SessionRequest {
    SessionRequest {
        kind: Some(kind),
        namespace: "default".into(),
        pod: "web".into(),
        container: "app".into(),
        ..SessionRequest::default()
    }
}

async fn open(cloud: &Cloud, node: &str, r: &SessionRequest) -> Stream {
    cloud.tunnels.open(node, Bytes::from(serde_json::to_vec(r).unwrap())).await.unwrap()
}

async fn reply_of(s: &mut edgehive_viaduct::StreamRx) -> SessionReply {
    let first = timeout(WAIT, s.recv()).await.unwrap().unwrap().unwrap();
    serde_json::from_slice(&first).unwrap()
}

async fn recv(s: &mut edgehive_viaduct::StreamRx) -> Option<Bytes> {
    timeout(WAIT, s.recv()).await.unwrap().unwrap()
}

#[tokio::test]
async fn only_a_nodes_own_certificate_opens_its_tunnel() {
    let cloud = cloud(|_| {}).await;
    // No client certificate: the TLS handshake fails.
    let no_cert = async {
        let mut s = tls_connect(cloud.addr, &cloud.ca, None).await?;
        upgrade(&mut s, "edge-a").await.map_err(|(_, e)| std::io::Error::other(e))
    };
    assert!(no_cert.await.is_err(), "a tunnel without a client certificate");
    // A certificate of another CA: the same.
    let foreign = TestCa::new("other").node("edge-a");
    assert!(Edge::connect(&cloud, "edge-a", &foreign).await.is_err());
    eventually("TLS failures counted", || cloud.metrics.tls_failures() == 2).await;

    // Node A's certificate claiming node B.
    let (status, body) = Edge::connect(&cloud, "edge-b", &cloud.ca.node("edge-a")).await.err().unwrap();
    assert_eq!(status, 403);
    assert!(body.contains("may not open the tunnel of node \"edge-b\""), "{body}");
    // A certificate naming no node (KubeEdge v1.15's CN=kubeedge.io).
    let (status, body) = Edge::connect(&cloud, "edge-b", &cloud.ca.client("kubeedge.io", None)).await.err().unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(!cloud.tunnels.is_connected("edge-b"));

    // Its own: accepted.
    let _a = connected(&cloud, "edge-a").await;
    assert_eq!(cloud.tunnels.nodes(), ["edge-a"]);
    assert_eq!(cloud.metrics.connected(), 1);
    let e = cloud.tunnels.open("edge-b", Bytes::from_static(b"{}")).await.unwrap_err();
    assert_eq!(e, OpenError::NotConnected("edge-b".into()));
}

#[tokio::test]
async fn unnamed_certificates_open_tunnels_only_where_the_cloud_allows_them() {
    let cloud = cloud(|c| c.require_node_certificate = false).await;
    let _edge = Edge::connect(&cloud, "edge-k", &cloud.ca.client("kubeedge.io", None)).await.unwrap();
    eventually("the tunnel registered", || cloud.tunnels.is_connected("edge-k")).await;
    // A named certificate still opens only its own node's.
    let (status, _) = Edge::connect(&cloud, "edge-k", &cloud.ca.node("edge-a")).await.err().unwrap();
    assert_eq!(status, 403);
}

#[tokio::test]
async fn a_malformed_or_oversize_frame_closes_that_tunnel_only() {
    let cloud = cloud(|c| c.max_message = 4096).await;
    let a = connected(&cloud, "edge-a").await;
    let b = connected(&cloud, "edge-b").await;
    let c = connected(&cloud, "edge-c").await;
    // A varint that never ends.
    a.raw(&client_frame(0x81, &[0x80; 11])).await;
    assert!(matches!(a.next().await, Got::Close(1002)));
    // A frame over the limit, refused from its header.
    let mut oversize = vec![0x81, 0x80 | 127];
    oversize.extend_from_slice(&(1u64 << 40).to_be_bytes());
    oversize.extend_from_slice(&[0, 0, 0, 0]);
    b.raw(&oversize).await;
    assert!(matches!(b.next().await, Got::Close(1009)));
    eventually("both tunnels gone", || cloud.tunnels.nodes() == ["edge-c"]).await;
    assert_eq!(cloud.metrics.malformed(), 2);

    // The other node's tunnel still carries sessions.
    let (_tx, mut rx) = open(&cloud, "edge-c", &request(SessionKind::Log)).await.split();
    let connect = c.next_message().await;
    assert_eq!(connect.kind, MessageType::LogsConnect);
    c.send(connect.connect_id, MessageType::Data, b"still here\n").await;
    c.send(connect.connect_id, MessageType::RemoveConnect, b"").await;
    assert_eq!(reply_of(&mut rx).await.code, 200);
    assert_eq!(recv(&mut rx).await.unwrap().as_ref(), b"still here\n");
    assert_eq!(recv(&mut rx).await, None);
}

/// KubeEdge's table keeps the newest tunnel of a node; the older one is
/// closed here, and sessions go through the newer.
#[tokio::test]
async fn a_newer_tunnel_of_a_node_replaces_the_older() {
    let cloud = cloud(|_| {}).await;
    let old = connected(&cloud, "edge-a").await;
    let new = Edge::connect(&cloud, "edge-a", &cloud.ca.node("edge-a")).await.unwrap();
    assert!(matches!(old.next().await, Got::Close(1000)));
    assert_eq!(cloud.tunnels.nodes(), ["edge-a"]);
    let (_tx, _rx) = open(&cloud, "edge-a", &request(SessionKind::Log)).await.split();
    assert_eq!(new.next_message().await.kind, MessageType::LogsConnect);
    assert_eq!(cloud.metrics.connected(), 1);
}

#[tokio::test]
async fn a_log_session_asks_for_the_kubelet_path_and_relays_the_body() {
    let cloud = cloud(|_| {}).await;
    let edge = connected(&cloud, "edge-a").await;
    let mut r = request(SessionKind::Log);
    r.log = LogOptions { tail_lines: Some(2), timestamps: true, ..LogOptions::default() };
    let (_tx, mut rx) = open(&cloud, "edge-a", &r).await.split();
    let connect = edge.next_message().await;
    assert_eq!(connect.kind, MessageType::LogsConnect);
    let json: serde_json::Value = serde_json::from_slice(&connect.data).unwrap();
    assert_eq!(json["MessID"], connect.connect_id);
    assert_eq!(json["url"]["Host"], "127.0.0.1:10350");
    assert_eq!(json["url"]["Path"], "/containerLogs/default/web/app");
    assert_eq!(json["url"]["RawQuery"], "tailLines=2&timestamps=true");
    // As EdgedLogsConnection sends the body: 256 bytes at a time.
    let body: Vec<u8> = (0..1000).map(|i| b'a' + (i % 26) as u8).collect();
    for part in body.chunks(256) {
        edge.send(connect.connect_id, MessageType::Data, part).await;
    }
    edge.send(connect.connect_id, MessageType::RemoveConnect, b"").await;
    assert_eq!(reply_of(&mut rx).await, SessionReply::ok());
    let mut got = Vec::new();
    while let Some(b) = recv(&mut rx).await {
        got.extend_from_slice(&b);
    }
    assert_eq!(got, body);
    // The cloud ends its side too.
    let remove = edge.next_message().await;
    assert_eq!((remove.connect_id, remove.kind), (connect.connect_id, MessageType::RemoveConnect));
    eventually("the session is gone", || cloud.metrics.sessions_open() == 0).await;
}

#[tokio::test]
async fn a_metrics_session_reads_the_kubelet_summary_into_a_usage_summary() {
    let cloud = cloud(|_| {}).await;
    let edge = connected(&cloud, "edge-a").await;
    let r = SessionRequest { kind: Some(SessionKind::Metrics), ..SessionRequest::default() };
    let (_tx, mut rx) = open(&cloud, "edge-a", &r).await.split();
    let connect = edge.next_message().await;
    assert_eq!(connect.kind, MessageType::MetricConnect);
    // As EdgedMetricsConnection sends the body: a line a message.
    let summary = "{\"node\":{\"cpu\":{\"time\":\"2026-11-25T01:00:00Z\",\"usageNanoCores\":7},\n\"memory\":{\"workingSetBytes\":1024}},\"pods\":[]}";
    for line in summary.lines() {
        edge.send(connect.connect_id, MessageType::Data, format!("{line}\n").as_bytes()).await;
    }
    edge.send(connect.connect_id, MessageType::RemoveConnect, b"").await;
    let reply = reply_of(&mut rx).await;
    assert_eq!((reply.code, reply.content_type.as_str()), (200, "application/json"));
    let mut body = Vec::new();
    while let Some(b) = recv(&mut rx).await {
        body.extend_from_slice(&b);
    }
    let usage: edgehive_model::session::UsageSummary = serde_json::from_slice(&body).unwrap();
    assert_eq!((usage.node.cpu_nano_cores, usage.node.memory_bytes), (7, 1024));
    let remove = edge.next_message().await;
    assert_eq!((remove.connect_id, remove.kind), (connect.connect_id, MessageType::RemoveConnect));

    // An answer that is not a summary (the edge relays no status): a
    // refusal saying so.
    let (_tx, mut rx) = open(&cloud, "edge-a", &r).await.split();
    let connect = edge.next_message().await;
    edge.send(connect.connect_id, MessageType::Data, b"404 page not found\n").await;
    edge.send(connect.connect_id, MessageType::RemoveConnect, b"").await;
    let reply = reply_of(&mut rx).await;
    assert_eq!(reply.code, 502);
    assert!(reply.message.contains("does not parse"), "{reply:?}");
}

#[tokio::test]
async fn a_client_that_goes_away_ends_the_edges_connection() {
    let cloud = cloud(|_| {}).await;
    let edge = connected(&cloud, "edge-a").await;
    let mut r = request(SessionKind::Log);
    r.log.follow = true;
    let (tx, mut rx) = open(&cloud, "edge-a", &r).await.split();
    let connect = edge.next_message().await;
    assert!(std::str::from_utf8(&connect.data).unwrap().contains(r#""RawQuery":"follow=true""#));
    // A followed log is answered at once: a quiet container sends nothing.
    assert_eq!(reply_of(&mut rx).await.code, 200);
    edge.send(connect.connect_id, MessageType::Data, b"one\n").await;
    assert_eq!(recv(&mut rx).await.unwrap().as_ref(), b"one\n");
    tx.reset("the client went away");
    let remove = edge.next_message().await;
    assert_eq!((remove.connect_id, remove.kind), (connect.connect_id, MessageType::RemoveConnect));
}

#[tokio::test]
async fn an_edge_that_never_answers_times_out_and_unsupported_sessions_are_refused() {
    let cloud = cloud(|c| c.reply_timeout = Duration::from_millis(300)).await;
    let edge = connected(&cloud, "edge-a").await;
    for kind in [SessionKind::Log, SessionKind::Exec] {
        let mut r = request(kind);
        r.command = vec!["true".into()];
        r.stdout = true;
        let (_tx, mut rx) = open(&cloud, "edge-a", &r).await.split();
        let connect = edge.next_message().await;
        let reply = reply_of(&mut rx).await;
        assert_eq!((reply.code, reply.reason.as_str()), (504, "Timeout"), "{kind:?}");
        assert!(reply.message.contains("did not answer"), "{}", reply.message);
        let remove = edge.next_message().await;
        assert_eq!((remove.connect_id, remove.kind), (connect.connect_id, MessageType::RemoveConnect));
    }
    let mut forward = request(SessionKind::Portforward);
    forward.port = Some(80);
    let (_tx, mut rx) = open(&cloud, "edge-a", &forward).await.split();
    let reply = reply_of(&mut rx).await;
    assert_eq!(reply.code, 400);
    assert!(reply.message.contains("port forwarding"), "{}", reply.message);
}

/// What an exec's connect message asks for, and the fake edge's server
/// answering it over the DATA bytes: the head, then (after a 101) a
/// WebSocket server on the far end of a pipe pumped to and from DATA.
struct FakeServer {
    id: u64,
    key: String,
    query: String,
}

fn parse_connect(m: &TunnelMessage) -> FakeServer {
    let json: serde_json::Value = serde_json::from_slice(&m.data).unwrap();
    assert_eq!(json["method"], "GET");
    FakeServer {
        id: m.connect_id,
        key: json["header"]["Sec-Websocket-Key"][0].as_str().unwrap().to_owned(),
        query: format!("{}?{}", json["url"]["Path"].as_str().unwrap(), json["url"]["RawQuery"].as_str().unwrap()),
    }
}

/// Pumps a pipe's far end to and from the edge's DATA messages of `id`
/// until either ends.
async fn pump_data(edge: Arc<Edge>, id: u64, far: DuplexStream) {
    let (mut r, mut w) = tokio::io::split(far);
    let out = {
        let edge = Arc::clone(&edge);
        async move {
            let mut buf = [0u8; 256];
            loop {
                match r.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => edge.send(id, MessageType::Data, &buf[..n]).await,
                }
            }
        }
    };
    let inb = async move {
        loop {
            let m = edge.next_message().await;
            assert_eq!(m.connect_id, id);
            match m.kind {
                MessageType::Data => w.write_all(&m.data).await.unwrap(),
                MessageType::RemoveConnect => return,
                other => panic!("unexpected {other}"),
            }
        }
    };
    tokio::select! { () = out => {}, () = inb => {} }
}

async fn next(ws: &mut WebSocketStream<DuplexStream>) -> Bytes {
    timeout(WAIT, ws.next()).await.unwrap().unwrap().unwrap().into_data()
}

#[tokio::test]
async fn an_exec_speaks_remote_command_over_the_tunnels_bytes() {
    let cloud = cloud(|_| {}).await;
    let edge = Arc::new(connected(&cloud, "edge-a").await);
    for protocol in ["v5.channel.k8s.io", "v4.channel.k8s.io"] {
        let mut r = request(SessionKind::Exec);
        r.command = vec!["sh".into(), "-c".into(), "cat".into()];
        (r.stdin, r.stdout, r.stderr) = (true, true, true);
        let (mut tx, mut rx) = open(&cloud, "edge-a", &r).await.split();
        let connect = edge.next_message().await;
        assert_eq!(connect.kind, MessageType::ExecConnect);
        let fake = parse_connect(&connect);
        assert_eq!(fake.query, "/exec/default/web/app?command=sh&command=-c&command=cat&error=1&input=1&output=1");
        // The 101 and the server's first message in one DATA, as the edge's
        // 256-byte reads may well put them.
        let mut first = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\nSec-WebSocket-Protocol: {protocol}\r\n\r\n",
            derive_accept_key(fake.key.as_bytes())
        )
        .into_bytes();
        first.extend_from_slice(&[0x82, 0x06, 0x01, b'r', b'e', b'a', b'd', b'y']);
        edge.send(fake.id, MessageType::Data, &first).await;
        let (near, far) = tokio::io::duplex(64 * 1024);
        let pump = tokio::spawn(pump_data(Arc::clone(&edge), fake.id, far));
        let mut ws = WebSocketStream::from_raw_socket(near, Role::Server, None).await;

        assert_eq!(reply_of(&mut rx).await, SessionReply::ok());
        assert_eq!(recv(&mut rx).await.unwrap().as_ref(), b"\x01ready");
        // Stdin, then (v5 only) its close, reach the server as messages.
        tx.send(Bytes::from_static(b"\x00hello")).await.unwrap();
        tx.send(Bytes::from_static(b"\xff\x00")).await.unwrap();
        tx.send(Bytes::from_static(b"\x04{\"Width\":80,\"Height\":24}")).await.unwrap();
        assert_eq!(next(&mut ws).await.as_ref(), b"\x00hello");
        if protocol == "v5.channel.k8s.io" {
            assert_eq!(next(&mut ws).await.as_ref(), b"\xff\x00");
        }
        assert_eq!(next(&mut ws).await.as_ref(), b"\x04{\"Width\":80,\"Height\":24}");
        // Output larger than a session frame is split, keeping its channel.
        let big = [&[1u8][..], &vec![b'x'; 40_000]].concat();
        ws.send(WsMessage::Binary(Bytes::from(big))).await.unwrap();
        let status = br#"{"metadata":{},"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        ws.send(WsMessage::Binary(Bytes::from([&[3u8][..], status].concat()))).await.unwrap();
        ws.close(None).await.unwrap();
        let mut out = 0;
        let mut frames = Vec::new();
        while let Some(f) = recv(&mut rx).await {
            frames.push(f);
        }
        for f in &frames[..frames.len() - 1] {
            assert_eq!(f[0], 1);
            out += f.len() - 1;
        }
        assert_eq!(out, 40_000);
        assert_eq!(frames.last().unwrap().as_ref(), [&[3u8][..], status].concat());
        // The cloud ends the connection: the pump sees REMOVE_CONNECT.
        timeout(WAIT, pump).await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn an_error_from_the_edges_server_refuses_the_session_with_its_status() {
    let cloud = cloud(|_| {}).await;
    let edge = connected(&cloud, "edge-a").await;
    let mut r = request(SessionKind::Attach);
    (r.stdout, r.tty) = (true, true);
    let (_tx, mut rx) = open(&cloud, "edge-a", &r).await.split();
    let connect = edge.next_message().await;
    assert_eq!(connect.kind, MessageType::AttachConnect);
    assert_eq!(parse_connect(&connect).query, "/attach/default/web/app?output=1&tty=1");
    let body = "container not found (\"app\")\n";
    let response =
        format!("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    // In pieces, as the edge relays it.
    for part in response.as_bytes().chunks(20) {
        edge.send(connect.connect_id, MessageType::Data, part).await;
    }
    let reply = reply_of(&mut rx).await;
    assert_eq!(
        (reply.code, reply.reason.as_str(), reply.message.as_str()),
        (404, "NotFound", "container not found (\"app\")")
    );
    let remove = edge.next_message().await;
    assert_eq!((remove.connect_id, remove.kind), (connect.connect_id, MessageType::RemoveConnect));
}

/// A session whose reader does not keep up is ended after the stall
/// deadline; the tunnel and its other sessions go on.
#[tokio::test]
async fn a_stalled_session_ends_alone() {
    let cloud = cloud(|c| {
        c.session_budget = 4096;
        c.stall_timeout = Duration::from_millis(200);
    })
    .await;
    let edge = connected(&cloud, "edge-a").await;
    let mut r = request(SessionKind::Log);
    r.log.follow = true;
    let (_stuck_tx, mut stuck) = open(&cloud, "edge-a", &r).await.split();
    let first = edge.next_message().await;
    assert_eq!(reply_of(&mut stuck).await.code, 200);
    // Far more than the session's window and budget, never read.
    let chunk = vec![b'z'; 16 * 1024];
    for _ in 0..40 {
        edge.send(first.connect_id, MessageType::Data, &chunk).await;
    }
    let remove = edge.next_message().await;
    assert_eq!((remove.connect_id, remove.kind), (first.connect_id, MessageType::RemoveConnect));
    // The stuck reader sees what it was given, then the reset.
    let end = loop {
        match timeout(WAIT, stuck.recv()).await.unwrap() {
            Ok(Some(_)) => {}
            other => break other,
        }
    };
    assert!(matches!(end, Err(edgehive_viaduct::StreamError::Reset(ref why)) if why.contains("fell")), "{end:?}");
    // Another session on the same tunnel.
    let (_tx, mut rx) = open(&cloud, "edge-a", &request(SessionKind::Log)).await.split();
    let connect = edge.next_message().await;
    edge.send(connect.connect_id, MessageType::RemoveConnect, b"").await;
    assert_eq!(reply_of(&mut rx).await.code, 200);
    assert_eq!(recv(&mut rx).await, None);
    assert!(cloud.tunnels.is_connected("edge-a"));
}
