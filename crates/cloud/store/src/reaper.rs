//! Ends graceful deletions whose grace period has run out: a pod marked with
//! `deletionTimestamp` is removed when its node confirms (a delete with grace
//! 0) or, failing that, when the timestamp passes.
//!
//! The reaper watches pods, keeps the deadlines of terminating ones in order,
//! and at each deadline deletes the pod with grace 0 and a uid precondition (so
//! a pod re-created under the same name is never touched). Several cloud
//! replicas may run it at once; the precondition makes that harmless.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::StoreError;
use crate::object::Object;
use crate::object::parse_rfc3339;
use crate::resources::{PODS, ResourceDef};
use crate::store::{DeleteOptions, Store, WatchOptions, WatchStart};
use crate::watch::{EventType, WatchFilter};

/// Deadlines of terminating objects, earliest first.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    by_time: BTreeSet<(i64, String)>,
    by_key: HashMap<String, (i64, String, String, String)>,
}

impl Deadlines {
    /// Records the state of `obj` (terminating or not).
    pub(crate) fn observe(&mut self, obj: &Object, gone: bool) {
        self.forget(obj.key());
        if gone || !obj.is_terminating() {
            return;
        }
        let Some(at) = obj
            .value()
            .ok()
            .and_then(|v| v.pointer("/metadata/deletionTimestamp"))
            .and_then(|t| t.as_str())
            .and_then(parse_rfc3339)
        else {
            return;
        };
        let at = at.unix_timestamp();
        let key = obj.key().to_string();
        let uid = obj.uid().unwrap_or_default().to_string();
        self.by_time.insert((at, key.clone()));
        self.by_key.insert(key, (at, obj.namespace().to_string(), obj.name().to_string(), uid));
    }

    fn forget(&mut self, key: &str) {
        if let Some((at, ..)) = self.by_key.remove(key) {
            self.by_time.remove(&(at, key.to_string()));
        }
    }

    /// The earliest deadline (unix seconds).
    pub(crate) fn next(&self) -> Option<i64> {
        self.by_time.first().map(|(t, _)| *t)
    }

    /// Removes and returns (namespace, name, uid) of everything due at `now`.
    pub(crate) fn due(&mut self, now: i64) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        while let Some((t, key)) = self.by_time.first().cloned() {
            if t > now {
                break;
            }
            self.by_time.remove(&(t, key.clone()));
            if let Some((_, ns, name, uid)) = self.by_key.remove(&key) {
                out.push((ns, name, uid));
            }
        }
        out
    }
}

fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Runs the reaper for `res` (pods) until `stop`.
pub(crate) async fn run(store: Store, stop: CancellationToken) {
    run_for(store, &PODS, stop).await;
}

async fn run_for(store: Store, res: &'static ResourceDef, stop: CancellationToken) {
    loop {
        let watch = store
            .watch(WatchOptions {
                filter: WatchFilter::all(res),
                start: WatchStart::InitialState { end_bookmark: false },
                bookmarks: false,
            })
            .await;
        let mut watch = match watch {
            Ok(w) => w,
            Err(StoreError::Unavailable(_)) => return,
            Err(e) => {
                tracing::warn!(error = %e, resource = res.plural, "grace-period reaper cannot watch; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        let mut deadlines = Deadlines::default();
        loop {
            let wait = deadlines.next().map(|t| Duration::from_secs(u64::try_from(t - unix_now()).unwrap_or(0)));
            let sleep = tokio::time::sleep(wait.unwrap_or(Duration::from_secs(3600)));
            tokio::select! {
                _ = stop.cancelled() => return,
                ev = watch.next() => match ev {
                    Ok(ev) => {
                        if let Some(obj) = ev.object() {
                            deadlines.observe(obj, ev.ty == EventType::Deleted);
                        }
                    }
                    Err(end) => {
                        tracing::debug!(?end, resource = res.plural, "grace-period reaper watch ended; starting over");
                        break;
                    }
                },
                _ = sleep, if wait.is_some() => {
                    for (ns, name, uid) in deadlines.due(unix_now()) {
                        let opts = DeleteOptions { uid: Some(uid), grace_period_seconds: Some(0), ..DeleteOptions::default() };
                        match store.delete(res, &ns, &name, &opts).await {
                            Ok(_) => tracing::info!(namespace = %ns, name = %name, resource = res.plural, "grace period over; deleted"),
                            Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
                            Err(e) => tracing::warn!(namespace = %ns, name = %name, error = %e, "delete after grace period"),
                        }
                    }
                }
            }
        }
    }
}
