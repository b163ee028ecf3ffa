//! Container rules of a Pod spec (core's `validateContainerCommon` and what it calls): names, images,
//! ports, env, envFrom, volume mounts, resources, probes and lifecycle hooks, for regular and init
//! containers.

use super::FieldError;
use super::json::{self, arr_at, child, get, index, int_at, key, obj_at, str_at};
use super::names::{self, NameRule, inclusive_range_error};
use super::pod::{MAX_ID, dns_label, enum_field, local_descending_path};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

// --- containers ------------------------------------------------------------------------------------------

pub(crate) fn validate_containers(
    containers: &[Value],
    volumes: &BTreeMap<String, String>,
    grace: Option<i64>,
    path: &str,
) -> Vec<FieldError> {
    if containers.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    let mut names_seen = BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let at = index(path, i);
        errs.extend(validate_container_common(c, volumes, &at));
        let name = str_at(c, "name");
        if !names_seen.insert(name) {
            errs.push(FieldError::duplicate(&child(&at, "name"), name));
        }
        errs.extend(validate_lifecycle_and_probes(c, grace, &at));
        if json::has(c, "restartPolicy") {
            errs.push(FieldError::forbidden(&child(&at, "restartPolicy"), "may not be set for non-init containers"));
        }
    }
    errs.extend(host_port_conflicts(containers.iter().enumerate(), path));
    errs
}

pub(crate) fn validate_init_containers(
    spec: &Value,
    volumes: &BTreeMap<String, String>,
    grace: Option<i64>,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut all_names: BTreeSet<&str> = arr_at(spec, "containers").iter().map(|c| str_at(c, "name")).collect();
    for (i, c) in arr_at(spec, "initContainers").iter().enumerate() {
        let at = index(path, i);
        errs.extend(validate_container_common(c, volumes, &at));
        let mut restart_always = false;
        if let Some(policy) = get(c, "restartPolicy").as_str() {
            restart_always = policy == "Always";
            if !restart_always {
                errs.push(FieldError::not_supported(&child(&at, "restartPolicy"), policy, &["Always"]));
            }
        }
        let name = str_at(c, "name");
        if all_names.contains(name) {
            errs.push(FieldError::duplicate(&child(&at, "name"), name));
        } else if !name.is_empty() {
            all_names.insert(name);
        }
        errs.extend(host_port_conflicts(std::iter::once((i, c)), path));
        if restart_always {
            errs.extend(validate_lifecycle_and_probes(c, grace, &at));
        } else {
            for field in ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"] {
                if json::has(c, field) {
                    errs.push(FieldError::forbidden(
                        &child(&at, field),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
    }
    errs
}

/// `validateContainerCommon`.
fn validate_container_common(c: &Value, volumes: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_at(c, "name");
    if name.is_empty() {
        errs.push(FieldError::required(&child(path, "name"), ""));
    } else {
        errs.extend(dns_label(name, &child(path, "name")));
    }
    if str_at(c, "image").is_empty() {
        errs.push(FieldError::required(&child(path, "image"), ""));
    }
    errs.extend(enum_field(c, path, "terminationMessagePolicy", &["File", "FallbackToLogsOnError"]));
    errs.extend(validate_container_ports(arr_at(c, "ports"), &child(path, "ports")));
    errs.extend(validate_env(arr_at(c, "env"), &child(path, "env")));
    errs.extend(validate_env_from(arr_at(c, "envFrom"), &child(path, "envFrom")));
    errs.extend(validate_volume_mounts(arr_at(c, "volumeMounts"), volumes, c, &child(path, "volumeMounts")));
    errs.extend(enum_field(c, path, "imagePullPolicy", &["Always", "IfNotPresent", "Never"]));
    errs.extend(validate_resources(get(c, "resources"), &child(path, "resources")));
    let sc = get(c, "securityContext");
    for field in ["runAsUser", "runAsGroup"] {
        if let Some(id) = int_at(sc, field).filter(|v| !(0..=MAX_ID).contains(v)) {
            errs.push(FieldError::invalid(
                &child(&child(path, "securityContext"), field),
                id,
                inclusive_range_error(0, MAX_ID),
            ));
        }
    }
    errs
}

/// `validateContainerPorts`: names, numbers and protocols (uniqueness of host ports is checked per pod).
fn validate_container_ports(ports: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names_seen = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = index(path, i);
        let name = str_at(p, "name");
        if !name.is_empty() {
            let msgs = names::port_name(name);
            if !msgs.is_empty() {
                errs.extend(msgs.into_iter().map(|m| FieldError::invalid(&child(&at, "name"), name, m)));
            } else if !names_seen.insert(name) {
                errs.push(FieldError::duplicate(&child(&at, "name"), name));
            }
        }
        match int_at(p, "containerPort").unwrap_or(0) {
            0 => errs.push(FieldError::required(&child(&at, "containerPort"), "")),
            n => errs.extend(
                names::port_num(n).into_iter().map(|m| FieldError::invalid(&child(&at, "containerPort"), n, m)),
            ),
        }
        let host_port = int_at(p, "hostPort").unwrap_or(0);
        if host_port != 0 {
            errs.extend(
                names::port_num(host_port)
                    .into_iter()
                    .map(|m| FieldError::invalid(&child(&at, "hostPort"), host_port, m)),
            );
        }
        let protocol = str_at(p, "protocol");
        if protocol.is_empty() {
            errs.push(FieldError::required(&child(&at, "protocol"), ""));
        } else if !PROTOCOLS.contains(&protocol) {
            errs.push(FieldError::not_supported(&child(&at, "protocol"), protocol, PROTOCOLS));
        }
    }
    errs
}

/// `AccumulateUniqueHostPorts`: one protocol/hostIP/hostPort per pod (per init container for init ones).
fn host_port_conflicts<'a>(containers: impl Iterator<Item = (usize, &'a Value)>, path: &str) -> Vec<FieldError> {
    let mut seen = BTreeSet::new();
    let mut errs = Vec::new();
    for (ci, c) in containers {
        for (pi, p) in arr_at(c, "ports").iter().enumerate() {
            let host_port = int_at(p, "hostPort").unwrap_or(0);
            if host_port == 0 {
                continue;
            }
            let id = format!("{}/{}/{}", str_at(p, "protocol"), str_at(p, "hostIP"), host_port);
            if !seen.insert(id.clone()) {
                errs.push(FieldError::duplicate(&child(&index(&child(&index(path, ci), "ports"), pi), "hostPort"), id));
            }
        }
    }
    errs
}

const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];
const RESOURCE_FIELD_PATHS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// `ValidateEnv` with the strict name rule.
fn validate_env(vars: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ev) in vars.iter().enumerate() {
        let at = index(path, i);
        let name = str_at(ev, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&child(&at, "name"), ""));
        } else {
            errs.extend(
                names::env_var_name(name).into_iter().map(|m| FieldError::invalid(&child(&at, "name"), name, m)),
            );
        }
        errs.extend(validate_value_from(ev, &child(&at, "valueFrom")));
    }
    errs
}

