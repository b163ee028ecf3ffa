//! The Go-type tables of every served kind, and the checks made with them: the decode check (JSON types of
//! known fields, as Kubernetes' decoder (built-in kinds) or a CRD's openAPI schema (KubeEdge kinds) sees
//! them) and the strict-decoding check (unknown fields, [`unknown_fields`]).
//!
//! Built-in kinds are described by their Go structs, to any depth (the tables in `schema/builtin.rs` are
//! generated from the Kubernetes API's OpenAPI definitions by `scripts/gen-k8s-types.py`), so that a wrong
//! type reads like Go's decoder error, e.g. `json: cannot unmarshal string into Go struct field
//! PodSpec.spec.containers of type []v1.Container`, and a field that is not in the struct is an unknown
//! field, as Kubernetes' strict decoder reports it. KubeEdge kinds keep the hand-written tables of their
//! CRD schemas below.

mod builtin;
mod unknown;

pub use unknown::{FieldValidation, check_unknown, duplicate_fields, prune_unknown};

use super::FieldError;
use super::json;
use base64::Engine;
use serde_json::Value;

/// The type of a field.
#[derive(Debug)]
pub(crate) enum Ty {
    Str,
    Bool,
    I32,
    I64,
    /// `float64` (JSONSchemaProps' bounds).
    F64,
    /// `intstr.IntOrString`.
    IntOrStr,
    /// `resource.Quantity`.
    Quantity,
    /// `[]byte`, base64 in JSON.
    Bytes,
    /// `metav1.Time`: an RFC 3339 string (or null).
    Time,
    /// `runtime.RawExtension`: any JSON, kept as it is.
    Raw,
    /// Anything (raw extensions, CRD fields that preserve unknown fields, fields not described here).
    Any,
    /// A string restricted to listed values (CRD `enum`).
    Enum(&'static [&'static str]),
    Obj(&'static Struct),
    List(&'static Ty),
    Map(&'static Ty),
}

/// The Go package of a struct, which names its OpenAPI schema (`io.k8s.api.apps.v1.Deployment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pkg {
    /// `k8s.io/api/core/v1`.
    Core,
    /// `k8s.io/apimachinery/pkg/apis/meta/v1`.
    Meta,
    /// `k8s.io/api/apps/v1`.
    Apps,
    /// `k8s.io/api/batch/v1`.
    Batch,
    /// `k8s.io/api/coordination/v1`.
    Coordination,
    /// `k8s.io/api/policy/v1`.
    Policy,
    /// `k8s.io/api/autoscaling/v1`.
    Autoscaling,
    /// `k8s.io/api/discovery/v1`.
    Discovery,
    /// `k8s.io/api/events/v1`.
    Events,
    /// `k8s.io/api/rbac/v1`.
    Rbac,
    /// `k8s.io/api/authorization/v1`.
    Authorization,
    /// `k8s.io/api/authentication/v1`.
    Authentication,
    /// `k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1`.
    Apiextensions,
    /// A KubeEdge CRD schema (no Go name; inlined in OpenAPI).
    Crd,
}

/// A Go struct (or CRD object schema): its Go name, its fields, and its required fields. The required
/// fields are checked only for CRD schemas (the Go decoder never requires a field); for Go structs they
/// are what Kubernetes' OpenAPI lists as `required` (fields without `omitempty`/`+optional`).
#[derive(Debug)]
pub(crate) struct Struct {
    pub(crate) go: &'static str,
    pub(crate) pkg: Pkg,
    pub(crate) fields: &'static [(&'static str, Ty)],
    pub(crate) required: &'static [&'static str],
}

