//! The CloudHub module: accepts edge connections, keeps one session per
//! node, and routes downstream messages from the controllers to the node's
//! session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_beehive::{Context, Module, ModuleContext, ModuleFuture};
use edgehive_model::{Content, Message, ResourcePath, Text, group, op, source};
use edgehive_viaduct::{ConnTx, Connection, Server, Stream, StreamError, queue};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::HubMetrics;
use crate::notices::Notices;
use crate::points::SuccessPoints;
use crate::pool::PoolConfig;
use crate::rules;
use crate::session::{End, Session};

/// Settings of CloudHub.
#[derive(Debug, Clone)]
pub struct CloudHubConfig {
    /// End a session when no `keepalive` arrives for this long (KubeEdge: 30 s).
    pub keepalive_interval: Duration,
    /// Most nodes connected at once; more are refused with a reason.
    pub node_limit: usize,
    /// Refuse a connection whose certificate names another node than its
    /// `node_id` header. Off only for edges holding KubeEdge v1.15
    /// certificates (`CN=kubeedge.io`).
    pub require_node_certificate: bool,
    /// Per-node ACK pool limits and timers.
    pub pool: PoolConfig,
    /// Downstream messages waiting for a node's session task (as many as
    /// its pool may keep waiting: a burst the pool would take is never
    /// dropped on its way there; room is taken only as it is used).
    pub inbox: usize,
    /// Success points gather this long before being written.
    pub points_flush_interval: Duration,
    /// Most success-point writes per second (the rest coalesce and wait).
    pub points_write_rate: usize,
}

impl Default for CloudHubConfig {
    fn default() -> Self {
        CloudHubConfig {
            keepalive_interval: Duration::from_secs(30),
            node_limit: 10_000,
            require_node_certificate: true,
            pool: PoolConfig::default(),
            inbox: PoolConfig::default().max_waiting,
            points_flush_interval: Duration::from_millis(50),
            points_write_rate: 250,
        }
    }
}

struct SessionHandle {
    id: u64,
    inbox: queue::Sender<Message>,
    cancel: CancellationToken,
    /// The node's connection, for the stream sessions the cloud opens.
    conn: ConnTx,
}

/// Longest wait for the store's answer on whether a certificate is still
/// accepted; past it the connection is refused (the edge retries).
const CERTIFICATE_CHECK_DEADLINE: Duration = Duration::from_secs(5);

/// State shared by the module, the accept loops and the sessions.
pub(crate) struct HubState {
    pub(crate) cfg: CloudHubConfig,
    /// Which node certificates are still accepted (`None`: any the CA signed).
    credentials: Option<Arc<edgehive_credentials::Credentials>>,
    pub(crate) points: Arc<SuccessPoints>,
    pub(crate) metrics: HubMetrics,
    /// `connected` / `disconnected` for the controllers, never dropped.
    notices: Arc<Notices>,
    sessions: Mutex<HashMap<Text, SessionHandle>>,
    next_id: AtomicU64,
    /// The identity of the last object content read: a fanned-out object
    /// reaches every node's session with the same shared content, so it is
    /// read once, not once per node.
    last_meta: Mutex<Option<(edgehive_model::Content, rules::ObjectMeta)>>,
}

impl HubState {
    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<Text, SessionHandle>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`rules::object_meta`], remembered for the last content seen.
    pub(crate) fn object_meta(&self, m: &Message) -> rules::ObjectMeta {
        let mut last = self.last_meta.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((content, meta)) = last.as_ref()
            && content.ptr_eq(&m.content)
            && !m.content.is_null()
        {
            return meta.clone();
        }
        let meta = rules::object_meta(m);
        *last = Some((m.content.clone(), meta.clone()));
        meta
    }
}

/// The CloudHub beehive module (name `cloudhub`).
pub struct CloudHub {
    shared: Arc<HubState>,
    servers: Vec<Arc<tokio::sync::Mutex<Server>>>,
}

impl std::fmt::Debug for CloudHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudHub").field("config", &self.shared.cfg).finish_non_exhaustive()
    }
}

/// Cloud modules told of connections.
const CONNECTION_LISTENERS: [&str; 3] = [source::EDGECONTROLLER, source::SYNCCONTROLLER, source::DEVICECONTROLLER];

