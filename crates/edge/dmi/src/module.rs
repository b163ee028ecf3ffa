//! The `dmi` beehive module: serves DeviceManagerService on the DMI socket
//! and forwards the cloud's devices and models (from module `twin`) to the
//! mapper of their protocol (KubeEdge `dtmanager/dmiworker.go`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use edgehive_beehive::{Module, ModuleContext, ModuleFuture};
use edgehive_grpc::{Channel, code};
use edgehive_metamanager::MetaDb;
use edgehive_model::Message;
use edgehive_model::constants::op;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::{self, method};
use crate::convert::{self, device_protocol};
use crate::pending::{MapperCall, ObjectKey, ProtocolQueue};
use crate::state::{DmiCache, MapperRecord, TokenBucket};

/// The module's name.
pub const MODULE: &str = "dmi";
/// The module's group.
pub const GROUP: &str = "dmi";
/// Resource type of a registered mapper in the meta table (KubeEdge
/// `ResourceTypeDeviceMapper`).
pub const RESOURCE_TYPE_DEVICEMAPPER: &str = "devicemapper";
/// Resource types of the cloud's objects in the meta table.
pub const RESOURCE_TYPE_DEVICE: &str = "device";
/// See [`RESOURCE_TYPE_DEVICE`].
pub const RESOURCE_TYPE_DEVICEMODEL: &str = "devicemodel";

/// The DMI module's settings (`modules.deviceTwin.dmiSockPath` and ours).
#[derive(Debug, Clone, PartialEq)]
pub struct DmiConfig {
    /// Whether the module runs.
    pub enable: bool,
    /// The socket mappers call (KubeEdge default `/etc/kubeedge/dmi.sock`).
    pub sock_path: PathBuf,
    /// Deadline of a call to a mapper (KubeEdge: 10 s).
    pub call_timeout: Duration,
    /// Registrations a second, and their burst (KubeEdge: 1 a second, 100).
    pub register_qps: f64,
    /// See [`DmiConfig::register_qps`].
    pub register_burst: u32,
    /// Reports a second across all mappers, and their burst (KubeEdge
    /// shares the registrations' 1 a second; that drops most reports of a
    /// node with a few devices, so reports have their own bucket).
    pub report_qps: f64,
    /// See [`DmiConfig::report_qps`].
    pub report_burst: u32,
    /// Largest DMI message, either way.
    pub max_message: usize,
    /// First wait before a failed call to a mapper is tried again; it
    /// doubles (with jitter) up to [`DmiConfig::retry_max`].
    pub retry_initial: Duration,
    /// See [`DmiConfig::retry_initial`].
    pub retry_max: Duration,
}

impl Default for DmiConfig {
    fn default() -> Self {
        DmiConfig {
            enable: true,
            sock_path: PathBuf::from("/etc/kubeedge/dmi.sock"),
            call_timeout: Duration::from_secs(10),
            register_qps: 1.0,
            register_burst: 100,
            // A node of 1,000 devices with a few properties each, reported
            // every second, fits with room to spare; a runaway mapper does not
            // flood DeviceTwin.
            report_qps: 10_000.0,
            report_burst: 20_000,
            max_message: 4 << 20,
            retry_initial: Duration::from_millis(200),
            retry_max: Duration::from_secs(10),
        }
    }
}

/// The module's metrics.
#[derive(Debug, Default)]
pub struct DmiMetrics {
    pub(crate) registered_mappers: Gauge,
    pub(crate) registrations: Counter,
    pub(crate) reports: Counter,
    pub(crate) reports_dropped: Counter,
    pub(crate) rate_limited: Counter,
    pub(crate) mapper_call_failures: Counter,
    pub(crate) pending_changes: Gauge,
}

