//! Static descriptors of the Kubernetes protobuf messages the decoder understands.
//!
//! A [`Message`] lists its fields by protobuf field number; each [`Field`] says which JSON
//! key the value lands under, what the bytes on the wire hold ([`Kind`]) and how the value
//! is laid out in JSON ([`Shape`]). The decoder walks the wire bytes and looks fields up here;
//! nothing about a type lives anywhere else.
//!
//! The tables in the sub-modules were transcribed from the Kubernetes sources: field numbers
//! and protobuf types from `generated.proto` (k8s.io/api `core/v1`, `coordination/v1`,
//! `apps/v1`, `batch/v1`, `autoscaling/v1`, `policy/v1`, `scheduling/v1alpha3`; k8s.io/apimachinery
//! `pkg/apis/meta/v1`, `pkg/runtime`), and from the Go structs in `types.go` the JSON
//! name, whether the Go field is a pointer, whether its `json` tag says `omitempty`, and
//! whether it is an embedded (inlined) struct. The sources were k8s.io/api at commit
//! `10b39a39` and k8s.io/apimachinery at `eed236ce` (both July 2026); fields added to
//! Kubernetes later are skipped as unknown until they are added here. To add a type, copy its
//! messages the same way and register the top-level one in the parent module.
//!
//! Nothing reachable from the registered types is left out: every message they can contain
//! (250 of them, 1,079 fields) is described, down to the rarely used volume sources and the
//! alpha scheduling policies of a `Job`.
//!
//! **Architecture Invariant:** the messages form no cycle, so the nesting depth of any decoded
//! object is bounded by these tables; the decoder's depth limit is a second line of defence.

// The tables keep one field per line (rustfmt would pack short messages onto one line).
#[rustfmt::skip]
mod access;
#[rustfmt::skip]
mod apps;
#[rustfmt::skip]
mod autoscaling;
#[rustfmt::skip]
mod batch;
#[rustfmt::skip]
mod coordination;
#[rustfmt::skip]
mod core_container;
#[rustfmt::skip]
mod core_node;
#[rustfmt::skip]
mod core_objects;
#[rustfmt::skip]
mod core_pod;
#[rustfmt::skip]
mod core_volume;
#[rustfmt::skip]
mod meta;
#[rustfmt::skip]
mod policy;

pub(crate) use access::{
    CLUSTER_ROLE, ROLE, ROLE_BINDING, SELF_SUBJECT_ACCESS_REVIEW, SELF_SUBJECT_REVIEW, SELF_SUBJECT_RULES_REVIEW,
    SUBJECT_ACCESS_REVIEW, TOKEN_REQUEST, TOKEN_REVIEW,
};
pub(crate) use apps::{CONTROLLER_REVISION, DAEMON_SET, DEPLOYMENT, REPLICA_SET, STATEFUL_SET};
pub(crate) use autoscaling::SCALE;
pub(crate) use batch::{CRON_JOB, JOB};
pub(crate) use coordination::LEASE;
pub(crate) use core_node::NODE;
pub(crate) use core_objects::{CONFIG_MAP, ENDPOINTS, EVENT, NAMESPACE, SECRET, SERVICE, SERVICE_ACCOUNT};
pub(crate) use core_pod::POD;
pub(crate) use meta::DELETE_OPTIONS;
pub(crate) use policy::{EVICTION, POD_DISRUPTION_BUDGET};

use std::fmt;

/// One protobuf message type: its name (for diagnostics) and its fields.
pub(crate) struct Message {
    /// The Go/protobuf type name, e.g. `"PodSpec"`.
    pub(crate) name: &'static str,
    /// The known fields, in any order; numbers are unique.
    pub(crate) fields: &'static [Field],
}

impl Message {
    /// A descriptor named `name` with `fields`.
    pub(crate) const fn new(name: &'static str, fields: &'static [Field]) -> Self {
        Self { name, fields }
    }

