//! Descriptors for autoscaling/v1 `Scale`, the body of every `scale` subresource.
//!
//! Field numbers come from `generated.proto`; JSON names, `omitempty` and pointer-ness
//! from the Go structs in `types.go` (see the parent module for what each constructor means).

use super::meta::OBJECT_META;
use super::{I32, Message, STR, msg, opt, req};

/// autoscaling/v1 `Scale`.
pub(crate) static SCALE: Message = Message::new(
    "Scale",
    &[
        opt(1, "metadata", msg(&OBJECT_META)),
        opt(2, "spec", msg(&SCALE_SPEC)),
        opt(3, "status", msg(&SCALE_STATUS)),
    ],
);

/// autoscaling/v1 `ScaleSpec`.
pub(crate) static SCALE_SPEC: Message = Message::new(
    "ScaleSpec",
    &[
        opt(1, "replicas", I32),
    ],
);

/// autoscaling/v1 `ScaleStatus`.
pub(crate) static SCALE_STATUS: Message = Message::new(
    "ScaleStatus",
    &[
        req(1, "replicas", I32),
        opt(2, "selector", STR),
    ],
);
