//! What the workload kinds (apps/v1, batch/v1) share: label selectors as apimachinery validates,
//! converts (`LabelSelectorAsSelector`) and matches them; pod templates (`ValidatePodTemplateSpec`); the
//! int-or-percent rules of rolling updates; and Go's `%#v` of the values Kubernetes prints in these
//! kinds' messages (`map[string]string{"app":"web"}`, `v1.LabelSelector{...}`, `intstr.IntOrString{...}`).

use super::json::{self, arr_at, child, get, index, int_at, obj_at, str_at, string_map};
use super::meta;
use super::names;
use super::pod::{pod_specific_annotations, validate_pod_spec};
use super::{FieldError, go_quote};
use serde_json::Value;

/// `ValidateNonnegativeField`'s message.
pub(crate) const NEGATIVE: &str = "must be greater than or equal to 0";
/// `ValidateImmutableField`'s message.
pub(crate) const FIELD_IMMUTABLE: &str = "field is immutable";

/// `ValidateNonnegativeField` of an optional integer field (absent or null: nothing to check).
pub(crate) fn nonnegative(obj: &Value, field: &str, path: &str) -> Option<FieldError> {
    int_at(obj, field).filter(|v| *v < 0).map(|v| FieldError::invalid(&child(path, field), v, NEGATIVE))
}

// --- Go's %#v -------------------------------------------------------------------------------------------

/// `map[string]string{"a":"b", "c":"d"}` (keys sorted, as fmt prints maps), `map[string]string(nil)` for
/// an absent map.
pub(crate) fn go_string_map(v: &Value) -> String {
    match v.as_object() {
        None => "map[string]string(nil)".to_string(),
        Some(m) => {
            let entries: Vec<String> =
                m.iter().map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or("")))).collect();
            format!("map[string]string{{{}}}", entries.join(", "))
        }
    }
}

/// `[]string{"a", "b"}`, `[]string(nil)`.
fn go_string_slice(v: &Value) -> String {
    match v.as_array() {
        None => "[]string(nil)".to_string(),
        Some(items) => {
            let quoted: Vec<String> = items.iter().map(|s| go_quote(s.as_str().unwrap_or(""))).collect();
            format!("[]string{{{}}}", quoted.join(", "))
        }
    }
}

/// `[]int32{1, 2}`, `[]int32(nil)`.
pub(crate) fn go_int32_slice(v: &Value) -> String {
    match v.as_array() {
        None => "[]int32(nil)".to_string(),
        Some(items) => {
            let numbers: Vec<String> = items.iter().map(|n| n.as_i64().unwrap_or(0).to_string()).collect();
            format!("[]int32{{{}}}", numbers.join(", "))
        }
    }
}

/// A `metav1.LabelSelector` as `%#v` prints it.
pub(crate) fn go_label_selector(sel: &Value) -> String {
    let expressions = match get(sel, "matchExpressions").as_array() {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|r| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        go_quote(str_at(r, "key")),
                        go_quote(str_at(r, "operator")),
                        go_string_slice(get(r, "values"))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{expressions}}}",
        go_string_map(get(sel, "matchLabels"))
    )
}

/// An `intstr.IntOrString` as `%#v` prints it (it has no value-receiver `String()`).
pub(crate) fn go_int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}", go_quote(s)),
        other => format!("intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}", other.as_i64().unwrap_or(0)),
    }
}

// --- label selectors ------------------------------------------------------------------------------------

