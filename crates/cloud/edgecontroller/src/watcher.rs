//! Feeds the controller with store changes: one task per resource, resuming
//! after lag and relisting when history is gone.

use edgehive_store::resources::ResourceDef;
use edgehive_store::{EventType, Object, Store, WatchEnd, WatchFilter, WatchOptions, WatchStart};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a resource watch reports.
#[derive(Debug)]
pub(crate) enum Change {
    /// An object appeared or changed (`added`: first seen by this watch).
    Upsert { object: Object, added: bool },
    /// An object went away (its last state).
    Deleted(Object),
    /// The watch was restarted from a fresh list: every current object of
    /// the resource. What the controller knew and is not here is gone.
    Relisted { resource: &'static ResourceDef, objects: Vec<Object> },
}

/// Watches `resource` until `cancel`, sending changes to `out` (bounded; a
/// slow controller slows the watch, and a watch that lags too far is
/// resumed or relisted, never silently skipped).
pub(crate) async fn watch(
    store: Store,
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
            Err(e) => {
                tracing::warn!(resource = resource.plural, error = %e, "watch failed; retrying");
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
                    let Some(obj) = ev.object().cloned() else { continue };
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
                    tracing::info!(resource = resource.plural, rev = w.last_rev(), "watch lagged; resuming");
                    start = WatchStart::After(w.last_rev());
                    break;
                }
                Err(WatchEnd::Expired(why)) => {
                    tracing::warn!(resource = resource.plural, %why, "watch history gone; relisting");
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
