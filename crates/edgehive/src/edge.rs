//! `edgehive edge --config edge.yaml`: the edge agent — EdgeHub (the link
//! to the cloud), MetaManager (the durable local store), the node agent
//! (the Node's registration, status and Lease), edged (pods), and for
//! devices DeviceTwin, DMI (mappers' socket) and EventBus (MQTT) on one
//! beehive.
//!
//! First start with a `token`: the CA is fetched and checked against the
//! token, a certificate is requested, and CA, certificate and key are kept
//! under `dataDir/certs`; later starts use them and ignore the token. The
//! certificate is renewed at 70–90 % of its lifetime.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use edgehive_beehive::Beehive;
use edgehive_edged::{HostInfo, NodeAgent, NodeAgentConfig};
use edgehive_edgehub::{Backoff, CertError, CertFiles, EdgeCerts, EdgeHub, EdgeHubConfig, certs};
use edgehive_metamanager::{MetaConfig, MetaDb, MetaManager};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::edge_config::EdgeConfig;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The edge's configuration (KubeEdge edgecore.yaml keys; see the README).
    #[arg(long, env = "EDGEHIVE_EDGE_CONFIG")]
    config: PathBuf,
    /// Print what the edge's local store holds (key, type, resourceVersion)
    /// and exit; works while the edge runs.
    #[arg(long)]
    show_store: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = EdgeConfig::load(&args.config)?;
    if args.show_store {
        return show_store(&cfg);
    }
    // One thread runs the edge; SQLite commits run on the blocking pool.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(4)
        .build()
        .context("start the runtime")?;
    rt.block_on(serve(cfg))
}

