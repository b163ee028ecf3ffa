//! PATCH bodies as kubectl sends them: JSON merge patch (RFC 7386 appendix), JSON patch
//! (RFC 6902 operations and pointers), and strategic merge patch (kubectl apply's three-way
//! patches with `$setElementOrder`, kubectl edit, label, annotate, patch), plus randomised
//! checks that no input panics and that failed patches leave the target alone.

use edgehive_registry::patch::{PatchError, json_patch, merge_patch, strategic_merge_patch, supports_strategic};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// helpers

fn merged(target: Value, patch: Value) -> Value {
    let mut t = target;
    merge_patch(&mut t, &patch);
    t
}

fn jp(target: &Value, patch: Value) -> Result<Value, PatchError> {
    let mut t = target.clone();
    let r = json_patch(&mut t, &patch);
    if r.is_err() {
        assert_eq!(&t, target, "a failed JSON patch must leave the target unchanged");
    }
    r.map(|()| t)
}

fn smp_kind(group: &str, kind: &str, target: &Value, patch: Value) -> Result<Value, PatchError> {
    let mut t = target.clone();
    let r = strategic_merge_patch(&mut t, &patch, group, kind);
    match &r {
        Ok(()) => assert_no_directives(&t),
        Err(_) => assert_eq!(&t, target, "a failed strategic merge patch must leave the target unchanged"),
    }
    r.map(|()| t)
}

fn smp(kind: &str, target: &Value, patch: Value) -> Value {
    match smp_kind("", kind, target, patch) {
        Ok(v) => v,
        Err(e) => panic!("strategic merge patch failed: {e}"),
    }
}

fn smp_err(kind: &str, target: &Value, patch: Value) -> PatchError {
    match smp_kind("", kind, target, patch) {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e,
    }
}

fn assert_no_directives(v: &Value) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                assert!(!k.starts_with('$'), "directive {k:?} left in the result");
                assert_no_directives(v);
            }
        }
        Value::Array(l) => l.iter().for_each(assert_no_directives),
        _ => {}
    }
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|l| l.iter().filter_map(|v| v.get("name").and_then(Value::as_str)).collect())
        .unwrap_or_default()
}

fn is_malformed(e: &PatchError) -> bool {
    matches!(e, PatchError::Malformed(_))
}

fn is_unapplicable(e: &PatchError) -> bool {
    matches!(e, PatchError::Unapplicable(_))
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "front"},
            "finalizers": ["a.example.com/x", "b.example.com/y"]
        },
        "spec": {
            "nodeName": "edge-1",
            "nodeSelector": {"zone": "a", "disk": "hdd"},
            "containers": [
                {
                    "name": "app",
                    "image": "app:1",
                    "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
                    "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]
                },
                {"name": "proxy", "image": "envoy:1"}
            ],
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "host", "hostPath": {"path": "/var/log"}}
            ],
            "tolerations": [{"key": "edge", "operator": "Exists"}]
        }
    })
}

// ---------------------------------------------------------------------------------------
// JSON merge patch: RFC 7386 section 3 and appendix A

#[test]
fn merge_patch_rfc7386_section3_example() {
    let target = json!({"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"},
        "tags": ["example", "sample"], "content": "This will be unchanged"});
    let patch = json!({"title": "Hello!", "phoneNumber": "+01-123-456-7890",
        "author": {"familyName": null}, "tags": ["example"]});
    let want = json!({"title": "Hello!", "author": {"givenName": "John"}, "tags": ["example"],
        "content": "This will be unchanged", "phoneNumber": "+01-123-456-7890"});
    assert_eq!(merged(target, patch), want);
}

