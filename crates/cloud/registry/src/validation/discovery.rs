//! discovery.k8s.io/v1 EndpointSlice, as Kubernetes validates it
//! (`pkg/apis/discovery/validation`): the address type, up to 1,000
//! endpoints of 1 to 100 addresses of that type, hostnames, node names,
//! hints, and up to 20,000 ports with unique names and a protocol; the
//! address type may not change.

use serde_json::Value;

use super::json::{arr_at, child, get, index, str_at};
use super::meta::{self, MetaRules};
use super::names;
use super::{FieldError, KindInfo};

const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20000;
const MAX_ZONE_HINTS: usize = 8;

/// An EndpointSlice on create (`update`: the deprecated `IP` address type is allowed, as Kubernetes allows it
/// on update).
pub(crate) fn validate(obj: &Value, info: KindInfo, update: bool) -> Vec<FieldError> {
    let rules = MetaRules { namespaced: info.namespaced, name_rule: info.name_rule, kube_finalizers: true };
    let mut errs = meta::validate(get(obj, "metadata"), rules);
    let address_type = str_at(obj, "addressType");
    if address_type.is_empty() {
        errs.push(FieldError::required("addressType", ""));
    } else if !(ADDRESS_TYPES.contains(&address_type) || (update && address_type == "IP")) {
        let supported: &[&str] = if update { &["FQDN", "IP", "IPv4", "IPv6"] } else { ADDRESS_TYPES };
        errs.push(FieldError::not_supported("addressType", address_type, supported));
    }
    errs.extend(endpoints(arr_at(obj, "endpoints"), address_type));
    errs.extend(ports(arr_at(obj, "ports")));
    errs
}

/// What may not change: the address type.
pub(crate) fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (n, o) = (str_at(new, "addressType"), str_at(old, "addressType"));
    if n != o { vec![FieldError::invalid("addressType", n, "field is immutable")] } else { Vec::new() }
}

fn endpoints(eps: &[Value], address_type: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if eps.len() > MAX_ENDPOINTS {
        errs.push(FieldError::too_many("endpoints", eps.len(), MAX_ENDPOINTS));
        return errs;
    }
    for (i, ep) in eps.iter().enumerate() {
        let at = index("endpoints", i);
        let addresses_at = child(&at, "addresses");
        let addresses = arr_at(ep, "addresses");
        if addresses.is_empty() {
            errs.push(FieldError::required(&addresses_at, "must contain at least 1 address"));
        } else if addresses.len() > MAX_ADDRESSES {
            errs.push(FieldError::too_many(&addresses_at, addresses.len(), MAX_ADDRESSES));
        }
        for (j, a) in addresses.iter().enumerate() {
            let path = index(&addresses_at, j);
            let a = a.as_str().unwrap_or_default();
            match address_type {
                "IP" => errs.extend(names::ip_error(a).map(|m| FieldError::invalid(&path, a, m))),
                "IPv4" | "IPv6" => {
                    let ok = names::parse_ip_sloppy(a).is_some_and(|ip| ip.is_ipv4() == (address_type == "IPv4"));
                    if ok {
                        errs.extend(super::core::non_special_ip(a, &path));
                    } else {
                        errs.push(FieldError::invalid(&path, a, format!("must be a valid {address_type} address")));
                    }
                }
                "FQDN" => {
                    errs.extend(names::dns1123_subdomain(a).into_iter().map(|m| FieldError::invalid(&path, a, m)));
                }
                _ => {}
            }
        }
        if let Some(h) = get(ep, "hostname").as_str() {
            let path = child(&at, "hostname");
            errs.extend(names::dns1123_label(h).into_iter().map(|m| FieldError::invalid(&path, h, m)));
        }
        if let Some(n) = get(ep, "nodeName").as_str() {
            let path = child(&at, "nodeName");
            errs.extend(names::dns1123_subdomain(n).into_iter().map(|m| FieldError::invalid(&path, n, m)));
        }
        let zones = arr_at(get(ep, "hints"), "forZones");
        if zones.len() > MAX_ZONE_HINTS {
            errs.push(FieldError::too_many(&child(&child(&at, "hints"), "forZones"), zones.len(), MAX_ZONE_HINTS));
        }
    }
    errs
}

