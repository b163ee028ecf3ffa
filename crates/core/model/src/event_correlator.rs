//! What becomes of a Kubernetes Event before it is written, as client-go's
//! event correlator decides it (`tools/record/events_cache.go`). The cloud's
//! controllers (`edgehive-events`) and the edge's kubelet (edged) both use
//! it, so that a crash loop is counted the same way wherever it is seen.
//!
//! It is handed a whole new `core/v1` Event as the recorder made it (its
//! `source`, `involvedObject`, `type`, `reason`, `message`, `reporting*`
//! and `firstTimestamp` = `lastTimestamp` = now) and the time, and decides:
//!
//! 1. **Spam filter** (first, as client-go's `filterFunc`): each source and
//!    object has a token bucket of 25 Events, refilled one per 5 minutes;
//!    an Event without a token is dropped and changes nothing else.
//! 2. **Aggregation**: Events that differ only in their message (same
//!    source, object, type, reason and reporting controller) are counted
//!    per 10 minutes; from the 10th distinct message on they are written as
//!    one Event whose message begins `(combined from similar events): `.
//! 3. **Counting repeats**: an Event identical to one written before (same
//!    message and `fieldPath` too) raises that Event's `count` and
//!    `lastTimestamp` instead of making a new Event.
//!
//! Every table is bounded (4,096 keys each, the least recently used
//! forgotten first), so a recorder that records about ever new objects
//! holds a fixed amount. No I/O, no clock: the caller passes `now`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::SystemTime;

use serde_json::{Value, json};

/// Keys each table keeps (client-go's `maxLruCacheEntries`).
pub const CACHE_ENTRIES: usize = 4096;
/// Distinct messages of one object and reason before they are combined.
const MAX_SIMILAR: usize = 10;
/// How long similar messages are counted together.
const SIMILAR_WINDOW_SECS: f64 = 600.0;
/// Events a source may record about one object at once
/// (client-go's `defaultSpamBurst`).
pub const SPAM_BURST: f64 = 25.0;
/// Seconds to earn back one Event (client-go's `defaultSpamQPS` = 1/300).
pub const SPAM_REFILL_SECS: f64 = 300.0;
/// Prefix of a combined message.
pub const COMBINED: &str = "(combined from similar events): ";

/// A map that forgets its least recently used key when full (client-go's
/// LRU caches). Each use queues the key again with a new stamp; entries of
/// the queue whose stamp is not the key's latest are skipped, and the queue
/// is compacted when it grows past twice the capacity.
#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, (V, u64)>,
    order: VecDeque<(K, u64)>,
    stamp: u64,
    cap: usize,
}

impl<K: Hash + Eq + Clone, V> Bounded<K, V> {
    fn new(cap: usize) -> Self {
        Bounded { map: HashMap::new(), order: VecDeque::new(), stamp: 0, cap }
    }

    /// Marks `k` as used now.
    fn touch(&mut self, k: &K) {
        self.stamp += 1;
        if let Some((_, s)) = self.map.get_mut(k) {
            *s = self.stamp;
            self.order.push_back((k.clone(), self.stamp));
        }
        if self.order.len() > 2 * self.cap.max(1) {
            let map = &self.map;
            self.order.retain(|(k, s)| map.get(k).is_some_and(|(_, latest)| latest == s));
        }
    }

    fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        if !self.map.contains_key(k) {
            return None;
        }
        self.touch(k);
        self.map.get_mut(k).map(|(v, _)| v)
    }

    fn insert(&mut self, k: K, v: V) {
        self.map.insert(k.clone(), (v, 0));
        self.touch(&k);
        while self.map.len() > self.cap {
            let Some((old, s)) = self.order.pop_front() else { break };
            if self.map.get(&old).is_some_and(|(_, latest)| *latest == s) {
                self.map.remove(&old);
            }
        }
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// A token bucket.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: f64,
}

/// Similar messages seen for one aggregate key.
#[derive(Debug)]
struct Similar {
    messages: HashSet<String>,
    last: f64,
}

/// An Event written before, by the key of what it says.
#[derive(Debug, Clone)]
struct Written {
    name: String,
    count: i64,
    first: Value,
}