#[test]
fn merge_patch_rfc7386_appendix_a() {
    let cases = [
        (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
        (json!({"a": "b"}), json!({"a": null}), json!({})),
        (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
        (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
        (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
        (json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}}), json!({"a": {"b": "d"}})),
        (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a": "b"}), json!(["c"]), json!(["c"])),
        (json!({"a": "foo"}), json!(null), json!(null)),
        (json!({"a": "foo"}), json!("bar"), json!("bar")),
        (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
        (json!([1, 2]), json!({"a": "b", "c": null}), json!({"a": "b"})),
        (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
    ];
    for (i, (target, patch, want)) in cases.into_iter().enumerate() {
        assert_eq!(merged(target, patch), want, "appendix A case {}", i + 1);
    }
}

#[test]
fn merge_patch_as_kubectl_label_and_annotate_send_it() {
    let p = pod();
    let out = merged(p.clone(), json!({"metadata": {"labels": {"tier": null, "env": "prod"}}}));
    assert_eq!(out["metadata"]["labels"], json!({"app": "web", "env": "prod"}));
    let out = merged(out, json!({"metadata": {"annotations": {"owner": "ops"}}}));
    assert_eq!(out["metadata"]["annotations"], json!({"owner": "ops"}));
    // Lists are replaced whole by a merge patch, even the ones strategic patch merges.
    let out = merged(out, json!({"spec": {"containers": [{"name": "only", "image": "x"}]}}));
    assert_eq!(names(&out["spec"]["containers"]), ["only"]);
    assert_eq!(out["spec"]["nodeName"], p["spec"]["nodeName"]);
}

// ---------------------------------------------------------------------------------------
// JSON patch: RFC 6902

#[test]
fn json_patch_add_object_member_and_array_element() {
    let doc = json!({"foo": ["bar", "baz"]});
    assert_eq!(
        jp(&doc, json!([{"op": "add", "path": "/baz", "value": "qux"}])),
        Ok(json!({"foo": ["bar", "baz"], "baz": "qux"}))
    );
    assert_eq!(
        jp(&doc, json!([{"op": "add", "path": "/foo/1", "value": "qux"}])),
        Ok(json!({"foo": ["bar", "qux", "baz"]}))
    );
    assert_eq!(
        jp(&doc, json!([{"op": "add", "path": "/foo/2", "value": "end"}])),
        Ok(json!({"foo": ["bar", "baz", "end"]}))
    );
    assert_eq!(
        jp(&doc, json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}])),
        Ok(json!({"foo": ["bar", "baz", ["abc", "def"]]}))
    );
    // Adding an existing member replaces it.
    assert_eq!(jp(&json!({"a": 1}), json!([{"op": "add", "path": "/a", "value": 2}])), Ok(json!({"a": 2})));
}

#[test]
fn json_patch_remove_replace_move_copy() -> Result<(), PatchError> {
    let doc = json!({"baz": "qux", "foo": "bar", "list": [1, 2, 3], "obj": {"x": {"y": 1}}});
    assert_eq!(jp(&doc, json!([{"op": "remove", "path": "/baz"}]))?["baz"], Value::Null);
    assert_eq!(jp(&doc, json!([{"op": "remove", "path": "/list/1"}]))?["list"], json!([1, 3]));
    assert_eq!(jp(&doc, json!([{"op": "replace", "path": "/baz", "value": "boo"}]))?["baz"], json!("boo"));
    assert_eq!(jp(&doc, json!([{"op": "replace", "path": "/list/0", "value": 9}]))?["list"], json!([9, 2, 3]));
    let moved = jp(&doc, json!([{"op": "move", "from": "/obj/x", "path": "/moved"}]))?;
    assert_eq!(moved["moved"], json!({"y": 1}));
    assert_eq!(moved["obj"], json!({}));
    assert_eq!(jp(&doc, json!([{"op": "move", "from": "/list/0", "path": "/list/2"}]))?["list"], json!([2, 3, 1]));
    let copied = jp(&doc, json!([{"op": "copy", "from": "/obj", "path": "/obj2"}]))?;
    assert_eq!(copied["obj2"], copied["obj"]);
    assert_eq!(jp(&doc, json!([{"op": "copy", "from": "/list/2", "path": "/list/-"}]))?["list"], json!([1, 2, 3, 3]));
    Ok(())
}

#[test]
fn json_patch_test_op_compares_json_values() {
    let doc = json!({"baz": "qux", "foo": ["a", 2, "c"], "n": 10});
    let ok = json!([
        {"op": "test", "path": "/baz", "value": "qux"},
        {"op": "test", "path": "/foo/1", "value": 2},
        {"op": "test", "path": "/n", "value": 10.0},
        {"op": "test", "path": "/foo", "value": ["a", 2.0, "c"]}
    ]);
    assert_eq!(jp(&doc, ok), Ok(doc.clone()));
    let err = jp(&doc, json!([{"op": "test", "path": "/baz", "value": "bar"}])).expect_err("test fails");
    assert!(is_unapplicable(&err), "{err}");
    let err = jp(&doc, json!([{"op": "test", "path": "/n", "value": "10"}])).expect_err("string is not number");
    assert!(is_unapplicable(&err), "{err}");
}

#[test]
fn json_patch_failed_test_rolls_back_earlier_operations() {
    let node = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"unschedulable": false}});
    let patch = json!([
        {"op": "replace", "path": "/spec/unschedulable", "value": true},
        {"op": "add", "path": "/metadata/labels/b", "value": "2"},
        {"op": "test", "path": "/metadata/labels/a", "value": "changed-meanwhile"}
    ]);
    let mut target = node.clone();
    let err = json_patch(&mut target, &patch).expect_err("test fails");
    assert!(is_unapplicable(&err));
    assert_eq!(target, node);
}

#[test]
fn json_patch_pointer_escapes() {
    // The annotation key "example.com/owner~team" as a JSON pointer token.
    let doc = json!({"metadata": {"annotations": {"example.com/owner~team": "a"}}});
    let out = jp(
        &doc,
        json!([
            {"op": "test", "path": "/metadata/annotations/example.com~1owner~0team", "value": "a"},
            {"op": "replace", "path": "/metadata/annotations/example.com~1owner~0team", "value": "b"},
            {"op": "add", "path": "/metadata/annotations/~01", "value": "tilde-one"}
        ]),
    )
    .expect("escaped pointers");
    assert_eq!(out["metadata"]["annotations"], json!({"example.com/owner~team": "b", "~1": "tilde-one"}));
    // RFC 6902 appendix A.14 and A.11: "~01" is "~1", and unknown members are ignored.
    let doc = json!({"/": 9, "~1": 10});
    assert_eq!(jp(&doc, json!([{"op": "test", "path": "/~01", "value": 10, "extra": true}])), Ok(doc.clone()));
    assert_eq!(jp(&json!({"": 1}), json!([{"op": "test", "path": "/", "value": 1}])), Ok(json!({"": 1})));
}

#[test]
fn json_patch_paths_that_do_not_exist_are_unapplicable() {
    let doc = json!({"foo": "bar", "list": [1, 2]});
    let cases = [
        json!([{"op": "remove", "path": "/nope"}]),
        json!([{"op": "replace", "path": "/nope", "value": 1}]),
        json!([{"op": "add", "path": "/baz/bat", "value": "qux"}]),
        json!([{"op": "add", "path": "/list/3", "value": 3}]),
        json!([{"op": "add", "path": "/list/01", "value": 3}]),
        json!([{"op": "remove", "path": "/list/2"}]),
        json!([{"op": "remove", "path": "/list/-"}]),
        json!([{"op": "replace", "path": "/list/-1", "value": 0}]),
        json!([{"op": "move", "from": "/nope", "path": "/x"}]),
        json!([{"op": "copy", "from": "/list/5", "path": "/x"}]),
        json!([{"op": "test", "path": "/nope", "value": null}]),
        json!([{"op": "add", "path": "/foo/x", "value": 1}]),
    ];
    for patch in cases {
        let err = jp(&doc, patch.clone()).expect_err("must fail");
        assert!(is_unapplicable(&err), "{patch}: {err}");
    }
}

#[test]
fn json_patch_malformed_documents() {
    let doc = json!({"foo": "bar"});
    let cases = [
        json!({"op": "add", "path": "/a", "value": 1}),
        json!("add"),
        json!([1]),
        json!([{"path": "/a", "value": 1}]),
        json!([{"op": "add", "value": 1}]),
        json!([{"op": "add", "path": "/a"}]),
        json!([{"op": "replace", "path": "/foo"}]),
        json!([{"op": "test", "path": "/foo"}]),
        json!([{"op": "move", "path": "/a"}]),
        json!([{"op": "copy", "path": "/a", "from": 3}]),
        json!([{"op": "frobnicate", "path": "/a"}]),
        json!([{"op": 1, "path": "/a"}]),
        json!([{"op": "add", "path": "a", "value": 1}]),
        json!([{"op": "add", "path": "/a~2", "value": 1}]),
        json!([{"op": "add", "path": "/a~", "value": 1}]),
        json!([{"op": "move", "from": "/foo", "path": "/foo/bar"}]),
        // A well-formed operation before a malformed one changes nothing.
        json!([{"op": "add", "path": "/x", "value": 1}, {"op": "nope", "path": "/x"}]),
    ];
    for patch in cases {
        let err = jp(&doc, patch.clone()).expect_err("must fail");
        assert!(is_malformed(&err), "{patch}: {err}");
        assert_eq!(err.http_status(), 400);
    }
}

