//! The resources edgehive serves: names, scope, storage keys and the fields
//! a field selector may use, in one table that the store, the API server
//! (discovery, routing) and the cloud modules share.

use serde_json::Value;

/// A selectable field: its name in a field selector, where it lives in the
/// object, and the value an unset field compares as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectableField {
    /// The name a selector uses (`spec.nodeName`).
    pub name: &'static str,
    /// Dot-separated path in the object (`source` selects `source.component`).
    pub path: &'static str,
    /// Value of an unset field (`""`, or `"false"` for booleans).
    pub unset: &'static str,
}

const fn field(name: &'static str) -> SelectableField {
    SelectableField { name, path: name, unset: "" }
}

/// One served resource type.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group, `""` for core.
    pub group: &'static str,
    /// API version (`v1`, `v1beta1`).
    pub version: &'static str,
    /// Kind (`Pod`).
    pub kind: &'static str,
    /// Plural resource name (`pods`).
    pub plural: &'static str,
    /// Singular name (`pod`).
    pub singular: &'static str,
    /// kubectl short names (`po`).
    pub short_names: &'static [&'static str],
    /// Categories (`all`).
    pub categories: &'static [&'static str],
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Has a `/status` subresource (the main resource ignores status changes).
    pub status_subresource: bool,
    /// Has a `/scale` subresource (`autoscaling/v1` Scale over
    /// `spec.replicas`, `status.replicas` and the label selector).
    pub scale_subresource: bool,
    /// Deletion is graceful (pods): a delete sets `deletionTimestamp` first.
    pub graceful: bool,
    /// Has `metadata.generation`: set to 1 on create and moved by every change
    /// of the spec, as the kind's Kubernetes strategy does (pods since 1.33,
    /// custom resources). Other kinds (ConfigMaps, Secrets, Nodes, ...) have
    /// none of their own; a writer never changes what they carry.
    pub generation: bool,
    /// Fields a field selector may use besides `metadata.name` / `metadata.namespace`.
    pub fields: &'static [SelectableField],
    /// Storage key segment(s) after `/registry/`.
    pub storage: &'static str,
    /// Defined by a CustomResourceDefinition (served from the store's
    /// [`Registry`], not from [`ALL`]).
    pub custom: bool,
    /// The version objects of this resource are stored at when it is not
    /// this one (a custom resource's other served versions); `""` otherwise.
    pub stored_version: &'static str,
}

const POD_FIELDS: &[SelectableField] = &[
    field("spec.nodeName"),
    field("spec.restartPolicy"),
    field("spec.schedulerName"),
    field("spec.serviceAccountName"),
    SelectableField { name: "spec.hostNetwork", path: "spec.hostNetwork", unset: "false" },
    field("status.phase"),
    field("status.podIP"),
    field("status.nominatedNodeName"),
];
const NODE_FIELDS: &[SelectableField] =
    &[SelectableField { name: "spec.unschedulable", path: "spec.unschedulable", unset: "false" }];
