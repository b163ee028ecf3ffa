//! DeviceTwin: the edge's devices, attributes and twins (docs/devices.md).
//!
//! - The cloud's Devices and DeviceModels arrive from MetaManager (which
//!   stored and ACKed them): each Device's properties become twins whose
//!   expected values are the desired ones; the message then goes on,
//!   unchanged, to the `dmi` module, which hands it to the device's mapper.
//!   The cloud's `membership` updates add and remove devices too.
//! - Mappers and apps speak KubeEdge's `$hw/events/...` topics, through
//!   EventBus (MQTT) or DMI (mappers' gRPC reports arrive as the same
//!   messages): twin update and get, state update, membership get. Answers
//!   go back on KubeEdge's result, document and delta topics.
//! - Changed actual values and states are reported to the cloud
//!   (`device/{id}/twin/edge_updated`, `device/{id}/state/update`), merged
//!   per device between flushes; an edgehive cloud that agreed
//!   `device-reports` takes many devices' reports in one message
//!   (`devices/reports`, docs/protocol.md). While the cloud is away they wait (one
//!   entry per device, the latest values); when it returns, every device's
//!   values are reported again, so nothing a mapper reported offline is
//!   lost and nothing stale wins.
//! - The tables (`device`, `device_attr`, `device_twin`) are written from
//!   a set of changed devices, in one transaction per flush.

pub mod db;
mod metrics;
pub mod smallmap;
pub mod twins;
pub mod types;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use edgehive_beehive::{Context, Module, ModuleContext, ModuleFuture};
use edgehive_metamanager::MetaDb;
use edgehive_model::resource_type::DEVICE_MODEL;
use edgehive_model::{Content, Message, Text, group, op, source, well_known};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use db::{DbError, TwinDb};
pub use metrics::TwinMetrics;
use twins::{Outcome, Twins};
use types::{BaseMessage, MembershipUpdate, MsgTwin};

/// The module's name and group.
pub const MODULE: &str = source::TWIN;
/// The module that hands devices to mappers.
pub const DMI: &str = "dmi";
/// The largest `$hw/events/...` payload taken (twin values are at most 512
/// bytes each; a bigger body is a mistake or an attack).
pub const MAX_PAYLOAD: usize = 256 * 1024;
/// The most devices one `devices/reports` message carries.
pub const BATCH_DEVICES: usize = 256;
/// A `devices/reports` message is closed once it holds this many bytes.
pub const BATCH_BYTES: usize = 512 * 1024;
/// The resource of a batch of reports (edgehive's `device-reports` feature).
pub const BATCH_RESOURCE: &str = "devices/reports";
/// Longest wait for room in another module's mailbox.
/// Answers and events kept for EventBus while its mailbox is full: at most
/// this many, and [`PUBLISH_QUEUE_BYTES`] of payload; past either, the
/// oldest are dropped (`devicetwin_publish_dropped`).
const PUBLISH_QUEUE: usize = 1024;
/// See [`PUBLISH_QUEUE`].
const PUBLISH_QUEUE_BYTES: usize = 4 << 20;

const SEND_DEADLINE: Duration = Duration::from_secs(5);

/// DeviceTwin's settings.
#[derive(Debug, Clone)]
pub struct TwinConfig {
    /// This node (`modules.edged.hostnameOverride`).
    pub node_name: String,
    /// How often changed devices are written and reported to the cloud.
    pub flush_interval: Duration,
    /// The most devices one node keeps; more are refused.
    pub max_devices: usize,
    /// The most report messages sent to the cloud a flush (4: 20 a second
    /// at 200 ms, of EdgeHub's 30 for the whole node). With a cloud that
    /// agreed `device-reports`, each carries up to [`BATCH_DEVICES`] devices.
    pub reports_per_flush: usize,
}

impl TwinConfig {
    /// Defaults for `node_name`: flushes every 200 ms, up to 100,000
    /// devices, at most 4 report messages a flush.
    pub fn new(node_name: impl Into<String>) -> TwinConfig {
        TwinConfig {
            node_name: node_name.into(),
            flush_interval: Duration::from_millis(200),
            max_devices: 100_000,
            reports_per_flush: 4,
        }
    }
}

/// The DeviceTwin beehive module (name and group `twin`).
#[derive(Debug)]
pub struct DeviceTwin {
    cfg: TwinConfig,
    db: Arc<TwinDb>,
    meta: Arc<MetaDb>,
    metrics: Arc<TwinMetrics>,
    link: Option<watch::Receiver<Option<Text>>>,
}

