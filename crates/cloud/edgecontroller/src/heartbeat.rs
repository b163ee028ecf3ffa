//! Heartbeats the cloud writes on a live session's behalf.
//!
//! An edge whose link carries its liveness (edgehive's edges keep alive
//! with pings: `session-liveness`) sends its status on connect and every
//! 30 min, and renews no Lease: every renewal would be a write upstream and
//! a store write for what the session already proves. Kubernetes' readers
//! still expect both: `kubectl describe node` shows the node's Lease in
//! `kube-node-lease` and the conditions' `lastHeartbeatTime`. So while a
//! node's CloudHub session is alive, the cloud keeps them current itself,
//! at a low rate:
//!
//! - the Lease (holder: the node, owned by its Node, as kubelet creates it)
//!   is renewed when its last renewal is older than [`HeartbeatConfig::lease_renew`]
//!   (30 s; kubelet renews every 10 s), with `leaseDurationSeconds` of
//!   [`HeartbeatConfig::lease_duration`] (40 s, kubelet's), so a Lease is
//!   held exactly while a session is, give or take one period;
//! - the conditions' `lastHeartbeatTime` moves when it is older than
//!   [`HeartbeatConfig::status_report`] (5 min: kubelet's
//!   `nodeStatusReportFrequency`, how often kubelet rewrites an unchanged
//!   status), so it always names a moment the node was known alive.
//!
//! An edge that renews its own Lease (KubeEdge's EdgeCore, an edgehive edge
//! without session liveness) keeps it younger than 30 s, so the cloud never
//! writes it; the same for a status the edge reports itself. When the
//! session ends the cloud stops, and the node lifecycle takes its course.
//!
//! The writes run in their own task ([`Writer`]), at most
//! [`CONCURRENT_WRITES`] at once from a bounded queue, so that the
//! controller's loop never waits on the disk for them; what the queue
//! cannot take now is due again at the next check.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use edgehive_registry::admit;
use edgehive_store::resources::{LEASES, NODES};
use edgehive_store::{Store, StoreError};
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::index::Liveness;
use crate::lifecycle::elapsed;
use crate::metrics::Metrics;

/// Where nodes' Leases live.
pub const NODE_LEASES: &str = "kube-node-lease";

/// Heartbeat writes in flight at once.
pub const CONCURRENT_WRITES: usize = 64;

/// Heartbeat writes waiting for the writer. The controller offers what is
/// due at each check (every 5 s) until the queue is full, so the queue
/// bounds the rate too: 100,000 sessions need 3,333 Lease renewals a
/// second (one per node per 30 s), and a queue of 4,096 let through 819,
/// each Lease renewed every two minutes, expired most of the time.
pub const QUEUE: usize = 32_768;

/// How often the cloud renews on a live session's behalf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatConfig {
    /// Renew a node's Lease when its last renewal is older than this.
    pub lease_renew: Duration,
    /// The `leaseDurationSeconds` of a Lease the cloud renews.
    pub lease_duration: Duration,
    /// Move the conditions' `lastHeartbeatTime` when older than this.
    pub status_report: Duration,
    /// Most Lease renewals written a second, all sessions together (see
    /// [`HeartbeatConfig::for_sessions`]).
    pub lease_writes_per_second: u32,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        HeartbeatConfig {
            lease_renew: Duration::from_secs(30),
            lease_duration: Duration::from_secs(40),
            status_report: Duration::from_secs(300),
            lease_writes_per_second: 1000,
        }
    }
}

impl HeartbeatConfig {
    /// The renewal period and Lease duration for `sessions` live sessions.
    /// While renewing each of them every `lease_renew` stays within
    /// `lease_writes_per_second`, they are the configured ones; past that
    /// (30,000 sessions at the defaults) the period stretches to what the
    /// budget allows and the Lease's duration with it, in proportion, so a
    /// Lease never looks expired while its session lives. 100,000 sessions
    /// renewed every 30 s would be 3,333 store writes a second: on two
    /// cores shared with a simulator, enough to starve the QUIC endpoint,
    /// drop keep-alives and end a third of the sessions.
    pub fn for_sessions(&self, sessions: usize) -> HeartbeatConfig {
        let needed = Duration::from_secs_f64(sessions as f64 / f64::from(self.lease_writes_per_second.max(1)));
        if needed <= self.lease_renew || self.lease_renew.is_zero() {
            return *self;
        }
        let stretch = needed.as_secs_f64() / self.lease_renew.as_secs_f64();
        HeartbeatConfig {
            lease_renew: needed,
            lease_duration: Duration::from_secs_f64((self.lease_duration.as_secs_f64() * stretch).ceil()),
            ..*self
        }
    }
}

