//! Rows for every kind but Pod: Node, Namespace, ConfigMap, Secret, Service, Endpoints, Event, Lease, and the
//! default table of custom resources (KubeEdge's Device, DeviceModel, ObjectSync, ClusterObjectSync).

use std::collections::BTreeSet;

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{
    age, field, flag, format_labels, human_duration, int, is_go_zero, list, name, object, or, since, text, timestamp,
};

/// Node labels naming a role: `node-role.kubernetes.io/<role>` (any value) ...
const NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
/// ... and the older `kubernetes.io/role: <role>`.
const NODE_ROLE_LABEL: &str = "kubernetes.io/role";

/// NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME.
pub(super) fn node(node: &Value, now: OffsetDateTime) -> Vec<Value> {
    // Only the Ready condition makes the status; the last one listed wins, as in Kubernetes' condition map.
    let ready = list(node, &["status", "conditions"]).iter().rev().find(|c| text(c, &["type"]) == "Ready");
    let mut status = match ready {
        Some(c) if text(c, &["status"]) == "True" => "Ready".to_owned(),
        Some(_) => "NotReady".to_owned(),
        None => "Unknown".to_owned(),
    };
    if flag(node, &["spec", "unschedulable"]) {
        status.push_str(",SchedulingDisabled");
    }

    let mut roles = BTreeSet::new();
    for (key, value) in object(node, &["metadata", "labels"]).into_iter().flatten() {
        if let Some(role) = key.strip_prefix(NODE_ROLE_PREFIX).filter(|role| !role.is_empty()) {
            roles.insert(role);
        } else if key == NODE_ROLE_LABEL
            && let Some(role) = value.as_str().filter(|role| !role.is_empty())
        {
            roles.insert(role);
        }
    }
    let roles = if roles.is_empty() { "<none>".to_owned() } else { roles.into_iter().collect::<Vec<_>>().join(",") };

    let address = |kind: &str| {
        let found = list(node, &["status", "addresses"]).iter().find(|a| text(a, &["type"]) == kind);
        or(found.map_or("", |a| text(a, &["address"])), "<none>")
    };
    let info = |key: &str| or(text(node, &["status", "nodeInfo", key]), "<unknown>");
    vec![
        name(node),
        status.into(),
        roles.into(),
        age(node, now),
        text(node, &["status", "nodeInfo", "kubeletVersion"]).into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
}

/// NAME STATUS AGE. The API server gives every namespace the phase Active at creation; a namespace stored without
/// a phase reads as Active too.
pub(super) fn namespace(ns: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(ns), or(text(ns, &["status", "phase"]), "Active").into(), age(ns, now)]
}

/// NAME DATA AGE, DATA counting the keys of `data` and `binaryData`.
pub(super) fn config_map(cm: &Value, now: OffsetDateTime) -> Vec<Value> {
    let keys = |key: &str| object(cm, &[key]).map_or(0, |m| m.len());
    vec![name(cm), (keys("data") + keys("binaryData")).into(), age(cm, now)]
}

/// NAME TYPE DATA AGE. The API server folds `stringData` into `data` and defaults the type to Opaque on write; a
/// secret stored as sent reads the same way, so DATA counts the distinct keys of both maps.
pub(super) fn secret(secret: &Value, now: OffsetDateTime) -> Vec<Value> {
    let keys: BTreeSet<&str> = ["data", "stringData"]
        .iter()
        .filter_map(|key| object(secret, &[key]))
        .flat_map(|m| m.keys().map(String::as_str))
        .collect();
    vec![name(secret), or(text(secret, &["type"]), "Opaque").into(), keys.len().into(), age(secret, now)]
}

/// NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE SELECTOR.
pub(super) fn service(svc: &Value, now: OffsetDateTime) -> Vec<Value> {
    // The API server defaults the type to ClusterIP and each port's protocol to TCP.
    let kind = or(text(svc, &["spec", "type"]), "ClusterIP");
    let cluster_ip = match text(svc, &["spec", "clusterIP"]) {
        "" => list(svc, &["spec", "clusterIPs"]).first().and_then(Value::as_str).unwrap_or(""),
        ip => ip,
    };
    let ports: Vec<String> = list(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let (port, node_port, protocol) =
                (int(p, &["port"]), int(p, &["nodePort"]), or(text(p, &["protocol"]), "TCP"));
            if node_port > 0 { format!("{port}:{node_port}/{protocol}") } else { format!("{port}/{protocol}") }
        })
        .collect();
    vec![
        name(svc),
        kind.as_str().into(),
        or(cluster_ip, "<none>").into(),
        external_ip(svc, &kind).into(),
        or(&ports.join(","), "<none>").into(),
        age(svc, now),
        format_labels(object(svc, &["spec", "selector"])).into(),
    ]
}

/// The EXTERNAL-IP cell, by service type (never clipped: Kubernetes renders server-side tables as wide).
fn external_ip(svc: &Value, kind: &str) -> String {
    let external: Vec<&str> = list(svc, &["spec", "externalIPs"]).iter().filter_map(Value::as_str).collect();
    match kind {
        "ClusterIP" | "NodePort" => or(&external.join(","), "<none>"),
        "LoadBalancer" => {
            // Load-balancer ingress points, sorted and without duplicates, then the external IPs.
            let ingress: BTreeSet<&str> = list(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .map(|i| match text(i, &["ip"]) {
                    "" => text(i, &["hostname"]),
                    ip => ip,
                })
                .filter(|s| !s.is_empty())
                .collect();
            let all: Vec<&str> = ingress.into_iter().chain(external).collect();
            or(&all.join(","), "<pending>")
        }
        "ExternalName" => text(svc, &["spec", "externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

/// How many endpoints the ENDPOINTS cell lists before "+ N more...".
const ENDPOINTS_SHOWN: usize = 3;

/// NAME ENDPOINTS AGE: up to three ready "ip:port" pairs (bare IPs for subsets without ports), then how many more.
pub(super) fn endpoints(ep: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(ep), format_endpoints(ep).into(), age(ep, now)]
}

fn format_endpoints(ep: &Value) -> String {
    let subsets = list(ep, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    let mut shown = Vec::new();
    let mut count = 0;
    for subset in subsets {
        let addresses: Vec<&str> = list(subset, &["addresses"]).iter().map(|a| text(a, &["ip"])).collect();
        let ports = list(subset, &["ports"]);
        if ports.is_empty() {
            // Headless services may have no ports: list the bare addresses.
            count += addresses.len();
            shown.extend(addresses.iter().map(|ip| (*ip).to_owned()));
        } else {
            for port in ports {
                count += addresses.len();
                let port = int(port, &["port"]);
                // Joined as Go's net.JoinHostPort does: IPv6 addresses in brackets.
                shown.extend(
                    addresses
                        .iter()
                        .map(|ip| if ip.contains(':') { format!("[{ip}]:{port}") } else { format!("{ip}:{port}") }),
                );
            }
        }
    }
    shown.truncate(ENDPOINTS_SHOWN);
    let list = shown.join(",");
    if count > ENDPOINTS_SHOWN { format!("{list} + {} more...", count - ENDPOINTS_SHOWN) } else { list }
}

/// LAST-SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST-SEEN COUNT NAME.
pub(super) fn event(ev: &Value, now: OffsetDateTime) -> Vec<Value> {
    // Events of the newer API carry eventTime and a series instead of first/last timestamps and a count.
    let first_seen = match timestamp(ev, &["firstTimestamp"]) {
        Some(first) => since(Some(first), now),
        None => since(timestamp(ev, &["eventTime"]), now),
    };
    let mut last_seen = match timestamp(ev, &["lastTimestamp"]) {
        Some(last) => since(Some(last), now),
        None => first_seen.clone(),
    };
    let mut count = int(ev, &["count"]);
    if let Some(series) = field(ev, &["series"]) {
        last_seen = since(timestamp(series, &["lastObservedTime"]), now);
        count = int(series, &["count"]);
    } else if count == 0 {
        // Singleton events of the new API have no count.
        count = 1;
    }

    let kind = text(ev, &["involvedObject", "kind"]).to_lowercase();
    let object = match text(ev, &["involvedObject", "name"]) {
        "" => kind,
        object_name => format!("{kind}/{object_name}"),
    };
    // Source: component (or reportingComponent), then ", host" (or reportingInstance) when there is one.
    let component = or(text(ev, &["source", "component"]), text(ev, &["reportingComponent"]));
    let host = or(text(ev, &["source", "host"]), text(ev, &["reportingInstance"]));
    let source = if host.is_empty() { component } else { format!("{component}, {host}") };

    vec![
        last_seen.into(),
        text(ev, &["type"]).into(),
        text(ev, &["reason"]).into(),
        object.into(),
        text(ev, &["involvedObject", "fieldPath"]).into(),
        source.into(),
        text(ev, &["message"]).trim().into(),
        first_seen.into(),
        count.into(),
        name(ev),
    ]
}

/// NAME HOLDER AGE.
pub(super) fn lease(lease: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(lease), text(lease, &["spec", "holderIdentity"]).into(), age(lease, now)]
}

/// NAME AGE as the CRD handler serves it: the AGE cell comes from `.metadata.creationTimestamp` through the "date"
/// column rule — null when the field is absent, "<unknown>" when empty or Go's zero time, "<invalid>" when it does
/// not parse, else the human duration since then.
pub(super) fn custom_resource(obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    let age = match field(obj, &["metadata", "creationTimestamp"]) {
        Some(Value::String(raw)) if raw.is_empty() || raw == "null" => "<unknown>".into(),
        Some(Value::String(raw)) => match OffsetDateTime::parse(raw, &Rfc3339) {
            Ok(created) if is_go_zero(created) => "<unknown>".into(),
            Ok(created) => human_duration(now - created).into(),
            Err(_) => "<invalid>".into(),
        },
        _ => Value::Null,
    };
    vec![name(obj), age]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::parse("2024-05-01T12:00:00Z", &Rfc3339).unwrap()
    }

    fn row(group: &str, kind: &str, obj: &Value) -> Vec<Value> {
        let row = super::super::cells(group, kind, obj, now());
        assert_eq!(row.len(), super::super::columns(group, kind).len(), "{group}/{kind}");
        row
    }

    fn edge_node(ready: &str, unschedulable: bool) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "edge-node-1", "creationTimestamp": "2024-04-26T12:00:00Z",
                         "labels": {"kubernetes.io/hostname": "edge-node-1",
                                    "node-role.kubernetes.io/edge": "", "node-role.kubernetes.io/agent": ""}},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}],
                "addresses": [{"type": "Hostname", "address": "edge-node-1"},
                              {"type": "InternalIP", "address": "192.168.1.20"}],
                "nodeInfo": {"kubeletVersion": "v1.29.5-kubeedge-v1.18.0", "osImage": "Ubuntu 22.04.4 LTS",
                             "kernelVersion": "5.15.0-105-generic", "containerRuntimeVersion": "containerd://1.7.2"}
            }
        })
    }

    #[test]
    fn ready_edge_node_with_roles() {
        assert_eq!(
            row("", "Node", &edge_node("True", false)),
            [
                json!("edge-node-1"),
                json!("Ready"),
                json!("agent,edge"),
                json!("5d"),
                json!("v1.29.5-kubeedge-v1.18.0"),
                json!("192.168.1.20"),
                json!("<none>"),
                json!("Ubuntu 22.04.4 LTS"),
                json!("5.15.0-105-generic"),
                json!("containerd://1.7.2")
            ]
        );
    }

    #[test]
    fn not_ready_node_and_legacy_role_label() {
        let node = json!({
            "metadata": {"name": "master", "creationTimestamp": "2024-05-01T08:30:00Z",
                         "labels": {"kubernetes.io/role": "master", "node-role.kubernetes.io/control-plane": "",
                                    "node-role.kubernetes.io/": "x"}},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}],
                       "addresses": [{"type": "ExternalIP", "address": "203.0.113.7"}]}
        });
        assert_eq!(
            row("", "Node", &node),
            [
                json!("master"),
                json!("NotReady"),
                json!("control-plane,master"),
                json!("3h30m"),
                json!(""),
                json!("<none>"),
                json!("203.0.113.7"),
                json!("<unknown>"),
                json!("<unknown>"),
                json!("<unknown>")
            ]
        );
    }

    #[test]
    fn cordoned_nodes() {
        assert_eq!(row("", "Node", &edge_node("True", true))[1], json!("Ready,SchedulingDisabled"));
        assert_eq!(row("", "Node", &edge_node("False", true))[1], json!("NotReady,SchedulingDisabled"));
        let bare = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert_eq!(
            row("", "Node", &bare)[..4],
            [json!("n"), json!("Unknown,SchedulingDisabled"), json!("<none>"), json!("<unknown>")]
        );
    }

    #[test]
    fn namespace_row() {
        let ns = json!({"metadata": {"name": "kubeedge", "creationTimestamp": "2024-05-01T11:58:30Z"},
                        "status": {"phase": "Terminating"}});
        assert_eq!(row("", "Namespace", &ns), [json!("kubeedge"), json!("Terminating"), json!("90s")]);
        assert_eq!(row("", "Namespace", &json!({"metadata": {"name": "new"}}))[1], json!("Active"));
    }

    #[test]
    fn secret_row() {
        let secret = json!({
            "metadata": {"name": "tokensecret", "namespace": "kubeedge", "creationTimestamp": "2024-04-01T12:00:00Z"},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": "LS0t", "tls.key": "LS0t", "ca.crt": "LS0t"}
        });
        assert_eq!(
            row("", "Secret", &secret),
            [json!("tokensecret"), json!("kubernetes.io/tls"), json!(3), json!("30d")]
        );
        let sent = json!({"metadata": {"name": "s"}, "data": {"a": "YQ=="}, "stringData": {"a": "x", "b": "y"}});
        assert_eq!(row("", "Secret", &sent), [json!("s"), json!("Opaque"), json!(2), json!("<unknown>")]);
    }

    #[test]
    fn config_map_with_binary_data() {
        let cm = json!({
            "metadata": {"name": "edgecore-config", "creationTimestamp": "2024-05-01T11:55:00Z"},
            "data": {"edgecore.yaml": "apiVersion: edgecore.config.kubeedge.io/v1alpha2", "mode": "edge"},
            "binaryData": {"logo.png": "iVBORw0KGgo="}
        });
        assert_eq!(row("", "ConfigMap", &cm), [json!("edgecore-config"), json!(3), json!("5m")]);
        assert_eq!(
            row("", "ConfigMap", &json!({"metadata": {"name": "empty"}})),
            [json!("empty"), json!(0), json!("<unknown>")]
        );
    }

    #[test]
    fn service_with_ports() {
        let svc = json!({
            "metadata": {"name": "cloudcore", "namespace": "kubeedge", "creationTimestamp": "2024-04-29T12:00:00Z"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.12.34", "clusterIPs": ["10.96.12.34"],
                     "selector": {"kubeedge": "cloudcore", "app": "cloudcore"},
                     "ports": [{"name": "cloudhub", "port": 10000, "nodePort": 30000, "protocol": "TCP"},
                               {"name": "cloudhub-quic", "port": 10001, "nodePort": 30001, "protocol": "UDP"},
                               {"name": "cloudstream", "port": 10003}]}
        });
        assert_eq!(
            row("", "Service", &svc),
            [
                json!("cloudcore"),
                json!("NodePort"),
                json!("10.96.12.34"),
                json!("<none>"),
                json!("10000:30000/TCP,10001:30001/UDP,10003/TCP"),
                json!("2d"),
                json!("app=cloudcore,kubeedge=cloudcore")
            ]
        );
    }

    #[test]
    fn service_types() {
        let headless = json!({"metadata": {"name": "h"}, "spec": {"clusterIPs": ["None"]}});
        assert_eq!(
            row("", "Service", &headless)[1..5],
            [json!("ClusterIP"), json!("None"), json!("<none>"), json!("<none>")]
        );
        let lb = json!({"spec": {"type": "LoadBalancer", "externalIPs": ["198.51.100.9"]},
                        "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}, {"ip": "203.0.113.5"},
                                                                {"ip": "203.0.113.5"}]}}});
        assert_eq!(row("", "Service", &lb)[3], json!("203.0.113.5,lb.example.com,198.51.100.9"));
        let pending = json!({"spec": {"type": "LoadBalancer"}});
        assert_eq!(row("", "Service", &pending)[3], json!("<pending>"));
        let ext = json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        assert_eq!(row("", "Service", &ext)[2..4], [json!("<none>"), json!("db.example.com")]);
        let ips =
            json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.1", "externalIPs": ["1.2.3.4", "5.6.7.8"]}});
        assert_eq!(row("", "Service", &ips)[3], json!("1.2.3.4,5.6.7.8"));
        assert_eq!(row("", "Service", &json!({"spec": {"type": "Weird"}}))[3], json!("<unknown>"));
    }

    #[test]
    fn endpoints_rows() {
        let ep = json!({
            "metadata": {"name": "cloudcore", "creationTimestamp": "2024-05-01T11:59:50Z"},
            "subsets": [{"addresses": [{"ip": "10.244.0.5"}, {"ip": "fd00::5"}],
                         "notReadyAddresses": [{"ip": "10.244.0.6"}],
                         "ports": [{"port": 10000}, {"port": 10002}]}]
        });
        assert_eq!(
            row("", "Endpoints", &ep),
            [json!("cloudcore"), json!("10.244.0.5:10000,[fd00::5]:10000,10.244.0.5:10002 + 1 more..."), json!("10s")]
        );
        let headless = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}]});
        assert_eq!(row("", "Endpoints", &headless)[1], json!("10.0.0.1,10.0.0.2"));
        assert_eq!(row("", "Endpoints", &json!({}))[1], json!("<none>"));
        assert_eq!(
            row("", "Endpoints", &json!({"subsets": [{"notReadyAddresses": [{"ip": "1.1.1.1"}]}]}))[1],
            json!("")
        );
    }

    #[test]
    fn event_row() {
        let ev = json!({
            "metadata": {"name": "nginx.17c8a1b2c3d4e5f6", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "nginx", "fieldPath": "spec.containers{nginx}"},
            "reason": "BackOff", "message": "Back-off restarting failed container\n", "type": "Warning",
            "source": {"component": "kubelet", "host": "edge-node-1"},
            "firstTimestamp": "2024-05-01T11:00:00Z", "lastTimestamp": "2024-05-01T11:59:15Z", "count": 12
        });
        assert_eq!(
            row("", "Event", &ev),
            [
                json!("45s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/nginx"),
                json!("spec.containers{nginx}"),
                json!("kubelet, edge-node-1"),
                json!("Back-off restarting failed container"),
                json!("60m"),
                json!(12),
                json!("nginx.17c8a1b2c3d4e5f6")
            ]
        );
    }

    #[test]
    fn new_style_events() {
        let single = json!({
            "metadata": {"name": "e1"}, "involvedObject": {"kind": "Node"},
            "eventTime": "2024-05-01T11:58:00.123456Z", "reportingComponent": "cloudcore", "type": "Normal"
        });
        assert_eq!(
            row("", "Event", &single),
            [
                json!("119s"),
                json!("Normal"),
                json!(""),
                json!("node"),
                json!(""),
                json!("cloudcore"),
                json!(""),
                json!("119s"),
                json!(1),
                json!("e1")
            ]
        );
        let series = json!({"eventTime": "2024-05-01T10:00:00.000000Z", "reportingInstance": "edge-1",
                            "series": {"count": 4, "lastObservedTime": "2024-05-01T11:59:00.000000Z"}});
        let cells = row("", "Event", &series);
        assert_eq!(
            (&cells[0], &cells[5], &cells[7], &cells[8]),
            (&json!("60s"), &json!(", edge-1"), &json!("120m"), &json!(4))
        );
        assert_eq!(row("", "Event", &json!({}))[0], json!("<unknown>"));
    }

    #[test]
    fn lease_row() {
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "edge-node-1", "namespace": "kube-node-lease",
                         "creationTimestamp": "2024-04-26T12:00:00Z"},
            "spec": {"holderIdentity": "edge-node-1", "leaseDurationSeconds": 40,
                     "renewTime": "2024-05-01T11:59:58.000000Z"}
        });
        assert_eq!(
            row("coordination.k8s.io", "Lease", &lease),
            [json!("edge-node-1"), json!("edge-node-1"), json!("5d")]
        );
        assert_eq!(row("coordination.k8s.io", "Lease", &json!({"spec": {}}))[1], json!(""));
    }

    #[test]
    fn device_uses_the_crd_default_table() {
        let device = json!({
            "apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
            "metadata": {"name": "temperature-sensor", "namespace": "default",
                         "creationTimestamp": "2024-05-01T11:59:55Z"},
            "spec": {"deviceModelRef": {"name": "temperature-model"}, "protocol": {"protocolName": "modbus"},
                     "nodeName": "edge-node-1"}
        });
        let columns = super::super::columns("devices.kubeedge.io", "Device");
        assert_eq!(
            columns.iter().map(|c| (c.name, c.kind, c.format)).collect::<Vec<_>>(),
            [("Name", "string", "name"), ("Age", "date", "")]
        );
        assert_eq!(row("devices.kubeedge.io", "Device", &device), [json!("temperature-sensor"), json!("5s")]);
        for (group, kind) in [
            ("devices.kubeedge.io", "DeviceModel"),
            ("reliablesyncs.kubeedge.io", "ObjectSync"),
            ("reliablesyncs.kubeedge.io", "ClusterObjectSync"),
        ] {
            assert_eq!(super::super::columns(group, kind), columns);
            assert_eq!(row(group, kind, &device), [json!("temperature-sensor"), json!("5s")]);
        }
    }

    #[test]
    fn crd_age_edge_cases() {
        let with = |created: Value| json!({"metadata": {"name": "d", "creationTimestamp": created}});
        assert_eq!(row("x.io", "Thing", &json!({"metadata": {"name": "d"}})), [json!("d"), Value::Null]);
        assert_eq!(row("x.io", "Thing", &with(Value::Null))[1], Value::Null);
        assert_eq!(row("x.io", "Thing", &with(json!(5)))[1], Value::Null);
        assert_eq!(row("x.io", "Thing", &with(json!("")))[1], json!("<unknown>"));
        assert_eq!(row("x.io", "Thing", &with(json!("0001-01-01T00:00:00Z")))[1], json!("<unknown>"));
        assert_eq!(row("x.io", "Thing", &with(json!("last tuesday")))[1], json!("<invalid>"));
        assert_eq!(row("x.io", "Thing", &with(json!("2024-05-01T12:00:05Z")))[1], json!("<invalid>"));
        assert_eq!(row("x.io", "Thing", &with(json!("2024-05-01T12:00:01+00:00")))[1], json!("0s"));
    }
}