/// `ValidateLabelSelector` with label values checked (`AllowInvalidLabelValueInSelector` off).
pub(crate) fn validate_label_selector(sel: &Value, path: &str) -> Vec<FieldError> {
    if sel.is_null() {
        return Vec::new();
    }
    let mut errs = meta::validate_labels(&string_map(sel, "matchLabels"), &child(path, "matchLabels"));
    for (i, req) in arr_at(sel, "matchExpressions").iter().enumerate() {
        let at = index(&child(path, "matchExpressions"), i);
        let values = json::string_list(req, "values");
        match str_at(req, "operator") {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                &child(&at, "values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                &child(&at, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(&child(&at, "operator"), other, "not a valid selector operator")),
        }
        let k = str_at(req, "key");
        errs.extend(names::qualified_name(k).into_iter().map(|m| FieldError::invalid(&child(&at, "key"), k, m)));
        for (j, value) in values.iter().enumerate() {
            for m in names::label_value(value) {
                errs.push(FieldError::invalid(&index(&child(&at, "values"), j), *value, m));
            }
        }
    }
    errs
}

/// One requirement of a converted selector.
#[derive(Debug)]
pub(crate) enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A label selector as `LabelSelectorAsSelector` converts it.
#[derive(Debug)]
pub(crate) enum Selector {
    /// No selector at all: matches nothing.
    Nothing,
    /// An empty selector: matches everything (`Empty()` is true).
    Everything,
    /// All of these must hold.
    All(Vec<Requirement>),
}

impl Selector {
    /// `LabelSelectorAsSelector`; `None` where it fails (a bad operator, key, value or value count).
    pub(crate) fn from_label_selector(sel: &Value) -> Option<Selector> {
        if sel.is_null() {
            return Some(Selector::Nothing);
        }
        let labels = string_map(sel, "matchLabels");
        let exprs = arr_at(sel, "matchExpressions");
        if labels.is_empty() && exprs.is_empty() {
            return Some(Selector::Everything);
        }
        let valid_key = |k: &str| names::qualified_name(k).is_empty();
        let valid_values = |vs: &[&str]| vs.iter().all(|v| names::label_value(v).is_empty());
        let mut reqs = Vec::new();
        for (k, v) in labels {
            if !valid_key(k) || !valid_values(&[v]) {
                return None;
            }
            reqs.push(Requirement::Equals(k.to_string(), v.to_string()));
        }
        for e in exprs {
            let k = str_at(e, "key");
            let values = json::string_list(e, "values");
            if !valid_key(k) || !valid_values(&values) {
                return None;
            }
            let owned = || values.iter().map(|v| v.to_string()).collect::<Vec<_>>();
            reqs.push(match str_at(e, "operator") {
                "In" if !values.is_empty() => Requirement::In(k.to_string(), owned()),
                "NotIn" if !values.is_empty() => Requirement::NotIn(k.to_string(), owned()),
                "Exists" if values.is_empty() => Requirement::Exists(k.to_string()),
                "DoesNotExist" if values.is_empty() => Requirement::DoesNotExist(k.to_string()),
                _ => return None,
            });
        }
        Some(Selector::All(reqs))
    }

    /// `Empty()`: true for the selector that matches everything.
    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Selector::Everything)
    }

    /// Whether a set of labels (a JSON object of strings) matches.
    pub(crate) fn matches(&self, labels: &Value) -> bool {
        let label = |k: &str| labels.get(k).and_then(Value::as_str);
        match self {
            Selector::Nothing => false,
            Selector::Everything => true,
            Selector::All(reqs) => reqs.iter().all(|r| match r {
                Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
                Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
                Requirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
                Requirement::Exists(k) => label(k).is_some(),
                Requirement::DoesNotExist(k) => label(k).is_none(),
            }),
        }
    }
}

/// "`selector` does not match template `labels`" at `<template>.metadata.labels`, when `selector` does not
/// select the template's labels.
pub(crate) fn template_labels_match(selector: &Selector, template: &Value, template_path: &str) -> Option<FieldError> {
    let labels = get(get(template, "metadata"), "labels");
    (!selector.matches(labels)).then(|| {
        FieldError::invalid(
            &child(&child(template_path, "metadata"), "labels"),
            labels.clone(),
            "`selector` does not match template `labels`",
        )
        .with_value_text(go_string_map(labels))
    })
}

/// An invalid selector value, printed as Go prints a `*metav1.LabelSelector`.
pub(crate) fn invalid_selector(path: &str, sel: &Value, detail: &str) -> FieldError {
    FieldError::invalid(path, sel.clone(), detail).with_value_text(go_label_selector(sel))
}

// --- pod templates --------------------------------------------------------------------------------------

