//! What edges report and ask, with the NodeRestriction rule: a node may
//! change only its own Node and Lease and the status of pods bound to it, and
//! read only its Node and the configmaps and secrets its pods use.
//!
//! Answers take the shape CloudCore gives each kind of request, which is
//! what a KubeEdge EdgeCore reads; a refusal carries a Kubernetes `Status`
//! (403, 400, 422, or the store's) in that shape, so that EdgeCore reads it
//! as a failure (docs/protocol.md §6).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use edgehive_beehive::Context;
use edgehive_model::resource::NodeResource as CloudPath;
use edgehive_model::{Content, Message, ResourcePath, Text, op, resource_type as rt, source, well_known};
use edgehive_registry::status::ApiError;
use edgehive_store::resources::{CONFIGMAPS, EVENTS, LEASES, NODES, PODS, ResourceDef, SECRETS, SERVICE_ACCOUNTS};
use edgehive_store::{DeleteOptions, Object, Store, StoreError};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::controller::{Controller, object_content};
use crate::index::{EDGE_LABEL, Ref};
use crate::metrics::Metrics;
use crate::restriction;

/// Why an upstream request was refused.
#[derive(Debug)]
enum Refusal {
    /// NodeRestriction: not this node's to read or change (403 Forbidden).
    Forbidden(String),
    /// Malformed, or of a kind this cloud does not serve (400 BadRequest).
    BadRequest(String),
    /// Refused by the API server's validation, in its words (422 Invalid,
    /// or 400 for a value of the wrong type).
    Invalid(ApiError),
    /// The store said no.
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        Refusal::Store(e)
    }
}

/// How CloudCore wraps its answer to one kind of request, which is how a
/// KubeEdge EdgeCore reads it (docs/protocol.md §5, §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `{"Object": …, "Err": …}` (KubeEdge's `ObjectResp`): registration,
    /// node and pod patches, leases. EdgeCore decodes `Err` as a Kubernetes
    /// `StatusError` and fails the call when it is set.
    ObjectResp,
    /// The object itself: queries of configmaps, secrets, the node and
    /// tokens. EdgeCore decodes any JSON object as the object asked for,
    /// so a refusal is the message as a string, which fails that decoding.
    Object,
    /// `"OK"`: status reports and pod deletion. Anything else is a failure
    /// to EdgeCore, and a refusal is a bare `StatusError` (`{"ErrStatus": …}`).
    Ok,
}

fn shape(operation: &str, ty: &str) -> Shape {
    match (operation, ty) {
        (_, rt::LEASE)
        | (op::INSERT, rt::NODE | rt::POD | rt::EVENT)
        | (op::PATCH, rt::NODEPATCH | rt::PODPATCH | rt::EVENT) => Shape::ObjectResp,
        (op::QUERY, _) => Shape::Object,
        _ => Shape::Ok,
    }
}

/// The Kubernetes resource and API group a KubeEdge resource type stands
/// for, as a `Status` names them.
fn api_resource(ty: &str) -> (&'static str, &'static str) {
    match ty {
        rt::POD | rt::PODSTATUS | rt::PODPATCH => ("pods", ""),
        rt::NODE | rt::NODESTATUS | rt::NODEPATCH => ("nodes", ""),
        rt::CONFIGMAP => ("configmaps", ""),
        rt::SECRET => ("secrets", ""),
        rt::SERVICEACCOUNTTOKEN => ("serviceaccounts", ""),
        rt::LEASE => ("leases", "coordination.k8s.io"),
        rt::EVENT => ("events", ""),
        _ => ("", ""),
    }
}

/// A store error as the API server reports it; the resource and group come
/// from the error itself (`leases.coordination.k8s.io`), else from `ty`.
fn store_status(e: StoreError, ty: &str) -> ApiError {
    let qualified = match &e {
        StoreError::NotFound { resource, .. }
        | StoreError::AlreadyExists { resource, .. }
        | StoreError::Conflict { resource, .. } => Some(resource.clone()),
        _ => None,
    };
    let (resource, group) = match &qualified {
        Some(q) => q.split_once('.').unwrap_or((q.as_str(), "")),
        None => api_resource(ty),
    };
    ApiError::from_store(e, resource, group)
}

impl Refusal {
    /// The Kubernetes status of this refusal of a request about `ty`/`name`.
    fn status(self, ty: &str, name: &str) -> ApiError {
        match self {
            Refusal::Forbidden(why) => {
                // Kubernetes' NewForbidden: `{resource} "{name}" is forbidden: {why}`.
                let (resource, group) = api_resource(ty);
                let qualified = if group.is_empty() { resource.to_owned() } else { format!("{resource}.{group}") };
                let message = match (qualified.is_empty(), name.is_empty()) {
                    (true, _) => format!("forbidden: {why}"),
                    (false, true) => format!("{qualified} is forbidden: {why}"),
                    (false, false) => format!("{qualified} {name:?} is forbidden: {why}"),
                };
                ApiError::forbidden(message).details(name, group, resource)
            }
            Refusal::BadRequest(why) => ApiError::bad_request(why),
            Refusal::Invalid(e) => e,
            Refusal::Store(e) => store_status(e, ty),
        }
    }
}

/// A reply from the controller to an edge's message.
fn reply(to: &Message, content: Content, rv: Option<u64>) -> Message {
    let mut m = Message::new()
        .with_route(source::EDGECONTROLLER, edgehive_model::group::RESOURCE, to.route.resource.clone(), op::RESPONSE)
        .with_parent(to.header.msg_id.clone())
        .with_content(content);
    if let Some(rv) = rv {
        m = m.with_resource_version(rv.to_string());
    }
    m
}

