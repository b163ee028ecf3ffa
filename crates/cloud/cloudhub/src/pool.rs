//! One node's ACK-mode delivery state: what waits to be sent, what is in
//! flight, and when to resend. A plain struct driven by events and a `now`;
//! the session task around it makes no decisions (tests drive it directly).
//!
//! Rules (KubeEdge's, docs/protocol.md §4, plus a send window):
//! - Messages are keyed by the object's uid (a query answer by its own id).
//!   A newer version of an object replaces a waiting older one, so only the
//!   latest is sent; a version not newer than what waits, is in flight or
//!   was acknowledged (the success point) is not sent at all. A delete
//!   replaces anything and is never replaced by an update.
//! - Up to `window` messages are in flight at once, at most one per object,
//!   so an object's versions reach the edge in order.
//! - An unanswered message is resent with the same `msg_id` after the
//!   session's resend timeout, then with a doubling pause up to
//!   `max_resend_interval`; it stays until its ACK or the session's end.
//!   The timeout is TCP's (RFC 6298): the smoothed ACK latency of this
//!   node plus four times its variation, measured on messages answered at
//!   their first send, between `min_ack_timeout` and `ack_timeout`
//!   (KubeEdge's fixed 5 s, also used until the node has answered). So a
//!   message an edge lost is sent again within a fraction of a second
//!   while the link is alive, and an edge whose commits are slow is not
//!   sent what it is still committing.
//! - At most `max_waiting` objects wait; more are refused (the caller counts
//!   them, and the store still has them for the next resync).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use edgehive_model::{Message, Text};
use tokio::time::Instant;

/// What identifies a delivery in the pool.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// An object, by uid.
    Object(Text),
    /// A message without an object identity (a query answer), by its id.
    Message(Text),
}

/// The object a success point is recorded for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointRef {
    /// Object uid.
    pub uid: Text,
    /// Namespace (empty for cluster-scoped objects).
    pub namespace: Text,
    /// Name.
    pub name: Text,
    /// `apiVersion` of the object.
    pub api_version: Text,
    /// `kind` of the object.
    pub kind: Text,
}

/// One message to deliver in ACK mode.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Identity in the pool.
    pub key: Key,
    /// The object's resourceVersion (0 when it has none: deletes, answers).
    pub rv: u64,
    /// A `delete`: the success point is removed on ACK.
    pub delete: bool,
    /// A delete of an object that still exists, which the node no longer
    /// needs: should the node need it again, a later offer of it is not
    /// stale (it follows the delete).
    pub unneeded: bool,
    /// The message as it goes on the wire.
    pub msg: Message,
    /// Where to record the success point on ACK (`None`: nothing to record).
    pub point: Option<PointRef>,
}

impl Delivery {
    /// Whether this offer adds nothing after `earlier` (of the same key):
    /// an object older than or as old as what is already on its way, or
    /// anything but a delete after the object's deletion. After a delete
    /// of an object the node no longer needs, the object is new again.
    fn supersedes_nothing_after(&self, earlier: &Delivery) -> bool {
        if self.delete {
            return false;
        }
        match (earlier.delete, earlier.unneeded) {
            (true, false) => true,
            (true, true) => self.rv < earlier.rv,
            (false, _) => earlier.rv >= self.rv,
        }
    }
}

/// What became of an offered delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Queued to be sent.
    Queued,
    /// Queued, replacing an older waiting version.
    Replaced,
    /// Not newer than what the edge has, what waits or what is in flight.
    Stale,
    /// The pool is full; not queued.
    Full,
}

/// A delivery the edge acknowledged.
#[derive(Debug, Clone)]
pub struct Acked {
    /// What was delivered.
    pub delivery: Delivery,
    /// First send to ACK.
    pub latency: Duration,
    /// Times it was sent.
    pub sends: u32,
}

/// Limits and timers of a pool.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Messages in flight at once.
    pub window: usize,
    /// Objects waiting to be sent.
    pub max_waiting: usize,
    /// Longest wait for an ACK before resending (KubeEdge's fixed 5 s), and
    /// the wait until the node's ACK latency is known.
    pub ack_timeout: Duration,
    /// Shortest wait for an ACK before resending, however fast the node.
    pub min_ack_timeout: Duration,
    /// Longest pause between resends of one message.
    pub max_resend_interval: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            window: 128,
            max_waiting: 8192,
            ack_timeout: Duration::from_secs(5),
            min_ack_timeout: Duration::from_millis(200),
            max_resend_interval: Duration::from_secs(60),
        }
    }
}

