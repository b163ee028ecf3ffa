//! CustomResourceDefinitions (apiextensions.k8s.io/v1), checked as
//! apiextensions-apiserver's `ValidateCustomResourceDefinition` checks them
//! (pkg/apis/apiextensions/validation/validation.go), with its paths and
//! messages: the name is `{plural}.{group}`, the group a domain with a dot,
//! names DNS-1035 labels, exactly one storage version, a structural schema
//! per version ([`crate::structural::check`]), sound scale and printer
//! column paths, and on update a fixed group, plural, scope and kind.
//!
//! Conversion: `None` is what is served; a `Webhook` strategy is refused
//! (no conversion webhooks are called), rather than accepted and then
//! failing every read of a second version.

use serde_json::Value;

use super::json::{arr_at, get, str_at};
use super::meta::{self, MetaRules};
use super::names::{dns1035_label, dns1123_subdomain};
use super::{FieldError, KindInfo};

/// The types a printer column may have.
const COLUMN_TYPES: [&str; 5] = ["boolean", "date", "integer", "number", "string"];

/// Kubernetes' defaults of a CustomResourceDefinition (`SetDefaults_*` of
/// apiextensions/v1): `names.singular` the lower-case kind, `names.listKind`
/// the kind + `List`, conversion strategy `None`.
pub(crate) fn apply_defaults(root: &mut serde_json::Map<String, Value>) {
    let Some(spec) = root.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !kind.is_empty() {
            if names.get("singular").and_then(Value::as_str).is_none_or(str::is_empty) {
                names.insert("singular".into(), Value::from(kind.to_lowercase()));
            }
            if names.get("listKind").and_then(Value::as_str).is_none_or(str::is_empty) {
                names.insert("listKind".into(), Value::from(format!("{kind}List")));
            }
        }
    }
    let conversion = spec.entry("conversion").or_insert_with(|| serde_json::json!({}));
    if let Some(c) = conversion.as_object_mut()
        && c.get("strategy").and_then(Value::as_str).is_none_or(str::is_empty)
    {
        c.insert("strategy".into(), Value::from("None"));
    }
}

fn label_errors(field: &str, value: &str, errs: &mut Vec<FieldError>) {
    let found = dns1035_label(value);
    if !value.is_empty() && !found.is_empty() {
        errs.push(FieldError::invalid(field, value, found.join(",")));
    }
}

fn names(names: &Value, path: &str, errs: &mut Vec<FieldError>) {
    label_errors(&format!("{path}.plural"), str_at(names, "plural"), errs);
    label_errors(&format!("{path}.singular"), str_at(names, "singular"), errs);
    for key in ["kind", "listKind"] {
        let v = str_at(names, key);
        let found = dns1035_label(&v.to_lowercase());
        if !v.is_empty() && !found.is_empty() {
            errs.push(FieldError::invalid(
                &format!("{path}.{key}"),
                v,
                format!("may have mixed case, but should otherwise match: {}", found.join(",")),
            ));
        }
    }
    for (i, s) in arr_at(names, "shortNames").iter().enumerate() {
        label_errors(&format!("{path}.shortNames[{i}]"), s.as_str().unwrap_or_default(), errs);
    }
    let (kind, list_kind) = (str_at(names, "kind"), str_at(names, "listKind"));
    if !kind.is_empty() && kind == list_kind {
        errs.push(FieldError::invalid(&format!("{path}.listKind"), list_kind, "kind and listKind may not be the same"));
    }
    for (i, c) in arr_at(names, "categories").iter().enumerate() {
        label_errors(&format!("{path}.categories[{i}]"), c.as_str().unwrap_or_default(), errs);
    }
}

/// A "simple" JSON path (`.spec.replicas`): dot-separated field names.
fn simple_json_path(path: &str) -> bool {
    path.strip_prefix('.').is_some_and(|rest| {
        rest.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    })
}

fn subresources(subs: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(scale) = subs.get("scale").filter(|s| s.is_object()) else { return };
    let at = |k: &str| format!("{path}.scale.{k}");
    let spec = str_at(scale, "specReplicasPath");
    if spec.is_empty() {
        errs.push(FieldError::required(&at("specReplicasPath"), ""));
    } else if !spec.starts_with(".spec.") || !simple_json_path(spec) {
        errs.push(FieldError::invalid(&at("specReplicasPath"), spec, "should be a json path under .spec"));
    }
    let status = str_at(scale, "statusReplicasPath");
    if status.is_empty() {
        errs.push(FieldError::required(&at("statusReplicasPath"), ""));
    } else if !status.starts_with(".status.") || !simple_json_path(status) {
        errs.push(FieldError::invalid(&at("statusReplicasPath"), status, "should be a json path under .status"));
    }
    let selector = str_at(scale, "labelSelectorPath");
    if !selector.is_empty()
        && (!(selector.starts_with(".spec.") || selector.starts_with(".status.")) || !simple_json_path(selector))
    {
        errs.push(FieldError::invalid(
            &at("labelSelectorPath"),
            selector,
            "should be a json path under either .spec or .status",
        ));
    }
}

