//! What edges report and ask, with the NodeRestriction rule: a node may
//! change only its own Node and Lease and the status of pods bound to it, and
//! read only its Node and the configmaps and secrets its pods use.

use std::sync::atomic::Ordering::Relaxed;

use edgehive_model::{Content, Message, ResourcePath, Text, op, resource_type as rt, source};
use edgehive_store::resources::{CONFIGMAPS, LEASES, NODES, PODS, SECRETS, SERVICE_ACCOUNTS};
use edgehive_store::{DeleteOptions, StoreError};
use serde_json::{Value, json};

use crate::controller::{Controller, object_content};
use crate::index::{EDGE_LABEL, Ref};

/// Why an upstream request was refused.
#[derive(Debug)]
enum Refusal {
    /// NodeRestriction: not this node's to read or change.
    Forbidden(String),
    /// Malformed or unsupported.
    Invalid(String),
    /// The store said no.
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        Refusal::Store(e)
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

/// A Kubernetes `StatusError` as KubeEdge serialises it.
fn status_error(code: u16, reason: &str, message: &str) -> Content {
    Content::from_serialize(&json!({"ErrStatus": {"metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}}))
        .unwrap_or_default()
}

/// `{"Object": obj, "Err": null}`, KubeEdge's reply to registration and leases.
fn wrapped(obj: &edgehive_store::Object) -> Content {
    let v = obj.value().cloned().unwrap_or(Value::Null);
    Content::from_serialize(&json!({"Object": v, "Err": null})).unwrap_or_default()
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

    /// A strategic merge patch (kubelet's node and pod status patches).
    async fn patch(
        &self,
        res: &'static edgehive_store::resources::ResourceDef,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<edgehive_store::Object, Refusal> {
        let mut bad = None;
        let obj = self
            .store
            .update_with(res, ns, name, |cur| {
                let mut v = cur.to_value()?;
                match edgehive_apiserver::patch::strategic_merge_patch(&mut v, patch, res.group, res.kind) {
                    Ok(()) => Ok(Some(v)),
                    Err(e) => {
                        bad = Some(e.to_string());
                        Ok(None)
                    }
                }
            })
            .await?;
        match bad {
            Some(e) => Err(Refusal::Invalid(format!("patch does not apply: {e}"))),
            None => Ok(obj),
        }
    }

    pub(crate) async fn on_message(&mut self, m: Message) {
        if m.route.source == source::CLOUDHUB {
            let Some(node) = m.route.resource.strip_prefix("node/").map(str::to_owned) else { return };
            match m.route.operation.as_str() {
                op::CONNECTED => {
                    self.sessions.insert(node.clone(), None);
                    self.resync_node(&node).await;
                }
                op::DISCONNECTED => {
                    self.sessions.insert(node, Some(time::OffsetDateTime::now_utc()));
                }
                _ => {}
            }
            return;
        }
        let Ok(res) = ResourcePath::parse_cloud(&m.route.resource) else {
            tracing::warn!(resource = %m.route.resource, "upstream message without node/{{node}}/ resource; ignored");
            return;
        };
        self.metrics.upstream.fetch_add(1, Relaxed);
        let node = res.node.clone();
        let result = self.handle(&node, &res.path, &m).await;
        let answer = match result {
            Ok(Some(answer)) => answer,
            Ok(None) => return,
            Err(Refusal::Forbidden(why)) => {
                self.metrics.forbidden.fetch_add(1, Relaxed);
                tracing::warn!(node = %node, operation = %m.route.operation, resource = %res.path, %why, "refused: not this node's");
                m_error(&m, &format!("forbidden: {why}"))
            }
            Err(Refusal::Invalid(why)) => {
                self.metrics.invalid.fetch_add(1, Relaxed);
                tracing::warn!(node = %node, operation = %m.route.operation, resource = %res.path, %why, "refused: invalid request");
                m_error(&m, &why)
            }
            Err(Refusal::Store(StoreError::NotFound { .. })) if m.route.operation == op::QUERY => {
                let name = res.path.name.as_deref().unwrap_or_default();
                reply(
                    &m,
                    status_error(404, "NotFound", &format!("{} {name:?} not found", res.path.resource_type)),
                    None,
                )
            }
            Err(Refusal::Store(e)) => {
                tracing::warn!(node = %node, operation = %m.route.operation, resource = %res.path, error = %e, "upstream request failed");
                m_error(&m, &e.to_string())
            }
        };
        if let Err(e) = self.ctx.try_send(source::CLOUDHUB, answer) {
            tracing::warn!(node = %node, error = %e, "reply not taken by cloudhub");
        }
    }

    async fn handle(&mut self, node: &Text, path: &ResourcePath, m: &Message) -> Result<Option<Message>, Refusal> {
        let ns = path.namespace.as_deref().unwrap_or_default();
        let name = path.name.as_deref().unwrap_or_default();
        let ty = path.resource_type.as_str();
        match (m.route.operation.as_str(), ty) {
            (op::QUERY, rt::CONFIGMAP | rt::SECRET) => {
                let r = Ref {
                    kind: if ty == rt::CONFIGMAP { "configmap" } else { "secret" },
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                };
                if !self.index.uses(node, &r) {
                    return Err(Refusal::Forbidden(format!("no pod bound to node {node} uses {ty} {ns}/{name}")));
                }
                let res = if ty == rt::CONFIGMAP { &CONFIGMAPS } else { &SECRETS };
                let obj = self.store.get(res, ns, name).await?;
                Ok(Some(reply(m, object_content(&obj).unwrap_or_default(), Some(obj.rev()))))
            }
            (op::QUERY, rt::SERVICEACCOUNTTOKEN) => {
                let answer = self.service_account_token(node, ns, name, m).await?;
                Ok(Some(reply(m, answer, None)))
            }
            (op::QUERY, rt::NODE) => {
                own(node, name, "node")?;
                let obj = self.store.get(&NODES, "", name).await?;
                Ok(Some(reply(m, object_content(&obj).unwrap_or_default(), Some(obj.rev()))))
            }
            (op::INSERT, rt::NODE) => {
                own(node, name, "node")?;
                let mut v = object_from(m, "v1", "Node", "", name)?;
                v["metadata"]["labels"][EDGE_LABEL] = json!("");
                let obj = match self.store.create(&NODES, v).await {
                    Ok(o) => o,
                    Err(StoreError::AlreadyExists { .. }) => self.store.get(&NODES, "", name).await?,
                    Err(e) => return Err(e.into()),
                };
                tracing::info!(node = %node, "node registered");
                Ok(Some(reply(m, wrapped(&obj), Some(obj.rev()))))
            }
            (op::UPDATE, rt::NODESTATUS) => {
                own(node, name, "node")?;
                let req = m.content.to_value();
                let status = req
                    .get("Status")
                    .cloned()
                    .filter(Value::is_object)
                    .ok_or_else(|| Refusal::Invalid("nodestatus needs a Status object".into()))?;
                let uid = req.get("UID").and_then(Value::as_str).unwrap_or_default().to_owned();
                let obj = self
                    .store
                    .update_with(&NODES, "", name, |cur| {
                        if !uid.is_empty() && cur.uid() != Some(uid.as_str()) {
                            return Err(StoreError::Conflict {
                                resource: "nodes".into(),
                                name: name.into(),
                                reason: "the node was replaced (uid differs)".into(),
                            });
                        }
                        let mut v = cur.to_value()?;
                        v["status"] = status.clone();
                        Ok(Some(v))
                    })
                    .await?;
                let mut answer = reply(m, Content::string("OK"), Some(obj.rev()));
                answer.route.resource = Text::from(format!("node/{node}/{ns}/node/{name}"));
                Ok(Some(answer))
            }
            (op::UPDATE, rt::PODSTATUS) => {
                self.own_pod(node, ns, name)?;
                let req = m.content.to_value();
                let status = req
                    .get("Status")
                    .or_else(|| req.get("status"))
                    .cloned()
                    .filter(Value::is_object)
                    .ok_or_else(|| Refusal::Invalid("podstatus needs a Status object".into()))?;
                let uid = req.get("UID").and_then(Value::as_str).unwrap_or_default().to_owned();
                self.store
                    .update_with(&PODS, ns, name, |cur| {
                        if !uid.is_empty() && cur.uid() != Some(uid.as_str()) {
                            return Ok(None);
                        }
                        let mut v = cur.to_value()?;
                        v["status"] = status.clone();
                        Ok(Some(v))
                    })
                    .await?;
                Ok(None)
            }
            (op::PATCH, rt::NODEPATCH) => {
                own(node, name, "node")?;
                let patch = patch_of(m)?;
                let obj = self.patch(&NODES, "", name, &patch).await?;
                Ok(Some(reply(m, wrapped(&obj), Some(obj.rev()))))
            }
            (op::PATCH, rt::PODPATCH) => {
                self.own_pod(node, ns, name)?;
                let patch = patch_of(m)?;
                let obj = self.patch(&PODS, ns, name, &patch).await?;
                Ok(Some(reply(m, wrapped(&obj), Some(obj.rev()))))
            }
            (op::DELETE, rt::POD) => {
                // The edge confirms a graceful deletion: the pod goes now.
                self.own_pod(node, ns, name)?;
                let uid = m.content.to_value().pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned);
                let opts = DeleteOptions { uid, grace_period_seconds: Some(0), ..DeleteOptions::default() };
                match self.store.delete(&PODS, ns, name, &opts).await {
                    Ok(_) | Err(StoreError::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
            (op::INSERT | op::UPDATE, rt::LEASE) => {
                own(node, name, "lease")?;
                let v = object_from(m, "coordination.k8s.io/v1", "Lease", ns, name)?;
                let spec = v.get("spec").cloned().unwrap_or(Value::Null);
                let obj = match self.store.create(&LEASES, v).await {
                    Ok(o) => o,
                    Err(StoreError::AlreadyExists { .. }) => {
                        self.store
                            .update_with(&LEASES, ns, name, |cur| {
                                let mut v = cur.to_value()?;
                                v["spec"] = spec.clone();
                                Ok(Some(v))
                            })
                            .await?
                    }
                    Err(e) => return Err(e.into()),
                };
                Ok(Some(reply(m, wrapped(&obj), Some(obj.rev()))))
            }
            (operation, ty) => Err(Refusal::Invalid(format!("{operation} of {ty} is not supported"))),
        }
    }
}

impl Controller {
    /// A token for service account `ns/name`, bound to the pod the request
    /// names (KubeEdge's `serviceaccounttoken` query carries a Kubernetes
    /// `TokenRequest`). NodeRestriction: the pod must be bound to this node
    /// and run as that service account; the reply is the `TokenRequest` with
    /// its `status`.
    async fn service_account_token(&self, node: &str, ns: &str, name: &str, m: &Message) -> Result<Content, Refusal> {
        let Some(tokens) = &self.tokens else {
            return Err(Refusal::Invalid("service account tokens are not enabled on this cloud".into()));
        };
        let mut req = m.content.to_value();
        if !req.is_object() {
            return Err(Refusal::Invalid("serviceaccounttoken needs a TokenRequest".into()));
        }
        let spec = req.get("spec").cloned().unwrap_or(Value::Null);
        let bound = spec.get("boundObjectRef").cloned().unwrap_or(Value::Null);
        if bound.get("kind").and_then(Value::as_str) != Some("Pod") {
            return Err(Refusal::Forbidden(
                "a node may only ask for tokens bound to its pods (boundObjectRef kind Pod)".into(),
            ));
        }
        let pod_name = bound.get("name").and_then(Value::as_str).unwrap_or_default();
        self.own_pod(node, ns, pod_name)?;
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
            .map_err(|e| Refusal::Invalid(format!("token: {e}")))?;
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

/// The object a message carries, with its type and name set from the
/// resource it was sent to (the path wins over what the content claims).
fn object_from(m: &Message, api_version: &str, kind: &str, namespace: &str, name: &str) -> Result<Value, Refusal> {
    let mut v = m.content.to_value();
    if !v.get("metadata").is_none_or(Value::is_object) || !v.is_object() {
        return Err(Refusal::Invalid(format!("{} needs a {kind} object", m.route.operation)));
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
        Some(text) => serde_json::from_str(&text).map_err(|e| Refusal::Invalid(format!("patch is not JSON: {e}")))?,
        None => m.content.to_value(),
    };
    if v.is_object() { Ok(v) } else { Err(Refusal::Invalid("patch must be a JSON object".into())) }
}

fn own(node: &str, name: &str, what: &str) -> Result<(), Refusal> {
    if node == name { Ok(()) } else { Err(Refusal::Forbidden(format!("node {node} may not touch {what} {name}"))) }
}

fn m_error(to: &Message, reason: &str) -> Message {
    let mut m = reply(to, Content::string(reason), None);
    m.route.operation = Text::from(op::ERROR);
    m
}