/// Kubernetes' `metav1.Status` as Go encodes it inside a `StatusError`:
/// its fields in Go's order, no `kind`/`apiVersion` (a `StatusError` made
/// by client-go or a lister has none).
#[derive(Serialize)]
struct GoStatus<'a> {
    metadata: Empty,
    status: &'static str,
    message: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<GoDetails<'a>>,
    code: u16,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct GoDetails<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    causes: Vec<GoCause<'a>>,
    #[serde(rename = "retryAfterSeconds", skip_serializing_if = "Option::is_none")]
    retry_after: Option<u32>,
}

#[derive(Serialize)]
struct GoCause<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    field: &'a str,
}

/// `k8s.io/apimachinery/pkg/api/errors.StatusError`: `{"ErrStatus": …}`.
#[derive(Serialize)]
struct StatusError<'a> {
    #[serde(rename = "ErrStatus")]
    err_status: GoStatus<'a>,
}

impl<'a> StatusError<'a> {
    fn of(e: &'a ApiError) -> StatusError<'a> {
        let d = &e.details;
        let details =
            (d.name.is_some() || d.group.is_some() || d.kind.is_some() || !d.causes.is_empty()).then(|| GoDetails {
                name: d.name.as_deref(),
                group: d.group.as_deref(),
                kind: d.kind.as_deref(),
                causes: d
                    .causes
                    .iter()
                    .map(|c| GoCause { reason: &c.reason, message: &c.message, field: &c.field })
                    .collect(),
                retry_after: d.retry_after,
            });
        StatusError {
            err_status: GoStatus {
                metadata: Empty {},
                status: "Failure",
                message: &e.message,
                reason: e.reason,
                details,
                code: e.code.as_u16(),
            },
        }
    }
}

/// KubeEdge's `ObjectResp` (`common/types`): `{"Object": obj, "Err": err}`.
#[derive(Serialize)]
struct ObjectResp<'a> {
    #[serde(rename = "Object")]
    object: Option<&'a RawValue>,
    #[serde(rename = "Err")]
    err: Option<StatusError<'a>>,
}

/// `{"Object": obj, "Err": null}`, KubeEdge's reply to registration, patches
/// and leases.
fn wrapped(obj: &Object) -> Result<Content, Refusal> {
    // The stored JSON as it is, not parsed and encoded again.
    let stored: &RawValue = serde_json::from_slice(obj.json()?)
        .map_err(|e| Refusal::Store(StoreError::Corrupt { key: obj.key().to_owned(), reason: e.to_string() }))?;
    Ok(Content::from_serialize(&ObjectResp { object: Some(stored), err: None }).unwrap_or_default())
}

/// A failure in the shape EdgeCore reads for this kind of request.
fn failure(shape: Shape, e: &ApiError) -> Content {
    let content = match shape {
        Shape::ObjectResp => Content::from_serialize(&ObjectResp { object: None, err: Some(StatusError::of(e)) }),
        Shape::Object if e.reason != "NotFound" => Ok(Content::string(&e.message)),
        Shape::Object | Shape::Ok => Content::from_serialize(&StatusError::of(e)),
    };
    content.unwrap_or_else(|_| Content::string(&e.message))
}

/// What a request's store work needs, owned, so that it runs on a task of
/// its own ([`crate::lanes`]).
#[derive(Clone)]
pub(crate) struct Api {
    pub(crate) store: Store,
    pub(crate) tokens: Option<Arc<edgehive_pki::ServiceAccountTokens>>,
}

/// The end of a request: its answer (`None`: it has none) or why it was refused.
type Outcome = Result<Option<Message>, Refusal>;

/// How a request is served.
enum Work {
    /// Its checks passed; the rest is store work, run on a task.
    Job(Pin<Box<dyn Future<Output = Outcome> + Send>>),
    /// It reads the controller's index after a store read (an inventory,
    /// an Event's count): served in the loop.
    Inline,
}

fn job(work: impl Future<Output = Outcome> + Send + 'static) -> Result<Work, Refusal> {
    Ok(Work::Job(Box::pin(work)))
}

impl Api {
    /// A read-modify-write by an edge: `change` turns the stored object into
    /// the one the edge asks for (or refuses); the result then passes the
    /// API server's defaults and update validation. Nothing is written when
    /// either refuses.
    async fn edge_update(
        &self,
        res: &'static ResourceDef,
        ns: &str,
        name: &str,
        mut change: impl FnMut(&Object, &Value) -> Result<Option<Value>, Refusal>,
    ) -> Result<Object, Refusal> {
        self.store
            .update_with(res, ns, name, |cur| {
                let old = cur.value()?;
                match change(cur, old)? {
                    Some(mut new) => admit_update(res, old, &mut new).map(|()| Some(new)),
                    None => Ok(None),
                }
            })
            .await
    }

