//! The watch cache: every change of the store, in revision order, fanned out to
//! any number of watchers, each event encoded once.
//!
//! A backend publishes its changes here as it commits them. The cache keeps the
//! most recent events in a ring (so a watch can start from a recent revision,
//! also right after a restart, as the SQLite backend primes it from its log)
//! and hands each event to the watchers whose filter it passes, as an
//! `Arc<Event>` whose JSON lines are made on first use and shared. A watch
//! from a revision older than the ring gets `Expired` (HTTP 410), as from
//! Kubernetes' watch cache; the client lists again.
//!
//! Each watcher has a bounded queue. A watcher that does not keep up is ended
//! with [`WatchEnd::Lagged`] rather than slowing the writer or the others; it
//! can resume from the last revision it saw.
//!
//! A read that must be at least as fresh as a revision the cache has not
//! reached yet waits for it, up to [`REVISION_WAIT`], as Kubernetes' watch
//! cache does (`waitUntilFreshAndBlock`), and then fails with
//! [`TooLargeResourceVersion`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::backend::{Change, ChangeFeed};
use crate::error::{Result, StoreError};
use crate::object::Object;
use crate::resources::{self, ResourceDef};
use crate::selector::{FieldSelector, LabelSelector};

/// The type of a watch event, as Kubernetes names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// The object appeared (or started to pass the filter).
    Added,
    /// The object changed.
    Modified,
    /// The object went away (or stopped passing the filter).
    Deleted,
    /// No object: the revision the watch has reached.
    Bookmark,
}

impl EventType {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
        }
    }
}

/// One change, shared by every watcher that receives it.
pub struct Event {
    rev: u64,
    deleted: bool,
    /// The new state; for a delete, the last state at the delete's revision.
    object: Object,
    prev: Option<Object>,
    prev_at_rev: OnceLock<Object>,
    lines: [OnceLock<Bytes>; 3],
    /// Watchers read `object` itself, sharing one parse; otherwise each
    /// reads its own copy (see [`SHARED_PARSE_DEPTH`]).
    shared: bool,
}

/// How deep in a watcher's queue a change may wait and still carry a parse
/// shared by its watchers. A parse is about ten times the stored bytes, and
/// one watcher's parse stays with the change as long as any other watcher
/// has it queued: a change published while some watcher of its resource
/// has more than this many changes waiting is read by each watcher from its
/// own copy instead, parsed for itself and dropped when it is done. Shared
/// parses thus stay in a few dozen changes per watcher (at the height of a
/// 10,000-pod rollout, parses kept for watchers that were behind held
/// ~40 MB), while watchers that keep up parse each change once.
pub const SHARED_PARSE_DEPTH: usize = 64;

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("rev", &self.rev).field("key", &self.object.key()).finish_non_exhaustive()
    }
}

impl Event {
    fn from_change(resource: &'static ResourceDef, change: Change) -> Option<Event> {
        let prev = change.prev.map(|kv| Object::from_stored(resource, kv.key, kv.mod_rev, kv.value));
        let (object, deleted) = match change.value {
            Some(v) => (Object::from_stored(resource, change.key, change.rev, v), false),
            None => (prev.as_ref()?.at_rev(change.rev), true),
        };
        Some(Event {
            rev: change.rev,
            deleted,
            object,
            prev,
            prev_at_rev: OnceLock::new(),
            lines: Default::default(),
            shared: false,
        })
    }

    /// The same change with nothing derived (see [`Object::detached`]):
    /// what the history keeps, and what a watch replaying it receives, so
    /// that parses and encodings made for one watcher's sake end with it.
    fn detached(&self) -> Event {
        Event {
            rev: self.rev,
            deleted: self.deleted,
            object: self.object.detached(),
            prev: self.prev.as_ref().map(Object::detached),
            prev_at_rev: OnceLock::new(),
            lines: Default::default(),
            shared: false,
        }
    }

    /// The revision of the change.
    pub fn rev(&self) -> u64 {
        self.rev
    }

    /// The object as a watcher receiving `ty` sees it.
    pub fn object_for(&self, ty: EventType) -> &Object {
        match (ty, self.deleted, &self.prev) {
            (EventType::Deleted, false, Some(prev)) => self.prev_at_rev.get_or_init(|| prev.at_rev(self.rev)),
            _ => &self.object,
        }
    }