/// The write an Event becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Over the source's budget for the object: not written.
    Spam,
    /// A new Event (named, `count` 1).
    Create(Value),
    /// Raise an Event's count: set `count`, `lastTimestamp` and `message`
    /// (client-go sends this as a strategic merge patch of those fields).
    Count {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The new count.
        count: i64,
        /// The new lastTimestamp.
        last: String,
        /// The message (a combined Event carries the newest one).
        message: String,
        /// The whole Event, to create if the counted one has gone (expired).
        event: Value,
    },
}

impl Decision {
    /// The patch that raises the count (client-go's two-way merge patch of
    /// the written Event and the counted one): `None` unless
    /// [`Decision::Count`].
    pub fn patch(&self) -> Option<Value> {
        match self {
            Decision::Count { count, last, message, .. } => {
                Some(json!({"count": count, "lastTimestamp": last, "message": message}))
            }
            _ => None,
        }
    }
}

/// The correlator's memory.
#[derive(Debug)]
pub struct Correlator {
    spam: Bounded<String, Bucket>,
    similar: Bounded<String, Similar>,
    written: Bounded<String, Written>,
    /// The time in the last name given: names stay unique when two Events
    /// are made in the same nanosecond (or on a coarse clock).
    named: u128,
}

impl Default for Correlator {
    fn default() -> Self {
        Correlator::with_capacity(CACHE_ENTRIES)
    }
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    v.pointer(path).and_then(Value::as_str).unwrap_or_default()
}

/// Seconds since the epoch, as a float (the buckets' clock).
fn secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

impl Correlator {
    /// Tables of `cap` keys each.
    pub fn with_capacity(cap: usize) -> Correlator {
        Correlator { spam: Bounded::new(cap), similar: Bounded::new(cap), written: Bounded::new(cap), named: 0 }
    }

    /// Keys held, the largest table's.
    pub fn len(&self) -> usize {
        self.spam.len().max(self.similar.len()).max(self.written.len())
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decides what the new Event `event` becomes at `now`. Its name is
    /// set here (`{object}.{unix nanoseconds in hex}`, as client-go names
    /// Events), or taken from the Event it counts up.
    pub fn decide(&mut self, mut event: Value, now: SystemTime) -> Decision {
        let now_secs = secs(now);
        let o = &event["involvedObject"].clone();
        let source: String = [
            s(&event, "/source/component"),
            s(&event, "/source/host"),
            s(o, "/kind"),
            s(o, "/namespace"),
            s(o, "/name"),
            s(o, "/uid"),
            s(o, "/apiVersion"),
        ]
        .join("\u{0}");

        // 1. The spam filter, per source and object.
        let bucket = match self.spam.get_mut(&source) {
            Some(b) => b,
            None => {
                self.spam.insert(source.clone(), Bucket { tokens: SPAM_BURST, at: now_secs });
                self.spam.get_mut(&source).expect("just inserted")
            }
        };
        let earned = (now_secs - bucket.at).max(0.0) / SPAM_REFILL_SECS;
        bucket.tokens = (bucket.tokens + earned).min(SPAM_BURST);
        bucket.at = now_secs;
        if bucket.tokens < 1.0 {
            return Decision::Spam;
        }
        bucket.tokens -= 1.0;

        // 2. Aggregation by everything but the message.
        let (ty, reason, message) =
            (s(&event, "/type").to_owned(), s(&event, "/reason").to_owned(), s(&event, "/message").to_owned());
        let aggregate =
            [source.as_str(), &ty, &reason, s(&event, "/reportingComponent"), s(&event, "/reportingInstance")]
                .join("\u{0}");
        let (mut similar, last) = match self.similar.get_mut(&aggregate) {
            Some(s) => (std::mem::take(&mut s.messages), Some(s.last)),
            None => (HashSet::new(), None),
        };
        if last.is_none_or(|l| now_secs - l > SIMILAR_WINDOW_SECS) {
            similar.clear();
        }
        similar.insert(message.clone());
        let combine = similar.len() >= MAX_SIMILAR;
        if combine {
            // Keep the set below the limit, so every further Event combines.
            if let Some(any) = similar.iter().next().cloned() {
                similar.remove(&any);
            }
        }
        self.similar.insert(aggregate.clone(), Similar { messages: similar, last: now_secs });
        let key = if combine {
            event["message"] = json!(format!("{COMBINED}{message}"));
            aggregate
        } else {
            [source.as_str(), s(o, "/fieldPath"), &ty, &reason, &message].join("\u{0}")
        };

        // 3. A repeat counts up the Event written before.
        let namespace = match s(&event, "/metadata/namespace") {
            "" => match s(o, "/namespace") {
                "" => "default".to_owned(),
                ns => ns.to_owned(),
            },
            ns => ns.to_owned(),
        };
        event["metadata"]["namespace"] = json!(namespace);
        match self.written.get_mut(&key) {
            Some(w) => {
                w.count += 1;
                event["metadata"]["name"] = json!(w.name);
                event["firstTimestamp"] = w.first.clone();
                event["count"] = json!(w.count);
                Decision::Count {
                    namespace,
                    name: w.name.clone(),
                    count: w.count,
                    last: s(&event, "/lastTimestamp").to_owned(),
                    message: s(&event, "/message").to_owned(),
                    event,
                }
            }
            None => {
                let nanos = now.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
                let nanos = nanos.max(self.named + 1);
                self.named = nanos;
                let name = format!("{}.{nanos:x}", s(o, "/name"));
                event["metadata"]["name"] = json!(name);
                event["count"] = json!(1);
                self.written.insert(key, Written { name, count: 1, first: event["firstTimestamp"].clone() });
                Decision::Create(event)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn event(component: &str, object: &str, field_path: &str, reason: &str, message: &str) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": object,
                "uid": format!("u-{object}"), "fieldPath": field_path},
            "source": {"component": component, "host": "edge-1"},
            "reason": reason,
            "message": message,
            "type": "Warning",
            "firstTimestamp": "2026-11-25T00:00:00Z",
            "lastTimestamp": "2026-11-25T00:00:00Z",
            "reportingComponent": component,
            "reportingInstance": "edge-1",
        })
    }

