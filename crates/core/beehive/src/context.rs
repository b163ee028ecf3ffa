//! The messaging API: `Context` (send, sync, respond, group, cleanup) and
//! `ModuleContext` (a context plus the module's own mailbox).

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use edgehive_model::{Message, Text, new_msg_id};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, timeout_at};
use tokio_util::sync::CancellationToken;

use crate::bus::{Bus, MailboxSlot, ModuleEntry};
use crate::error::{RespError, SendError, SendErrorKind, SyncError, WaitError};
use crate::mailbox::{MailboxError, MailboxRx, MailboxTx};
use crate::stats::Stats;
use crate::waiters::{Delivery, Waiter, WaiterGuard};

/// Times a receiver with an empty mailbox yields before it parks.
const SPIN_YIELDS: usize = 4;

/// A handle to the bus, cheap to clone. It carries the identity of the module
/// it was made for: responses sent through it name that module, and waiters it
/// registers are failed when that module is cleaned up.
#[derive(Clone)]
pub struct Context {
    bus: Arc<Bus>,
    me: Text,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("module", &self.me).finish_non_exhaustive()
    }
}

impl Context {
    pub(crate) fn new(bus: Arc<Bus>, me: Text) -> Context {
        Context { bus, me }
    }

    /// The module this context speaks for (empty for an outside caller).
    pub fn name(&self) -> &str {
        &self.me
    }

    /// The same bus, speaking for another identity.
    pub fn as_module(&self, name: impl Into<Text>) -> Context {
        Context { bus: self.bus.clone(), me: name.into() }
    }

    fn fail(&self, kind: SendErrorKind, target: &str, msg: Message) -> SendError {
        self.bus.counters.count_send_failure(kind);
        match kind {
            SendErrorKind::Full => {
                tracing::debug!(from = %self.me, target, msg_id = %msg.header.msg_id, %kind, "message not queued")
            }
            _ => {
                tracing::warn!(from = %self.me, target, msg_id = %msg.header.msg_id, operation = %msg.route.operation, resource = %msg.route.resource, %kind, "message not delivered")
            }
        }
        SendError::new(kind, Text::copy_from(target), msg)
    }

    /// Sends to a module, waiting for room in its mailbox.
    pub async fn send(&self, module: &str, msg: Message) -> Result<(), SendError> {
        let tx = match self.bus.module(module).and_then(|e| e.sender()) {
            Ok(tx) => tx,
            Err(kind) => return Err(self.fail(kind, module, msg)),
        };
        tx.send(msg).await.map_err(|e| self.mailbox_fail(e, module))
    }

    /// Sends to a module, waiting at most `wait` for room in its mailbox; a
    /// mailbox still full then is `Full`, and the message is handed back.
    pub async fn send_within(&self, module: &str, msg: Message, wait: Duration) -> Result<(), SendError> {
        let tx = match self.bus.module(module).and_then(|e| e.sender()) {
            Ok(tx) => tx,
            Err(kind) => return Err(self.fail(kind, module, msg)),
        };
        tx.send_until(msg, Instant::now() + wait).await.map_err(|e| self.mailbox_fail(e, module))
    }

    fn mailbox_fail(&self, e: MailboxError, target: &str) -> SendError {
        match e {
            MailboxError::Full(m) => self.fail(SendErrorKind::Full, target, m),
            MailboxError::Closed(m) => self.fail(SendErrorKind::Closed, target, m),
        }
    }

    /// Sends to a module if its mailbox has room now; `Full` hands the message back.
    pub fn try_send(&self, module: &str, msg: Message) -> Result<(), SendError> {
        let tx = match self.bus.module(module).and_then(|e| e.sender()) {
            Ok(tx) => tx,
            Err(kind) => return Err(self.fail(kind, module, msg)),
        };
        tx.try_send(msg).map_err(|e| self.mailbox_fail(e, module))
    }

    /// Sends, waiting for room until `deadline`; a mailbox still full then is `Full`.
    async fn send_to_entry_until(&self, entry: &ModuleEntry, msg: Message, deadline: Instant) -> Result<(), SendError> {
        let tx = match entry.sender() {
            Ok(tx) => tx,
            Err(kind) => return Err(self.fail(kind, &entry.name, msg)),
        };
        tx.send_until(msg, deadline).await.map_err(|e| self.mailbox_fail(e, &entry.name))
    }

