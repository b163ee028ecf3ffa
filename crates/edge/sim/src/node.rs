//! One simulated edge node: what MetaManager, the node agent and edged do
//! for an edge's link, without a disk or a container runtime.
//!
//! It is the [`LocalSide`] of a real [`EdgeLink`](edgehive_edgehub::EdgeLink):
//! the link dials, keeps alive, rate-limits and reconnects exactly as
//! `edgehive edge` does, and hands this node what the cloud sends. The node
//! "persists" an object by recording its key, uid and version in a small
//! map (no copy of the object), ACKs it as MetaManager does after a
//! commit, registers its Node and reports its status as the node agent
//! does, sends its inventory on every connection that agreed one, and
//! reports each pod it is given as edged would: Running after a start
//! delay (or its containers exiting and restarting), and the confirmation
//! of a graceful delete. Every message it sends is built by the edge's own
//! code (edged's status builders, the model's inventory), so the cloud
//! sees what a fleet of real edges would send it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use edgehive_edged::NodeAgentConfig;
use edgehive_edged::pod::{Simulated, simulated_status};
use edgehive_edgehub::LocalSide;
use edgehive_model::{Content, Message, ResourcePath, Text, group, op, resource_type as rt, source, well_known};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::fleet::FleetShared;

/// How a simulated node's pods behave.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// From a pod's arrival to its first status report (its containers
    /// running, or exited).
    pub pod_start: Duration,
    /// Percent (0–100) of pods whose containers exit with code 1 instead
    /// of running: reported exited, then restarted every
    /// `restart_interval` (unless `restartPolicy: Never`, which fails the
    /// pod for good).
    pub fail_percent: u8,
    /// How often a failing pod's containers are restarted (and reported).
    pub restart_interval: Duration,
    /// Most restarts reported per failing pod.
    pub max_restarts: u32,
    /// A registration the cloud refused or did not answer is tried again
    /// after this.
    pub register_retry: Duration,
    /// The node's Lease renewal period when the cloud did not take the
    /// link's pings as its heartbeat (kubelet: 10 s).
    pub lease_interval: Duration,
    /// How often the node reports its status while connected (kubelet's
    /// nodeStatusReportFrequency: 5 min), as edged does.
    pub status_interval: Duration,
    /// The same when the cloud takes the link's pings as the node's
    /// heartbeat (edged's `liveness_status_interval`: 30 min).
    pub liveness_status_interval: Duration,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            pod_start: Duration::from_secs(1),
            fail_percent: 0,
            restart_interval: Duration::from_secs(10),
            max_restarts: 5,
            register_retry: Duration::from_secs(5),
            lease_interval: Duration::from_secs(10),
            status_interval: Duration::from_secs(300),
            liveness_status_interval: Duration::from_secs(1800),
        }
    }
}

/// What the node holds of one object the cloud sent: enough to ACK,
/// to tell a resend of the same version, and to list it in an inventory.
#[derive(Debug)]
struct Held {
    uid: Box<str>,
    rv: u64,
}

/// A pod the node "runs".
#[derive(Debug)]
struct SimPod {
    key: Box<str>,
    uid: Box<str>,
    /// The pod, kept until its first report (the status is built from its
    /// containers), then only for a failing pod's restarts.
    pod: Option<Box<Value>>,
    failing: bool,
    restarts: u32,
    started: Option<String>,
    /// When its next report is due.
    due: Option<Instant>,
}

/// The link's state as the node last heard it.
#[derive(Debug, Default, Clone, Copy)]
struct Link {
    connected: bool,
    session_liveness: bool,
}

