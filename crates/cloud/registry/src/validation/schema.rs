//! The decode check: JSON types of known fields, as Kubernetes' decoder (built-in kinds) or a CRD's
//! openAPI schema (KubeEdge kinds) sees them.
//!
//! Built-in kinds are described by their Go structs so that a wrong type reads like Go's decoder error,
//! e.g. `json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container`.
//! Only fields are listed whose type matters to validation or that users commonly write; fields not listed
//! are not checked (an unknown field is Kubernetes' strict-decoding business, not this module's).

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

/// A struct of another package than core/v1.
const fn st_in(pkg: Pkg, go: &'static str, fields: &'static [(&'static str, Ty)]) -> Struct {
    Struct { go, pkg, fields, required: &[] }
}

// --- metav1 ---------------------------------------------------------------------------------------------

static OWNER_REFERENCE: Struct = Struct {
    required: &["apiVersion", "kind", "name", "uid"],
    ..st_in(
        Pkg::Meta,
        "OwnerReference",
        &[
            ("apiVersion", Ty::Str),
            ("kind", Ty::Str),
            ("name", Ty::Str),
            ("uid", Ty::Str),
            ("controller", Ty::Bool),
            ("blockOwnerDeletion", Ty::Bool),
        ],
    )
};
static OBJECT_META: Struct = st_in(
    Pkg::Meta,
    "ObjectMeta",
    &[
        ("name", Ty::Str),
        ("generateName", Ty::Str),
        ("namespace", Ty::Str),
        ("selfLink", Ty::Str),
        ("uid", Ty::Str),
        ("resourceVersion", Ty::Str),
        ("generation", Ty::I64),
        ("creationTimestamp", Ty::Time),
        ("deletionTimestamp", Ty::Time),
        ("deletionGracePeriodSeconds", Ty::I64),
        ("labels", Ty::Map(&Ty::Str)),
        ("annotations", Ty::Map(&Ty::Str)),
        ("ownerReferences", Ty::List(&Ty::Obj(&OWNER_REFERENCE))),
        ("finalizers", Ty::List(&Ty::Str)),
        ("managedFields", Ty::Any),
    ],
);

// --- core/v1: Pod ---------------------------------------------------------------------------------------

static CONTAINER_PORT: Struct = Struct {
    required: &["containerPort"],
    ..st(
        "ContainerPort",
        &[
            ("name", Ty::Str),
            ("hostPort", Ty::I32),
            ("containerPort", Ty::I32),
            ("protocol", Ty::Str),
            ("hostIP", Ty::Str),
        ],
    )
};
static LOCAL_REF: Struct = st("LocalObjectReference", &[("name", Ty::Str)]);
static CONFIG_MAP_ENV_SOURCE: Struct = st("ConfigMapEnvSource", &[("name", Ty::Str), ("optional", Ty::Bool)]);
static SECRET_ENV_SOURCE: Struct = st("SecretEnvSource", &[("name", Ty::Str), ("optional", Ty::Bool)]);
static ENV_FROM: Struct = st(
    "EnvFromSource",
    &[
        ("prefix", Ty::Str),
        ("configMapRef", Ty::Obj(&CONFIG_MAP_ENV_SOURCE)),
        ("secretRef", Ty::Obj(&SECRET_ENV_SOURCE)),
    ],
);
static OBJECT_FIELD_SELECTOR: Struct = st("ObjectFieldSelector", &[("apiVersion", Ty::Str), ("fieldPath", Ty::Str)]);
static RESOURCE_FIELD_SELECTOR: Struct =
    st("ResourceFieldSelector", &[("containerName", Ty::Str), ("resource", Ty::Str), ("divisor", Ty::Quantity)]);
static CONFIG_MAP_KEY_SELECTOR: Struct =
    st("ConfigMapKeySelector", &[("name", Ty::Str), ("key", Ty::Str), ("optional", Ty::Bool)]);
static SECRET_KEY_SELECTOR: Struct =
    st("SecretKeySelector", &[("name", Ty::Str), ("key", Ty::Str), ("optional", Ty::Bool)]);
static ENV_VAR_SOURCE: Struct = st(
    "EnvVarSource",
    &[
        ("fieldRef", Ty::Obj(&OBJECT_FIELD_SELECTOR)),
        ("resourceFieldRef", Ty::Obj(&RESOURCE_FIELD_SELECTOR)),
        ("configMapKeyRef", Ty::Obj(&CONFIG_MAP_KEY_SELECTOR)),
        ("secretKeyRef", Ty::Obj(&SECRET_KEY_SELECTOR)),
    ],
);
static ENV_VAR: Struct = Struct {
    required: &["name"],
    ..st("EnvVar", &[("name", Ty::Str), ("value", Ty::Str), ("valueFrom", Ty::Obj(&ENV_VAR_SOURCE))])
};
static RESOURCES: Struct = st(
    "ResourceRequirements",
    &[("limits", Ty::Map(&Ty::Quantity)), ("requests", Ty::Map(&Ty::Quantity)), ("claims", Ty::Any)],
);
static VOLUME_MOUNT: Struct = Struct {
    required: &["name", "mountPath"],
    ..st(
        "VolumeMount",
        &[
            ("name", Ty::Str),
            ("readOnly", Ty::Bool),
            ("mountPath", Ty::Str),
            ("subPath", Ty::Str),
            ("mountPropagation", Ty::Str),
            ("subPathExpr", Ty::Str),
            ("recursiveReadOnly", Ty::Str),
        ],
    )
};
static VOLUME_DEVICE: Struct = st("VolumeDevice", &[("name", Ty::Str), ("devicePath", Ty::Str)]);
static EXEC_ACTION: Struct = st("ExecAction", &[("command", Ty::List(&Ty::Str))]);
static HTTP_HEADER: Struct = st("HTTPHeader", &[("name", Ty::Str), ("value", Ty::Str)]);
static HTTP_GET: Struct = Struct {
    required: &["port"],
    ..st(
        "HTTPGetAction",
        &[
            ("path", Ty::Str),
            ("port", Ty::IntOrStr),
            ("host", Ty::Str),
            ("scheme", Ty::Str),
            ("httpHeaders", Ty::List(&Ty::Obj(&HTTP_HEADER))),
        ],
    )
};
static TCP_SOCKET: Struct =
    Struct { required: &["port"], ..st("TCPSocketAction", &[("port", Ty::IntOrStr), ("host", Ty::Str)]) };
static GRPC_ACTION: Struct = st("GRPCAction", &[("port", Ty::I32), ("service", Ty::Str)]);
static PROBE: Struct = st(
    "Probe",
    &[
        ("exec", Ty::Obj(&EXEC_ACTION)),
        ("httpGet", Ty::Obj(&HTTP_GET)),
        ("tcpSocket", Ty::Obj(&TCP_SOCKET)),
        ("grpc", Ty::Obj(&GRPC_ACTION)),
        ("initialDelaySeconds", Ty::I32),
        ("timeoutSeconds", Ty::I32),
        ("periodSeconds", Ty::I32),
        ("successThreshold", Ty::I32),
        ("failureThreshold", Ty::I32),
        ("terminationGracePeriodSeconds", Ty::I64),
    ],
);
static CAPABILITIES: Struct = st("Capabilities", &[("add", Ty::List(&Ty::Str)), ("drop", Ty::List(&Ty::Str))]);
static SLEEP_ACTION: Struct = Struct { required: &["seconds"], ..st("SleepAction", &[("seconds", Ty::I64)]) };
static LIFECYCLE_HANDLER: Struct = st(
    "LifecycleHandler",
    &[
        ("exec", Ty::Obj(&EXEC_ACTION)),
        ("httpGet", Ty::Obj(&HTTP_GET)),
        ("tcpSocket", Ty::Obj(&TCP_SOCKET)),
        ("sleep", Ty::Obj(&SLEEP_ACTION)),
    ],
);
static LIFECYCLE: Struct = st(
    "Lifecycle",
    &[("postStart", Ty::Obj(&LIFECYCLE_HANDLER)), ("preStop", Ty::Obj(&LIFECYCLE_HANDLER)), ("stopSignal", Ty::Str)],
);
static SECURITY_CONTEXT: Struct = st(
    "SecurityContext",
    &[
        ("privileged", Ty::Bool),
        ("runAsUser", Ty::I64),
        ("runAsGroup", Ty::I64),
        ("runAsNonRoot", Ty::Bool),
        ("readOnlyRootFilesystem", Ty::Bool),
        ("allowPrivilegeEscalation", Ty::Bool),
        ("capabilities", Ty::Obj(&CAPABILITIES)),
        ("procMount", Ty::Str),
    ],
);
static CONTAINER: Struct = Struct {
    required: &["name"],
    ..st(
        "Container",
        &[
            ("name", Ty::Str),
            ("image", Ty::Str),
            ("command", Ty::List(&Ty::Str)),
            ("args", Ty::List(&Ty::Str)),
            ("workingDir", Ty::Str),
            ("ports", Ty::List(&Ty::Obj(&CONTAINER_PORT))),
            ("envFrom", Ty::List(&Ty::Obj(&ENV_FROM))),
            ("env", Ty::List(&Ty::Obj(&ENV_VAR))),
            ("resources", Ty::Obj(&RESOURCES)),
            ("volumeMounts", Ty::List(&Ty::Obj(&VOLUME_MOUNT))),
            ("volumeDevices", Ty::List(&Ty::Obj(&VOLUME_DEVICE))),
            ("livenessProbe", Ty::Obj(&PROBE)),
            ("readinessProbe", Ty::Obj(&PROBE)),
            ("startupProbe", Ty::Obj(&PROBE)),
            ("lifecycle", Ty::Obj(&LIFECYCLE)),
            ("terminationMessagePath", Ty::Str),
            ("terminationMessagePolicy", Ty::Str),
            ("imagePullPolicy", Ty::Str),
            ("securityContext", Ty::Obj(&SECURITY_CONTEXT)),
            ("stdin", Ty::Bool),
            ("stdinOnce", Ty::Bool),
            ("tty", Ty::Bool),
            ("restartPolicy", Ty::Str),
            ("resizePolicy", Ty::Any),
        ],
    )
};
static KEY_TO_PATH: Struct =
    Struct { required: &["key", "path"], ..st("KeyToPath", &[("key", Ty::Str), ("path", Ty::Str), ("mode", Ty::I32)]) };
static SECRET_VOLUME: Struct = st(
    "SecretVolumeSource",
    &[
        ("secretName", Ty::Str),
        ("items", Ty::List(&Ty::Obj(&KEY_TO_PATH))),
        ("defaultMode", Ty::I32),
        ("optional", Ty::Bool),
    ],
);
static CONFIG_MAP_VOLUME: Struct = st(
    "ConfigMapVolumeSource",
    &[("name", Ty::Str), ("items", Ty::List(&Ty::Obj(&KEY_TO_PATH))), ("defaultMode", Ty::I32), ("optional", Ty::Bool)],
);
static EMPTY_DIR: Struct = st("EmptyDirVolumeSource", &[("medium", Ty::Str), ("sizeLimit", Ty::Quantity)]);
static HOST_PATH: Struct =
    Struct { required: &["path"], ..st("HostPathVolumeSource", &[("path", Ty::Str), ("type", Ty::Str)]) };
static PVC_SOURCE: Struct = st("PersistentVolumeClaimVolumeSource", &[("claimName", Ty::Str), ("readOnly", Ty::Bool)]);
static NFS_SOURCE: Struct = st("NFSVolumeSource", &[("server", Ty::Str), ("path", Ty::Str), ("readOnly", Ty::Bool)]);
static DOWNWARD_FILE: Struct = st(
    "DownwardAPIVolumeFile",
    &[
        ("path", Ty::Str),
        ("fieldRef", Ty::Obj(&OBJECT_FIELD_SELECTOR)),
        ("resourceFieldRef", Ty::Obj(&RESOURCE_FIELD_SELECTOR)),
        ("mode", Ty::I32),
    ],
);
static DOWNWARD_API: Struct =
    st("DownwardAPIVolumeSource", &[("items", Ty::List(&Ty::Obj(&DOWNWARD_FILE))), ("defaultMode", Ty::I32)]);
static PROJECTED: Struct = st("ProjectedVolumeSource", &[("sources", Ty::Any), ("defaultMode", Ty::I32)]);
static VOLUME: Struct = Struct {
    required: &["name"],
    ..st(
        "Volume",
        &[
            ("name", Ty::Str),
            ("emptyDir", Ty::Obj(&EMPTY_DIR)),
            ("hostPath", Ty::Obj(&HOST_PATH)),
            ("secret", Ty::Obj(&SECRET_VOLUME)),
            ("configMap", Ty::Obj(&CONFIG_MAP_VOLUME)),
            ("persistentVolumeClaim", Ty::Obj(&PVC_SOURCE)),
            ("nfs", Ty::Obj(&NFS_SOURCE)),
            ("downwardAPI", Ty::Obj(&DOWNWARD_API)),
            ("projected", Ty::Obj(&PROJECTED)),
        ],
    )
};
static TOLERATION: Struct = st(
    "Toleration",
    &[("key", Ty::Str), ("operator", Ty::Str), ("value", Ty::Str), ("effect", Ty::Str), ("tolerationSeconds", Ty::I64)],
);
static HOST_ALIAS: Struct = st("HostAlias", &[("ip", Ty::Str), ("hostnames", Ty::List(&Ty::Str))]);
static POD_SECURITY_CONTEXT: Struct = st(
    "PodSecurityContext",
    &[
        ("runAsUser", Ty::I64),
        ("runAsGroup", Ty::I64),
        ("runAsNonRoot", Ty::Bool),
        ("supplementalGroups", Ty::List(&Ty::I64)),
        ("fsGroup", Ty::I64),
        ("sysctls", Ty::Any),
        ("seccompProfile", Ty::Any),
    ],
);
static POD_DNS_CONFIG: Struct =
    st("PodDNSConfig", &[("nameservers", Ty::List(&Ty::Str)), ("searches", Ty::List(&Ty::Str)), ("options", Ty::Any)]);
static POD_SPEC: Struct = Struct {
    required: &["containers"],
    ..st(
        "PodSpec",
        &[
            ("volumes", Ty::List(&Ty::Obj(&VOLUME))),
            ("initContainers", Ty::List(&Ty::Obj(&CONTAINER))),
            ("containers", Ty::List(&Ty::Obj(&CONTAINER))),
            ("ephemeralContainers", Ty::List(&Ty::Any)),
            ("restartPolicy", Ty::Str),
            ("terminationGracePeriodSeconds", Ty::I64),
            ("activeDeadlineSeconds", Ty::I64),
            ("dnsPolicy", Ty::Str),
            ("nodeSelector", Ty::Map(&Ty::Str)),
            ("serviceAccountName", Ty::Str),
            ("serviceAccount", Ty::Str),
            ("automountServiceAccountToken", Ty::Bool),
            ("nodeName", Ty::Str),
            ("hostNetwork", Ty::Bool),
            ("hostPID", Ty::Bool),
            ("hostIPC", Ty::Bool),
            ("shareProcessNamespace", Ty::Bool),
            ("securityContext", Ty::Obj(&POD_SECURITY_CONTEXT)),
            ("imagePullSecrets", Ty::List(&Ty::Obj(&LOCAL_REF))),
            ("hostname", Ty::Str),
            ("subdomain", Ty::Str),
            ("affinity", Ty::Any),
            ("schedulerName", Ty::Str),
            ("tolerations", Ty::List(&Ty::Obj(&TOLERATION))),
            ("hostAliases", Ty::List(&Ty::Obj(&HOST_ALIAS))),
            ("priorityClassName", Ty::Str),
            ("priority", Ty::I32),
            ("dnsConfig", Ty::Obj(&POD_DNS_CONFIG)),
            ("readinessGates", Ty::Any),
            ("runtimeClassName", Ty::Str),
            ("enableServiceLinks", Ty::Bool),
            ("preemptionPolicy", Ty::Str),
            ("overhead", Ty::Map(&Ty::Quantity)),
            ("topologySpreadConstraints", Ty::Any),
            ("os", Ty::Any),
            ("schedulingGates", Ty::Any),
        ],
    )
};
static POD_STATUS: Struct = st(
    "PodStatus",
    &[
        ("phase", Ty::Str),
        ("qosClass", Ty::Str),
        ("hostIP", Ty::Str),
        ("podIP", Ty::Str),
        ("message", Ty::Str),
        ("reason", Ty::Str),
    ],
);
static POD: Struct =
    st("Pod", &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&POD_SPEC)), ("status", Ty::Obj(&POD_STATUS))]);

