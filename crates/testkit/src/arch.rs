//! Architecture invariants, checked on `cargo metadata`.
//!
//! The crate layout is the architecture (ARCHITECTURE.md): a crate's folder
//! says which layer it is in, and the rules below say which edges between
//! layers may exist. A forbidden edge anywhere in the normal (non-dev)
//! dependency graph fails the check.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::Path;

use serde_json::Value;

/// Where a workspace crate sits, from its manifest path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// `crates/core/model`: the message model.
    Model,
    /// `crates/core/beehive`: the in-process bus.
    Beehive,
    /// `crates/core/viaduct`: the cloud–edge transport.
    Viaduct,
    /// Other crates under `crates/core/`.
    Core,
    /// `crates/cloud/*`.
    Cloud,
    /// `crates/edge/*`.
    Edge,
    /// `crates/edgehive`: the binary.
    Binary,
    /// `crates/testkit`.
    Testkit,
    /// Anything else in the workspace (fuzz targets, tools).
    Other,
}

impl Layer {
    fn of(manifest_path: &str) -> Layer {
        let p = manifest_path.replace('\\', "/");
        let after = |prefix: &str| p.find(prefix).map(|i| &p[i + prefix.len()..]);
        if let Some(rest) = after("/crates/core/") {
            return match rest.split('/').next() {
                Some("model") => Layer::Model,
                Some("beehive") => Layer::Beehive,
                Some("viaduct") => Layer::Viaduct,
                _ => Layer::Core,
            };
        }
        if after("/crates/cloud/").is_some() {
            Layer::Cloud
        } else if after("/crates/edge/").is_some() {
            Layer::Edge
        } else if after("/crates/edgehive/").is_some() {
            Layer::Binary
        } else if after("/crates/testkit/").is_some() {
            Layer::Testkit
        } else {
            Layer::Other
        }
    }
}

/// The API server's package.
const API_SERVER: &str = "edgehive-apiserver";
/// Kubernetes object semantics, below the API server and the controllers.
const REGISTRY: &str = "edgehive-registry";

/// Crates that speak to the network; beehive must reach none of them.
/// (`mio` and `socket2` are left out: tokio's features are unified across the
/// workspace, so they show up under tokio whatever beehive asks for; beehive's
/// own tokio features are checked instead.)
const NETWORK_CRATES: &[&str] = &[
    "hyper",
    "h2",
    "h3",
    "reqwest",
    "axum",
    "tungstenite",
    "tokio-tungstenite",
    "quinn",
    "quinn-proto",
    "rustls",
    "tokio-rustls",
];

/// tokio features that bring sockets or processes.
const NETWORK_TOKIO_FEATURES: &[&str] = &["net", "full", "process"];

/// One package of the graph.
#[derive(Debug, Clone)]
struct Package {
    name: String,
    layer: Option<Layer>,
    /// Declared normal/build dependencies: (name, features).
    declared: Vec<(String, Vec<String>)>,
}

/// The parsed workspace graph.
#[derive(Debug)]
pub struct Graph {
    packages: HashMap<String, Package>,
    /// Normal and build edges between package ids.
    edges: HashMap<String, Vec<String>>,
}

