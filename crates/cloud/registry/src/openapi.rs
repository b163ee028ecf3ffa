//! OpenAPI v3 component schemas of a group-version, made from the Go-type tables of the decode check
//! ([`crate::validation`]'s schema) the way Kubernetes publishes them at `/openapi/v3/apis/<group>/<version>`,
//! so that `kubectl explain` can walk them (`kubectl explain deployment.spec.strategy.rollingUpdate`).
//!
//! The shape follows Kubernetes: one schema per Go struct, named after its package
//! (`io.k8s.api.apps.v1.Deployment`, `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`,
//! `io.k8s.api.core.v1.PodSpec`); a struct field refers to its type as
//! `{"allOf": [{"$ref": "#/components/schemas/..."}], "default": {}}`; `int32`/`int64` integers carry their
//! `format`; maps are objects with `additionalProperties`; `IntOrString`, `Quantity`, `Time` and
//! `RawExtension` are schemas of their own, as Kubernetes has them (`IntOrString` is also marked
//! `x-kubernetes-int-or-string`). Each kind's schema lists `apiVersion`, `kind` and its
//! `x-kubernetes-group-version-kind`. A KubeEdge kind (a custom resource) is one inline schema named as
//! Kubernetes names CRD schemas (`io.kubeedge.devices.v1beta1.Device`).
//!
//! Fields the tables leave untyped (`Any`) are published as `x-kubernetes-preserve-unknown-fields`.
//! Descriptions are short and our own: the kinds, and the fields of the workload specs users ask
//! `kubectl explain` about.

pub mod v2;

use serde_json::{Map, Value, json};

use crate::validation::schema::{Pkg, Struct, Ty, root};

const REF_PREFIX: &str = "#/components/schemas/";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";

/// The component schemas of `group`/`version` (group "" for core): every served kind of the
/// group-version that has a schema table, and every type they use.
pub fn component_schemas(group: &str, version: &str) -> Map<String, Value> {
    let mut out = Map::new();
    for r in edgehive_store::resources::ALL.iter().filter(|r| r.group == group && r.version == version) {
        add_kind(r.group, r.version, r.kind, &mut out);
    }
    out
}

/// Kinds that are sent to the server but never stored (reviews, token requests, evictions, scales):
/// `(group, version, kind)`. Their schemas are in the OpenAPI v2 document, where kubectl's client-side
/// validation looks a kind up.
pub const REQUEST_KINDS: &[(&str, &str, &str)] = &[
    ("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "v1", "SubjectAccessReview"),
    ("authorization.k8s.io", "v1", "LocalSubjectAccessReview"),
    ("authorization.k8s.io", "v1", "SelfSubjectRulesReview"),
    ("authentication.k8s.io", "v1", "TokenRequest"),
    ("authentication.k8s.io", "v1", "SelfSubjectReview"),
    ("authentication.k8s.io", "v1", "TokenReview"),
    ("policy", "v1", "Eviction"),
    ("autoscaling", "v1", "Scale"),
];

/// Adds the schema of one kind (and of the types it uses) to `out`.
pub(crate) fn add_kind(group: &str, version: &str, kind: &str, out: &mut Map<String, Value>) {
    let Some(def) = root(group, kind) else { return };
    let name = if def.pkg == Pkg::Crd {
        let reversed: Vec<&str> = group.split('.').rev().collect();
        format!("{}.{version}.{kind}", reversed.join("."))
    } else {
        struct_name(def)
    };
    let mut schema = if def.pkg == Pkg::Crd {
        inline_object(def, kind)
    } else {
        add_struct(def, out);
        out.remove(&name).unwrap_or_else(|| json!({}))
    };
    if let Some(m) = schema.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(props) = props.as_object_mut() {
            props.insert("apiVersion".into(), json!({"type": "string", "description": API_VERSION_DOC}));
            props.insert("kind".into(), json!({"type": "string", "description": KIND_DOC}));
        }
        m.insert("x-kubernetes-group-version-kind".into(), json!([{"group": group, "kind": kind, "version": version}]));
        if let Some(doc) = type_doc(kind) {
            m.insert("description".into(), json!(doc));
        }
    }
    out.insert(name, schema);
}

