//! Discovery: `/version`, `/api`, `/apis`, the per-group-version resource
//! lists, the aggregated discovery documents (apidiscovery.k8s.io/v2) that
//! kubectl asks for first, and the OpenAPI v3 documents kubectl reads to learn
//! that the server validates fields itself (`fieldValidation`).
//!
//! The OpenAPI documents carry one PATCH operation per kind, tagged with its
//! group-version-kind, listing the `fieldValidation` parameter and the patch
//! types served, and the component schemas of the registry's Go-type tables
//! ([`edgehive_registry::openapi`]), which `kubectl explain` walks. Built-in
//! kinds do not list `application/strategic-merge-patch+json` there, so
//! kubectl builds strategic merge patches from its compiled-in types (which
//! it knows); the server accepts them.

use crate::metrics_api;
use edgehive_model::well_known::KUBERNETES_VERSION;
use edgehive_store::resources::ResourceDef;
use serde_json::{Value, json};

/// `/version`: the release of [`KUBERNETES_VERSION`] (edged reports the same
/// one as its kubelet version).
pub(crate) fn version() -> Value {
    let mut numbers = KUBERNETES_VERSION.trim_start_matches('v').split('.');
    let (major, minor) = (numbers.next().unwrap_or_default(), numbers.next().unwrap_or_default());
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": format!("{KUBERNETES_VERSION}-edgehive.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
const NAMESPACE_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
const SUB_VERBS: &[&str] = &["get", "patch", "update"];

fn verbs(res: &ResourceDef) -> &'static [&'static str] {
    if res.plural == "namespaces" { NAMESPACE_VERBS } else { VERBS }
}

fn subresources(res: &ResourceDef) -> Vec<(&'static str, &'static [&'static str])> {
    let mut subs = Vec::new();
    if res.status_subresource {
        subs.push(("status", SUB_VERBS));
    }
    if res.scale_subresource {
        subs.push(("scale", SUB_VERBS));
    }
    if res.plural == "namespaces" && res.group.is_empty() {
        subs.push(("finalize", &["update"][..]));
    }
    if res.plural == "pods" && res.group.is_empty() {
        subs.push(("attach", &["create", "get"][..]));
        subs.push(("eviction", &["create"][..]));
        subs.push(("exec", &["create", "get"][..]));
        subs.push(("log", &["get"][..]));
        subs.push(("portforward", &["create", "get"][..]));
    }
    if res.plural == "nodes" && res.group.is_empty() {
        subs.push(("proxy", &["create", "delete", "get", "patch", "update"][..]));
    }
    if res.plural == "serviceaccounts" && res.group.is_empty() {
        subs.push(("token", &["create"][..]));
    }
    subs
}

/// The group, version and kind a subresource answers with: a Namespace for
/// `finalize`, an `autoscaling/v1` Scale for `scale`, a `policy/v1` Eviction
/// for a pod's `eviction`, else the resource's own.
fn sub_kind(res: &ResourceDef, sub: &str) -> (&'static str, &'static str, &'static str) {
    match sub {
        "finalize" => ("", "v1", "Namespace"),
        "scale" => ("autoscaling", "v1", "Scale"),
        "eviction" => ("policy", "v1", "Eviction"),
        "token" => ("authentication.k8s.io", "v1", "TokenRequest"),
        // The stream subresources take options and answer with a stream.
        "attach" => ("", "v1", "PodAttachOptions"),
        "exec" => ("", "v1", "PodExecOptions"),
        "portforward" => ("", "v1", "PodPortForwardOptions"),
        "proxy" => ("", "v1", "NodeProxyOptions"),
        _ => (res.group, res.version, res.kind),
    }
}

/// What discovery describes: every resource served now (the built-in ones,
/// then those CustomResourceDefinitions define) and the custom ones'
/// schemas.
pub(crate) struct Catalog {
    all: Vec<&'static ResourceDef>,
    crds: std::sync::Arc<Vec<std::sync::Arc<crate::crd::Served>>>,
}

impl Catalog {
    /// What `shared` serves now.
    pub(crate) fn of(shared: &crate::context::ApiState) -> Catalog {
        Catalog { all: shared.store.resources().all(), crds: shared.crds.all() }
    }

    /// The built-in resources alone.
    #[cfg(test)]
    pub(crate) fn builtin() -> Catalog {
        Catalog { all: edgehive_store::resources::Registry::default().all(), crds: Default::default() }
    }

    fn served(&self, group: &str, version: &str) -> impl Iterator<Item = &'static ResourceDef> + '_ {
        let (group, version) = (group.to_owned(), version.to_owned());
        self.all.iter().copied().filter(move |r| r.group == group && r.version == version)
    }
}

/// The groups served besides core, each with its versions (the preferred
/// one first), in discovery order.
fn groups(cat: &Catalog) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in cat.all.iter().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by(|a, b| crate::crd::version_order(a, b));
    }
    out.push((metrics_api::GROUP, vec![metrics_api::VERSION]));
    out.extend(crate::reviews::GROUPS.map(|g| (g, vec![crate::reviews::VERSION])));
    out
}