const fn st(go: &'static str, fields: &'static [(&'static str, Ty)]) -> Struct {
    let pkg = if go.is_empty() { Pkg::Crd } else { Pkg::Core };
    Struct { go, pkg, fields, required: &[] }
}

// --- KubeEdge CRDs (build/crds, v1beta1 / v1alpha1 openAPI schemas) --------------------------------------

static CRD_META: Struct = st("", &[("name", Ty::Str), ("namespace", Ty::Str), ("generateName", Ty::Str)]);
static TWIN_PROPERTY: Struct = Struct {
    go: "",
    pkg: Pkg::Crd,
    fields: &[("value", Ty::Str), ("metadata", Ty::Map(&Ty::Str))],
    required: &["value"],
};
static VISITOR: Struct = st("", &[("protocolName", Ty::Str), ("configData", Ty::Any)]);
static PUSH_HTTP: Struct =
    st("", &[("hostName", Ty::Str), ("port", Ty::I64), ("requestPath", Ty::Str), ("timeout", Ty::I64)]);
static PUSH_MQTT: Struct =
    st("", &[("address", Ty::Str), ("topic", Ty::Str), ("qos", Ty::I32), ("retained", Ty::Bool)]);
static PUSH_METHOD: Struct = st(
    "",
    &[
        ("http", Ty::Obj(&PUSH_HTTP)),
        ("mqtt", Ty::Obj(&PUSH_MQTT)),
        ("dbMethod", Ty::Any),
        ("otel", Ty::Any),
        ("anomalyDetection", Ty::Any),
    ],
);
static DEVICE_PROPERTY: Struct = st(
    "",
    &[
        ("name", Ty::Str),
        ("desired", Ty::Obj(&TWIN_PROPERTY)),
        ("visitors", Ty::Obj(&VISITOR)),
        ("reportCycle", Ty::I64),
        ("collectCycle", Ty::I64),
        ("reportToCloud", Ty::Bool),
        ("pushMethod", Ty::Obj(&PUSH_METHOD)),
    ],
);
static DEVICE_MODEL_REF: Struct = st("", &[("name", Ty::Str)]);
static PROTOCOL_CONFIG: Struct = st("", &[("protocolName", Ty::Str), ("configData", Ty::Any)]);
static DEVICE_METHOD: Struct = st("", &[("name", Ty::Str), ("propertyNames", Ty::List(&Ty::Str))]);
static STATE_REPORT: Struct = st("", &[("reportCycle", Ty::I64), ("reportToCloud", Ty::Bool)]);
static DEVICE_SPEC: Struct = st(
    "",
    &[
        ("deviceModelRef", Ty::Obj(&DEVICE_MODEL_REF)),
        ("nodeName", Ty::Str),
        ("properties", Ty::List(&Ty::Obj(&DEVICE_PROPERTY))),
        ("methods", Ty::List(&Ty::Obj(&DEVICE_METHOD))),
        ("protocol", Ty::Obj(&PROTOCOL_CONFIG)),
        ("stateReport", Ty::Obj(&STATE_REPORT)),
    ],
);
static DEVICE: Struct =
    st("", &[("metadata", Ty::Obj(&CRD_META)), ("spec", Ty::Obj(&DEVICE_SPEC)), ("status", Ty::Any)]);
/// `type` values of a device model property (the v1beta1 CRD's enum).
pub(crate) const PROPERTY_TYPES: &[&str] = &["INT", "FLOAT", "DOUBLE", "STRING", "BOOLEAN", "BYTES", "STREAM"];
/// `accessMode` values of a device model property.
pub(crate) const ACCESS_MODES: &[&str] = &["ReadWrite", "ReadOnly"];
static MODEL_PROPERTY: Struct = st(
    "",
    &[
        ("name", Ty::Str),
        ("description", Ty::Str),
        ("type", Ty::Enum(PROPERTY_TYPES)),
        ("accessMode", Ty::Enum(ACCESS_MODES)),
        ("minimum", Ty::Str),
        ("maximum", Ty::Str),
        ("unit", Ty::Str),
        ("visitors", Ty::Obj(&VISITOR)),
    ],
);
static DEVICE_MODEL_SPEC: Struct = st(
    "",
    &[("properties", Ty::List(&Ty::Obj(&MODEL_PROPERTY))), ("protocol", Ty::Str), ("protocolConfigData", Ty::Any)],
);
static DEVICE_MODEL: Struct = st("", &[("metadata", Ty::Obj(&CRD_META)), ("spec", Ty::Obj(&DEVICE_MODEL_SPEC))]);
static OBJECT_SYNC_SPEC: Struct =
    st("", &[("objectAPIVersion", Ty::Str), ("objectKind", Ty::Str), ("objectName", Ty::Str)]);
static OBJECT_SYNC_STATUS: Struct = st("", &[("objectResourceVersion", Ty::Str)]);
static OBJECT_SYNC: Struct = st(
    "",
    &[("metadata", Ty::Obj(&CRD_META)), ("spec", Ty::Obj(&OBJECT_SYNC_SPEC)), ("status", Ty::Obj(&OBJECT_SYNC_STATUS))],
);

/// The schema of a kind's objects; `None` for a kind not described here. Besides the stored kinds, the
/// request kinds that are sent but never stored (reviews, token requests, evictions, scales) have tables.
pub(crate) fn root(group: &str, kind: &str) -> Option<&'static Struct> {
    use builtin as b;
    Some(match (group, kind) {
        ("apps", "Deployment") => &b::DEPLOYMENT,
        ("apps", "ReplicaSet") => &b::REPLICA_SET,
        ("apps", "DaemonSet") => &b::DAEMON_SET,
        ("apps", "StatefulSet") => &b::STATEFUL_SET,
        ("apps", "ControllerRevision") => &b::CONTROLLER_REVISION,
        ("batch", "Job") => &b::JOB,
        ("batch", "CronJob") => &b::CRON_JOB,
        ("policy", "PodDisruptionBudget") => &b::POD_DISRUPTION_BUDGET,
        ("policy", "Eviction") => &b::EVICTION,
        ("autoscaling", "Scale") => &b::SCALE,
        ("", "Pod") => &b::POD,
        ("", "ConfigMap") => &b::CONFIG_MAP,
        ("", "Secret") => &b::SECRET,
        ("", "Service") => &b::SERVICE,
        ("", "ServiceAccount") => &b::SERVICE_ACCOUNT,
        ("", "Endpoints") => &b::ENDPOINTS,
        ("", "Namespace") => &b::NAMESPACE,
        ("", "Node") => &b::NODE,
        ("", "Event") => &b::EVENT,
        ("events.k8s.io", "Event") => &b::EVENTS_EVENT,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => &b::CUSTOM_RESOURCE_DEFINITION,
        ("coordination.k8s.io", "Lease") => &b::LEASE,
        ("discovery.k8s.io", "EndpointSlice") => &b::ENDPOINT_SLICE,
        ("rbac.authorization.k8s.io", "Role") => &b::ROLE,
        ("rbac.authorization.k8s.io", "ClusterRole") => &b::CLUSTER_ROLE,
        ("rbac.authorization.k8s.io", "RoleBinding") => &b::ROLE_BINDING,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => &b::CLUSTER_ROLE_BINDING,
        ("authorization.k8s.io", "SelfSubjectAccessReview") => &b::SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io", "SubjectAccessReview") => &b::SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io", "LocalSubjectAccessReview") => &b::LOCAL_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io", "SelfSubjectRulesReview") => &b::SELF_SUBJECT_RULES_REVIEW,
        ("authentication.k8s.io", "TokenRequest") => &b::TOKEN_REQUEST,
        ("authentication.k8s.io", "SelfSubjectReview") => &b::SELF_SUBJECT_REVIEW,
        ("authentication.k8s.io", "TokenReview") => &b::TOKEN_REVIEW,
        ("meta.k8s.io", "DeleteOptions") => &b::DELETE_OPTIONS,
        ("devices.kubeedge.io", "Device") => &DEVICE,
        ("devices.kubeedge.io", "DeviceModel") => &DEVICE_MODEL,
        ("reliablesyncs.kubeedge.io", "ObjectSync" | "ClusterObjectSync") => &OBJECT_SYNC,
        _ => return None,
    })
}