/// The component name of a kind's schema (`io.k8s.api.apps.v1.Deployment`), `None` for a kind without a
/// schema table.
pub fn schema_name(group: &str, kind: &str) -> Option<String> {
    let def = root(group, kind)?;
    if def.pkg == Pkg::Crd {
        let res = edgehive_store::resources::by_group_kind(group, kind)?;
        let reversed: Vec<&str> = group.split('.').rev().collect();
        return Some(format!("{}.{}.{kind}", reversed.join("."), res.version));
    }
    Some(struct_name(def))
}

pub(crate) fn struct_name(def: &Struct) -> String {
    let prefix = match def.pkg {
        Pkg::Core | Pkg::Crd => "io.k8s.api.core.v1",
        Pkg::Meta => "io.k8s.apimachinery.pkg.apis.meta.v1",
        Pkg::Apps => "io.k8s.api.apps.v1",
        Pkg::Batch => "io.k8s.api.batch.v1",
        Pkg::Coordination => "io.k8s.api.coordination.v1",
        Pkg::Policy => "io.k8s.api.policy.v1",
        Pkg::Autoscaling => "io.k8s.api.autoscaling.v1",
        Pkg::Discovery => "io.k8s.api.discovery.v1",
        Pkg::Events => "io.k8s.api.events.v1",
        Pkg::Rbac => "io.k8s.api.rbac.v1",
        Pkg::Authorization => "io.k8s.api.authorization.v1",
        Pkg::Authentication => "io.k8s.api.authentication.v1",
        Pkg::Apiextensions => "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
    };
    format!("{prefix}.{}", def.go)
}

fn reference(name: &str) -> Value {
    json!({"allOf": [{"$ref": format!("{REF_PREFIX}{name}")}]})
}

/// Adds the schema of `def` and of every type it uses to `out`.
fn add_struct(def: &'static Struct, out: &mut Map<String, Value>) {
    let name = struct_name(def);
    if out.contains_key(&name) {
        return;
    }
    // Reserve the name first: types may refer to themselves.
    out.insert(name.clone(), Value::Null);
    let mut props = Map::new();
    for (field, ty) in def.fields {
        let mut schema = field_schema(ty, out);
        if let Some(m) = schema.as_object_mut() {
            if let Some(doc) = field_doc(def.go, field) {
                m.insert("description".into(), json!(doc));
            }
            if let Some(values) = field_enum(def.go, field) {
                m.insert("enum".into(), json!(values));
            }
        }
        props.insert((*field).to_string(), schema);
    }
    let mut schema = json!({"type": "object", "properties": props});
    if !def.required.is_empty() {
        schema["required"] = json!(def.required);
    }
    if let Some(doc) = type_doc(def.go) {
        schema["description"] = json!(doc);
    }
    out.insert(name, schema);
}

/// A field's schema (Go structs).
fn field_schema(ty: &'static Ty, out: &mut Map<String, Value>) -> Value {
    match ty {
        Ty::Obj(def) => {
            add_struct(def, out);
            let mut r = reference(&struct_name(def));
            r["default"] = json!({});
            r
        }
        Ty::List(inner) => json!({"type": "array", "items": item_schema(inner, out)}),
        Ty::Map(inner) => json!({"type": "object", "additionalProperties": item_schema(inner, out)}),
        Ty::IntOrStr | Ty::Quantity | Ty::Time | Ty::Raw => {
            let name = scalar_type(ty, out);
            reference(name)
        }
        other => primitive(other),
    }
}

/// The schema of a list item or map value: strings default to "", structs to {} (as Kubernetes has them).
fn item_schema(ty: &'static Ty, out: &mut Map<String, Value>) -> Value {
    let mut schema = field_schema(ty, out);
    match ty {
        Ty::Str => schema["default"] = json!(""),
        Ty::Quantity => schema["default"] = json!({}),
        _ => {}
    }
    schema
}

