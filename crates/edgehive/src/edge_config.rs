//! `edge.yaml`: KubeEdge's `edgecore.yaml` keys that edgehive uses, plus a
//! few of its own. Every unknown key, wrong type or missing required value
//! is reported with its path (`modules.edgeHub.websocket.server: ...`).
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
//! KubeEdge v1.15's own spellings under `modules.edged` are read too, so a
//! KubeEdge user's file carries over: `remoteRuntimeEndpoint` (later
//! KubeEdge moved it to `tailoredKubeletConfig.containerRuntimeEndpoint`;
//! either, or both if they agree), `remoteImageEndpoint` (edgehive pulls
//! through the runtime's socket, so it must name that one),
//! `podSandboxImage` (containerd's own setting decides; accepted) and
//! `rootDirectory` (kubelet's directory for pods: edgehive keeps its pods
//! under `dataDir`, so it stands for `dataDir` when that is not given).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use edgehive_edgehub::{CloudEndpoint, Transport};
use serde_json::{Map, Value};

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
    pub(crate) restart_backoff: (Duration, Duration),
    /// The CRI runtime's socket; `None`: the process runtime.
    pub(crate) container_runtime_endpoint: Option<String>,
    pub(crate) runtime_request_timeout: Duration,
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

/// A mapping being read: remembers its path and refuses keys it was not asked about.
struct Obj<'a> {
    path: String,
    map: Option<&'a Map<String, Value>>,
    known: &'static [&'static str],
}

impl<'a> Obj<'a> {
    fn new(path: &str, v: Option<&'a Value>, known: &'static [&'static str]) -> Result<Obj<'a>, ConfigError> {
        let map = match v {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => return Err(err(path, format!("expected a mapping, got {}", kind(other)))),
        };
        let obj = Obj { path: path.to_owned(), map, known };
        if let Some(m) = obj.map {
            for k in m.keys() {
                if !known.contains(&k.as_str()) {
                    return Err(err(&obj.child(k), format!("unknown key (known here: {})", known.join(", "))));
                }
            }
        }
        Ok(obj)
    }

    fn child(&self, key: &str) -> String {
        if self.path.is_empty() { key.to_owned() } else { format!("{}.{key}", self.path) }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        debug_assert!(self.known.contains(&key), "{key} not declared");
        self.map?.get(key).filter(|v| !v.is_null())
    }

    fn obj(&self, key: &str, known: &'static [&'static str]) -> Result<Obj<'a>, ConfigError> {
        Obj::new(&self.child(key), self.get(key), known)
    }

    fn string(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_owned())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(other) => Err(err(&self.child(key), format!("expected a string, got {}", kind(other)))),
        }
    }

    fn boolean(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(err(&self.child(key), format!("expected true or false, got {}", kind(other)))),
        }
    }

    fn number(&self, key: &str, default: f64, min: f64, max: f64) -> Result<f64, ConfigError> {
        let v = match self.get(key) {
            None => return Ok(default),
            Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(other) => return Err(err(&self.child(key), format!("expected a number, got {}", kind(other)))),
        };
        if !(min..=max).contains(&v) {
            return Err(err(&self.child(key), format!("{v} is out of range {min}..={max}")));
        }
        Ok(v)
    }

    fn seconds(&self, key: &str, default: u64, min: f64, max: f64) -> Result<Duration, ConfigError> {
        Ok(Duration::from_secs_f64(self.number(key, default as f64, min, max)?))
    }

    /// A kubelet duration: a Go duration string (`2m`, `1m30s`, `500ms`)
    /// or a number of seconds.
    fn duration(&self, key: &str, default: Duration) -> Result<Duration, ConfigError> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::String(text)) => crate::duration::parse(text)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| err(&self.child(key), format!("{text:?} is not a duration such as 2m or 90s"))),
            Some(_) => self.seconds(key, default.as_secs(), 0.001, 86400.0),
        }
    }

    /// Only `enable: false` (or nothing): a KubeEdge module edgehive does not run.
    fn disabled_module(&self, key: &'static str) -> Result<(), ConfigError> {
        let Some(v) = self.get(key) else { return Ok(()) };
        let enabled = v.get("enable").and_then(Value::as_bool).unwrap_or(false);
        if enabled {
            return Err(err(
                &format!("{}.enable", self.child(key)),
                "this KubeEdge module is not part of edgehive; set it to false or remove it",
            ));
        }
        Ok(())
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn endpoints(obj: &Obj<'_>, transport: Transport) -> Result<Vec<CloudEndpoint>, ConfigError> {
    let Some(list) = obj.string("server")? else {
        return Err(err(&obj.child("server"), "required when enabled (host:port[,host:port...])"));
    };
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|server| {
            let ok = server.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if ok {
                Ok(CloudEndpoint { transport, server: server.to_owned() })
            } else {
                Err(err(&obj.child("server"), format!("{server:?} is not host:port")))
            }
        })
        .collect()
}

