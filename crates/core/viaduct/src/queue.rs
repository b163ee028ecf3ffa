//! A bounded queue for one receiver that holds no memory while it is empty.
//!
//! Every connection has a few queues (what to write, what was read, stream
//! session frames; the cloud's session has its inbox), and a fleet of idle
//! connections keeps them all empty. tokio's bounded channel allocates a
//! block of 32 slots and a cache-padded channel header up front, ~0.8–1.6 KiB
//! a queue; this one is a `VecDeque` behind a lock, cut back to
//! [`IDLE_SLOTS`] whenever the receiver finds it empty and waits, with two
//! `Notify`s to wake the receiver and the senders: ~150 bytes and those
//! slots while idle.
//! A sender wakes the receiver only when it waits, so a busy queue costs a
//! lock per value and no wakeups.
//!
//! The semantics are those of `tokio::sync::mpsc`'s bounded channel as the
//! crate uses it: `recv` yields `None` once every sender is gone and the
//! queue is drained; sends fail, handing the value back, once the receiver
//! is gone; a [`Permit`] reserves a slot so that a value is only given up
//! when it can be queued; `recv`, `recv_many` and `reserve` are
//! cancellation safe.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// Slots a waiting receiver keeps: a queue that carries a value now and
/// then does not allocate for each, and an idle one holds a few words.
pub const IDLE_SLOTS: usize = 4;

/// Creates a queue of at most `capacity` values (at least 1).
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            capacity: capacity.max(1),
            reserved: 0,
            senders: 1,
            receiver: true,
            receiver_waits: false,
        }),
        items: Notify::new(),
        room: Notify::new(),
    });
    (Sender { shared: shared.clone() }, Receiver { shared })
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes the receiver: a value was queued, or the last sender left.
    items: Notify,
    /// Wakes senders waiting for room: a value was taken, a permit was
    /// given back, or the receiver left.
    room: Notify,
}

struct State<T> {
    items: VecDeque<T>,
    capacity: usize,
    /// Slots promised to permits not yet used.
    reserved: usize,
    senders: usize,
    receiver: bool,
    /// The receiver found the queue empty and waits for a wakeup.
    receiver_waits: bool,
}

impl<T> State<T> {
    fn has_room(&self) -> bool {
        self.items.len() + self.reserved < self.capacity
    }

    /// Queues `value`; true when the receiver waits and must be woken.
    fn push(&mut self, value: T) -> bool {
        self.items.push_back(value);
        std::mem::take(&mut self.receiver_waits)
    }

    /// The receiver is about to wait on an empty queue.
    fn wait(&mut self) {
        self.receiver_waits = true;
        if self.items.capacity() > IDLE_SLOTS {
            self.items = VecDeque::with_capacity(IDLE_SLOTS);
        }
    }
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nothing a panicking holder leaves half done: the state stays usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why a value could not be queued now; the value comes back.
#[derive(Debug, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// The queue is at its capacity.
    Full(T),
    /// The receiver is gone.
    Closed(T),
}

impl<T> TrySendError<T> {
    /// The value that was not queued.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Closed(v) => v,
        }
    }
}

/// The receiver is gone.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// The sending side; clone it for more senders.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").field("queued", &self.len()).finish()
    }
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").field("queued", &self.shared.lock().items.len()).finish()
    }
}

impl<T> std::fmt::Debug for Permit<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit").finish_non_exhaustive()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.lock().senders += 1;
        Sender { shared: self.shared.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let last = {
            let mut st = self.shared.lock();
            st.senders -= 1;
            st.senders == 0
        };
        if last {
            self.shared.items.notify_one();
        }
    }
}

impl<T> Sender<T> {
    /// Queues `value` if there is room now.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let wake = {
            let mut st = self.shared.lock();
            if !st.receiver {
                return Err(TrySendError::Closed(value));
            }
            if !st.has_room() {
                return Err(TrySendError::Full(value));
            }
            st.push(value)
        };
        if wake {
            self.shared.items.notify_one();
        }
        Ok(())
    }

    /// Waits for room and queues `value`; hands it back if the receiver is
    /// gone. Dropped while waiting, the value is dropped with it: use
    /// [`Sender::reserve`] to keep it.
    pub async fn send(&self, value: T) -> Result<(), T> {
        match self.reserve().await {
            Ok(permit) => {
                permit.send(value);
                Ok(())
            }
            Err(Closed) => Err(value),
        }
    }

    /// Waits for a slot and holds it for one value.
    pub async fn reserve(&self) -> Result<Permit<'_, T>, Closed> {
        loop {
            // Created before the check: a slot freed after the check stores
            // a wakeup this future takes.
            let room = self.shared.room.notified();
            {
                let mut st = self.shared.lock();
                if !st.receiver {
                    return Err(Closed);
                }
                if st.has_room() {
                    st.reserved += 1;
                    return Ok(Permit { sender: Some(self) });
                }
            }
            room.await;
        }
    }

    /// Values queued and slots reserved.
    pub fn len(&self) -> usize {
        let st = self.shared.lock();
        st.items.len() + st.reserved
    }

    /// Whether no value is queued and no slot reserved.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One reserved slot of a queue.