/// The schemas Kubernetes publishes for its special scalar types; returns the name.
fn scalar_type(ty: &Ty, out: &mut Map<String, Value>) -> &'static str {
    let (name, schema) = match ty {
        Ty::IntOrStr => (
            INT_OR_STRING,
            json!({"description": "A value that is either an int32 or a string (a number or a percentage such as \"25%\").",
                   "format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}],
                   "x-kubernetes-int-or-string": true}),
        ),
        Ty::Quantity => (
            QUANTITY,
            json!({"description": "A resource amount: a number with an optional suffix, such as \"100m\" (0.1), \"1Gi\" or \"2\".",
                   "oneOf": [{"type": "string"}, {"type": "number"}]}),
        ),
        Ty::Time => (
            TIME,
            json!({"description": "A point in time, written in RFC 3339 form (\"2024-01-02T15:04:05Z\").",
                   "type": "string", "format": "date-time"}),
        ),
        _ => (RAW_EXTENSION, json!({"description": "Any JSON object, kept as it was given.", "type": "object"})),
    };
    out.entry(name.to_string()).or_insert(schema);
    name
}

fn primitive(ty: &Ty) -> Value {
    match ty {
        Ty::Str => json!({"type": "string"}),
        Ty::Enum(values) => json!({"type": "string", "enum": values}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::I32 => json!({"type": "integer", "format": "int32"}),
        Ty::I64 => json!({"type": "integer", "format": "int64"}),
        Ty::F64 => json!({"type": "number", "format": "double"}),
        Ty::Bytes => json!({"type": "string", "format": "byte"}),
        Ty::IntOrStr => json!({"x-kubernetes-int-or-string": true}),
        Ty::Quantity => {
            json!({"x-kubernetes-int-or-string": true, "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$"})
        }
        Ty::Time => json!({"type": "string", "format": "date-time"}),
        Ty::Raw => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
        Ty::Any | Ty::Obj(_) | Ty::List(_) | Ty::Map(_) => json!({"x-kubernetes-preserve-unknown-fields": true}),
    }
}

/// A CRD's schema, inline as a CRD's openAPIV3Schema is.
fn inline_object(def: &Struct, kind: &str) -> Value {
    let mut props = Map::new();
    for (field, ty) in def.fields {
        let schema = if *field == "metadata" { json!({"type": "object"}) } else { inline(ty) };
        props.insert((*field).to_string(), schema);
    }
    let mut schema = json!({"type": "object", "properties": props});
    if !def.required.is_empty() {
        schema["required"] = json!(def.required);
    }
    if let Some(doc) = type_doc(kind) {
        schema["description"] = json!(doc);
    }
    schema
}

fn inline(ty: &Ty) -> Value {
    match ty {
        Ty::Obj(def) => inline_object(def, ""),
        Ty::List(inner) => json!({"type": "array", "items": inline(inner)}),
        Ty::Map(inner) => json!({"type": "object", "additionalProperties": inline(inner)}),
        other => primitive(other),
    }
}

const API_VERSION_DOC: &str = "The versioned schema of this object (group/version), such as apps/v1. A server \
refuses objects of versions it does not serve.";
const KIND_DOC: &str = "The kind of object this is (such as Deployment), in CamelCase. It cannot be updated.";

/// Descriptions of types (kinds and a few shared types).
fn type_doc(go: &str) -> Option<&'static str> {
    Some(match go {
        "Deployment" => {
            "A Deployment keeps a number of identical pods running from one pod template and rolls out changes to \
             that template gradually, through ReplicaSets it manages."
        }
        "ReplicaSet" => "A ReplicaSet keeps a given number of pods that match its selector running.",
        "DaemonSet" => "A DaemonSet runs one copy of a pod on each node (or each node its template selects).",
        "StatefulSet" => {
            "A StatefulSet runs pods with stable, ordered identities (name-0, name-1, ...), created, updated and \
             removed in order."
        }
        "ControllerRevision" => {
            "A ControllerRevision is an immutable snapshot of a controller's state (a DaemonSet's or StatefulSet's \
             template), kept so that the controller can roll back to it."
        }
        "Job" => "A Job runs pods until a given number of them have completed successfully.",
        "CronJob" => "A CronJob creates Jobs on a repeating schedule, written in cron format.",
        "PodDisruptionBudget" => {
            "A PodDisruptionBudget bounds how many pods of a set voluntary disruptions (evictions, node drains) may \
             take down at once."
        }
        "Pod" => "A Pod is a group of containers that run together on one node.",
        "ConfigMap" => "A ConfigMap holds configuration data as key-value pairs for pods to consume.",
        "Secret" => "A Secret holds a small amount of sensitive data, such as a password, a token or a key.",
        "Service" => "A Service gives a set of pods, chosen by a label selector, one stable address and port.",
        "Endpoints" => "Endpoints list the addresses and ports that implement a Service.",
        "Namespace" => "A Namespace is a scope for the names of the objects created in it.",
        "Node" => "A Node is a machine (here also an edge node) that runs pods.",
        "Event" => "An Event reports something that happened to an object.",
        "Lease" => "A Lease is a short-lived claim, held by one holder, on a named resource.",
        "Device" => "A Device is an edge device attached to a node, described by a DeviceModel.",
        "DeviceModel" => "A DeviceModel describes the properties a kind of edge device has.",
        "ObjectSync" | "ClusterObjectSync" => {
            "An ObjectSync records the version of an object an edge node has last acknowledged."
        }
        "ObjectMeta" => "Metadata every persisted object has: its name, namespace, labels, annotations and so on.",
        "LabelSelector" => {
            "A label query over a set of objects. matchLabels and matchExpressions are ANDed; an empty selector \
             matches every object, a missing one matches none."
        }
        "PodTemplateSpec" => "The pods a controller creates: their metadata and their spec.",
        "DeploymentSpec" => "The desired state of a Deployment.",
        "DeploymentStrategy" => "How a Deployment replaces its pods when its template changes.",
        "RollingUpdateDeployment" => "The pace of a rolling update of a Deployment.",
        "DaemonSetSpec" => "The desired state of a DaemonSet.",
        "StatefulSetSpec" => "The desired state of a StatefulSet.",
        "JobSpec" => "The desired behaviour of a Job.",
        "JobTemplateSpec" => "The Jobs a CronJob creates: their metadata and their spec.",
        "CronJobSpec" => "The schedule of a CronJob and the Jobs it creates.",
        _ => return None,
    })
}

