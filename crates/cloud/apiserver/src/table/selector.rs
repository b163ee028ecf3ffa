//! Label selectors (`metav1.LabelSelector`: `matchLabels` and `matchExpressions`) written out as Kubernetes writes
//! them in tables, through `metav1.LabelSelectorAsSelector(...).String()`.
//!
//! Requirements are sorted by key (matchLabels before matchExpressions on a tie) and joined with ",": `key=value`,
//! `key in (a,b)`, `key notin (a,b)`, `key`, `!key`, with the values of each sorted. A selector that does not convert
//! (an unknown operator, a key or value that is not a valid label key or value, the wrong number of values) is an
//! error, as in Kubernetes; each printer decides how to show that.

use serde_json::Value;

use super::{list, object, text};

/// The longest label value, and the longest name part of a qualified name (a label key).
const LABEL_VALUE_MAX: usize = 63;
/// The longest DNS-1123 subdomain (the prefix of a label key).
const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// A selector that `LabelSelectorAsSelector` refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct InvalidSelector;

/// The selection operators a `LabelSelector` converts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    /// From `matchLabels`.
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One requirement of a selector (`labels.Requirement`).
#[derive(Debug)]
struct Requirement<'a> {
    key: &'a str,
    operator: Operator,
    values: Vec<&'a str>,
}

impl<'a> Requirement<'a> {
    /// `labels.NewRequirement`: the key must be a qualified name, each value a label value, and the number of
    /// values must suit the operator.
    fn new(key: &'a str, operator: Operator, values: Vec<&'a str>) -> Result<Self, InvalidSelector> {
        let count_ok = match operator {
            Operator::In | Operator::NotIn => !values.is_empty(),
            Operator::Equals => values.len() == 1,
            Operator::Exists | Operator::DoesNotExist => values.is_empty(),
        };
        if count_ok && is_qualified_name(key) && values.iter().all(|v| is_label_value(v)) {
            Ok(Self { key, operator, values })
        } else {
            Err(InvalidSelector)
        }
    }

    /// `Requirement.String`.
    fn write(&self, out: &mut String) {
        if self.operator == Operator::DoesNotExist {
            out.push('!');
        }
        out.push_str(self.key);
        let (before, after) = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return,
            Operator::Equals => ("=", ""),
            Operator::In => (" in (", ")"),
            Operator::NotIn => (" notin (", ")"),
        };
        out.push_str(before);
        let mut values = self.values.clone();
        values.sort_unstable();
        out.push_str(&values.join(","));
        out.push_str(after);
    }
}

/// `metav1.LabelSelectorAsSelector(selector).String()`: `Ok("")` for an absent (nil) or empty selector, an error for
/// one Kubernetes cannot convert. A `selector` that is not a JSON object reads as absent; so do `matchLabels` values
/// that are not strings, `matchExpressions` entries that are not objects and `values` entries that are not strings.
pub(super) fn selector_string(selector: Option<&Value>) -> Result<String, InvalidSelector> {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return Ok(String::new());
    };
    let mut requirements = Vec::new();
    for (key, value) in object(selector, &["matchLabels"]).into_iter().flatten() {
        if let Some(value) = value.as_str() {
            requirements.push(Requirement::new(key, Operator::Equals, vec![value])?);
        }
    }
    for expression in list(selector, &["matchExpressions"]).iter().filter(|e| e.is_object()) {
        let operator = match text(expression, &["operator"]) {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            _ => return Err(InvalidSelector),
        };
        let values = list(expression, &["values"]).iter().filter_map(Value::as_str).collect();
        requirements.push(Requirement::new(text(expression, &["key"]), operator, values)?);
    }
    // Stable, so that matchLabels come before matchExpressions with the same key, as Go's sort leaves them.
    requirements.sort_by(|a, b| a.key.cmp(b.key));
    let mut out = String::new();
    for (i, requirement) in requirements.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        requirement.write(&mut out);
    }
    Ok(out)
}

/// `metav1.FormatLabelSelector`: the selector, `<none>` when it selects by nothing (absent or empty), `<error>` when
/// it does not convert.
pub(super) fn format_label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        Ok(s) if s.is_empty() => "<none>".to_owned(),
        Ok(s) => s,
        Err(InvalidSelector) => "<error>".to_owned(),
    }
}