    /// The state before the change, if there was one.
    pub fn prev(&self) -> Option<&Object> {
        self.prev.as_ref()
    }

    /// `{"type":"…","object":{…}}\n`, encoded on first use and shared.
    pub fn line(&self, ty: EventType) -> Result<Bytes> {
        let slot = match ty {
            EventType::Added => &self.lines[0],
            EventType::Modified => &self.lines[1],
            EventType::Deleted => &self.lines[2],
            EventType::Bookmark => return Err(StoreError::BadRequest("a change is not a bookmark".into())),
        };
        if let Some(l) = slot.get() {
            return Ok(l.clone());
        }
        let line = encode_line(ty, self.object_for(ty).json()?);
        Ok(slot.get_or_init(|| line).clone())
    }

    /// What a watcher with `filter` receives for this event, if anything.
    fn delivery(&self, filter: &WatchFilter) -> Option<EventType> {
        let now = filter.matches(&self.object);
        if self.deleted {
            return now.then_some(EventType::Deleted);
        }
        match &self.prev {
            None => now.then_some(EventType::Added),
            Some(prev) => match (filter.matches(prev), now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            },
        }
    }
}

fn encode_line(ty: EventType, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(ty.as_str().as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// Which objects a watch (or list) wants.
#[derive(Debug, Clone)]
pub struct WatchFilter {
    /// The resource type.
    pub resource: &'static ResourceDef,
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only this name.
    pub name: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector (its fields must be supported by the resource).
    pub fields: FieldSelector,
}

impl WatchFilter {
    /// Everything of `resource`.
    pub fn all(resource: &'static ResourceDef) -> WatchFilter {
        WatchFilter {
            resource,
            namespace: None,
            name: None,
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
        }
    }

    /// Whether `obj` passes.
    pub fn matches(&self, obj: &Object) -> bool {
        // By storage: a view (events.k8s.io Events) sees the changes of the resource it is stored as.
        if obj.resource().storage != self.resource.storage {
            return false;
        }
        if self.namespace.as_deref().is_some_and(|ns| !ns.is_empty() && ns != obj.namespace()) {
            return false;
        }
        if self.name.as_deref().is_some_and(|n| n != obj.name()) {
            return false;
        }
        if !self.labels.is_empty() {
            let empty = serde_json::Map::new();
            if !self.labels.matches(obj.labels().unwrap_or(&empty)) {
                return false;
            }
        }
        if !self.fields.is_empty() {
            let Ok(v) = obj.value() else { return false };
            return self.fields.matches(|f| self.resource.field_value(v, f));
        }
        true
    }
}

/// Why a watch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEnd {
    /// The watcher fell too far behind; resume from the last revision seen.
    Lagged,
    /// History needed by the watch is gone; list again.
    Expired(String),
    /// The store is shutting down.
    Closed,
}

/// One item a watch yields.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// ADDED, MODIFIED, DELETED or BOOKMARK.
    pub ty: EventType,
    /// The revision the watch has reached with this event.
    pub rev: u64,
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    /// A change shared with the other watchers, and, when the change does
    /// not share its parse, this watcher's own copy of its object (made on
    /// first use): what this watcher parses then lives as long as it keeps
    /// it, not in the shared change waiting in the queues of watchers that
    /// are behind.
    Change(Arc<Event>, OnceLock<Object>),
    Object(Object),
    Bookmark {
        initial_end: bool,
    },
}

impl WatchEvent {
    pub(crate) fn initial(object: Object) -> WatchEvent {
        WatchEvent { ty: EventType::Added, rev: object.rev(), body: Body::Object(object) }
    }

    pub(crate) fn bookmark(rev: u64, initial_end: bool) -> WatchEvent {
        WatchEvent { ty: EventType::Bookmark, rev, body: Body::Bookmark { initial_end } }
    }

    /// The object (none for a bookmark).
    pub fn object(&self) -> Option<&Object> {
        match &self.body {
            Body::Change(ev, _) if ev.shared => Some(ev.object_for(self.ty)),
            Body::Change(ev, own) => Some(own.get_or_init(|| ev.object_for(self.ty).detached())),
            Body::Object(o) => Some(o),
            Body::Bookmark { .. } => None,
        }
    }

    /// The change behind this event, when it is one (not an initial ADDED or a bookmark).
    pub fn change(&self) -> Option<&Arc<Event>> {
        match &self.body {
            Body::Change(ev, _) => Some(ev),
            _ => None,
        }
    }

