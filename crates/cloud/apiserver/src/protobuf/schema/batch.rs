//! Descriptors for batch/v1 `Job` and `CronJob`, with the scheduling.k8s.io/v1alpha3
//! workload policies a `JobSpec` can carry.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::core_objects::OBJECT_REFERENCE;
use super::core_pod::POD_TEMPLATE_SPEC;
use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::{BOOL, I32, I64, Message, STR, TIME, msg, opt, ptr, rep, req};

/// batch/v1 `Job`.
pub(crate) static JOB: Message = Message::new(
    "Job",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&JOB_SPEC)),
        opt(3, "status", msg(&JOB_STATUS)),
    ],
);

/// batch/v1 `JobSpec`.
pub(crate) static JOB_SPEC: Message = Message::new(
    "JobSpec",
    &[
        ptr(1, "parallelism", I32),
        ptr(2, "completions", I32),
        ptr(3, "activeDeadlineSeconds", I64),
        opt(11, "podFailurePolicy", msg(&POD_FAILURE_POLICY)),
        opt(16, "successPolicy", msg(&SUCCESS_POLICY)),
        ptr(7, "backoffLimit", I32),
        ptr(12, "backoffLimitPerIndex", I32),
        ptr(13, "maxFailedIndexes", I32),
        opt(4, "selector", msg(&LABEL_SELECTOR)),
        ptr(5, "manualSelector", BOOL),
        opt(6, "template", msg(&POD_TEMPLATE_SPEC)),
        ptr(8, "ttlSecondsAfterFinished", I32),
        ptr(9, "completionMode", STR),
        ptr(10, "suspend", BOOL),
        ptr(14, "podReplacementPolicy", STR),
        ptr(15, "managedBy", STR),
        opt(17, "scheduling", msg(&JOB_SCHEDULING_CONFIGURATION)),
    ],
);

/// batch/v1 `JobSchedulingConfiguration`.
pub(crate) static JOB_SCHEDULING_CONFIGURATION: Message = Message::new(
    "JobSchedulingConfiguration",
    &[
        opt(1, "schedulingPolicy", msg(&WORKLOAD_POD_GROUP_SCHEDULING_POLICY)),
        opt(2, "schedulingConstraints", msg(&WORKLOAD_POD_GROUP_SCHEDULING_CONSTRAINTS)),
        opt(3, "disruptionMode", msg(&WORKLOAD_POD_GROUP_DISRUPTION_MODE)),
        rep(4, "resourceClaims", msg(&WORKLOAD_POD_GROUP_RESOURCE_CLAIM)),
    ],
);

/// scheduling.k8s.io/v1alpha3 `WorkloadPodGroupSchedulingPolicy`.
pub(crate) static WORKLOAD_POD_GROUP_SCHEDULING_POLICY: Message = Message::new(
    "WorkloadPodGroupSchedulingPolicy",
    &[
        opt(1, "basic", msg(&WORKLOAD_POD_GROUP_BASIC_SCHEDULING_POLICY)),
        opt(2, "gang", msg(&WORKLOAD_POD_GROUP_GANG_SCHEDULING_POLICY)),
    ],
);

/// scheduling.k8s.io/v1alpha3 `WorkloadPodGroupBasicSchedulingPolicy` (no fields).
pub(crate) static WORKLOAD_POD_GROUP_BASIC_SCHEDULING_POLICY: Message = Message::new(
    "WorkloadPodGroupBasicSchedulingPolicy",
    &[],
);

/// scheduling.k8s.io/v1alpha3 `WorkloadPodGroupGangSchedulingPolicy`.
pub(crate) static WORKLOAD_POD_GROUP_GANG_SCHEDULING_POLICY: Message = Message::new(
    "WorkloadPodGroupGangSchedulingPolicy",
    &[
        ptr(1, "minCount", I32),
    ],
);

/// scheduling.k8s.io/v1alpha3 `WorkloadPodGroupSchedulingConstraints`.
pub(crate) static WORKLOAD_POD_GROUP_SCHEDULING_CONSTRAINTS: Message = Message::new(
    "WorkloadPodGroupSchedulingConstraints",
    &[
        rep(1, "topology", msg(&TOPOLOGY_CONSTRAINT)),
    ],
);

/// scheduling.k8s.io/v1alpha3 `TopologyConstraint`.
pub(crate) static TOPOLOGY_CONSTRAINT: Message = Message::new(
    "TopologyConstraint",
    &[
        req(1, "key", STR),
    ],
);

/// scheduling.k8s.io/v1alpha3 `WorkloadPodGroupDisruptionMode`.
pub(crate) static WORKLOAD_POD_GROUP_DISRUPTION_MODE: Message = Message::new(
    "WorkloadPodGroupDisruptionMode",
    &[
        opt(1, "single", msg(&WORKLOAD_POD_GROUP_SINGLE_DISRUPTION_MODE)),
        opt(2, "all", msg(&WORKLOAD_POD_GROUP_ALL_DISRUPTION_MODE)),
    ],
);

/// scheduling.k8s.io/v1alpha3 `WorkloadPodGroupSingleDisruptionMode` (no fields).
pub(crate) static WORKLOAD_POD_GROUP_SINGLE_DISRUPTION_MODE: Message = Message::new(
    "WorkloadPodGroupSingleDisruptionMode",
    &[],
);