fn printer_columns(columns: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    for (i, c) in columns.iter().enumerate() {
        let at = |k: &str| format!("{path}[{i}].{k}");
        if str_at(c, "name").is_empty() {
            errs.push(FieldError::required(&at("name"), ""));
        }
        let ty = str_at(c, "type");
        if ty.is_empty() {
            errs.push(FieldError::required(&at("type"), ""));
        } else if !COLUMN_TYPES.contains(&ty) {
            errs.push(FieldError::not_supported(&at("type"), ty, &COLUMN_TYPES));
        }
        let path = str_at(c, "jsonPath");
        if path.is_empty() {
            errs.push(FieldError::required(&at("jsonPath"), ""));
        }
    }
}

fn versions(spec: &Value, errs: &mut Vec<FieldError>) {
    let versions = arr_at(spec, "versions");
    let mut seen = Vec::new();
    let mut storage = 0;
    for (i, v) in versions.iter().enumerate() {
        let at = |k: &str| format!("spec.versions[{i}].{k}");
        let name = str_at(v, "name");
        let found = dns1035_label(name);
        if !found.is_empty() {
            errs.push(FieldError::invalid(&at("name"), name, found.join(",")));
        }
        if seen.contains(&name) {
            errs.push(FieldError::invalid(
                "spec.versions",
                Value::Array(versions.to_vec()),
                "must contain unique version names",
            ));
        }
        seen.push(name);
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        match v.pointer("/schema/openAPIV3Schema") {
            Some(schema) if schema.is_object() => {
                errs.extend(crate::structural::check(schema, &at("schema.openAPIV3Schema")));
            }
            _ => errs.push(FieldError::required(&at("schema.openAPIV3Schema"), "schemas are required")),
        }
        if let Some(subs) = v.get("subresources") {
            subresources(subs, &at("subresources"), errs);
        }
        printer_columns(arr_at(v, "additionalPrinterColumns"), &at("additionalPrinterColumns"), errs);
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            "spec.versions",
            Value::Array(versions.to_vec()),
            "must have exactly one version marked as storage version",
        ));
    }
}

/// A CustomResourceDefinition, new or changed.
pub(crate) fn validate(obj: &Value, info: KindInfo) -> Vec<FieldError> {
    let rules = MetaRules { namespaced: info.namespaced, name_rule: info.name_rule, kube_finalizers: false };
    let mut errs = meta::validate(get(obj, "metadata"), rules);
    let spec = get(obj, "spec");
    let group = str_at(spec, "group");
    let plural = str_at(spec.get("names").unwrap_or(&Value::Null), "plural");
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if let found @ [_, ..] = dns1123_subdomain(group).as_slice() {
        errs.push(FieldError::invalid("spec.group", group, found.join(",")));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid("spec.group", group, "should be a domain with at least one dot"));
    }
    match str_at(spec, "scope") {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported("spec.scope", other, &["Cluster", "Namespaced"])),
    }
    versions(spec, &mut errs);
    let names_v = spec.get("names").cloned().unwrap_or(Value::Null);
    for key in ["plural", "singular", "kind", "listKind"] {
        if str_at(&names_v, key).is_empty() {
            errs.push(FieldError::required(&format!("spec.names.{key}"), ""));
        }
    }
    names(&names_v, "spec.names", &mut errs);
    match spec.pointer("/conversion/strategy").and_then(Value::as_str).unwrap_or("None") {
        "None" => {}
        other => errs.push(FieldError::not_supported("spec.conversion.strategy", other, &["None"])),
    }
    errs
}

