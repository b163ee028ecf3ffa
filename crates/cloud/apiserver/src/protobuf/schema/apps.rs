//! Descriptors for apps/v1 `Deployment`, `ReplicaSet`, `DaemonSet`, `StatefulSet` and `ControllerRevision`.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::core_pod::POD_TEMPLATE_SPEC;
use super::core_volume::PERSISTENT_VOLUME_CLAIM;
use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::{BOOL, I32, I64, INT_OR_STRING, Message, RAW_EXTENSION, STR, TIME, msg, opt, ptr, rep, req};

/// apps/v1 `Deployment`.
pub(crate) static DEPLOYMENT: Message = Message::new(
    "Deployment",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&DEPLOYMENT_SPEC)),
        opt(3, "status", msg(&DEPLOYMENT_STATUS)),
    ],
);

/// apps/v1 `DeploymentSpec`.
pub(crate) static DEPLOYMENT_SPEC: Message = Message::new(
    "DeploymentSpec",
    &[
        ptr(1, "replicas", I32),
        opt(2, "selector", msg(&LABEL_SELECTOR)),
        opt(3, "template", msg(&POD_TEMPLATE_SPEC)),
        opt(4, "strategy", msg(&DEPLOYMENT_STRATEGY)),
        opt(5, "minReadySeconds", I32),
        ptr(6, "revisionHistoryLimit", I32),
        opt(7, "paused", BOOL),
        ptr(9, "progressDeadlineSeconds", I32),
    ],
);

/// apps/v1 `DeploymentStrategy`.
pub(crate) static DEPLOYMENT_STRATEGY: Message = Message::new(
    "DeploymentStrategy",
    &[
        opt(1, "type", STR),
        opt(2, "rollingUpdate", msg(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
);

/// apps/v1 `RollingUpdateDeployment`.
pub(crate) static ROLLING_UPDATE_DEPLOYMENT: Message = Message::new(
    "RollingUpdateDeployment",
    &[
        opt(1, "maxUnavailable", INT_OR_STRING),
        opt(2, "maxSurge", INT_OR_STRING),
    ],
);

/// apps/v1 `DeploymentStatus`.
pub(crate) static DEPLOYMENT_STATUS: Message = Message::new(
    "DeploymentStatus",
    &[
        opt(1, "observedGeneration", I64),
        opt(2, "replicas", I32),
        opt(3, "updatedReplicas", I32),
        opt(7, "readyReplicas", I32),
        opt(4, "availableReplicas", I32),
        opt(5, "unavailableReplicas", I32),
        ptr(9, "terminatingReplicas", I32),
        rep(6, "conditions", msg(&DEPLOYMENT_CONDITION)),
        ptr(8, "collisionCount", I32),
    ],
);

/// apps/v1 `DeploymentCondition`.
pub(crate) static DEPLOYMENT_CONDITION: Message = Message::new(
    "DeploymentCondition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(6, "lastUpdateTime", TIME),
        opt(7, "lastTransitionTime", TIME),
        opt(4, "reason", STR),
        opt(5, "message", STR),
    ],
);

/// apps/v1 `ReplicaSet`.
pub(crate) static REPLICA_SET: Message = Message::new(
    "ReplicaSet",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&REPLICA_SET_SPEC)),
        opt(3, "status", msg(&REPLICA_SET_STATUS)),
    ],
);

/// apps/v1 `ReplicaSetSpec`.
pub(crate) static REPLICA_SET_SPEC: Message = Message::new(
    "ReplicaSetSpec",
    &[
        ptr(1, "replicas", I32),
        opt(4, "minReadySeconds", I32),
        opt(2, "selector", msg(&LABEL_SELECTOR)),
        opt(3, "template", msg(&POD_TEMPLATE_SPEC)),
    ],
);

/// apps/v1 `ReplicaSetStatus`.
pub(crate) static REPLICA_SET_STATUS: Message = Message::new(
    "ReplicaSetStatus",
    &[
        req(1, "replicas", I32),
        opt(2, "fullyLabeledReplicas", I32),
        opt(4, "readyReplicas", I32),
        opt(5, "availableReplicas", I32),
        ptr(7, "terminatingReplicas", I32),
        opt(3, "observedGeneration", I64),
        rep(6, "conditions", msg(&REPLICA_SET_CONDITION)),
    ],
);

/// apps/v1 `ReplicaSetCondition`.
pub(crate) static REPLICA_SET_CONDITION: Message = Message::new(
    "ReplicaSetCondition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(3, "lastTransitionTime", TIME),
        opt(4, "reason", STR),
        opt(5, "message", STR),
    ],
);

/// apps/v1 `DaemonSet`.
pub(crate) static DAEMON_SET: Message = Message::new(
    "DaemonSet",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&DAEMON_SET_SPEC)),
        opt(3, "status", msg(&DAEMON_SET_STATUS)),
    ],
);

/// apps/v1 `DaemonSetSpec`.
pub(crate) static DAEMON_SET_SPEC: Message = Message::new(
    "DaemonSetSpec",
    &[
        opt(1, "selector", msg(&LABEL_SELECTOR)),
        opt(2, "template", msg(&POD_TEMPLATE_SPEC)),
        opt(3, "updateStrategy", msg(&DAEMON_SET_UPDATE_STRATEGY)),
        opt(4, "minReadySeconds", I32),
        ptr(6, "revisionHistoryLimit", I32),
    ],
);

