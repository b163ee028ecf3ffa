//! Whole-body tests: hand-built protobuf bodies for each supported type, checked against the
//! JSON Go's `encoding/json` writes for the same object, plus hostile-input tests.
//!
//! The bodies are built the way gogo-protobuf (which Kubernetes uses) writes them: every
//! non-pointer scalar is on the wire even when zero, non-nullable messages are always
//! written (possibly empty), pointers only when set. Field numbers were taken from the
//! `generated.proto` text independently of the descriptor tables.

use serde_json::{Value, json};

use super::testenc::{Enc, envelope, int_val, new_object_meta, quantity, str_val, time};
use super::{ProtoError, decode, supports};

fn decoded(body: &[u8]) -> Value {
    match decode(body) {
        Ok((_, _, object)) => object,
        Err(e) => panic!("decode failed: {e}"),
    }
}

/// `kubectl create configmap lit --from-literal=k=v`.
pub(super) fn config_map_body() -> Vec<u8> {
    envelope("v1", "ConfigMap", Enc::new().msg(1, new_object_meta("lit", "default")).entry(2, "k", "v"))
}

#[test]
fn config_map_from_literal() {
    let (api_version, kind, object) = decode(&config_map_body()).expect("decodes");
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "ConfigMap"));
    assert_eq!(
        object,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "lit", "namespace": "default"},
            "data": {"k": "v"}
        })
    );
}

#[test]
fn config_map_binary_data_and_immutable() {
    let object = Enc::new()
        .msg(1, new_object_meta("bin", ""))
        .bytes_entry(3, "blob", &[0xde, 0xad, 0xbe, 0xef])
        .entry(2, "b", "2")
        .entry(2, "a", "1")
        .bool(4, true);
    assert_eq!(
        decoded(&envelope("v1", "ConfigMap", object)),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "bin"},
            "data": {"a": "1", "b": "2"},
            "binaryData": {"blob": "3q2+7w=="},
            "immutable": true
        })
    );
}

#[test]
fn secret_with_binary_data() {
    let object = Enc::new()
        .msg(1, new_object_meta("creds", "default"))
        .bytes_entry(2, "key.bin", &[0, 1, 2, 0xff])
        .bytes_entry(2, "empty", b"")
        .str(3, "Opaque")
        // A pointer: `immutable: false` was set explicitly and must survive.
        .bool(5, false);
    assert_eq!(
        decoded(&envelope("v1", "Secret", object)),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "default"},
            "data": {"key.bin": "AAEC/w==", "empty": ""},
            "type": "Opaque",
            "immutable": false
        })
    );
}

#[test]
fn namespace_with_labels_spec_and_status() {
    let meta = new_object_meta("team-a", "").entry(11, "team", "a").entry(12, "note", "x");
    let object = Enc::new().msg(1, meta).msg(2, Enc::new().str(1, "kubernetes")).msg(
        3,
        Enc::new().str(1, "Active").msg(
            2,
            Enc::new()
                .str(1, "NamespaceDeletionDiscoveryFailure")
                .str(2, "False")
                .msg(4, time(1_700_000_000, 0))
                .str(5, "")
                .str(6, ""),
        ),
    );
    assert_eq!(
        decoded(&envelope("v1", "Namespace", object)),
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-a", "labels": {"team": "a"}, "annotations": {"note": "x"}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active", "conditions": [{
                "type": "NamespaceDeletionDiscoveryFailure",
                "status": "False",
                "lastTransitionTime": "2023-11-14T22:13:20Z"
            }]}
        })
    );
    // `kubectl create namespace x`: empty spec and status are written, and kept, as Go does.
    let bare = Enc::new().msg(1, new_object_meta("x", "")).msg(2, Enc::new()).msg(3, Enc::new().str(1, ""));
    assert_eq!(
        decoded(&envelope("v1", "Namespace", bare)),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}, "spec": {}, "status": {}})
    );
}

/// A `ServicePort` as gogo writes it.
fn service_port(name: &str, port: i64, target: Enc) -> Enc {
    Enc::new().str(1, name).str(2, "TCP").int(3, port).msg(4, target).int(5, 0)
}

