//! Typed resource paths (docs/protocol.md §1.3).
//!
//! Two forms are in use:
//! - inside the cloud: `node/{node}/{namespace}/{type}/{name}`;
//! - on the wire: `{namespace}/{type}/{name}` (CloudHub strips `node/{node}/`
//!   going down and prepends it coming up).
//!
//! Cluster-scoped objects carry the namespace token `null`. The name is optional
//! (`default/podlist`). Parsing never panics: malformed strings are errors.

use std::fmt;

use crate::constants::well_known::{NODE_PREFIX, NULL_NAMESPACE};
use crate::error::ResourceError;
use crate::text::Text;

/// `{namespace}/{type}[/{name}]`: the object a message is about.
///
/// ```
/// use edgehive_model::ResourcePath;
/// let p = ResourcePath::parse_wire("default/pod/nginx").unwrap();
/// assert_eq!(p.namespace.as_deref(), Some("default"));
/// assert_eq!(p.resource_type, "pod");
/// assert_eq!(p.name.as_deref(), Some("nginx"));
/// assert_eq!(p.to_cloud("edge-1"), "node/edge-1/default/pod/nginx");
///
/// let node = ResourcePath::cluster_scoped("node", "edge-1");
/// assert_eq!(node.to_wire(), "null/node/edge-1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourcePath {
    /// `None` for cluster-scoped objects (`null` on the wire).
    pub namespace: Option<Text>,
    /// The resource type, e.g. `pod`, `configmap`, `nodestatus`.
    pub resource_type: Text,
    /// The object name; absent for collection resources such as `podlist`.
    pub name: Option<Text>,
}

/// A cloud-internal resource path: a [`ResourcePath`] addressed to one node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeResource {
    /// The node id, token 1 of `node/{node}/…`.
    pub node: Text,
    /// The rest of the path.
    pub path: ResourcePath,
}

impl ResourcePath {
    /// A namespaced object.
    pub fn namespaced(
        namespace: impl Into<Text>,
        resource_type: impl Into<Text>,
        name: impl Into<Text>,
    ) -> ResourcePath {
        ResourcePath { namespace: Some(namespace.into()), resource_type: resource_type.into(), name: Some(name.into()) }
    }

    /// A cluster-scoped object (`null` namespace token).
    pub fn cluster_scoped(resource_type: impl Into<Text>, name: impl Into<Text>) -> ResourcePath {
        ResourcePath { namespace: None, resource_type: resource_type.into(), name: Some(name.into()) }
    }

    /// Parses the wire form `{namespace}/{type}` or `{namespace}/{type}/{name}`.
    pub fn parse_wire(s: &str) -> Result<ResourcePath, ResourceError> {
        let mut parts = [""; 3];
        let n = split_exact(s, &mut parts)?;
        if n < 2 {
            return Err(ResourceError::new(s, "expected {namespace}/{type}[/{name}]"));
        }
        Ok(ResourcePath {
            namespace: namespace_token(parts[0]),
            resource_type: Text::copy_from(parts[1]),
            name: (n == 3).then(|| Text::copy_from(parts[2])),
        })
    }

    /// Parses the cloud-internal form `node/{node}/{namespace}/{type}[/{name}]`.
    pub fn parse_cloud(s: &str) -> Result<NodeResource, ResourceError> {
        let (node, rest) = split_node_prefix(s)?;
        let path = ResourcePath::parse_wire(rest).map_err(|e| ResourceError::new(s, e.reason))?;
        Ok(NodeResource { node: Text::copy_from(node), path })
    }

    /// The namespace token as it appears in a path (`null` when cluster-scoped).
    pub fn namespace_token(&self) -> &str {
        self.namespace.as_deref().unwrap_or(NULL_NAMESPACE)
    }

    /// `{namespace}/{type}[/{name}]`.
    pub fn to_wire(&self) -> String {
        let mut s = String::with_capacity(self.encoded_len());
        self.write_wire(&mut s);
        s
    }

    /// `node/{node}/{namespace}/{type}[/{name}]`.
    pub fn to_cloud(&self, node: &str) -> String {
        let mut s = String::with_capacity(NODE_PREFIX.len() + node.len() + 2 + self.encoded_len());
        s.push_str(NODE_PREFIX);
        s.push('/');
        s.push_str(node);
        s.push('/');
        self.write_wire(&mut s);
        s
    }

    fn encoded_len(&self) -> usize {
        self.namespace_token().len() + 1 + self.resource_type.len() + self.name.as_ref().map_or(0, |n| n.len() + 1)
    }

