//! Service ClusterIPs and NodePorts, allocated when a Service is created
//! or changed and released when it goes, as Kubernetes' service REST
//! storage does (`pkg/registry/core/service/storage/alloc.go`); the
//! periodic repair of the allocations; and the `kubernetes` Service with
//! its Endpoints and EndpointSlice (`pkg/controlplane/controller/kubernetesservice`).
//!
//! **Why a stored bitmap.** Each range is one record in the store, as
//! Kubernetes keeps it (`RangeAllocation` at `/registry/ranges/serviceips`
//! and `/registry/ranges/servicenodeports`, never served), changed only by
//! compare-and-swap on its resourceVersion (the store's `update_with`
//! retries a conflicting write on a fresh read). Two creates at once, in
//! this process or in another cloud replica on the same etcd, cannot both
//! set the same bit, and the record survives restarts. An in-memory
//! allocator rebuilt from the Services would hand out the same address twice
//! across replicas, and within one process while the rebuild runs.
//!
//! A request reserves what it needs first (a specific address or port, or
//! any), then writes the Service; a failed write gives the reservation
//! back, and a successful one releases what the Service no longer holds
//! (an update that dropped a port). A crash between the two leaves an
//! address reserved by no Service: the repair (every 3 min, and at start)
//! marks what Services hold and frees what none has held for three
//! passes in a row, as Kubernetes' repair controllers do.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::time::Duration;

use base64::Engine;
use edgehive_store::resources::{ENDPOINT_SLICES, ENDPOINTS, ResourceDef, SERVICES};
use edgehive_store::{ListOptions, Object, Store, StoreError};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::context::ApiState;
use crate::route::Target;
use crate::service_ranges::{AllocError, Bitmap, NodePortRange, ServiceIpRange};
use crate::status::{ApiError, Cause};

/// The Service address ranges (`--service-cluster-ip-range`,
/// `--service-node-port-range`) and the address the `kubernetes`
/// Service's endpoints name.
#[derive(Debug, Clone, Default)]
pub struct ServiceConfig {
    /// ClusterIPs (kube-apiserver's default, `10.0.0.0/24`).
    pub cluster_ip_range: ServiceIpRange,
    /// NodePorts (`30000-32767`).
    pub node_port_range: NodePortRange,
    /// The API server's address in the `kubernetes` endpoints (`None`: the
    /// address it is bound to, or 127.0.0.1 when bound to every address).
    pub advertise_address: Option<IpAddr>,
}

/// Where the ranges' bitmaps are kept: Kubernetes' keys, not served.
static RANGES: ResourceDef = ResourceDef {
    group: "",
    version: "v1",
    kind: "RangeAllocation",
    plural: "rangeallocations",
    singular: "rangeallocation",
    short_names: &[],
    categories: &[],
    namespaced: false,
    status_subresource: false,
    scale_subresource: false,
    graceful: false,
    generation: false,
    fields: &[],
    storage: "ranges",
    custom: false,
    stored_version: "",
};
const IP_RECORD: &str = "serviceips";
const PORT_RECORD: &str = "servicenodeports";

/// Which of the two ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    Ips,
    Ports,
}

impl Pool {
    fn record(self) -> &'static str {
        match self {
            Pool::Ips => IP_RECORD,
            Pool::Ports => PORT_RECORD,
        }
    }
}

/// What a Service holds of the ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Held {
    ips: BTreeSet<String>,
    ports: BTreeSet<i64>,
}

/// What a request needs beyond what the Service held before.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Wanted {
    /// Addresses asked for by number.
    ips: Vec<String>,
    /// Addresses wanted from anywhere.
    any_ips: usize,
    /// Ports asked for by number, with the field they are in
    /// (`spec.ports[0].nodePort`, or `healthCheckNodePort`).
    ports: Vec<(String, i64)>,
    /// Ports wanted from anywhere.
    any_ports: usize,
    /// `spec.clusterIPs` as asked, for the error.
    cluster_ips: Value,
}

impl Wanted {
    fn is_empty(&self) -> bool {
        self.ips.is_empty() && self.any_ips == 0 && self.ports.is_empty() && self.any_ports == 0
    }
}

/// What has been reserved for a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reserved {
    ips: Vec<String>,
    any_ips: Vec<String>,
    ports: Vec<i64>,
    any_ports: Vec<i64>,
}

impl Reserved {
    fn all(&self) -> Held {
        Held {
            ips: self.ips.iter().chain(&self.any_ips).cloned().collect(),
            ports: self.ports.iter().chain(&self.any_ports).copied().collect(),
        }
    }
}

fn spec_str<'a>(svc: &'a Value, field: &str) -> &'a str {
    svc.pointer(&format!("/spec/{field}")).and_then(Value::as_str).unwrap_or_default()
}

fn needs_node_ports(svc: &Value) -> bool {
    matches!(spec_str(svc, "type"), "NodePort" | "LoadBalancer")
}

fn needs_health_check(svc: &Value) -> bool {
    spec_str(svc, "type") == "LoadBalancer" && spec_str(svc, "externalTrafficPolicy") == "Local"
}

