//! The reference mapper: Modbus TCP devices (and in-memory virtual ones)
//! driven over DMI, as a KubeEdge mapper built on mapper-framework is.
//!
//! `edgehive mapper modbus --dmi-sock <edge socket> --sock <own socket>`
//! runs [`run`]: the mapper serves DeviceMapperService on its own socket,
//! registers with the edge (MapperRegister, withData) and gets its
//! protocol's devices; for each property it reads the device every
//! `collectCycle`, reports the value to the edge every `reportCycle`
//! (ReportDeviceStatus; the properties due together go in one call per
//! device, at most one call in flight per device), pushes each reading to the property's
//! `pushMethod`, and writes a new desired value to the device. When the
//! edge restarts (its socket is a new file) or a report cannot reach it,
//! the mapper registers again, with backoff.
//!
//! - [`device`]: a DMI device read into settings, bad ones refused.
//! - [`driver`]: Modbus TCP and the virtual devices.
//! - [`push`]: MQTT and HTTP telemetry.
//! - [`simulator`]: a Modbus TCP device in memory, for demos and tests.

pub mod device;
pub mod driver;
pub mod push;
mod service;
pub mod simulator;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use edgehive_dmi::api::{self, method};
use edgehive_grpc::{Channel, GrpcError, Status};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::device::{DeviceConfig, PropertyConfig, parse_device};
use crate::driver::Driver;
use crate::push::{Pusher, Reading};

/// What the mapper calls itself in MapperInfo.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The DMI version spoken.
pub const API_VERSION: &str = "v1beta1";

/// The mapper's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct MapperConfig {
    /// The protocol: [`device::MODBUS`] or [`device::VIRTUAL`].
    pub protocol: String,
    /// The mapper's name (default `{protocol}-mapper`).
    pub name: String,
    /// The edge's DMI socket (KubeEdge default `/etc/kubeedge/dmi.sock`).
    pub dmi_sock: PathBuf,
    /// The mapper's own socket, where the edge calls it.
    pub sock: PathBuf,
    /// Deadline of each call to the edge.
    pub call_timeout: Duration,
    /// How often the edge's socket is looked at (a new file: the edge
    /// restarted, register again).
    pub probe_interval: Duration,
    /// First wait after a failed registration (doubled up to
    /// `max_backoff`, with jitter).
    pub initial_backoff: Duration,
    /// Longest wait between registration attempts.
    pub max_backoff: Duration,
}

impl MapperConfig {
    /// Settings for a mapper of `protocol` with the default timings.
    pub fn new(protocol: &str, dmi_sock: impl Into<PathBuf>, sock: impl Into<PathBuf>) -> MapperConfig {
        MapperConfig {
            protocol: protocol.to_owned(),
            name: format!("{protocol}-mapper"),
            dmi_sock: dmi_sock.into(),
            sock: sock.into(),
            call_timeout: Duration::from_secs(5),
            probe_interval: Duration::from_secs(1),
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
        }
    }
}

