//! The node itself, until edged runs pods: registers the Node (labelled
//! `node-role.kubernetes.io/edge`, capacity and addresses from the host),
//! then keeps its Lease renewed and its status current, so `kubectl get
//! nodes` shows it Ready — and NotReady once it is cut off.
//!
//! Everything goes through MetaManager as edged's reports do (source
//! `edged`): status is stored locally and coalesced by EdgeHub while the
//! link is down.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Module, ModuleContext, ModuleFuture};
use edgehive_model::{Content, Message, group, op, source, well_known};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const METAMANAGER: &str = source::METAMANAGER;

/// The node agent's module name.
pub const MODULE: &str = "nodeagent";

/// Facts about the host the Node reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// `status.addresses` InternalIP.
    pub internal_ip: Option<IpAddr>,
    /// CPUs.
    pub cpus: u32,
    /// Memory, KiB.
    pub memory_kib: u64,
    /// `nodeInfo.kernelVersion`.
    pub kernel: String,
    /// `nodeInfo.osImage`.
    pub os_image: String,
    /// `nodeInfo.architecture` (Go's names: amd64, arm64, ...).
    pub arch: String,
    /// `nodeInfo.machineID`.
    pub machine_id: String,
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

impl HostInfo {
    /// Reads the host (Linux `/proc`, `/etc/os-release`).
    pub fn detect(internal_ip: Option<IpAddr>) -> HostInfo {
        let memory_kib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0);
        let os_image = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=")).map(|v| v.trim_matches('"').to_owned())
            })
            .unwrap_or_else(|| "Linux".into());
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "arm" => "arm",
            "riscv64" => "riscv64",
            other => other,
        }
        .to_owned();
        HostInfo {
            internal_ip,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            memory_kib,
            kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
            os_image,
            arch,
            machine_id: read_trimmed("/etc/machine-id").unwrap_or_default(),
        }
    }
}

/// Memory kubelet keeps from pods by default (its hard eviction threshold
/// `memory.available<100Mi`), KiB.
const EVICTION_RESERVE_KIB: u64 = 100 * 1024;

/// `MemAvailable` from `/proc/meminfo`, KiB.
fn available_memory_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    s.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Settings of the node agent.
#[derive(Debug, Clone)]
pub struct NodeAgentConfig {
    /// The node's name.
    pub node_name: String,
    /// The host.
    pub host: HostInfo,
    /// Lease renewal period (kubelet: 10 s, a quarter of the 40 s lease).
    pub lease_interval: Duration,
    /// `leaseDurationSeconds`.
    pub lease_duration: Duration,
    /// Full status report period when nothing changes (kubelet's
    /// nodeStatusReportFrequency: 5 min); the Lease carries liveness.
    pub status_interval: Duration,
    /// The same when the cloud takes the link's pings as the node's
    /// heartbeat (`session-liveness`): 30 min. The report then only guards
    /// against a node the cloud marked NotReady while its session lived
    /// (it sets Ready again); at 5 min it would be most of an idle link's
    /// bytes (a status and the Node in answer, ~4.5 KB: 15 B/s).
    pub liveness_status_interval: Duration,
    /// `nodeInfo.kubeletVersion`.
    pub version: String,
    /// `nodeInfo.containerRuntimeVersion` (empty while no runtime runs pods).
    pub runtime_version: String,
}

impl NodeAgentConfig {
    /// Kubelet's defaults for a node on `host`.
    pub fn new(node_name: impl Into<String>, host: HostInfo) -> NodeAgentConfig {
        NodeAgentConfig {
            node_name: node_name.into(),
            host,
            lease_interval: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
            status_interval: Duration::from_secs(300),
            liveness_status_interval: Duration::from_secs(1800),
            version: format!("{}-edgehive-{}", well_known::KUBERNETES_VERSION, env!("CARGO_PKG_VERSION")),
            runtime_version: String::new(),
        }
    }
}

/// The node agent module (group `edged`).
#[derive(Debug)]
pub struct NodeAgent {
    cfg: NodeAgentConfig,
}

