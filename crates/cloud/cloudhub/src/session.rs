//! One node's session: the task that owns its connection and its ACK pool.
//!
//! It reads upstream messages (keepalives reset the expiry, ACKs settle the
//! pool and record success points, everything else goes to the controllers
//! through beehive), takes downstream messages from its bounded inbox, and
//! resends what is overdue. It never waits on another node: a full inbox or
//! transport queue drops or defers only this node's messages.

use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::Context;
use edgehive_model::{Content, Message, ResourcePath, Text, op, resource_type, source, well_known};
use edgehive_viaduct::{ConnRx, ConnTx, WriteError, queue};
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use crate::hub::HubState;
use crate::points::UidKey;
use crate::pool::{AckPool, Delivery, Key, Offer, PointRef};
use crate::rules::{self, Mode};

/// Longest wait for room in a controller's mailbox before an upstream
/// message is refused back to the edge.
const UPSTREAM_DEADLINE: Duration = Duration::from_secs(5);
/// A message the transport could not take is retried after this.
const TRANSPORT_RETRY: Duration = Duration::from_millis(200);
/// How long a new session of an edge that agreed on inventories holds its
/// first sends for the inventory (an edgehive edge sends it at once).
const INVENTORY_WAIT: Duration = Duration::from_secs(3);
/// How long an inventory keeps filtering what the controllers offer the
/// node after it connected (their offers of everything it should hold
/// come at once).
const INVENTORY_KEPT: Duration = Duration::from_secs(30);

/// What the node's inventory says it holds, at the start of a session.
///
/// After a crash the cloud may have lost success points it had not yet
/// written; the controllers then offer a reconnecting node everything it
/// should hold, and without the points the session would send again what
/// the node already has (a cloud restart under 10,000 nodes resent 1,746
/// unchanged objects). The node's inventory is its own statement of what
/// it has committed, as good as an ACK: an object it holds at the offered
/// version or newer is not sent, and its point is recorded instead.
enum Inventory {
    /// The edge did not agree on inventories (a KubeEdge EdgeCore).
    None,
    /// Agreed, not arrived yet: sends wait until then or this deadline.
    Awaited(Instant),
    /// Arrived: uid → version held, used until the deadline.
    Held(std::collections::HashMap<UidKey, u64>, Instant),
}

impl Inventory {
    /// The version the node says it holds of `uid`.
    fn holds(&self, uid: &str, now: Instant) -> Option<u64> {
        match self {
            Inventory::Held(held, until) if now < *until => held.get(&UidKey::of(uid)).copied(),
            _ => None,
        }
    }

    /// The node is sent a delete of `uid`: what the inventory said of it
    /// no longer holds (an object needed again is sent again).
    fn forget(&mut self, uid: &str) {
        if let Inventory::Held(held, _) = self {
            held.remove(&UidKey::of(uid));
        }
    }

    /// When it changes by itself (a deadline).
    fn deadline(&self) -> Option<Instant> {
        match self {
            Inventory::None => None,
            Inventory::Awaited(t) | Inventory::Held(_, t) => Some(*t),
        }
    }
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The connection closed.
    Closed,
    /// No keepalive within the interval.
    KeepaliveExpired,
    /// Replaced by a newer connection, the node was deleted, or shutdown.
    Cancelled,
}

pub(crate) struct Session {
    pub(crate) node: Text,
    pub(crate) tx: ConnTx,
    pub(crate) rx: ConnRx,
    pub(crate) inbox: queue::Receiver<Message>,
    pub(crate) cancel: CancellationToken,
    pub(crate) shared: Arc<HubState>,
    pub(crate) ctx: Context,
}

