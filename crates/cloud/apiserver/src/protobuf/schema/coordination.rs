//! Descriptors for coordination.k8s.io/v1 `Lease`.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::meta::{OBJECT_META};
use super::{I32, MICRO_TIME, Message, STR, msg, opt, ptr};

/// coordination.k8s.io/v1 `Lease`.
pub(crate) static LEASE: Message = Message::new(
    "Lease",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&LEASE_SPEC)),
    ],
);

/// coordination.k8s.io/v1 `LeaseSpec`.
pub(crate) static LEASE_SPEC: Message = Message::new(
    "LeaseSpec",
    &[
        ptr(1, "holderIdentity", STR),
        ptr(2, "leaseDurationSeconds", I32),
        opt(3, "acquireTime", MICRO_TIME),
        opt(4, "renewTime", MICRO_TIME),
        ptr(5, "leaseTransitions", I32),
        ptr(6, "strategy", STR),
        ptr(7, "preferredHolder", STR),
    ],
);
