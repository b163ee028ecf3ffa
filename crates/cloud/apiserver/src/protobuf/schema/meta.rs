//! Descriptors for meta/v1 `ObjectMeta`, `DeleteOptions`, `LabelSelector` and `Condition`.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::{BOOL, FIELDS_V1, I64, Message, STR, TIME, map, msg, opt, ptr, rep, req};

/// meta/v1 `DeleteOptions`.
pub(crate) static DELETE_OPTIONS: Message = Message::new(
    "DeleteOptions",
    &[
        ptr(1, "gracePeriodSeconds", I64),
        opt(2, "preconditions", msg(&PRECONDITIONS)),
        ptr(3, "orphanDependents", BOOL),
        ptr(4, "propagationPolicy", STR),
        rep(5, "dryRun", STR),
        ptr(6, "ignoreStoreReadErrorWithClusterBreakingPotential", BOOL),
    ],
);

/// meta/v1 `Preconditions`.
pub(crate) static PRECONDITIONS: Message = Message::new(
    "Preconditions",
    &[
        ptr(1, "uid", STR),
        ptr(2, "resourceVersion", STR),
    ],
);

/// meta/v1 `LabelSelector`.
pub(crate) static LABEL_SELECTOR: Message = Message::new(
    "LabelSelector",
    &[
        map(1, "matchLabels", STR),
        rep(2, "matchExpressions", msg(&LABEL_SELECTOR_REQUIREMENT)),
    ],
);

/// meta/v1 `LabelSelectorRequirement`.
pub(crate) static LABEL_SELECTOR_REQUIREMENT: Message = Message::new(
    "LabelSelectorRequirement",
    &[
        req(1, "key", STR),
        req(2, "operator", STR),
        rep(3, "values", STR),
    ],
);

/// meta/v1 `Condition`.
pub(crate) static CONDITION: Message = Message::new(
    "Condition",
    &[
        req(1, "type", STR),
        req(2, "status", STR),
        opt(3, "observedGeneration", I64),
        opt(4, "lastTransitionTime", TIME),
        req(5, "reason", STR),
        req(6, "message", STR),
    ],
);

/// meta/v1 `ObjectMeta`.
pub(crate) static OBJECT_META: Message = Message::new(
    "ObjectMeta",
    &[
        opt(1, "name", STR),
        opt(2, "generateName", STR),
        opt(3, "namespace", STR),
        opt(4, "selfLink", STR),
        opt(5, "uid", STR),
        opt(6, "resourceVersion", STR),
        opt(7, "generation", I64),
        opt(8, "creationTimestamp", TIME),
        opt(9, "deletionTimestamp", TIME),
        ptr(10, "deletionGracePeriodSeconds", I64),
        map(11, "labels", STR),
        map(12, "annotations", STR),
        rep(13, "ownerReferences", msg(&OWNER_REFERENCE)),
        rep(14, "finalizers", STR),
        rep(17, "managedFields", msg(&MANAGED_FIELDS_ENTRY)),
    ],
);

/// meta/v1 `ManagedFieldsEntry`.
pub(crate) static MANAGED_FIELDS_ENTRY: Message = Message::new(
    "ManagedFieldsEntry",
    &[
        opt(1, "manager", STR),
        opt(2, "operation", STR),
        opt(3, "apiVersion", STR),
        opt(4, "time", TIME),
        opt(6, "fieldsType", STR),
        opt(7, "fieldsV1", FIELDS_V1),
        opt(8, "subresource", STR),
    ],
);

/// meta/v1 `OwnerReference`.
pub(crate) static OWNER_REFERENCE: Message = Message::new(
    "OwnerReference",
    &[
        req(5, "apiVersion", STR),
        req(1, "kind", STR),
        req(3, "name", STR),
        req(4, "uid", STR),
        ptr(6, "controller", BOOL),
        ptr(7, "blockOwnerDeletion", BOOL),
    ],
);