/// `validateEnvVarValueFrom`: exactly one source, and not beside a non-empty `value`.
fn validate_value_from(ev: &Value, path: &str) -> Vec<FieldError> {
    let from = get(ev, "valueFrom");
    if from.is_null() {
        return Vec::new();
    }
    let mut errs = Vec::new();
    let mut sources = 0;
    let field_ref = get(from, "fieldRef");
    if !field_ref.is_null() {
        sources += 1;
        let at = child(path, "fieldRef");
        let fp = str_at(field_ref, "fieldPath");
        if str_at(field_ref, "apiVersion").is_empty() {
            errs.push(FieldError::required(&child(&at, "apiVersion"), ""));
        } else if fp.is_empty() {
            errs.push(FieldError::required(&child(&at, "fieldPath"), ""));
        } else if let Some((p, sub)) = subscripted(fp) {
            match p {
                "metadata.annotations" => errs.extend(
                    names::qualified_name(&sub.to_lowercase()).into_iter().map(|m| FieldError::invalid(&at, sub, m)),
                ),
                "metadata.labels" => {
                    errs.extend(names::qualified_name(sub).into_iter().map(|m| FieldError::invalid(&at, sub, m)))
                }
                _ => errs.push(FieldError::invalid(&at, p, "does not support subscript")),
            }
        } else if !ENV_FIELD_PATHS.contains(&fp) {
            errs.push(FieldError::not_supported(&child(&at, "fieldPath"), fp, ENV_FIELD_PATHS));
        }
    }
    let resource_ref = get(from, "resourceFieldRef");
    if !resource_ref.is_null() {
        sources += 1;
        let at = child(path, "resourceFieldRef");
        let resource = str_at(resource_ref, "resource");
        if resource.is_empty() {
            errs.push(FieldError::required(&child(&at, "resource"), ""));
        } else if !RESOURCE_FIELD_PATHS.contains(&resource)
            && !resource.starts_with("requests.hugepages-")
            && !resource.starts_with("limits.hugepages-")
        {
            errs.push(FieldError::not_supported(&child(&at, "resource"), resource, RESOURCE_FIELD_PATHS));
        }
    }
    for (field, what) in [("configMapKeyRef", "configMapKeyRef"), ("secretKeyRef", "secretKeyRef")] {
        let selector = get(from, field);
        if selector.is_null() {
            continue;
        }
        sources += 1;
        let at = child(path, what);
        let name = str_at(selector, "name");
        errs.extend(
            names::dns1123_subdomain(name).into_iter().map(|m| FieldError::invalid(&child(&at, "name"), name, m)),
        );
        let k = str_at(selector, "key");
        if k.is_empty() {
            errs.push(FieldError::required(&child(&at, "key"), ""));
        } else {
            errs.extend(names::config_map_key(k).into_iter().map(|m| FieldError::invalid(&child(&at, "key"), k, m)));
        }
    }
    if sources == 0 {
        errs.push(FieldError::invalid(
            path,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        ));
    } else if !str_at(ev, "value").is_empty() {
        errs.push(FieldError::invalid(path, "", "may not be specified when `value` is not empty"));
    } else if sources > 1 {
        errs.push(FieldError::invalid(path, "", "may not have more than one field specified at a time"));
    }
    errs
}

