//! `edge.yaml`: KubeEdge's `edgecore.yaml`, read with serde. A stock
//! KubeEdge v1.15 file (`edgecore --defaultconfig`) reads as it is: keys of
//! KubeEdge's schema that edgehive does not use are accepted and named in one
//! warning; a key in neither schema is an error that suggests the closest
//! known one (`heartbaet` under `modules.edgeHub`: did you mean
//! `heartbeat`?). Every error names its path (`modules.edgeHub.heartbeat:
//! invalid type: ...`).
//!
//! ```yaml
//! apiVersion: edgecore.config.kubeedge.io/v1alpha2   # optional
//! kind: EdgeCore                                     # optional
//! dataDir: /var/lib/edgehive                         # certificates and database
//! database: {dataSource: /var/lib/edgehive/edgecore.db}
//! modules:
//!   edged: {hostnameOverride: edge-1, nodeIP: 192.0.2.7, nodeLeaseDurationSeconds: 40, nodeStatusReportFrequency: 300,
//!           restartBackoff: {base: 10, cap: 300},      # enable: false runs no pods
//!           tailoredKubeletConfig: {containerRuntimeEndpoint: unix:///run/containerd/containerd.sock,
//!                                   runtimeRequestTimeout: 2m}}   # no endpoint: the process runtime
//!   edgeHub:
//!     heartbeat: 15
//!     messageQPS: 30
//!     messageBurst: 60
//!     projectID: e632aba927ea4ac2b575ec1603d56f10
//!     httpServer: https://cloud.example:10002
//!     token: <edgehive token / secret kubeedge/tokensecret>
//!     websocket: {enable: true, server: "cloud.example:10000,cloud2.example:10000"}
//!     quic: {enable: false, server: cloud.example:10001}
//!     reconnect: {base: 1, cap: 30}                  # seconds, full jitter
//!     pingKeepalive: true                            # offer WebSocket pings as the heartbeat
//!   metaManager: {remoteQueryTimeout: 60}
//! ```
//!
//! KubeEdge's own spellings of these settings are read too, so a KubeEdge
//! user's file carries over: under `modules.edged`, `remoteRuntimeEndpoint`
//! (v1.15; later KubeEdge moved it to
//! `tailoredKubeletConfig.containerRuntimeEndpoint`), `remoteImageEndpoint`
//! (edgehive pulls through the runtime's socket, so it must name that one),
//! `rootDirectory` (kubelet's directory for pods: it stands for `dataDir`),
//! and `tailoredKubeletConfig.nodeLeaseDurationSeconds` and
//! `nodeStatusReportFrequency` (a Go duration there). A setting with two
//! names may be given under either, or both if they agree. `eventBus` and
//! `deviceTwin` take KubeEdge's keys (docs/devices.md); the KubeEdge
//! modules edgehive does not run (`serviceBus`, `edgeStream`, ...) are
//! ignored, enabled or not.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use edgehive_edgehub::{CloudEndpoint, Transport};
use serde::de::{Error as _, IgnoredAny, Unexpected};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The edge's settings.
#[derive(Debug, Clone)]
pub(crate) struct EdgeConfig {
    pub(crate) node_name: String,
    pub(crate) node_ip: Option<IpAddr>,
    pub(crate) data_dir: PathBuf,
    pub(crate) database: PathBuf,
    pub(crate) heartbeat: Duration,
    pub(crate) message_qps: f64,
    pub(crate) message_burst: u32,
    pub(crate) project_id: String,
    pub(crate) http_server: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) ca_file: PathBuf,
    pub(crate) cert_file: PathBuf,
    pub(crate) key_file: PathBuf,
    pub(crate) rotate_certificates: bool,
    pub(crate) endpoints: Vec<CloudEndpoint>,
    pub(crate) handshake_timeout: Duration,
    pub(crate) write_timeout: Duration,
    pub(crate) backoff_base: Duration,
    pub(crate) backoff_cap: Duration,
    pub(crate) outbox_capacity: usize,
    pub(crate) remote_query_timeout: Duration,
    pub(crate) metrics_address: Option<SocketAddr>,
    pub(crate) lease_duration: Duration,
    pub(crate) status_report: Duration,
    pub(crate) ping_keepalive: bool,
    pub(crate) edged: bool,
    /// DeviceTwin (`modules.deviceTwin.enable`, on unless turned off).
    pub(crate) device_twin: bool,
    /// The DMI socket mappers register on (`modules.deviceTwin.dmiSockPath`).
    pub(crate) dmi_sock_path: PathBuf,
    /// EventBus (`modules.eventBus`); `enable: false` leaves it out.
    pub(crate) event_bus: edgehive_eventbus::EventBusConfig,
    pub(crate) restart_backoff: (Duration, Duration),
    /// The CRI runtime's socket; `None`: the process runtime.
    pub(crate) container_runtime_endpoint: Option<String>,
    pub(crate) runtime_request_timeout: Duration,
    /// The paths of the file's KubeEdge keys that edgehive does not use;
    /// [`EdgeConfig::load`] names them in one warning.
    pub(crate) ignored_keys: Vec<String>,
}

/// A reading error: the key's path and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub(crate) struct ConfigError {
    pub(crate) path: String,
    pub(crate) reason: String,
}

fn err(path: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError { path: path.to_owned(), reason: reason.into() }
}

/// A scalar read as text, trimmed: a number counts (`projectID: 123`, `90`
/// seconds), blanks count as unset.
#[derive(Default)]
struct Text(Option<String>);

impl Text {
    fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        let unexpected = match Value::deserialize(d)? {
            Value::String(s) => return Ok(Text(Some(s.trim().to_owned()).filter(|s| !s.is_empty()))),
            Value::Number(n) => return Ok(Text(Some(n.to_string()))),
            Value::Null => return Ok(Text(None)),
            Value::Bool(b) => Unexpected::Bool(b),
            Value::Array(_) => Unexpected::Seq,
            Value::Object(_) => Unexpected::Map,
        };
        Err(D::Error::invalid_type(unexpected, &"a string"))
    }
}

/// The keys a mapping's struct did not take; `File::unused_keys` checks them.
type Rest = BTreeMap<String, Value>;

