//! Upstream requests in flight: one at a time per node, many nodes at once.
//!
//! Handled one after another in the controller's loop, each request waited
//! for its own store commit: a few hundred a second, while 100,000 nodes
//! registering at 500 a second send a thousand (a Node, its status). The
//! mailbox filled, CloudHub refused what it could not hand over, and the
//! connection notices waiting behind them came late enough for live nodes
//! to be marked NotReady. Now each request's store work runs on a task of
//! its own, so concurrent requests share the store's commits; a node's
//! requests still run in the order they came (a status report never
//! overtakes the registration before it, nor a newer report an older one),
//! and the loop is free for the informers and the lifecycle meanwhile.
//!
//! At most [`IN_FLIGHT`] tasks run: past that the loop does not read its
//! mailbox, and CloudHub holds its edges back. A node has one at most, so
//! no node takes more than its turn. What waits behind a node's request in
//! flight is bounded twice, [`PER_NODE`] for the node and [`WAITING`] for
//! all; past the first the request is refused at once as busy (CloudHub's
//! answer, `… is busy; try again`, which an edgehive edge reads as "send it
//! again"), and past the second the newest request of the node with the
//! most waiting is (the newcomer's own if none has more than its node).
//! So edges that flood requests while their first waits on the store
//! delay only themselves, never the mailbox every other node's requests
//! come through, nor the room other nodes' requests wait in.

use std::collections::{HashMap, VecDeque};
use std::future::Future;

use edgehive_model::{Message, Text};
use tokio::task::{Id, JoinSet};

/// Requests whose store work runs at once.
pub(crate) const IN_FLIGHT: usize = 256;

/// Requests waiting behind a request of the same node, all nodes together.
pub(crate) const WAITING: usize = 4096;

/// Requests waiting behind one node's request in flight. An edge sends a
/// burst of at most about one per pod (its pods' statuses on reconnect,
/// 110 by default) and paces the rest; this is twice that and more.
pub(crate) const PER_NODE: usize = 256;

/// The nodes with a request in flight, and what waits behind each.
#[derive(Default)]
pub(crate) struct Lanes {
    busy: HashMap<Text, VecDeque<Message>>,
    tasks: JoinSet<()>,
    /// Which node each task serves (a task that panicked names none itself).
    owners: HashMap<Id, Text>,
    waiting: usize,
}

impl Lanes {
    /// Whether the loop may take another request now.
    pub(crate) fn has_room(&self) -> bool {
        self.tasks.len() < IN_FLIGHT
    }

    /// Tasks running.
    pub(crate) fn in_flight(&self) -> usize {
        self.tasks.len()
    }

    /// Requests waiting behind their node's.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Whether `node` has a request in flight (a new one waits behind it).
    pub(crate) fn is_busy(&self, node: &str) -> bool {
        self.busy.contains_key(node)
    }

    /// Queues `m` behind `node`'s request in flight, or hands back the
    /// request refused for it, with its node: `m` itself when [`PER_NODE`]
    /// of `node`'s already wait; when [`WAITING`] in all do, the newest
    /// request of the node with the most waiting if that node has at
    /// least two more than `node`, else `m`. So a few nodes that flood
    /// cannot take the room from the rest: a node with fewer waiting than
    /// its equal share (at most [`IN_FLIGHT`] nodes have any) always gets in.
    pub(crate) fn wait(&mut self, node: Text, m: Message) -> Result<(), (Text, Message)> {
        let mine = self.busy.get(&node).map_or(0, VecDeque::len);
        if mine >= PER_NODE {
            return Err((node, m));
        }
        if self.waiting >= WAITING {
            let longest = self.busy.iter_mut().max_by_key(|(_, q)| q.len()).filter(|(_, q)| q.len() > mine + 1);
            let Some((other, queue)) = longest else { return Err((node, m)) };
            let evicted = queue.pop_back().expect("the longest queue holds more than one");
            let other = other.clone();
            self.busy.entry(node).or_default().push_back(m);
            return Err((other, evicted));
        }
        self.busy.entry(node).or_default().push_back(m);
        self.waiting += 1;
        Ok(())
    }

    /// Runs `node`'s request; the node is busy until it ends.
    pub(crate) fn start(&mut self, node: Text, work: impl Future<Output = ()> + Send + 'static) {
        let id = self.tasks.spawn(work).id();
        self.owners.insert(id, node.clone());
        self.busy.entry(node).or_default();
    }

    /// The node whose request ended next (`None` when none is in flight).
    pub(crate) async fn ended(&mut self) -> Option<Text> {
        loop {
            let id = match self.tasks.join_next_with_id().await? {
                Ok((id, ())) => id,
                Err(e) => {
                    tracing::error!(error = %e, "an upstream request's task failed; its node's next request goes on");
                    e.id()
                }
            };
            if let Some(node) = self.owners.remove(&id) {
                return Some(node);
            }
        }
    }

    /// `node`'s next waiting request; with none, the node is free again.
    pub(crate) fn next(&mut self, node: &str) -> Option<Message> {
        let queue = self.busy.get_mut(node)?;
        match queue.pop_front() {
            Some(m) => {
                self.waiting -= 1;
                Some(m)
            }
            None => {
                self.busy.remove(node);
                None
            }
        }
    }