impl Session {
    pub(crate) async fn run(mut self) -> End {
        let cfg = &self.shared.cfg;
        let mut pool = AckPool::new(cfg.pool.clone());
        let mut keepalive_deadline = Instant::now() + cfg.keepalive_interval;
        let mut resend = Vec::new();
        let mut inventory = if self.rx.peer().agreed(edgehive_viaduct::features::INVENTORY) {
            Inventory::Awaited(Instant::now() + INVENTORY_WAIT)
        } else {
            Inventory::None
        };
        // One timer and one cancellation wait for the session's life, moved
        // when the next deadline moves: made anew on every pass, each
        // registered with the runtime's timer wheel and the token's waiters
        // and was taken out again, on every message.
        let timer = tokio::time::sleep_until(keepalive_deadline);
        let cancelled = self.cancel.clone().cancelled_owned();
        tokio::pin!(timer, cancelled);
        let end = loop {
            let mut wake = pool.next_due().map_or(keepalive_deadline, |d| d.min(keepalive_deadline));
            if let Some(t) = inventory.deadline() {
                wake = wake.min(t);
            }
            if timer.deadline() != wake {
                timer.as_mut().reset(wake);
            }
            tokio::select! {
                biased;
                () = &mut cancelled => break End::Cancelled,
                m = self.rx.recv() => match m {
                    None => break End::Closed,
                    Some(m) if m.route.operation == op::KEEPALIVE => {
                        keepalive_deadline = Instant::now() + cfg.keepalive_interval;
                    }
                    // Upstream handling is boxed (as the close below): the
                    // task, idle, holds no room for it.
                    Some(m) if m.route.operation == op::INVENTORY => {
                        inventory = self.take_inventory(&m, &mut pool);
                        Box::pin(self.upstream(m, &mut pool)).await;
                    }
                    Some(m) => Box::pin(self.upstream(m, &mut pool)).await,
                },
                m = self.inbox.recv() => match m {
                    None => break End::Cancelled,
                    Some(m) => self.downstream(m, &mut pool, &mut inventory),
                },
                () = &mut timer => {
                    let now = Instant::now();
                    if inventory.deadline().is_some_and(|t| t <= now) {
                        inventory = Inventory::None;
                    }
                    if now >= keepalive_deadline {
                        // An edge keeping alive with WebSocket pings: any
                        // frame within the interval counts.
                        let idle = self.rx.idle_for();
                        if !(self.rx.peer().ping_keepalive && idle < cfg.keepalive_interval) {
                            break End::KeepaliveExpired;
                        }
                        keepalive_deadline = now + (cfg.keepalive_interval - idle);
                    }
                    pool.due(now, &mut resend);
                    for m in resend.drain(..) {
                        self.shared.metrics.resent.inc();
                        if let Err(e) = self.tx.try_write(m) {
                            pool.retry_soon(&e.into_message().header.msg_id, now + TRANSPORT_RETRY);
                        }
                    }
                }
            }
            if !matches!(inventory, Inventory::Awaited(_)) {
                self.pump(&mut pool);
            }
        };
        let left = (pool.waiting() + pool.in_flight()) as i64;
        self.shared.metrics.queued.dec_by(left);
        if end == End::KeepaliveExpired {
            tracing::warn!(node = %self.node, interval = ?cfg.keepalive_interval, "no keepalive; ending the session");
            let _ = Box::pin(self.tx.close_with(keepalive_error(&self.node, cfg.keepalive_interval))).await;
        }
        self.tx.close();
        end
    }

    /// Sends what the window allows.
    fn pump(&self, pool: &mut AckPool) {
        let now = Instant::now();
        while let Some(m) = pool.next(now) {
            self.shared.metrics.sent.inc();
            match self.tx.try_write(m) {
                Ok(()) => {}
                Err(WriteError::Full { message, .. }) => {
                    pool.retry_soon(&message.header.msg_id, now + TRANSPORT_RETRY);
                    break;
                }
                Err(_) => break,
            }
        }
    }

