//! The MetaManager module (name `metamanager`, group `meta`).
//!
//! - From the cloud (through EdgeHub): `insert`, `update`, `patch` and
//!   `delete` are committed to the store in batches, and only then ACKed
//!   (`response` "OK" to the cloud) and passed on to `edged`. An ACK always
//!   means "persisted". `update` of an unknown object inserts it: the cloud
//!   re-sends objects created while the edge was away as updates. A pod's
//!   delete removes its status rows with it.
//! - A change edged's full mailbox could not take is never dropped
//!   silently: it is counted, and a wake-up (`update podlist`) is sent to
//!   edged from a task of its own as soon as there is room, after which
//!   edged reads the store again. MetaManager's own loop never waits for
//!   edged (edged asks it queries: that could deadlock).
//! - From edge modules: queries are answered from the store, or asked of the
//!   cloud (configmaps, secrets, service account tokens, leases, the node,
//!   volumes) while connected, with a deadline, storing the answer; offline,
//!   or when the cloud does not answer, the store answers (edge autonomy).
//!   Status reports are stored and passed to the cloud; other requests go
//!   to the cloud as they are.
//! - After each connection to a cloud that agreed the `inventory` feature:
//!   the key, uid and resourceVersion of every stored pod, configmap and
//!   secret go to the cloud (`inventory` of `null/inventory/{node}`), which
//!   sends what the store lacks or holds older and deletes what the node
//!   should not hold (docs/protocol.md, "Inventory"). A store rebuilt at
//!   start because it was damaged is also reported as a Warning Event
//!   (`EdgeStoreRebuilt`) about the Node, sent until the cloud records it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use edgehive_beehive::{Context, Module, ModuleContext, ModuleFuture, SendErrorKind};
use edgehive_model::{Content, Message, ResourcePath, Text, group, op, resource_type as rt, source, well_known};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::db::{MetaDb, Op, Rebuilt};

/// MetaManager's module name.
pub const MODULE: &str = source::METAMANAGER;
/// Where EdgeHub takes messages for the cloud.
const EDGEHUB: &str = source::WEBSOCKET;
/// The module that runs pods (issue of the edged crate); absent is fine.
const EDGED: &str = source::EDGED;
/// The module that keeps devices; absent is fine.
const TWIN: &str = source::TWIN;

/// Sources of messages made on the edge; anything else came from the cloud.
const EDGE_SOURCES: [&str; 9] = [
    source::EDGED,
    source::METAMANAGER,
    source::EDGEHUB,
    source::WEBSOCKET,
    source::TWIN,
    source::BUS,
    source::EVENTBUS,
    source::SERVICEBUS,
    source::EDGESTREAM,
];

/// Types asked of the cloud while connected (KubeEdge v1.15's list).
const REMOTE_TYPES: [&str; 8] = [
    rt::CONFIGMAP,
    rt::SECRET,
    rt::PERSISTENTVOLUME,
    rt::PERSISTENTVOLUMECLAIM,
    rt::VOLUMEATTACHMENT,
    rt::NODE,
    rt::SERVICEACCOUNTTOKEN,
    rt::LEASE,
];

/// How long a message may wait for room in another module's mailbox.
const SEND_DEADLINE: Duration = Duration::from_secs(30);

/// The types an inventory lists: what the cloud sends a node.
const INVENTORY_TYPES: [&str; 3] = [rt::POD, rt::CONFIGMAP, rt::SECRET];
/// Most rows an inventory lists (the cloud refuses more); a store holding
/// more sends none, with a warning.
const MAX_INVENTORY: usize = edgehive_model::inventory::MAX_ITEMS;

