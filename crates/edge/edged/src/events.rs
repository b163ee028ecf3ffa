//! Events edged records about its pods, as kubelet records them: `Pulled`,
//! `Created`, `Started`, `Killing`, `BackOff`, `Unhealthy`, `Failed`, with
//! kubelet's reasons and messages (`pkg/kubelet/events/event.go`), about
//! the pod with `fieldPath` `spec.containers{name}`, from `source.component`
//! `kubelet` on `source.host` = the node.
//!
//! A pod worker calls [`Recorder::record`], which never waits: the note goes
//! into a bounded queue ([`QUEUE`], client-go's `maxQueuedEvents`) and is
//! dropped and counted when it is full. One sender task takes the notes in
//! order and, before anything goes on the link, runs client-go's event
//! correlator ([`edgehive_model::event_correlator`]): a repeat raises the
//! count of the Event sent before (a crash loop is one `BackOff` Event with
//! a count), similar messages are combined, and each pod has a budget of
//! 25 Events refilled one per 5 minutes.
//!
//! The Events then wait in an [`Outbox`] of at most [`BUFFER`] Events for
//! the cloud, sent as KubeEdge's edged sends them through MetaManager:
//! `insert` of `{ns}/event/{name}` with a new Event, `patch` with
//! `{"event": …, "patchData": "{\"count\":…}"}` for a counted one. A count
//! raised while its Event still waits replaces it in the outbox (one
//! message, the newest count). While the cloud is away nothing more is
//! kept: when the outbox is full the oldest Event goes, counted. Events are
//! best effort, as in Kubernetes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::Context;
use edgehive_model::event_correlator::{Correlator, Decision};
use edgehive_model::{Content, Message, group, op, resource_type as rt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// Notes waiting for the sender (client-go's `maxQueuedEvents`).
pub const QUEUE: usize = 1000;
/// Events waiting for the cloud.
pub const BUFFER: usize = 256;
/// Who records them (kubelet's `source.component` and `reportingComponent`).
pub const COMPONENT: &str = "kubelet";
/// How long one Event waits for the cloud's answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);
/// The longest wait before trying the cloud again.
const RETRY_CAP: Duration = Duration::from_secs(30);

/// The pod a note is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

impl PodRef {
    /// Kubelet's `format.Pod`: `name_namespace(uid)`.
    pub fn formatted(&self) -> String {
        format!("{}_{}({})", self.name, self.namespace, self.uid)
    }
}

/// What a pod worker has to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// About which pod.
    pub pod: Arc<PodRef>,
    /// About which of its containers (`fieldPath` `spec.containers{name}`).
    pub container: Option<String>,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// Kubelet's reason (`BackOff`).
    pub reason: &'static str,
    /// Kubelet's message.
    pub message: String,
}

impl Note {
    /// A `Normal` note about `container` of `pod`.
    pub fn normal(pod: &Arc<PodRef>, container: &str, reason: &'static str, message: String) -> Note {
        Note { pod: Arc::clone(pod), container: Some(container.to_owned()), warning: false, reason, message }
    }

    /// A `Warning` note about `container` of `pod`.
    pub fn warning(pod: &Arc<PodRef>, container: &str, reason: &'static str, message: String) -> Note {
        Note { warning: true, ..Note::normal(pod, container, reason, message) }
    }

    /// The Event kubelet's recorder makes of it on `node` at `at` (RFC 3339).
    pub fn to_event(&self, node: &str, at: &str) -> Value {
        let mut involved = json!({
            "apiVersion": "v1", "kind": "Pod",
            "namespace": self.pod.namespace, "name": self.pod.name, "uid": self.pod.uid,
        });
        if let Some(c) = &self.container {
            involved["fieldPath"] = json!(format!("spec.containers{{{c}}}"));
        }
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"namespace": self.pod.namespace},
            "involvedObject": involved,
            "reason": self.reason,
            "message": self.message,
            "source": {"component": COMPONENT, "host": node},
            "firstTimestamp": at,
            "lastTimestamp": at,
            "type": if self.warning { "Warning" } else { "Normal" },
            "reportingComponent": COMPONENT,
            "reportingInstance": node,
        })
    }
}

/// Why a note or Event was dropped.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabel {
    /// `queue_full` (the sender's queue), `spam` (over the pod's budget),
    /// `buffer_full` (the oldest waiting Event, while the cloud is away or
    /// slow) or `refused` (the cloud said no).
    pub reason: &'static str,
}