/// `metadata.labels['key']` → ("metadata.labels", "key").
fn subscripted(fp: &str) -> Option<(&str, &str)> {
    let (p, rest) = fp.split_once("['")?;
    let sub = rest.strip_suffix("']")?;
    Some((p, sub))
}

/// `ValidateEnvFrom`.
fn validate_env_from(sources: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ev) in sources.iter().enumerate() {
        let at = index(path, i);
        let prefix = str_at(ev, "prefix");
        if !prefix.is_empty() {
            errs.extend(
                names::env_var_name(prefix).into_iter().map(|m| FieldError::invalid(&child(&at, "prefix"), prefix, m)),
            );
        }
        let mut count = 0;
        for field in ["configMapRef", "secretRef"] {
            let source = get(ev, field);
            if source.is_null() {
                continue;
            }
            count += 1;
            let name = str_at(source, "name");
            let name_path = child(&child(&at, field), "name");
            if name.is_empty() {
                errs.push(FieldError::required(&name_path, ""));
            } else {
                errs.extend(
                    NameRule::Subdomain.check(name, true).into_iter().map(|m| FieldError::invalid(&name_path, name, m)),
                );
            }
        }
        if count == 0 {
            errs.push(FieldError::invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"));
        } else if count > 1 {
            errs.push(FieldError::invalid(path, "", "may not have more than one field specified at a time"));
        }
    }
    errs
}

/// `ValidateVolumeMounts`: each mount names a volume of the pod and has a unique mountPath.
fn validate_volume_mounts(
    mounts: &[Value],
    volumes: &BTreeMap<String, String>,
    c: &Value,
    path: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut mount_points = BTreeSet::new();
    let privileged = get(get(c, "securityContext"), "privileged").as_bool() == Some(true);
    for (i, m) in mounts.iter().enumerate() {
        let at = index(path, i);
        let name = str_at(m, "name");
        if name.is_empty() {
            errs.push(FieldError::required(&child(&at, "name"), ""));
        }
        if !volumes.contains_key(name) {
            errs.push(FieldError::not_found(&child(&at, "name"), name));
        }
        let mount_path = str_at(m, "mountPath");
        if mount_path.is_empty() {
            errs.push(FieldError::required(&child(&at, "mountPath"), ""));
        }
        if !mount_points.insert(mount_path) {
            errs.push(FieldError::invalid(&child(&at, "mountPath"), mount_path, "must be unique"));
        }
        let sub_path = str_at(m, "subPath");
        if !sub_path.is_empty() {
            errs.extend(local_descending_path(sub_path, &child(path, "subPath")));
        }
        let sub_path_expr = str_at(m, "subPathExpr");
        if !sub_path_expr.is_empty() {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(
                    &child(&at, "subPathExpr"),
                    sub_path_expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            errs.extend(local_descending_path(sub_path_expr, &child(path, "subPathExpr")));
        }
        if let Some(prop) = get(m, "mountPropagation").as_str() {
            let supported = ["Bidirectional", "HostToContainer", "None"];
            let prop_path = child(path, "mountPropagation");
            if !supported.contains(&prop) {
                errs.push(FieldError::not_supported(&prop_path, prop, &supported));
            }
            if prop == "Bidirectional" && !privileged {
                errs.push(FieldError::forbidden(
                    &prop_path,
                    "Bidirectional mount propagation is available only to privileged containers",
                ));
            }
        }
    }
    errs
}

// --- resources -------------------------------------------------------------------------------------------

fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Overcommit (request below limit) is allowed for native resources except huge pages.
fn overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !name.starts_with("hugepages-")
}