/// Settings of MetaManager.
#[derive(Debug, Clone)]
pub struct MetaConfig {
    /// Deadline of a query asked of the cloud (KubeEdge `remoteQueryTimeout`: 60 s).
    pub remote_query_timeout: Duration,
    /// Most messages committed in one transaction.
    pub batch: usize,
    /// Remote queries in flight at once; more are answered from the store.
    pub remote_queries: usize,
    /// Fault injection for tests: abort the process just before committing
    /// a batch that holds a change from the cloud (received, not stored,
    /// not ACKed). The binary sets it from `EDGEHIVE_FAILPOINT=meta-before-commit`.
    pub crash_before_commit: bool,
    /// This node's name (the inventory and Events name it).
    pub node_name: String,
}

impl Default for MetaConfig {
    fn default() -> Self {
        MetaConfig {
            node_name: String::new(),
            remote_query_timeout: Duration::from_secs(60),
            batch: 256,
            remote_queries: 64,
            crash_before_commit: false,
        }
    }
}

/// MetaManager's counters, one atomic each (prometheus-client's). The
/// manager updates them; read them by registering them
/// ([`MetaMetrics::register`]) and encoding the registry.
#[derive(Debug, Default)]
pub struct MetaMetrics {
    /// Cloud changes committed (and ACKed).
    committed: Counter,
    /// Transactions committed.
    transactions: Counter,
    /// Cloud changes not committed (store failure; the cloud re-sends).
    commit_failures: Counter,
    /// Queries answered from the store.
    local_queries: Counter,
    /// Queries answered by the cloud.
    remote_queries: Counter,
    /// Remote queries that failed and were answered from the store.
    remote_fallbacks: Counter,
    /// Damaged rows met (skipped).
    corrupt_rows: Counter,
    /// Changes edged's full mailbox did not take (edged re-reads the store).
    edged_missed: Counter,
    /// Wake-ups sent to edged to re-read the store after missed changes.
    edged_resyncs: Counter,
    /// Devices DeviceTwin's full mailbox did not take (it re-reads the store).
    twin_missed: Counter,
    /// Wake-ups sent to DeviceTwin to re-read the store's Devices.
    twin_resyncs: Counter,
    /// Inventories sent to the cloud.
    inventories: Counter,
    /// 1 from a rebuild of the damaged store at start until the cloud
    /// records its Event.
    store_rebuilt: Gauge,
}

impl MetaMetrics {
    /// Registers the metrics in `registry` under the prefix `metamanager`
    /// (`edgehive_metamanager_` in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_metamanager::MetaMetrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_metamanager_committed_total 0\n"));
    /// assert!(text.contains("\nedgehive_metamanager_store_rebuilt 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("metamanager");
        r.register("committed", "Cloud changes committed and ACKed", self.committed.clone());
        r.register("transactions", "Store transactions committed", self.transactions.clone());
        r.register("commit_failures", "Cloud changes the store refused", self.commit_failures.clone());
        r.register("local_queries", "Queries answered from the store", self.local_queries.clone());
        r.register("remote_queries", "Queries answered by the cloud", self.remote_queries.clone());
        r.register("remote_fallbacks", "Remote queries answered from the store instead", self.remote_fallbacks.clone());
        r.register("corrupt_rows", "Damaged store rows skipped", self.corrupt_rows.clone());
        r.register(
            "edged_missed",
            "Changes edged's full mailbox did not take; edged re-reads the store",
            self.edged_missed.clone(),
        );
        r.register(
            "edged_resyncs",
            "Wake-ups that made edged re-read the store after missed changes",
            self.edged_resyncs.clone(),
        );
        r.register(
            "twin_missed",
            "Devices and models DeviceTwin's full mailbox did not take; it re-reads the store",
            self.twin_missed.clone(),
        );
        r.register(
            "twin_resyncs",
            "Wake-ups that made DeviceTwin re-read the store's Devices after missed changes",
            self.twin_resyncs.clone(),
        );
        r.register("inventories", "Store inventories sent to the cloud", self.inventories.clone());
        r.register(
            "store_rebuilt",
            "1 from a rebuild of the damaged store at start until the cloud records its Event",
            self.store_rebuilt.clone(),
        );
    }
}

