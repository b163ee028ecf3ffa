//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! into the JSON the same object would have been sent as.
//!
//! kubectl's typed commands (`kubectl create configmap|secret|namespace|service`) and every
//! client-go program send built-in types as protobuf. The store keeps JSON, so [`decode()`]
//! turns such a body into the `serde_json::Value` Go's `encoding/json` would have produced
//! for the same object, `apiVersion` and `kind` included.
//!
//! A body is the four bytes `k8s\0` followed by a `runtime.Unknown` message: `typeMeta` = 1
//! (`apiVersion` = 1, `kind` = 2), `raw` = 2 (the object's own message), `contentEncoding`
//! = 3 (always empty in practice; anything else is refused) and `contentType` = 4 (ignored).
//!
//! Decoding is table-driven: [`schema`] holds a static descriptor per message, and
//! [`decode()`] walks the bytes with the small reader in [`wire`]. Supported:
//! core/v1 `ConfigMap`, `Secret`, `Namespace`, `Service`, `ServiceAccount`, `Endpoints`,
//! `Event`, `Node`, `Pod`; apps/v1 `Deployment`, `ReplicaSet`, `DaemonSet`, `StatefulSet`,
//! `ControllerRevision`; batch/v1 `Job`, `CronJob`; autoscaling/v1 `Scale` (the body of a
//! `scale` subresource); coordination.k8s.io/v1 `Lease`; policy/v1 `PodDisruptionBudget` and
//! `Eviction` (the body of a pod's `eviction`); meta/v1 `DeleteOptions` (under any
//! `apiVersion`, since every group version registers it). Every message these reach is
//! described in full, so nothing inside them is dropped, except fields newer than the
//! tables, which are skipped like any unknown field number.
//!
//! **Architecture Invariant:** this module knows nothing of HTTP, the store or validation:
//! bytes in, JSON out. Hostile input can only produce a [`ProtoError`]: every length is
//! checked before use, nothing is allocated from a length, and nesting is limited.

mod decode;
#[cfg(test)]
mod hostile_tests;
#[cfg(test)]
mod kubectl_tests;
mod schema;
#[cfg(test)]
mod testenc;
#[cfg(test)]
mod tests;
mod time;
mod wellknown;
mod wire;
#[cfg(test)]
mod workload_tests;

use serde_json::Value;

use schema::Message;
use wire::{Reader, WireType};

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8; 4] = b"k8s\0";

/// Why a protobuf body could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ProtoError {
    /// The body does not start with `k8s\0`, so it is not a Kubernetes protobuf body.
    #[error("body does not start with the Kubernetes protobuf prefix \"k8s\\0\"")]
    NoMagic,
    /// A value runs past the end of the body (or of the message holding it).
    #[error("protobuf body is truncated: the value at byte {at} runs past its end")]
    Truncated {
        /// Offset in the body where the cut value starts.
        at: usize,
    },
    /// A known field came with a wire type its type cannot have (or one that does not exist).
    #[error("protobuf field {field} has wire type {wire}, which does not fit its type")]
    BadWireType {
        /// The field number.
        field: u32,
        /// The wire type found.
        wire: u8,
    },
    /// The body holds a type this decoder has no descriptor for.
    #[error("no protobuf decoding for {api_version} {kind}; send JSON instead")]
    Unsupported {
        /// The `apiVersion` from the envelope.
        api_version: String,
        /// The `kind` from the envelope.
        kind: String,
    },
    /// The bytes are framed correctly but a value makes no sense (a field number of 0, an
    /// over-long varint, an impossible `IntOrString`, a timestamp past year 9999, …).
    #[error("invalid protobuf body: {0}")]
    Invalid(String),
    /// Messages are nested deeper than the decoder allows.
    #[error("protobuf messages are nested deeper than {} levels", decode::MAX_DEPTH)]
    TooDeep,
}

/// The parts of the `runtime.Unknown` envelope the decoder uses.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    /// The object's own message.
    raw: Reader<'a>,
}

/// Decodes a Kubernetes protobuf body: returns (apiVersion, kind, object as JSON with
/// apiVersion and kind set).
pub(crate) fn decode(body: &[u8]) -> Result<(String, String, Value), ProtoError> {
    let envelope = open_envelope(body)?;
    let Some(desc) = lookup(&envelope.api_version, &envelope.kind) else {
        return Err(ProtoError::Unsupported { api_version: envelope.api_version, kind: envelope.kind });
    };
    let mut object = decode::decode_object(desc, envelope.raw, body.len())?;
    object.insert("apiVersion".to_owned(), Value::String(envelope.api_version.clone()));
    object.insert("kind".to_owned(), Value::String(envelope.kind.clone()));
    Ok((envelope.api_version, envelope.kind, Value::Object(object)))
}