#[test]
fn service_with_int_and_string_target_ports() {
    // `kubectl create service clusterip web --tcp=80:8080`, plus a named target port.
    let spec = Enc::new()
        .msg(1, service_port("80-8080", 80, int_val(8080)))
        .msg(1, service_port("https", 443, str_val("https")).str(6, "kubernetes.io/h2c"))
        .entry(2, "app", "web")
        .str(3, "")
        .str(4, "ClusterIP")
        .str(7, "")
        .str(8, "")
        .str(10, "")
        .str(11, "")
        .int(12, 0)
        .bool(13, false)
        .str(18, "10.0.0.10")
        .str(19, "IPv4")
        .str(17, "SingleStack")
        .str(22, "Cluster");
    let status = Enc::new().msg(1, Enc::new());
    let object = Enc::new().msg(1, new_object_meta("web", "default")).msg(2, spec).msg(3, status);
    assert_eq!(
        decoded(&envelope("v1", "Service", object)),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "ports": [
                    {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                    {"name": "https", "protocol": "TCP", "port": 443, "targetPort": "https",
                     "appProtocol": "kubernetes.io/h2c"}
                ],
                "selector": {"app": "web"},
                "type": "ClusterIP",
                "clusterIPs": ["10.0.0.10"],
                "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack",
                "internalTrafficPolicy": "Cluster"
            },
            "status": {"loadBalancer": {}}
        })
    );
}

#[test]
fn service_load_balancer_status_and_conditions() {
    let ingress = Enc::new().str(1, "192.0.2.1").str(2, "").str(3, "VIP").msg(4, Enc::new().int(1, 80).str(2, "TCP"));
    let condition = Enc::new().str(1, "Ready").str(2, "True").int(3, 2).msg(4, time(0, 0)).str(5, "Ok").str(6, "");
    let status = Enc::new().msg(1, Enc::new().msg(1, ingress)).msg(2, condition);
    let spec = Enc::new().str(4, "LoadBalancer").bool(20, false).msg(14, Enc::new().msg(1, Enc::new().int(1, 10800)));
    let object = Enc::new().msg(1, new_object_meta("lb", "default")).msg(2, spec).msg(3, status);
    let got = decoded(&envelope("v1", "Service", object));
    assert_eq!(
        got["spec"],
        json!({
            "type": "LoadBalancer",
            "allocateLoadBalancerNodePorts": false,
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}
        })
    );
    assert_eq!(
        got["status"],
        json!({
            "loadBalancer": {"ingress": [{"ip": "192.0.2.1", "ipMode": "VIP",
                                          "ports": [{"port": 80, "protocol": "TCP"}]}]},
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2,
                            "lastTransitionTime": "1970-01-01T00:00:00Z", "reason": "Ok",
                            "message": ""}]
        })
    );
}

#[test]
fn endpoints_with_subsets() {
    let target =
        Enc::new().str(1, "Pod").str(2, "default").str(3, "web-1").str(4, "uid-1").str(5, "").str(6, "").str(7, "");
    let address = Enc::new().str(1, "10.1.0.5").str(3, "").str(4, "edge-1").msg(2, target);
    let subset = Enc::new()
        .msg(1, address)
        .msg(2, Enc::new().str(1, "10.1.0.6"))
        .msg(3, Enc::new().str(1, "").int(2, 8080).str(3, "TCP"));
    let object = Enc::new().msg(1, new_object_meta("web", "default")).msg(2, subset);
    assert_eq!(
        decoded(&envelope("v1", "Endpoints", object))["subsets"],
        json!([{
            "addresses": [{"ip": "10.1.0.5", "nodeName": "edge-1",
                           "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "uid-1"}}],
            "notReadyAddresses": [{"ip": "10.1.0.6"}],
            "ports": [{"port": 8080, "protocol": "TCP"}]
        }])
    );
}

#[test]
fn event_with_source_series_and_micro_time() {
    let object = Enc::new()
        .msg(1, new_object_meta("web.1", "default"))
        .msg(2, Enc::new().str(1, "Pod").str(3, "web"))
        .str(3, "Started")
        .str(4, "Started container")
        .msg(5, Enc::new().str(1, "kubelet").str(2, "edge-1"))
        .msg(6, time(1_700_000_000, 0))
        .msg(7, Enc::new())
        .int(8, 1)
        .str(9, "Normal")
        .msg(10, time(1_700_000_000, 123_456_789))
        .msg(11, Enc::new().int(1, 3).msg(2, time(1_700_000_001, 5_000)))
        .str(14, "")
        .str(15, "");
    assert_eq!(
        decoded(&envelope("v1", "Event", object)),
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web"},
            "reason": "Started",
            "message": "Started container",
            "source": {"component": "kubelet", "host": "edge-1"},
            "firstTimestamp": "2023-11-14T22:13:20Z",
            "count": 1,
            "type": "Normal",
            "eventTime": "2023-11-14T22:13:20.123456Z",
            "series": {"count": 3, "lastObservedTime": "2023-11-14T22:13:21.000005Z"},
            "reportingComponent": "",
            "reportingInstance": ""
        })
    );
}