/// The node's ACK latency, smoothed (RFC 6298's SRTT and RTTVAR).
#[derive(Debug, Clone, Copy)]
struct AckLatency {
    smoothed: Duration,
    variation: Duration,
}

impl AckLatency {
    fn sample(prev: Option<AckLatency>, r: Duration) -> AckLatency {
        match prev {
            None => AckLatency { smoothed: r, variation: r / 2 },
            Some(p) => {
                let diff = p.smoothed.abs_diff(r);
                AckLatency { variation: p.variation * 3 / 4 + diff / 4, smoothed: p.smoothed * 7 / 8 + r / 8 }
            }
        }
    }
}

#[derive(Debug)]
struct InFlight {
    delivery: Delivery,
    first_sent: Instant,
    sends: u32,
    due: Instant,
}

/// One node's pool.
#[derive(Debug)]
pub struct AckPool {
    cfg: PoolConfig,
    waiting: HashMap<Key, Delivery>,
    /// Waiting keys ready to send, oldest first. A key whose previous version
    /// is in flight is not here; it joins when that version is answered.
    ready: VecDeque<Key>,
    in_flight: HashMap<Text, InFlight>,
    in_flight_keys: HashMap<Key, Text>,
    latency: Option<AckLatency>,
}

impl AckPool {
    /// An empty pool.
    pub fn new(cfg: PoolConfig) -> AckPool {
        AckPool {
            cfg,
            waiting: HashMap::new(),
            ready: VecDeque::new(),
            in_flight: HashMap::new(),
            in_flight_keys: HashMap::new(),
            latency: None,
        }
    }

    /// How long a message waits for its ACK before it is sent again.
    pub fn resend_timeout(&self) -> Duration {
        match self.latency {
            None => self.cfg.ack_timeout,
            Some(l) => (l.smoothed + (l.variation * 4).max(Duration::from_millis(1)))
                .clamp(self.cfg.min_ack_timeout, self.cfg.ack_timeout.max(self.cfg.min_ack_timeout)),
        }
    }

    /// Offers a delivery; `acked_rv` is the object's success point.
    pub fn offer(&mut self, d: Delivery, acked_rv: Option<u64>) -> Offer {
        // What the node acknowledged does not count while a delete of the
        // object it no longer needs waits or is on its way: the object
        // follows that delete.
        if !d.delete
            && matches!(d.key, Key::Object(_))
            && acked_rv.is_some_and(|a| a >= d.rv)
            && !self.unneeded_delete_pending(&d.key)
        {
            return Offer::Stale;
        }
        if let Some(w) = self.waiting.get_mut(&d.key) {
            if d.supersedes_nothing_after(w) {
                return Offer::Stale;
            }
            *w = d;
            return Offer::Replaced;
        }
        let in_flight = self.in_flight_keys.get(&d.key).and_then(|id| self.in_flight.get(id));
        if let Some(f) = in_flight
            && d.supersedes_nothing_after(&f.delivery)
        {
            return Offer::Stale;
        }
        if self.waiting.len() >= self.cfg.max_waiting {
            return Offer::Full;
        }
        if in_flight.is_none() {
            self.ready.push_back(d.key.clone());
        }
        self.waiting.insert(d.key.clone(), d);
        Offer::Queued
    }

    /// The next message to send now, if the window has room; it is in
    /// flight from `now`.
    pub fn next(&mut self, now: Instant) -> Option<Message> {
        if self.in_flight.len() >= self.cfg.window {
            return None;
        }
        let key = self.ready.pop_front()?;
        let d = self.waiting.remove(&key)?;
        let msg = d.msg.clone();
        let id = msg.header.msg_id.clone();
        self.in_flight_keys.insert(key, id.clone());
        let due = now + self.resend_timeout();
        self.in_flight.insert(id, InFlight { delivery: d, first_sent: now, sends: 1, due });
        Some(msg)
    }

    /// The edge answered `msg_id`; `None` if nothing is in flight under it.
    pub fn ack(&mut self, msg_id: &str, now: Instant) -> Option<Acked> {
        let f = self.in_flight.remove(msg_id)?;
        self.in_flight_keys.remove(&f.delivery.key);
        // Only an answer to a first send says how long the node takes
        // (Karn's rule: a resent message's ACK may answer either send).
        if f.sends == 1 {
            self.latency = Some(AckLatency::sample(self.latency, now.saturating_duration_since(f.first_sent)));
        }
        if self.waiting.contains_key(&f.delivery.key) {
            self.ready.push_back(f.delivery.key.clone());
        }
        Some(Acked { latency: now.saturating_duration_since(f.first_sent), sends: f.sends, delivery: f.delivery })
    }

