//! Kubernetes object semantics over a backend: uid, creationTimestamp and
//! resourceVersion on create; optimistic concurrency on update; preconditions,
//! finalizers and graceful deletion on delete; label and field selectors and
//! consistent paging on list; watches from a revision.
//!
//! The store does not validate objects against their schema (the API server
//! does); it owns only what every writer must agree on.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::backend::{Backend, BackendConfig, MergeFn, WriteError, prefix_end};
use crate::error::{Result, StoreError};
use crate::object::{Object, encode_for_storage, now_rfc3339, parse_rfc3339, rfc3339};
use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::watch::{REVISION_WAIT, TooLargeResourceVersion, Watch, WatchCache, WatchEvent, WatchFilter};

/// How to run a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The backend.
    pub backend: BackendConfig,
    /// Events kept for watches starting in the past.
    pub watch_history: usize,
    /// Events of room per watcher before it is ended as lagging.
    pub watch_queue: usize,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// How often history older than one interval is compacted (`None`: never).
    pub compaction_interval: Option<Duration>,
    /// Largest encoded object accepted.
    pub max_object_bytes: usize,
    /// Remove pods whose grace period has run out (see [`crate::reaper`]).
    pub reap_graceful: bool,
    /// Remove Events this long after their last write (kube-apiserver's
    /// `--event-ttl`, 1 h); `None` keeps them.
    pub event_ttl: Option<Duration>,
}

impl StoreConfig {
    /// Defaults for `backend`: 8,192 events of watch history, 1,024 per
    /// watcher, bookmarks every 60 s, compaction every 5 min, 1.5 MiB objects
    /// (etcd's default request limit), Events kept for an hour.
    pub fn new(backend: BackendConfig) -> StoreConfig {
        StoreConfig {
            backend,
            watch_history: 8192,
            watch_queue: 1024,
            bookmark_interval: Duration::from_secs(60),
            compaction_interval: Some(Duration::from_secs(300)),
            max_object_bytes: 3 << 19,
            reap_graceful: true,
            event_ttl: Some(Duration::from_secs(3600)),
        }
    }
}

/// Options of a list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// Only this namespace (`None` or empty: all).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// At most this many items (0: all).
    pub limit: usize,
    /// A continue token from a previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion`: with `exact`, read at exactly this revision;
    /// otherwise at least this one.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch=Exact`.
    pub exact: bool,
}

/// A page of a list.
#[derive(Debug, Clone)]
pub struct ListResult {
    /// The objects, in key order.
    pub items: Vec<Object>,
    /// The revision the list was read at.
    pub rev: u64,
    /// Token for the next page, if there is one.
    pub continue_token: Option<String>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// After this revision.
    After(u64),
    /// Synthetic ADDED events for every current object, then changes.
    InitialState {
        /// End the initial events with a bookmark annotated
        /// `k8s.io/initial-events-end` (`sendInitialEvents`).
        end_bookmark: bool,
    },
}

/// Options of a watch.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Namespace, name and selectors.
    pub filter: WatchFilter,
    /// Where to start.
    pub start: WatchStart,
    /// Send bookmarks.
    pub bookmarks: bool,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Delete only if the uid is this.
    pub uid: Option<String>,
    /// Delete only if the resourceVersion is this.
    pub resource_version: Option<u64>,
    /// Grace period for graceful resources (pods); `Some(0)` deletes now.
    pub grace_period_seconds: Option<i64>,
    /// What becomes of the object's dependents (`propagationPolicy`); `None`
    /// is the kind's default ([`Propagation::default_for`]).
    pub propagation: Option<Propagation>,
}

/// How a delete treats the objects that name the deleted one as an owner
/// (Kubernetes' `DeletionPropagation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// The object goes now; the garbage collector deletes its dependents after.
    Background,
    /// The object stays (finalizer `foregroundDeletion`) until the garbage
    /// collector has deleted the dependents that block its deletion.
    Foreground,
    /// The object stays (finalizer `orphan`) until the garbage collector has
    /// removed it from its dependents' owner references; they stay.
    Orphan,
}

/// The finalizer of a foreground deletion.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The finalizer of an orphaning deletion.
pub const ORPHAN_FINALIZER: &str = "orphan";