// --- core/v1: the other kinds ---------------------------------------------------------------------------

static CONFIG_MAP: Struct = st(
    "ConfigMap",
    &[
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("data", Ty::Map(&Ty::Str)),
        ("binaryData", Ty::Map(&Ty::Bytes)),
        ("immutable", Ty::Bool),
    ],
);
static SECRET: Struct = st(
    "Secret",
    &[
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("data", Ty::Map(&Ty::Bytes)),
        ("stringData", Ty::Map(&Ty::Str)),
        ("type", Ty::Str),
        ("immutable", Ty::Bool),
    ],
);
static SERVICE_PORT: Struct = st(
    "ServicePort",
    &[
        ("name", Ty::Str),
        ("protocol", Ty::Str),
        ("appProtocol", Ty::Str),
        ("port", Ty::I32),
        ("targetPort", Ty::IntOrStr),
        ("nodePort", Ty::I32),
    ],
);
static SESSION_AFFINITY_CONFIG: Struct = st("SessionAffinityConfig", &[("clientIP", Ty::Any)]);
static SERVICE_SPEC: Struct = st(
    "ServiceSpec",
    &[
        ("ports", Ty::List(&Ty::Obj(&SERVICE_PORT))),
        ("selector", Ty::Map(&Ty::Str)),
        ("clusterIP", Ty::Str),
        ("clusterIPs", Ty::List(&Ty::Str)),
        ("type", Ty::Str),
        ("externalIPs", Ty::List(&Ty::Str)),
        ("sessionAffinity", Ty::Str),
        ("loadBalancerIP", Ty::Str),
        ("loadBalancerSourceRanges", Ty::List(&Ty::Str)),
        ("externalName", Ty::Str),
        ("externalTrafficPolicy", Ty::Str),
        ("healthCheckNodePort", Ty::I32),
        ("publishNotReadyAddresses", Ty::Bool),
        ("sessionAffinityConfig", Ty::Obj(&SESSION_AFFINITY_CONFIG)),
        ("ipFamilies", Ty::List(&Ty::Str)),
        ("ipFamilyPolicy", Ty::Str),
        ("allocateLoadBalancerNodePorts", Ty::Bool),
        ("loadBalancerClass", Ty::Str),
        ("internalTrafficPolicy", Ty::Str),
        ("trafficDistribution", Ty::Str),
    ],
);
static SERVICE: Struct =
    st("Service", &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&SERVICE_SPEC)), ("status", Ty::Any)]);
