//! Small JSON helpers shared across the project.

use serde_json::Value;

/// Go's `json.Marshal` escapes `<`, `>`, `&`, U+2028 and U+2029 inside
/// strings (for HTML). Those characters occur only inside strings of
/// encoded JSON, so replacing them in the text gives Go's bytes.
pub fn go_html_escape(json: String) -> String {
    if !json.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// What kind of JSON value `v` is, for error messages ("a number").
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_go_does() {
        let text = serde_json::json!({"a": "<b> & \u{2028}\u{2029}"}).to_string();
        assert_eq!(go_html_escape(text), r#"{"a":"\u003cb\u003e \u0026 \u2028\u2029"}"#);
        assert_eq!(go_html_escape("{\"a\":1}".to_owned()), "{\"a\":1}");
        assert_eq!(type_name(&serde_json::json!([1])), "an array");
    }
}
