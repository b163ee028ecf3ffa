//! DeviceManagerService, the edge's end of DMI (KubeEdge
//! `devicetwin/dmiserver/server.go`): mappers register, and report their
//! devices' twins and states, which go to module `twin` as the MQTT twin
//! and state updates a device would have published (contract message 5).
//!
//! All mappers share the one socket and the one user, so a call does not
//! say which mapper made it: a report is checked against what the edge
//! knows (the device exists, a mapper of its protocol is registered, the
//! properties are the device's) but a mapper can still report for another
//! registered mapper's device.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use edgehive_beehive::Context;
use edgehive_grpc::{Server, Status};
use edgehive_metamanager::Op;
use edgehive_model::constants::{group, op, source};
use edgehive_model::{Content, Message};

use crate::api::{self, method};
use crate::module::{RESOURCE_TYPE_DEVICEMAPPER, Shared, lock};
use crate::state::{MAX_MAPPERS, MapperRecord};

/// Topic prefix of device events (KubeEdge `dtcommon.DeviceETPrefix`).
const DEVICE_ET_PREFIX: &str = "$hw/events/device/";
/// The longest mapper name and protocol, in bytes (a Kubernetes object
/// name's limit; a protocol is a device's `protocolName`).
const MAX_NAME_BYTES: usize = 253;
/// The longest socket path: `sun_path` is 108 bytes with its closing NUL.
const MAX_ADDRESS_BYTES: usize = 107;
/// How long a report may wait for room in twin's mailbox.
const TWIN_SEND_DEADLINE: Duration = Duration::from_secs(5);

/// DeviceManagerService's methods, on a server not yet bound.
pub(crate) fn server(shared: Arc<Shared>, ctx: Context) -> Server {
    let (s1, s2, s3) = (Arc::clone(&shared), Arc::clone(&shared), Arc::clone(&shared));
    let (c2, c3) = (ctx.clone(), ctx);
    Server::new()
        .max_message(shared.cfg.max_message)
        .unary(method::MAPPER_REGISTER, move |req: api::MapperRegisterRequest| {
            let shared = Arc::clone(&s1);
            async move { mapper_register(&shared, req).await }
        })
        .unary(method::REPORT_DEVICE_STATUS, move |req: StatusReport| {
            let (shared, ctx) = (Arc::clone(&s2), c2.clone());
            async move { report_device_status(&shared, &ctx, req).await }
        })
        .unary(method::REPORT_DEVICE_STATES, move |req: api::ReportDeviceStatesRequest| {
            let (shared, ctx) = (Arc::clone(&s3), c3.clone());
            async move { report_device_states(&shared, &ctx, req).await }
        })
}

/// Takes a token from `bucket`; `what` names the request in the refusal
/// (only then formatted: reports come a thousand a second).
fn limited(
    shared: &Shared,
    bucket: &std::sync::Mutex<crate::state::TokenBucket>,
    what: impl FnOnce() -> String,
) -> Result<(), Status> {
    let mut b = lock(bucket);
    if b.allow(tokio::time::Instant::now()) {
        return Ok(());
    }
    shared.metrics.rate_limited.inc();
    Err(Status::resource_exhausted(format!("too many requests: {}; retry in {:?}", what(), b.wait())))
}

