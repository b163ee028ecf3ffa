//! What SyncController knows: every success point (from the store's
//! ObjectSyncs), which nodes are connected, and which objects may need
//! attention. A plain struct; the module around it does the I/O.
//!
//! An object is *dirty* when it changed, was deleted, or one of its nodes
//! reconnected; it stays dirty until every connected node holding it has
//! acknowledged its current version (or its deletion). A tick looks only at
//! dirty objects, so its cost follows what changed, not what is stored.

use std::collections::{HashMap, HashSet};

use edgehive_model::Text;

/// A node's success point for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// Acknowledged resourceVersion.
    pub rv: u64,
    /// Object `apiVersion`.
    pub api_version: Text,
    /// Object `kind`.
    pub kind: Text,
    /// Namespace (empty: cluster-scoped).
    pub namespace: Text,
    /// Name.
    pub name: Text,
}

/// The state.
#[derive(Debug, Default)]
pub struct SyncState {
    points: HashMap<Text, HashMap<Text, Point>>,
    by_node: HashMap<Text, HashSet<Text>>,
    dirty: HashSet<Text>,
    connected: HashSet<Text>,
    /// Objects whose status changes often (Devices): uid → the generation
    /// last seen and the resourceVersion it was first seen at. A status
    /// write moves the resourceVersion, not the generation, and an edge
    /// that holds the spec of that generation has all it is sent.
    specs: HashMap<Text, (i64, u64)>,
}

impl SyncState {
    /// A point was written (created or moved).
    pub fn set_point(&mut self, node: Text, uid: Text, point: Point) {
        self.by_node.entry(node.clone()).or_default().insert(uid.clone());
        self.points.entry(uid.clone()).or_default().insert(node, point);
        // It may already be behind the object.
        self.dirty.insert(uid);
    }

    /// A point was removed.
    pub fn remove_point(&mut self, node: &str, uid: &str) {
        if let Some(m) = self.points.get_mut(uid) {
            m.remove(node);
            if m.is_empty() {
                self.points.remove(uid);
            }
        }
        if let Some(s) = self.by_node.get_mut(node) {
            s.remove(uid);
            if s.is_empty() {
                self.by_node.remove(node);
            }
        }
    }

    /// The object with this uid changed or went away.
    pub fn object_changed(&mut self, uid: &str) {
        if let Some((uid, _)) = self.points.get_key_value(uid) {
            self.dirty.insert(uid.clone());
        }
    }

    /// A version of an object whose status is not sent (a Device) was
    /// seen: `generation` at `rv`. Whether the spec changed (or the object
    /// is new here), so that nodes holding it may be behind.
    pub fn spec_seen(&mut self, uid: &str, generation: i64, rv: u64) -> bool {
        match self.specs.get_mut(uid) {
            Some((g, _)) if *g == generation => false,
            Some(e) => {
                *e = (generation, rv);
                true
            }
            None => {
                // When its spec last changed is not known: taken as now.
                self.specs.insert(Text::copy_from(uid), (generation, rv));
                true
            }
        }
    }

    /// The resourceVersion at which the spec of `generation` was first
    /// seen, if that is the generation known for `uid`.
    pub fn spec_rv(&self, uid: &str, generation: i64) -> Option<u64> {
        self.specs.get(uid).filter(|(g, _)| *g == generation).map(|(_, rv)| *rv)
    }

    /// Forgets the spec of an object that went away; its uid, if known.
    pub fn spec_gone(&mut self, uid: &str) -> Option<Text> {
        self.specs.remove_entry(uid).map(|(k, _)| k)
    }

    /// The uids whose spec is known.
    pub fn spec_uids(&self) -> Vec<Text> {
        self.specs.keys().cloned().collect()
    }

    /// A node connected: everything it holds is checked at the next tick.
    pub fn connected(&mut self, node: &str) {
        self.connected.insert(Text::copy_from(node));
        if let Some(uids) = self.by_node.get(node) {
            self.dirty.extend(uids.iter().cloned());
        }
    }

    /// A node disconnected.
    pub fn disconnected(&mut self, node: &str) {
        self.connected.remove(node);
    }