/// A changed CustomResourceDefinition: [`validate`], and the group and
/// plural (the resource's name) fixed; the scope and kind fixed once
/// established; every stored version still in `spec.versions`.
pub(crate) fn validate_update(new: &Value, old: &Value, info: KindInfo) -> Vec<FieldError> {
    let mut errs = validate(new, info);
    let established = arr_at(get(old, "status"), "conditions")
        .iter()
        .any(|c| str_at(c, "type") == "Established" && str_at(c, "status") == "True");
    let mut fixed = vec![("spec.group", "/spec/group"), ("spec.names.plural", "/spec/names/plural")];
    if established {
        fixed.push(("spec.scope", "/spec/scope"));
        fixed.push(("spec.names.kind", "/spec/names/kind"));
    }
    for (field, pointer) in fixed {
        let (n, o) = (new.pointer(pointer), old.pointer(pointer));
        if n != o {
            errs.push(FieldError::invalid(field, n.cloned().unwrap_or(Value::Null), "field is immutable"));
        }
    }
    let served: Vec<&str> = arr_at(get(new, "spec"), "versions").iter().map(|v| str_at(v, "name")).collect();
    for (i, v) in arr_at(get(new, "status"), "storedVersions").iter().enumerate() {
        let v = v.as_str().unwrap_or_default();
        if !served.contains(&v) {
            errs.push(FieldError::invalid(&format!("status.storedVersions[{i}]"), v, "must appear in spec.versions"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info() -> KindInfo {
        super::super::kind_info("apiextensions.k8s.io", "CustomResourceDefinition").expect("known")
    }

    fn crd() -> Value {
        let mut v = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
        });
        apply_defaults(v.as_object_mut().expect("object"));
        v
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn defaults_and_a_valid_definition() {
        let v = crd();
        assert_eq!(v["spec"]["names"]["singular"], "widget");
        assert_eq!(v["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(v["spec"]["conversion"]["strategy"], "None");
        assert_eq!(messages(&validate(&v, info())), Vec::<String>::new());
    }

    #[test]
    fn bad_definitions_get_apiextensions_messages() {
        let mut v = crd();
        v["metadata"]["name"] = json!("gadgets.example.com");
        v["spec"]["group"] = json!("example");
        v["spec"]["scope"] = json!("Global");
        v["spec"]["versions"][0]["storage"] = json!(false);
        v["spec"]["conversion"]["strategy"] = json!("Webhook");
        v["spec"]["names"]["listKind"] = json!("Widget");
        let m = messages(&validate(&v, info()));
        for want in [
            "metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group",
            "spec.group: Invalid value: \"example\": should be a domain with at least one dot",
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
            "spec.conversion.strategy: Unsupported value: \"Webhook\": supported values: \"None\"",
            "spec.names.listKind: Invalid value: \"Widget\": kind and listKind may not be the same",
        ] {
            assert!(m.iter().any(|x| x == want), "{want} not in {m:#?}");
        }
        assert!(
            m.iter().any(|x| x.starts_with("spec.versions: Invalid value: ")
                && x.ends_with("must have exactly one version marked as storage version")),
            "{m:#?}"
        );
    }

    #[test]
    fn schemas_scale_paths_and_columns_are_checked() {
        let mut v = crd();
        v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] = json!({});
        v["spec"]["versions"][0]["subresources"] =
            json!({"scale": {"specReplicasPath": ".status.n", "statusReplicasPath": ""}});
        v["spec"]["versions"][0]["additionalPrinterColumns"] =
            json!([{"name": "Size", "type": "float", "jsonPath": ".spec.size"}]);
        let m = messages(&validate(&v, info()));
        for want in [
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields",
            "spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \".status.n\": should be a json path under .spec",
            "spec.versions[0].subresources.scale.statusReplicasPath: Required value",
        ] {
            assert!(m.iter().any(|x| x == want), "{want} not in {m:#?}");
        }
        assert!(
            m.iter()
                .any(|x| x
                    .starts_with("spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: \"float\"")),
            "{m:#?}"
        );
        let mut v = crd();
        v["spec"]["versions"][0].as_object_mut().expect("object").remove("schema");
        assert_eq!(
            messages(&validate(&v, info())),
            ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
        );
    }

    #[test]
    fn group_plural_and_once_established_scope_and_kind_are_fixed() {
        let mut old = crd();
        old["status"] = json!({"conditions": [{"type": "Established", "status": "True"}], "storedVersions": ["v1"]});
        let mut new = old.clone();
        new["spec"]["scope"] = json!("Cluster");
        new["spec"]["names"]["kind"] = json!("Gadget");
        new["spec"]["names"]["listKind"] = json!("GadgetList");
        new["spec"]["versions"][0]["name"] = json!("v2");
        let m = messages(&validate_update(&new, &old, info()));
        assert!(m.contains(&"spec.scope: Invalid value: \"Cluster\": field is immutable".to_owned()), "{m:#?}");
        assert!(m.contains(&"spec.names.kind: Invalid value: \"Gadget\": field is immutable".to_owned()), "{m:#?}");
        assert!(
            m.contains(&"status.storedVersions[0]: Invalid value: \"v1\": must appear in spec.versions".to_owned()),
            "{m:#?}"
        );
    }
}
