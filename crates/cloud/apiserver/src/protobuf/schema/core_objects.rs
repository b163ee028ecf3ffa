//! Descriptors for core/v1 `ConfigMap`, `Secret`, `Namespace`, `Service`, `Endpoints` and `Event`.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::meta::{CONDITION, OBJECT_META};
use super::{BOOL, BYTES, I32, INT_OR_STRING, MICRO_TIME, Message, STR, TIME, map, msg, opt, ptr, rep, req};

/// core/v1 `Event`.
pub(crate) static EVENT: Message = Message::new(
    "Event",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "involvedObject", msg(&OBJECT_REFERENCE)),
        opt(3, "reason", STR),
        opt(4, "message", STR),
        opt(5, "source", msg(&EVENT_SOURCE)),
        opt(6, "firstTimestamp", TIME),
        opt(7, "lastTimestamp", TIME),
        opt(8, "count", I32),
        opt(9, "type", STR),
        opt(10, "eventTime", MICRO_TIME),
        opt(11, "series", msg(&EVENT_SERIES)),
        opt(12, "action", STR),
        opt(13, "related", msg(&OBJECT_REFERENCE)),
        req(14, "reportingComponent", STR),
        req(15, "reportingInstance", STR),
    ],
);

/// core/v1 `EventSeries`.
pub(crate) static EVENT_SERIES: Message = Message::new(
    "EventSeries",
    &[
        opt(1, "count", I32),
        opt(2, "lastObservedTime", MICRO_TIME),
    ],
);

/// core/v1 `EventSource`.
pub(crate) static EVENT_SOURCE: Message = Message::new(
    "EventSource",
    &[
        opt(1, "component", STR),
        opt(2, "host", STR),
    ],
);

/// core/v1 `Endpoints`.
pub(crate) static ENDPOINTS: Message = Message::new(
    "Endpoints",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        rep(2, "subsets", msg(&ENDPOINT_SUBSET)),
    ],
);

/// core/v1 `EndpointSubset`.
pub(crate) static ENDPOINT_SUBSET: Message = Message::new(
    "EndpointSubset",
    &[
        rep(1, "addresses", msg(&ENDPOINT_ADDRESS)),
        rep(2, "notReadyAddresses", msg(&ENDPOINT_ADDRESS)),
        rep(3, "ports", msg(&ENDPOINT_PORT)),
    ],
);

/// core/v1 `EndpointPort`.
pub(crate) static ENDPOINT_PORT: Message = Message::new(
    "EndpointPort",
    &[
        opt(1, "name", STR),
        req(2, "port", I32),
        opt(3, "protocol", STR),
        ptr(4, "appProtocol", STR),
    ],
);

/// core/v1 `EndpointAddress`.
pub(crate) static ENDPOINT_ADDRESS: Message = Message::new(
    "EndpointAddress",
    &[
        req(1, "ip", STR),
        opt(3, "hostname", STR),
        ptr(4, "nodeName", STR),
        opt(2, "targetRef", msg(&OBJECT_REFERENCE)),
    ],
);

/// core/v1 `ObjectReference`.
pub(crate) static OBJECT_REFERENCE: Message = Message::new(
    "ObjectReference",
    &[
        opt(1, "kind", STR),
        opt(2, "namespace", STR),
        opt(3, "name", STR),
        opt(4, "uid", STR),
        opt(5, "apiVersion", STR),
        opt(6, "resourceVersion", STR),
        opt(7, "fieldPath", STR),
    ],
);

/// core/v1 `ServiceAccount`.
pub(crate) static SERVICE_ACCOUNT: Message = Message::new(
    "ServiceAccount",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        rep(2, "secrets", msg(&OBJECT_REFERENCE)),
        rep(3, "imagePullSecrets", msg(&super::core_volume::LOCAL_OBJECT_REFERENCE)),
        ptr(4, "automountServiceAccountToken", BOOL),
    ],
);

/// core/v1 `Service`.
pub(crate) static SERVICE: Message = Message::new(
    "Service",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&SERVICE_SPEC)),
        opt(3, "status", msg(&SERVICE_STATUS)),
    ],
);

/// core/v1 `ServiceStatus`.
pub(crate) static SERVICE_STATUS: Message = Message::new(
    "ServiceStatus",
    &[
        opt(1, "loadBalancer", msg(&LOAD_BALANCER_STATUS)),
        rep(2, "conditions", msg(&CONDITION)),
    ],
);