/// Checks the JSON types of `obj`: Go decoder errors for built-in kinds (in document order, the first is
/// what Kubernetes reports), CRD schema errors (`TypeInvalid`, `NotSupported`, `Required`) for custom kinds.
pub(crate) fn check(group: &str, kind: &str, obj: &Value) -> Vec<FieldError> {
    let Some(def) = root(group, kind) else { return Vec::new() };
    let custom = def.go.is_empty();
    let mut out = Vec::new();
    if !obj.is_object() {
        if custom {
            out.push(FieldError::type_invalid(
                "",
                json_kind_crd(obj),
                format!("in body must be of type object: {}", super::go_quote(json_kind_crd(obj))),
            ));
        } else {
            out.push(FieldError::decode(
                "",
                format!("json: cannot unmarshal {} into Go value of type v1.{kind}", json_kind_go(obj)),
            ));
        }
        return out;
    }
    let mut walker = Walker { custom, out: &mut out };
    walker.object(obj, def, def.go, "", "");
    out
}

/// Go's name for a JSON value's kind in decoder errors.
fn json_kind_go(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) => {
            if n.is_i64() || n.is_u64() {
                "number".into()
            } else {
                format!("number {n}")
            }
        }
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

/// The openAPI name for a JSON value's type, as CRD validation prints it.
fn json_kind_crd(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// Go's spelling of a field type in decoder errors.
fn go_type(t: &Ty) -> String {
    match t {
        Ty::Str | Ty::Enum(_) => "string".into(),
        Ty::Bool => "bool".into(),
        Ty::I32 => "int32".into(),
        Ty::I64 => "int64".into(),
        Ty::F64 => "float64".into(),
        Ty::IntOrStr => "intstr.IntOrString".into(),
        Ty::Quantity => "resource.Quantity".into(),
        Ty::Bytes => "[]uint8".into(),
        Ty::Time => "v1.Time".into(),
        Ty::Raw => "runtime.RawExtension".into(),
        Ty::Any => "interface {}".into(),
        Ty::Obj(s) => format!("v1.{}", s.go),
        Ty::List(inner) => format!("[]{}", go_type(inner)),
        Ty::Map(inner) => format!("map[string]{}", go_type(inner)),
    }
}

fn crd_type(t: &Ty) -> &'static str {
    match t {
        Ty::Str | Ty::Enum(_) | Ty::Bytes | Ty::Quantity | Ty::IntOrStr | Ty::Any | Ty::Time => "string",
        Ty::Raw => "object",
        Ty::Bool => "boolean",
        Ty::I32 | Ty::I64 => "integer",
        Ty::F64 => "number",
        Ty::Obj(_) | Ty::Map(_) => "object",
        Ty::List(_) => "array",
    }
}

