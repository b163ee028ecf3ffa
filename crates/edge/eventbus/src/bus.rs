//! The beehive module `eventbus` (group `bus`): starts the brokers the mode
//! asks for, hands what arrives over MQTT to the bus, and carries out what
//! the bus asks (KubeEdge `edge/pkg/eventbus/eventbus.go`).
//!
//! The module's loop never waits for a broker: publishes and subscriptions
//! are queued (bounded) and the MQTT tasks do the I/O. It waits only for
//! the store (a subscription is written before the next message is taken,
//! bounded by SQLite's busy timeout).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use edgehive_beehive::{Context, Module, ModuleContext, ModuleFuture};
use edgehive_model::constants::group;
use edgehive_model::{Message, now_millis};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::broker::{self, Broker, short};
use crate::config::{BrokerAddr, EventBusConfig, default_client_id};
use crate::external::{self, External};
use crate::metrics::EventBusMetrics;
use crate::store::TopicStore;
use crate::topics::{self, Action, MAX_STORED_TOPICS, Refused, SUB_TOPICS, Upstream, filter_matches};

/// How long an MQTT message waits for room in a bus module's mailbox
/// before it is dropped (counted as `undeliverable`). Meanwhile that
/// client reads nothing more, so the broker holds its messages.
const DELIVERY_DEADLINE: Duration = Duration::from_secs(1);
/// How long the module waits for its MQTT tasks to end at shutdown.
const STOP_DEADLINE: Duration = Duration::from_secs(5);

/// The EventBus module: MQTT on one side, beehive on the other.
///
/// ```no_run
/// use std::sync::Arc;
/// use edgehive_eventbus::{EventBus, EventBusConfig};
/// let cfg = EventBusConfig::default();
/// cfg.validate().expect("modules.eventBus");
/// let bus = Arc::new(EventBus::new(cfg, "/var/lib/kubeedge/edgecore.db", "edge-1"));
/// let metrics = bus.metrics(); // register them in the process's registry
/// let mut hive = edgehive_beehive::Beehive::builder();
/// hive.register(bus).unwrap();
/// # drop(metrics);
/// ```
#[derive(Debug)]
pub struct EventBus {
    cfg: EventBusConfig,
    db_path: PathBuf,
    node_name: Arc<str>,
    sub_client_id: String,
    pub_client_id: String,
    metrics: Arc<EventBusMetrics>,
}

impl EventBus {
    /// An EventBus for node `node_name`, keeping its subscriptions in the
    /// edge database at `db_path` (the file MetaManager uses). Nothing is
    /// opened or connected until the module runs. Empty client ids are
    /// made as KubeEdge makes them, once, here.
    pub fn new(cfg: EventBusConfig, db_path: impl Into<PathBuf>, node_name: impl Into<String>) -> EventBus {
        let now = now_millis();
        let pick = |configured: &str, prefix: &str| {
            if configured.is_empty() { default_client_id(prefix, now) } else { configured.to_owned() }
        };
        EventBus {
            sub_client_id: pick(&cfg.mqtt_sub_client_id, "hub-client-sub-"),
            pub_client_id: pick(&cfg.mqtt_pub_client_id, "hub-client-pub-"),
            cfg,
            db_path: db_path.into(),
            node_name: Arc::from(node_name.into()),
            metrics: Arc::default(),
        }
    }

    /// The module's metrics (register them with [`EventBusMetrics::register`]).
    pub fn metrics(&self) -> Arc<EventBusMetrics> {
        self.metrics.clone()
    }

    /// The client ids used with the external broker: (subscriber, publisher).
    pub fn client_ids(&self) -> (&str, &str) {
        (&self.sub_client_id, &self.pub_client_id)
    }