/// A heartbeat to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Beat {
    /// Renew (or create) the node's Lease.
    Lease,
    /// Move the node's conditions' `lastHeartbeatTime`.
    Status,
}

/// What a node with a live session is due now, given what the informers
/// saw (`live`) and when the cloud last asked for each beat (`asked`: a
/// write in flight is not asked for twice).
pub fn due(
    live: &Liveness,
    asked: impl Fn(Beat) -> Option<OffsetDateTime>,
    now: OffsetDateTime,
    cfg: &HeartbeatConfig,
) -> Vec<Beat> {
    let stale = |seen: Option<OffsetDateTime>, beat: Beat, every: Duration| {
        let last = seen.max(asked(beat));
        last.is_none_or(|t| elapsed(t, now) >= every)
    };
    // A node that never reported its status gets no heartbeat from the
    // cloud (a KubeEdge EdgeCore with edged off: the lifecycle marks it
    // NodeStatusNeverUpdated, as Kubernetes does, and a Lease would hide
    // that); one whose Ready is Unknown waits for its own report, which the
    // session's start asks for.
    if live.status_beat.is_none() || live.unknown {
        return Vec::new();
    }
    let mut out = Vec::new();
    if stale(live.lease_renew, Beat::Lease, cfg.lease_renew) {
        out.push(Beat::Lease);
    }
    if stale(live.status_beat, Beat::Status, cfg.status_report) {
        out.push(Beat::Status);
    }
    out
}

/// A node's Lease as kubelet creates it, renewed `now` (a `MicroTime`).
pub fn new_lease(node: &str, node_uid: &str, now: OffsetDateTime, cfg: &HeartbeatConfig) -> Value {
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": NODE_LEASES},
        "spec": {},
    });
    if !node_uid.is_empty() {
        lease["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}]);
    }
    renew(&mut lease, node, now, cfg);
    lease
}

/// Renews `lease` for `node` at `now`.
pub fn renew(lease: &mut Value, node: &str, now: OffsetDateTime, cfg: &HeartbeatConfig) {
    if !lease["spec"].is_object() {
        lease["spec"] = json!({});
    }
    let spec = &mut lease["spec"];
    spec["holderIdentity"] = json!(node);
    spec["leaseDurationSeconds"] = json!(cfg.lease_duration.as_secs());
    spec["renewTime"] = json!(micro_time(now));
}

/// The node with every known condition's `lastHeartbeatTime` at `now`, as
/// kubelet's periodic report moves them (`None` when it has no conditions
/// or Ready is Unknown: the cloud does not vouch for a node the lifecycle
/// gave up on; the node's own report revives it).
pub fn beat_conditions(node: &Value, now: OffsetDateTime) -> Option<Value> {
    let conds = node.pointer("/status/conditions")?.as_array()?;
    let ready = conds.iter().find(|c| c["type"] == "Ready")?;
    if ready["status"] == "Unknown" {
        return None;
    }
    let stamp = edgehive_store::rfc3339(now);
    let mut v = node.clone();
    for c in v.pointer_mut("/status/conditions")?.as_array_mut()? {
        if c["status"] != "Unknown" {
            c["lastHeartbeatTime"] = json!(stamp);
        }
    }
    Some(v)
}

/// `now` as a Kubernetes `MicroTime` (RFC 3339, microseconds, UTC).
/// A meta/v1 `MicroTime` as Kubernetes writes and parses it: always six
/// fractional digits (`2006-01-02T15:04:05.000000Z07:00`). RFC 3339
/// formatting drops trailing zeros, which kubectl (`describe node`) and
/// the Go decoder refuse.
fn micro_time(now: OffsetDateTime) -> String {
    edgehive_model::timestamp::micro_time(now)
}

/// The heartbeat writer: takes `(node, beat)` from a bounded queue and
/// writes each, [`CONCURRENT_WRITES`] at a time.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    tx: mpsc::Sender<(String, Beat, Duration)>,
}

impl Writer {
    /// Starts the writer task; it ends when `stop` is cancelled.
    pub(crate) fn start(
        store: Store,
        cfg: HeartbeatConfig,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) -> (Writer, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(write_loop(store, cfg, metrics, rx, stop));
        (Writer { tx }, task)
    }

    /// Queues a beat, a Lease renewal for `lease_duration`; false when the
    /// queue is full (due again later).
    pub(crate) fn offer(&self, node: &str, beat: Beat, lease_duration: Duration) -> bool {
        self.tx.try_send((node.to_owned(), beat, lease_duration)).is_ok()
    }
}

