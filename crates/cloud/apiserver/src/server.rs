//! The HTTPS server: TLS with optional client certificates, authentication
//! (a certificate from our CA names the user and groups), authorization,
//! routing, deadlines, and the response bodies (plain, and streamed for
//! watches).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use edgehive_pki::Issued;
use edgehive_store::Store;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::server::WebPkiClientVerifier;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::handlers;
use crate::metrics::Metrics;
use crate::route::{self, Route};
use crate::status::ApiError;

/// Response body: whole, or a stream of chunks (watches).
pub(crate) enum Body {
    /// A complete body.
    Full(Full<Bytes>),
    /// Chunks from a channel, ending when the sender goes.
    Stream(mpsc::Receiver<Bytes>),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Body::Full(_) => "Body::Full",
            Body::Stream(_) => "Body::Stream",
        })
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(b) => Pin::new(b).poll_frame(cx),
            Body::Stream(rx) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(b) => b.is_end_stream(),
            Body::Stream(_) => false,
        }
    }
}

/// A response with a JSON body.
pub(crate) fn json_response(code: StatusCode, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Body::Full(Full::new(body)));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A response with a JSON value.
pub(crate) fn value_response(code: StatusCode, v: &Value) -> Response<Body> {
    json_response(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
}

/// An error response (a `Status`).
pub(crate) fn error_response(e: &ApiError) -> Response<Body> {
    value_response(e.code, &e.to_status())
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name (certificate CN).
    pub name: String,
    /// Groups (certificate O's).
    pub groups: Vec<String>,
}

impl User {
    /// Members of `system:masters` may do anything.
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// How to run the API server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// Listen address.
    pub bind: SocketAddr,
    /// Where the CA, the serving and admin certificates and the kubeconfig live.
    pub data_dir: PathBuf,
    /// Extra names and addresses for the serving certificate.
    pub sans: Vec<String>,
    /// Largest request body (3 MiB, as Kubernetes).
    pub max_body_bytes: usize,
    /// Deadline of a non-watch request.
    pub request_timeout: Duration,
    /// Longest watch (a random part is added per watch, as Kubernetes does).
    pub min_watch_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
    /// More Prometheus text appended to `/metrics` (the cloud modules' counters).
    pub extra_metrics: Vec<MetricsSource>,
    /// Verifies service account tokens presented as `Authorization: Bearer`
    /// (`None`: the key under `data_dir/tls` is loaded or created).
    pub service_account_tokens: Option<Arc<edgehive_pki::ServiceAccountTokens>>,
}

/// Something that appends Prometheus text to `/metrics`.
#[derive(Clone)]
pub struct MetricsSource(pub Arc<dyn Fn(&mut String) + Send + Sync>);

impl std::fmt::Debug for MetricsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsSource")
    }
}

impl ApiServerConfig {
    /// Defaults: 3 MiB bodies, 60 s requests, watches of 30–60 min, 10,000 connections.
    pub fn new(bind: SocketAddr, data_dir: PathBuf) -> ApiServerConfig {
        ApiServerConfig {
            bind,
            data_dir,
            sans: Vec::new(),
            max_body_bytes: 3 << 20,
            request_timeout: Duration::from_secs(60),
            min_watch_timeout: Duration::from_secs(1800),
            max_connections: 10_000,
            extra_metrics: Vec::new(),
            service_account_tokens: None,
        }
    }
}

/// State shared by every request.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) config: ApiServerConfig,
    pub(crate) metrics: Metrics,
    pub(crate) address: String,
    pub(crate) stop: CancellationToken,
    pub(crate) sa_tokens: Arc<edgehive_pki::ServiceAccountTokens>,
}

/// A bound API server.
pub struct ApiServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    kubeconfig: PathBuf,
    admin: Issued,
    ca_pem: String,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Certificates could not be created or loaded.
    #[error("set up certificates: {0}")]
    Pki(#[from] edgehive_pki::PkiError),
    /// TLS configuration failed.
    #[error("configure TLS: {0}")]
    Tls(String),
    /// The listen address could not be bound.
    #[error("listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The store failed while bootstrapping.
    #[error("bootstrap the store: {0}")]
    Store(#[from] edgehive_store::StoreError),
}

/// The names a serving certificate gets: loopback, the bound address (if
/// not a wildcard), the host name, then `extra`.
pub fn default_sans(bind: &SocketAddr, extra: &[String]) -> Vec<String> {
    let mut sans = vec!["127.0.0.1".to_string(), "localhost".to_string(), "::1".to_string()];
    if !bind.ip().is_unspecified() {
        sans.push(bind.ip().to_string());
    }
    if let Ok(host) = std::fs::read_to_string("/etc/hostname") {
        let host = host.trim();
        if !host.is_empty() {
            sans.push(host.to_string());
        }
    }
    for s in extra {
        if !sans.contains(s) {
            sans.push(s.clone());
        }
    }
    sans
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer").field("address", &self.shared.address).finish_non_exhaustive()
    }
}

