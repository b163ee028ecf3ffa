//! KubeEdge's success points as stored objects: `ObjectSync` (for a
//! namespaced object, in its namespace) and `ClusterObjectSync` (for a
//! cluster-scoped one), named `{node}.{objectUID}`, with
//! `status.objectResourceVersion` the version the node acknowledged
//! (PROTOCOL.md §5).

use serde_json::{Value, json};

use crate::resources::{CLUSTER_OBJECT_SYNCS, OBJECT_SYNCS, ResourceDef};

/// One success point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRecord {
    /// The node.
    pub node: String,
    /// The object's uid.
    pub uid: String,
    /// The acknowledged resourceVersion.
    pub rv: u64,
    /// The object's `apiVersion`.
    pub api_version: String,
    /// The object's `kind`.
    pub kind: String,
    /// The object's namespace (empty: cluster-scoped).
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

/// The stored object's name: `{node}.{uid}`.
pub fn sync_name(node: &str, uid: &str) -> String {
    format!("{node}.{uid}")
}

/// Where a point for an object in `namespace` is stored.
pub fn sync_resource(namespace: &str) -> &'static ResourceDef {
    if namespace.is_empty() { &CLUSTER_OBJECT_SYNCS } else { &OBJECT_SYNCS }
}

impl SyncRecord {
    /// Reads a stored ObjectSync / ClusterObjectSync; `None` if it is not one
    /// (the caller reports it with its key). The node is everything before
    /// the last `.` of the name, as KubeEdge reads it.
    pub fn parse(res: &ResourceDef, v: &Value) -> Option<SyncRecord> {
        let name = v.pointer("/metadata/name")?.as_str()?;
        let (node, uid) = name.rsplit_once('.')?;
        if node.is_empty() || uid.is_empty() {
            return None;
        }
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let rv = v.pointer("/status/objectResourceVersion").and_then(Value::as_str).unwrap_or("0").parse().ok()?;
        let namespace = if res.namespaced { s("/metadata/namespace")? } else { String::new() };
        Some(SyncRecord {
            node: node.to_owned(),
            uid: uid.to_owned(),
            rv,
            api_version: s("/spec/objectAPIVersion").unwrap_or_default(),
            kind: s("/spec/objectKind").unwrap_or_default(),
            namespace,
            name: s("/spec/objectName")?,
        })
    }

    /// The object to store.
    pub fn to_object(&self) -> Value {
        let res = sync_resource(&self.namespace);
        let mut obj = json!({
            "apiVersion": res.api_version(),
            "kind": res.kind,
            "metadata": { "name": sync_name(&self.node, &self.uid) },
            "spec": { "objectAPIVersion": self.api_version, "objectKind": self.kind, "objectName": self.name },
            "status": { "objectResourceVersion": self.rv.to_string() },
        });
        if res.namespaced {
            obj["metadata"]["namespace"] = json!(self.namespace);
        }
        obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_node_names_with_dots() {
        let r = SyncRecord {
            node: "edge.example.com".into(),
            uid: "8d3e".into(),
            rv: 42,
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "default".into(),
            name: "web".into(),
        };
        let v = r.to_object();
        assert_eq!(v["metadata"]["name"], "edge.example.com.8d3e");
        assert_eq!(v["apiVersion"], "reliablesyncs.kubeedge.io/v1alpha1");
        assert_eq!(SyncRecord::parse(&OBJECT_SYNCS, &v), Some(r.clone()));
        let cluster = SyncRecord { namespace: String::new(), kind: "Node".into(), ..r };
        let v = cluster.to_object();
        assert_eq!(v["kind"], "ClusterObjectSync");
        assert_eq!(SyncRecord::parse(&CLUSTER_OBJECT_SYNCS, &v), Some(cluster));
        assert_eq!(SyncRecord::parse(&OBJECT_SYNCS, &json!({"metadata": {"name": "nodot"}})), None);
        let bad_rv = json!({"metadata": {"name": "a.b", "namespace": "d"}, "spec": {"objectName": "x"}, "status": {"objectResourceVersion": "x1"}});
        assert_eq!(SyncRecord::parse(&OBJECT_SYNCS, &bad_rv), None);
    }
}