fn show_store(cfg: &EdgeConfig) -> anyhow::Result<ExitCode> {
    if !cfg.database.exists() {
        anyhow::bail!("no edge store at {} yet", cfg.database.display());
    }
    let db = MetaDb::open(&cfg.database).context("open the edge store")?;
    let listing = db.list_all().context("read the edge store")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{:<56} {:>10}", "KEY", "VERSION")?;
    for (key, value) in &listing.rows {
        let rv = serde_json::from_str::<serde_json::Value>(value)
            .ok()
            .and_then(|v| v.pointer("/metadata/resourceVersion").and_then(|r| r.as_str()).map(str::to_owned))
            .unwrap_or_else(|| "-".into());
        writeln!(out, "{key:<56} {rv:>10}")?;
    }
    for (key, reason) in &listing.corrupt {
        writeln!(out, "{key:<56} DAMAGED: {reason}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Errors worth retrying on first join: the cloud may not be up yet.
fn retryable(e: &CertError) -> bool {
    match e {
        CertError::Http(_) => true,
        CertError::Refused { status, .. } => *status >= 500,
        _ => false,
    }
}

async fn obtain_certs(
    cfg: &EdgeConfig,
    files: &CertFiles,
    stop: &CancellationToken,
) -> anyhow::Result<Option<EdgeCerts>> {
    if let Some(c) = EdgeCerts::load(files).context("load the edge certificate")? {
        match c.node_name() {
            Some(n) if n != cfg.node_name => anyhow::bail!(
                "{} is node {n:?}'s certificate, but this edge is {:?} (modules.edged.hostnameOverride)",
                files.cert.display(),
                cfg.node_name
            ),
            _ => return Ok(Some(c)),
        }
    }
    let (Some(server), Some(token)) = (&cfg.http_server, &cfg.token) else {
        anyhow::bail!(
            "no certificate at {} yet: set modules.edgeHub.token (from `edgehive token` on the cloud) and modules.edgeHub.httpServer to join",
            files.cert.display()
        );
    };
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        match certs::join(server, &cfg.node_name, token, files, Duration::from_secs(30)).await {
            Ok(c) => return Ok(Some(c)),
            Err(e) if retryable(&e) => {
                let delay = backoff.next_delay();
                tracing::warn!(node = %cfg.node_name, error = %e, retry_in_ms = delay.as_millis() as u64, "cannot join yet");
                tokio::select! {
                    () = stop.cancelled() => return Ok(None),
                    () = tokio::time::sleep(delay) => {}
                }
            }
            Err(e) => return Err(anyhow::Error::new(e).context("join the cloud")),
        }
    }
}

/// The address this host uses to reach the cloud (no packet is sent).
fn local_ip_towards(server: &str) -> Option<IpAddr> {
    let target = std::net::ToSocketAddrs::to_socket_addrs(server).ok()?.next()?;
    let bind: SocketAddr =
        if target.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(target).ok()?;
    socket.local_addr().ok().map(|a| a.ip())
}

async fn serve(cfg: EdgeConfig) -> anyhow::Result<ExitCode> {
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            crate::process::shutdown_signal().await;
            tracing::info!("shutting down");
            stop.cancel();
        }
    });
    edgehive_edgehub::create_private_dir(&cfg.data_dir).context("create the data directory")?;
    let files = CertFiles { ca: cfg.ca_file.clone(), cert: cfg.cert_file.clone(), key: cfg.key_file.clone() };
    let Some(certs) = obtain_certs(&cfg, &files, &stop).await? else { return Ok(ExitCode::SUCCESS) };
    let (cert_tx, cert_rx) = watch::channel(Arc::new(certs));

    if let Some(parent) = cfg.database.parent() {
        edgehive_edgehub::create_private_dir(parent).context("create the database directory")?;
    }
    // A damaged store is set aside and started afresh; the cloud refills it
    // from the inventory MetaManager sends (docs/protocol.md, "Inventory").
    let (db, rebuilt) = MetaDb::open_or_rebuild(&cfg.database).context("open the edge store")?;
    let db = Arc::new(db);
    let stored = db.count().unwrap_or(0);
    tracing::info!(node = %cfg.node_name, objects = stored, db = %cfg.database.display(), "edge store open");

    let mut hub_cfg = EdgeHubConfig::new(cfg.node_name.clone(), cfg.endpoints.clone());
    hub_cfg.project_id = cfg.project_id.clone();
    hub_cfg.heartbeat = cfg.heartbeat;
    hub_cfg.message_qps = cfg.message_qps;
    hub_cfg.message_burst = cfg.message_burst;
    hub_cfg.backoff_base = cfg.backoff_base;
    hub_cfg.backoff_cap = cfg.backoff_cap;
    hub_cfg.outbox_capacity = cfg.outbox_capacity;
    hub_cfg.handshake_timeout = cfg.handshake_timeout;
    hub_cfg.write_timeout = cfg.write_timeout;
    hub_cfg.ping_keepalive = cfg.ping_keepalive;
    let mut meta = MetaManager::new(
        MetaConfig {
            node_name: cfg.node_name.clone(),
            remote_query_timeout: cfg.remote_query_timeout,
            crash_before_commit: std::env::var("EDGEHIVE_FAILPOINT").is_ok_and(|f| f == "meta-before-commit"),
            ..MetaConfig::default()
        },
        Arc::clone(&db),
    );
    if let Some(r) = &rebuilt {
        meta = meta.report_rebuilt(r);
    }
    let meta = Arc::new(meta);
    let ip = cfg.node_ip.or_else(|| cfg.endpoints.first().and_then(|e| local_ip_towards(&e.server)));
    let mut agent_cfg = NodeAgentConfig::new(cfg.node_name.clone(), HostInfo::detect(ip));
    agent_cfg.lease_duration = cfg.lease_duration;
    agent_cfg.lease_interval = cfg.lease_duration / 4;
    agent_cfg.status_interval = cfg.status_report;
    let runtime: Option<Arc<dyn edgehive_edged::Runtime>> = match (cfg.edged, &cfg.container_runtime_endpoint) {
        (false, _) => None,
        (true, None) => Some(Arc::new(edgehive_edged::process::ProcessRuntime::new(cfg.data_dir.join("pods")))),
        (true, Some(endpoint)) => Some(Arc::new(connect_runtime(endpoint, &cfg).await?)),
    };
    if let Some(rt) = &runtime {
        agent_cfg.runtime_version = rt.version();
    }
    let agent = Arc::new(NodeAgent::new(agent_cfg));
    // The cloud's stream sessions (logs, exec) go to edged, when it runs.
    let (sessions_tx, sessions_rx) = tokio::sync::mpsc::channel(16);
    let hub = EdgeHub::new(hub_cfg, cert_rx);
    let hub = Arc::new(if runtime.is_some() { hub.with_streams(sessions_tx) } else { hub });
    let mut sessions = None;
    let mut edged_events = None;

    let mut builder = Beehive::builder();
    builder.register(hub.clone()).context("register edgehub")?;
    builder.register(meta.clone()).context("register metamanager")?;
    builder.register(agent).context("register the node agent")?;
    if let Some(runtime) = runtime {
        let mut edged_cfg = edgehive_edged::EdgedConfig::new(
            cfg.node_name.clone(),
            ip.map_or_else(|| "127.0.0.1".to_owned(), |ip| ip.to_string()),
            cfg.data_dir.clone(),
        );
        edged_cfg.backoff = edgehive_edged::Backoff { base: cfg.restart_backoff.0, cap: cfg.restart_backoff.1 };
        let edged = edgehive_edged::Edged::with_runtime(edged_cfg, runtime);
        sessions = Some(edged.sessions());
        edged_events = Some(edged.event_metrics());
        builder.register(Arc::new(edged)).context("register edged")?;
    }
    // Devices: DeviceTwin keeps them in the edge's database beside MetaManager's store.
    let twin = if cfg.device_twin {
        let twin = edgehive_devicetwin::DeviceTwin::new(
            edgehive_devicetwin::TwinConfig::new(cfg.node_name.clone()),
            &cfg.database,
            Arc::clone(&db),
        )
        .context("open the device tables")?
        .with_link_state(hub.link_state());
        let twin = Arc::new(twin);
        builder.register(twin.clone()).context("register devicetwin")?;
        // DMI: mappers register on its socket and get their devices.
        let dmi_cfg =
            edgehive_dmi::DmiConfig { sock_path: cfg.dmi_sock_path.clone(), ..edgehive_dmi::DmiConfig::default() };
        let dmi = Arc::new(edgehive_dmi::Dmi::new(dmi_cfg, Arc::clone(&db)));
        builder.register(dmi.clone()).context("register dmi")?;
        Some((twin, dmi))
    } else {
        None
    };
    // MQTT: KubeEdge's topics to and from DeviceTwin and the cloud.
    let event_bus = if cfg.event_bus.enable {
        let bus = edgehive_eventbus::EventBus::new(cfg.event_bus.clone(), &cfg.database, cfg.node_name.clone());
        let bus = Arc::new(bus);
        builder.register(bus.clone()).context("register eventbus")?;
        Some(bus)
    } else {
        None
    };
    let hive = builder.build();
    let bus = hive.context();

    let renewing = match (&cfg.http_server, cfg.rotate_certificates) {
        (Some(server), true) => Some(tokio::spawn(certs::keep_renewed(
            server.clone(),
            cfg.node_name.clone(),
            files.clone(),
            cert_tx,
            stop.clone(),
        ))),
        _ => None,
    };
    if let Some(addr) = cfg.metrics_address {
        // The process's one registry: every module's metrics, `edgehive_` first.
        let mut registry = prometheus_client::registry::Registry::with_prefix("edgehive");
        hub.metrics().register(&mut registry);
        meta.metrics().register(&mut registry);
        if let Some((t, dmi)) = &twin {
            t.metrics().register(&mut registry);
            dmi.metrics().register(&mut registry);
        }
        if let Some(b) = &event_bus {
            b.metrics().register(&mut registry);
        }
        if let Some(events) = &edged_events {
            events.register(&mut registry);
        }
        crate::process::register_bus(bus, &mut registry);
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("metrics address {addr}"))?;
        tracing::info!(%addr, "metrics at /metrics");
        tokio::spawn(crate::process::serve_metrics(listener, Arc::new(registry), stop.clone()));
    }
    let serving = sessions.map(|server| tokio::spawn(server.run(sessions_rx, stop.clone())));
    tracing::info!(node = %cfg.node_name, endpoints = ?cfg.endpoints.iter().map(|e| e.server.as_str()).collect::<Vec<_>>(), "edgehive edge is up");
    hive.run(stop.clone()).await;
    stop.cancel();
    if let Some(s) = serving {
        let _ = s.await;
    }
    if let Some(r) = renewing {
        let _ = r.await;
    }
    Ok(ExitCode::SUCCESS)
}

/// Connects to the CRI runtime, waiting for it while it starts (a runtime
/// and the edge often start together at boot), up to the request timeout.
async fn connect_runtime(endpoint: &str, cfg: &EdgeConfig) -> anyhow::Result<edgehive_edged::cri::CriRuntime> {
    let mut rt_cfg = edgehive_edged::cri::CriConfig::new(endpoint, cfg.node_name.clone());
    rt_cfg.request_timeout = cfg.runtime_request_timeout;
    let deadline = tokio::time::Instant::now() + cfg.runtime_request_timeout;
    loop {
        match edgehive_edged::cri::CriRuntime::connect(rt_cfg.clone()).await {
            Ok(rt) => return Ok(rt),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(endpoint, error = %e, "container runtime not ready; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => anyhow::bail!("container runtime {endpoint}: {e}"),
        }
    }
}