    /// A strategic merge patch (kubelet's node and pod status patches),
    /// checked by `allowed(old, new)` before it is validated and written.
    async fn patch(
        &self,
        res: &'static ResourceDef,
        ns: &str,
        name: &str,
        patch: &Value,
        allowed: impl Fn(&Value, &Value) -> Result<(), String>,
    ) -> Result<Object, Refusal> {
        self.edge_update(res, ns, name, |cur, old| {
            // kubelet sends the pod's uid as a precondition.
            if let Some(uid) = patch.pointer("/metadata/uid").and_then(Value::as_str)
                && cur.uid() != Some(uid)
            {
                return Err(Refusal::Store(StoreError::Conflict {
                    resource: res.plural.into(),
                    name: name.into(),
                    reason: format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        cur.uid().unwrap_or_default()
                    ),
                }));
            }
            let mut new = old.clone();
            edgehive_registry::patch::strategic_merge_patch(&mut new, patch, res.group, res.kind)
                .map_err(|e| Refusal::BadRequest(format!("patch does not apply: {e}")))?;
            allowed(old, &new).map_err(Refusal::Forbidden)?;
            Ok(Some(new))
        })
        .await
    }
}

impl Controller {
    /// NodeRestriction for pods: bound to this node.
    fn own_pod(&self, node: &str, ns: &str, name: &str) -> Result<(), Refusal> {
        match self.index.pod(ns, name) {
            Some(p) if p.node == node => Ok(()),
            Some(_) => Err(Refusal::Forbidden(format!("pod {ns}/{name} is bound to another node"))),
            None => Err(Refusal::Forbidden(format!("pod {ns}/{name} is not bound to node {node}"))),
        }
    }

    fn api(&self) -> Api {
        Api { store: self.store.clone(), tokens: self.tokens.clone() }
    }

    pub(crate) async fn on_message(&mut self, m: Message) {
        if m.route.source == source::CLOUDHUB {
            let Some(node) = m.route.resource.strip_prefix("node/").map(str::to_owned) else { return };
            match m.route.operation.as_str() {
                op::CONNECTED => {
                    self.sessions.insert(node.clone(), None);
                    self.metrics.sessions.set(self.sessions.len() as i64);
                    self.resync_node(&node).await;
                }
                op::DISCONNECTED => {
                    // The time the session ended, which CloudHub stamps: the
                    // notice may have waited for room in this mailbox.
                    let now = time::OffsetDateTime::now_utc();
                    let ended = m.content.to_value()["timestamp"]
                        .as_i64()
                        .and_then(|ms| time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok())
                        .map_or(now, |t| t.min(now));
                    // The end is remembered as a beat of the node's; a node
                    // with no Node (deleted, or never registered) has none
                    // to keep, and leaves no entry behind.
                    if self.index.is_edge(&node) {
                        self.sessions.insert(node, Some(ended));
                    } else {
                        self.sessions.remove(&node);
                    }
                    self.metrics.sessions.set(self.sessions.len() as i64);
                }
                _ => {}
            }
            return;
        }
        let Ok(res) = ResourcePath::parse_cloud(&m.route.resource) else {
            tracing::warn!(resource = %m.route.resource, "upstream message without node/{{node}}/ resource; ignored");
            return;
        };
        self.metrics.upstream.inc();
        if self.lanes.is_busy(&res.node) {
            if let Err((node, m)) = self.lanes.wait(res.node.clone(), m) {
                // Its node's share of the waiting room is full: refused
                // now, as CloudHub refuses what it cannot hand over (an
                // edgehive edge sends it again, paced by its own rate
                // limit), rather than holding up the mailbox every other
                // node's requests come through.
                self.refuse_busy(&node, &m);
            }
        } else {
            self.serve(res.node, m).await;
        }
        self.metrics.upstream_waiting.set(self.lanes.waiting() as i64);
    }

    /// Answers `m` of `node`'s that it was not taken, for the cloud is busy.
    /// Not waited for: with CloudHub's mailbox full the answer is dropped
    /// and counted, and the edge's own deadline covers the request.
    fn refuse_busy(&self, node: &str, m: &Message) {
        self.metrics.upstream_busy.inc();
        tracing::debug!(node, resource = %m.route.resource, "upstream request refused: its node's share of waiting requests is full");
        let mut busy =
            reply(m, Content::string(&format!("{} {}", source::EDGECONTROLLER, well_known::CLOUD_BUSY)), None);
        busy.route.operation = Text::from(op::ERROR);
        if let Err(e) = self.ctx.try_send(source::CLOUDHUB, busy) {
            self.metrics.busy_unsent.inc();
            tracing::debug!(node, error = %e, "busy answer not taken by cloudhub");
        }
    }

    /// A request of `node`'s ended: the next one waiting behind it is served.
    pub(crate) async fn request_ended(&mut self, node: Text) {
        if let Some(m) = self.lanes.next(&node) {
            self.serve(node, m).await;
        }
        self.metrics.upstream_waiting.set(self.lanes.waiting() as i64);
    }

    /// Serves `node`'s requests from `m` on: a request whose checks pass
    /// goes on its own task (and the node's next ones wait for it); one
    /// refused at once, or served in the loop, lets the next go at once.
    async fn serve(&mut self, node: Text, m: Message) {
        let mut next = Some(m);
        while let Some(m) = next {
            // Parsed when it came in.
            if let Ok(res) = ResourcePath::parse_cloud(&m.route.resource) {
                let outcome = match self.prepare(&res.node, &res.path, &m) {
                    Ok(Work::Job(work)) => {
                        let (ctx, metrics) = (self.ctx.clone(), Arc::clone(&self.metrics));
                        self.lanes.start(node, async move {
                            let outcome = work.await;
                            finish(&ctx, &metrics, &res, &m, outcome).await;
                        });
                        self.metrics.upstream_in_flight.set(self.lanes.in_flight() as i64);
                        return;
                    }
                    Ok(Work::Inline) => self.handle_inline(&res.node, &res.path, &m).await,
                    Err(refused) => Err(refused),
                };
                finish(&self.ctx, &self.metrics, &res, &m, outcome).await;
            }
            next = self.lanes.next(&node);
        }
    }

