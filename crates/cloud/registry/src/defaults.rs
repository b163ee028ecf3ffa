//! Kubernetes' defaults for new objects, applied in place to JSON, so that `kubectl get -o yaml` shows what
//! a real cluster shows.
//!
//! The workloads (apps/v1 Deployment, ReplicaSet, DaemonSet, StatefulSet; batch/v1 Job, CronJob) get
//! `pkg/apis/apps/v1/defaults.go` and `pkg/apis/batch/v1/defaults.go`, and their pod templates what
//! `SetDefaults_PodSpec` gives a template; [`prepare_for_create`] adds what the Job strategy's
//! `PrepareForCreate` does once the object has its uid (the generated selector and labels).
//!
//! Sources, all from Kubernetes unless noted: `pkg/apis/core/v1/defaults.go` and the declarative defaults
//! (`+default=` tags) of core/v1; the create strategies that fill fields (Pod status and QoS class,
//! Namespace finalizer and phase); the Priority admission plugin (Pod priority and preemption policy);
//! the Service registry (clusterIP/clusterIPs agreement, IP families for a single-stack IPv4 cluster); the
//! v1 conversions (Secret stringData into data, Node podCIDR/podCIDRs); and the KubeEdge Device CRD's one
//! default. Cluster-scoped kinds lose a `metadata.namespace`, as Kubernetes clears it.
//!
//! Nothing the user set is changed, except where Kubernetes itself overrides it (the Namespace's
//! `kubernetes.io/metadata.name` label, the Namespace's `kubernetes` finalizer, a Service's session
//! affinity config when the affinity is None, and Secret stringData). Fields of the wrong JSON type are
//! left alone. Not applied (they come from other admission plugins or allocators): service account and its
//! token volume, default tolerations, cluster IP and node port allocation.

use base64::Engine;
use serde_json::{Map, Value, json};

pub(crate) mod workloads;

pub use workloads::prepare_for_create;
pub(crate) use workloads::prepare_for_update;

/// Fill in Kubernetes' defaults for a new object of `group`/`kind` (the kinds `validation` knows), in place.
pub fn apply_defaults(group: &str, kind: &str, obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else { return };
    if edgehive_store::resources::by_group_kind(group, kind).is_some_and(|r| !r.namespaced)
        && let Some(meta) = root.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("namespace");
    }
    match (group, kind) {
        ("", "Pod") => pod(root),
        ("", "Secret") => secret(root),
        ("", "Service") => service(root),
        ("", "Namespace") => namespace(root),
        ("", "Endpoints") => endpoints(root),
        ("discovery.k8s.io", "EndpointSlice") => {
            // `SetDefaults_EndpointPort`: a port's name "" and protocol TCP.
            for port in objects_in(root, "ports") {
                set_if_absent(port, "name", json!(""));
                set_if_absent(port, "protocol", json!("TCP"));
            }
        }
        ("", "Node") => node(root),
        ("apps", "Deployment") => workloads::deployment(root),
        ("apps", "ReplicaSet") => workloads::replica_set(root),
        ("apps", "DaemonSet") => workloads::daemon_set(root),
        ("apps", "StatefulSet") => workloads::stateful_set(root),
        ("batch", "Job") => workloads::job(root),
        ("batch", "CronJob") => workloads::cron_job(root),
        ("rbac.authorization.k8s.io", kind) => crate::validation::rbac::apply_defaults(kind, root),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crate::validation::crd::apply_defaults(root),
        ("devices.kubeedge.io", "Device") => {
            if let Some(model_ref) = object_at(root, "spec").and_then(|s| object_at(s, "deviceModelRef")) {
                set_if_absent(model_ref, "name", json!(""));
            }
        }
        _ => {}
    }
}

/// The object at `key`, created when absent or null; `None` when the field holds something else.
fn object_entry<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    let slot = m.entry(key.to_string()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// The object at `key` if there is one.
fn object_at<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    m.get_mut(key).and_then(Value::as_object_mut)
}

/// The objects in the list at `key`.
fn objects_in<'a>(m: &'a mut Map<String, Value>, key: &str) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    m.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

/// Sets `key` when it is absent or null (Go's nil pointer).
fn set_if_absent(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), value);
    }
}