impl NodeAgent {
    /// An agent for the node `cfg` names.
    pub fn new(cfg: NodeAgentConfig) -> NodeAgent {
        NodeAgent { cfg }
    }
}

/// Now as RFC 3339 in UTC, whole seconds (`Time`) or microseconds (`MicroTime`).
fn now_rfc3339(micros: bool) -> String {
    format_time(time::OffsetDateTime::now_utc(), micros)
}

/// `t` as a meta/v1 `Time` (whole seconds) or `MicroTime`, which Kubernetes
/// always writes with six fractional digits (`2006-01-02T15:04:05.000000Z`):
/// RFC 3339 formatting drops trailing zeros, which kubectl and the Go
/// decoder refuse in a `MicroTime`.
fn format_time(t: time::OffsetDateTime, micros: bool) -> String {
    if micros { edgehive_model::timestamp::micro_time(t) } else { edgehive_model::timestamp::rfc3339(t) }
}

impl NodeAgentConfig {
    /// The Node's `status` as of `now` (RFC 3339).
    pub fn status(&self, now: &str) -> Value {
        let h = &self.host;
        let capacity = json!({"cpu": h.cpus.to_string(), "memory": format!("{}Ki", h.memory_kib), "pods": "110"});
        // Kubelet's default hard eviction threshold (memory.available<100Mi)
        // is not allocatable.
        let allocatable = json!({
            "cpu": h.cpus.to_string(),
            "memory": format!("{}Ki", h.memory_kib.saturating_sub(EVICTION_RESERVE_KIB)),
            "pods": "110",
        });
        let available = available_memory_kib();
        let memory_pressure = available.is_some_and(|a| a < EVICTION_RESERVE_KIB);
        let condition = |ty: &str, pressure: bool, reason_ok: &str, reason_bad: &str, what: &str| {
            json!({
                "type": ty, "status": if pressure { "True" } else { "False" },
                "reason": if pressure { reason_bad } else { reason_ok },
                "message": format!("edgehive has {}{what}", if pressure { "" } else { "no " }),
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            })
        };
        let mut addresses = Vec::new();
        if let Some(ip) = h.internal_ip {
            addresses.push(json!({"type": "InternalIP", "address": ip.to_string()}));
        }
        // Kubelet reports its hostnameOverride — the node's name — not the
        // machine's hostname.
        addresses.push(json!({"type": "Hostname", "address": self.node_name}));
        json!({
            "capacity": capacity,
            "allocatable": allocatable,
            "addresses": addresses,
            "conditions": [
                condition("MemoryPressure", memory_pressure, "KubeletHasSufficientMemory", "KubeletHasInsufficientMemory", "memory pressure"),
                condition("DiskPressure", false, "KubeletHasNoDiskPressure", "KubeletHasDiskPressure", "disk pressure"),
                condition("PIDPressure", false, "KubeletHasSufficientPID", "KubeletHasInsufficientPID", "PID pressure"),
                {
                    "type": "Ready", "status": "True", "reason": "EdgeReady",
                    "message": "edgehive is posting ready status",
                    "lastHeartbeatTime": now, "lastTransitionTime": now,
                },
            ],
            "nodeInfo": {
                "machineID": h.machine_id, "systemUUID": "", "bootID": "",
                "kernelVersion": h.kernel, "osImage": h.os_image,
                "containerRuntimeVersion": self.runtime_version, "kubeletVersion": self.version, "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": h.arch,
            },
        })
    }

    /// The Node this edge registers.
    pub fn node_object(&self) -> Value {
        let n = &self.node_name;
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n, "labels": {
                "node-role.kubernetes.io/edge": "", "node-role.kubernetes.io/agent": "",
                "kubernetes.io/hostname": n, "kubernetes.io/os": "linux", "kubernetes.io/arch": self.host.arch,
            }},
            "spec": {},
            "status": self.status(&now_rfc3339(false)),
        })
    }

    /// The node's Lease, renewed now.
    pub fn lease_object(&self) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.node_name, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": self.node_name,
                "leaseDurationSeconds": self.lease_duration.as_secs(),
                "renewTime": now_rfc3339(true),
            },
        })
    }
}