impl CloudHub {
    /// A hub serving edges that connect to `servers` (viaduct WebSocket
    /// and/or QUIC), with success points loaded from the store.
    pub fn new(cfg: CloudHubConfig, points: Arc<SuccessPoints>, servers: Vec<Server>) -> CloudHub {
        let metrics = HubMetrics::default();
        let notices = Arc::new(Notices::new(&CONNECTION_LISTENERS, metrics.notices_pending.clone()));
        CloudHub {
            shared: Arc::new(HubState {
                cfg,
                points,
                metrics,
                notices,
                sessions: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                last_meta: Mutex::new(None),
                credentials: None,
            }),
            servers: servers.into_iter().map(|s| Arc::new(tokio::sync::Mutex::new(s))).collect(),
        }
    }

    /// Accepts a node's certificate only while `credentials` has not
    /// revoked or replaced it (checked at every connection). Call before the
    /// hub runs.
    pub fn with_credentials(mut self, credentials: Arc<edgehive_credentials::Credentials>) -> CloudHub {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.credentials = Some(credentials);
        }
        self
    }

    /// Its metrics, to register in the process's registry
    /// ([`HubMetrics::register`]).
    pub fn metrics(&self) -> &HubMetrics {
        &self.shared.metrics
    }

    /// Nodes connected now.
    pub fn connected_nodes(&self) -> Vec<String> {
        let mut v: Vec<String> = self.shared.sessions().keys().map(|k| k.to_string()).collect();
        v.sort();
        v
    }

    /// Whether a node has a session now, asked of the hub itself rather
    /// than learnt from its notices: a controller that is behind on its
    /// mailbox may not have read a node's `connected` yet.
    pub fn presence(&self) -> impl Fn(&str) -> bool + Send + Sync + 'static {
        let shared = Arc::clone(&self.shared);
        move |node| shared.sessions().contains_key(node)
    }

    /// The success points.
    pub fn points(&self) -> &Arc<SuccessPoints> {
        &self.shared.points
    }

    /// Opens stream sessions to connected nodes.
    pub fn streams(&self) -> NodeStreams {
        NodeStreams { shared: Arc::clone(&self.shared) }
    }

    async fn serve(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) {
        let tasks = TaskTracker::new();
        let stop = cancel.child_token();
        self.shared.notices.spawn(ctx.context(), &stop, &tasks);
        for server in &self.servers {
            tasks.spawn(accept_loop(
                server.clone(),
                self.shared.clone(),
                ctx.context().clone(),
                stop.clone(),
                tasks.clone(),
            ));
        }
        let writer = tokio::spawn(self.shared.points.clone().run_writer(
            stop.clone(),
            self.shared.cfg.points_flush_interval,
            self.shared.cfg.points_write_rate,
        ));
        while let Some(m) = ctx.receive_until(&cancel).await {
            dispatch(&self.shared, m);
        }
        stop.cancel();
        for s in self.shared.sessions().values() {
            s.cancel.cancel();
        }
        tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), tasks.wait()).await;
        let _ = writer.await;
    }
}

impl Module for CloudHub {
    fn name(&self) -> &str {
        source::CLOUDHUB
    }

    fn group(&self) -> &str {
        source::CLOUDHUB
    }

    fn mailbox_capacity(&self) -> Option<usize> {
        Some(16 * 1024)
    }

    fn run(self: Arc<Self>, ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            self.serve(ctx, cancel).await;
            Ok(())
        })
    }
}

/// Opens stream sessions (logs, exec, port-forward) to connected nodes over
/// their viaduct connections: no other port, no other connection.
#[derive(Clone)]
pub struct NodeStreams {
    shared: Arc<HubState>,
}

impl std::fmt::Debug for NodeStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStreams").finish_non_exhaustive()
    }
}

/// Why a stream session could not be opened to a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenStreamError {
    /// The node has no session with the cloud now.
    #[error("node {0:?} is not connected to the cloud")]
    NotConnected(String),
    /// The node's agent did not agree on stream sessions (a KubeEdge
    /// EdgeCore, or an older edgehive edge).
    #[error("node {0:?} does not support stream sessions over its connection")]
    NotSupported(String),
    /// The session could not be opened.
    #[error("stream session to node {node:?}: {error}")]
    Stream {
        /// The node.
        node: String,
        /// What failed.
        error: StreamError,
    },
}