const NAMESPACE_FIELDS: &[SelectableField] = &[field("status.phase")];
const SECRET_FIELDS: &[SelectableField] = &[field("type")];
const EVENT_FIELDS: &[SelectableField] = &[
    field("involvedObject.kind"),
    field("involvedObject.namespace"),
    field("involvedObject.name"),
    field("involvedObject.uid"),
    field("involvedObject.apiVersion"),
    field("involvedObject.resourceVersion"),
    field("involvedObject.fieldPath"),
    field("reason"),
    field("reportingComponent"),
    SelectableField { name: "source", path: "source.component", unset: "" },
    field("type"),
];
/// The field selectors of events.k8s.io/v1 Events, by their v1 names, read from the stored core form
/// (Kubernetes' `AddFieldLabelConversionsForEvent` in pkg/apis/events/v1/conversion.go maps each to a core
/// selectable field).
const EVENT_V1_FIELDS: &[SelectableField] = &[
    SelectableField { name: "regarding.kind", path: "involvedObject.kind", unset: "" },
    SelectableField { name: "regarding.namespace", path: "involvedObject.namespace", unset: "" },
    SelectableField { name: "regarding.name", path: "involvedObject.name", unset: "" },
    SelectableField { name: "regarding.uid", path: "involvedObject.uid", unset: "" },
    SelectableField { name: "regarding.apiVersion", path: "involvedObject.apiVersion", unset: "" },
    SelectableField { name: "regarding.resourceVersion", path: "involvedObject.resourceVersion", unset: "" },
    SelectableField { name: "regarding.fieldPath", path: "involvedObject.fieldPath", unset: "" },
    field("reason"),
    SelectableField { name: "reportingController", path: "reportingComponent", unset: "" },
    SelectableField { name: "source", path: "source.component", unset: "" },
    field("type"),
];
const DEVICE_FIELDS: &[SelectableField] = &[field("spec.nodeName")];
const REPLICA_SET_FIELDS: &[SelectableField] = &[field("status.replicas")];
const JOB_FIELDS: &[SelectableField] = &[field("status.successful")];

macro_rules! def {
    ($group:expr, $version:expr, $kind:expr, $plural:expr, $singular:expr, $short:expr, $cat:expr,
     namespaced: $ns:expr, status: $st:expr, graceful: $gr:expr, generation: $gen:expr, fields: $fields:expr,
     storage: $storage:expr) => {
        ResourceDef {
            group: $group,
            version: $version,
            kind: $kind,
            plural: $plural,
            singular: $singular,
            short_names: $short,
            categories: $cat,
            namespaced: $ns,
            status_subresource: $st,
            scale_subresource: false,
            graceful: $gr,
            generation: $gen,
            fields: $fields,
            storage: $storage,
            custom: false,
            stored_version: "",
        }
    };
}

/// Core group `v1`.
pub static NAMESPACES: ResourceDef = def!("", "v1", "Namespace", "namespaces", "namespace", &["ns"], &[],
    namespaced: false, status: true, graceful: false, generation: false, fields: NAMESPACE_FIELDS, storage: "namespaces");
/// Nodes.
pub static NODES: ResourceDef = def!("", "v1", "Node", "nodes", "node", &["no"], &[],
    namespaced: false, status: true, graceful: false, generation: false, fields: NODE_FIELDS, storage: "nodes");
/// Pods.
pub static PODS: ResourceDef = def!("", "v1", "Pod", "pods", "pod", &["po"], &["all"],
    namespaced: true, status: true, graceful: true, generation: true, fields: POD_FIELDS, storage: "pods");
/// ConfigMaps.
pub static CONFIGMAPS: ResourceDef = def!("", "v1", "ConfigMap", "configmaps", "configmap", &["cm"], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: &[], storage: "configmaps");
/// Secrets.
pub static SECRETS: ResourceDef = def!("", "v1", "Secret", "secrets", "secret", &[], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: SECRET_FIELDS, storage: "secrets");
/// Services.
pub static SERVICES: ResourceDef = def!("", "v1", "Service", "services", "service", &["svc"], &["all"],
    namespaced: true, status: true, graceful: false, generation: false, fields: &[], storage: "services");
/// Endpoints.
pub static ENDPOINTS: ResourceDef = def!("", "v1", "Endpoints", "endpoints", "endpoints", &["ep"], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: &[], storage: "endpoints");
/// Events (core/v1).
pub static EVENTS: ResourceDef = def!("", "v1", "Event", "events", "event", &["ev"], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: EVENT_FIELDS, storage: "events");
/// Events (events.k8s.io/v1): a view of the core Events, stored with them in their core/v1 form, as
/// kube-apiserver serves them (one storage, `/registry/events`); see [`ResourceDef::stored_as`].
pub static EVENTS_V1: ResourceDef = def!("events.k8s.io", "v1", "Event", "events", "event", &["ev"], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: EVENT_V1_FIELDS, storage: "events");
/// Service accounts (their tokens are issued to edges for their pods).
pub static SERVICE_ACCOUNTS: ResourceDef = def!("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", &["sa"], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: &[], storage: "serviceaccounts");
/// Leases (coordination.k8s.io/v1).
pub static LEASES: ResourceDef = def!("coordination.k8s.io", "v1", "Lease", "leases", "lease", &[], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: &[], storage: "leases");
/// KubeEdge devices (devices.kubeedge.io/v1beta1).
pub static DEVICES: ResourceDef = def!("devices.kubeedge.io", "v1beta1", "Device", "devices", "device", &[], &[],
    namespaced: true, status: true, graceful: false, generation: true, fields: DEVICE_FIELDS, storage: "devices.kubeedge.io/devices");