    /// The field with protobuf number `number`, if this message knows it.
    pub(crate) fn field(&self, number: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

impl fmt::Debug for Message {
    // Only the name: the full tree would print every reachable descriptor.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Message({})", self.name)
    }
}

/// One field of a [`Message`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    /// The protobuf field number.
    pub(crate) number: u32,
    /// The JSON key (for [`Shape::Inline`], only the protobuf name, for diagnostics).
    pub(crate) json: &'static str,
    /// What one value on the wire holds (for maps: what the map's values hold).
    pub(crate) kind: Kind,
    /// How the value appears in JSON.
    pub(crate) shape: Shape,
}

/// What one encoded value holds and how it becomes JSON.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// `string`: a JSON string (invalid UTF-8 is an error).
    String,
    /// `bytes`: a base64 JSON string, as Go encodes `[]byte`.
    Bytes,
    /// `bool`: a JSON boolean.
    Bool,
    /// `int32`: a JSON number (wire value truncated to 32 bits, as Go does).
    Int32,
    /// `int64`: a JSON number.
    Int64,
    /// A nested message: a JSON object.
    Message(&'static Message),
    /// meta/v1 `Time` (`seconds`=1, `nanos`=2): RFC 3339 to the second, UTC; an empty message
    /// is Go's zero time and is left out.
    Time,
    /// meta/v1 `MicroTime`: like [`Kind::Time`] with six fractional digits.
    MicroTime,
    /// intstr `IntOrString` (`type`=1, `intVal`=2, `strVal`=3): a JSON number or string.
    IntOrString,
    /// resource `Quantity` (`string`=1): a JSON string; an empty message is `"0"`.
    Quantity,
    /// meta/v1 `FieldsV1` (`Raw`=1): the raw bytes are JSON and are embedded as such.
    FieldsV1,
    /// runtime `RawExtension` (`raw`=1): JSON bytes embedded as such, `null` when empty.
    RawExtension,
}

/// How a field's values are laid out in JSON.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// One value; a repeated occurrence replaces a scalar and merges into a message.
    Single(Presence),
    /// A JSON array; scalars may come packed or one per occurrence.
    Repeated,
    /// A JSON object from `map<string, V>` entries (key = 1, value = 2).
    Map,
    /// A Go struct embedded without a JSON name: its fields are merged into the parent object.
    Inline(&'static Message),
}

/// When a scalar single field appears in JSON (message-like kinds appear whenever they were
/// on the wire, as Go's `encoding/json` never drops a struct for `omitempty`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Go value field tagged `omitempty`: left out when it is the zero value.
    OmitEmpty,
    /// Go pointer field: kept whenever it was on the wire, even when zero (`replicas: 0`).
    Pointer,
    /// Go value field without `omitempty`: always present, the zero value when not sent.
    Always,
}

// Constructors that keep the tables one line per field.

/// `string`.
pub(crate) const STR: Kind = Kind::String;
/// `bytes`.
pub(crate) const BYTES: Kind = Kind::Bytes;
/// `bool`.
pub(crate) const BOOL: Kind = Kind::Bool;
/// `int32`.
pub(crate) const I32: Kind = Kind::Int32;
/// `int64`.
pub(crate) const I64: Kind = Kind::Int64;
/// meta/v1 `Time`.
pub(crate) const TIME: Kind = Kind::Time;
/// meta/v1 `MicroTime`.
pub(crate) const MICRO_TIME: Kind = Kind::MicroTime;
/// `IntOrString`.
pub(crate) const INT_OR_STRING: Kind = Kind::IntOrString;
/// `Quantity`.
pub(crate) const QUANTITY: Kind = Kind::Quantity;
/// `FieldsV1`.
pub(crate) const FIELDS_V1: Kind = Kind::FieldsV1;
/// runtime `RawExtension`.
pub(crate) const RAW_EXTENSION: Kind = Kind::RawExtension;

/// A nested message.
pub(crate) const fn msg(message: &'static Message) -> Kind {
    Kind::Message(message)
}

/// A Go value field tagged `omitempty` (or any message-like field).
pub(crate) const fn opt(number: u32, json: &'static str, kind: Kind) -> Field {
    Field { number, json, kind, shape: Shape::Single(Presence::OmitEmpty) }
}

/// A Go pointer field: kept when present, even when zero.
pub(crate) const fn ptr(number: u32, json: &'static str, kind: Kind) -> Field {
    Field { number, json, kind, shape: Shape::Single(Presence::Pointer) }
}