async fn write_loop(
    store: Store,
    cfg: HeartbeatConfig,
    metrics: Arc<Metrics>,
    mut rx: mpsc::Receiver<(String, Beat, Duration)>,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(CONCURRENT_WRITES));
    let mut writes = JoinSet::new();
    loop {
        let (node, beat, lease_duration) = tokio::select! {
            () = stop.cancelled() => break,
            Some(_) = writes.join_next(), if !writes.is_empty() => continue,
            item = rx.recv() => match item {
                Some(item) => item,
                None => break,
            },
        };
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else { break };
        let (store, metrics) = (store.clone(), Arc::clone(&metrics));
        writes.spawn(async move {
            let now = OffsetDateTime::now_utc();
            let result = match beat {
                Beat::Lease => renew_lease(&store, &node, now, &HeartbeatConfig { lease_duration, ..cfg }).await,
                Beat::Status => beat_status(&store, &node, now).await,
            };
            match result {
                Ok(()) => {
                    metrics.heartbeats.get_or_create(&BeatLabel::of(beat)).inc();
                }
                Err(e) => tracing::warn!(%node, ?beat, error = %e, "heartbeat on the session's behalf not written"),
            };
            drop(permit);
        });
    }
    // Writes in flight are short and bounded by the store's own deadlines.
    while writes.join_next().await.is_some() {}
}

