//! Events the cloud's controllers record (`ScalingReplicaSet`,
//! `SuccessfulCreate`, `FailedScheduling`, ...), as Kubernetes' controllers
//! record them with client-go's `EventRecorder`: `kubectl describe` and
//! `kubectl events` show them.
//!
//! A controller holds a [`Recorder`] and calls [`Recorder::record`], which
//! never waits: the note goes into a bounded queue (1,000, client-go's
//! `maxQueuedEvents`) and is dropped and counted when the queue is full. One
//! writer task per process takes the notes in order, decides with the
//! [`correlate::Correlator`] whether each becomes a new Event, raises the
//! count of one written before, or is dropped as spam, and writes the store
//! with Kubernetes' defaults and validation (the registry's `admit`).
//! Events expire an hour after their last write (the store's `event_ttl`,
//! kube-apiserver's `--event-ttl`).
//!
//! A failed write is logged and counted, never retried for long: Events are
//! best effort in Kubernetes too, and a controller never waits for one.

pub mod correlate;

use std::borrow::Cow;
use std::sync::Arc;

use edgehive_registry::admit;
use edgehive_store::resources::{EVENTS, ResourceDef};
use edgehive_store::{Store, StoreError};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::correlate::{Correlator, Decision};

/// Notes waiting for the writer (client-go's `maxQueuedEvents`).
pub const QUEUE: usize = 1000;

/// The object an Event is about (its `involvedObject`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// `apps/v1`.
    pub api_version: String,
    /// `Deployment`.
    pub kind: String,
    /// Empty for cluster-scoped objects (their Events go to `default`).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Uid.
    pub uid: String,
    /// The resourceVersion the controller saw (may be empty).
    pub resource_version: String,
}

impl ObjectRef {
    /// The reference to `obj` of resource `res`.
    pub fn of(res: &ResourceDef, obj: &Value) -> ObjectRef {
        let meta = |k: &str| obj["metadata"][k].as_str().unwrap_or_default().to_string();
        ObjectRef {
            api_version: res.api_version(),
            kind: res.kind.to_string(),
            namespace: meta("namespace"),
            name: meta("name"),
            uid: meta("uid"),
            resource_version: meta("resourceVersion"),
        }
    }

    /// As the Event's `involvedObject`.
    pub fn to_value(&self) -> Value {
        let mut v = json!({"kind": self.kind, "name": self.name, "apiVersion": self.api_version});
        for (k, s) in [("namespace", &self.namespace), ("uid", &self.uid), ("resourceVersion", &self.resource_version)]
        {
            if !s.is_empty() {
                v[k] = json!(s);
            }
        }
        v
    }
}

/// What a controller has to say about an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// About what.
    pub involved: ObjectRef,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// CamelCase reason (`SuccessfulCreate`).
    pub reason: Cow<'static, str>,
    /// For people.
    pub message: String,
}

impl Note {
    /// A `Normal` note.
    pub fn normal(involved: ObjectRef, reason: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Note {
        Note { involved, warning: false, reason: reason.into(), message: message.into() }
    }

    /// A `Warning` note.
    pub fn warning(involved: ObjectRef, reason: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Note {
        Note { involved, warning: true, reason: reason.into(), message: message.into() }
    }

    /// The Event's `type`.
    pub fn type_(&self) -> &'static str {
        if self.warning { "Warning" } else { "Normal" }
    }
}

/// How a note ended.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// `created`, `counted` (a repeat raised a count), `spam` (over the
    /// source's budget for the object), `queue_full` (dropped before the
    /// writer saw it) or `failed` (the store refused it).
    pub outcome: &'static str,
}

/// The recorder's counters (`edgehive_events_*`).
#[derive(Debug, Default)]
pub struct Metrics {
    notes: Family<OutcomeLabel, Counter>,
}

impl Metrics {
    /// Registers under `events`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("events");
        r.register("notes", "Notes the controllers recorded, by how they ended", self.notes.clone());
    }

    fn count(&self, outcome: &'static str) {
        self.notes.get_or_create(&OutcomeLabel { outcome }).inc();
    }

    /// Notes that ended with `outcome` (for tests and benchmarks).
    pub fn get(&self, outcome: &'static str) -> u64 {
        self.notes.get_or_create(&OutcomeLabel { outcome }).get()
    }
}

/// A controller's handle: records notes as `component`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: Option<mpsc::Sender<(&'static str, Note)>>,
    component: &'static str,
    metrics: Arc<Metrics>,
}

impl Recorder {
    /// A recorder that drops every note (tests that do not look at Events).
    pub fn discard() -> Recorder {
        Recorder { tx: None, component: "", metrics: Arc::new(Metrics::default()) }
    }

    /// Starts the writer over `store` until `stop`; returns the handle, as
    /// no component yet ([`Recorder::named`] gives one).
    pub fn start(store: Store, stop: CancellationToken) -> Recorder {
        let (tx, rx) = mpsc::channel(QUEUE);
        let metrics = Arc::new(Metrics::default());
        tokio::spawn(write_all(store, rx, metrics.clone(), stop));
        Recorder { tx: Some(tx), component: "", metrics }
    }