struct Walker<'o> {
    custom: bool,
    out: &'o mut Vec<FieldError>,
}

impl Walker<'_> {
    /// `go_struct`/`go_path` name the innermost Go struct and the dotted JSON path for decoder messages;
    /// `path` is the Kubernetes field path with indices.
    fn object(&mut self, v: &Value, def: &Struct, go_struct: &str, go_path: &str, path: &str) {
        let Some(map) = v.as_object() else { return };
        for (name, value) in map {
            let Some((_, ty)) = def.fields.iter().find(|(f, _)| f == name) else { continue };
            let inner_struct = if def.go.is_empty() { go_struct } else { def.go };
            self.value(value, ty, inner_struct, &json::child(go_path, name), &json::child(path, name));
        }
        if self.custom {
            for req in def.required {
                if !map.contains_key(*req) {
                    self.out.push(FieldError::required(&json::child(path, req), ""));
                }
            }
        }
    }

    fn mismatch(&mut self, v: &Value, ty: &Ty, go_struct: &str, go_path: &str, path: &str) {
        if self.custom {
            let actual = json_kind_crd(v);
            self.out.push(FieldError::type_invalid(
                path,
                actual,
                format!("{path} in body must be of type {}: {}", crd_type(ty), super::go_quote(actual)),
            ));
        } else {
            self.out.push(FieldError::decode(
                path,
                format!(
                    "json: cannot unmarshal {} into Go struct field {go_struct}.{go_path} of type {}",
                    json_kind_go(v),
                    go_type(ty)
                ),
            ));
        }
    }

    fn value(&mut self, v: &Value, ty: &Ty, go_struct: &str, go_path: &str, path: &str) {
        if v.is_null() {
            return;
        }
        match ty {
            Ty::Any | Ty::Raw => {}
            Ty::Time => {
                // metav1.Time decodes a JSON string (its own unmarshaller, so no struct field is named).
                if !v.is_string() {
                    if self.custom {
                        self.mismatch(v, ty, go_struct, go_path, path);
                    } else {
                        self.out.push(FieldError::decode(
                            path,
                            format!("json: cannot unmarshal {} into Go value of type string", json_kind_go(v)),
                        ));
                    }
                }
            }
            Ty::Str => {
                if !v.is_string() {
                    self.mismatch(v, ty, go_struct, go_path, path);
                }
            }
            Ty::Enum(allowed) => match v.as_str() {
                None => self.mismatch(v, ty, go_struct, go_path, path),
                Some(s) if !allowed.contains(&s) => self.out.push(FieldError::not_supported(path, s, allowed)),
                Some(_) => {}
            },
            Ty::Bool => {
                if !v.is_boolean() {
                    self.mismatch(v, ty, go_struct, go_path, path);
                }
            }
            Ty::F64 => {
                if !v.is_number() {
                    self.mismatch(v, ty, go_struct, go_path, path);
                }
            }
            Ty::I32 | Ty::I64 => {
                let fits = match v.as_i64() {
                    Some(n) => matches!(ty, Ty::I64) || i32::try_from(n).is_ok(),
                    // CRD integers accept a float with no fraction (e.g. 3.0).
                    None => self.custom && v.as_f64().is_some_and(|f| f.fract() == 0.0),
                };
                if !fits {
                    if !self.custom && v.is_number() {
                        self.out.push(FieldError::decode(
                            path,
                            format!(
                                "json: cannot unmarshal number {v} into Go struct field {go_struct}.{go_path} of type {}",
                                go_type(ty)
                            ),
                        ));
                    } else {
                        self.mismatch(v, ty, go_struct, go_path, path);
                    }
                }
            }
            Ty::IntOrStr => {
                if v.is_string() {
                    return;
                }
                if v.as_i64().is_none_or(|n| i32::try_from(n).is_err()) {
                    let what = if v.is_number() { format!("number {v}") } else { json_kind_go(v) };
                    self.out.push(FieldError::decode(
                        path,
                        format!("json: cannot unmarshal {what} into Go value of type int32"),
                    ));
                }
            }
            Ty::Quantity => {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if let Err(msg) = crate::quantity::parse_quantity(&text) {
                    self.out.push(FieldError::decode(path, msg));
                }
            }
            Ty::Bytes => match v.as_str() {
                None => self.mismatch(v, ty, go_struct, go_path, path),
                Some(s) => {
                    if let Err(e) = GO_STD_BASE64.decode(strip_newlines(s)) {
                        self.out.push(FieldError::decode(path, base64_error(&e)));
                    }
                }
            },
            Ty::Obj(def) => {
                if v.is_object() {
                    self.object(v, def, go_struct, go_path, path);
                } else {
                    self.mismatch(v, ty, go_struct, go_path, path);
                }
            }
            Ty::List(inner) => match v.as_array() {
                None => self.mismatch(v, ty, go_struct, go_path, path),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        self.value(item, inner, go_struct, go_path, &json::index(path, i));
                    }
                }
            },
            Ty::Map(inner) => match v.as_object() {
                None => self.mismatch(v, ty, go_struct, go_path, path),
                Some(map) => {
                    for (k, item) in map {
                        self.value(item, inner, go_struct, go_path, &json::key(path, k));
                    }
                }
            },
        }
    }
}

