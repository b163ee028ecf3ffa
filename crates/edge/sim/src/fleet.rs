//! A fleet of simulated edge nodes in one process: their certificates
//! (joined through the cloud's join service once, then kept on disk), one
//! real [`EdgeLink`] each, spread over several local addresses, and the
//! counters the scenarios read.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_edged::HostInfo;
use edgehive_edgehub::{
    CertFiles, CloudEndpoint, EdgeCerts, EdgeHubConfig, EdgeHubMetrics, EdgeLink, Transport, certs,
};
use edgehive_model::{ResourcePath, Text};
use edgehive_viaduct::quic::QuicEndpoint;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::SimError;
use crate::node::{Behaviour, SimNode};

/// How the fleet reaches the cloud and behaves.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Node names are `{prefix}{index}`.
    pub prefix: String,
    /// WebSocket or QUIC.
    pub transport: Transport,
    /// The cloud's `host:port` for that transport.
    pub server: String,
    /// The join service, `https://host:port`.
    pub join: String,
    /// A join token, for nodes without a certificate yet.
    pub token: Option<String>,
    /// Where each node's certificate is kept (`{dir}/{node}/`).
    pub certs_dir: PathBuf,
    /// Local addresses the links are spread over (empty: the system's
    /// choice). Each address has its own ephemeral port range.
    pub sources: Vec<IpAddr>,
    /// Simulated nodes' behaviour.
    pub behaviour: Behaviour,
    /// EdgeHub's heartbeat (pings, or keepalive messages).
    pub heartbeat: Duration,
    /// Offer the cloud to keep alive with WebSocket pings.
    pub ping_keepalive: bool,
    /// Reconnect backoff: first ceiling and cap (EdgeHub's defaults: 1 s, 30 s).
    pub backoff: (Duration, Duration),
    /// Links started per second (0: all at once).
    pub start_rate: f64,
    /// Joins at once while certificates are issued.
    pub join_concurrency: usize,
    /// The configmap whose versions' arrival times are recorded (fanout).
    pub record_configmap: Option<(String, String)>,
}

impl FleetConfig {
    /// Defaults for a fleet of nodes named `{prefix}{index}` reaching
    /// `server` over `transport`.
    pub fn new(prefix: impl Into<String>, transport: Transport, server: String, join: String) -> FleetConfig {
        FleetConfig {
            prefix: prefix.into(),
            transport,
            server,
            join,
            token: None,
            certs_dir: PathBuf::from("sim-certs"),
            sources: Vec::new(),
            behaviour: Behaviour::default(),
            heartbeat: Duration::from_secs(15),
            ping_keepalive: true,
            backoff: (Duration::from_secs(1), Duration::from_secs(30)),
            start_rate: 0.0,
            join_concurrency: 32,
            record_configmap: None,
        }
    }

    /// The name of node `i`.
    pub fn node_name(&self, i: usize) -> String {
        format!("{}{i}", self.prefix)
    }
}

/// Counters of the whole fleet, added to by every node.
#[derive(Debug, Default)]
pub struct FleetStats {
    /// Nodes whose link is up now.
    pub connected: AtomicUsize,
    /// Connections made (reconnections included).
    pub connects: AtomicU64,
    /// Nodes registered (the cloud answered their Node's insert).
    pub registered: AtomicUsize,
    /// Object changes received from the cloud (insert, update, patch, delete).
    pub objects_received: AtomicU64,
    /// Of those, versions the node already held (sent again for nothing).
    pub unchanged_resent: AtomicU64,
    /// ACKs sent.
    pub acks: AtomicU64,
    /// Pods whose first status was reported.
    pub pods_started: AtomicU64,
    /// Pod status reports sent.
    pub pod_reports: AtomicU64,
    /// Node status reports sent (on registering, on reconnecting, and
    /// every status interval).
    pub status_reports: AtomicU64,
    /// Graceful deletes confirmed.
    pub deletes_confirmed: AtomicU64,
}

/// Arrival times of one configmap's versions at the nodes.
#[derive(Debug)]
pub struct Receipts {
    namespace: String,
    name: String,
    seen: Mutex<Vec<(u64, Instant)>>,
}

impl Receipts {
    pub(crate) fn record(&self, path: &ResourcePath, rv: u64) {
        if path.resource_type == edgehive_model::resource_type::CONFIGMAP
            && path.name.as_deref() == Some(self.name.as_str())
            && path.namespace.as_deref() == Some(self.namespace.as_str())
        {
            self.seen.lock().unwrap_or_else(|p| p.into_inner()).push((rv, Instant::now()));
        }
    }