/// `validateContainerResourceName`.
fn container_resource_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs: Vec<FieldError> =
        names::qualified_name(name).into_iter().map(|m| FieldError::invalid(path, name, m)).collect();
    if !name.contains('/') {
        if errs.is_empty() && !is_standard_container_resource(name) && !is_standard_resource(name) {
            errs.push(FieldError::invalid(path, name, "must be a standard resource type or fully qualified"));
        }
        if !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(path, name, "must be a standard resource for containers"));
        }
    } else if !is_native_resource(name) {
        let qualified = names::qualified_name(&format!("requests.{name}")).is_empty();
        if !qualified || name.starts_with("requests.") {
            errs.push(FieldError::invalid(path, name, "doesn't follow extended resource name standard"));
        }
    }
    errs
}

/// Kubernetes' standard (quota and compute) resource names without a domain.
fn is_standard_resource(name: &str) -> bool {
    const STANDARD: &[&str] = &[
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    ];
    STANDARD.contains(&name) || name.starts_with("hugepages-") || name.starts_with("requests.hugepages-")
}

/// `ValidateContainerResourceRequirements`: names, non-negative amounts, requests within limits.
pub(crate) fn validate_resources(res: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let lim_path = child(path, "limits");
    let req_path = child(path, "requests");
    let limits = quantities(res, "limits");
    for (name, (text, q)) in &limits {
        let at = key(&lim_path, name);
        errs.extend(container_resource_name(name, &at));
        errs.extend(quantity_value(name, text, *q, &at));
    }
    for (name, (text, q)) in &quantities(res, "requests") {
        let at = key(&req_path, name);
        errs.extend(container_resource_name(name, &at));
        errs.extend(quantity_value(name, text, *q, &at));
        match limits.get(name) {
            Some((limit_text, limit)) => {
                if !overcommit_allowed(name) && q != limit {
                    errs.push(FieldError::invalid(
                        &req_path,
                        text.as_str(),
                        format!("must be equal to {name} limit of {limit_text}"),
                    ));
                } else if q > limit {
                    errs.push(FieldError::invalid(
                        &req_path,
                        text.as_str(),
                        format!("must be less than or equal to {name} limit of {limit_text}"),
                    ));
                }
            }
            None if !overcommit_allowed(name) => {
                errs.push(FieldError::required(&lim_path, "Limit must be set for non overcommitable resources"))
            }
            None => {}
        }
    }
    errs
}

/// The parseable quantities of a resource list, with their text (Kubernetes prints its canonical form;
/// this prints what the client sent).
pub(crate) fn quantities(res: &Value, field: &str) -> BTreeMap<String, (String, crate::quantity::Quantity)> {
    let mut out = BTreeMap::new();
    if let Some(map) = obj_at(res, field) {
        for (k, v) in map {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if let Ok(q) = crate::quantity::parse_quantity(&text) {
                out.insert(k.clone(), (text, q));
            }
        }
    }
    out
}

fn quantity_value(name: &str, text: &str, q: crate::quantity::Quantity, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if q.nanos < 0 {
        errs.push(FieldError::invalid(path, text, "must be greater than or equal to 0"));
    }
    // Extended resources count whole things.
    if !is_native_resource(name) && q.nanos % 1_000_000_000 != 0 {
        errs.push(FieldError::invalid(path, text, "must be an integer"));
    }
    errs
}