fn node_condition(kind: &str, status: &str) -> Enc {
    Enc::new()
        .str(1, kind)
        .str(2, status)
        .msg(3, time(1_700_000_000, 0))
        .msg(4, time(1_699_999_000, 0))
        .str(5, "KubeletReady")
        .str(6, "kubelet is posting ready status")
}

#[test]
fn node_with_conditions_capacity_and_taints() {
    let spec = Enc::new()
        .str(1, "10.244.1.0/24")
        .str(7, "10.244.1.0/24")
        .bool(4, true)
        .msg(5, Enc::new().str(1, "node-role.kubernetes.io/edge").str(2, "").str(3, "NoSchedule"));
    let info = Enc::new()
        .str(1, "m")
        .str(2, "u")
        .str(3, "b")
        .str(4, "6.1.0")
        .str(5, "Debian")
        .str(6, "containerd://1.7")
        .str(7, "v1.31.0-edgehive")
        .str(8, "")
        .str(9, "linux")
        .str(10, "arm64");
    let status = Enc::new()
        .quantity_entry(1, "cpu", "4")
        .quantity_entry(1, "memory", "8049836Ki")
        .quantity_entry(1, "pods", "110")
        .quantity_entry(2, "cpu", "3800m")
        .str(3, "")
        .msg(4, node_condition("Ready", "True"))
        .msg(4, node_condition("MemoryPressure", "False"))
        .msg(5, Enc::new().str(1, "InternalIP").str(2, "192.168.1.20"))
        .msg(6, Enc::new().msg(1, Enc::new().int(1, 10250)))
        .msg(7, info)
        .msg(8, Enc::new().str(1, "nginx:1.27").str(1, "nginx@sha256:abc").int(2, 67_000_000));
    let object = Enc::new()
        .msg(1, new_object_meta("edge-1", "").entry(11, "kubernetes.io/arch", "arm64"))
        .msg(2, spec)
        .msg(3, status);
    let condition = |kind: &str, status: &str| {
        json!({"type": kind, "status": status, "lastHeartbeatTime": "2023-11-14T22:13:20Z",
               "lastTransitionTime": "2023-11-14T21:56:40Z", "reason": "KubeletReady",
               "message": "kubelet is posting ready status"})
    };
    assert_eq!(
        decoded(&envelope("v1", "Node", object)),
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "edge-1", "labels": {"kubernetes.io/arch": "arm64"}},
            "spec": {
                "podCIDR": "10.244.1.0/24",
                "podCIDRs": ["10.244.1.0/24"],
                "unschedulable": true,
                "taints": [{"key": "node-role.kubernetes.io/edge", "effect": "NoSchedule"}]
            },
            "status": {
                "capacity": {"cpu": "4", "memory": "8049836Ki", "pods": "110"},
                "allocatable": {"cpu": "3800m"},
                "conditions": [condition("Ready", "True"), condition("MemoryPressure", "False")],
                "addresses": [{"type": "InternalIP", "address": "192.168.1.20"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": "m", "systemUUID": "u", "bootID": "b", "kernelVersion": "6.1.0",
                    "osImage": "Debian", "containerRuntimeVersion": "containerd://1.7",
                    "kubeletVersion": "v1.31.0-edgehive", "kubeProxyVersion": "",
                    "operatingSystem": "linux", "architecture": "arm64"
                },
                "images": [{"names": ["nginx:1.27", "nginx@sha256:abc"], "sizeBytes": 67_000_000}]
            }
        })
    );
}