/// A Go value field without `omitempty`: always in the JSON.
pub(crate) const fn req(number: u32, json: &'static str, kind: Kind) -> Field {
    Field { number, json, kind, shape: Shape::Single(Presence::Always) }
}

/// A repeated field (a Go slice).
pub(crate) const fn rep(number: u32, json: &'static str, kind: Kind) -> Field {
    Field { number, json, kind, shape: Shape::Repeated }
}

/// A `map<string, V>` field whose values are of `kind`.
pub(crate) const fn map(number: u32, json: &'static str, kind: Kind) -> Field {
    Field { number, json, kind, shape: Shape::Map }
}

/// An embedded Go struct whose fields are inlined into the parent's JSON.
pub(crate) const fn inline(number: u32, name: &'static str, message: &'static Message) -> Field {
    Field { number, json: name, kind: Kind::Message(message), shape: Shape::Inline(message) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashSet};

    /// Every message reachable from the registered roots.
    fn all_messages() -> Vec<&'static Message> {
        let roots: [&'static Message; 21] = [
            &CONFIG_MAP,
            &SECRET,
            &NAMESPACE,
            &SERVICE,
            &SERVICE_ACCOUNT,
            &ENDPOINTS,
            &EVENT,
            &NODE,
            &POD,
            &LEASE,
            &DELETE_OPTIONS,
            &DEPLOYMENT,
            &REPLICA_SET,
            &DAEMON_SET,
            &STATEFUL_SET,
            &CONTROLLER_REVISION,
            &JOB,
            &CRON_JOB,
            &SCALE,
            &EVICTION,
            &POD_DISRUPTION_BUDGET,
        ];
        let mut seen: HashSet<*const Message> = HashSet::new();
        let mut out = Vec::new();
        let mut stack: Vec<&'static Message> = roots.to_vec();
        while let Some(m) = stack.pop() {
            if !seen.insert(std::ptr::from_ref(m)) {
                continue;
            }
            out.push(m);
            for f in m.fields {
                if let Kind::Message(inner) = f.kind {
                    stack.push(inner);
                }
            }
        }
        out
    }

    /// The JSON keys a message produces, following inlined structs.
    fn json_keys(m: &'static Message, keys: &mut Vec<&'static str>) {
        for f in m.fields {
            match f.shape {
                Shape::Inline(inner) => json_keys(inner, keys),
                _ => keys.push(f.json),
            }
        }
    }

    #[test]
    fn numbers_and_json_keys_are_unique_and_valid() {
        let all = all_messages();
        // The counts the module documentation states.
        assert_eq!(all.len(), 250, "messages reachable");
        assert_eq!(all.iter().map(|m| m.fields.len()).sum::<usize>(), 1079, "fields described");
        for m in all {
            let mut numbers = BTreeSet::new();
            for f in m.fields {
                assert!(f.number > 0 && f.number < (1 << 29), "{}.{}", m.name, f.json);
                assert!(numbers.insert(f.number), "{}: number {} twice", m.name, f.number);
                assert!(!f.json.is_empty(), "{}: empty name", m.name);
                if let Shape::Inline(inner) = f.shape {
                    assert!(matches!(f.kind, Kind::Message(k) if std::ptr::eq(k, inner)));
                }
            }
            let mut keys = Vec::new();
            json_keys(m, &mut keys);
            let unique: BTreeSet<_> = keys.iter().collect();
            assert_eq!(unique.len(), keys.len(), "{}: duplicate JSON key", m.name);
        }
    }

    #[test]
    fn schema_has_no_cycle() {
        fn walk(m: &'static Message, path: &mut Vec<&'static str>) {
            assert!(!path.contains(&m.name), "cycle through {path:?} -> {}", m.name);
            assert!(path.len() < 32, "nesting deeper than 32: {path:?}");
            path.push(m.name);
            for f in m.fields {
                if let Kind::Message(inner) = f.kind {
                    walk(inner, path);
                }
            }
            path.pop();
        }
        for m in all_messages() {
            walk(m, &mut Vec::new());
        }
    }
}