pub struct Permit<'a, T> {
    sender: Option<&'a Sender<T>>,
}

impl<T> Permit<'_, T> {
    /// Queues `value` in the reserved slot (dropped if the receiver left
    /// since, as tokio's permit does).
    pub fn send(mut self, value: T) {
        let Some(sender) = self.sender.take() else { return };
        let shared = &sender.shared;
        let wake = {
            let mut st = shared.lock();
            st.reserved -= 1;
            if !st.receiver {
                return;
            }
            st.push(value)
        };
        if wake {
            shared.items.notify_one();
        }
    }
}

impl<T> Drop for Permit<'_, T> {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            sender.shared.lock().reserved -= 1;
            sender.shared.room.notify_one();
        }
    }
}

/// The receiving side.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let items = {
            let mut st = self.shared.lock();
            st.receiver = false;
            std::mem::take(&mut st.items)
        };
        // Dropped outside the lock: a value's drop may use the queue.
        drop(items);
        self.shared.room.notify_waiters();
    }
}

impl<T> Receiver<T> {
    /// The next value; `None` once every sender is gone and the queue is
    /// empty.
    pub async fn recv(&mut self) -> Option<T> {
        loop {
            let queued = self.shared.items.notified();
            {
                let mut st = self.shared.lock();
                if let Some(v) = st.items.pop_front() {
                    drop(st);
                    self.shared.room.notify_one();
                    return Some(v);
                }
                if st.senders == 0 {
                    return None;
                }
                st.wait();
            }
            queued.await;
        }
    }

    /// Waits for at least one value and moves up to `limit` into `buf`;
    /// 0 once every sender is gone and the queue is empty (or `limit` is 0).
    pub async fn recv_many(&mut self, buf: &mut Vec<T>, limit: usize) -> usize {
        if limit == 0 {
            return 0;
        }
        loop {
            let queued = self.shared.items.notified();
            {
                let mut st = self.shared.lock();
                let n = st.items.len().min(limit);
                if n > 0 {
                    buf.extend(st.items.drain(..n));
                    drop(st);
                    for _ in 0..n {
                        self.shared.room.notify_one();
                    }
                    return n;
                }
                if st.senders == 0 {
                    return 0;
                }
                st.wait();
            }
            queued.await;
        }
    }

    /// The next value if one is queued.
    pub fn try_recv(&mut self) -> Option<T> {
        let v = self.shared.lock().items.pop_front();
        if v.is_some() {
            self.shared.room.notify_one();
        }
        v
    }