/// A pod with the parts client-go programs commonly send.
pub(super) fn pod_body() -> Vec<u8> {
    let owner = Enc::new().str(5, "apps/v1").str(1, "ReplicaSet").str(3, "web-6d4").str(4, "rs-uid").bool(6, true);
    let managed = Enc::new()
        .str(1, "kubectl")
        .str(2, "Update")
        .str(3, "v1")
        .msg(4, time(1_700_000_000, 0))
        .str(6, "FieldsV1")
        .msg(7, Enc::new().bytes(1, br#"{"f:spec":{"f:containers":{}}}"#));
    let meta = new_object_meta("web", "default")
        .entry(11, "app", "web")
        .msg(13, owner)
        .str(14, "example.com/guard")
        .msg(17, managed);
    let config_volume = Enc::new().str(1, "cfg").msg(
        2,
        Enc::new().msg(
            19,
            Enc::new()
                .msg(1, Enc::new().str(1, "web-config"))
                .msg(2, Enc::new().str(1, "a").str(2, "a.txt"))
                .int(3, 0o644),
        ),
    );
    let scratch_volume =
        Enc::new().str(1, "scratch").msg(2, Enc::new().msg(2, Enc::new().str(1, "").msg(2, quantity("1Gi"))));
    let env_literal = Enc::new().str(1, "MODE").str(2, "prod");
    let env_from_config = Enc::new()
        .str(1, "LEVEL")
        .str(2, "")
        .msg(3, Enc::new().msg(3, Enc::new().msg(1, Enc::new().str(1, "web-config")).str(2, "level").bool(3, false)));
    let env_from_field =
        Enc::new().str(1, "NODE").str(2, "").msg(3, Enc::new().msg(1, Enc::new().str(1, "v1").str(2, "spec.nodeName")));
    let resources = Enc::new()
        .quantity_entry(1, "cpu", "500m")
        .quantity_entry(1, "memory", "128Mi")
        .quantity_entry(2, "cpu", "250m");
    let probe = Enc::new()
        .msg(1, Enc::new().msg(2, Enc::new().str(1, "/healthz").msg(2, int_val(8080)).str(3, "").str(4, "HTTP")))
        .int(2, 5)
        .int(3, 1)
        .int(4, 10)
        .int(5, 1)
        .int(6, 3);
    let container = Enc::new()
        .str(1, "app")
        .str(2, "nginx:1.27")
        .str(3, "nginx")
        .str(4, "-g")
        .str(4, "daemon off;")
        .str(5, "")
        .msg(6, Enc::new().str(1, "http").int(2, 0).int(3, 80).str(4, "TCP").str(5, ""))
        .msg(7, env_literal)
        .msg(7, env_from_config)
        .msg(7, env_from_field)
        .msg(19, Enc::new().str(1, "CFG_").msg(2, Enc::new().msg(1, Enc::new().str(1, "web-config"))))
        .msg(8, resources)
        .msg(9, Enc::new().str(1, "cfg").bool(2, true).str(3, "/etc/web").str(4, ""))
        .msg(10, probe)
        .msg(12, Enc::new().msg(2, Enc::new().msg(1, Enc::new().str(1, "sh").str(1, "-c").str(1, "sleep 5"))))
        .str(13, "/dev/termination-log")
        .str(14, "IfNotPresent")
        .msg(15, Enc::new().msg(1, Enc::new().str(2, "NET_RAW")).bool(2, false).int(4, 1000).bool(7, false))
        .bool(16, false)
        .bool(17, false)
        .bool(18, false)
        .str(20, "File");
    let affinity = Enc::new().msg(
        1,
        Enc::new().msg(
            1,
            Enc::new().msg(1, Enc::new().msg(1, Enc::new().str(1, "node-role.kubernetes.io/edge").str(2, "Exists"))),
        ),
    );
    let spec = Enc::new()
        .msg(1, config_volume)
        .msg(1, scratch_volume)
        .msg(2, container)
        .str(3, "Always")
        .int(4, 30)
        .str(6, "ClusterFirst")
        .entry(7, "kubernetes.io/os", "linux")
        .str(8, "default")
        .str(9, "")
        .str(10, "")
        .bool(11, false)
        .bool(12, false)
        .bool(13, false)
        .msg(14, Enc::new().int(2, 0).bool(3, false).msg(10, Enc::new().str(1, "RuntimeDefault")))
        .str(16, "")
        .str(17, "")
        .msg(18, affinity)
        .str(19, "default-scheduler")
        .msg(22, Enc::new().str(1, "").str(2, "Exists").str(3, "").str(4, "NoExecute").int(5, 300))
        .int(25, 0)
        .bool(30, true)
        .str(31, "PreemptLowerPriority");
    let running = Enc::new().msg(2, Enc::new().msg(1, time(1_700_000_100, 0)));
    let container_status = Enc::new()
        .str(1, "app")
        .msg(2, running)
        .msg(3, Enc::new())
        .bool(4, true)
        .int(5, 0)
        .str(6, "docker.io/library/nginx:1.27")
        .str(7, "sha256:1")
        .str(8, "containerd://abc")
        .bool(9, true);
    let status = Enc::new()
        .str(1, "Running")
        .msg(
            2,
            Enc::new()
                .str(1, "Ready")
                .str(2, "True")
                .msg(3, Enc::new())
                .msg(4, time(1_700_000_100, 0))
                .str(5, "")
                .str(6, ""),
        )
        .str(3, "")
        .str(4, "")
        .str(5, "192.168.1.20")
        .msg(16, Enc::new().str(1, "192.168.1.20"))
        .str(6, "10.244.1.7")
        .msg(12, Enc::new().str(1, "10.244.1.7"))
        .msg(7, time(1_700_000_050, 0))
        .msg(8, container_status)
        .str(9, "Burstable");
    envelope("v1", "Pod", Enc::new().msg(1, meta).msg(2, spec).msg(3, status))
}

#[test]
fn pod_with_containers_env_volumes_resources_and_status() {
    assert_eq!(
        decoded(&pod_body()),
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "labels": {"app": "web"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6d4",
                                     "uid": "rs-uid", "controller": true}],
                "finalizers": ["example.com/guard"],
                "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                                   "time": "2023-11-14T22:13:20Z", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:spec": {"f:containers": {}}}}]
            },
            "spec": {
                "volumes": [
                    {"name": "cfg", "configMap": {"name": "web-config",
                                                  "items": [{"key": "a", "path": "a.txt"}],
                                                  "defaultMode": 420}},
                    {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
                ],
                "containers": [{
                    "name": "app",
                    "image": "nginx:1.27",
                    "command": ["nginx"],
                    "args": ["-g", "daemon off;"],
                    "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
                    "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "web-config"}}],
                    "env": [
                        {"name": "MODE", "value": "prod"},
                        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "web-config", "key": "level",
                                                                            "optional": false}}},
                        {"name": "NODE", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                    "fieldPath": "spec.nodeName"}}}
                    ],
                    "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                    "volumeMounts": [{"name": "cfg", "readOnly": true, "mountPath": "/etc/web"}],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                      "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
                                      "successThreshold": 1, "failureThreshold": 3},
                    "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "sleep 5"]}}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                    "securityContext": {"capabilities": {"drop": ["NET_RAW"]}, "privileged": false,
                                        "runAsUser": 1000, "allowPrivilegeEscalation": false}
                }],
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "serviceAccountName": "default",
                "securityContext": {"runAsUser": 0, "runAsNonRoot": false,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "node-role.kubernetes.io/edge", "operator": "Exists"}]}]}}},
                "schedulerName": "default-scheduler",
                "tolerations": [{"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
                "priority": 0,
                "enableServiceLinks": true,
                "preemptionPolicy": "PreemptLowerPriority"
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True",
                                "lastTransitionTime": "2023-11-14T22:15:00Z"}],
                "hostIP": "192.168.1.20",
                "hostIPs": [{"ip": "192.168.1.20"}],
                "podIP": "10.244.1.7",
                "podIPs": [{"ip": "10.244.1.7"}],
                "startTime": "2023-11-14T22:14:10Z",
                "containerStatuses": [{
                    "name": "app",
                    "state": {"running": {"startedAt": "2023-11-14T22:15:00Z"}},
                    "lastState": {},
                    "ready": true,
                    "restartCount": 0,
                    "image": "docker.io/library/nginx:1.27",
                    "imageID": "sha256:1",
                    "containerID": "containerd://abc",
                    "started": true
                }],
                "qosClass": "Burstable"
            }
        })
    );
}