/// One simulated edge node.
pub(crate) struct SimNode {
    name: Text,
    fleet: Arc<FleetShared>,
    up: VecDeque<Message>,
    held: HashMap<Box<str>, Held>,
    pods: Vec<SimPod>,
    link: Link,
    registered: bool,
    /// `registered`, for the fleet to read.
    registered_flag: Arc<AtomicBool>,
    /// The registration request waiting for its answer.
    registering: Option<Text>,
    register_at: Option<Instant>,
    lease_at: Option<Instant>,
    /// When its next status report is due.
    status_at: Option<Instant>,
    /// This node has been connected since the fleet last counted it.
    counted_up: bool,
}

/// Namespaced kinds an inventory lists (MetaManager's).
const INVENTORIED: [&str; 3] = [rt::POD, rt::CONFIGMAP, rt::SECRET];

impl SimNode {
    pub(crate) fn new(name: Text, fleet: Arc<FleetShared>, registered_flag: Arc<AtomicBool>) -> SimNode {
        SimNode {
            registered_flag,
            name,
            fleet,
            up: VecDeque::new(),
            held: HashMap::new(),
            pods: Vec::new(),
            link: Link::default(),
            registered: false,
            registering: None,
            register_at: None,
            lease_at: None,
            status_at: None,
            counted_up: false,
        }
    }

    fn agent(&self) -> NodeAgentConfig {
        NodeAgentConfig::new(self.name.to_string(), self.fleet.host.clone())
    }

    /// Everything due by `now` goes into the upstream queue.
    fn fire(&mut self, now: Instant) {
        if self.link.connected
            && !self.registered
            && self.registering.is_none()
            && self.register_at.is_some_and(|t| t <= now)
        {
            self.register_at = None;
            let content = Content::from_serialize(&self.agent().node_object()).unwrap_or_default();
            let mut m = meta(op::INSERT, format!("default/node/{}", self.name), content);
            m.header.sync = true;
            self.registering = Some(m.header.msg_id.clone());
            self.up.push_back(m);
        }
        if self.link.connected
            && self.registered
            && !self.link.session_liveness
            && self.lease_at.is_some_and(|t| t <= now)
        {
            self.lease_at = Some(now + self.fleet.behaviour.lease_interval);
            let content = Content::from_serialize(&self.agent().lease_object()).unwrap_or_default();
            self.up.push_back(meta(op::UPDATE, format!("kube-node-lease/lease/{}", self.name), content));
        }
        if self.link.connected && self.registered && self.status_at.is_some_and(|t| t <= now) {
            self.report_status(now);
        }
        let behaviour = &self.fleet.behaviour;
        for i in 0..self.pods.len() {
            if self.pods[i].due.is_none_or(|t| t > now) {
                continue;
            }
            let p = &mut self.pods[i];
            p.due = None;
            let first = p.started.is_none();
            let started =
                p.started.get_or_insert_with(|| edgehive_model::timestamp::rfc3339(time::OffsetDateTime::now_utc()));
            let Some(pod) = p.pod.as_deref() else { continue };
            let state = if p.failing { Simulated::Exited(1) } else { Simulated::Running };
            let status = simulated_status(pod, state, p.restarts, &self.fleet.host_ip, started);
            let never = pod["spec"]["restartPolicy"].as_str() == Some("Never");
            let (ns, name) = pod_name(pod);
            let content = Content::from_serialize(&json!({"UID": &*p.uid, "Status": status})).unwrap_or_default();
            let report = meta(op::UPDATE, format!("{ns}/{}/{name}", rt::PODSTATUS), content);
            if p.failing && !never && p.restarts < behaviour.max_restarts {
                p.restarts += 1;
                p.due = Some(now + behaviour.restart_interval);
            } else {
                p.pod = None;
            }
            if first {
                self.fleet.stats.pods_started.fetch_add(1, Relaxed);
            }
            self.fleet.stats.pod_reports.fetch_add(1, Relaxed);
            self.up.push_back(report);
        }
    }