/// KubeEdge device models.
pub static DEVICE_MODELS: ResourceDef = def!("devices.kubeedge.io", "v1beta1", "DeviceModel", "devicemodels", "devicemodel", &[], &[],
    namespaced: true, status: false, graceful: false, generation: true, fields: &[], storage: "devices.kubeedge.io/devicemodels");
/// Per-node delivery success points (reliablesyncs.kubeedge.io/v1alpha1).
pub static OBJECT_SYNCS: ResourceDef = def!("reliablesyncs.kubeedge.io", "v1alpha1", "ObjectSync", "objectsyncs", "objectsync", &[], &[],
    namespaced: true, status: true, graceful: false, generation: true, fields: &[], storage: "reliablesyncs.kubeedge.io/objectsyncs");
/// Cluster-scoped success points.
pub static CLUSTER_OBJECT_SYNCS: ResourceDef = def!("reliablesyncs.kubeedge.io", "v1alpha1", "ClusterObjectSync", "clusterobjectsyncs", "clusterobjectsync", &[], &[],
    namespaced: false, status: true, graceful: false, generation: true, fields: &[], storage: "reliablesyncs.kubeedge.io/clusterobjectsyncs");

/// A workload: namespaced, with status, generation and (`scale`) a scale subresource.
const fn workload(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short_names: &'static [&'static str],
    scale: bool,
    fields: &'static [SelectableField],
) -> ResourceDef {
    ResourceDef {
        group,
        version: "v1",
        kind,
        plural,
        singular,
        short_names,
        categories: &["all"],
        namespaced: true,
        status_subresource: true,
        scale_subresource: scale,
        graceful: false,
        generation: true,
        fields,
        storage: plural,
        custom: false,
        stored_version: "",
    }
}

/// Deployments (apps/v1).
pub static DEPLOYMENTS: ResourceDef =
    workload("apps", "Deployment", "deployments", "deployment", &["deploy"], true, &[]);
/// ReplicaSets (apps/v1).
pub static REPLICA_SETS: ResourceDef =
    workload("apps", "ReplicaSet", "replicasets", "replicaset", &["rs"], true, REPLICA_SET_FIELDS);
/// DaemonSets (apps/v1).
pub static DAEMON_SETS: ResourceDef = workload("apps", "DaemonSet", "daemonsets", "daemonset", &["ds"], false, &[]);
/// StatefulSets (apps/v1).
pub static STATEFUL_SETS: ResourceDef =
    workload("apps", "StatefulSet", "statefulsets", "statefulset", &["sts"], true, &[]);
/// ControllerRevisions (apps/v1): the template history of DaemonSets and StatefulSets.
pub static CONTROLLER_REVISIONS: ResourceDef = def!("apps", "v1", "ControllerRevision", "controllerrevisions", "controllerrevision", &[], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: &[], storage: "controllerrevisions");
/// Jobs (batch/v1).
pub static JOBS: ResourceDef = workload("batch", "Job", "jobs", "job", &[], false, JOB_FIELDS);
/// CronJobs (batch/v1).
pub static CRON_JOBS: ResourceDef = workload("batch", "CronJob", "cronjobs", "cronjob", &["cj"], false, &[]);
/// PodDisruptionBudgets (policy/v1): how many of a set of pods voluntary
/// disruptions (evictions, `kubectl drain`) must leave.
pub static POD_DISRUPTION_BUDGETS: ResourceDef = def!("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets",
    "poddisruptionbudget", &["pdb"], &[], namespaced: true, status: true, graceful: false, generation: true,
    fields: &[], storage: "poddisruptionbudgets");