    /// The in-flight gauge, after a request's task ended.
    pub(crate) fn count_in_flight(&self) {
        self.metrics.upstream_in_flight.set(self.lanes.in_flight() as i64);
    }

    /// The checks a request needs of the controller's index (NodeRestriction
    /// and validation, decided now), and the store work that follows them.
    fn prepare(&self, node: &Text, path: &ResourcePath, m: &Message) -> Result<Work, Refusal> {
        let ns = path.namespace.as_deref().unwrap_or_default().to_owned();
        let name = path.name.as_deref().unwrap_or_default().to_owned();
        let ty = path.resource_type.as_str();
        let (api, m, node) = (self.api(), m.clone(), node.clone());
        match (m.route.operation.as_str(), ty) {
            (op::QUERY, rt::CONFIGMAP | rt::SECRET) => {
                let r = Ref {
                    kind: if ty == rt::CONFIGMAP { "configmap" } else { "secret" },
                    namespace: ns.clone(),
                    name: name.clone(),
                };
                if !self.index.uses(&node, &r) {
                    return Err(Refusal::Forbidden(format!("no pod bound to node {node} uses {ty} {ns}/{name}")));
                }
                let res = if ty == rt::CONFIGMAP { &CONFIGMAPS } else { &SECRETS };
                job(async move {
                    let obj = api.store.get(res, &ns, &name).await?;
                    Ok(Some(reply(&m, object_content(&obj).unwrap_or_default(), Some(obj.rev()))))
                })
            }
            (op::QUERY, rt::SERVICEACCOUNTTOKEN) => {
                let (req, pod_name) = self.token_request(&node, &ns, &m)?;
                job(async move {
                    let answer = api.service_account_token(&node, &ns, &name, req, &pod_name).await?;
                    Ok(Some(reply(&m, answer, None)))
                })
            }
            (op::QUERY, rt::NODE) => {
                own(&node, &name, "node")?;
                job(async move {
                    let obj = api.store.get(&NODES, "", &name).await?;
                    Ok(Some(reply(&m, object_content(&obj).unwrap_or_default(), Some(obj.rev()))))
                })
            }
            (op::INSERT, rt::NODE) => {
                own(&node, &name, "node")?;
                let mut v = object_from(&m, "v1", "Node", "", &name)?;
                match v.pointer_mut("/metadata/labels") {
                    None | Some(Value::Null) => v["metadata"]["labels"] = json!({EDGE_LABEL: ""}),
                    Some(Value::Object(labels)) => {
                        labels.insert(EDGE_LABEL.into(), json!(""));
                    }
                    Some(_) => return Err(Refusal::BadRequest("metadata.labels of a Node must be an object".into())),
                }
                restriction::node_create(&node, &v).map_err(Refusal::Forbidden)?;
                admit_create(&NODES, &mut v)?;
                job(async move {
                    let obj = match api.store.create(&NODES, v).await {
                        Ok(o) => o,
                        Err(StoreError::AlreadyExists { .. }) => api.store.get(&NODES, "", &name).await?,
                        Err(e) => return Err(e.into()),
                    };
                    tracing::info!(node = %node, "node registered");
                    Ok(Some(reply(&m, wrapped(&obj)?, Some(obj.rev()))))
                })
            }
            (op::UPDATE, rt::NODESTATUS) => {
                own(&node, &name, "node")?;
                let req = m.content.to_value();
                let status = req
                    .get("Status")
                    .cloned()
                    .filter(Value::is_object)
                    .ok_or_else(|| Refusal::BadRequest("nodestatus needs a Status object".into()))?;
                let uid = req.get("UID").and_then(Value::as_str).unwrap_or_default().to_owned();
                job(async move {
                    let obj = api
                        .edge_update(&NODES, "", &name, |cur, old| {
                            if !uid.is_empty() && cur.uid() != Some(uid.as_str()) {
                                return Err(Refusal::Store(StoreError::Conflict {
                                    resource: "nodes".into(),
                                    name: name.clone(),
                                    reason: "the node was replaced (uid differs)".into(),
                                }));
                            }
                            let mut v = old.clone();
                            v["status"] = status.clone();
                            Ok(Some(v))
                        })
                        .await?;
                    let mut answer = reply(&m, Content::string("OK"), Some(obj.rev()));
                    answer.route.resource = Text::from(format!("node/{node}/{ns}/node/{name}"));
                    Ok(Some(answer))
                })
            }
            (op::UPDATE, rt::PODSTATUS) => {
                self.own_pod(&node, &ns, &name)?;
                let req = m.content.to_value();
                if let Some(other) = req
                    .as_object()
                    .and_then(|o| o.keys().find(|k| !matches!(k.as_str(), "UID" | "Name" | "Status" | "status")))
                {
                    return Err(Refusal::Forbidden(format!(
                        "a podstatus carries only UID, Name and Status; this one also carries {other:?}"
                    )));
                }
                let status = req
                    .get("Status")
                    .or_else(|| req.get("status"))
                    .cloned()
                    .filter(Value::is_object)
                    .ok_or_else(|| Refusal::BadRequest("podstatus needs a Status object".into()))?;
                let uid = req.get("UID").and_then(Value::as_str).unwrap_or_default().to_owned();
                job(async move {
                    api.edge_update(&PODS, &ns, &name, |cur, old| {
                        // A report about a pod since replaced is dropped.
                        if !uid.is_empty() && cur.uid() != Some(uid.as_str()) {
                            return Ok(None);
                        }
                        let mut v = old.clone();
                        v["status"] = status.clone();
                        restriction::pod_status_update(&node, old, &v).map_err(Refusal::Forbidden)?;
                        Ok(Some(v))
                    })
                    .await?;
                    Ok(None)
                })
            }
            (op::PATCH, rt::NODEPATCH) => {
                own(&node, &name, "node")?;
                let patch = patch_of(&m)?;
                job(async move {
                    let obj = api
                        .patch(&NODES, "", &name, &patch, |old, new| restriction::node_update(&node, old, new))
                        .await?;
                    Ok(Some(reply(&m, wrapped(&obj)?, Some(obj.rev()))))
                })
            }
            (op::PATCH, rt::PODPATCH) => {
                self.own_pod(&node, &ns, &name)?;
                let patch = patch_of(&m)?;
                job(async move {
                    let obj = api
                        .patch(&PODS, &ns, &name, &patch, |old, new| restriction::pod_status_update(&node, old, new))
                        .await?;
                    Ok(Some(reply(&m, wrapped(&obj)?, Some(obj.rev()))))
                })
            }
            (op::DELETE, rt::POD) => {
                job(async move { api.confirm_pod_deletion(&node, &ns, &name, &m).await.map(Some) })
            }
            (op::QUERY, rt::LEASE) => {
                // kubelet's lease controller reads its Lease first and
                // creates it on NotFound (answered in `finish`).
                restriction::lease(&node, &ns, &name).map_err(Refusal::Forbidden)?;
                job(async move {
                    let obj = api.store.get(&LEASES, &ns, &name).await?;
                    Ok(Some(reply(&m, wrapped(&obj)?, None)))
                })
            }
            (op::INSERT | op::UPDATE, rt::LEASE) => {
                restriction::lease(&node, &ns, &name).map_err(Refusal::Forbidden)?;
                let mut v = object_from(&m, "coordination.k8s.io/v1", "Lease", &ns, &name)?;
                let spec = v.get("spec").cloned().unwrap_or(Value::Null);
                // What a node may say of its Lease is the spec and that its
                // Node owns it; the rest of the metadata is the server's.
                let owners = v.pointer("/metadata/ownerReferences").filter(|o| !o.is_null()).cloned();
                let own_node = |r: &Value| r["apiVersion"] == "v1" && r["kind"] == "Node" && r["name"] == name;
                if owners.as_ref().is_some_and(|o| !o.as_array().is_some_and(|refs| refs.iter().all(own_node))) {
                    return Err(Refusal::Forbidden(format!(
                        "the lease of node {node:?} may be owned only by its Node"
                    )));
                }
                v["metadata"] = json!({"name": name, "namespace": ns});
                if let Some(owners) = owners {
                    v["metadata"]["ownerReferences"] = owners;
                }
                admit_create(&LEASES, &mut v)?;
                job(async move {
                    let obj = match api.store.create(&LEASES, v).await {
                        Ok(o) => {
                            api.no_orphan_lease(&o).await?;
                            o
                        }
                        Err(StoreError::AlreadyExists { .. }) => {
                            api.edge_update(&LEASES, &ns, &name, |_, old| {
                                let mut v = old.clone();
                                v["spec"] = spec.clone();
                                Ok(Some(v))
                            })
                            .await?
                        }
                        Err(e) => return Err(e.into()),
                    };
                    Ok(Some(reply(&m, wrapped(&obj)?, Some(obj.rev()))))
                })
            }
            (op::INVENTORY, rt::INVENTORY) => {
                own(&node, &name, "inventory")?;
                Ok(Work::Inline)
            }
            (op::INSERT, rt::EVENT) => {
                let mut v = object_from(&m, "v1", "Event", &ns, &name)?;
                self.may_record(&node, &ns, &v)?;
                v["metadata"] = json!({"name": name, "namespace": ns});
                admit_create(&EVENTS, &mut v)?;
                job(async move {
                    let obj = api.record_event(&node, &ns, &name, v).await?;
                    Ok(Some(reply(&m, wrapped(&obj)?, Some(obj.rev()))))
                })
            }
            (op::PATCH, rt::EVENT) => Ok(Work::Inline),
            (operation, ty) => Err(Refusal::BadRequest(format!("{operation} of {ty} is not supported"))),
        }
    }

