//! Strategic-merge metadata for the built-in kinds: which list fields merge, and by which key.
//!
//! This is a transcription of the `patchStrategy` / `patchMergeKey` struct tags of Kubernetes
//! v1.32, read from these files (tags `v0.32.13` of the published modules):
//!
//! - `k8s.io/api/core/v1/types.go` (Pod, Node, Service, Namespace and the types they contain)
//! - `k8s.io/apimachinery/pkg/apis/meta/v1/types.go` (`ObjectMeta`)
//! - `k8s.io/api/coordination/v1/types.go` (`Lease`: no tagged field)
//! - `k8s.io/api/events/v1/types.go` (`Event`: no tagged field)
//! - `k8s.io/api/apps/v1/types.go` (Deployment, ReplicaSet, DaemonSet, StatefulSet: their pod
//!   templates and status conditions; ControllerRevision: no tagged field)
//! - `k8s.io/api/batch/v1/types.go` (Job, CronJob: pod templates and Job conditions)
//!
//! One [`TypeMeta`] stands for one Go struct and lists only the fields that matter to a
//! strategic merge patch: fields carrying a patch strategy, and the struct-valued fields that
//! lead to them. A field that is not listed has no strategy, as in Go: an object merges key by
//! key and a list is replaced whole. To audit an entry, find the Go struct of the same name and
//! compare the field's tags.
//!
//! Inline (embedded) structs are flattened into their parent, as JSON does: `EphemeralContainer`
//! carries the fields of `EphemeralContainerCommon`.

/// How a list-valued field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// No `patchStrategy` tag: the patch's list replaces the live one.
    Replace,
    /// `patchStrategy:"merge"`: lists of objects merge by the `key` field
    /// (`patchMergeKey`), lists of scalars (`key` is `None`) merge as an ordered set.
    Merge {
        /// The `patchMergeKey`, for lists of objects.
        key: Option<&'static str>,
    },
}

/// The JSON type a listed field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A struct: a JSON object.
    Object,
    /// A slice: a JSON array.
    List,
}

/// One field of a Go struct, as far as strategic merge patch cares.
#[derive(Debug)]
pub(crate) struct FieldMeta {
    /// The JSON name of the field.
    pub(crate) name: &'static str,
    /// The struct type of the value, or of the list's elements, when it has tagged fields.
    pub(crate) ty: Option<&'static TypeMeta>,
    /// Whether the field holds an object or a list; a patch giving it anything else (but
    /// `null`) is malformed.
    pub(crate) shape: Shape,
    /// The strategy when the value is a list.
    pub(crate) strategy: ListStrategy,
    /// Whether the strategy also names `retainKeys` (`patchStrategy:"merge,retainKeys"`).
    /// The `$retainKeys` directive is honoured wherever it appears, as Kubernetes does, so
    /// this records the tag for people comparing the table with `types.go`, and for tests.
    #[allow(dead_code)]
    pub(crate) retain_keys: bool,
}

/// The patch-relevant fields of one Go struct.
#[derive(Debug)]
pub(crate) struct TypeMeta {
    /// The Go type name, as in `types.go`: for people auditing the table, and for tests.
    #[allow(dead_code)]
    pub(crate) name: &'static str,
    /// Its fields that carry a strategy or lead to one.
    pub(crate) fields: &'static [FieldMeta],
}