/// EndpointSlices (discovery.k8s.io/v1): a Service's ready and not-ready
/// pod addresses, kept by the endpoints controller.
pub static ENDPOINT_SLICES: ResourceDef = def!("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices",
    "endpointslice", &[], &[], namespaced: true, status: false, graceful: false, generation: true, fields: &[],
    storage: "endpointslices");

/// Roles (rbac.authorization.k8s.io/v1): namespaced permission rules.
pub static ROLES: ResourceDef = def!("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", &[], &[],
    namespaced: true, status: false, graceful: false, generation: false, fields: &[], storage: "roles");
/// ClusterRoles (rbac.authorization.k8s.io/v1), aggregated by label selectors.
pub static CLUSTER_ROLES: ResourceDef = def!("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles",
    "clusterrole", &[], &[], namespaced: false, status: false, graceful: false, generation: false, fields: &[],
    storage: "clusterroles");
/// RoleBindings (rbac.authorization.k8s.io/v1).
pub static ROLE_BINDINGS: ResourceDef = def!("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings",
    "rolebinding", &[], &[], namespaced: true, status: false, graceful: false, generation: false, fields: &[],
    storage: "rolebindings");
/// ClusterRoleBindings (rbac.authorization.k8s.io/v1).
pub static CLUSTER_ROLE_BINDINGS: ResourceDef = def!("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding",
    "clusterrolebindings", "clusterrolebinding", &[], &[], namespaced: false, status: false, graceful: false,
    generation: false, fields: &[], storage: "clusterrolebindings");

/// CustomResourceDefinitions (apiextensions.k8s.io/v1): the resources they
/// define are served from the store's [`Registry`].
pub static CUSTOM_RESOURCE_DEFINITIONS: ResourceDef = def!("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
    "customresourcedefinitions", "customresourcedefinition", &["crd", "crds"], &["api-extensions"], namespaced: false,
    status: true, graceful: false, generation: true, fields: &[],
    storage: "apiextensions.k8s.io/customresourcedefinitions");

/// Every served resource, in discovery order.
pub static ALL: &[&ResourceDef] = &[
    &NAMESPACES,
    &NODES,
    &PODS,
    &CONFIGMAPS,
    &SECRETS,
    &SERVICES,
    &ENDPOINTS,
    &EVENTS,
    &SERVICE_ACCOUNTS,
    &DEPLOYMENTS,
    &REPLICA_SETS,
    &DAEMON_SETS,
    &STATEFUL_SETS,
    &CONTROLLER_REVISIONS,
    // After apps, as kube-apiserver orders its groups.
    &EVENTS_V1,
    &JOBS,
    &CRON_JOBS,
    &POD_DISRUPTION_BUDGETS,
    &LEASES,
    &ENDPOINT_SLICES,
    &ROLES,
    &CLUSTER_ROLES,
    &ROLE_BINDINGS,
    &CLUSTER_ROLE_BINDINGS,
    &CUSTOM_RESOURCE_DEFINITIONS,
    &DEVICES,
    &DEVICE_MODELS,
    &OBJECT_SYNCS,
    &CLUSTER_OBJECT_SYNCS,
];

/// The prefix of every storage key.
pub const KEY_ROOT: &str = "/registry/";

impl ResourceDef {
    /// `apiVersion` of objects of this type (`v1`, `coordination.k8s.io/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The resource whose form objects of this one are stored in: itself, but for a view of another
    /// resource's storage (events.k8s.io/v1 Events are stored as core/v1 Events). The store writes
    /// objects with its apiVersion and kind; the API server converts to and from it.
    pub fn stored_as(&self) -> &ResourceDef {
        if std::ptr::eq(self, &EVENTS_V1) { &EVENTS } else { self }
    }