#[test]
fn json_patch_as_kubectl_patch_type_json_sends_it() {
    let p = pod();
    let out = jp(
        &p,
        json!([
            {"op": "replace", "path": "/spec/containers/0/image", "value": "app:2"},
            {"op": "add", "path": "/spec/containers/0/env/-", "value": {"name": "Z", "value": "3"}},
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "add", "path": "/metadata/labels/new", "value": "yes"}
        ]),
    )
    .expect("applies");
    assert_eq!(out["spec"]["containers"][0]["image"], "app:2");
    assert_eq!(names(&out["spec"]["containers"][0]["env"]), ["X", "Y", "Z"]);
    assert_eq!(out["metadata"]["finalizers"], json!(["b.example.com/y"]));
    assert_eq!(out["metadata"]["labels"]["new"], "yes");
}

// ---------------------------------------------------------------------------------------
// strategic merge patch: kinds

#[test]
fn strategic_is_supported_for_built_in_kinds_only() {
    for (g, k) in [
        ("", "Pod"),
        ("", "Node"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "Service"),
        ("", "Endpoints"),
        ("", "Namespace"),
        ("", "Event"),
        ("coordination.k8s.io", "Lease"),
    ] {
        assert!(supports_strategic(g, k), "{g}/{k}");
    }
    for (g, k) in [
        ("devices.kubeedge.io", "Device"),
        ("devices.kubeedge.io", "DeviceModel"),
        ("reliablesyncs.kubeedge.io", "ObjectSync"),
        ("", "pod"),
        ("apps", "Pod"),
    ] {
        assert!(!supports_strategic(g, k), "{g}/{k}");
    }
    let err = smp_kind("devices.kubeedge.io", "Device", &json!({}), json!({"spec": {}})).expect_err("CRD");
    assert!(is_malformed(&err));
}

// ---------------------------------------------------------------------------------------
// strategic merge patch: kubectl apply (three-way patches)

#[test]
fn apply_changes_one_image_keeping_the_container_order() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "proxy"}],
            "containers": [{"image": "app:2", "name": "app"}]
        }}),
    );
    let containers = &out["spec"]["containers"];
    assert_eq!(names(containers), ["app", "proxy"]);
    assert_eq!(containers[0]["image"], "app:2");
    // The rest of the container is untouched.
    assert_eq!(containers[0]["env"], pod()["spec"]["containers"][0]["env"]);
    assert_eq!(containers[1], json!({"name": "proxy", "image": "envoy:1"}));
}

#[test]
fn apply_adds_a_container_where_the_manifest_puts_it() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "logger"}, {"name": "proxy"}],
            "containers": [{"image": "fluentbit:2", "name": "logger"}]
        }}),
    );
    assert_eq!(names(&out["spec"]["containers"]), ["app", "logger", "proxy"]);
    assert_eq!(out["spec"]["containers"][1], json!({"name": "logger", "image": "fluentbit:2"}));
}

#[test]
fn apply_removes_a_container() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "app"}],
            "containers": [{"$patch": "delete", "name": "proxy"}]
        }}),
    );
    assert_eq!(names(&out["spec"]["containers"]), ["app"]);
}

#[test]
fn apply_reorders_containers_without_changing_them() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "proxy"}, {"name": "app"}]
        }}),
    );
    assert_eq!(names(&out["spec"]["containers"]), ["proxy", "app"]);
    assert_eq!(out["spec"]["containers"][1]["env"], pod()["spec"]["containers"][0]["env"]);
}

#[test]
fn apply_keeps_server_only_containers_where_they_were() {
    // A sidecar injected by the server stands between the applied containers.
    let mut live = pod();
    live["spec"]["containers"] = json!([
        {"name": "app", "image": "app:1"},
        {"name": "injected", "image": "mesh:1"},
        {"name": "proxy", "image": "envoy:1"}
    ]);
    let out = smp(
        "Pod",
        &live,
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "proxy"}],
            "containers": [{"image": "envoy:2", "name": "proxy"}]
        }}),
    );
    assert_eq!(names(&out["spec"]["containers"]), ["app", "injected", "proxy"]);
    assert_eq!(out["spec"]["containers"][2]["image"], "envoy:2");

    // Swapping the applied ones: the server-only one stays before the one it preceded.
    let out = smp(
        "Pod",
        &live,
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "proxy"}, {"name": "app"}]
        }}),
    );
    assert_eq!(names(&out["spec"]["containers"]), ["injected", "proxy", "app"]);
}

#[test]
fn apply_changes_env_with_nested_element_order_and_deletes_a_variable() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "proxy"}],
            "containers": [{
                "$setElementOrder/env": [{"name": "Z"}, {"name": "X"}],
                "env": [{"name": "Z", "value": "3"}, {"$patch": "delete", "name": "Y"}],
                "name": "app"
            }]
        }}),
    );
    assert_eq!(out["spec"]["containers"][0]["env"], json!([{"name": "Z", "value": "3"}, {"name": "X", "value": "1"}]));
}

#[test]
fn apply_changes_a_port_and_adds_a_volume_mount() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "proxy"}],
            "containers": [{
                "$setElementOrder/ports": [{"containerPort": 8080}],
                "$setElementOrder/volumeMounts": [{"mountPath": "/data"}, {"mountPath": "/logs"}],
                "name": "app",
                "ports": [{"containerPort": 8080, "name": "http"}],
                "volumeMounts": [{"mountPath": "/logs", "name": "host"}]
            }]
        }}),
    );
    let app = &out["spec"]["containers"][0];
    assert_eq!(app["ports"], json!([{"containerPort": 8080, "protocol": "TCP", "name": "http"}]));
    assert_eq!(
        app["volumeMounts"],
        json!([{"name": "data", "mountPath": "/data"}, {"name": "host", "mountPath": "/logs"}])
    );
}