/// How an Event went to the cloud.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SentLabel {
    /// `insert` (a new Event) or `patch` (a count raised).
    pub operation: &'static str,
}

/// Edged's Event counters (`edgehive_edged_events_*`).
#[derive(Debug, Default)]
pub struct EventMetrics {
    recorded: Counter,
    coalesced: Counter,
    sent: Family<SentLabel, Counter>,
    dropped: Family<DropLabel, Counter>,
}

impl EventMetrics {
    /// Registers under `edged_events`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("edged_events");
        r.register("recorded", "Notes edged's pod workers recorded", self.recorded.clone());
        r.register(
            "coalesced",
            "Notes that raised the count of an Event instead of making a new one, or merged into one still waiting",
            self.coalesced.clone(),
        );
        r.register("sent", "Event messages the cloud answered, by operation", self.sent.clone());
        r.register("dropped", "Notes and Events dropped, by why", self.dropped.clone());
    }

    /// Notes recorded.
    pub fn recorded(&self) -> u64 {
        self.recorded.get()
    }

    /// Notes coalesced.
    pub fn coalesced(&self) -> u64 {
        self.coalesced.get()
    }

    /// Messages sent with `operation`.
    pub fn sent(&self, operation: &'static str) -> u64 {
        self.sent.get_or_create(&SentLabel { operation }).get()
    }

    /// Dropped for `reason`.
    pub fn dropped(&self, reason: &'static str) -> u64 {
        self.dropped.get_or_create(&DropLabel { reason }).get()
    }

    fn drop_one(&self, reason: &'static str) {
        self.dropped.get_or_create(&DropLabel { reason }).inc();
    }
}

/// A pod worker's handle. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: Option<mpsc::Sender<Note>>,
    metrics: Arc<EventMetrics>,
}

impl Recorder {
    /// A recorder that keeps nothing (tests that do not look at Events).
    pub fn discard() -> Recorder {
        Recorder { tx: None, metrics: Arc::default() }
    }

    /// A recorder and the receiving end its sender task reads.
    pub fn channel(metrics: Arc<EventMetrics>) -> (Recorder, mpsc::Receiver<Note>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Recorder { tx: Some(tx), metrics }, rx)
    }

    /// Records `note`; never waits (dropped and counted when the queue is full).
    pub fn record(&self, note: Note) {
        let Some(tx) = &self.tx else { return };
        self.metrics.recorded.inc();
        if let Err(mpsc::error::TrySendError::Full(note)) = tx.try_send(note) {
            self.metrics.drop_one("queue_full");
            tracing::debug!(module = "edged", pod = %note.pod.name, reason = note.reason, "event queue full; note dropped");
        }
    }
}

/// One Event waiting for the cloud.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// The cloud has not got it yet: sent as `insert`, else as `patch`.
    pub new: bool,
    /// The Event as it is now (its newest count).
    pub event: Value,
}

impl Outgoing {
    /// The message that carries it (KubeEdge's `CreateWithEventNamespace`
    /// and `PatchWithEventNamespace`).
    pub fn message(&self) -> Message {
        let ns = self.event["metadata"]["namespace"].as_str().unwrap_or("default");
        let name = self.event["metadata"]["name"].as_str().unwrap_or_default();
        let resource = format!("{ns}/{}/{name}", rt::EVENT);
        let (operation, content) = if self.new {
            (op::INSERT, self.event.clone())
        } else {
            let patch = json!({
                "count": self.event["count"],
                "lastTimestamp": self.event["lastTimestamp"],
                "message": self.event["message"],
            });
            (op::PATCH, json!({"event": self.event, "patchData": patch.to_string()}))
        };
        Message::new()
            .with_route(crate::MODULE, group::META, resource, operation)
            .with_content(Content::from_serialize(&content).unwrap_or_default())
    }
}

/// Events waiting for the cloud, one entry per Event (by name), oldest first.
#[derive(Debug)]
pub struct Outbox {
    capacity: usize,
    seq: u64,
    order: BTreeMap<u64, String>,
    by_name: HashMap<String, (u64, Outgoing)>,
}