#[test]
fn pod_projected_secret_and_host_path_volumes() {
    let projected = Enc::new().msg(
        26,
        Enc::new()
            .msg(1, Enc::new().msg(4, Enc::new().str(1, "").int(2, 3607).str(3, "token")))
            .msg(
                1,
                Enc::new().msg(
                    2,
                    Enc::new().msg(1, Enc::new().str(1, "labels").msg(2, Enc::new().str(2, "metadata.labels"))),
                ),
            )
            .int(2, 0o644),
    );
    let volumes = [
        Enc::new().str(1, "kube-api-access").msg(2, projected),
        Enc::new().str(1, "tls").msg(2, Enc::new().msg(6, Enc::new().str(1, "web-tls").int(3, 0o400).bool(4, true))),
        Enc::new().str(1, "host").msg(2, Enc::new().msg(1, Enc::new().str(1, "/var/log").str(2, ""))),
        Enc::new().str(1, "data").msg(2, Enc::new().msg(10, Enc::new().str(1, "data-pvc").bool(2, false))),
    ];
    let mut spec = Enc::new();
    for v in volumes {
        spec = spec.msg(1, v);
    }
    let got = decoded(&envelope("v1", "Pod", Enc::new().msg(1, new_object_meta("v", "default")).msg(2, spec)));
    assert_eq!(
        got["spec"]["volumes"],
        json!([
            {"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
            ], "defaultMode": 420}},
            {"name": "tls", "secret": {"secretName": "web-tls", "defaultMode": 256, "optional": true}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": ""}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-pvc"}}
        ])
    );
}