#[test]
fn apply_switches_a_volume_from_empty_dir_to_config_map_with_retain_keys() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"spec": {
            "$setElementOrder/volumes": [{"name": "data"}, {"name": "host"}],
            "volumes": [{"$retainKeys": ["configMap", "name"], "configMap": {"name": "settings"}, "name": "data"}]
        }}),
    );
    assert_eq!(
        out["spec"]["volumes"],
        json!([
            {"name": "data", "configMap": {"name": "settings"}},
            {"name": "host", "hostPath": {"path": "/var/log"}}
        ])
    );

    // Without the directive the old source would stay: that is what $retainKeys is for.
    let out = smp("Pod", &pod(), json!({"spec": {"volumes": [{"configMap": {"name": "settings"}, "name": "data"}]}}));
    assert_eq!(out["spec"]["volumes"][0], json!({"name": "data", "emptyDir": {}, "configMap": {"name": "settings"}}));
}

#[test]
fn retain_keys_must_list_every_patched_field() {
    let err = smp_err(
        "Pod",
        &pod(),
        json!({"spec": {"volumes": [
            {"$retainKeys": ["name"], "configMap": {"name": "settings"}, "name": "data"}
        ]}}),
    );
    assert!(is_malformed(&err), "{err}");
    let err = smp_err("Pod", &pod(), json!({"spec": {"volumes": [{"$retainKeys": "name", "name": "data"}]}}));
    assert!(is_malformed(&err), "{err}");
    // A null (a deletion) need not be listed.
    let out =
        smp("Pod", &pod(), json!({"spec": {"volumes": [{"$retainKeys": ["name"], "emptyDir": null, "name": "data"}]}}));
    assert_eq!(out["spec"]["volumes"][0], json!({"name": "data"}));
}

#[test]
fn apply_adds_and_removes_finalizers() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"metadata": {
            "$deleteFromPrimitiveList/finalizers": ["a.example.com/x"],
            "$setElementOrder/finalizers": ["b.example.com/y", "c.example.com/z"],
            "finalizers": ["c.example.com/z"]
        }}),
    );
    assert_eq!(out["metadata"]["finalizers"], json!(["b.example.com/y", "c.example.com/z"]));
}

#[test]
fn finalizers_merge_as_a_set() {
    // kubectl patch --type strategic: the patch's values go first, as Kubernetes puts them.
    let out = smp("Pod", &pod(), json!({"metadata": {"finalizers": ["c.example.com/z"]}}));
    assert_eq!(out["metadata"]["finalizers"], json!(["c.example.com/z", "a.example.com/x", "b.example.com/y"]));
    // A value already there is not repeated and does not move.
    let out = smp("Pod", &pod(), json!({"metadata": {"finalizers": ["b.example.com/y"]}}));
    assert_eq!(out["metadata"]["finalizers"], json!(["a.example.com/x", "b.example.com/y"]));
    // Deleting from the list.
    let out =
        smp("Pod", &pod(), json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b.example.com/y", "absent"]}}));
    assert_eq!(out["metadata"]["finalizers"], json!(["a.example.com/x"]));
    // null removes the whole list.
    let out = smp("Pod", &pod(), json!({"metadata": {"finalizers": null}}));
    assert!(out["metadata"].get("finalizers").is_none());
    // Deleting from a list that is not there is not an error.
    let out = smp(
        "ConfigMap",
        &json!({"metadata": {"name": "c"}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
    );
    assert_eq!(out, json!({"metadata": {"name": "c"}}));
}

#[test]
fn owner_references_merge_by_uid() {
    let cm = json!({"metadata": {"name": "c", "ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1"}
    ]}});
    let out = smp(
        "ConfigMap",
        &cm,
        json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u2", "controller": true}
        ]}}),
    );
    let uids: Vec<&str> = out["metadata"]["ownerReferences"]
        .as_array()
        .map(|l| l.iter().filter_map(|o| o["uid"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(uids, ["u2", "u1"]);
}

// ---------------------------------------------------------------------------------------
// strategic merge patch: kubectl edit / label / annotate / patch

#[test]
fn edit_changes_a_label_and_an_env_value() {
    let out = smp(
        "Pod",
        &pod(),
        json!({
            "metadata": {"labels": {"tier": null, "track": "canary"}},
            "spec": {
                "$setElementOrder/containers": [{"name": "app"}, {"name": "proxy"}],
                "containers": [{"$setElementOrder/env": [{"name": "X"}, {"name": "Y"}], "env": [{"name": "X", "value": "9"}], "name": "app"}]
            }
        }),
    );
    assert_eq!(out["metadata"]["labels"], json!({"app": "web", "track": "canary"}));
    assert_eq!(out["spec"]["containers"][0]["env"], json!([{"name": "X", "value": "9"}, {"name": "Y", "value": "2"}]));
}

#[test]
fn patch_deletes_an_env_var_by_name() {
    let out = smp(
        "Pod",
        &pod(),
        json!({"spec": {"containers": [{"name": "app", "env": [{"name": "X", "$patch": "delete"}]}]}}),
    );
    assert_eq!(out["spec"]["containers"][0]["env"], json!([{"name": "Y", "value": "2"}]));
    assert_eq!(names(&out["spec"]["containers"]), ["app", "proxy"]);
    // Deleting an element that is not there changes nothing.
    let out = smp("Pod", &pod(), json!({"spec": {"containers": [{"name": "ghost", "$patch": "delete"}]}}));
    assert_eq!(out, pod());
}

#[test]
fn patch_without_element_order_puts_new_elements_first() {
    // `kubectl patch -p '{"spec":{"containers":[...]}}'` on a Pod with app and proxy.
    let out = smp("Pod", &pod(), json!({"spec": {"containers": [{"name": "debug", "image": "busybox"}]}}));
    assert_eq!(names(&out["spec"]["containers"]), ["debug", "app", "proxy"]);
    // An existing element named by the patch stays where it was relative to the others.
    let out = smp("Pod", &pod(), json!({"spec": {"containers": [{"name": "proxy", "image": "envoy:2"}]}}));
    assert_eq!(names(&out["spec"]["containers"]), ["app", "proxy"]);
}

#[test]
fn labels_and_annotations_merge_and_null_deletes() {
    let out =
        smp("Pod", &pod(), json!({"metadata": {"labels": {"app": null, "x": "1"}, "annotations": {"note": "hi"}}}));
    assert_eq!(out["metadata"]["labels"], json!({"tier": "front", "x": "1"}));
    assert_eq!(out["metadata"]["annotations"], json!({"note": "hi"}));
    // Deleting an absent key is not an error, and a null never gets stored.
    let out = smp("Pod", &pod(), json!({"metadata": {"labels": {"absent": null}, "annotations": {"a": null}}}));
    assert_eq!(out["metadata"]["labels"], pod()["metadata"]["labels"]);
    assert_eq!(out["metadata"]["annotations"], json!({}));
}

#[test]
fn patch_replace_directive_on_a_map() {
    let out = smp("Pod", &pod(), json!({"spec": {"nodeSelector": {"$patch": "replace", "disk": "ssd"}}}));
    assert_eq!(out["spec"]["nodeSelector"], json!({"disk": "ssd"}));
    // On a map that is not there yet, the content is simply taken.
    let out = smp("ConfigMap", &json!({"metadata": {"name": "c"}}), json!({"data": {"$patch": "replace", "k": "v"}}));
    assert_eq!(out["data"], json!({"k": "v"}));
}

#[test]
fn patch_replace_directive_in_a_list() {
    let out =
        smp("Pod", &pod(), json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "i:1"}]}}));
    assert_eq!(out["spec"]["containers"], json!([{"name": "only", "image": "i:1"}]));
}