impl Graph {
    /// Parses the JSON of `cargo metadata --format-version 1`.
    pub fn from_metadata(meta: &Value) -> Result<Graph, String> {
        let members: HashSet<&str> = meta["workspace_members"]
            .as_array()
            .ok_or("metadata has no workspace_members")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut packages = HashMap::new();
        for p in meta["packages"].as_array().ok_or("metadata has no packages")? {
            let id = p["id"].as_str().ok_or("package without id")?.to_owned();
            let layer = members.contains(id.as_str()).then(|| Layer::of(p["manifest_path"].as_str().unwrap_or("")));
            let declared = p["dependencies"]
                .as_array()
                .map(|deps| {
                    deps.iter()
                        .filter(|d| d["kind"].as_str() != Some("dev"))
                        .map(|d| {
                            let feats = d["features"]
                                .as_array()
                                .map(|f| f.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                                .unwrap_or_default();
                            (d["name"].as_str().unwrap_or("").to_owned(), feats)
                        })
                        .collect()
                })
                .unwrap_or_default();
            packages.insert(id, Package { name: p["name"].as_str().unwrap_or("").to_owned(), layer, declared });
        }
        let mut edges = HashMap::new();
        for n in meta["resolve"]["nodes"].as_array().ok_or("metadata has no resolve graph")? {
            let id = n["id"].as_str().unwrap_or("").to_owned();
            let deps = n["deps"]
                .as_array()
                .map(|deps| {
                    deps.iter()
                        .filter(|d| {
                            d["dep_kinds"].as_array().is_some_and(|kinds| {
                                kinds.iter().any(|k| k["kind"].is_null() || k["kind"].as_str() == Some("build"))
                            })
                        })
                        .filter_map(|d| d["pkg"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            edges.insert(id, deps);
        }
        Ok(Graph { packages, edges })
    }

    /// Every package reachable from `id` through normal and build edges.
    fn closure(&self, id: &str) -> Vec<&Package> {
        let mut seen = HashSet::new();
        let mut queue = VecDeque::from([id]);
        let mut out = Vec::new();
        while let Some(cur) = queue.pop_front() {
            for next in self.edges.get(cur).into_iter().flatten() {
                if seen.insert(next.as_str()) {
                    queue.push_back(next);
                    if let Some(p) = self.packages.get(next) {
                        out.push(p);
                    }
                }
            }
        }
        out
    }

    /// Every broken invariant, one line each; empty when all hold.
    pub fn violations(&self) -> Vec<String> {
        let mut v = BTreeSet::new();
        for (id, pkg) in &self.packages {
            let Some(layer) = pkg.layer else { continue };
            let reach = self.closure(id);
            let ours = |l: Layer| reach.iter().filter(move |p| p.layer == Some(l)).map(|p| p.name.as_str());
            let any_ours = reach.iter().filter(|p| p.layer.is_some()).map(|p| p.name.as_str());
            match layer {
                Layer::Model => {
                    for dep in any_ours {
                        v.insert(format!("{}: the model depends on no crate of ours, but reaches {dep}", pkg.name));
                    }
                    if reach.iter().any(|p| p.name == "tokio") {
                        v.insert(format!("{}: the model must not depend on tokio", pkg.name));
                    }
                }
                Layer::Beehive => {
                    for p in &reach {
                        if NETWORK_CRATES.contains(&p.name.as_str()) {
                            v.insert(format!("{}: beehive knows no network, but reaches {}", pkg.name, p.name));
                        }
                    }
                    for dep in ours(Layer::Viaduct).chain(ours(Layer::Cloud)).chain(ours(Layer::Edge)) {
                        v.insert(format!("{}: beehive must not depend on {dep}", pkg.name));
                    }
                    for (name, feats) in &pkg.declared {
                        if name == "tokio" {
                            for f in feats.iter().filter(|f| NETWORK_TOKIO_FEATURES.contains(&f.as_str())) {
                                v.insert(format!("{}: beehive knows no network, but enables tokio/{f}", pkg.name));
                            }
                        }
                    }
                }
                Layer::Viaduct => {
                    for dep in ours(Layer::Beehive).chain(ours(Layer::Cloud)).chain(ours(Layer::Edge)) {
                        v.insert(format!("{}: viaduct knows no beehive or side, but reaches {dep}", pkg.name));
                    }
                }
                Layer::Cloud => {
                    for dep in ours(Layer::Edge) {
                        v.insert(format!("{}: cloud crates never depend on edge crates, but reaches {dep}", pkg.name));
                    }
                    // The controllers and services use Kubernetes object
                    // semantics from the registry, never the API server.
                    if pkg.name != API_SERVER && reach.iter().any(|p| p.name == API_SERVER) {
                        v.insert(format!("{}: only the binary depends on {API_SERVER}; use {REGISTRY}", pkg.name));
                    }
                    if pkg.name == REGISTRY {
                        for (name, _) in &pkg.declared {
                            if NETWORK_CRATES.contains(&name.as_str()) || name == "tokio" {
                                v.insert(format!(
                                    "{}: the registry has no HTTP stack and no I/O, but depends on {name}",
                                    pkg.name
                                ));
                            }
                        }
                    }
                }
                Layer::Edge => {
                    for dep in ours(Layer::Cloud) {
                        v.insert(format!("{}: edge crates never depend on cloud crates, but reaches {dep}", pkg.name));
                    }
                }
                Layer::Core | Layer::Binary | Layer::Testkit | Layer::Other => {}
            }
            if layer != Layer::Testkit && layer != Layer::Other {
                for dep in ours(Layer::Binary).chain(ours(Layer::Testkit)) {
                    v.insert(format!("{}: library code must not depend on {dep}", pkg.name));
                }
            }
            if matches!(layer, Layer::Model | Layer::Beehive | Layer::Viaduct | Layer::Core) {
                for dep in ours(Layer::Cloud).chain(ours(Layer::Edge)) {
                    v.insert(format!("{}: core crates never depend on a side, but reach {dep}", pkg.name));
                }
            }
        }
        v.into_iter().collect()
    }
}

/// Runs `cargo metadata` for the workspace that contains `dir`.
pub fn workspace_graph(dir: &Path) -> Result<Graph, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| String::from("cargo"));
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let meta: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("parse cargo metadata: {e}"))?;
    Graph::from_metadata(&meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pkg(id: &str, path: &str, deps: Value) -> Value {
        json!({"id": id, "name": id, "manifest_path": path, "dependencies": deps})
    }

    fn dep(pkg: &str) -> Value {
        json!({"pkg": pkg, "dep_kinds": [{"kind": null}]})
    }

    fn graph(packages: Vec<Value>, members: &[&str], nodes: Vec<(&str, Vec<Value>)>) -> Graph {
        let nodes: Vec<Value> = nodes.into_iter().map(|(id, deps)| json!({"id": id, "deps": deps})).collect();
        Graph::from_metadata(&json!({"packages": packages, "workspace_members": members, "resolve": {"nodes": nodes}}))
            .unwrap()
    }

    #[test]
    fn clean_graph_has_no_violations() {
        let g = graph(
            vec![
                pkg("model", "/w/crates/core/model/Cargo.toml", json!([])),
                pkg("beehive", "/w/crates/core/beehive/Cargo.toml", json!([{"name": "tokio", "features": ["rt"]}])),
                pkg("tokio", "/reg/tokio/Cargo.toml", json!([])),
            ],
            &["model", "beehive"],
            vec![("model", vec![]), ("beehive", vec![dep("model"), dep("tokio")]), ("tokio", vec![])],
        );
        assert_eq!(g.violations(), Vec::<String>::new());
    }

    #[test]
    fn model_reaching_tokio_transitively_is_caught() {
        let g = graph(
            vec![
                pkg("model", "/w/crates/core/model/Cargo.toml", json!([])),
                pkg("helper", "/reg/helper/Cargo.toml", json!([])),
                pkg("tokio", "/reg/tokio/Cargo.toml", json!([])),
            ],
            &["model"],
            vec![("model", vec![dep("helper")]), ("helper", vec![dep("tokio")]), ("tokio", vec![])],
        );
        assert_eq!(g.violations(), ["model: the model must not depend on tokio"]);
    }

    #[test]
    fn dev_dependencies_do_not_count() {
        let g = graph(
            vec![
                pkg("model", "/w/crates/core/model/Cargo.toml", json!([])),
                pkg("tokio", "/reg/tokio/Cargo.toml", json!([])),
            ],
            &["model"],
            vec![("model", vec![json!({"pkg": "tokio", "dep_kinds": [{"kind": "dev"}]})]), ("tokio", vec![])],
        );
        assert!(g.violations().is_empty());
    }

    #[test]
    fn beehive_with_network_is_caught() {
        let g = graph(
            vec![
                pkg("beehive", "/w/crates/core/beehive/Cargo.toml", json!([{"name": "tokio", "features": ["net"]}])),
                pkg("hyper", "/reg/hyper/Cargo.toml", json!([])),
            ],
            &["beehive"],
            vec![("beehive", vec![dep("hyper")]), ("hyper", vec![])],
        );
        assert_eq!(
            g.violations(),
            [
                "beehive: beehive knows no network, but enables tokio/net",
                "beehive: beehive knows no network, but reaches hyper",
            ]
        );
    }

    #[test]
    fn controllers_use_the_registry_not_the_api_server() {
        let g = graph(
            vec![
                pkg("edgehive-edgecontroller", "/w/crates/cloud/edgecontroller/Cargo.toml", json!([])),
                pkg("edgehive-apiserver", "/w/crates/cloud/apiserver/Cargo.toml", json!([])),
                pkg(
                    "edgehive-registry",
                    "/w/crates/cloud/registry/Cargo.toml",
                    json!([{"name": "hyper", "features": []}]),
                ),
                pkg("edgehive", "/w/crates/edgehive/Cargo.toml", json!([])),
            ],
            &["edgehive-edgecontroller", "edgehive-apiserver", "edgehive-registry", "edgehive"],
            vec![
                ("edgehive-edgecontroller", vec![dep("edgehive-apiserver")]),
                ("edgehive-apiserver", vec![dep("edgehive-registry")]),
                ("edgehive-registry", vec![]),
                ("edgehive", vec![dep("edgehive-apiserver"), dep("edgehive-edgecontroller")]),
            ],
        );
        assert_eq!(
            g.violations(),
            [
                "edgehive-edgecontroller: only the binary depends on edgehive-apiserver; use edgehive-registry",
                "edgehive-registry: the registry has no HTTP stack and no I/O, but depends on hyper",
            ]
        );
    }

    #[test]
    fn cloud_and_edge_must_not_meet() {
        let g = graph(
            vec![
                pkg("cloudhub", "/w/crates/cloud/cloudhub/Cargo.toml", json!([])),
                pkg("edgehub", "/w/crates/edge/edgehub/Cargo.toml", json!([])),
                pkg("viaduct", "/w/crates/core/viaduct/Cargo.toml", json!([])),
                pkg("beehive", "/w/crates/core/beehive/Cargo.toml", json!([])),
            ],
            &["cloudhub", "edgehub", "viaduct", "beehive"],
            vec![
                ("cloudhub", vec![dep("edgehub")]),
                ("edgehub", vec![dep("viaduct")]),
                ("viaduct", vec![dep("beehive")]),
                ("beehive", vec![]),
            ],
        );
        assert_eq!(
            g.violations(),
            [
                "cloudhub: cloud crates never depend on edge crates, but reaches edgehub",
                "viaduct: viaduct knows no beehive or side, but reaches beehive",
            ]
        );
    }
}