    /// The requests that read the index after a store read, served in the loop.
    async fn handle_inline(&mut self, node: &Text, path: &ResourcePath, m: &Message) -> Outcome {
        let ns = path.namespace.as_deref().unwrap_or_default();
        let name = path.name.as_deref().unwrap_or_default();
        match (m.route.operation.as_str(), path.resource_type.as_str()) {
            (op::INVENTORY, rt::INVENTORY) => {
                let items = crate::inventory::parse(&m.content).map_err(Refusal::BadRequest)?;
                self.reconcile_inventory(node, &items).await;
                // Answered, so that the edge stops keeping it in case the
                // cloud was busy (docs/protocol.md §8).
                Ok(Some(reply(m, Content::string(well_known::ACK_OK), None)))
            }
            (op::PATCH, rt::EVENT) => {
                let obj = self.count_event(node, ns, name, m).await?;
                Ok(Some(reply(m, wrapped(&obj)?, Some(obj.rev()))))
            }
            (operation, ty) => Err(Refusal::BadRequest(format!("{operation} of {ty} is not supported"))),
        }
    }
}

/// How long an answer waits for room in CloudHub's mailbox.
const ANSWER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// Answers a request, or refuses it in the shape its kind is read in; logs
/// and counts refusals.
async fn finish(ctx: &Context, metrics: &Metrics, res: &CloudPath, m: &Message, outcome: Outcome) {
    let node = &res.node;
    let ty = res.path.resource_type.as_str();
    let name = res.path.name.as_deref().unwrap_or_default();
    let shape = shape(&m.route.operation, ty);
    let refusal = match outcome {
        Ok(Some(answer)) => return answer_to(ctx, node, answer).await,
        Ok(None) => return,
        // A query for something that does not exist is answered, not
        // refused: KubeEdge's NotFound `StatusError` (for a Lease, the one
        // that makes EdgeCore create it).
        Err(Refusal::Store(e @ StoreError::NotFound { .. })) if m.route.operation == op::QUERY => {
            let status = store_status(e, ty);
            tracing::debug!(node = %node, resource = %res.path, message = %status.message, "query for a missing object");
            return answer_to(ctx, node, reply(m, failure(shape, &status), None)).await;
        }
        Err(r) => r,
    };
    match &refusal {
        Refusal::Forbidden(why) => {
            metrics.forbidden.inc();
            tracing::warn!(node = %node, operation = %m.route.operation, resource = %res.path, %why, "refused: not this node's");
        }
        Refusal::BadRequest(why) => {
            metrics.invalid.inc();
            tracing::warn!(node = %node, operation = %m.route.operation, resource = %res.path, %why, "refused: invalid request");
        }
        Refusal::Invalid(e) => {
            metrics.invalid.inc();
            tracing::warn!(node = %node, operation = %m.route.operation, resource = %res.path, why = %e.message, "refused: invalid request");
        }
        Refusal::Store(e) => {
            tracing::warn!(node = %node, operation = %m.route.operation, resource = %res.path, error = %e, "upstream request failed");
        }
    }
    // Operation `error`, which edgehive's edge reads as a refusal;
    // EdgeCore routes a reply by its parent and reads only the content.
    let status = refusal.status(ty, name);
    let mut answer = reply(m, failure(shape, &status), None);
    answer.route.operation = Text::from(op::ERROR);
    answer_to(ctx, node, answer).await;
}

