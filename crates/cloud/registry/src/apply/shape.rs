//! How server-side apply treats each part of an object: what
//! structured-merge-diff reads from the OpenAPI extensions of Kubernetes'
//! types (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type`), over the Go-type tables of the decode check.
//!
//! Structs and maps merge field by field; lists are atomic (replaced whole,
//! owned as one field) unless the table below makes them sets of scalars or
//! maps keyed by some of their items' fields. The table transcribes the
//! `+listType`/`+listMapKey`/`+structType`/`+mapType` markers of
//! k8s.io/api core/v1, apps/v1, batch/v1, discovery/v1 and meta/v1 types.go
//! (v1.33) for the types served here; a list not listed is atomic, as
//! `+listType=atomic` makes it. The KubeEdge kinds' hand-written schemas
//! have no list types: their lists are atomic, as a CRD's lists are without
//! `x-kubernetes-list-type`.

use serde_json::Value;

use crate::validation::schema::{Struct, Ty, root};

/// How a list merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// Replaced whole; owned as one field.
    Atomic,
    /// A set of scalars (`+listType=set`): items are `v:` elements.
    Set,
    /// Items keyed by these fields (`+listType=map`): `k:` elements; with
    /// the one key field that has a schema default, and that default.
    Map(&'static [&'static str], Option<(&'static str, &'static str)>),
}