impl ApiServer {
    /// Creates (or loads) the CA, the serving certificate and the admin
    /// client certificate under `data_dir/tls`, writes `data_dir/kubeconfig.yaml`
    /// for kubectl, creates the default namespaces, and binds the listener.
    pub async fn bind(config: ApiServerConfig, store: Store) -> Result<ApiServer, ServeError> {
        let tls_dir = config.data_dir.join("tls");
        let ca = edgehive_pki::Ca::load_or_create(&tls_dir, "edgehive-ca")?;
        let sans = default_sans(&config.bind, &config.sans);
        let serving = edgehive_pki::load_or_issue_server(&tls_dir, &ca, "apiserver", "edgehive-apiserver", &sans)?;
        let admin = edgehive_pki::load_or_issue_client(&tls_dir, &ca, "admin", "system:admin", &["system:masters"])?;
        let sa_tokens = match &config.service_account_tokens {
            Some(t) => Arc::clone(t),
            None => Arc::new(edgehive_pki::ServiceAccountTokens::load_or_create(&tls_dir)?),
        };

        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.cert_der().clone()).map_err(|e| ServeError::Tls(e.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .allow_unauthenticated()
            .build()
            .map_err(|e| ServeError::Tls(e.to_string()))?;
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ServeError::Tls(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![serving.cert_der.clone()], serving.key_der.clone_key())
            .map_err(|e| ServeError::Tls(e.to_string()))?;
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

        let listener =
            TcpListener::bind(config.bind).await.map_err(|source| ServeError::Bind { addr: config.bind, source })?;
        let local = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.bind, source })?;
        let host = if local.ip().is_unspecified() { "127.0.0.1".to_string() } else { local.ip().to_string() };
        let address = SocketAddr::new(host.parse().unwrap_or(local.ip()), local.port()).to_string();
        let kubeconfig = config.data_dir.join("kubeconfig.yaml");
        let text = edgehive_pki::kubeconfig(
            &format!("https://{address}"),
            ca.cert_pem(),
            &admin.cert_pem,
            &admin.key_pem,
            "edgehive",
        );
        edgehive_pki::write_private_file(&kubeconfig, text.as_bytes())?;