    /// The `apiVersion` objects of this resource are stored with: the one
    /// of [`ResourceDef::stored_as`], or a custom resource's storage version.
    pub fn stored_api_version(&self) -> String {
        if self.stored_version.is_empty() {
            self.stored_as().api_version()
        } else {
            format!("{}/{}", self.group, self.stored_version)
        }
    }

    /// The resource as Kubernetes names it in messages (`pods`, `leases.coordination.k8s.io`).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.to_string() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// `/registry/{storage}/` — every object of this type is under it.
    pub fn prefix(&self) -> String {
        format!("{KEY_ROOT}{}/", self.storage)
    }

    /// `/registry/{storage}/{namespace}/` (or the type's prefix when cluster-scoped or `ns` is empty).
    pub fn namespace_prefix(&self, namespace: &str) -> String {
        if self.namespaced && !namespace.is_empty() {
            format!("{KEY_ROOT}{}/{namespace}/", self.storage)
        } else {
            self.prefix()
        }
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("{KEY_ROOT}{}/{namespace}/{name}", self.storage)
        } else {
            format!("{KEY_ROOT}{}/{name}", self.storage)
        }
    }

    /// Splits a key of this type into (namespace, name); `None` when it is not one.
    pub fn parse_key<'k>(&self, key: &'k str) -> Option<(&'k str, &'k str)> {
        let rest = key.strip_prefix(KEY_ROOT)?.strip_prefix(self.storage)?.strip_prefix('/')?;
        if self.namespaced {
            let (ns, name) = rest.split_once('/')?;
            (!ns.is_empty() && !name.is_empty() && !name.contains('/')).then_some((ns, name))
        } else {
            (!rest.is_empty() && !rest.contains('/')).then_some(("", rest))
        }
    }

    /// Whether a field selector may use `name`.
    pub fn supports_field(&self, name: &str) -> bool {
        name == "metadata.name"
            || (self.namespaced && name == "metadata.namespace")
            || self.fields.iter().any(|f| f.name == name)
    }

    /// The value of a selectable field of `obj`, as a field selector compares it.
    pub fn field_value(&self, obj: &Value, name: &str) -> Option<String> {
        let (path, unset) = match name {
            "metadata.name" => ("metadata.name", ""),
            "metadata.namespace" => ("metadata.namespace", ""),
            _ => {
                let f = self.fields.iter().find(|f| f.name == name)?;
                (f.path, f.unset)
            }
        };
        let mut cur = obj;
        for part in path.split('.') {
            match cur.get(part) {
                Some(v) => cur = v,
                None => return Some(unset.to_string()),
            }
        }
        Some(match cur {
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::Null => unset.to_string(),
            other => other.to_string(),
        })
    }
}

/// Finds a resource by group and plural (or singular / short name when `loose`).
pub fn find(group: &str, name: &str) -> Option<&'static ResourceDef> {
    ALL.iter().copied().find(|r| r.group == group && r.plural == name)
}

/// Finds the resource of `apiVersion` + `kind`.
pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceDef> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ALL.iter().copied().find(|r| r.group == group && r.version == version && r.kind == kind)
}

/// Finds the resource of API group `group` and `kind` (any version).
pub fn by_group_kind(group: &str, kind: &str) -> Option<&'static ResourceDef> {
    ALL.iter().copied().find(|r| r.group == group && r.kind == kind)
}

/// The resource a storage key belongs to: a built-in one, or for a key
/// under `/registry/{group}/{plural}/` whose group has a dot (every
/// custom resource's does, and no built-in storage outside [`ALL`] does) a
/// definition of that storage with its scope read from the key's shape.
/// The second lets the watch cache carry custom resources' changes
/// whether or not their definition is registered yet (at start, the
/// history is primed before any CustomResourceDefinition is read).
pub fn for_key(key: &str) -> Option<&'static ResourceDef> {
    ALL.iter().copied().find(|r| r.parse_key(key).is_some()).or_else(|| custom_storage(key))
}