impl Propagation {
    /// Parses `Background`, `Foreground` or `Orphan`.
    pub fn parse(s: &str) -> Option<Propagation> {
        match s {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }

    /// The policy's name (`Background`, `Foreground`, `Orphan`).
    pub fn name(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }

    /// A delete without a policy: Jobs (batch/v1) orphan their pods, as
    /// Kubernetes' Job strategy keeps for compatibility; everything else is
    /// collected in the background.
    pub fn default_for(res: &ResourceDef) -> Propagation {
        if std::ptr::eq(res, &crate::resources::JOBS) { Propagation::Orphan } else { Propagation::Background }
    }

    /// The finalizers the object must carry for this policy (the two GC
    /// finalizers set or cleared, others kept), as Kubernetes' store sets
    /// them on delete. `None` when they already say it.
    fn finalizers(self, obj: &Value) -> Option<Vec<Value>> {
        let cur: Vec<Value> =
            obj.pointer("/metadata/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
        let want_fg = self == Propagation::Foreground;
        let want_orphan = self == Propagation::Orphan;
        let mut out: Vec<Value> =
            cur.iter().filter(|f| *f != FOREGROUND_FINALIZER && *f != ORPHAN_FINALIZER).cloned().collect();
        if want_orphan {
            out.push(json!(ORPHAN_FINALIZER));
        }
        if want_fg {
            out.push(json!(FOREGROUND_FINALIZER));
        }
        let same = out.len() == cur.len() && out.iter().all(|f| cur.contains(f));
        (!same).then_some(out)
    }
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum DeleteOutcome {
    /// The object is gone; its last state.
    Deleted(Object),
    /// The object is terminating (grace period or finalizers); its new state.
    Pending(Object),
}

impl DeleteOutcome {
    /// The object either way.
    pub fn object(&self) -> &Object {
        match self {
            DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o) => o,
        }
    }
}

/// One read-modify-write of [`Store::merge_many`].
pub(crate) struct MergeItem {
    pub(crate) res: &'static ResourceDef,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// From the current stored bytes to what to do; the bytes it stores are
    /// the object as stored (see [`encode_for_storage`]).
    pub(crate) f: MergeFn,
}

/// How long a read-modify-write keeps retrying on conflicts.
const RETRY_DEADLINE: Duration = Duration::from_secs(30);

/// Paces conflict retries: immediate at first, then a small random pause so
/// that contenders spread out; `false` once the deadline has passed.
struct Retry {
    attempts: u32,
    deadline: tokio::time::Instant,
}

impl Retry {
    fn new() -> Retry {
        Retry { attempts: 0, deadline: tokio::time::Instant::now() + RETRY_DEADLINE }
    }

    async fn again(&mut self) -> bool {
        self.attempts += 1;
        if tokio::time::Instant::now() >= self.deadline {
            return false;
        }
        if self.attempts > 3 {
            let cap = u64::from(self.attempts.min(50));
            tokio::time::sleep(Duration::from_micros(fastrand::u64(0..=cap * 200))).await;
        }
        true
    }
}

/// The object store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    backend: Backend,
    cache: Arc<WatchCache>,
    config: StoreConfig,
    stop: CancellationToken,
    resources: crate::resources::Registry,
}

fn meta_mut(obj: &mut Value) -> Result<&mut Map<String, Value>> {
    obj.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| StoreError::BadRequest("object has no metadata".into()))
}

fn meta_str<'v>(obj: &'v Value, field: &str) -> Option<&'v str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// Whether something must happen before the object may go: metadata
/// finalizers, or for a namespace its `spec.finalizers` (the namespace
/// controller empties the namespace, then removes `kubernetes`).
fn has_finalizers(res: &ResourceDef, obj: &Value) -> bool {
    let non_empty = |p: &str| obj.pointer(p).and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    non_empty("/metadata/finalizers")
        || (std::ptr::eq(res, &crate::resources::NAMESPACES) && non_empty("/spec/finalizers"))
}

/// A name for `generateName` `prefix`, as Kubernetes' `SimpleNameGenerator`
/// makes it: the prefix cut to 58 bytes and five random characters from
/// its alphabet (63 at most, a label's length).
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut cut = prefix.len().min(58);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let suffix = (0..5).map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]));
    prefix[..cut].chars().chain(suffix).collect()
}

/// An object made ready for create: [`NewObject::next_name`] names it for
/// each attempt (once, or up to 8 times with a fresh suffix when the name
/// is generated).
struct NewObject {
    obj: Value,
    namespace: String,
    /// `metadata.generateName`, when the name is the server's to pick.
    generate_name: Option<String>,
    attempts_left: u32,
}

impl NewObject {
    /// Names the object for the next attempt and gives its key; `None`
    /// once the attempts are used up.
    fn next_name(&mut self, res: &ResourceDef) -> Result<Option<String>> {
        if self.attempts_left == 0 {
            return Ok(None);
        }
        self.attempts_left -= 1;
        if let Some(prefix) = &self.generate_name {
            let name = generate_name(prefix);
            meta_mut(&mut self.obj)?.insert("name".into(), Value::String(name));
        }
        Ok(Some(res.key(&self.namespace, self.name())))
    }

    fn name(&self) -> &str {
        meta_str(&self.obj, "name").unwrap_or_default()
    }

    fn generated(&self) -> bool {
        self.generate_name.is_some()
    }

    fn names_used_up(&self, res: &ResourceDef) -> StoreError {
        let prefix = self.generate_name.as_deref().unwrap_or(self.name());
        StoreError::AlreadyExists { resource: res.qualified(), name: format!("{prefix}*") }
    }
}