/// core/v1 `LoadBalancerStatus`.
pub(crate) static LOAD_BALANCER_STATUS: Message = Message::new(
    "LoadBalancerStatus",
    &[
        rep(1, "ingress", msg(&LOAD_BALANCER_INGRESS)),
    ],
);

/// core/v1 `LoadBalancerIngress`.
pub(crate) static LOAD_BALANCER_INGRESS: Message = Message::new(
    "LoadBalancerIngress",
    &[
        opt(1, "ip", STR),
        opt(2, "hostname", STR),
        ptr(3, "ipMode", STR),
        rep(4, "ports", msg(&PORT_STATUS)),
    ],
);

/// core/v1 `PortStatus`.
pub(crate) static PORT_STATUS: Message = Message::new(
    "PortStatus",
    &[
        req(1, "port", I32),
        req(2, "protocol", STR),
        ptr(3, "error", STR),
    ],
);

/// core/v1 `ServiceSpec`.
pub(crate) static SERVICE_SPEC: Message = Message::new(
    "ServiceSpec",
    &[
        rep(1, "ports", msg(&SERVICE_PORT)),
        map(2, "selector", STR),
        opt(3, "clusterIP", STR),
        rep(18, "clusterIPs", STR),
        opt(4, "type", STR),
        rep(5, "externalIPs", STR),
        opt(7, "sessionAffinity", STR),
        opt(8, "loadBalancerIP", STR),
        rep(9, "loadBalancerSourceRanges", STR),
        opt(10, "externalName", STR),
        opt(11, "externalTrafficPolicy", STR),
        opt(12, "healthCheckNodePort", I32),
        opt(13, "publishNotReadyAddresses", BOOL),
        opt(14, "sessionAffinityConfig", msg(&SESSION_AFFINITY_CONFIG)),
        rep(19, "ipFamilies", STR),
        ptr(17, "ipFamilyPolicy", STR),
        ptr(20, "allocateLoadBalancerNodePorts", BOOL),
        ptr(21, "loadBalancerClass", STR),
        ptr(22, "internalTrafficPolicy", STR),
        ptr(23, "trafficDistribution", STR),
    ],
);

/// core/v1 `SessionAffinityConfig`.
pub(crate) static SESSION_AFFINITY_CONFIG: Message = Message::new(
    "SessionAffinityConfig",
    &[
        opt(1, "clientIP", msg(&CLIENT_IP_CONFIG)),
    ],
);

/// core/v1 `ClientIPConfig`.
pub(crate) static CLIENT_IP_CONFIG: Message = Message::new(
    "ClientIPConfig",
    &[
        ptr(1, "timeoutSeconds", I32),
    ],
);

/// core/v1 `ServicePort`.
pub(crate) static SERVICE_PORT: Message = Message::new(
    "ServicePort",
    &[
        opt(1, "name", STR),
        opt(2, "protocol", STR),
        ptr(6, "appProtocol", STR),
        req(3, "port", I32),
        opt(4, "targetPort", INT_OR_STRING),
        opt(5, "nodePort", I32),
    ],
);

/// core/v1 `Namespace`.
pub(crate) static NAMESPACE: Message = Message::new(
    "Namespace",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&NAMESPACE_SPEC)),
        opt(3, "status", msg(&NAMESPACE_STATUS)),
    ],
);

/// core/v1 `NamespaceStatus`.
pub(crate) static NAMESPACE_STATUS: Message = Message::new(
    "NamespaceStatus",
    &[
        opt(1, "phase", STR),
        rep(2, "conditions", msg(&NAMESPACE_CONDITION)),
    ],
);

/// core/v1 `NamespaceCondition`.
pub(crate) static NAMESPACE_CONDITION: Message = Message::new(
    "NamespaceCondition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(4, "lastTransitionTime", TIME),
        opt(5, "reason", STR),
        opt(6, "message", STR),
    ],
);

/// core/v1 `NamespaceSpec`.
pub(crate) static NAMESPACE_SPEC: Message = Message::new(
    "NamespaceSpec",
    &[
        rep(1, "finalizers", STR),
    ],
);

/// core/v1 `Secret`.
pub(crate) static SECRET: Message = Message::new(
    "Secret",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        ptr(5, "immutable", BOOL),
        map(2, "data", BYTES),
        map(4, "stringData", STR),
        opt(3, "type", STR),
    ],
);

/// core/v1 `ConfigMap`.
pub(crate) static CONFIG_MAP: Message = Message::new(
    "ConfigMap",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        ptr(4, "immutable", BOOL),
        map(2, "data", STR),
        map(3, "binaryData", BYTES),
    ],
);