    /// Takes what was recorded so far: (version, arrival).
    pub fn take(&self) -> Vec<(u64, Instant)> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// What every node shares.
pub(crate) struct FleetShared {
    pub(crate) host: HostInfo,
    pub(crate) host_ip: String,
    pub(crate) behaviour: Behaviour,
    pub(crate) stats: FleetStats,
    pub(crate) receipts: Option<Receipts>,
}

/// A running node's controls.
struct NodeControl {
    reset: Arc<Notify>,
    /// The cloud answered its Node's insert.
    registered: Arc<AtomicBool>,
    cancel: CancellationToken,
    /// Kept open: the link ends when its certificate channel closes.
    _certs: watch::Sender<Arc<EdgeCerts>>,
}

/// A running fleet.
pub struct Fleet {
    cfg: FleetConfig,
    shared: Arc<FleetShared>,
    metrics: Arc<EdgeHubMetrics>,
    quic: Vec<QuicEndpoint>,
    nodes: Mutex<HashMap<usize, NodeControl>>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet").field("prefix", &self.cfg.prefix).finish_non_exhaustive()
    }
}

/// The host every simulated node reports: a small Linux machine.
fn simulated_host() -> HostInfo {
    HostInfo {
        internal_ip: Some(IpAddr::from([127, 0, 0, 1])),
        cpus: 4,
        memory_kib: 8 * 1024 * 1024,
        kernel: "6.1.0-edgehive-sim".into(),
        os_image: "edgehive simulated node".into(),
        arch: "amd64".into(),
        machine_id: String::new(),
    }
}

/// Certificates for nodes `range` of the fleet: those on disk are loaded,
/// the others joined through the join service with the token (at most
/// `join_concurrency` at once). `progress` is told how many are ready.
pub async fn provision(
    cfg: &FleetConfig,
    range: std::ops::Range<usize>,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<Vec<Arc<EdgeCerts>>, SimError> {
    edgehive_edgehub::create_private_dir(&cfg.certs_dir)
        .map_err(|e| SimError::Io(format!("create {}: {e}", cfg.certs_dir.display())))?;
    let permits = Arc::new(Semaphore::new(cfg.join_concurrency.max(1)));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(range.len());
    for i in range {
        let (name, dir) = (cfg.node_name(i), cfg.certs_dir.join(cfg.node_name(i)));
        let (join, token, permits, done) = (cfg.join.clone(), cfg.token.clone(), permits.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let certs = node_certs(&join, &name, token.as_deref(), &dir, &permits).await;
            done.fetch_add(1, Relaxed);
            certs
        }));
    }
    let mut out = Vec::with_capacity(tasks.len());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let total = tasks.len();
    let mut tasks = tasks.into_iter();
    let mut next = tasks.next();
    while let Some(task) = next.as_mut() {
        tokio::select! {
            r = task => {
                let certs = r.map_err(|e| SimError::Io(format!("join task: {e}")))??;
                out.push(certs);
                next = tasks.next();
            }
            _ = tick.tick() => progress(done.load(Relaxed)),
        }
    }
    progress(total);
    Ok(out)
}

