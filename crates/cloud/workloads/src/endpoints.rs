//! The Endpoints and EndpointSlice controllers (Kubernetes'
//! `pkg/controller/endpoint` and `pkg/controller/endpointslice`): for a
//! Service with a selector, the addresses of the pods it selects — ready
//! ones as `addresses` (`conditions.ready: true`), the others as
//! `notReadyAddresses` — with the port each pod serves the Service's ports
//! on (a `targetPort` name resolved against the pod's container ports).
//!
//! A sync is a function of the world ([`sync`]): it reads the Service, its
//! pods (through the label index), its Endpoints and its slices, and plans
//! writes only where the stored object differs from the one computed.
//!
//! What Kubernetes does and this copies: an Endpoints named as the Service,
//! labelled as it (plus `service.kubernetes.io/headless` for a headless
//! one), with `endpoints.kubernetes.io/last-change-trigger-time` and at most
//! 1,000 addresses (`endpoints.kubernetes.io/over-capacity: truncated`
//! beyond, ready ones kept first); terminating pods are left out of it.
//! EndpointSlices `{service}-xxxxx` owned by the Service, labelled
//! `kubernetes.io/service-name` and `endpointslice.kubernetes.io/managed-by:
//! endpointslice-controller.k8s.io`, at most 100 endpoints each, one set
//! per distinct port mapping, with the `ready`, `serving` and `terminating`
//! conditions, `nodeName`, `zone` and `targetRef`; a Service with no
//! endpoints keeps one empty slice. An endpoint stays in the slice it is in
//! while it lasts, and new ones fill the slices with room first, so a pod's
//! change rewrites one slice, not all of them.

use std::collections::{BTreeMap, BTreeSet};

use edgehive_store::resources::{ENDPOINT_SLICES, ENDPOINTS, SERVICES};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::plan::{Action, Plan};
use crate::world::{OwnerRef, Phase, PodInfo, Stored, World, labels_of, selector_of, str_at};

/// The label that names a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label that names a slice's manager.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller, as the managed-by label names it.
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// The label of a headless Service's Endpoints and slices.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// When the change that led to the Endpoints' content happened.
pub const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// Set to `truncated` on Endpoints that hold only the first 1,000 addresses.
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
/// Most addresses in an Endpoints.
pub const MAX_ENDPOINTS: usize = 1000;
/// Most endpoints in a slice (the controller's default `--max-endpoints-per-slice`).
pub const MAX_PER_SLICE: usize = 100;

/// One selected pod as an endpoint.
#[derive(Debug, Clone, PartialEq)]
struct Member<'a> {
    pod: &'a PodInfo,
    ready: bool,
    serving: bool,
    terminating: bool,
    hostname: Option<&'a str>,
    /// The ports of the Service as this pod serves them.
    ports: Vec<Value>,
}

/// The Service's ports as `pod` serves them (`FindPort`): a number as it
/// is, a name looked up among the pod's container ports of that protocol;
/// a port the pod does not have is left out.
fn resolve_ports(svc_ports: &[Value], pod: &PodInfo, with_empty_name: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for p in svc_ports {
        let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        let port = match p.get("targetPort") {
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(name)) => match name.parse::<i64>() {
                Ok(n) => Some(n),
                Err(_) => pod.named_ports.iter().find(|(n, pr, _)| n == name && pr == protocol).map(|(_, _, n)| *n),
            },
            _ => p.get("port").and_then(Value::as_i64),
        };
        let Some(port) = port.filter(|n| *n > 0) else { continue };
        let mut e = Map::new();
        let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
        if with_empty_name || !name.is_empty() {
            e.insert("name".into(), json!(name));
        }
        e.insert("port".into(), json!(port));
        e.insert("protocol".into(), json!(protocol));
        if let Some(ap) = p.get("appProtocol").filter(|v| v.is_string()) {
            e.insert("appProtocol".into(), ap.clone());
        }
        out.push(Value::Object(e));
    }
    out
}