#[test]
fn lease_with_micro_times() {
    let spec = Enc::new()
        .str(1, "edge-1")
        .int(2, 40)
        .msg(3, time(1_700_000_000, 0))
        .msg(4, time(1_700_000_030, 999_999_999))
        .int(5, 0);
    let object = Enc::new().msg(1, new_object_meta("edge-1", "kube-node-lease")).msg(2, spec);
    assert_eq!(
        decoded(&envelope("coordination.k8s.io/v1", "Lease", object)),
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "edge-1", "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": "edge-1",
                "leaseDurationSeconds": 40,
                "acquireTime": "2023-11-14T22:13:20.000000Z",
                "renewTime": "2023-11-14T22:13:50.999999Z",
                "leaseTransitions": 0
            }
        })
    );
}

#[test]
fn delete_options_with_preconditions() {
    let object =
        Enc::new().int(1, 0).msg(2, Enc::new().str(1, "0b5c7e4e").str(2, "42")).str(4, "Foreground").str(5, "All");
    for api_version in ["v1", "meta.k8s.io/v1", "coordination.k8s.io/v1"] {
        let (_, kind, got) = decode(&envelope(api_version, "DeleteOptions", object.clone())).expect("decodes");
        assert_eq!(kind, "DeleteOptions");
        assert_eq!(
            got,
            json!({
                "apiVersion": api_version,
                "kind": "DeleteOptions",
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": "0b5c7e4e", "resourceVersion": "42"},
                "propagationPolicy": "Foreground",
                "dryRun": ["All"]
            })
        );
    }
}