#[test]
fn patch_delete_and_merge_directives_on_a_map() {
    // As in Kubernetes, a deleted map that existed is left empty.
    let out = smp("Pod", &pod(), json!({"spec": {"nodeSelector": {"$patch": "delete"}}}));
    assert_eq!(out["spec"]["nodeSelector"], json!({}));
    // One that did not exist is not created.
    let out = smp("Pod", &pod(), json!({"spec": {"securityContext": {"$patch": "delete"}}}));
    assert!(out["spec"].get("securityContext").is_none());
    let out = smp("Pod", &pod(), json!({"spec": {"nodeSelector": {"$patch": "merge", "disk": "ssd"}}}));
    assert_eq!(out["spec"]["nodeSelector"], json!({"zone": "a", "disk": "ssd"}));
}

#[test]
fn lists_without_a_patch_strategy_are_replaced() {
    let out = smp("Pod", &pod(), json!({"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}));
    assert_eq!(out["spec"]["tolerations"], json!([{"key": "gpu", "operator": "Exists"}]));
    let node = json!({"metadata": {"name": "edge-1"}, "spec": {"taints": [
        {"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}
    ]}});
    let out = smp("Node", &node, json!({"spec": {"taints": [{"key": "c", "effect": "NoSchedule"}]}}));
    assert_eq!(out["spec"]["taints"], json!([{"key": "c", "effect": "NoSchedule"}]));
    // Endpoints subsets too.
    let ep = json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]});
    let out = smp("Endpoints", &ep, json!({"subsets": [{"addresses": [{"ip": "10.0.0.2"}]}]}));
    assert_eq!(out["subsets"], json!([{"addresses": [{"ip": "10.0.0.2"}]}]));
}

#[test]
fn merging_list_given_empty_in_a_patch_is_unchanged() {
    let out = smp("Pod", &pod(), json!({"spec": {"containers": []}}));
    assert_eq!(out, pod());
}

// ---------------------------------------------------------------------------------------
// strategic merge patch: status (what kubelet and edged send) and the other kinds

fn node() -> Value {
    json!({
        "metadata": {"name": "edge-1", "labels": {"node-role.kubernetes.io/edge": ""}},
        "spec": {"podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": "2024-01-01T00:00:00Z"},
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"}
            ],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": "edge-1"}],
            "images": [{"names": ["app:1"], "sizeBytes": 10}]
        }
    })
}