/// The MetaManager beehive module.
#[derive(Debug)]
pub struct MetaManager {
    cfg: MetaConfig,
    db: Arc<MetaDb>,
    metrics: Arc<MetaMetrics>,
    /// The Event about a store rebuilt at start, until the cloud records it.
    rebuilt: Arc<std::sync::Mutex<Option<Message>>>,
}

impl MetaManager {
    /// A manager over `db`.
    pub fn new(cfg: MetaConfig, db: Arc<MetaDb>) -> MetaManager {
        MetaManager { cfg, db, metrics: Arc::default(), rebuilt: Arc::default() }
    }

    /// Reports that the store was damaged and rebuilt (see
    /// [`MetaDb::open_or_rebuild`]): a Warning Event about the Node goes to
    /// the cloud once connected.
    pub fn report_rebuilt(self, rebuilt: &Rebuilt) -> MetaManager {
        self.metrics.store_rebuilt.set(1);
        *self.rebuilt.lock().unwrap_or_else(|p| p.into_inner()) = Some(rebuilt_event(&self.cfg.node_name, rebuilt));
        self
    }

    /// Its counters, to register in the process's registry
    /// ([`MetaMetrics::register`]).
    pub fn metrics(&self) -> Arc<MetaMetrics> {
        Arc::clone(&self.metrics)
    }
}

impl Module for MetaManager {
    fn name(&self) -> &str {
        MODULE
    }

    fn group(&self) -> &str {
        group::META
    }

    fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            let db = Arc::clone(&self.db);
            match tokio::task::spawn_blocking(move || db.remove_orphan_status()).await {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => tracing::info!(rows = n, "removed the status rows of pods no longer stored"),
                Ok(Err(e)) => tracing::warn!(error = %e, "could not remove stale status rows"),
                Err(e) => tracing::warn!(error = %e, "could not remove stale status rows"),
            }
            let edged_behind = Arc::new(Notify::new());
            // The wake-up task ends with this run (a restart makes another).
            let waker = cancel.child_token();
            let _waker_guard = waker.clone().drop_guard();
            tokio::spawn(wake(
                ctx.context().clone(),
                Wake {
                    target: EDGED,
                    message: resync_message,
                    missed: self.metrics.edged_missed.clone(),
                    resyncs: self.metrics.edged_resyncs.clone(),
                },
                Arc::clone(&edged_behind),
                waker.clone(),
            ));
            let twin_behind = Arc::new(Notify::new());
            tokio::spawn(wake(
                ctx.context().clone(),
                Wake {
                    target: TWIN,
                    message: twin_resync_message,
                    missed: self.metrics.twin_missed.clone(),
                    resyncs: self.metrics.twin_resyncs.clone(),
                },
                Arc::clone(&twin_behind),
                waker,
            ));
            let shared = Arc::new(MetaState {
                cfg: self.cfg.clone(),
                db: Arc::clone(&self.db),
                metrics: Arc::clone(&self.metrics),
                ctx: ctx.context().clone(),
                connected: AtomicBool::new(false),
                remote: Arc::new(Semaphore::new(self.cfg.remote_queries)),
                edged_behind,
                twin_behind,
                rebuilt: Arc::clone(&self.rebuilt),
            });
            let mut batch = Vec::with_capacity(self.cfg.batch);
            loop {
                let Some(first) = ctx.receive_until(&cancel).await else { return Ok(()) };
                batch.push(first);
                while batch.len() < self.cfg.batch {
                    match ctx.try_receive() {
                        Some(m) => batch.push(m),
                        None => break,
                    }
                }
                Arc::clone(&shared).process(std::mem::take(&mut batch)).await;
            }
        })
    }
}

