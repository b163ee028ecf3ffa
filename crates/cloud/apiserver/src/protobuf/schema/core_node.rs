//! Descriptors for core/v1 `Node` with its spec and status.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::meta::{OBJECT_META};
use super::{BOOL, I32, I64, Message, QUANTITY, STR, TIME, map, msg, opt, ptr, rep, req};

/// core/v1 `Node`.
pub(crate) static NODE: Message = Message::new(
    "Node",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&NODE_SPEC)),
        opt(3, "status", msg(&NODE_STATUS)),
    ],
);

/// core/v1 `NodeStatus`.
pub(crate) static NODE_STATUS: Message = Message::new(
    "NodeStatus",
    &[
        map(1, "capacity", QUANTITY),
        map(2, "allocatable", QUANTITY),
        opt(3, "phase", STR),
        rep(4, "conditions", msg(&NODE_CONDITION)),
        rep(5, "addresses", msg(&NODE_ADDRESS)),
        opt(6, "daemonEndpoints", msg(&NODE_DAEMON_ENDPOINTS)),
        opt(7, "nodeInfo", msg(&NODE_SYSTEM_INFO)),
        rep(8, "images", msg(&CONTAINER_IMAGE)),
        rep(9, "volumesInUse", STR),
        rep(10, "volumesAttached", msg(&ATTACHED_VOLUME)),
        opt(11, "config", msg(&NODE_CONFIG_STATUS)),
        rep(12, "runtimeHandlers", msg(&NODE_RUNTIME_HANDLER)),
        opt(13, "features", msg(&NODE_FEATURES)),
        rep(14, "declaredFeatures", STR),
    ],
);

/// core/v1 `NodeFeatures`.
pub(crate) static NODE_FEATURES: Message = Message::new(
    "NodeFeatures",
    &[
        ptr(1, "supplementalGroupsPolicy", BOOL),
    ],
);

/// core/v1 `NodeRuntimeHandler`.
pub(crate) static NODE_RUNTIME_HANDLER: Message = Message::new(
    "NodeRuntimeHandler",
    &[
        req(1, "name", STR),
        opt(2, "features", msg(&NODE_RUNTIME_HANDLER_FEATURES)),
    ],
);

/// core/v1 `NodeRuntimeHandlerFeatures`.
pub(crate) static NODE_RUNTIME_HANDLER_FEATURES: Message = Message::new(
    "NodeRuntimeHandlerFeatures",
    &[
        ptr(1, "recursiveReadOnlyMounts", BOOL),
        ptr(2, "userNamespaces", BOOL),
    ],
);

/// core/v1 `NodeConfigStatus`.
pub(crate) static NODE_CONFIG_STATUS: Message = Message::new(
    "NodeConfigStatus",
    &[
        opt(1, "assigned", msg(&NODE_CONFIG_SOURCE)),
        opt(2, "active", msg(&NODE_CONFIG_SOURCE)),
        opt(3, "lastKnownGood", msg(&NODE_CONFIG_SOURCE)),
        opt(4, "error", STR),
    ],
);

/// core/v1 `AttachedVolume`.
pub(crate) static ATTACHED_VOLUME: Message = Message::new(
    "AttachedVolume",
    &[
        req(1, "name", STR),
        req(2, "devicePath", STR),
    ],
);

/// core/v1 `ContainerImage`.
pub(crate) static CONTAINER_IMAGE: Message = Message::new(
    "ContainerImage",
    &[
        rep(1, "names", STR),
        opt(2, "sizeBytes", I64),
    ],
);

/// core/v1 `NodeSystemInfo`.
pub(crate) static NODE_SYSTEM_INFO: Message = Message::new(
    "NodeSystemInfo",
    &[
        req(1, "machineID", STR),
        req(2, "systemUUID", STR),
        req(3, "bootID", STR),
        req(4, "kernelVersion", STR),
        req(5, "osImage", STR),
        req(6, "containerRuntimeVersion", STR),
        req(7, "kubeletVersion", STR),
        req(8, "kubeProxyVersion", STR),
        req(9, "operatingSystem", STR),
        req(10, "architecture", STR),
        opt(11, "swap", msg(&NODE_SWAP_STATUS)),
    ],
);

/// core/v1 `NodeSwapStatus`.
pub(crate) static NODE_SWAP_STATUS: Message = Message::new(
    "NodeSwapStatus",
    &[
        ptr(1, "capacity", I64),
    ],
);

/// core/v1 `NodeDaemonEndpoints`.
pub(crate) static NODE_DAEMON_ENDPOINTS: Message = Message::new(
    "NodeDaemonEndpoints",
    &[
        opt(1, "kubeletEndpoint", msg(&DAEMON_ENDPOINT)),
    ],
);

/// core/v1 `DaemonEndpoint`.
pub(crate) static DAEMON_ENDPOINT: Message = Message::new(
    "DaemonEndpoint",
    &[
        req(1, "Port", I32),
    ],
);

/// core/v1 `NodeAddress`.
pub(crate) static NODE_ADDRESS: Message = Message::new(
    "NodeAddress",
    &[
        req(1, "type", STR),
        req(2, "address", STR),
    ],
);

/// core/v1 `NodeCondition`.
pub(crate) static NODE_CONDITION: Message = Message::new(
    "NodeCondition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(3, "lastHeartbeatTime", TIME),
        opt(4, "lastTransitionTime", TIME),
        opt(5, "reason", STR),
        opt(6, "message", STR),
    ],
);

/// core/v1 `NodeSpec`.
pub(crate) static NODE_SPEC: Message = Message::new(
    "NodeSpec",
    &[
        opt(1, "podCIDR", STR),
        rep(7, "podCIDRs", STR),
        opt(3, "providerID", STR),
        opt(4, "unschedulable", BOOL),
        rep(5, "taints", msg(&TAINT)),
        opt(6, "configSource", msg(&NODE_CONFIG_SOURCE)),
        opt(2, "externalID", STR),
        opt(8, "podPreemptionPolicy", msg(&NODE_POD_PREEMPTION_POLICY)),
    ],
);

/// core/v1 `NodePodPreemptionPolicy`.
pub(crate) static NODE_POD_PREEMPTION_POLICY: Message = Message::new(
    "NodePodPreemptionPolicy",
    &[
        rep(1, "disableResizePreemption", STR),
    ],
);

/// core/v1 `NodeConfigSource`.
pub(crate) static NODE_CONFIG_SOURCE: Message = Message::new(
    "NodeConfigSource",
    &[
        opt(2, "configMap", msg(&CONFIG_MAP_NODE_CONFIG_SOURCE)),
    ],
);

/// core/v1 `ConfigMapNodeConfigSource`.
pub(crate) static CONFIG_MAP_NODE_CONFIG_SOURCE: Message = Message::new(
    "ConfigMapNodeConfigSource",
    &[
        req(1, "namespace", STR),
        req(2, "name", STR),
        opt(3, "uid", STR),
        opt(4, "resourceVersion", STR),
        req(5, "kubeletConfigKey", STR),
    ],
);

/// core/v1 `Taint`.
pub(crate) static TAINT: Message = Message::new(
    "Taint",
    &[
        req(1, "key", STR),
        opt(2, "value", STR),
        req(3, "effect", STR),
        opt(4, "timeAdded", TIME),
    ],
);
