//! The changes waiting for one protocol's mapper: the latest per object
//! (device or model), delivered in order of arrival and kept until the
//! mapper takes them.
//!
//! A mapper that is busy or briefly unreachable must still get a desired
//! value set with kubectl: a mapper registers again only when the edge's
//! socket changes or one of its own reports fails, so a dropped call would
//! be lost for good. Keeping only the latest change per object bounds the
//! map by the number of objects the edge holds, so nothing is ever dropped
//! for room, and a burst of updates to one device costs one call.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

use crate::api;
use crate::module::lock;

/// One call to a mapper.
#[derive(Debug, Clone)]
pub(crate) enum MapperCall {
    RegisterDevice(api::Device),
    UpdateDevice(api::Device),
    RemoveDevice { name: String, namespace: String },
    CreateModel(api::DeviceModel),
    UpdateModel(api::DeviceModel),
    RemoveModel { name: String, namespace: String },
}

impl MapperCall {
    fn is_remove(&self) -> bool {
        matches!(self, MapperCall::RemoveDevice { .. } | MapperCall::RemoveModel { .. })
    }

    /// What the mapper must get when `self` is still waiting and `newer`
    /// arrives for the same object: the newer change, except that an object
    /// the mapper was never told of is still a RegisterDevice/CreateModel
    /// (with the newer data). A delete replaces anything.
    fn merge(self, newer: MapperCall) -> MapperCall {
        match (self, newer) {
            (MapperCall::RegisterDevice(_), MapperCall::UpdateDevice(d)) => MapperCall::RegisterDevice(d),
            (MapperCall::CreateModel(_), MapperCall::UpdateModel(m)) => MapperCall::CreateModel(m),
            (_, newer) => newer,
        }
    }
}

/// Which object a change is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ObjectKey {
    /// `device` or `devicemodel`.
    pub(crate) kind: &'static str,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// A change taken to be delivered, with its place in the order.
#[derive(Debug)]
pub(crate) struct Taken {
    seq: u64,
    pub(crate) key: ObjectKey,
    pub(crate) call: MapperCall,
}

/// The latest change per object, in order of arrival (a replaced change
/// takes the place of the newer one).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    entries: HashMap<ObjectKey, (u64, MapperCall)>,
    order: BTreeMap<u64, ObjectKey>,
    next: u64,
}

impl Pending {
    /// Adds `call` for `key`, merged into a change still waiting for it.
    /// True when the object had no change waiting.
    pub(crate) fn push(&mut self, key: ObjectKey, call: MapperCall) -> bool {
        let seq = self.next;
        self.next += 1;
        let (call, fresh) = match self.entries.remove(&key) {
            Some((old_seq, old)) => {
                self.order.remove(&old_seq);
                (old.merge(call), false)
            }
            None => (call, true),
        };
        self.order.insert(seq, key.clone());
        self.entries.insert(key, (seq, call));
        fresh
    }

    /// Takes the oldest change.
    pub(crate) fn pop(&mut self) -> Option<Taken> {
        let (seq, key) = self.order.pop_first()?;
        let (_, call) = self.entries.remove(&key)?;
        Some(Taken { seq, key, call })
    }

    /// Puts back a change whose call failed, in its place (first, unless
    /// older ones were put back too): a model reaches the mapper before the
    /// devices that use it, as they arrived. A newer change for the object
    /// that arrived meanwhile replaces it. True when put back.
    pub(crate) fn put_back(&mut self, taken: Taken) -> bool {
        if self.entries.contains_key(&taken.key) {
            return false;
        }
        self.order.insert(taken.seq, taken.key.clone());
        self.entries.insert(taken.key, (taken.seq, taken.call));
        true
    }

    /// Drops the changes a registration with data covers (every device and
    /// model of the protocol as the edge has them now); deletes stay.
    /// Returns how many were dropped.
    pub(crate) fn drop_covered(&mut self) -> usize {
        let before = self.entries.len();
        self.entries.retain(|_, (_, call)| call.is_remove());
        let entries = &self.entries;
        self.order.retain(|_, key| entries.contains_key(key));
        before - self.entries.len()
    }

    /// Changes waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// One protocol's waiting changes and the wake-up of its worker.
#[derive(Debug)]
pub(crate) struct ProtocolQueue {
    pending: Mutex<Pending>,
    notify: Notify,
    /// Wakes a worker waiting to retry when its mapper registers again.
    registered: Notify,
    gauge: Gauge,
}

impl ProtocolQueue {
    /// A queue counting its changes into `gauge` (shared by all protocols).
    pub(crate) fn new(gauge: Gauge) -> Arc<ProtocolQueue> {
        Arc::new(ProtocolQueue { pending: Mutex::default(), notify: Notify::new(), registered: Notify::new(), gauge })
    }