fn ports_of(svc: &Value) -> Vec<Value> {
    svc.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn node_port(p: &Value) -> i64 {
    p.get("nodePort").and_then(Value::as_i64).unwrap_or(0)
}

/// The addresses and ports `svc` holds in `config`'s ranges.
pub(crate) fn held(svc: &Value, config: &ServiceConfig) -> Held {
    let mut h = Held::default();
    if spec_str(svc, "type") != "ExternalName" {
        for ip in svc.pointer("/spec/clusterIPs").and_then(Value::as_array).into_iter().flatten() {
            if let Some(ip) = ip.as_str().filter(|ip| config.cluster_ip_range.offset(ip).is_ok()) {
                h.ips.insert(ip.to_string());
            }
        }
    }
    let in_range = |p: i64| p != 0 && config.node_port_range.offset(p).is_ok();
    for p in ports_of(svc) {
        if in_range(node_port(&p)) {
            h.ports.insert(node_port(&p));
        }
    }
    let hc = svc.pointer("/spec/healthCheckNodePort").and_then(Value::as_i64).unwrap_or(0);
    if in_range(hc) {
        h.ports.insert(hc);
    }
    h
}

/// Kubernetes' `patchAllocatedValues`: an update that leaves out the
/// ClusterIPs or NodePorts the Service has keeps them.
fn keep_allocated(new: &mut Value, old: &Value) {
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let new_type = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    if new_type != "ExternalName" && spec_str(old, "type") != "ExternalName" {
        let unset = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v.as_str() == Some(""));
        if unset(spec.get("clusterIP")) && !spec_str(old, "clusterIP").is_empty() {
            spec.insert("clusterIP".into(), json!(spec_str(old, "clusterIP")));
        }
        if spec.get("clusterIPs").and_then(Value::as_array).is_none_or(Vec::is_empty)
            && let Some(ips) = old.pointer("/spec/clusterIPs")
        {
            spec.insert("clusterIPs".into(), ips.clone());
        }
    }
    if matches!(new_type.as_str(), "NodePort" | "LoadBalancer") && needs_node_ports(old) {
        let new_ports: BTreeSet<i64> =
            spec.get("ports").and_then(Value::as_array).into_iter().flatten().map(node_port).collect();
        let by_name: HashMap<String, i64> = ports_of(old)
            .iter()
            .map(|p| (p.get("name").and_then(Value::as_str).unwrap_or_default().to_string(), node_port(p)))
            .collect();
        for p in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
            if node_port(p) == 0 {
                let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
                if let Some(&old_port) = by_name.get(name)
                    && old_port != 0
                    && !new_ports.contains(&old_port)
                {
                    p["nodePort"] = json!(old_port);
                }
            }
        }
    }
    let hc = old.pointer("/spec/healthCheckNodePort").and_then(Value::as_i64).unwrap_or(0);
    if hc != 0 && spec.get("healthCheckNodePort").and_then(Value::as_i64).unwrap_or(0) == 0 {
        let (new_lb, new_local) =
            (new_type == "LoadBalancer", spec.get("externalTrafficPolicy").and_then(Value::as_str) == Some("Local"));
        if new_lb && new_local && needs_health_check(old) {
            spec.insert("healthCheckNodePort".into(), json!(hc));
        }
    }
}

/// Fills in `svc`'s ClusterIP and NodePorts from `reserved`; what is still
/// missing when `reserved` does not cover the request. `before` is what
/// the Service held before this request (nothing for a create).
pub(crate) fn fill(svc: &mut Value, before: &Held, reserved: &Reserved) -> Result<(), Wanted> {
    let mut wanted = Wanted {
        cluster_ips: svc.pointer("/spec/clusterIPs").cloned().unwrap_or(Value::Array(Vec::new())),
        ..Wanted::default()
    };
    let mut any_ips = reserved.any_ips.iter();
    let mut any_ports = reserved.any_ports.iter();
    let svc_type = spec_str(svc, "type").to_string();
    let allocate_lb_ports = svc.pointer("/spec/allocateLoadBalancerNodePorts").and_then(Value::as_bool).unwrap_or(true);
    let health = needs_health_check(svc);
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else { return Ok(()) };
    if svc_type != "ExternalName" {
        let ip = spec.get("clusterIP").and_then(Value::as_str).unwrap_or_default().to_string();
        if ip.is_empty() {
            match any_ips.next() {
                Some(got) => {
                    spec.insert("clusterIP".into(), json!(got));
                    spec.insert("clusterIPs".into(), json!([got]));
                }
                None => wanted.any_ips += 1,
            }
        } else if ip != "None" && !before.ips.contains(&ip) && !reserved.ips.contains(&ip) {
            wanted.ips.push(ip);
        }
    }
    if matches!(svc_type.as_str(), "NodePort" | "LoadBalancer") {
        let allocate = svc_type == "NodePort" || allocate_lb_ports;
        let mut by_port: HashMap<i64, i64> = HashMap::new();
        let mut asked: BTreeSet<i64> = BTreeSet::new();
        for (i, p) in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten().enumerate() {
            let number = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let np = node_port(p);
            if np != 0 {
                by_port.entry(number).or_insert(np);
                if !before.ports.contains(&np) && !reserved.ports.contains(&np) && asked.insert(np) {
                    wanted.ports.push((format!("spec.ports[{i}].nodePort"), np));
                }
                continue;
            }
            if !allocate {
                continue;
            }
            // Ports of one number (TCP and UDP 53) share a NodePort.
            if let Some(&shared) = by_port.get(&number) {
                if shared != 0 {
                    p["nodePort"] = json!(shared);
                }
                continue;
            }
            match any_ports.next() {
                Some(got) => {
                    p["nodePort"] = json!(got);
                    by_port.insert(number, *got);
                }
                None => {
                    // Counted once for every port of this number.
                    wanted.any_ports += 1;
                    by_port.insert(number, 0);
                }
            }
        }
    }
    if health {
        let hc = spec.get("healthCheckNodePort").and_then(Value::as_i64).unwrap_or(0);
        if hc == 0 {
            match any_ports.next() {
                Some(got) => {
                    spec.insert("healthCheckNodePort".into(), json!(got));
                }
                None => wanted.any_ports += 1,
            }
        } else if !before.ports.contains(&hc) && !reserved.ports.contains(&hc) {
            wanted.ports.push(("healthCheckNodePort".into(), hc));
        }
    }
    if wanted.is_empty() { Ok(()) } else { Err(wanted) }
}

