//! What the edge wrote to the cloud and the cloud has not answered yet.
//!
//! The cloud may answer a message it had no room for as busy
//! (`well_known::CLOUD_BUSY`): CloudHub after waiting 5 s to hand it to its
//! controller, EdgeController at once when the node's share of waiting
//! requests is full. Such a message was not acted on, and only the edge
//! can send it again: a pod's deletion confirmation lost so would leave
//! the pod Terminating until the next reconnection. So every message the
//! edge starts itself without waiting for the answer (a request's asker
//! waits and is told instead) is kept here until it is answered, and one
//! refused as busy goes again.
//!
//! A status report is kept only while it is its object's newest: a refused
//! report since replaced does not go again (the newer one stands).
//!
//! Bounded: [`CAPACITY`] messages (the oldest is forgotten past that) for at
//! most [`WINDOW`]: a busy answer comes within seconds. A pod's status
//! update is never answered (KubeEdge's rule), nor an inventory by a cloud
//! older than the answer (docs/protocol.md §8): those are kept the whole
//! window. What it holds at rest is what a fleet simulator holds per node:
//! nothing, once a connection's inventory is answered.

use std::collections::HashMap;
use std::time::Duration;

use edgehive_model::{Message, Text};
use tokio::time::Instant;

use crate::outbox::coalesce_key;

/// Messages kept at most.
pub(crate) const CAPACITY: usize = 1024;

/// How long a written message is kept unanswered. CloudHub says it was
/// busy 5 s after a message came; EdgeController's mailbox (8,192 deep,
/// read at thousands a second) may hold a message some seconds more before
/// its lane refuses it.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

struct Sent {
    m: Message,
    at: Instant,
    /// The object a status report is of ([`coalesce_key`]).
    key: Option<String>,
}

/// Written messages not answered yet, by message id.
#[derive(Default)]
pub(crate) struct Unanswered {
    by_id: HashMap<Text, Sent>,
}

impl Unanswered {
    /// `m` was written; a status report replaces the older one of its object.
    pub(crate) fn written(&mut self, m: Message) {
        let key = coalesce_key(&m);
        if key.is_some() {
            self.by_id.retain(|_, s| s.key != key);
        }
        if self.by_id.len() >= CAPACITY
            && let Some(oldest) = self.by_id.iter().min_by_key(|(_, s)| s.at).map(|(id, _)| id.clone())
        {
            self.by_id.remove(&oldest);
        }
        self.by_id.insert(m.header.msg_id.clone(), Sent { m, at: Instant::now(), key });
    }

    /// The message `parent` names was answered: taken out and handed back.
    pub(crate) fn answered(&mut self, parent: &str) -> Option<Message> {
        let sent = self.by_id.remove(parent)?;
        if self.by_id.is_empty() {
            // Its room is not kept: most of the time nothing waits, and a
            // simulator holds a link per node.
            self.by_id = HashMap::new();
        }
        Some(sent.m)
    }

    /// Forgets what has waited longer than [`WINDOW`].
    pub(crate) fn expire(&mut self) {
        if !self.by_id.is_empty() {
            self.by_id.retain(|_, s| s.at.elapsed() < WINDOW);
            if self.by_id.is_empty() {
                self.by_id = HashMap::new();
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgehive_model::{group, op, source};

    fn report(pod: &str) -> Message {
        Message::new().with_route(source::EDGED, group::RESOURCE, format!("default/podstatus/{pod}"), op::UPDATE)
    }

    fn confirmation(pod: &str) -> Message {
        Message::new().with_route(source::EDGED, group::RESOURCE, format!("default/pod/{pod}"), op::DELETE)
    }

    #[tokio::test(start_paused = true)]
    async fn kept_until_answered_and_a_report_only_while_newest() {
        let mut u = Unanswered::default();
        let (old, new, gone) = (report("a"), report("a"), confirmation("a"));
        u.written(old.clone());
        u.written(gone.clone());
        assert_eq!(u.len(), 2);
        u.written(new.clone());
        assert_eq!(u.len(), 2, "the newer report of a replaces the older");
        assert_eq!(u.answered(&old.header.msg_id), None, "a replaced report does not go again");
        assert_eq!(u.answered(&new.header.msg_id).map(|m| m.header.msg_id.clone()), Some(new.header.msg_id.clone()));
        assert_eq!(u.answered(&new.header.msg_id), None, "handed back once");
        assert_eq!(u.answered(&gone.header.msg_id).map(|m| m.header.msg_id.clone()), Some(gone.header.msg_id.clone()));
        assert_eq!(u.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_in_number_and_in_time() {
        let mut u = Unanswered::default();
        let first = confirmation("first");
        u.written(first.clone());
        tokio::time::advance(Duration::from_millis(1)).await;
        for i in 0..CAPACITY {
            u.written(confirmation(&format!("p{i}")));
        }
        assert_eq!(u.len(), CAPACITY);
        assert_eq!(u.answered(&first.header.msg_id), None, "the oldest was forgotten");
        let late = confirmation("late");
        tokio::time::advance(WINDOW / 2).await;
        u.written(late.clone());
        tokio::time::advance(WINDOW / 2).await;
        u.expire();
        assert_eq!(u.len(), 1, "only what has not waited the window is kept");
        assert!(u.answered(&late.header.msg_id).is_some());
    }
}