impl TypeMeta {
    /// The metadata of the field with JSON name `name`, if it is listed.
    pub(crate) fn field(&'static self, name: &str) -> Option<&'static FieldMeta> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// A struct-valued field whose type has tagged fields.
const fn nested(name: &'static str, ty: &'static TypeMeta) -> FieldMeta {
    FieldMeta { name, ty: Some(ty), shape: Shape::Object, strategy: ListStrategy::Replace, retain_keys: false }
}

/// A list of structs without strategy (replaced whole) whose element type has tagged fields.
const fn list_of(name: &'static str, ty: &'static TypeMeta) -> FieldMeta {
    FieldMeta { name, ty: Some(ty), shape: Shape::List, strategy: ListStrategy::Replace, retain_keys: false }
}

/// `patchStrategy:"merge" patchMergeKey:"<key>"` on a list of objects.
const fn merge_by(name: &'static str, key: &'static str, ty: Option<&'static TypeMeta>) -> FieldMeta {
    FieldMeta { name, ty, shape: Shape::List, strategy: ListStrategy::Merge { key: Some(key) }, retain_keys: false }
}

/// `patchStrategy:"merge,retainKeys" patchMergeKey:"<key>"` on a list of objects.
const fn merge_retain_by(name: &'static str, key: &'static str) -> FieldMeta {
    FieldMeta {
        name,
        ty: None,
        shape: Shape::List,
        strategy: ListStrategy::Merge { key: Some(key) },
        retain_keys: true,
    }
}

/// `patchStrategy:"merge"` on a list of scalars.
const fn merge_set(name: &'static str) -> FieldMeta {
    FieldMeta { name, ty: None, shape: Shape::List, strategy: ListStrategy::Merge { key: None }, retain_keys: false }
}

// ---- meta/v1 ----------------------------------------------------------------------------

/// `ObjectMeta` (meta/v1 types.go). `managedFields` has no tag: replaced whole.
static OBJECT_META: TypeMeta =
    TypeMeta { name: "ObjectMeta", fields: &[merge_by("ownerReferences", "uid", None), merge_set("finalizers")] };

// ---- core/v1: Pod -----------------------------------------------------------------------

/// `Container` (core/v1). `resizePolicy`, `envFrom`, `command`, `args` have no tag.
static CONTAINER: TypeMeta = TypeMeta {
    name: "Container",
    fields: &[
        merge_by("ports", "containerPort", None),
        merge_by("env", "name", None),
        merge_by("volumeMounts", "mountPath", None),
        merge_by("volumeDevices", "devicePath", None),
    ],
};

/// `EphemeralContainer`, i.e. the inline `EphemeralContainerCommon` (core/v1).
static EPHEMERAL_CONTAINER: TypeMeta = TypeMeta {
    name: "EphemeralContainerCommon",
    fields: &[
        merge_by("ports", "containerPort", None),
        merge_by("env", "name", None),
        merge_by("volumeMounts", "mountPath", None),
        merge_by("volumeDevices", "devicePath", None),
    ],
};

/// `PodSpec` (core/v1). `tolerations`, `readinessGates`, `os` etc. have no tag.
static POD_SPEC: TypeMeta = TypeMeta {
    name: "PodSpec",
    fields: &[
        merge_retain_by("volumes", "name"),
        merge_by("initContainers", "name", Some(&CONTAINER)),
        merge_by("containers", "name", Some(&CONTAINER)),
        merge_by("ephemeralContainers", "name", Some(&EPHEMERAL_CONTAINER)),
        merge_by("imagePullSecrets", "name", None),
        merge_by("hostAliases", "ip", None),
        merge_by("topologySpreadConstraints", "topologyKey", None),
        merge_by("schedulingGates", "name", None),
        merge_retain_by("resourceClaims", "name"),
    ],
};

/// `ContainerStatus` (core/v1). Only reached through lists without strategy, so its tags
/// matter only when such a list is written anew; kept for fidelity.
static CONTAINER_STATUS: TypeMeta = TypeMeta {
    name: "ContainerStatus",
    fields: &[merge_by("volumeMounts", "mountPath", None), merge_by("allocatedResourcesStatus", "name", None)],
};

/// `PodStatus` (core/v1). The `*ContainerStatuses` lists have no tag: replaced whole.
static POD_STATUS: TypeMeta = TypeMeta {
    name: "PodStatus",
    fields: &[
        merge_by("conditions", "type", None),
        merge_by("hostIPs", "ip", None),
        merge_by("podIPs", "ip", None),
        merge_retain_by("resourceClaimStatuses", "name"),
        list_of("initContainerStatuses", &CONTAINER_STATUS),
        list_of("containerStatuses", &CONTAINER_STATUS),
        list_of("ephemeralContainerStatuses", &CONTAINER_STATUS),
    ],
};

static POD: TypeMeta = TypeMeta {
    name: "Pod",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &POD_SPEC), nested("status", &POD_STATUS)],
};

// ---- core/v1: Node ----------------------------------------------------------------------

/// `NodeSpec` (core/v1). `taints` has no tag: replaced whole.
static NODE_SPEC: TypeMeta = TypeMeta { name: "NodeSpec", fields: &[merge_set("podCIDRs")] };