struct MetaState {
    cfg: MetaConfig,
    db: Arc<MetaDb>,
    metrics: Arc<MetaMetrics>,
    ctx: Context,
    connected: AtomicBool,
    remote: Arc<Semaphore>,
    /// Notified when edged missed a change: [`wake_edged`] tells it to
    /// re-read the store.
    edged_behind: Arc<Notify>,
    /// Notified when DeviceTwin missed a Device or model: it is told to
    /// re-read the store's.
    twin_behind: Arc<Notify>,
    rebuilt: Arc<std::sync::Mutex<Option<Message>>>,
}

/// The Warning Event that says the store was rebuilt (Kubernetes' Event,
/// about the Node, as a kubelet records node events).
fn rebuilt_event(node: &str, rebuilt: &Rebuilt) -> Message {
    let now = time::OffsetDateTime::now_utc();
    let stamp = now
        .replace_nanosecond(0)
        .unwrap_or(now)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let name = format!("{node}.{:x}", now.unix_timestamp_nanos());
    let event = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
        "reason": "EdgeStoreRebuilt",
        "type": "Warning",
        "message": format!(
            "the edge store failed its integrity check ({}); it was moved to {} and rebuilt from the cloud",
            rebuilt.reason,
            rebuilt.moved_to.display()
        ),
        "source": {"component": "edgehive-edge", "host": node},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    });
    Message::new()
        .with_route(MODULE, group::META, format!("default/{}/{name}", rt::EVENT), op::INSERT)
        .with_content(Content::from_serialize(&event).unwrap_or_default())
}

/// The wake-up that makes edged re-read its pods from the store.
fn resync_message() -> Message {
    Message::new()
        .with_route(MODULE, group::META, rt::PODLIST, op::UPDATE)
        .with_content(Content::string("edged missed changes: read the store again"))
}

/// The wake-up that makes DeviceTwin re-read the store's Devices and models.
fn twin_resync_message() -> Message {
    Message::new()
        .with_route(MODULE, group::META, "devicelist", op::UPDATE)
        .with_content(Content::string("twin missed changes: read the store again"))
}

/// Who a wake-up is for.
struct Wake {
    target: &'static str,
    message: fn() -> Message,
    /// Changes the target missed, and wake-ups sent.
    missed: Counter,
    resyncs: Counter,
}

/// Sends `w.target` one wake-up after each run of missed changes, waiting
/// for room in its mailbox (each wait bounded by [`SEND_DEADLINE`], retried
/// until it is taken). A change missed while a wake-up is on its way
/// leaves a permit in `behind`, so another follows: every missed change is
/// followed by a wake-up queued after it, and the target's re-read sees it.
async fn wake(ctx: Context, w: Wake, behind: Arc<Notify>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = behind.notified() => {}
        }
        loop {
            let missed = w.missed.get();
            let sent = tokio::select! {
                () = cancel.cancelled() => return,
                r = tokio::time::timeout(SEND_DEADLINE, ctx.send(w.target, (w.message)())) => r,
            };
            match sent {
                Ok(Ok(())) => {
                    w.resyncs.inc();
                    tracing::info!(
                        target = w.target,
                        missed_total = missed,
                        "missed changes; told to re-read the store"
                    );
                    break;
                }
                // `send` fails only when there is no such module to take it
                // (absent, disabled, stopped): nothing to wake.
                Ok(Err(e)) => {
                    tracing::debug!(target = w.target, error = %e, "no module to wake");
                    break;
                }
                Err(_) => tracing::warn!(
                    target = w.target,
                    missed_total = missed,
                    "mailbox stayed full past the deadline; its wake-up waits on"
                ),
            }
        }
    }
}

/// A Device or DeviceModel from the cloud: DeviceTwin's, not edged's
/// (KubeEdge's MetaManager hands them to `twin`).
fn is_device_object(m: &Message) -> bool {
    key_and_type(m).is_some_and(|(_, ty)| ty == rt::DEVICE || ty == rt::DEVICE_MODEL)
}

fn from_cloud(m: &Message) -> bool {
    !EDGE_SOURCES.contains(&m.route.source.as_str())
}