fn invalid(name: &str, field: &str, value: &Value, detail: String) -> ApiError {
    let body = format!("Invalid value: {}: {detail}", crate::validation::render_value(value));
    ApiError::invalid_with_summary(
        "Service",
        "",
        name,
        vec![Cause { reason: "FieldValueInvalid".into(), message: body.clone(), field: field.into() }],
        &[format!("{field}: {body}")],
    )
}

/// Why a range write stopped.
enum Stop {
    Store(StoreError),
    Refused(ApiError),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Store(e)
    }
}

fn store_error(e: StoreError) -> ApiError {
    ApiError::internal(format!("update the service allocation range: {e}"))
}

/// The bitmap of a stored range record (empty when it is of another range).
fn bitmap_of(record: &Value, range: &str, size: usize) -> Bitmap {
    if record.get("range").and_then(Value::as_str) != Some(range) {
        return Bitmap::new(size);
    }
    let data = record.get("data").and_then(Value::as_str).unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap_or_default();
    Bitmap::from_bytes(size, &bytes)
}

fn record_of(mut old: Value, range: &str, bitmap: &Bitmap) -> Value {
    old["range"] = json!(range);
    old["data"] = json!(base64::engine::general_purpose::STANDARD.encode(bitmap.to_bytes()));
    old
}

/// Read-modify-write of one range's bitmap (created when missing).
async fn change_range<T>(
    store: &Store,
    config: &ServiceConfig,
    pool: Pool,
    mut f: impl FnMut(&mut Bitmap) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let (range, size) = match pool {
        Pool::Ips => (config.cluster_ip_range.cidr(), config.cluster_ip_range.size()),
        Pool::Ports => (config.node_port_range.text(), config.node_port_range.size()),
    };
    for _ in 0..2 {
        let mut out = None;
        let r = store
            .update_with(&RANGES, "", pool.record(), |cur| {
                let old = cur.value()?;
                let mut bitmap = bitmap_of(old, &range, size);
                let before = bitmap.clone();
                out = Some(f(&mut bitmap).map_err(Stop::Refused)?);
                Ok(if bitmap == before && old.get("range").and_then(Value::as_str) == Some(&range) {
                    None
                } else {
                    Some(record_of(old.clone(), &range, &bitmap))
                })
            })
            .await;
        match r {
            Ok(_) => return out.ok_or_else(|| ApiError::internal("the allocation range was not read")),
            Err(Stop::Refused(e)) => return Err(e),
            Err(Stop::Store(StoreError::NotFound { .. })) => {
                let empty = json!({"metadata": {"name": pool.record()}, "range": range, "data": ""});
                match store.create(&RANGES, empty).await {
                    Ok(_) | Err(StoreError::AlreadyExists { .. }) => continue,
                    Err(e) => return Err(store_error(e)),
                }
            }
            Err(Stop::Store(e)) => return Err(store_error(e)),
        }
    }
    Err(ApiError::internal("the service allocation range could not be created"))
}