/// The CRI socket: `tailoredKubeletConfig.containerRuntimeEndpoint`, or
/// KubeEdge v1.15's `remoteRuntimeEndpoint` (both only if they agree); and
/// `remoteImageEndpoint`, which must name the same socket (images are
/// pulled through the runtime's).
fn runtime_endpoint(edged: &Obj<'_>, kubelet: &Obj<'_>) -> Result<Option<String>, ConfigError> {
    const KUBELET_KEY: &str = "modules.edged.tailoredKubeletConfig.containerRuntimeEndpoint";
    const REMOTE_KEY: &str = "modules.edged.remoteRuntimeEndpoint";
    const IMAGE_KEY: &str = "modules.edged.remoteImageEndpoint";
    let socket = |e: &str| e.strip_prefix("unix://").unwrap_or(e).to_owned();
    let check = |key: &str, e: String| {
        if socket(&e).starts_with('/') {
            Ok(e)
        } else {
            Err(err(key, format!("{e:?}: expected unix:///path/to/socket")))
        }
    };
    let from_kubelet = kubelet.string("containerRuntimeEndpoint")?.map(|e| check(KUBELET_KEY, e)).transpose()?;
    let from_flag = edged.string("remoteRuntimeEndpoint")?.map(|e| check(REMOTE_KEY, e)).transpose()?;
    let endpoint = match (from_kubelet, from_flag) {
        (Some(a), Some(b)) if socket(&a) != socket(&b) => {
            return Err(err(REMOTE_KEY, format!("{b:?} differs from {KUBELET_KEY} {a:?} (the same setting; set one)")));
        }
        (Some(e), _) | (None, Some(e)) => Some(e),
        (None, None) => None,
    };
    if let Some(image) = edged.string("remoteImageEndpoint")? {
        let image = check(IMAGE_KEY, image)?;
        match &endpoint {
            Some(e) if socket(e) == socket(&image) => {}
            Some(e) => {
                return Err(err(
                    IMAGE_KEY,
                    format!(
                        "{image:?}: edgehive pulls images through the runtime endpoint {e:?}; set it to that or remove it"
                    ),
                ));
            }
            None => return Err(err(IMAGE_KEY, "needs remoteRuntimeEndpoint (images are pulled through the runtime)")),
        }
    }
    Ok(endpoint)
}

const TOP: &[&str] = &["apiVersion", "kind", "dataDir", "database", "modules", "metricsAddress"];
const MODULES: &[&str] =
    &["edged", "edgeHub", "metaManager", "eventBus", "deviceTwin", "serviceBus", "edgeStream", "dbTest", "taskManager"];
const EDGED: &[&str] = &[
    "enable",
    "hostnameOverride",
    "nodeIP",
    "registerNodeNamespace",
    "nodeLeaseDurationSeconds",
    "nodeStatusReportFrequency",
    "restartBackoff",
    "podSandboxImage",
    "tailoredKubeletConfig",
    // KubeEdge v1.15's `TailoredKubeletFlag` spellings.
    "remoteRuntimeEndpoint",
    "remoteImageEndpoint",
    "rootDirectory",
];
/// Kubelet settings edged reads; the rest of a KubeEdge
/// `tailoredKubeletConfig` is refused by name so that nobody believes it
/// applies.
const KUBELET: &[&str] = &["containerRuntimeEndpoint", "runtimeRequestTimeout", "cgroupDriver"];
const EDGEHUB: &[&str] = &[
    "enable",
    "heartbeat",
    "messageQPS",
    "messageBurst",
    "projectID",
    "httpServer",
    "token",
    "tlsCaFile",
    "tlsCertFile",
    "tlsPrivateKeyFile",
    "rotateCertificates",
    "websocket",
    "quic",
    "reconnect",
    "offlineBufferSize",
    "pingKeepalive",
];
const LINK: &[&str] = &["enable", "server", "handshakeTimeout", "writeDeadline", "readDeadline"];
const META: &[&str] = &["enable", "remoteQueryTimeout", "contextSendGroup", "contextSendModule", "metaServer"];