static ENDPOINT_ADDRESS: Struct =
    st("EndpointAddress", &[("ip", Ty::Str), ("hostname", Ty::Str), ("nodeName", Ty::Str), ("targetRef", Ty::Any)]);
static ENDPOINT_PORT: Struct =
    st("EndpointPort", &[("name", Ty::Str), ("port", Ty::I32), ("protocol", Ty::Str), ("appProtocol", Ty::Str)]);
static ENDPOINT_SUBSET: Struct = st(
    "EndpointSubset",
    &[
        ("addresses", Ty::List(&Ty::Obj(&ENDPOINT_ADDRESS))),
        ("notReadyAddresses", Ty::List(&Ty::Obj(&ENDPOINT_ADDRESS))),
        ("ports", Ty::List(&Ty::Obj(&ENDPOINT_PORT))),
    ],
);
static ENDPOINTS: Struct =
    st("Endpoints", &[("metadata", Ty::Obj(&OBJECT_META)), ("subsets", Ty::List(&Ty::Obj(&ENDPOINT_SUBSET)))]);
static NAMESPACE_SPEC: Struct = st("NamespaceSpec", &[("finalizers", Ty::List(&Ty::Str))]);
static NAMESPACE_STATUS: Struct = st("NamespaceStatus", &[("phase", Ty::Str), ("conditions", Ty::Any)]);
static NAMESPACE: Struct = st(
    "Namespace",
    &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&NAMESPACE_SPEC)), ("status", Ty::Obj(&NAMESPACE_STATUS))],
);
static TAINT: Struct =
    st("Taint", &[("key", Ty::Str), ("value", Ty::Str), ("effect", Ty::Str), ("timeAdded", Ty::Time)]);
