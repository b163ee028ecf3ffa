//! A module's bounded mailbox.
//!
//! tokio's bounded channel takes a lock to release every slot; on the bus's hot
//! path that lock costs more than the rest of a delivery. This mailbox keeps the
//! bound in one atomic counter in front of tokio's lock-free unbounded channel:
//! a send claims a slot with a compare-and-swap, a receive frees it with a
//! subtraction, and only senders that find the mailbox full park on a `Notify`.
//!
//! No wake-up is lost: a sender registers as waiting *before* its final attempt
//! to claim a slot, and a receiver looks for waiting senders *after* freeing one
//! (both with sequentially consistent ordering), so one of the two always sees
//! the other.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use edgehive_model::Message;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

/// State shared by the senders and the receiver.
struct Bound {
    capacity: usize,
    depth: AtomicUsize,
    waiting: AtomicUsize,
    closed: AtomicBool,
    room: Notify,
}

impl Bound {
    fn try_claim(&self) -> bool {
        let mut d = self.depth.load(Ordering::SeqCst);
        loop {
            if d >= self.capacity {
                return false;
            }
            match self.depth.compare_exchange_weak(d, d + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(now) => d = now,
            }
        }
    }

    fn release(&self) {
        self.depth.fetch_sub(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.room.notify_one();
        }
    }
}

/// Why a send did not go through; the message comes back.
pub(crate) enum MailboxError {
    Full(Message),
    Closed(Message),
}

/// The sending half; every context shares one per module.
pub(crate) struct MailboxTx {
    tx: mpsc::UnboundedSender<Message>,
    bound: Arc<Bound>,
}

/// The receiving half, held by the running module.
pub(crate) struct MailboxRx {
    rx: mpsc::UnboundedReceiver<Message>,
    bound: Arc<Bound>,
}

pub(crate) fn mailbox(capacity: usize) -> (MailboxTx, MailboxRx) {
    let (tx, rx) = mpsc::unbounded_channel();
    let bound = Arc::new(Bound {
        capacity: capacity.max(1),
        depth: AtomicUsize::new(0),
        waiting: AtomicUsize::new(0),
        closed: AtomicBool::new(false),
        room: Notify::new(),
    });
    (MailboxTx { tx, bound: bound.clone() }, MailboxRx { rx, bound })
}

impl MailboxTx {
    fn push(&self, msg: Message) -> Result<(), MailboxError> {
        self.tx.send(msg).map_err(|e| {
            self.bound.depth.fetch_sub(1, Ordering::SeqCst);
            MailboxError::Closed(e.0)
        })
    }

    /// Queues `msg` if there is room now.
    pub(crate) fn try_send(&self, msg: Message) -> Result<(), MailboxError> {
        if self.bound.closed.load(Ordering::Relaxed) {
            return Err(MailboxError::Closed(msg));
        }
        if !self.bound.try_claim() {
            return Err(MailboxError::Full(msg));
        }
        self.push(msg)
    }

    /// Queues `msg`, waiting for room. Cancel-safe: dropping the future before
    /// it completes drops nothing but the future (the message goes with it).
    pub(crate) async fn send(&self, msg: Message) -> Result<(), MailboxError> {
        match self.try_send(msg) {
            Err(MailboxError::Full(msg)) => self.send_slow(msg, None).await,
            other => other,
        }
    }

    /// Like `send`, but a mailbox still full at `deadline` gives the message
    /// back as `Full`.
    pub(crate) async fn send_until(&self, msg: Message, deadline: Instant) -> Result<(), MailboxError> {
        match self.try_send(msg) {
            Err(MailboxError::Full(msg)) => self.send_slow(msg, Some(deadline)).await,
            other => other,
        }
    }

    async fn send_slow(&self, msg: Message, deadline: Option<Instant>) -> Result<(), MailboxError> {
        let bound = &*self.bound;
        bound.waiting.fetch_add(1, Ordering::SeqCst);
        let _unregister = WaitingGuard(bound);
        loop {
            let notified = bound.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if bound.closed.load(Ordering::SeqCst) {
                return Err(MailboxError::Closed(msg));
            }
            if bound.try_claim() {
                return self.push(msg);
            }
            match deadline {
                None => notified.await,
                Some(at) => {
                    if tokio::time::timeout_at(at, notified).await.is_err() {
                        return Err(MailboxError::Full(msg));
                    }
                }
            }
        }
    }

    /// Messages queued now.
    pub(crate) fn depth(&self) -> usize {
        self.bound.depth.load(Ordering::Relaxed)
    }
}

struct WaitingGuard<'a>(&'a Bound);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
        // If we were woken but leave without taking the slot (cancelled, or
        // closed), pass the turn on so no other waiter is stranded.
        if self.0.depth.load(Ordering::SeqCst) < self.0.capacity && self.0.waiting.load(Ordering::SeqCst) > 0 {
            self.0.room.notify_one();
        }
    }
}

impl MailboxRx {
    /// The next message; `None` when every sender is gone.
    pub(crate) async fn recv(&mut self) -> Option<Message> {
        let m = self.rx.recv().await?;
        self.bound.release();
        Some(m)
    }

    /// A message if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<Message> {
        let m = self.rx.try_recv().ok()?;
        self.bound.release();
        Some(m)
    }

    /// Waits for one message, then takes up to `limit` queued ones.
    pub(crate) async fn recv_many(&mut self, buf: &mut Vec<Message>, limit: usize) -> usize {
        let n = self.rx.recv_many(buf, limit).await;
        for _ in 0..n {
            self.bound.release();
        }
        n
    }
}

impl Drop for MailboxRx {
    fn drop(&mut self) {
        self.bound.closed.store(true, Ordering::SeqCst);
        self.bound.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn bound_is_exact() {
        let (tx, mut rx) = mailbox(3);
        for _ in 0..3 {
            assert!(tx.try_send(Message::new()).is_ok());
        }
        assert!(matches!(tx.try_send(Message::new()), Err(MailboxError::Full(_))));
        assert_eq!(tx.depth(), 3);
        rx.recv().await.unwrap();
        assert_eq!(tx.depth(), 2);
        assert!(tx.try_send(Message::new()).is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_blocked_senders_all_get_through() {
        let (tx, mut rx) = mailbox(2);
        let tx = Arc::new(tx);
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let tx = tx.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..1000 {
                    assert!(tx.send(Message::new()).await.is_ok());
                }
            }));
        }
        for _ in 0..32_000 {
            tokio::time::timeout(Duration::from_secs(30), rx.recv()).await.expect("a sender was stranded").unwrap();
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(tx.depth(), 0);
    }

    #[tokio::test]
    async fn dropping_the_receiver_wakes_blocked_senders() {
        let (tx, rx) = mailbox(1);
        tx.try_send(Message::new()).ok().unwrap();
        let tx = Arc::new(tx);
        let t = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(Message::new()).await }
        });
        tokio::task::yield_now().await;
        drop(rx);
        assert!(matches!(t.await.unwrap(), Err(MailboxError::Closed(_))));
        assert!(matches!(tx.try_send(Message::new()), Err(MailboxError::Closed(_))));
    }

    #[tokio::test]
    async fn cancelled_waiter_passes_the_turn_on() {
        let (tx, mut rx) = mailbox(1);
        let tx = Arc::new(tx);
        tx.try_send(Message::new()).ok().unwrap();
        let a = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(Message::new()).await }
        });
        let b = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(Message::new()).await }
        });
        tokio::task::yield_now().await;
        a.abort();
        rx.recv().await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), b).await.expect("b stranded").unwrap().ok().unwrap();
    }
}