fn key_and_type(m: &Message) -> Option<(String, Text)> {
    let path = ResourcePath::parse_wire(&m.route.resource).ok()?;
    Some((m.route.resource.to_string(), path.resource_type))
}

/// The object a cloud answer carries: KubeEdge wraps registration and
/// lease answers as `{"Object": …, "Err": …}`.
fn unwrap_object(content: &Content) -> Option<String> {
    let v = content.to_value();
    let obj = match v.get("Object") {
        Some(o) => o.clone(),
        None => v,
    };
    (obj.get("metadata").is_some_and(serde_json::Value::is_object)).then(|| obj.to_string())
}

impl MetaState {
    async fn send(&self, module: &str, m: Message) {
        let what = (m.route.operation.clone(), m.route.resource.clone());
        match tokio::time::timeout(SEND_DEADLINE, self.ctx.send(module, m)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(module, operation = %what.0, resource = %what.1, error = %e, "not delivered"),
            Err(_) => {
                tracing::warn!(module, operation = %what.0, resource = %what.1, "not delivered: mailbox full past the deadline")
            }
        }
    }

    async fn process(self: Arc<Self>, batch: Vec<Message>) {
        let mut writes: Vec<(Message, Vec<Op>)> = Vec::new();
        for m in batch {
            let operation = m.route.operation.as_str();
            if m.route.source == source::EDGEHUB && operation == op::CONNECT {
                let up = m.content.as_text().as_deref() == Some(well_known::CLOUD_CONNECTED);
                self.connected.store(up, Relaxed);
                if up && well_known::connection_has(&m.header.message_type, well_known::INVENTORY_AGREED) {
                    // The inventory covers every change taken before it.
                    if !writes.is_empty() {
                        self.commit(std::mem::take(&mut writes)).await;
                    }
                    Arc::clone(&self).after_connect().await;
                }
                continue;
            }
            if from_cloud(&m) {
                match operation {
                    op::INSERT | op::UPDATE | op::PATCH | op::DELETE => match cloud_ops(&m) {
                        Some(ops) => writes.push((m, ops)),
                        None => {
                            tracing::warn!(operation, resource = %m.route.resource, "change from the cloud with a bad resource; refused");
                            self.send(EDGEHUB, m.error_response("bad resource")).await;
                        }
                    },
                    op::RESPONSE => self.late_answer(m).await,
                    op::ERROR => {
                        tracing::warn!(resource = %m.route.resource, reason = ?m.content.as_text(), "error from the cloud")
                    }
                    _ => {
                        tracing::debug!(operation, resource = %m.route.resource, "message from the cloud not handled here")
                    }
                }
                continue;
            }
            match operation {
                op::QUERY => Arc::clone(&self).query(m).await,
                op::UPDATE | op::PATCH if coalescible_status(&m) => {
                    if let Some(o) = status_op(&m) {
                        writes.push((m, vec![o]));
                    }
                }
                _ => self.send(EDGEHUB, m).await,
            }
        }
        if !writes.is_empty() {
            self.commit(writes).await;
        }
    }