/// Fills in what the store owns on create, as Kubernetes'
/// `Store.create` (`FillObjectMetaSystemFields`) and the kind's
/// `PrepareForCreate` do: apiVersion and kind, a new uid, creationTimestamp,
/// and `generation: 1` for kinds that have one; drops what no client may
/// set (resourceVersion, deletion fields, selfLink).
fn prepare_create(res: &ResourceDef, mut obj: Value) -> Result<NewObject> {
    if !obj.is_object() {
        return Err(StoreError::BadRequest("object must be a JSON object".into()));
    }
    // A view's objects (events.k8s.io Events) are stored in their storage's form.
    obj["apiVersion"] = Value::String(res.stored_api_version());
    obj["kind"] = Value::String(res.stored_as().kind.to_string());
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    let generated = meta_str(&obj, "name").is_none_or(str::is_empty);
    let generate_name = meta_str(&obj, "generateName").unwrap_or_default().to_string();
    if generated && generate_name.is_empty() {
        return Err(StoreError::BadRequest("name or generateName is required".into()));
    }
    let namespace = if res.namespaced {
        meta_str(&obj, "namespace")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| StoreError::BadRequest(format!("the namespace of the {} must be set", res.singular)))?
    } else {
        String::new()
    };
    let meta = meta_mut(&mut obj)?;
    for k in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
        meta.remove(k);
    }
    if !res.namespaced {
        meta.remove("namespace");
    }
    // A uid the writer's admission gave the object (a Job's generated
    // selector names it) is kept; otherwise the store gives one.
    if meta.get("uid").and_then(Value::as_str).is_none_or(str::is_empty) {
        meta.insert("uid".into(), Value::String(edgehive_model::new_msg_id().to_string()));
    }
    meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
    // A kind without a generation of its own keeps whatever the client
    // sent, as Kubernetes does (nothing on its create path clears it).
    if res.generation {
        meta.insert("generation".into(), json!(1));
    }
    let attempts_left = if generated { 8 } else { 1 };
    Ok(NewObject { obj, namespace, generate_name: generated.then_some(generate_name), attempts_left })
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    start: String,
}

/// A refused write other than a stale revision, as the caller sees it.
fn write_failed(res: &ResourceDef, name: &str, e: WriteError) -> StoreError {
    match e {
        WriteError::Missing => StoreError::NotFound { resource: res.qualified(), name: name.to_string() },
        WriteError::Failed(e) => e,
        WriteError::Stale(_) => conflict(res, name, MODIFIED),
        WriteError::Exists => StoreError::AlreadyExists { resource: res.qualified(), name: name.to_string() },
    }
}

fn conflict(res: &ResourceDef, name: &str, reason: impl Into<String>) -> StoreError {
    StoreError::Conflict { resource: res.qualified(), name: name.to_string(), reason: reason.into() }
}

const MODIFIED: &str = "the object has been modified; please apply your changes to the latest version and try again";

impl Store {
    /// Opens the backend and starts the store's background work (bookmarks,
    /// compaction).
    pub async fn open(config: StoreConfig) -> Result<Store> {
        let cache = WatchCache::new(config.watch_history, config.watch_queue);
        let feed: Arc<dyn crate::backend::ChangeFeed> = Arc::clone(&cache) as _;
        let backend = Backend::open(&config.backend, feed, Arc::new(crate::pointform::SyncCodec)).await?;
        let stop = CancellationToken::new();
        let resources = crate::resources::Registry::default();
        let store = Store { inner: Arc::new(Inner { backend, cache, config, stop, resources }) };
        store.spawn_housekeeping();
        if store.inner.config.reap_graceful {
            tokio::spawn(crate::reaper::run_pods(store.clone(), store.inner.stop.clone()));
        }
        if let Some(ttl) = store.inner.config.event_ttl {
            tokio::spawn(crate::reaper::run_events(store.clone(), ttl, store.inner.stop.clone()));
        }
        Ok(store)
    }

    /// The resources this store serves: the built-in ones and those its
    /// CustomResourceDefinitions define.
    pub fn resources(&self) -> &crate::resources::Registry {
        &self.inner.resources
    }