impl NodeStreams {
    /// Opens a session to `node` with `header`; fails at once when the node
    /// is not connected.
    pub async fn open(&self, node: &str, header: bytes::Bytes) -> Result<Stream, OpenStreamError> {
        let conn = self.shared.sessions().get(node).map(|s| s.conn.clone());
        let Some(conn) = conn else {
            return Err(OpenStreamError::NotConnected(node.to_owned()));
        };
        match conn.open_stream(header).await {
            Ok(s) => {
                tracing::debug!(node, session = s.id(), "stream session opened");
                Ok(s)
            }
            Err(StreamError::NotAgreed) => Err(OpenStreamError::NotSupported(node.to_owned())),
            Err(StreamError::Closed(_)) => Err(OpenStreamError::NotConnected(node.to_owned())),
            Err(error) => Err(OpenStreamError::Stream { node: node.to_owned(), error }),
        }
    }
}

/// Hands a downstream message to its node's session; never waits.
fn dispatch(shared: &HubState, m: Message) {
    // DeviceController's `twin` messages name no object
    // (`node/{node}/membership`): only the node is read from them.
    let twin_node = || {
        let (node, _) = edgehive_model::resource::split_node_prefix(&m.route.resource).ok()?;
        (m.route.group == group::TWIN).then(|| Text::copy_from(node))
    };
    let res = ResourcePath::parse_cloud(&m.route.resource).ok();
    let Some(node) = res.as_ref().map(|r| r.node.clone()).or_else(twin_node) else {
        shared.metrics.malformed.inc();
        tracing::warn!(resource = %m.route.resource, source = %m.route.source, "downstream message without node/{{node}}/ resource; dropped");
        return;
    };
    if let Some(res) = &res
        && rules::is_node_stopped(&m, &node, &res.path)
    {
        tracing::info!(node = %node, "node deleted; ending its session and forgetting its success points");
        if let Some(s) = shared.sessions().remove(&node) {
            s.cancel.cancel();
        }
        shared.points.remove_node(&node);
        return;
    }
    let sessions = shared.sessions();
    let Some(s) = sessions.get(&node) else {
        shared.metrics.dropped_offline.inc();
        return;
    };
    if let Err(e) = s.inbox.try_send(m) {
        drop(sessions);
        shared.metrics.dropped_full.inc();
        // The node must get this object all the same: with a point at
        // version 0 (as the session records for an object it offers),
        // SyncController sends it from the store. Without one, an object
        // the node never had would not be sent until it changed again.
        let m = e.into_inner();
        if let Some(res) = res
            && !matches!(m.route.operation.as_str(), op::DELETE | op::RESPONSE)
            && rules::delivery_mode(&m, &res.path.resource_type) == rules::Mode::Ack
            && let Some(p) = crate::session::point_of(&m, &res.path, &shared.object_meta(&m))
            && shared.points.get(&node, &p.uid).is_none()
        {
            shared.points.record(&node, &p, 0);
        }
    }
}

async fn accept_loop(
    server: Arc<tokio::sync::Mutex<Server>>,
    shared: Arc<HubState>,
    ctx: Context,
    stop: CancellationToken,
    tasks: TaskTracker,
) {
    let mut server = server.lock().await;
    loop {
        let conn = tokio::select! {
            _ = stop.cancelled() => return,
            c = server.accept() => match c { Some(c) => c, None => return },
        };
        // Each connection is admitted on its own task: a slow check of one
        // certificate holds no other edge up.
        let (shared, ctx, stop, inner) = (shared.clone(), ctx.clone(), stop.clone(), tasks.clone());
        tasks.spawn(async move { admit(conn, &shared, &ctx, &stop, &inner).await });
    }
}

fn refusal(node: &str, reason: &str) -> Message {
    Message::new()
        .with_route(source::CLOUDHUB, group::RESOURCE, format!("node/{node}"), op::ERROR)
        .with_content(Content::string(reason))
}

