//! Field management and apply, checked against what Kubernetes records and answers.

use serde_json::{Value, json};

use super::*;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-01T00:01:00Z";

fn deploy_scope() -> Scope<'static> {
    Scope { group: "apps", kind: "Deployment", api_version: "apps/v1", subresource: None, status_subresource: true }
}

fn cm_scope() -> Scope<'static> {
    Scope { group: "", kind: "ConfigMap", api_version: "v1", subresource: None, status_subresource: false }
}

fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}]},
            },
        },
    })
}

/// What the store would hold: the object with an identity.
fn stored(mut v: Value) -> Value {
    v["metadata"]["uid"] = json!("u-1");
    v["metadata"]["resourceVersion"] = json!("5");
    v["metadata"]["creationTimestamp"] = json!(T0);
    v
}

fn entries(v: &Value) -> Vec<Value> {
    v.pointer("/metadata/managedFields").and_then(Value::as_array).cloned().unwrap_or_default()
}

fn entry<'a>(v: &'a Value, manager: &str) -> &'a Value {
    v.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no entry for {manager} in {v}"))
}

#[test]
fn apply_creates_with_an_apply_entry_of_the_applied_fields() {
    let out = apply(&deploy_scope(), None, &deployment(2, "nginx:1"), "web", "kubectl", false, T0).expect("apply");
    assert_eq!(out["spec"]["replicas"], 2);
    let e = entry(&out, "kubectl");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["time"], T0);
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e.get("subresource").is_none());
    assert_eq!(
        e["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}},
                    }}},
                },
            },
        })
    );
}

#[test]
fn create_records_an_update_entry_with_dots_for_new_maps_and_items() {
    let mut obj = stored(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"a": "b"}}, "data": {"k": "v"}}));
    record_update(&cm_scope(), None, &mut obj, "kubectl-create", T0);
    let e = entry(&obj, "kubectl-create");
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
    );
}

#[test]
fn an_update_of_an_untracked_object_stays_untracked() {
    let live = stored(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}));
    let mut new = live.clone();
    new["data"]["k"] = json!("w");
    record_update(&cm_scope(), Some(&live), &mut new, "kubectl-edit", T1);
    assert!(new.pointer("/metadata/managedFields").is_none());
}

#[test]
fn an_update_takes_changed_fields_and_moves_time_only_on_change() {
    let mut obj =
        stored(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}));
    record_update(&cm_scope(), None, &mut obj, "creator", T0);
    // A no-op update by another manager records nothing.
    let mut same = obj.clone();
    record_update(&cm_scope(), Some(&obj), &mut same, "kubectl-edit", T1);
    assert_eq!(same, obj);
    // A change moves the field to the editor, with the time of the change.
    let mut edited = obj.clone();
    edited["data"]["k"] = json!("w");
    edited["data"]["x"] = json!("y");
    record_update(&cm_scope(), Some(&obj), &mut edited, "kubectl-edit", T1);
    let e = entry(&edited, "kubectl-edit");
    assert_eq!(e["time"], T1);
    assert_eq!(e["fieldsV1"], json!({"f:data": {"f:k": {}, "f:x": {}}}));
    assert_eq!(entry(&edited, "creator")["fieldsV1"], json!({"f:data": {}}));
    assert_eq!(entry(&edited, "creator")["time"], T0);
}