    fn spawn_housekeeping(&self) {
        let weak = Arc::downgrade(&self.inner);
        let stop = self.inner.stop.clone();
        let bookmark_every = self.inner.config.bookmark_interval;
        let compact_every = self.inner.config.compaction_interval;
        tokio::spawn(async move {
            let mut bookmarks = tokio::time::interval(bookmark_every);
            bookmarks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut compaction = tokio::time::interval(compact_every.unwrap_or(Duration::from_secs(3600)));
            compaction.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // History up to the revision seen one interval ago is compacted.
            let mut previous: Option<u64> = None;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = bookmarks.tick() => {
                        let Some(inner) = weak.upgrade() else { return };
                        inner.cache.bookmark_all();
                    }
                    _ = compaction.tick(), if compact_every.is_some() => {
                        let Some(inner) = weak.upgrade() else { return };
                        if let Some(rev) = previous.take().filter(|r| *r > 0) {
                            if let Err(e) = inner.backend.compact(rev).await {
                                tracing::warn!(error = %e, rev, "compact store history");
                            } else {
                                tracing::debug!(rev, "compacted store history");
                            }
                        }
                        previous = inner.backend.current_rev().await.ok();
                    }
                }
            }
        });
    }

    /// Stops background work, ends every watch, and closes the backend (the
    /// SQLite writer finishes what is queued).
    pub async fn close(&self) {
        self.inner.stop.cancel();
        self.inner.cache.close();
        self.inner.backend.close().await;
    }

    /// The watch cache (counters, current revision).
    pub fn watch_cache(&self) -> &Arc<WatchCache> {
        &self.inner.cache
    }

    /// The backend's current revision.
    pub async fn current_rev(&self) -> Result<u64> {
        self.inner.backend.current_rev().await
    }

    /// Waits until the store has reached revision `rev`, at most
    /// [`REVISION_WAIT`], as Kubernetes' watch cache does before it serves a
    /// read "not older than" `rev`; returns at once when it has.
    pub async fn wait_for_revision(&self, rev: u64) -> Result<(), TooLargeResourceVersion> {
        if self.inner.cache.rev() >= rev {
            return Ok(());
        }
        // Reads come from the backend, which may be ahead of the cache (etcd's
        // watch lags its writes; SQLite publishes just after its commit).
        if self.inner.backend.current_rev().await.is_ok_and(|now| now >= rev) {
            return Ok(());
        }
        self.inner.cache.wait_for_rev(rev, REVISION_WAIT).await
    }

    /// Forgets history at and below `rev`: lists at older revisions and
    /// continue tokens from before it get `Expired`.
    pub async fn compact(&self, rev: u64) -> Result<()> {
        self.inner.backend.compact(rev).await
    }

    fn encode(&self, key: &str, obj: &Value) -> Result<bytes::Bytes> {
        let raw = encode_for_storage(obj)?;
        if raw.len() > self.inner.config.max_object_bytes {
            return Err(StoreError::TooLarge {
                key: key.to_string(),
                size: raw.len(),
                limit: self.inner.config.max_object_bytes,
            });
        }
        Ok(raw)
    }

    /// Creates `obj` (already validated): sets apiVersion, kind, uid (unless
    /// admission set one), creationTimestamp and, for kinds that have one, generation; a
    /// `generateName` gets its suffix.
    pub async fn create(&self, res: &'static ResourceDef, obj: Value) -> Result<Object> {
        let mut new = prepare_create(res, obj)?;
        while let Some(key) = new.next_name(res)? {
            let raw = self.encode(&key, &new.obj)?;
            match self.inner.backend.create(&key, raw.clone()).await {
                Ok(rev) => return Ok(Object::from_stored(res, key, rev, raw)),
                Err(WriteError::Exists) if new.generated() => continue,
                Err(e) => return Err(write_failed(res, new.name(), e)),
            }
        }
        Err(new.names_used_up(res))
    }

    /// What [`Store::create`] would store, without writing it (a dry-run
    /// create): the same preparation (uid, creationTimestamp, generation, a
    /// generated name) and checks (size, a name already taken), and no
    /// resourceVersion, as Kubernetes' `DryRunnableStorage.Create` answers.
    pub async fn create_dry_run(&self, res: &'static ResourceDef, obj: Value) -> Result<Value> {
        let mut new = prepare_create(res, obj)?;
        while let Some(key) = new.next_name(res)? {
            self.encode(&key, &new.obj)?;
            match self.inner.backend.get(&key).await? {
                None => return Ok(new.obj),
                Some(_) if new.generated() => continue,
                Some(_) => return Err(write_failed(res, new.name(), WriteError::Exists)),
            }
        }
        Err(new.names_used_up(res))
    }

    /// The object `namespace`/`name`.
    pub async fn get(&self, res: &'static ResourceDef, namespace: &str, name: &str) -> Result<Object> {
        let key = res.key(namespace, name);
        match self.inner.backend.get(&key).await? {
            Some(kv) => Ok(Object::from_stored(res, kv.key, kv.mod_rev, kv.value)),
            None => Err(StoreError::NotFound { resource: res.qualified(), name: name.to_string() }),
        }
    }

    /// Lists objects; corrupt rows are logged with their key and skipped.
    pub async fn list(&self, res: &'static ResourceDef, opts: &ListOptions) -> Result<ListResult> {
        for f in opts.fields.fields() {
            if !res.supports_field(f) {
                return Err(StoreError::BadRequest(format!("field label not supported: {f}")));
            }
        }
        let ns = opts.namespace.as_deref().unwrap_or("");
        let prefix = res.namespace_prefix(ns);
        let mut end = prefix_end(&prefix);
        let mut start = prefix.clone();
        // One name in one namespace (`kubectl delete`'s wait, `get -w NAME`):
        // read that key only.
        if let Some(name) = opts.fields.exact_value("metadata.name")
            && (!res.namespaced || !ns.is_empty())
        {
            start = res.key(ns, name);
            end = format!("{start}\0");
        }
        let mut at = None;
        if let Some(token) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            let t = decode_continue(token)?;
            start = format!("{prefix}{}", t.start).max(start);
            at = Some(t.rv);
        } else if let Some(rv) = opts.resource_version.filter(|rv| *rv > 0) {
            if opts.exact {
                at = Some(rv);
            } else {
                self.wait_for_revision(rv).await.map_err(|e| StoreError::Timeout(e.to_string()))?;
            }
        }
        let filter = WatchFilter {
            resource: res,
            namespace: opts.namespace.clone(),
            name: opts.fields.exact_value("metadata.name").map(str::to_string),
            labels: opts.labels.clone(),
            fields: opts.fields.clone(),
        };
        let batch = if opts.limit == 0 { 0 } else { opts.limit.max(64) };
        let mut items = Vec::new();
        loop {
            let page = match self.inner.backend.range(&start, &end, batch, at).await {
                Err(StoreError::Expired(_)) if opts.continue_token.is_some() => {
                    return Err(StoreError::Expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter."
                            .into(),
                    ));
                }
                other => other?,
            };
            at = Some(page.rev);
            let n = page.items.len();
            let mut last_key = String::new();
            for (i, kv) in page.items.into_iter().enumerate() {
                last_key.clone_from(&kv.key);
                let obj = Object::from_stored(res, kv.key, kv.mod_rev, kv.value);
                // Checked, not made into the client JSON: a controller's
                // list of every Node would hold a second copy of each.
                if let Err(e) = obj.check() {
                    tracing::error!(key = obj.key(), error = %e, "skipping corrupt stored object");
                    continue;
                }
                if !filter.matches(&obj) {
                    continue;
                }
                items.push(obj);
                if opts.limit > 0 && items.len() == opts.limit {
                    let more = i + 1 < n || page.more;
                    let rest = last_key.get(prefix.len()..).unwrap_or_default();
                    let continue_token = more.then(|| encode_continue(page.rev, &format!("{rest}\0")));
                    return Ok(ListResult { items, rev: page.rev, continue_token });
                }
            }
            if !page.more || last_key.is_empty() {
                return Ok(ListResult { items, rev: page.rev, continue_token: None });
            }
            start = format!("{last_key}\0");
        }
    }

    /// Read-modify-write with conflict retries: `f` gets the current object
    /// and returns the new one (or `None` to leave it), or the caller's own
    /// error, which ends the update and is returned as it is (the store's
    /// errors convert into it). Immutable metadata (uid, creationTimestamp,
    /// deletion fields) is kept from the current object, `generation` moves
    /// when anything but metadata and status changes, and a no-op update
    /// writes nothing.
    pub async fn update_with<F, E>(
        &self,
        res: &'static ResourceDef,
        namespace: &str,
        name: &str,
        mut f: F,
    ) -> std::result::Result<Object, E>
    where
        F: FnMut(&Object) -> std::result::Result<Option<Value>, E>,
        E: From<StoreError>,
    {
        let mut retry = Retry::new();
        while retry.again().await {
            let cur = self.get(res, namespace, name).await?;
            let Some(mut new) = f(&cur)? else { return Ok(cur) };
            let old = cur.value()?;
            carry_over(res, old, &mut new)?;
            if &new == old {
                return Ok(cur);
            }
            // Removing the last finalizer of an object being deleted with no
            // grace left completes the deletion.
            let terminating = new.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
            let grace = new.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0);
            if terminating && grace == 0 && !has_finalizers(res, &new) {
                match self.inner.backend.delete(cur.key(), Some(cur.rev())).await {
                    Ok((rev, _)) => {
                        let raw = self.encode(cur.key(), &new)?;
                        return Ok(Object::from_stored(res, cur.key().to_string(), rev, raw));
                    }
                    Err(WriteError::Stale(_)) => continue,
                    Err(e) => return Err(write_failed(res, name, e).into()),
                }
            }
            let raw = self.encode(cur.key(), &new)?;
            match self.inner.backend.update(cur.key(), raw.clone(), cur.rev()).await {
                Ok(rev) => return Ok(Object::from_stored(res, cur.key().to_string(), rev, raw)),
                Err(WriteError::Stale(_)) => continue,
                Err(e) => return Err(write_failed(res, name, e).into()),
            }
        }
        Err(conflict(res, name, MODIFIED).into())
    }

    /// Replaces the object with `obj`. If `obj` carries a resourceVersion it
    /// must be the current one (else Conflict); without one the update is
    /// unconditional.
    pub async fn update(&self, res: &'static ResourceDef, obj: Value) -> Result<Object> {
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let namespace =
            if res.namespaced { meta_str(&obj, "namespace").unwrap_or_default().to_string() } else { String::new() };
        let expected = match meta_str(&obj, "resourceVersion") {
            Some(rv) if !rv.is_empty() => {
                Some(rv.parse::<u64>().map_err(|_| StoreError::BadRequest(format!("invalid resourceVersion {rv:?}")))?)
            }
            _ => None,
        };
        let mut obj = Some(obj);
        self.update_with(res, &namespace, &name, |cur| {
            if expected.is_some_and(|e| e != cur.rev()) {
                return Err(conflict(res, &name, MODIFIED));
            }
            Ok(obj.take().or_else(|| cur.to_value().ok()))
        })
        .await
    }

    /// Read-modify-writes many objects without a read round trip each (the
    /// backend applies each function to the current bytes): per item, the
    /// revision written, `None` if it was left as it was. For the store's
    /// own writers (success points), whose functions keep the objects'
    /// identity themselves; the API goes through [`Store::update_with`].
    pub(crate) async fn merge_many(&self, items: Vec<MergeItem>) -> Vec<Result<Option<u64>>> {
        let mut names = Vec::with_capacity(items.len());
        let keyed = items
            .into_iter()
            .map(|i| {
                let key = i.res.key(&i.namespace, &i.name);
                names.push((i.res, i.name));
                (key, i.f)
            })
            .collect();
        let results = self.inner.backend.merge_many(keyed).await;
        results.into_iter().zip(names).map(|(r, (res, name))| r.map_err(|e| write_failed(res, &name, e))).collect()
    }

    /// Deletes an object, honouring preconditions, finalizers and (for
    /// graceful resources such as pods) the grace period: a pod bound to a
    /// node is first marked with `deletionTimestamp` and removed when the
    /// node confirms (a delete with grace 0) or the grace runs out.
    pub async fn delete(
        &self,
        res: &'static ResourceDef,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome> {
        let mut retry = Retry::new();
        while retry.again().await {
            let cur = self.get(res, namespace, name).await?;
            let value = match cur.value() {
                Ok(v) => v,
                Err(e) if opts.uid.is_none() && opts.resource_version.is_none() => {
                    // A corrupt object can still be deleted, so that it can be fixed.
                    tracing::warn!(key = cur.key(), error = %e, "deleting a corrupt stored object");
                    return self.remove(res, &cur).await.map(DeleteOutcome::Deleted);
                }
                Err(e) => return Err(e),
            };
            if let Some(uid) = &opts.uid {
                let have = cur.uid().unwrap_or_default();
                if uid != have {
                    return Err(conflict(
                        res,
                        name,
                        format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
                    ));
                }
            }
            if let Some(rv) = opts.resource_version
                && rv != cur.rev()
            {
                return Err(conflict(
                    res,
                    name,
                    format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        cur.rev()
                    ),
                ));
            }
            let grace = if res.graceful { pod_grace(value, opts.grace_period_seconds) } else { 0 };
            // The garbage collector's finalizers, as the policy asks (an
            // object already terminating keeps the policy it was given,
            // unless this delete names one).
            let terminating = value.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
            let policy = opts.propagation.or((!terminating).then(|| Propagation::default_for(res)));
            let finalizers = policy.and_then(|p| p.finalizers(value));
            if grace == 0 && finalizers.is_none() && !has_finalizers(res, value) {
                match self.inner.backend.delete(cur.key(), Some(cur.rev())).await {
                    Ok((rev, _)) => return Ok(DeleteOutcome::Deleted(cur.at_rev(rev))),
                    Err(WriteError::Stale(_)) => continue,
                    Err(e) => return Err(write_failed(res, name, e)),
                }
            }
            // Mark (or shorten) the deletion.
            let deadline = time::OffsetDateTime::now_utc() + time::Duration::seconds(grace);
            let existing = value.pointer("/metadata/deletionTimestamp").and_then(Value::as_str).and_then(parse_rfc3339);
            let marked_grace = value.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
            // Already terminating at least this soon: nothing to change
            // (but a grace of 0 is written, so that removing the last
            // finalizer then completes the deletion).
            if existing.is_some_and(|t| t <= deadline) && (grace > 0 || marked_grace == Some(0)) && finalizers.is_none()
            {
                return Ok(DeleteOutcome::Pending(cur));
            }
            let mut new = value.clone();
            let meta = meta_mut(&mut new)?;
            if let Some(f) = finalizers {
                if f.is_empty() {
                    meta.remove("finalizers");
                } else {
                    meta.insert("finalizers".into(), Value::Array(f));
                }
            }
            // The first mark changes what the object's controllers may do:
            // its generation (if it has one) moves, as Kubernetes'
            // `BeforeDelete` and `updateForGracefulDeletionAndFinalizers` do.
            if meta.get("deletionTimestamp").is_none_or(Value::is_null)
                && let Some(g) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0)
            {
                meta.insert("generation".into(), json!(g + 1));
            }
            meta.insert("deletionTimestamp".into(), Value::String(rfc3339(deadline)));
            meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
            if std::ptr::eq(res, &crate::resources::NAMESPACES) {
                // A namespace is Terminating from the same write that marks
                // it, so no reader ever sees it marked but still Active.
                if !new.get("status").is_some_and(Value::is_object) {
                    new["status"] = json!({});
                }
                new["status"]["phase"] = json!("Terminating");
            }
            let raw = self.encode(cur.key(), &new)?;
            match self.inner.backend.update(cur.key(), raw.clone(), cur.rev()).await {
                Ok(rev) => {
                    return Ok(DeleteOutcome::Pending(Object::from_stored(res, cur.key().to_string(), rev, raw)));
                }
                Err(WriteError::Stale(_)) => continue,
                Err(e) => return Err(write_failed(res, name, e)),
            }
        }
        Err(conflict(res, name, MODIFIED))
    }

    async fn remove(&self, res: &'static ResourceDef, cur: &Object) -> Result<Object> {
        match self.inner.backend.delete(cur.key(), None).await {
            Ok((rev, _)) => Ok(cur.at_rev(rev)),
            Err(e) => Err(write_failed(res, cur.name(), e)),
        }
    }

    /// Watches objects of a resource.
    pub async fn watch(&self, opts: WatchOptions) -> Result<Watch> {
        for f in opts.filter.fields.fields() {
            if !opts.filter.resource.supports_field(f) {
                return Err(StoreError::BadRequest(format!("field label not supported: {f}")));
            }
        }
        match opts.start {
            WatchStart::After(rev) => self.inner.cache.subscribe(opts.filter, rev, opts.bookmarks),
            WatchStart::InitialState { end_bookmark } => {
                let list_opts = ListOptions {
                    namespace: opts.filter.namespace.clone(),
                    labels: opts.filter.labels.clone(),
                    fields: opts.filter.fields.clone(),
                    ..ListOptions::default()
                };
                let mut attempts = 0;
                loop {
                    let list = self.list(opts.filter.resource, &list_opts).await?;
                    let list = ListResult {
                        items: list
                            .items
                            .into_iter()
                            .filter(|o| opts.filter.name.as_deref().is_none_or(|n| n == o.name()))
                            .collect(),
                        ..list
                    };
                    match self.inner.cache.subscribe(opts.filter.clone(), list.rev, opts.bookmarks) {
                        Ok(mut w) => {
                            let rev = list.rev;
                            w.push_initial(list.items.into_iter().map(WatchEvent::initial));
                            if end_bookmark {
                                w.push_initial([WatchEvent::bookmark(rev, true)]);
                            }
                            return Ok(w);
                        }
                        // Writes raced past the cache's history between the
                        // list and the subscription: list again.
                        Err(StoreError::Expired(_)) if attempts < 3 => attempts += 1,
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
}

/// A pod's grace period for this delete: the request's, else the pod's
/// `terminationGracePeriodSeconds` (default 30); 0 for a pod not bound to a
/// node or already finished, as Kubernetes does.
fn pod_grace(pod: &Value, requested: Option<i64>) -> i64 {
    let unbound = pod.pointer("/spec/nodeName").and_then(Value::as_str).is_none_or(str::is_empty);
    let finished = matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
    if unbound || finished {
        return 0;
    }
    requested
        .or_else(|| pod.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64))
        .unwrap_or(30)
        .max(0)
}

/// Keeps what a writer may not change and moves `generation`, as
/// Kubernetes' `rest.BeforeUpdate` (a writer never sets it) and the kind's
/// `PrepareForUpdate` (pods: a spec change; custom resources: any change
/// but metadata, and status when it is a subresource) do.
fn carry_over(res: &ResourceDef, old: &Value, new: &mut Value) -> Result<()> {
    if !new.is_object() {
        return Err(StoreError::BadRequest("object must be a JSON object".into()));
    }
    new["apiVersion"] = Value::String(res.stored_api_version());
    new["kind"] = Value::String(res.stored_as().kind.to_string());
    if !new.get("metadata").is_some_and(Value::is_object) {
        new["metadata"] = json!({});
    }
    let old_meta = old.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    let meta = meta_mut(new)?;
    for k in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "name", "namespace"] {
        match old_meta.get(k) {
            Some(v) => {
                meta.insert(k.into(), v.clone());
            }
            None => {
                meta.remove(k);
            }
        }
    }
    meta.insert("resourceVersion".into(), old_meta.get("resourceVersion").cloned().unwrap_or(Value::Null));
    let generation = old_meta.get("generation").and_then(Value::as_i64);
    let generation =
        if res.generation && spec_changed(res, old, new) { Some(generation.unwrap_or(0) + 1) } else { generation };
    let meta = meta_mut(new)?;
    match generation {
        Some(g) => meta.insert("generation".into(), json!(g)),
        None => meta.remove("generation"),
    };
    Ok(())
}

/// Whether anything but metadata (and status, when it has its own
/// subresource) differs.
fn spec_changed(res: &ResourceDef, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            for k in ["metadata", "apiVersion", "kind"] {
                o.remove(k);
            }
            if res.status_subresource {
                o.remove("status");
            }
        }
        v
    };
    strip(old) != strip(new)
}