async fn mapper_register(
    shared: &Arc<Shared>,
    req: api::MapperRegisterRequest,
) -> Result<api::MapperRegisterResponse, Status> {
    let Some(mapper) = req.mapper else {
        return Err(Status::invalid_argument("fail to register mapper: no mapper info"));
    };
    // Before anything repeats the name (a log line, an error's message).
    if mapper.name.len() > MAX_NAME_BYTES || mapper.protocol.len() > MAX_NAME_BYTES {
        return Err(Status::invalid_argument(format!(
            "fail to register mapper {:?}: the name and the protocol must be at most {MAX_NAME_BYTES} bytes",
            short(&mapper.name)
        )));
    }
    limited(shared, &shared.register_limit, || format!("register mapper {}", mapper.name))?;
    if mapper.name.is_empty() {
        return Err(Status::invalid_argument("fail to register mapper: the name is empty"));
    }
    if mapper.protocol.is_empty() {
        return Err(Status::invalid_argument(format!(
            "fail to register mapper {} because the protocol is nil",
            mapper.name
        )));
    }
    let socket = std::str::from_utf8(&mapper.address).unwrap_or_default();
    if socket.is_empty() || socket.contains('\0') || socket.len() > MAX_ADDRESS_BYTES {
        return Err(Status::invalid_argument(format!(
            "fail to register mapper {}: the address must be the path of its socket, at most {MAX_ADDRESS_BYTES} bytes",
            mapper.name
        )));
    }
    let record = MapperRecord::from(&mapper);
    // Kept in memory first, under the lock, so that concurrent
    // registrations cannot pass the cap together; then in the database.
    let registered = shared.cache().register_mapper(record.clone()).map_err(|_| {
        Status::resource_exhausted(format!(
            "fail to register mapper {}: {MAX_MAPPERS} mappers are registered already",
            mapper.name
        ))
    })?;
    for old in &registered.displaced {
        tracing::info!(mapper = %old, protocol = %mapper.protocol, by = %mapper.name, "mapper replaced for its protocol");
    }
    save_mapper(shared, &record, &registered.displaced).await?;
    let count = registered.count;
    shared.metrics.registered_mappers.set(i64::try_from(count).unwrap_or(i64::MAX));
    shared.metrics.registrations.inc();
    tracing::info!(mapper = %mapper.name, protocol = %mapper.protocol, socket, with_data = req.with_data, "mapper registered");
    if !req.with_data {
        shared.mapper_registered(&mapper.protocol, false);
        return Ok(api::MapperRegisterResponse::default());
    }
    let data = {
        let cache = shared.cache();
        let data = cache.register_data(&mapper.protocol);
        // What the mapper gets now need not be sent again; taken under the
        // same lock, so no change in between is lost (see mapper_registered).
        let dropped = shared.mapper_registered(&mapper.protocol, true);
        if dropped > 0 {
            tracing::debug!(mapper = %mapper.name, dropped, "waiting changes covered by the registration");
        }
        drop(cache);
        data
    };
    for (device, why) in &data.skipped {
        tracing::warn!(mapper = %mapper.name, device, reason = %why, "device not sent to its mapper");
    }
    Ok(api::MapperRegisterResponse { model_list: data.models, device_list: data.devices })
}

/// A caller's string cut short for an error message.
fn short(s: &str) -> &str {
    let mut end = s.len().min(64);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Keeps the mapper in the meta table as KubeEdge does (key
/// `node/nodeID/namespace/devicemapper/{name}`, literally), and removes the
/// rows of the mappers it `displaced`.
async fn save_mapper(shared: &Arc<Shared>, record: &MapperRecord, displaced: &[String]) -> Result<(), Status> {
    let key = |name: &str| format!("node/nodeID/namespace/{RESOURCE_TYPE_DEVICEMAPPER}/{name}");
    let value = serde_json::to_string(record).map_err(|e| Status::internal(e.to_string()))?;
    let mut ops = vec![Op::Put { key: key(&record.name), resource_type: RESOURCE_TYPE_DEVICEMAPPER.to_owned(), value }];
    ops.extend(displaced.iter().map(|name| Op::Delete { key: key(name), uid: None }));
    let db = Arc::clone(&shared.db);
    match tokio::task::spawn_blocking(move || db.apply(&ops)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            tracing::error!(mapper = %record.name, error = %e, "could not save the mapper");
            Err(Status::internal(format!("fail to save mapper {}: {e}", record.name)))
        }
        Err(e) => Err(Status::internal(format!("fail to save mapper {}: {e}", record.name))),
    }
}

/// Checks that `device` is known and its protocol has a mapper; returns
/// the names of its properties.
fn known_device(shared: &Shared, device: &str) -> Result<std::sync::Arc<[Box<str>]>, Status> {
    let cache = shared.cache();
    let refuse = |status: Status| {
        shared.metrics.reports_dropped.inc();
        tracing::warn!(device, reason = %status.message, "report dropped");
        Err(status)
    };
    let Some(obj) = cache.device(device) else {
        return refuse(Status::not_found(format!("device {device:?} is not on this node")));
    };
    let protocol = obj.protocol.as_str();
    if !cache.has_mapper(protocol) {
        return refuse(Status::new(
            edgehive_grpc::code::FAILED_PRECONDITION,
            format!("no mapper of protocol {protocol:?} (device {device:?}) is registered"),
        ));
    }
    Ok(obj.properties.clone())
}

async fn report_device_status(
    shared: &Arc<Shared>,
    ctx: &Context,
    req: StatusReport,
) -> Result<api::ReportDeviceStatusResponse, Status> {
    limited(shared, &shared.report_limit, || format!("report status of {}", req.device_name))?;
    shared.metrics.reports.inc();
    let properties = known_device(shared, &req.device_name)?;
    let reported = req.reported_device.map(|d| d.twins).unwrap_or_default();
    let mut twin = Vec::with_capacity(reported.len());
    for t in &reported {
        if !properties.iter().any(|p| **p == *t.property_name) {
            shared.metrics.reports_dropped.inc();
            tracing::warn!(device = %req.device_name, property = %t.property_name, "reported property is not the device's, dropped");
            continue;
        }
        twin.push((
            t.property_name.as_str(),
            TwinEntry {
                expected: t.observed_desired.as_ref().map(|v| ValueOnly { value: &v.value }),
                actual: t.reported.as_ref().map(|v| ValueOnly { value: &v.value }),
            },
        ));
    }
    if twin.is_empty() {
        return Ok(api::ReportDeviceStatusResponse {});
    }
    let update = TwinUpdate { event_id: "", timestamp: edgehive_model::now_millis(), twin: EntryMap(twin) };
    let topic = format!("{DEVICE_ET_PREFIX}{}/twin/update", req.device_name);
    to_twin(ctx, &topic, &update).await?;
    Ok(api::ReportDeviceStatusResponse {})
}

/// What the edge reads of a `ReportDeviceStatusRequest` ([`api`]'s, less
/// the values' `metadata` maps, which it does not use: a thousand reports a
/// second decoded two `HashMap`s each for nothing; prost skips them unread).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StatusReport {
    #[prost(string, tag = "1")]
    device_name: String,
    #[prost(message, optional, tag = "2")]
    reported_device: Option<ReportedTwins>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ReportedTwins {
    #[prost(message, repeated, tag = "1")]
    twins: Vec<ReportedTwin>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ReportedTwin {
    #[prost(string, tag = "1")]
    property_name: String,
    #[prost(message, optional, tag = "2")]
    observed_desired: Option<ReportedValue>,
    #[prost(message, optional, tag = "3")]
    reported: Option<ReportedValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ReportedValue {
    #[prost(string, tag = "1")]
    value: String,
}

/// The body of a `$hw/events/device/{id}/twin/update` (KubeEdge's
/// `DeviceTwinUpdate`), written straight from the request.
#[derive(serde::Serialize)]
struct TwinUpdate<'a> {
    event_id: &'static str,
    timestamp: i64,
    twin: EntryMap<'a>,
}

/// The reported twins, by property, as a JSON object.
struct EntryMap<'a>(Vec<(&'a str, TwinEntry<'a>)>);

impl serde::Serialize for EntryMap<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[derive(serde::Serialize)]
struct TwinEntry<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<ValueOnly<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    actual: Option<ValueOnly<'a>>,
}

#[derive(serde::Serialize)]
struct ValueOnly<'a> {
    value: &'a str,
}