    /// The same writer, recording as `component` (Kubernetes' names:
    /// `deployment-controller`, `default-scheduler`, ...).
    pub fn named(&self, component: &'static str) -> Recorder {
        Recorder { component, ..self.clone() }
    }

    /// The recorder's counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Records `note`; never waits (dropped and counted when the queue is full).
    pub fn record(&self, note: Note) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send((self.component, note)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full((_, note))) => {
                self.metrics.count("queue_full");
                tracing::debug!(module = "events", component = self.component, reason = %note.reason, "event queue full; note dropped");
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// Event writes in flight at once. Each is a store commit: awaited one at a
/// time the writer took one note per commit, and a burst (the
/// FailedScheduling notes of a 20,000-pod rollout) overflowed the queue and
/// was dropped; in flight together they share commits.
const WRITES_IN_FLIGHT: usize = 64;

/// The writer: notes in order, through the correlator, into the store. The
/// writes of different Events overlap; those of one Event (its creation,
/// then its counts) are made one after the other, in the order decided.
async fn write_all(
    store: Store,
    mut rx: mpsc::Receiver<(&'static str, Note)>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let mut correlator = Correlator::default();
    let mut writes: tokio::task::JoinSet<(String, String)> = tokio::task::JoinSet::new();
    let mut in_flight: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    // The outcome is counted by the write itself (when it ends, whether or
    // not the writer is waiting for it); joining only frees its Event.
    let done = |r: Result<(String, String), tokio::task::JoinError>,
                in_flight: &mut std::collections::HashSet<(String, String)>| {
        if let Ok(key) = r {
            in_flight.remove(&key);
        }
    };
    loop {
        let (component, note) = tokio::select! {
            _ = stop.cancelled() => return,
            n = rx.recv() => match n {
                Some(n) => n,
                None => break,
            },
        };
        let decision = correlator.decide(component, &note, time::OffsetDateTime::now_utc());
        let Some(key) = written_event(&decision) else {
            metrics.count("spam");
            continue;
        };
        while in_flight.contains(&key) || writes.len() >= WRITES_IN_FLIGHT {
            let Some(r) = writes.join_next().await else { break };
            done(r, &mut in_flight);
        }
        if writes.is_empty() {
            // A write that panicked left its key behind.
            in_flight.clear();
        }
        in_flight.insert(key.clone());
        let (store, metrics) = (store.clone(), metrics.clone());
        writes.spawn(async move {
            let outcome = match write(&store, decision).await {
                Ok(outcome) => outcome,
                Err(e) => {
                    tracing::warn!(module = "events", component, reason = %note.reason, object = %note.involved.name, error = %e, "event not recorded");
                    "failed"
                }
            };
            metrics.count(outcome);
            key
        });
    }
    while let Some(r) = writes.join_next().await {
        done(r, &mut in_flight);
    }
}

/// The Event a decision writes (namespace, name); `None` for spam.
fn written_event(decision: &Decision) -> Option<(String, String)> {
    match decision {
        Decision::Spam => None,
        Decision::Create(event) => {
            let meta = event.get("metadata");
            let at = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
            Some((at("namespace"), at("name")))
        }
        Decision::Count { namespace, name, .. } => Some((namespace.clone(), name.clone())),
    }
}

/// Why an Event was not written.
#[derive(Debug)]
enum WriteError {
    Store(StoreError),
    Invalid(String),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Store(e) => e.fmt(f),
            WriteError::Invalid(m) => f.write_str(m),
        }
    }
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> Self {
        WriteError::Store(e)
    }
}

async fn create(store: &Store, mut event: Value) -> Result<(), WriteError> {
    admit::create(&EVENTS, &mut event).map_err(|e| WriteError::Invalid(e.to_string()))?;
    store.create(&EVENTS, event).await?;
    Ok(())
}

async fn write(store: &Store, decision: Decision) -> Result<&'static str, WriteError> {
    match decision {
        Decision::Spam => Ok("spam"),
        Decision::Create(event) => create(store, event).await.map(|()| "created"),
        Decision::Count { namespace, name, count, last, message, event } => {
            let counted = store
                .update_with(&EVENTS, &namespace, &name, |cur| {
                    let old = cur.value()?;
                    let mut new = old.clone();
                    new["count"] = json!(count);
                    new["lastTimestamp"] = json!(last);
                    new["message"] = json!(message);
                    admit::update(&EVENTS, &mut new, old).map_err(|e| WriteError::Invalid(e.to_string()))?;
                    Ok::<_, WriteError>(Some(new))
                })
                .await;
            match counted {
                Ok(_) => Ok("counted"),
                // Expired or deleted since: written anew under its name.
                Err(WriteError::Store(StoreError::NotFound { .. })) => create(store, event).await.map(|()| "created"),
                Err(e) => Err(e),
            }
        }
    }
}
