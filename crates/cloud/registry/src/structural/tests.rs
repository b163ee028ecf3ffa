#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::*;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["image"],
                "properties": {
                    "image": {"type": "string", "minLength": 3, "maxLength": 20, "pattern": "^[a-z0-9./:-]+$"},
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                    "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "ratio": {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": true, "maximum": 2},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "when": {"type": "string", "format": "date-time", "nullable": true},
                    "ports": {
                        "type": "array", "maxItems": 3,
                        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"},
                            "protocol": {"type": "string", "default": "TCP"},
                        }},
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                        "x-kubernetes-preserve-unknown-fields": true},
                    "policy": {"type": "object", "default": {}, "properties": {
                        "retries": {"type": "integer", "default": 3},
                    }},
                },
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        },
    })
}

fn messages(errs: &[crate::validation::FieldError]) -> Vec<String> {
    errs.iter().map(|e| e.message()).collect()
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

#[test]
fn a_good_object_passes_and_gets_its_defaults() {
    let s = Schema::parse(&schema()).unwrap();
    let mut obj = object(json!({"image": "nginx:1.27", "ports": [{"name": "http"}], "port": "http"}));
    assert!(s.prune(&mut obj).is_empty());
    s.apply_defaults(&mut obj);
    assert_eq!(messages(&s.validate(&obj)), Vec::<String>::new());
    assert_eq!(obj["spec"]["replicas"], 1);
    assert_eq!(obj["spec"]["mode"], "safe");
    assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP", "defaults inside list items");
    assert_eq!(obj["spec"]["policy"], json!({"retries": 3}), "defaults inside a default just set");
    assert_eq!(obj["metadata"], json!({"name": "w"}), "metadata is not the schema's");
}

#[test]
fn unknown_fields_are_pruned_and_reported_except_where_preserved() {
    let s = Schema::parse(&schema()).unwrap();
    let mut obj = object(json!({
        "image": "nginx", "replica": 3,
        "ports": [{"name": "a", "portt": 1}],
        "labels": {"k": "v"},
        "extra": {"anything": {"goes": true}},
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}},
    }));
    obj["top"] = json!(1);
    let pruned = s.prune(&mut obj);
    assert_eq!(pruned, ["spec.ports[0].portt", "spec.replica", "top"]);
    assert_eq!(obj["spec"].get("replica"), None);
    assert_eq!(obj["spec"]["extra"]["anything"]["goes"], true);
    assert_eq!(obj["spec"]["template"]["spec"]["x"], 1);
    assert_eq!(obj["apiVersion"], "example.com/v1");
}