// --- probes, lifecycle -----------------------------------------------------------------------------------

fn validate_lifecycle_and_probes(c: &Value, grace: Option<i64>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let lifecycle = get(c, "lifecycle");
    for hook in ["postStart", "preStop"] {
        let h = get(lifecycle, hook);
        if !h.is_null() {
            errs.extend(validate_handler(
                h,
                &["exec", "httpGet", "tcpSocket", "sleep"],
                grace,
                &child(&child(path, "lifecycle"), hook),
            ));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let p = get(c, probe);
        if p.is_null() {
            continue;
        }
        let at = child(path, probe);
        errs.extend(validate_handler(p, &["exec", "httpGet", "tcpSocket", "grpc"], grace, &at));
        for field in ["initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"]
        {
            if let Some(n) = int_at(p, field).filter(|n| *n < 0) {
                errs.push(FieldError::invalid(&child(&at, field), n, "must be greater than or equal to 0"));
            }
        }
        if let Some(t) = int_at(p, "terminationGracePeriodSeconds").filter(|t| *t <= 0) {
            errs.push(FieldError::invalid(&child(&at, "terminationGracePeriodSeconds"), t, "must be greater than 0"));
        }
        if probe == "readinessProbe" {
            if let Some(t) = get(p, "terminationGracePeriodSeconds").as_i64() {
                errs.push(FieldError::invalid(
                    &child(&at, "terminationGracePeriodSeconds"),
                    t,
                    "must not be set for readinessProbes",
                ));
            }
        } else if let Some(s) = int_at(p, "successThreshold").filter(|s| *s != 1) {
            errs.push(FieldError::invalid(&child(&at, "successThreshold"), s, "must be 1"));
        }
    }
    errs
}

/// `validateHandler`: exactly one of `kinds`, each well formed.
fn validate_handler(h: &Value, kinds: &[&str], grace: Option<i64>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut count = 0;
    for kind in kinds {
        let action = get(h, kind);
        if action.is_null() {
            continue;
        }
        let at = child(path, kind);
        if count > 0 {
            errs.push(FieldError::forbidden(&at, "may not specify more than 1 handler type"));
            continue;
        }
        count += 1;
        match *kind {
            "exec" if arr_at(action, "command").is_empty() => {
                errs.push(FieldError::required(&child(&at, "command"), ""));
            }
            "httpGet" => {
                if str_at(action, "path").is_empty() {
                    errs.push(FieldError::required(&child(&at, "path"), ""));
                }
                errs.extend(port_num_or_name(get(action, "port"), &child(&at, "port")));
                let scheme = str_at(action, "scheme");
                if scheme != "HTTP" && scheme != "HTTPS" {
                    errs.push(FieldError::not_supported(&child(&at, "scheme"), scheme, &["HTTP", "HTTPS"]));
                }
                for header in arr_at(action, "httpHeaders") {
                    let name = str_at(header, "name");
                    errs.extend(
                        names::http_header_name(name)
                            .into_iter()
                            .map(|m| FieldError::invalid(&child(&at, "httpHeaders"), name, m)),
                    );
                }
            }
            "tcpSocket" => errs.extend(port_num_or_name(get(action, "port"), &child(&at, "port"))),
            "grpc" => {
                let port = int_at(action, "port").unwrap_or(0);
                errs.extend(
                    names::port_num(port).into_iter().map(|m| FieldError::invalid(&child(&at, "port"), port, m)),
                );
            }
            "sleep" => {
                let seconds = int_at(action, "seconds").unwrap_or(0);
                if let Some(g) = grace
                    && (seconds < 0 || seconds > g)
                {
                    errs.push(FieldError::invalid(
                        &at,
                        seconds,
                        format!("must be non-negative and less than terminationGracePeriodSeconds ({g})"),
                    ));
                }
            }
            _ => {}
        }
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
    errs
}

/// `ValidatePortNumOrName` for an IntOrString port.
pub(crate) fn port_num_or_name(port: &Value, path: &str) -> Vec<FieldError> {
    match port {
        Value::String(name) => {
            names::port_name(name).into_iter().map(|m| FieldError::invalid(path, name.as_str(), m)).collect()
        }
        other => {
            let n = other.as_i64().unwrap_or(0);
            names::port_num(n).into_iter().map(|m| FieldError::invalid(path, n, m)).collect()
        }
    }
}