static NODE_SPEC: Struct = st(
    "NodeSpec",
    &[
        ("podCIDR", Ty::Str),
        ("podCIDRs", Ty::List(&Ty::Str)),
        ("providerID", Ty::Str),
        ("unschedulable", Ty::Bool),
        ("taints", Ty::List(&Ty::Obj(&TAINT))),
        ("externalID", Ty::Str),
    ],
);
static NODE_STATUS: Struct = st(
    "NodeStatus",
    &[
        ("capacity", Ty::Map(&Ty::Quantity)),
        ("allocatable", Ty::Map(&Ty::Quantity)),
        ("phase", Ty::Str),
        ("addresses", Ty::Any),
    ],
);
static NODE: Struct = st(
    "Node",
    &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&NODE_SPEC)), ("status", Ty::Obj(&NODE_STATUS))],
);
static OBJECT_REFERENCE: Struct = st(
    "ObjectReference",
    &[
        ("kind", Ty::Str),
        ("namespace", Ty::Str),
        ("name", Ty::Str),
        ("uid", Ty::Str),
        ("apiVersion", Ty::Str),
        ("resourceVersion", Ty::Str),
        ("fieldPath", Ty::Str),
    ],
);
static EVENT_SOURCE: Struct = st("EventSource", &[("component", Ty::Str), ("host", Ty::Str)]);
static EVENT: Struct = st(
    "Event",
    &[
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("involvedObject", Ty::Obj(&OBJECT_REFERENCE)),
        ("reason", Ty::Str),
        ("message", Ty::Str),
        ("source", Ty::Obj(&EVENT_SOURCE)),
        ("firstTimestamp", Ty::Time),
        ("lastTimestamp", Ty::Time),
        ("count", Ty::I32),
        ("type", Ty::Str),
        ("eventTime", Ty::Any),
        ("series", Ty::Any),
        ("action", Ty::Str),
        ("related", Ty::Obj(&OBJECT_REFERENCE)),
        ("reportingComponent", Ty::Str),
        ("reportingInstance", Ty::Str),
    ],
);
static LEASE_SPEC: Struct = st_in(
    Pkg::Coordination,
    "LeaseSpec",
    &[
        ("holderIdentity", Ty::Str),
        ("leaseDurationSeconds", Ty::I32),
        ("acquireTime", Ty::Any),
        ("renewTime", Ty::Any),
        ("leaseTransitions", Ty::I32),
        ("strategy", Ty::Str),
        ("preferredHolder", Ty::Str),
    ],
);
static LEASE: Struct =
    st_in(Pkg::Coordination, "Lease", &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&LEASE_SPEC))]);

