//! Kubernetes-compatible validation of API objects held as JSON, with Kubernetes' field paths and messages.
//!
//! [`validate_create`] and [`validate_update`] check the object they are given. Kubernetes validates the
//! *defaulted* object (so a container port without a protocol is not "Required"): writers default first, as
//! [`crate::admit`] does. They work in two steps, in the order Kubernetes does:
//!
//! 1. **Decode check** ([`schema`]): built-in kinds are checked against their Go types. A wrong JSON type
//!    (`"containers": "x"`) is what makes Kubernetes fail decoding with 400 BadRequest, so such errors come
//!    back alone and flagged ([`FieldError::is_decode_error`]). KubeEdge kinds are custom resources, whose
//!    type errors are ordinary 422 causes (`FieldValueTypeInvalid`), as the CRD schema gives them.
//! 2. **Validation** ([`meta`], [`pod`], [`core`], [`apps`], [`batch`], [`kubeedge`]): every rule, all errors
//!    collected.
//!
//! Whether a kind is namespaced comes from the store's table ([`edgehive_store::resources`]); this module
//! adds each kind's naming rule.
//!
//! **Architecture Invariant:** nothing here panics on any JSON input; every accessor tolerates every shape.
//! Objects are never changed, and nothing here defaults them. `apiVersion`/`kind` agreement is the server's
//! job.

use names::NameRule;
use serde_json::Value;

pub(crate) mod apps;
pub(crate) mod batch;
pub(crate) mod container;
pub(crate) mod core;
pub(crate) mod crd;
pub(crate) mod discovery;
pub(crate) mod json;
pub(crate) mod kubeedge;
pub(crate) mod meta;
pub(crate) mod names;
pub(crate) mod pod;
pub(crate) mod policy;
pub(crate) mod rbac;
pub mod schema;
pub(crate) mod tz_names;
pub(crate) mod workloads;

#[cfg(test)]
mod tests;

/// The kind of a field error; [`ErrorType::reason`] is the `reason` of a cause in a Kubernetes `Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// A required value is missing (`FieldValueRequired`).
    Required,
    /// A value is malformed (`FieldValueInvalid`).
    Invalid,
    /// A value that must be unique is repeated (`FieldValueDuplicate`).
    Duplicate,
    /// A value is not one of an enumeration (`FieldValueNotSupported`).
    NotSupported,
    /// A value is too long (`FieldValueTooLong`).
    TooLong,
    /// A list has too many items (`FieldValueTooMany`).
    TooMany,
    /// A value is not allowed here (`FieldValueForbidden`).
    Forbidden,
    /// A reference points at nothing, e.g. a volume mount naming no volume (`FieldValueNotFound`).
    NotFound,
    /// A custom resource field has the wrong JSON type (`FieldValueTypeInvalid`).
    TypeInvalid,
}

impl ErrorType {
    /// Kubernetes' cause reason, e.g. "FieldValueRequired", "FieldValueInvalid", "FieldValueDuplicate",
    /// "FieldValueNotSupported", "FieldValueTooLong", "FieldValueTooMany", "FieldValueForbidden".
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The words Kubernetes puts before the value, e.g. "Required value", "Unsupported value".
    pub fn text(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::NotFound => "Not found",
        }
    }
}

/// Which part of Kubernetes would have raised an error, which decides the HTTP answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Field validation: 422 Unprocessable Entity, `reason: Invalid`, one cause per error.
    Validation,
    /// Decoding the body into the Go type failed: 400 BadRequest, message only ([`FieldError::detail`]).
    Decode,
    /// A KubeEdge admission webhook (named here) denied the request: 400 BadRequest, message only.
    Webhook(&'static str),
}

/// One field-level error, as Kubernetes' `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: ErrorType,
    /// The field's path, e.g. "spec.containers[0].image", "metadata.name", "data[key]".
    pub field: String,
    /// The offending value, when Kubernetes prints one.
    pub value: Option<Value>,
    /// Kubernetes' explanation after the value (may be empty).
    pub detail: String,
    /// Kubernetes' exact rendering of `value` when it prints a Go struct or slice (e.g. a duplicate
    /// `core.ServicePort{...}`) that JSON cannot show the same way; `None` for plain values.
    pub value_text: Option<String>,
    /// Where Kubernetes raises this error; see [`FieldError::status_code`].
    pub origin: Origin,
}