fn custom_storage(key: &str) -> Option<&'static ResourceDef> {
    let rest = key.strip_prefix(KEY_ROOT)?;
    let mut parts = rest.split('/');
    let (group, plural) = (parts.next()?, parts.next()?);
    let tail = parts.count();
    if !group.contains('.') || plural.is_empty() || !(1..=2).contains(&tail) {
        return None;
    }
    let storage = intern_str(&format!("{group}/{plural}"));
    let def = intern(ResourceDef {
        group: intern_str(group),
        version: "",
        kind: "",
        plural: intern_str(plural),
        singular: "",
        short_names: &[],
        categories: &[],
        namespaced: tail == 2,
        status_subresource: false,
        scale_subresource: false,
        graceful: false,
        generation: true,
        fields: &[],
        storage,
        custom: true,
        stored_version: "",
    });
    def.parse_key(key).is_some().then_some(def)
}

/// The definitions made at run time (custom resources), each kept once for
/// the life of the process: a definition is a few hundred bytes and there
/// are as many as distinct CustomResourceDefinition versions ever served,
/// so `&'static` references (what every table user holds) cost nothing
/// that grows with traffic.
static INTERNED: std::sync::Mutex<Vec<&'static ResourceDef>> = std::sync::Mutex::new(Vec::new());
static STRINGS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
static LISTS: std::sync::Mutex<Vec<&'static [&'static str]>> = std::sync::Mutex::new(Vec::new());

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `s` as a `&'static str`, one copy per distinct text.
pub fn intern_str(s: &str) -> &'static str {
    let mut all = lock(&STRINGS);
    if let Some(found) = all.iter().find(|x| **x == s) {
        return found;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    all.push(leaked);
    leaked
}

/// A list of names as `&'static`, one copy per distinct list.
pub fn intern_list(items: &[String]) -> &'static [&'static str] {
    let items: Vec<&'static str> = items.iter().map(|s| intern_str(s)).collect();
    let mut all = lock(&LISTS);
    if let Some(found) = all.iter().find(|x| **x == items.as_slice()) {
        return found;
    }
    let leaked: &'static [&'static str] = Box::leak(items.into_boxed_slice());
    all.push(leaked);
    leaked
}

/// `def` as a `&'static ResourceDef`, one copy per distinct definition.
pub fn intern(def: ResourceDef) -> &'static ResourceDef {
    let mut all = lock(&INTERNED);
    if let Some(found) = all.iter().find(|x| ***x == def) {
        return found;
    }
    let leaked: &'static ResourceDef = Box::leak(Box::new(def));
    all.push(leaked);
    leaked
}

/// The resources one store serves: the built-in table ([`ALL`]) and the
/// custom resources its CustomResourceDefinitions define, replaced whole
/// whenever a definition changes. Lookups prefer the built-in table, so a
/// definition can never shadow a built-in resource.
#[derive(Debug, Default)]
pub struct Registry {
    custom: std::sync::RwLock<std::sync::Arc<Vec<&'static ResourceDef>>>,
}

impl Registry {
    /// The custom resources served now, each served version once, the
    /// storage version of a definition before its other versions.
    pub fn custom(&self) -> std::sync::Arc<Vec<&'static ResourceDef>> {
        std::sync::Arc::clone(&self.custom.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Replaces the custom resources served.
    pub fn set_custom(&self, defs: Vec<&'static ResourceDef>) {
        *self.custom.write().unwrap_or_else(std::sync::PoisonError::into_inner) = std::sync::Arc::new(defs);
    }

    /// Every served resource: the built-in ones, then the custom ones.
    pub fn all(&self) -> Vec<&'static ResourceDef> {
        ALL.iter().copied().chain(self.custom().iter().copied()).collect()
    }