/// Go's `base64.CorruptInputError` text.
fn base64_error(e: &base64::DecodeError) -> String {
    let offset = match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol { offset: at, .. } => *at,
        base64::DecodeError::InvalidLength(len) => *len,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {offset}")
}

/// Decodes a Secret data value as Kubernetes does (standard alphabet, padded); `None` if it is not base64.
pub(crate) fn decode_base64(s: &str) -> Option<Vec<u8>> {
    GO_STD_BASE64.decode(strip_newlines(s)).ok()
}

/// Go's `base64.StdEncoding`: padded, and lenient about the unused bits of the last symbol.
const GO_STD_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// Go's decoder skips line breaks anywhere in the input.
fn strip_newlines(s: &str) -> String {
    s.chars().filter(|c| *c != '\r' && *c != '\n').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every struct reachable from `def`, by address.
    fn reachable(def: &'static Struct, seen: &mut Vec<&'static Struct>) {
        if seen.iter().any(|s| std::ptr::eq(*s, def)) {
            return;
        }
        seen.push(def);
        for (_, ty) in def.fields {
            let mut ty = ty;
            while let Ty::List(inner) | Ty::Map(inner) = ty {
                ty = inner;
            }
            if let Ty::Obj(s) = ty {
                reachable(s, seen);
            }
        }
    }

    #[test]
    fn every_built_in_kind_is_typed_to_any_depth() {
        let mut seen = Vec::new();
        for r in edgehive_store::resources::ALL.iter() {
            let def = root(r.group, r.kind).unwrap_or_else(|| panic!("{} has no table", r.kind));
            if r.group.ends_with("kubeedge.io") {
                assert_eq!(def.pkg, Pkg::Crd);
                continue;
            }
            assert_eq!(def.go, r.kind);
            for f in ["apiVersion", "kind", "metadata"] {
                assert!(def.fields.iter().any(|(n, _)| *n == f), "{}.{f}", r.kind);
            }
            reachable(def, &mut seen);
        }
        for (g, _, k) in crate::openapi::REQUEST_KINDS {
            reachable(root(g, k).unwrap_or_else(|| panic!("{k} has no table")), &mut seen);
        }
        assert!(seen.len() > 250, "{}", seen.len());
        for s in &seen {
            assert_ne!(s.pkg, Pkg::Crd, "{}", s.go);
            assert!(!s.go.is_empty());
            // Untyped only where Kubernetes' own type is free-form (managedFields' fieldsV1, a CRD schema's
            // JSON values and its schema-or-bool and schema-or-list fields).
            for (name, ty) in s.fields {
                let free = *name == "fieldsV1" || s.pkg == Pkg::Apiextensions;
                assert!(!matches!(ty, Ty::Any) || free, "{}.{name} is untyped", s.go);
            }
            for r in s.required {
                assert!(s.fields.iter().any(|(n, _)| n == r), "{}: required {r} is not a field", s.go);
            }
            // One table per Go type: OpenAPI names them by package and Go name.
            let twins = seen.iter().filter(|o| o.go == s.go && o.pkg == s.pkg).count();
            assert_eq!(twins, 1, "{} has {twins} tables", s.go);
        }
        // The types the issue names, as Kubernetes has them.
        let pod_spec = &seen.iter().find(|s| s.go == "PodSpec").unwrap().fields;
        for (field, go) in [
            ("affinity", "Affinity"),
            ("os", "PodOS"),
            ("topologySpreadConstraints", "TopologySpreadConstraint"),
            ("schedulingGates", "PodSchedulingGate"),
            ("ephemeralContainers", "EphemeralContainer"),
            ("readinessGates", "PodReadinessGate"),
        ] {
            let (_, ty) = pod_spec.iter().find(|(n, _)| *n == field).unwrap();
            let inner = match ty {
                Ty::List(inner) => inner,
                other => other,
            };
            assert!(matches!(inner, Ty::Obj(s) if s.go == go), "PodSpec.{field}");
        }
    }
}