impl DmiMetrics {
    /// Registers the metrics in `registry` under the prefix `dmi`
    /// (`edgehive_dmi_` in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_dmi::DmiMetrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_dmi_registered_mappers 0\n"));
    /// assert!(text.contains("\nedgehive_dmi_mapper_call_failures_total 0\n"));
    /// assert!(text.contains("\nedgehive_dmi_pending_changes 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("dmi");
        r.register("registered_mappers", "Device mappers registered", self.registered_mappers.clone());
        r.register("registrations", "MapperRegister calls accepted", self.registrations.clone());
        r.register("reports", "Device status and state reports received from mappers", self.reports.clone());
        r.register(
            "reports_dropped",
            "Reports refused: unknown device, no mapper of its protocol, or unknown properties",
            self.reports_dropped.clone(),
        );
        r.register("rate_limited", "DMI calls refused by the rate limit", self.rate_limited.clone());
        r.register("mapper_call_failures", "Calls to mappers that failed", self.mapper_call_failures.clone());
        r.register(
            "pending_changes",
            "Device and model changes waiting for their mapper (the latest per object)",
            self.pending_changes.clone(),
        );
    }

    /// Mappers registered now.
    pub fn registered_mappers(&self) -> i64 {
        self.registered_mappers.get()
    }

    /// Reports received.
    pub fn reports(&self) -> u64 {
        self.reports.get()
    }

    /// Reports (or reported properties) refused.
    pub fn reports_dropped(&self) -> u64 {
        self.reports_dropped.get()
    }

    /// Calls refused by the rate limit.
    pub fn rate_limited(&self) -> u64 {
        self.rate_limited.get()
    }

    /// Calls to mappers that failed.
    pub fn mapper_call_failures(&self) -> u64 {
        self.mapper_call_failures.get()
    }

    /// Device and model changes waiting for their mapper.
    pub fn pending_changes(&self) -> i64 {
        self.pending_changes.get()
    }
}

/// State the gRPC handlers and the module share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: DmiConfig,
    pub(crate) db: Arc<MetaDb>,
    pub(crate) metrics: Arc<DmiMetrics>,
    cache: Mutex<DmiCache>,
    pub(crate) register_limit: Mutex<TokenBucket>,
    pub(crate) report_limit: Mutex<TokenBucket>,
    /// Each protocol's changes waiting for its mapper.
    queues: Mutex<HashMap<String, Arc<ProtocolQueue>>>,
}

impl Shared {
    pub(crate) fn cache(&self) -> MutexGuard<'_, DmiCache> {
        // A handler that panicked left consistent maps (each change is one
        // insert or remove): keep going.
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `protocol`'s mapper registered: its worker retries at once, and
    /// with data the waiting changes the registration covers are dropped.
    /// Called with the cache locked, right after the registration's data
    /// was taken from it: a change whose cache update came later is queued
    /// after this and still delivered.
    pub(crate) fn mapper_registered(&self, protocol: &str, with_data: bool) -> usize {
        let queue = lock(&self.queues).get(protocol).cloned();
        queue.map_or(0, |q| q.registered(with_data))
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The DMI beehive module.
#[derive(Debug)]
pub struct Dmi {
    shared: Arc<Shared>,
}

impl Dmi {
    /// The module with its settings and the edge's store.
    pub fn new(cfg: DmiConfig, db: Arc<MetaDb>) -> Dmi {
        Dmi::with_metrics(cfg, db, Arc::new(DmiMetrics::default()))
    }

    /// The module counting into `metrics` (registered by the caller).
    pub fn with_metrics(cfg: DmiConfig, db: Arc<MetaDb>, metrics: Arc<DmiMetrics>) -> Dmi {
        let now = tokio::time::Instant::now();
        let register_limit = Mutex::new(TokenBucket::new(cfg.register_qps, cfg.register_burst, now));
        let report_limit = Mutex::new(TokenBucket::new(cfg.report_qps, cfg.report_burst, now));
        Dmi {
            shared: Arc::new(Shared {
                cfg,
                db,
                metrics,
                cache: Mutex::default(),
                register_limit,
                report_limit,
                queues: Mutex::default(),
            }),
        }
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<DmiMetrics> {
        &self.shared.metrics
    }
}

impl Module for Dmi {
    fn name(&self) -> &str {
        MODULE
    }

    fn group(&self) -> &str {
        GROUP
    }

    fn enabled(&self) -> bool {
        self.shared.cfg.enable
    }

    fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            let shared = Arc::clone(&self.shared);
            load_from_store(&shared).await;
            let server = crate::service::server(Arc::clone(&shared), ctx.context().clone())
                .bind(&shared.cfg.sock_path)
                .map_err(|e| format!("serve DMI on {}: {e}", shared.cfg.sock_path.display()))?;
            tracing::info!(socket = %shared.cfg.sock_path.display(), "DMI server listening");
            let stop = cancel.child_token();
            let _stop_guard = stop.clone().drop_guard();
            let serving = tokio::spawn(server.serve(stop.clone()));
            let mut workers = MapperWorkers { shared: Arc::clone(&shared), stop: stop.clone() };
            while let Some(msg) = ctx.receive_until(&cancel).await {
                handle_object(&shared, &mut workers, &msg);
            }
            stop.cancel();
            match serving.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(format!("DMI server: {e}").into()),
                Err(e) => Err(format!("DMI server task: {e}").into()),
            }
        })
    }
}