    /// Sends a copy to every enabled member of a group, waiting for room in each
    /// mailbox. Returns how many members got it. Members that were cleaned up
    /// are skipped; if none is left the message comes back as `Closed`.
    pub async fn send_to_group(&self, group: &str, msg: Message) -> Result<usize, SendError> {
        let members = match self.bus.group(group) {
            Ok(m) => m,
            Err(kind) => return Err(self.fail(kind, group, msg)),
        };
        let live: Vec<&MailboxTx> = members.iter().filter_map(|e| e.sender().ok()).collect();
        let Some((last, rest)) = live.split_last() else {
            return Err(self.fail(SendErrorKind::Closed, group, msg));
        };
        let mut delivered = 0;
        for tx in rest {
            if tx.send(msg.clone()).await.is_ok() {
                delivered += 1;
            }
        }
        match last.send(msg).await {
            Ok(()) => delivered += 1,
            Err(MailboxError::Closed(m) | MailboxError::Full(m)) if delivered == 0 => {
                return Err(self.fail(SendErrorKind::Closed, group, m));
            }
            Err(_) => {}
        }
        Ok(delivered)
    }

    /// Sends a request and waits up to `timeout` for the response whose
    /// `parent_msg_id` is the request's id. Marks the request `sync`.
    ///
    /// The waiter is registered before the request is queued, so a fast
    /// response cannot be lost.
    pub async fn send_sync(&self, module: &str, mut msg: Message, timeout: Duration) -> Result<Message, SyncError> {
        let deadline = Instant::now() + timeout;
        if msg.header.msg_id.is_empty() {
            msg.header.msg_id = new_msg_id();
        }
        msg.header.sync = true;
        let id = msg.header.msg_id.clone();
        let entry = match self.bus.module(module) {
            Ok(e) => e,
            Err(kind) => return Err(self.fail(kind, module, msg).into()),
        };
        let (tx, rx) = oneshot::channel();
        if !self.bus.waiters.register(id.clone(), self.me.clone(), Waiter::Single(tx)) {
            return Err(SyncError::DuplicateId(id));
        }
        let _guard = WaiterGuard { waiters: &self.bus.waiters, id: id.clone() };
        self.send_to_entry_until(entry, msg, deadline).await?;
        match timeout_at(deadline, rx).await {
            Ok(Ok(Ok(resp))) => Ok(resp),
            Ok(Ok(Err(cause))) => Err(SyncError::Abandoned { msg_id: id, cause }),
            Ok(Err(_)) => Err(SyncError::Abandoned { msg_id: id, cause: WaitError::CleanedUp }),
            Err(_) => {
                self.bus.counters.sync_timeouts.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(from = %self.me, target = module, msg_id = %id, ?timeout, "sync request timed out");
                Err(SyncError::Timeout { target: Text::copy_from(module), msg_id: id, after: timeout })
            }
        }
    }

    /// Sends a request to every enabled member of a group and waits up to
    /// `timeout` until each has responded. On timeout the error names the
    /// members that did not answer and carries the responses that did.
    pub async fn send_to_group_sync(
        &self,
        group: &str,
        mut msg: Message,
        timeout: Duration,
    ) -> Result<Vec<Message>, SyncError> {
        let deadline = Instant::now() + timeout;
        let members: Vec<Arc<ModuleEntry>> = match self.bus.group(group) {
            Ok(m) => m.iter().filter(|e| e.sender().is_ok()).cloned().collect(),
            Err(kind) => return Err(self.fail(kind, group, msg).into()),
        };
        if members.is_empty() {
            return Err(self.fail(SendErrorKind::Closed, group, msg).into());
        }
        if msg.header.msg_id.is_empty() {
            msg.header.msg_id = new_msg_id();
        }
        msg.header.sync = true;
        let id = msg.header.msg_id.clone();
        let (tx, mut rx) = mpsc::channel(members.len());
        if !self.bus.waiters.register(id.clone(), self.me.clone(), Waiter::Group(tx)) {
            return Err(SyncError::DuplicateId(id));
        }
        let _guard = WaiterGuard { waiters: &self.bus.waiters, id: id.clone() };

        let mut pending: Vec<Text> = Vec::with_capacity(members.len());
        for entry in &members {
            if self.send_to_entry_until(entry, msg.clone(), deadline).await.is_ok() {
                pending.push(entry.name.clone());
            }
        }
        let mut missing: Vec<Text> = members.iter().map(|e| e.name.clone()).filter(|n| !pending.contains(n)).collect();
        let mut received = Vec::with_capacity(pending.len());
        while !pending.is_empty() {
            match timeout_at(deadline, rx.recv()).await {
                Ok(Some((who, resp))) => {
                    if let Some(i) = pending.iter().position(|p| *p == who) {
                        pending.swap_remove(i);
                        received.push(resp);
                    }
                }
                Ok(None) => return Err(SyncError::Abandoned { msg_id: id, cause: WaitError::CleanedUp }),
                Err(_) => break,
            }
        }
        missing.append(&mut pending);
        if missing.is_empty() {
            Ok(received)
        } else {
            self.bus.counters.sync_timeouts.fetch_add(1, Ordering::Relaxed);
            missing.sort();
            tracing::debug!(from = %self.me, group, msg_id = %id, ?missing, "group sync request incomplete");
            Err(SyncError::GroupTimeout { group: Text::copy_from(group), missing, received, after: timeout })
        }
    }