#[test]
fn sent_managed_fields_win_garbage_and_absence_keep_the_live_ones_and_empty_resets() {
    let mut live =
        stored(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}));
    record_update(&cm_scope(), None, &mut live, "creator", T0);
    let kept = live["metadata"]["managedFields"].clone();

    let mut absent = managed::without(&live);
    record_update(&cm_scope(), Some(&live), &mut absent, "x", T1);
    assert_eq!(absent["metadata"]["managedFields"], kept);

    let mut garbage = live.clone();
    garbage["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Bogus", "apiVersion": "v1"}]);
    record_update(&cm_scope(), Some(&live), &mut garbage, "x", T1);
    assert_eq!(garbage["metadata"]["managedFields"], kept);

    let mut bad_fields = live.clone();
    bad_fields["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"zz": 1}}]);
    record_update(&cm_scope(), Some(&live), &mut bad_fields, "x", T1);
    assert_eq!(bad_fields["metadata"]["managedFields"], kept);

    for reset in [json!([]), json!([{}])] {
        let mut r = live.clone();
        r["metadata"]["managedFields"] = reset;
        record_update(&cm_scope(), Some(&live), &mut r, "x", T1);
        assert!(r.pointer("/metadata/managedFields").is_none(), "{r}");
    }

    let mut replaced = live.clone();
    replaced["metadata"]["managedFields"] = json!([{"manager": "someone", "operation": "Apply", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]);
    record_update(&cm_scope(), Some(&live), &mut replaced, "x", T1);
    assert_eq!(entries(&replaced).len(), 1);
    assert_eq!(entry(&replaced, "someone")["operation"], "Apply");
}

#[test]
fn a_second_applier_changing_an_owned_field_conflicts_unless_forced() {
    let scope = deploy_scope();
    let live = stored(apply(&scope, None, &deployment(2, "nginx:1"), "web", "kubectl", false, T0).expect("apply"));
    let other =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 5}});
    let err = apply(&scope, Some(&live), &other, "web", "other", false, T1).expect_err("conflict");
    assert_eq!(err.code.as_u16(), 409);
    assert_eq!(err.reason, "Conflict");
    assert_eq!(err.message, r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#);
    assert_eq!(err.details.causes.len(), 1);
    assert_eq!(err.details.causes[0].reason, "FieldManagerConflict");
    assert_eq!(err.details.causes[0].field, ".spec.replicas");

    // The same value is shared, not a conflict.
    let same =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}});
    let shared = apply(&scope, Some(&live), &same, "web", "other", false, T1).expect("shared");
    assert!(entry(&shared, "kubectl")["fieldsV1"].pointer("/f:spec/f:replicas").is_some());
    assert!(entry(&shared, "other")["fieldsV1"].pointer("/f:spec/f:replicas").is_some());

    let forced = apply(&scope, Some(&live), &other, "web", "other", true, T1).expect("forced");
    assert_eq!(forced["spec"]["replicas"], 5);
    assert!(entry(&forced, "kubectl")["fieldsV1"].pointer("/f:spec/f:replicas").is_none());
    assert!(entry(&forced, "other")["fieldsV1"].pointer("/f:spec/f:replicas").is_some());
    // The first applier's other fields stay its own.
    assert!(entry(&forced, "kubectl")["fieldsV1"].pointer("/f:spec/f:selector").is_some());
}

#[test]
fn conflicts_with_updaters_name_their_version_and_list_every_path() {
    let scope = deploy_scope();
    let mut live = stored(deployment(2, "nginx:1"));
    record_update(&scope, None, &mut live, "kubectl-client-side-apply", T0);
    let cfg = deployment(3, "nginx:2");
    let err = apply(&scope, Some(&live), &cfg, "web", "kubectl", false, T1).expect_err("conflicts");
    assert_eq!(
        err.message,
        "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"nginx\"].image"
    );
    assert_eq!(err.details.causes[0].message, r#"conflict with "kubectl-client-side-apply" using apps/v1"#);
}

#[test]
fn a_label_dropped_from_the_configuration_is_removed_unless_someone_else_owns_it() {
    let scope = cm_scope();
    let cfg = |labels: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": labels}, "data": {"k": "v"}});
    let live =
        stored(apply(&scope, None, &cfg(json!({"a": "1", "b": "2"})), "c", "kubectl", false, T0).expect("apply"));
    let out = apply(&scope, Some(&live), &cfg(json!({"a": "1"})), "c", "kubectl", false, T1).expect("re-apply");
    assert_eq!(out["metadata"]["labels"], json!({"a": "1"}));
    assert!(entry(&out, "kubectl")["fieldsV1"].pointer("/f:metadata/f:labels/f:b").is_none());

    // Dropping the last label removes the map.
    let none = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let out2 = apply(&scope, Some(&stored(out.clone())), &none, "c", "kubectl", false, T1).expect("apply");
    assert!(out2["metadata"].get("labels").is_none(), "{out2}");

    // A label another manager also applied stays.
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"b": "2"}}});
    let shared = stored(apply(&scope, Some(&live), &other, "c", "other", false, T1).expect("other"));
    let out3 = apply(&scope, Some(&shared), &cfg(json!({"a": "1"})), "c", "kubectl", false, T1).expect("apply");
    assert_eq!(out3["metadata"]["labels"], json!({"a": "1", "b": "2"}));
}