/// Loads the devices, models and mappers the edge store has, so a
/// re-registering mapper after an edge restart gets its devices at once.
async fn load_from_store(shared: &Arc<Shared>) {
    let db = Arc::clone(&shared.db);
    let listed = tokio::task::spawn_blocking(move || {
        [RESOURCE_TYPE_DEVICEMODEL, RESOURCE_TYPE_DEVICE, RESOURCE_TYPE_DEVICEMAPPER].map(|t| (t, db.list_type(t)))
    })
    .await;
    let Ok(listed) = listed else {
        tracing::error!("loading devices from the edge store failed");
        return;
    };
    let mut cache = shared.cache();
    for (resource_type, listing) in listed {
        let rows = match listing {
            Ok(l) => l.rows,
            Err(e) => {
                tracing::error!(resource_type, error = %e, "could not list the edge store");
                continue;
            }
        };
        for (key, value) in rows {
            match resource_type {
                RESOURCE_TYPE_DEVICEMAPPER => match serde_json::from_str::<MapperRecord>(&value) {
                    Ok(m) if !m.protocol.is_empty() => {
                        cache.put_mapper(m);
                    }
                    _ => tracing::warn!(%key, "stored device mapper is not readable, skipped"),
                },
                _ => match serde_json::from_str::<Value>(&value) {
                    Ok(v) if !convert::object_name(&v).is_empty() => {
                        if resource_type == RESOURCE_TYPE_DEVICE {
                            cache.put_device(&v);
                        } else {
                            cache.put_model(v);
                        }
                    }
                    _ => tracing::warn!(%key, resource_type, "stored object is not readable, skipped"),
                },
            }
        }
    }
    shared.metrics.registered_mappers.set(i64::try_from(cache.mapper_count()).unwrap_or(i64::MAX));
}

/// A queue of waiting changes and a task per protocol, so calls to one
/// mapper stay in order and a mapper that hangs or fails holds up only its
/// own devices.
struct MapperWorkers {
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl MapperWorkers {
    fn send(&mut self, protocol: &str, key: ObjectKey, call: MapperCall) {
        if protocol.is_empty() {
            return;
        }
        let queue = {
            let mut queues = lock(&self.shared.queues);
            Arc::clone(queues.entry(protocol.to_owned()).or_insert_with(|| {
                let q = ProtocolQueue::new(self.shared.metrics.pending_changes.clone());
                let worker = mapper_worker(Arc::clone(&self.shared), protocol.to_owned(), Arc::clone(&q));
                let stop = self.stop.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = worker => {}
                    }
                });
                q
            }))
        };
        queue.push(key, call);
    }
}

/// The wait before a failed call is tried again: `initial` doubling up to
/// `max`, each wait cut by up to a quarter at random so that mappers that
/// fail together do not retry together.
#[derive(Debug)]
struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
    jitter: std::collections::hash_map::RandomState,
    n: u64,
}

impl Backoff {
    fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { initial, max, next: initial, jitter: Default::default(), n: 0 }
    }

    fn reset(&mut self) {
        self.next = self.initial;
    }

    fn wait(&mut self) -> Duration {
        use std::hash::BuildHasher as _;
        let base = self.next.min(self.max);
        self.next = base.saturating_mul(2).min(self.max);
        self.n += 1;
        let cut = u32::try_from(self.jitter.hash_one(self.n) % 1000).unwrap_or(0);
        base - base / 4 * cut / 1000
    }
}