        crate::handlers::bootstrap(&store).await?;
        let shared = Arc::new(Shared {
            store,
            config,
            metrics: Metrics::default(),
            address,
            stop: CancellationToken::new(),
            sa_tokens,
        });
        Ok(ApiServer {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            shared,
            kubeconfig,
            admin,
            ca_pem: ca.cert_pem().to_string(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.shared.config.bind)
    }

    /// The key service account tokens are signed with (and verified by this server).
    pub fn service_account_tokens(&self) -> Arc<edgehive_pki::ServiceAccountTokens> {
        Arc::clone(&self.shared.sa_tokens)
    }

    /// The kubeconfig written for kubectl.
    pub fn kubeconfig_path(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// The admin client certificate (for in-process clients and tests).
    pub fn admin_identity(&self) -> &Issued {
        &self.admin
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Serves until `stop` is cancelled; then stops accepting, ends watches
    /// and waits (bounded) for requests in flight.
    pub async fn serve(self, stop: CancellationToken) {
        let ApiServer { listener, acceptor, shared, .. } = self;
        let ns_controller = tokio::spawn(crate::namespaces::run(shared.store.clone(), shared.stop.clone()));
        let sa_controller = tokio::spawn(crate::serviceaccounts::run(shared.store.clone(), shared.stop.clone()));
        let permits = Arc::new(Semaphore::new(shared.config.max_connections));
        let tracker = tokio_util::task::TaskTracker::new();
        tracing::info!(addr = %shared.address, "API server listening");
        loop {
            let accepted = tokio::select! {
                _ = stop.cancelled() => break,
                a = listener.accept() => a,
            };
            let (tcp, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                tracing::warn!(%peer, "connection limit reached; refusing");
                drop(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let shared = Arc::clone(&shared);
            tracker.spawn(async move {
                let _permit = permit;
                serve_connection(tcp, peer, acceptor, shared).await;
            });
        }
        shared.stop.cancel();
        tracker.close();
        if tokio::time::timeout(Duration::from_secs(10), tracker.wait()).await.is_err() {
            tracing::warn!("requests still running after 10 s; closing anyway");
        }
        let _ = ns_controller.await;
        let _ = sa_controller.await;
        tracing::info!("API server stopped");
    }
}

async fn serve_connection(tcp: tokio::net::TcpStream, peer: SocketAddr, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let user = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| edgehive_pki::identity_of(c).ok())
        .map(|id| Arc::new(User { name: id.common_name, groups: id.organizations }));
    let stop = shared.stop.clone();
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        let user = user.clone();
        async move { Ok::<_, Infallible>(handle(shared, user, peer, req).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .max_concurrent_streams(1000);
    let conn = builder.serve_connection(TokioIo::new(tls), svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
        }
    }
}

/// The verb of a resource request, as Kubernetes names it.
pub(crate) fn verb_of(method: &Method, target: &route::Target, query: &route::Query) -> Option<&'static str> {
    let named = target.name.is_some();
    Some(match *method {
        Method::GET if target.watch_path || query.flag("watch") => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST if !named => "create",
        Method::PUT if named => "update",
        Method::PATCH if named => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => return None,
    })
}

async fn handle(
    shared: Arc<Shared>,
    user: Option<Arc<User>>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    let started = tokio::time::Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = route::Query::parse(req.uri().query());
    let route = route::parse(&path);
    let (verb, resource_label) = match &route {
        Ok(Route::Resource(t)) => (verb_of(&method, t, &query).unwrap_or("unknown"), t.resource.plural),
        _ => (if method == Method::GET { "get" } else { "other" }, ""),
    };
    let response = async {
        let route = route?;
        if matches!(route, Route::Health) {
            return Ok(json_response(StatusCode::OK, Bytes::from_static(b"ok")));
        }
        let user = user.or_else(|| bearer_user(&shared, req.headers())).ok_or_else(ApiError::unauthorized)?;
        if let Route::Resource(target) = route {
            let verb = verb_of(&method, &target, &query).ok_or_else(|| {
                ApiError::method_not_allowed("the server does not allow this method on the requested resource")
            })?;
            authorize(&user, verb, &target)?;
            let span =
                tracing::debug_span!("request", verb, resource = target.resource.plural, user = %user.name, %peer);
            let _enter = span.enter();
            if verb == "watch" {
                return handlers::watch(&shared, &target, &query, req.headers()).await;
            }
            let timeout = shared.config.request_timeout;
            return match tokio::time::timeout(timeout, handlers::resource(&shared, verb, &target, &query, req)).await {
                Ok(r) => r,
                Err(_) => {
                    let mut e = ApiError::new(
                        StatusCode::GATEWAY_TIMEOUT,
                        "Timeout",
                        format!("the request did not complete within {}s", timeout.as_secs()),
                    );
                    e.details.retry_after = Some(1);
                    Err(e)
                }
            };
        }
        handlers::non_resource(&shared, &route, req.headers())
    }
    .await;
    let response = response.unwrap_or_else(|e| {
        if e.code.is_server_error() {
            tracing::warn!(%method, %path, code = e.code.as_u16(), message = %e.message, "request failed");
        }
        error_response(&e)
    });
    shared.metrics.observe(verb, resource_label, response.status().as_u16(), started.elapsed());
    response
}

/// The service account a valid `Authorization: Bearer` token names, if any.
/// A bad token is logged and treated as no credentials (401).
fn bearer_user(shared: &Shared, headers: &http::HeaderMap) -> Option<Arc<User>> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ")?.trim();
    match shared.sa_tokens.verify(token, time::OffsetDateTime::now_utc()) {
        Ok(id) => Some(Arc::new(User { name: id.user(), groups: id.groups() })),
        Err(e) => {
            tracing::info!(error = %e, "bearer token refused");
            None
        }
    }
}

fn authorize(user: &User, verb: &str, target: &route::Target) -> Result<(), ApiError> {
    if user.is_admin() {
        return Ok(());
    }
    let res = target.resource;
    let resource = match &target.subresource {
        Some(s) => format!("{}/{s}", res.plural),
        None => res.plural.to_string(),
    };
    let scope = match &target.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    let name = target
        .name
        .as_deref()
        .map(|n| format!("{resource} \"{n}\" is forbidden"))
        .unwrap_or_else(|| format!("{resource} is forbidden"));
    tracing::info!(user = %user.name, verb, resource = %resource, "request refused: not authorized");
    Err(ApiError::forbidden(format!(
        "{name}: User \"{}\" cannot {verb} resource \"{resource}\" in API group \"{}\" {scope}",
        user.name, res.group
    ))
    .details(target.name.as_deref().unwrap_or(""), res.group, res.plural))
}

/// Bytes of an oversize body read and thrown away before answering 413, so
/// that a client still sending sees the answer rather than a reset stream.
const DRAIN_LIMIT: usize = 16 << 20;

/// Reads a request body up to `limit` bytes: over it is a 413.
pub(crate) async fn read_body(req: Request<Incoming>, limit: usize) -> Result<(http::request::Parts, Bytes), ApiError> {
    let (parts, mut body) = req.into_parts();
    let declared =
        parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    let too_large = |n: usize| {
        ApiError::too_large(format!("the request body is {n} bytes or more, over the limit of {limit} bytes"))
    };
    if declared.is_some_and(|n| n > limit) {
        drain(body, DRAIN_LIMIT).await;
        return Err(too_large(declared.unwrap_or(limit + 1)));
    }
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_request(format!("read request body: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        seen += data.len();
        if seen > limit {
            drain(body, DRAIN_LIMIT.saturating_sub(seen)).await;
            return Err(too_large(seen));
        }
        buf.extend_from_slice(&data);
    }
    Ok((parts, buf.freeze()))
}

/// Reads and discards up to `max` more bytes of `body`, for at most 5 s.
async fn drain(mut body: Incoming, max: usize) {
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let mut n = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(d) = frame.into_data() {
                n += d.len();
                if n > max {
                    break;
                }
            }
        }
    })
    .await;
}