/// scheduling.k8s.io/v1alpha3 `WorkloadPodGroupAllDisruptionMode` (no fields).
pub(crate) static WORKLOAD_POD_GROUP_ALL_DISRUPTION_MODE: Message = Message::new(
    "WorkloadPodGroupAllDisruptionMode",
    &[],
);

/// scheduling.k8s.io/v1alpha3 `WorkloadPodGroupResourceClaim`.
pub(crate) static WORKLOAD_POD_GROUP_RESOURCE_CLAIM: Message = Message::new(
    "WorkloadPodGroupResourceClaim",
    &[
        req(1, "name", STR),
        ptr(2, "resourceClaimName", STR),
        ptr(3, "resourceClaimTemplateName", STR),
    ],
);

/// batch/v1 `PodFailurePolicy`.
pub(crate) static POD_FAILURE_POLICY: Message = Message::new(
    "PodFailurePolicy",
    &[
        rep(1, "rules", msg(&POD_FAILURE_POLICY_RULE)),
    ],
);

/// batch/v1 `PodFailurePolicyRule`.
pub(crate) static POD_FAILURE_POLICY_RULE: Message = Message::new(
    "PodFailurePolicyRule",
    &[
        req(1, "action", STR),
        opt(2, "onExitCodes", msg(&POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT)),
        rep(3, "onPodConditions", msg(&POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN)),
    ],
);

/// batch/v1 `PodFailurePolicyOnExitCodesRequirement`.
pub(crate) static POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT: Message = Message::new(
    "PodFailurePolicyOnExitCodesRequirement",
    &[
        ptr(1, "containerName", STR),
        req(2, "operator", STR),
        rep(3, "values", I32),
    ],
);

/// batch/v1 `PodFailurePolicyOnPodConditionsPattern`.
pub(crate) static POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN: Message = Message::new(
    "PodFailurePolicyOnPodConditionsPattern",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
    ],
);

/// batch/v1 `SuccessPolicy`.
pub(crate) static SUCCESS_POLICY: Message = Message::new(
    "SuccessPolicy",
    &[
        rep(1, "rules", msg(&SUCCESS_POLICY_RULE)),
    ],
);

/// batch/v1 `SuccessPolicyRule`.
pub(crate) static SUCCESS_POLICY_RULE: Message = Message::new(
    "SuccessPolicyRule",
    &[
        ptr(1, "succeededIndexes", STR),
        ptr(2, "succeededCount", I32),
    ],
);

/// batch/v1 `JobStatus`.
pub(crate) static JOB_STATUS: Message = Message::new(
    "JobStatus",
    &[
        rep(1, "conditions", msg(&JOB_CONDITION)),
        opt(2, "startTime", TIME),
        opt(3, "completionTime", TIME),
        opt(4, "active", I32),
        opt(5, "succeeded", I32),
        opt(6, "failed", I32),
        ptr(11, "terminating", I32),
        opt(7, "completedIndexes", STR),
        ptr(10, "failedIndexes", STR),
        opt(8, "uncountedTerminatedPods", msg(&UNCOUNTED_TERMINATED_PODS)),
        ptr(9, "ready", I32),
    ],
);

/// batch/v1 `UncountedTerminatedPods`.
pub(crate) static UNCOUNTED_TERMINATED_PODS: Message = Message::new(
    "UncountedTerminatedPods",
    &[
        rep(1, "succeeded", STR),
        rep(2, "failed", STR),
    ],
);

/// batch/v1 `JobCondition`.
pub(crate) static JOB_CONDITION: Message = Message::new(
    "JobCondition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(3, "lastProbeTime", TIME),
        opt(4, "lastTransitionTime", TIME),
        opt(5, "reason", STR),
        opt(6, "message", STR),
    ],
);

/// batch/v1 `JobTemplateSpec`.
pub(crate) static JOB_TEMPLATE_SPEC: Message = Message::new(
    "JobTemplateSpec",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&JOB_SPEC)),
    ],
);

/// batch/v1 `CronJob`.
pub(crate) static CRON_JOB: Message = Message::new(
    "CronJob",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&CRON_JOB_SPEC)),
        opt(3, "status", msg(&CRON_JOB_STATUS)),
    ],
);

/// batch/v1 `CronJobSpec`.
pub(crate) static CRON_JOB_SPEC: Message = Message::new(
    "CronJobSpec",
    &[
        req(1, "schedule", STR),
        ptr(8, "timeZone", STR),
        ptr(2, "startingDeadlineSeconds", I64),
        opt(3, "concurrencyPolicy", STR),
        ptr(4, "suspend", BOOL),
        opt(5, "jobTemplate", msg(&JOB_TEMPLATE_SPEC)),
        ptr(6, "successfulJobsHistoryLimit", I32),
        ptr(7, "failedJobsHistoryLimit", I32),
    ],
);

/// batch/v1 `CronJobStatus`.
pub(crate) static CRON_JOB_STATUS: Message = Message::new(
    "CronJobStatus",
    &[
        rep(1, "active", msg(&OBJECT_REFERENCE)),
        opt(4, "lastScheduleTime", TIME),
        opt(5, "lastSuccessfulTime", TIME),
    ],
);