/// Reserves what `wanted` asks for, as Kubernetes words its refusals; a
/// dry run only checks, against the current bitmaps.
pub(crate) async fn reserve(
    store: &Store,
    config: &ServiceConfig,
    name: &str,
    wanted: &Wanted,
    dry_run: bool,
) -> Result<Reserved, ApiError> {
    let mut got = Reserved::default();
    if !wanted.ips.is_empty() || wanted.any_ips > 0 {
        let r = &config.cluster_ip_range;
        let decide = |b: &mut Bitmap| -> Result<Reserved, ApiError> {
            let mut out = Reserved::default();
            for ip in &wanted.ips {
                let failed = |e: AllocError| {
                    invalid(name, "spec.clusterIPs", &wanted.cluster_ips, format!("failed to allocate IP {ip}: {e}"))
                };
                let off = r.offset(ip).map_err(failed)?;
                if !b.set(off) {
                    return Err(failed(AllocError::IpAllocated));
                }
                out.ips.push(ip.clone());
            }
            let mut rng = fastrand::Rng::new();
            for _ in 0..wanted.any_ips {
                let off = b.next_free(r.static_band(), &mut rng).ok_or_else(|| {
                    ApiError::internal(format!(
                        "Internal error occurred: failed to allocate a serviceIP: {}",
                        AllocError::Full
                    ))
                })?;
                b.set(off);
                out.any_ips.push(r.at(off));
            }
            Ok(out)
        };
        let ips = if dry_run {
            peek(store, config, Pool::Ips, decide).await?
        } else {
            change_range(store, config, Pool::Ips, decide).await?
        };
        got.ips = ips.ips;
        got.any_ips = ips.any_ips;
    }
    if !wanted.ports.is_empty() || wanted.any_ports > 0 {
        let r = config.node_port_range;
        let decide = |b: &mut Bitmap| -> Result<Reserved, ApiError> {
            let mut out = Reserved::default();
            for (field, port) in &wanted.ports {
                let check =
                    r.offset(*port).and_then(|off| if b.set(off) { Ok(()) } else { Err(AllocError::PortAllocated) });
                if let Err(e) = check {
                    return Err(if field == "healthCheckNodePort" {
                        ApiError::internal(format!(
                            "Internal error occurred: failed to allocate requested HealthCheck NodePort {port}: {e}"
                        ))
                    } else {
                        invalid(name, field, &json!(port), e.to_string())
                    });
                }
                out.ports.push(*port);
            }
            let mut rng = fastrand::Rng::new();
            for _ in 0..wanted.any_ports {
                let off = b.next_free(r.static_band(), &mut rng).ok_or_else(|| {
                    ApiError::internal(format!(
                        "Internal error occurred: failed to allocate a nodePort: {}",
                        AllocError::Full
                    ))
                })?;
                b.set(off);
                out.any_ports.push(r.at(off));
            }
            Ok(out)
        };
        let ports = if dry_run {
            peek(store, config, Pool::Ports, decide).await
        } else {
            change_range(store, config, Pool::Ports, decide).await
        };
        match ports {
            Ok(p) => {
                got.ports = p.ports;
                got.any_ports = p.any_ports;
            }
            Err(e) => {
                if !dry_run {
                    release(store, config, &got.all()).await;
                }
                return Err(e);
            }
        }
    }
    Ok(got)
}

/// `f` over the current bitmap of `pool`, written nowhere.
async fn peek<T>(
    store: &Store,
    config: &ServiceConfig,
    pool: Pool,
    f: impl FnOnce(&mut Bitmap) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let (range, size) = match pool {
        Pool::Ips => (config.cluster_ip_range.cidr(), config.cluster_ip_range.size()),
        Pool::Ports => (config.node_port_range.text(), config.node_port_range.size()),
    };
    let mut bitmap = match store.get(&RANGES, "", pool.record()).await {
        Ok(o) => bitmap_of(o.value().map_err(store_error)?, &range, size),
        Err(StoreError::NotFound { .. }) => Bitmap::new(size),
        Err(e) => return Err(store_error(e)),
    };
    f(&mut bitmap)
}

/// Gives back what `held` holds (failures are logged: the repair frees
/// what no Service holds).
pub(crate) async fn release(store: &Store, config: &ServiceConfig, held: &Held) {
    if !held.ips.is_empty() {
        let r = &config.cluster_ip_range;
        let out = change_range(store, config, Pool::Ips, |b| {
            for ip in &held.ips {
                if let Ok(off) = r.offset(ip) {
                    b.clear(off);
                }
            }
            Ok(())
        })
        .await;
        if let Err(e) = out {
            tracing::warn!(error = %e.message, "release service IPs");
        }
    }
    if !held.ports.is_empty() {
        let r = config.node_port_range;
        let out = change_range(store, config, Pool::Ports, |b| {
            for p in &held.ports {
                if let Ok(off) = r.offset(*p) {
                    b.clear(off);
                }
            }
            Ok(())
        })
        .await;
        if let Err(e) = out {
            tracing::warn!(error = %e.message, "release service node ports");
        }
    }
}

/// What a create reserved, to be settled once the write is known.
#[derive(Debug, Default)]
pub(crate) struct Allocation {
    reserved: Option<Reserved>,
    kept: Held,
    dry_run: bool,
}

impl Allocation {
    /// After the write: all of it back when the write failed; what the
    /// object does not use when it succeeded.
    pub(crate) async fn settle(self, shared: &ApiState, written: bool) {
        let Some(reserved) = self.reserved else { return };
        if self.dry_run {
            return;
        }
        let mut back = reserved.all();
        if written {
            back.ips.retain(|ip| !self.kept.ips.contains(ip));
            back.ports.retain(|p| !self.kept.ports.contains(p));
        }
        if !back.ips.is_empty() || !back.ports.is_empty() {
            release(&shared.store, &shared.config.services, &back).await;
        }
    }
}