#[test]
fn envelope_requires_magic() {
    let body = config_map_body();
    assert_eq!(decode(&body[4..]), Err(ProtoError::NoMagic));
    assert_eq!(decode(b""), Err(ProtoError::NoMagic));
    assert_eq!(decode(b"{\"kind\":\"ConfigMap\"}"), Err(ProtoError::NoMagic));
    assert_eq!(decode(b"k8s"), Err(ProtoError::NoMagic));
    // Magic alone, or a type without an object, is what a cut body looks like.
    assert!(matches!(decode(b"k8s\0"), Err(ProtoError::Invalid(_))));
    let mut body = b"k8s\0".to_vec();
    body.extend(Enc::new().msg(1, Enc::new().str(1, "v1").str(2, "ConfigMap")).finish());
    assert!(matches!(decode(&body), Err(ProtoError::Invalid(_))));
}

#[test]
fn envelope_with_empty_raw_is_an_empty_object() {
    let mut body = b"k8s\0".to_vec();
    body.extend(Enc::new().msg(1, Enc::new().str(1, "v1").str(2, "ConfigMap")).bytes(2, b"").finish());
    assert_eq!(decoded(&body), json!({"apiVersion": "v1", "kind": "ConfigMap"}));
}

#[test]
fn envelope_rejects_content_encoding_and_tolerates_unknown_fields() {
    let mut body = b"k8s\0".to_vec();
    body.extend(
        Enc::new()
            .msg(1, Enc::new().str(1, "v1").str(2, "ConfigMap").int(9, 1))
            .msg(2, Enc::new())
            .str(3, "gzip")
            .finish(),
    );
    assert!(matches!(decode(&body), Err(ProtoError::Invalid(_))));
    let mut body = b"k8s\0".to_vec();
    body.extend(
        Enc::new()
            .int(7, 1)
            .msg(1, Enc::new().str(1, "v1").str(2, "Secret"))
            .msg(2, Enc::new().str(3, "Opaque"))
            .str(4, "application/vnd.kubernetes.protobuf")
            .finish(),
    );
    assert_eq!(decoded(&body), json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque"}));
    let mut body = b"k8s\0".to_vec();
    body.extend(Enc::new().int(1, 1).finish());
    assert_eq!(decode(&body), Err(ProtoError::BadWireType { field: 1, wire: 0 }));
}

#[test]
fn unsupported_kinds() {
    let body = envelope("networking.k8s.io/v1", "Ingress", Enc::new().msg(1, new_object_meta("i", "default")));
    assert_eq!(
        decode(&body),
        Err(ProtoError::Unsupported { api_version: "networking.k8s.io/v1".to_owned(), kind: "Ingress".to_owned() })
    );
    // The kind alone is not enough: the group must match too.
    let body = envelope("example.com/v1", "ConfigMap", Enc::new());
    assert!(matches!(decode(&body), Err(ProtoError::Unsupported { .. })));
    assert!(supports("v1", "Pod"));
    assert!(supports("coordination.k8s.io/v1", "Lease"));
    assert!(supports("meta.k8s.io/v1", "DeleteOptions"));
    assert!(!supports("v1", "Lease"));
    assert!(supports("apps/v1", "Deployment"));
    assert!(!supports("networking.k8s.io/v1", "Ingress"));
    assert!(!supports("", "DeleteOptions"));
}

#[test]
fn errors_inside_objects() {
    let bad_time = envelope("v1", "ConfigMap", Enc::new().msg(1, Enc::new().msg(8, time(i64::MAX, 0))));
    assert!(matches!(decode(&bad_time), Err(ProtoError::Invalid(_))));
    let bad_intstr = Enc::new().msg(1, Enc::new().int(3, 80).msg(4, Enc::new().int(1, 7)));
    let body = envelope("v1", "Service", Enc::new().msg(2, bad_intstr));
    assert!(matches!(decode(&body), Err(ProtoError::Invalid(_))));
    let bad_fields = Enc::new().msg(17, Enc::new().msg(7, Enc::new().bytes(1, b"{not json")));
    let body = envelope("v1", "Secret", Enc::new().msg(1, bad_fields));
    assert!(matches!(decode(&body), Err(ProtoError::Invalid(_))));
    // A known field with the wrong wire type, deep inside.
    let body = envelope("v1", "Pod", Enc::new().msg(2, Enc::new().msg(2, Enc::new().int(1, 5))));
    assert_eq!(decode(&body), Err(ProtoError::BadWireType { field: 1, wire: 0 }));
}

#[test]
fn every_truncation_of_valid_bodies_is_an_error() {
    // The envelope ends with `contentEncoding` and `contentType`, both empty (two bytes each).
    // Cutting exactly before either leaves a complete, equally valid envelope: protobuf cannot
    // tell, and the object is whole. Every other cut must fail.
    const TRAILER: usize = 4;
    for body in [config_map_body(), pod_body()] {
        let full = decode(&body).expect("the whole body decodes");
        for cut in 0..body.len() {
            let prefix = body.get(..cut).unwrap_or_default();
            match decode(prefix) {
                Err(_) => {}
                Ok(partial) => {
                    assert!(cut >= body.len() - TRAILER, "a body cut at {cut} of {} decoded", body.len());
                    assert_eq!(partial, full);
                }
            }
        }
    }
}

#[test]
fn truncation_offsets_point_into_the_body() {
    let body = config_map_body();
    let cut = body.get(..body.len() - 1).unwrap_or_default();
    match decode(cut) {
        Err(ProtoError::Truncated { at }) => assert!(at < body.len(), "{at}"),
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[test]
fn corrupted_bytes_never_panic() {
    // Flip every byte of a real body to a few values: errors are fine, panics are not.
    let body = pod_body();
    for i in 4..body.len() {
        for value in [0x00, 0x7f, 0x80, 0xff] {
            let mut bad = body.clone();
            if let Some(b) = bad.get_mut(i) {
                *b = value;
            }
            let _ = decode(&bad);
        }
    }
}

/// A small deterministic generator (xorshift64*), so the randomized tests need no crate
/// and every run checks the same inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, max_len: u64) -> Vec<u8> {
        (0..self.below(max_len + 1)).map(|_| self.next() as u8).collect()
    }

    /// A random but well-framed message: field numbers in the range the schema uses, mostly
    /// varints and nested messages, so decoding reaches deep into every type.
    fn message(&mut self, depth: u32) -> Enc {
        let mut enc = Enc::new();
        for _ in 0..self.below(8) {
            let number = 1 + self.below(45) as u32;
            enc = match self.below(10) {
                0..=2 => enc.int(number, self.next() as i64 >> self.below(64)),
                3 => enc.fixed64(number, self.next()),
                4 => enc.fixed32(number, self.next() as u32),
                5 | 6 => enc.bytes(number, &self.bytes(12)),
                _ if depth < 8 => {
                    let inner = self.message(depth + 1);
                    enc.msg(number, inner)
                }
                _ => enc.str(number, "x"),
            };
        }
        enc
    }
}

/// Every type the decoder knows, and one it refuses.
pub(super) const KINDS: [(&str, &str); 20] = [
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Namespace"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("v1", "Endpoints"),
    ("v1", "Event"),
    ("v1", "Node"),
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "ControllerRevision"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("autoscaling/v1", "Scale"),
    ("coordination.k8s.io/v1", "Lease"),
    ("v1", "DeleteOptions"),
    ("networking.k8s.io/v1", "Ingress"),
];

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..3000 {
        let bytes = rng.bytes(512);
        let _ = decode(&bytes);
        let mut body = b"k8s\0".to_vec();
        body.extend_from_slice(&bytes);
        let _ = decode(&body);
    }
}

#[test]
fn random_objects_under_every_type_never_panic() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut decoded_ok = 0;
    for round in 0..6000 {
        let (api_version, kind) = KINDS[round % KINDS.len()];
        let object = if round % 3 == 0 { Enc::from_bytes(&rng.bytes(256)) } else { rng.message(0) };
        if decode(&envelope(api_version, kind, object)).is_ok() {
            decoded_ok += 1;
        }
    }
    // The structured inputs must mostly get past framing, or the test proves little.
    assert!(decoded_ok > 100, "only {decoded_ok} random objects decoded");
}

#[test]
fn random_mutations_of_a_pod_never_panic() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    let original = pod_body();
    for _ in 0..3000 {
        let mut body = original.clone();
        for _ in 0..1 + rng.below(8) {
            let index = rng.below(body.len() as u64) as usize;
            if let Some(b) = body.get_mut(index) {
                *b = rng.next() as u8;
            }
        }
        let _ = decode(&body);
    }
}