/// Sets `key` when it is absent, null or "" (Go's empty string).
fn set_if_empty(m: &mut Map<String, Value>, key: &str, value: &str) {
    if m.get(key).is_none_or(|v| v.is_null() || v.as_str() == Some("")) {
        m.insert(key.to_string(), Value::from(value));
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or("")
}

// --- Pod -------------------------------------------------------------------------------------------------

fn pod(root: &mut Map<String, Value>) {
    let Some(spec) = object_entry(root, "spec") else { return };
    pod_spec(spec, true);
    let qos = qos_class(spec);
    if root.get("status").is_none_or(Value::is_null) {
        root.insert("status".into(), json!({"phase": "Pending", "qosClass": qos}));
    }
}

/// `SetDefaults_PodSpec` and the defaults of what a pod spec holds (containers, ports, probes, volumes).
/// With `pod` (a Pod's own spec) also what only Pods get: `SetDefaults_Pod` (service links, requests from
/// limits, host ports on the host network) and the Priority admission plugin; a pod template gets none of
/// these (Kubernetes' `TestWorkloadDefaults` lists what a template gets).
pub(crate) fn pod_spec(spec: &mut Map<String, Value>, pod: bool) {
    // SetDefaults_PodSpec
    set_if_empty(spec, "dnsPolicy", "ClusterFirst");
    set_if_empty(spec, "restartPolicy", "Always");
    set_if_absent(spec, "securityContext", json!({}));
    set_if_absent(spec, "terminationGracePeriodSeconds", json!(30));
    set_if_empty(spec, "schedulerName", "default-scheduler");
    if pod {
        // SetDefaults_Pod
        set_if_absent(spec, "enableServiceLinks", json!(true));
        // The Priority admission plugin (no default PriorityClass in the cluster).
        if str_of(spec, "priorityClassName").is_empty() {
            set_if_absent(spec, "priority", json!(0));
        }
        set_if_empty(spec, "preemptionPolicy", "PreemptLowerPriority");
    }
    let host_network = pod && spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in objects_in(spec, list) {
            container(c, pod && list != "ephemeralContainers", host_network && list != "ephemeralContainers");
        }
    }
    for v in objects_in(spec, "volumes") {
        volume(v);
    }
}