fn ports(ports: &[Value]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if ports.len() > MAX_PORTS {
        errs.push(FieldError::too_many("ports", ports.len(), MAX_PORTS));
        return errs;
    }
    let mut names_seen = std::collections::BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let at = index("ports", i);
        let name = str_at(p, "name");
        if !name.is_empty() {
            let path = child(&at, "name");
            errs.extend(names::dns1123_label(name).into_iter().map(|m| FieldError::invalid(&path, name, m)));
        }
        if !names_seen.insert(name) {
            errs.push(FieldError::duplicate(&child(&at, "name"), name));
        }
        let protocol = str_at(p, "protocol");
        if protocol.is_empty() {
            errs.push(FieldError::required(&child(&at, "protocol"), ""));
        } else if !PROTOCOLS.contains(&protocol) {
            errs.push(FieldError::not_supported(&child(&at, "protocol"), protocol, PROTOCOLS));
        }
        if let Some(port) = get(p, "port").as_i64() {
            let path = child(&at, "port");
            errs.extend(names::port_num(port).into_iter().map(|m| FieldError::invalid(&path, port, m)));
        }
        if let Some(app) = get(p, "appProtocol").as_str() {
            let path = child(&at, "appProtocol");
            errs.extend(names::qualified_name(app).into_iter().map(|m| FieldError::invalid(&path, app, m)));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::validation::{validate_create, validate_update};

    fn messages(errs: &[crate::validation::FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.message()).collect()
    }

    #[test]
    fn endpoint_slices_are_checked_as_kubernetes_checks_them() {
        let ok = json!({"metadata": {"name": "web-abcde", "namespace": "default"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.1.0.5"], "conditions": {"ready": true}, "nodeName": "edge-1"}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]});
        assert!(validate_create("discovery.k8s.io", "EndpointSlice", &ok).is_empty());
        let bad = json!({"metadata": {"name": "web-abcde", "namespace": "default"}, "addressType": "IPv4",
            "endpoints": [{"addresses": []}, {"addresses": ["fd00::1", "127.0.0.1"], "hostname": "A_B"}],
            "ports": [{"name": "http", "port": 0, "protocol": "TCP"}, {"name": "http", "protocol": "ICMP"}]});
        assert_eq!(
            messages(&validate_create("discovery.k8s.io", "EndpointSlice", &bad)),
            [
                "endpoints[0].addresses: Required value: must contain at least 1 address",
                "endpoints[1].addresses[0]: Invalid value: \"fd00::1\": must be a valid IPv4 address",
                "endpoints[1].addresses[1]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
                "endpoints[1].hostname: Invalid value: \"A_B\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
                "ports[1].name: Duplicate value: \"http\"",
                "ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ]
        );
        // Defaults first, as every writer applies them: a port's name "" and protocol TCP.
        let mut bare = json!({"metadata": {"name": "s", "namespace": "default"}, "addressType": "IPv4",
            "ports": [{"port": 80}]});
        crate::defaults::apply_defaults("discovery.k8s.io", "EndpointSlice", &mut bare);
        assert_eq!(bare["ports"], json!([{"name": "", "port": 80, "protocol": "TCP"}]));
        assert!(validate_create("discovery.k8s.io", "EndpointSlice", &bare).is_empty());
        let untyped = json!({"metadata": {"name": "s", "namespace": "default"}});
        assert_eq!(
            messages(&validate_create("discovery.k8s.io", "EndpointSlice", &untyped)),
            ["addressType: Required value"]
        );
        let mut changed = ok.clone();
        changed["addressType"] = json!("FQDN");
        changed["endpoints"] = json!([{"addresses": ["web.example.com"]}]);
        assert_eq!(
            messages(&validate_update("discovery.k8s.io", "EndpointSlice", &changed, &ok)),
            ["addressType: Invalid value: \"FQDN\": field is immutable"]
        );
    }
}
