//! `edgehive cloud`: the control plane on one machine — the object store
//! (embedded SQLite by default, or etcd), the Kubernetes-compatible API that
//! kubectl drives, and the cloud modules on beehive: CloudHub (edge
//! sessions over WebSocket and QUIC), EdgeController and SyncController, and
//! the edge join service.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use edgehive_apiserver::{ApiServer, ApiServerConfig};
use edgehive_beehive::Beehive;
use edgehive_cloudhub::{CloudHub, CloudHubConfig, SuccessPoints};
use edgehive_edgecontroller::{EdgeController, LifecycleConfig};
use edgehive_join::{JoinConfig, JoinServer};
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_synccontroller::{SyncConfig, SyncController};
use edgehive_viaduct::{Identity, Server, ServerConfig, ServerTls};
use tokio_util::sync::CancellationToken;

/// Which store backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StoreKind {
    /// One SQLite file under the data directory.
    Sqlite,
    /// An etcd cluster (`--etcd-endpoints`).
    Etcd,
}

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where the database, certificates and kubeconfig live.
    #[arg(long, env = "EDGEHIVE_DATA_DIR", default_value_os_t = default_data_dir())]
    data_dir: PathBuf,
    /// Address of the Kubernetes API (HTTPS).
    #[arg(long, default_value = "0.0.0.0:6443")]
    bind: SocketAddr,
    /// Store backend.
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// etcd client URLs, comma-separated (with `--store etcd`).
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:2379")]
    etcd_endpoints: Vec<String>,
    /// Extra names or addresses for the API's serving certificate.
    #[arg(long = "tls-san")]
    tls_sans: Vec<String>,
    /// Do not fsync each SQLite commit (an acknowledged write still survives
    /// a crash of the process, but not of the machine).
    #[arg(long)]
    no_fsync: bool,
    /// Addresses and DNS names edges reach this cloud by (SANs of the
    /// CloudHub and join certificates), comma-separated.
    #[arg(long = "advertise-address", value_delimiter = ',')]
    advertise: Vec<String>,
    /// CloudHub WebSocket address (KubeEdge's port 10000).
    #[arg(long, default_value = "0.0.0.0:10000")]
    websocket_bind: SocketAddr,
    /// CloudHub QUIC address (10001).
    #[arg(long, default_value = "0.0.0.0:10001")]
    quic_bind: SocketAddr,
    /// Do not serve QUIC.
    #[arg(long)]
    no_quic: bool,
    /// QUIC: TLS sessions kept so that their edges may reconnect in 0-RTT
    /// (their handshake headers in the first flight), ~1 KB each, the
    /// oldest forgotten past this many. 0: none kept; every edge resumes
    /// from a stateless ticket (no certificate signed or verified again,
    /// whatever the fleet's size), without 0-RTT.
    #[arg(long, default_value_t = 0)]
    quic_zero_rtt_sessions: usize,
    /// KubeEdge's stream tunnel (CloudStream's tunnel port): KubeEdge edges
    /// with `edgeStream` enabled connect here so that `kubectl logs`, `exec`
    /// and `attach` reach their pods. Default: port 10004 on the CloudHub
    /// WebSocket address, skipped with a warning when that port is taken; an
    /// address given here must bind.
    #[arg(long)]
    tunnel_bind: Option<SocketAddr>,
    /// Do not serve KubeEdge's stream tunnel.
    #[arg(long)]
    no_tunnel: bool,
    /// Edge join service address (KubeEdge's port 10002): CA download and
    /// certificate signing with a join token.
    #[arg(long, default_value = "0.0.0.0:10002")]
    join_bind: SocketAddr,
    /// Most edge nodes connected at once.
    #[arg(long, default_value_t = 10_000)]
    node_limit: usize,
    /// End an edge's session after this many seconds without a keepalive.
    #[arg(long, default_value_t = 30)]
    keepalive_interval: u64,
    /// Accept edge certificates that do not name their node (KubeEdge v1.15
    /// edges hold `CN=kubeedge.io`); by default an edge's certificate must
    /// be `CN=system:node:{node_id}`.
    #[arg(long)]
    allow_unnamed_node_certificates: bool,
    /// Seconds without a heartbeat before an edge node is NotReady.
    #[arg(long, default_value_t = 40)]
    node_grace_period: u64,
    /// Delete the pods of an edge node NotReady for this many seconds
    /// (default: never; edge nodes keep their pods while cut off).
    #[arg(long)]
    evict_after: Option<u64>,
    /// Seconds between the Lease renewals the cloud writes for an edge whose
    /// session proves it alive (edges that keep alive with pings renew none
    /// themselves). The Lease's `leaseDurationSeconds` is 10 s more, so a
    /// Lease stays held from one renewal to the next.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    node_lease_renew_interval: u64,
    /// Most Lease renewals the cloud writes a second for live sessions, all
    /// nodes together. Past `--node-lease-renew-interval` × this many nodes
    /// (30,000 at the defaults) each Lease is renewed less often and held
    /// longer, in proportion, so that a large fleet's Leases do not take
    /// the store's (and the CPU's) whole time.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    node_lease_writes_per_second: u32,
    /// Milliseconds that acknowledged success points gather before they are
    /// written to the store together (a crash loses at most this much, which
    /// costs only re-sends).
    #[arg(long, default_value_t = 50)]
    success_point_flush_ms: u64,
    /// Most success-point writes to the store per second; above it, changes
    /// coalesce in memory and wait.
    #[arg(long, default_value_t = 250)]
    success_point_write_rate: usize,
    /// Seconds between SyncController passes.
    #[arg(long, default_value_t = 5)]
    sync_interval: u64,
    /// Lifetime of the certificates the join service issues to edges
    /// (KubeEdge's `edgeCertSigningDuration`, there 365 days). Edges renew at
    /// 70–90 % of it; one offline for longer joins again with a token.
    #[arg(long, default_value = "90d", value_parser = crate::duration::positive)]
    edge_cert_validity: Duration,
    /// Time an unauthenticated connection (CloudHub, join service) gets to
    /// finish TLS and say who it is; raise it for links with seconds of
    /// latency and loss (a lost handshake packet waits 1–3 s to be resent).
    #[arg(long, default_value = "5s", value_parser = crate::duration::positive)]
    handshake_timeout: Duration,
    /// How long Events are kept after their last write (kube-apiserver's
    /// `--event-ttl`).
    #[arg(long, default_value = "1h", value_parser = crate::duration::positive)]
    event_ttl: Duration,
    /// The CIDR Service ClusterIPs are allocated from (kube-apiserver's
    /// `--service-cluster-ip-range` and its default; k3s uses 10.43.0.0/16).
    #[arg(long, default_value = "10.0.0.0/24", value_parser = edgehive_apiserver::ServiceIpRange::parse)]
    service_cluster_ip_range: edgehive_apiserver::ServiceIpRange,
    /// The ports NodePort Services are allocated from.
    #[arg(long, default_value = "30000-32767", value_parser = edgehive_apiserver::NodePortRange::parse)]
    service_node_port_range: edgehive_apiserver::NodePortRange,
}