/// What [`Outbox::push`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed {
    /// A new entry.
    Queued,
    /// Merged into the entry of the same Event (its newest count replaces it).
    Merged,
    /// Queued, and the oldest entry dropped to make room.
    DroppedOldest,
}

impl Outbox {
    /// Holds at most `capacity` Events.
    pub fn new(capacity: usize) -> Outbox {
        Outbox { capacity: capacity.max(1), seq: 0, order: BTreeMap::new(), by_name: HashMap::new() }
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// None waiting.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Keeps what the correlator decided (nothing for spam).
    pub fn push(&mut self, decision: Decision) -> Option<Pushed> {
        let (new, event) = match decision {
            Decision::Spam => return None,
            Decision::Create(event) => (true, event),
            Decision::Count { event, .. } => (false, event),
        };
        let name = event["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        if let Some((_, waiting)) = self.by_name.get_mut(&name) {
            // Not sent yet: one message carries the newest count.
            waiting.event = event;
            return Some(Pushed::Merged);
        }
        let mut pushed = Pushed::Queued;
        if self.by_name.len() >= self.capacity
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.by_name.remove(&oldest);
            pushed = Pushed::DroppedOldest;
        }
        self.seq += 1;
        self.order.insert(self.seq, name.clone());
        self.by_name.insert(name, (self.seq, Outgoing { new, event }));
        Some(pushed)
    }

    /// The oldest Event waiting, left in place.
    pub fn front(&self) -> Option<(u64, &Outgoing)> {
        let (_, name) = self.order.first_key_value()?;
        self.by_name.get(name).map(|(seq, o)| (*seq, o))
    }

    /// The entry `seq` was delivered as `sent`: removed, unless a newer
    /// count merged into it meanwhile (then it stays, as a patch).
    pub fn delivered(&mut self, seq: u64, sent: &Outgoing) {
        let Some(name) = self.order.get(&seq).cloned() else { return };
        let Some((_, now)) = self.by_name.get_mut(&name) else { return };
        if now.event == sent.event {
            self.order.remove(&seq);
            self.by_name.remove(&name);
        } else {
            now.new = false;
        }
    }

    /// The entry `seq` goes: refused.
    pub fn remove(&mut self, seq: u64) {
        if let Some(name) = self.order.remove(&seq) {
            self.by_name.remove(&name);
        }
    }

    /// The cloud no longer has the Event `seq` counts (it expired): sent
    /// again whole (client-go creates it on a patch's NotFound).
    pub fn recreate(&mut self, seq: u64) {
        if let Some(name) = self.order.get(&seq)
            && let Some((_, o)) = self.by_name.get_mut(name)
        {
            o.new = true;
        }
    }
}

/// The HTTP code of a cloud's refusal (`ObjectResp` or `StatusError`
/// shape, docs/protocol.md §6); `None` for a local failure (EdgeHub's
/// "not connected"), which is tried again.
fn refusal_code(content: &Value) -> Option<u64> {
    content.pointer("/Err/ErrStatus/code").or_else(|| content.pointer("/ErrStatus/code")).and_then(Value::as_u64)
}

/// Now, as kubelet writes Event timestamps.
fn now_rfc3339() -> String {
    crate::pod::now()
}