async fn report_device_states(
    shared: &Arc<Shared>,
    ctx: &Context,
    req: api::ReportDeviceStatesRequest,
) -> Result<api::ReportDeviceStatesResponse, Status> {
    limited(shared, &shared.report_limit, || format!("report state of {}", req.device_name))?;
    shared.metrics.reports.inc();
    known_device(shared, &req.device_name)?;
    if req.state.is_empty() || req.state.len() > 64 {
        shared.metrics.reports_dropped.inc();
        return Err(Status::invalid_argument("the state must be 1 to 64 characters"));
    }
    let payload = serde_json::json!({"event_id": "", "timestamp": edgehive_model::now_millis(), "state": req.state});
    let topic = format!("{DEVICE_ET_PREFIX}{}/state/update", req.device_name);
    to_twin(ctx, &topic, &payload).await?;
    Ok(api::ReportDeviceStatesResponse {})
}

/// Sends what an MQTT publish on `topic` would have brought (contract
/// message 1): source `bus`, group `user`, resource the base64url topic,
/// operation `response` — but the payload as JSON itself, not as a JSON
/// string holding it: DeviceTwin takes either, and this one needs no
/// escaping here and no second decode there.
async fn to_twin(ctx: &Context, topic: &str, payload: &impl serde::Serialize) -> Result<(), Status> {
    let resource = base64::engine::general_purpose::URL_SAFE.encode(topic);
    let content = Content::from_serialize(payload).map_err(|e| Status::internal(format!("report not encoded: {e}")))?;
    let msg = Message::build(source::BUS, group::USER, resource, op::RESPONSE, content);
    match tokio::time::timeout(TWIN_SEND_DEADLINE, ctx.send_to_group(group::TWIN, msg)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            tracing::warn!(topic, error = %e, "report not delivered to twin");
            Err(Status::new(edgehive_grpc::code::UNAVAILABLE, "the device twin is not running"))
        }
        Err(_) => Err(Status::new(edgehive_grpc::code::UNAVAILABLE, "the device twin is busy")),
    }
}