#[test]
fn node_status_conditions_merge_by_type() {
    let out = smp(
        "Node",
        &node(),
        json!({"status": {
            "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "MemoryPressure"}],
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastHeartbeatTime": "2024-01-01T00:01:00Z"}]
        }}),
    );
    let c = &out["status"]["conditions"];
    assert_eq!(
        c[0],
        json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastHeartbeatTime": "2024-01-01T00:01:00Z"})
    );
    assert_eq!(c[1], node()["status"]["conditions"][1]);
    // Without $setElementOrder an updated condition keeps its place, a new one goes first.
    let out = smp(
        "Node",
        &node(),
        json!({"status": {"conditions": [
            {"type": "MemoryPressure", "status": "True"},
            {"type": "DiskPressure", "status": "False"}
        ]}}),
    );
    let types: Vec<&str> = out["status"]["conditions"]
        .as_array()
        .map(|l| l.iter().filter_map(|c| c["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(types, ["Ready", "MemoryPressure", "DiskPressure"]);
    assert_eq!(out["status"]["conditions"][1]["reason"], "KubeletHasSufficientMemory");
}

#[test]
fn node_addresses_merge_by_type_and_images_are_replaced() {
    let out = smp(
        "Node",
        &node(),
        json!({"status": {
            "addresses": [{"type": "InternalIP", "address": "192.168.1.11"}],
            "images": [{"names": ["app:2"], "sizeBytes": 11}]
        }}),
    );
    assert_eq!(
        out["status"]["addresses"],
        json!([{"type": "InternalIP", "address": "192.168.1.11"}, {"type": "Hostname", "address": "edge-1"}])
    );
    assert_eq!(out["status"]["images"], json!([{"names": ["app:2"], "sizeBytes": 11}]));
    let out = smp("Node", &node(), json!({"spec": {"podCIDRs": ["fd00::/64"]}}));
    assert_eq!(out["spec"]["podCIDRs"], json!(["fd00::/64", "10.244.1.0/24"]));
}

#[test]
fn pod_status_conditions_and_ips() {
    let live = json!({"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}});
    let out = smp(
        "Pod",
        &live,
        json!({"status": {
            "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}, {"type": "PodScheduled"}],
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "podIPs": [{"ip": "10.244.1.5"}],
            "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0}],
            "phase": "Running"
        }}),
    );
    let types: Vec<&str> = out["status"]["conditions"]
        .as_array()
        .map(|l| l.iter().filter_map(|c| c["type"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(types, ["Initialized", "Ready", "PodScheduled"]);
    assert_eq!(out["status"]["podIPs"], json!([{"ip": "10.244.1.5"}]));
    assert_eq!(out["status"]["phase"], "Running");
    // containerStatuses has no strategy: the next patch replaces it whole.
    let out = smp(
        "Pod",
        &out,
        json!({"status": {"containerStatuses": [{"name": "app", "ready": false, "restartCount": 1}]}}),
    );
    assert_eq!(out["status"]["containerStatuses"], json!([{"name": "app", "ready": false, "restartCount": 1}]));
}

#[test]
fn service_ports_merge_by_port() {
    let svc = json!({"spec": {"selector": {"app": "web"}, "ports": [
        {"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443, "targetPort": 8443}
    ]}});
    let out = smp(
        "Service",
        &svc,
        json!({"spec": {
            "$setElementOrder/ports": [{"port": 80}, {"port": 443}],
            "ports": [{"port": 443, "targetPort": 9443}]
        }}),
    );
    assert_eq!(out["spec"]["ports"][1], json!({"name": "https", "port": 443, "targetPort": 9443}));
    assert_eq!(out["spec"]["ports"][0], svc["spec"]["ports"][0]);
    // Merge keys compare as numbers, as they do in Go.
    let out = smp("Service", &svc, json!({"spec": {"ports": [{"port": 80.0, "name": "web"}]}}));
    assert_eq!(out["spec"]["ports"].as_array().map(Vec::len), Some(2));
    assert_eq!(out["spec"]["ports"][0]["name"], "web");
}

#[test]
fn apply_replacing_a_port_orders_server_only_ports_as_kubernetes_does() {
    // Port 8080 was added by someone else; the manifest swaps port 80 for 9090. Kubernetes
    // deletes 80 and appends 9090 inside the live list it then orders by, so 8080 stays first.
    let svc = json!({"spec": {"ports": [{"port": 80}, {"port": 443}, {"port": 8080}]}});
    let out = smp(
        "Service",
        &svc,
        json!({"spec": {
            "$setElementOrder/ports": [{"port": 9090}, {"port": 443}],
            "ports": [{"port": 9090, "targetPort": 9090}, {"$patch": "delete", "port": 80}]
        }}),
    );
    assert_eq!(out["spec"]["ports"], json!([{"port": 8080}, {"port": 9090, "targetPort": 9090}, {"port": 443}]));
    // Without a server-only element the manifest's order is simply followed.
    let svc = json!({"spec": {"ports": [{"port": 80}, {"port": 443}]}});
    let out = smp(
        "Service",
        &svc,
        json!({"spec": {
            "$setElementOrder/ports": [{"port": 9090}, {"port": 443}],
            "ports": [{"port": 9090}, {"$patch": "delete", "port": 80}]
        }}),
    );
    assert_eq!(out["spec"]["ports"], json!([{"port": 9090}, {"port": 443}]));
}

#[test]
fn config_map_secret_namespace_lease_event() {
    let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
    assert_eq!(smp("ConfigMap", &cm, json!({"data": {"a": null, "c": "3"}}))["data"], json!({"b": "2", "c": "3"}));
    let secret = json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}});
    assert_eq!(smp("Secret", &secret, json!({"data": {"k2": "dw=="}}))["data"], json!({"k": "dg==", "k2": "dw=="}));
    let ns = json!({"metadata": {"name": "n"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    let out = smp(
        "Namespace",
        &ns,
        json!({"status": {"conditions": [{"type": "NamespaceDeletionDiscoveryFailure", "status": "False"}]}}),
    );
    assert_eq!(out["status"]["conditions"][0]["type"], "NamespaceDeletionDiscoveryFailure");
    // Namespace spec.finalizers has no strategy (unlike metadata.finalizers).
    assert_eq!(smp("Namespace", &ns, json!({"spec": {"finalizers": []}}))["spec"]["finalizers"], json!([]));
    let lease = json!({"metadata": {"name": "edge-1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "edge-1", "leaseDurationSeconds": 40, "renewTime": "2024-01-01T00:00:00.000000Z"}});
    let out =
        smp_kind("coordination.k8s.io", "Lease", &lease, json!({"spec": {"renewTime": "2024-01-01T00:00:10.000000Z"}}))
            .expect("lease");
    assert_eq!(out["spec"]["renewTime"], "2024-01-01T00:00:10.000000Z");
    assert_eq!(out["spec"]["holderIdentity"], "edge-1");
    let ev = json!({"metadata": {"name": "e"}, "count": 1, "reason": "Started"});
    assert_eq!(smp("Event", &ev, json!({"count": 2}))["count"], 2);
}

#[test]
fn list_types_inside_pod_spec_from_the_table() {
    let live = json!({"spec": {
        "imagePullSecrets": [{"name": "reg1"}],
        "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["a"]}],
        "ephemeralContainers": [{"name": "dbg", "image": "busybox", "env": [{"name": "A", "value": "1"}]}],
        "initContainers": [{"name": "init", "image": "i:1", "volumeDevices": [{"name": "raw", "devicePath": "/dev/xvda"}]}],
        "schedulingGates": [{"name": "g1"}],
        "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 1}]
    }});
    let out = smp(
        "Pod",
        &live,
        json!({"spec": {
            "imagePullSecrets": [{"name": "reg2"}],
            "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["b"]}],
            "ephemeralContainers": [{"name": "dbg", "env": [{"name": "B", "value": "2"}]}],
            "initContainers": [{"name": "init", "volumeDevices": [{"name": "raw2", "devicePath": "/dev/xvda"}]}],
            "schedulingGates": [{"name": "g1", "$patch": "delete"}],
            "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2}]
        }}),
    );
    let s = &out["spec"];
    assert_eq!(names(&s["imagePullSecrets"]), ["reg2", "reg1"]);
    assert_eq!(s["hostAliases"], json!([{"ip": "127.0.0.1", "hostnames": ["b"]}]));
    assert_eq!(names(&s["ephemeralContainers"][0]["env"]), ["B", "A"]);
    assert_eq!(s["initContainers"][0]["volumeDevices"], json!([{"name": "raw2", "devicePath": "/dev/xvda"}]));
    assert_eq!(s["schedulingGates"], json!([]));
    assert_eq!(s["topologySpreadConstraints"], json!([{"topologyKey": "zone", "maxSkew": 2}]));
}

#[test]
fn element_order_for_a_list_the_table_does_not_know_is_read_off_the_directive() {
    // readinessGates has no tag in v1.32, so kubectl sends no $setElementOrder for it; a
    // client that does names the merge key in its elements, and is taken at its word.
    let live = json!({"spec": {"readinessGates": [{"conditionType": "a"}, {"conditionType": "b"}]}});
    let out = smp(
        "Pod",
        &live,
        json!({"spec": {
            "$setElementOrder/readinessGates": [{"conditionType": "b"}, {"conditionType": "a"}]
        }}),
    );
    assert_eq!(out["spec"]["readinessGates"], json!([{"conditionType": "b"}, {"conditionType": "a"}]));
}

// ---------------------------------------------------------------------------------------
// strategic merge patch: directives never leak, errors, atomicity

#[test]
fn directives_in_new_values_are_applied_not_stored() {
    let live = json!({"metadata": {"name": "p"}, "spec": {}});
    let out = smp(
        "Pod",
        &live,
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [
                {"name": "b", "image": "b", "securityContext": {"$patch": "replace", "privileged": false}, "resources": {"limits": null}},
                {"name": "a", "image": "a", "$setElementOrder/env": [{"name": "E"}], "env": [{"name": "E", "value": "1"}, {"name": "G", "$patch": "delete"}]}
            ],
            "volumes": [{"$retainKeys": ["name", "emptyDir"], "name": "v", "emptyDir": {}}],
            "nodeSelector": {"$patch": "delete"}
        }}),
    );
    assert_eq!(
        out["spec"],
        json!({
            "containers": [
                {"name": "b", "image": "b", "securityContext": {"privileged": false}, "resources": {}},
                {"name": "a", "image": "a", "env": [{"name": "E", "value": "1"}]}
            ],
            "volumes": [{"name": "v", "emptyDir": {}}]
        })
    );
}

#[test]
fn malformed_strategic_patches() {
    let p = pod();
    let cases = [
        json!([]),
        json!("spec"),
        json!(null),
        json!({"metadata": []}),
        json!({"spec": {"containers": {"name": "app"}}}),
        json!({"metadata": {"finalizers": "x"}}),
        json!({"metadata": {"$foo": 1}}),
        json!({"$patch": "bogus"}),
        json!({"spec": {"nodeSelector": {"$patch": 1}}}),
        json!({"spec": {"containers": [{"name": "app", "$patch": "bogus"}]}}),
        json!({"spec": {"containers": [{"$patch": "delete"}]}}),
        json!({"spec": {"containers": [{"image": "no-name"}]}}),
        json!({"spec": {"containers": ["app"]}}),
        json!({"spec": {"containers": [{"name": "app"}, "x"]}}),
        json!({"metadata": {"finalizers": [{"name": "x"}]}}),
        json!({"metadata": {"finalizers": [["x"]]}}),
        json!({"spec": {"$setElementOrder": []}}),
        json!({"spec": {"$setElementOrder/": []}}),
        json!({"spec": {"$setElementOrder/containers": {"name": "app"}}}),
        json!({"spec": {"$setElementOrder/containers": [{"image": "x"}]}}),
        json!({"spec": {"$setElementOrder/containers": [{"name": "proxy"}, {"name": "app"}], "containers": [{"name": "app"}, {"name": "proxy"}]}}),
        json!({"spec": {"$setElementOrder/containers": [{"name": "app"}], "containers": [{"name": "other", "image": "x"}]}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [{"a": 1}]}}),
        json!({"metadata": {"$deleteFromPrimitiveList": ["x"]}}),
        json!({"spec": {"volumes": [{"$retainKeys": [1], "name": "data"}]}}),
    ];
    for patch in cases {
        let mut t = p.clone();
        let err = match strategic_merge_patch(&mut t, &patch, "", "Pod") {
            Ok(()) => panic!("{patch} must fail, got {t}"),
            Err(e) => e,
        };
        assert!(is_malformed(&err), "{patch}: {err}");
        assert_eq!(t, p, "{patch} changed the target");
    }
}

#[test]
fn unapplicable_strategic_patches() {
    // The live list holds elements of another kind than the patch.
    let live = json!({"metadata": {"finalizers": [{"odd": true}]}});
    let err = smp_err("ConfigMap", &live, json!({"metadata": {"finalizers": ["x"]}}));
    assert!(is_unapplicable(&err), "{err}");
    // A live element lacks the merge key.
    let live = json!({"spec": {"containers": [{"image": "nameless"}]}});
    let err = smp_err("Pod", &live, json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}));
    assert!(is_unapplicable(&err), "{err}");
    // The live value under $setElementOrder is not a list.
    let live = json!({"spec": {"containers": "oops"}});
    let err = smp_err("Pod", &live, json!({"spec": {"$setElementOrder/containers": [{"name": "a"}]}}));
    assert!(is_unapplicable(&err), "{err}");
    // The target is not an object.
    let err = smp_kind("", "Pod", &json!([1]), json!({})).expect_err("not an object");
    assert!(is_unapplicable(&err));
    assert_eq!(err.http_status(), 422);
}

#[test]
fn failed_strategic_patch_leaves_the_target_unchanged() {
    let p = pod();
    let mut t = p.clone();
    // "metadata" sorts before "spec": the label change is made before the bad directive is met.
    let patch = json!({
        "metadata": {"labels": {"app": null, "new": "x"}},
        "spec": {"nodeName": "other", "containers": [{"name": "app", "env": [{"name": "X", "$patch": "explode"}]}]}
    });
    let err = strategic_merge_patch(&mut t, &patch, "", "Pod").expect_err("bad directive");
    assert!(is_malformed(&err));
    assert_eq!(t, p);
}

// ---------------------------------------------------------------------------------------
// randomised checks (a small deterministic generator; no extra dependency)

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const KEYS: &[&str] = &["a", "b", "name", "type", "env", "containers", "finalizers", "", "~", "/", "-", "0", "1"];

fn random_value(rng: &mut Rng, depth: u32, nulls: bool) -> Value {
    let leaf = depth == 0 || rng.below(3) == 0;
    match if leaf { rng.below(5) } else { 5 + rng.below(2) } {
        0 if nulls => Value::Null,
        0 | 1 => json!(rng.below(3)),
        2 => json!(rng.pick(KEYS)),
        3 => json!(rng.below(2) == 0),
        4 => json!(1.5),
        5 => Value::Array((0..rng.below(4)).map(|_| random_value(rng, depth - 1, nulls)).collect()),
        _ => Value::Object(
            (0..rng.below(4)).map(|_| (rng.pick(KEYS).to_owned(), random_value(rng, depth - 1, nulls))).collect(),
        ),
    }
}

fn random_pointer(rng: &mut Rng) -> String {
    (0..rng.below(4))
        .map(|_| format!("/{}", rng.pick(&["a", "b", "0", "1", "-", "~0", "~1", "~2", "01", ""])))
        .collect()
}

#[test]
fn merge_patch_with_an_empty_object_is_identity_and_patching_twice_changes_nothing() {
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..2000 {
        let target = Value::Object(
            (0..rng.below(5)).map(|_| (rng.pick(KEYS).to_owned(), random_value(&mut rng, 3, true))).collect(),
        );
        assert_eq!(merged(target.clone(), json!({})), target);
        let patch = random_value(&mut rng, 3, true);
        let once = merged(target, patch.clone());
        assert_eq!(merged(once.clone(), patch), once);
    }
}

#[test]
fn json_patch_never_panics_and_failures_change_nothing() {
    let mut rng = Rng(0x5eed_0002);
    let ops = ["add", "remove", "replace", "move", "copy", "test", "bogus"];
    for _ in 0..5000 {
        let doc = random_value(&mut rng, 3, true);
        let patch = if rng.below(10) == 0 {
            random_value(&mut rng, 3, true)
        } else {
            Value::Array(
                (0..rng.below(4))
                    .map(|_| {
                        let mut op = serde_json::Map::new();
                        if rng.below(10) != 0 {
                            op.insert("op".into(), json!(rng.pick(&ops)));
                        }
                        if rng.below(10) != 0 {
                            op.insert("path".into(), json!(random_pointer(&mut rng)));
                        }
                        if rng.below(2) == 0 {
                            op.insert("from".into(), json!(random_pointer(&mut rng)));
                        }
                        if rng.below(4) != 0 {
                            op.insert("value".into(), random_value(&mut rng, 2, true));
                        }
                        Value::Object(op)
                    })
                    .collect(),
            )
        };
        let _ = jp(&doc, patch);
    }
}

#[test]
fn strategic_patch_never_panics_leaks_directives_or_half_applies() {
    let mut rng = Rng(0x5eed_0003);
    let fields = [
        "metadata",
        "spec",
        "status",
        "containers",
        "env",
        "finalizers",
        "labels",
        "name",
        "value",
        "volumes",
        "conditions",
        "type",
    ];
    let directives = [
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$setElementOrder/env",
        "$deleteFromPrimitiveList/finalizers",
        "$bogus",
    ];
    fn doc(rng: &mut Rng, depth: u32, fields: &[&str], directives: &[&str]) -> Value {
        match if depth == 0 { rng.below(4) } else { rng.below(7) } {
            0 => json!(rng.pick(&["delete", "replace", "merge", "x", "name"])),
            1 => json!(rng.below(3)),
            2 => Value::Null,
            3 => json!(true),
            4 | 5 => Value::Object(
                (0..rng.below(4))
                    .map(|_| {
                        let k = if !directives.is_empty() && rng.below(5) == 0 {
                            rng.pick(directives)
                        } else {
                            rng.pick(fields)
                        };
                        (k.to_owned(), doc(rng, depth - 1, fields, directives))
                    })
                    .collect(),
            ),
            _ => Value::Array((0..rng.below(4)).map(|_| doc(rng, depth - 1, fields, directives)).collect()),
        }
    }
    let mut ok = 0;
    for i in 0..5000 {
        let target = if i % 2 == 0 { pod() } else { doc(&mut rng, 4, &fields, &[]) };
        let patch = match doc(&mut rng, 5, &fields, &directives) {
            Value::Object(m) if i % 10 != 0 => Value::Object(m),
            Value::Object(m) => json!({"spec": m}),
            other if i % 10 == 0 => other,
            other => json!({"metadata": {"labels": {"x": "1"}}, "spec": {"containers": other}}),
        };
        // smp_kind checks both: no directive in a result, an unchanged target after an error.
        if smp_kind("", "Pod", &target, patch).is_ok() {
            ok += 1;
        }
    }
    assert!(ok > 500, "the generator should produce many applicable patches, got {ok}");
}

#[test]
fn strategic_patch_without_lists_or_directives_is_a_merge_patch() {
    let mut rng = Rng(0x5eed_0004);
    fn no_lists(rng: &mut Rng, depth: u32) -> Value {
        match if depth == 0 { rng.below(3) } else { rng.below(5) } {
            0 => json!(rng.pick(&["x", "y"])),
            1 => json!(rng.below(3)),
            2 => Value::Null,
            _ => Value::Object(
                (0..rng.below(4))
                    .map(|_| (rng.pick(&["labels", "a", "b", "data"]).to_owned(), no_lists(rng, depth - 1)))
                    .collect(),
            ),
        }
    }
    for _ in 0..3000 {
        let Value::Object(target) = no_lists(&mut rng, 4) else { continue };
        let target = Value::Object(target.into_iter().filter(|(_, v)| !v.is_null()).collect());
        let Value::Object(patch) = no_lists(&mut rng, 4) else { continue };
        let patch = Value::Object(patch);
        let want = merged(target.clone(), patch.clone());
        let got = smp_kind("", "ConfigMap", &target, patch.clone()).unwrap_or_else(|e| panic!("{patch}: {e}"));
        assert_eq!(got, want, "target {target} patch {patch}");
    }
}
