//! The configmaps and secrets a pod uses: read through MetaManager (the
//! cloud's answer while connected, the local store otherwise), and the
//! container environment and volume checks built from them with kubelet's
//! rules and messages. A missing object or key that a container's
//! environment needs is `CreateContainerConfigError` (`configmap "x" not
//! found`, `couldn't find key k in ConfigMap default/x`); one a volume needs
//! keeps the pod in `ContainerCreating`. Either is retried with back-off,
//! and at once when edged is passed a configmap or secret; an `optional`
//! reference never blocks.

use std::collections::BTreeMap;
use std::time::Duration;

use edgehive_beehive::Context;
use edgehive_model::{Message, group, op, resource_type as rt, source};
use serde_json::Value;

use crate::volume::{Data, object_data};

/// The waiting reason of a container whose environment cannot be built.
pub(crate) const CONFIG_ERROR: &str = "CreateContainerConfigError";

/// Deadline of one read through MetaManager.
const QUERY_DEADLINE: Duration = Duration::from_secs(10);

/// What a read of one configmap or secret found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fetched {
    /// Its data (secret values decoded).
    Found(Data),
    /// There is no such object.
    NotFound,
    /// It could not be read (MetaManager or the cloud failed).
    Failed(String),
}

/// The configmaps and secrets read for a pod, by (`configmap` | `secret`,
/// name): `None` for one that does not exist.
pub(crate) type Sources = BTreeMap<(&'static str, String), Option<Data>>;

/// Reads configmaps and secrets through MetaManager.
#[derive(Debug, Clone)]
pub(crate) struct ConfigReader {
    ctx: Context,
}

impl ConfigReader {
    pub(crate) fn new(ctx: Context) -> ConfigReader {
        ConfigReader { ctx }
    }

    /// One object of `namespace`.
    pub(crate) async fn get(&self, namespace: &str, kind: &'static str, name: &str) -> Fetched {
        let q = Message::new().with_route(source::EDGED, group::META, format!("{namespace}/{kind}/{name}"), op::QUERY);
        match self.ctx.send_sync(source::METAMANAGER, q, QUERY_DEADLINE).await {
            Ok(r) if r.route.operation == op::ERROR => {
                Fetched::Failed(r.content.as_text().map(|t| t.into_owned()).unwrap_or_else(|| "refused".into()))
            }
            Ok(r) => parse_answer(kind, &r.content.to_value()),
            Err(e) => Fetched::Failed(e.to_string()),
        }
    }

    /// Every object of `wanted`; an error names the first one that could
    /// not be read.
    pub(crate) async fn fetch(&self, namespace: &str, wanted: &[(&'static str, String)]) -> Result<Sources, String> {
        let mut out = Sources::new();
        for (kind, name) in wanted {
            if out.contains_key(&(*kind, name.clone())) {
                continue;
            }
            let found = match self.get(namespace, kind, name).await {
                Fetched::Found(d) => Some(d),
                Fetched::NotFound => None,
                Fetched::Failed(e) => return Err(format!("couldn't get {kind} {namespace}/{name}: {e}")),
            };
            out.insert((*kind, name.clone()), found);
        }
        Ok(out)
    }
}

/// MetaManager's answer: the store's (a JSON array of stored values, empty
/// when there is none) or the cloud's (the object, KubeEdge's `{"Object":
/// …, "Err": …}`, or a Kubernetes `StatusError` — 404 is "not found").
pub(crate) fn parse_answer(kind: &str, v: &Value) -> Fetched {
    let obj = match v {
        Value::Array(items) => match items.first() {
            None => return Fetched::NotFound,
            Some(s) => match s.as_str().and_then(|s| serde_json::from_str::<Value>(s).ok()) {
                Some(o) => o,
                None => return Fetched::Failed("the stored object is not readable".into()),
            },
        },
        Value::Object(o) => {
            let status = o.get("ErrStatus").or_else(|| o.get("Err").map(|e| e.get("ErrStatus").unwrap_or(e)));
            if let Some(s) = status.filter(|s| s.is_object()) {
                let not_found = s["code"].as_u64() == Some(404) || s["reason"] == "NotFound";
                return if not_found {
                    Fetched::NotFound
                } else {
                    Fetched::Failed(s["message"].as_str().unwrap_or("the cloud refused").to_owned())
                };
            }
            match o.get("Object") {
                Some(inner) if inner.is_object() => inner.clone(),
                _ if o.contains_key("metadata") || o.contains_key("data") => v.clone(),
                _ => return Fetched::Failed("unexpected answer".into()),
            }
        }
        _ => return Fetched::Failed("unexpected answer".into()),
    };
    Fetched::Found(object_data(kind, &obj))
}

/// The configmaps and secrets one container takes environment from.
pub(crate) fn env_sources(container: &Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for f in container["envFrom"].as_array().into_iter().flatten() {
        if let Some(n) = f.pointer("/configMapRef/name").and_then(Value::as_str) {
            out.push((rt::CONFIGMAP, n.to_owned()));
        }
        if let Some(n) = f.pointer("/secretRef/name").and_then(Value::as_str) {
            out.push((rt::SECRET, n.to_owned()));
        }
    }
    for e in container["env"].as_array().into_iter().flatten() {
        if let Some(n) = e.pointer("/valueFrom/configMapKeyRef/name").and_then(Value::as_str) {
            out.push((rt::CONFIGMAP, n.to_owned()));
        }
        if let Some(n) = e.pointer("/valueFrom/secretKeyRef/name").and_then(Value::as_str) {
            out.push((rt::SECRET, n.to_owned()));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// What a container's environment is made of, kept until it is built
/// (the pod's JSON is not kept while it runs).
#[derive(Debug, Clone)]
pub(crate) struct EnvPlan {
    /// The container's `env` and `envFrom`.
    env: Value,
    env_from: Value,
    pod_name: String,
    namespace: String,
    uid: String,
    node: String,
    node_ip: String,
}

fn kind_title(kind: &str) -> &'static str {
    if kind == rt::SECRET { "Secret" } else { "ConfigMap" }
}

impl EnvPlan {
    pub(crate) fn new(pod: &Value, container: &Value, node: &str, node_ip: &str) -> EnvPlan {
        let meta = &pod["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        EnvPlan {
            env: container["env"].clone(),
            env_from: container["envFrom"].clone(),
            pod_name: text(&meta["name"]),
            namespace: meta["namespace"].as_str().unwrap_or("default").to_owned(),
            uid: text(&meta["uid"]),
            node: node.to_owned(),
            node_ip: node_ip.to_owned(),
        }
    }

    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The configmaps and secrets it reads.
    pub(crate) fn sources(&self) -> Vec<(&'static str, String)> {
        env_sources(&serde_json::json!({"env": self.env, "envFrom": self.env_from}))
    }

    /// The environment, as kubelet builds it: `envFrom` first, then `env`
    /// (which overrides it). A missing object or key that is not
    /// `optional` is an error with kubelet's message.
    pub(crate) fn build(&self, pod_ip: &str, sources: &Sources) -> Result<Vec<(String, String)>, String> {
        let ns = self.namespace.as_str();
        let lookup = |kind: &'static str, name: &str| sources.get(&(kind, name.to_owned())).and_then(Option::as_ref);
        let mut env = vec![("HOSTNAME".to_owned(), self.pod_name.clone())];
        for f in self.env_from.as_array().into_iter().flatten() {
            let prefix = f["prefix"].as_str().unwrap_or_default();
            for (kind, field) in [(rt::CONFIGMAP, "configMapRef"), (rt::SECRET, "secretRef")] {
                let Some(name) = f[field]["name"].as_str() else { continue };
                match lookup(kind, name) {
                    Some(data) => env.extend(
                        data.iter().map(|(k, v)| (format!("{prefix}{k}"), String::from_utf8_lossy(v).into_owned())),
                    ),
                    None if f[field]["optional"].as_bool() == Some(true) => {}
                    None => return Err(format!("{kind} {name:?} not found")),
                }
            }
        }
        for e in self.env.as_array().into_iter().flatten() {
            let Some(var) = e["name"].as_str() else { continue };
            let value = if let Some(v) = e["value"].as_str() {
                Some(v.to_owned())
            } else if let Some(from) = e.get("valueFrom") {
                let keyed = [(rt::CONFIGMAP, "configMapKeyRef"), (rt::SECRET, "secretKeyRef")]
                    .into_iter()
                    .find_map(|(kind, field)| from.get(field).map(|r| (kind, r)));
                if let Some((kind, r)) = keyed {
                    let (name, key) = (r["name"].as_str().unwrap_or_default(), r["key"].as_str().unwrap_or_default());
                    let optional = r["optional"].as_bool() == Some(true);
                    match lookup(kind, name) {
                        Some(data) => match data.get(key) {
                            Some(b) => Some(String::from_utf8_lossy(b).into_owned()),
                            None if optional => None,
                            None => {
                                return Err(format!("couldn't find key {key} in {} {ns}/{name}", kind_title(kind)));
                            }
                        },
                        None if optional => None,
                        None => return Err(format!("{kind} {name:?} not found")),
                    }
                } else if let Some(path) = from.pointer("/fieldRef/fieldPath").and_then(Value::as_str) {
                    let v = match path {
                        "metadata.name" => Some(self.pod_name.clone()),
                        "metadata.namespace" => Some(self.namespace.clone()),
                        "metadata.uid" => Some(self.uid.clone()),
                        "spec.nodeName" => Some(self.node.clone()),
                        "status.podIP" => Some(pod_ip.to_owned()),
                        "status.hostIP" => Some(self.node_ip.clone()),
                        _ => None,
                    };
                    if v.is_none() {
                        tracing::warn!(pod = %format!("{ns}/{}", self.pod_name), env = var, path, "fieldRef not supported; left unset");
                    }
                    v
                } else {
                    tracing::warn!(pod = %format!("{ns}/{}", self.pod_name), env = var, "valueFrom not supported; left unset");
                    None
                }
            } else {
                Some(String::new())
            };
            if let Some(v) = value {
                env.retain(|(k, _)| k != var);
                env.push((var.to_owned(), v));
            }
        }
        Ok(env)
    }
}

/// Why the pod's configMap and secret volumes cannot be set up yet
/// (kubelet's `FailedMount` message), if they cannot: a missing object or
/// `items` key that is not `optional`.
pub(crate) fn volume_error(pod: &Value, sources: &Sources) -> Option<String> {
    for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
        let (kind, source, name) = if let Some(s) = v.get("configMap") {
            (rt::CONFIGMAP, s, s["name"].as_str())
        } else if let Some(s) = v.get("secret") {
            (rt::SECRET, s, s["secretName"].as_str())
        } else {
            continue;
        };
        let name = name.unwrap_or_default();
        if source["optional"].as_bool() == Some(true) {
            continue;
        }
        let failed = |why: String| {
            format!("MountVolume.SetUp failed for volume {:?} : {why}", v["name"].as_str().unwrap_or_default())
        };
        let Some(data) = sources.get(&(kind, name.to_owned())).and_then(Option::as_ref) else {
            return Some(failed(format!("{kind} {name:?} not found")));
        };
        for item in source["items"].as_array().into_iter().flatten() {
            let key = item["key"].as_str().unwrap_or_default();
            if !data.contains_key(key) {
                let what = if kind == rt::SECRET {
                    "references non-existent secret key"
                } else {
                    "configmap references non-existent config key"
                };
                return Some(failed(format!("{what}: {key}")));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data(pairs: &[(&str, &str)]) -> Option<Data> {
        Some(pairs.iter().map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec())).collect())
    }

    fn plan(container: Value) -> EnvPlan {
        let pod = json!({"metadata": {"name": "p", "namespace": "default", "uid": "u-1"}});
        EnvPlan::new(&pod, &container, "edge-1", "10.0.0.1")
    }

    #[test]
    fn answers_of_the_store_and_the_cloud() {
        let cm = json!({"metadata": {"name": "x"}, "data": {"k": "v"}});
        let found = Fetched::Found(data(&[("k", "v")]).unwrap());
        assert_eq!(parse_answer("configmap", &json!([cm.to_string()])), found);
        assert_eq!(parse_answer("configmap", &json!([])), Fetched::NotFound);
        assert_eq!(parse_answer("configmap", &cm), found);
        assert_eq!(parse_answer("configmap", &json!({"Object": cm, "Err": null})), found);
        let not_found = json!({"ErrStatus": {"metadata": {}, "status": "Failure", "reason": "NotFound", "code": 404}});
        assert_eq!(parse_answer("configmap", &not_found), Fetched::NotFound);
        assert_eq!(parse_answer("configmap", &json!({"Object": null, "Err": not_found})), Fetched::NotFound);
        let forbidden = json!({"ErrStatus": {"message": "no", "reason": "Forbidden", "code": 403}});
        assert_eq!(parse_answer("configmap", &forbidden), Fetched::Failed("no".into()));
        let secret = json!({"metadata": {"name": "s"}, "data": {"k": "czNjcmV0"}});
        assert_eq!(parse_answer("secret", &secret), Fetched::Found(data(&[("k", "s3cret")]).unwrap()));
    }

    #[test]
    fn missing_objects_and_keys_are_kubelets_errors_unless_optional() {
        let p = plan(json!({
            "envFrom": [{"configMapRef": {"name": "all"}, "prefix": "ALL_"}, {"secretRef": {"name": "maybe", "optional": true}}],
            "env": [
                {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
                {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope", "optional": true}}},
                {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "ALL_a", "value": "overridden"},
            ],
        }));
        assert_eq!(
            p.sources(),
            [
                ("configmap", "all".to_owned()),
                ("configmap", "cfg".to_owned()),
                ("secret", "creds".to_owned()),
                ("secret", "maybe".to_owned())
            ]
        );
        let mut s = Sources::new();
        assert_eq!(p.build("10.1.1.1", &s).unwrap_err(), r#"configmap "all" not found"#);
        s.insert(("configmap", "all".into()), data(&[("a", "1"), ("b", "2")]));
        s.insert(("secret", "maybe".into()), None);
        assert_eq!(p.build("10.1.1.1", &s).unwrap_err(), r#"configmap "cfg" not found"#);
        s.insert(("configmap", "cfg".into()), data(&[("other", "x")]));
        assert_eq!(p.build("10.1.1.1", &s).unwrap_err(), "couldn't find key greeting in ConfigMap default/cfg");
        s.insert(("configmap", "cfg".into()), data(&[("greeting", "hello")]));
        assert_eq!(p.build("10.1.1.1", &s).unwrap_err(), r#"secret "creds" not found"#);
        s.insert(("secret", "creds".into()), data(&[("user", "u")]));
        assert_eq!(p.build("10.1.1.1", &s).unwrap_err(), "couldn't find key password in Secret default/creds");
        s.insert(("secret", "creds".into()), data(&[("password", "s3cret")]));
        let env = p.build("10.1.1.1", &s).unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HOSTNAME"), Some("p"));
        assert_eq!(get("ALL_a"), Some("overridden"));
        assert_eq!(get("ALL_b"), Some("2"));
        assert_eq!(get("GREETING"), Some("hello"));
        assert_eq!(get("PASSWORD"), Some("s3cret"));
        assert_eq!(get("OPT"), None, "an optional key that is missing stays unset");
        assert_eq!(get("ME"), Some("p"));
        assert_eq!(get("IP"), Some("10.1.1.1"));
    }

    #[test]
    fn volumes_wait_for_required_objects_and_keys() {
        let pod = json!({"spec": {"volumes": [
            {"name": "cfg", "configMap": {"name": "cfg", "items": [{"key": "a", "path": "a.txt"}]}},
            {"name": "opt", "secret": {"secretName": "opt", "optional": true}},
            {"name": "creds", "secret": {"secretName": "creds"}},
            {"name": "scratch", "emptyDir": {}},
        ]}});
        let mut s = Sources::new();
        assert_eq!(
            volume_error(&pod, &s).as_deref(),
            Some(r#"MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found"#)
        );
        s.insert(("configmap", "cfg".into()), data(&[("b", "x")]));
        assert_eq!(
            volume_error(&pod, &s).as_deref(),
            Some(r#"MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: a"#)
        );
        s.insert(("configmap", "cfg".into()), data(&[("a", "x")]));
        assert_eq!(
            volume_error(&pod, &s).as_deref(),
            Some(r#"MountVolume.SetUp failed for volume "creds" : secret "creds" not found"#)
        );
        s.insert(("secret", "creds".into()), data(&[]));
        assert_eq!(volume_error(&pod, &s), None);
    }
}
