//! Fixtures for the viaduct tests: a PKI, servers and clients on 127.0.0.1,
//! and raw clients that misbehave on purpose.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use edgehive_model::{Content, Message, group, op, source};
use edgehive_testkit::pki::{Issued, TestCa};
use edgehive_viaduct::ws::connect;
use edgehive_viaduct::{
    ClientConfig, ClientTls, ConnConfig, ConnRx, ConnTx, Connection, Identity, Server, ServerConfig, ServerTls,
};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub struct Pki {
    pub ca: TestCa,
    pub server: Issued,
}

impl Pki {
    pub fn new() -> Pki {
        let ca = TestCa::new("edgehive-test-ca");
        let server = ca.server();
        Pki { ca, server }
    }

    pub fn server_tls(&self) -> ServerTls {
        ServerTls {
            identity: Identity { cert_chain: vec![self.server.cert.clone()], key: self.server.key.clone_key() },
            client_ca: vec![self.ca.cert.clone()],
        }
    }

    pub fn client_tls(&self, node: &Issued) -> ClientTls {
        ClientTls {
            identity: Identity { cert_chain: vec![node.cert.clone()], key: node.key.clone_key() },
            server_ca: vec![self.ca.cert.clone()],
        }
    }
}

pub async fn server(pki: &Pki, conn: ConnConfig) -> Server {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.conn = conn;
    cfg.handshake_timeout = Duration::from_secs(10);
    Server::bind_ws(cfg).await.unwrap()
}

pub fn client_config(pki: &Pki, addr: SocketAddr, node: &str) -> ClientConfig {
    let cert = pki.ca.node(node);
    ClientConfig::new(addr.to_string(), node, pki.client_tls(&cert))
}

/// Connects a client and returns both ends.
pub async fn pair(pki: &Pki, server: &mut Server, node: &str) -> (Connection, Connection) {
    let client = connect(&client_config(pki, server.local_addr(), node)).await.unwrap();
    let accepted = tokio::time::timeout(Duration::from_secs(10), server.accept()).await.unwrap().unwrap();
    (client, accepted)
}

pub fn pod(name: &str) -> Message {
    Message::build(
        source::EDGECONTROLLER,
        group::RESOURCE,
        format!("default/pod/{name}"),
        op::INSERT,
        Content::from_json(r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x"}}"#).unwrap(),
    )
    .with_resource_version("1")
}

/// A TLS connection with a client certificate, for hand-made WebSocket traffic.
pub async fn raw_tls(pki: &Pki, addr: SocketAddr, cert: Option<&Issued>) -> std::io::Result<TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.cert.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let cfg = match cert {
        Some(c) => builder.with_client_auth_cert(vec![c.cert.clone()], c.key.clone_key()).unwrap(),
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(Arc::new(cfg)).connect("localhost".try_into().unwrap(), tcp).await
}

/// A raw WebSocket client speaking as a KubeEdge edge would.
pub async fn raw_ws(
    pki: &Pki,
    addr: SocketAddr,
    node: &str,
) -> tokio_tungstenite::WebSocketStream<TlsStream<TcpStream>> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let tls = raw_tls(pki, addr, Some(&pki.ca.node(node))).await.unwrap();
    let mut req = format!("wss://localhost:{}/p/{node}/events", addr.port()).into_client_request().unwrap();
    req.headers_mut().insert("node_id", node.parse().unwrap());
    req.headers_mut().insert("project_id", "p".parse().unwrap());
    req.headers_mut().insert("ConnectionUse", "msg".parse().unwrap());
    tokio_tungstenite::client_async(req, tls).await.unwrap().0
}

/// Opens `n` TCP connections to `addr` that never send a byte, one after
/// the other (so that each is in the server's accept queue before the next).
pub async fn silent_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let s = TcpStream::connect(addr).await.unwrap_or_else(|e| panic!("silent connection {i}: {e}"));
        held.push(s);
    }
    held
}

/// Whether the server has closed `stream` (end of stream or reset) within
/// `deadline`; panics if the server sent data instead.
pub async fn closed_within(stream: &mut TcpStream, deadline: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 64];
    match tokio::time::timeout(deadline, stream.read(&mut buf)).await {
        Err(_) => false,
        Ok(Ok(0) | Err(_)) => true,
        Ok(Ok(n)) => panic!("the server sent {n} bytes to a silent connection"),
    }
}

/// Whether `stream` is still open now (nothing to read, no end of stream).
pub fn still_open(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(stream.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Waits for a condition, failing after a generous deadline.
pub async fn eventually(what: &str, cond: impl FnMut() -> bool) {
    edgehive_testkit::eventually(what, Duration::from_secs(30), cond).await
}

/// Answers every message arriving on `accepted` with an `OK` response.
pub fn spawn_ok_responder(accepted: Connection) {
    let (tx, mut rx) = accepted.split();
    tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            if tx.write(m.response(Content::string("OK"))).await.is_err() {
                break;
            }
        }
    });
}

/// Sends `tasks × each` requests concurrently over `client`; returns how many
/// got no `OK` response. The deadline is generous: a timeout means a lost
/// response, not a slow machine.
pub async fn lost_requests(client: &ConnTx, tasks: usize, each: usize) -> usize {
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let client = client.clone();
        handles.push(tokio::spawn(async move {
            let mut lost = 0;
            for _ in 0..each {
                match client.request(pod("q"), Duration::from_secs(60)).await {
                    Ok(r) if r.content.as_text().as_deref() == Some("OK") => {}
                    _ => lost += 1,
                }
            }
            lost
        }));
    }
    let mut lost = 0;
    for h in handles {
        lost += h.await.unwrap();
    }
    lost
}

/// A message written on `from` arrives on `to`.
pub async fn assert_delivers(from: &ConnTx, to: &mut ConnRx) {
    let m = pod("still-fine");
    from.write(m.clone()).await.unwrap();
    assert_eq!(to.recv().await.unwrap(), m);
}
