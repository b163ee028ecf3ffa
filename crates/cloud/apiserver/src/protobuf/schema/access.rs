//! Descriptors for rbac.authorization.k8s.io/v1 (`Role`, `ClusterRole`, `RoleBinding`,
//! `ClusterRoleBinding`), authorization.k8s.io/v1 (the access and rules reviews) and
//! authentication.k8s.io/v1 (`TokenRequest`, `TokenReview`, `SelfSubjectReview`): what
//! `kubectl create role|clusterrole|rolebinding|clusterrolebinding|token`, `kubectl auth can-i`
//! and `kubectl auth whoami` post.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).
//! The `extra` maps of SubjectAccessReviewSpec and UserInfo (`map<string, ExtraValue>`, a
//! JSON object of string lists) are not described and so skipped; the server ignores them.

use super::meta::{LABEL_SELECTOR, OBJECT_META};
use super::{BOOL, I64, Message, STR, TIME, msg, opt, ptr, rep, req};

/// rbac/v1 `PolicyRule`.
static POLICY_RULE: Message = Message::new(
    "PolicyRule",
    &[
        rep(1, "verbs", STR),
        rep(2, "apiGroups", STR),
        rep(3, "resources", STR),
        rep(4, "resourceNames", STR),
        rep(5, "nonResourceURLs", STR),
    ],
);

/// rbac/v1 `AggregationRule`.
static AGGREGATION_RULE: Message = Message::new(
    "AggregationRule",
    &[
        rep(1, "clusterRoleSelectors", msg(&LABEL_SELECTOR)),
    ],
);

/// rbac/v1 `Role`.
pub(crate) static ROLE: Message = Message::new(
    "Role",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        rep(2, "rules", msg(&POLICY_RULE)),
    ],
);

/// rbac/v1 `ClusterRole`.
pub(crate) static CLUSTER_ROLE: Message = Message::new(
    "ClusterRole",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        rep(2, "rules", msg(&POLICY_RULE)),
        opt(3, "aggregationRule", msg(&AGGREGATION_RULE)),
    ],
);

/// rbac/v1 `Subject`.
static SUBJECT: Message = Message::new(
    "Subject",
    &[
        req(1, "kind", STR),
        opt(2, "apiGroup", STR),
        req(3, "name", STR),
        opt(4, "namespace", STR),
    ],
);

/// rbac/v1 `RoleRef`.
static ROLE_REF: Message = Message::new(
    "RoleRef",
    &[
        req(1, "apiGroup", STR),
        req(2, "kind", STR),
        req(3, "name", STR),
    ],
);

/// rbac/v1 `RoleBinding` (and, with the same fields, `ClusterRoleBinding`).
pub(crate) static ROLE_BINDING: Message = Message::new(
    "RoleBinding",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        rep(2, "subjects", msg(&SUBJECT)),
        opt(3, "roleRef", msg(&ROLE_REF)),
    ],
);

/// authorization/v1 `ResourceAttributes` (the 1.31 field and label selectors are skipped).
static RESOURCE_ATTRIBUTES: Message = Message::new(
    "ResourceAttributes",
    &[
        opt(1, "namespace", STR),
        opt(2, "verb", STR),
        opt(3, "group", STR),
        opt(4, "version", STR),
        opt(5, "resource", STR),
        opt(6, "subresource", STR),
        opt(7, "name", STR),
    ],
);

/// authorization/v1 `NonResourceAttributes`.
static NON_RESOURCE_ATTRIBUTES: Message = Message::new(
    "NonResourceAttributes",
    &[
        opt(1, "path", STR),
        opt(2, "verb", STR),
    ],
);

/// authorization/v1 `SubjectAccessReviewStatus`.
static SUBJECT_ACCESS_REVIEW_STATUS: Message = Message::new(
    "SubjectAccessReviewStatus",
    &[
        req(1, "allowed", BOOL),
        opt(2, "reason", STR),
        opt(3, "evaluationError", STR),
        opt(4, "denied", BOOL),
    ],
);

