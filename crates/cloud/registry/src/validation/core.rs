//! Rules of the core kinds other than Pod (ConfigMap, Secret, Service, Endpoints, Namespace, Node, Event)
//! and of coordination.k8s.io Lease, on create and on update.

use super::container::{port_num_or_name, quantities};
use super::json::{self, arr_at, child, get, index, int_at, key, str_at, string_map};
use super::meta::{self, MetaRules};
use super::names::{self, NameRule};
use super::schema::decode_base64;
use super::{FieldError, KindInfo, go_quote};
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// Kubernetes' cap on the data of one ConfigMap or Secret.
pub(crate) const MAX_SECRET_SIZE: usize = 1024 * 1024;
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const FIELD_IMMUTABLE: &str = "field is immutable";
const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";

/// A core kind (or Lease) on create.
pub(crate) fn validate(kind: &str, obj: &Value, info: KindInfo) -> Vec<FieldError> {
    let rules = MetaRules { namespaced: info.namespaced, name_rule: info.name_rule, kube_finalizers: kind != "Lease" };
    let meta_errs = || meta::validate(get(obj, "metadata"), rules);
    match kind {
        "ConfigMap" => [meta_errs(), config_map(obj)].concat(),
        "Secret" => [meta_errs(), secret(obj)].concat(),
        "Service" => [meta_errs(), service(obj)].concat(),
        "Endpoints" => [meta_errs(), endpoints(obj)].concat(),
        "Namespace" => [meta_errs(), namespace(obj)].concat(),
        "Node" => [meta_errs(), node(obj)].concat(),
        "Lease" => [meta_errs(), lease(obj)].concat(),
        "Event" => {
            let errs = event(obj);
            if !errs.is_empty() {
                return errs;
            }
            // Kubernetes checks only generic metadata rules for core/v1 Events, and only once the
            // event's own rules pass.
            let generic = MetaRules { namespaced: true, name_rule: NameRule::PathSegment, kube_finalizers: false };
            meta::validate(get(obj, "metadata"), generic)
        }
        _ => Vec::new(),
    }
}

/// What may not change on update, per kind (metadata is checked by the caller).
pub(crate) fn validate_update(kind: &str, new: &Value, old: &Value) -> Vec<FieldError> {
    match kind {
        "ConfigMap" => immutable_data(new, old, &["data", "binaryData"]),
        "Secret" => {
            let mut errs = Vec::new();
            let (nt, ot) = (str_at(new, "type"), str_at(old, "type"));
            if nt != ot {
                errs.push(FieldError::invalid("type", nt, FIELD_IMMUTABLE));
            }
            errs.extend(immutable_data(new, old, &["data"]));
            errs
        }
        "Service" => service_update(new, old),
        "Node" => node_update(new, old),
        _ => Vec::new(),
    }
}

fn immutable_data(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if get(old, "immutable").as_bool() == Some(true) {
        if get(new, "immutable").as_bool() != Some(true) {
            errs.push(FieldError::forbidden("immutable", IMMUTABLE_WHEN_SET));
        }
        for field in fields {
            if !json::same(get(new, field), get(old, field)) {
                errs.push(FieldError::forbidden(field, IMMUTABLE_WHEN_SET));
            }
        }
    }
    errs
}

fn config_key_errors(k: &str, path: &str) -> Vec<FieldError> {
    names::config_map_key(k).into_iter().map(|m| FieldError::invalid(path, k, m)).collect()
}

/// `ValidateConfigMap`.
fn config_map(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0;
    let binary = json::obj_at(obj, "binaryData");
    for (k, v) in string_map(obj, "data") {
        let at = key("data", k);
        errs.extend(config_key_errors(k, &at));
        if binary.is_some_and(|b| b.contains_key(k)) {
            errs.push(FieldError::invalid(&at, k, "duplicate of key present in binaryData"));
        }
        total += v.len();
    }
    for (k, v) in binary.into_iter().flatten() {
        errs.extend(config_key_errors(k, &key("binaryData", k)));
        total += v.as_str().and_then(decode_base64).map_or(0, |b| b.len());
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long("", MAX_SECRET_SIZE));
    }
    errs
}

/// Go's `json.Unmarshal` into a map, reduced to the messages users see for bad docker configs.
fn docker_config_error(bytes: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(_) | Value::Null) => None,
        Ok(other) => {
            let kind = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Bool(_) => "bool",
                _ => "number",
            };
            Some(format!("json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"))
        }
        Err(e) if e.is_eof() => Some("unexpected end of JSON input".to_string()),
        Err(e) => {
            let col = e.column().saturating_sub(1);
            let line = String::from_utf8_lossy(bytes).lines().nth(e.line().saturating_sub(1)).unwrap_or("").to_string();
            let c = line.chars().nth(col).unwrap_or(' ');
            Some(format!("invalid character '{c}' looking for beginning of value"))
        }
    }
}