fn msg(operation: &'static str, resource: String, content: Content) -> Message {
    Message::new().with_route(source::EDGED, group::META, resource, operation).with_content(content)
}

impl Module for NodeAgent {
    fn name(&self) -> &str {
        MODULE
    }

    fn group(&self) -> &str {
        group::EDGED
    }

    fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            let cfg = &self.cfg;
            let node = cfg.node_name.clone();
            let mut connected = false;
            // The cloud takes the link's pings as this node's heartbeat: no
            // Lease renewals. The status still goes on connect and every
            // `liveness_status_interval`, which sets the node Ready again
            // should the cloud have marked it while the session lived.
            let mut session_liveness = false;
            let mut registered = false;
            let mut lease = tokio::time::interval(cfg.lease_interval);
            lease.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut next_status = Instant::now();
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return Ok(()),
                    m = ctx.receive() => {
                        let Some(m) = m else { return Ok(()) };
                        if m.route.operation == op::CONNECT {
                            connected = m.content.as_text().as_deref() == Some(well_known::CLOUD_CONNECTED);
                            session_liveness = connected
                                && well_known::connection_has(&m.header.message_type, well_known::SESSION_LIVENESS);
                            if connected {
                                // Report at once: the cloud may have marked the node NotReady.
                                next_status = Instant::now();
                                lease.reset_immediately();
                            }
                        }
                        continue;
                    }
                    _ = lease.tick() => {}
                }
                if !connected {
                    continue;
                }
                if !registered {
                    let content = Content::from_serialize(&cfg.node_object()).unwrap_or_default();
                    let ask = msg(op::INSERT, format!("default/node/{node}"), content);
                    match ctx.send_sync(METAMANAGER, ask, Duration::from_secs(30)).await {
                        Ok(r) if r.route.operation != op::ERROR => {
                            // The node may exist from an earlier start with its
                            // conditions Unknown: the status below sets them.
                            registered = true;
                            tracing::info!(node = %node, "node registered");
                        }
                        Ok(r) => {
                            tracing::warn!(node = %node, reason = ?r.content.as_text(), "node registration refused")
                        }
                        Err(e) => {
                            tracing::debug!(node = %node, error = %e, "node registration not answered; will retry")
                        }
                    }
                }
                if registered && Instant::now() >= next_status {
                    let patch = json!({"status": cfg.status(&now_rfc3339(false))}).to_string();
                    let m = msg(op::PATCH, format!("default/nodepatch/{node}"), Content::string(&patch));
                    if ctx.send(METAMANAGER, m).await.is_ok() {
                        next_status = Instant::now()
                            + if session_liveness { cfg.liveness_status_interval } else { cfg.status_interval };
                    }
                }
                if session_liveness {
                    continue;
                }
                let content = Content::from_serialize(&cfg.lease_object()).unwrap_or_default();
                let m = msg(op::UPDATE, format!("kube-node-lease/lease/{node}"), content);
                let _ = ctx.send(METAMANAGER, m).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_micro_time_always_has_six_digits() {
        let at = |s: &str| time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).unwrap();
        assert_eq!(format_time(at("2026-11-25T08:37:11.11776Z"), true), "2026-11-25T08:37:11.117760Z");
        assert_eq!(format_time(at("2026-11-25T08:37:11Z"), true), "2026-11-25T08:37:11.000000Z");
        assert_eq!(format_time(at("2026-11-25T09:37:11.5+01:00"), false), "2026-11-25T08:37:11Z");
    }

    #[test]
    fn the_hostname_address_is_the_nodes_name() {
        let host = HostInfo::detect(Some(IpAddr::from([192, 0, 2, 7])));
        let node = NodeAgentConfig::new("edge-hostname-7", host).node_object();
        let addresses = node["status"]["addresses"].as_array().unwrap();
        let of = |ty: &str| addresses.iter().find(|a| a["type"] == ty).map(|a| a["address"].clone());
        assert_eq!(of("Hostname"), Some(json!("edge-hostname-7")));
        assert_eq!(of("InternalIP"), Some(json!("192.0.2.7")));
        assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], "edge-hostname-7");
    }
}