/// Whether `apiVersion`/`kind` can be decoded.
#[cfg(test)]
pub(crate) fn supports(api_version: &str, kind: &str) -> bool {
    lookup(api_version, kind).is_some()
}

/// The descriptor of a top-level type.
fn lookup(api_version: &str, kind: &str) -> Option<&'static Message> {
    let desc = match (api_version, kind) {
        ("v1", "ConfigMap") => &schema::CONFIG_MAP,
        ("v1", "Secret") => &schema::SECRET,
        ("v1", "Namespace") => &schema::NAMESPACE,
        ("v1", "Service") => &schema::SERVICE,
        ("v1", "ServiceAccount") => &schema::SERVICE_ACCOUNT,
        ("v1", "Endpoints") => &schema::ENDPOINTS,
        ("v1", "Event") => &schema::EVENT,
        ("v1", "Node") => &schema::NODE,
        ("v1", "Pod") => &schema::POD,
        ("apps/v1", "Deployment") => &schema::DEPLOYMENT,
        ("apps/v1", "ReplicaSet") => &schema::REPLICA_SET,
        ("apps/v1", "DaemonSet") => &schema::DAEMON_SET,
        ("apps/v1", "StatefulSet") => &schema::STATEFUL_SET,
        ("apps/v1", "ControllerRevision") => &schema::CONTROLLER_REVISION,
        ("batch/v1", "Job") => &schema::JOB,
        ("batch/v1", "CronJob") => &schema::CRON_JOB,
        // The `scale` subresource of every scalable resource takes this one type.
        ("autoscaling/v1", "Scale") => &schema::SCALE,
        ("coordination.k8s.io/v1", "Lease") => &schema::LEASE,
        ("policy/v1", "PodDisruptionBudget") => &schema::POD_DISRUPTION_BUDGET,
        // The body of a pod's `eviction` subresource.
        ("policy/v1", "Eviction") => &schema::EVICTION,
        ("rbac.authorization.k8s.io/v1", "Role") => &schema::ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => &schema::CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => &schema::ROLE_BINDING,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => &schema::SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io/v1", "SubjectAccessReview" | "LocalSubjectAccessReview") => {
            &schema::SUBJECT_ACCESS_REVIEW
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => &schema::SELF_SUBJECT_RULES_REVIEW,
        ("authentication.k8s.io/v1", "TokenRequest") => &schema::TOKEN_REQUEST,
        ("authentication.k8s.io/v1", "TokenReview") => &schema::TOKEN_REVIEW,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => &schema::SELF_SUBJECT_REVIEW,
        // metav1.AddToGroupVersion registers DeleteOptions in every group version, and
        // client-go encodes it with the version of the client that sends the delete.
        (version, "DeleteOptions") if !version.is_empty() => &schema::DELETE_OPTIONS,
        _ => return None,
    };
    Some(desc)
}

/// Checks the prefix and reads the `runtime.Unknown` that follows it.
fn open_envelope(body: &[u8]) -> Result<Envelope<'_>, ProtoError> {
    if !body.starts_with(MAGIC) {
        return Err(ProtoError::NoMagic);
    }
    let mut reader = Reader::new(body, MAGIC.len());
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    while !reader.at_end() {
        let (number, wire) = reader.tag()?;
        match number {
            1 => {
                let mut type_meta = len_field(number, wire, &mut reader)?;
                while !type_meta.at_end() {
                    let (number, wire) = type_meta.tag()?;
                    match number {
                        1 => api_version = string_field(number, wire, &mut type_meta)?,
                        2 => kind = string_field(number, wire, &mut type_meta)?,
                        _ => type_meta.skip(wire)?,
                    }
                }
            }
            2 => raw = Some(len_field(number, wire, &mut reader)?),
            3 => {
                let encoding = string_field(number, wire, &mut reader)?;
                if !encoding.is_empty() {
                    return Err(ProtoError::Invalid(format!("content encoding {encoding:?} is not supported")));
                }
            }
            _ => reader.skip(wire)?,
        }
    }
    // Go would decode a missing `raw` as an empty object, but no client sends one: it is
    // what a body cut right after the type looks like, so it is refused.
    let raw = raw.ok_or_else(|| ProtoError::Invalid(format!("body for {api_version} {kind} holds no object")))?;
    Ok(Envelope { api_version, kind, raw })
}

fn len_field<'a>(number: u32, wire: WireType, reader: &mut Reader<'a>) -> Result<Reader<'a>, ProtoError> {
    if wire != WireType::Len {
        return Err(ProtoError::BadWireType { field: number, wire: wire.number() });
    }
    reader.len_delimited()
}

fn string_field(number: u32, wire: WireType, reader: &mut Reader<'_>) -> Result<String, ProtoError> {
    Ok(wellknown::text(len_field(number, wire, reader)?.rest()))
}
