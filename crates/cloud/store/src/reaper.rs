//! Removes objects whose time is up:
//!
//! - a pod marked with `deletionTimestamp` when its grace period has run out
//!   (its node normally confirms first, with a delete with grace 0);
//! - an Event an hour (the store's `event_ttl`) after its last write, as
//!   kube-apiserver's `--event-ttl` does with an etcd lease renewed at each
//!   write: Events are a recent history, not a log that grows for ever.
//!
//! A reaper watches its resource, keeps the deadlines in order, and at each
//! deadline deletes the object with preconditions — the uid for pods (a pod
//! re-created under the same name is never touched); for Events the uid and
//! the resourceVersion it was timed at (one written again meanwhile lives
//! on, and its watch event brings its new deadline). An Event's last write
//! is when the watch brings its change; after a start, its latest time, never
//! later than now (a writer's clock may run ahead). A delete that fails is
//! tried again 5 s later. Several cloud replicas may run it at once; the
//! preconditions make that harmless.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::StoreError;
use crate::object::Object;
use crate::object::parse_rfc3339;
use crate::resources::{EVENTS, PODS, ResourceDef};
use crate::store::{DeleteOptions, Store, WatchOptions, WatchStart};
use crate::watch::{EventType, WatchFilter};

/// When an object is due.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Due {
    /// At its `deletionTimestamp`, once terminating (pods).
    GracePeriod,
    /// This long after its last write (Events: the latest of
    /// `lastTimestamp`, `eventTime`, `series.lastObservedTime` and
    /// `creationTimestamp`).
    Ttl(Duration),
}

/// The few fields a reaper reads, taken from the stored bytes without
/// building the object's tree (a reaper sees every pod and Event change; a
/// full parse of each would be most of its cost).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Peek<'a> {
    #[serde(borrow, default)]
    metadata: PeekMeta<'a>,
    #[serde(borrow, default)]
    last_timestamp: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    event_time: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    series: Option<PeekSeries<'a>>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PeekMeta<'a> {
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    deletion_timestamp: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    creation_timestamp: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PeekSeries<'a> {
    #[serde(borrow, default)]
    last_observed_time: Option<Cow<'a, str>>,
}

fn unix(t: Option<&Cow<'_, str>>) -> Option<i64> {
    t.and_then(|t| parse_rfc3339(t)).map(time::OffsetDateTime::unix_timestamp)
}

impl Due {
    /// The deadline of the object `peek` shows, if it has one, seen at
    /// `now` (`written`: this is the moment it was written, a change the
    /// watch just brought).
    fn of(self, peek: &Peek<'_>, now: i64, written: bool) -> Option<i64> {
        match self {
            // Once terminating: at its deletionTimestamp.
            Due::GracePeriod => unix(peek.metadata.deletion_timestamp.as_ref()),
            Due::Ttl(ttl) => {
                // The last write: now for a change just seen; otherwise (a
                // list after a start) the Event's latest time, but never
                // later than now (a writer's clock may run ahead).
                let last = if written {
                    now
                } else {
                    [
                        peek.last_timestamp.as_ref(),
                        peek.event_time.as_ref(),
                        peek.series.as_ref().and_then(|s| s.last_observed_time.as_ref()),
                        peek.metadata.creation_timestamp.as_ref(),
                    ]
                    .into_iter()
                    .filter_map(unix)
                    .max()
                    .map_or(now, |t| t.min(now))
                };
                Some(last.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)))
            }
        }
    }
}

/// An object's deadline: when, namespace, name, uid, and the revision it
/// was timed at.
type Entry = (i64, String, String, String, u64);

/// Deadlines of objects, earliest first.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    by_time: BTreeSet<(i64, String)>,
    by_key: HashMap<String, Entry>,
}

impl Deadlines {
    /// Records the state of `obj` (`gone`: deleted; `written`: a change
    /// seen at `now`, see [`Due::of`]).
    pub(crate) fn observe(&mut self, obj: &Object, gone: bool, written: bool, due: Due, now: i64) {
        self.forget(obj.key());
        if gone {
            return;
        }
        // A row that does not parse has no deadline (the API reports it as
        // damaged when read).
        let Ok(peek) = serde_json::from_slice::<Peek<'_>>(obj.raw()) else { return };
        let Some(at) = due.of(&peek, now, written) else { return };
        let uid = peek.metadata.uid.as_deref().unwrap_or_default().to_string();
        self.insert(obj.key().to_string(), (at, obj.namespace().to_string(), obj.name().to_string(), uid, obj.rev()));
    }