fn encode_continue(rev: u64, start: &str) -> String {
    let t = ContinueToken { v: "meta.k8s.io/v1".into(), rv: rev, start: start.to_string() };
    B64URL.encode(serde_json::to_vec(&t).unwrap_or_default())
}

fn decode_continue(token: &str) -> Result<ContinueToken> {
    let bad = || StoreError::BadRequest("continue key is not valid: incorrect encoded start resourceVersion".into());
    let bytes = B64URL.decode(token.trim_end_matches('=')).map_err(|_| bad())?;
    let t: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    if t.v != "meta.k8s.io/v1" || t.rv == 0 || t.start.starts_with('/') {
        return Err(bad());
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = encode_continue(42, "web-1\0");
        let d = decode_continue(&t).expect("decode");
        assert_eq!((d.rv, d.start.as_str()), (42, "web-1\0"));
        for bad in ["", "!!!", "eyJ2IjoieCJ9", &B64URL.encode(br#"{"v":"meta.k8s.io/v1","rv":0,"start":""}"#)] {
            assert!(matches!(decode_continue(bad), Err(StoreError::BadRequest(_))), "{bad}");
        }
    }

    #[test]
    fn generated_names_are_the_prefix_and_five_characters_at_most_63() {
        let n = generate_name("pi-");
        assert!(n.starts_with("pi-") && n.len() == 8, "{n}");
        assert!(n[3..].bytes().all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)), "{n}");
        let long = "a".repeat(70);
        assert_eq!(generate_name(&long).len(), 63);
        // A multi-byte character at the cut is not split (validation refuses it later).
        let odd = format!("{}é-", "a".repeat(57));
        assert!(generate_name(&odd).starts_with(&"a".repeat(57)));
    }

    #[test]
    fn timestamps_are_kubernetes_style() {
        let t = parse_rfc3339("2026-11-22T10:11:12Z").expect("parse");
        assert_eq!(rfc3339(t), "2026-11-22T10:11:12Z");
        assert_eq!(now_rfc3339().len(), 20);
    }

    #[test]
    fn grace_follows_kubernetes_rules() {
        let bound = json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 10}});
        assert_eq!(pod_grace(&bound, None), 10);
        assert_eq!(pod_grace(&bound, Some(3)), 3);
        assert_eq!(pod_grace(&json!({"spec": {"nodeName": "n1"}}), None), 30);
        assert_eq!(pod_grace(&json!({"spec": {}}), Some(30)), 0);
        assert_eq!(pod_grace(&json!({"spec": {"nodeName": "n"}, "status": {"phase": "Failed"}}), None), 0);
    }

    #[test]
    fn kinds_without_a_generation_never_get_one() {
        let old = json!({"metadata": {"name": "a", "uid": "u"}, "data": {"x": "1"}});
        let mut changed = json!({"metadata": {"name": "a", "generation": 7}, "data": {"x": "2"}});
        carry_over(&crate::resources::CONFIGMAPS, &old, &mut changed).expect("carry");
        assert_eq!(changed["metadata"].get("generation"), None, "{changed}");
        // One that a client set at create stays as it was.
        let old = json!({"metadata": {"name": "a", "generation": 4}, "data": {"x": "1"}});
        let mut changed = json!({"metadata": {"name": "a", "generation": 9}, "data": {"x": "2"}});
        carry_over(&crate::resources::CONFIGMAPS, &old, &mut changed).expect("carry");
        assert_eq!(changed["metadata"]["generation"], 4);
        let new = prepare_create(&crate::resources::SECRETS, json!({"metadata": {"name": "s", "namespace": "d"}}));
        assert_eq!(new.expect("prepare").obj["metadata"].get("generation"), None);
        let new = prepare_create(
            &crate::resources::PODS,
            json!({"metadata": {"name": "p", "namespace": "d", "generation": 5}}),
        );
        assert_eq!(new.expect("prepare").obj["metadata"]["generation"], 1, "the server's, not the client's");
    }

    #[test]
    fn a_custom_resource_without_a_status_subresource_moves_with_its_status() {
        let old = json!({"metadata": {"name": "m", "generation": 1}, "spec": {}, "status": {"a": 1}});
        let mut changed = json!({"metadata": {"name": "m"}, "spec": {}, "status": {"a": 2}});
        carry_over(&crate::resources::DEVICE_MODELS, &old, &mut changed).expect("carry");
        assert_eq!(changed["metadata"]["generation"], 2);
        let mut changed = json!({"metadata": {"name": "m"}, "spec": {}, "status": {"a": 2}});
        carry_over(&crate::resources::DEVICES, &old, &mut changed).expect("carry");
        assert_eq!(changed["metadata"]["generation"], 1, "status is a subresource of devices");
    }

    #[test]
    fn generation_moves_only_with_the_spec() {
        let old = json!({"metadata": {"name": "a", "uid": "u", "generation": 2}, "spec": {"x": 1}, "status": {}});
        let mut same = json!({"metadata": {"name": "a", "labels": {"l": "v"}}, "spec": {"x": 1}, "status": {"y": 1}});
        carry_over(&crate::resources::PODS, &old, &mut same).expect("carry");
        assert_eq!(same["metadata"]["generation"], 2);
        assert_eq!(same["metadata"]["uid"], "u");
        let mut changed = json!({"metadata": {"name": "a"}, "spec": {"x": 2}});
        carry_over(&crate::resources::PODS, &old, &mut changed).expect("carry");
        assert_eq!(changed["metadata"]["generation"], 3);
    }
}