    /// Delivers a response to the caller waiting on its `parent_msg_id`. A
    /// response no one waits for is counted and handed back.
    pub fn send_resp(&self, resp: Message) -> Result<(), RespError> {
        match self.bus.waiters.deliver(&self.me, resp) {
            Delivery::Delivered => Ok(()),
            Delivery::NoWaiter(resp) => {
                self.bus.counters.responses_without_waiter.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(from = %self.me, parent = %resp.header.parent_msg_id, "response has no waiter; dropped");
                Err(RespError::new(resp))
            }
        }
    }

    /// Removes a module from the bus: later sends to it fail with `Closed`, it
    /// is cancelled and not restarted, and the sync requests it is waiting on
    /// fail with [`WaitError::CleanedUp`]. Returns false for an unknown module.
    pub fn cleanup(&self, module: &str) -> bool {
        let Ok(entry) = self.bus.module(module) else {
            return false;
        };
        entry.removed.store(true, Ordering::Relaxed);
        entry.cancel.cancel();
        let failed = self.bus.waiters.fail_owned_by(module);
        tracing::info!(module, failed_waiters = failed, "module cleaned up");
        true
    }

    /// Messages waiting in a module's mailbox.
    pub fn queue_depth(&self, module: &str) -> Option<usize> {
        self.bus.module(module).ok().map(|e| e.queue_depth())
    }

    /// Sync requests waiting for a response, over the whole bus.
    pub fn pending_waiters(&self) -> usize {
        self.bus.waiters.len()
    }

    /// A snapshot of queue depths, module states and counters.
    pub fn stats(&self) -> Stats {
        Stats::collect(&self.bus)
    }
}

/// What a module's `run` gets: a [`Context`] speaking for the module, and the
/// module's mailbox.
///
/// The mailbox goes back to the bus when this value is dropped (also when the
/// module panics), so a restarted module finds the messages that were waiting.
pub struct ModuleContext {
    ctx: Context,
    rx: Option<MailboxRx>,
    slot: MailboxSlot,
    /// Messages taken on the fast path since cancellation was last checked.
    unchecked: u32,
}

impl std::fmt::Debug for ModuleContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleContext").field("module", &self.ctx.me).finish_non_exhaustive()
    }
}

impl ModuleContext {
    pub(crate) fn new(ctx: Context, rx: MailboxRx, slot: MailboxSlot) -> ModuleContext {
        ModuleContext { ctx, rx: Some(rx), slot, unchecked: 0 }
    }

    /// The bus handle, to clone into tasks the module spawns.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The next message; `None` once the module has been cleaned up and its
    /// mailbox drained.
    pub async fn receive(&mut self) -> Option<Message> {
        self.rx.as_mut()?.recv().await
    }

    /// The next message, or `None` when `cancel` fires first.
    pub async fn receive_until(&mut self, cancel: &CancellationToken) -> Option<Message> {
        let rx = self.rx.as_mut()?;
        // Fast path: a queued message needs no cancellation future (making one
        // registers a waiter on the token, which takes a lock, as does
        // `is_cancelled`), so cancellation is checked every 64 messages.
        if self.unchecked < 64
            && let Some(m) = rx.try_recv()
        {
            self.unchecked += 1;
            return Some(m);
        }
        self.unchecked = 0;
        // Before parking, give a busy sender a moment: a module that sleeps
        // between every two messages makes each send pay for waking a thread.
        for _ in 0..SPIN_YIELDS {
            if cancel.is_cancelled() {
                return None;
            }
            tokio::task::yield_now().await;
            if let Some(m) = rx.try_recv() {
                return Some(m);
            }
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            m = rx.recv() => m,
        }
    }

    /// A message if one is waiting.
    pub fn try_receive(&mut self) -> Option<Message> {
        self.rx.as_mut()?.try_recv()
    }

    /// Waits for at least one message and appends up to `limit` to `buf`;
    /// returns how many were added (0 once the mailbox is closed).
    pub async fn receive_many(&mut self, buf: &mut Vec<Message>, limit: usize) -> usize {
        match self.rx.as_mut() {
            Some(rx) => rx.recv_many(buf, limit).await,
            None => 0,
        }
    }
}

impl Deref for ModuleContext {
    type Target = Context;
    fn deref(&self) -> &Context {
        &self.ctx
    }
}

impl Drop for ModuleContext {
    fn drop(&mut self) {
        if let Some(rx) = self.rx.take() {
            let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
            *slot = Some(rx);
        }
    }
}