/// Why the mapper could not run.
#[derive(Debug, thiserror::Error)]
pub enum MapperError {
    /// The protocol is not one this mapper drives.
    #[error("unknown protocol {0:?} (this mapper drives \"modbus\" and \"virtualprotocol\")")]
    UnknownProtocol(String),
    /// The mapper's socket could not be served.
    #[error("serve {path}: {source}")]
    Serve {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Runs the mapper until `cancel`.
pub async fn run(cfg: MapperConfig, cancel: CancellationToken) -> Result<(), MapperError> {
    if cfg.protocol != device::MODBUS && cfg.protocol != device::VIRTUAL {
        return Err(MapperError::UnknownProtocol(cfg.protocol));
    }
    let mapper = Arc::new(Mapper {
        edge: Channel::new(&cfg.dmi_sock),
        devices: Mutex::default(),
        models: Mutex::default(),
        pusher: Pusher::new(cancel.clone()),
        reregister: Notify::new(),
        cancel: cancel.clone(),
        cfg,
    });
    let serve_err = |source| MapperError::Serve { path: mapper.cfg.sock.clone(), source };
    let server = service::server(Arc::clone(&mapper)).bind(&mapper.cfg.sock).map_err(serve_err)?;
    tracing::info!(protocol = %mapper.cfg.protocol, socket = %mapper.cfg.sock.display(), "mapper serving");
    let serving = tokio::spawn(server.serve(cancel.clone()));
    registration_loop(Arc::clone(&mapper)).await;
    mapper.stop_all();
    match serving.await {
        Ok(r) => r.map_err(serve_err),
        Err(e) => Err(serve_err(std::io::Error::other(e.to_string()))),
    }
}

/// A device being driven.
#[derive(Debug)]
struct RunningDevice {
    device: api::Device,
    config: DeviceConfig,
    stop: CancellationToken,
    latest: Arc<Mutex<HashMap<String, String>>>,
}

#[derive(Debug)]
pub(crate) struct Mapper {
    cfg: MapperConfig,
    edge: Channel,
    devices: Mutex<HashMap<String, RunningDevice>>,
    models: Mutex<HashMap<String, api::DeviceModel>>,
    pusher: Pusher,
    reregister: Notify,
    cancel: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Mapper {
    /// Starts (or restarts, with new settings) a device. A desired value
    /// that is new — the device is new, or its desired value changed — is
    /// written to the device.
    pub(crate) fn apply_device(self: &Arc<Self>, device: api::Device) -> Result<(), Status> {
        let config = parse_device(&device, &self.cfg.protocol).map_err(|e| {
            tracing::warn!(mapper = %self.cfg.name, device = %device.name, error = %e, "device refused: bad settings");
            Status::invalid_argument(e.to_string())
        })?;
        let mut devices = lock(&self.devices);
        let previous = devices.remove(&device.name);
        let latest = previous.as_ref().map(|p| Arc::clone(&p.latest)).unwrap_or_default();
        let writes: Vec<Option<String>> = config
            .properties
            .iter()
            .map(|p| {
                let before = previous
                    .as_ref()
                    .and_then(|d| d.config.properties.iter().find(|q| q.name == p.name))
                    .and_then(|q| q.desired.clone());
                p.desired.clone().filter(|d| previous.is_none() || before.as_ref() != Some(d))
            })
            .collect();
        if let Some(p) = previous {
            p.stop.cancel();
        }
        let stop = self.cancel.child_token();
        let driver = Arc::new(tokio::sync::Mutex::new(Driver::new(&config.connection)));
        let reports = Arc::new(Reports::default());
        tokio::spawn(run_reporter(Arc::clone(self), config.name.clone(), Arc::clone(&reports), stop.clone()));
        for (property, write) in config.properties.iter().zip(writes) {
            tokio::spawn(run_property(
                Arc::clone(self),
                config.name.clone(),
                property.clone(),
                write,
                Arc::clone(&driver),
                Arc::clone(&latest),
                Arc::clone(&reports),
                stop.clone(),
            ));
        }
        tracing::info!(device = %config.name, properties = config.properties.len(), "device driven");
        devices.insert(device.name.clone(), RunningDevice { device, config, stop, latest });
        Ok(())
    }

    pub(crate) fn remove_device(&self, name: &str) -> bool {
        match lock(&self.devices).remove(name) {
            Some(d) => {
                d.stop.cancel();
                true
            }
            None => false,
        }
    }

    pub(crate) fn get_device(&self, name: &str) -> Option<api::Device> {
        let devices = lock(&self.devices);
        let d = devices.get(name)?;
        let latest = lock(&d.latest);
        let mut device = d.device.clone();
        let twins = d
            .config
            .properties
            .iter()
            .map(|p| api::Twin {
                property_name: p.name.clone(),
                observed_desired: Some(api::TwinProperty {
                    value: p.desired.clone().unwrap_or_default(),
                    ..Default::default()
                }),
                reported: latest.get(&p.name).map(|v| api::TwinProperty { value: v.clone(), ..Default::default() }),
            })
            .collect();
        device.status = Some(api::DeviceStatus { twins });
        Some(device)
    }

    pub(crate) fn put_model(&self, model: api::DeviceModel) {
        lock(&self.models).insert(model.name.clone(), model);
    }

    pub(crate) fn remove_model(&self, name: &str) {
        lock(&self.models).remove(name);
    }

    fn stop_all(&self) {
        for (_, d) in lock(&self.devices).drain() {
            d.stop.cancel();
        }
    }

    async fn register(self: &Arc<Self>) -> Result<api::MapperRegisterResponse, GrpcError> {
        let req = api::MapperRegisterRequest {
            with_data: true,
            mapper: Some(api::MapperInfo {
                name: self.cfg.name.clone(),
                version: VERSION.to_owned(),
                api_version: API_VERSION.to_owned(),
                protocol: self.cfg.protocol.clone(),
                address: self.cfg.sock.to_string_lossy().as_bytes().to_vec(),
                state: "ok".to_owned(),
            }),
        };
        self.edge.call(method::MAPPER_REGISTER, &req, self.cfg.call_timeout).await
    }

    async fn report(&self, device: &str, twins: Vec<api::Twin>) {
        let req = api::ReportDeviceStatusRequest {
            device_name: device.to_owned(),
            reported_device: Some(api::DeviceStatus { twins }),
            ..Default::default()
        };
        let r = self
            .edge
            .call::<_, api::ReportDeviceStatusResponse>(method::REPORT_DEVICE_STATUS, &req, self.cfg.call_timeout)
            .await;
        match r {
            Ok(_) => {}
            Err(e @ GrpcError::Status { .. }) => tracing::warn!(device, error = %e, "the edge refused a report"),
            Err(e) => {
                tracing::warn!(device, error = %e, "report did not reach the edge; registering again");
                self.reregister.notify_one();
            }
        }
    }
}

/// The DMI socket's identity: a restarted edge binds a new file (which
/// may get the old inode number back, but not the old change time).
fn socket_id(path: &std::path::Path) -> Option<(u64, u64, i64, i64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

async fn registration_loop(mapper: Arc<Mapper>) {
    let mut backoff = mapper.cfg.initial_backoff;
    loop {
        let registered_on = socket_id(&mapper.cfg.dmi_sock);
        let result = tokio::select! {
            _ = mapper.cancel.cancelled() => return,
            r = mapper.register() => r,
        };
        match result {
            Ok(resp) => {
                backoff = mapper.cfg.initial_backoff;
                tracing::info!(
                    devices = resp.device_list.len(),
                    models = resp.model_list.len(),
                    "registered with the edge"
                );
                for m in resp.model_list {
                    mapper.put_model(m);
                }
                for d in resp.device_list {
                    let name = d.name.clone();
                    if let Err(e) = mapper.apply_device(d) {
                        tracing::warn!(device = %name, error = %e.message, "device from the edge refused");
                    }
                }
                // Watch the edge until it goes away, a report fails, or the
                // connection to it was made anew.
                let dials = mapper.edge.dials();
                loop {
                    tokio::select! {
                        _ = mapper.cancel.cancelled() => return,
                        _ = mapper.reregister.notified() => break,
                        _ = tokio::time::sleep(mapper.cfg.probe_interval) => {
                            if socket_id(&mapper.cfg.dmi_sock) != registered_on {
                                tracing::info!("the edge's DMI socket changed; registering again");
                                break;
                            }
                            if mapper.edge.dials() != dials {
                                tracing::info!("the connection to the edge was made anew; registering again");
                                break;
                            }
                        }
                    }
                }
            }
            Err(e) => {
                let jittered = backoff.mul_f64(0.5 + fastrand::f64());
                tracing::warn!(error = %e, retry_in = ?jittered, "registration with the edge failed");
                tokio::select! {
                    _ = mapper.cancel.cancelled() => return,
                    _ = tokio::time::sleep(jittered) => {}
                }
                backoff = (backoff * 2).min(mapper.cfg.max_backoff);
            }
        }
    }
}

/// A device's twins waiting to be reported, the latest per property.
#[derive(Debug, Default)]
struct Reports {
    due: Mutex<std::collections::BTreeMap<String, api::Twin>>,
    ready: Notify,
}

/// How long the reporter waits after the first twin is due for the
/// device's other properties whose cycle ends at the same time.
const REPORT_GATHER: Duration = Duration::from_millis(10);

/// A device's reporter: sends what its properties have due in one
/// ReportDeviceStatus call, one call at a time; what comes due meanwhile
/// merges (a property's latest value wins) and goes in the next call.
async fn run_reporter(mapper: Arc<Mapper>, device: String, reports: Arc<Reports>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            () = reports.ready.notified() => {}
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            () = tokio::time::sleep(REPORT_GATHER) => {}
        }
        let twins: Vec<api::Twin> = std::mem::take(&mut *lock(&reports.due)).into_values().collect();
        if !twins.is_empty() {
            mapper.report(&device, twins).await;
        }
    }
}

/// One property's loop: write a pending desired value, read every
/// collect cycle, push each reading, hand a report to the device's
/// reporter every report cycle.
#[allow(clippy::too_many_arguments)]
async fn run_property(
    mapper: Arc<Mapper>,
    device: String,
    p: PropertyConfig,
    mut pending_write: Option<String>,
    driver: Arc<tokio::sync::Mutex<Driver>>,
    latest: Arc<Mutex<HashMap<String, String>>>,
    reports: Arc<Reports>,
    stop: CancellationToken,
) {
    let start = tokio::time::Instant::now();
    let mut collect = tokio::time::interval_at(start, p.collect);
    collect.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_report = start;
    loop {
        // The tick's scheduled time, not the time it was woken: with the
        // wake-up's jitter, a report cycle equal to the collect cycle would
        // skip about a third of its reports.
        let at = tokio::select! {
            _ = stop.cancelled() => return,
            at = collect.tick() => at,
        };
        if let Some(value) = pending_write.as_deref() {
            match driver.lock().await.write(&p.name, &p.visitor, value).await {
                Ok(()) => {
                    tracing::info!(%device, property = %p.name, value, "desired value written");
                    pending_write = None;
                }
                Err(e @ driver::DriverError::Unreachable(_)) => {
                    tracing::warn!(%device, property = %p.name, error = %e, "desired value not written yet");
                }
                Err(e) => {
                    tracing::warn!(%device, property = %p.name, error = %e, "desired value cannot be written");
                    pending_write = None;
                }
            }
        }
        let value = match driver.lock().await.read(&p.name, &p.visitor).await {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(%device, property = %p.name, error = %e, "read failed");
                continue;
            }
        };
        lock(&latest).insert(p.name.clone(), value.clone());
        let now_ms = edgehive_model::now_millis();
        if let Some(method) = &p.push {
            let reading = Reading { device_name: &device, property_name: &p.name, value: &value, timestamp: now_ms };
            mapper.pusher.push(method, &reading).await;
        }
        if at >= next_report {
            next_report = at + p.report;
            let twin = api::Twin {
                property_name: p.name.clone(),
                observed_desired: Some(api::TwinProperty {
                    value: p.desired.clone().unwrap_or_default(),
                    ..Default::default()
                }),
                reported: Some(api::TwinProperty {
                    value,
                    metadata: HashMap::from([("timestamp".to_owned(), now_ms.to_string())]),
                }),
            };
            lock(&reports.due).insert(p.name.clone(), twin);
            reports.ready.notify_one();
        }
    }
}
