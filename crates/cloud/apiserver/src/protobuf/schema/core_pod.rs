//! Descriptors for core/v1 `Pod` and `PodTemplateSpec`: spec, status, scheduling (affinity, tolerations, spread)
//! and pod-level security.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::core_container::{
    APP_ARMOR_PROFILE, CONTAINER, CONTAINER_STATUS, EPHEMERAL_CONTAINER, RESOURCE_REQUIREMENTS, SECCOMP_PROFILE,
    SE_LINUX_OPTIONS, WINDOWS_SECURITY_CONTEXT_OPTIONS,
};
use super::core_volume::{LOCAL_OBJECT_REFERENCE, VOLUME};
use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::{BOOL, I32, I64, Message, QUANTITY, STR, TIME, map, msg, opt, ptr, rep, req};

/// core/v1 `Pod`.
pub(crate) static POD: Message = Message::new(
    "Pod",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&POD_SPEC)),
        opt(3, "status", msg(&POD_STATUS)),
    ],
);

/// core/v1 `PodTemplateSpec` (the pod template of workload controllers).
pub(crate) static POD_TEMPLATE_SPEC: Message = Message::new(
    "PodTemplateSpec",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&POD_SPEC)),
    ],
);

/// core/v1 `PodStatus`.
pub(crate) static POD_STATUS: Message = Message::new(
    "PodStatus",
    &[
        opt(17, "observedGeneration", I64),
        opt(1, "phase", STR),
        rep(2, "conditions", msg(&POD_CONDITION)),
        opt(3, "message", STR),
        opt(4, "reason", STR),
        opt(11, "nominatedNodeName", STR),
        opt(5, "hostIP", STR),
        rep(16, "hostIPs", msg(&HOST_IP)),
        opt(6, "podIP", STR),
        rep(12, "podIPs", msg(&POD_IP)),
        opt(7, "startTime", TIME),
        rep(10, "initContainerStatuses", msg(&CONTAINER_STATUS)),
        rep(8, "containerStatuses", msg(&CONTAINER_STATUS)),
        opt(9, "qosClass", STR),
        rep(13, "ephemeralContainerStatuses", msg(&CONTAINER_STATUS)),
        opt(14, "resize", STR),
        rep(15, "resourceClaimStatuses", msg(&POD_RESOURCE_CLAIM_STATUS)),
        opt(18, "extendedResourceClaimStatus", msg(&POD_EXTENDED_RESOURCE_CLAIM_STATUS)),
        map(19, "allocatedResources", QUANTITY),
        opt(20, "resources", msg(&RESOURCE_REQUIREMENTS)),
        rep(21, "nodeAllocatableResourceClaimStatuses", msg(&NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS)),
        rep(22, "volumeHealth", msg(&POD_VOLUME_HEALTH)),
    ],
);

/// core/v1 `PodVolumeHealth`.
pub(crate) static POD_VOLUME_HEALTH: Message = Message::new(
    "PodVolumeHealth",
    &[
        req(1, "name", STR),
        rep(2, "healthConditions", msg(&VOLUME_HEALTH_CONDITION)),
        opt(3, "lastTransitionTime", TIME),
    ],
);

/// core/v1 `VolumeHealthCondition`.
pub(crate) static VOLUME_HEALTH_CONDITION: Message = Message::new(
    "VolumeHealthCondition",
    &[
        req(1, "status", STR),
        req(2, "reason", STR),
        opt(3, "message", STR),
    ],
);

/// core/v1 `NodeAllocatableResourceClaimStatus`.
pub(crate) static NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS: Message = Message::new(
    "NodeAllocatableResourceClaimStatus",
    &[
        req(1, "resourceClaimName", STR),
        rep(2, "containers", STR),
        rep(4, "mapping", msg(&NODE_ALLOCATABLE_MAPPED_RESOURCES)),
        rep(5, "overhead", msg(&NODE_ALLOCATABLE_OVERHEAD_RESOURCES)),
    ],
);

/// core/v1 `NodeAllocatableOverheadResources`.
pub(crate) static NODE_ALLOCATABLE_OVERHEAD_RESOURCES: Message = Message::new(
    "NodeAllocatableOverheadResources",
    &[
        req(1, "name", STR),
        opt(2, "perPod", QUANTITY),
        opt(3, "perContainer", QUANTITY),
    ],
);

