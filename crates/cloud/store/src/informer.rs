//! Informers for the cloud's controllers: the current state of a resource,
//! then every change, delivered into a bounded channel. A watch that lags is
//! resumed where it stopped; one whose history is gone relists, and the
//! controller gets the whole list to reconcile against, so nothing is ever
//! silently skipped.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::object::Object;
use crate::resources::ResourceDef;
use crate::store::{Store, WatchOptions, WatchStart};
use crate::watch::{EventType, WatchEnd, WatchFilter};

/// What a resource watch reports.
#[derive(Debug)]
pub enum Change {
    /// An object appeared or changed.
    Upsert {
        /// Its new state.
        object: Object,
        /// First seen by this watch (ADDED), not changed (MODIFIED).
        added: bool,
    },
    /// An object went away (its last state).
    Deleted(Object),
    /// The watch was restarted from a fresh list: every current object of
    /// the resource. What the controller knew and is not here is gone.
    Relisted {
        /// The resource.
        resource: &'static ResourceDef,
        /// Every object, in key order.
        objects: Vec<Object>,
    },
}

/// Which of a consumer's resources have had their first list. A consumer
/// that joins several informers knows part of the store until every one
/// has listed once, and a join then reads an object not listed yet as an
/// object that is not there: an inventory answered from pods not listed
/// deletes them at the edge, a node check before the Leases marks a live
/// node NotReady. Such a consumer acts on the join only once [`all`] says
/// so.
///
/// [`all`]: FirstLists::all
#[derive(Debug)]
pub struct FirstLists {
    of: &'static [&'static ResourceDef],
    listed: Vec<&'static str>,
}

impl FirstLists {
    /// Waits for the first lists of `of`.
    pub fn new(of: &'static [&'static ResourceDef]) -> FirstLists {
        FirstLists { of, listed: Vec::with_capacity(of.len()) }
    }

    /// Notes a relist of `resource`; true when it is one of those waited for.
    pub fn listed(&mut self, resource: &'static ResourceDef) -> bool {
        let waited = self.of.iter().any(|r| std::ptr::eq(*r, resource));
        if waited && !self.listed.contains(&resource.plural) {
            self.listed.push(resource.plural);
        }
        waited
    }

    /// Whether every resource waited for has been listed once.
    pub fn all(&self) -> bool {
        self.listed.len() == self.of.len()
    }
}

/// Watches `resource` until `cancel`, sending changes to `out` (bounded; a
/// slow controller slows the watch, and a watch that lags too far is
/// resumed or relisted, never silently skipped). `consumer` names who reads
/// `out` in the log lines, so that a lag is laid at the right door.
pub async fn inform(
    store: Store,
    consumer: &'static str,
    resource: &'static ResourceDef,
    out: mpsc::Sender<Change>,
    cancel: CancellationToken,
) {
    let mut start = WatchStart::InitialState { end_bookmark: true };
    let mut relisting = true;
    let mut initial: Vec<Object> = Vec::new();
    loop {
        let opts = WatchOptions { filter: WatchFilter::all(resource), start, bookmarks: false };
        let mut w = match store.watch(opts).await {
            Ok(w) => w,
            // Resuming after a lag can find the history moved past where
            // the watch stopped (a burst of writes while the controller was
            // busy): only a fresh list continues from there.
            Err(crate::StoreError::Expired(why)) if !relisting => {
                tracing::warn!(informer = consumer, resource = resource.plural, %why, "watch history gone; relisting");
                start = WatchStart::InitialState { end_bookmark: true };
                relisting = true;
                initial.clear();
                continue;
            }
            Err(e) => {
                tracing::warn!(informer = consumer, resource = resource.plural, error = %e, "watch failed; retrying");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue,
                }
            }
        };
        loop {
            let ev = tokio::select! {
                _ = cancel.cancelled() => return,
                ev = w.next() => ev,
            };
            let change = match ev {
                Ok(ev) if ev.ty == EventType::Bookmark => {
                    if ev.is_initial_end() && relisting {
                        relisting = false;
                        Change::Relisted { resource, objects: std::mem::take(&mut initial) }
                    } else {
                        continue;
                    }
                }
                Ok(ev) => {
                    let Some(obj) = ev.object() else { continue };
                    // A change waiting behind many others in `out` keeps
                    // only its bytes: its parse, shared with the watchers
                    // that keep up, would otherwise wait with it (a 4,096
                    // deep queue of parsed pods is ~60 MB, a peak that
                    // stays resident).
                    let behind = out.max_capacity() - out.capacity() > crate::watch::SHARED_PARSE_DEPTH;
                    let obj = if behind || relisting { obj.detached() } else { obj.clone() };
                    if relisting {
                        initial.push(obj);
                        continue;
                    }
                    match ev.ty {
                        EventType::Deleted => Change::Deleted(obj),
                        ty => Change::Upsert { object: obj, added: ty == EventType::Added },
                    }
                }
                Err(WatchEnd::Lagged) => {
                    tracing::info!(
                        informer = consumer,
                        resource = resource.plural,
                        rev = w.last_rev(),
                        "watch lagged; resuming"
                    );
                    start = WatchStart::After(w.last_rev());
                    break;
                }
                Err(WatchEnd::Expired(why)) => {
                    tracing::warn!(informer = consumer, resource = resource.plural, %why, "watch history gone; relisting");
                    start = WatchStart::InitialState { end_bookmark: true };
                    relisting = true;
                    initial.clear();
                    break;
                }
                Err(WatchEnd::Closed) => return,
            };
            if out.send(change).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{LEASES, NODES, PODS};

    #[test]
    fn first_lists_are_all_in_once_each_waited_resource_has_listed() {
        static WAITED: [&ResourceDef; 2] = [&NODES, &LEASES];
        let mut lists = FirstLists::new(&WAITED);
        assert!(lists.listed(&NODES));
        assert!(lists.listed(&NODES), "a relist of one");
        assert!(!lists.all(), "does not stand for another");
        assert!(!lists.listed(&PODS), "not waited for");
        assert!(!lists.all());
        assert!(lists.listed(&LEASES));
        assert!(lists.all());
    }
}