    fn downstream(&self, mut m: Message, pool: &mut AckPool, inventory: &mut Inventory) {
        let metrics = &self.shared.metrics;
        let Ok(res) = ResourcePath::parse_cloud(&m.route.resource) else {
            // DeviceController's `twin` messages (`node/{node}/membership`)
            // name no object: sent once, as KubeEdge sends them, without
            // the node prefix.
            if m.route.group == edgehive_model::group::TWIN
                && let Ok((_, rest)) = edgehive_model::resource::split_node_prefix(&m.route.resource)
            {
                m.route.resource = Text::from(rest.to_owned());
                match self.tx.try_write(m) {
                    Ok(()) => metrics.sent_no_ack.inc(),
                    Err(_) => metrics.dropped_full.inc(),
                };
                return;
            }
            metrics.malformed.inc();
            tracing::warn!(node = %self.node, resource = %m.route.resource, "downstream message with a malformed resource; dropped");
            return;
        };
        let mode = rules::delivery_mode(&m, &res.path.resource_type);
        m.route.resource = Text::from(res.path.to_wire());
        // Cloud-internal marks: a delete of an object the node no longer
        // needs; an object to send whatever the node's success point says.
        let unneeded = m.header.message_type == well_known::UNNEEDED;
        let resend = m.header.message_type == well_known::RESEND;
        if unneeded || resend {
            m.header.message_type = Text::default();
        }
        if mode == Mode::NoAck {
            match self.tx.try_write(m) {
                Ok(()) => metrics.sent_no_ack.inc(),
                Err(_) => metrics.dropped_full.inc(),
            };
            return;
        }
        let delete = m.route.operation == op::DELETE;
        let rv = match m.header.resource_version.parse::<u64>() {
            Ok(rv) => rv,
            Err(_) if delete || m.route.operation == op::RESPONSE => 0,
            Err(_) => {
                metrics.malformed.inc();
                tracing::warn!(node = %self.node, resource = %m.route.resource, rv = %m.header.resource_version,
                    "ACK-mode message without a numeric resourceversion; dropped");
                return;
            }
        };
        let meta = self.shared.object_meta(&m);
        let key = match (&meta.uid, m.route.operation.as_str()) {
            (_, op::RESPONSE) | (None, _) => Key::Message(m.header.msg_id.clone()),
            (Some(uid), _) => Key::Object(uid.clone()),
        };
        if delete && let Key::Object(uid) = &key {
            inventory.forget(uid);
        }
        let point = point_of(&m, &res.path, &meta);
        if resend && let Some(p) = &point {
            self.shared.points.remove(&self.node, p);
        }
        let mut acked = match &key {
            Key::Object(uid) => self.shared.points.get(&self.node, uid),
            Key::Message(_) => None,
        };
        // The node says it holds this version or a newer one: as if ACKed.
        if !delete
            && let (Key::Object(uid), Some(p)) = (&key, &point)
            && inventory.holds(uid, Instant::now()).is_some_and(|h| h >= rv)
            && acked.is_none_or(|a| a < rv)
        {
            // The offered version, not the one claimed: an edge claiming
            // more could only keep newer versions from itself.
            self.shared.points.record(&self.node, p, rv);
            acked = Some(rv);
        }
        // The node may store this object even if its ACK is lost (the link
        // breaks after the commit). A provisional point at version 0, as
        // KubeEdge creates its ObjectSync at enqueue time, lets SyncController
        // send the delete should the object go while the node is away.
        if acked.is_none()
            && !delete
            && let Some(p) = &point
        {
            self.shared.points.record(&self.node, p, 0);
        }
        // The node must not be sent this object again, whether or not it
        // acknowledges the delete: its point goes now. (The delete of an
        // object that is gone keeps its point until the ACK, so that
        // SyncController sends it again should this one be lost.)
        if delete
            && unneeded
            && let Some(p) = &point
        {
            self.shared.points.remove(&self.node, p);
        }
        match pool.offer(Delivery { key, rv, delete, unneeded: delete && unneeded, msg: m, point }, acked) {
            Offer::Queued => {
                metrics.queued.inc();
            }
            Offer::Replaced | Offer::Stale => {
                metrics.skipped_stale.inc();
            }
            Offer::Full => {
                metrics.dropped_full.inc();
            }
        }
    }

    /// The node's inventory arrived: what waits to be sent and the node
    /// already holds is settled as if ACKed, and later offers are checked
    /// against it for a while. A bad inventory changes nothing.
    fn take_inventory(&self, m: &Message, pool: &mut AckPool) -> Inventory {
        let until = Instant::now() + INVENTORY_KEPT;
        let Ok(items) = edgehive_model::inventory::parse(&m.content) else {
            return Inventory::None;
        };
        let held: std::collections::HashMap<UidKey, u64> = items
            .iter()
            .filter(|i| !i.uid.is_empty())
            .filter_map(|i| Some((UidKey::of(&i.uid), i.resource_version.parse().ok()?)))
            .collect();
        let settled = pool.take_waiting(|d| match (&d.key, &d.point) {
            (Key::Object(uid), Some(_)) if !d.delete => held.get(&UidKey::of(uid)).is_some_and(|h| *h >= d.rv),
            _ => false,
        });
        for d in &settled {
            if let Some(p) = &d.point {
                self.shared.points.record(&self.node, p, d.rv);
            }
        }
        let n = settled.len() as i64;
        self.shared.metrics.queued.dec_by(n);
        self.shared.metrics.skipped_stale.inc_by(n as u64);
        Inventory::Held(held, until)
    }

    /// An inventory (docs/protocol.md §8) says what the node's store holds:
    /// success points of objects it does not hold, or holds older, are
    /// wrong and forgotten, so those objects are sent when needed. A bad
    /// inventory changes nothing here (EdgeController refuses it).
    fn correct_points(&self, m: &Message) {
        let Ok(items) = edgehive_model::inventory::parse(&m.content) else { return };
        let held: std::collections::HashMap<UidKey, u64> = items
            .iter()
            .filter(|i| !i.uid.is_empty())
            .map(|i| (UidKey::of(&i.uid), i.resource_version.parse().unwrap_or(0)))
            .collect();
        let forgotten = self.shared.points.retain_held(&self.node, &held);
        if forgotten > 0 {
            tracing::warn!(node = %self.node, forgotten, held = held.len(),
                "success points of objects the edge's store does not hold forgotten");
        }
    }