/// The resources of `metrics.k8s.io` (read-only, with no store behind them),
/// in the legacy (`aggregated = false`) or aggregated form.
fn metrics_resources(aggregated: bool) -> Vec<Value> {
    metrics_api::RESOURCES
        .iter()
        .map(|(plural, kind, _, namespaced)| {
            if aggregated {
                json!({
                    "resource": plural,
                    "responseKind": {"group": metrics_api::GROUP, "version": metrics_api::VERSION, "kind": kind},
                    "scope": if *namespaced { "Namespaced" } else { "Cluster" },
                    "singularResource": "",
                    "verbs": ["get", "list"],
                })
            } else {
                json!({"name": plural, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": ["get", "list"]})
            }
        })
        .collect()
}

/// `/api` (legacy form).
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_entry(group: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
    let preferred = gvs.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": gvs, "preferredVersion": preferred})
}

/// `/apis` (legacy form).
pub(crate) fn group_list(cat: &Catalog) -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": groups(cat).into_iter().map(|(g, v)| group_entry(g, &v)).collect::<Vec<_>>(),
    })
}

/// `/apis/{group}`; `None` if not served.
pub(crate) fn group(cat: &Catalog, name: &str) -> Option<Value> {
    let (g, v) = groups(cat).into_iter().find(|(g, _)| *g == name)?;
    let mut entry = group_entry(g, &v);
    entry["kind"] = json!("APIGroup");
    entry["apiVersion"] = json!("v1");
    Some(entry)
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub(crate) fn resource_list(cat: &Catalog, group: &str, version: &str) -> Value {
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    let mut resources = Vec::new();
    if group == metrics_api::GROUP {
        resources = metrics_resources(false);
    }
    if crate::reviews::serves(group, Some(version)) {
        resources = crate::reviews::discovery_resources(group, false);
    }
    for r in cat.served(group, version) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs(r),
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        for (sub, sub_verbs) in subresources(r) {
            let (group, version, kind) = sub_kind(r, sub);
            let mut entry = json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": sub_verbs,
            });
            if matches!(sub, "scale" | "eviction" | "token") {
                entry["group"] = json!(group);
                entry["version"] = json!(version);
            }
            resources.push(entry);
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

/// The media type of aggregated discovery, if the client accepts it
/// (`v2` preferred, then `v2beta1`).
pub(crate) fn aggregated_media_type(accept: &str) -> Option<&'static str> {
    let accepts = |v: &str| {
        accept.split(',').any(|part| {
            let p: Vec<&str> = part.split(';').map(str::trim).collect();
            p.first() == Some(&"application/json")
                && p.contains(&"g=apidiscovery.k8s.io")
                && p.contains(&format!("v={v}").as_str())
                && p.contains(&"as=APIGroupDiscoveryList")
        })
    };
    if accepts("v2") {
        Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    } else if accepts("v2beta1") {
        Some("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList")
    } else {
        None
    }
}