    /// Sends the store's inventory, and the rebuilt store's Event if the
    /// cloud has not recorded it yet.
    async fn after_connect(self: Arc<Self>) {
        let pending = self.rebuilt.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(mut event) = pending {
            // A new message each time; the Event's name stays, so the cloud
            // records it once.
            event.header.msg_id = edgehive_model::new_msg_id();
            let me = Arc::clone(&self);
            tokio::spawn(async move {
                match me.ctx.send_sync(EDGEHUB, event, me.cfg.remote_query_timeout).await {
                    Ok(r) if r.route.operation != op::ERROR => {
                        *me.rebuilt.lock().unwrap_or_else(|p| p.into_inner()) = None;
                        me.metrics.store_rebuilt.set(0);
                        tracing::info!(node = %me.cfg.node_name, "the cloud recorded that the edge store was rebuilt");
                    }
                    Ok(r) => {
                        tracing::warn!(node = %me.cfg.node_name, reason = ?r.content.as_text(), "the cloud refused the store-rebuilt event")
                    }
                    Err(e) => {
                        tracing::warn!(node = %me.cfg.node_name, error = %e, "store-rebuilt event not sent; sent again on the next connection")
                    }
                }
            });
        }
        let db = Arc::clone(&self.db);
        let listed = tokio::task::spawn_blocking(move || db.inventory(&INVENTORY_TYPES, MAX_INVENTORY)).await;
        let items = match listed {
            Ok(Ok(Some(items))) => items,
            Ok(Ok(None)) => {
                tracing::warn!(node = %self.cfg.node_name, max = MAX_INVENTORY,
                    "the edge store holds more objects than an inventory lists; none sent");
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(node = %self.cfg.node_name, error = %e, "could not list the edge store; no inventory sent");
                return;
            }
            Err(e) => {
                tracing::warn!(node = %self.cfg.node_name, error = %e, "could not list the edge store; no inventory sent");
                return;
            }
        };
        let m = edgehive_model::inventory::message(&self.cfg.node_name, &items);
        tracing::info!(node = %self.cfg.node_name, objects = items.len(), "inventory of the edge store sent");
        self.metrics.inventories.inc();
        self.send(EDGEHUB, m).await;
    }

    /// Commits a batch, then ACKs and passes on what came from the cloud and
    /// forwards status reports to it.
    async fn commit(&self, writes: Vec<(Message, Vec<Op>)>) {
        let ops: Vec<Op> = writes.iter().flat_map(|(_, o)| o.iter().cloned()).collect();
        if self.cfg.crash_before_commit && writes.iter().any(|(m, _)| from_cloud(m)) {
            tracing::error!("failpoint meta-before-commit: aborting before the commit");
            std::process::abort();
        }
        let db = Arc::clone(&self.db);
        let result = tokio::task::spawn_blocking(move || db.apply(&ops)).await;
        match result {
            Ok(Ok(_)) => {
                self.metrics.transactions.inc();
                for (m, _) in writes {
                    if from_cloud(&m) {
                        self.metrics.committed.inc();
                        self.send(EDGEHUB, m.response(Content::string(well_known::ACK_OK))).await;
                        if is_device_object(&m) {
                            // As for edged: never waited for; a change
                            // DeviceTwin's full mailbox does not take is
                            // followed by a wake-up to re-read the store.
                            match self.ctx.try_send(TWIN, m) {
                                Ok(()) => {}
                                Err(e) if e.kind == SendErrorKind::Full => {
                                    self.metrics.twin_missed.inc();
                                    self.twin_behind.notify_one();
                                }
                                Err(e) if e.kind == SendErrorKind::UnknownTarget => {}
                                Err(e) => tracing::warn!(error = %e, "devicetwin did not take a change"),
                            }
                            continue;
                        }
                        match self.ctx.try_send(EDGED, m) {
                            Ok(()) => {}
                            Err(e) if e.kind == SendErrorKind::Full => {
                                // Committed and ACKed, but edged's mailbox is
                                // full: edged is woken to re-read the store.
                                self.metrics.edged_missed.inc();
                                tracing::debug!(resource = %e.message().route.resource, "edged's mailbox is full; it will re-read the store");
                                self.edged_behind.notify_one();
                            }
                            Err(e) if e.kind == SendErrorKind::UnknownTarget => {}
                            Err(e) => tracing::warn!(error = %e, "edged did not take a change"),
                        }
                    } else {
                        // A status report: stored; the reporter is told OK,
                        // and the cloud gets it (EdgeHub keeps it while offline).
                        if m.header.sync && m.route.operation == op::UPDATE {
                            let _ = self.ctx.send_resp(m.response(Content::string(well_known::ACK_OK)));
                        }
                        let mut up = m;
                        if up.route.operation == op::UPDATE {
                            up.header.sync = false;
                        }
                        self.send(EDGEHUB, up).await;
                    }
                }
            }
            Ok(Err(e)) => self.commit_failed(writes, &e.to_string()).await,
            Err(e) => self.commit_failed(writes, &format!("store task: {e}")).await,
        }
    }