/// `ValidateSecret` (stringData is already merged into data by defaulting, as Kubernetes' conversion does).
fn secret(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let data = json::obj_at(obj, "data");
    let decoded = |k: &str| data.and_then(|d| d.get(k)).and_then(Value::as_str).and_then(decode_base64);
    let mut total = 0;
    for (k, v) in data.into_iter().flatten() {
        errs.extend(config_key_errors(k, &key("data", k)));
        total += v.as_str().and_then(decode_base64).map_or(0, |b| b.len());
    }
    if total > MAX_SECRET_SIZE {
        errs.push(FieldError::too_long("data", MAX_SECRET_SIZE));
    }
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    match str_at(obj, "type") {
        "kubernetes.io/service-account-token" => {
            let name = string_map(get(obj, "metadata"), "annotations")
                .into_iter()
                .find(|(k, _)| *k == "kubernetes.io/service-account.name")
                .map(|(_, v)| v)
                .unwrap_or("");
            if name.is_empty() {
                errs.push(FieldError::required(&key("metadata.annotations", "kubernetes.io/service-account.name"), ""));
            }
        }
        "kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson" => {
            let k = if str_at(obj, "type") == "kubernetes.io/dockercfg" { ".dockercfg" } else { ".dockerconfigjson" };
            if !has(k) {
                errs.push(FieldError::required(&key("data", k), ""));
            } else if let Some(msg) = docker_config_error(&decoded(k).unwrap_or_default()) {
                errs.push(FieldError::invalid(&key("data", k), "<secret contents redacted>", msg));
            }
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(FieldError::required(&key("data", "username"), ""));
            errs.push(FieldError::required(&key("data", "password"), ""));
        }
        "kubernetes.io/ssh-auth" if decoded("ssh-privatekey").unwrap_or_default().is_empty() => {
            errs.push(FieldError::required(&key("data", "ssh-privatekey"), ""));
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !has(k) {
                    errs.push(FieldError::required(&key("data", k), ""));
                }
            }
        }
        _ => {}
    }
    errs
}

// --- Service ---------------------------------------------------------------------------------------------

fn is_headless(svc: &Value) -> bool {
    json::string_list(get(svc, "spec"), "clusterIPs") == ["None"]
}

/// Go's `%#v` of the `core.ServicePort` key Kubernetes reports for a duplicate port.
fn service_port_key_text(protocol: &str, port: i64) -> String {
    format!(
        "core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{port}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
        go_quote(protocol)
    )
}