#[test]
fn failures_read_as_kubernetes_reports_them() {
    let s = Schema::parse(&schema()).unwrap();
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({}), vec!["spec.image: Required value"]),
        (
            json!({"image": "nginx", "replicas": "two"}),
            vec![r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#],
        ),
        (
            json!({"image": "nginx", "replicas": 11}),
            vec!["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"],
        ),
        (
            json!({"image": "nginx", "mode": "slow"}),
            vec![r#"spec.mode: Unsupported value: "slow": supported values: "fast", "safe""#],
        ),
        (
            json!({"image": "ng"}),
            vec![r#"spec.image: Invalid value: "ng": spec.image in body should be at least 3 chars long"#],
        ),
        (
            json!({"image": "NGINX"}),
            vec![r#"spec.image: Invalid value: "NGINX": spec.image in body should match '^[a-z0-9./:-]+$'"#],
        ),
        (json!({"image": "a".repeat(21)}), vec!["spec.image: Too long: must have at most 20 bytes"]),
        (
            json!({"image": "nginx", "ratio": 2}),
            vec!["spec.ratio: Invalid value: 2: spec.ratio in body should be less than 2"],
        ),
        (
            json!({"image": "nginx", "ratio": 0.3}),
            vec!["spec.ratio: Invalid value: 0.3: spec.ratio in body should be a multiple of 0.5"],
        ),
        (
            json!({"image": "nginx", "port": true}),
            vec![
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer: "boolean""#,
                r#"spec.port: Invalid value: "boolean": spec.port in body must be of type string: "boolean""#,
            ],
        ),
        (
            json!({"image": "nginx", "labels": {"a": "1", "b": 2, "c": "3"}}),
            vec![
                r#"spec.labels.b: Invalid value: "integer": spec.labels.b in body must be of type string: "integer""#,
                "spec.labels: Too many: 3: must have at most 2 items",
            ],
        ),
        (
            json!({"image": "nginx", "ports": [{"name": "a"}, {"name": "a"}, {}, {"name": "d"}]}),
            vec![
                "spec.ports[2].name: Required value",
                // List-type errors come after the schema's, as Kubernetes
                // checks them in a pass of their own.
                "spec.ports: Too many: 4: must have at most 3 items",
                r#"spec.ports[1]: Duplicate value: map[string]interface {}{"name":"a"}"#,
            ],
        ),
        (json!({"image": "nginx", "tags": ["x", "y", "x"]}), vec![r#"spec.tags[2]: Duplicate value: "x""#]),
        (
            json!({"image": "nginx", "when": "yesterday"}),
            vec![r#"spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday""#],
        ),
        (
            json!({"image": "nginx", "replicas": null}),
            vec![r#"spec.replicas: Invalid value: "null": spec.replicas in body must be of type integer: "null""#],
        ),
    ];
    for (spec, want) in cases {
        let errs = s.validate(&object(spec.clone()));
        assert_eq!(messages(&errs), want, "{spec}");
    }
    // A nullable field may be null; defaulting replaces a null a field
    // may not hold by its default.
    assert!(s.validate(&object(json!({"image": "nginx", "when": null}))).is_empty());
    let mut obj = object(json!({"image": "nginx", "replicas": null}));
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"]["replicas"], 1);
    // The root must be an object.
    assert_eq!(
        messages(&s.validate(&json!([]))),
        [r#": Invalid value: "array": . in body must be of type object: "array""#]
    );
}

#[test]
fn the_crd_check_wants_structural_schemas() {
    let at = "spec.versions[0].schema.openAPIV3Schema";
    assert!(check(&schema(), at).is_empty(), "{:?}", messages(&check(&schema(), at)));
    let bad = json!({
        "properties": {
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
            "spec": {"properties": {"size": {"type": "integer", "default": "big"}}},
            "list": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "ref": {"$ref": "#/definitions/x"},
            "ios": {"type": "string", "x-kubernetes-int-or-string": true},
            "cel": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() > 1"}]},
            "keys": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}},
        },
    });
    assert_eq!(
        messages(&check(&bad, at)),
        [
            format!("{at}.type: Required value: must not be empty at the root"),
            format!(
                "{at}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            ),
            format!(
                "{at}.properties[both].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
            ),
            format!(
                "{at}.properties[cel].x-kubernetes-validations: Forbidden: CEL validation rules are not supported by this server; remove them or enforce the rules elsewhere"
            ),
            format!(
                r#"{at}.properties[ios].type: Invalid value: "string": must be empty if x-kubernetes-int-or-string is true"#
            ),
            format!(
                "{at}.properties[keys].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
            ),
            format!(
                "{at}.properties[list].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
            ),
            format!("{at}.properties[ref].$ref: Forbidden: $ref is not supported"),
            format!("{at}.properties[ref].type: Required value: must not be empty for specified object fields"),
            format!("{at}.properties[spec].type: Required value: must not be empty for specified object fields"),
            format!(
                r#"{at}.properties[spec].properties[size].default: Invalid value: "string": {at}.properties[spec].properties[size].default in body must be of type integer: "string""#
            ),
        ]
    );
    let root = json!({"type": "string"});
    assert_eq!(
        messages(&check(&root, at)),
        [format!(r#"{at}.type: Invalid value: "string": must be object at the root"#)]
    );
    let pattern = json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "("}}});
    let errs = messages(&check(&pattern, at));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with(&format!("{at}.properties[s].pattern: Invalid value: must be a valid regular expression")),
        "{errs:?}"
    );
    let unknown_default = json!({"type": "object", "properties": {"o": {"type": "object", "default": {"x": 1},
        "properties": {"y": {"type": "integer"}}}}});
    assert_eq!(
        messages(&check(&unknown_default, at)),
        [format!(r#"{at}.properties[o].default: Invalid value: {{"x":1}}: must not have unknown fields"#)]
    );
}

#[test]
fn an_int_or_string_may_spell_its_two_types_as_generators_write_them() {
    let at = "spec.versions[0].schema.openAPIV3Schema";
    // controller-gen's resource.Quantity.
    let quantity = json!({"anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))$", "x-kubernetes-int-or-string": true});
    let root = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "divisor": quantity,
        "limits": {"type": "object", "additionalProperties": {"allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}],
            "x-kubernetes-int-or-string": true}}}}}});
    assert_eq!(messages(&check(&root, at)), Vec::<String>::new());
    // Without x-kubernetes-int-or-string, types inside anyOf stay forbidden.
    let plain = json!({"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}});
    assert_eq!(
        messages(&check(&plain, at)),
        [
            format!("{at}.properties[n].type: Required value: must not be empty for specified object fields"),
            format!("{at}.properties[n].anyOf[0].type: Forbidden: must be empty to be structural"),
            format!("{at}.properties[n].anyOf[1].type: Forbidden: must be empty to be structural"),
        ]
    );
}

#[test]
fn a_schema_that_describes_metadata_as_an_object_prunes_none_of_it() {
    let schema = Schema::parse(&json!({"type": "object", "properties": {
        "metadata": {"type": "object"}, "spec": {"type": "object"}}}))
    .expect("parses");
    let mut obj = json!({"apiVersion": "a/v1", "kind": "K",
        "metadata": {"name": "n", "annotations": {"a": "b"}}, "spec": {"x": 1}});
    assert_eq!(schema.prune(&mut obj), ["spec.x"]);
    assert_eq!(obj["metadata"], json!({"name": "n", "annotations": {"a": "b"}}));
}
