//! What becomes of a note before it is written, as client-go's event
//! correlator decides it (`tools/record/events_cache.go`):
//!
//! 1. **Aggregation**: notes that differ only in their message (same source,
//!    object, type and reason) are counted per 10 minutes; from the 10th
//!    distinct message on they are written as one Event whose message begins
//!    `(combined from similar events): `.
//! 2. **Counting repeats**: a note identical to one written before (same
//!    message too) raises that Event's `count` and `lastTimestamp` instead of
//!    making a new Event.
//! 3. **Spam filter**: each source and object has a token bucket of 25
//!    notes, refilled one per 5 minutes; a note without a token is dropped.
//!
//! Every table is bounded (4,096 keys each, the least recently used
//! forgotten first), so a controller that records about ever new objects
//! holds a fixed amount.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;

use edgehive_store::rfc3339;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::Note;

/// Keys each table keeps (client-go's `maxLruCacheEntries`).
pub(crate) const CACHE_ENTRIES: usize = 4096;
/// Distinct messages of one object and reason before they are combined.
const MAX_SIMILAR: usize = 10;
/// How long similar messages are counted together.
const SIMILAR_WINDOW_SECS: i64 = 600;
/// Notes a source may record about one object at once.
const SPAM_BURST: f64 = 25.0;
/// Seconds to earn back one note.
const SPAM_REFILL_SECS: f64 = 300.0;
/// Prefix of a combined message.
pub(crate) const COMBINED: &str = "(combined from similar events): ";

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
    at: OffsetDateTime,
}

/// Similar messages seen for one aggregate key.
#[derive(Debug)]
struct Similar {
    messages: HashSet<String>,
    last: OffsetDateTime,
}

/// An Event written before, by the key of what it says.
#[derive(Debug, Clone)]
struct Written {
    namespace: String,
    name: String,
    count: i64,
    first: String,
}

/// The write a note becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Over the source's budget for the object: not written.
    Spam,
    /// A new Event.
    Create(Value),
    /// Raise an Event's count: set `count`, `lastTimestamp` and `message`.
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

/// The correlator's memory.
#[derive(Debug)]
pub struct Correlator {
    spam: Bounded<String, Bucket>,
    similar: Bounded<String, Similar>,
    written: Bounded<String, Written>,
}

impl Default for Correlator {
    fn default() -> Self {
        Correlator::with_capacity(CACHE_ENTRIES)
    }
}

impl Correlator {
    /// Tables of `cap` keys each.
    pub fn with_capacity(cap: usize) -> Correlator {
        Correlator { spam: Bounded::new(cap), similar: Bounded::new(cap), written: Bounded::new(cap) }
    }

    /// Keys held, the largest table's.
    pub fn len(&self) -> usize {
        self.spam.len().max(self.similar.len()).max(self.written.len())
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decides what `note` from `component` becomes at `now`.
    pub fn decide(&mut self, component: &str, note: &Note, now: OffsetDateTime) -> Decision {
        let o = &note.involved;
        let source = [component, "", &o.kind, &o.namespace, &o.name, &o.uid, &o.api_version].join("\u{0}");
        let aggregate = [source.as_str(), note.type_(), &note.reason, component, ""].join("\u{0}");

        // 1. Aggregation by everything but the message.
        let mut similar = self.similar.get_mut(&aggregate).map(|s| std::mem::take(&mut s.messages)).unwrap_or_default();
        let last = self.similar.get_mut(&aggregate).map(|s| s.last);
        if last.is_none_or(|l| (now - l).whole_seconds() > SIMILAR_WINDOW_SECS) {
            similar.clear();
        }
        similar.insert(note.message.clone());
        let combine = similar.len() >= MAX_SIMILAR;
        if combine {
            // Keep the set below the limit, so every further note combines.
            if let Some(any) = similar.iter().next().cloned() {
                similar.remove(&any);
            }
        }
        self.similar.insert(aggregate.clone(), Similar { messages: similar, last: now });
        let (key, message) = if combine {
            (aggregate, format!("{COMBINED}{}", note.message))
        } else {
            ([aggregate.as_str(), &note.message].join("\u{0}"), note.message.clone())
        };

        // 2. A repeat counts up the Event written before.
        let at = rfc3339(now);
        let namespace = if o.namespace.is_empty() { "default".to_string() } else { o.namespace.clone() };
        let fresh = |name: String, first: &str, count: i64| {
            json!({
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": o.to_value(),
                "reason": note.reason,
                "message": message,
                "source": {"component": component},
                "firstTimestamp": first,
                "lastTimestamp": at,
                "count": count,
                "type": note.type_(),
                "reportingComponent": component,
                "reportingInstance": "",
            })
        };
        let decision = match self.written.get_mut(&key) {
            Some(w) => {
                w.count += 1;
                let event = fresh(w.name.clone(), &w.first, w.count);
                Decision::Count {
                    namespace: w.namespace.clone(),
                    name: w.name.clone(),
                    count: w.count,
                    last: at.clone(),
                    message: message.clone(),
                    event,
                }
            }
            None => {
                let name = format!("{}.{:x}", o.name, now.unix_timestamp_nanos());
                self.written.insert(
                    key,
                    Written { namespace: namespace.clone(), name: name.clone(), count: 1, first: at.clone() },
                );
                Decision::Create(fresh(name, &at, 1))
            }
        };

        // 3. The spam filter, per source and object.
        let bucket = match self.spam.get_mut(&source) {
            Some(b) => b,
            None => {
                self.spam.insert(source.clone(), Bucket { tokens: SPAM_BURST, at: now });
                self.spam.get_mut(&source).expect("just inserted")
            }
        };
        let earned = (now - bucket.at).as_seconds_f64().max(0.0) / SPAM_REFILL_SECS;
        bucket.tokens = (bucket.tokens + earned).min(SPAM_BURST);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            return Decision::Spam;
        }
        bucket.tokens -= 1.0;
        decision
    }
}

