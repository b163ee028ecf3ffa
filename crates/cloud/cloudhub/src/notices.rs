//! Connection notices (`connected`, `disconnected`) for the modules that
//! follow sessions: EdgeController (a connected node is alive; its Lease is
//! renewed for it), SyncController (a connected node is sent what it
//! misses) and DeviceController (a connected node is sent its devices).
//!
//! A notice is a node's state, not an event to be counted, and it must
//! never be lost: a listener that missed a node's `connected` would mark a
//! live node NotReady and never send it what it misses. When thousands of
//! nodes connect at once a listener's mailbox fills, so each listener has
//! its own queue of nodes with a notice pending, and a task that hands them
//! over in the order they came, waiting for room in the mailbox. A node
//! keeps at most one pending notice per listener, its newest (a node that
//! connects and drops again while the listener is busy is heard of once,
//! as disconnected), so what waits is bounded by the number of nodes, and a
//! busy listener holds neither the accept path nor the other listeners up.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_beehive::{Context, SendErrorKind};
use edgehive_model::{Message, Text};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long one hand-over waits for room before it is logged and tried again.
const HANDOVER_WAIT: Duration = Duration::from_secs(5);

/// The notices of every listener.
pub(crate) struct Notices {
    listeners: Vec<Arc<Listener>>,
    /// Notices waiting, all listeners.
    pending: Gauge,
}

struct Listener {
    target: &'static str,
    queue: Mutex<Pending>,
    wake: Notify,
}

/// Nodes in the order their notice came, and each one's newest notice.
#[derive(Default)]
struct Pending {
    order: VecDeque<Text>,
    newest: HashMap<Text, Message>,
}

impl Listener {
    fn queue(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `m` as `node`'s newest notice; true when the node had none
    /// pending.
    fn push(&self, node: &Text, m: Message) -> bool {
        let added = {
            let mut q = self.queue();
            let added = q.newest.insert(node.clone(), m).is_none();
            if added {
                q.order.push_back(node.clone());
            }
            added
        };
        self.wake.notify_one();
        added
    }

    fn pop(&self) -> Option<Message> {
        let mut q = self.queue();
        let node = q.order.pop_front()?;
        q.newest.remove(&node)
    }
}

impl Notices {
    /// Notices for the modules named `targets`.
    pub(crate) fn new(targets: &[&'static str], pending: Gauge) -> Notices {
        let listeners = targets
            .iter()
            .map(|target| Arc::new(Listener { target, queue: Mutex::default(), wake: Notify::new() }))
            .collect();
        Notices { listeners, pending }
    }

    /// Queues `m`, the newest notice of `node`, for every listener; never
    /// waits.
    pub(crate) fn publish(&self, node: &Text, m: Message) {
        for l in &self.listeners {
            if l.push(node, m.clone()) {
                self.pending.inc();
            }
        }
    }

    /// Starts one task per listener that hands its notices over until
    /// `stop`. Notices still waiting then are dropped with the process's
    /// modules.
    pub(crate) fn spawn(self: &Arc<Self>, ctx: &Context, stop: &CancellationToken, tasks: &TaskTracker) {
        for i in 0..self.listeners.len() {
            let (me, ctx, stop) = (Arc::clone(self), ctx.clone(), stop.clone());
            tasks.spawn(async move { me.hand_over(i, &ctx, &stop).await });
        }
    }

    async fn hand_over(&self, i: usize, ctx: &Context, stop: &CancellationToken) {
        let l = &self.listeners[i];
        loop {
            let Some(mut m) = l.pop() else {
                tokio::select! {
                    _ = l.wake.notified() => continue,
                    _ = stop.cancelled() => return,
                }
            };
            self.pending.dec();
            loop {
                let sent = tokio::select! {
                    r = ctx.send_within(l.target, m, HANDOVER_WAIT) => r,
                    _ = stop.cancelled() => return,
                };
                match sent {
                    Ok(()) => break,
                    Err(e) if e.kind == SendErrorKind::Full => {
                        tracing::warn!(target_module = l.target, node = %e.message().route.resource, waited = ?HANDOVER_WAIT,
                            "a listener's mailbox stays full; its connection notice waits");
                        m = e.into_message();
                    }
                    // Not registered, disabled or stopped: nobody to tell
                    // (beehive logged it).
                    Err(_) => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgehive_model::{group, op, source};

    fn notice(node: &str, operation: &'static str) -> Message {
        Message::new().with_route(source::CLOUDHUB, group::RESOURCE, format!("node/{node}"), operation)
    }

    #[test]
    fn a_node_keeps_only_its_newest_notice_in_its_first_place() {
        let n = Notices::new(&["a"], Gauge::default());
        let l = &n.listeners[0];
        for (node, operation) in [("x", op::CONNECTED), ("y", op::CONNECTED), ("x", op::DISCONNECTED)] {
            n.publish(&Text::copy_from(node), notice(node, operation));
        }
        assert_eq!(n.pending.get(), 2);
        let got: Vec<(String, String)> = std::iter::from_fn(|| l.pop())
            .map(|m| (m.route.resource.to_string(), m.route.operation.to_string()))
            .collect();
        assert_eq!(
            got,
            [("node/x".to_owned(), op::DISCONNECTED.to_owned()), ("node/y".to_owned(), op::CONNECTED.to_owned())]
        );
        // Once handed over, a node's next notice queues again.
        n.publish(&Text::copy_from("x"), notice("x", op::CONNECTED));
        assert_eq!(l.pop().map(|m| m.route.operation.to_string()).as_deref(), Some(op::CONNECTED));
        assert!(l.pop().is_none());
    }
}
