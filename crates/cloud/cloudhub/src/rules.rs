//! Which downstream messages need an ACK, and what identifies the object a
//! message carries (KubeEdge's `noAckRequired` and `enqueueAckMessage`
//! rules, docs/protocol.md §4).

use edgehive_model::{Message, ResourcePath, Text, op, resource_type as rt, source};
use serde::Deserialize;

/// How a downstream message is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sent once; dropped whatever happens.
    NoAck,
    /// Sent, resent until the edge answers with a `response` naming it.
    Ack,
}

/// KubeEdge's rules: everything needs an ACK except the kinds listed here.
pub fn delivery_mode(msg: &Message, resource_type: &str) -> Mode {
    let route = &msg.route;
    let resource = route.resource.as_str();
    let no_ack = ["podlist", "membership", "twin/cloud_updated", "serviceaccounttoken", rt::K8S_CA]
        .iter()
        .any(|s| resource.contains(s))
        || matches!(
            route.operation.as_str(),
            op::CREATE_VOLUME
                | op::DELETE_VOLUME
                | op::CONTROLLER_PUBLISH_VOLUME
                | op::CONTROLLER_UNPUBLISH_VOLUME
                | op::APPLICATION_RESPONSE
                | op::ERROR
        )
        || route.group == edgehive_model::group::USER
        || matches!(route.source.as_str(), source::NODEUPGRADEJOBCONTROLLER | source::TASKMANAGER)
        || resource_type == rt::CERTIFICATESIGNINGREQUEST
        || (route.operation == op::RESPONSE && is_ok_or_error(msg))
        || (route.source == source::EDGECONTROLLER
            && (matches!(resource_type, rt::NODE | rt::LEASE | rt::NODEPATCH | rt::PODPATCH | rt::PODSTATUS)
                || (resource_type == rt::POD && route.operation == op::RESPONSE)));
    if no_ack { Mode::NoAck } else { Mode::Ack }
}

/// A response carrying `"OK"` or an error (a Kubernetes `StatusError`
/// serialised as `{"ErrStatus":…}`, or `{"Object":…,"Err":<non-null>}`).
fn is_ok_or_error(msg: &Message) -> bool {
    if msg.content.as_text().is_some_and(|t| t == edgehive_model::well_known::ACK_OK) {
        return true;
    }
    #[derive(Deserialize)]
    struct Probe {
        #[serde(rename = "ErrStatus")]
        err_status: Option<serde::de::IgnoredAny>,
        #[serde(rename = "Err")]
        err: Option<serde_json::Value>,
    }
    match msg.content.decode::<Probe>() {
        Ok(p) => p.err_status.is_some() || p.err.is_some_and(|e| !e.is_null()),
        Err(_) => false,
    }
}

/// What the pool needs to know of an object in a message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectMeta {
    /// `metadata.uid`.
    pub uid: Option<Text>,
    /// `apiVersion`.
    pub api_version: Option<Text>,
    /// `kind`.
    pub kind: Option<Text>,
}

/// Reads uid, apiVersion and kind from a message's content without
/// decoding the rest of the object.
pub fn object_meta(msg: &Message) -> ObjectMeta {
    #[derive(Deserialize)]
    struct Meta {
        uid: Option<String>,
    }
    #[derive(Deserialize)]
    struct Probe {
        #[serde(rename = "apiVersion")]
        api_version: Option<String>,
        kind: Option<String>,
        metadata: Option<Meta>,
        // KubeEdge's delete carries an Unstructured with `uid` at the top level
        // in some paths.
        uid: Option<String>,
    }
    match msg.content.decode::<Probe>() {
        Ok(p) => ObjectMeta {
            uid: p.metadata.and_then(|m| m.uid).or(p.uid).filter(|u| !u.is_empty()).map(Text::from),
            api_version: p.api_version.map(Text::from),
            kind: p.kind.map(Text::from),
        },
        Err(_) => ObjectMeta::default(),
    }
}

/// A downstream `delete` of the node itself (`node/{n}/{ns}/node/{n}`): the
/// node is gone, so its session ends and nothing is forwarded.
pub fn is_node_stopped(msg: &Message, node: &str, path: &ResourcePath) -> bool {
    msg.route.operation == op::DELETE && path.resource_type == rt::NODE && path.name.as_deref() == Some(node)
}