impl DeviceTwin {
    /// DeviceTwin over the edge's database at `db_path` (its device
    /// tables) and MetaManager's store (the cloud's Devices).
    pub fn new(cfg: TwinConfig, db_path: &std::path::Path, meta: Arc<MetaDb>) -> Result<DeviceTwin, DbError> {
        let db = Arc::new(TwinDb::open(db_path)?);
        Ok(DeviceTwin { cfg, db, meta, metrics: Arc::default(), link: None })
    }

    /// Follows the link's state from EdgeHub (`EdgeHub::link_state`:
    /// `Some(features agreed)` while connected) besides its
    /// `node/connection` notices, which can be dropped when this module's
    /// mailbox stays full; reports wait for a connected link.
    pub fn with_link_state(mut self, link: watch::Receiver<Option<Text>>) -> DeviceTwin {
        self.link = Some(link);
        self
    }

    /// Its metrics.
    pub fn metrics(&self) -> &Arc<TwinMetrics> {
        &self.metrics
    }

    /// Its tables.
    pub fn db(&self) -> &Arc<TwinDb> {
        &self.db
    }
}

impl Module for DeviceTwin {
    fn name(&self) -> &str {
        MODULE
    }

    fn group(&self) -> &str {
        group::TWIN
    }

    fn mailbox_capacity(&self) -> Option<usize> {
        Some(4096)
    }

    fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            let mut state = State::start(&self, ctx.context().clone()).await;
            let mut link = self.link.clone();
            if let Some(l) = &mut link {
                let now = l.borrow_and_update().clone();
                state.set_link(now.as_deref()).await;
            }
            let mut tick = tokio::time::interval(self.cfg.flush_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let link_changed = async {
                    match &mut link {
                        Some(l) => l.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = cancel.cancelled() => break,
                    changed = link_changed => match (changed, &mut link) {
                        (true, Some(l)) => {
                            let now = l.borrow_and_update().clone();
                            state.set_link(now.as_deref()).await;
                        }
                        // EdgeHub is gone: the notices still say.
                        _ => link = None,
                    },
                    _ = tick.tick() => state.flush().await,
                    m = ctx.receive() => match m {
                        Some(m) => state.on_message(m).await,
                        None => break,
                    },
                }
            }
            state.persist().await;
            Ok(())
        })
    }
}

/// The running module's state.
struct State {
    node: String,
    max_devices: usize,
    ctx: Context,
    /// Whether EventBus and DMI run on this edge (either may be off).
    has_eventbus: bool,
    has_dmi: bool,
    db: Arc<TwinDb>,
    meta: Arc<MetaDb>,
    metrics: Arc<TwinMetrics>,
    twins: Twins,
    models: HashMap<(String, String), Value>,
    connected: bool,
    /// The cloud takes `devices/reports` batches.
    batched: bool,
    dirty: HashSet<String>,
    removed: HashSet<String>,
    /// Twins to report, per device, merged.
    reports: BTreeMap<String, BTreeMap<String, MsgTwin>>,
    /// The latest state report per device.
    states: BTreeMap<String, String>,
    /// Answers and events for EventBus that its mailbox had no room for.
    to_publish: VecDeque<(Message, usize)>,
    /// Their payloads' bytes (each kept beside its message).
    to_publish_bytes: usize,
    /// Messages sent to the cloud a flush, at most.
    reports_per_flush: usize,
    /// The last device reported: the next flush starts after it.
    report_cursor: Option<String>,
}

fn decode_topic(resource: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(resource)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(resource))
        .ok()?;
    String::from_utf8(bytes).ok()
}