    async fn commit_failed(&self, writes: Vec<(Message, Vec<Op>)>, why: &str) {
        tracing::error!(
            error = why,
            messages = writes.len(),
            "edge store commit failed; nothing ACKed (the cloud re-sends)"
        );
        for (m, _) in writes {
            if from_cloud(&m) {
                self.metrics.commit_failures.inc();
            } else if m.header.sync {
                let _ = self.ctx.send_resp(m.error_response(&format!("store: {why}")));
            }
        }
    }

    /// Stores one object (a cloud's answer); whether it committed.
    async fn put_one(&self, key: String, ty: &str, value: String) -> bool {
        let db = Arc::clone(&self.db);
        let op = Op::Put { key, resource_type: ty.to_owned(), value };
        matches!(tokio::task::spawn_blocking(move || db.apply(&[op])).await, Ok(Ok(_)))
    }

    /// An answer from the cloud whose asker gave up: stored (an object the
    /// edge may need offline) and ACKed.
    async fn late_answer(&self, m: Message) {
        let Some((key, ty)) = key_and_type(&m) else { return };
        // Objects the edge reads offline; node, lease and token answers are
        // for whoever asked, and need no ACK.
        if !REMOTE_TYPES.contains(&ty.as_str()) || matches!(ty.as_str(), rt::SERVICEACCOUNTTOKEN | rt::NODE | rt::LEASE)
        {
            tracing::debug!(resource = %m.route.resource, "answer from the cloud nobody waits for; dropped");
            return;
        }
        if let Some(value) = unwrap_object(&m.content)
            && self.put_one(key, &ty, value).await
        {
            self.send(EDGEHUB, m.response(Content::string(well_known::ACK_OK))).await;
        }
    }

    async fn query(self: Arc<Self>, m: Message) {
        let Ok(path) = ResourcePath::parse_wire(&m.route.resource) else {
            let _ = self.ctx.send_resp(m.error_response("bad resource"));
            return;
        };
        // One named object may be asked of the cloud; lists are always local
        // (the cloud answers only for objects this node may read).
        let remote =
            path.name.is_some() && REMOTE_TYPES.contains(&path.resource_type.as_str()) && self.connected.load(Relaxed);
        if remote && let Ok(permit) = Arc::clone(&self.remote).try_acquire_owned() {
            tokio::spawn(async move {
                let _permit = permit;
                self.remote_query(m).await;
            });
            return;
        }
        self.local_query(&m, path.name.is_some());
    }

    async fn remote_query(&self, m: Message) {
        let mut ask = m.clone();
        ask.header.msg_id = edgehive_model::new_msg_id();
        ask.header.parent_msg_id = Text::EMPTY;
        let answer = self.ctx.send_sync(EDGEHUB, ask, self.cfg.remote_query_timeout).await;
        match answer {
            Ok(r) if r.route.operation != op::ERROR => {
                self.metrics.remote_queries.inc();
                if let Some(value) = unwrap_object(&r.content)
                    && let Some((key, ty)) = key_and_type(&m)
                {
                    self.put_one(key, &ty, value).await;
                }
                let mut reply = m.response(r.content.clone());
                reply.header.resource_version = r.header.resource_version.clone();
                let _ = self.ctx.send_resp(reply);
                self.send(EDGEHUB, r.response(Content::string(well_known::ACK_OK))).await;
            }
            other => {
                self.metrics.remote_fallbacks.inc();
                let why = match other {
                    Ok(r) => r.content.as_text().map(|t| t.into_owned()).unwrap_or_default(),
                    Err(e) => e.to_string(),
                };
                tracing::debug!(resource = %m.route.resource, reason = %why, "remote query failed; answering from the store");
                self.local_query(&m, true);
            }
        }
    }