#[cfg(test)]
mod tests {
    use time::Duration;

    use super::*;
    use crate::ObjectRef;

    fn rs() -> ObjectRef {
        ObjectRef {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            namespace: "default".into(),
            name: "web-5d8f".into(),
            uid: "u-1".into(),
            resource_version: String::new(),
        }
    }

    fn t0() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_795_000_000).unwrap()
    }

    #[test]
    fn a_first_note_becomes_an_event_as_client_go_writes_it() {
        let mut c = Correlator::default();
        let d = c.decide(
            "replicaset-controller",
            &Note::normal(rs(), "SuccessfulCreate", "Created pod: web-5d8f-abcde"),
            t0(),
        );
        let Decision::Create(ev) = d else { panic!("{d:?}") };
        assert_eq!(ev["metadata"]["name"], format!("web-5d8f.{:x}", t0().unix_timestamp_nanos()));
        assert_eq!(ev["metadata"]["namespace"], "default");
        assert_eq!(ev["involvedObject"]["kind"], "ReplicaSet");
        assert_eq!(ev["involvedObject"]["uid"], "u-1");
        assert_eq!(ev["reason"], "SuccessfulCreate");
        assert_eq!(ev["type"], "Normal");
        assert_eq!(ev["count"], 1);
        assert_eq!(ev["source"]["component"], "replicaset-controller");
        assert_eq!(ev["reportingComponent"], "replicaset-controller");
        assert_eq!(ev["firstTimestamp"], ev["lastTimestamp"]);
    }

    #[test]
    fn a_repeat_counts_up_the_event_written_before() {
        let mut c = Correlator::default();
        let note = Note::warning(rs(), "FailedCreate", "Error creating: quota");
        let Decision::Create(first) = c.decide("replicaset-controller", &note, t0()) else { panic!() };
        let later = t0() + Duration::seconds(30);
        let d = c.decide("replicaset-controller", &note, later);
        let Decision::Count { name, count, last, event, .. } = d else { panic!("{d:?}") };
        assert_eq!(name, first["metadata"]["name"].as_str().unwrap());
        assert_eq!(count, 2);
        assert_eq!(last, rfc3339(later));
        assert_eq!(event["firstTimestamp"], first["firstTimestamp"]);
        // Another component, another object or another type is another Event.
        assert!(matches!(c.decide("job-controller", &note, later), Decision::Create(_)));
        let mut other = rs();
        other.uid = "u-2".into();
        assert!(matches!(
            c.decide("replicaset-controller", &Note::warning(other, "FailedCreate", "Error creating: quota"), later),
            Decision::Create(_)
        ));
    }

    #[test]
    fn the_tenth_distinct_message_in_ten_minutes_is_combined_into_one_counted_event() {
        let mut c = Correlator::default();
        let mut t = t0();
        for i in 0..9 {
            let d = c.decide(
                "replicaset-controller",
                &Note::normal(rs(), "SuccessfulCreate", format!("Created pod: p{i}")),
                t,
            );
            assert!(matches!(d, Decision::Create(_)), "{i}: {d:?}");
            t += Duration::seconds(1);
        }
        let d = c.decide("replicaset-controller", &Note::normal(rs(), "SuccessfulCreate", "Created pod: p9"), t);
        let Decision::Create(combined) = d else { panic!("{d:?}") };
        assert_eq!(combined["message"], format!("{COMBINED}Created pod: p9"));
        let d = c.decide("replicaset-controller", &Note::normal(rs(), "SuccessfulCreate", "Created pod: p10"), t);
        let Decision::Count { name, count, message, .. } = d else { panic!("{d:?}") };
        assert_eq!(name, combined["metadata"]["name"].as_str().unwrap());
        assert_eq!((count, message.as_str()), (2, "(combined from similar events): Created pod: p10"));
        // Ten quiet minutes later the count starts over.
        let d = c.decide(
            "replicaset-controller",
            &Note::normal(rs(), "SuccessfulCreate", "Created pod: p11"),
            t + Duration::seconds(601),
        );
        let Decision::Create(ev) = d else { panic!("{d:?}") };
        assert_eq!(ev["message"], "Created pod: p11");
    }

    #[test]
    fn a_source_gets_25_notes_about_an_object_then_one_per_five_minutes() {
        let mut c = Correlator::default();
        let note = Note::warning(rs(), "FailedCreate", "Error creating: quota");
        let mut d = Vec::new();
        for _ in 0..30 {
            d.push(c.decide("replicaset-controller", &note, t0()));
        }
        assert_eq!(d.iter().filter(|d| **d == Decision::Spam).count(), 5);
        assert!(d[..25].iter().all(|d| *d != Decision::Spam));
        // The same second, another object: its own budget.
        let mut other = rs();
        other.name = "api-1".into();
        assert_ne!(
            c.decide("replicaset-controller", &Note::normal(other, "SuccessfulCreate", "x"), t0()),
            Decision::Spam
        );
        assert_eq!(c.decide("replicaset-controller", &note, t0() + Duration::seconds(299)), Decision::Spam);
        assert_ne!(c.decide("replicaset-controller", &note, t0() + Duration::seconds(301)), Decision::Spam);
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
            let mut o = rs();
            o.name = format!("rs-{i}");
            c.decide("replicaset-controller", &Note::normal(o, "SuccessfulCreate", format!("m{i}")), t0());
        }
        assert_eq!(c.len(), 8);
    }
}