    fn refuse(&self, m: &Message, why: &Refused) {
        self.metrics.dropped(why.reason()).inc();
        tracing::warn!(
            node = %self.node_name,
            module = "eventbus",
            msg_id = %m.header.msg_id,
            source = ?short(&m.route.source),
            operation = ?short(&m.route.operation),
            resource = ?short(&m.route.resource),
            reason = %why,
            "message from the bus dropped"
        );
    }

    async fn handle(&self, m: &Message, store: &Arc<TopicStore>, subs: &Subscriptions, links: &Links) {
        let action = match topics::downstream(m, &self.node_name) {
            Ok(a) => a,
            Err(why) => return self.refuse(m, &why),
        };
        match action {
            Action::Ignore(why) => {
                tracing::debug!(node = %self.node_name, module = "eventbus", operation = ?short(&m.route.operation), why, "message ignored");
            }
            Action::Subscribe(filter) => {
                if !subs.contains(&filter) && subs.stored_len() >= MAX_STORED_TOPICS {
                    return self.refuse(m, &Refused::TooManyTopics);
                }
                if subs.insert(&filter) {
                    self.metrics.subscriptions.set(subs.len() as i64);
                }
                if let Some(e) = &links.external {
                    e.subscribe(&filter);
                }
                tracing::info!(node = %self.node_name, module = "eventbus", filter = ?short(&filter), "subscribed");
                self.persist(store, filter, true).await;
            }
            Action::Unsubscribe(filter) => {
                if SUB_TOPICS.contains(&filter.as_str()) {
                    // KubeEdge unsubscribes on the broker and subscribes again
                    // at the next connect; DeviceTwin needs these, so they stay.
                    tracing::info!(node = %self.node_name, module = "eventbus", filter = ?short(&filter), "one of KubeEdge's fixed topics stays subscribed");
                } else if subs.remove(&filter) {
                    self.metrics.subscriptions.set(subs.len() as i64);
                    if let Some(e) = &links.external
                        && !e.unsubscribe(&filter)
                    {
                        tracing::warn!(node = %self.node_name, module = "eventbus", filter = ?short(&filter), "the subscriber's queue is full; the filter goes at the next reconnect");
                    }
                    tracing::info!(node = %self.node_name, module = "eventbus", filter = ?short(&filter), "unsubscribed");
                }
                self.persist(store, filter, false).await;
            }
            Action::Publish { topic, payload } => {
                if let Some(e) = &links.external
                    && !e.publish(&topic, payload.clone())
                {
                    self.metrics.dropped_queue_full.inc();
                    tracing::warn!(node = %self.node_name, module = "eventbus", topic = ?short(&topic), "publish dropped: the queue to the external MQTT broker is full (mqttSessionQueueSize)");
                }
                if let Some(b) = &links.internal {
                    b.publish(&topic, payload, self.cfg.mqtt_qos, self.cfg.mqtt_retain);
                    self.metrics.published_internal.inc();
                }
            }
        }
    }

    /// Writes (or deletes) a stored topic on the blocking pool; a failure is
    /// logged and counted (the subscription holds until the next restart).
    async fn persist(&self, store: &Arc<TopicStore>, filter: String, insert: bool) {
        let s = store.clone();
        let f = filter.clone();
        let done = tokio::task::spawn_blocking(move || if insert { s.insert(&f) } else { s.delete(&f) }).await;
        let err = match done {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        self.metrics.store_failures.inc();
        tracing::error!(node = %self.node_name, module = "eventbus", filter = ?short(&filter), error = %err, "could not update sub_topics");
    }

    async fn start_internal(
        &self,
        subs: &Arc<Subscriptions>,
        deliver: &Deliver,
        cancel: &CancellationToken,
        tasks: &mut Vec<JoinHandle<()>>,
    ) -> Result<Broker, edgehive_beehive::ModuleError> {
        let url = &self.cfg.mqtt_server_internal;
        let addr = BrokerAddr::parse("mqttServerInternal", url)?.socket_addr("mqttServerInternal", url)?;
        let queue = self.cfg.queue_size();
        let (tx, rx) = mpsc::channel(queue);
        let watcher = Arc::new(InternalWatcher { subs: subs.clone(), tx, metrics: self.metrics.clone() });
        let (b, accept) = Broker::start(addr, queue, &self.node_name, watcher, cancel.clone())
            .await
            .map_err(|e| format!("modules.eventBus.mqttServerInternal: listen on {addr}: {e}"))?;
        tracing::info!(node = %self.node_name, module = "eventbus", addr = %b.addr, "internal MQTT broker listening");
        tasks.push(accept);
        tasks.push(tokio::spawn(forward_internal(rx, deliver.clone(), cancel.clone())));
        Ok(b)
    }
}

/// The brokers of this run.
struct Links {
    external: Option<External>,
    internal: Option<Broker>,
}

impl Module for EventBus {
    fn name(&self) -> &str {
        "eventbus"
    }