/// The mappings edgehive reads, as structs: a field per key (camelCase),
/// each optional, and `rest` for the keys the struct does not take.
macro_rules! mappings {
    ($($name:ident { $($(#[$attr:meta])* $field:ident: $type:ty),* $(,)? })*) => {$(
        #[derive(Default, Deserialize)]
        #[serde(default, rename_all = "camelCase", expecting = "a mapping")]
        struct $name { $($(#[$attr])* $field: $type,)* #[serde(flatten)] rest: Rest }
    )*};
}

mappings! {
    File {
        #[serde(rename = "apiVersion")] _api_version: Option<IgnoredAny>,
        kind: Text, data_dir: Text, metrics_address: Text, database: Database, modules: Modules,
    }
    Database { data_source: Text }
    Modules { edged: Edged, edge_hub: EdgeHub, meta_manager: MetaManager, device_twin: DeviceTwin, event_bus: EventBus }
    EventBus {
        enable: Option<bool>, #[serde(rename = "mqttQOS")] mqtt_qos: Option<f64>, mqtt_retain: Option<bool>,
        mqtt_session_queue_size: Option<f64>, mqtt_server_internal: Text, mqtt_server_external: Text,
        #[serde(rename = "mqttSubClientID")] mqtt_sub_client_id: Text,
        #[serde(rename = "mqttPubClientID")] mqtt_pub_client_id: Text, mqtt_username: Text, mqtt_password: Text,
        mqtt_mode: Option<f64>, #[serde(rename = "eventBusTLS")] event_bus_tls: EventBusTls,
    }
    EventBusTls {
        enable: Option<bool>, #[serde(rename = "tlsMqttCAFile")] tls_mqtt_ca_file: Text,
        tls_mqtt_cert_file: Text, tls_mqtt_private_key_file: Text,
    }
    DeviceTwin { enable: Option<bool>, dmi_sock_path: Text }
    Edged {
        enable: Option<bool>, hostname_override: Text, #[serde(rename = "nodeIP")] node_ip: Text,
        node_lease_duration_seconds: Option<f64>, node_status_report_frequency: Text, restart_backoff: Backoff,
        root_directory: Text, remote_runtime_endpoint: Text, remote_image_endpoint: Text,
        tailored_kubelet_config: Kubelet,
    }
    Kubelet {
        container_runtime_endpoint: Text, runtime_request_timeout: Text, cgroup_driver: Text,
        node_lease_duration_seconds: Option<f64>, node_status_report_frequency: Text,
    }
    EdgeHub {
        enable: Option<bool>, heartbeat: Option<f64>, #[serde(rename = "messageQPS")] message_qps: Option<f64>,
        message_burst: Option<f64>, #[serde(rename = "projectID")] project_id: Text, http_server: Text, token: Text,
        tls_ca_file: Text, tls_cert_file: Text, tls_private_key_file: Text, rotate_certificates: Option<bool>,
        websocket: Link, quic: Link, reconnect: Backoff, offline_buffer_size: Option<f64>, ping_keepalive: Option<bool>,
    }
    Link { enable: Option<bool>, server: Text, handshake_timeout: Option<f64>, write_deadline: Option<f64> }
    Backoff { base: Option<f64>, cap: Option<f64> }
    MetaManager { remote_query_timeout: Option<f64>, meta_server: MetaServer }
    MetaServer { enable: Option<bool> }
}

/// Every key an edge.yaml may hold, by path: KubeEdge v1.15's and edgehive's.
const KEYS: &str = include_str!("edgecore_keys.txt");

/// The keys [`KEYS`] lists under `parent` (`""`: the top level); none where
/// the mapping is not checked.
fn keys_under(parent: &str) -> impl Iterator<Item = &'static str> + '_ {
    let lines = KEYS.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
    lines.filter_map(move |line| {
        let key = if parent.is_empty() { line } else { line.strip_prefix(parent)?.strip_prefix('.')? };
        (!key.contains('.')).then_some(key)
    })
}

/// Checks that `key` belongs under `parent`, and the keys under it where
/// [`KEYS`] lists them; returns its path.
fn check_key(parent: &str, key: &str, value: &Value) -> Result<String, ConfigError> {
    let path = if parent.is_empty() { key.to_owned() } else { format!("{parent}.{key}") };
    if !keys_under(parent).any(|k| k == key) {
        let known: Vec<&str> = keys_under(parent).collect();
        let closest = known.iter().map(|k| (edit_distance(key, k), *k)).min();
        return Err(match closest {
            Some((d, k)) if d <= key.len().max(3) / 3 => err(&path, format!("unknown key; did you mean `{k}`?")),
            _ if known.len() <= 8 => err(&path, format!("unknown key (known here: {})", known.join(", "))),
            _ => err(&path, "unknown key (neither KubeEdge v1.15's nor edgehive's)"),
        });
    }
    if keys_under(&path).next().is_some() {
        for (k, v) in value.as_object().into_iter().flatten() {
            check_key(&path, k, v)?;
        }
    }
    Ok(path)
}

/// Levenshtein distance, ignoring case.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().flat_map(char::to_lowercase).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().flat_map(char::to_lowercase).enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// `modules.eventBus`, KubeEdge v1.15's keys and defaults.
fn event_bus(bus: &EventBus) -> Result<edgehive_eventbus::EventBusConfig, ConfigError> {
    use edgehive_eventbus::{EventBusConfig, MqttMode};
    let at = |key: &str| format!("modules.eventBus.{key}");
    let mut cfg = EventBusConfig { enable: bus.enable.unwrap_or(true), ..EventBusConfig::default() };
    let tls = &bus.event_bus_tls;
    if tls.enable == Some(true) {
        let d = edgehive_eventbus::BrokerTls::default();
        let path = |v: &Text, default: std::path::PathBuf| v.get().map_or(default, std::path::PathBuf::from);
        cfg.tls = Some(edgehive_eventbus::BrokerTls {
            ca_file: path(&tls.tls_mqtt_ca_file, d.ca_file),
            cert_file: path(&tls.tls_mqtt_cert_file, d.cert_file),
            key_file: path(&tls.tls_mqtt_private_key_file, d.key_file),
        });
    }
    if let Some(mode) = number(&at("mqttMode"), bus.mqtt_mode, 0.0, 2.0)? {
        cfg.mqtt_mode = MqttMode::from_code(mode as i64)
            .ok_or_else(|| err(&at("mqttMode"), "expected 0 (internal), 1 (both) or 2 (external)"))?;
    }
    if let Some(q) = number(&at("mqttQOS"), bus.mqtt_qos, 0.0, 2.0)? {
        cfg.mqtt_qos = q as u8;
    }
    cfg.mqtt_retain = bus.mqtt_retain.unwrap_or(false);
    if let Some(n) = number(&at("mqttSessionQueueSize"), bus.mqtt_session_queue_size, 1.0, 100_000.0)? {
        cfg.mqtt_session_queue_size = n as usize;
    }
    let text = |t: &Text, into: &mut String| {
        if let Some(v) = t.get() {
            v.clone_into(into);
        }
    };
    text(&bus.mqtt_server_internal, &mut cfg.mqtt_server_internal);
    text(&bus.mqtt_server_external, &mut cfg.mqtt_server_external);
    text(&bus.mqtt_sub_client_id, &mut cfg.mqtt_sub_client_id);
    text(&bus.mqtt_pub_client_id, &mut cfg.mqtt_pub_client_id);
    text(&bus.mqtt_username, &mut cfg.mqtt_username);
    text(&bus.mqtt_password, &mut cfg.mqtt_password);
    cfg.validate().map_err(|e| err("modules.eventBus", e.to_string()))?;
    Ok(cfg)
}

/// Drops the keys set to nothing (`edged:`): they read as absent.
fn drop_nulls(value: &mut Value) {
    if let Value::Object(map) = value {
        map.retain(|_, v| !v.is_null());
        map.values_mut().for_each(drop_nulls);
    }
}

/// A number, if given: within `min..=max`.
fn number(path: &str, v: Option<f64>, min: f64, max: f64) -> Result<Option<f64>, ConfigError> {
    match v {
        Some(v) if !(min..=max).contains(&v) => Err(err(path, format!("{v} is out of range {min}..={max}"))),
        v => Ok(v),
    }
}

/// A number of seconds, if given: within `min..=max`.
fn seconds(path: &str, v: Option<f64>, min: f64, max: f64) -> Result<Option<Duration>, ConfigError> {
    Ok(number(path, v, min, max)?.map(Duration::from_secs_f64))
}

/// A kubelet duration: a Go duration (`2m`, `1m30s`, `500ms`) or a number
/// of seconds, within `min..=max` seconds.
fn duration(path: &str, text: &Text, min: f64, max: f64) -> Result<Option<Duration>, ConfigError> {
    let Some(t) = text.get() else { return Ok(None) };
    let secs = match t.parse::<f64>() {
        Ok(secs) => secs,
        Err(_) => crate::duration::parse(t)
            .ok_or_else(|| err(path, format!("{t:?} is not a duration such as 2m or 90s")))?
            .as_secs_f64(),
    };
    seconds(path, Some(secs), min, max)
}

/// One setting under two names: either, or both if they agree (by `same`).
fn one_setting<T: Debug>(
    (a_path, a): (&str, Option<T>),
    (b_path, b): (&str, Option<T>),
    same: impl Fn(&T, &T) -> bool,
) -> Result<Option<T>, ConfigError> {
    match (a, b) {
        (Some(a), Some(b)) if !same(&a, &b) => {
            Err(err(b_path, format!("{b:?} differs from {a_path} {a:?} (the same setting; set one)")))
        }
        (Some(v), _) | (None, Some(v)) => Ok(Some(v)),
        (None, None) => Ok(None),
    }
}

fn endpoints(path: &str, server: &Text, transport: Transport) -> Result<Vec<CloudEndpoint>, ConfigError> {
    let Some(list) = server.get() else {
        return Err(err(path, "required when enabled (host:port[,host:port...])"));
    };
    let endpoint = |server: &str| {
        let ok = server.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        let endpoint = CloudEndpoint { transport, server: server.to_owned() };
        ok.then_some(endpoint).ok_or_else(|| err(path, format!("{server:?} is not host:port")))
    };
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(endpoint).collect()
}

/// The CRI socket: `tailoredKubeletConfig.containerRuntimeEndpoint` or
/// KubeEdge v1.15's `remoteRuntimeEndpoint`; and `remoteImageEndpoint`,
/// which must name the same socket (images are pulled through the runtime's).
fn runtime_endpoint(edged: &Edged) -> Result<Option<String>, ConfigError> {
    const KUBELET_KEY: &str = "modules.edged.tailoredKubeletConfig.containerRuntimeEndpoint";
    const REMOTE_KEY: &str = "modules.edged.remoteRuntimeEndpoint";
    const IMAGE_KEY: &str = "modules.edged.remoteImageEndpoint";
    let socket = |e: &str| e.strip_prefix("unix://").unwrap_or(e).to_owned();
    let check = |key: &str, e: &Text| match e.get() {
        Some(e) if !socket(e).starts_with('/') => Err(err(key, format!("{e:?}: expected unix:///path/to/socket"))),
        e => Ok(e.map(str::to_owned)),
    };
    let endpoint = one_setting(
        (KUBELET_KEY, check(KUBELET_KEY, &edged.tailored_kubelet_config.container_runtime_endpoint)?),
        (REMOTE_KEY, check(REMOTE_KEY, &edged.remote_runtime_endpoint)?),
        |a, b| socket(a) == socket(b),
    )?;
    match (check(IMAGE_KEY, &edged.remote_image_endpoint)?, &endpoint) {
        (None, _) => Ok(endpoint),
        (Some(image), Some(e)) if socket(e) == socket(&image) => Ok(endpoint),
        (Some(image), Some(e)) => Err(err(
            IMAGE_KEY,
            format!("{image:?}: edgehive pulls images through the runtime endpoint {e:?}; set it to that or remove it"),
        )),
        (Some(_), None) => Err(err(IMAGE_KEY, "needs remoteRuntimeEndpoint (images are pulled through the runtime)")),
    }
}

impl EdgeConfig {
    pub(crate) fn load(path: &Path) -> anyhow::Result<EdgeConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("read {}: {e}", path.display()))?;
        let config = EdgeConfig::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if !config.ignored_keys.is_empty() {
            let (count, keys) = (config.ignored_keys.len(), config.ignored_keys.join(" "));
            tracing::warn!(file = %path.display(), count, %keys, "KubeEdge settings that edgehive does not use: ignored");
        }
        Ok(config)
    }

    pub(crate) fn parse(text: &str) -> anyhow::Result<EdgeConfig> {
        let mut doc: Value = serde_saphyr::from_str(text).map_err(|e| anyhow::anyhow!("not YAML: {e}"))?;
        if doc.is_null() {
            doc = Value::Object(serde_json::Map::new());
        }
        drop_nulls(&mut doc);
        let file: File = serde_path_to_error::deserialize(doc).map_err(|e| {
            let path = e.path().to_string();
            err(if path == "." { "document" } else { &path }, e.inner().to_string())
        })?;
        Ok(file.into_config()?)
    }
}

impl File {
    /// The paths of the keys no struct took, each checked against [`KEYS`].
    fn unused_keys(&self) -> Result<Vec<String>, ConfigError> {
        let (edged, hub, meta) = (&self.modules.edged, &self.modules.edge_hub, &self.modules.meta_manager);
        let rests = [
            ("", &self.rest),
            ("database", &self.database.rest),
            ("modules", &self.modules.rest),
            ("modules.edged", &edged.rest),
            ("modules.edged.restartBackoff", &edged.restart_backoff.rest),
            ("modules.edged.tailoredKubeletConfig", &edged.tailored_kubelet_config.rest),
            ("modules.edgeHub", &hub.rest),
            ("modules.edgeHub.websocket", &hub.websocket.rest),
            ("modules.edgeHub.quic", &hub.quic.rest),
            ("modules.edgeHub.reconnect", &hub.reconnect.rest),
            ("modules.metaManager", &meta.rest),
            ("modules.metaManager.metaServer", &meta.meta_server.rest),
            ("modules.deviceTwin", &self.modules.device_twin.rest),
            ("modules.eventBus", &self.modules.event_bus.rest),
            ("modules.eventBus.eventBusTLS", &self.modules.event_bus.event_bus_tls.rest),
        ];
        let unused =
            rests.into_iter().flat_map(|(parent, rest)| rest.iter().map(move |(k, v)| check_key(parent, k, v)));
        unused.collect()
    }

    fn into_config(self) -> Result<EdgeConfig, ConfigError> {
        let ignored_keys = self.unused_keys()?;
        if let Some(kind) = self.kind.get()
            && kind != "EdgeCore"
        {
            return Err(err("kind", format!("{kind:?}: expected EdgeCore")));
        }
        let metrics_address = match self.metrics_address.get() {
            Some(a) => Some(a.parse().map_err(|e| err("metricsAddress", format!("{a:?}: {e}")))?),
            None => None,
        };
        let Modules { edged, edge_hub: hub, meta_manager: meta, device_twin: twin, event_bus: bus, .. } = self.modules;
        let event_bus = event_bus(&bus)?;
        let kubelet = &edged.tailored_kubelet_config;

        // KubeEdge's `rootDirectory` is where kubelet keeps pods; edgehive
        // keeps them under `dataDir`.
        let data_dir = one_setting(
            ("dataDir", self.data_dir.get()),
            ("modules.edged.rootDirectory", edged.root_directory.get()),
            |a, b| Path::new(a) == Path::new(b),
        )?
        .map_or_else(|| PathBuf::from("/var/lib/edgehive"), PathBuf::from);
        let database = self.database.data_source.get().map_or_else(|| data_dir.join("edgecore.db"), PathBuf::from);
        const NAME: &str = "modules.edged.hostnameOverride";
        let node_name = edged.hostname_override.get().ok_or_else(|| err(NAME, "required: the node's name"))?;
        if node_name.len() > 253
            || !node_name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        {
            let reason = format!("{node_name:?} is not a valid node name (lowercase letters, digits, '-' and '.')");
            return Err(err(NAME, reason));
        }
        let node_ip = match edged.node_ip.get() {
            Some(ip) => Some(ip.parse().map_err(|e| err("modules.edged.nodeIP", format!("{ip:?}: {e}")))?),
            None => None,
        };
        let [lease, kubelet_lease] =
            ["modules.edged.nodeLeaseDurationSeconds", "modules.edged.tailoredKubeletConfig.nodeLeaseDurationSeconds"];
        let lease_duration = one_setting(
            (lease, seconds(lease, edged.node_lease_duration_seconds, 1.0, 3600.0)?),
            (kubelet_lease, seconds(kubelet_lease, kubelet.node_lease_duration_seconds, 1.0, 3600.0)?),
            PartialEq::eq,
        )?;
        let [report, kubelet_report] = [
            "modules.edged.nodeStatusReportFrequency",
            "modules.edged.tailoredKubeletConfig.nodeStatusReportFrequency",
        ];
        let status_report = one_setting(
            (report, duration(report, &edged.node_status_report_frequency, 1.0, 86400.0)?),
            (kubelet_report, duration(kubelet_report, &kubelet.node_status_report_frequency, 1.0, 86400.0)?),
            PartialEq::eq,
        )?;
        let container_runtime_endpoint = runtime_endpoint(&edged)?;
        if let Some(driver) = kubelet.cgroup_driver.get()
            && driver != "cgroupfs"
            && driver != "systemd"
        {
            let reason = format!("{driver:?}: expected cgroupfs or systemd");
            return Err(err("modules.edged.tailoredKubeletConfig.cgroupDriver", reason));
        }
        let timeout = "modules.edged.tailoredKubeletConfig.runtimeRequestTimeout";
        let runtime_request_timeout = duration(timeout, &kubelet.runtime_request_timeout, 0.001, 86400.0)?;

        if hub.enable == Some(false) {
            return Err(err("modules.edgeHub.enable", "edgehive's edge needs EdgeHub"));
        }
        let (link, at, transport) = match (hub.websocket.enable.unwrap_or(true), hub.quic.enable.unwrap_or(false)) {
            (true, false) => (&hub.websocket, "modules.edgeHub.websocket", Transport::WebSocket),
            (false, true) => (&hub.quic, "modules.edgeHub.quic", Transport::Quic),
            _ => return Err(err("modules.edgeHub", "exactly one of websocket.enable and quic.enable must be true")),
        };
        let endpoints = endpoints(&format!("{at}.server"), &link.server, transport)?;
        let backoff_base = seconds("modules.edgeHub.reconnect.base", hub.reconnect.base, 0.01, 3600.0)?;
        let backoff_base = backoff_base.unwrap_or(Duration::from_secs(1));
        let backoff_cap = seconds("modules.edgeHub.reconnect.cap", hub.reconnect.cap, 0.01, 3600.0)?;
        let backoff_cap = backoff_cap.unwrap_or(Duration::from_secs(30));
        if backoff_cap < backoff_base {
            return Err(err("modules.edgeHub.reconnect.cap", "must not be below base"));
        }
        let certs = data_dir.join("certs");
        let file = |t: &Text, default: &str| t.get().map_or_else(|| certs.join(default), PathBuf::from);
        let http_server = hub.http_server.get().map(str::to_owned);
        if let Some(url) = &http_server
            && !url.starts_with("https://")
        {
            return Err(err("modules.edgeHub.httpServer", format!("{url:?}: must start with https://")));
        }
        if meta.meta_server.enable == Some(true) {
            let reason = "MetaServer is not part of edgehive yet; set it to false";
            return Err(err("modules.metaManager.metaServer.enable", reason));
        }
        let hub_at = |key: &str| format!("modules.edgeHub.{key}");
        let restart = &edged.restart_backoff;
        let default = |secs, v: Option<Duration>| v.unwrap_or(Duration::from_secs(secs));
        Ok(EdgeConfig {
            node_name: node_name.to_owned(),
            node_ip,
            database,
            heartbeat: default(15, seconds(&hub_at("heartbeat"), hub.heartbeat, 1.0, 3600.0)?),
            message_qps: number(&hub_at("messageQPS"), hub.message_qps, 0.1, 100_000.0)?.unwrap_or(30.0),
            message_burst: number(&hub_at("messageBurst"), hub.message_burst, 1.0, 100_000.0)?.unwrap_or(60.0) as u32,
            project_id: hub.project_id.get().unwrap_or(edgehive_model::well_known::DEFAULT_PROJECT_ID).to_owned(),
            http_server,
            token: hub.token.get().map(str::to_owned),
            ca_file: file(&hub.tls_ca_file, "ca.crt"),
            cert_file: file(&hub.tls_cert_file, "edge.crt"),
            key_file: file(&hub.tls_private_key_file, "edge.key"),
            rotate_certificates: hub.rotate_certificates.unwrap_or(true),
            endpoints,
            handshake_timeout: default(
                30,
                seconds(&format!("{at}.handshakeTimeout"), link.handshake_timeout, 1.0, 600.0)?,
            ),
            write_timeout: default(15, seconds(&format!("{at}.writeDeadline"), link.write_deadline, 1.0, 600.0)?),
            backoff_base,
            backoff_cap,
            outbox_capacity: number(&hub_at("offlineBufferSize"), hub.offline_buffer_size, 1.0, 1e6)?.unwrap_or(1024.0)
                as usize,
            remote_query_timeout: default(
                60,
                seconds("modules.metaManager.remoteQueryTimeout", meta.remote_query_timeout, 1.0, 3600.0)?,
            ),
            metrics_address,
            lease_duration: default(40, lease_duration),
            status_report: default(300, status_report),
            ping_keepalive: hub.ping_keepalive.unwrap_or(true),
            edged: edged.enable.unwrap_or(true),
            device_twin: twin.enable.unwrap_or(true),
            event_bus,
            dmi_sock_path: twin.dmi_sock_path.get().map_or_else(|| data_dir.join("dmi.sock"), PathBuf::from),
            restart_backoff: (
                default(10, seconds("modules.edged.restartBackoff.base", restart.base, 0.01, 3600.0)?),
                default(300, seconds("modules.edged.restartBackoff.cap", restart.cap, 0.01, 86400.0)?),
            ),
            container_runtime_endpoint,
            runtime_request_timeout: default(120, runtime_request_timeout),
            data_dir,
            ignored_keys,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(yaml: &str) -> String {
        format!("{:#}", EdgeConfig::parse(yaml).unwrap_err())
    }

    const MINIMAL: &str =
        "modules:\n  edged: {hostnameOverride: edge-1}\n  edgeHub:\n    websocket: {server: 127.0.0.1:10000}\n";

    #[test]
    fn a_minimal_file_gets_kubeedge_defaults() {
        let c = EdgeConfig::parse(MINIMAL).unwrap();
        assert_eq!(c.node_name, "edge-1");
        assert_eq!(c.heartbeat, Duration::from_secs(15));
        assert_eq!((c.message_qps, c.message_burst), (30.0, 60));
        assert_eq!(c.endpoints, [CloudEndpoint { transport: Transport::WebSocket, server: "127.0.0.1:10000".into() }]);
        assert_eq!(c.database, PathBuf::from("/var/lib/edgehive/edgecore.db"));
        assert_eq!(c.key_file, PathBuf::from("/var/lib/edgehive/certs/edge.key"));
        assert!(c.rotate_certificates);
        assert_eq!(c.container_runtime_endpoint, None, "the process runtime by default");
        assert_eq!(c.runtime_request_timeout, Duration::from_secs(120));
        assert_eq!((c.lease_duration, c.status_report), (Duration::from_secs(40), Duration::from_secs(300)));
        assert!(c.ignored_keys.is_empty(), "{:?}", c.ignored_keys);
    }

    #[test]
    fn a_container_runtime_endpoint_selects_cri() {
        let yaml = MINIMAL.replace(
            "edged: {hostnameOverride: edge-1}",
            "edged: {hostnameOverride: edge-1, podSandboxImage: kubeedge/pause:3.6, tailoredKubeletConfig: {containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock', runtimeRequestTimeout: 1m30s, cgroupDriver: cgroupfs}}",
        );
        let c = EdgeConfig::parse(&yaml).unwrap();
        assert_eq!(c.container_runtime_endpoint.as_deref(), Some("unix:///run/containerd/containerd.sock"));
        assert_eq!(c.runtime_request_timeout, Duration::from_secs(90));
    }

    #[test]
    fn kubeedge_v1_15_edged_keys_carry_over() {
        // The keys and default values of a v1.15 `edgecore.yaml`.
        let v115 = "edged: {hostnameOverride: edge-1, podSandboxImage: kubeedge/pause:3.6, rootDirectory: /var/lib/edged, remoteImageEndpoint: unix:///run/containerd/containerd.sock, remoteRuntimeEndpoint: unix:///run/containerd/containerd.sock}";
        let c = EdgeConfig::parse(&MINIMAL.replace("edged: {hostnameOverride: edge-1}", v115)).unwrap();
        assert_eq!(c.container_runtime_endpoint.as_deref(), Some("unix:///run/containerd/containerd.sock"));
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/edged"), "pods where kubelet keeps them");
        assert_eq!(c.database, PathBuf::from("/var/lib/edged/edgecore.db"));
        // A socket path without the scheme, as older files have it.
        let bare = MINIMAL.replace("edged: {", "edged: {remoteRuntimeEndpoint: /run/containerd/containerd.sock, ");
        assert_eq!(
            EdgeConfig::parse(&bare).unwrap().container_runtime_endpoint.as_deref(),
            Some("/run/containerd/containerd.sock")
        );
        // Both spellings, agreeing; rootDirectory equal to dataDir.
        let both = format!(
            "dataDir: /srv/e\n{}",
            MINIMAL.replace(
                "edged: {",
                "edged: {rootDirectory: /srv/e, remoteRuntimeEndpoint: /run/c.sock, tailoredKubeletConfig: {containerRuntimeEndpoint: 'unix:///run/c.sock'}, "
            )
        );
        let c = EdgeConfig::parse(&both).unwrap();
        assert_eq!(c.container_runtime_endpoint.as_deref(), Some("unix:///run/c.sock"));
        assert_eq!(c.data_dir, PathBuf::from("/srv/e"));
        // Without any: the process runtime, as before.
        assert_eq!(EdgeConfig::parse(MINIMAL).unwrap().container_runtime_endpoint, None);
    }

    #[test]
    fn kubeedge_v1_15_edged_keys_that_cannot_apply_are_refused_by_name() {
        let with = |keys: &str| MINIMAL.replace("edged: {", &format!("edged: {{{keys}, "));
        let cases = [
            (
                with("remoteRuntimeEndpoint: 'tcp://x:1'"),
                "modules.edged.remoteRuntimeEndpoint: \"tcp://x:1\": expected unix:///",
            ),
            (
                with(
                    "remoteRuntimeEndpoint: /run/a.sock, tailoredKubeletConfig: {containerRuntimeEndpoint: /run/b.sock}",
                ),
                "modules.edged.remoteRuntimeEndpoint: \"/run/a.sock\" differs from modules.edged.tailoredKubeletConfig.containerRuntimeEndpoint",
            ),
            (
                with("remoteRuntimeEndpoint: /run/a.sock, remoteImageEndpoint: /run/i.sock"),
                "modules.edged.remoteImageEndpoint: \"/run/i.sock\": edgehive pulls images through the runtime endpoint",
            ),
            (
                with("remoteImageEndpoint: /run/i.sock"),
                "modules.edged.remoteImageEndpoint: needs remoteRuntimeEndpoint",
            ),
            (
                format!("dataDir: /srv/e\n{}", with("rootDirectory: /var/lib/edged")),
                "modules.edged.rootDirectory: \"/var/lib/edged\" differs from dataDir \"/srv/e\"",
            ),
        ];
        for (yaml, want) in cases {
            let got = parse_err(&yaml);
            assert!(got.contains(want), "for\n{yaml}\nwant {want:?}\ngot  {got:?}");
        }
    }

    #[test]
    fn a_stock_edgecore_file_with_disabled_modules_reads() {
        let yaml = "apiVersion: edgecore.config.kubeedge.io/v1alpha2\nkind: EdgeCore\ndatabase: {dataSource: /tmp/x.db}\nmodules:\n  edged: {enable: false, hostnameOverride: edge-1}\n  edgeHub:\n    enable: true\n    heartbeat: 5\n    httpServer: https://10.0.0.1:10002\n    token: abc\n    websocket: {enable: false}\n    quic: {enable: true, server: '10.0.0.1:10001,10.0.0.2:10001'}\n  metaManager: {enable: true, metaServer: {enable: false}}\n  eventBus: {enable: false}\n  deviceTwin: {enable: false}\n";
        let c = EdgeConfig::parse(yaml).unwrap();
        assert_eq!(c.endpoints.len(), 2);
        assert_eq!(c.endpoints[1].transport, Transport::Quic);
        assert_eq!(c.heartbeat, Duration::from_secs(5));
        assert_eq!(c.database, PathBuf::from("/tmp/x.db"));
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("modules:\n  edgeHub: {websocket: {server: a:1}}\n", "modules.edged.hostnameOverride: required"),
            (&MINIMAL.replace("edged: {", "edged: {bogus: 1, "), "modules.edged.bogus: unknown key"),
            (&format!("{MINIMAL}    heartbeat: soon\n"), "modules.edgeHub.heartbeat: invalid type: string \"soon\""),
            (&format!("{MINIMAL}    heartbeat: 0\n"), "modules.edgeHub.heartbeat: 0 is out of range"),
            (
                &MINIMAL.replace("127.0.0.1:10000", "nohost"),
                "modules.edgeHub.websocket.server: \"nohost\" is not host:port",
            ),
            (&format!("{MINIMAL}    quic: {{enable: true, server: a:1}}\n"), "modules.edgeHub: exactly one of"),
            (
                &format!("{MINIMAL}    httpServer: http://x:1\n"),
                "modules.edgeHub.httpServer: \"http://x:1\": must start with https://",
            ),
            (
                &MINIMAL.replace("edge-1", "Edge_1"),
                "modules.edged.hostnameOverride: \"Edge_1\" is not a valid node name",
            ),
            (
                &MINIMAL
                    .replace("edged: {", "edged: {tailoredKubeletConfig: {containerRuntimeEndpoint: 'tcp://x:1'}, "),
                "modules.edged.tailoredKubeletConfig.containerRuntimeEndpoint: \"tcp://x:1\": expected unix:///",
            ),
            (
                &MINIMAL.replace("edged: {", "edged: {tailoredKubeletConfig: {runtimeRequestTimeout: soon}, "),
                "modules.edged.tailoredKubeletConfig.runtimeRequestTimeout: \"soon\" is not a duration",
            ),
            (
                &MINIMAL.replace("edged: {", "edged: {tailoredKubeletConfig: {maxPod: 110}, "),
                "modules.edged.tailoredKubeletConfig.maxPod: unknown key; did you mean `maxPods`?",
            ),
            (&format!("kind: CloudCore\n{MINIMAL}"), "kind: \"CloudCore\": expected EdgeCore"),
            (&format!("{MINIMAL}bogus: 1\n"), "bogus: unknown key"),
            ("modules: [1]\n", "modules: invalid type: sequence, expected a mapping"),
            ("[1]\n", "document: invalid type: sequence, expected a mapping"),
            (
                &format!("{MINIMAL}    reconnect: {{base: 1, max: 2}}\n"),
                "modules.edgeHub.reconnect.max: unknown key (known here: base, cap)",
            ),
            (
                &MINIMAL.replace(
                    "edged: {",
                    "edged: {nodeLeaseDurationSeconds: 40, tailoredKubeletConfig: {nodeLeaseDurationSeconds: 60}, ",
                ),
                "modules.edged.tailoredKubeletConfig.nodeLeaseDurationSeconds: 60s differs from modules.edged.nodeLeaseDurationSeconds 40s",
            ),
            (
                &MINIMAL.replace("edged: {", "edged: {tailoredKubeletConfig: {nodeStatusReportFrequency: 0s}, "),
                "modules.edged.tailoredKubeletConfig.nodeStatusReportFrequency: 0 is out of range 1..=86400",
            ),
            (
                "modules:\n  edged: {hostnameOverride: e}\n  edgeHub: {websocket: {enable: true}}\n",
                "modules.edgeHub.websocket.server: required",
            ),
        ];
        for (yaml, want) in cases {
            let got = parse_err(yaml);
            assert!(got.contains(want), "for\n{yaml}\nwant {want:?}\ngot  {got:?}");
        }
    }

    /// `edgecore --defaultconfig` of KubeEdge v1.15.0.
    const KUBEEDGE_V1_15: &str = include_str!("../tests/fixtures/edgecore-v1.15-defaultconfig.yaml");

    #[test]
    fn the_kubeedge_v1_15_default_config_reads_with_its_unused_keys_named() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/edgecore-v1.15-defaultconfig.yaml");
        let c = EdgeConfig::load(&file).unwrap();
        assert_eq!(c.ignored_keys, EdgeConfig::parse(KUBEEDGE_V1_15).unwrap().ignored_keys);
        assert_eq!(c.node_name, "edge-node-1");
        assert_eq!(c.heartbeat, Duration::from_secs(15));
        assert_eq!((c.message_qps, c.message_burst), (30.0, 60));
        assert_eq!(
            c.endpoints,
            [CloudEndpoint { transport: Transport::WebSocket, server: "192.168.1.20:10000".into() }]
        );
        assert_eq!((c.handshake_timeout, c.write_timeout), (Duration::from_secs(30), Duration::from_secs(15)));
        assert_eq!(c.http_server.as_deref(), Some("https://192.168.1.20:10002"));
        assert_eq!(c.token, None, "token: \"\" is no token");
        assert_eq!(c.container_runtime_endpoint.as_deref(), Some("unix:///run/containerd/containerd.sock"));
        assert_eq!(c.runtime_request_timeout, Duration::from_secs(120));
        assert_eq!((c.lease_duration, c.status_report), (Duration::from_secs(40), Duration::from_secs(300)));
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/edged"));
        assert_eq!(c.database, PathBuf::from("/var/lib/kubeedge/edgecore.db"));
        assert_eq!(c.ca_file, PathBuf::from("/etc/kubeedge/ca/rootCA.crt"));
        assert_eq!(c.key_file, PathBuf::from("/etc/kubeedge/certs/server.key"));
        assert!(c.rotate_certificates && c.edged);

        let ignored: Vec<&str> = c.ignored_keys.iter().map(String::as_str).collect();
        for key in [
            "database.driverName",
            "modules.edgeStream",
            "modules.edged.podSandboxImage",
            "modules.edged.registerNodeNamespace",
            "modules.edged.tailoredKubeletConfig.maxPods",
            "modules.edged.tailoredKubeletConfig.evictionHard",
            "modules.edged.tailoredKubeletConfig.logging",
            "modules.edgeHub.websocket.readDeadline",
            "modules.metaManager.contextSendGroup",
            "modules.metaManager.metaServer.server",
        ] {
            assert!(ignored.contains(&key), "{key} not in {ignored:?}");
        }
        for used in [
            "apiVersion",
            "kind",
            "modules.edgeHub.heartbeat",
            "modules.edgeHub.websocket.server",
            "modules.edged.hostnameOverride",
            "modules.edged.remoteRuntimeEndpoint",
            "modules.edged.tailoredKubeletConfig.runtimeRequestTimeout",
            "modules.edged.tailoredKubeletConfig.nodeLeaseDurationSeconds",
        ] {
            assert!(!ignored.iter().any(|k| k.starts_with(used)), "{used} is read, yet in {ignored:?}");
        }
        // Only whole keys, once each: nothing under a key already named.
        assert!(!ignored.iter().any(|k| k.starts_with("modules.edgeStream.")), "{ignored:?}");
        // EventBus and DeviceTwin are read, with KubeEdge's defaults.
        for used in ["modules.eventBus.mqttMode", "modules.eventBus.mqttServerExternal", "modules.deviceTwin"] {
            assert!(!ignored.iter().any(|k| k.starts_with(used)), "{used} is read, yet in {ignored:?}");
        }
        assert!(c.device_twin && c.event_bus.enable);
        assert_eq!(c.event_bus.mqtt_mode, edgehive_eventbus::MqttMode::External);
        assert_eq!(c.event_bus.mqtt_server_external, "tcp://127.0.0.1:1883");
        assert_eq!(c.event_bus.mqtt_server_internal, "tcp://127.0.0.1:1884");
    }

    #[test]
    fn kubeedge_keys_edgehive_does_not_use_are_accepted_and_named() {
        let yaml = format!(
            "featureGates: {{a: true}}\n{}  eventBus: {{enable: true, mqttMode: 0, eventBusTLS: {{enable: false}}}}\n",
            MINIMAL.replace(
                "edged: {",
                "edged: {registerNodeNamespace: default, tailoredKubeletConfig: {maxPods: 110, evictionHard: {x: 1}}, "
            )
        );
        let c = EdgeConfig::parse(&yaml).unwrap();
        assert_eq!(
            c.ignored_keys,
            [
                "featureGates",
                "modules.edged.registerNodeNamespace",
                "modules.edged.tailoredKubeletConfig.evictionHard",
                "modules.edged.tailoredKubeletConfig.maxPods",
            ]
        );
    }

    #[test]
    fn event_bus_and_device_twin_take_kubeedge_keys_and_refuse_bad_values() {
        let yaml = format!(
            "{MINIMAL}  eventBus: {{mqttMode: 0, mqttQOS: 1, mqttRetain: true, mqttSessionQueueSize: 7, mqttServerInternal: 'tcp://127.0.0.1:2884', mqttSubClientID: sub-1, mqttUsername: u, mqttPassword: p}}\n  deviceTwin: {{dmiSockPath: /run/edge/dmi.sock}}\n"
        );
        let c = EdgeConfig::parse(&yaml).unwrap();
        let b = &c.event_bus;
        assert_eq!(b.mqtt_mode, edgehive_eventbus::MqttMode::Internal);
        assert_eq!((b.mqtt_qos, b.mqtt_retain, b.mqtt_session_queue_size), (1, true, 7));
        assert_eq!(b.mqtt_server_internal, "tcp://127.0.0.1:2884");
        assert_eq!(
            (b.mqtt_sub_client_id.as_str(), b.mqtt_username.as_str(), b.mqtt_password.as_str()),
            ("sub-1", "u", "p")
        );
        assert_eq!(c.dmi_sock_path, PathBuf::from("/run/edge/dmi.sock"));
        let off =
            EdgeConfig::parse(&format!("{MINIMAL}  eventBus: {{enable: false}}\n  deviceTwin: {{enable: false}}\n"))
                .unwrap();
        assert!(!off.event_bus.enable && !off.device_twin);
        for (extra, want) in [
            ("eventBus: {mqttMode: 3}", "modules.eventBus.mqttMode"),
            ("eventBus: {mqttQOS: 5}", "modules.eventBus.mqttQOS"),
            ("eventBus: {mqttServerExternal: 'ssl://x:1'}", "modules.eventBus: modules.eventBus.eventBusTLS"),
            ("eventBus: {mqttServerExternal: 'ws://x:1'}", "modules.eventBus: modules.eventBus.mqttServerExternal"),
            (
                "eventBus: {mqttServerExternal: 'ssl://x:1', eventBusTLS: {enable: true, tlsMqttCAFile: /nothere/ca.crt}}",
                "modules.eventBus: modules.eventBus.eventBusTLS: tlsMqttCAFile /nothere/ca.crt",
            ),
        ] {
            let e = parse_err(&format!("{MINIMAL}  {extra}\n"));
            assert!(e.starts_with(want), "{extra}: {e}");
        }
    }

    #[test]
    fn a_misspelt_key_is_refused_with_its_path_and_the_closest_key() {
        let cases = [
            (
                format!("{MINIMAL}    heartbaet: 15\n"),
                "modules.edgeHub.heartbaet: unknown key; did you mean `heartbeat`?",
            ),
            (
                format!("{MINIMAL}    pingKeepAlive: true\n"),
                "modules.edgeHub.pingKeepAlive: unknown key; did you mean `pingKeepalive`?",
            ),
            // Inside a KubeEdge module edgehive does not run, too.
            (
                format!("{MINIMAL}  eventBus: {{eventBusTLS: {{tlsMqttCaFile: x}}}}\n"),
                "modules.eventBus.eventBusTLS.tlsMqttCaFile: unknown key; did you mean `tlsMqttCAFile`?",
            ),
            (format!("{MINIMAL}  metaManger: {{}}\n"), "modules.metaManger: unknown key; did you mean `metaManager`?"),
        ];
        for (yaml, want) in cases {
            assert_eq!(parse_err(&yaml), want, "for\n{yaml}");
        }
    }

    #[test]
    fn a_wrong_type_is_refused_with_its_path() {
        let cases = [
            (
                format!("{MINIMAL}    heartbeat: [15]\n"),
                "modules.edgeHub.heartbeat: invalid type: sequence, expected f64",
            ),
            (
                MINIMAL.replace("{server:", "{enable: 'true', server:"),
                "modules.edgeHub.websocket.enable: invalid type: string \"true\", expected a boolean",
            ),
            (
                MINIMAL.replace("edge-1", "[edge-1]"),
                "modules.edged.hostnameOverride: invalid type: sequence, expected a string",
            ),
            (
                format!("{MINIMAL}    reconnect: 5\n"),
                "modules.edgeHub.reconnect: invalid type: integer `5`, expected a mapping",
            ),
        ];
        for (yaml, want) in cases {
            assert_eq!(parse_err(&yaml), want, "for\n{yaml}");
        }
    }

    #[test]
    fn kubeedge_kubelet_spellings_of_lease_and_status_report_apply() {
        let yaml = MINIMAL.replace(
            "edged: {",
            "edged: {tailoredKubeletConfig: {nodeLeaseDurationSeconds: 60, nodeStatusReportFrequency: 1m30s}, ",
        );
        let c = EdgeConfig::parse(&yaml).unwrap();
        assert_eq!((c.lease_duration, c.status_report), (Duration::from_secs(60), Duration::from_secs(90)));
        let yaml = MINIMAL.replace("edged: {", "edged: {nodeLeaseDurationSeconds: 20, nodeStatusReportFrequency: 60, ");
        let c = EdgeConfig::parse(&yaml).unwrap();
        assert_eq!((c.lease_duration, c.status_report), (Duration::from_secs(20), Duration::from_secs(60)));
    }

    #[test]
    fn edit_distance_ignores_case() {
        assert_eq!(edit_distance("heartbaet", "heartbeat"), 2);
        assert_eq!(edit_distance("PingKeepAlive", "pingKeepalive"), 0);
        assert_eq!(edit_distance("", "cap"), 3);
    }
}