/// core/v1 `NodeAllocatableMappedResources`.
pub(crate) static NODE_ALLOCATABLE_MAPPED_RESOURCES: Message = Message::new(
    "NodeAllocatableMappedResources",
    &[
        req(1, "name", STR),
        opt(2, "quantity", QUANTITY),
    ],
);

/// core/v1 `PodExtendedResourceClaimStatus`.
pub(crate) static POD_EXTENDED_RESOURCE_CLAIM_STATUS: Message = Message::new(
    "PodExtendedResourceClaimStatus",
    &[
        rep(1, "requestMappings", msg(&CONTAINER_EXTENDED_RESOURCE_REQUEST)),
        req(2, "resourceClaimName", STR),
    ],
);

/// core/v1 `ContainerExtendedResourceRequest`.
pub(crate) static CONTAINER_EXTENDED_RESOURCE_REQUEST: Message = Message::new(
    "ContainerExtendedResourceRequest",
    &[
        req(1, "containerName", STR),
        req(2, "resourceName", STR),
        req(3, "requestName", STR),
    ],
);

/// core/v1 `PodResourceClaimStatus`.
pub(crate) static POD_RESOURCE_CLAIM_STATUS: Message = Message::new(
    "PodResourceClaimStatus",
    &[
        req(1, "name", STR),
        ptr(2, "resourceClaimName", STR),
    ],
);

/// core/v1 `PodIP`.
pub(crate) static POD_IP: Message = Message::new(
    "PodIP",
    &[
        req(1, "ip", STR),
    ],
);

/// core/v1 `HostIP`.
pub(crate) static HOST_IP: Message = Message::new(
    "HostIP",
    &[
        req(1, "ip", STR),
    ],
);

/// core/v1 `PodCondition`.
pub(crate) static POD_CONDITION: Message = Message::new(
    "PodCondition",
    &[
        req(1, "type", STR),
        opt(7, "observedGeneration", I64),
        req(2, "status", STR),
        opt(3, "lastProbeTime", TIME),
        opt(4, "lastTransitionTime", TIME),
        opt(5, "reason", STR),
        opt(6, "message", STR),
    ],
);

/// core/v1 `PodSpec`.
pub(crate) static POD_SPEC: Message = Message::new(
    "PodSpec",
    &[
        rep(1, "volumes", msg(&VOLUME)),
        rep(20, "initContainers", msg(&CONTAINER)),
        rep(2, "containers", msg(&CONTAINER)),
        rep(34, "ephemeralContainers", msg(&EPHEMERAL_CONTAINER)),
        opt(3, "restartPolicy", STR),
        ptr(4, "terminationGracePeriodSeconds", I64),
        ptr(5, "activeDeadlineSeconds", I64),
        opt(6, "dnsPolicy", STR),
        map(7, "nodeSelector", STR),
        opt(8, "serviceAccountName", STR),
        opt(9, "serviceAccount", STR),
        ptr(21, "automountServiceAccountToken", BOOL),
        opt(10, "nodeName", STR),
        opt(11, "hostNetwork", BOOL),
        opt(12, "hostPID", BOOL),
        opt(13, "hostIPC", BOOL),
        ptr(27, "shareProcessNamespace", BOOL),
        opt(14, "securityContext", msg(&POD_SECURITY_CONTEXT)),
        rep(15, "imagePullSecrets", msg(&LOCAL_OBJECT_REFERENCE)),
        opt(16, "hostname", STR),
        opt(17, "subdomain", STR),
        opt(18, "affinity", msg(&AFFINITY)),
        opt(19, "schedulerName", STR),
        rep(22, "tolerations", msg(&TOLERATION)),
        rep(23, "hostAliases", msg(&HOST_ALIAS)),
        opt(24, "priorityClassName", STR),
        ptr(25, "priority", I32),
        opt(26, "dnsConfig", msg(&POD_DNS_CONFIG)),
        rep(28, "readinessGates", msg(&POD_READINESS_GATE)),
        ptr(29, "runtimeClassName", STR),
        ptr(30, "enableServiceLinks", BOOL),
        ptr(31, "preemptionPolicy", STR),
        map(32, "overhead", QUANTITY),
        rep(33, "topologySpreadConstraints", msg(&TOPOLOGY_SPREAD_CONSTRAINT)),
        ptr(35, "setHostnameAsFQDN", BOOL),
        opt(36, "os", msg(&POD_OS)),
        ptr(37, "hostUsers", BOOL),
        rep(38, "schedulingGates", msg(&POD_SCHEDULING_GATE)),
        rep(39, "resourceClaims", msg(&POD_RESOURCE_CLAIM)),
        opt(40, "resources", msg(&RESOURCE_REQUIREMENTS)),
        ptr(41, "hostnameOverride", STR),
        opt(43, "schedulingGroup", msg(&POD_SCHEDULING_GROUP)),
        rep(44, "evictionResponders", msg(&EVICTION_RESPONDER)),
    ],
);