/// Gives a new Service (defaulted and validated) its ClusterIP and
/// NodePorts; nothing for other kinds.
pub(crate) async fn allocate_create(
    shared: &ApiState,
    res: &ResourceDef,
    obj: &mut Value,
    dry_run: bool,
) -> Result<Allocation, ApiError> {
    if !std::ptr::eq(res, &SERVICES) {
        return Ok(Allocation::default());
    }
    let config = &shared.config.services;
    check_families(obj, config)?;
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut reserved = Reserved::default();
    loop {
        match fill(obj, &Held::default(), &reserved) {
            Ok(()) => {
                return Ok(Allocation { kept: held(obj, config), reserved: Some(reserved), dry_run });
            }
            Err(wanted) if reserved == Reserved::default() => {
                reserved = reserve(&shared.store, config, &name, &wanted, dry_run).await?;
            }
            Err(_) => {
                if !dry_run {
                    release(&shared.store, config, &reserved.all()).await;
                }
                return Err(ApiError::internal("the service's allocation did not settle"));
            }
        }
    }
}

/// The IP families this single-stack cluster serves, as Kubernetes'
/// `initIPFamilyFields` refuses the others.
fn check_families(svc: &Value, config: &ServiceConfig) -> Result<(), ApiError> {
    if spec_str(svc, "type") == "ExternalName" {
        return Ok(());
    }
    let name = svc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let headless_selectorless = spec_str(svc, "clusterIP") == "None"
        && svc.pointer("/spec/selector").and_then(Value::as_object).is_none_or(serde_json::Map::is_empty);
    if headless_selectorless {
        return Ok(());
    }
    if spec_str(svc, "ipFamilyPolicy") == "RequireDualStack" {
        return Err(invalid(
            name,
            "spec.ipFamilyPolicy",
            &json!("RequireDualStack"),
            "this cluster is not configured for dual-stack services".into(),
        ));
    }
    let family = config.cluster_ip_range.family();
    for (i, f) in svc.pointer("/spec/ipFamilies").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if f.as_str() != Some(family) {
            return Err(invalid(name, &format!("spec.ipFamilies[{i}]"), f, "not configured on this cluster".into()));
        }
    }
    Ok(())
}

/// Why a Service rewrite stopped.
enum RewriteStop {
    Store(StoreError),
    Api(ApiError),
    Needs(Wanted),
}

impl From<StoreError> for RewriteStop {
    fn from(e: StoreError) -> Self {
        RewriteStop::Store(e)
    }
}

impl From<ApiError> for RewriteStop {
    fn from(e: ApiError) -> Self {
        RewriteStop::Api(e)
    }
}

/// PUT and PATCH of a Service: [`crate::handlers::rewrite_object`] with
/// the allocated values kept, new ones reserved before the write (the
/// write is tried again with them), and what the Service let go of
/// released after it.
pub(crate) async fn rewrite(
    shared: &ApiState,
    target: &Target,
    dry_run: bool,
    mut change: impl FnMut(&Object, &Value) -> Result<Value, ApiError>,
) -> Result<crate::handlers::Rewritten, ApiError> {
    let res = target.resource;
    let config = &shared.config.services;
    let (ns, name) = (target.namespace.as_deref().unwrap_or_default(), target.name.as_deref().unwrap_or_default());
    let mut reserved = Reserved::default();
    for _ in 0..4 {
        let mut preview = None;
        let mut settled = None;
        let out = shared
            .store
            .update_with(res, ns, name, |cur| {
                let old = cur.value()?;
                let requested = change(cur, old)?;
                let mut new = crate::handlers::merge_for_subresource(res, target, old, requested);
                crate::defaults::apply_defaults(res.group, res.kind, &mut new);
                keep_allocated(&mut new, old);
                crate::admit::update(res, &mut new, old)?;
                let before = held(old, config);
                if spec_str(old, "type") == "ExternalName" && spec_str(&new, "type") != "ExternalName" {
                    check_families(&new, config)?;
                }
                fill(&mut new, &before, &reserved).map_err(RewriteStop::Needs)?;
                settled = Some((before, held(&new, config)));
                if dry_run {
                    preview = Some(new);
                    return Ok(None);
                }
                Ok(Some(new))
            })
            .await;
        match out {
            Err(RewriteStop::Needs(wanted)) => {
                if !dry_run {
                    release(&shared.store, config, &reserved.all()).await;
                }
                reserved = reserve(&shared.store, config, name, &wanted, dry_run).await?;
            }
            Err(e) => {
                if !dry_run {
                    release(&shared.store, config, &reserved.all()).await;
                }
                return Err(match e {
                    RewriteStop::Store(e) => crate::handlers::store_err(res)(e),
                    RewriteStop::Api(e) => e,
                    RewriteStop::Needs(_) => ApiError::internal("unreachable"),
                });
            }
            Ok(updated) => {
                if let (Some((before, after)), false) = (settled, dry_run) {
                    let mut back = reserved.all();
                    back.ips.extend(before.ips);
                    back.ports.extend(before.ports);
                    back.ips.retain(|ip| !after.ips.contains(ip));
                    back.ports.retain(|p| !after.ports.contains(p));
                    release(&shared.store, config, &back).await;
                }
                return Ok(match preview {
                    Some(p) => crate::handlers::Rewritten::Preview(p),
                    None => crate::handlers::Rewritten::Stored(updated),
                });
            }
        }
    }
    if !dry_run {
        release(&shared.store, config, &reserved.all()).await;
    }
    Err(ApiError::internal("the service's allocation kept changing; try again"))
}