impl FieldError {
    fn new(kind: ErrorType, field: &str, value: Option<Value>, detail: impl Into<String>) -> FieldError {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.into(),
            value_text: None,
            origin: Origin::Validation,
        }
    }

    /// `field.Required`.
    pub fn required(field: &str, detail: impl Into<String>) -> FieldError {
        FieldError::new(ErrorType::Required, field, None, detail)
    }

    /// `field.Invalid`.
    pub fn invalid(field: &str, value: impl Into<Value>, detail: impl Into<String>) -> FieldError {
        FieldError::new(ErrorType::Invalid, field, Some(value.into()), detail)
    }

    /// `field.Duplicate`.
    pub fn duplicate(field: &str, value: impl Into<Value>) -> FieldError {
        FieldError::new(ErrorType::Duplicate, field, Some(value.into()), "")
    }

    /// `field.NotSupported`: the detail lists the supported values, quoted.
    pub fn not_supported(field: &str, value: impl Into<Value>, supported: &[&str]) -> FieldError {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        FieldError::new(ErrorType::NotSupported, field, Some(value.into()), detail)
    }

    /// `field.TooLong` (the value is never printed).
    pub fn too_long(field: &str, max_bytes: usize) -> FieldError {
        FieldError::new(ErrorType::TooLong, field, None, format!("must have at most {max_bytes} bytes"))
    }

    /// `field.TooMany`.
    pub fn too_many(field: &str, actual: usize, max: usize) -> FieldError {
        FieldError::new(ErrorType::TooMany, field, Some(Value::from(actual)), format!("must have at most {max} items"))
    }

    /// `field.Invalid` with the value omitted (Go's `field.OmitValueType{}`): `Invalid value: <detail>`.
    pub fn invalid_omit(field: &str, detail: impl Into<String>) -> FieldError {
        FieldError::new(ErrorType::Invalid, field, None, detail).with_value_text("")
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: &str, detail: impl Into<String>) -> FieldError {
        FieldError::new(ErrorType::Forbidden, field, None, detail)
    }

    /// `field.NotFound`.
    pub fn not_found(field: &str, value: impl Into<Value>) -> FieldError {
        FieldError::new(ErrorType::NotFound, field, Some(value.into()), "")
    }

    /// `field.TypeInvalid`, as the custom-resource schema check raises it.
    pub fn type_invalid(field: &str, value: impl Into<Value>, detail: impl Into<String>) -> FieldError {
        FieldError::new(ErrorType::TypeInvalid, field, Some(value.into()), detail)
    }

    /// A body that does not decode; `detail` is Kubernetes' decoder message.
    pub fn decode(field: &str, detail: impl Into<String>) -> FieldError {
        FieldError { origin: Origin::Decode, ..FieldError::new(ErrorType::Invalid, field, None, detail) }
    }

    /// A denial by a KubeEdge admission webhook.
    pub fn webhook(webhook: &'static str, field: &str, detail: impl Into<String>) -> FieldError {
        FieldError { origin: Origin::Webhook(webhook), ..FieldError::new(ErrorType::Invalid, field, None, detail) }
    }

    /// Replaces how the value is printed (Go struct or slice syntax); an empty text omits the value.
    pub fn with_value_text(mut self, text: impl Into<String>) -> FieldError {
        self.value_text = Some(text.into());
        self
    }

    /// True when Kubernetes would have failed decoding the body (400 BadRequest with [`FieldError::detail`]
    /// as the message, after the server's "<Kind> in version \"v1\" cannot be handled as a <Kind>: " prefix).
    pub fn is_decode_error(&self) -> bool {
        self.origin == Origin::Decode
    }

    /// The HTTP status Kubernetes answers with for this error: 422, or 400 for decode and webhook errors.
    pub fn status_code(&self) -> u16 {
        match self.origin {
            Origin::Validation => 422,
            Origin::Decode | Origin::Webhook(_) => 400,
        }
    }

    /// Kubernetes' text, e.g. `spec.containers[0].image: Required value`,
    /// `metadata.name: Invalid value: "Foo": a lowercase RFC 1123 subdomain must consist of ...`.
    /// Decode errors give the decoder's message; webhook denials give "admission webhook ... denied ...".
    pub fn message(&self) -> String {
        match self.origin {
            Origin::Decode => return self.detail.clone(),
            Origin::Webhook(name) => {
                return format!("admission webhook {} denied the request: {}", go_quote(name), self.detail);
            }
            Origin::Validation => {}
        }
        format!("{}: {}", self.field, self.body())
    }

    /// The message without the field path (Kubernetes' `ErrorBody`), the `message` of a Status cause.
    pub fn body(&self) -> String {
        let mut s = match self.kind {
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong => self.kind.text().to_string(),
            _ => match (&self.value_text, &self.value) {
                (Some(text), _) if text.is_empty() => self.kind.text().to_string(),
                (Some(text), _) => format!("{}: {text}", self.kind.text()),
                (None, Some(v)) => format!("{}: {}", self.kind.text(), render_value(v)),
                (None, None) => format!("{}: null", self.kind.text()),
            },
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

/// Go's `%q` for a string: double quotes, backslash escapes for quotes, backslashes and non-printables.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// How Kubernetes prints a value after "Invalid value: ": strings quoted, numbers and booleans bare,
/// string lists as Go's `[]string{"a", "b"}`, anything else as compact JSON.
pub fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            let quoted: Vec<String> = items.iter().filter_map(Value::as_str).map(go_quote).collect();
            format!("[]string{{{}}}", quoted.join(", "))
        }
        other => other.to_string(),
    }
}