fn discovery_resource(r: &ResourceDef) -> Value {
    let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let mut entry = json!({
        "resource": r.plural,
        "responseKind": kind,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": verbs(r),
    });
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        entry["categories"] = json!(r.categories);
    }
    let subs: Vec<Value> = subresources(r)
        .into_iter()
        .map(|(sub, v)| {
            let (group, version, kind) = sub_kind(r, sub);
            json!({"subresource": sub, "responseKind": {"group": group, "version": version, "kind": kind}, "verbs": v})
        })
        .collect();
    if !subs.is_empty() {
        entry["subresources"] = Value::Array(subs);
    }
    entry
}

/// Aggregated discovery for `/api` (`core = true`) or `/apis`.
pub(crate) fn aggregated(cat: &Catalog, core: bool, media_type: &str) -> Value {
    let api_version =
        if media_type.contains("v=v2beta1") { "apidiscovery.k8s.io/v2beta1" } else { "apidiscovery.k8s.io/v2" };
    let items: Vec<Value> = if core {
        vec![json!({
            "metadata": {"name": ""},
            "versions": [{
                "version": "v1",
                "resources": cat.served("", "v1").map(discovery_resource).collect::<Vec<_>>(),
                "freshness": "Current",
            }],
        })]
    } else {
        groups(cat)
            .into_iter()
            .map(|(g, versions)| {
                let versions: Vec<Value> = versions
                    .into_iter()
                    .map(|v| {
                        json!({
                            "version": v,
                            "resources": if g == metrics_api::GROUP {
                                metrics_resources(true)
                            } else if crate::reviews::serves(g, Some(v)) {
                                crate::reviews::discovery_resources(g, true)
                            } else {
                                cat.served(g, v).map(discovery_resource).collect::<Vec<_>>()
                            },
                            "freshness": "Current",
                        })
                    })
                    .collect();
                json!({"metadata": {"name": g}, "versions": versions})
            })
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items})
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// A stable hash of a document, for `?hash=` (FNV-1a, hex).
fn doc_hash(doc: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in doc.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `/openapi/v3`: where each group-version's document is.
pub(crate) fn openapi_index(cat: &Catalog) -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs = vec![(String::new(), "v1".to_string())];
    for (g, versions) in groups(cat) {
        gvs.extend(versions.into_iter().map(|v| (g.to_string(), v.to_string())));
    }
    for (g, v) in gvs {
        if let Some(doc) = openapi_group_version(cat, &g, &v) {
            let path = gv_path(&g, &v);
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", doc_hash(&doc))}),
            );
        }
    }
    json!({"paths": paths})
}

fn object_path(r: &ResourceDef) -> String {
    let base = if r.group.is_empty() { "/api/v1".to_string() } else { format!("/apis/{}/{}", r.group, r.version) };
    if r.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
    } else {
        format!("{base}/{}/{{name}}", r.plural)
    }
}