    /// Messages whose ACK is overdue, to be sent again (same ids).
    pub fn due(&mut self, now: Instant, out: &mut Vec<Message>) {
        let timeout = self.resend_timeout();
        for f in self.in_flight.values_mut() {
            if f.due <= now {
                f.sends += 1;
                let doublings = (f.sends - 1).min(16);
                f.due = now + (timeout * (1 << doublings)).min(self.cfg.max_resend_interval);
                out.push(f.delivery.msg.clone());
            }
        }
    }

    /// Puts a message the transport could not take back to be retried soon.
    pub fn retry_soon(&mut self, msg_id: &str, at: Instant) {
        if let Some(f) = self.in_flight.get_mut(msg_id) {
            f.due = f.due.min(at);
        }
    }

    /// When `due` next has something.
    pub fn next_due(&self) -> Option<Instant> {
        self.in_flight.values().map(|f| f.due).min()
    }

    /// Whether a delete of `key`'s object, which the node no longer needs,
    /// waits or is in flight.
    fn unneeded_delete_pending(&self, key: &Key) -> bool {
        let waiting = self.waiting.get(key);
        let in_flight = self.in_flight_keys.get(key).and_then(|id| self.in_flight.get(id)).map(|f| &f.delivery);
        waiting.into_iter().chain(in_flight).any(|d| d.delete && d.unneeded)
    }

    /// Whether an offer of `key` waits to be sent.
    pub fn is_waiting(&self, key: &Key) -> bool {
        self.waiting.contains_key(key)
    }

    /// Takes out the waiting (not yet sent) deliveries `settled` says
    /// need not be sent.
    pub fn take_waiting(&mut self, settled: impl Fn(&Delivery) -> bool) -> Vec<Delivery> {
        let keys: Vec<Key> = self.waiting.iter().filter(|(_, d)| settled(d)).map(|(k, _)| k.clone()).collect();
        let out: Vec<Delivery> = keys.iter().filter_map(|k| self.waiting.remove(k)).collect();
        if !out.is_empty() {
            let waiting = &self.waiting;
            self.ready.retain(|k| waiting.contains_key(k));
        }
        out
    }

    /// Objects waiting to be sent.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Messages sent and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use edgehive_model::Content;

    use super::*;

    fn obj(uid: &str, rv: u64) -> Delivery {
        Delivery {
            key: Key::Object(Text::copy_from(uid)),
            rv,
            delete: false,
            unneeded: false,
            msg: Message::new()
                .with_route("edgecontroller", "resource", format!("default/pod/{uid}"), "update")
                .with_resource_version(rv.to_string())
                .with_content(Content::string(&format!("{uid}@{rv}"))),
            point: None,
        }
    }

    fn del(uid: &str) -> Delivery {
        Delivery { delete: true, rv: 0, ..obj(uid, 0) }
    }

    fn pool() -> AckPool {
        AckPool::new(PoolConfig { window: 4, max_waiting: 8, ..PoolConfig::default() })
    }

    fn drain(p: &mut AckPool, now: Instant) -> Vec<Message> {
        std::iter::from_fn(|| p.next(now)).collect()
    }

    fn body(m: &Message) -> String {
        m.content.as_text().unwrap().into_owned()
    }

    #[test]
    fn ten_quick_updates_collapse_to_the_latest() {
        let mut p = pool();
        let now = Instant::now();
        assert_eq!(p.offer(obj("a", 1), None), Offer::Queued);
        for rv in 2..=10 {
            assert_eq!(p.offer(obj("a", rv), None), Offer::Replaced);
        }
        let sent = drain(&mut p, now);
        assert_eq!(sent.iter().map(body).collect::<Vec<_>>(), ["a@10"]);
    }

    #[test]
    fn versions_not_newer_than_the_success_point_are_not_sent() {
        let mut p = pool();
        assert_eq!(p.offer(obj("a", 5), Some(5)), Offer::Stale);
        assert_eq!(p.offer(obj("a", 4), Some(5)), Offer::Stale);
        assert_eq!(p.offer(obj("a", 6), Some(5)), Offer::Queued);
        assert_eq!(p.offer(obj("a", 6), Some(5)), Offer::Stale, "same version as waiting");
        // A delete is always sent.
        assert_eq!(p.offer(del("b"), Some(9)), Offer::Queued);
    }