    async fn upstream(&self, m: Message, pool: &mut AckPool) {
        let metrics = &self.shared.metrics;
        match m.route.operation.as_str() {
            op::RESPONSE => {
                let Some(acked) = pool.ack(&m.header.parent_msg_id, Instant::now()) else {
                    tracing::debug!(node = %self.node, parent = %m.header.parent_msg_id, "response to nothing in flight");
                    return;
                };
                metrics.acked.inc();
                metrics.queued.dec();
                metrics.observe_ack(acked.latency);
                if let Some(p) = &acked.delivery.point {
                    if !acked.delivery.delete {
                        self.shared.points.record(&self.node, p, acked.delivery.rv);
                    } else if !pool.is_waiting(&acked.delivery.key) {
                        // (An object needed again after its delete keeps the
                        // provisional point its offer recorded.)
                        self.shared.points.remove(&self.node, p);
                    }
                }
                return;
            }
            op::ERROR => {
                tracing::warn!(node = %self.node, resource = %m.route.resource, content = %m.content.as_json(), "edge reported an error");
                return;
            }
            _ => {}
        }
        // DeviceTwin's reports name devices, not objects
        // (`device/{id}/twin/edge_updated`); DeviceController checks them,
        // after this check of what any resource must be (short, printable).
        let well_formed = if m.route.source == source::TWIN {
            m.route.resource.len() <= 512 && !m.route.resource.chars().any(char::is_control)
        } else {
            ResourcePath::parse_wire(&m.route.resource).is_ok()
        };
        if !well_formed {
            metrics.malformed.inc();
            tracing::warn!(node = %self.node, resource = %m.route.resource, "upstream message with a malformed resource");
            let _ = self.tx.try_write(m.error_response(&format!("malformed resource {:?}", m.route.resource)));
            return;
        }
        if m.route.operation == op::INVENTORY {
            self.correct_points(&m);
        }
        let target = match m.route.source.as_str() {
            source::TWIN => source::DEVICECONTROLLER,
            source::METASERVER => source::DYNAMICCONTROLLER,
            _ if m.route.group == edgehive_model::group::USER => source::ROUTER,
            _ => source::EDGECONTROLLER,
        };
        let mut fwd = m;
        let reply_to = fwd.clone();
        fwd.route.resource = Text::from(edgehive_model::resource::add_node_prefix(&self.node, &fwd.route.resource));
        match timeout(UPSTREAM_DEADLINE, self.ctx.send(target, fwd)).await {
            Ok(Ok(())) => {
                metrics.upstream.inc();
            }
            Ok(Err(e)) => {
                tracing::warn!(node = %self.node, target, error = %e, "upstream message not delivered");
                let _ = self.tx.try_write(reply_to.error_response(&format!("{target} cannot take the message: {e}")));
            }
            Err(_) => {
                tracing::warn!(node = %self.node, target, "upstream message not taken within the deadline");
                // From CloudHub itself: an edgehive edge sends a status
                // report refused so again (docs/protocol.md §7).
                let mut busy = reply_to.error_response(&format!("{target} {}", well_known::CLOUD_BUSY));
                busy.route.source = Text::from(source::CLOUDHUB);
                let _ = self.tx.try_write(busy);
            }
        }
    }
}

/// Where an object delivery's success point is kept (`None`: the message
/// names no object, or is not an object of group `resource`).
pub(crate) fn point_of(m: &Message, path: &ResourcePath, meta: &rules::ObjectMeta) -> Option<PointRef> {
    match (&meta.uid, path.name.clone()) {
        (Some(uid), Some(name)) if m.route.group == edgehive_model::group::RESOURCE => Some(PointRef {
            uid: uid.clone(),
            namespace: path.namespace.clone().unwrap_or_default(),
            name,
            api_version: meta.api_version.clone().unwrap_or_default(),
            kind: meta.kind.clone().unwrap_or_else(|| kind_of(&path.resource_type)),
        }),
        _ => None,
    }
}

/// The Kubernetes kind for a KubeEdge resource type.
fn kind_of(resource_type: &str) -> Text {
    Text::from(match resource_type {
        resource_type::POD => "Pod",
        resource_type::CONFIGMAP => "ConfigMap",
        resource_type::SECRET => "Secret",
        resource_type::NODE => "Node",
        resource_type::SERVICE => "Service",
        resource_type::ENDPOINTS => "Endpoints",
        resource_type::DEVICE => "Device",
        _ => "",
    })
}

fn keepalive_error(node: &str, interval: Duration) -> Message {
    Message::new()
        .with_route(source::CLOUDHUB, edgehive_model::group::RESOURCE, format!("node/{node}"), op::ERROR)
        .with_content(Content::string(&format!("no keepalive within {interval:?}; session ended")))
}