// --- core/v1 and meta/v1 types of the workloads -----------------------------------------------------------

static POD_TEMPLATE_SPEC: Struct =
    st("PodTemplateSpec", &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&POD_SPEC))]);
static LABEL_SELECTOR_REQUIREMENT: Struct = Struct {
    required: &["key", "operator"],
    ..st_in(
        Pkg::Meta,
        "LabelSelectorRequirement",
        &[("key", Ty::Str), ("operator", Ty::Str), ("values", Ty::List(&Ty::Str))],
    )
};
static LABEL_SELECTOR: Struct = st_in(
    Pkg::Meta,
    "LabelSelector",
    &[("matchLabels", Ty::Map(&Ty::Str)), ("matchExpressions", Ty::List(&Ty::Obj(&LABEL_SELECTOR_REQUIREMENT)))],
);
/// `PersistentVolumeClaim`, as far as a StatefulSet's `volumeClaimTemplates` go (refused by validation:
/// this server has no persistent volumes).
static PERSISTENT_VOLUME_CLAIM: Struct = st(
    "PersistentVolumeClaim",
    &[
        ("apiVersion", Ty::Str),
        ("kind", Ty::Str),
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("spec", Ty::Any),
        ("status", Ty::Any),
    ],
);

// --- apps/v1 ----------------------------------------------------------------------------------------------

static ROLLING_UPDATE_DEPLOYMENT: Struct =
    st_in(Pkg::Apps, "RollingUpdateDeployment", &[("maxUnavailable", Ty::IntOrStr), ("maxSurge", Ty::IntOrStr)]);
static DEPLOYMENT_STRATEGY: Struct = st_in(
    Pkg::Apps,
    "DeploymentStrategy",
    &[("type", Ty::Str), ("rollingUpdate", Ty::Obj(&ROLLING_UPDATE_DEPLOYMENT))],
);
static DEPLOYMENT_SPEC: Struct = Struct {
    required: &["selector", "template"],
    ..st_in(
        Pkg::Apps,
        "DeploymentSpec",
        &[
            ("replicas", Ty::I32),
            ("selector", Ty::Obj(&LABEL_SELECTOR)),
            ("template", Ty::Obj(&POD_TEMPLATE_SPEC)),
            ("strategy", Ty::Obj(&DEPLOYMENT_STRATEGY)),
            ("minReadySeconds", Ty::I32),
            ("revisionHistoryLimit", Ty::I32),
            ("paused", Ty::Bool),
            ("progressDeadlineSeconds", Ty::I32),
        ],
    )
};
static DEPLOYMENT_CONDITION: Struct = Struct {
    required: &["type", "status"],
    ..st_in(
        Pkg::Apps,
        "DeploymentCondition",
        &[
            ("type", Ty::Str),
            ("status", Ty::Str),
            ("lastUpdateTime", Ty::Time),
            ("lastTransitionTime", Ty::Time),
            ("reason", Ty::Str),
            ("message", Ty::Str),
        ],
    )
};
static DEPLOYMENT_STATUS: Struct = st_in(
    Pkg::Apps,
    "DeploymentStatus",
    &[
        ("observedGeneration", Ty::I64),
        ("replicas", Ty::I32),
        ("updatedReplicas", Ty::I32),
        ("readyReplicas", Ty::I32),
        ("availableReplicas", Ty::I32),
        ("unavailableReplicas", Ty::I32),
        ("conditions", Ty::List(&Ty::Obj(&DEPLOYMENT_CONDITION))),
        ("collisionCount", Ty::I32),
    ],
);
static DEPLOYMENT: Struct = st_in(
    Pkg::Apps,
    "Deployment",
    &[
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("spec", Ty::Obj(&DEPLOYMENT_SPEC)),
        ("status", Ty::Obj(&DEPLOYMENT_STATUS)),
    ],
);
static REPLICA_SET_SPEC: Struct = Struct {
    required: &["selector"],
    ..st_in(
        Pkg::Apps,
        "ReplicaSetSpec",
        &[
            ("replicas", Ty::I32),
            ("minReadySeconds", Ty::I32),
            ("selector", Ty::Obj(&LABEL_SELECTOR)),
            ("template", Ty::Obj(&POD_TEMPLATE_SPEC)),
        ],
    )
};
static REPLICA_SET_CONDITION: Struct = Struct {
    required: &["type", "status"],
    ..st_in(
        Pkg::Apps,
        "ReplicaSetCondition",
        &[
            ("type", Ty::Str),
            ("status", Ty::Str),
            ("lastTransitionTime", Ty::Time),
            ("reason", Ty::Str),
            ("message", Ty::Str),
        ],
    )
};
static REPLICA_SET_STATUS: Struct = Struct {
    required: &["replicas"],
    ..st_in(
        Pkg::Apps,
        "ReplicaSetStatus",
        &[
            ("replicas", Ty::I32),
            ("fullyLabeledReplicas", Ty::I32),
            ("readyReplicas", Ty::I32),
            ("availableReplicas", Ty::I32),
            ("observedGeneration", Ty::I64),
            ("conditions", Ty::List(&Ty::Obj(&REPLICA_SET_CONDITION))),
        ],
    )
};
static REPLICA_SET: Struct = st_in(
    Pkg::Apps,
    "ReplicaSet",
    &[
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("spec", Ty::Obj(&REPLICA_SET_SPEC)),
        ("status", Ty::Obj(&REPLICA_SET_STATUS)),
    ],
);
static ROLLING_UPDATE_DAEMON_SET: Struct =
    st_in(Pkg::Apps, "RollingUpdateDaemonSet", &[("maxUnavailable", Ty::IntOrStr), ("maxSurge", Ty::IntOrStr)]);