/// core/v1 `EvictionResponder`.
pub(crate) static EVICTION_RESPONDER: Message = Message::new(
    "EvictionResponder",
    &[
        req(1, "name", STR),
        ptr(2, "priority", I32),
    ],
);

/// core/v1 `PodSchedulingGroup`.
pub(crate) static POD_SCHEDULING_GROUP: Message = Message::new(
    "PodSchedulingGroup",
    &[
        ptr(1, "podGroupName", STR),
    ],
);

/// core/v1 `PodResourceClaim`.
pub(crate) static POD_RESOURCE_CLAIM: Message = Message::new(
    "PodResourceClaim",
    &[
        req(1, "name", STR),
        ptr(3, "resourceClaimName", STR),
        ptr(4, "resourceClaimTemplateName", STR),
    ],
);

/// core/v1 `PodSchedulingGate`.
pub(crate) static POD_SCHEDULING_GATE: Message = Message::new(
    "PodSchedulingGate",
    &[
        req(1, "name", STR),
    ],
);

/// core/v1 `PodOS`.
pub(crate) static POD_OS: Message = Message::new(
    "PodOS",
    &[
        req(1, "name", STR),
    ],
);

/// core/v1 `TopologySpreadConstraint`.
pub(crate) static TOPOLOGY_SPREAD_CONSTRAINT: Message = Message::new(
    "TopologySpreadConstraint",
    &[
        req(1, "maxSkew", I32),
        req(2, "topologyKey", STR),
        req(3, "whenUnsatisfiable", STR),
        opt(4, "labelSelector", msg(&LABEL_SELECTOR)),
        ptr(5, "minDomains", I32),
        ptr(6, "nodeAffinityPolicy", STR),
        ptr(7, "nodeTaintsPolicy", STR),
        rep(8, "matchLabelKeys", STR),
    ],
);

/// core/v1 `PodReadinessGate`.
pub(crate) static POD_READINESS_GATE: Message = Message::new(
    "PodReadinessGate",
    &[
        req(1, "conditionType", STR),
    ],
);

/// core/v1 `PodDNSConfig`.
pub(crate) static POD_DNS_CONFIG: Message = Message::new(
    "PodDNSConfig",
    &[
        rep(1, "nameservers", STR),
        rep(2, "searches", STR),
        rep(3, "options", msg(&POD_DNS_CONFIG_OPTION)),
    ],
);

/// core/v1 `PodDNSConfigOption`.
pub(crate) static POD_DNS_CONFIG_OPTION: Message = Message::new(
    "PodDNSConfigOption",
    &[
        opt(1, "name", STR),
        ptr(2, "value", STR),
    ],
);

/// core/v1 `HostAlias`.
pub(crate) static HOST_ALIAS: Message = Message::new(
    "HostAlias",
    &[
        req(1, "ip", STR),
        rep(2, "hostnames", STR),
    ],
);

/// core/v1 `Toleration`.
pub(crate) static TOLERATION: Message = Message::new(
    "Toleration",
    &[
        opt(1, "key", STR),
        opt(2, "operator", STR),
        opt(3, "value", STR),
        opt(4, "effect", STR),
        ptr(5, "tolerationSeconds", I64),
    ],
);

/// core/v1 `Affinity`.
pub(crate) static AFFINITY: Message = Message::new(
    "Affinity",
    &[
        opt(1, "nodeAffinity", msg(&NODE_AFFINITY)),
        opt(2, "podAffinity", msg(&POD_AFFINITY)),
        opt(3, "podAntiAffinity", msg(&POD_ANTI_AFFINITY)),
    ],
);

/// core/v1 `PodAntiAffinity`.
pub(crate) static POD_ANTI_AFFINITY: Message = Message::new(
    "PodAntiAffinity",
    &[
        rep(1, "requiredDuringSchedulingIgnoredDuringExecution", msg(&POD_AFFINITY_TERM)),
        rep(2, "preferredDuringSchedulingIgnoredDuringExecution", msg(&WEIGHTED_POD_AFFINITY_TERM)),
    ],
);

