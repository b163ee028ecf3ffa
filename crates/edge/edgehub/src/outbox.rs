//! What waits for the link while the edge is cut off.
//!
//! Status reports (node and pod status, their patches) are kept per object,
//! the latest replacing the older one, and sent after reconnect in the order
//! the objects were first reported. The buffer is bounded; a report that
//! does not fit is refused and counted by the caller, never dropped in
//! silence. Anything else that needs the cloud is refused at once.

use std::collections::{BTreeMap, HashMap};

use edgehive_model::{Message, ResourcePath, op, resource_type as rt};

/// The object a status report is about, if `m` is one: `(operation,
/// resource)`. Only these are kept while disconnected.
pub fn coalesce_key(m: &Message) -> Option<String> {
    let operation = m.route.operation.as_str();
    let ty = ResourcePath::parse_wire(&m.route.resource).ok()?.resource_type;
    let status = match operation {
        op::UPDATE => matches!(ty.as_str(), rt::NODESTATUS | rt::PODSTATUS),
        op::PATCH => matches!(ty.as_str(), rt::NODEPATCH | rt::PODPATCH),
        _ => false,
    };
    status.then(|| format!("{operation} {}", m.route.resource))
}

/// Why a message was not kept.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a status report: it needs the cloud now.
    NotCoalescible,
    /// The buffer holds `capacity` objects already.
    Full,
}

/// Status reports waiting for the link, latest per object.
#[derive(Debug)]
pub struct Outbox {
    capacity: usize,
    seq: u64,
    order: BTreeMap<u64, Message>,
    by_key: HashMap<String, u64>,
}

impl Outbox {
    /// Holds reports about at most `capacity` objects.
    pub fn new(capacity: usize) -> Outbox {
        Outbox { capacity, seq: 0, order: BTreeMap::new(), by_key: HashMap::new() }
    }

    /// Keeps `m`, replacing an older report about the same object. Returns
    /// whether it replaced one.
    pub fn push(&mut self, m: Message) -> Result<bool, (Refused, Message)> {
        let Some(key) = coalesce_key(&m) else { return Err((Refused::NotCoalescible, m)) };
        let replaced = match self.by_key.get(&key) {
            Some(&seq) => {
                // Keep the object's place in line; the newest content wins.
                self.order.insert(seq, m);
                true
            }
            None if self.by_key.len() >= self.capacity => return Err((Refused::Full, m)),
            None => {
                self.seq += 1;
                self.by_key.insert(key, self.seq);
                self.order.insert(self.seq, m);
                false
            }
        };
        Ok(replaced)
    }

    /// Keeps `m`, a report written before, unless a report about the same
    /// object waits already (made after `m`: it stands). Returns whether
    /// `m` was kept.
    pub fn push_unless_newer(&mut self, m: Message) -> Result<bool, (Refused, Message)> {
        match coalesce_key(&m) {
            Some(key) if self.by_key.contains_key(&key) => Ok(false),
            _ => self.push(m).map(|_| true),
        }
    }

    /// The oldest waiting report.
    pub fn pop(&mut self) -> Option<Message> {
        let (_, m) = self.order.pop_first()?;
        if let Some(key) = coalesce_key(&m) {
            self.by_key.remove(&key);
        }
        Some(m)
    }

    /// Puts a report taken by [`Outbox::pop`] back at the front (the link
    /// went down before it was written), unless a newer one came meanwhile.
    pub fn unpop(&mut self, m: Message) {
        let Some(key) = coalesce_key(&m) else { return };
        if self.by_key.contains_key(&key) {
            return;
        }
        let seq = match self.order.first_key_value() {
            Some((s, _)) => s.saturating_sub(1),
            // Empty: a number the next `push` will not take too.
            None => {
                self.seq += 1;
                self.seq
            }
        };
        self.by_key.insert(key, seq);
        self.order.insert(seq, m);
    }

    /// Reports waiting.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use edgehive_model::{Content, group, source};

    use super::*;

    fn status(resource: &'static str, n: u32) -> Message {
        Message::new()
            .with_route(source::EDGED, group::META, resource, op::UPDATE)
            .with_content(Content::string(&n.to_string()))
    }

    #[test]
    fn a_report_put_back_into_an_empty_outbox_is_not_overwritten_by_the_next() {
        let mut o = Outbox::new(10);
        o.unpop(status("default/podstatus/a", 1));
        assert_eq!(o.push(status("default/podstatus/b", 1)), Ok(false));
        assert_eq!(o.len(), 2);
        assert_eq!(o.pop().unwrap().route.resource, "default/podstatus/a");
        assert_eq!(o.pop().unwrap().route.resource, "default/podstatus/b");
    }

    #[test]
    fn the_latest_report_per_object_wins_and_keeps_its_place() {
        let mut o = Outbox::new(10);
        assert_eq!(o.push(status("default/podstatus/a", 1)), Ok(false));
        assert_eq!(o.push(status("default/podstatus/b", 1)), Ok(false));
        assert_eq!(o.push(status("default/podstatus/a", 2)), Ok(true));
        assert_eq!(o.len(), 2);
        let first = o.pop().unwrap();
        assert_eq!(first.route.resource.as_str(), "default/podstatus/a");
        assert_eq!(first.content.as_text().as_deref(), Some("2"));
        assert_eq!(o.pop().unwrap().route.resource.as_str(), "default/podstatus/b");
        assert!(o.pop().is_none());
    }

    #[test]
    fn full_and_non_status_messages_are_handed_back() {
        let mut o = Outbox::new(1);
        o.push(status("default/nodestatus/n", 1)).unwrap();
        let (why, m) = o.push(status("default/podstatus/x", 1)).unwrap_err();
        assert_eq!(why, Refused::Full);
        assert_eq!(m.route.resource.as_str(), "default/podstatus/x");
        // An update of an object already held still fits.
        assert_eq!(o.push(status("default/nodestatus/n", 2)), Ok(true));
        let insert = Message::new().with_route(source::EDGED, group::META, "default/node/n", op::INSERT);
        assert_eq!(o.push(insert).unwrap_err().0, Refused::NotCoalescible);
        let lease = Message::new().with_route(source::EDGED, group::META, "kube-node-lease/lease/n", op::UPDATE);
        assert_eq!(o.push(lease).unwrap_err().0, Refused::NotCoalescible);
    }

    #[test]
    fn unpop_returns_a_report_to_the_front_unless_superseded() {
        let mut o = Outbox::new(4);
        o.push(status("default/podstatus/a", 1)).unwrap();
        o.push(status("default/podstatus/b", 1)).unwrap();
        let a = o.pop().unwrap();
        o.unpop(a);
        assert_eq!(o.pop().unwrap().route.resource.as_str(), "default/podstatus/a");
        let b = o.pop().unwrap();
        o.push(status("default/podstatus/b", 2)).unwrap();
        o.unpop(b);
        assert_eq!(o.len(), 1);
        assert_eq!(o.pop().unwrap().content.as_text().as_deref(), Some("2"));
    }

    #[test]
    fn a_report_sent_again_never_replaces_a_newer_one() {
        let mut o = Outbox::new(4);
        o.push(status("default/podstatus/a", 2)).unwrap();
        assert_eq!(o.push_unless_newer(status("default/podstatus/a", 1)), Ok(false));
        assert_eq!(o.push_unless_newer(status("default/podstatus/b", 1)), Ok(true));
        assert_eq!(o.pop().unwrap().content.as_text().as_deref(), Some("2"));
        assert_eq!(o.pop().unwrap().route.resource.as_str(), "default/podstatus/b");
    }
}