    /// The resource `plural` of `group` at `version`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
        let matches = |r: &&ResourceDef| r.group == group && r.version == version && r.plural == plural;
        ALL.iter().copied().find(matches).or_else(|| self.custom().iter().copied().find(matches))
    }

    /// The resource `plural` of `group` at any version (the storage
    /// version first).
    pub fn find(&self, group: &str, plural: &str) -> Option<&'static ResourceDef> {
        find(group, plural).or_else(|| self.custom().iter().copied().find(|r| r.group == group && r.plural == plural))
    }

    /// The resource of `apiVersion` + `kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&'static ResourceDef> {
        by_kind(api_version, kind).or_else(|| {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            self.custom().iter().copied().find(|r| r.group == group && r.version == version && r.kind == kind)
        })
    }

    /// The resource of `group` and `kind` at any version (the storage version first).
    pub fn by_group_kind(&self, group: &str, kind: &str) -> Option<&'static ResourceDef> {
        by_group_kind(group, kind)
            .or_else(|| self.custom().iter().copied().find(|r| r.group == group && r.kind == kind))
    }

    /// Whether any resource of `group` (at `version`, when given) is served.
    pub fn serves(&self, group: &str, version: Option<&str>) -> bool {
        let m = |r: &&ResourceDef| r.group == group && version.is_none_or(|v| r.version == v);
        ALL.iter().any(m) || self.custom().iter().any(m)
    }

    /// The resource a storage key belongs to, as the served definition
    /// (its storage version) when there is one.
    pub fn for_key(&self, key: &str) -> Option<&'static ResourceDef> {
        ALL.iter()
            .copied()
            .find(|r| r.parse_key(key).is_some())
            .or_else(|| self.custom().iter().copied().find(|r| r.parse_key(key).is_some()))
            .or_else(|| custom_storage(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_follow_the_kubernetes_layout() {
        assert_eq!(PODS.key("default", "web"), "/registry/pods/default/web");
        assert_eq!(NODES.key("", "edge-1"), "/registry/nodes/edge-1");
        assert_eq!(DEVICES.key("ns", "d"), "/registry/devices.kubeedge.io/devices/ns/d");
        assert_eq!(PODS.parse_key("/registry/pods/default/web"), Some(("default", "web")));
        assert_eq!(PODS.parse_key("/registry/pods/default"), None);
        assert_eq!(PODS.parse_key("/registry/podsx/default/web"), None);
        assert_eq!(NODES.parse_key("/registry/nodes/a/b"), None);
        assert_eq!(for_key("/registry/leases/kube-node-lease/n1"), Some(&LEASES));
        assert_eq!(for_key("/registry/reliablesyncs.kubeedge.io/clusterobjectsyncs/x"), Some(&CLUSTER_OBJECT_SYNCS));
        assert_eq!(for_key("/elsewhere/pods/a/b"), None);
        // A custom resource's key names its storage whether or not its
        // definition is registered; the scope follows the key's shape.
        let w = for_key("/registry/example.com/widgets/ns/w").unwrap();
        assert_eq!((w.storage, w.namespaced, w.custom), ("example.com/widgets", true, true));
        assert_eq!(w.parse_key("/registry/example.com/widgets/ns/w"), Some(("ns", "w")));
        let c = for_key("/registry/example.com/clusterwidgets/c").unwrap();
        assert!(!c.namespaced);
        assert!(std::ptr::eq(c, for_key("/registry/example.com/clusterwidgets/d").unwrap()), "interned");
        assert_eq!(for_key("/registry/nodot/widgets/ns/w"), None);
        assert_eq!(for_key("/registry/example.com/widgets/a/b/c"), None);
    }

    #[test]
    fn field_values_use_kubernetes_unset_values() {
        let pod = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {}, "status": {"phase": "Running"}});
        assert_eq!(PODS.field_value(&pod, "spec.nodeName").as_deref(), Some(""));
        assert_eq!(PODS.field_value(&pod, "spec.hostNetwork").as_deref(), Some("false"));
        assert_eq!(PODS.field_value(&pod, "status.phase").as_deref(), Some("Running"));
        assert_eq!(PODS.field_value(&pod, "metadata.name").as_deref(), Some("p"));
        assert_eq!(PODS.field_value(&pod, "spec.nope"), None);
        assert!(!NODES.supports_field("metadata.namespace"));
        let ev = json!({"source": {"component": "kubelet"}});
        assert_eq!(EVENTS.field_value(&ev, "source").as_deref(), Some("kubelet"));
    }

    #[test]
    fn events_v1_is_a_view_of_the_core_events() {
        assert_eq!(for_key("/registry/events/default/e"), Some(&EVENTS));
        assert_eq!(EVENTS_V1.key("default", "e"), "/registry/events/default/e");
        assert!(std::ptr::eq(EVENTS_V1.stored_as(), &EVENTS));
        assert!(std::ptr::eq(PODS.stored_as(), &PODS));
        assert_eq!(EVENTS_V1.qualified(), "events.events.k8s.io");
        // Selectors use the v1 names and read the stored (core) fields.
        let ev = json!({"involvedObject": {"kind": "Pod"}, "reportingComponent": "kubelet", "reason": "Started"});
        assert_eq!(EVENTS_V1.field_value(&ev, "regarding.kind").as_deref(), Some("Pod"));
        assert_eq!(EVENTS_V1.field_value(&ev, "reportingController").as_deref(), Some("kubelet"));
        assert_eq!(EVENTS_V1.field_value(&ev, "reason").as_deref(), Some("Started"));
        assert!(!EVENTS_V1.supports_field("involvedObject.kind"));
        assert!(!EVENTS.supports_field("regarding.kind"));
    }

    #[test]
    fn lookups() {
        assert_eq!(by_kind("coordination.k8s.io/v1", "Lease"), Some(&LEASES));
        assert_eq!(by_kind("v1", "Pod"), Some(&PODS));
        assert_eq!(by_kind("apps/v1", "Pod"), None);
        assert_eq!(find("devices.kubeedge.io", "devicemodels"), Some(&DEVICE_MODELS));
        assert_eq!(LEASES.qualified(), "leases.coordination.k8s.io");
    }

    fn widget(version: &'static str) -> &'static ResourceDef {
        intern(ResourceDef {
            group: "example.com",
            version,
            kind: "Widget",
            plural: "widgets",
            singular: "widget",
            short_names: intern_list(&["wd".to_owned()]),
            categories: &[],
            namespaced: true,
            status_subresource: true,
            scale_subresource: false,
            graceful: false,
            generation: true,
            fields: &[],
            storage: "example.com/widgets",
            custom: true,
            stored_version: if version == "v1" { "" } else { "v1" },
        })
    }

    #[test]
    fn a_registry_serves_custom_resources_beside_the_built_in_ones() {
        let reg = Registry::default();
        assert_eq!(reg.find("example.com", "widgets"), None);
        reg.set_custom(vec![widget("v1"), widget("v1beta1")]);
        assert!(std::ptr::eq(widget("v1"), widget("v1")), "one copy per definition");
        assert_eq!(reg.lookup("example.com", "v1beta1", "widgets"), Some(widget("v1beta1")));
        assert_eq!(reg.find("example.com", "widgets"), Some(widget("v1")), "the storage version first");
        assert_eq!(reg.by_kind("example.com/v1beta1", "Widget"), Some(widget("v1beta1")));
        assert_eq!(reg.by_group_kind("example.com", "Widget"), Some(widget("v1")));
        assert_eq!(reg.for_key("/registry/example.com/widgets/d/w"), Some(widget("v1")));
        assert!(reg.serves("example.com", Some("v1beta1")) && !reg.serves("example.com", Some("v2")));
        assert_eq!(reg.lookup("", "v1", "pods"), Some(&PODS));
        assert_eq!(reg.all().len(), ALL.len() + 2);
        reg.set_custom(Vec::new());
        assert_eq!(reg.lookup("example.com", "v1", "widgets"), None);
    }
}