/// The OpenAPI v3 document of one group-version; `None` if not served.
///
/// Each kind has one PATCH operation, tagged with its group-version-kind and
/// listing the `fieldValidation` parameter; its request body is Kubernetes'
/// `meta.v1.Patch` and its response the kind's schema. `components.schemas`
/// holds the component schemas of the group-version as Kubernetes publishes
/// them ([`edgehive_registry::openapi`]), which `kubectl explain` walks. The
/// patch content types never include `application/strategic-merge-patch+json`:
/// kubectl then builds strategic merge patches from its compiled-in types
/// rather than from these schemas (which carry no patch strategies).
pub(crate) fn openapi_group_version(cat: &Catalog, group: &str, version: &str) -> Option<Value> {
    const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
    let served: Vec<&ResourceDef> = cat.served(group, version).collect();
    if served.is_empty() {
        return None;
    }
    let mut schemas = edgehive_registry::openapi::component_schemas(group, version);
    for s in cat.crds.iter().filter(|s| s.def.group == group && s.def.version == version) {
        schemas.insert(crate::crd::openapi::schema_name(s.def), crate::crd::openapi::schema(s));
    }
    let mut paths = serde_json::Map::new();
    let mut patch_used = false;
    for r in served {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let plain = json!({"schema": {"type": "object"}});
        let described = match r.custom {
            true => Some(crate::crd::openapi::schema_name(r)),
            false => edgehive_registry::openapi::schema_name(r.group, r.kind),
        }
        .filter(|n| schemas.contains_key(n));
        let (request, response) = match described {
            Some(name) => {
                patch_used = true;
                (
                    json!({"schema": {"$ref": format!("#/components/schemas/{PATCH}")}}),
                    json!({"schema": {"$ref": format!("#/components/schemas/{name}")}}),
                )
            }
            None => (plain.clone(), plain),
        };
        let patch = json!({
            "description": format!("partially update the specified {}", r.kind),
            "operationId": format!("patch{}", r.kind),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
            ],
            "requestBody": {"content": {
                "application/json-patch+json": request,
                "application/merge-patch+json": request,
            }, "required": true},
            "responses": {"200": {"description": "OK", "content": {"application/json": response}}},
        });
        paths.insert(object_path(r), json!({"patch": patch}));
    }
    if patch_used {
        schemas.insert(
            PATCH.to_string(),
            json!({"description": "The body of a PATCH request, in the form its content type names.", "type": "object"}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resource_list_has_subresources() {
        let l = resource_list(&Catalog::builtin(), "", "v1");
        let names: Vec<&str> =
            l["resources"].as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()).collect();
        for n in [
            "pods",
            "pods/status",
            "pods/log",
            "pods/exec",
            "pods/attach",
            "pods/portforward",
            "nodes",
            "nodes/status",
            "nodes/proxy",
            "namespaces",
            "namespaces/finalize",
            "configmaps",
            "secrets",
            "services",
            "endpoints",
            "events",
        ] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        assert!(!names.contains(&"leases"));
    }

    #[test]
    fn aggregated_discovery_negotiation() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            aggregated_media_type(kubectl),
            Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
        );
        assert_eq!(aggregated_media_type("application/json"), None);
        let apis = aggregated(
            &Catalog::builtin(),
            false,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        );
        let groups: Vec<&str> =
            apis["items"].as_array().into_iter().flatten().filter_map(|i| i["metadata"]["name"].as_str()).collect();
        assert_eq!(
            groups,
            [
                "apps",
                "events.k8s.io",
                "batch",
                "policy",
                "coordination.k8s.io",
                "discovery.k8s.io",
                "rbac.authorization.k8s.io",
                "apiextensions.k8s.io",
                "devices.kubeedge.io",
                "reliablesyncs.kubeedge.io",
                "metrics.k8s.io",
                "authentication.k8s.io",
                "authorization.k8s.io"
            ]
        );
        let item = apis["items"].as_array().into_iter().flatten().find(|i| i["metadata"]["name"] == "metrics.k8s.io");
        let metrics = &item.cloned().unwrap_or_default()["versions"][0];
        assert_eq!(metrics["version"], "v1beta1");
        assert_eq!(metrics["resources"][0]["responseKind"]["kind"], "NodeMetrics");
        assert_eq!(metrics["resources"][1]["scope"], "Namespaced");
        assert_eq!(metrics["resources"][1]["verbs"], json!(["get", "list"]));
        let apps = &apis["items"][0]["versions"][0]["resources"];
        let deploy = apps.as_array().into_iter().flatten().find(|r| r["resource"] == "deployments").expect("served");
        assert_eq!(deploy["shortNames"], json!(["deploy"]));
        assert_eq!(deploy["subresources"][1]["subresource"], "scale");
        assert_eq!(deploy["subresources"][1]["responseKind"]["kind"], "Scale");
        assert_eq!(deploy["subresources"][1]["responseKind"]["group"], "autoscaling");
    }

    #[test]
    fn openapi_declares_field_validation_for_every_kind() {
        let idx = openapi_index(&Catalog::builtin());
        assert!(
            idx["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .is_some_and(|u| u.starts_with("/openapi/v3/api/v1?hash="))
        );
        let doc = openapi_group_version(&Catalog::builtin(), "devices.kubeedge.io", "v1beta1").expect("served");
        let p = &doc["paths"]["/apis/devices.kubeedge.io/v1beta1/namespaces/{namespace}/devices/{name}"]["patch"];
        assert_eq!(p["x-kubernetes-group-version-kind"]["kind"], "Device");
        assert!(p["parameters"].as_array().is_some_and(|ps| ps.iter().any(|x| x["name"] == "fieldValidation")));
        assert!(openapi_group_version(&Catalog::builtin(), "apps", "v2").is_none());
    }

    /// The schema a `$ref` (direct or in a one-element `allOf`) names, as kubectl explain resolves it.
    fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
        let target = schema.get("$ref").or_else(|| schema["allOf"].get(0).and_then(|a| a.get("$ref")));
        match target.and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/")) {
            Some(name) => doc["components"]["schemas"].get(name).unwrap_or_else(|| panic!("no schema {name}")),
            None => schema,
        }
    }

    #[test]
    fn openapi_has_the_schemas_kubectl_explain_follows() {
        let doc = openapi_group_version(&Catalog::builtin(), "apps", "v1").expect("served");
        // kubectl finds the kind through the patch operation's group-version-kind...
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        let gvk = &op["x-kubernetes-group-version-kind"];
        assert_eq!(gvk, &json!({"group": "apps", "version": "v1", "kind": "Deployment"}));
        // ... then the schema carrying the same one, and walks its properties.
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        let (name, deploy) = schemas
            .iter()
            .find(|(_, s)| s["x-kubernetes-group-version-kind"].as_array().is_some_and(|l| l.contains(gvk)))
            .expect("a schema for the Deployment GVK");
        assert_eq!(name, "io.k8s.api.apps.v1.Deployment");
        let response = &op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"];
        assert_eq!(response, "#/components/schemas/io.k8s.api.apps.v1.Deployment");
        let mut s = deploy;
        for field in ["spec", "strategy", "rollingUpdate", "maxSurge"] {
            s = resolve(&doc, s);
            s = s["properties"].get(field).unwrap_or_else(|| panic!("{field} not found"));
        }
        assert_eq!(resolve(&doc, s)["format"], "int-or-string");
        assert!(s["description"].is_string());
        // Strategic merge patches stay kubectl's compiled-in business.
        let content = op["requestBody"]["content"].as_object().expect("content");
        assert!(!content.contains_key("application/strategic-merge-patch+json"));
        assert!(content.contains_key("application/merge-patch+json"));
        assert!(op["parameters"].as_array().is_some_and(|ps| ps.iter().any(|x| x["name"] == "fieldValidation")));
        // Every reference of every served document resolves.
        for (g, v) in [("", "v1"), ("apps", "v1"), ("batch", "v1"), ("devices.kubeedge.io", "v1beta1")] {
            let doc = openapi_group_version(&Catalog::builtin(), g, v).expect("served");
            let text = doc.to_string();
            for piece in text.split("#/components/schemas/").skip(1) {
                let target = piece.split('"').next().unwrap_or("");
                assert!(doc["components"]["schemas"].get(target).is_some(), "{g}/{v}: dangling {target}");
            }
        }
        let batch = openapi_group_version(&Catalog::builtin(), "batch", "v1").expect("served");
        let job = &batch["components"]["schemas"]["io.k8s.api.batch.v1.Job"];
        let spec = resolve(&batch, &job["properties"]["spec"]);
        assert!(spec["properties"]["backoffLimit"]["description"].is_string());
    }
}
