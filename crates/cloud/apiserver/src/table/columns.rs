//! The column definitions per kind, as Kubernetes' printers declare them (names, types, priorities, descriptions).
//!
//! Names are written as Kubernetes writes them ("Port(s)", "Nominated Node"); kubectl upper-cases them for the
//! header. Descriptions are the API field documentation Kubernetes puts there; kubectl does not show them.

use super::Column;

/// `metadata.name` documentation, the description of every NAME column.
const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some \
resources may allow a client to request the generation of an appropriate name automatically. Name is primarily \
intended for creation idempotence and configuration definition. Cannot be updated. More info: \
https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `metadata.creationTimestamp` documentation, the description of every AGE column.
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. \
It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. \
It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: \
https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The NAME column every kind starts with (Event carries it last, as a wide column).
const NAME: Column = Column { name: "Name", kind: "string", format: "name", description: NAME_DESC, priority: 0 };

/// The AGE column of the built-in printers: a string cell already rendered as a human duration.
const AGE: Column = Column { name: "Age", kind: "string", format: "", description: AGE_DESC, priority: 0 };

/// A plain string column shown by default.
const fn text(name: &'static str, description: &'static str) -> Column {
    Column { name, kind: "string", format: "", description, priority: 0 }
}

/// A string column shown only with `-o wide`.
const fn wide(name: &'static str, description: &'static str) -> Column {
    Column { name, kind: "string", format: "", description, priority: 1 }
}

/// An integer column shown by default.
const fn integer(name: &'static str, description: &'static str) -> Column {
    Column { name, kind: "integer", format: "", description, priority: 0 }
}