/// Renews the node's Lease, or creates it (owned by the Node) when missing.
async fn renew_lease(store: &Store, node: &str, now: OffsetDateTime, cfg: &HeartbeatConfig) -> Result<(), StoreError> {
    let updated = store
        .update_with(&LEASES, NODE_LEASES, node, |cur| {
            let mut v = cur.value()?.clone();
            renew(&mut v, node, now, cfg);
            Ok::<_, StoreError>(Some(v))
        })
        .await;
    match updated {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound { .. }) => {
            let uid = match store.get(&NODES, "", node).await {
                Ok(n) => n.uid().unwrap_or_default().to_owned(),
                // The node went: so does its heartbeat.
                Err(StoreError::NotFound { .. }) => return Ok(()),
                Err(e) => return Err(e),
            };
            let mut lease = new_lease(node, &uid, now, cfg);
            if let Err(e) = admit::create(&LEASES, &mut lease) {
                return Err(StoreError::BadRequest(e.message));
            }
            match store.create(&LEASES, lease).await {
                // Created meanwhile (the edge's own): that one is current.
                Ok(_) | Err(StoreError::AlreadyExists { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Moves the node's conditions' `lastHeartbeatTime`.
async fn beat_status(store: &Store, node: &str, now: OffsetDateTime) -> Result<(), StoreError> {
    match store.update_with(&NODES, "", node, |cur| Ok::<_, StoreError>(beat_conditions(cur.value()?, now))).await {
        Ok(_) | Err(StoreError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// When the cloud last asked for each beat of each node.
#[derive(Debug, Default)]
pub(crate) struct Asked(HashMap<(String, Beat), OffsetDateTime>);

impl Asked {
    pub(crate) fn at(&self, node: &str, beat: Beat) -> Option<OffsetDateTime> {
        self.0.get(&(node.to_owned(), beat)).copied()
    }

    pub(crate) fn set(&mut self, node: &str, beat: Beat, now: OffsetDateTime) {
        self.0.insert((node.to_owned(), beat), now);
    }

    /// Forgets nodes without a live session.
    pub(crate) fn retain(&mut self, live: impl Fn(&str) -> bool) {
        self.0.retain(|(node, _), _| live(node));
    }
}

/// The label of the heartbeats counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct BeatLabel {
    /// `lease` or `status`.
    pub(crate) beat: &'static str,
}

impl BeatLabel {
    fn of(beat: Beat) -> BeatLabel {
        BeatLabel {
            beat: match beat {
                Beat::Lease => "lease",
                Beat::Status => "status",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> OffsetDateTime {
        edgehive_store::parse_rfc3339(t).unwrap()
    }

    fn live(lease: Option<&str>, status: Option<&str>) -> Liveness {
        Liveness { lease_renew: lease.map(at), status_beat: status.map(at), ..Liveness::default() }
    }

    #[test]
    fn beats_fall_due_at_their_own_periods() {
        let cfg = HeartbeatConfig::default();
        let never = |_| None;
        let now = at("2026-01-01T00:10:00Z");
        // No Lease yet: one is due at once; a fresh status is not.
        assert_eq!(due(&live(None, Some("2026-01-01T00:09:00Z")), never, now, &cfg), [Beat::Lease]);
        // An edge renewing its own Lease every 10 s is never renewed for.
        assert!(due(&live(Some("2026-01-01T00:09:50Z"), Some("2026-01-01T00:09:00Z")), never, now, &cfg).is_empty());
        // 30 s since the last renewal, 5 min since the last status beat.
        assert_eq!(
            due(&live(Some("2026-01-01T00:09:30Z"), Some("2026-01-01T00:05:00Z")), never, now, &cfg),
            [Beat::Lease, Beat::Status]
        );
        // Asked for a moment ago (the write is in flight): not asked again.
        let asked = |_| Some(at("2026-01-01T00:09:59Z"));
        assert!(due(&live(None, Some("2026-01-01T00:00:00Z")), asked, now, &cfg).is_empty());
        // No status ever, or Ready Unknown: nothing from the cloud.
        assert!(due(&live(None, None), never, now, &cfg).is_empty());
        assert!(due(&live(Some("2026-01-01T00:00:00Z"), None), never, now, &cfg).is_empty());
        let unknown = Liveness { unknown: true, ..live(Some("2026-01-01T00:09:59Z"), Some("2026-01-01T00:00:00Z")) };
        assert!(due(&unknown, never, now, &cfg).is_empty());
    }

    #[test]
    fn past_the_write_budget_the_renewal_period_and_the_lease_stretch_together() {
        let cfg = HeartbeatConfig::default();
        // 30,000 sessions every 30 s are 1,000 writes a second: as configured.
        assert_eq!(cfg.for_sessions(30_000), cfg);
        assert_eq!(cfg.for_sessions(0), cfg);
        // 100,000: every 100 s, each Lease held for 134 s (40 s × 100/30).
        let big = cfg.for_sessions(100_000);
        assert_eq!(big.lease_renew, Duration::from_secs(100));
        assert_eq!(big.lease_duration, Duration::from_secs(134));
        assert!(big.lease_duration > big.lease_renew + Duration::from_secs(30));
        assert_eq!(big.status_report, cfg.status_report);
        let tight = HeartbeatConfig { lease_writes_per_second: 10, ..cfg };
        assert_eq!(tight.for_sessions(3_000).lease_renew, Duration::from_secs(300));
    }

    #[test]
    fn a_new_lease_is_kubelets_owned_by_its_node() {
        let cfg = HeartbeatConfig::default();
        let mut lease = new_lease("edge-1", "uid-1", at("2026-01-01T00:00:00.123456789Z"), &cfg);
        assert_eq!(lease["metadata"]["namespace"], NODE_LEASES);
        assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(lease["spec"]["holderIdentity"], "edge-1");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(lease["spec"]["renewTime"], "2026-01-01T00:00:00.123456Z");
        assert!(admit::create(&LEASES, &mut lease).is_ok(), "valid as the API admits it");
        // A renewal moves renewTime and takes the holder over.
        lease["spec"]["holderIdentity"] = json!("someone");
        renew(&mut lease, "edge-1", at("2026-01-01T00:00:30Z"), &cfg);
        assert_eq!(lease["spec"]["renewTime"], "2026-01-01T00:00:30.000000Z", "six digits, always");
        renew(&mut lease, "edge-1", at("2026-01-01T00:00:31.117760Z"), &cfg);
        assert_eq!(lease["spec"]["renewTime"], "2026-01-01T00:00:31.117760Z");
        assert_eq!(lease["spec"]["holderIdentity"], "edge-1");
    }

    #[test]
    fn a_status_beat_moves_every_known_condition_and_nothing_else() {
        let node = json!({"metadata": {"name": "e1"}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2026-01-01T00:00:00Z"},
            {"type": "NetworkUnavailable", "status": "Unknown"}]}});
        let v = beat_conditions(&node, at("2026-01-01T00:05:00Z")).unwrap();
        let conds = v["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds[0]["lastHeartbeatTime"], "2026-01-01T00:05:00Z");
        assert_eq!(conds[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(conds[1]["lastHeartbeatTime"], "2026-01-01T00:05:00Z");
        assert_eq!(conds[2].get("lastHeartbeatTime"), None);
        let mut unknown = node.clone();
        unknown["status"]["conditions"][0]["status"] = json!("Unknown");
        assert_eq!(beat_conditions(&unknown, at("2026-01-01T00:05:00Z")), None);
        assert_eq!(beat_conditions(&json!({"status": {}}), at("2026-01-01T00:05:00Z")), None);
    }
}