    /// A node is gone: its points, to be deleted from the store.
    pub fn remove_node(&mut self, node: &str) -> Vec<(Text, Point)> {
        self.connected.remove(node);
        let uids = self.by_node.remove(node).unwrap_or_default();
        let mut out = Vec::with_capacity(uids.len());
        for uid in uids {
            if let Some(m) = self.points.get_mut(&uid) {
                if let Some(p) = m.remove(node) {
                    out.push((uid.clone(), p));
                }
                if m.is_empty() {
                    self.points.remove(&uid);
                }
            }
        }
        out
    }

    /// Nodes holding points.
    pub fn nodes(&self) -> impl Iterator<Item = &Text> {
        self.by_node.keys()
    }

    /// Takes the dirty objects; for each, the connected nodes' points. The
    /// caller puts back ([`SyncState::still_dirty`]) what did not converge.
    pub fn take_dirty(&mut self) -> Vec<(Text, Vec<(Text, Point)>)> {
        let dirty: Vec<Text> = self.dirty.drain().collect();
        dirty
            .into_iter()
            .filter_map(|uid| {
                let holders: Vec<(Text, Point)> = self
                    .points
                    .get(&uid)?
                    .iter()
                    .filter(|(n, _)| self.connected.contains(*n))
                    .map(|(n, p)| (n.clone(), p.clone()))
                    .collect();
                (!holders.is_empty()).then_some((uid, holders))
            })
            .collect()
    }

    /// Keeps an object dirty for the next tick.
    pub fn still_dirty(&mut self, uid: Text) {
        self.dirty.insert(uid);
    }

    /// Objects dirty now.
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }

    /// Success points known.
    pub fn len(&self) -> usize {
        self.points.values().map(HashMap::len).sum()
    }

    /// No point known.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(rv: u64) -> Point {
        Point { rv, api_version: "v1".into(), kind: "Pod".into(), namespace: "default".into(), name: "web".into() }
    }

    #[test]
    fn a_tick_sees_only_dirty_objects_of_connected_nodes() {
        let mut s = SyncState::default();
        for i in 0..1000 {
            s.set_point("e1".into(), Text::from(format!("u{i}")), p(1));
        }
        s.connected("e1");
        assert_eq!(s.take_dirty().len(), 1000, "all checked once after loading");
        assert!(s.take_dirty().is_empty(), "nothing changed since");
        s.object_changed("u7");
        s.object_changed("unknown");
        let d = s.take_dirty();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, "u7");
        assert_eq!(d[0].1[0].0, "e1");
    }

    #[test]
    fn offline_nodes_are_checked_when_they_connect() {
        let mut s = SyncState::default();
        s.set_point("e1".into(), "u1".into(), p(1));
        assert!(s.take_dirty().is_empty(), "e1 is not connected");
        s.object_changed("u1");
        assert!(s.take_dirty().is_empty());
        s.connected("e1");
        assert_eq!(s.take_dirty().len(), 1);
        s.disconnected("e1");
        s.still_dirty("u1".into());
        assert!(s.take_dirty().is_empty());
    }

    #[test]
    fn a_spec_is_dated_by_the_version_its_generation_was_first_seen_at() {
        let mut s = SyncState::default();
        assert!(s.spec_seen("u1", 1, 10), "new: nodes may be behind");
        assert!(!s.spec_seen("u1", 1, 11), "a status write");
        assert!(!s.spec_seen("u1", 1, 12));
        assert_eq!(s.spec_rv("u1", 1), Some(10));
        assert_eq!(s.spec_rv("u1", 2), None, "a newer generation than known");
        assert!(s.spec_seen("u1", 2, 13));
        assert_eq!(s.spec_rv("u1", 2), Some(13));
        assert_eq!(s.spec_gone("u1").as_deref(), Some("u1"));
        assert_eq!(s.spec_rv("u1", 2), None);
    }

    #[test]
    fn removing_a_node_returns_its_points() {
        let mut s = SyncState::default();
        s.set_point("e1".into(), "u1".into(), p(1));
        s.set_point("e2".into(), "u1".into(), p(2));
        let gone = s.remove_node("e1");
        assert_eq!(gone.len(), 1);
        assert_eq!(s.len(), 1);
        s.remove_point("e2", "u1");
        assert!(s.is_empty());
        assert_eq!(s.nodes().count(), 0);
    }
}