    fn group(&self) -> &str {
        group::BUS
    }

    fn enabled(&self) -> bool {
        self.cfg.enable
    }

    fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            self.cfg.validate()?;
            let path = self.db_path.clone();
            let store = Arc::new(tokio::task::spawn_blocking(move || TopicStore::open(&path)).await??);
            let s = store.clone();
            let loaded = tokio::task::spawn_blocking(move || s.load()).await??;
            for bad in &loaded.skipped {
                self.metrics.store_failures.inc();
                tracing::warn!(node = %self.node_name, module = "eventbus", topic = ?short(bad), "a stored topic is not a valid MQTT filter; not subscribed");
            }
            let subs = Arc::new(Subscriptions::new(loaded.topics));
            self.metrics.subscriptions.set(subs.len() as i64);

            // The MQTT tasks stop with the module, also when it panics.
            let tasks_cancel = cancel.child_token();
            let _stop = tasks_cancel.clone().drop_guard();
            let deliver =
                Deliver { ctx: ctx.context().clone(), metrics: self.metrics.clone(), node: self.node_name.clone() };
            let mut tasks = Vec::new();
            let mode = self.cfg.mqtt_mode;
            let external = if mode.uses_external() {
                let (e, t) = External::start(external::Start {
                    cfg: &self.cfg,
                    sub_client_id: &self.sub_client_id,
                    pub_client_id: &self.pub_client_id,
                    subscriptions: subs.clone(),
                    deliver: deliver.clone(),
                    metrics: self.metrics.clone(),
                    cancel: tasks_cancel.clone(),
                })?;
                tasks.extend(t);
                Some(e)
            } else {
                None
            };
            let internal = if mode.uses_internal() {
                Some(self.start_internal(&subs, &deliver, &tasks_cancel, &mut tasks).await?)
            } else {
                None
            };
            tracing::info!(node = %self.node_name, module = "eventbus", mqtt_mode = mode.code(), filters = subs.len(), "EventBus started");
            let links = Links { external, internal };
            while let Some(m) = ctx.receive_until(&cancel).await {
                self.handle(&m, &store, &subs, &links).await;
            }
            tasks_cancel.cancel();
            for t in tasks {
                let _ = tokio::time::timeout(STOP_DEADLINE, t).await;
            }
            Ok(())
        })
    }
}

/// The filters the EventBus subscribes: KubeEdge's six and the stored ones.
#[derive(Debug)]
pub(crate) struct Subscriptions {
    set: Mutex<BTreeSet<String>>,
    /// Set when a subscribe could not be queued: the subscriber subscribes
    /// everything again after its next event.
    resync: AtomicBool,
}