    /// Whether this bookmark marks the end of the initial events
    /// (`sendInitialEvents`).
    pub fn is_initial_end(&self) -> bool {
        matches!(self.body, Body::Bookmark { initial_end: true })
    }

    /// The event as one line of a Kubernetes JSON watch stream.
    pub fn line(&self, resource: &ResourceDef) -> Result<Bytes> {
        match &self.body {
            Body::Change(ev, _) => ev.line(self.ty),
            Body::Object(o) => Ok(encode_line(self.ty, o.json()?)),
            Body::Bookmark { initial_end } => {
                let mut meta = serde_json::json!({"resourceVersion": self.rev.to_string()});
                if *initial_end {
                    meta["annotations"] = serde_json::json!({"k8s.io/initial-events-end": "true"});
                }
                let obj =
                    serde_json::json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": meta});
                Ok(encode_line(EventType::Bookmark, obj.to_string().as_bytes()))
            }
        }
    }
}

enum Delivery {
    Change(Arc<Event>, EventType),
    Bookmark(u64),
}

struct Slot {
    id: u64,
    filter: WatchFilter,
    from: u64,
    bookmarks: bool,
    tx: mpsc::Sender<Delivery>,
    end: Arc<OnceLock<WatchEnd>>,
}

struct State {
    ring: VecDeque<Arc<Event>>,
    /// Events at or below this revision are not in the ring.
    base: u64,
    /// The last revision published.
    rev: u64,
    watchers: HashMap<&'static str, Vec<Slot>>,
    next_id: u64,
    closed: bool,
}

/// How long a read waits for a revision the store has not reached:
/// Kubernetes' `blockTimeout` (staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go).
pub const REVISION_WAIT: Duration = Duration::from_secs(3);

/// A read asked for a revision the store did not reach within
/// [`REVISION_WAIT`]. The API server answers it as Kubernetes'
/// `storage.NewTooLargeResourceVersionError` (504, retry after 1 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Too large resource version: {requested}, current: {current}")]
pub struct TooLargeResourceVersion {
    /// The revision asked for.
    pub requested: u64,
    /// The store's revision when the wait ended.
    pub current: u64,
}

/// Counters of the cache, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchCacheStats {
    /// Watches open now.
    pub watchers: usize,
    /// Events in the ring.
    pub ring_len: usize,
    /// Last revision published.
    pub rev: u64,
    /// Oldest revision a watch may start from.
    pub base: u64,
    /// Events published since start.
    pub published: u64,
    /// Watches ended because they fell behind.
    pub lagged: u64,
}

/// The cache. See the module documentation.
pub struct WatchCache {
    state: Mutex<State>,
    capacity: usize,
    queue: usize,
    published: AtomicU64,
    lagged: AtomicU64,
    /// The last revision published, for [`WatchCache::wait_for_rev`]; set under
    /// the state lock, so it moves in the same order as `State::rev`.
    revision: watch::Sender<u64>,
    me: Weak<WatchCache>,
}

impl std::fmt::Debug for WatchCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchCache").field("stats", &self.stats()).finish()
    }
}

/// The store connects its backend's changes to the cache.
impl ChangeFeed for WatchCache {
    fn prime(&self, base: u64, rev: u64, changes: Vec<Change>) {
        WatchCache::prime(self, base, rev, changes);
    }

    fn publish(&self, changes: Vec<Change>) {
        WatchCache::publish(self, changes);
    }

    fn progress(&self, rev: u64) {
        WatchCache::progress(self, rev);
    }

    fn reset(&self, rev: u64, reason: &str) {
        WatchCache::reset(self, rev, reason);
    }
}