    fn next_due(&self) -> Option<Instant> {
        let mut due = self.pods.iter().filter_map(|p| p.due).min();
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                due = Some(due.map_or(t, |d| d.min(t)));
            }
        };
        if self.link.connected {
            if !self.registered && self.registering.is_none() {
                consider(self.register_at);
            }
            if self.registered && !self.link.session_liveness {
                consider(self.lease_at);
            }
            if self.registered {
                consider(self.status_at);
            }
        }
        due
    }

    /// A change from the cloud, "committed" at once: recorded and ACKed as
    /// MetaManager does, and a pod handed to the simulated edged.
    fn commit(&mut self, m: Message) {
        let fleet = Arc::clone(&self.fleet);
        let stats = &fleet.stats;
        let operation = m.route.operation.as_str();
        if !matches!(operation, op::INSERT | op::UPDATE | op::PATCH | op::DELETE) {
            return;
        }
        let Ok(path) = ResourcePath::parse_wire(&m.route.resource) else {
            self.up.push_back(m.error_response("bad resource"));
            return;
        };
        stats.objects_received.fetch_add(1, Relaxed);
        let key: Box<str> = m.route.resource.as_str().into();
        let rv = m.header.resource_version.parse::<u64>().unwrap_or(0);
        let value = m.content.to_value();
        let uid = value.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_owned();
        let uid = uid.as_str();
        if operation == op::DELETE {
            // A delete naming a uid removes only that object.
            if self.held.get(&key).is_some_and(|h| uid.is_empty() || &*h.uid == uid) {
                self.held.remove(&key);
                self.pods.retain(|p| p.key != key);
            }
        } else {
            match self.held.get_mut(&key) {
                Some(h) if &*h.uid == uid && h.rv >= rv => {
                    // Held already at this version or newer: nothing was
                    // needed (a reconnect should send none of these).
                    if h.rv == rv {
                        stats.unchanged_resent.fetch_add(1, Relaxed);
                    }
                }
                Some(h) => {
                    h.uid = uid.into();
                    h.rv = rv;
                }
                None => {
                    self.held.insert(key.clone(), Held { uid: uid.into(), rv });
                }
            }
            if let Some(r) = &self.fleet.receipts {
                r.record(&path, rv);
            }
            if path.resource_type == rt::POD {
                self.pod(key, uid, value);
            }
        }
        stats.acks.fetch_add(1, Relaxed);
        self.up.push_back(m.response(Content::string(well_known::ACK_OK)));
    }

    /// A pod arrived or changed: a new one starts; one being deleted
    /// gracefully is stopped and the delete confirmed (edged's
    /// `confirm_delete`).
    fn pod(&mut self, key: Box<str>, uid: &str, pod: Value) {
        if pod.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
            self.pods.retain(|p| p.key != key);
            let (ns, name) = pod_name(&pod);
            let content = Content::from_serialize(&json!({"metadata": pod["metadata"]})).unwrap_or_default();
            let m = meta(op::DELETE, format!("{ns}/{}/{name}", rt::POD), content);
            self.fleet.stats.deletes_confirmed.fetch_add(1, Relaxed);
            self.up.push_back(m);
            return;
        }
        if self.pods.iter().any(|p| p.key == key && &*p.uid == uid) {
            return;
        }
        self.pods.retain(|p| p.key != key);
        let behaviour = &self.fleet.behaviour;
        let failing = behaviour.fail_percent > 0 && fastrand::u8(0..100) < behaviour.fail_percent;
        self.pods.push(SimPod {
            key,
            uid: uid.into(),
            pod: Some(Box::new(pod)),
            failing,
            restarts: 0,
            started: None,
            due: Some(Instant::now() + behaviour.pod_start),
        });
    }

    fn inventory(&self) -> Message {
        let items: Vec<edgehive_model::inventory::Item> = self
            .held
            .iter()
            .filter(|(k, _)| ResourcePath::parse_wire(k).is_ok_and(|p| INVENTORIED.contains(&p.resource_type.as_str())))
            .map(|(k, h)| edgehive_model::inventory::Item {
                key: k.to_string(),
                uid: h.uid.to_string(),
                resource_version: h.rv.to_string(),
            })
            .collect();
        edgehive_model::inventory::message(&self.name, &items)
    }

    /// Queues the node's status report; the next is due a status interval on.
    fn report_status(&mut self, now: Instant) {
        let stamp = edgehive_model::timestamp::rfc3339(time::OffsetDateTime::now_utc());
        let patch = json!({"status": self.agent().status(&stamp)}).to_string();
        let m = meta(op::PATCH, format!("default/{}/{}", rt::NODEPATCH, self.name), Content::string(&patch));
        self.up.push_back(m);
        let behaviour = &self.fleet.behaviour;
        let every =
            if self.link.session_liveness { behaviour.liveness_status_interval } else { behaviour.status_interval };
        self.status_at = Some(now + every);
        self.fleet.stats.status_reports.fetch_add(1, Relaxed);
    }
}