static DAEMON_SET_UPDATE_STRATEGY: Struct = st_in(
    Pkg::Apps,
    "DaemonSetUpdateStrategy",
    &[("type", Ty::Str), ("rollingUpdate", Ty::Obj(&ROLLING_UPDATE_DAEMON_SET))],
);
static DAEMON_SET_SPEC: Struct = Struct {
    required: &["selector", "template"],
    ..st_in(
        Pkg::Apps,
        "DaemonSetSpec",
        &[
            ("selector", Ty::Obj(&LABEL_SELECTOR)),
            ("template", Ty::Obj(&POD_TEMPLATE_SPEC)),
            ("updateStrategy", Ty::Obj(&DAEMON_SET_UPDATE_STRATEGY)),
            ("minReadySeconds", Ty::I32),
            ("revisionHistoryLimit", Ty::I32),
        ],
    )
};
static DAEMON_SET_CONDITION: Struct = Struct {
    required: &["type", "status"],
    ..st_in(
        Pkg::Apps,
        "DaemonSetCondition",
        &[
            ("type", Ty::Str),
            ("status", Ty::Str),
            ("lastTransitionTime", Ty::Time),
            ("reason", Ty::Str),
            ("message", Ty::Str),
        ],
    )
};
static DAEMON_SET_STATUS: Struct = Struct {
    required: &["currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"],
    ..st_in(
        Pkg::Apps,
        "DaemonSetStatus",
        &[
            ("currentNumberScheduled", Ty::I32),
            ("numberMisscheduled", Ty::I32),
            ("desiredNumberScheduled", Ty::I32),
            ("numberReady", Ty::I32),
            ("observedGeneration", Ty::I64),
            ("updatedNumberScheduled", Ty::I32),
            ("numberAvailable", Ty::I32),
            ("numberUnavailable", Ty::I32),
            ("collisionCount", Ty::I32),
            ("conditions", Ty::List(&Ty::Obj(&DAEMON_SET_CONDITION))),
        ],
    )
};
static DAEMON_SET: Struct = st_in(
    Pkg::Apps,
    "DaemonSet",
    &[
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("spec", Ty::Obj(&DAEMON_SET_SPEC)),
        ("status", Ty::Obj(&DAEMON_SET_STATUS)),
    ],
);
static ROLLING_UPDATE_STATEFUL_SET: Struct =
    st_in(Pkg::Apps, "RollingUpdateStatefulSetStrategy", &[("partition", Ty::I32), ("maxUnavailable", Ty::IntOrStr)]);