impl Subscriptions {
    fn new(stored: Vec<String>) -> Subscriptions {
        let set = SUB_TOPICS.iter().map(|t| (*t).to_owned()).chain(stored).collect();
        Subscriptions { set: Mutex::new(set), resync: AtomicBool::new(false) }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeSet<String>> {
        self.set.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn all(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn stored_len(&self) -> usize {
        self.lock().iter().filter(|t| !SUB_TOPICS.contains(&t.as_str())).count()
    }

    fn contains(&self, filter: &str) -> bool {
        self.lock().contains(filter)
    }

    fn insert(&self, filter: &str) -> bool {
        self.lock().insert(filter.to_owned())
    }

    fn remove(&self, filter: &str) -> bool {
        self.lock().remove(filter)
    }

    /// True when some filter matches `topic` (the embedded broker's test,
    /// KubeEdge's `tree.Match`).
    fn wants(&self, topic: &str) -> bool {
        self.lock().iter().any(|f| filter_matches(f, topic))
    }

    pub(crate) fn request_resync(&self) {
        self.resync.store(true, Ordering::Release);
    }

    pub(crate) fn take_resync(&self) -> bool {
        self.resync.swap(false, Ordering::AcqRel)
    }
}

/// Hands MQTT messages to the bus (KubeEdge `NewMessageMux().Dispatch`).
#[derive(Clone)]
pub(crate) struct Deliver {
    ctx: Context,
    metrics: Arc<EventBusMetrics>,
    node: Arc<str>,
}

impl Deliver {
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// Routes one MQTT message: twin topics to group `twin`, others to
    /// group `hub`. Bad payloads are dropped with a log line and a count.
    pub(crate) async fn deliver(&self, broker: &'static str, topic: &str, payload: &[u8]) {
        self.metrics.received.inc();
        match topics::incoming(topic, payload) {
            Ok(Upstream::Twin(m)) => self.send(group::TWIN, m, &self.metrics.to_twin).await,
            Ok(Upstream::Cloud(m)) => self.send(group::HUB, m, &self.metrics.to_cloud).await,
            Err(why) => {
                self.metrics.dropped(why.reason()).inc();
                tracing::warn!(node = %self.node, module = "eventbus", broker, topic = ?short(topic), bytes = payload.len(), reason = %why, "MQTT message dropped");
            }
        }
    }

    async fn send(&self, target: &'static str, m: Message, delivered: &Counter) {
        let why = match tokio::time::timeout(DELIVERY_DEADLINE, self.ctx.send_to_group(target, m)).await {
            Ok(Ok(_)) => {
                delivered.inc();
                return;
            }
            Ok(Err(e)) => e.kind.to_string(),
            Err(_) => format!("no room within {DELIVERY_DEADLINE:?}"),
        };
        self.metrics.dropped_undeliverable.inc();
        tracing::warn!(node = %self.node, module = "eventbus", group = target, reason = %why, "MQTT message not delivered on the bus");
    }
}

impl std::fmt::Debug for Deliver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliver").field("node", &self.node).finish_non_exhaustive()
    }
}

/// The EventBus's view of the embedded broker.
struct InternalWatcher {
    subs: Arc<Subscriptions>,
    tx: mpsc::Sender<(String, Bytes)>,
    metrics: Arc<EventBusMetrics>,
}

impl broker::Watcher for InternalWatcher {
    fn wants(&self, topic: &str) -> bool {
        self.subs.wants(topic)
    }

    fn take(&self, topic: &str, payload: &Bytes) -> bool {
        if self.tx.try_send((topic.to_owned(), payload.clone())).is_ok() {
            return true;
        }
        self.metrics.dropped_queue_full.inc();
        false
    }

    fn client_queue_full(&self) {
        self.metrics.dropped_client_queue_full.inc();
    }

    fn retained_over_budget(&self) {
        self.metrics.dropped_retained_budget.inc();
    }
}

/// Hands what the embedded broker saw to the bus, one at a time.
async fn forward_internal(mut rx: mpsc::Receiver<(String, Bytes)>, deliver: Deliver, cancel: CancellationToken) {
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return,
            n = rx.recv() => n,
        };
        let Some((topic, payload)) = next else { return };
        deliver.deliver("internal", &topic, &payload).await;
    }
}