/// The sender: notes in order, through the correlator, into the outbox;
/// the outbox to the cloud through MetaManager, one Event at a time, tried
/// again with a back-off (and at once when the cloud connects) while the
/// cloud is away.
pub(crate) async fn send_all(
    ctx: Context,
    node: String,
    mut rx: mpsc::Receiver<Note>,
    metrics: Arc<EventMetrics>,
    connected: Arc<Notify>,
    cancel: CancellationToken,
) {
    let mut correlator = Correlator::default();
    let mut outbox = Outbox::new(BUFFER);
    let mut retry = Duration::ZERO;
    loop {
        // Take every note there is now, then send.
        loop {
            let note = if outbox.is_empty() || !retry.is_zero() {
                let wait = async {
                    if outbox.is_empty() {
                        std::future::pending::<()>().await;
                    }
                    tokio::time::sleep(retry).await;
                };
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = connected.notified() => { retry = Duration::ZERO; break }
                    () = wait => break,
                    n = rx.recv() => match n {
                        Some(n) => n,
                        None => return,
                    },
                }
            } else {
                match rx.try_recv() {
                    Ok(n) => n,
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => return,
                }
            };
            let decision = correlator.decide(note.to_event(&node, &now_rfc3339()), std::time::SystemTime::now());
            if matches!(decision, Decision::Count { .. }) {
                metrics.coalesced.inc();
            }
            match outbox.push(decision) {
                None => metrics.drop_one("spam"),
                Some(Pushed::Merged) => {
                    metrics.coalesced.inc();
                }
                Some(Pushed::DroppedOldest) => metrics.drop_one("buffer_full"),
                Some(Pushed::Queued) => {}
            }
        }
        let Some((seq, out)) = outbox.front().map(|(s, o)| (s, o.clone())) else { continue };
        let m = out.message();
        let operation = if out.new { "insert" } else { "patch" };
        let answer = tokio::select! {
            () = cancel.cancelled() => return,
            a = ctx.send_sync(crate::METAMANAGER, m, ANSWER_DEADLINE) => a,
        };
        match answer {
            Ok(r) if r.route.operation != op::ERROR => {
                metrics.sent.get_or_create(&SentLabel { operation }).inc();
                outbox.delivered(seq, &out);
                retry = Duration::ZERO;
            }
            Ok(r) => match refusal_code(&r.content.to_value()) {
                Some(404) if !out.new => outbox.recreate(seq),
                Some(code) => {
                    tracing::warn!(node = %node, event = ?out.event["metadata"]["name"], code, reason = ?r.content.as_text(), "the cloud refused an event");
                    metrics.drop_one("refused");
                    outbox.remove(seq);
                }
                None => {
                    tracing::debug!(node = %node, reason = ?r.content.as_text(), "event not sent; tried again later");
                    retry = (retry * 2).clamp(Duration::from_secs(1), RETRY_CAP);
                }
            },
            Err(e) => {
                tracing::debug!(node = %node, error = %e, "event not sent; tried again later");
                retry = (retry * 2).clamp(Duration::from_secs(1), RETRY_CAP);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    fn pod() -> Arc<PodRef> {
        Arc::new(PodRef { namespace: "default".into(), name: "crash".into(), uid: "u-1".into() })
    }

    fn backoff(container: &str) -> Note {
        let p = pod();
        let message = format!("Back-off restarting failed container {container} in pod {}", p.formatted());
        Note::warning(&p, container, "BackOff", message)
    }

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000 + secs)
    }

    #[test]
    fn a_note_becomes_the_event_kubelet_records() {
        let p = pod();
        let ev = Note::normal(&p, "app", "Started", "Started container app".into()).to_event("edge-1", "T");
        assert_eq!(ev["involvedObject"]["kind"], "Pod");
        assert_eq!(ev["involvedObject"]["fieldPath"], "spec.containers{app}");
        assert_eq!(ev["involvedObject"]["uid"], "u-1");
        assert_eq!(ev["source"], json!({"component": "kubelet", "host": "edge-1"}));
        assert_eq!(
            (ev["reportingComponent"].as_str(), ev["reportingInstance"].as_str()),
            (Some("kubelet"), Some("edge-1"))
        );
        assert_eq!(ev["type"], "Normal");
        assert_eq!(backoff("app").message, "Back-off restarting failed container app in pod crash_default(u-1)");
    }

    #[test]
    fn a_crash_loop_of_100_backoffs_is_one_event_with_a_count_within_the_budget() {
        let mut c = Correlator::default();
        let mut outbox = Outbox::new(BUFFER);
        let mut names = std::collections::HashSet::new();
        let (mut counted, mut spam) = (0, 0);
        for i in 0..100 {
            let d = c.decide(backoff("app").to_event("edge-1", "T"), t(i * 10));
            match &d {
                Decision::Create(e) => {
                    names.insert(e["metadata"]["name"].clone());
                }
                Decision::Count { name, count, .. } => {
                    names.insert(json!(name));
                    counted = *count;
                }
                Decision::Spam => spam += 1,
            }
            outbox.push(d);
        }
        // One Event; 25 at once, then one per 5 minutes of the 1,000 s.
        assert_eq!(names.len(), 1);
        assert_eq!(counted, 28);
        assert_eq!(spam, 72);
        // Never sent meanwhile (the cloud away): one message, the newest count.
        assert_eq!(outbox.len(), 1);
        let (_, out) = outbox.front().unwrap();
        assert!(out.new);
        assert_eq!(out.event["count"], 28);
        let m = out.message();
        assert_eq!((m.route.operation.as_str(), m.route.group.as_str()), ("insert", "meta"));
        assert!(m.route.resource.starts_with("default/event/crash."), "{}", m.route.resource);
    }

    #[test]
    fn different_containers_are_different_events() {
        let mut c = Correlator::default();
        let a = c.decide(backoff("app").to_event("edge-1", "T"), t(0));
        let b = c.decide(backoff("side").to_event("edge-1", "T"), t(0));
        let (Decision::Create(a), Decision::Create(b)) = (a, b) else { panic!() };
        assert_ne!(a["metadata"]["name"], b["metadata"]["name"]);
        assert_eq!(b["involvedObject"]["fieldPath"], "spec.containers{side}");
    }

    #[test]
    fn a_count_after_the_event_was_delivered_is_a_patch_and_merges_while_waiting() {
        let mut c = Correlator::default();
        let mut outbox = Outbox::new(BUFFER);
        outbox.push(c.decide(backoff("app").to_event("edge-1", "T0"), t(0)));
        let (seq, sent) = outbox.front().map(|(s, o)| (s, o.clone())).unwrap();
        outbox.delivered(seq, &sent);
        assert!(outbox.is_empty());
        assert_eq!(outbox.push(c.decide(backoff("app").to_event("edge-1", "T1"), t(10))), Some(Pushed::Queued));
        assert_eq!(outbox.push(c.decide(backoff("app").to_event("edge-1", "T2"), t(20))), Some(Pushed::Merged));
        let (seq, out) = outbox.front().map(|(s, o)| (s, o.clone())).unwrap();
        assert!(!out.new);
        let m = out.message();
        assert_eq!(m.route.operation.as_str(), "patch");
        let content = m.content.to_value();
        assert_eq!(content["event"]["count"], 3);
        let patch: Value = serde_json::from_str(content["patchData"].as_str().unwrap()).unwrap();
        assert_eq!(patch["count"], 3);
        assert_eq!(patch["lastTimestamp"], "T2");
        assert_eq!(content["event"]["firstTimestamp"], "T0");
        // The cloud lost it (expired): the same entry goes again whole.
        outbox.recreate(seq);
        assert_eq!(outbox.front().unwrap().1.message().route.operation.as_str(), "insert");
        // A count merged while one was on the way keeps the entry.
        let in_flight = outbox.front().unwrap().1.clone();
        outbox.push(c.decide(backoff("app").to_event("edge-1", "T3"), t(30)));
        outbox.delivered(seq, &in_flight);
        assert_eq!(outbox.len(), 1);
        assert!(!outbox.front().unwrap().1.new);
    }

    #[test]
    fn the_outbox_is_bounded_and_drops_the_oldest() {
        let mut outbox = Outbox::new(2);
        let mut c = Correlator::default();
        let ev = |name: &str| {
            let p = Arc::new(PodRef { namespace: "default".into(), name: name.into(), uid: name.into() });
            Note::normal(&p, "app", "Started", "Started container app".into()).to_event("edge-1", "T")
        };
        assert_eq!(outbox.push(c.decide(ev("a"), t(0))), Some(Pushed::Queued));
        assert_eq!(outbox.push(c.decide(ev("b"), t(0))), Some(Pushed::Queued));
        assert_eq!(outbox.push(c.decide(ev("c"), t(0))), Some(Pushed::DroppedOldest));
        assert_eq!(outbox.len(), 2);
        assert_eq!(outbox.front().unwrap().1.event["involvedObject"]["name"], "b");
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let metrics = Arc::new(EventMetrics::default());
        let (r, _rx) = Recorder::channel(Arc::clone(&metrics));
        for _ in 0..QUEUE + 5 {
            r.record(backoff("app"));
        }
        assert_eq!(metrics.recorded(), (QUEUE + 5) as u64);
        assert_eq!(metrics.dropped("queue_full"), 5);
    }

    #[test]
    fn refusals_are_told_from_local_failures() {
        assert_eq!(refusal_code(&json!({"Object": null, "Err": {"ErrStatus": {"code": 403}}})), Some(403));
        assert_eq!(refusal_code(&json!({"ErrStatus": {"code": 404}})), Some(404));
        assert_eq!(refusal_code(&json!("not connected")), None);
    }
}