/// core/v1 `PodAffinity`.
pub(crate) static POD_AFFINITY: Message = Message::new(
    "PodAffinity",
    &[
        rep(1, "requiredDuringSchedulingIgnoredDuringExecution", msg(&POD_AFFINITY_TERM)),
        rep(2, "preferredDuringSchedulingIgnoredDuringExecution", msg(&WEIGHTED_POD_AFFINITY_TERM)),
    ],
);

/// core/v1 `WeightedPodAffinityTerm`.
pub(crate) static WEIGHTED_POD_AFFINITY_TERM: Message = Message::new(
    "WeightedPodAffinityTerm",
    &[
        req(1, "weight", I32),
        opt(2, "podAffinityTerm", msg(&POD_AFFINITY_TERM)),
    ],
);

/// core/v1 `PodAffinityTerm`.
pub(crate) static POD_AFFINITY_TERM: Message = Message::new(
    "PodAffinityTerm",
    &[
        opt(1, "labelSelector", msg(&LABEL_SELECTOR)),
        rep(2, "namespaces", STR),
        req(3, "topologyKey", STR),
        opt(4, "namespaceSelector", msg(&LABEL_SELECTOR)),
        rep(5, "matchLabelKeys", STR),
        rep(6, "mismatchLabelKeys", STR),
    ],
);

/// core/v1 `NodeAffinity`.
pub(crate) static NODE_AFFINITY: Message = Message::new(
    "NodeAffinity",
    &[
        opt(1, "requiredDuringSchedulingIgnoredDuringExecution", msg(&NODE_SELECTOR)),
        rep(2, "preferredDuringSchedulingIgnoredDuringExecution", msg(&PREFERRED_SCHEDULING_TERM)),
    ],
);

/// core/v1 `PreferredSchedulingTerm`.
pub(crate) static PREFERRED_SCHEDULING_TERM: Message = Message::new(
    "PreferredSchedulingTerm",
    &[
        req(1, "weight", I32),
        opt(2, "preference", msg(&NODE_SELECTOR_TERM)),
    ],
);

/// core/v1 `NodeSelector`.
pub(crate) static NODE_SELECTOR: Message = Message::new(
    "NodeSelector",
    &[
        rep(1, "nodeSelectorTerms", msg(&NODE_SELECTOR_TERM)),
    ],
);

/// core/v1 `NodeSelectorTerm`.
pub(crate) static NODE_SELECTOR_TERM: Message = Message::new(
    "NodeSelectorTerm",
    &[
        rep(1, "matchExpressions", msg(&NODE_SELECTOR_REQUIREMENT)),
        rep(2, "matchFields", msg(&NODE_SELECTOR_REQUIREMENT)),
    ],
);

/// core/v1 `NodeSelectorRequirement`.
pub(crate) static NODE_SELECTOR_REQUIREMENT: Message = Message::new(
    "NodeSelectorRequirement",
    &[
        req(1, "key", STR),
        req(2, "operator", STR),
        rep(3, "values", STR),
    ],
);

/// core/v1 `PodSecurityContext`.
pub(crate) static POD_SECURITY_CONTEXT: Message = Message::new(
    "PodSecurityContext",
    &[
        opt(1, "seLinuxOptions", msg(&SE_LINUX_OPTIONS)),
        opt(8, "windowsOptions", msg(&WINDOWS_SECURITY_CONTEXT_OPTIONS)),
        ptr(2, "runAsUser", I64),
        ptr(6, "runAsGroup", I64),
        ptr(3, "runAsNonRoot", BOOL),
        rep(4, "supplementalGroups", I64),
        ptr(12, "supplementalGroupsPolicy", STR),
        ptr(5, "fsGroup", I64),
        rep(7, "sysctls", msg(&SYSCTL)),
        ptr(9, "fsGroupChangePolicy", STR),
        opt(10, "seccompProfile", msg(&SECCOMP_PROFILE)),
        opt(11, "appArmorProfile", msg(&APP_ARMOR_PROFILE)),
        ptr(13, "seLinuxChangePolicy", STR),
    ],
);

/// core/v1 `Sysctl`.
pub(crate) static SYSCTL: Message = Message::new(
    "Sysctl",
    &[
        req(1, "name", STR),
        req(2, "value", STR),
    ],
);