#[test]
fn a_field_set_by_an_updater_survives_the_appliers_removal() {
    let scope = cm_scope();
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v", "x": "1"}});
    let live = stored(apply(&scope, None, &cfg, "c", "kubectl", false, T0).expect("apply"));
    let mut edited = live.clone();
    edited["data"]["x"] = json!("2");
    record_update(&scope, Some(&live), &mut edited, "kubectl-edit", T1);
    let cfg2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let out = apply(&scope, Some(&edited), &cfg2, "c", "kubectl", false, T1).expect("apply");
    assert_eq!(out["data"], json!({"k": "v", "x": "2"}));
}

#[test]
fn keyed_lists_merge_by_key_and_drop_items_the_applier_dropped() {
    let scope = deploy_scope();
    let mut two = deployment(1, "nginx:1");
    two["spec"]["template"]["spec"]["containers"]
        .as_array_mut()
        .expect("list")
        .push(json!({"name": "sidecar", "image": "busybox"}));
    let live = stored(apply(&scope, None, &two, "web", "kubectl", false, T0).expect("apply"));
    let out = apply(&scope, Some(&live), &deployment(1, "nginx:1"), "web", "kubectl", false, T1).expect("apply");
    let names: Vec<&Value> =
        out["spec"]["template"]["spec"]["containers"].as_array().expect("list").iter().map(|c| &c["name"]).collect();
    assert_eq!(names, vec!["nginx"]);
    // Another applier adding a container keeps the first one's.
    let add = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "log", "image": "fluent"}]}}}});
    let both = apply(&scope, Some(&stored(out)), &add, "web", "logging", false, T1).expect("apply");
    let names: Vec<&Value> =
        both["spec"]["template"]["spec"]["containers"].as_array().expect("list").iter().map(|c| &c["name"]).collect();
    assert_eq!(names, vec!["nginx", "log"]);
}

#[test]
fn a_no_op_apply_keeps_the_object_and_the_time() {
    let scope = cm_scope();
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
    let live = stored(apply(&scope, None, &cfg, "c", "kubectl", false, T0).expect("apply"));
    let again = apply(&scope, Some(&live), &cfg, "c", "kubectl", false, T1).expect("apply");
    assert_eq!(again, live);
}

#[test]
fn the_first_apply_to_an_untracked_object_gives_its_fields_to_before_first_apply() {
    let scope = cm_scope();
    let live = stored(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}));
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "w"}});
    let err = apply(&scope, Some(&live), &cfg, "c", "kubectl", false, T1).expect_err("conflict");
    assert_eq!(err.message, r#"Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.k"#);
}

#[test]
fn status_is_left_to_the_status_subresource() {
    let scope = deploy_scope();
    let mut cfg = deployment(1, "nginx:1");
    cfg["status"] = json!({"replicas": 7});
    let out = apply(&scope, None, &cfg, "web", "kubectl", false, T0).expect("apply");
    assert!(out.get("status").is_none());
    assert!(entry(&out, "kubectl")["fieldsV1"].get("f:status").is_none());
}