async fn answer_to(ctx: &Context, node: &str, answer: Message) {
    if let Err(e) = ctx.send_within(source::CLOUDHUB, answer, ANSWER_DEADLINE).await {
        tracing::warn!(node = %node, error = %e, "reply not taken by cloudhub");
    }
}

impl Api {
    /// A Lease just created for a Node that is gone (deleted while the
    /// create was in flight, or replaced by a new Node of its name) is
    /// deleted again, and the node told its Node is not found. The
    /// controller deletes a deleted Node's Lease when it sees the Node go
    /// ([`crate::orphans`]), reading the store after the Node's
    /// delete: a create that commits before that read is deleted there, one
    /// that commits after it finds the Node gone here. Either way no Lease
    /// outlives its Node (the garbage collector does not watch Leases).
    async fn no_orphan_lease(&self, lease: &Object) -> Result<(), Refusal> {
        let name = lease.name();
        match crate::orphans::collect_if_orphan(&self.store, lease).await {
            Ok(crate::orphans::Verdict::Kept) => Ok(()),
            Ok(crate::orphans::Verdict::Deleted) => {
                tracing::info!(node = name, "a Lease created for a Node that is gone; deleted again");
                Err(Refusal::Store(StoreError::NotFound { resource: "nodes".into(), name: name.into() }))
            }
            Err(e) => {
                // Unknown: the Lease stays, as when the Node exists; the
                // next relist of the Nodes looks at it again.
                tracing::warn!(node = name, error = %e, "check the Node of a Lease just created");
                Ok(())
            }
        }
    }

