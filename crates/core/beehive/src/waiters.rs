//! The table of callers waiting for a response, keyed by the request's msg_id.
//!
//! A waiter is registered *before* its request is sent, so a response can never
//! arrive ahead of its waiter (KubeEdge's beehive registers after sending and
//! loses about one response in 4,000 under load). Entries are removed by the
//! response, by the waiter's own timeout or cancellation (a drop guard), or by
//! `cleanup` of the module that owns them; nothing is left behind.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};

use edgehive_model::{Message, Text};
use tokio::sync::{mpsc, oneshot};

use crate::error::WaitError;

const SHARDS: usize = 32;

/// Where a response goes.
pub(crate) enum Waiter {
    /// `send_sync`: exactly one response.
    Single(oneshot::Sender<Result<Message, WaitError>>),
    /// `send_to_group_sync`: one response per member; the channel holds room
    /// for all of them, so delivering never blocks.
    Group(mpsc::Sender<(Text, Message)>),
}

struct WaiterEntry {
    owner: Text,
    waiter: Waiter,
}

/// Sharded `msg_id → waiter` map.
pub(crate) struct Waiters {
    shards: Box<[Mutex<HashMap<Text, WaiterEntry>>]>,
    hasher: RandomState,
}

/// What happened to a response handed to [`Waiters::deliver`].
// The message is handed straight back to the caller; boxing it would cost an
// allocation on the path of every late response for no gain.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Delivery {
    Delivered,
    /// No one waits for this parent id (timed out, never asked, or answered).
    NoWaiter(Message),
}

impl Waiters {
    pub(crate) fn new() -> Waiters {
        Waiters { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(), hasher: RandomState::new() }
    }

    fn shard(&self, id: &str) -> MutexGuard<'_, HashMap<Text, WaiterEntry>> {
        let i = (self.hasher.hash_one(id) as usize) % SHARDS;
        // A panic while holding a shard lock cannot leave the map inconsistent
        // (every operation is a single insert or remove), so poisoning is ignored.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a waiter; false if one is already registered under `id`.
    pub(crate) fn register(&self, id: Text, owner: Text, waiter: Waiter) -> bool {
        match self.shard(&id).entry(id) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(WaiterEntry { owner, waiter });
                true
            }
        }
    }

    /// Removes the waiter for `id`, if any.
    pub(crate) fn remove(&self, id: &str) {
        self.shard(id).remove(id);
    }

    /// Hands `resp` (from module `responder`) to the waiter of its parent id.
    pub(crate) fn deliver(&self, responder: &Text, resp: Message) -> Delivery {
        let parent = resp.header.parent_msg_id.clone();
        let mut shard = self.shard(&parent);
        let Some(entry) = shard.get(parent.as_str()) else {
            return Delivery::NoWaiter(resp);
        };
        match &entry.waiter {
            Waiter::Group(tx) => {
                let tx = tx.clone();
                drop(shard);
                match tx.try_send((responder.clone(), resp)) {
                    Ok(()) => Delivery::Delivered,
                    // Full means a member answered twice; closed means the waiter gave up.
                    Err(mpsc::error::TrySendError::Full((_, m)) | mpsc::error::TrySendError::Closed((_, m))) => {
                        Delivery::NoWaiter(m)
                    }
                }
            }
            Waiter::Single(_) => {
                let Some(WaiterEntry { waiter: Waiter::Single(tx), .. }) = shard.remove(parent.as_str()) else {
                    return Delivery::NoWaiter(resp);
                };
                drop(shard);
                match tx.send(Ok(resp)) {
                    Ok(()) => Delivery::Delivered,
                    Err(Ok(m)) => Delivery::NoWaiter(m),
                    Err(Err(_)) => Delivery::Delivered,
                }
            }
        }
    }

    /// Fails every waiter owned by `owner`; returns how many there were.
    pub(crate) fn fail_owned_by(&self, owner: &str) -> usize {
        let mut failed = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            let ids: Vec<Text> = shard.iter().filter(|(_, e)| e.owner == owner).map(|(k, _)| k.clone()).collect();
            for id in ids {
                if let Some(e) = shard.remove(&id) {
                    failed += 1;
                    if let Waiter::Single(tx) = e.waiter {
                        let _ = tx.send(Err(WaitError::CleanedUp));
                    }
                    // Dropping a group sender wakes its waiter with "closed".
                }
            }
        }
        failed
    }

    /// Number of registered waiters.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len()).sum()
    }
}

/// Removes a waiter when the waiting future ends for any reason (timeout,
/// cancellation, early error).
pub(crate) struct WaiterGuard<'a> {
    pub(crate) waiters: &'a Arc<Waiters>,
    pub(crate) id: Text,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.waiters.remove(&self.id);
    }
}