/// What validation knows about a kind.
#[derive(Debug, Clone, Copy)]
pub struct KindInfo {
    pub(crate) namespaced: bool,
    pub(crate) name_rule: NameRule,
    /// Custom resources (KubeEdge) are checked against a CRD schema, not decoded into Go types.
    pub custom: bool,
}

/// Scope and naming rules of the kinds this module validates; `None` for any other kind. The scope is
/// the store's ([`edgehive_store::resources`]).
pub fn kind_info(group: &str, kind: &str) -> Option<KindInfo> {
    let (name_rule, custom) = match (group, kind) {
        ("", "Namespace") => (NameRule::Label, false),
        ("", "Node") => (NameRule::Subdomain, false),
        ("", "Service") => (NameRule::Dns1035, false),
        ("", "Pod" | "ConfigMap" | "Secret" | "Endpoints" | "Event") => (NameRule::Subdomain, false),
        ("events.k8s.io", "Event") => (NameRule::Subdomain, false),
        ("coordination.k8s.io", "Lease") => (NameRule::Subdomain, false),
        // StatefulSet names become pod host names: a DNS label since 1.27; Jobs and CronJobs use the
        // ReplicationController rule (a subdomain).
        ("apps", "StatefulSet") => (NameRule::Label, false),
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet" | "ControllerRevision") => (NameRule::Subdomain, false),
        ("batch", "Job" | "CronJob") => (NameRule::Subdomain, false),
        ("policy", "PodDisruptionBudget") => (NameRule::Subdomain, false),
        ("discovery.k8s.io", "EndpointSlice") => (NameRule::Subdomain, false),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding") => {
            (NameRule::PathSegment, false)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (NameRule::Subdomain, false),
        ("devices.kubeedge.io", "Device" | "DeviceModel") => (NameRule::Subdomain, true),
        ("reliablesyncs.kubeedge.io", "ObjectSync" | "ClusterObjectSync") => (NameRule::Subdomain, true),
        _ => return None,
    };
    let namespaced = edgehive_store::resources::by_group_kind(group, kind)?.namespaced;
    Some(KindInfo { namespaced, name_rule, custom })
}

/// The decode check: the object with its type errors, or (built-in kinds) the first one alone.
fn decoded(group: &str, kind: &str, info: KindInfo, obj: &Value) -> Result<Vec<FieldError>, Vec<FieldError>> {
    let type_errors = schema::check(group, kind, obj);
    if !info.custom {
        if let Some(first) = type_errors.into_iter().next() {
            // Go's decoder reports the first type mismatch and nothing else is validated.
            return Err(vec![first]);
        }
        return Ok(Vec::new());
    }
    Ok(type_errors)
}

fn validate_kind(group: &str, kind: &str, info: KindInfo, obj: &Value) -> Vec<FieldError> {
    match (group, kind) {
        ("", "Pod") => pod::validate_pod(obj, info),
        ("", "Namespace" | "Node" | "ConfigMap" | "Secret" | "Service" | "Endpoints" | "Event")
        | ("coordination.k8s.io", "Lease") => core::validate(kind, obj, info),
        ("events.k8s.io", _) => core::event_v1_create(obj),
        ("apps", _) => apps::validate(kind, obj, info),
        ("batch", _) => batch::validate(kind, obj, info),
        ("policy", _) => policy::validate(kind, obj, info),
        ("discovery.k8s.io", _) => discovery::validate(obj, info, false),
        (rbac::GROUP, _) => rbac::validate(kind, obj, info),
        ("apiextensions.k8s.io", _) => crd::validate(obj, info),
        _ => kubeedge::validate(kind, obj, info),
    }
}

/// Validation of a new object of `group`/`kind`, as defaulted ([`crate::admit::create`]) (group "" for core; kinds: Namespace, Node, Pod, ConfigMap,
/// Secret, Service, Endpoints, Event; coordination.k8s.io Lease; apps Deployment, ReplicaSet, DaemonSet,
/// StatefulSet, ControllerRevision; batch Job, CronJob; policy PodDisruptionBudget; devices.kubeedge.io Device, DeviceModel;
/// reliablesyncs.kubeedge.io ObjectSync, ClusterObjectSync). Whether metadata.namespace must be set follows
/// from the kind. Returns all errors found (empty = valid); an unknown kind is not checked.
///
/// A name left empty beside a `generateName` is accepted (the server generates it); only the prefix is
/// checked. A namespace on a cluster-scoped object is not an error: Kubernetes clears it.
pub fn validate_create(group: &str, kind: &str, obj: &Value) -> Vec<FieldError> {
    let Some(info) = kind_info(group, kind) else { return Vec::new() };
    match decoded(group, kind, info, obj) {
        Err(errs) => errs,
        Ok(mut errs) => {
            errs.extend(validate_kind(group, kind, info, obj));
            webhooks_last(errs)
        }
    }
}