#[cfg(test)]
mod tests {
    use edgehive_model::Content;

    use super::*;

    fn msg(
        src: &'static str,
        group: &'static str,
        operation: &'static str,
        resource: &str,
        content: Content,
    ) -> Message {
        Message::new().with_route(src, group, resource.to_string(), operation).with_content(content)
    }

    fn mode(m: &Message) -> Mode {
        let rt = edgehive_model::ResourcePath::parse_cloud(&m.route.resource)
            .map(|r| r.path.resource_type.to_string())
            .unwrap_or_default();
        delivery_mode(m, &rt)
    }

    #[test]
    fn object_changes_need_an_ack() {
        for (ty, operation) in [("pod", "insert"), ("configmap", "update"), ("secret", "delete"), ("rule", "insert")] {
            let m = msg("edgecontroller", "resource", operation, &format!("node/e1/default/{ty}/x"), Content::null());
            assert_eq!(mode(&m), Mode::Ack, "{ty} {operation}");
        }
        // A query answer with an object needs an ACK too.
        let answer = msg(
            "edgecontroller",
            "resource",
            "response",
            "node/e1/default/configmap/cfg",
            Content::from_json(r#"{"kind":"ConfigMap","metadata":{"uid":"u"}}"#).unwrap(),
        );
        assert_eq!(mode(&answer), Mode::Ack);
    }

    #[test]
    fn kubeedge_no_ack_kinds() {
        let cases = [
            msg("edgecontroller", "resource", "update", "node/e1/default/podlist/x", Content::null()),
            msg("devicecontroller", "twin", "update", "node/e1/membership/updated", Content::null()),
            msg("edgecontroller", "resource", "response", "node/e1/default/serviceaccounttoken/t", Content::null()),
            msg("cloudhub", "resource", "createvolume", "node/e1/default/volume/v", Content::null()),
            msg("router", "user", "publish", "node/e1/topic", Content::null()),
            msg("nodeupgradejobcontroller", "nodeupgradejobcontroller", "upgrade", "node/e1/x/y", Content::null()),
            msg("edgecontroller", "resource", "update", "node/e1/default/node/e1", Content::null()),
            msg("edgecontroller", "resource", "response", "node/e1/kube-node-lease/lease/e1", Content::null()),
            msg("edgecontroller", "resource", "response", "node/e1/default/nodepatch/e1", Content::null()),
            msg("edgecontroller", "resource", "response", "node/e1/default/podstatus/p", Content::null()),
            msg("edgecontroller", "resource", "response", "node/e1/default/pod/p", Content::null()),
            msg("edgecontroller", "resource", "response", "node/e1/default/configmap/c", Content::string("OK")),
            msg(
                "edgecontroller",
                "resource",
                "response",
                "node/e1/default/configmap/c",
                Content::from_json(r#"{"ErrStatus":{"code":404}}"#).unwrap(),
            ),
            msg("edgecontroller", "resource", "error", "node/e1/default/secret/s", Content::string("forbidden")),
        ];
        for m in &cases {
            assert_eq!(mode(m), Mode::NoAck, "{} {} {}", m.route.source, m.route.operation, m.route.resource);
        }
    }

    #[test]
    fn object_meta_reads_uid_kind_and_version() {
        let m = Message::new().with_content(
            Content::from_json(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"8d3e"},"spec":{}}"#)
                .unwrap(),
        );
        let meta = object_meta(&m);
        assert_eq!(meta.uid.as_deref(), Some("8d3e"));
        assert_eq!(meta.kind.as_deref(), Some("Pod"));
        assert_eq!(meta.api_version.as_deref(), Some("v1"));
        assert_eq!(object_meta(&Message::new().with_content(Content::string("x"))), ObjectMeta::default());
    }

    #[test]
    fn node_deletion_is_recognised() {
        let m = msg("edgecontroller", "resource", "delete", "node/e1/null/node/e1", Content::null());
        let path = ResourcePath::parse_cloud(&m.route.resource).unwrap();
        assert!(is_node_stopped(&m, "e1", &path.path));
        let other = msg("edgecontroller", "resource", "update", "node/e1/null/node/e1", Content::null());
        assert!(!is_node_stopped(&other, "e1", &path.path));
    }
}