    /// Records a deadline (again: a delete that failed is tried later).
    pub(crate) fn insert(&mut self, key: String, entry: Entry) {
        self.forget(&key);
        self.by_time.insert((entry.0, key.clone()));
        self.by_key.insert(key, entry);
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

    /// Removes and returns (key, entry) of everything due at `now`.
    pub(crate) fn due(&mut self, now: i64) -> Vec<(String, Entry)> {
        let mut out = Vec::new();
        while let Some((t, key)) = self.by_time.first().cloned() {
            if t > now {
                break;
            }
            self.by_time.remove(&(t, key.clone()));
            if let Some(entry) = self.by_key.remove(&key) {
                out.push((key, entry));
            }
        }
        out
    }
}

fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Runs the grace-period reaper for pods until `stop`.
pub(crate) async fn run_pods(store: Store, stop: CancellationToken) {
    run_for(store, &PODS, Due::GracePeriod, stop).await;
}

/// Runs the reaper that expires Events `ttl` after their last write.
pub(crate) async fn run_events(store: Store, ttl: Duration, stop: CancellationToken) {
    run_for(store, &EVENTS, Due::Ttl(ttl), stop).await;
}

async fn run_for(store: Store, res: &'static ResourceDef, due: Due, stop: CancellationToken) {
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
                tracing::warn!(error = %e, resource = res.plural, "reaper cannot watch; retrying");
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
                            deadlines.observe(obj, ev.ty == EventType::Deleted, ev.ty == EventType::Modified, due, unix_now());
                        }
                    }
                    Err(end) => {
                        tracing::debug!(?end, resource = res.plural, "reaper watch ended; starting over");
                        break;
                    }
                },
                _ = sleep, if wait.is_some() => {
                    for (key, entry) in deadlines.due(unix_now()) {
                        let (_, ns, name, uid, rev) = &entry;
                        // Pods: the grace period is over whatever else changed. Events: only
                        // the revision timed goes (one written since has a later deadline,
                        // which its watch event brings).
                        let opts = match due {
                            Due::GracePeriod => DeleteOptions { uid: Some(uid.clone()), grace_period_seconds: Some(0), ..DeleteOptions::default() },
                            Due::Ttl(_) => DeleteOptions { uid: Some(uid.clone()), resource_version: Some(*rev), ..DeleteOptions::default() },
                        };
                        match store.delete(res, ns, name, &opts).await {
                            Ok(_) if matches!(due, Due::GracePeriod) => tracing::info!(namespace = %ns, name = %name, resource = res.plural, "grace period over; deleted"),
                            Ok(_) => tracing::debug!(namespace = %ns, name = %name, resource = res.plural, "time to live over; deleted"),
                            Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
                            Err(e) => {
                                tracing::warn!(namespace = %ns, name = %name, resource = res.plural, error = %e, "reaper delete failed; trying again in 5 s");
                                let mut again = entry.clone();
                                again.0 = unix_now() + 5;
                                deadlines.insert(key, again);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn event(rev: u64, v: Value) -> Object {
        let raw = crate::object::encode_for_storage(&v).expect("encode");
        Object::from_stored(&EVENTS, EVENTS.key("default", "e"), rev, raw)
    }

    fn unix(t: &str) -> i64 {
        parse_rfc3339(t).map(|t| t.unix_timestamp()).expect("a time")
    }

    #[test]
    fn an_events_deadline_follows_its_last_write_and_not_a_clock_ahead() {
        let ttl = Due::Ttl(Duration::from_secs(3600));
        let now = unix("2026-11-24T12:00:00Z");
        let mut d = Deadlines::default();
        let base = json!({"metadata": {"name": "e", "namespace": "default", "uid": "u",
            "creationTimestamp": "2026-11-24T10:00:00Z"}});
        // Listed after a start: its latest time counts.
        let mut counted = base.clone();
        counted["lastTimestamp"] = json!("2026-11-24T10:30:00Z");
        counted["eventTime"] = json!("2026-11-24T10:20:00.123456Z");
        d.observe(&event(2, counted), false, false, ttl, now);
        assert_eq!(d.next(), Some(unix("2026-11-24T11:30:00Z")));
        // Stamped in the future by a clock that runs ahead: no later than now.
        let mut ahead = base.clone();
        ahead["lastTimestamp"] = json!("2027-01-01T00:00:00Z");
        d.observe(&event(3, ahead), false, false, ttl, now);
        assert_eq!(d.next(), Some(now + 3600));
        // Written again (a change the watch brings), whatever it says: from now.
        d.observe(&event(4, base.clone()), false, true, ttl, now + 60);
        assert_eq!(d.next(), Some(now + 3660));
        let due = d.due(i64::MAX);
        assert_eq!(
            due,
            vec![(event(4, base.clone()).key().to_string(), (now + 3660, "default".into(), "e".into(), "u".into(), 4))]
        );
        // A damaged row: no deadline, nothing else disturbed.
        let damaged =
            Object::from_stored(&EVENTS, EVENTS.key("default", "bad"), 7, bytes::Bytes::from_static(b"{not json"));
        d.observe(&damaged, false, true, ttl, now);
        assert_eq!(d.next(), None);
        // Deleted: no deadline.
        d.observe(&event(5, base.clone()), false, false, ttl, now);
        d.observe(&event(6, base), true, false, ttl, now);
        assert_eq!(d.next(), None);
    }

    #[test]
    fn a_pod_is_due_only_while_terminating() {
        let pod = |v: Value| {
            Object::from_stored(&PODS, PODS.key("default", "p"), 1, crate::object::encode_for_storage(&v).unwrap())
        };
        let mut d = Deadlines::default();
        d.observe(&pod(json!({"metadata": {"name": "p", "uid": "u"}})), false, false, Due::GracePeriod, 0);
        assert_eq!(d.next(), None);
        d.observe(
            &pod(json!({"metadata": {"name": "p", "uid": "u", "deletionTimestamp": "2026-11-24T10:00:30Z"}})),
            false,
            true,
            Due::GracePeriod,
            0,
        );
        assert_eq!(d.next(), Some(unix("2026-11-24T10:00:30Z")));
    }
}