/// The shape of one value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// A struct merged field by field.
    Struct(&'static Struct),
    /// A map merged key by key, its values of this type.
    Map(&'static Ty),
    /// A list.
    List(&'static Ty, ListKind),
    /// Replaced whole (scalars, atomic structs and maps).
    Atomic,
    /// No schema (free-form fields, kinds without a table): objects merge
    /// key by key, lists are atomic, as structured-merge-diff's deduced type.
    Untyped,
}

/// Lists that are not atomic: (Go struct, field) → kind.
static LIST_TYPES: &[(&str, &str, ListKind)] = &[
    ("ObjectMeta", "finalizers", ListKind::Set),
    ("ObjectMeta", "ownerReferences", ListKind::Map(&["uid"], None)),
    ("Container", "env", ListKind::Map(&["name"], None)),
    ("Container", "ports", ListKind::Map(&["containerPort", "protocol"], TCP)),
    ("Container", "volumeDevices", ListKind::Map(&["devicePath"], None)),
    ("Container", "volumeMounts", ListKind::Map(&["mountPath"], None)),
    ("EphemeralContainer", "env", ListKind::Map(&["name"], None)),
    ("EphemeralContainer", "ports", ListKind::Map(&["containerPort", "protocol"], TCP)),
    ("EphemeralContainer", "volumeDevices", ListKind::Map(&["devicePath"], None)),
    ("EphemeralContainer", "volumeMounts", ListKind::Map(&["mountPath"], None)),
    ("ContainerStatus", "allocatedResourcesStatus", ListKind::Map(&["name"], None)),
    ("ContainerStatus", "volumeMounts", ListKind::Map(&["mountPath"], None)),
    ("ResourceRequirements", "claims", ListKind::Map(&["name"], None)),
    ("PodSpec", "containers", ListKind::Map(&["name"], None)),
    ("PodSpec", "initContainers", ListKind::Map(&["name"], None)),
    ("PodSpec", "ephemeralContainers", ListKind::Map(&["name"], None)),
    ("PodSpec", "hostAliases", ListKind::Map(&["ip"], None)),
    ("PodSpec", "imagePullSecrets", ListKind::Map(&["name"], None)),
    ("PodSpec", "resourceClaims", ListKind::Map(&["name"], None)),
    ("PodSpec", "schedulingGates", ListKind::Map(&["name"], None)),
    ("PodSpec", "topologySpreadConstraints", ListKind::Map(&["topologyKey", "whenUnsatisfiable"], None)),
    ("PodSpec", "volumes", ListKind::Map(&["name"], None)),
    ("PodStatus", "conditions", ListKind::Map(&["type"], None)),
    ("PodStatus", "hostIPs", ListKind::Map(&["ip"], None)),
    ("PodStatus", "podIPs", ListKind::Map(&["ip"], None)),
    ("PodStatus", "resourceClaimStatuses", ListKind::Map(&["name"], None)),
    ("NodeSpec", "podCIDRs", ListKind::Set),
    ("NodeStatus", "addresses", ListKind::Map(&["type"], None)),
    ("NodeStatus", "conditions", ListKind::Map(&["type"], None)),
    ("NamespaceStatus", "conditions", ListKind::Map(&["type"], None)),
    ("ServiceSpec", "ports", ListKind::Map(&["port", "protocol"], TCP)),
    ("ServiceStatus", "conditions", ListKind::Map(&["type"], None)),
    ("ServiceAccount", "secrets", ListKind::Map(&["name"], None)),
    ("DeploymentStatus", "conditions", ListKind::Map(&["type"], None)),
    ("ReplicaSetStatus", "conditions", ListKind::Map(&["type"], None)),
    ("DaemonSetStatus", "conditions", ListKind::Map(&["type"], None)),
    ("StatefulSetStatus", "conditions", ListKind::Map(&["type"], None)),
    ("JobStatus", "conditions", ListKind::Map(&["type"], None)),
    ("UncountedTerminatedPods", "failed", ListKind::Set),
    ("UncountedTerminatedPods", "succeeded", ListKind::Set),
    ("PodFailurePolicyOnExitCodesRequirement", "values", ListKind::Set),
    ("PodDisruptionBudgetStatus", "conditions", ListKind::Map(&["type"], None)),
    ("Endpoint", "addresses", ListKind::Set),
];

/// Maps replaced whole (`+mapType=atomic`): (Go struct, field).
static ATOMIC_MAPS: &[(&str, &str)] = &[("PodSpec", "nodeSelector"), ("ServiceSpec", "selector")];

/// Structs replaced whole (`+structType=atomic`).
static ATOMIC_STRUCTS: &[&str] = &[
    "LabelSelector",
    "NodeSelector",
    "NodeSelectorTerm",
    "TopologySelectorTerm",
    "LocalObjectReference",
    "TypedLocalObjectReference",
    "ObjectReference",
    "ConfigMapKeySelector",
    "SecretKeySelector",
    "ObjectFieldSelector",
    "ResourceFieldSelector",
];

/// `protocol` of ports: when an applied item leaves it out, the schema's default keys it.
const TCP: Option<(&str, &str)> = Some(("protocol", "TCP"));

/// The shape of a whole object of `kind` in `group`.
pub(crate) fn root_shape(group: &str, kind: &str) -> Shape {
    root(group, kind).map_or(Shape::Untyped, Shape::Struct)
}

/// The shape of field `name` of struct `parent`; `None` for a field the
/// struct lacks (strict field validation deals with those).
pub(crate) fn field_shape(parent: &'static Struct, name: &str) -> Option<Shape> {
    let (_, ty) = parent.fields.iter().find(|(n, _)| *n == name)?;
    Some(match ty {
        Ty::Obj(s) if ATOMIC_STRUCTS.contains(&s.go) => Shape::Atomic,
        Ty::Obj(s) => Shape::Struct(s),
        Ty::Map(_) if ATOMIC_MAPS.contains(&(parent.go, name)) => Shape::Atomic,
        Ty::Map(elem) => Shape::Map(elem),
        Ty::List(elem) => {
            let kind = LIST_TYPES
                .iter()
                .find(|(s, f, _)| *s == parent.go && *f == name)
                .map_or(ListKind::Atomic, |(_, _, k)| *k);
            Shape::List(elem, kind)
        }
        other => shape_of(other),
    })
}

/// The shape of a value of type `ty` met outside a struct (map values, list items).
pub(crate) fn shape_of(ty: &'static Ty) -> Shape {
    match ty {
        Ty::Obj(s) if ATOMIC_STRUCTS.contains(&s.go) => Shape::Atomic,
        Ty::Obj(s) => Shape::Struct(s),
        Ty::Map(elem) => Shape::Map(elem),
        Ty::List(elem) => Shape::List(elem, ListKind::Atomic),
        Ty::Any | Ty::Raw => Shape::Untyped,
        _ => Shape::Atomic,
    }
}

/// What a value is, given its shape and the JSON it holds: a value of
/// another JSON type than the schema's is a leaf (validation refuses it later).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Node {
    /// A leaf: owned and replaced whole.
    Leaf,
    /// An object whose entries are fields of this struct.
    Struct(&'static Struct),
    /// An object whose entries have this shape (maps, free-form objects).
    Map(Shape),
    /// A list whose items are identified by [`item_element`].
    List(Shape, ListKind),
}

pub(crate) fn node(shape: Shape, v: &Value) -> Node {
    match (shape, v) {
        (Shape::Struct(s), Value::Object(_)) => Node::Struct(s),
        (Shape::Map(elem), Value::Object(_)) => Node::Map(shape_of(elem)),
        (Shape::Untyped, Value::Object(_)) => Node::Map(Shape::Untyped),
        (Shape::List(elem, kind), Value::Array(items))
            if kind != ListKind::Atomic && items.iter().all(|i| item_element(kind, i).is_some()) =>
        {
            Node::List(shape_of(elem), kind)
        }
        _ => Node::Leaf,
    }
}

/// The shape of entry `name` of an object node; `None` for a field a
/// struct lacks.
pub(crate) fn entry_shape(node: Node, name: &str) -> Option<Shape> {
    match node {
        Node::Struct(s) => field_shape(s, name),
        Node::Map(shape) => Some(shape),
        Node::Leaf | Node::List(..) => None,
    }
}

/// The path element of a list item: `v:` for sets, `k:` for maps. `None`
/// when an item of a keyed list lacks a key field that has no default (or
/// is not an object).
pub(crate) fn item_element(kind: ListKind, item: &Value) -> Option<String> {
    match kind {
        ListKind::Atomic => None,
        ListKind::Set => Some(super::fieldset::value(item)),
        ListKind::Map(keys, default) => {
            let obj = item.as_object()?;
            let mut owned = Vec::with_capacity(keys.len());
            for k in keys {
                match obj.get(*k).filter(|v| !v.is_null()) {
                    Some(v) => owned.push((*k, v.clone())),
                    None => {
                        let (_, d) = default.filter(|(name, _)| name == k)?;
                        owned.push((*k, Value::String(d.to_string())));
                    }
                }
            }
            let pairs: Vec<(&str, &Value)> = owned.iter().map(|(k, v)| (*k, v)).collect();
            Some(super::fieldset::key(&pairs))
        }
    }
}