/// Checks a new connection and starts its session.
async fn admit(conn: Connection, shared: &Arc<HubState>, ctx: &Context, stop: &CancellationToken, tasks: &TaskTracker) {
    let peer = conn.peer().clone();
    let node = peer.node_id.clone();
    let cert_node = peer.cert.as_ref().and_then(|c| c.node_name()).map(str::to_owned);
    if shared.cfg.require_node_certificate && cert_node.as_deref() != Some(node.as_str()) {
        shared.metrics.refused_identity.inc();
        let cn = peer.cert.as_ref().and_then(|c| c.common_name.clone()).unwrap_or_default();
        tracing::warn!(node = %node, remote = %peer.remote_addr, certificate_cn = %cn, "refused: the certificate does not name this node");
        let reason = format!(
            "refused: node_id {node:?} does not match the client certificate (CN {cn:?}); expected CN system:node:{node}"
        );
        close_refused(conn, refusal(&node, &reason), tasks);
        return;
    }
    // A session resumed from a TLS ticket brings the certificate of its
    // first handshake, which may have expired since.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    if let Some(cert) = peer.cert.as_ref().filter(|c| c.expired_at(now)) {
        shared.metrics.refused_expired.inc();
        tracing::warn!(node = %node, remote = %peer.remote_addr, serial = %cert.serial, resumed = peer.resumed,
            "refused: the certificate has expired");
        close_refused(
            conn,
            refusal(&node, "refused: the client certificate has expired; renew it (join again)"),
            tasks,
        );
        return;
    }
    if let Some(credentials) = &shared.credentials {
        let serial = peer.cert.as_ref().map(|c| c.serial.as_str()).unwrap_or_default();
        let checked =
            tokio::time::timeout(CERTIFICATE_CHECK_DEADLINE, credentials.check_certificate(&node, serial)).await;
        let refused = match checked {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("the certificate could not be checked within {CERTIFICATE_CHECK_DEADLINE:?}")),
        };
        if let Some(why) = refused {
            shared.metrics.refused_revoked.inc();
            tracing::warn!(node = %node, remote = %peer.remote_addr, serial, reason = %why, "refused: certificate not accepted");
            close_refused(conn, refusal(&node, &format!("refused: {why}")), tasks);
            return;
        }
    }
    let connected = notice(&node, op::CONNECTED);
    let (id, inbox_rx, cancel) = {
        let mut sessions = shared.sessions();
        if !sessions.contains_key(&node) && sessions.len() >= shared.cfg.node_limit {
            drop(sessions);
            shared.metrics.refused_limit.inc();
            tracing::warn!(node = %node, remote = %peer.remote_addr, limit = shared.cfg.node_limit, "refused: node limit reached");
            let reason = format!("refused: the cloud serves at most {} nodes", shared.cfg.node_limit);
            close_refused(conn, refusal(&node, &reason), tasks);
            return;
        }
        let id = shared.next_id.fetch_add(1, Relaxed);
        let (inbox, inbox_rx) = queue::channel(shared.cfg.inbox);
        let cancel = stop.child_token();
        let handle = SessionHandle { id, inbox, cancel: cancel.clone(), conn: conn.tx.clone() };
        if let Some(old) = sessions.insert(node.clone(), handle) {
            old.cancel.cancel();
            shared.metrics.replaced.inc();
            tracing::info!(node = %node, remote = %peer.remote_addr, "a newer connection replaces the session");
        } else {
            shared.metrics.connected.inc();
        }
        // Told under the lock: a node's notices queue in the order its
        // sessions came and went.
        shared.notices.publish(&node, connected);
        (id, inbox_rx, cancel)
    };
    shared.metrics.sessions.inc();
    tracing::info!(node = %node, remote = %peer.remote_addr, protocol = ?peer.protocol, "edge connected");
    let (tx, rx) = conn.split();
    let session = Session {
        node: node.clone(),
        tx,
        rx,
        inbox: inbox_rx,
        cancel,
        shared: shared.clone(),
        ctx: ctx.as_module(source::CLOUDHUB),
    };
    let shared = shared.clone();
    tasks.spawn(async move {
        let end = session.run().await;
        if end == End::KeepaliveExpired {
            shared.metrics.keepalive_expired.inc();
        }
        let disconnected = notice(&node, op::DISCONNECTED);
        let current = {
            let mut sessions = shared.sessions();
            // A replaced session's end is not a disconnection of the node.
            let current = sessions.get(&node).is_some_and(|s| s.id == id) && sessions.remove(&node).is_some();
            if current {
                shared.notices.publish(&node, disconnected);
            }
            current
        };
        if current {
            shared.metrics.connected.dec();
            tracing::info!(node = %node, ?end, "edge disconnected");
        }
    });
}

fn close_refused(conn: Connection, reason: Message, tasks: &TaskTracker) {
    let (tx, _rx) = conn.split();
    tasks.spawn(async move {
        if tx.close_with(reason).await.is_err() {
            tx.close();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), tx.closed()).await;
    });
}

/// The notice for the controllers that `node` connected or disconnected
/// ([`Notices`]; KubeEdge's internal event: resource `node/{id}`, content
/// event type, time and id).
fn notice(node: &str, operation: &'static str) -> Message {
    let content = Content::from_serialize(&serde_json::json!({
        "event_type": operation,
        "timestamp": edgehive_model::now_millis(),
        "client_id": node,
    }))
    .unwrap_or_default();
    Message::new()
        .with_route(source::CLOUDHUB, group::RESOURCE, format!("node/{node}"), operation)
        .with_content(content)
}
