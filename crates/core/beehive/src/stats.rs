//! Observable state of the bus: queue depth per module and event counters.
//!
//! The bus keeps plain atomics; the binary exports them as Prometheus metrics.

use std::sync::atomic::Ordering;

use edgehive_model::Text;

use crate::bus::{Bus, ModuleState};

/// One module's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleStats {
    /// Module name.
    pub name: Text,
    /// Module group.
    pub group: Text,
    /// Lifecycle state.
    pub state: ModuleState,
    /// Messages waiting in the mailbox.
    pub queue_depth: usize,
    /// Mailbox size.
    pub capacity: usize,
    /// Times the module was restarted after ending.
    pub restarts: u64,
}

/// A snapshot of the whole bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Every registered module, sorted by name.
    pub modules: Vec<ModuleStats>,
    /// Sends to a name that no module or group has.
    pub unknown_target: u64,
    /// Sends to a disabled module or group.
    pub disabled_target: u64,
    /// `try_send`s refused by a full mailbox, and sync sends that found no room
    /// before their deadline.
    pub full: u64,
    /// Sends to a module that was cleaned up or has stopped.
    pub closed: u64,
    /// Responses that arrived after their waiter timed out (or had none).
    pub responses_without_waiter: u64,
    /// Sync requests (single or group) that timed out.
    pub sync_timeouts: u64,
    /// Sync requests waiting now.
    pub pending_waiters: usize,
}

impl Stats {
    pub(crate) fn collect(bus: &Bus) -> Stats {
        let mut modules: Vec<ModuleStats> = bus
            .modules
            .values()
            .map(|e| ModuleStats {
                name: e.name.clone(),
                group: e.group.clone(),
                state: e.state(),
                queue_depth: e.queue_depth(),
                capacity: e.capacity,
                restarts: e.restarts.load(Ordering::Relaxed),
            })
            .collect();
        modules.sort_by(|a, b| a.name.cmp(&b.name));
        let c = &bus.counters;
        Stats {
            modules,
            unknown_target: c.unknown_target.load(Ordering::Relaxed),
            disabled_target: c.disabled_target.load(Ordering::Relaxed),
            full: c.full.load(Ordering::Relaxed),
            closed: c.closed.load(Ordering::Relaxed),
            responses_without_waiter: c.responses_without_waiter.load(Ordering::Relaxed),
            sync_timeouts: c.sync_timeouts.load(Ordering::Relaxed),
            pending_waiters: bus.waiters.len(),
        }
    }

    /// The entry of one module.
    pub fn module(&self, name: &str) -> Option<&ModuleStats> {
        self.modules.iter().find(|m| m.name == name)
    }
}