/// `ValidatePodTemplateSpec` at `path` (e.g. `spec.template`): its labels (at `path.labels`, as Kubernetes
/// names them), annotations, the pod spec and no ephemeral containers. With `pod_spec` false only the
/// metadata is checked, as a StatefulSet's template is (`ValidatePodTemplateSpecForStatefulSet`).
pub(crate) fn validate_pod_template(template: &Value, path: &str, pod_spec: bool) -> Vec<FieldError> {
    let meta = get(template, "metadata");
    let spec = get(template, "spec");
    let mut errs = meta::validate_labels(&string_map(meta, "labels"), &child(path, "labels"));
    errs.extend(meta::validate_annotations(&string_map(meta, "annotations"), &child(path, "annotations")));
    errs.extend(pod_specific_annotations(meta, spec, &child(path, "annotations")));
    if pod_spec {
        let spec_path = child(path, "spec");
        errs.extend(validate_pod_spec(spec, &spec_path));
        if !arr_at(spec, "ephemeralContainers").is_empty() {
            errs.push(FieldError::forbidden(
                &child(&spec_path, "ephemeralContainers"),
                "ephemeral containers not allowed in pod template",
            ));
        }
    }
    errs
}

/// The template's `restartPolicy` must be Always and it may have no `activeDeadlineSeconds` (Deployment,
/// ReplicaSet, DaemonSet, StatefulSet); `owner` names the kind in Kubernetes' message.
pub(crate) fn always_restarting(template: &Value, template_path: &str, owner: &str) -> Vec<FieldError> {
    let spec = get(template, "spec");
    let spec_path = child(template_path, "spec");
    let mut errs = Vec::new();
    let policy = str_at(spec, "restartPolicy");
    if policy != "Always" {
        errs.push(FieldError::not_supported(&child(&spec_path, "restartPolicy"), policy, &["Always"]));
    }
    if json::has(spec, "activeDeadlineSeconds") {
        errs.push(FieldError::forbidden(
            &child(&spec_path, "activeDeadlineSeconds"),
            format!("activeDeadlineSeconds in {owner} is not Supported"),
        ));
    }
    errs
}

// --- int or percent -------------------------------------------------------------------------------------

/// `IsValidPercent`: `[0-9]+%`.
fn percent_errors(s: &str) -> Vec<String> {
    let digits = s.strip_suffix('%').unwrap_or("");
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        Vec::new()
    } else {
        vec![names::regex_error(
            "a valid percent string must be a numeric string followed by an ending '%'",
            "[0-9]+%",
            &["1%", "93%"],
        )]
    }
}

/// The number of a valid percent string.
fn percent_value(v: &Value) -> Option<i64> {
    let s = v.as_str()?;
    if !percent_errors(s).is_empty() {
        return None;
    }
    let digits = &s[..s.len() - 1];
    Some(digits.parse::<i64>().unwrap_or(i64::MAX))
}

/// `getIntOrPercentValue`: the percent number, else `IntValue()` (a non-numeric string is 0).
pub(crate) fn int_or_percent_value(v: &Value) -> i64 {
    if let Some(p) = percent_value(v) {
        return p;
    }
    match v {
        Value::String(s) => s.parse::<i64>().unwrap_or(0),
        other => other.as_i64().unwrap_or(0),
    }
}

/// `ValidatePositiveIntOrPercent`.
pub(crate) fn positive_int_or_percent(v: &Value, path: &str) -> Vec<FieldError> {
    match v {
        Value::String(s) => percent_errors(s)
            .into_iter()
            .map(|m| FieldError::invalid(path, v.clone(), m).with_value_text(go_int_or_string(v)))
            .collect(),
        other => {
            let n = other.as_i64().unwrap_or(0);
            if n < 0 { vec![FieldError::invalid(path, n, NEGATIVE)] } else { Vec::new() }
        }
    }
}

/// `IsNotMoreThan100Percent`.
pub(crate) fn not_more_than_100_percent(v: &Value, path: &str) -> Option<FieldError> {
    percent_value(v).filter(|p| *p > 100).map(|_| {
        FieldError::invalid(path, v.clone(), "must not be greater than 100%").with_value_text(go_int_or_string(v))
    })
}