async fn mapper_worker(shared: Arc<Shared>, protocol: String, queue: Arc<ProtocolQueue>) {
    let mut channel: Option<Channel> = None;
    let mut backoff = Backoff::new(shared.cfg.retry_initial, shared.cfg.retry_max);
    loop {
        let taken = queue.next().await;
        let Some(socket) = shared.cache().mapper_socket(&protocol) else {
            tracing::debug!(%protocol, call = ?taken.call, "no mapper registered for the protocol; it gets the data when it registers");
            continue;
        };
        if channel.as_ref().is_none_or(|c| c.path() != std::path::Path::new(&socket)) {
            channel = Some(Channel::new(&socket));
        }
        let Some(ch) = channel.as_ref() else { continue };
        match call_mapper(ch, &taken.call, shared.cfg.call_timeout).await {
            Ok(()) => backoff.reset(),
            // The mapper refuses this object as it is (bad settings, an
            // unknown device, a call it does not serve): asking again gets the
            // same answer and would hold up the protocol's other changes; a
            // newer version of the object is sent when it comes.
            Err(e)
                if e.code().is_some_and(|c| {
                    [code::INVALID_ARGUMENT, code::NOT_FOUND, code::ALREADY_EXISTS, code::UNIMPLEMENTED].contains(&c)
                }) =>
            {
                shared.metrics.mapper_call_failures.inc();
                backoff.reset();
                tracing::warn!(%protocol, kind = taken.key.kind, object = %taken.key.name, %socket, error = %e, "the mapper refused the object; not tried again until it changes");
            }
            Err(e) => {
                shared.metrics.mapper_call_failures.inc();
                let wait = backoff.wait();
                tracing::warn!(%protocol, kind = taken.key.kind, object = %taken.key.name, %socket, error = %e, retry_in = ?wait, "call to the mapper failed; it is tried again");
                queue.put_back(taken);
                if queue.backoff(wait).await {
                    backoff.reset();
                }
            }
        }
    }
}

/// Makes `call` on the mapper at `ch`.
async fn call_mapper(ch: &Channel, call: &MapperCall, t: Duration) -> Result<(), edgehive_grpc::GrpcError> {
    match call {
        MapperCall::RegisterDevice(d) => ch
            .call::<_, api::RegisterDeviceResponse>(
                method::REGISTER_DEVICE,
                &api::RegisterDeviceRequest { device: Some(d.clone()) },
                t,
            )
            .await
            .map(drop),
        MapperCall::UpdateDevice(d) => ch
            .call::<_, api::UpdateDeviceResponse>(
                method::UPDATE_DEVICE,
                &api::UpdateDeviceRequest { device: Some(d.clone()) },
                t,
            )
            .await
            .map(drop),
        MapperCall::RemoveDevice { name, namespace } => ch
            .call::<_, api::RemoveDeviceResponse>(
                method::REMOVE_DEVICE,
                &api::RemoveDeviceRequest { device_name: name.clone(), device_namespace: namespace.clone() },
                t,
            )
            .await
            .map(drop),
        MapperCall::CreateModel(m) => ch
            .call::<_, api::CreateDeviceModelResponse>(
                method::CREATE_DEVICE_MODEL,
                &api::CreateDeviceModelRequest { model: Some(m.clone()) },
                t,
            )
            .await
            .map(drop),
        MapperCall::UpdateModel(m) => ch
            .call::<_, api::UpdateDeviceModelResponse>(
                method::UPDATE_DEVICE_MODEL,
                &api::UpdateDeviceModelRequest { model: Some(m.clone()) },
                t,
            )
            .await
            .map(drop),
        MapperCall::RemoveModel { name, namespace } => ch
            .call::<_, api::RemoveDeviceModelResponse>(
                method::REMOVE_DEVICE_MODEL,
                &api::RemoveDeviceModelRequest { model_name: name.clone(), model_namespace: namespace.clone() },
                t,
            )
            .await
            .map(drop),
    }
}