    /// Waits up to `deadline` for the requests in flight to end (what
    /// waits behind them is dropped: the edges ask again).
    pub(crate) async fn drain(&mut self, deadline: std::time::Duration) {
        let all = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(deadline, all).await.is_err() {
            tracing::warn!(left = self.tasks.len(), "upstream requests still in flight at shutdown; abandoned");
            self.tasks.abort_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_nodes_requests_wait_in_order_and_the_lane_frees_when_done() {
        let mut lanes = Lanes::default();
        let a = Text::from("a".to_owned());
        assert!(!lanes.is_busy("a"));
        lanes.start(a.clone(), async {});
        assert!(lanes.is_busy("a") && !lanes.is_busy("b"));
        let (m1, m2) = (Message::new(), Message::new());
        lanes.wait(a.clone(), m1.clone()).unwrap();
        lanes.wait(a.clone(), m2.clone()).unwrap();
        assert_eq!(lanes.waiting(), 2);
        assert_eq!(lanes.ended().await.as_deref(), Some("a"));
        assert_eq!(lanes.next("a").map(|m| m.header.msg_id.clone()), Some(m1.header.msg_id.clone()));
        assert_eq!(lanes.next("a").map(|m| m.header.msg_id.clone()), Some(m2.header.msg_id.clone()));
        assert!(lanes.is_busy("a"), "busy until its queue is seen empty");
        assert_eq!(lanes.next("a"), None);
        assert!(!lanes.is_busy("a"));
        assert_eq!(lanes.waiting(), 0);
        assert_eq!(lanes.ended().await, None);
    }

    #[tokio::test]
    async fn past_its_share_a_nodes_request_is_handed_back_and_others_still_wait() {
        let mut lanes = Lanes::default();
        let (a, b) = (Text::from("a".to_owned()), Text::from("b".to_owned()));
        lanes.start(a.clone(), std::future::pending());
        lanes.start(b.clone(), std::future::pending());
        for _ in 0..PER_NODE {
            lanes.wait(a.clone(), Message::new()).unwrap();
        }
        let extra = Message::new();
        let (who, back) = lanes.wait(a.clone(), extra.clone()).unwrap_err();
        assert_eq!(who, a);
        assert_eq!(back.header.msg_id, extra.header.msg_id, "the refused request itself comes back");
        assert_eq!(lanes.waiting(), PER_NODE);
        assert!(lanes.has_room(), "one node's share leaves the loop reading");
        lanes.wait(b.clone(), Message::new()).unwrap();
        assert_eq!(lanes.waiting(), PER_NODE + 1);
        // Once one of a's is taken, a has room again.
        assert!(lanes.next("a").is_some());
        lanes.wait(a, Message::new()).unwrap();
    }

    #[tokio::test]
    async fn past_the_room_for_all_the_longest_waiting_gives_way() {
        let mut lanes = Lanes::default();
        let name = |i: usize| Text::from(format!("n{i}"));
        let floods = WAITING / PER_NODE;
        for i in 0..=floods + 1 {
            lanes.start(name(i), std::future::pending());
        }
        let mut newest = Vec::new();
        for i in 0..floods {
            for _ in 0..PER_NODE {
                let m = Message::new();
                newest.push(m.header.msg_id.clone());
                lanes.wait(name(i), m).unwrap();
            }
        }
        assert_eq!(lanes.waiting(), WAITING);
        // A node with none waiting gets in; a flooder's newest is refused for it.
        let calm = Message::new();
        let (who, refused) = lanes.wait(name(floods), calm.clone()).unwrap_err();
        assert_ne!(who, name(floods), "the newcomer is not the one refused");
        assert!(newest.contains(&refused.header.msg_id) && refused.header.msg_id != calm.header.msg_id);
        let flooder = lanes.busy[&who].len();
        assert_eq!(flooder, PER_NODE - 1, "the refused one was the last of its queue");
        assert_eq!(lanes.waiting(), WAITING, "the room stays bounded");
        assert!(lanes.has_room(), "the loop still reads");
        // Nodes in turn get in until each has no fewer than the longest but one.
        let next = name(floods + 1);
        for _ in 0..PER_NODE {
            if let Err((who, _)) = lanes.wait(next.clone(), Message::new())
                && who == next
            {
                break;
            }
        }
        let longest = lanes.busy.values().map(VecDeque::len).max().unwrap();
        let got = lanes.busy[&next].len();
        assert!(got > 200 && got + 1 >= longest, "{got} in, the longest {longest}");
        // A flooder past the room is refused its own, not another's.
        let own = Message::new();
        let (who, refused) = lanes.wait(name(0), own.clone()).unwrap_err();
        assert_eq!((who, refused.header.msg_id.clone()), (name(0), own.header.msg_id.clone()));
        assert_eq!(lanes.waiting(), WAITING);
    }

    #[tokio::test]
    async fn a_task_that_panics_frees_its_node() {
        let mut lanes = Lanes::default();
        lanes.start(Text::from("a".to_owned()), async { panic!("boom") });
        assert_eq!(lanes.ended().await.as_deref(), Some("a"));
        assert_eq!(lanes.next("a"), None);
        assert!(!lanes.is_busy("a"));
    }
}