static STATEFUL_SET_UPDATE_STRATEGY: Struct = st_in(
    Pkg::Apps,
    "StatefulSetUpdateStrategy",
    &[("type", Ty::Str), ("rollingUpdate", Ty::Obj(&ROLLING_UPDATE_STATEFUL_SET))],
);
static PVC_RETENTION_POLICY: Struct = st_in(
    Pkg::Apps,
    "StatefulSetPersistentVolumeClaimRetentionPolicy",
    &[("whenDeleted", Ty::Str), ("whenScaled", Ty::Str)],
);
static STATEFUL_SET_ORDINALS: Struct = st_in(Pkg::Apps, "StatefulSetOrdinals", &[("start", Ty::I32)]);
static STATEFUL_SET_SPEC: Struct = Struct {
    required: &["selector", "template", "serviceName"],
    ..st_in(
        Pkg::Apps,
        "StatefulSetSpec",
        &[
            ("replicas", Ty::I32),
            ("selector", Ty::Obj(&LABEL_SELECTOR)),
            ("template", Ty::Obj(&POD_TEMPLATE_SPEC)),
            ("volumeClaimTemplates", Ty::List(&Ty::Obj(&PERSISTENT_VOLUME_CLAIM))),
            ("serviceName", Ty::Str),
            ("podManagementPolicy", Ty::Str),
            ("updateStrategy", Ty::Obj(&STATEFUL_SET_UPDATE_STRATEGY)),
            ("revisionHistoryLimit", Ty::I32),
            ("minReadySeconds", Ty::I32),
            ("persistentVolumeClaimRetentionPolicy", Ty::Obj(&PVC_RETENTION_POLICY)),
            ("ordinals", Ty::Obj(&STATEFUL_SET_ORDINALS)),
        ],
    )
};
static STATEFUL_SET_CONDITION: Struct = Struct {
    required: &["type", "status"],
    ..st_in(
        Pkg::Apps,
        "StatefulSetCondition",
        &[
            ("type", Ty::Str),
            ("status", Ty::Str),
            ("lastTransitionTime", Ty::Time),
            ("reason", Ty::Str),
            ("message", Ty::Str),
        ],
    )
};
static STATEFUL_SET_STATUS: Struct = Struct {
    required: &["replicas"],
    ..st_in(
        Pkg::Apps,
        "StatefulSetStatus",
        &[
            ("observedGeneration", Ty::I64),
            ("replicas", Ty::I32),
            ("readyReplicas", Ty::I32),
            ("currentReplicas", Ty::I32),
            ("updatedReplicas", Ty::I32),
            ("currentRevision", Ty::Str),
            ("updateRevision", Ty::Str),
            ("collisionCount", Ty::I32),
            ("conditions", Ty::List(&Ty::Obj(&STATEFUL_SET_CONDITION))),
            ("availableReplicas", Ty::I32),
        ],
    )
};
static STATEFUL_SET: Struct = st_in(
    Pkg::Apps,
    "StatefulSet",
    &[
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("spec", Ty::Obj(&STATEFUL_SET_SPEC)),
        ("status", Ty::Obj(&STATEFUL_SET_STATUS)),
    ],
);
static CONTROLLER_REVISION: Struct = Struct {
    required: &["revision"],
    ..st_in(
        Pkg::Apps,
        "ControllerRevision",
        &[("metadata", Ty::Obj(&OBJECT_META)), ("data", Ty::Raw), ("revision", Ty::I64)],
    )
};

// --- batch/v1 ---------------------------------------------------------------------------------------------

static ON_EXIT_CODES: Struct = Struct {
    required: &["operator", "values"],
    ..st_in(
        Pkg::Batch,
        "PodFailurePolicyOnExitCodesRequirement",
        &[("containerName", Ty::Str), ("operator", Ty::Str), ("values", Ty::List(&Ty::I32))],
    )
};
static ON_POD_CONDITIONS: Struct = Struct {
    required: &["type", "status"],
    ..st_in(Pkg::Batch, "PodFailurePolicyOnPodConditionsPattern", &[("type", Ty::Str), ("status", Ty::Str)])
};
static POD_FAILURE_POLICY_RULE: Struct = Struct {
    required: &["action"],
    ..st_in(
        Pkg::Batch,
        "PodFailurePolicyRule",
        &[
            ("action", Ty::Str),
            ("onExitCodes", Ty::Obj(&ON_EXIT_CODES)),
            ("onPodConditions", Ty::List(&Ty::Obj(&ON_POD_CONDITIONS))),
        ],
    )
};
static POD_FAILURE_POLICY: Struct = Struct {
    required: &["rules"],
    ..st_in(Pkg::Batch, "PodFailurePolicy", &[("rules", Ty::List(&Ty::Obj(&POD_FAILURE_POLICY_RULE)))])
};
static SUCCESS_POLICY_RULE: Struct =
    st_in(Pkg::Batch, "SuccessPolicyRule", &[("succeededIndexes", Ty::Str), ("succeededCount", Ty::I32)]);
static SUCCESS_POLICY: Struct = Struct {
    required: &["rules"],
    ..st_in(Pkg::Batch, "SuccessPolicy", &[("rules", Ty::List(&Ty::Obj(&SUCCESS_POLICY_RULE)))])
};
static JOB_SPEC: Struct = Struct {
    required: &["template"],
    ..st_in(
        Pkg::Batch,
        "JobSpec",
        &[
            ("parallelism", Ty::I32),
            ("completions", Ty::I32),
            ("activeDeadlineSeconds", Ty::I64),
            ("podFailurePolicy", Ty::Obj(&POD_FAILURE_POLICY)),
            ("successPolicy", Ty::Obj(&SUCCESS_POLICY)),
            ("backoffLimit", Ty::I32),
            ("backoffLimitPerIndex", Ty::I32),
            ("maxFailedIndexes", Ty::I32),
            ("selector", Ty::Obj(&LABEL_SELECTOR)),
            ("manualSelector", Ty::Bool),
            ("template", Ty::Obj(&POD_TEMPLATE_SPEC)),
            ("ttlSecondsAfterFinished", Ty::I32),
            ("completionMode", Ty::Str),
            ("suspend", Ty::Bool),
            ("podReplacementPolicy", Ty::Str),
            ("managedBy", Ty::Str),
        ],
    )
};
static JOB_CONDITION: Struct = Struct {
    required: &["type", "status"],
    ..st_in(
        Pkg::Batch,
        "JobCondition",
        &[
            ("type", Ty::Str),
            ("status", Ty::Str),
            ("lastProbeTime", Ty::Time),
            ("lastTransitionTime", Ty::Time),
            ("reason", Ty::Str),
            ("message", Ty::Str),
        ],
    )
};
static UNCOUNTED_TERMINATED_PODS: Struct =
    st_in(Pkg::Batch, "UncountedTerminatedPods", &[("succeeded", Ty::List(&Ty::Str)), ("failed", Ty::List(&Ty::Str))]);