/// `NodeStatus` (core/v1). `images`, `volumesInUse`, `volumesAttached` have no tag.
static NODE_STATUS: TypeMeta = TypeMeta {
    name: "NodeStatus",
    fields: &[merge_by("conditions", "type", None), merge_by("addresses", "type", None)],
};

static NODE: TypeMeta = TypeMeta {
    name: "Node",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &NODE_SPEC), nested("status", &NODE_STATUS)],
};

// ---- core/v1: Service, Namespace --------------------------------------------------------

/// `ServiceSpec` (core/v1). `clusterIPs`, `externalIPs`, `ipFamilies` have no tag.
static SERVICE_SPEC: TypeMeta = TypeMeta { name: "ServiceSpec", fields: &[merge_by("ports", "port", None)] };

/// `ServiceStatus` (core/v1): `conditions` are `metav1.Condition`s merged by type.
static SERVICE_STATUS: TypeMeta = TypeMeta { name: "ServiceStatus", fields: &[merge_by("conditions", "type", None)] };

static SERVICE: TypeMeta = TypeMeta {
    name: "Service",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &SERVICE_SPEC), nested("status", &SERVICE_STATUS)],
};

/// `NamespaceStatus` (core/v1). `NamespaceSpec.finalizers` has no tag: replaced whole.
static NAMESPACE_STATUS: TypeMeta =
    TypeMeta { name: "NamespaceStatus", fields: &[merge_by("conditions", "type", None)] };

static NAMESPACE: TypeMeta =
    TypeMeta { name: "Namespace", fields: &[nested("metadata", &OBJECT_META), nested("status", &NAMESPACE_STATUS)] };

// ---- kinds whose only tagged fields are in ObjectMeta -----------------------------------

/// `ConfigMap` (core/v1): `data` and `binaryData` are maps, merged key by key.
static CONFIG_MAP: TypeMeta = TypeMeta { name: "ConfigMap", fields: &[nested("metadata", &OBJECT_META)] };
/// `Secret` (core/v1).
static SECRET: TypeMeta = TypeMeta { name: "Secret", fields: &[nested("metadata", &OBJECT_META)] };
/// `Endpoints` (core/v1): `subsets` has no tag, replaced whole.
static ENDPOINTS: TypeMeta = TypeMeta { name: "Endpoints", fields: &[nested("metadata", &OBJECT_META)] };
/// `Event` (core/v1 and events/v1).
static EVENT: TypeMeta = TypeMeta { name: "Event", fields: &[nested("metadata", &OBJECT_META)] };
/// `Lease` (coordination/v1).
static LEASE: TypeMeta = TypeMeta { name: "Lease", fields: &[nested("metadata", &OBJECT_META)] };

// ---- apps/v1, batch/v1: workloads ------------------------------------------------------

/// `PodTemplateSpec` (core/v1).
static POD_TEMPLATE_SPEC: TypeMeta =
    TypeMeta { name: "PodTemplateSpec", fields: &[nested("metadata", &OBJECT_META), nested("spec", &POD_SPEC)] };

/// A workload's spec as far as strategic merge goes: its pod template.
static WORKLOAD_SPEC: TypeMeta = TypeMeta { name: "WorkloadSpec", fields: &[nested("template", &POD_TEMPLATE_SPEC)] };

/// `DeploymentStatus`, `ReplicaSetStatus`, `DaemonSetStatus`, `StatefulSetStatus`, `JobStatus`:
/// `conditions` merge by type.
static WORKLOAD_STATUS: TypeMeta = TypeMeta { name: "WorkloadStatus", fields: &[merge_by("conditions", "type", None)] };

/// Deployment, ReplicaSet, DaemonSet, StatefulSet (apps/v1) and Job (batch/v1).
static WORKLOAD: TypeMeta = TypeMeta {
    name: "Workload",
    fields: &[nested("metadata", &OBJECT_META), nested("spec", &WORKLOAD_SPEC), nested("status", &WORKLOAD_STATUS)],
};

/// `JobTemplateSpec` (batch/v1).
static JOB_TEMPLATE_SPEC: TypeMeta =
    TypeMeta { name: "JobTemplateSpec", fields: &[nested("metadata", &OBJECT_META), nested("spec", &WORKLOAD_SPEC)] };