    #[test]
    fn one_version_per_object_in_flight_and_order_kept() {
        let mut p = pool();
        let now = Instant::now();
        p.offer(obj("a", 1), None);
        let first = drain(&mut p, now);
        assert_eq!(first.len(), 1);
        // A newer version waits behind the one in flight.
        assert_eq!(p.offer(obj("a", 2), None), Offer::Queued);
        assert_eq!(p.offer(obj("a", 1), None), Offer::Stale, "in flight already");
        assert!(drain(&mut p, now).is_empty());
        let acked = p.ack(&first[0].header.msg_id, now).unwrap();
        assert_eq!(acked.delivery.rv, 1);
        assert_eq!(drain(&mut p, now).iter().map(body).collect::<Vec<_>>(), ["a@2"]);
    }

    #[test]
    fn delete_replaces_and_is_not_replaced() {
        let mut p = pool();
        p.offer(obj("a", 3), None);
        assert_eq!(p.offer(del("a"), None), Offer::Replaced);
        assert_eq!(p.offer(obj("a", 4), None), Offer::Stale);
        let sent = drain(&mut p, Instant::now());
        assert_eq!(sent.len(), 1);
        assert_eq!(body(&sent[0]), "a@0");
    }

    #[test]
    fn window_limits_in_flight() {
        let mut p = pool();
        let now = Instant::now();
        for i in 0..6 {
            p.offer(obj(&format!("o{i}"), 1), None);
        }
        let sent = drain(&mut p, now);
        assert_eq!(sent.len(), 4);
        assert_eq!(p.waiting(), 2);
        p.ack(&sent[0].header.msg_id, now).unwrap();
        assert_eq!(drain(&mut p, now).len(), 1);
    }

    #[test]
    fn full_pool_refuses() {
        let mut p = pool();
        for i in 0..8 {
            assert_eq!(p.offer(obj(&format!("o{i}"), 1), None), Offer::Queued);
        }
        assert_eq!(p.offer(obj("o9", 1), None), Offer::Full);
        // Replacing a waiting object still works when full.
        assert_eq!(p.offer(obj("o1", 2), None), Offer::Replaced);
    }