    pub(crate) fn push(&self, key: ObjectKey, call: MapperCall) {
        if lock(&self.pending).push(key, call) {
            self.gauge.inc();
        }
        self.notify.notify_one();
    }

    pub(crate) fn put_back(&self, taken: Taken) {
        if lock(&self.pending).put_back(taken) {
            self.gauge.inc();
        }
    }

    /// The mapper registered again: a waiting retry goes at once, and
    /// with data the changes it covers are dropped. Returns how many.
    pub(crate) fn registered(&self, with_data: bool) -> usize {
        let n = if with_data { lock(&self.pending).drop_covered() } else { 0 };
        self.gauge.dec_by(i64::try_from(n).unwrap_or(i64::MAX));
        self.registered.notify_waiters();
        n
    }

    /// Waits `wait` before a retry, or less if the mapper registers again
    /// meanwhile (true then).
    pub(crate) async fn backoff(&self, wait: std::time::Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(wait) => false,
            () = self.registered.notified() => true,
        }
    }

    /// Waits for the oldest change.
    pub(crate) async fn next(&self) -> Taken {
        loop {
            // notify_one keeps a permit when nobody waits, so a push between
            // this pop and the wait is not missed.
            if let Some(item) = lock(&self.pending).pop() {
                self.gauge.dec();
                return item;
            }
            self.notify.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey { kind: "device", namespace: "default".into(), name: name.into() }
    }

    fn dev(name: &str, desc: &str) -> api::Device {
        api::Device { name: name.into(), namespace: desc.into(), ..Default::default() }
    }

    fn remove(name: &str) -> MapperCall {
        MapperCall::RemoveDevice { name: name.into(), namespace: "default".into() }
    }

    #[test]
    fn the_latest_change_per_object_is_kept_in_order_of_arrival() {
        let mut p = Pending::default();
        assert!(p.push(key("a"), MapperCall::RegisterDevice(dev("a", "1"))));
        assert!(p.push(key("b"), MapperCall::UpdateDevice(dev("b", "1"))));
        for i in 2..1000 {
            assert!(!p.push(key("a"), MapperCall::UpdateDevice(dev("a", &i.to_string()))));
        }
        assert_eq!(p.len(), 2, "bounded by the objects");
        let t = p.pop().unwrap();
        assert_eq!(t.key, key("b"));
        assert!(matches!(t.call, MapperCall::UpdateDevice(_)));
        // Never told of `a`: still a registration, with the last data.
        match p.pop().unwrap().call {
            MapperCall::RegisterDevice(d) => assert_eq!(d.namespace, "999"),
            other => panic!("{other:?}"),
        }
        assert!(p.pop().is_none());
    }

    #[test]
    fn a_delete_replaces_an_update_and_a_failed_call_yields_to_a_newer_change() {
        let mut p = Pending::default();
        p.push(key("a"), MapperCall::UpdateDevice(dev("a", "1")));
        p.push(key("a"), remove("a"));
        let failed = p.pop().unwrap();
        assert!(matches!(failed.call, MapperCall::RemoveDevice { .. }));
        // The call failed, but a newer change arrived meanwhile: it wins.
        p.push(key("a"), MapperCall::RegisterDevice(dev("a", "2")));
        assert!(!p.put_back(failed));
        let failed = p.pop().unwrap();
        assert!(matches!(failed.call, MapperCall::RegisterDevice(_)));
        // Put back in its place, before a later change of another object.
        p.push(key("b"), MapperCall::UpdateDevice(dev("b", "1")));
        assert!(p.put_back(failed));
        assert_eq!(p.pop().unwrap().key, key("a"));
        assert_eq!(p.pop().unwrap().key, key("b"));
    }

    #[test]
    fn a_registration_with_data_covers_all_but_deletes() {
        let mut p = Pending::default();
        p.push(key("a"), MapperCall::UpdateDevice(dev("a", "1")));
        p.push(key("b"), remove("b"));
        p.push(
            ObjectKey { kind: "devicemodel", namespace: "default".into(), name: "m".into() },
            MapperCall::CreateModel(api::DeviceModel::default()),
        );
        assert_eq!(p.drop_covered(), 2);
        assert_eq!(p.pop().unwrap().key, key("b"));
        assert!(p.pop().is_none());
    }
}