/// core/v1 Pod.
pub(super) const POD: &[Column] = &[
    NAME,
    text("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    text("Status", "The aggregate status of the containers in this pod."),
    text(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last container in this \
         pod has restarted.",
    ),
    AGE,
    wide("IP", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
    wide(
        "Node",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by \
         the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes \
         responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to \
         be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
    ),
    wide(
        "Nominated Node",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled \
         right away as preemption victims receive their graceful termination periods. This field does not guarantee \
         that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes \
         become available sooner. Scheduler may also decide to give the resources on this node to a higher priority \
         pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when \
         the pod is scheduled.",
    ),
    wide(
        "Readiness Gates",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its \
         containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More \
         info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
    ),
];

/// `status.addresses` documentation, shared by both node IP columns.
const NODE_ADDRESSES_DESC: &str = "List of addresses reachable to the node. Queried from cloud provider, if \
available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared \
as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. \
Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should \
assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may \
not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API \
(status.hostIP).";

/// core/v1 Node.
pub(super) const NODE: &[Column] = &[
    NAME,
    text("Status", "The status of the node"),
    text("Roles", "The roles of the node"),
    AGE,
    text("Version", "Kubelet Version reported by the node."),
    wide("Internal-IP", NODE_ADDRESSES_DESC),
    wide("External-IP", NODE_ADDRESSES_DESC),
    wide("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
    wide("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
    wide(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
    ),
];

/// core/v1 Namespace.
pub(super) const NAMESPACE: &[Column] = &[NAME, text("Status", "The status of the namespace"), AGE];

/// core/v1 ConfigMap. DATA is declared "string" although its cell is a number, as in Kubernetes.
pub(super) const CONFIG_MAP: &[Column] = &[
    NAME,
    text(
        "Data",
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. \
         Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap \
         with the keys in the BinaryData field, this is enforced during validation process.",
    ),
    AGE,
];

/// core/v1 Secret. DATA is declared "string" although its cell is a number, as in Kubernetes.
pub(super) const SECRET: &[Column] = &[
    NAME,
    text(
        "Type",
        "Used to facilitate programmatic handling of secret data. More info: \
         https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
    ),
    text(
        "Data",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The \
         serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly \
         non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
    ),
    AGE,
];

/// core/v1 Service.
pub(super) const SERVICE: &[Column] = &[
    NAME,
    text(
        "Type",
        "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, \
         ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for \
         load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual \
         construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is \
         allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds \
         on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \
         \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) \
         which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified \
         externalName. Several other fields do not apply to ExternalName services. More info: \
         https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
    ),
    text(
        "Cluster-IP",
        "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified \
         manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; \
         otherwise creation of the service will fail. This field may not be changed through updates unless the type \
         field is also being changed to ExternalName (which requires this field to be blank) or the type field is \
         being changed from ExternalName (in which case this field may optionally be specified, as describe above).  \
         Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \
         \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and \
         proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is \
         specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when \
         updating a Service to type ExternalName. More info: \
         https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    text(
        "External-IP",
        "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this \
         service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives \
         at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes \
         system.",
    ),
    text(
        "Port(s)",
        "The list of ports that are exposed by this service. More info: \
         https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    AGE,
    wide(
        "Selector",
        "Route service traffic to pods with label keys and values matching this selector. If empty or not present, \
         the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. \
         Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: \
         https://kubernetes.io/docs/concepts/services-networking/service/",
    ),
];

/// core/v1 Endpoints.
pub(super) const ENDPOINTS: &[Column] = &[
    NAME,
    text(
        "Endpoints",
        "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs \
         they share. A single address with multiple ports, some of which are ready and some of which are not (because \
         they come from different containers) will result in the address being displayed in different subsets for the \
         different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of \
         addresses and ports that comprise a service.",
    ),
    AGE,
];

/// core/v1 Event: NAME comes last and only with `-o wide`; COUNT is declared "string" but carries a number.
pub(super) const EVENT: &[Column] = &[
    text("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    text("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    text(
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the transition into the \
         object's current status.",
    ),
    text("Object", "The object that this event is about."),
    wide(
        "Subobject",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid \
         JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object \
         reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \
         \"name\" refers to the name of the container that triggered the event) or if no container name is specified \
         \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some \
         well-defined way of referencing a part of an object.",
    ),
    wide("Source", "The component reporting this event. Should be a short machine understandable string."),
    text("Message", "A human-readable description of the status of this operation."),
    wide("First Seen", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
    wide("Count", "The number of times this event has occurred."),
    Column { priority: 1, ..NAME },
];

/// coordination.k8s.io/v1 Lease.
pub(super) const LEASE: &[Column] = &[
    NAME,
    text(
        "Holder",
        "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is \
         used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
    ),
    AGE,
];

/// What the CRD handler serves for a custom resource without `additionalPrinterColumns`: NAME, then AGE as a
/// column of type "date" read from `.metadata.creationTimestamp`. The server still renders the date cell as a
/// human duration ("5s"), so kubectl, which prints cells as they come, shows an age.
/// CustomResourceDefinitions: apiextensions serves them with the default table convertor, whose second
/// column is the creation time itself (RFC 3339), not an age.
pub(super) const CUSTOM_RESOURCE_DEFINITION: &[Column] =
    &[NAME, Column { name: "Created At", kind: "date", format: "", description: AGE_DESC, priority: 0 }];

pub(super) const CUSTOM_RESOURCE: &[Column] =
    &[NAME, Column { name: "Age", kind: "date", format: "", description: AGE_DESC, priority: 0 }];

// --- apps/v1 and batch/v1 workloads. Kubernetes takes most descriptions from the extensions/v1beta1,
// apps/v1beta1 and batch/v1beta1 documentation of the fields, whatever version is served; so do these. ---

/// The wide CONTAINERS column of every workload kind.
const CONTAINERS: Column = wide("Containers", "Names of each container in the template.");

/// The wide IMAGES column of every workload kind.
const IMAGES: Column = wide("Images", "Images referenced by each container in the template.");

/// The READY column of Deployment and StatefulSet ("ready/desired").
const READY_PODS: Column = text("Ready", "Number of the pod with ready state");

/// `spec.selector` documentation of batch Job, the description of the Job and CronJob SELECTOR columns.
const JOB_SELECTOR_DESC: &str = "A label query over pods that should match the pod count. Normally, the system sets \
this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

/// apps/v1 Deployment. UP-TO-DATE and AVAILABLE are declared "string" although their cells are numbers.
pub(super) const DEPLOYMENT: &[Column] = &[
    NAME,
    READY_PODS,
    text(
        "Up-to-date",
        "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
    ),
    text(
        "Available",
        "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by \
         this deployment.",
    ),
];

/// apps/v1 ReplicaSet.
pub(super) const REPLICA_SET: &[Column] = &[
    NAME,
    integer(
        "Desired",
        "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and \
         unspecified. Defaults to 1. More info: \
         https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller",
    ),
    integer(
        "Current",
        "Replicas is the most recently observed number of replicas. More info: \
         https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller",
    ),
    integer("Ready", "The number of ready replicas for this replica set."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "Selector is a label query over pods that should match the replica count. If the selector is empty, it is \
         defaulted to the labels present on the pod template. Label keys and values that must match in order to be \
         controlled by this replica set. More info: \
         https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

/// apps/v1 DaemonSet.
pub(super) const DAEMON_SET: &[Column] = &[
    NAME,
    integer(
        "Desired",
        "The total number of nodes that should be running the daemon pod (including nodes correctly running the \
         daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    integer(
        "Current",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More \
         info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    integer(
        "Ready",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running \
         and ready.",
    ),
    integer("Up-to-date", "The total number of nodes that are running updated daemon pod"),
    integer(
        "Available",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running \
         and available (ready for at least spec.minReadySeconds)",
    ),
    text(
        "Node Selector",
        "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a \
         node's labels for the pod to be scheduled on that node. More info: \
         https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, \
         defaulted to labels on Pod template. More info: \
         https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

/// apps/v1 StatefulSet: no SELECTOR column.
pub(super) const STATEFUL_SET: &[Column] = &[NAME, READY_PODS, AGE, CONTAINERS, IMAGES];

/// apps/v1 ControllerRevision. REVISION is declared "string" although its cell is a number.
pub(super) const CONTROLLER_REVISION: &[Column] = &[
    NAME,
    text("Controller", "Controller of the object"),
    text("Revision", "revision indicates the revision of the state represented by Data."),
    AGE,
];

/// batch/v1 Job.
pub(super) const JOB: &[Column] = &[
    NAME,
    text("Status", "Status of the job."),
    text(
        "Completions",
        "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. \
         However, it may decrease in reaction to scale down of elastic indexed jobs.",
    ),
    text("Duration", "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", JOB_SELECTOR_DESC),
];

/// batch/v1 CronJob. SUSPEND is declared "boolean" although its cell is the string "True" or "False".
pub(super) const CRON_JOB: &[Column] = &[
    NAME,
    text("Schedule", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    text(
        "Timezone",
        "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. \
         If not specified, this will default to the time zone of the kube-controller-manager process. The set of \
         valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API \
         server during CronJob validation and the controller manager during execution. If no system-wide time zone \
         database can be found a bundled version of the database is used instead. If the time zone name becomes \
         invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop \
         creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can \
         be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
    ),
    Column {
        name: "Suspend",
        kind: "boolean",
        format: "",
        description: "This flag tells the controller to suspend subsequent executions, it does not apply to already \
                      started executions.  Defaults to false.",
        priority: 0,
    },
    integer("Active", "A list of pointers to currently running jobs."),
    text("Last Schedule", "Information when was the last time the job was successfully scheduled."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", JOB_SELECTOR_DESC),
];

/// policy/v1 PodDisruptionBudget.
pub(super) const POD_DISRUPTION_BUDGET: &[Column] = &[
    NAME,
    text("Min Available", "The minimum number of pods that must be available"),
    text("Max Unavailable", "The maximum number of pods that may be unavailable"),
    integer("Allowed Disruptions", "Calculated number of pods that may be disrupted at this time"),
    AGE,
];