impl EdgeConfig {
    pub(crate) fn load(path: &Path) -> anyhow::Result<EdgeConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("read {}: {e}", path.display()))?;
        EdgeConfig::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    pub(crate) fn parse(text: &str) -> anyhow::Result<EdgeConfig> {
        let doc: Value = serde_saphyr::from_str(text).map_err(|e| anyhow::anyhow!("not YAML: {e}"))?;
        Ok(EdgeConfig::from_value(&doc)?)
    }

    fn from_value(doc: &Value) -> Result<EdgeConfig, ConfigError> {
        let top = Obj::new("", Some(doc), TOP)?;
        if let Some(kind) = top.string("kind")?
            && kind != "EdgeCore"
        {
            return Err(err("kind", format!("{kind:?}: expected EdgeCore")));
        }
        let metrics_address = match top.string("metricsAddress")? {
            Some(a) => Some(a.parse().map_err(|e| err("metricsAddress", format!("{a:?}: {e}")))?),
            None => None,
        };

        let modules = top.obj("modules", MODULES)?;
        for m in ["eventBus", "deviceTwin", "serviceBus", "edgeStream", "dbTest", "taskManager"] {
            modules.disabled_module(m)?;
        }
        let edged = modules.obj("edged", EDGED)?;
        // KubeEdge's `rootDirectory` is where kubelet keeps pods; edgehive
        // keeps them under `dataDir`.
        let data_dir = match (top.string("dataDir")?, edged.string("rootDirectory")?) {
            (Some(dir), Some(root)) if Path::new(&dir) != Path::new(&root) => {
                return Err(err(
                    "modules.edged.rootDirectory",
                    format!("{root:?} differs from dataDir {dir:?}; edgehive keeps its pods under dataDir (set one)"),
                ));
            }
            (Some(dir), _) | (None, Some(dir)) => PathBuf::from(dir),
            (None, None) => PathBuf::from("/var/lib/edgehive"),
        };
        let database = top.obj("database", &["driverName", "aliasName", "dataSource"])?;
        let database = database.string("dataSource")?.map_or_else(|| data_dir.join("edgecore.db"), PathBuf::from);
        let node_name = edged
            .string("hostnameOverride")?
            .ok_or_else(|| err("modules.edged.hostnameOverride", "required: the node's name"))?;
        if node_name.len() > 253
            || !node_name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        {
            return Err(err(
                "modules.edged.hostnameOverride",
                format!("{node_name:?} is not a valid node name (lowercase letters, digits, '-' and '.')"),
            ));
        }
        let node_ip = match edged.string("nodeIP")? {
            Some(ip) => Some(ip.parse().map_err(|e| err("modules.edged.nodeIP", format!("{ip:?}: {e}")))?),
            None => None,
        };

        // `podSandboxImage` is the runtime's to use (containerd's
        // `sandbox_image`); edged accepts the key and leaves it to it.
        edged.string("podSandboxImage")?;
        let kubelet = edged.obj("tailoredKubeletConfig", KUBELET)?;
        let container_runtime_endpoint = runtime_endpoint(&edged, &kubelet)?;
        if let Some(driver) = kubelet.string("cgroupDriver")?
            && driver != "cgroupfs"
            && driver != "systemd"
        {
            return Err(err(
                "modules.edged.tailoredKubeletConfig.cgroupDriver",
                format!("{driver:?}: expected cgroupfs or systemd"),
            ));
        }
        let runtime_request_timeout = kubelet.duration("runtimeRequestTimeout", Duration::from_secs(120))?;

        let hub = modules.obj("edgeHub", EDGEHUB)?;
        if !hub.boolean("enable", true)? {
            return Err(err("modules.edgeHub.enable", "edgehive's edge needs EdgeHub"));
        }
        let ws = hub.obj("websocket", LINK)?;
        let quic = hub.obj("quic", LINK)?;
        let (ws_on, quic_on) = (ws.boolean("enable", true)?, quic.boolean("enable", false)?);
        let link = match (ws_on, quic_on) {
            (true, false) => &ws,
            (false, true) => &quic,
            _ => {
                return Err(err("modules.edgeHub", "exactly one of websocket.enable and quic.enable must be true"));
            }
        };
        let transport = if ws_on { Transport::WebSocket } else { Transport::Quic };
        let endpoints = endpoints(link, transport)?;
        let reconnect = hub.obj("reconnect", &["base", "cap"])?;
        let backoff_base = reconnect.seconds("base", 1, 0.01, 3600.0)?;
        let backoff_cap = reconnect.seconds("cap", 30, 0.01, 3600.0)?;
        if backoff_cap < backoff_base {
            return Err(err("modules.edgeHub.reconnect.cap", "must not be below base"));
        }
        let certs = data_dir.join("certs");
        let file = |key: &str, default: &str| -> Result<PathBuf, ConfigError> {
            Ok(hub.string(key)?.map_or_else(|| certs.join(default), PathBuf::from))
        };
        let http_server = hub.string("httpServer")?;
        if let Some(url) = &http_server
            && !url.starts_with("https://")
        {
            return Err(err("modules.edgeHub.httpServer", format!("{url:?}: must start with https://")));
        }
        let meta = modules.obj("metaManager", META)?;
        let meta_server =
            meta.obj("metaServer", &["enable", "server", "tlsCaFile", "tlsCertFile", "tlsPrivateKeyFile"])?;
        if meta_server.boolean("enable", false)? {
            return Err(err(
                "modules.metaManager.metaServer.enable",
                "MetaServer is not part of edgehive yet; set it to false",
            ));
        }
        let message_burst = hub.number("messageBurst", 60.0, 1.0, 100_000.0)? as u32;
        Ok(EdgeConfig {
            node_name,
            node_ip,
            database,
            heartbeat: hub.seconds("heartbeat", 15, 1.0, 3600.0)?,
            message_qps: hub.number("messageQPS", 30.0, 0.1, 100_000.0)?,
            message_burst,
            project_id: hub
                .string("projectID")?
                .unwrap_or_else(|| edgehive_model::well_known::DEFAULT_PROJECT_ID.into()),
            http_server,
            token: hub.string("token")?,
            ca_file: file("tlsCaFile", "ca.crt")?,
            cert_file: file("tlsCertFile", "edge.crt")?,
            key_file: file("tlsPrivateKeyFile", "edge.key")?,
            rotate_certificates: hub.boolean("rotateCertificates", true)?,
            endpoints,
            handshake_timeout: link.seconds("handshakeTimeout", 30, 1.0, 600.0)?,
            write_timeout: link.seconds("writeDeadline", 15, 1.0, 600.0)?,
            backoff_base,
            backoff_cap,
            outbox_capacity: hub.number("offlineBufferSize", 1024.0, 1.0, 1_000_000.0)? as usize,
            remote_query_timeout: meta.seconds("remoteQueryTimeout", 60, 1.0, 3600.0)?,
            metrics_address,
            lease_duration: edged.seconds("nodeLeaseDurationSeconds", 40, 1.0, 3600.0)?,
            status_report: edged.seconds("nodeStatusReportFrequency", 300, 1.0, 86400.0)?,
            ping_keepalive: hub.boolean("pingKeepalive", true)?,
            edged: edged.boolean("enable", true)?,
            restart_backoff: {
                let b = edged.obj("restartBackoff", &["base", "cap"])?;
                (b.seconds("base", 10, 0.01, 3600.0)?, b.seconds("cap", 300, 0.01, 86400.0)?)
            },
            container_runtime_endpoint,
            runtime_request_timeout,
            data_dir,
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
            (&format!("{MINIMAL}    heartbeat: soon\n"), "modules.edgeHub.heartbeat: expected a number, got a string"),
            (&format!("{MINIMAL}    heartbeat: 0\n"), "modules.edgeHub.heartbeat: 0 is out of range"),
            (
                &MINIMAL.replace("127.0.0.1:10000", "nohost"),
                "modules.edgeHub.websocket.server: \"nohost\" is not host:port",
            ),
            (&format!("{MINIMAL}    quic: {{enable: true, server: a:1}}\n"), "modules.edgeHub: exactly one of"),
            (&format!("{MINIMAL}  eventBus: {{enable: true}}\n"), "modules.eventBus.enable: this KubeEdge module"),
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
                &MINIMAL.replace("edged: {", "edged: {tailoredKubeletConfig: {maxPods: 110}, "),
                "modules.edged.tailoredKubeletConfig.maxPods: unknown key",
            ),
            (&format!("kind: CloudCore\n{MINIMAL}"), "kind: \"CloudCore\": expected EdgeCore"),
            (&format!("{MINIMAL}bogus: 1\n"), "bogus: unknown key"),
            ("modules: [1]\n", "modules: expected a mapping, got a list"),
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
}