    /// The edge confirms that a pod's containers are gone, with the uid it
    /// stopped (kubelet's `DeleteOptions` precondition, edgehive's pod
    /// metadata, or, from older KubeEdge edges, the uid as a string): the
    /// pod is removed now. As CloudCore does, a pod already gone — or
    /// replaced by a newer one of the same name — is success, `"OK"`: the
    /// edge retries a delete whose answer it missed.
    async fn confirm_pod_deletion(&self, node: &str, ns: &str, name: &str, m: &Message) -> Result<Message, Refusal> {
        let uid = deleted_uid(&m.content.to_value());
        let done = || reply(m, Content::string(edgehive_model::well_known::ACK_OK), None);
        let pod = match self.store.get(&PODS, ns, name).await {
            Ok(p) => p,
            Err(StoreError::NotFound { .. }) => {
                tracing::debug!(node, namespace = ns, pod = name, "deletion confirmed for a pod already gone");
                return Ok(done());
            }
            Err(e) => return Err(e.into()),
        };
        if uid.as_deref().is_some_and(|u| pod.uid() != Some(u)) {
            tracing::debug!(node, namespace = ns, pod = name, "deletion confirmed for a pod since replaced");
            return Ok(done());
        }
        // NodeRestriction, decided on the stored pod: it is bound to this node.
        let bound = pod.value().ok().and_then(|v| v.pointer("/spec/nodeName")).and_then(Value::as_str);
        if bound != Some(node) {
            return Err(Refusal::Forbidden(match bound {
                Some(other) if !other.is_empty() => format!("pod {ns}/{name} is bound to another node"),
                _ => format!("pod {ns}/{name} is not bound to node {node}"),
            }));
        }
        let opts = DeleteOptions {
            uid: Some(pod.uid().unwrap_or_default().to_owned()),
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        match self.store.delete(&PODS, ns, name, &opts).await {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(done()),
            // Replaced between the read and the delete: this one is gone.
            Err(StoreError::Conflict { .. }) if uid.is_some() => Ok(done()),
            Err(e) => Err(e.into()),
        }
    }
}

/// The uid a pod deletion names: kubelet sends `DeleteOptions`
/// (`preconditions.uid`), edgehive's edge the pod's metadata, older
/// KubeEdge edges the uid alone (CloudCore still accepts that).
fn deleted_uid(content: &Value) -> Option<String> {
    let uid = match content {
        Value::String(uid) => Some(uid.as_str()),
        v => v
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .or_else(|| v.pointer("/metadata/uid").and_then(Value::as_str)),
    };
    uid.filter(|u| !u.is_empty()).map(str::to_owned)
}

impl Controller {
    /// The `TokenRequest` of a `serviceaccounttoken` query, and the pod it
    /// is bound to, which must be bound to this node (NodeRestriction).
    fn token_request(&self, node: &str, ns: &str, m: &Message) -> Result<(Value, String), Refusal> {
        if self.tokens.is_none() {
            return Err(Refusal::BadRequest("service account tokens are not enabled on this cloud".into()));
        }
        let req = m.content.to_value();
        if !req.is_object() {
            return Err(Refusal::BadRequest("serviceaccounttoken needs a TokenRequest".into()));
        }
        let bound = req.pointer("/spec/boundObjectRef").cloned().unwrap_or(Value::Null);
        if bound.get("kind").and_then(Value::as_str) != Some("Pod") {
            return Err(Refusal::Forbidden(
                "a node may only ask for tokens bound to its pods (boundObjectRef kind Pod)".into(),
            ));
        }
        let pod_name = bound.get("name").and_then(Value::as_str).unwrap_or_default();
        self.own_pod(node, ns, pod_name)?;
        Ok((req, pod_name.to_owned()))
    }
}

impl Api {
    /// A token for service account `ns/name`, bound to the pod the request
    /// names (KubeEdge's `serviceaccounttoken` query carries a Kubernetes
    /// `TokenRequest`, checked by [`Controller::token_request`]). The pod
    /// must run as that service account; the reply is the `TokenRequest`
    /// with its `status`.
    async fn service_account_token(
        &self,
        node: &str,
        ns: &str,
        name: &str,
        mut req: Value,
        pod_name: &str,
    ) -> Result<Content, Refusal> {
        let Some(tokens) = &self.tokens else {
            return Err(Refusal::BadRequest("service account tokens are not enabled on this cloud".into()));
        };
        let spec = req.get("spec").cloned().unwrap_or(Value::Null);
        let bound = spec.get("boundObjectRef").cloned().unwrap_or(Value::Null);
        let pod = self.store.get(&PODS, ns, pod_name).await?;
        if let Some(uid) = bound.get("uid").and_then(Value::as_str).filter(|u| !u.is_empty())
            && pod.uid() != Some(uid)
        {
            return Err(Refusal::Forbidden(format!("pod {ns}/{pod_name} has another uid than the request names")));
        }
        let pod_value = pod.value().cloned().unwrap_or(Value::Null);
        let runs_as = pod_value.pointer("/spec/serviceAccountName").and_then(Value::as_str).unwrap_or("default");
        if runs_as != name {
            return Err(Refusal::Forbidden(format!(
                "pod {ns}/{pod_name} runs as service account {runs_as:?}, not {name:?}"
            )));
        }
        let account = match self.store.get(&SERVICE_ACCOUNTS, ns, name).await {
            Ok(a) => a,
            // Every namespace has a `default` service account.
            Err(StoreError::NotFound { .. }) if name == "default" => {
                let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}});
                match self.store.create(&SERVICE_ACCOUNTS, sa).await {
                    Ok(a) => a,
                    Err(StoreError::AlreadyExists { .. }) => self.store.get(&SERVICE_ACCOUNTS, ns, name).await?,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
        let audiences: Vec<String> = spec
            .get("audiences")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let seconds = spec.get("expirationSeconds").and_then(Value::as_u64).unwrap_or(3600);
        let now = time::OffsetDateTime::now_utc();
        let (token, expires) = tokens
            .issue(
                &edgehive_pki::TokenFor {
                    namespace: ns,
                    name,
                    uid: account.uid().unwrap_or_default(),
                    pod: Some((pod_name, pod.uid().unwrap_or_default())),
                    node: Some(node),
                    audiences: &audiences,
                    validity: std::time::Duration::from_secs(seconds),
                },
                now,
            )
            .map_err(|e| Refusal::Invalid(ApiError::internal(format!("token: {e}"))))?;
        req["apiVersion"] = json!("authentication.k8s.io/v1");
        req["kind"] = json!("TokenRequest");
        req["metadata"]["name"] = json!(name);
        req["metadata"]["namespace"] = json!(ns);
        req["metadata"]["creationTimestamp"] = json!(edgehive_store::rfc3339(now));
        req["status"] = json!({"token": token, "expirationTimestamp": edgehive_store::rfc3339(expires)});
        tracing::info!(node = %node, namespace = %ns, service_account = %name, pod = %pod_name, "service account token issued");
        Ok(Content::from_serialize(&req).unwrap_or_default())
    }
}

impl Api {
    /// An Event an edge reports (the edge's store was rebuilt, say), checked
    /// (NodeRestriction: about its own Node, in namespace `default`, or a
    /// pod bound to it, in the pod's namespace), its metadata the server's,
    /// and validated as the API validates it. A retry of one already
    /// recorded answers the stored Event.
    async fn record_event(&self, node: &str, ns: &str, name: &str, v: Value) -> Result<Object, Refusal> {
        match self.store.create(&EVENTS, v).await {
            Ok(o) => {
                tracing::info!(node, event = %name, reason = %o.value().ok().and_then(|v| v["reason"].as_str().map(str::to_owned)).unwrap_or_default(), "event recorded for an edge");
                Ok(o)
            }
            Err(StoreError::AlreadyExists { .. }) => Ok(self.store.get(&EVENTS, ns, name).await?),
            Err(e) => Err(e.into()),
        }
    }
}

impl Controller {
    /// NodeRestriction for Events: about the node itself (in namespace
    /// `default`) or a pod bound to it (in the pod's namespace).
    fn may_record(&self, node: &str, ns: &str, event: &Value) -> Result<(), Refusal> {
        let involved = &event["involvedObject"];
        let (kind, obj_name) =
            (involved["kind"].as_str().unwrap_or_default(), involved["name"].as_str().unwrap_or_default());
        let obj_ns = involved["namespace"].as_str().unwrap_or_default();
        match kind {
            "Node" if obj_name == node && ns == "default" => Ok(()),
            "Pod" if obj_ns == ns => self.own_pod(node, ns, obj_name),
            _ => Err(Refusal::Forbidden(format!(
                "node {node:?} may record events only about itself (in namespace default) or its pods; this one is about {kind} {obj_ns}/{obj_name} in namespace {ns}"
            ))),
        }
    }