/// After a Service is deleted: its addresses and ports go back.
pub(crate) async fn deleted(shared: &ApiState, obj: &Object) {
    if !std::ptr::eq(obj.resource(), &SERVICES) {
        return;
    }
    if let Ok(v) = obj.value() {
        release(&shared.store, &shared.config.services, &held(v, &shared.config.services)).await;
    }
}

/// Leaked offsets, by how many repairs in a row found them so.
#[derive(Debug, Default)]
pub(crate) struct Repair {
    leaks: HashMap<(bool, usize), u8>,
}

/// Passes an allocation must be held by no Service before it is freed.
const LEAK_PASSES: u8 = 3;

impl Repair {
    /// One pass: every address and port a Service holds is marked taken;
    /// one held by none for [`LEAK_PASSES`] passes is freed.
    pub(crate) async fn pass(&mut self, store: &Store, config: &ServiceConfig) -> Result<(), ApiError> {
        let list = store.list(&SERVICES, &ListOptions::default()).await.map_err(store_error)?;
        let mut ips = Bitmap::new(config.cluster_ip_range.size());
        let mut ports = Bitmap::new(config.node_port_range.size());
        for o in &list.items {
            let Ok(v) = o.value() else { continue };
            let h = held(v, config);
            for ip in &h.ips {
                if let Ok(off) = config.cluster_ip_range.offset(ip) {
                    ips.set(off);
                }
            }
            for p in &h.ports {
                if let Ok(off) = config.node_port_range.offset(*p) {
                    ports.set(off);
                }
            }
        }
        let mut seen = HashMap::new();
        for (pool, used) in [(Pool::Ips, &ips), (Pool::Ports, &ports)] {
            if used.ones().next().is_none()
                && matches!(store.get(&RANGES, "", pool.record()).await, Err(StoreError::NotFound { .. }))
            {
                // Nothing held and nothing recorded: nothing to write.
                continue;
            }
            let ports = pool == Pool::Ports;
            let leaks = &self.leaks;
            let counted = change_range(store, config, pool, |b| {
                let mut counted = Vec::new();
                for off in b.ones().collect::<Vec<_>>() {
                    if used.has(off) {
                        continue;
                    }
                    let n = leaks.get(&(ports, off)).copied().unwrap_or(0) + 1;
                    if n >= LEAK_PASSES {
                        b.clear(off);
                    } else {
                        counted.push((off, n));
                    }
                }
                for off in used.ones() {
                    b.set(off);
                }
                Ok(counted)
            })
            .await?;
            for (off, n) in counted {
                seen.insert((ports, off), n);
            }
        }
        self.leaks = seen;
        Ok(())
    }
}

/// The `kubernetes` Service in `default`, its Endpoints and its
/// EndpointSlice, as kube-apiserver keeps them: the first address of the
/// range, port 443 named `https` to the API server's port.
pub(crate) async fn ensure_kubernetes_service(shared: &ApiState) -> Result<(), ApiError> {
    let config = &shared.config.services;
    let store = &shared.store;
    let (host, port) = match shared.address.rsplit_once(':') {
        Some((h, p)) => (h.trim_matches(['[', ']']).to_string(), p.parse::<i64>().unwrap_or(443)),
        None => (shared.address.clone(), 443),
    };
    let ip = config.advertise_address.map_or(host, |a| a.to_string());
    let ports = json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]);
    match store.get(&SERVICES, "default", "kubernetes").await {
        Err(StoreError::NotFound { .. }) => {
            let first = config.cluster_ip_range.at(0);
            let mut svc = json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kubernetes", "namespace": "default",
                             "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {"type": "ClusterIP", "clusterIP": first, "clusterIPs": [first], "ports": ports,
                         "sessionAffinity": "None"},
            });
            crate::admit::create(&SERVICES, &mut svc)?;
            let wanted = Wanted { ips: vec![first.clone()], cluster_ips: json!([first]), ..Wanted::default() };
            match reserve(store, config, "kubernetes", &wanted, false).await {
                Ok(_) => {}
                // Held already: by a repair that saw this Service before, or a crash before its write.
                Err(e) if e.message.contains("already allocated") => {}
                Err(e) => return Err(e),
            }
            match store.create(&SERVICES, svc).await {
                Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
                Err(e) => return Err(store_error(e)),
            }
        }
        Err(e) => return Err(store_error(e)),
        Ok(cur) => {
            let v = cur.value().map_err(store_error)?;
            let same = v.pointer("/spec/ports") == Some(&ports);
            if !same {
                let out = store
                    .update_with(&SERVICES, "default", "kubernetes", |cur| {
                        let mut new = cur.value()?.clone();
                        new["spec"]["ports"] = ports.clone();
                        Ok::<_, StoreError>(Some(new))
                    })
                    .await;
                if let Err(e) = out {
                    return Err(store_error(e));
                }
            }
        }
    }
    let family = if ip.contains(':') { "IPv6" } else { "IPv4" };
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}],
    });
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": family,
        "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    });
    put_if_changed(store, &ENDPOINTS, endpoints, &["subsets"]).await?;
    put_if_changed(store, &ENDPOINT_SLICES, slice, &["addressType", "endpoints", "ports"]).await
}

