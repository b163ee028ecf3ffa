//! What an edge's store holds, and making it what the node should hold.
//!
//! An edgehive edge sends its inventory after every connection (the
//! `inventory` feature, docs/protocol.md): the key, uid and resourceVersion
//! of every pod, configmap and secret it stores. Success points only say
//! what the edge acknowledged; a store that was emptied, rebuilt after
//! damage, or restored from an older copy holds less than they say, and the
//! cloud would never resend. So the inventory wins:
//!
//! - an object the node needs that the inventory lacks, or holds under
//!   another uid or at a lower resourceVersion, is sent again, marked
//!   [`well_known::RESEND`] so that CloudHub forgets the node's success
//!   point first;
//! - an object the inventory holds that the node does not need is deleted
//!   there (by the uid the edge holds).
//!
//! The comparison is a plain function ([`plan`]); the controller reads the
//! objects and sends.

use std::collections::{BTreeMap, BTreeSet};

use edgehive_model::{ResourcePath, resource_type as rt, well_known};

pub use edgehive_model::inventory::{Item, MAX_ITEMS, parse};

/// An object the node should hold: its key, and the uid and version the
/// cloud has now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The wire resource.
    pub key: String,
    /// Its uid.
    pub uid: String,
    /// Its resourceVersion.
    pub rv: u64,
}

/// What to do about an edge's inventory.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Keys of wanted objects to send again.
    pub resend: BTreeSet<String>,
    /// Items the node should not hold: delete them (by the uid it holds).
    pub delete: Vec<Item>,
}

/// The types an inventory is about.
fn reconciled(ty: &str) -> bool {
    matches!(ty, rt::POD | rt::CONFIGMAP | rt::SECRET)
}

/// Compares what the edge holds with what it should hold.
pub fn plan(held: &[Item], wanted: &[Wanted]) -> Plan {
    let want: BTreeMap<&str, &Wanted> = wanted.iter().map(|w| (w.key.as_str(), w)).collect();
    let have: BTreeMap<&str, &Item> = held.iter().map(|i| (i.key.as_str(), i)).collect();
    let mut plan = Plan::default();
    for w in wanted {
        let current = have
            .get(w.key.as_str())
            .is_some_and(|i| i.uid == w.uid && i.resource_version.parse::<u64>().is_ok_and(|rv| rv >= w.rv));
        if !current {
            plan.resend.insert(w.key.clone());
        }
    }
    for item in held {
        let Ok(path) = ResourcePath::parse_wire(&item.key) else { continue };
        if reconciled(&path.resource_type) && !want.contains_key(item.key.as_str()) {
            plan.delete.push(item.clone());
        }
    }
    plan
}

/// Marks a message as a resend that must not be skipped by a success point.
pub fn mark_resend(m: &mut edgehive_model::Message) {
    m.header.message_type = well_known::RESEND.into();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, uid: &str, rv: &str) -> Item {
        Item { key: key.into(), uid: uid.into(), resource_version: rv.into() }
    }

    fn wanted(key: &str, uid: &str, rv: u64) -> Wanted {
        Wanted { key: key.into(), uid: uid.into(), rv }
    }

    #[test]
    fn an_empty_store_gets_everything_again() {
        let w = [wanted("default/pod/a", "u1", 5), wanted("default/secret/s", "u2", 7)];
        let p = plan(&[], &w);
        assert_eq!(p.resend, ["default/pod/a".to_string(), "default/secret/s".to_string()].into());
        assert!(p.delete.is_empty());
    }

    #[test]
    fn an_older_copy_gets_what_changed_and_loses_what_went() {
        let held = [
            item("default/pod/a", "u1", "5"),       // current
            item("default/configmap/c", "u3", "4"), // older than the cloud's 9
            item("default/pod/b", "old", "3"),      // replaced by another pod of that name
            item("default/secret/gone", "u9", "2"), // deleted since
            item("default/podstatus/a", "", ""),    // not an object the cloud sends
        ];
        let w = [
            wanted("default/pod/a", "u1", 5),
            wanted("default/configmap/c", "u3", 9),
            wanted("default/pod/b", "new", 8),
        ];
        let p = plan(&held, &w);
        assert_eq!(p.resend, ["default/configmap/c".to_string(), "default/pod/b".to_string()].into());
        assert_eq!(p.delete, vec![item("default/secret/gone", "u9", "2")]);
    }

    #[test]
    fn a_store_ahead_of_its_points_needs_nothing() {
        let p = plan(&[item("default/pod/a", "u1", "9")], &[wanted("default/pod/a", "u1", 5)]);
        assert_eq!(p, Plan::default());
    }
}