    /// A repeat of an Event the edge recorded before raises its count, as
    /// client-go's recorder patches `count`, `lastTimestamp` and `message`
    /// (sent as KubeEdge's `{"event": …, "patchData": "…"}`). The stored
    /// Event must be one the node may record; nothing else of it changes.
    /// A missing one is 404, on which the edge sends it whole again.
    async fn count_event(&self, node: &str, ns: &str, name: &str, m: &Message) -> Result<Object, Refusal> {
        let patch = match m.content.to_value().get("patchData").and_then(Value::as_str).map(serde_json::from_str) {
            Some(Ok(Value::Object(p))) => p,
            _ => {
                return Err(Refusal::BadRequest(
                    "patch of an event needs {\"event\": {…}, \"patchData\": \"{…}\"} with a JSON object as patchData"
                        .into(),
                ));
            }
        };
        if let Some(k) = patch.keys().find(|k| !matches!(k.as_str(), "count" | "lastTimestamp" | "message")) {
            return Err(Refusal::Forbidden(format!(
                "node {node:?} may change only count, lastTimestamp and message of an event, not {k}"
            )));
        }
        let stored = self.store.get(&EVENTS, ns, name).await?;
        self.may_record(node, ns, stored.value()?)?;
        let obj = self
            .api()
            .edge_update(&EVENTS, ns, name, |_, old| {
                self.may_record(node, ns, old)?;
                let mut v = old.clone();
                for (k, val) in &patch {
                    v[k] = val.clone();
                }
                Ok(Some(v))
            })
            .await?;
        tracing::debug!(node, event = %name, count = ?patch.get("count"), "event counted for an edge");
        Ok(obj)
    }
}

/// The object a message carries, with its type and name set from the
/// resource it was sent to (the path wins over what the content claims).
fn object_from(m: &Message, api_version: &str, kind: &str, namespace: &str, name: &str) -> Result<Value, Refusal> {
    let mut v = m.content.to_value();
    if !v.get("metadata").is_none_or(Value::is_object) || !v.is_object() {
        return Err(Refusal::BadRequest(format!("{} needs a {kind} object", m.route.operation)));
    }
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    v["metadata"]["name"] = json!(name);
    if !namespace.is_empty() {
        v["metadata"]["namespace"] = json!(namespace);
    }
    Ok(v)
}

/// A `patch` message's patch: KubeEdge sends it as a JSON string.
fn patch_of(m: &Message) -> Result<Value, Refusal> {
    let v = match m.content.as_text() {
        Some(text) => {
            serde_json::from_str(&text).map_err(|e| Refusal::BadRequest(format!("patch is not JSON: {e}")))?
        }
        None => m.content.to_value(),
    };
    if v.is_object() { Ok(v) } else { Err(Refusal::BadRequest("patch must be a JSON object".into())) }
}

/// Defaults and create validation, as the API server applies them.
fn admit_create(res: &ResourceDef, v: &mut Value) -> Result<(), Refusal> {
    edgehive_registry::admit::create(res, v).map_err(Refusal::Invalid)
}

/// Defaults and update validation, as the API server applies them.
fn admit_update(res: &ResourceDef, old: &Value, new: &mut Value) -> Result<(), Refusal> {
    edgehive_registry::admit::update(res, new, old).map_err(Refusal::Invalid)
}

fn own(node: &str, name: &str, what: &str) -> Result<(), Refusal> {
    if node == name { Ok(()) } else { Err(Refusal::Forbidden(format!("node {node} may not touch {what} {name}"))) }
}