/// apps/v1 `DaemonSetUpdateStrategy`.
pub(crate) static DAEMON_SET_UPDATE_STRATEGY: Message = Message::new(
    "DaemonSetUpdateStrategy",
    &[
        opt(1, "type", STR),
        opt(2, "rollingUpdate", msg(&ROLLING_UPDATE_DAEMON_SET)),
    ],
);

/// apps/v1 `RollingUpdateDaemonSet`.
pub(crate) static ROLLING_UPDATE_DAEMON_SET: Message = Message::new(
    "RollingUpdateDaemonSet",
    &[
        opt(1, "maxUnavailable", INT_OR_STRING),
        opt(2, "maxSurge", INT_OR_STRING),
    ],
);

/// apps/v1 `DaemonSetStatus`.
pub(crate) static DAEMON_SET_STATUS: Message = Message::new(
    "DaemonSetStatus",
    &[
        req(1, "currentNumberScheduled", I32),
        req(2, "numberMisscheduled", I32),
        req(3, "desiredNumberScheduled", I32),
        req(4, "numberReady", I32),
        opt(5, "observedGeneration", I64),
        opt(6, "updatedNumberScheduled", I32),
        opt(7, "numberAvailable", I32),
        opt(8, "numberUnavailable", I32),
        ptr(9, "collisionCount", I32),
        rep(10, "conditions", msg(&DAEMON_SET_CONDITION)),
    ],
);

/// apps/v1 `DaemonSetCondition`.
pub(crate) static DAEMON_SET_CONDITION: Message = Message::new(
    "DaemonSetCondition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(3, "lastTransitionTime", TIME),
        opt(4, "reason", STR),
        opt(5, "message", STR),
    ],
);

/// apps/v1 `StatefulSet`.
pub(crate) static STATEFUL_SET: Message = Message::new(
    "StatefulSet",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&STATEFUL_SET_SPEC)),
        opt(3, "status", msg(&STATEFUL_SET_STATUS)),
    ],
);

/// apps/v1 `StatefulSetSpec`.
pub(crate) static STATEFUL_SET_SPEC: Message = Message::new(
    "StatefulSetSpec",
    &[
        ptr(1, "replicas", I32),
        opt(2, "selector", msg(&LABEL_SELECTOR)),
        opt(3, "template", msg(&POD_TEMPLATE_SPEC)),
        rep(4, "volumeClaimTemplates", msg(&PERSISTENT_VOLUME_CLAIM)),
        req(5, "serviceName", STR),
        opt(6, "podManagementPolicy", STR),
        opt(7, "updateStrategy", msg(&STATEFUL_SET_UPDATE_STRATEGY)),
        ptr(8, "revisionHistoryLimit", I32),
        opt(9, "minReadySeconds", I32),
        opt(10, "persistentVolumeClaimRetentionPolicy", msg(&STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY)),
        opt(11, "ordinals", msg(&STATEFUL_SET_ORDINALS)),
    ],
);

/// apps/v1 `StatefulSetUpdateStrategy`.
pub(crate) static STATEFUL_SET_UPDATE_STRATEGY: Message = Message::new(
    "StatefulSetUpdateStrategy",
    &[
        opt(1, "type", STR),
        opt(2, "rollingUpdate", msg(&ROLLING_UPDATE_STATEFUL_SET_STRATEGY)),
    ],
);

/// apps/v1 `RollingUpdateStatefulSetStrategy`.
pub(crate) static ROLLING_UPDATE_STATEFUL_SET_STRATEGY: Message = Message::new(
    "RollingUpdateStatefulSetStrategy",
    &[
        ptr(1, "partition", I32),
        opt(2, "maxUnavailable", INT_OR_STRING),
    ],
);

/// apps/v1 `StatefulSetPersistentVolumeClaimRetentionPolicy`.
pub(crate) static STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY: Message = Message::new(
    "StatefulSetPersistentVolumeClaimRetentionPolicy",
    &[
        opt(1, "whenDeleted", STR),
        opt(2, "whenScaled", STR),
    ],
);

/// apps/v1 `StatefulSetOrdinals`.
pub(crate) static STATEFUL_SET_ORDINALS: Message = Message::new(
    "StatefulSetOrdinals",
    &[
        req(1, "start", I32),
    ],
);

/// apps/v1 `StatefulSetStatus`.
pub(crate) static STATEFUL_SET_STATUS: Message = Message::new(
    "StatefulSetStatus",
    &[
        opt(1, "observedGeneration", I64),
        req(2, "replicas", I32),
        opt(3, "readyReplicas", I32),
        opt(4, "currentReplicas", I32),
        opt(5, "updatedReplicas", I32),
        opt(6, "currentRevision", STR),
        opt(7, "updateRevision", STR),
        ptr(9, "collisionCount", I32),
        rep(10, "conditions", msg(&STATEFUL_SET_CONDITION)),
        req(11, "availableReplicas", I32),
    ],
);

/// apps/v1 `StatefulSetCondition`.
pub(crate) static STATEFUL_SET_CONDITION: Message = Message::new(
    "StatefulSetCondition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(3, "lastTransitionTime", TIME),
        opt(4, "reason", STR),
        opt(5, "message", STR),
    ],
);

/// apps/v1 `ControllerRevision`.
pub(crate) static CONTROLLER_REVISION: Message = Message::new(
    "ControllerRevision",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "data", RAW_EXTENSION),
        req(3, "revision", I64),
    ],
);