/// Descriptions of fields, keyed by the Go struct and the JSON field name.
fn field_doc(go: &str, field: &str) -> Option<&'static str> {
    Some(match (go, field) {
        ("PodTemplateSpec" | "JobTemplateSpec", "metadata") => {
            "Metadata given to every object made from this template (its labels are what selectors match)."
        }
        ("PodTemplateSpec", "spec") => "The spec of the pods made from this template.",
        ("JobTemplateSpec", "spec") => "The spec of the Jobs made from this template.",
        (kind, "metadata") if is_kind(kind) => {
            "The object's metadata: name, namespace, labels, annotations, owner references."
        }
        (kind, "spec") if is_kind(kind) => "The desired state of the object.",
        (kind, "status") if is_kind(kind) => "The observed state of the object, written by the system.",

        ("DeploymentSpec", "replicas") => "How many pods to run. Defaults to 1.",
        ("DeploymentSpec", "selector") => {
            "Selects the pods this Deployment manages. Required, must match the template's labels, and cannot be \
             changed once set in apps/v1."
        }
        ("DeploymentSpec", "template") => "The pods to create. Its restartPolicy must be Always (the default).",
        ("DeploymentSpec", "strategy") => "How existing pods are replaced by new ones when the template changes.",
        ("DeploymentSpec", "minReadySeconds") => {
            "How long a new pod must be ready, without any container crashing, before it counts as available. \
             Defaults to 0."
        }
        ("DeploymentSpec", "revisionHistoryLimit") => {
            "How many old ReplicaSets to keep so that a rollout can be undone. Defaults to 10."
        }
        ("DeploymentSpec", "paused") => "While true, changes to the template start no rollout.",
        ("DeploymentSpec", "progressDeadlineSeconds") => {
            "How long a rollout may go without progress before the Deployment reports it as failed \
             (ProgressDeadlineExceeded). Must be greater than minReadySeconds. Defaults to 600."
        }
        ("DeploymentStrategy", "type") => {
            "The kind of replacement: \"Recreate\" removes all old pods before creating new ones; \
             \"RollingUpdate\" (the default) replaces them gradually."
        }
        ("DeploymentStrategy", "rollingUpdate") => {
            "The pace of a rolling update. Only allowed when type is RollingUpdate."
        }
        ("RollingUpdateDeployment", "maxUnavailable") => {
            "How many pods (a number, or a percentage of the desired count, rounded down) may be unavailable \
             during the update. Cannot be 0 when maxSurge is 0. Defaults to 25%."
        }
        ("RollingUpdateDeployment", "maxSurge") => {
            "How many pods (a number, or a percentage of the desired count, rounded up) may be created above the \
             desired count during the update. Cannot be 0 when maxUnavailable is 0. Defaults to 25%."
        }

        ("DaemonSetSpec", "selector") => {
            "Selects the pods this DaemonSet manages. Must match the template's labels and cannot be changed."
        }
        ("DaemonSetSpec", "template") => {
            "The pod to run on each eligible node. Its restartPolicy must be Always (the default)."
        }
        ("DaemonSetSpec", "updateStrategy") => {
            "How pods are replaced when the template changes: RollingUpdate (the default) or OnDelete."
        }
        ("DaemonSetSpec", "minReadySeconds") => {
            "How long a new pod must be ready before it counts as available. Defaults to 0."
        }
        ("DaemonSetSpec", "revisionHistoryLimit") => {
            "How many old revisions to keep so that an update can be undone. Defaults to 10."
        }

        ("JobSpec", "parallelism") => "The most pods the Job runs at the same time. Defaults to 1; 0 pauses the Job.",
        ("JobSpec", "completions") => {
            "How many pods must succeed for the Job to be complete. Unset means any single success completes it."
        }
        ("JobSpec", "activeDeadlineSeconds") => {
            "How long, from its start, the Job may be active before its pods are stopped and it fails."
        }
        ("JobSpec", "podFailurePolicy") => {
            "Rules that decide, from a failed pod's exit codes or conditions, whether the failure is ignored, \
             counted, or fails the Job (or one index)."
        }
        ("JobSpec", "successPolicy") => {
            "When an Indexed Job may be declared successful before all its indexes succeed."
        }
        ("JobSpec", "backoffLimit") => "How many retries before the Job is marked failed. Defaults to 6.",
        ("JobSpec", "backoffLimitPerIndex") => {
            "For an Indexed Job: how many retries each index gets before that index is marked failed."
        }
        ("JobSpec", "maxFailedIndexes") => {
            "For an Indexed Job with backoffLimitPerIndex: how many indexes may fail before the whole Job fails."
        }
        ("JobSpec", "selector") => {
            "Selects the Job's pods. Normally generated by the system from the Job's uid; set it yourself only \
             together with manualSelector."
        }
        ("JobSpec", "manualSelector") => {
            "When true, the selector and the template labels are yours to choose; when false or unset the system \
             generates a selector unique to this Job and adds its labels to the template."
        }
        ("JobSpec", "template") => "The pods the Job runs. Their restartPolicy must be Never or OnFailure.",
        ("JobSpec", "ttlSecondsAfterFinished") => {
            "If set, how long after it finishes (Complete or Failed) the Job may be deleted automatically."
        }
        ("JobSpec", "completionMode") => {
            "NonIndexed (the default): the Job is complete after `completions` successes. Indexed: each pod gets \
             an index from 0 to completions-1 and each index must succeed once."
        }
        ("JobSpec", "suspend") => {
            "While true, the Job creates no pods and its running pods are stopped. Defaults to false."
        }
        ("JobSpec", "podReplacementPolicy") => {
            "When a replacement pod is created: TerminatingOrFailed (as soon as the old one is terminating) or \
             Failed (only once it has fully failed). Defaults to Failed with a podFailurePolicy, else \
             TerminatingOrFailed."
        }
        ("JobSpec", "managedBy") => {
            "The controller that manages this Job, as a domain-prefixed path. Unset means the built-in Job \
             controller. Cannot be changed."
        }

        ("CronJobSpec", "schedule") => {
            "When to create Jobs, in cron format: five fields (minute hour day-of-month month day-of-week) or a \
             macro such as @hourly or @daily."
        }
        ("CronJobSpec", "timeZone") => {
            "The IANA time zone the schedule is read in (such as Europe/Berlin). Unset means the controller's."
        }
        ("CronJobSpec", "startingDeadlineSeconds") => {
            "How late, in seconds, a missed run may still start; later runs are skipped and counted as missed."
        }
        ("CronJobSpec", "concurrencyPolicy") => {
            "What to do when a run is due while the previous Job still runs: Allow (the default) runs both, \
             Forbid skips the new run, Replace stops the old Job and starts the new one."
        }
        ("CronJobSpec", "suspend") => "While true, no new runs start (running Jobs go on). Defaults to false.",
        ("CronJobSpec", "jobTemplate") => "The Job created at each run.",
        ("CronJobSpec", "successfulJobsHistoryLimit") => "How many successfully finished Jobs to keep. Defaults to 3.",
        ("CronJobSpec", "failedJobsHistoryLimit") => "How many failed Jobs to keep. Defaults to 1.",
        _ => return None,
    })
}