/// `validation.IsQualifiedName`: an optional DNS-1123 subdomain prefix and "/", then a name of at most 63
/// alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric.
fn is_qualified_name(value: &str) -> bool {
    let name = match value.split_once('/') {
        None => value,
        Some((prefix, name)) => {
            if name.contains('/') || !is_dns1123_subdomain(prefix) {
                return false;
            }
            name
        }
    };
    !name.is_empty() && name.len() <= LABEL_VALUE_MAX && is_qualified_name_part(name)
}

/// `validation.IsValidLabelValue`: empty, or at most 63 characters shaped like the name part of a qualified name.
fn is_label_value(value: &str) -> bool {
    value.len() <= LABEL_VALUE_MAX && (value.is_empty() || is_qualified_name_part(value))
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_qualified_name_part(value: &str) -> bool {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `validation.IsDNS1123Subdomain`: at most 253 characters of dot-separated lowercase RFC 1123 labels.
fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= DNS1123_SUBDOMAIN_MAX
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    is_lower_alphanumeric(*first)
                        && is_lower_alphanumeric(*last)
                        && bytes.iter().all(|b| is_lower_alphanumeric(*b) || *b == b'-')
                }
                _ => false,
            }
        })
}

fn is_lower_alphanumeric(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn format(selector: Value) -> String {
        format_label_selector(Some(&selector))
    }

    #[test]
    fn match_labels_and_expressions_sorted_by_key() {
        let selector = json!({
            "matchLabels": {"tier": "edge", "app": "mapper"},
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["b", "a", "c"]},
                {"key": "arch", "operator": "NotIn", "values": ["s390x"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
                {"key": "app", "operator": "In", "values": ["mapper", "bridge"]}
            ]
        });
        assert_eq!(
            format(selector),
            "app=mapper,app in (bridge,mapper),arch notin (s390x),gpu,!legacy,tier=edge,zone in (a,b,c)"
        );
    }

    #[test]
    fn absent_and_empty_selectors() {
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format(json!({})), "<none>");
        assert_eq!(format(json!({"matchLabels": {}, "matchExpressions": []})), "<none>");
        assert_eq!(format(json!("app=web")), "<none>");
        assert_eq!(selector_string(None), Ok(String::new()));
        // Mistyped parts read as absent.
        assert_eq!(format(json!({"matchLabels": {"a": 1, "b": "2"}, "matchExpressions": [3, null]})), "b=2");
    }

    #[test]
    fn selectors_kubernetes_refuses_are_errors() {
        let refused = [
            json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "in", "values": ["1"]}]}),
            json!({"matchExpressions": [{"key": "a", "values": ["1"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "NotIn"}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            json!({"matchExpressions": [{"operator": "Exists"}]}),
            json!({"matchLabels": {"bad key": "x"}}),
            json!({"matchLabels": {"app": "not valid!"}}),
            json!({"matchLabels": {"Example.com/app": "x"}}),
            json!({"matchLabels": {"a/b/c": "x"}}),
            json!({"matchLabels": {"/app": "x"}}),
            json!({"matchLabels": {"example.com/": "x"}}),
            json!({"matchLabels": {"app": "-x"}}),
            json!({"matchLabels": {"app": "x".repeat(64)}}),
        ];
        for selector in refused {
            assert_eq!(format(selector.clone()), "<error>", "{selector}");
            assert_eq!(selector_string(Some(&selector)), Err(InvalidSelector), "{selector}");
        }
    }

    #[test]
    fn label_keys_and_values() {
        assert!(is_qualified_name("app"));
        assert!(is_qualified_name("app.kubernetes.io/name"));
        assert!(is_qualified_name("node-role.kubernetes.io/Edge_1"));
        assert!(is_qualified_name(&"k".repeat(63)));
        assert!(!is_qualified_name(&"k".repeat(64)));
        assert!(!is_qualified_name("a..b.example/x"));
        assert!(!is_qualified_name("-app"));
        assert!(!is_qualified_name("app_"));
        assert!(!is_qualified_name("é"));
        assert!(is_label_value(""));
        assert!(is_label_value("v1.2_3-x"));
        assert!(!is_label_value("v1 "));
        assert!(is_dns1123_subdomain("example.com"));
        assert!(is_dns1123_subdomain(&["a"; 127].join(".")));
        assert!(!is_dns1123_subdomain(&["a"; 128].join(".")));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain("a.-b"));
        assert!(!is_dns1123_subdomain("ab-.c"));
    }

    #[test]
    fn single_values_are_written_as_given() {
        let selector = json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]});
        assert_eq!(format(selector), "a in (x)");
    }
}