    fn t0() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000)
    }

    #[test]
    fn a_first_event_is_named_for_its_object_and_counted_once() {
        let mut c = Correlator::default();
        let d = c.decide(event("kubelet", "web", "", "Started", "Started container web"), t0());
        let Decision::Create(ev) = d else { panic!("{d:?}") };
        let nanos = t0().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos();
        assert_eq!(ev["metadata"]["name"], format!("web.{nanos:x}"));
        assert_eq!(ev["metadata"]["namespace"], "default");
        assert_eq!(ev["count"], 1);
        // Another Event of the same object in the same nanosecond: another name.
        let d = c.decide(event("kubelet", "web", "", "Created", "Created container: web"), t0());
        let Decision::Create(other) = d else { panic!("{d:?}") };
        assert_eq!(other["metadata"]["name"], format!("web.{:x}", nanos + 1));
    }

    #[test]
    fn a_repeat_counts_up_the_event_written_before() {
        let mut c = Correlator::default();
        let ev = |at: &str| {
            let mut e = event("kubelet", "web", "spec.containers{web}", "BackOff", "Back-off restarting");
            e["lastTimestamp"] = json!(at);
            e["firstTimestamp"] = json!(at);
            e
        };
        let Decision::Create(first) = c.decide(ev("2026-11-25T00:00:00Z"), t0()) else { panic!() };
        let d = c.decide(ev("2026-11-25T00:00:30Z"), t0() + Duration::from_secs(30));
        let Decision::Count { name, count, last, event: counted, .. } = &d else { panic!("{d:?}") };
        assert_eq!(name, first["metadata"]["name"].as_str().unwrap());
        assert_eq!((*count, last.as_str()), (2, "2026-11-25T00:00:30Z"));
        assert_eq!(counted["firstTimestamp"], "2026-11-25T00:00:00Z");
        assert_eq!(counted["count"], 2);
        assert_eq!(
            d.patch().unwrap(),
            json!({"count": 2, "lastTimestamp": "2026-11-25T00:00:30Z", "message": "Back-off restarting"})
        );
        // Another container (fieldPath), component or object is another Event.
        let later = t0() + Duration::from_secs(31);
        let other = event("kubelet", "web", "spec.containers{side}", "BackOff", "Back-off restarting");
        assert!(matches!(c.decide(other, later), Decision::Create(_)));
        let other = event("kubelet-2", "web", "spec.containers{web}", "BackOff", "Back-off restarting");
        assert!(matches!(c.decide(other, later), Decision::Create(_)));
        let other = event("kubelet", "api", "spec.containers{web}", "BackOff", "Back-off restarting");
        assert!(matches!(c.decide(other, later), Decision::Create(_)));
    }

    #[test]
    fn the_tenth_distinct_message_in_ten_minutes_is_combined_into_one_counted_event() {
        let mut c = Correlator::default();
        let mut t = t0();
        for i in 0..9 {
            let d = c.decide(event("rs", "web", "", "SuccessfulCreate", &format!("Created pod: p{i}")), t);
            assert!(matches!(d, Decision::Create(_)), "{i}: {d:?}");
            t += Duration::from_secs(1);
        }
        let d = c.decide(event("rs", "web", "", "SuccessfulCreate", "Created pod: p9"), t);
        let Decision::Create(combined) = d else { panic!("{d:?}") };
        assert_eq!(combined["message"], format!("{COMBINED}Created pod: p9"));
        let d = c.decide(event("rs", "web", "", "SuccessfulCreate", "Created pod: p10"), t);
        let Decision::Count { name, count, message, .. } = d else { panic!("{d:?}") };
        assert_eq!(name, combined["metadata"]["name"].as_str().unwrap());
        assert_eq!((count, message.as_str()), (2, "(combined from similar events): Created pod: p10"));
        // Ten quiet minutes later the count starts over.
        let d = c.decide(event("rs", "web", "", "SuccessfulCreate", "Created pod: p11"), t + Duration::from_secs(601));
        let Decision::Create(ev) = d else { panic!("{d:?}") };
        assert_eq!(ev["message"], "Created pod: p11");
    }

    #[test]
    fn a_source_gets_25_events_about_an_object_then_one_per_five_minutes() {
        let mut c = Correlator::default();
        let d: Vec<Decision> =
            (0..30).map(|_| c.decide(event("kubelet", "web", "", "BackOff", "Back-off"), t0())).collect();
        assert!(d[..25].iter().all(|d| *d != Decision::Spam));
        assert!(d[25..].iter().all(|d| *d == Decision::Spam));
        // A dropped Event changes no count: the next one written is the 26th.
        let Decision::Count { count, .. } =
            c.decide(event("kubelet", "web", "", "BackOff", "Back-off"), t0() + Duration::from_secs(301))
        else {
            panic!()
        };
        assert_eq!(count, 26);
        // Another object has its own budget.
        assert_ne!(c.decide(event("kubelet", "api", "", "BackOff", "x"), t0()), Decision::Spam);
        assert_eq!(
            c.decide(event("kubelet", "web", "", "BackOff", "Back-off"), t0() + Duration::from_secs(302)),
            Decision::Spam
        );
    }

    #[test]
    fn the_tables_forget_the_least_recently_used_key() {
        let mut b = Bounded::new(3);
        for k in ["a", "b", "c"] {
            b.insert(k, 0);
        }
        // `a` used again: `b` is now the oldest, and goes first.
        *b.get_mut(&"a").unwrap() += 1;
        b.insert("d", 0);
        assert!(b.get_mut(&"b").is_none());
        assert_eq!(b.get_mut(&"a").copied(), Some(1));
        // Many uses of one key keep the queue bounded.
        for _ in 0..100 {
            b.get_mut(&"a");
        }
        assert!(b.order.len() <= 6, "{}", b.order.len());
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn the_tables_are_bounded() {
        let mut c = Correlator::with_capacity(8);
        for i in 0..100 {
            c.decide(event("rs", &format!("rs-{i}"), "", "SuccessfulCreate", &format!("m{i}")), t0());
        }
        assert_eq!(c.len(), 8);
    }
}