/// Whether a Go struct is a kind's (its `spec`/`status` are the object's).
fn is_kind(go: &str) -> bool {
    edgehive_store::resources::ALL.iter().any(|r| r.kind == go)
}

/// The values Kubernetes publishes as a field's `enum`.
fn field_enum(go: &str, field: &str) -> Option<&'static [&'static str]> {
    Some(match (go, field) {
        ("DeploymentStrategy", "type") => &["Recreate", "RollingUpdate"],
        ("DaemonSetUpdateStrategy" | "StatefulSetUpdateStrategy", "type") => &["OnDelete", "RollingUpdate"],
        ("StatefulSetSpec", "podManagementPolicy") => &["OrderedReady", "Parallel"],
        ("JobSpec", "completionMode") => &["Indexed", "NonIndexed"],
        ("JobSpec", "podReplacementPolicy") => &["Failed", "TerminatingOrFailed"],
        ("CronJobSpec", "concurrencyPolicy") => &["Allow", "Forbid", "Replace"],
        ("PodSpec", "restartPolicy") => &["Always", "Never", "OnFailure"],
        ("PodSpec", "dnsPolicy") => &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        ("Container", "imagePullPolicy") => &["Always", "IfNotPresent", "Never"],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follows `$ref`s inside `allOf`, as kubectl explain does.
    fn resolve<'a>(schemas: &'a Map<String, Value>, schema: &'a Value) -> &'a Value {
        let target = schema.get("$ref").or_else(|| schema["allOf"].get(0).and_then(|a| a.get("$ref")));
        match target.and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX)) {
            Some(name) => schemas.get(name).unwrap_or_else(|| panic!("{name} is not in the document")),
            None => schema,
        }
    }

    fn walk<'a>(schemas: &'a Map<String, Value>, start: &str, path: &[&str]) -> &'a Value {
        let mut s = schemas.get(start).unwrap_or_else(|| panic!("{start}"));
        for field in path {
            s = resolve(schemas, s);
            s = s["properties"].get(*field).unwrap_or_else(|| panic!("{field} not found"));
        }
        s
    }

    #[test]
    fn deployment_schema_leads_to_max_surge() {
        let schemas = component_schemas("apps", "v1");
        let name = schema_name("apps", "Deployment").expect("described");
        assert_eq!(name, "io.k8s.api.apps.v1.Deployment");
        let deploy = &schemas[&name];
        assert_eq!(
            deploy["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        assert_eq!(deploy["properties"]["apiVersion"]["type"], "string");
        assert!(deploy["description"].is_string());
        let spec = walk(&schemas, &name, &["spec"]);
        assert_eq!(
            spec,
            &json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}],
                                  "default": {}, "description": field_doc("Deployment", "spec").unwrap()})
        );
        let strategy = walk(&schemas, &name, &["spec", "strategy"]);
        assert_eq!(strategy["allOf"][0]["$ref"], "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy");
        let kind = walk(&schemas, &name, &["spec", "strategy", "type"]);
        assert_eq!(kind["enum"], json!(["Recreate", "RollingUpdate"]));
        let surge = walk(&schemas, &name, &["spec", "strategy", "rollingUpdate", "maxSurge"]);
        assert_eq!(surge["allOf"][0]["$ref"], format!("{REF_PREFIX}{INT_OR_STRING}"));
        assert!(surge["description"].as_str().is_some_and(|d| d.contains("25%")));
        assert_eq!(schemas[INT_OR_STRING]["format"], "int-or-string");
        assert_eq!(schemas[INT_OR_STRING]["x-kubernetes-int-or-string"], true);
        let replicas = walk(&schemas, &name, &["spec", "replicas"]);
        assert_eq!((&replicas["type"], &replicas["format"]), (&json!("integer"), &json!("int32")));
        let labels = walk(&schemas, &name, &["spec", "template", "metadata", "labels"]);
        assert_eq!(labels, &json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}}));
        let image = walk(&schemas, &name, &["spec", "template", "spec", "containers"]);
        assert_eq!(image["items"]["allOf"][0]["$ref"], "#/components/schemas/io.k8s.api.core.v1.Container");
        assert!(schemas.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(schemas.contains_key("io.k8s.api.core.v1.PodSpec"));
        assert_eq!(schemas["io.k8s.api.apps.v1.DeploymentSpec"]["required"], json!(["selector", "template"]));
        let limits = walk(&schemas, &name, &["spec", "template", "spec", "containers"]);
        let container = resolve(&schemas, &limits["items"]);
        let resources = resolve(&schemas, &container["properties"]["resources"]);
        assert_eq!(
            resources["properties"]["limits"]["additionalProperties"]["allOf"][0]["$ref"],
            format!("{REF_PREFIX}{QUANTITY}")
        );
    }

    #[test]
    fn every_reference_resolves_and_every_kind_is_described() {
        for (group, version) in [
            ("", "v1"),
            ("apps", "v1"),
            ("batch", "v1"),
            ("policy", "v1"),
            ("coordination.k8s.io", "v1"),
            ("devices.kubeedge.io", "v1beta1"),
            ("reliablesyncs.kubeedge.io", "v1alpha1"),
        ] {
            let schemas = component_schemas(group, version);
            let text = Value::Object(schemas.clone()).to_string();
            for piece in text.split(REF_PREFIX).skip(1) {
                let name = piece.split('"').next().unwrap_or("");
                assert!(schemas.contains_key(name), "{group}/{version}: dangling {name}");
            }
            assert!(schemas.values().all(|s| !s.is_null()), "{group}/{version}");
            for r in edgehive_store::resources::ALL.iter().filter(|r| r.group == group && r.version == version) {
                if let Some(name) = schema_name(r.group, r.kind) {
                    let gvk = &schemas[&name]["x-kubernetes-group-version-kind"][0];
                    assert_eq!(gvk["kind"], r.kind);
                }
            }
        }
    }

    #[test]
    fn job_and_cron_job_fields() {
        let schemas = component_schemas("batch", "v1");
        let job = schema_name("batch", "Job").unwrap();
        let spec = resolve(&schemas, &schemas[&job]["properties"]["spec"]);
        for field in
            ["parallelism", "completions", "backoffLimit", "template", "manualSelector", "podReplacementPolicy"]
        {
            assert!(spec["properties"][field]["description"].is_string(), "{field}");
        }
        assert_eq!(spec["properties"]["activeDeadlineSeconds"]["format"], "int64");
        let cron = schema_name("batch", "CronJob").unwrap();
        let template = walk(&schemas, &cron, &["spec", "jobTemplate", "spec", "template", "spec"]);
        assert_eq!(template["allOf"][0]["$ref"], "#/components/schemas/io.k8s.api.core.v1.PodSpec");
        let start = walk(&schemas, &job, &["status", "startTime"]);
        assert_eq!(start["allOf"][0]["$ref"], format!("{REF_PREFIX}{TIME}"));
        assert!(component_schemas("apps", "v2").is_empty());
    }

    #[test]
    fn custom_resources_are_inline() {
        let schemas = component_schemas("devices.kubeedge.io", "v1beta1");
        let name = schema_name("devices.kubeedge.io", "Device").unwrap();
        assert_eq!(name, "io.kubeedge.devices.v1beta1.Device");
        let device = &schemas[&name];
        assert_eq!(device["properties"]["spec"]["properties"]["nodeName"]["type"], "string");
        assert_eq!(device["x-kubernetes-group-version-kind"][0]["group"], "devices.kubeedge.io");
    }
}