/// authorization/v1 `SelfSubjectAccessReviewSpec`.
static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Message = Message::new(
    "SelfSubjectAccessReviewSpec",
    &[
        opt(1, "resourceAttributes", msg(&RESOURCE_ATTRIBUTES)),
        opt(2, "nonResourceAttributes", msg(&NON_RESOURCE_ATTRIBUTES)),
    ],
);

/// authorization/v1 `SelfSubjectAccessReview`.
pub(crate) static SELF_SUBJECT_ACCESS_REVIEW: Message = Message::new(
    "SelfSubjectAccessReview",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
        opt(3, "status", msg(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
);

/// authorization/v1 `SubjectAccessReviewSpec`.
static SUBJECT_ACCESS_REVIEW_SPEC: Message = Message::new(
    "SubjectAccessReviewSpec",
    &[
        opt(1, "resourceAttributes", msg(&RESOURCE_ATTRIBUTES)),
        opt(2, "nonResourceAttributes", msg(&NON_RESOURCE_ATTRIBUTES)),
        opt(3, "user", STR),
        rep(4, "groups", STR),
        opt(6, "uid", STR),
    ],
);

/// authorization/v1 `SubjectAccessReview` (and, with the same fields, `LocalSubjectAccessReview`).
pub(crate) static SUBJECT_ACCESS_REVIEW: Message = Message::new(
    "SubjectAccessReview",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&SUBJECT_ACCESS_REVIEW_SPEC)),
        opt(3, "status", msg(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
);

/// authorization/v1 `SelfSubjectRulesReviewSpec`.
static SELF_SUBJECT_RULES_REVIEW_SPEC: Message = Message::new(
    "SelfSubjectRulesReviewSpec",
    &[
        opt(1, "namespace", STR),
    ],
);

/// authorization/v1 `SelfSubjectRulesReview` (the status is the server's; not described).
pub(crate) static SELF_SUBJECT_RULES_REVIEW: Message = Message::new(
    "SelfSubjectRulesReview",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&SELF_SUBJECT_RULES_REVIEW_SPEC)),
    ],
);

/// authentication/v1 `BoundObjectReference`.
static BOUND_OBJECT_REFERENCE: Message = Message::new(
    "BoundObjectReference",
    &[
        opt(1, "kind", STR),
        opt(2, "apiVersion", STR),
        opt(3, "name", STR),
        opt(4, "uid", STR),
    ],
);

/// authentication/v1 `TokenRequestSpec`.
static TOKEN_REQUEST_SPEC: Message = Message::new(
    "TokenRequestSpec",
    &[
        rep(1, "audiences", STR),
        opt(3, "boundObjectRef", msg(&BOUND_OBJECT_REFERENCE)),
        ptr(4, "expirationSeconds", I64),
    ],
);

/// authentication/v1 `TokenRequestStatus`.
static TOKEN_REQUEST_STATUS: Message = Message::new(
    "TokenRequestStatus",
    &[
        req(1, "token", STR),
        opt(2, "expirationTimestamp", TIME),
    ],
);

/// authentication/v1 `TokenRequest`.
pub(crate) static TOKEN_REQUEST: Message = Message::new(
    "TokenRequest",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&TOKEN_REQUEST_SPEC)),
        opt(3, "status", msg(&TOKEN_REQUEST_STATUS)),
    ],
);

/// authentication/v1 `TokenReviewSpec`.
static TOKEN_REVIEW_SPEC: Message = Message::new(
    "TokenReviewSpec",
    &[
        opt(1, "token", STR),
        rep(2, "audiences", STR),
    ],
);

/// authentication/v1 `TokenReview` (the status is the server's; not described).
pub(crate) static TOKEN_REVIEW: Message = Message::new(
    "TokenReview",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&TOKEN_REVIEW_SPEC)),
    ],
);

/// authentication/v1 `SelfSubjectReview` (the status is the server's; not described).
pub(crate) static SELF_SUBJECT_REVIEW: Message = Message::new(
    "SelfSubjectReview",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
    ],
);