/// A message from the simulated edged to the cloud (through MetaManager,
/// which passes it on unchanged).
fn meta(operation: &'static str, resource: String, content: Content) -> Message {
    Message::new().with_route(source::EDGED, group::META, resource, operation).with_content(content)
}

fn pod_name(pod: &Value) -> (&str, &str) {
    (pod["metadata"]["namespace"].as_str().unwrap_or("default"), pod["metadata"]["name"].as_str().unwrap_or_default())
}

impl LocalSide for SimNode {
    async fn next_upstream(&mut self) -> Option<Message> {
        loop {
            if let Some(m) = self.up.pop_front() {
                return Some(m);
            }
            self.fire(Instant::now());
            if !self.up.is_empty() {
                continue;
            }
            match self.next_due() {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending::<()>().await,
            }
        }
    }

    async fn deliver(&mut self, target: &'static str, m: Message) -> bool {
        if target == edgehive_edgehub::METAMANAGER {
            self.commit(m);
        }
        // Devices (`twin`) and MQTT (`user`) are not simulated: taken and
        // dropped, as an edge without DeviceTwin or EventBus would.
        true
    }

    fn answer(&mut self, m: Message) -> Result<(), Message> {
        if self.registering.as_ref().is_some_and(|id| m.parent_id() == Some(id)) {
            self.registering = None;
            if m.route.operation == op::ERROR {
                tracing::debug!(node = %self.name, reason = %m.content.as_json(), "node registration refused; will retry");
                self.register_at = Some(Instant::now() + self.fleet.behaviour.register_retry);
            } else {
                self.registered = true;
                self.registered_flag.store(true, Relaxed);
                self.fleet.stats.registered.fetch_add(1, Relaxed);
                self.report_status(Instant::now());
                self.lease_at = Some(Instant::now());
            }
            return Ok(());
        }
        Err(m)
    }

    async fn link_changed(&mut self, notice: Message) {
        let up = notice.content.as_text().as_deref() == Some(well_known::CLOUD_CONNECTED);
        let agreed = &notice.header.message_type;
        self.link = Link {
            connected: up,
            session_liveness: up && well_known::connection_has(agreed, well_known::SESSION_LIVENESS),
        };
        let stats = &self.fleet.stats;
        if up {
            stats.connects.fetch_add(1, Relaxed);
            if !self.counted_up {
                self.counted_up = true;
                stats.connected.fetch_add(1, Relaxed);
            }
            if well_known::connection_has(agreed, well_known::INVENTORY_AGREED) {
                self.up.push_back(self.inventory());
            }
            if self.registered {
                // Reported at once: the cloud may have marked the node NotReady.
                self.report_status(Instant::now());
                self.lease_at = Some(Instant::now());
            } else {
                self.registering = None;
                self.register_at = Some(Instant::now());
            }
        } else if self.counted_up {
            self.counted_up = false;
            stats.connected.fetch_sub(1, Relaxed);
        }
    }
}