async fn node_certs(
    join: &str,
    node: &str,
    token: Option<&str>,
    dir: &Path,
    permits: &Semaphore,
) -> Result<Arc<EdgeCerts>, SimError> {
    let files = CertFiles::under(dir);
    if let Some(c) = EdgeCerts::load(&files).map_err(|e| SimError::Certs(node.to_owned(), e.to_string()))? {
        // A certificate kept from a run against another cloud is replaced.
        let current = match token {
            Some(t) => certs::token_names_ca(t, &c.ca).map_err(|e| SimError::Certs(node.to_owned(), e.to_string()))?,
            None => true,
        };
        if current {
            return Ok(Arc::new(c));
        }
    }
    let Some(token) = token else {
        return Err(SimError::Certs(node.to_owned(), "no certificate kept and no join token given".into()));
    };
    let _permit = permits.acquire().await.map_err(|_| SimError::Io("join permits closed".into()))?;
    edgehive_edgehub::create_private_dir(dir).map_err(|e| SimError::Io(format!("create {}: {e}", dir.display())))?;
    // A busy join service refuses some; each node tries a few times.
    let mut last = String::new();
    for attempt in 0..5u32 {
        match certs::join(join, node, token, &files, Duration::from_secs(30)).await {
            Ok(c) => return Ok(Arc::new(c)),
            // The service's own failures (5xx) and throttling pass; a refusal
            // of this node does not.
            Err(e @ certs::CertError::Refused { status, .. }) if status < 500 && status != 429 => {
                return Err(SimError::Certs(node.to_owned(), e.to_string()));
            }
            Err(e @ certs::CertError::CaMismatch { .. }) => {
                return Err(SimError::Certs(node.to_owned(), e.to_string()));
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
    }
    Err(SimError::Certs(node.to_owned(), last))
}

impl Fleet {
    /// Starts one link per certificate, node `first + i` with `certs[i]`,
    /// at `cfg.start_rate` a second.
    pub fn start(cfg: FleetConfig, first: usize, certs: Vec<Arc<EdgeCerts>>) -> Result<Arc<Fleet>, SimError> {
        let metrics = Arc::new(EdgeHubMetrics::default());
        let quic = match cfg.transport {
            Transport::Quic => {
                let sources =
                    if cfg.sources.is_empty() { vec![IpAddr::from([127, 0, 0, 1])] } else { cfg.sources.clone() };
                sources
                    .iter()
                    .map(|ip| {
                        QuicEndpoint::bind((*ip, 0).into(), Some(Arc::clone(metrics.wire_counter())))
                            .map_err(|e| SimError::Io(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            Transport::WebSocket => Vec::new(),
        };
        let receipts = cfg.record_configmap.as_ref().map(|(namespace, name)| Receipts {
            namespace: namespace.clone(),
            name: name.clone(),
            seen: Mutex::default(),
        });
        let fleet = Arc::new(Fleet {
            shared: Arc::new(FleetShared {
                host: simulated_host(),
                host_ip: "127.0.0.1".into(),
                behaviour: cfg.behaviour.clone(),
                stats: FleetStats::default(),
                receipts,
            }),
            metrics,
            quic,
            nodes: Mutex::default(),
            cancel: CancellationToken::new(),
            cfg,
        });
        let starter = Arc::clone(&fleet);
        tokio::spawn(async move {
            let gap = (starter.cfg.start_rate > 0.0).then(|| Duration::from_secs_f64(1.0 / starter.cfg.start_rate));
            let mut next = Instant::now();
            for (i, c) in certs.into_iter().enumerate() {
                if starter.cancel.is_cancelled() {
                    return;
                }
                if let Some(gap) = gap {
                    next += gap;
                    tokio::time::sleep_until(next).await;
                }
                starter.start_node(first + i, c);
            }
        });
        Ok(fleet)
    }

    fn start_node(&self, i: usize, certs: Arc<EdgeCerts>) {
        let name = self.cfg.node_name(i);
        let endpoint = CloudEndpoint { transport: self.cfg.transport, server: self.cfg.server.clone() };
        let mut hub = EdgeHubConfig::new(name.clone(), vec![endpoint]);
        hub.heartbeat = self.cfg.heartbeat;
        hub.ping_keepalive = self.cfg.ping_keepalive;
        (hub.backoff_base, hub.backoff_cap) = self.cfg.backoff;
        if !self.cfg.sources.is_empty() {
            hub.local_ip = Some(self.cfg.sources[i % self.cfg.sources.len()]);
        }
        if !self.quic.is_empty() {
            hub.quic_endpoint = Some(self.quic[i % self.quic.len()].clone());
        }
        let (certs_tx, certs_rx) = watch::channel(certs);
        let reset = Arc::new(Notify::new());
        let cancel = self.cancel.child_token();
        let registered = Arc::new(AtomicBool::new(false));
        let node = SimNode::new(Text::from(name), Arc::clone(&self.shared), Arc::clone(&registered));
        let link = EdgeLink::new(hub, certs_rx, Arc::clone(&self.metrics), node).with_reset(Arc::clone(&reset));
        let old = self
            .nodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(i, NodeControl { reset, registered, cancel: cancel.clone(), _certs: certs_tx });
        if let Some(old) = old {
            old.cancel.cancel();
        }
        tokio::spawn(link.run(cancel));
    }

    /// The fleet's counters.
    pub fn stats(&self) -> &FleetStats {
        &self.shared.stats
    }

    /// EdgeHub's counters, summed over every link.
    pub fn link_metrics(&self) -> &Arc<EdgeHubMetrics> {
        &self.metrics
    }

    /// Arrival times of the recorded configmap's versions.
    pub fn receipts(&self) -> Option<&Receipts> {
        self.shared.receipts.as_ref()
    }

    /// Nodes started.
    pub fn len(&self) -> usize {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// True when no node was started.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Breaks every node's connection at once, as a network fault would:
    /// each link reconnects after its own jittered backoff.
    pub fn break_all_links(&self) {
        for n in self.nodes.lock().unwrap_or_else(|p| p.into_inner()).values() {
            n.reset.notify_one();
        }
    }

    /// Stops node `i` (its link closes; the edge is gone). Its state is
    /// dropped: started again, it is a new edge with an empty store.
    pub fn stop_node(&self, i: usize) -> bool {
        match self.nodes.lock().unwrap_or_else(|p| p.into_inner()).remove(&i) {
            Some(n) => {
                n.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// The nodes running now, and whether each has registered.
    pub fn running(&self) -> Vec<(usize, bool)> {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes.iter().map(|(i, n)| (*i, n.registered.load(Relaxed))).collect()
    }

    /// Whether node `i` runs and has registered.
    pub fn is_registered(&self, i: usize) -> bool {
        let nodes = self.nodes.lock().unwrap_or_else(|p| p.into_inner());
        nodes.get(&i).is_some_and(|n| n.registered.load(Relaxed))
    }

    /// Starts node `i` (again) with `certs`.
    pub fn add_node(&self, i: usize, certs: Arc<EdgeCerts>) {
        self.start_node(i, certs);
    }

    /// Stops every node.
    pub fn shutdown(&self) {
        self.cancel.cancel();
    }
}