impl State {
    async fn start(m: &DeviceTwin, ctx: Context) -> State {
        let db = Arc::clone(&m.db);
        let loaded = match tokio::task::spawn_blocking(move || db.load()).await {
            Ok(Ok(d)) => d,
            Ok(Err(e)) => {
                tracing::error!(module = MODULE, node = %m.cfg.node_name, error = %e, "device tables do not read; starting from the cloud's Devices");
                BTreeMap::new()
            }
            Err(e) => {
                tracing::error!(module = MODULE, error = %e, "device tables not read");
                BTreeMap::new()
            }
        };
        let stats = ctx.stats();
        let runs = |name: &str| {
            stats.modules.iter().any(|s| s.name == name && s.state != edgehive_beehive::ModuleState::Disabled)
        };
        let (has_eventbus, has_dmi) = (runs(source::EVENTBUS), runs(DMI));
        let mut s = State {
            node: m.cfg.node_name.clone(),
            max_devices: m.cfg.max_devices,
            has_eventbus,
            has_dmi,
            ctx,
            db: Arc::clone(&m.db),
            meta: Arc::clone(&m.meta),
            metrics: Arc::clone(&m.metrics),
            twins: Twins::new(&m.cfg.node_name, loaded),
            models: HashMap::new(),
            connected: false,
            batched: false,
            dirty: HashSet::new(),
            removed: HashSet::new(),
            reports: BTreeMap::new(),
            states: BTreeMap::new(),
            to_publish: VecDeque::new(),
            to_publish_bytes: 0,
            reports_per_flush: m.cfg.reports_per_flush.max(1),
            report_cursor: None,
        };
        s.twins.set_answering(has_eventbus);
        // The cloud's Devices as MetaManager stored them: what was taken
        // but not applied before a crash is applied now.
        s.resync(false).await;
        s.metrics.devices.set(s.twins.len() as i64);
        tracing::info!(module = MODULE, node = %s.node, devices = s.twins.len(), "device twin ready");
        s
    }

