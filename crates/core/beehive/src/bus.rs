//! The shared tables behind every `Context`: modules, groups, waiters, counters.
//!
//! The module and group tables are fixed when the bus is built, so a send looks
//! a name up without taking a lock. `cleanup` only flips a flag on the entry
//! and cancels the module; the mailbox closes when its supervisor lets go of it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use edgehive_model::Text;
use tokio_util::sync::CancellationToken;

use crate::error::SendErrorKind;
use crate::mailbox::{MailboxRx, MailboxTx, mailbox};
use crate::waiters::Waiters;

/// Lifecycle state of a module, as shown in [`ModuleStats`](crate::ModuleStats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleState {
    /// Registered, not started yet.
    Registered,
    /// `run` is executing.
    Running,
    /// Waiting out a restart backoff.
    BackingOff,
    /// Ended and not restarted (shutdown, clean return, cleanup).
    Stopped,
    /// Gave up after failures (restart policy exhausted or mailbox lost).
    Failed,
    /// Registered as disabled; never runs.
    Disabled,
}

impl ModuleState {
    fn from_u8(v: u8) -> ModuleState {
        match v {
            0 => ModuleState::Registered,
            1 => ModuleState::Running,
            2 => ModuleState::BackingOff,
            3 => ModuleState::Stopped,
            4 => ModuleState::Failed,
            _ => ModuleState::Disabled,
        }
    }
    fn as_u8(self) -> u8 {
        match self {
            ModuleState::Registered => 0,
            ModuleState::Running => 1,
            ModuleState::BackingOff => 2,
            ModuleState::Stopped => 3,
            ModuleState::Failed => 4,
            ModuleState::Disabled => 5,
        }
    }
}

pub(crate) type MailboxSlot = Arc<Mutex<Option<MailboxRx>>>;

/// One registered module.
pub(crate) struct ModuleEntry {
    pub(crate) name: Text,
    pub(crate) group: Text,
    /// `None` for a disabled module.
    pub(crate) tx: Option<MailboxTx>,
    pub(crate) capacity: usize,
    /// The receiver while the module is not running; the running module holds it.
    pub(crate) slot: MailboxSlot,
    pub(crate) removed: AtomicBool,
    pub(crate) cancel: CancellationToken,
    pub(crate) restarts: AtomicU64,
    state: AtomicU8,
}

impl ModuleEntry {
    pub(crate) fn new(
        name: Text,
        group: Text,
        enabled: bool,
        capacity: usize,
        root: &CancellationToken,
    ) -> ModuleEntry {
        let (tx, rx) = if enabled {
            let (tx, rx) = mailbox(capacity);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        ModuleEntry {
            name,
            group,
            tx,
            capacity,
            slot: Arc::new(Mutex::new(rx)),
            removed: AtomicBool::new(false),
            cancel: root.child_token(),
            restarts: AtomicU64::new(0),
            state: AtomicU8::new(if enabled { ModuleState::Registered } else { ModuleState::Disabled }.as_u8()),
        }
    }

    pub(crate) fn state(&self) -> ModuleState {
        ModuleState::from_u8(self.state.load(Ordering::Relaxed))
    }

    pub(crate) fn set_state(&self, s: ModuleState) {
        self.state.store(s.as_u8(), Ordering::Relaxed);
    }

    /// Messages waiting in the mailbox.
    pub(crate) fn queue_depth(&self) -> usize {
        self.tx.as_ref().map_or(0, MailboxTx::depth)
    }

    /// The sender, if messages can be delivered now.
    pub(crate) fn sender(&self) -> Result<&MailboxTx, SendErrorKind> {
        match &self.tx {
            None => Err(SendErrorKind::Disabled),
            Some(_) if self.removed.load(Ordering::Relaxed) => Err(SendErrorKind::Closed),
            Some(tx) => Ok(tx),
        }
    }
}

/// Counters of events an operator wants to see.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) unknown_target: AtomicU64,
    pub(crate) disabled_target: AtomicU64,
    pub(crate) full: AtomicU64,
    pub(crate) closed: AtomicU64,
    pub(crate) responses_without_waiter: AtomicU64,
    pub(crate) sync_timeouts: AtomicU64,
}

impl Counters {
    pub(crate) fn count_send_failure(&self, kind: SendErrorKind) {
        let c = match kind {
            SendErrorKind::UnknownTarget => &self.unknown_target,
            SendErrorKind::Disabled => &self.disabled_target,
            SendErrorKind::Full => &self.full,
            SendErrorKind::Closed => &self.closed,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything the contexts share.
pub(crate) struct Bus {
    pub(crate) modules: HashMap<Text, Arc<ModuleEntry>>,
    /// Enabled members of each group, in registration order.
    pub(crate) groups: HashMap<Text, Vec<Arc<ModuleEntry>>>,
    /// Groups whose members are all disabled.
    pub(crate) disabled_groups: HashSet<Text>,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) counters: Counters,
    pub(crate) root: CancellationToken,
}

impl Bus {
    pub(crate) fn module(&self, name: &str) -> Result<&Arc<ModuleEntry>, SendErrorKind> {
        self.modules.get(name).ok_or(SendErrorKind::UnknownTarget)
    }

    pub(crate) fn group(&self, name: &str) -> Result<&[Arc<ModuleEntry>], SendErrorKind> {
        match self.groups.get(name) {
            Some(members) => Ok(members),
            None if self.disabled_groups.contains(name) => Err(SendErrorKind::Disabled),
            None => Err(SendErrorKind::UnknownTarget),
        }
    }
}
