//! Test support for edgehive: waiting on conditions with deadlines, and the
//! architecture checks that keep the crate layers apart.
//!
//! **Architecture Invariant:** only tests depend on this crate.

pub mod arch;
pub mod containerd;
pub mod fixtures;
pub mod go;
pub mod mosquitto;
pub mod pki;
pub mod proxy;
pub mod udp;
pub mod umask;

use std::time::Duration;

/// Polls `cond` until it holds; panics naming `what` after `deadline`.
///
/// Tests wait on conditions, never on a fixed sleep; the deadline is generous
/// so that a slow machine does not fail a test.
pub async fn eventually(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + deadline;
    while !cond() {
        assert!(tokio::time::Instant::now() < end, "timed out after {deadline:?} waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