    /// Reads the stored Devices and models again and applies them: at
    /// start, after MetaManager says DeviceTwin missed changes (its mailbox
    /// was full), and when a model changes (a Device's twins take their
    /// types from it). With `prune`, devices the store no longer holds go.
    async fn resync(&mut self, prune: bool) {
        let meta = Arc::clone(&self.meta);
        let listed = tokio::task::spawn_blocking(move || {
            let models = meta.list_type(DEVICE_MODEL)?;
            let devices = meta.list_type(edgehive_model::resource_type::DEVICE)?;
            Ok::<_, edgehive_metamanager::DbError>((models, devices))
        })
        .await;
        let (models, devices) = match listed {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => {
                tracing::warn!(module = MODULE, error = %e, "the cloud's Devices not read from the edge store");
                return;
            }
            Err(e) => {
                tracing::warn!(module = MODULE, error = %e, "the cloud's Devices not read from the edge store");
                return;
            }
        };

        for (key, value) in models.rows {
            if let (Some(k), Ok(v)) = (model_key(&key), serde_json::from_str(&value)) {
                self.models.insert(k, v);
            }
        }
        let mut stored = HashSet::new();
        for (key, value) in devices.rows {
            match serde_json::from_str::<Value>(&value) {
                Ok(v) => {
                    if let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) {
                        stored.insert(name.to_owned());
                    }
                    let out = self.apply_device(&key, &v);
                    self.take(out, true).await;
                }
                Err(e) => tracing::warn!(module = MODULE, key, error = %e, "stored Device does not parse; skipped"),
            }
        }
        if prune {
            for id in self.twins.ids().into_iter().filter(|id| !stored.contains(id)) {
                let out = self.twins.remove_device(&id);
                self.take(out, true).await;
            }
        }
    }

    fn apply_device(&mut self, key: &str, device: &Value) -> Outcome {
        let ns = key.split('/').next().unwrap_or_default().to_owned();
        let name = device.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if self.twins.get(name).is_none() && self.twins.len() >= self.max_devices {
            return Outcome {
                refused: Some(format!("node keeps {} devices already; {name:?} refused", self.max_devices)),
                ..Outcome::default()
            };
        }
        let model = device
            .pointer("/spec/deviceModelRef/name")
            .and_then(Value::as_str)
            .and_then(|m| self.models.get(&(ns, m.to_owned())));
        self.twins.apply_device(device, model)
    }

    /// The link to the cloud is up (`Some(features agreed)`) or down. Told
    /// twice, by EdgeHub's notice and its state: the second changes nothing.
    async fn set_link(&mut self, agreed: Option<&str>) {
        let up = agreed.is_some();
        if up && !self.connected {
            // Whatever the cloud missed while away: report it all again.
            let out = self.twins.all_reports();
            self.take(out, false).await;
        }
        self.connected = up;
        self.batched = agreed.is_some_and(|a| well_known::connection_has(a, well_known::DEVICE_REPORTS_AGREED));
    }

    async fn on_message(&mut self, m: Message) {
        let src = m.route.source.as_str();
        if src == source::EDGEHUB && m.route.resource == well_known::NODE_CONNECTION {
            let up = m.content.as_text().as_deref() == Some(well_known::CLOUD_CONNECTED);
            self.set_link(up.then_some(m.header.message_type.as_str())).await;
            return;
        }
        if src == source::BUS || src == source::EVENTBUS || src == DMI {
            let Some(topic) = decode_topic(&m.route.resource) else {
                self.refused(&m, "resource is not a base64url topic");
                return;
            };
            let payload = m.content.as_text().map(|t| t.into_owned()).unwrap_or_else(|| m.content.as_json().to_owned());
            if payload.len() > MAX_PAYLOAD {
                self.refused(&m, &format!("payload of {} bytes on {topic} is over {MAX_PAYLOAD}", payload.len()));
                return;
            }
            self.metrics.requests.inc();
            let out = self.twins.on_topic(&topic, &payload);
            if let Some(why) = &out.refused {
                self.metrics.refused.inc();
                tracing::warn!(module = MODULE, node = %self.node, topic, reason = %why, "device request refused");
            }
            self.take(out, true).await;
            return;
        }
        if src == source::METAMANAGER && m.route.resource == "devicelist" {
            self.resync(true).await;
            return;
        }
        // From the cloud: through MetaManager (objects) or EdgeHub (membership).
        let resource = m.route.resource.to_string();
        let parts: Vec<&str> = resource.split('/').collect();
        match parts.as_slice() {
            [ns, ty @ ("device" | "devicemodel"), name] => {
                let (ns, ty, name) = ((*ns).to_owned(), *ty, (*name).to_owned());
                self.object(&m, &ns, ty, &name).await;
                self.forward_to_dmi(m).await;
            }
            _ if m.route.group == group::TWIN && resource.contains("membership") && !resource.contains("detail") => {
                match m.content.decode::<MembershipUpdate>() {
                    Ok(u) => {
                        let out = self.twins.membership(&u);
                        self.take(out, true).await;
                    }
                    Err(e) => self.refused(&m, &format!("membership update does not parse: {e}")),
                }
            }
            _ => {
                tracing::debug!(module = MODULE, source = src, resource, operation = %m.route.operation, "message not for DeviceTwin")
            }
        }
    }

    async fn object(&mut self, m: &Message, ns: &str, ty: &str, name: &str) {
        let deleting = m.route.operation == op::DELETE;
        if ty == DEVICE_MODEL {
            let key = (ns.to_owned(), name.to_owned());
            if deleting {
                self.models.remove(&key);
            } else {
                // Stored already: the devices of this model take its types.
                self.models.insert(key, m.content.to_value());
                self.resync(false).await;
            }
            return;
        }
        let out = if deleting {
            self.twins.remove_device(name)
        } else {
            let v = m.content.to_value();
            if v.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                self.refused(m, "the Device's name is not the one its resource names");
                return;
            }
            self.apply_device(&format!("{ns}/device/{name}"), &v)
        };
        if let Some(why) = &out.refused {
            self.metrics.refused.inc();
            tracing::warn!(module = MODULE, node = %self.node, device = name, reason = %why, "device refused");
        }
        self.take(out, true).await;
    }

    async fn forward_to_dmi(&self, m: Message) {
        if !self.has_dmi {
            return;
        }
        match tokio::time::timeout(SEND_DEADLINE, self.ctx.send(DMI, m)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.kind == edgehive_beehive::SendErrorKind::UnknownTarget => {}
            Ok(Err(e)) => tracing::warn!(module = MODULE, error = %e, "dmi did not take a device change"),
            Err(_) => tracing::warn!(
                module = MODULE,
                "dmi did not take a device change in time; it reads the store when it restarts"
            ),
        }
    }

    /// Hands EventBus the queued answers and events, in order, while its
    /// mailbox has room (never waiting: EventBus also sends here, and two
    /// modules waiting on each other's full mailboxes would stop both); the
    /// rest wait for the next flush.
    fn publish_queued(&mut self) {
        while let Some((msg, len)) = self.to_publish.pop_front() {
            self.to_publish_bytes -= len;
            match self.ctx.try_send(source::EVENTBUS, msg) {
                Ok(()) => {
                    self.metrics.published.inc();
                }
                Err(e) if e.kind == edgehive_beehive::SendErrorKind::Full => {
                    self.to_publish_bytes += len;
                    self.to_publish.push_front((e.into_message(), len));
                    break;
                }
                Err(e) if e.kind == edgehive_beehive::SendErrorKind::UnknownTarget => {}
                Err(e) => {
                    self.metrics.publish_dropped.inc();
                    tracing::debug!(module = MODULE, error = %e, "eventbus did not take a publish");
                }
            }
        }
    }

    fn refused(&self, m: &Message, why: &str) {
        self.metrics.refused.inc();
        tracing::warn!(module = MODULE, node = %self.node, source = %m.route.source, resource = %m.route.resource, reason = why, "message refused");
    }

    /// Carries out an outcome: publishes now, the rest at the next flush.
    async fn take(&mut self, out: Outcome, publish: bool) {
        if publish && self.has_eventbus {
            for (topic, payload) in out.publish {
                self.to_publish_bytes += payload.len();
                let msg = Message::new()
                    .with_route(MODULE, group::USER, topic, op::PUBLISH)
                    .with_content(Content::string(&payload));
                self.to_publish.push_back((msg, payload.len()));
                while self.to_publish.len() > PUBLISH_QUEUE || self.to_publish_bytes > PUBLISH_QUEUE_BYTES {
                    // EventBus has taken nothing for a while: the oldest go.
                    let Some((_, len)) = self.to_publish.pop_front() else { break };
                    self.to_publish_bytes -= len;
                    self.metrics.publish_dropped.inc();
                }
            }
            self.publish_queued();
        }
        for (id, twins) in out.report {
            self.reports.entry(id).or_default().extend(twins);
        }
        for (id, payload) in out.state {
            self.states.insert(id, payload);
        }
        for id in out.dirty {
            self.removed.remove(&id);
            self.dirty.insert(id);
        }
        for id in out.removed {
            self.dirty.remove(&id);
            self.reports.remove(&id);
            self.states.remove(&id);
            self.removed.insert(id);
        }
        self.metrics.devices.set(self.twins.len() as i64);
        self.metrics.pending_reports.set((self.reports.len() + self.states.len()) as i64);
    }

    async fn flush(&mut self) {
        self.publish_queued();
        self.persist().await;
        if self.connected {
            self.report().await;
        }
    }

    /// Writes changed devices in one transaction.
    async fn persist(&mut self) {
        if self.dirty.is_empty() && self.removed.is_empty() {
            return;
        }
        let mut writes: Vec<db::Write> = self.removed.iter().cloned().map(db::Write::Remove).collect();
        for id in &self.dirty {
            if let Some(d) = self.twins.get(id) {
                writes.push(db::Write::Put(d.clone()));
            }
        }
        let db = Arc::clone(&self.db);
        let n = writes.len();
        match tokio::task::spawn_blocking(move || db.apply(&writes)).await {
            Ok(Ok(())) => {
                self.metrics.flushes.inc();
                self.dirty.clear();
                self.removed.clear();
            }
            Ok(Err(e)) => {
                self.metrics.flush_failures.inc();
                tracing::error!(module = MODULE, node = %self.node, devices = n, error = %e, "device tables not written; tried again at the next flush");
            }
            Err(e) => tracing::error!(module = MODULE, error = %e, "device table write task failed"),
        }
    }

    /// Sends what waits for the cloud, at most `reports_per_flush` messages
    /// a flush, taking devices in turn from where the last flush stopped:
    /// EdgeHub sends 30 messages a second (KubeEdge's `messageQPS`) for the
    /// whole node, and a flood of reports would starve the rest (status,
    /// leases). Nothing is lost by waiting: a device's reports merge, the
    /// latest value wins. What EdgeHub does not take waits for the next flush.
    async fn report(&mut self) {
        let mut ids: Vec<String> = self.reports.keys().chain(self.states.keys()).cloned().collect();
        ids.sort();
        ids.dedup();
        // In turn: the devices after the last one sent first.
        let split = self.report_cursor.as_ref().map_or(0, |c| ids.partition_point(|id| id <= c));
        ids.rotate_left(split);
        if self.batched {
            self.report_batches(ids).await;
        } else {
            self.report_each(ids).await;
        }
        self.metrics.pending_reports.set((self.reports.len() + self.states.len()) as i64);
    }

    /// KubeEdge's form: one message per twin report and per state report.
    async fn report_each(&mut self, ids: Vec<String>) {
        let mut budget = self.reports_per_flush;
        for id in ids {
            if budget == 0 {
                break;
            }
            if let Some(twins) = self.reports.remove(&id) {
                let msg = Message::new()
                    .with_route(MODULE, group::RESOURCE, format!("device/{id}/twin/edge_updated"), op::UPDATE)
                    .with_content(Content::from_serialize(&twin_update(&twins)).unwrap_or_default());
                budget -= 1;
                if !self.upstream(msg).await {
                    // EdgeHub did not take it: it and the rest wait.
                    self.reports.insert(id, twins);
                    break;
                }
                self.metrics.reports_sent.inc();
            }
            if budget > 0
                && let Some(payload) = self.states.remove(&id)
            {
                let msg = Message::new()
                    .with_route(MODULE, group::RESOURCE, format!("device/{id}/state/update"), op::UPDATE)
                    .with_content(Content::string(&payload));
                budget -= 1;
                if !self.upstream(msg).await {
                    self.states.insert(id, payload);
                    break;
                }
                self.metrics.reports_sent.inc();
            }
            if self.states.contains_key(&id) {
                // Its state did not fit this flush: the next starts with it.
                break;
            }
            self.report_cursor = Some(id);
        }
    }

    /// edgehive's form: `{"devices": [{"id", "twin"?, "state"?}, ...]}`,
    /// each entry holding what the two KubeEdge messages would.
    async fn report_batches(&mut self, ids: Vec<String>) {
        let mut ids = ids.into_iter().peekable();
        for _ in 0..self.reports_per_flush {
            if ids.peek().is_none() {
                break;
            }
            let mut body = String::from("{\"devices\":[");
            let mut taken: Vec<Taken> = Vec::new();
            while taken.len() < BATCH_DEVICES && body.len() < BATCH_BYTES {
                let Some(id) = ids.next() else { break };
                let twins = self.reports.remove(&id);
                let state = self.states.remove(&id);
                let mut entry = serde_json::Map::new();
                entry.insert("id".into(), Value::String(id.clone()));
                if let Some(t) = &twins {
                    entry.insert("twin".into(), serde_json::to_value(twin_update(t)).unwrap_or_default());
                }
                if let Some(p) = &state {
                    // The mapper's body, checked as JSON when it came.
                    entry.insert("state".into(), serde_json::from_str(p).unwrap_or_else(|_| Value::String(p.clone())));
                }
                if !taken.is_empty() {
                    body.push(',');
                }
                body.push_str(&Value::Object(entry).to_string());
                taken.push((id, twins, state));
            }
            body.push_str("]}");
            let sent = match Content::from_json(body) {
                Ok(content) => {
                    let msg = Message::new()
                        .with_route(MODULE, group::RESOURCE, BATCH_RESOURCE, op::UPDATE)
                        .with_content(content);
                    self.upstream(msg).await
                }
                Err(e) => {
                    tracing::warn!(module = MODULE, error = %e, "report batch not built; kept");
                    false
                }
            };
            if !sent {
                // Not taken (EdgeHub full or gone): these and the rest wait.
                self.restore(taken);
                break;
            }
            self.metrics.reports_sent.inc_by(taken.len() as u64);
            self.metrics.batches_sent.inc();
            if let Some((id, _, _)) = taken.pop() {
                self.report_cursor = Some(id);
            }
        }
    }

    /// Puts back the reports taken for a batch that was not sent.
    fn restore(&mut self, taken: Vec<Taken>) {
        for (id, twins, state) in taken {
            if let Some(t) = twins {
                self.reports.insert(id.clone(), t);
            }
            if let Some(p) = state {
                self.states.insert(id, p);
            }
        }
    }

    async fn upstream(&self, msg: Message) -> bool {
        match tokio::time::timeout(SEND_DEADLINE, self.ctx.send(source::WEBSOCKET, msg)).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!(module = MODULE, error = %e, "edgehub did not take a report; kept");
                false
            }
            Err(_) => false,
        }
    }
}

/// A device's reports taken into a batch: its id, twins and state.
type Taken = (String, Option<BTreeMap<String, MsgTwin>>, Option<String>);

/// The body of a `device/{id}/twin/edge_updated` report.
fn twin_update(twins: &BTreeMap<String, MsgTwin>) -> Value {
    serde_json::json!({
        "event_id": edgehive_model::new_msg_id().as_str(),
        "timestamp": BaseMessage::now("").timestamp,
        "twin": twins,
    })
}

/// `{ns}/devicemodel/{name}` → (ns, name).
fn model_key(key: &str) -> Option<(String, String)> {
    match key.split('/').collect::<Vec<_>>().as_slice() {
        [ns, DEVICE_MODEL, name] => Some(((*ns).to_owned(), (*name).to_owned())),
        _ => None,
    }
}