    /// Whether no value is queued.
    pub fn is_empty(&self) -> bool {
        self.shared.lock().items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;

    fn idle_bytes<T>(rx: &Receiver<T>) -> usize {
        rx.shared.lock().items.capacity() * std::mem::size_of::<T>()
    }

    #[tokio::test]
    async fn values_come_out_in_order_and_a_waiting_receiver_keeps_a_small_buffer() {
        let (tx, mut rx) = channel::<u32>(4);
        for i in 0..4 {
            tx.try_send(i).unwrap();
        }
        assert_eq!(tx.try_send(9), Err(TrySendError::Full(9)));
        assert_eq!(tx.len(), 4);
        let mut got = Vec::new();
        assert_eq!(rx.recv_many(&mut got, 3).await, 3);
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(got, [0, 1, 2]);
        let (tx, mut rx) = channel::<u32>(64);
        for i in 0..64 {
            tx.try_send(i).unwrap();
        }
        while rx.try_recv().is_some() {}
        assert!(idle_bytes(&rx) >= 64 * 4, "kept while values flow");
        // Waiting on an empty queue cuts its buffer back.
        assert!(tokio::time::timeout(Duration::from_millis(10), rx.recv()).await.is_err());
        assert_eq!(idle_bytes(&rx), IDLE_SLOTS * 4);
        assert!(rx.is_empty() && rx.try_recv().is_none());
    }

    #[tokio::test]
    async fn a_waiting_receiver_is_woken_by_each_kind_of_send_also_after_a_cancelled_wait() {
        let (tx, mut rx) = channel::<u32>(2);
        assert!(tokio::time::timeout(Duration::from_millis(5), rx.recv()).await.is_err());
        tx.try_send(1).unwrap();
        assert_eq!(rx.recv().await, Some(1));
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(v) = rx.recv().await {
                got.push(v);
            }
            got
        });
        for v in 2..5 {
            tokio::task::yield_now().await;
            match v {
                2 => tx.try_send(v).unwrap(),
                3 => tx.reserve().await.unwrap().send(v),
                _ => tx.send(v).await.unwrap(),
            }
        }
        drop(tx);
        let got = tokio::time::timeout(Duration::from_secs(10), reader).await.unwrap().unwrap();
        assert_eq!(got, [2, 3, 4]);
    }

    #[tokio::test]
    async fn a_full_queue_makes_senders_wait_until_a_value_is_taken() {
        let (tx, mut rx) = channel::<u32>(1);
        tx.try_send(1).unwrap();
        let waiting = {
            let tx = tx.clone();
            tokio::spawn(async move { tx.send(2).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert_eq!(rx.recv().await, Some(1));
        waiting.await.unwrap().unwrap();
        assert_eq!(rx.recv().await, Some(2));
    }

    #[tokio::test]
    async fn a_reservation_holds_its_slot_and_gives_it_back_unused() {
        let (tx, mut rx) = channel::<u32>(1);
        let permit = tx.reserve().await.unwrap();
        assert_eq!(tx.try_send(5), Err(TrySendError::Full(5)), "the slot is promised");
        // A second reservation waits; cancelled, it takes nothing.
        assert!(tokio::time::timeout(Duration::from_millis(10), tx.reserve()).await.is_err());
        drop(permit);
        assert!(tx.is_empty());
        tx.reserve().await.unwrap().send(6);
        assert_eq!(rx.recv().await, Some(6));
    }

    #[tokio::test]
    async fn the_receiver_ends_when_every_sender_is_gone_after_the_last_value() {
        let (tx, mut rx) = channel::<u32>(2);
        let tx2 = tx.clone();
        tx.try_send(1).unwrap();
        drop(tx);
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            while rx.recv_many(&mut all, 8).await > 0 {}
            all
        });
        tokio::task::yield_now().await;
        tx2.send(2).await.unwrap();
        drop(tx2);
        assert_eq!(reader.await.unwrap(), [1, 2]);
    }

    #[tokio::test]
    async fn senders_get_their_value_back_once_the_receiver_is_gone() {
        let (tx, rx) = channel::<String>(1);
        tx.try_send("queued".into()).unwrap();
        let blocked = {
            let tx = tx.clone();
            tokio::spawn(async move { tx.send("waiting".into()).await })
        };
        tokio::task::yield_now().await;
        let permit_holder = tx.clone();
        drop(rx);
        assert_eq!(blocked.await.unwrap(), Err("waiting".to_string()), "a waiting sender is woken");
        assert_eq!(tx.try_send("late".into()), Err(TrySendError::Closed("late".into())));
        assert!(permit_holder.reserve().await.is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_senders_lose_nothing_and_duplicate_nothing_through_a_small_queue() {
        let (tx, mut rx) = channel::<(u32, u32)>(3);
        let mut senders = Vec::new();
        for s in 0..4u32 {
            let tx = tx.clone();
            senders.push(tokio::spawn(async move {
                for i in 0..5_000u32 {
                    if i % 3 == 0 {
                        tx.reserve().await.unwrap().send((s, i));
                    } else {
                        tx.send((s, i)).await.unwrap();
                    }
                }
            }));
        }
        drop(tx);
        let mut next = [0u32; 4];
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if rx.recv_many(&mut buf, 2).await == 0 {
                break;
            }
            for &(s, i) in &buf {
                assert_eq!(next[s as usize], i, "each sender's values in order, none lost");
                next[s as usize] += 1;
            }
        }
        assert_eq!(next, [5_000; 4]);
        for s in senders {
            s.await.unwrap();
        }
    }
}
