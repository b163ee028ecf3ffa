//! The HTTPS transport: certificates and the kubeconfig at first start,
//! TLS with optional client certificates (a certificate from our CA names
//! the user and groups), HTTP/2 and HTTP/1.1, the connection limit and a
//! graceful stop. Each request then goes to [`crate::context::handle`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use edgehive_pki::Issued;
use edgehive_store::Store;
use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::context::{self, ApiState, User};
use crate::metrics::Metrics;

/// How to run the API server.
#[derive(Debug)]
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
    /// The process's metrics registry, served at `/metrics` (OpenMetrics
    /// text) to users RBAC allows (`system:masters`, `system:monitoring`): register the other modules' metrics
    /// in it, and the server adds its own at bind (requests and latency
    /// under `apiserver`, the store's watch figures under `store`). The
    /// default is empty, prefixed `edgehive`.
    pub metrics: prometheus_client::registry::Registry,
    /// Verifies service account tokens presented as `Authorization: Bearer`
    /// (`None`: the key under `data_dir/tls` is loaded or created).
    pub service_account_tokens: Option<Arc<edgehive_pki::ServiceAccountTokens>>,
    /// Opens stream sessions to edge nodes, for `pods/log`, `pods/exec` and
    /// `pods/attach` (`None`: those answer 503).
    pub edge_streams: Option<Arc<dyn crate::streams::EdgeStreams>>,
    /// Service ClusterIP and NodePort ranges (kube-apiserver's defaults:
    /// `10.0.0.0/24`, `30000-32767`).
    pub services: crate::services::ServiceConfig,
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
            metrics: prometheus_client::registry::Registry::with_prefix("edgehive"),
            service_account_tokens: None,
            edge_streams: None,
            services: crate::services::ServiceConfig::default(),
        }
    }
}

/// A bound API server.
pub struct ApiServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<ApiState>,
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
    pub async fn bind(mut config: ApiServerConfig, store: Store) -> Result<ApiServer, ServeError> {
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
        // Kubernetes' `rbac/bootstrap-roles`, then the authorizer's first
        // read, both before the first request.
        crate::rbac::bootstrap::bootstrap(&store).await?;
        let authorizer = Arc::new(crate::rbac::Authorizer::default());
        authorizer.load(&store).await?;
        let crds = Arc::new(crate::crd::Crds::default());
        crds.load(&store).await?;
        let metrics = Metrics::new(std::mem::take(&mut config.metrics), &store);
        let shared = Arc::new(ApiState {
            store,
            config,
            metrics,
            address,
            stop: CancellationToken::new(),
            sa_tokens,
            authorizer,
            usage: Default::default(),
            crds,
        });
        // The `kubernetes` Service takes the range's first address before any request can.
        if let Err(e) = crate::services::ensure_kubernetes_service(&shared).await {
            tracing::warn!(error = %e.message, "create the kubernetes service");
        }
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
        let rbac_cache =
            tokio::spawn(crate::rbac::run(shared.store.clone(), Arc::clone(&shared.authorizer), shared.stop.clone()));
        let aggregation = tokio::spawn(crate::rbac::aggregation::run(shared.store.clone(), shared.stop.clone()));
        let svc_controller = tokio::spawn(crate::services::run(Arc::clone(&shared), shared.stop.clone()));
        let crd_controller = tokio::spawn(crate::crd::run(Arc::clone(&shared), shared.stop.clone()));
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
        let _ = rbac_cache.await;
        let _ = aggregation.await;
        let _ = svc_controller.await;
        let _ = crd_controller.await;
        tracing::info!("API server stopped");
    }
}

async fn serve_connection(tcp: tokio::net::TcpStream, peer: SocketAddr, acceptor: TlsAcceptor, shared: Arc<ApiState>) {
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
        async move { Ok::<_, Infallible>(context::handle(shared, user, peer, req).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .max_concurrent_streams(1000);
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
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