fn container(c: &mut Map<String, Value>, requests_from_limits: bool, host_network: bool) {
    let policy = image_pull_policy(str_of(c, "image"));
    set_if_empty(c, "imagePullPolicy", policy);
    set_if_empty(c, "terminationMessagePath", "/dev/termination-log");
    set_if_empty(c, "terminationMessagePolicy", "File");
    if let Some(resources) = object_entry(c, "resources")
        && requests_from_limits
        && let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned()
        && let Some(requests) = object_entry(resources, "requests")
    {
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
    for port in objects_in(c, "ports") {
        set_if_empty(port, "protocol", "TCP");
        if host_network && port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0 {
            let container_port = port.get("containerPort").cloned().unwrap_or(Value::Null);
            if container_port.is_i64() {
                port.insert("hostPort".into(), container_port);
            }
        }
    }
    for env in objects_in(c, "env") {
        if let Some(field_ref) = object_at(env, "valueFrom").and_then(|f| object_at(f, "fieldRef")) {
            set_if_empty(field_ref, "apiVersion", "v1");
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = object_at(c, probe) {
            for (field, value) in
                [("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1), ("failureThreshold", 3)]
            {
                if p.get(field).is_none_or(|v| v.is_null() || v.as_i64() == Some(0)) {
                    p.insert(field.into(), json!(value));
                }
            }
            http_get(p);
        }
    }
    if let Some(lifecycle) = object_at(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = object_at(lifecycle, hook) {
                http_get(h);
            }
        }
    }
}

fn http_get(handler: &mut Map<String, Value>) {
    if let Some(action) = object_at(handler, "httpGet") {
        set_if_empty(action, "path", "/");
        set_if_empty(action, "scheme", "HTTP");
    }
}

/// Always for a `:latest` tag or no tag at all, otherwise IfNotPresent (as `SetDefaults_Container`).
pub(crate) fn image_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    let tag = last.split_once(':').map(|(_, t)| t);
    // Kubernetes' reference parser rejects these; a failed parse yields no tag, hence IfNotPresent.
    let repo = name.strip_suffix(tag.map(|t| format!(":{t}")).as_deref().unwrap_or("")).unwrap_or(name);
    let repo_path = repo
        .split_once('/')
        .map_or(repo, |(host, rest)| if host.contains(['.', ':']) || host == "localhost" { rest } else { repo });
    if image.is_empty() || repo_path.chars().any(|c| c.is_ascii_uppercase()) || image.contains(char::is_whitespace) {
        return "IfNotPresent";
    }
    match (tag, digest) {
        (Some("latest"), _) | (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

const VOLUME_SOURCE_FIELDS: &[&str] = &[
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
];

fn volume(v: &mut Map<String, Value>) {
    if VOLUME_SOURCE_FIELDS.iter().all(|f| v.get(*f).is_none_or(Value::is_null)) {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = object_at(v, source) {
            set_if_absent(s, "defaultMode", json!(420));
        }
    }
    if let Some(host_path) = object_at(v, "hostPath") {
        set_if_absent(host_path, "type", json!(""));
    }
    if let Some(downward) = object_at(v, "downwardAPI") {
        for item in objects_in(downward, "items") {
            if let Some(field_ref) = object_at(item, "fieldRef") {
                set_if_empty(field_ref, "apiVersion", "v1");
            }
        }
    }
    if let Some(projected) = object_at(v, "projected") {
        for source in objects_in(projected, "sources") {
            if let Some(token) = object_at(source, "serviceAccountToken") {
                set_if_absent(token, "expirationSeconds", json!(3600));
            }
            if let Some(downward) = object_at(source, "downwardAPI") {
                for item in objects_in(downward, "items") {
                    if let Some(field_ref) = object_at(item, "fieldRef") {
                        set_if_empty(field_ref, "apiVersion", "v1");
                    }
                }
            }
        }
    }
}

/// Kubernetes' `ComputePodQOS` over containers and init containers (cpu and memory only).
pub(crate) fn qos_class(spec: &Map<String, Value>) -> &'static str {
    use crate::quantity::parse_quantity;
    use std::collections::BTreeMap;
    let mut requests: BTreeMap<String, i128> = BTreeMap::new();
    let mut limits: BTreeMap<String, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let positive = |list: Option<&Value>| -> Vec<(String, i128)> {
        list.and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k == "cpu" || *k == "memory")
            .filter_map(|(k, v)| {
                let text = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                parse_quantity(&text).ok().filter(|q| q.is_positive()).map(|q| (k.clone(), q.nanos))
            })
            .collect()
    };
    let containers = ["containers", "initContainers"]
        .into_iter()
        .flat_map(|l| spec.get(l).and_then(Value::as_array).into_iter().flatten());
    for c in containers {
        let resources = c.get("resources");
        for (k, q) in positive(resources.and_then(|r| r.get("requests"))) {
            *requests.entry(k).or_insert(0) += q;
        }
        let found = positive(resources.and_then(|r| r.get("limits")));
        if !(found.iter().any(|(k, _)| k == "cpu") && found.iter().any(|(k, _)| k == "memory")) {
            guaranteed = false;
        }
        for (k, q) in found {
            *limits.entry(k).or_insert(0) += q;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && requests.iter().all(|(k, r)| limits.get(k) == Some(r)) && requests.len() == limits.len() {
        return "Guaranteed";
    }
    "Burstable"
}

// --- other kinds -----------------------------------------------------------------------------------------

fn secret(root: &mut Map<String, Value>) {
    set_if_empty(root, "type", "Opaque");
    // The v1 conversion moves stringData into data; a stringData key wins over the same data key.
    // A non-string value is left for the decode check to report.
    let all_strings =
        root.get("stringData").and_then(Value::as_object).is_some_and(|m| m.values().all(Value::is_string));
    if !all_strings {
        return;
    }
    if let Some(Value::Object(string_data)) = root.remove("stringData")
        && let Some(data) = object_entry(root, "data")
    {
        for (k, v) in string_data {
            let text = v.as_str().unwrap_or("");
            data.insert(k, Value::from(base64::engine::general_purpose::STANDARD.encode(text)));
        }
    }
}

fn service(root: &mut Map<String, Value>) {
    let Some(spec) = object_entry(root, "spec") else { return };
    set_if_empty(spec, "sessionAffinity", "None");
    match str_of(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !has_timeout {
                spec.insert("sessionAffinityConfig".into(), json!({"clientIP": {"timeoutSeconds": 10800}}));
            }
        }
        _ => {}
    }
    set_if_empty(spec, "type", "ClusterIP");
    let svc_type = str_of(spec, "type").to_string();
    for port in objects_in(spec, "ports") {
        set_if_empty(port, "protocol", "TCP");
        let unset =
            port.get("targetPort").is_none_or(|t| t.is_null() || t.as_i64() == Some(0) || t.as_str() == Some(""));
        if unset && let Some(p) = port.get("port").cloned() {
            port.insert("targetPort".into(), p);
        }
    }
    let has_external_ips = spec.get("externalIPs").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let externally_accessible =
        svc_type == "LoadBalancer" || svc_type == "NodePort" || (svc_type == "ClusterIP" && has_external_ips);
    if externally_accessible {
        set_if_empty(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(svc_type.as_str(), "NodePort" | "LoadBalancer" | "ClusterIP") {
        set_if_absent(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if svc_type == "LoadBalancer" {
        set_if_absent(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if svc_type == "ExternalName" {
        return;
    }
    // The registry keeps clusterIP and clusterIPs[0] in agreement.
    let cluster_ip = str_of(spec, "clusterIP").to_string();
    let ips: Vec<String> = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    if !cluster_ip.is_empty() && ips.is_empty() {
        spec.insert("clusterIPs".into(), json!([cluster_ip]));
    } else if cluster_ip.is_empty()
        && let Some(first) = ips.first()
    {
        spec.insert("clusterIP".into(), json!(first));
    }
    // IP families as a single-stack IPv4 cluster assigns them.
    let headless = str_of(spec, "clusterIP") == "None";
    let selectorless = spec.get("selector").and_then(Value::as_object).is_none_or(Map::is_empty);
    let policy = if headless && selectorless { "RequireDualStack" } else { "SingleStack" };
    set_if_absent(spec, "ipFamilyPolicy", json!(policy));
    let family = if str_of(spec, "clusterIP").contains(':') { "IPv6" } else { "IPv4" };
    if spec.get("ipFamilies").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert("ipFamilies".into(), json!([family]));
    }
}

fn namespace(root: &mut Map<String, Value>) {
    let name = root.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("").to_string();
    if !name.is_empty()
        && let Some(meta) = object_entry(root, "metadata")
        && let Some(labels) = object_entry(meta, "labels")
    {
        labels.insert("kubernetes.io/metadata.name".into(), Value::from(name));
    }
    if let Some(spec) = object_entry(root, "spec") {
        let finalizers = spec.entry("finalizers").or_insert(Value::Null);
        if finalizers.is_null() {
            *finalizers = json!([]);
        }
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f.as_str() == Some("kubernetes"))
        {
            list.push(json!("kubernetes"));
        }
    }
    if let Some(status) = object_entry(root, "status") {
        set_if_empty(status, "phase", "Active");
    }
}

fn endpoints(root: &mut Map<String, Value>) {
    for subset in objects_in(root, "subsets") {
        for port in objects_in(subset, "ports") {
            set_if_empty(port, "protocol", "TCP");
        }
    }
}

fn node(root: &mut Map<String, Value>) {
    if let Some(spec) = object_at(root, "spec") {
        let single = str_of(spec, "podCIDR").to_string();
        let first = spec
            .get("podCIDRs")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .map(String::from);
        match first {
            Some(first) if single.is_empty() => {
                spec.insert("podCIDR".into(), json!(first));
            }
            None if !single.is_empty() => {
                spec.insert("podCIDRs".into(), json!([single]));
            }
            _ => {}
        }
    }
    if let Some(status) = object_at(root, "status")
        && status.get("allocatable").is_none_or(Value::is_null)
        && let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned()
    {
        status.insert("allocatable".into(), capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(group: &str, kind: &str, obj: Value) -> Value {
        let mut o = obj;
        apply_defaults(group, kind, &mut o);
        o
    }

    fn pod(container: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"containers": [container]}})
    }

    #[test]
    fn pod_gets_kubernetes_defaults() {
        let p = defaulted("", "Pod", pod(json!({"name": "c", "image": "nginx", "ports": [{"containerPort": 80}]})));
        assert_eq!(
            p,
            json!({
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "containers": [{
                        "name": "c", "image": "nginx", "imagePullPolicy": "Always",
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                        "resources": {}, "ports": [{"containerPort": 80, "protocol": "TCP"}]
                    }],
                    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "securityContext": {},
                    "terminationGracePeriodSeconds": 30, "schedulerName": "default-scheduler",
                    "enableServiceLinks": true, "priority": 0, "preemptionPolicy": "PreemptLowerPriority"
                },
                "status": {"phase": "Pending", "qosClass": "BestEffort"}
            })
        );
    }

    #[test]
    fn user_values_are_kept() {
        let mut p = pod(
            json!({"name": "c", "image": "nginx", "imagePullPolicy": "Never", "terminationMessagePolicy": "FallbackToLogsOnError"}),
        );
        p["spec"]["restartPolicy"] = json!("Never");
        p["spec"]["terminationGracePeriodSeconds"] = json!(0);
        p["spec"]["enableServiceLinks"] = json!(false);
        p["spec"]["priorityClassName"] = json!("high");
        p["status"] = json!({"phase": "Running"});
        let d = defaulted("", "Pod", p);
        assert_eq!(d["spec"]["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(d["spec"]["containers"][0]["terminationMessagePolicy"], "FallbackToLogsOnError");
        assert_eq!(d["spec"]["restartPolicy"], "Never");
        assert_eq!(d["spec"]["terminationGracePeriodSeconds"], 0);
        assert_eq!(d["spec"]["enableServiceLinks"], false);
        assert!(d["spec"].get("priority").is_none(), "a priority class decides the priority");
        assert_eq!(d["status"], json!({"phase": "Running"}));
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("nginx:1.25"), "IfNotPresent");
        assert_eq!(image_pull_policy("nginx@sha256:0123"), "IfNotPresent");
        assert_eq!(image_pull_policy("localhost:5000/app"), "Always");
        assert_eq!(image_pull_policy("localhost:5000/app:v1"), "IfNotPresent");
        assert_eq!(image_pull_policy("registry.example.com/team/app:latest"), "Always");
        assert_eq!(image_pull_policy(""), "IfNotPresent");
        assert_eq!(image_pull_policy("Nginx"), "IfNotPresent");
    }

    #[test]
    fn qos_classes() {
        let best = defaulted("", "Pod", pod(json!({"name": "c", "image": "x"})));
        assert_eq!(best["status"]["qosClass"], "BestEffort");
        let burst =
            defaulted("", "Pod", pod(json!({"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}})));
        assert_eq!(burst["status"]["qosClass"], "Burstable");
        let limits_only =
            pod(json!({"name": "c", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}));
        let guaranteed = defaulted("", "Pod", limits_only);
        assert_eq!(guaranteed["status"]["qosClass"], "Guaranteed");
        assert_eq!(guaranteed["spec"]["containers"][0]["resources"]["requests"], json!({"cpu": "1", "memory": "1Gi"}));
        let unequal = pod(
            json!({"name": "c", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}}),
        );
        assert_eq!(defaulted("", "Pod", unequal)["status"]["qosClass"], "Burstable");
        let same_value = pod(
            json!({"name": "c", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m", "memory": "1024Mi"}}}),
        );
        assert_eq!(defaulted("", "Pod", same_value)["status"]["qosClass"], "Guaranteed");
    }

    #[test]
    fn volumes_probes_and_host_network() {
        let mut p = pod(json!({"name": "c", "image": "x:1", "ports": [{"containerPort": 8080}],
                               "livenessProbe": {"httpGet": {"port": 8080}},
                               "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}));
        p["spec"]["hostNetwork"] = json!(true);
        p["spec"]["volumes"] = json!([{"name": "a"}, {"name": "b", "secret": {"secretName": "s"}}, {"name": "c", "configMap": {"name": "c", "defaultMode": 256}}]);
        let d = defaulted("", "Pod", p);
        assert_eq!(d["spec"]["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(d["spec"]["volumes"][1]["secret"]["defaultMode"], 420);
        assert_eq!(d["spec"]["volumes"][2]["configMap"]["defaultMode"], 256);
        let c = &d["spec"]["containers"][0];
        assert_eq!(c["ports"][0]["hostPort"], 8080);
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10,
                   "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    }

    #[test]
    fn secret_and_config_map() {
        let s = defaulted(
            "",
            "Secret",
            json!({"metadata": {"name": "s"}, "stringData": {"user": "admin"}, "data": {"k": "dg=="}}),
        );
        assert_eq!(s, json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg==", "user": "YWRtaW4="}}));
        let odd = json!({"type": "Opaque", "stringData": {"a": 5}});
        assert_eq!(defaulted("", "Secret", odd.clone()), odd);
        let typed = defaulted("", "Secret", json!({"type": "kubernetes.io/tls"}));
        assert_eq!(typed["type"], "kubernetes.io/tls");
        let cm = json!({"metadata": {"name": "c"}});
        assert_eq!(defaulted("", "ConfigMap", cm.clone()), cm);
    }

    #[test]
    fn service_defaults() {
        let s = defaulted("", "Service", json!({"spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}}));
        assert_eq!(
            s["spec"],
            json!({"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}], "selector": {"app": "web"},
                   "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster",
                   "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"]})
        );
        let kept = defaulted(
            "",
            "Service",
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": "http", "protocol": "UDP"}]}}),
        );
        assert_eq!(kept["spec"]["ports"][0], json!({"port": 80, "targetPort": "http", "protocol": "UDP"}));
        assert_eq!(kept["spec"]["externalTrafficPolicy"], "Cluster");
        let lb = defaulted("", "Service", json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}));
        assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
        let ip = defaulted("", "Service", json!({"spec": {"clusterIP": "10.0.0.7", "ports": [{"port": 80}]}}));
        assert_eq!(ip["spec"]["clusterIPs"], json!(["10.0.0.7"]));
        let ext = defaulted("", "Service", json!({"spec": {"type": "ExternalName", "externalName": "db"}}));
        assert!(ext["spec"].get("ipFamilies").is_none() && ext["spec"].get("internalTrafficPolicy").is_none());
        let client_ip =
            defaulted("", "Service", json!({"spec": {"sessionAffinity": "ClientIP", "ports": [{"port": 80}]}}));
        assert_eq!(client_ip["spec"]["sessionAffinityConfig"], json!({"clientIP": {"timeoutSeconds": 10800}}));
    }

    #[test]
    fn namespace_node_endpoints_device() {
        let ns = defaulted("", "Namespace", json!({"metadata": {"name": "dev", "namespace": "x"}}));
        assert_eq!(
            ns,
            json!({"metadata": {"name": "dev", "labels": {"kubernetes.io/metadata.name": "dev"}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        );
        let own = defaulted(
            "",
            "Namespace",
            json!({"metadata": {"name": "dev"}, "spec": {"finalizers": ["example.com/x"]}, "status": {"phase": "Terminating"}}),
        );
        assert_eq!(own["spec"]["finalizers"], json!(["example.com/x", "kubernetes"]));
        assert_eq!(own["status"]["phase"], "Terminating");
        let node =
            defaulted("", "Node", json!({"spec": {"podCIDR": "10.244.1.0/24"}, "status": {"capacity": {"cpu": "4"}}}));
        assert_eq!(node["spec"]["podCIDRs"], json!(["10.244.1.0/24"]));
        assert_eq!(node["status"]["allocatable"], json!({"cpu": "4"}));
        let ep = defaulted("", "Endpoints", json!({"subsets": [{"ports": [{"port": 80}]}]}));
        assert_eq!(ep["subsets"][0]["ports"][0]["protocol"], "TCP");
        let dev = defaulted("devices.kubeedge.io", "Device", json!({"spec": {"deviceModelRef": {}}}));
        assert_eq!(dev["spec"]["deviceModelRef"]["name"], "");
        let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "n"}});
        assert_eq!(defaulted("coordination.k8s.io", "Lease", lease.clone()), lease);
    }

    #[test]
    fn defaults_then_validation_pass() {
        let p = defaulted("", "Pod", pod(json!({"name": "c", "image": "nginx"})));
        assert!(crate::validation::validate_create("", "Pod", &p).is_empty());
        let s = defaulted(
            "",
            "Service",
            json!({"metadata": {"name": "web", "namespace": "d"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}),
        );
        assert!(crate::validation::validate_create("", "Service", &s).is_empty());
    }

    #[test]
    fn odd_shapes_are_left_alone() {
        for v in [
            json!(null),
            json!(1),
            json!("x"),
            json!([1]),
            json!({"spec": 1}),
            json!({"spec": {"containers": "x", "volumes": [1]}}),
        ] {
            for kind in ["Pod", "Secret", "Service", "Namespace", "Endpoints", "Node"] {
                let mut o = v.clone();
                apply_defaults("", kind, &mut o);
            }
        }
    }
}