    fn write_wire(&self, s: &mut String) {
        s.push_str(self.namespace_token());
        s.push('/');
        s.push_str(&self.resource_type);
        if let Some(name) = &self.name {
            s.push('/');
            s.push_str(name);
        }
    }
}

impl fmt::Display for ResourcePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_wire())
    }
}

impl NodeResource {
    /// `node/{node}/{namespace}/{type}[/{name}]`.
    pub fn to_cloud(&self) -> String {
        self.path.to_cloud(&self.node)
    }
}

impl fmt::Display for NodeResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_cloud())
    }
}

/// Splits `node/{node}/{rest}` into `(node, rest)`; works for every
/// cloud-internal form, including ones that are not objects
/// (`node/edge-1/membership/detail`).
///
/// ```
/// use edgehive_model::resource::split_node_prefix;
/// assert_eq!(split_node_prefix("node/e1/membership/detail").unwrap(), ("e1", "membership/detail"));
/// assert!(split_node_prefix("default/pod/x").is_err());
/// ```
pub fn split_node_prefix(s: &str) -> Result<(&str, &str), ResourceError> {
    let rest = s
        .strip_prefix(NODE_PREFIX)
        .and_then(|r| r.strip_prefix('/'))
        .ok_or_else(|| ResourceError::new(s, "expected node/{node}/..."))?;
    let (node, rest) = rest.split_once('/').ok_or_else(|| ResourceError::new(s, "expected node/{node}/..."))?;
    if node.is_empty() {
        return Err(ResourceError::new(s, "empty node id"));
    }
    if rest.is_empty() {
        return Err(ResourceError::new(s, "nothing after node/{node}/"));
    }
    Ok((node, rest))
}

/// Builds `node/{node}/{rest}` for any wire resource.
pub fn add_node_prefix(node: &str, wire_resource: &str) -> String {
    let mut s = String::with_capacity(NODE_PREFIX.len() + node.len() + 2 + wire_resource.len());
    s.push_str(NODE_PREFIX);
    s.push('/');
    s.push_str(node);
    s.push('/');
    s.push_str(wire_resource);
    s
}

fn namespace_token(tok: &str) -> Option<Text> {
    (tok != NULL_NAMESPACE).then(|| Text::copy_from(tok))
}

/// Splits on `/` into at most `out.len()` non-empty segments.
fn split_exact<'a>(s: &'a str, out: &mut [&'a str]) -> Result<usize, ResourceError> {
    if s.is_empty() {
        return Err(ResourceError::new(s, "empty resource"));
    }
    let mut n = 0;
    for seg in s.split('/') {
        if seg.is_empty() {
            return Err(ResourceError::new(s, "empty path segment"));
        }
        if seg.chars().any(char::is_control) {
            return Err(ResourceError::new(s, "control character in path"));
        }
        if n == out.len() {
            return Err(ResourceError::new(s, "too many path segments"));
        }
        out[n] = seg;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_round_trip() {
        for s in ["default/pod/nginx", "kube-node-lease/lease/edge-1", "null/node/edge-1", "default/podlist"] {
            assert_eq!(ResourcePath::parse_wire(s).unwrap().to_wire(), s);
        }
    }

    #[test]
    fn cloud_round_trip() {
        let r = ResourcePath::parse_cloud("node/edge-1/null/node/edge-1").unwrap();
        assert_eq!(r.node, "edge-1");
        assert_eq!(r.path.namespace, None);
        assert_eq!(r.path.resource_type, "node");
        assert_eq!(r.to_cloud(), "node/edge-1/null/node/edge-1");
    }

    #[test]
    fn node_deletion_form() {
        // node/{n}/namespace/node/{n} (edgecontroller downstream)
        let r = ResourcePath::parse_cloud("node/e1/namespace/node/e1").unwrap();
        assert_eq!(r.path.namespace.as_deref(), Some("namespace"));
        assert_eq!(r.path.name.as_deref(), Some("e1"));
    }

    #[test]
    fn malformed_paths_are_errors() {
        for s in ["", "pod", "/pod/x", "default//x", "default/pod/", "a/b/c/d", "default/pod/x\n"] {
            let e = ResourcePath::parse_wire(s).unwrap_err();
            assert_eq!(e.input, s);
        }
        for s in ["", "node", "node/", "node//default/pod/x", "node/e1", "node/e1/", "nod/e1/a/b/c", "node/e1/a"] {
            assert!(ResourcePath::parse_cloud(s).is_err(), "{s:?} should not parse");
        }
    }

    #[test]
    fn error_names_input_and_reason() {
        let e = ResourcePath::parse_wire("a/b/c/d").unwrap_err();
        assert_eq!(e.to_string(), "malformed resource \"a/b/c/d\": too many path segments");
    }
}