static JOB_STATUS: Struct = st_in(
    Pkg::Batch,
    "JobStatus",
    &[
        ("conditions", Ty::List(&Ty::Obj(&JOB_CONDITION))),
        ("startTime", Ty::Time),
        ("completionTime", Ty::Time),
        ("active", Ty::I32),
        ("succeeded", Ty::I32),
        ("failed", Ty::I32),
        ("terminating", Ty::I32),
        ("completedIndexes", Ty::Str),
        ("failedIndexes", Ty::Str),
        ("uncountedTerminatedPods", Ty::Obj(&UNCOUNTED_TERMINATED_PODS)),
        ("ready", Ty::I32),
    ],
);
static JOB: Struct = st_in(
    Pkg::Batch,
    "Job",
    &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&JOB_SPEC)), ("status", Ty::Obj(&JOB_STATUS))],
);
static JOB_TEMPLATE_SPEC: Struct =
    st_in(Pkg::Batch, "JobTemplateSpec", &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&JOB_SPEC))]);
static CRON_JOB_SPEC: Struct = Struct {
    required: &["schedule", "jobTemplate"],
    ..st_in(
        Pkg::Batch,
        "CronJobSpec",
        &[
            ("schedule", Ty::Str),
            ("timeZone", Ty::Str),
            ("startingDeadlineSeconds", Ty::I64),
            ("concurrencyPolicy", Ty::Str),
            ("suspend", Ty::Bool),
            ("jobTemplate", Ty::Obj(&JOB_TEMPLATE_SPEC)),
            ("successfulJobsHistoryLimit", Ty::I32),
            ("failedJobsHistoryLimit", Ty::I32),
        ],
    )
};
static CRON_JOB_STATUS: Struct = st_in(
    Pkg::Batch,
    "CronJobStatus",
    &[
        ("active", Ty::List(&Ty::Obj(&OBJECT_REFERENCE))),
        ("lastScheduleTime", Ty::Time),
        ("lastSuccessfulTime", Ty::Time),
    ],
);
static CRON_JOB: Struct = st_in(
    Pkg::Batch,
    "CronJob",
    &[("metadata", Ty::Obj(&OBJECT_META)), ("spec", Ty::Obj(&CRON_JOB_SPEC)), ("status", Ty::Obj(&CRON_JOB_STATUS))],
);

// --- policy/v1 --------------------------------------------------------------------------------------------

static META_CONDITION: Struct = Struct {
    required: &["type", "status", "lastTransitionTime", "reason", "message"],
    ..st_in(
        Pkg::Meta,
        "Condition",
        &[
            ("type", Ty::Str),
            ("status", Ty::Str),
            ("observedGeneration", Ty::I64),
            ("lastTransitionTime", Ty::Time),
            ("reason", Ty::Str),
            ("message", Ty::Str),
        ],
    )
};
static POD_DISRUPTION_BUDGET_SPEC: Struct = st_in(
    Pkg::Policy,
    "PodDisruptionBudgetSpec",
    &[
        ("minAvailable", Ty::IntOrStr),
        ("selector", Ty::Obj(&LABEL_SELECTOR)),
        ("maxUnavailable", Ty::IntOrStr),
        ("unhealthyPodEvictionPolicy", Ty::Str),
    ],
);
static POD_DISRUPTION_BUDGET_STATUS: Struct = Struct {
    required: &["disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"],
    ..st_in(
        Pkg::Policy,
        "PodDisruptionBudgetStatus",
        &[
            ("observedGeneration", Ty::I64),
            ("disruptedPods", Ty::Map(&Ty::Time)),
            ("disruptionsAllowed", Ty::I32),
            ("currentHealthy", Ty::I32),
            ("desiredHealthy", Ty::I32),
            ("expectedPods", Ty::I32),
            ("conditions", Ty::List(&Ty::Obj(&META_CONDITION))),
        ],
    )
};
static POD_DISRUPTION_BUDGET: Struct = st_in(
    Pkg::Policy,
    "PodDisruptionBudget",
    &[
        ("metadata", Ty::Obj(&OBJECT_META)),
        ("spec", Ty::Obj(&POD_DISRUPTION_BUDGET_SPEC)),
        ("status", Ty::Obj(&POD_DISRUPTION_BUDGET_STATUS)),
    ],
);

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

/// The schema of a kind's objects; `None` for a kind not described here.
pub(crate) fn root(group: &str, kind: &str) -> Option<&'static Struct> {
    Some(match (group, kind) {
        ("apps", "Deployment") => &DEPLOYMENT,
        ("apps", "ReplicaSet") => &REPLICA_SET,
        ("apps", "DaemonSet") => &DAEMON_SET,
        ("apps", "StatefulSet") => &STATEFUL_SET,
        ("apps", "ControllerRevision") => &CONTROLLER_REVISION,
        ("batch", "Job") => &JOB,
        ("batch", "CronJob") => &CRON_JOB,
        ("policy", "PodDisruptionBudget") => &POD_DISRUPTION_BUDGET,
        ("", "Pod") => &POD,
        ("", "ConfigMap") => &CONFIG_MAP,
        ("", "Secret") => &SECRET,
        ("", "Service") => &SERVICE,
        ("", "Endpoints") => &ENDPOINTS,
        ("", "Namespace") => &NAMESPACE,
        ("", "Node") => &NODE,
        ("", "Event") => &EVENT,
        ("coordination.k8s.io", "Lease") => &LEASE,
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
