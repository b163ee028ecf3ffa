use super::*;

fn crd(name: &str, created: &str, plural: &str, kind: &str, versions: Value) -> Value {
    let group = name.split_once('.').map(|(_, g)| g).unwrap_or_default();
    json!({
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind, "listKind": format!("{kind}List")},
            "versions": versions},
    })
}

fn schema() -> Value {
    json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}}}})
}

#[test]
fn versions_sort_as_kubernetes_sorts_them() {
    let mut v = vec!["v1alpha1", "foo", "v2", "v1beta2", "v1", "v1beta1", "bar", "v10"];
    v.sort_by(|a, b| version_order(a, b));
    assert_eq!(v, ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "bar", "foo"]);
}

#[test]
fn served_versions_share_one_storage_the_storage_version_first() {
    let versions = json!([
        {"name": "v1beta1", "served": true, "storage": false, "schema": schema()},
        {"name": "v1", "served": true, "storage": true, "schema": schema(),
         "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.n"}}},
        {"name": "v1alpha1", "served": false, "storage": false, "schema": schema()},
    ]);
    let p = plan(&[crd("widgets.example.com", "2026-01-01T00:00:00Z", "widgets", "Widget", versions)]);
    let served: Vec<(&str, &str, &str)> =
        p.served.iter().map(|s| (s.def.version, s.def.storage, s.def.stored_version)).collect();
    assert_eq!(served, [("v1", "example.com/widgets", ""), ("v1beta1", "example.com/widgets", "v1")]);
    let v1 = &p.served[0];
    assert!(v1.def.status_subresource && v1.def.scale_subresource && v1.def.custom && v1.def.namespaced);
    assert_eq!(v1.scale.as_ref().map(|s| s.spec.as_str()), Some("/spec/size"));
    assert!(!p.served[1].def.status_subresource, "subresources are per version");
    let status = &p.statuses["widgets.example.com"];
    assert_eq!(status["conditions"][0]["type"], "NamesAccepted");
    assert_eq!(status["conditions"][0]["reason"], "NoConflicts");
    assert_eq!(status["conditions"][1]["type"], "Established");
    assert_eq!(status["conditions"][1]["status"], "True");
    assert_eq!(status["storedVersions"], json!(["v1"]));
    assert_eq!(status["acceptedNames"]["kind"], "Widget");
}

#[test]
fn the_older_definition_keeps_a_name_and_the_newer_is_not_served() {
    let v = json!([{"name": "v1", "served": true, "storage": true, "schema": schema()}]);
    let first = crd("widgets.example.com", "2026-01-01T00:00:00Z", "widgets", "Widget", v.clone());
    let second = crd("gadgets.example.com", "2026-01-02T00:00:00Z", "gadgets", "Widget", v);
    let p = plan(&[second, first]);
    assert_eq!(p.served.iter().map(|s| s.def.plural).collect::<Vec<_>>(), ["widgets"]);
    let s = &p.statuses["gadgets.example.com"];
    assert_eq!(s["conditions"][0]["status"], "False");
    assert_eq!(s["conditions"][0]["reason"], "KindConflict");
    assert_eq!(s["conditions"][0]["message"], "\"Widget\" is already in use");
    assert_eq!(s["conditions"][1]["reason"], "NotAccepted");
}

#[test]
fn a_definition_of_a_built_in_resource_is_established_but_the_built_in_serves() {
    let v = json!([{"name": "v1beta1", "served": true, "storage": true, "schema": schema()}]);
    let p = plan(&[crd("devices.devices.kubeedge.io", "2026-01-01T00:00:00Z", "devices", "Device", v)]);
    assert!(p.served.is_empty());
    assert!(p.builtin.contains("devices.devices.kubeedge.io"));
    assert_eq!(p.statuses["devices.devices.kubeedge.io"]["conditions"][1]["status"], "True");
}

#[test]
fn an_unchanged_condition_keeps_its_transition_time() {
    let mut c = crd("widgets.example.com", "2026-01-01T00:00:00Z", "widgets", "Widget", json!([]));
    c["status"] = json!({"conditions": [{"type": "NamesAccepted", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]});
    assert_eq!(
        condition(&c, "NamesAccepted", true, "NoConflicts", "", "later")["lastTransitionTime"],
        "2026-01-01T00:00:05Z"
    );
    assert_eq!(condition(&c, "NamesAccepted", false, "KindConflict", "", "later")["lastTransitionTime"], "later");
}