/// A Device or DeviceModel message from `twin` (contract message 4):
/// resource `{ns}/device/{name}` or `{ns}/devicemodel/{name}`, operation
/// insert/update/delete, content the object.
fn handle_object(shared: &Arc<Shared>, workers: &mut MapperWorkers, msg: &Message) {
    let resource = msg.route.resource.as_str();
    let parts: Vec<&str> = resource.split('/').collect();
    let [namespace, kind, name] = parts[..] else {
        tracing::warn!(resource, "DMI: not a device resource, ignored");
        return;
    };
    let operation = msg.route.operation.as_str();
    let key = |kind: &'static str| ObjectKey { kind, namespace: namespace.to_owned(), name: name.to_owned() };
    let obj = msg.content.decode::<Value>().ok().filter(|v| convert::object_name(v) == name);
    match (kind, operation) {
        (RESOURCE_TYPE_DEVICE, op::INSERT | op::UPDATE) => {
            let Some(obj) = obj else {
                tracing::warn!(resource, operation, "DMI: device message without the device, ignored");
                return;
            };
            let protocol = device_protocol(&obj).to_owned();
            let converted = convert::convert_device(&obj);
            let old = shared.cache().put_device(&obj);
            let old_protocol = old.as_ref().map(|o| o.protocol.clone());
            let device = match converted {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(resource, error = %e, "DMI: device cannot be sent to a mapper");
                    return;
                }
            };
            if let Some(old_protocol) = old_protocol.filter(|p| *p != protocol) {
                // Moved to another protocol: the old mapper lets go of it.
                workers.send(
                    &old_protocol,
                    key(RESOURCE_TYPE_DEVICE),
                    MapperCall::RemoveDevice { name: name.to_owned(), namespace: namespace.to_owned() },
                );
                workers.send(&protocol, key(RESOURCE_TYPE_DEVICE), MapperCall::RegisterDevice(device));
            } else if operation == op::INSERT || old.is_none() {
                workers.send(&protocol, key(RESOURCE_TYPE_DEVICE), MapperCall::RegisterDevice(device));
            } else {
                workers.send(&protocol, key(RESOURCE_TYPE_DEVICE), MapperCall::UpdateDevice(device));
            }
        }
        (RESOURCE_TYPE_DEVICE, op::DELETE) => {
            let old = shared.cache().remove_device(name);
            let protocol = old.map(|o| o.protocol).or_else(|| obj.as_ref().map(|o| device_protocol(o).to_owned()));
            let Some(protocol) = protocol else {
                tracing::debug!(resource, "DMI: delete of a device not known here");
                return;
            };
            workers.send(
                &protocol,
                key(RESOURCE_TYPE_DEVICE),
                MapperCall::RemoveDevice { name: name.to_owned(), namespace: namespace.to_owned() },
            );
        }
        (RESOURCE_TYPE_DEVICEMODEL, op::INSERT | op::UPDATE) => {
            let Some(obj) = obj else {
                tracing::warn!(resource, operation, "DMI: model message without the model, ignored");
                return;
            };
            let protocol = convert::model_protocol(&obj).to_owned();
            let converted = convert::convert_device_model(&obj);
            let old = shared.cache().put_model(obj);
            match converted {
                Ok(m) if operation == op::INSERT || old.is_none() => {
                    workers.send(&protocol, key(RESOURCE_TYPE_DEVICEMODEL), MapperCall::CreateModel(m))
                }
                Ok(m) => workers.send(&protocol, key(RESOURCE_TYPE_DEVICEMODEL), MapperCall::UpdateModel(m)),
                Err(e) => tracing::warn!(resource, error = %e, "DMI: model cannot be sent to a mapper"),
            }
        }
        (RESOURCE_TYPE_DEVICEMODEL, op::DELETE) => {
            let protocol = {
                let mut cache = shared.cache();
                let p = cache.model_protocol(name).map(str::to_owned);
                cache.remove_model(name);
                p
            };
            let protocol = protocol.or_else(|| obj.as_ref().map(|o| convert::model_protocol(o).to_owned()));
            if let Some(protocol) = protocol {
                workers.send(
                    &protocol,
                    key(RESOURCE_TYPE_DEVICEMODEL),
                    MapperCall::RemoveModel { name: name.to_owned(), namespace: namespace.to_owned() },
                );
            }
        }
        _ => tracing::debug!(resource, operation, "DMI: message ignored"),
    }
}