/// `CronJobSpec` (batch/v1). `CronJobStatus.active` has no tag.
static CRON_JOB_SPEC: TypeMeta = TypeMeta { name: "CronJobSpec", fields: &[nested("jobTemplate", &JOB_TEMPLATE_SPEC)] };

static CRON_JOB: TypeMeta =
    TypeMeta { name: "CronJob", fields: &[nested("metadata", &OBJECT_META), nested("spec", &CRON_JOB_SPEC)] };

/// `ControllerRevision` (apps/v1): `data` is raw, replaced whole.
static CONTROLLER_REVISION: TypeMeta =
    TypeMeta { name: "ControllerRevision", fields: &[nested("metadata", &OBJECT_META)] };

/// The kinds served with strategic merge patch: (API group, kind, root type).
static KINDS: &[(&str, &str, &TypeMeta)] = &[
    ("", "Pod", &POD),
    ("", "Node", &NODE),
    ("", "Service", &SERVICE),
    ("", "Namespace", &NAMESPACE),
    ("", "ConfigMap", &CONFIG_MAP),
    ("", "Secret", &SECRET),
    ("", "Endpoints", &ENDPOINTS),
    ("", "Event", &EVENT),
    ("events.k8s.io", "Event", &EVENT),
    ("coordination.k8s.io", "Lease", &LEASE),
    ("apps", "Deployment", &WORKLOAD),
    ("apps", "ReplicaSet", &WORKLOAD),
    ("apps", "DaemonSet", &WORKLOAD),
    ("apps", "StatefulSet", &WORKLOAD),
    ("apps", "ControllerRevision", &CONTROLLER_REVISION),
    ("batch", "Job", &WORKLOAD),
    ("batch", "CronJob", &CRON_JOB),
];

/// The root metadata of `kind` in API group `group` ("" for core), if it is a built-in kind
/// served here.
pub(crate) fn kind_meta(group: &str, kind: &str) -> Option<&'static TypeMeta> {
    KINDS.iter().find(|(g, k, _)| *g == group && *k == kind).map(|(_, _, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_kinds_and_fields() {
        let pod = kind_meta("", "Pod").expect("Pod is served");
        let spec = pod.field("spec").and_then(|f| f.ty).expect("PodSpec");
        let containers = spec.field("containers").expect("containers");
        assert_eq!(containers.strategy, ListStrategy::Merge { key: Some("name") });
        let env = containers.ty.and_then(|c| c.field("env")).expect("env");
        assert_eq!(env.strategy, ListStrategy::Merge { key: Some("name") });
        assert!(spec.field("volumes").is_some_and(|f| f.retain_keys));
        assert!(spec.field("tolerations").is_none());
        assert!(kind_meta("devices.kubeedge.io", "Device").is_none());
        assert!(kind_meta("coordination.k8s.io", "Lease").is_some());
        let deploy = kind_meta("apps", "Deployment").expect("Deployment is served");
        let containers = deploy
            .field("spec")
            .and_then(|f| f.ty)
            .and_then(|s| s.field("template"))
            .and_then(|t| t.ty)
            .and_then(|t| t.field("spec"))
            .and_then(|s| s.ty)
            .and_then(|s| s.field("containers"))
            .expect("a Deployment's containers");
        assert_eq!(containers.strategy, ListStrategy::Merge { key: Some("name") });
        let cron = kind_meta("batch", "CronJob").expect("CronJob is served");
        assert!(
            cron.field("spec")
                .and_then(|f| f.ty)
                .and_then(|s| s.field("jobTemplate"))
                .and_then(|j| j.ty)
                .and_then(|j| j.field("spec"))
                .is_some()
        );
    }

    #[test]
    fn field_names_are_unique_within_each_type() {
        for (_, _, root) in KINDS {
            let mut stack = vec![*root];
            while let Some(t) = stack.pop() {
                for (i, f) in t.fields.iter().enumerate() {
                    assert!(t.fields[i + 1..].iter().all(|g| g.name != f.name), "{}.{} twice", t.name, f.name);
                    if let Some(child) = f.ty {
                        stack.push(child);
                    }
                }
            }
        }
    }
}