#[test]
fn a_configuration_of_another_type_or_with_managed_fields_is_refused() {
    let scope = deploy_scope();
    let mut wrong_kind = deployment(1, "a");
    wrong_kind["kind"] = json!("ReplicaSet");
    let e = apply(&scope, None, &wrong_kind, "web", "m", false, T0).expect_err("kind");
    assert_eq!((e.code.as_u16(), e.message.as_str()), (400, "invalid object type: apps/v1, Kind=ReplicaSet"));
    let mut wrong_version = deployment(1, "a");
    wrong_version["apiVersion"] = json!("apps/v1beta1");
    let e = apply(&scope, None, &wrong_version, "web", "m", false, T0).expect_err("version");
    assert_eq!(
        e.message,
        "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
    );
    let mut with_mf = deployment(1, "a");
    with_mf["metadata"]["managedFields"] = json!([]);
    let e = apply(&scope, None, &with_mf, "web", "m", false, T0).expect_err("managedFields");
    assert_eq!(e.message, "metadata.managedFields must be nil");
    let e = apply(&scope, None, &deployment(1, "a"), "other", "m", false, T0).expect_err("name");
    assert_eq!(e.message, "the name of the object (web) does not match the name on the URL (other)");
    let mut no_key = deployment(1, "a");
    no_key["spec"]["template"]["spec"]["containers"] = json!([{"image": "x"}]);
    let e = apply(&scope, None, &no_key, "web", "m", false, T0).expect_err("key");
    assert_eq!(e.code.as_u16(), 500);
    assert!(
        e.message.contains(r#"associative list with keys has an element that omits key field "name""#),
        "{}",
        e.message
    );
}

#[test]
fn manager_names_and_options() {
    assert_eq!(
        manager_name(None, Some("kubectl-client-side-apply/v1.33.0 (linux/amd64)")),
        "kubectl-client-side-apply"
    );
    assert_eq!(manager_name(Some("mine"), Some("kubectl/v1")), "mine");
    assert_eq!(manager_name(None, Some("a\u{7}b/1")), "ab");
    assert_eq!(manager_name(None, Some(&"x".repeat(200))).len(), 128);
    let e = check_options("PatchOptions", None, true, None).expect_err("required");
    assert_eq!(e.code.as_u16(), 422);
    assert_eq!(
        e.message,
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#
    );
    let e = check_options("PatchOptions", Some("m"), false, Some("true")).expect_err("force");
    assert_eq!(
        e.message,
        r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#
    );
    let e = check_options("CreateOptions", Some(&"m".repeat(129)), false, None).expect_err("long");
    assert!(
        e.message.starts_with(r#"CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: "#),
        "{}",
        e.message
    );
    assert!(check_options("PatchOptions", Some("m"), true, Some("true")).is_ok());
    assert!(check_options("UpdateOptions", None, false, None).is_ok());
}

#[test]
fn sets_merge_by_value_and_service_ports_key_by_port_and_protocol() {
    let scope = cm_scope();
    let cfg = |f: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": f}});
    let live = stored(apply(&scope, None, &cfg(json!(["a/x", "b/y"])), "c", "one", false, T0).expect("apply"));
    assert!(entry(&live, "one")["fieldsV1"].pointer("/f:metadata/f:finalizers/v:\"a~1x\"").is_some(), "{live}");
    let two = stored(apply(&scope, Some(&live), &cfg(json!(["c/z"])), "c", "two", false, T1).expect("apply"));
    assert_eq!(two["metadata"]["finalizers"], json!(["a/x", "b/y", "c/z"]));
    let out = apply(&scope, Some(&two), &cfg(json!(["a/x"])), "c", "one", false, T1).expect("apply");
    assert_eq!(out["metadata"]["finalizers"], json!(["a/x", "c/z"]));

    let svc = Scope { group: "", kind: "Service", api_version: "v1", subresource: None, status_subresource: true };
    let cfg = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
    let out = apply(&svc, None, &cfg, "s", "m", false, T0).expect("apply");
    assert!(
        entry(&out, "m")["fieldsV1"]
            .pointer("/f:spec/f:ports/k:{\"port\":80,\"protocol\":\"TCP\"}/f:targetPort")
            .is_some(),
        "{out}"
    );
}