/// An object field, for the rules that need one (`None` when absent, null or not an object).
pub(crate) fn object<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    obj_at(v, key).map(|_| get(v, key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_renderings() {
        assert_eq!(go_string_map(&json!({"b": "2", "a": "1"})), r#"map[string]string{"a":"1", "b":"2"}"#);
        assert_eq!(go_string_map(&Value::Null), "map[string]string(nil)");
        assert_eq!(go_string_map(&json!({})), "map[string]string{}");
        assert_eq!(
            go_label_selector(&json!({})),
            "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
        );
        assert_eq!(
            go_label_selector(
                &json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", "y"]}, {"key": "b", "operator": "Exists"}]})
            ),
            "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{\
v1.LabelSelectorRequirement{Key:\"a\", Operator:\"In\", Values:[]string{\"x\", \"y\"}}, \
v1.LabelSelectorRequirement{Key:\"b\", Operator:\"Exists\", Values:[]string(nil)}}}"
        );
        assert_eq!(go_int_or_string(&json!("25%")), r#"intstr.IntOrString{Type:1, IntVal:0, StrVal:"25%"}"#);
        assert_eq!(go_int_or_string(&json!(3)), r#"intstr.IntOrString{Type:0, IntVal:3, StrVal:""}"#);
        assert_eq!(go_int32_slice(&json!([3, 1])), "[]int32{3, 1}");
    }

    #[test]
    fn selectors_convert_and_match() {
        let labels = json!({"app": "web", "tier": "front"});
        let sel = |s: Value| Selector::from_label_selector(&s).expect("valid");
        assert!(!sel(Value::Null).matches(&labels));
        assert!(sel(json!({})).matches(&labels) && sel(json!({})).is_empty());
        assert!(sel(json!({"matchLabels": {"app": "web"}})).matches(&labels));
        assert!(!sel(json!({"matchLabels": {"app": "db"}})).matches(&labels));
        let exprs =
            |op: &str, values: Value| json!({"matchExpressions": [{"key": "tier", "operator": op, "values": values}]});
        assert!(sel(exprs("In", json!(["front", "back"]))).matches(&labels));
        assert!(!sel(exprs("NotIn", json!(["front"]))).matches(&labels));
        assert!(sel(json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]})).matches(&labels));
        assert!(!sel(json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]})).matches(&labels));
        assert!(Selector::from_label_selector(&exprs("In", json!([]))).is_none());
        assert!(Selector::from_label_selector(&exprs("Has", json!(["a"]))).is_none());
        assert!(Selector::from_label_selector(&json!({"matchLabels": {"a b": "c"}})).is_none());
        assert!(Selector::from_label_selector(&json!({"matchLabels": {"a": "c d"}})).is_none());
    }

    #[test]
    fn label_selector_rules() {
        let msgs = |s: Value| -> Vec<String> {
            validate_label_selector(&s, "spec.selector").iter().map(FieldError::message).collect()
        };
        assert!(msgs(json!({"matchLabels": {"app": "web"}})).is_empty());
        assert_eq!(
            msgs(
                json!({"matchExpressions": [{"key": "a", "operator": "In"}, {"key": "b", "operator": "Exists", "values": ["x"]}, {"key": "c", "operator": "Has"}]})
            ),
            vec![
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "spec.selector.matchExpressions[2].operator: Invalid value: \"Has\": not a valid selector operator",
            ]
        );
        let bad_value = msgs(json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x y"]}]}));
        assert_eq!(bad_value.len(), 1);
        assert!(
            bad_value[0].starts_with(
                "spec.selector.matchExpressions[0].values[0]: Invalid value: \"x y\": a valid label must be"
            )
        );
        let bad_key = msgs(json!({"matchLabels": {"-a": "x"}}));
        assert!(
            bad_key[0].starts_with("spec.selector.matchLabels: Invalid value: \"-a\": name part must consist of"),
            "{bad_key:?}"
        );
    }

    #[test]
    fn int_or_percent_rules() {
        let msgs = |v: Value| -> Vec<String> {
            let mut e = positive_int_or_percent(&v, "p");
            e.extend(not_more_than_100_percent(&v, "p"));
            e.iter().map(FieldError::message).collect()
        };
        assert!(msgs(json!("25%")).is_empty() && msgs(json!(3)).is_empty() && msgs(json!("100%")).is_empty());
        assert_eq!(msgs(json!(-1)), vec!["p: Invalid value: -1: must be greater than or equal to 0"]);
        assert_eq!(
            msgs(json!("abc")),
            vec![
                "p: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"abc\"}: a valid percent string must be a \
numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
            ]
        );
        assert_eq!(
            msgs(json!("150%")),
            vec![
                "p: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
            ]
        );
        assert_eq!(int_or_percent_value(&json!("25%")), 25);
        assert_eq!(int_or_percent_value(&json!("7")), 7);
        assert_eq!(int_or_percent_value(&json!("x")), 0);
        assert_eq!(int_or_percent_value(&json!(4)), 4);
    }
}
