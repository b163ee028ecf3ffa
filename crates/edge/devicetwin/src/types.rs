//! KubeEdge's DeviceTwin payloads (`edge/pkg/devicetwin/dttype`), as JSON
//! on the `$hw/events/...` topics and to the cloud.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `event_id` and `timestamp` (milliseconds), in every payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseMessage {
    /// The request's id, echoed in its answer.
    #[serde(default)]
    pub event_id: String,
    /// Milliseconds since the epoch.
    #[serde(default)]
    pub timestamp: i64,
}

impl BaseMessage {
    /// A message of now answering `event_id`.
    pub fn now(event_id: &str) -> BaseMessage {
        BaseMessage { event_id: event_id.to_owned(), timestamp: edgehive_model::now_millis() }
    }
}

/// A twin's value and when it was set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwinValue {
    /// The value, as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `{"timestamp": ms}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ValueMetadata>,
}

/// When a value was set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueMetadata {
    /// Milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub timestamp: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// A twin's or attribute's type (`int`, `string`, …, or `deleted`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeMetadata {
    /// The type.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub ty: String,
}

/// Versions of a side of a twin: changes made in the cloud and at the edge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwinVersion {
    /// Changes from the cloud.
    #[serde(rename = "cloud", default)]
    pub cloud: i64,
    /// Changes made at the edge.
    #[serde(rename = "edge", default)]
    pub edge: i64,
}

/// A twin: the expected (desired) and actual (reported) values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgTwin {
    /// The desired value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<TwinValue>,
    /// The reported value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<TwinValue>,
    /// Whether the twin may be absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// Its type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TypeMetadata>,
    /// Versions of the expected value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<TwinVersion>,
    /// Versions of the actual value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_version: Option<TwinVersion>,
}

impl MsgTwin {
    /// The expected value, if any.
    pub fn expected_value(&self) -> Option<&str> {
        self.expected.as_ref()?.value.as_deref()
    }

    /// The actual value, if any.
    pub fn actual_value(&self) -> Option<&str> {
        self.actual.as_ref()?.value.as_deref()
    }

    /// The twin as it is shown to clients: without versions.
    pub fn shown(&self) -> MsgTwin {
        MsgTwin { expected_version: None, actual_version: None, ..self.clone() }
    }
}

/// A device attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgAttr {
    /// The value.
    #[serde(default)]
    pub value: String,
    /// Whether it may be absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// Its type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TypeMetadata>,
}

/// A device as membership messages carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Its id (KubeEdge v1.15: the Device's name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its description (the Device's `description` label).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Its state (`online`, `offline`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// When it was last online (`2006-01-02 15:04:05`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_online: String,
    /// Its attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, MsgAttr>>,
    /// Its twins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<BTreeMap<String, MsgTwin>>,
}

/// The cloud's membership update (`MembershipUpdate`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct MembershipUpdate {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// Devices bound to the node.
    #[serde(default)]
    pub added_devices: Option<Vec<Device>>,
    /// Devices no longer bound to it.
    #[serde(default)]
    pub removed_devices: Option<Vec<Device>>,
}

/// A twin update (`DeviceTwinUpdate`): from a mapper or app on
/// `.../twin/update`, and the edge's report to the cloud.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct DeviceTwinUpdate {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// Twins by name (`null`: delete, as KubeEdge reads it).
    pub twin: Option<BTreeMap<String, Option<MsgTwin>>>,
}

/// An error answer (`Result`): code 400, 404 or 500 and why.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorResult {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// 400, 404, 500.
    pub code: u16,
    /// Why.
    pub reason: String,
}

/// A twin result (`DeviceTwinResult`) of a get or an update.
#[derive(Debug, Clone, Serialize)]
pub struct TwinResult {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// The twins.
    pub twin: BTreeMap<String, MsgTwin>,
}

/// The twins' delta (`DeviceTwinDelta`): twins, and the expected values
/// that the actual ones do not match yet.
#[derive(Debug, Clone, Serialize)]
pub struct TwinDelta {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// The twins with an expected value.
    pub twin: BTreeMap<String, MsgTwin>,
    /// Expected values by twin name, where the actual value differs.
    pub delta: BTreeMap<String, String>,
}

/// One twin before and after an update.
#[derive(Debug, Clone, Serialize)]
pub struct TwinDoc {
    /// Before (`null` for a new twin).
    pub last: Option<MsgTwin>,
    /// After (`null` for a deleted twin).
    pub current: Option<MsgTwin>,
}

/// An update's document (`DeviceTwinDocument`).
#[derive(Debug, Clone, Serialize)]
pub struct TwinDocument {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// Per changed twin.
    pub twin: BTreeMap<String, TwinDoc>,
}

/// The membership get result (`MembershipGetResult`).
#[derive(Debug, Clone, Serialize)]
pub struct MembershipGetResult {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// The node's devices (without twins).
    pub devices: Vec<Device>,
}

/// A device's state update (`DeviceUpdate`), and its result (`DeviceMsg`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StateUpdate {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// The new state.
    #[serde(default)]
    pub state: String,
}

/// The state result and report (`DeviceMsg`).
#[derive(Debug, Clone, Serialize)]
pub struct DeviceMsg {
    /// Event id and time.
    #[serde(flatten)]
    pub base: BaseMessage,
    /// The device's name, state and last online time.
    pub device: Device,
}

/// KubeEdge's twin name rule (`ValidateTwinKey`): 1–128 of
/// `[a-zA-Z0-9-_.,:/@#]`.
pub fn valid_twin_key(key: &str) -> bool {
    (1..=128).contains(&key.len()) && key.bytes().all(twin_byte)
}

/// KubeEdge's twin value rule (`ValidateTwinValue`): 1–512 of the same set
/// (an empty value is allowed: it is not checked).
pub fn valid_twin_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= 512 && value.bytes().all(twin_byte))
}

fn twin_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.,:/@#".contains(&b)
}