    /// Answers from the store: a JSON array of the stored values (strings),
    /// as KubeEdge does.
    fn local_query(&self, m: &Message, by_key: bool) {
        self.metrics.local_queries.inc();
        let values: Result<Vec<String>, String> = if by_key {
            match self.db.get(&m.route.resource) {
                Ok(v) => Ok(v.into_iter().collect()),
                Err(crate::DbError::Corrupt { key, reason }) => {
                    self.metrics.corrupt_rows.inc();
                    tracing::warn!(key = %key, %reason, "damaged row in the edge store; skipped");
                    Ok(Vec::new())
                }
                Err(e) => Err(e.to_string()),
            }
        } else {
            let ty =
                ResourcePath::parse_wire(&m.route.resource).map(|p| p.resource_type.to_string()).unwrap_or_default();
            self.db
                .list_type(&ty)
                .map(|l| {
                    self.metrics.corrupt_rows.inc_by(l.corrupt.len() as u64);
                    l.rows.into_iter().map(|(_, v)| v).collect()
                })
                .map_err(|e| e.to_string())
        };
        let reply = match values {
            Ok(values) => m.response(Content::from_serialize(&values).unwrap_or_default()),
            Err(e) => m.error_response(&format!("store: {e}")),
        };
        let _ = self.ctx.send_resp(reply);
    }
}

fn coalescible_status(m: &Message) -> bool {
    let Ok(p) = ResourcePath::parse_wire(&m.route.resource) else { return false };
    matches!(
        (m.route.operation.as_str(), p.resource_type.as_str()),
        (op::UPDATE, rt::NODESTATUS | rt::PODSTATUS) | (op::PATCH, rt::NODEPATCH | rt::PODPATCH)
    )
}

/// The store write of a status report: a pod's status only while its pod
/// is stored (a late report must not outlive the pod); the node's as it is.
fn status_op(m: &Message) -> Option<Op> {
    let path = ResourcePath::parse_wire(&m.route.resource).ok()?;
    let (key, ty) = (m.route.resource.to_string(), path.resource_type.to_string());
    let value = m.content.as_json().to_owned();
    match (ty.as_str(), &path.namespace, &path.name) {
        (rt::PODSTATUS | rt::PODPATCH, Some(ns), Some(name)) => {
            Some(Op::PutOwned { key, resource_type: ty, value, owner: format!("{ns}/{}/{name}", rt::POD) })
        }
        _ => Some(Op::Put { key, resource_type: ty, value }),
    }
}

/// The store changes a cloud message asks for: a pod's delete takes its
/// status rows (`podstatus`, `podpatch`) with it.
fn cloud_ops(m: &Message) -> Option<Vec<Op>> {
    let (key, ty) = key_and_type(m)?;
    if m.route.operation != op::DELETE {
        return Some(vec![Op::Put { key, resource_type: ty.to_string(), value: m.content.as_json().to_owned() }]);
    }
    // A delete names the object it removes (KubeEdge's deletes carry the
    // uid): a newer object stored under the same name stays.
    let uid = m
        .content
        .to_value()
        .pointer("/metadata/uid")
        .and_then(|u| u.as_str())
        .filter(|u| !u.is_empty())
        .map(str::to_owned);
    let mut ops = vec![Op::Delete { key: key.clone(), uid }];
    if ty == rt::POD
        && let Ok(ResourcePath { namespace: Some(ns), name: Some(name), .. }) =
            ResourcePath::parse_wire(&m.route.resource)
    {
        for status in [rt::PODSTATUS, rt::PODPATCH] {
            ops.push(Op::DeleteOrphan { key: format!("{ns}/{status}/{name}"), owner: key.clone() });
        }
    }
    Some(ops)
}