/// `ValidateService`.
fn service(svc: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = get(svc, "spec");
    let svc_type = str_at(spec, "type");
    let ports = arr_at(spec, "ports");
    let cluster_ips = json::string_list(spec, "clusterIPs");
    let headless = is_headless(svc);
    if ports.is_empty() && !headless && svc_type != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    match svc_type {
        "LoadBalancer" | "NodePort" if headless => errs.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            "None",
            format!("may not be set to 'None' for {svc_type} services"),
        )),
        "ExternalName" => {
            if !cluster_ips.is_empty() {
                errs.push(FieldError::forbidden("spec.clusterIPs", "may not be set for ExternalName services"));
            }
            if !arr_at(spec, "ipFamilies").is_empty() {
                errs.push(FieldError::forbidden("spec.ipFamilies", "may not be set for ExternalName services"));
            }
            if json::has(spec, "ipFamilyPolicy") {
                errs.push(FieldError::forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"));
            }
            let external = str_at(spec, "externalName");
            let cname = external.strip_suffix('.').unwrap_or(external);
            if cname.is_empty() {
                errs.push(FieldError::required("spec.externalName", ""));
            } else {
                errs.extend(
                    names::dns1123_subdomain(cname)
                        .into_iter()
                        .map(|m| FieldError::invalid("spec.externalName", cname, m)),
                );
            }
        }
        _ => {}
    }
    let mut port_names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = index("spec.ports", i);
        let name = str_at(p, "name");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(&child(&at, "name"), ""));
        } else if !name.is_empty() {
            errs.extend(
                names::dns1123_label(name).into_iter().map(|m| FieldError::invalid(&child(&at, "name"), name, m)),
            );
            if !port_names.insert(name) {
                errs.push(FieldError::duplicate(&child(&at, "name"), name));
            }
        }
        let port = int_at(p, "port").unwrap_or(0);
        errs.extend(names::port_num(port).into_iter().map(|m| FieldError::invalid(&child(&at, "port"), port, m)));
        errs.extend(protocol_errors(str_at(p, "protocol"), &child(&at, "protocol")));
        errs.extend(port_num_or_name(get(p, "targetPort"), &child(&at, "targetPort")));
        if let Some(app) = get(p, "appProtocol").as_str() {
            errs.extend(
                names::qualified_name(app).into_iter().map(|m| FieldError::invalid(&child(&at, "appProtocol"), app, m)),
            );
        }
    }
    errs.extend(meta::validate_labels(&string_map(spec, "selector"), "spec.selector"));
    let affinity = str_at(spec, "sessionAffinity");
    match affinity {
        "" => errs.push(FieldError::required("spec.sessionAffinity", "")),
        "ClientIP" => {
            let timeout = get(get(get(spec, "sessionAffinityConfig"), "clientIP"), "timeoutSeconds");
            if !json::has(spec, "sessionAffinityConfig") {
                errs.push(FieldError::required("spec.sessionAffinityConfig", "when session affinity type is ClientIP"));
            } else if timeout.is_null() {
                errs.push(FieldError::required(
                    "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                    "when session affinity type is ClientIP",
                ));
            } else if let Some(t) = timeout.as_i64().filter(|t| *t <= 0 || *t > 86400) {
                errs.push(FieldError::invalid(
                    "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                    t,
                    "must be greater than 0 and less than 86400",
                ));
            }
        }
        "None" => {
            if json::has(spec, "sessionAffinityConfig") {
                errs.push(FieldError::forbidden(
                    "spec.sessionAffinityConfig",
                    "must not be set when session affinity is None",
                ));
            }
        }
        other => errs.push(FieldError::not_supported("spec.sessionAffinity", other, &["ClientIP", "None"])),
    }
    if svc_type != "ExternalName" {
        errs.extend(cluster_ip_fields(spec, headless));
    }
    for (i, ip) in json::string_list(spec, "externalIPs").iter().enumerate() {
        let at = index("spec.externalIPs", i);
        match names::ip_error(ip) {
            Some(msg) => errs.push(FieldError::invalid(&at, *ip, msg)),
            None => errs.extend(non_special_ip(ip, &at)),
        }
    }
    const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if svc_type.is_empty() {
        errs.push(FieldError::required("spec.type", ""));
    } else if !TYPES.contains(&svc_type) {
        errs.push(FieldError::not_supported("spec.type", svc_type, TYPES));
    }
    if svc_type == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if int_at(p, "nodePort").unwrap_or(0) != 0 {
                errs.push(FieldError::forbidden(
                    &child(&index("spec.ports", i), "nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    let mut node_ports = BTreeSet::new();
    let mut seen_ports = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let protocol = str_at(p, "protocol");
        let node_port = int_at(p, "nodePort").unwrap_or(0);
        if node_port != 0 && !node_ports.insert((protocol, node_port)) {
            errs.push(FieldError::duplicate(&child(&index("spec.ports", i), "nodePort"), node_port));
        }
        let port = int_at(p, "port").unwrap_or(0);
        if !seen_ports.insert((protocol, port)) {
            errs.push(
                FieldError::duplicate(&index("spec.ports", i), serde_json::json!({"protocol": protocol, "port": port}))
                    .with_value_text(service_port_key_text(protocol, port)),
            );
        }
    }
    let ranges = json::string_list(spec, "loadBalancerSourceRanges");
    if !ranges.is_empty() {
        let at = "spec.LoadBalancerSourceRanges";
        if svc_type != "LoadBalancer" {
            errs.push(FieldError::forbidden(at, "may only be used when `type` is 'LoadBalancer'"));
        }
        for (i, r) in ranges.iter().enumerate() {
            let r = r.trim();
            if let Some(msg) = names::cidr_error(r) {
                errs.push(FieldError::invalid(&index(at, i), r, msg));
            }
        }
    }
    if json::has(spec, "allocateLoadBalancerNodePorts") && svc_type != "LoadBalancer" {
        errs.push(FieldError::forbidden(
            "spec.allocateLoadBalancerNodePorts",
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    if svc_type == "LoadBalancer" && !json::has(spec, "allocateLoadBalancerNodePorts") {
        errs.push(FieldError::required("allocateLoadBalancerNodePorts", ""));
    }
    if let Some(class) = get(spec, "loadBalancerClass").as_str() {
        if svc_type == "LoadBalancer" {
            errs.extend(
                names::qualified_name(class)
                    .into_iter()
                    .map(|m| FieldError::invalid("spec.loadBalancerClass", class, m)),
            );
        } else {
            errs.push(FieldError::forbidden(
                "spec.loadBalancerClass",
                "may only be used when `type` is 'LoadBalancer'",
            ));
        }
    }
    errs.extend(traffic_policies(spec, svc_type));
    errs
}

fn protocol_errors(protocol: &str, path: &str) -> Option<FieldError> {
    if protocol.is_empty() {
        Some(FieldError::required(path, ""))
    } else if !PROTOCOLS.contains(&protocol) {
        Some(FieldError::not_supported(path, protocol, PROTOCOLS))
    } else {
        None
    }
}

fn traffic_policies(spec: &Value, svc_type: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let externally_accessible = svc_type == "LoadBalancer"
        || svc_type == "NodePort"
        || (svc_type == "ClusterIP" && !arr_at(spec, "externalIPs").is_empty());
    let etp = str_at(spec, "externalTrafficPolicy");
    if !externally_accessible {
        if !etp.is_empty() {
            errs.push(FieldError::invalid(
                "spec.externalTrafficPolicy",
                etp,
                "may only be set for externally-accessible services",
            ));
        }
    } else if etp.is_empty() {
        errs.push(FieldError::required("spec.externalTrafficPolicy", ""));
    } else if etp != "Cluster" && etp != "Local" {
        errs.push(FieldError::not_supported("spec.externalTrafficPolicy", etp, &["Cluster", "Local"]));
    }
    let health = int_at(spec, "healthCheckNodePort").unwrap_or(0);
    let needs_health_check = svc_type == "LoadBalancer" && etp == "Local";
    if !needs_health_check && health != 0 {
        errs.push(FieldError::invalid(
            "spec.healthCheckNodePort",
            health,
            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
        ));
    } else if needs_health_check && health != 0 {
        errs.extend(
            names::port_num(health).into_iter().map(|m| FieldError::invalid("spec.healthCheckNodePort", health, m)),
        );
    }
    match get(spec, "internalTrafficPolicy").as_str() {
        None if matches!(svc_type, "NodePort" | "LoadBalancer" | "ClusterIP") => {
            errs.push(FieldError::required("spec.internalTrafficPolicy", ""))
        }
        Some(itp) if itp != "Cluster" && itp != "Local" => {
            errs.push(FieldError::not_supported("spec.internalTrafficPolicy", itp, &["Cluster", "Local"]))
        }
        _ => {}
    }
    if let Some(td) = get(spec, "trafficDistribution").as_str().filter(|td| *td != "PreferClose") {
        errs.push(FieldError::not_supported("spec.trafficDistribution", td, &["PreferClose"]));
    }
    errs
}

fn ip_family(ip: &str) -> Option<&'static str> {
    names::parse_ip_sloppy(ip).map(|a| if a.is_ipv4() { "IPv4" } else { "IPv6" })
}

/// `ValidateServiceClusterIPsRelatedFields`.
fn cluster_ip_fields(spec: &Value, headless: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let cluster_ip = str_at(spec, "clusterIP");
    let ips = json::string_list(spec, "clusterIPs");
    let ips_value = || Value::from(ips.clone());
    if !cluster_ip.is_empty() {
        if ips.is_empty() {
            errs.push(FieldError::required("spec.clusterIPs", ""));
        } else if ips[0] != cluster_ip {
            errs.push(FieldError::invalid("spec.clusterIPs", ips_value(), "first value must match `clusterIP`"));
        }
    } else if !ips.is_empty() {
        errs.push(FieldError::invalid(
            "spec.clusterIPs",
            ips_value(),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let families = json::string_list(spec, "ipFamilies");
    let mut seen = BTreeSet::new();
    for (i, f) in families.iter().enumerate() {
        if *f != "IPv4" && *f != "IPv6" {
            errs.push(FieldError::not_supported(&index("spec.ipFamilies", i), *f, &["IPv4", "IPv6"]));
        }
        if !seen.insert(*f) {
            errs.push(FieldError::duplicate(&index("spec.ipFamilies", i), *f));
        }
    }
    if let Some(policy) = get(spec, "ipFamilyPolicy").as_str() {
        let policies = ["PreferDualStack", "RequireDualStack", "SingleStack"];
        if !policies.contains(&policy) {
            errs.push(FieldError::not_supported("spec.ipFamilyPolicy", policy, &policies));
        }
    }
    let mut invalid = false;
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && *ip == "None" {
            if ips.len() > 1 {
                invalid = true;
                errs.push(FieldError::invalid(
                    "spec.clusterIPs",
                    ips_value(),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        if let Some(msg) = names::ip_error(ip) {
            invalid = true;
            errs.push(FieldError::invalid(&index("spec.clusterIPs", i), *ip, msg));
        }
    }
    if ips.len() > 2 {
        errs.push(FieldError::invalid("spec.clusterIPs", ips_value(), "may only hold up to 2 values"));
    }
    if invalid {
        return errs;
    }
    if ips.len() > 1 {
        let fams: BTreeSet<_> = ips.iter().filter_map(|ip| ip_family(ip)).collect();
        if fams.len() != ips.len() {
            errs.push(FieldError::invalid(
                "spec.clusterIPs",
                ips_value(),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !headless {
        for (i, (ip, fam)) in ips.iter().zip(&families).enumerate() {
            let actual = ip_family(ip);
            if *fam == "IPv4" && actual == Some("IPv6") {
                errs.push(FieldError::invalid(
                    &index("spec.clusterIPs", i),
                    *ip,
                    format!("expected an IPv4 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
            if *fam == "IPv6" && actual != Some("IPv6") {
                errs.push(FieldError::invalid(
                    &index("spec.clusterIPs", i),
                    *ip,
                    format!("expected an IPv6 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
        }
    }
    errs
}

/// Service update: cluster IPs and IP families may not change once set (an update that leaves them out
/// keeps the stored ones, as Kubernetes' registry does), nor the load balancer class or health check port.
fn service_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (ns, os) = (get(new, "spec"), get(old, "spec"));
    let (nt, ot) = (str_at(ns, "type"), str_at(os, "type"));
    if nt != "ExternalName" && ot != "ExternalName" {
        let mut new_ips = json::string_list(ns, "clusterIPs");
        let old_ips = json::string_list(os, "clusterIPs");
        if new_ips.is_empty() && str_at(ns, "clusterIP").is_empty() {
            new_ips = old_ips.clone();
        }
        let both_headless = new_ips == ["None"] && old_ips == ["None"];
        let list = || Value::from(new_ips.clone());
        if !both_headless {
            if new_ips.len() == old_ips.len() {
                for (i, (n, o)) in new_ips.iter().zip(&old_ips).enumerate() {
                    if n != o {
                        errs.push(FieldError::invalid(&index("spec.clusterIPs", i), list(), "may not change once set"));
                    }
                }
            } else if old_ips.len() > new_ips.len() {
                if new_ips.is_empty() {
                    errs.push(FieldError::invalid("spec.clusterIPs[0]", list(), "primary clusterIP can not be unset"));
                } else if new_ips[0] != old_ips[0] {
                    errs.push(FieldError::invalid("spec.clusterIPs[0]", list(), "may not change once set"));
                }
                if new_ips.len() == 1 && str_at(ns, "ipFamilyPolicy") != "SingleStack" {
                    errs.push(FieldError::invalid(
                        "spec.ipFamilyPolicy",
                        get(ns, "ipFamilyPolicy").clone(),
                        "must be set to 'SingleStack' when releasing the secondary clusterIP",
                    ));
                }
            } else if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
                errs.push(FieldError::invalid("spec.clusterIPs[0]", list(), "may not change once set"));
            }
        }
        let mut new_fams = json::string_list(ns, "ipFamilies");
        let old_fams = json::string_list(os, "ipFamilies");
        if new_fams.is_empty() {
            new_fams = old_fams.clone();
        }
        let new_headless = new_ips == ["None"];
        if new_headless == (old_ips == ["None"])
            && !new_headless
            && new_fams.len() == old_fams.len()
            && new_fams != old_fams
        {
            errs.push(FieldError::invalid(
                "spec.ipFamilies[0]",
                Value::from(new_fams.clone()),
                "may not change once set",
            ));
        }
    }
    if nt == "LoadBalancer" && ot == "LoadBalancer" && get(ns, "loadBalancerClass") != get(os, "loadBalancerClass") {
        errs.push(FieldError::invalid(
            "spec.loadBalancerClass",
            get(ns, "loadBalancerClass").clone(),
            "may not change once set",
        ));
    }
    let needs = |s: &Value| str_at(s, "type") == "LoadBalancer" && str_at(s, "externalTrafficPolicy") == "Local";
    if needs(ns)
        && needs(os)
        && json::has(ns, "healthCheckNodePort")
        && int_at(ns, "healthCheckNodePort") != int_at(os, "healthCheckNodePort")
    {
        errs.push(FieldError::forbidden("spec.healthCheckNodePort", FIELD_IMMUTABLE));
    }
    errs
}

// --- Endpoints, Namespace, Node --------------------------------------------------------------------------

/// `ValidateNonSpecialIP`.
pub(crate) fn non_special_ip(ip: &str, path: &str) -> Vec<FieldError> {
    let Some(addr) = names::parse_ip_sloppy(ip) else {
        return vec![FieldError::invalid(path, ip, "must be a valid IP address")];
    };
    let mut errs = Vec::new();
    let (unspecified, loopback, link_local, link_local_multicast) = match addr {
        IpAddr::V4(a) => {
            let o = a.octets();
            (a.is_unspecified(), a.is_loopback(), o[0] == 169 && o[1] == 254, o[0] == 224 && o[1] == 0 && o[2] == 0)
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            match a.to_ipv4_mapped() {
                Some(v4) => {
                    let o = v4.octets();
                    (
                        v4.is_unspecified(),
                        v4.is_loopback(),
                        o[0] == 169 && o[1] == 254,
                        o[0] == 224 && o[1] == 0 && o[2] == 0,
                    )
                }
                None => (a.is_unspecified(), a.is_loopback(), (s[0] & 0xffc0) == 0xfe80, (s[0] & 0xff0f) == 0xff02),
            }
        }
    };
    if unspecified {
        errs.push(FieldError::invalid(path, ip, format!("may not be unspecified ({ip})")));
    }
    if loopback {
        errs.push(FieldError::invalid(path, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)"));
    }
    if link_local {
        errs.push(FieldError::invalid(path, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"));
    }
    if link_local_multicast {
        errs.push(FieldError::invalid(
            path,
            ip,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
    errs
}

/// `ValidateEndpoints` (subsets; the path starts at "subsets", as in Kubernetes).
fn endpoints(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ss) in arr_at(obj, "subsets").iter().enumerate() {
        let at = index("subsets", i);
        if arr_at(ss, "addresses").is_empty() && arr_at(ss, "notReadyAddresses").is_empty() {
            errs.push(FieldError::required(&at, "must specify `addresses` or `notReadyAddresses`"));
        }
        for list in ["addresses", "notReadyAddresses"] {
            for (j, addr) in arr_at(ss, list).iter().enumerate() {
                let addr_path = index(&child(&at, list), j);
                let ip_path = child(&addr_path, "ip");
                let ip = str_at(addr, "ip");
                if let Some(msg) = names::ip_error(ip) {
                    errs.push(FieldError::invalid(&ip_path, ip, msg));
                }
                let hostname = str_at(addr, "hostname");
                if !hostname.is_empty() {
                    errs.extend(
                        names::dns1123_label(hostname)
                            .into_iter()
                            .map(|m| FieldError::invalid(&child(&addr_path, "hostname"), hostname, m)),
                    );
                }
                if let Some(node) = get(addr, "nodeName").as_str() {
                    errs.extend(
                        names::dns1123_subdomain(node)
                            .into_iter()
                            .map(|m| FieldError::invalid(&child(&addr_path, "nodeName"), node, m)),
                    );
                }
                errs.extend(non_special_ip(ip, &ip_path));
            }
        }
        let ports = arr_at(ss, "ports");
        for (j, p) in ports.iter().enumerate() {
            let pp = index(&child(&at, "ports"), j);
            let name = str_at(p, "name");
            if ports.len() > 1 && name.is_empty() {
                errs.push(FieldError::required(&child(&pp, "name"), ""));
            } else if !name.is_empty() {
                errs.extend(
                    names::dns1123_label(name).into_iter().map(|m| FieldError::invalid(&child(&pp, "name"), name, m)),
                );
            }
            let port = int_at(p, "port").unwrap_or(0);
            errs.extend(names::port_num(port).into_iter().map(|m| FieldError::invalid(&child(&pp, "port"), port, m)));
            errs.extend(protocol_errors(str_at(p, "protocol"), &child(&pp, "protocol")));
            if let Some(app) = get(p, "appProtocol").as_str() {
                errs.extend(
                    names::qualified_name(app)
                        .into_iter()
                        .map(|m| FieldError::invalid(&child(&pp, "appProtocol"), app, m)),
                );
            }
        }
    }
    errs
}

/// `ValidateNamespace`: spec.finalizers (Kubernetes reports them without an index).
fn namespace(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in json::string_list(get(obj, "spec"), "finalizers") {
        errs.extend(names::qualified_name(f).into_iter().map(|m| FieldError::invalid("spec.finalizers", f, m)));
        errs.extend(meta::kube_finalizer_name(f, "spec.finalizers"));
    }
    errs
}

/// The node's podCIDRs as Kubernetes sees them after conversion (podCIDR alone means one podCIDRs entry).
fn pod_cidrs(spec: &Value) -> Vec<&str> {
    let cidrs = json::string_list(spec, "podCIDRs");
    if cidrs.is_empty() {
        let single = str_at(spec, "podCIDR");
        if !single.is_empty() {
            return vec![single];
        }
    }
    cidrs
}

/// Go's `%#v` of a `core.Taint`.
fn taint_text(t: &Value) -> String {
    let time = match get(t, "timeAdded") {
        Value::Null => "(*v1.Time)(nil)".to_string(),
        other => format!("(*v1.Time)({other})"),
    };
    format!(
        "core.Taint{{Key:{}, Value:{}, Effect:{}, TimeAdded:{time}}}",
        go_quote(str_at(t, "key")),
        go_quote(str_at(t, "value")),
        go_quote(str_at(t, "effect"))
    )
}

/// `ValidateNode`.
fn node(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = get(obj, "spec");
    errs.extend(node_taints(arr_at(spec, "taints")));
    let status = get(obj, "status");
    for field in ["capacity", "allocatable"] {
        for (name, (text, q)) in quantities(status, field) {
            if q.nanos < 0 {
                errs.push(FieldError::invalid(
                    &format!("status.{field}.{name}"),
                    text,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    let cidrs = pod_cidrs(spec);
    for (i, c) in cidrs.iter().enumerate() {
        if let Some(msg) = names::cidr_error(c) {
            errs.push(FieldError::invalid(&index("spec.podCIDRs", i), *c, msg));
        }
    }
    if cidrs.len() > 1 {
        let families: BTreeSet<bool> =
            cidrs.iter().filter_map(|c| names::parse_cidr_sloppy(c)).map(|(ip, _)| ip.is_ipv4()).collect();
        if families.len() != cidrs.len() || cidrs.len() > 2 {
            errs.push(FieldError::invalid(
                "spec.podCIDRs",
                Value::from(cidrs.clone()),
                "may specify no more than one CIDR for each IP family",
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, c) in cidrs.iter().enumerate() {
            if !seen.insert(*c) {
                errs.push(FieldError::duplicate(&index("spec.podCIDRs", i), *c));
            }
        }
    }
    errs
}

/// `validateNodeTaints`; Kubernetes reports node taints under "metadata.taints".
fn node_taints(taints: &[Value]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut unique = BTreeSet::new();
    for (i, t) in taints.iter().enumerate() {
        let at = index("metadata.taints", i);
        let k = str_at(t, "key");
        errs.extend(names::qualified_name(k).into_iter().map(|m| FieldError::invalid(&child(&at, "key"), k, m)));
        let value = str_at(t, "value");
        let msgs = names::label_value(value);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(&child(&at, "value"), value, msgs.join(";")));
        }
        let effect = str_at(t, "effect");
        if effect.is_empty() {
            errs.push(FieldError::required(&child(&at, "effect"), ""));
        } else if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            errs.push(FieldError::not_supported(
                &child(&at, "effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
        if !unique.insert((effect, k)) {
            let mut dup = FieldError::duplicate(&at, t.clone()).with_value_text(taint_text(t));
            dup.detail = "taints must be unique by key and effect pair".to_string();
            errs.push(dup);
        }
    }
    errs
}

/// `ValidateNodeUpdate`: podCIDRs and providerID only go from unset to set; externalID never changes.
fn node_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (ns, os) = (get(new, "spec"), get(old, "spec"));
    let old_cidrs = pod_cidrs(os);
    if !old_cidrs.is_empty() {
        let new_cidrs = pod_cidrs(ns);
        let msg = "node updates may not change podCIDR except from \"\" to valid";
        if old_cidrs.len() != new_cidrs.len() {
            errs.push(FieldError::forbidden("spec.podCIDRs", msg));
        } else {
            for (o, n) in old_cidrs.iter().zip(&new_cidrs) {
                if o != n {
                    errs.push(FieldError::forbidden("spec.podCIDRs", msg));
                }
            }
        }
    }
    let old_provider = str_at(os, "providerID");
    if !old_provider.is_empty() && old_provider != str_at(ns, "providerID") {
        errs.push(FieldError::forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    if str_at(ns, "externalID") != str_at(os, "externalID") {
        errs.push(FieldError::forbidden("spec.externalID", "may not be updated"));
    }
    errs
}

// --- Event, Lease ----------------------------------------------------------------------------------------

/// `legacyValidateEvent` (core/v1 Events get no stricter checks).
fn event(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let ns = str_at(get(obj, "metadata"), "namespace");
    let involved_ns = str_at(get(obj, "involvedObject"), "namespace");
    let mismatch = || FieldError::invalid("involvedObject.namespace", involved_ns, "does not match event.namespace");
    if !json::has(obj, "eventTime") {
        if involved_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                errs.push(mismatch());
            }
        } else if ns != involved_ns {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let controller = str_at(obj, "reportingComponent");
        if controller.is_empty() {
            errs.push(FieldError::required("reportingController", ""));
        }
        errs.extend(
            names::qualified_name(controller)
                .into_iter()
                .map(|m| FieldError::invalid("reportingController", controller, m)),
        );
        for (field, limit) in [("reportingInstance", 128), ("action", 128), ("reason", 128)] {
            let value = str_at(obj, field);
            if value.is_empty() {
                errs.push(FieldError::required(field, ""));
            }
            if value.len() > limit {
                errs.push(FieldError::invalid(field, "", format!("can have at most {limit} characters")));
            }
        }
        if str_at(obj, "message").len() > 1024 {
            errs.push(FieldError::invalid("message", "", "can have at most 1024 characters"));
        }
    }
    errs.extend(names::dns1123_subdomain(ns).into_iter().map(|m| FieldError::invalid("namespace", ns, m)));
    errs
}

/// An events.k8s.io/v1 Event on create: `ValidateEventCreate` for a request in that version, the legacy
/// rules and then the strict ones. Kubernetes validates the internal (core) form, so `obj` is converted
/// first and the paths are core's (`message`, `firstTimestamp`, `source`), as its messages show them.
pub(crate) fn event_v1_create(obj: &Value) -> Vec<FieldError> {
    let ev = crate::conversion::event_v1_to_core(obj.clone());
    let mut errs = event(&ev);
    let rules = MetaRules { namespaced: true, name_rule: NameRule::Subdomain, kube_finalizers: true };
    errs.extend(meta::validate(get(&ev, "metadata"), rules));
    errs.extend(event_series(&ev));
    if !json::has(&ev, "eventTime") {
        errs.push(FieldError::required("eventTime", ""));
    }
    let ty = str_at(&ev, "type");
    if ty != "Normal" && ty != "Warning" {
        errs.push(FieldError::invalid("type", "", format!("has invalid value: {ty}")));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if json::has(&ev, field) {
            errs.push(FieldError::invalid(field, "", "needs to be unset"));
        }
    }
    if int_at(&ev, "count").is_some_and(|c| c != 0) {
        errs.push(FieldError::invalid("count", "", "needs to be unset"));
    }
    let source = get(&ev, "source");
    if !str_at(source, "component").is_empty() || !str_at(source, "host").is_empty() {
        errs.push(FieldError::invalid("source", "", "needs to be unset"));
    }
    errs
}

/// An events.k8s.io/v1 Event on update: the legacy rules of its core form (`ValidateEventUpdate`'s strict
/// part, immutable fields and a changed series, is not checked yet).
pub(crate) fn event_v1_update(new: &Value) -> Vec<FieldError> {
    event(&crate::conversion::event_v1_to_core(new.clone()))
}

/// `validateV1EventSeries`.
fn event_series(ev: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let series = get(ev, "series");
    if series.is_object() {
        if int_at(series, "count").unwrap_or(0) < 2 {
            errs.push(FieldError::invalid("series.count", "", "should be at least 2"));
        }
        if !json::has(series, "lastObservedTime") {
            errs.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    errs
}

/// `ValidateLeaseSpec`.
fn lease(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = get(obj, "spec");
    if let Some(d) = int_at(spec, "leaseDurationSeconds").filter(|d| *d <= 0) {
        errs.push(FieldError::invalid("spec.leaseDurationSeconds", d, "must be greater than 0"));
    }
    if let Some(t) = int_at(spec, "leaseTransitions").filter(|t| *t < 0) {
        errs.push(FieldError::invalid("spec.leaseTransitions", t, "must be greater than or equal to 0"));
    }
    let strategy = get(spec, "strategy").as_str();
    if let Some(s) = strategy {
        // Kubernetes appends "strategy" twice to this path.
        let at = "spec.strategy.strategy";
        if s.contains('/') {
            errs.extend(names::qualified_name(s).into_iter().map(|m| FieldError::invalid(at, s, m)));
        } else if s != "OldestEmulationVersion" {
            errs.push(FieldError::not_supported(at, s, &["OldestEmulationVersion"]));
        }
    }
    if !str_at(spec, "preferredHolder").is_empty() && strategy.unwrap_or("").is_empty() {
        errs.push(FieldError::forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"));
    }
    errs
}