    #[test]
    fn unanswered_messages_are_resent_with_the_same_id_then_less_often() {
        let mut p = pool();
        let t0 = Instant::now();
        p.offer(obj("a", 1), None);
        let sent = drain(&mut p, t0);
        let id = sent[0].header.msg_id.clone();
        let mut out = Vec::new();
        p.due(t0 + Duration::from_secs(4), &mut out);
        assert!(out.is_empty());
        let mut t = t0;
        let mut pauses = Vec::new();
        for _ in 0..8 {
            let due = p.next_due().unwrap();
            pauses.push(due - t);
            t = due;
            p.due(t, &mut out);
        }
        assert!(out.iter().all(|m| m.header.msg_id == id));
        assert_eq!(out.len(), 8);
        // Nothing answered yet: KubeEdge's 5 s, then doubling to the cap.
        let secs: Vec<u64> = pauses.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [5, 10, 20, 40, 60, 60, 60, 60]);
        let acked = p.ack(&id, t).unwrap();
        assert_eq!(acked.sends, 9);
        assert!(p.ack(&id, t).is_none(), "a second ACK finds nothing");
        assert_eq!(p.next_due(), None);
    }

    /// Sends `n` objects and ACKs each `latency` after its send.
    fn answered(p: &mut AckPool, n: usize, latency: Duration, t: &mut Instant) {
        for i in 0..n {
            p.offer(obj(&format!("warm{i}-{}", latency.as_millis()), 1), None);
            let sent = drain(p, *t);
            *t += latency;
            p.ack(&sent[0].header.msg_id, *t).unwrap();
        }
    }

    #[test]
    fn a_lost_message_is_resent_within_a_fraction_of_a_second_of_a_fast_node() {
        let mut p = pool();
        let mut t = Instant::now();
        assert_eq!(p.resend_timeout(), Duration::from_secs(5), "KubeEdge's until the node has answered");
        answered(&mut p, 20, Duration::from_millis(5), &mut t);
        assert_eq!(p.resend_timeout(), Duration::from_millis(200), "the floor: the node answers in 5 ms");
        p.offer(obj("lost", 1), None);
        let sent = drain(&mut p, t);
        let mut out = Vec::new();
        p.due(t + Duration::from_millis(199), &mut out);
        assert!(out.is_empty());
        p.due(t + Duration::from_millis(200), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].header.msg_id, sent[0].header.msg_id);
        // Then doubling: 400 ms after the resend.
        assert_eq!(p.next_due().unwrap() - (t + Duration::from_millis(200)), Duration::from_millis(400));
    }

    #[test]
    fn a_slow_node_is_not_resent_what_it_is_still_committing() {
        let mut p = pool();
        let mut t = Instant::now();
        // Commits of 1–1.4 s (a slow disk at the edge).
        for ms in [1000, 1400, 1100, 1300, 1200, 1000, 1400] {
            answered(&mut p, 1, Duration::from_millis(ms), &mut t);
        }
        let rto = p.resend_timeout();
        assert!(rto > Duration::from_millis(1400) && rto <= Duration::from_secs(5), "{rto:?}");
        // A resent message's ACK teaches nothing (it may answer either send).
        p.offer(obj("slow", 1), None);
        let sent = drain(&mut p, t);
        let mut out = Vec::new();
        p.due(t + rto, &mut out);
        assert_eq!(out.len(), 1);
        p.ack(&sent[0].header.msg_id, t + rto + Duration::from_millis(1)).unwrap();
        assert_eq!(p.resend_timeout(), rto);
    }

    #[test]
    fn answers_are_keyed_by_message() {
        let mut p = pool();
        let m = Message::new().with_route("edgecontroller", "resource", "default/configmap/c", "response");
        let d = Delivery {
            key: Key::Message(m.header.msg_id.clone()),
            rv: 0,
            delete: false,
            unneeded: false,
            msg: m,
            point: None,
        };
        assert_eq!(p.offer(d.clone(), None), Offer::Queued);
        assert_eq!(p.offer(d, None), Offer::Stale);
    }

    #[test]
    fn an_object_needed_again_follows_the_delete_that_said_it_was_not() {
        let now = Instant::now();
        let unneeded = |uid: &str, rv: u64| Delivery { delete: true, unneeded: true, rv, ..obj(uid, rv) };
        // Waiting: the object replaces the delete that was not sent.
        let mut p = pool();
        assert_eq!(p.offer(unneeded("a", 5), None), Offer::Queued);
        assert_eq!(p.offer(obj("a", 4), None), Offer::Stale, "older than the delete");
        assert_eq!(p.offer(obj("a", 5), None), Offer::Replaced);
        let sent = drain(&mut p, now);
        assert_eq!(sent.iter().map(body).collect::<Vec<_>>(), ["a@5"]);
        // In flight: the object is sent after the delete's ACK.
        let mut p = pool();
        p.offer(unneeded("b", 5), None);
        let delete = drain(&mut p, now).remove(0);
        assert_eq!(p.offer(obj("b", 5), None), Offer::Queued);
        assert!(p.is_waiting(&Key::Object(Text::from("b"))));
        assert!(drain(&mut p, now).is_empty(), "not while the delete is in flight");
        p.ack(&delete.header.msg_id, now).unwrap();
        assert_eq!(drain(&mut p, now).iter().map(body).collect::<Vec<_>>(), ["b@5"]);
        // The node acknowledged the object before the delete was sent: it
        // is still sent after the delete.
        let mut p = pool();
        p.offer(obj("d", 5), None);
        let insert = drain(&mut p, now).remove(0);
        p.offer(unneeded("d", 5), None);
        p.ack(&insert.header.msg_id, now).unwrap();
        let delete = drain(&mut p, now).remove(0);
        assert_eq!(p.offer(obj("d", 5), Some(5)), Offer::Queued, "acknowledged, but a delete is on its way");
        p.ack(&delete.header.msg_id, now).unwrap();
        assert_eq!(drain(&mut p, now).iter().map(body).collect::<Vec<_>>(), ["d@5"]);
        assert_eq!(p.offer(obj("d", 5), Some(5)), Offer::Stale, "no delete pending: acknowledged is enough");
        // A deleted object stays deleted.
        let mut p = pool();
        p.offer(del("c"), None);
        assert_eq!(p.offer(obj("c", 9), None), Offer::Stale);
        drain(&mut p, now);
        assert_eq!(p.offer(obj("c", 9), None), Offer::Stale);
    }
}