impl WatchCache {
    /// A cache keeping `capacity` events, with `queue` events of room per watcher.
    pub fn new(capacity: usize, queue: usize) -> Arc<WatchCache> {
        Arc::new_cyclic(|me| WatchCache {
            state: Mutex::new(State {
                ring: VecDeque::with_capacity(capacity.min(1 << 16)),
                base: 0,
                rev: 0,
                watchers: HashMap::new(),
                next_id: 1,
                closed: false,
            }),
            capacity: capacity.max(1),
            queue: queue.max(1),
            published: AtomicU64::new(0),
            lagged: AtomicU64::new(0),
            revision: watch::Sender::new(0),
            me: me.clone(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (every
        // mutation is a single push/remove), so a poisoned lock is taken over.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts the cache at `rev` with the recent history `changes` (all after `base`).
    pub(crate) fn prime(&self, base: u64, rev: u64, changes: Vec<Change>) {
        let mut st = self.lock();
        st.base = base;
        st.rev = rev;
        self.announce(rev);
        for c in changes {
            if let Some(res) = resources::for_key(&c.key)
                && let Some(ev) = Event::from_change(res, c)
            {
                st.ring.push_back(Arc::new(ev));
            }
        }
        while st.ring.len() > self.capacity {
            if let Some(old) = st.ring.pop_front() {
                st.base = old.rev;
            }
        }
    }

    /// Publishes committed changes, in revision order.
    pub(crate) fn publish(&self, changes: Vec<Change>) {
        let mut st = self.lock();
        for c in changes {
            let rev = c.rev;
            st.rev = st.rev.max(rev);
            let Some(res) = resources::for_key(&c.key) else { continue };
            let Some(mut ev) = Event::from_change(res, c) else { continue };
            ev.shared = st
                .watchers
                .get(res.storage)
                .is_none_or(|slots| slots.iter().all(|s| s.tx.max_capacity() - s.tx.capacity() <= SHARED_PARSE_DEPTH));
            let ev = Arc::new(ev);
            self.published.fetch_add(1, Ordering::Relaxed);
            if let Some(slots) = st.watchers.get_mut(res.storage) {
                slots.retain(|slot| {
                    if ev.rev <= slot.from {
                        return true;
                    }
                    let Some(ty) = ev.delivery(&slot.filter) else { return true };
                    match slot.tx.try_send(Delivery::Change(Arc::clone(&ev), ty)) {
                        Ok(()) => true,
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            self.lagged.fetch_add(1, Ordering::Relaxed);
                            let _ = slot.end.set(WatchEnd::Lagged);
                            tracing::debug!(watch = slot.id, resource = res.plural, "watcher fell behind; ended");
                            false
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => false,
                    }
                });
            }
            // The watchers share `ev` and what they derive from it while
            // they handle it; the history keeps the bytes alone.
            st.ring.push_back(Arc::new(ev.detached()));
            if st.ring.len() > self.capacity
                && let Some(old) = st.ring.pop_front()
            {
                st.base = old.rev;
            }
        }
        self.announce(st.rev);
    }

    /// Wakes the reads waiting for a revision up to `rev` (called with the
    /// state lock held).
    fn announce(&self, rev: u64) {
        self.revision.send_if_modified(|r| {
            let moved = *r != rev;
            *r = rev;
            moved
        });
    }

    /// The backend's revision moved without changes we keep.
    pub(crate) fn progress(&self, rev: u64) {
        let mut st = self.lock();
        st.rev = st.rev.max(rev);
        self.announce(st.rev);
    }

    /// History was lost (the backend compacted past us): every watch ends
    /// with `Expired` and the cache restarts at `rev`.
    pub(crate) fn reset(&self, rev: u64, reason: &str) {
        let mut st = self.lock();
        for (_, slots) in st.watchers.drain() {
            for s in slots {
                let _ = s.end.set(WatchEnd::Expired(reason.to_string()));
            }
        }
        st.ring.clear();
        st.base = rev;
        st.rev = rev;
        self.announce(rev);
    }

    /// Ends every watch; later subscriptions fail.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        for (_, slots) in st.watchers.drain() {
            for s in slots {
                let _ = s.end.set(WatchEnd::Closed);
            }
        }
    }

    /// Sends a bookmark at the current revision to every watch that asked for them.
    pub(crate) fn bookmark_all(&self) {
        let mut st = self.lock();
        let rev = st.rev;
        for slots in st.watchers.values_mut() {
            for s in slots.iter_mut().filter(|s| s.bookmarks && rev > s.from) {
                // A full queue already carries newer news; skip.
                let _ = s.tx.try_send(Delivery::Bookmark(rev));
            }
        }
    }

    /// The last revision published.
    pub fn rev(&self) -> u64 {
        self.lock().rev
    }

    /// Waits until the cache has published revision `rev`, at most `limit`.
    /// Returns at once when it has; a publish during the wait ends it.
    pub async fn wait_for_rev(&self, rev: u64, limit: Duration) -> Result<(), TooLargeResourceVersion> {
        let mut seen = self.revision.subscribe();
        let reached = tokio::time::timeout(limit, seen.wait_for(|r| *r >= rev)).await.is_ok_and(|r| r.is_ok());
        if reached {
            return Ok(());
        }
        // Timed out (the sender lives as long as `self`, so it cannot be gone).
        let current = *seen.borrow();
        Err(TooLargeResourceVersion { requested: rev, current })
    }

    /// Reads waiting in [`WatchCache::wait_for_rev`] now.
    pub fn revision_waiters(&self) -> usize {
        self.revision.receiver_count()
    }

    /// Counters.
    pub fn stats(&self) -> WatchCacheStats {
        let st = self.lock();
        WatchCacheStats {
            watchers: st.watchers.values().map(Vec::len).sum(),
            ring_len: st.ring.len(),
            rev: st.rev,
            base: st.base,
            published: self.published.load(Ordering::Relaxed),
            lagged: self.lagged.load(Ordering::Relaxed),
        }
    }

    /// Watches changes after revision `from` that pass `filter`.
    pub fn subscribe(&self, filter: WatchFilter, from: u64, bookmarks: bool) -> Result<Watch> {
        let mut st = self.lock();
        if st.closed {
            return Err(StoreError::Unavailable("store closed".into()));
        }
        if from < st.base {
            return Err(StoreError::Expired(format!("too old resource version: {from} ({})", st.base + 1)));
        }
        let replay: Vec<(Arc<Event>, EventType)> = st
            .ring
            .iter()
            .filter(|ev| ev.rev > from)
            .filter_map(|ev| ev.delivery(&filter).map(|ty| (Arc::new(ev.detached()), ty)))
            .collect();
        let (tx, rx) = mpsc::channel(self.queue + replay.len());
        for (ev, ty) in replay {
            // Room was made for the replay above.
            let _ = tx.try_send(Delivery::Change(ev, ty));
        }
        let id = st.next_id;
        st.next_id += 1;
        let end = Arc::new(OnceLock::new());
        let resource = filter.resource;
        st.watchers.entry(resource.storage).or_default().push(Slot {
            id,
            filter,
            from,
            bookmarks,
            tx,
            end: Arc::clone(&end),
        });
        Ok(Watch { rx, initial: VecDeque::new(), id, resource, cache: self.me.clone(), end, last: from })
    }

    fn unsubscribe(&self, resource: &'static ResourceDef, id: u64) {
        let mut st = self.lock();
        if let Some(slots) = st.watchers.get_mut(resource.storage) {
            slots.retain(|s| s.id != id);
        }
    }
}

/// An open watch. Dropping it unsubscribes.
pub struct Watch {
    rx: mpsc::Receiver<Delivery>,
    initial: VecDeque<WatchEvent>,
    id: u64,
    resource: &'static ResourceDef,
    cache: Weak<WatchCache>,
    end: Arc<OnceLock<WatchEnd>>,
    last: u64,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch").field("id", &self.id).field("resource", &self.resource.plural).finish_non_exhaustive()
    }
}

impl Watch {
    pub(crate) fn push_initial(&mut self, events: impl IntoIterator<Item = WatchEvent>) {
        self.initial.extend(events);
    }

    /// The resource watched.
    pub fn resource(&self) -> &'static ResourceDef {
        self.resource
    }

    /// The last revision this watch has delivered (resume from here).
    pub fn last_rev(&self) -> u64 {
        self.last
    }

    /// The next event, or why the watch ended.
    pub async fn next(&mut self) -> std::result::Result<WatchEvent, WatchEnd> {
        if let Some(ev) = self.initial.pop_front() {
            self.last = self.last.max(ev.rev);
            return Ok(ev);
        }
        match self.rx.recv().await {
            Some(d) => Ok(self.deliver(d)),
            None => Err(self.end.get().cloned().unwrap_or(WatchEnd::Closed)),
        }
    }

    /// The next event if one is ready.
    pub fn try_next(&mut self) -> Option<std::result::Result<WatchEvent, WatchEnd>> {
        if let Some(ev) = self.initial.pop_front() {
            self.last = self.last.max(ev.rev);
            return Some(Ok(ev));
        }
        match self.rx.try_recv() {
            Ok(d) => Some(Ok(self.deliver(d))),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => {
                Some(Err(self.end.get().cloned().unwrap_or(WatchEnd::Closed)))
            }
        }
    }

    fn deliver(&mut self, d: Delivery) -> WatchEvent {
        match d {
            Delivery::Change(ev, ty) => {
                self.last = self.last.max(ev.rev);
                WatchEvent { ty, rev: ev.rev, body: Body::Change(ev, OnceLock::new()) }
            }
            Delivery::Bookmark(rev) => {
                self.last = self.last.max(rev);
                WatchEvent::bookmark(rev, false)
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(cache) = self.cache.upgrade() {
            cache.unsubscribe(self.resource, self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::KeyValue;
    use crate::resources::PODS;

    fn pod(name: &str) -> Bytes {
        Bytes::from(format!(r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}"}},"spec":{{}}}}"#))
    }

    #[tokio::test]
    async fn history_keeps_no_parse_or_encoding_made_for_a_watcher() {
        let cache = WatchCache::new(16, 16);
        let mut live = cache.subscribe(WatchFilter::all(&PODS), 0, false).expect("subscribe");
        let key = "/registry/pods/default/p".to_string();
        cache.publish(vec![
            Change { rev: 1, key: key.clone(), value: Some(pod("p")), prev: None },
            Change {
                rev: 2,
                key: key.clone(),
                value: Some(pod("p")),
                prev: Some(KeyValue { key: key.clone(), value: pod("p"), mod_rev: 1 }),
            },
        ]);
        // A watcher parses and encodes what it receives.
        for _ in 0..2 {
            let ev = live.next().await.expect("event");
            ev.object().expect("object").value().expect("parse");
            ev.line(&PODS).expect("line");
            ev.change().expect("change").prev().map(|p| p.value().expect("parse prev"));
        }
        let kept = |cache: &WatchCache| {
            let st = cache.lock();
            st.ring.iter().any(|e| {
                e.object.has_derived()
                    || e.prev.as_ref().is_some_and(Object::has_derived)
                    || e.lines.iter().any(|l| l.get().is_some())
            })
        };
        assert!(!kept(&cache), "the history holds the stored bytes alone");
        // A watch replaying the history derives for itself, not for the history.
        let mut replay = cache.subscribe(WatchFilter::all(&PODS), 0, false).expect("subscribe");
        for rev in [1, 2] {
            let ev = replay.next().await.expect("replayed");
            assert_eq!(ev.rev, rev);
            ev.object().expect("object").value().expect("parse");
            ev.line(&PODS).expect("line");
        }
        assert!(!kept(&cache));
    }

    #[tokio::test]
    async fn a_parse_is_shared_only_while_no_watcher_is_far_behind() {
        let cache = WatchCache::new(16, 4 * SHARED_PARSE_DEPTH);
        let mut live = cache.subscribe(WatchFilter::all(&PODS), 0, false).expect("subscribe");
        let behind = cache.subscribe(WatchFilter::all(&PODS), 0, false).expect("subscribe");
        let key = "/registry/pods/default/p".to_string();
        let mut rev = 0;
        let mut publish = |n: usize| {
            for _ in 0..n {
                rev += 1;
                cache.publish(vec![Change { rev, key: key.clone(), value: Some(pod("p")), prev: None }]);
            }
        };
        // Both keep up: the watchers share one parse.
        publish(1);
        let ev = live.next().await.expect("event");
        ev.object().expect("object").value().expect("parse");
        assert!(ev.change().expect("change").object.has_derived(), "one parse for every watcher");
        // One falls far behind: a change published now is parsed by each
        // watcher for itself, and what it sits in (the other's queue) keeps
        // no parse.
        publish(SHARED_PARSE_DEPTH + 1);
        for _ in 0..SHARED_PARSE_DEPTH + 1 {
            live.next().await.expect("event");
        }
        publish(1);
        let ev = live.next().await.expect("event");
        ev.object().expect("object").value().expect("parse");
        assert!(!ev.change().expect("change").object.has_derived(), "the parse is the watcher's own");
        assert!(ev.object().expect("object").has_derived(), "kept while it holds the event");
        drop(behind);
        // Once the one behind is gone, parses are shared again.
        publish(1);
        let ev = live.next().await.expect("event");
        ev.object().expect("object").value().expect("parse");
        assert!(ev.change().expect("change").object.has_derived());
    }
}