fn target_ref(pod: &PodInfo) -> Value {
    json!({"kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid})
}

/// The Service's labels on its Endpoints and slices, with the headless mark.
fn labels_for(svc: &Value, headless: bool, slice: bool) -> BTreeMap<String, String> {
    let mut labels = labels_of(svc, "/metadata/labels");
    labels.remove(HEADLESS_LABEL);
    if slice {
        labels.remove(SERVICE_NAME_LABEL);
        labels.remove(MANAGED_BY_LABEL);
        labels.insert(SERVICE_NAME_LABEL.into(), str_at(svc, "/metadata/name").into());
        labels.insert(MANAGED_BY_LABEL.into(), CONTROLLER_NAME.into());
    }
    if headless {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    }
    labels
}

/// A JSON merge patch turning the map `old` into `new` (removed keys as null).
fn map_patch(old: &Value, new: &BTreeMap<String, String>) -> Value {
    let mut out = Map::new();
    for k in old.as_object().into_iter().flatten().map(|(k, _)| k) {
        if !new.contains_key(k) {
            out.insert(k.clone(), Value::Null);
        }
    }
    for (k, v) in new {
        out.insert(k.clone(), json!(v));
    }
    Value::Object(out)
}

fn same_labels(stored: &Value, want: &BTreeMap<String, String>) -> bool {
    labels_of(stored, "/metadata/labels") == *want
}

/// Syncs the Endpoints and EndpointSlices of Service `ns/name`.
pub fn sync(world: &World, ns: &str, name: &str, _now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(svc) = world.services.get(ns, name) else {
        // Gone: the Endpoints it had go too (slices go with their owner).
        if let Some(ep) = world.endpoints.get(ns, name)
            && ep.value.pointer("/metadata/annotations").and_then(|a| a.get(TRIGGER_TIME)).is_some()
        {
            plan.actions.push(Action::delete(&ENDPOINTS, ns, name, ep.uid()));
        }
        return plan;
    };
    let selector = selector_of(&svc.value);
    if selector.is_empty() || svc.deleting() {
        // Services without a selector get their endpoints from whoever wrote them.
        return plan;
    }
    let v = &svc.value;
    let headless = str_at(v, "/spec/clusterIP") == "None";
    let publish_not_ready = v.pointer("/spec/publishNotReadyAddresses").and_then(Value::as_bool).unwrap_or(false);
    let svc_ports: Vec<Value> = v.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut trigger = svc_created(v);
    let mut members = Vec::new();
    for pod in world.pods.selected(ns, &selector) {
        if pod.ip.is_empty() || matches!(pod.phase, Phase::Succeeded | Phase::Failed) {
            continue;
        }
        let serving = pod.ready();
        let terminating = pod.deleting;
        trigger = trigger.max(pod.ready_since.or(pod.created));
        let hostname = (!pod.hostname.is_empty() && pod.subdomain == name).then_some(pod.hostname.as_str());
        members.push(Member {
            pod,
            ready: publish_not_ready || (serving && !terminating),
            serving,
            terminating,
            hostname,
            ports: Vec::new(),
        });
    }
    members.sort_by(|a, b| (a.pod.ip.as_str(), a.pod.uid.as_str()).cmp(&(b.pod.ip.as_str(), b.pod.uid.as_str())));
    endpoints(world, &svc, &svc_ports, headless, publish_not_ready, &members, trigger, &mut plan);
    slices(world, &svc, &svc_ports, headless, &members, &mut plan);
    plan
}

fn svc_created(v: &Value) -> Option<OffsetDateTime> {
    v.pointer("/metadata/creationTimestamp").and_then(Value::as_str).and_then(edgehive_store::parse_rfc3339)
}

/// The Endpoints' subsets: addresses grouped by the ports they serve.
fn subsets(svc_ports: &[Value], headless: bool, publish_not_ready: bool, members: &[Member<'_>]) -> (Vec<Value>, bool) {
    // ports (as JSON text) → (ports, ready addresses, not-ready addresses)
    type Group = (Vec<Value>, Vec<Value>, Vec<Value>);
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for m in members {
        if m.terminating && !publish_not_ready {
            continue;
        }
        let mut ports = resolve_ports(svc_ports, m.pod, false);
        if ports.is_empty() && !(svc_ports.is_empty() && headless) {
            continue;
        }
        ports.sort_by_key(Value::to_string);
        let mut addr = Map::new();
        addr.insert("ip".into(), json!(m.pod.ip));
        if let Some(h) = m.hostname {
            addr.insert("hostname".into(), json!(h));
        }
        if !m.pod.node.is_empty() {
            addr.insert("nodeName".into(), json!(m.pod.node));
        }
        addr.insert("targetRef".into(), target_ref(m.pod));
        let key = Value::Array(ports.clone()).to_string();
        let g = groups.entry(key).or_insert_with(|| (ports, Vec::new(), Vec::new()));
        if publish_not_ready || m.serving {
            g.1.push(Value::Object(addr));
        } else {
            g.2.push(Value::Object(addr));
        }
    }
    // Over 1,000: ready addresses first, in subset order.
    let total: usize = groups.values().map(|g| g.1.len() + g.2.len()).sum();
    let truncated = total > MAX_ENDPOINTS;
    let mut room = MAX_ENDPOINTS;
    for g in groups.values_mut() {
        g.1.truncate(room);
        room -= g.1.len();
    }
    for g in groups.values_mut() {
        g.2.truncate(room);
        room -= g.2.len();
    }
    let out = groups
        .into_values()
        .filter(|(_, r, n)| !r.is_empty() || !n.is_empty())
        .map(|(ports, ready, not_ready)| {
            let mut s = Map::new();
            if !ready.is_empty() {
                s.insert("addresses".into(), Value::Array(ready));
            }
            if !not_ready.is_empty() {
                s.insert("notReadyAddresses".into(), Value::Array(not_ready));
            }
            if !ports.is_empty() {
                s.insert("ports".into(), Value::Array(ports));
            }
            Value::Object(s)
        })
        .collect();
    (out, truncated)
}

#[allow(clippy::too_many_arguments)] // the parts of one sync
fn endpoints(
    world: &World,
    svc: &Stored,
    svc_ports: &[Value],
    headless: bool,
    publish_not_ready: bool,
    members: &[Member<'_>],
    trigger: Option<OffsetDateTime>,
    plan: &mut Plan,
) {
    let v = &svc.value;
    let (ns, name) = (str_at(v, "/metadata/namespace"), svc.name());
    let (subsets, truncated) = subsets(svc_ports, headless, publish_not_ready, members);
    let labels = labels_for(v, headless, false);
    let over = truncated.then_some("truncated");
    let trigger = trigger.map(edgehive_store::rfc3339);
    match world.endpoints.get(ns, name) {
        None => {
            let mut annotations = Map::new();
            if let Some(t) = &trigger {
                annotations.insert(TRIGGER_TIME.into(), json!(t));
            }
            if let Some(o) = over {
                annotations.insert(OVER_CAPACITY.into(), json!(o));
            }
            plan.actions.push(Action::Create {
                res: &ENDPOINTS,
                object: json!({
                    "apiVersion": "v1", "kind": "Endpoints",
                    "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
                    "subsets": subsets,
                }),
            });
        }
        Some(ep) => {
            let cur = &ep.value;
            let cur_subsets = cur.get("subsets").cloned().unwrap_or(Value::Array(Vec::new()));
            let cur_over =
                cur.pointer("/metadata/annotations").and_then(|a| a.get(OVER_CAPACITY)).and_then(Value::as_str);
            if cur_subsets == Value::Array(subsets.clone()) && same_labels(cur, &labels) && cur_over == over {
                return;
            }
            let mut annotations = Map::new();
            if let Some(t) = &trigger {
                annotations.insert(TRIGGER_TIME.into(), json!(t));
            }
            annotations.insert(OVER_CAPACITY.into(), over.map_or(Value::Null, |o| json!(o)));
            plan.actions.push(Action::Patch {
                res: &ENDPOINTS,
                namespace: ns.to_string(),
                name: name.to_string(),
                uid: ep.uid().to_string(),
                rev: Some(ep.rev),
                patch: json!({
                    "metadata": {"labels": map_patch(cur.pointer("/metadata/labels").unwrap_or(&Value::Null), &labels),
                                 "annotations": annotations},
                    "subsets": subsets,
                }),
            });
        }
    }
}

/// An endpoint of a slice.
fn slice_endpoint(world: &World, m: &Member<'_>) -> Value {
    let mut e = Map::new();
    e.insert("addresses".into(), json!([m.pod.ip]));
    e.insert("conditions".into(), json!({"ready": m.ready, "serving": m.serving, "terminating": m.terminating}));
    if let Some(h) = m.hostname {
        e.insert("hostname".into(), json!(h));
    }
    e.insert("targetRef".into(), target_ref(m.pod));
    if !m.pod.node.is_empty() {
        e.insert("nodeName".into(), json!(m.pod.node));
        if let Some(zone) = world.nodes.get(&m.pod.node).and_then(|n| n.labels.get("topology.kubernetes.io/zone")) {
            e.insert("zone".into(), json!(zone));
        }
    }
    Value::Object(e)
}

/// The identity of an endpoint across syncs: its pod.
fn endpoint_uid(e: &Value) -> &str {
    str_at(e, "/targetRef/uid")
}

fn slices(world: &World, svc: &Stored, svc_ports: &[Value], headless: bool, members: &[Member<'_>], plan: &mut Plan) {
    let v = &svc.value;
    let (ns, name) = (str_at(v, "/metadata/namespace"), svc.name());
    let family = if v.pointer("/spec/ipFamilies/0").and_then(Value::as_str) == Some("IPv6") { "IPv6" } else { "IPv4" };
    let labels = labels_for(v, headless, true);
    // Wanted: ports (as JSON text) → (ports, endpoints by pod uid).
    let mut wanted: BTreeMap<String, (Vec<Value>, BTreeMap<String, Value>)> = BTreeMap::new();
    for m in members {
        if (m.pod.ip.contains(':')) != (family == "IPv6") {
            continue;
        }
        let ports = resolve_ports(svc_ports, m.pod, true);
        if ports.is_empty() && !svc_ports.is_empty() {
            continue;
        }
        let key = Value::Array(ports.clone()).to_string();
        wanted
            .entry(key)
            .or_insert_with(|| (ports, BTreeMap::new()))
            .1
            .insert(m.pod.uid.clone(), slice_endpoint(world, m));
    }
    let mut existing: Vec<Stored> = world
        .endpoint_slices
        .owned_by(svc.uid())
        .filter(|s| {
            str_at(&s.value, &format!("/metadata/labels/{}", MANAGED_BY_LABEL.replace('/', "~1"))) == CONTROLLER_NAME
        })
        .collect();
    existing.sort_by(|a, b| a.name().cmp(b.name()));
    // Each existing slice keeps the endpoints it has that are still wanted.
    let mut kept: Vec<(Stored, Vec<Value>, Vec<Value>)> = Vec::new(); // (slice, ports, endpoints)
    let mut unused = Vec::new();
    let ports_of = |s: &Stored| s.value.get("ports").cloned().unwrap_or(Value::Array(Vec::new()));
    for s in existing {
        let stored_ports = ports_of(&s);
        let same_family = str_at(&s.value, "/addressType") == family;
        let group = wanted.values_mut().find(|(ports, _)| Value::Array(ports.clone()) == stored_ports);
        match group.filter(|_| same_family) {
            Some((ports, pending)) => {
                let mut eps = Vec::new();
                for e in s.value.get("endpoints").and_then(Value::as_array).into_iter().flatten() {
                    if let Some(now) = pending.remove(endpoint_uid(e)) {
                        eps.push(now);
                    }
                }
                let ports = ports.clone();
                kept.push((s, ports, eps));
            }
            None => unused.push(s),
        }
    }
    // New endpoints fill the slices of their ports with room, then new slices.
    let mut creates: Vec<(Vec<Value>, Vec<Value>)> = Vec::new();
    for (ports, pending) in wanted.into_values() {
        let mut pending: Vec<Value> = pending.into_values().collect();
        pending.sort_by(|a, b| str_at(a, "/addresses/0").cmp(str_at(b, "/addresses/0")));
        let mut pending = pending.into_iter();
        for (_, kept_ports, eps) in kept.iter_mut() {
            if *kept_ports != ports {
                continue;
            }
            while eps.len() < MAX_PER_SLICE {
                let Some(e) = pending.next() else { break };
                eps.push(e);
            }
        }
        let rest: Vec<Value> = pending.collect();
        for chunk in rest.chunks(MAX_PER_SLICE) {
            creates.push((ports.clone(), chunk.to_vec()));
        }
    }
    // Slices left empty go (one stays as the placeholder when nothing is left).
    let mut placeholder_needed = members.is_empty() || (kept.iter().all(|k| k.2.is_empty()) && creates.is_empty());
    kept.retain(|(s, _, eps)| {
        if eps.is_empty() && !placeholder_needed {
            unused.push(s.clone());
            false
        } else {
            if eps.is_empty() {
                placeholder_needed = false;
            }
            true
        }
    });
    let mut unused = unused.into_iter();
    if placeholder_needed {
        match unused.next() {
            Some(s) => kept.push((s, Vec::new(), Vec::new())),
            None => creates.push((Vec::new(), Vec::new())),
        }
    }
    for s in unused {
        plan.actions.push(Action::delete(&ENDPOINT_SLICES, ns, s.name(), s.uid()));
    }
    for (s, ports, eps) in kept {
        let cur = &s.value;
        let same = cur.get("endpoints").cloned().unwrap_or(Value::Array(Vec::new())) == Value::Array(eps.clone())
            && cur.get("ports").cloned().unwrap_or(Value::Array(Vec::new())) == Value::Array(ports.clone())
            && str_at(cur, "/addressType") == family
            && same_labels(cur, &labels);
        if same {
            continue;
        }
        plan.actions.push(Action::Patch {
            res: &ENDPOINT_SLICES,
            namespace: ns.to_string(),
            name: s.name().to_string(),
            uid: s.uid().to_string(),
            rev: Some(s.rev),
            patch: json!({
                "metadata": {"labels": map_patch(cur.pointer("/metadata/labels").unwrap_or(&Value::Null), &labels)},
                "endpoints": eps, "ports": ports,
            }),
        });
    }
    let prefix = generate_prefix(name);
    for (ports, eps) in creates {
        plan.actions.push(Action::Create {
            res: &ENDPOINT_SLICES,
            object: json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": prefix, "namespace": ns, "labels": labels,
                             "ownerReferences": [OwnerRef::controller_to(&SERVICES, v)]},
                "addressType": family, "endpoints": eps, "ports": ports,
            }),
        });
    }
}

/// `{service}-`, the Service's name cut so a generated name fits (Kubernetes' `getEndpointSlicePrefix`).
fn generate_prefix(name: &str) -> String {
    let mut p: String = name.chars().take(63 - 6).collect();
    p.push('-');
    p
}

/// Services of namespace `ns` whose selectors select either label set.
pub fn services_selecting<'a>(
    world: &'a World,
    ns: &str,
    labels: impl IntoIterator<Item = &'a crate::world::LabelSet>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(sels) = world.service_selectors.get(ns) else { return out };
    for l in labels {
        for (name, sel) in sels {
            if !sel.is_empty() && sel.iter().all(|(k, v)| l.get(k) == Some(v.as_str())) {
                out.insert(name.clone());
            }
        }
    }
    out
}

/// Whether a pod's change can move its Services' endpoints.
pub fn moves_endpoints(old: &PodInfo, new: &PodInfo) -> bool {
    old.ip != new.ip
        || old.ready() != new.ready()
        || old.deleting != new.deleting
        || old.phase != new.phase
        || old.labels != new.labels
        || old.node != new.node
        || old.hostname != new.hostname
        || old.subdomain != new.subdomain
        || old.named_ports != new.named_ports
        || old.uid != new.uid
}
