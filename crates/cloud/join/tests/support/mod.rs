//! Fixtures for the join server tests: a CA and a server on 127.0.0.1, a
//! minimal HTTPS client (rustls + hyper's HTTP/1 connection), and CSRs like
//! the ones a KubeEdge edge sends.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use edgehive_credentials::{Credentials, TokenSpec};
use edgehive_join::{JoinConfig, JoinServer, JoinStats};
use edgehive_pki::{Ca, TOKEN_VALIDITY};
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
use http::{HeaderMap, Request};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use time::OffsetDateTime;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

pub const DAY: Duration = Duration::from_secs(86400);
/// Longest any single exchange may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(15);

/// A client certificate chain and its key.
pub type ClientCert = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// A join server on 127.0.0.1 with its own CA and store, stopped when
/// dropped.
pub struct Cloud {
    pub ca: Arc<Ca>,
    pub addr: SocketAddr,
    pub stats: Arc<JoinStats>,
    /// The token and certificate records.
    pub credentials: Arc<Credentials>,
    pub store: Store,
    /// A token recorded at start, valid a day.
    token: String,
    stop: CancellationToken,
    _dir: TempDir,
}

impl Drop for Cloud {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Cloud {
    pub async fn start() -> Cloud {
        Cloud::start_with(|_| {}).await
    }

    pub async fn start_with(configure: impl FnOnce(&mut JoinConfig)) -> Cloud {
        let dir = TempDir::new("join-server");
        let store =
            Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false }))
                .await
                .unwrap();
        let ca = Arc::new(Ca::generate("join-test-ca").unwrap());
        let credentials = Arc::new(Credentials::new(store.clone(), Arc::clone(&ca)));
        let serving = ca.issue_server("edgehive-cloudhub", &["127.0.0.1".to_string()], DAY).unwrap();
        let mut config = JoinConfig::new((Ipv4Addr::LOCALHOST, 0).into());
        configure(&mut config);
        let server = JoinServer::bind(config, Arc::clone(&credentials), (vec![serving.cert_der], serving.key_der))
            .await
            .unwrap();
        let (addr, stats, stop) = (server.local_addr(), server.stats(), CancellationToken::new());
        tokio::spawn(server.serve(stop.clone()));
        let token = Cloud::make_token(&credentials, &[]).await;
        Cloud { ca, addr, stats, credentials, store, token, stop, _dir: dir }
    }

    /// A recorded token, valid a day, that may take over `rejoin`.
    pub async fn make_token(credentials: &Credentials, rejoin: &[&str]) -> String {
        let spec = TokenSpec {
            ttl: TOKEN_VALIDITY,
            description: "test".into(),
            rejoin_nodes: rejoin.iter().map(|s| s.to_string()).collect(),
        };
        credentials.create_token(&spec, OffsetDateTime::now_utc()).await.unwrap().0
    }

    /// A whole join token, recorded, valid for a day.
    pub fn token(&self) -> String {
        self.token.clone()
    }

    /// The `Authorization` value an edge sends for `token`: `Bearer` and the
    /// token without its CA hash.
    pub fn bearer(token: &str) -> String {
        format!("Bearer {}", token.split_once('.').unwrap().1)
    }

    /// A TLS connection to the server, trusting the CA, with an optional
    /// client certificate.
    pub async fn connect(&self, client: Option<&ClientCert>) -> std::io::Result<TlsStream<TcpStream>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.cert_der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match client {
            Some((chain, key)) => builder.with_client_auth_cert(chain.clone(), key.clone_key()).unwrap(),
            None => builder.with_no_client_auth(),
        };
        let tcp = TcpStream::connect(self.addr).await?;
        let name = ServerName::IpAddress(Ipv4Addr::LOCALHOST.into());
        TlsConnector::from(Arc::new(config)).connect(name, tcp).await
    }

    /// Sends one request on a new connection and reads the whole answer.
    pub async fn send<B>(&self, client: Option<&ClientCert>, request: Request<B>) -> Reply
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let tls = tokio::time::timeout(DEADLINE, self.connect(client)).await.unwrap().unwrap();
        send_on(tls, request).await
    }

    /// `method /edge.crt` with the given headers and a CSR body.
    pub async fn edge_crt(
        &self,
        client: Option<&ClientCert>,
        method: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri("/edge.crt").header("host", "127.0.0.1");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(client, request.body(Full::new(body.into())).unwrap()).await
    }

    /// What a KubeEdge edge sends to join: GET with a body, a token, its name.
    pub async fn join(&self, node: &str, authorization: &str, csr: &[u8]) -> Reply {
        let headers = [("Authorization", authorization), ("NodeName", node)];
        self.edge_crt(None, "GET", &headers, csr.to_vec()).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        let request = Request::get(path).header("host", "127.0.0.1").body(Full::new(Bytes::new())).unwrap();
        self.send(None, request).await
    }
}

/// Sends one request on `tls` and reads the whole answer.
pub async fn send_on<B>(tls: TlsStream<TcpStream>, request: Request<B>) -> Reply
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let exchange = async {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
        tokio::spawn(conn);
        let response = sender.send_request(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        Reply { status: parts.status.as_u16(), headers: parts.headers, body }
    };
    tokio::time::timeout(DEADLINE, exchange).await.expect("the server answers in time")
}

/// A whole answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn content_type(&self) -> &str {
        self.headers.get("content-type").map(|v| v.to_str().unwrap()).unwrap_or("")
    }
}

/// A key and a DER CSR with KubeEdge v1.15's subject.
pub fn kubeedge_csr() -> (KeyPair, Vec<u8>) {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::default();
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CountryName, "CN");
    subject.push(DnType::OrganizationName, "kubeEdge");
    subject.push(DnType::LocalityName, "Hangzhou");
    subject.push(DnType::StateOrProvinceName, "Zhejiang");
    subject.push(DnType::CommonName, "kubeedge.io");
    params.distinguished_name = subject;
    let csr = params.serialize_request(&key).unwrap();
    (key, csr.der().to_vec())
}

/// The client certificate a node holds after joining: the certificate the
/// server sent and the key of its CSR.
pub fn client_cert(cert_der: &[u8], key: &KeyPair) -> ClientCert {
    (vec![CertificateDer::from(cert_der.to_vec())], PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
}

/// Lowercase hex SHA-256, computed here independently of the CA crate.
pub fn sha256_hex(data: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, data).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A body sent with chunked encoding (no `Content-Length`): one chunk.
pub struct Chunked(pub Option<Bytes>);

impl hyper::body::Body for Chunked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|data| Ok(Frame::data(data))))
    }
}

/// Opens `n` TCP connections to `addr` that never send a byte, one after
/// the other (so that each is in the server's accept queue before the next).
pub async fn silent_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        held.push(TcpStream::connect(addr).await.unwrap_or_else(|e| panic!("silent connection {i}: {e}")));
    }
    held
}

/// Whether the server closes `stream` (end of stream, reset, or a TLS
/// error) within `deadline`, reading and discarding whatever comes first.
pub async fn closed_within(stream: &mut (impl tokio::io::AsyncRead + Unpin), deadline: Duration) -> bool {
    use tokio::io::AsyncReadExt as _;
    let mut sink = Vec::new();
    tokio::time::timeout(deadline, stream.read_to_end(&mut sink)).await.is_ok()
}

/// Waits until `condition` holds, failing the test after [`DEADLINE`].
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