/// CloudHub's restart secret (session ticket keys, QUIC stateless resets),
/// in the data directory's `tls`.
const RESTART_SECRET_FILE: &str = "cloudhub.secret";

pub(crate) fn default_data_dir() -> PathBuf {
    let root =
        std::env::var_os("USER").is_some_and(|u| u == "root") || std::env::var_os("HOME").is_some_and(|h| h == "/root");
    match std::env::var_os("HOME") {
        Some(home) if !root => PathBuf::from(home).join(".edgehive"),
        _ => PathBuf::from("/var/lib/edgehive"),
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("start the runtime")?;
    rt.block_on(Box::pin(serve(args)))?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: Args) -> anyhow::Result<()> {
    // The data directory holds keys and Secrets: the owner's alone.
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(&args.data_dir)
        .with_context(|| format!("create {}", args.data_dir.display()))?;
    let backend = match args.store {
        StoreKind::Sqlite => BackendConfig::Sqlite { path: args.data_dir.join("state.db"), fsync: !args.no_fsync },
        StoreKind::Etcd => BackendConfig::Etcd { endpoints: args.etcd_endpoints.clone() },
    };
    let mut store_config = StoreConfig::new(backend);
    store_config.event_ttl = Some(args.event_ttl);
    let store = Store::open(store_config).await.context("open the store")?;

    // CloudHub's certificate names every address edges use.
    let tls_dir = args.data_dir.join("tls");
    let ca = edgehive_pki::Ca::load_or_create(&tls_dir, "edgehive-ca").context("load the CA")?;
    let sans = edgehive_apiserver::default_sans(&args.websocket_bind, &args.advertise);
    let hub_cert = edgehive_pki::load_or_issue_server(&tls_dir, &ca, "cloudhub", "edgehive-cloudhub", &sans)
        .context("CloudHub serving certificate")?;
    let identity = Identity { cert_chain: vec![hub_cert.cert_der.clone()], key: hub_cert.key_der.clone_key() };
    let ca = Arc::new(ca);
    // Join tokens and node certificates, recorded in the store.
    let credentials = Arc::new(edgehive_credentials::Credentials::new(store.clone(), ca.clone()));
    credentials.ensure_namespaces().await.context("create the credentials' namespaces")?;
    let mut join_config = JoinConfig::new(args.join_bind);
    join_config.cert_validity = args.edge_cert_validity;
    join_config.handshake_timeout = args.handshake_timeout;
    let join = JoinServer::bind(
        join_config,
        credentials.clone(),
        (vec![hub_cert.cert_der.clone()], hub_cert.key_der.clone_key()),
    )
    .await
    .context("edge join server")?;
    let join_stats = join.stats();
    tracing::info!(addr = %join.local_addr(), "edge join service listening");
    let tls = ServerTls { identity, client_ca: vec![ca.cert_der().clone()] };
    // KubeEdge's tunnel server uses CloudHub's certificate too.
    let tls_for_tunnel = tls.clone();
    let mut servers = Vec::new();
    // Kept across restarts: edges reconnecting to a restarted cloud resume
    // their TLS sessions, and QUIC edges learn at their next packet that
    // their connections are gone.
    let restart_secret =
        edgehive_pki::load_or_create_secret(&tls_dir.join(RESTART_SECRET_FILE), "CloudHub restart secret")
            .context("CloudHub's restart secret")?;
    let mut ws = ServerConfig::new(args.websocket_bind, tls.clone());
    ws.restart_secret = Some(restart_secret);
    ws.handshake_timeout = args.handshake_timeout;
    let read_timeout = Some(Duration::from_secs(args.keepalive_interval.max(1) * 2));
    ws.conn.read_timeout = read_timeout;
    // Edges that offer it keep alive with WebSocket pings (edgehive edges;
    // KubeEdge edges never offer and keep sending `keepalive` messages).
    ws.ping_keepalive = true;
    // EdgeController reconciles the inventories edges send, and the API
    // reaches pods through stream sessions (docs/protocol.md).
    let features = vec![
        edgehive_viaduct::features::INVENTORY.to_owned(),
        edgehive_viaduct::features::DEVICE_REPORTS.to_owned(),
        edgehive_viaduct::stream::FEATURE.to_owned(),
    ];
    let stream_stats = Arc::new(edgehive_viaduct::StreamStats::default());
    ws.features = features.clone();
    ws.conn.stream_stats = Some(Arc::clone(&stream_stats));
    servers.push(Server::bind_ws(ws).await.context("CloudHub WebSocket server")?);
    if !args.no_quic {
        let mut quic = ServerConfig::new(args.quic_bind, tls);
        quic.handshake_timeout = args.handshake_timeout;
        quic.zero_rtt_sessions = args.quic_zero_rtt_sessions;
        quic.restart_secret = Some(restart_secret);
        // As on WebSocket: the connection's idle timeout, and edgehive edges
        // that offer it keep their session alive with QUIC's keep-alives.
        quic.conn.read_timeout = read_timeout;
        quic.ping_keepalive = true;
        quic.features = features;
        quic.conn.stream_stats = Some(Arc::clone(&stream_stats));
        servers.push(Server::bind_quic(quic).await.context("CloudHub QUIC server")?);
    }
    for s in &servers {
        tracing::info!(addr = %s.local_addr(), protocol = ?s.protocol(), "CloudHub listening");
    }
    let transport_stats: Vec<_> = servers.iter().map(|s| (s.protocol(), s.shared_stats())).collect();
    let tunnel = bind_tunnel(&args, tls_for_tunnel, &credentials).await?;

    let points = SuccessPoints::load(store.clone()).await.context("load success points")?;
    let hub = Arc::new(
        CloudHub::new(
            CloudHubConfig {
                keepalive_interval: Duration::from_secs(args.keepalive_interval.max(1)),
                node_limit: args.node_limit,
                require_node_certificate: !args.allow_unnamed_node_certificates,
                points_flush_interval: Duration::from_millis(args.success_point_flush_ms),
                points_write_rate: args.success_point_write_rate.max(1),
                ..CloudHubConfig::default()
            },
            points,
            servers,
        )
        .with_credentials(credentials.clone()),
    );
    let lifecycle = LifecycleConfig {
        grace: Duration::from_secs(args.node_grace_period),
        evict_after: args.evict_after.map(Duration::from_secs),
        heartbeat: edgehive_edgecontroller::heartbeat::HeartbeatConfig {
            lease_renew: Duration::from_secs(args.node_lease_renew_interval),
            lease_duration: Duration::from_secs(args.node_lease_renew_interval + 10),
            lease_writes_per_second: args.node_lease_writes_per_second,
            ..Default::default()
        },
        ..LifecycleConfig::default()
    };
    // Tokens for edges' pods, signed with the key the API server verifies them with.
    let sa_tokens =
        Arc::new(edgehive_pki::ServiceAccountTokens::load_or_create(&tls_dir).context("service account token key")?);
    let stop = CancellationToken::new();
    // The controllers' Events, written by one task (docs: ARCHITECTURE.md, Events).
    let events = edgehive_events::Recorder::start(store.clone(), stop.clone());
    let controller = Arc::new(
        EdgeController::with_lifecycle(store.clone(), lifecycle)
            .with_service_account_tokens(sa_tokens.clone())
            .with_events(events.clone())
            .with_presence(hub.presence()),
    );
    let sync = Arc::new(SyncController::new(
        store.clone(),
        SyncConfig { interval: Duration::from_secs(args.sync_interval.max(1)) },
    ));
    let devices = Arc::new(edgehive_devicecontroller::DeviceController::new(
        store.clone(),
        edgehive_devicecontroller::DeviceControllerConfig::default(),
    ));
    let mut builder = Beehive::builder();
    builder.register(hub.clone()).context("register cloudhub")?;
    builder.register(controller.clone()).context("register edgecontroller")?;
    builder.register(sync.clone()).context("register synccontroller")?;
    builder.register(devices.clone()).context("register devicecontroller")?;
    let hive = builder.build();
    let bus = hive.context();
    // ReplicaSets, Deployments and the garbage collector, over the store.
    let workloads =
        edgehive_workloads::Workloads::new(store.clone()).with_events(events.clone()).with_root_ca(ca.cert_pem());

    let mut config = ApiServerConfig::new(args.bind, args.data_dir.clone());
    config.sans = args.tls_sans;
    config.service_account_tokens = Some(sa_tokens);
    config.services = edgehive_apiserver::ServiceConfig {
        cluster_ip_range: args.service_cluster_ip_range.clone(),
        node_port_range: args.service_node_port_range,
        // The `kubernetes` endpoints name the first advertised address, as kube-apiserver's `--advertise-address`.
        advertise_address: args.advertise.iter().find_map(|a| a.parse().ok()),
    };
    config.edge_streams =
        Some(Arc::new(EdgeSessions { hub: hub.streams(), tunnels: tunnel.as_ref().map(|t| t.tunnels()) }));
    if let Some(t) = &tunnel {
        t.metrics().register(&mut config.metrics);
    }
    stream_stats.register(&mut config.metrics, "cloudhub_streams");
    // The process's one registry, served at the API's `/metrics`: every
    // module's metrics, `edgehive_` first (the API server adds its own).
    join_stats.register(&mut config.metrics);
    edgehive_viaduct::ServerStats::register(&transport_stats, &mut config.metrics);
    hub.metrics().register(&mut config.metrics);
    controller.metrics().register(&mut config.metrics);
    sync.metrics().register(&mut config.metrics);
    devices.metrics().register(&mut config.metrics);
    workloads.metrics().register(&mut config.metrics);
    events.metrics().register(&mut config.metrics);
    crate::process::register_bus(bus, &mut config.metrics);
    let server = ApiServer::bind(config, store.clone()).await.context("start the API server")?;
    tracing::info!(
        addr = %server.local_addr(),
        kubeconfig = %server.kubeconfig_path().display(),
        store = ?args.store,
        "edgehive cloud is up; run: KUBECONFIG={} kubectl get namespaces",
        server.kubeconfig_path().display()
    );
    let tokens = tokio::spawn({
        let (credentials, stop) = (credentials.clone(), stop.clone());
        async move { credentials.keep_tokens(stop).await }
    });
    let joining = tokio::spawn(join.serve(stop.clone()));
    let serving = tokio::spawn(server.serve(stop.clone()));
    let modules = tokio::spawn(hive.run(stop.clone()));
    let controllers = tokio::spawn(workloads.run(stop.clone()));
    let tunneling = tunnel.map(|t| tokio::spawn(t.serve(stop.clone())));
    crate::process::shutdown_signal().await;
    tracing::info!("shutting down");
    stop.cancel();
    let _ = serving.await;
    let _ = modules.await;
    let _ = controllers.await;
    let _ = tokens.await;
    let _ = joining.await;
    if let Some(t) = tunneling {
        let _ = t.await;
    }
    store.close().await;
    Ok(())
}

/// KubeEdge's stream tunnel server, when it is served: at `--tunnel-bind`,
/// or by default at port 10004 of the CloudHub WebSocket address, which is
/// skipped (with a warning) when the port is taken, so that a second cloud
/// on one machine still starts.
async fn bind_tunnel(
    args: &Args,
    tls: ServerTls,
    credentials: &Arc<edgehive_credentials::Credentials>,
) -> anyhow::Result<Option<edgehive_tunnel::TunnelServer>> {
    if args.no_tunnel {
        return Ok(None);
    }
    let addr =
        args.tunnel_bind.unwrap_or_else(|| SocketAddr::new(args.websocket_bind.ip(), edgehive_tunnel::DEFAULT_PORT));
    let mut config = edgehive_tunnel::TunnelConfig::new(addr, tls);
    config.require_node_certificate = !args.allow_unnamed_node_certificates;
    config.handshake_timeout = args.handshake_timeout;
    match edgehive_tunnel::TunnelServer::bind(config, Some(credentials.clone())).await {
        Ok(server) => {
            tracing::info!(addr = %server.local_addr(), "KubeEdge stream tunnel listening");
            Ok(Some(server))
        }
        Err(e) if args.tunnel_bind.is_none() && e.is_addr_in_use() => {
            tracing::warn!(%addr, "KubeEdge's stream tunnel port is taken; not serving the tunnel (see --tunnel-bind)");
            Ok(None)
        }
        Err(e) => Err(e).context("KubeEdge stream tunnel server"),
    }
}

/// Stream sessions to edge nodes, as the API server opens them: over
/// CloudHub's connection of an edgehive edge, or through the stream tunnel
/// of a KubeEdge edge (whose connection does not take sessions).
#[derive(Debug)]
struct EdgeSessions {
    hub: edgehive_cloudhub::NodeStreams,
    tunnels: Option<edgehive_tunnel::Tunnels>,
}

impl edgehive_apiserver::EdgeStreams for EdgeSessions {
    fn open<'a>(
        &'a self,
        node: &'a str,
        header: bytes::Bytes,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<Output = Result<edgehive_viaduct::Stream, edgehive_apiserver::EdgeStreamError>>
                + Send
                + 'a,
        >,
    > {
        use edgehive_apiserver::EdgeStreamError as E;
        use edgehive_cloudhub::OpenStreamError as O;
        Box::pin(async move {
            let error = match self.hub.open(node, header.clone()).await {
                Ok(s) => return Ok(s),
                Err(e) => e,
            };
            // A KubeEdge node: its tunnel, when it has one (a node whose
            // CloudHub connection is down may still have its tunnel).
            if matches!(error, O::NotSupported(_) | O::NotConnected(_))
                && let Some(tunnels) = self.tunnels.as_ref().filter(|t| t.is_connected(node))
            {
                return tunnels.open(node, header).await.map_err(|e| match e {
                    edgehive_tunnel::OpenError::NotConnected(n) => E::NotConnected(n),
                    other => E::Failed(other.to_string()),
                });
            }
            Err(match error {
                O::NotConnected(n) => E::NotConnected(n),
                O::NotSupported(n) => E::Unsupported(n),
                other => E::Failed(other.to_string()),
            })
        })
    }
}