/// Admission webhooks only see objects that passed validation: drop their denials when anything else failed.
fn webhooks_last(errs: Vec<FieldError>) -> Vec<FieldError> {
    if errs.iter().any(|e| e.origin == Origin::Validation) {
        errs.into_iter().filter(|e| e.origin == Origin::Validation).collect()
    } else {
        errs
    }
}

/// Validation of an update: everything [`validate_create`] checks plus what may not change (metadata name,
/// namespace, uid, creationTimestamp; the Pod spec outside Kubernetes' mutable fields; immutable ConfigMaps
/// and Secrets; a Secret's type; a Service's clusterIP once set; a Node's podCIDRs once set; Event fields;
/// the selector of a Deployment, ReplicaSet, DaemonSet or Job; a StatefulSet's spec outside replicas,
/// template, updateStrategy, minReadySeconds, ordinals and its PVC retention policy; a ControllerRevision's
/// data; a Job's template (but a suspended Job's scheduling directives), completions (an Indexed Job's move
/// with parallelism), completion mode, failure and success policies, per-index backoff and managedBy). A
/// CronJob's name may exceed 52 characters on update. `old` is the stored object, assumed valid and already
/// defaulted.
pub fn validate_update(group: &str, kind: &str, new: &Value, old: &Value) -> Vec<FieldError> {
    let Some(info) = kind_info(group, kind) else { return Vec::new() };
    let mut errs = match decoded(group, kind, info, new) {
        Err(errs) => return errs,
        Ok(errs) => errs,
    };
    errs.extend(meta::validate_update(json::get(new, "metadata"), json::get(old, "metadata")));
    errs.extend(match (group, kind) {
        ("", "Pod") => pod::validate_pod_update(new, old, info),
        ("apps", _) => apps::validate_update(kind, new, old, info),
        ("batch", _) => batch::validate_update(kind, new, old, info),
        ("policy", _) => policy::validate(kind, new, info),
        ("discovery.k8s.io", _) => {
            [discovery::validate(new, info, true), discovery::validate_update(new, old)].concat()
        }
        (rbac::GROUP, _) => rbac::validate_update(kind, new, old, info),
        ("events.k8s.io", _) => core::event_v1_update(new),
        ("apiextensions.k8s.io", _) => crd::validate_update(new, old, info),
        ("", _) | ("coordination.k8s.io", _) => {
            let mut e = core::validate_update(kind, new, old);
            e.extend(core::validate(kind, new, info));
            e
        }
        _ => kubeedge::validate(kind, new, info),
    });
    webhooks_last(errs)
}

/// The metadata of a custom object (a kind a CustomResourceDefinition
/// defines), as the custom-resource strategy checks it: a DNS-1123
/// subdomain name, the namespace rule of its scope, no core finalizer
/// rule; on update (`old`) what may not change. Its fields are the
/// schema's business ([`crate::structural`]).
pub fn validate_custom_meta(obj: &Value, namespaced: bool, old: Option<&Value>) -> Vec<FieldError> {
    let rules = meta::MetaRules { namespaced, name_rule: NameRule::Subdomain, kube_finalizers: false };
    let mut errs = meta::validate(json::get(obj, "metadata"), rules);
    if let Some(old) = old {
        errs.extend(meta::validate_update(json::get(obj, "metadata"), json::get(old, "metadata")));
    }
    errs
}

/// Checks a DNS-1123 subdomain (most object names); errors worded as Kubernetes words them.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    names::dns1123_subdomain(value)
}

/// Checks a DNS-1123 label (namespace names); errors worded as Kubernetes words them.
pub fn dns1123_label(value: &str) -> Vec<String> {
    names::dns1123_label(value)
}

/// True when a create request carries a `metadata.resourceVersion` Kubernetes' storage refuses: a non-zero
/// unsigned integer. Kubernetes answers that with 500 "resourceVersion should not be set on objects to be
/// created"; other strings (e.g. "-1") are silently ignored.
pub fn resource_version_set_on_create(obj: &Value) -> bool {
    let rv = json::str_at(json::get(obj, "metadata"), "resourceVersion");
    rv.parse::<u64>().is_ok_and(|v| v != 0)
}