/// Creates `want`, or sets `fields` (and its labels) on the stored one
/// when they differ.
async fn put_if_changed(
    store: &Store,
    res: &'static ResourceDef,
    want: Value,
    fields: &[&str],
) -> Result<(), ApiError> {
    let name = want.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let ns = want.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string();
    let out = store
        .update_with(res, &ns, &name, |cur| {
            let old = cur.value()?;
            let mut new = old.clone();
            for f in fields {
                new[*f] = want[*f].clone();
            }
            new["metadata"]["labels"] = want["metadata"]["labels"].clone();
            Ok::<_, StoreError>(if new == *old { None } else { Some(new) })
        })
        .await;
    match out {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) => {
            // Defaults, not validation: the address is where this server
            // listens, which may be loopback (a cloud bound to localhost)
            // where validation refuses a user's Endpoints.
            let mut obj = want;
            crate::defaults::apply_defaults(res.group, res.kind, &mut obj);
            match store.create(res, obj).await {
                Ok(_) | Err(StoreError::AlreadyExists { .. }) => Ok(()),
                Err(e) => Err(store_error(e)),
            }
        }
        Err(e) => Err(store_error(e)),
    }
}

/// Keeps the `kubernetes` Service and repairs the ranges: at start, then
/// every 3 minutes (the Service checked every minute), until `stop`.
pub(crate) async fn run(shared: std::sync::Arc<ApiState>, stop: CancellationToken) {
    let mut repair = Repair::default();
    let mut tick = 0u32;
    loop {
        if tick.is_multiple_of(3)
            && let Err(e) = repair.pass(&shared.store, &shared.config.services).await
        {
            tracing::warn!(error = %e.message, "repair the service allocation ranges");
        }
        if let Err(e) = ensure_kubernetes_service(&shared).await {
            tracing::warn!(error = %e.message, "keep the kubernetes service");
        }
        tick = tick.wrapping_add(1);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(cidr: &str) -> ServiceConfig {
        ServiceConfig { cluster_ip_range: ServiceIpRange::parse(cidr).expect("cidr"), ..ServiceConfig::default() }
    }

    #[test]
    fn a_new_service_asks_for_what_it_lacks_and_takes_what_was_reserved() {
        let mut svc = json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            {"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}]}});
        let wanted = fill(&mut svc.clone(), &Held::default(), &Reserved::default()).expect_err("needs");
        assert_eq!((wanted.any_ips, wanted.any_ports), (1, 1), "two ports of one number share a NodePort");
        assert_eq!(wanted.ports, [("spec.ports[2].nodePort".to_string(), 30080)]);
        let reserved = Reserved {
            any_ips: vec!["10.0.0.9".into()],
            ports: vec![30080],
            any_ports: vec![31000],
            ..Reserved::default()
        };
        fill(&mut svc, &Held::default(), &reserved).expect("covered");
        assert_eq!((spec_str(&svc, "clusterIP"), &svc["spec"]["clusterIPs"]), ("10.0.0.9", &json!(["10.0.0.9"])));
        let nps: Vec<i64> = ports_of(&svc).iter().map(node_port).collect();
        assert_eq!(nps, [31000, 31000, 30080]);
        let h = held(&svc, &config("10.0.0.0/24"));
        assert_eq!((h.ips.len(), h.ports.iter().copied().collect::<Vec<_>>()), (1, vec![30080, 31000]));
    }

    #[test]
    fn headless_and_external_name_services_get_no_address() {
        for mut svc in [
            json!({"spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}}),
            json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}}),
        ] {
            assert_eq!(fill(&mut svc, &Held::default(), &Reserved::default()), Ok(()));
        }
        // A LoadBalancer without node ports asked for gets none; with Local traffic it gets a health check port.
        let mut lb = json!({"spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.5", "allocateLoadBalancerNodePorts": false,
            "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}});
        let w = fill(&mut lb, &Held::default(), &Reserved::default()).expect_err("needs");
        assert_eq!((w.ips, w.any_ips, w.any_ports), (vec!["10.0.0.5".to_string()], 0, 1));
    }

    async fn open(dir: &edgehive_testkit::fixtures::TempDir) -> Store {
        let backend = edgehive_store::BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false };
        Store::open(edgehive_store::StoreConfig::new(backend)).await.expect("open the store")
    }

    fn any(n: usize) -> Wanted {
        Wanted { any_ips: n, ..Wanted::default() }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reservations_at_once_never_share_an_address_and_survive_a_restart() {
        let dir = edgehive_testkit::fixtures::TempDir::new("service-ranges");
        let store = open(&dir).await;
        let config = config("10.0.0.0/27"); // 30 addresses
        let tasks: Vec<_> = (0..40)
            .map(|_| {
                let (store, config) = (store.clone(), config.clone());
                tokio::spawn(async move { reserve(&store, &config, "s", &any(1), false).await })
            })
            .collect();
        let mut got = BTreeSet::new();
        let mut full = 0;
        for t in tasks {
            match t.await.expect("task") {
                Ok(r) => assert!(got.insert(r.any_ips[0].clone()), "handed out twice: {:?}", r.any_ips),
                Err(e) => {
                    assert_eq!(e.message, "Internal error occurred: failed to allocate a serviceIP: range is full");
                    full += 1;
                }
            }
        }
        assert_eq!((got.len(), full), (30, 10));
        // A taken address asked for by number, and one outside the range.
        let taken = got.iter().next().cloned().expect("one");
        let ask = |ip: &str| Wanted { ips: vec![ip.to_string()], cluster_ips: json!([ip]), ..Wanted::default() };
        let e = reserve(&store, &config, "s", &ask(&taken), false).await.expect_err("taken");
        assert_eq!(
            e.message,
            format!(
                "Service \"s\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{taken}\"}}: failed to allocate IP {taken}: provided IP is already allocated"
            )
        );
        assert_eq!(e.code.as_u16(), 422);
        // The bitmap is in the store: a new process (a new store handle) sees it.
        store.close().await;
        let store = open(&dir).await;
        assert!(reserve(&store, &config, "s", &any(1), false).await.is_err(), "still full after a restart");
        release(&store, &config, &Held { ips: [taken.clone()].into(), ..Held::default() }).await;
        let again = reserve(&store, &config, "s", &ask(&taken), false).await.expect("released");
        assert_eq!(again.ips, [taken]);
        // A dry run checks without taking.
        let e = reserve(&store, &config, "s", &any(1), true).await.expect_err("full");
        assert!(e.message.ends_with("range is full"));
    }

    #[tokio::test]
    async fn the_repair_marks_what_services_hold_and_frees_leaks_after_three_passes() {
        let dir = edgehive_testkit::fixtures::TempDir::new("service-repair");
        let store = open(&dir).await;
        let config = config("10.0.0.0/24");
        // A Service stored with an address no bitmap has (written before allocation existed).
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "old", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.0.0.77", "clusterIPs": ["10.0.0.77"],
                     "ports": [{"port": 80, "nodePort": 30500}]}});
        crate::admit::create(&SERVICES, &mut svc).expect("valid");
        store.create(&SERVICES, svc).await.expect("stored");
        // And a leak: reserved, never written.
        let leaked = reserve(&store, &config, "gone", &any(1), false).await.expect("reserved").any_ips[0].clone();
        let mut repair = Repair::default();
        repair.pass(&store, &config).await.expect("repair");
        let ask = |ip: &str| Wanted { ips: vec![ip.to_string()], cluster_ips: json!([ip]), ..Wanted::default() };
        assert!(reserve(&store, &config, "s", &ask("10.0.0.77"), true).await.is_err(), "marked");
        let port = Wanted { ports: vec![("spec.ports[0].nodePort".into(), 30500)], ..Wanted::default() };
        let e = reserve(&store, &config, "s", &port, true).await.expect_err("port marked");
        assert!(
            e.message.ends_with("spec.ports[0].nodePort: Invalid value: 30500: provided port is already allocated"),
            "{}",
            e.message
        );
        repair.pass(&store, &config).await.expect("repair");
        assert!(reserve(&store, &config, "s", &ask(&leaked), true).await.is_err(), "a leak is kept for a while");
        repair.pass(&store, &config).await.expect("repair");
        reserve(&store, &config, "s", &ask(&leaked), true).await.expect("freed on the third pass");
    }

    #[test]
    fn an_update_keeps_what_the_service_holds() {
        let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9"],
            "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}});
        let mut new = json!({"spec": {"type": "NodePort", "ports": [{"name": "http", "port": 8080}]}});
        keep_allocated(&mut new, &old);
        assert_eq!((spec_str(&new, "clusterIP"), node_port(&ports_of(&new)[0])), ("10.0.0.9", 30080));
        let before = held(&old, &config("10.0.0.0/24"));
        assert_eq!(fill(&mut new, &before, &Reserved::default()), Ok(()), "nothing new to reserve");
        // Turned into ClusterIP: the node ports are not kept.
        let mut plain = json!({"spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 80}]}});
        keep_allocated(&mut plain, &old);
        assert_eq!(node_port(&ports_of(&plain)[0]), 0);
    }
}
