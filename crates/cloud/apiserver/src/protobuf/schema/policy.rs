//! Descriptors for policy/v1 `PodDisruptionBudget` and `Eviction` (the body of a pod's `eviction`
//! subresource, which `kubectl drain` posts), with meta/v1 `Condition`.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::meta::{DELETE_OPTIONS, LABEL_SELECTOR, OBJECT_META};
use super::{I32, I64, INT_OR_STRING, Message, STR, TIME, map, msg, opt, ptr, rep, req};

/// policy/v1 `Eviction`.
pub(crate) static EVICTION: Message = Message::new(
    "Eviction",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "deleteOptions", msg(&DELETE_OPTIONS)),
    ],
);

/// policy/v1 `PodDisruptionBudget`.
pub(crate) static POD_DISRUPTION_BUDGET: Message = Message::new(
    "PodDisruptionBudget",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&POD_DISRUPTION_BUDGET_SPEC)),
        opt(3, "status", msg(&POD_DISRUPTION_BUDGET_STATUS)),
    ],
);

/// policy/v1 `PodDisruptionBudgetSpec`.
static POD_DISRUPTION_BUDGET_SPEC: Message = Message::new(
    "PodDisruptionBudgetSpec",
    &[
        ptr(1, "minAvailable", INT_OR_STRING),
        opt(2, "selector", msg(&LABEL_SELECTOR)),
        ptr(3, "maxUnavailable", INT_OR_STRING),
        ptr(4, "unhealthyPodEvictionPolicy", STR),
    ],
);

/// policy/v1 `PodDisruptionBudgetStatus`.
static POD_DISRUPTION_BUDGET_STATUS: Message = Message::new(
    "PodDisruptionBudgetStatus",
    &[
        opt(1, "observedGeneration", I64),
        map(2, "disruptedPods", TIME),
        req(3, "disruptionsAllowed", I32),
        req(4, "currentHealthy", I32),
        req(5, "desiredHealthy", I32),
        req(6, "expectedPods", I32),
        rep(7, "conditions", msg(&CONDITION)),
    ],
);

/// meta/v1 `Condition`.
static CONDITION: Message = Message::new(
    "Condition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(3, "observedGeneration", I64),
        req(4, "lastTransitionTime", TIME),
        req(5, "reason", STR),
        req(6, "message", STR),
    ],
);
