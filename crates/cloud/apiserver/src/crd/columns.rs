//! `additionalPrinterColumns`: the columns `kubectl get` shows for a custom
//! resource, rendered as apiextensions' table convertor renders them: the
//! name first, then each column's JSON path read from the object (`date`
//! columns as an age, several results joined by commas, nothing found as
//! an empty cell that kubectl prints `<none>`). A version without columns
//! gets `Name` and `Age`.
//!
//! The JSON paths are the subset of kubectl's JSONPath that definitions
//! use: fields (`.spec.replicas`), indexes (`[0]`), wildcards (`[*]`) and
//! equality filters (`[?(@.type=="Ready")]`).

use serde_json::{Value, json};
use time::OffsetDateTime;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.a.b=="x")]` (or `!=`).
    Filter {
        path: Vec<String>,
        equal: bool,
        value: Value,
    },
}

/// A printer column of a served version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PrinterColumn {
    name: String,
    ty: String,
    format: String,
    description: String,
    priority: i64,
    path: Option<Vec<Step>>,
}

/// The columns of a version (`spec.versions[i]`).
pub(crate) fn of(version: &Value) -> Vec<PrinterColumn> {
    let Some(cols) = version.get("additionalPrinterColumns").and_then(Value::as_array) else { return Vec::new() };
    cols.iter()
        .map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            PrinterColumn {
                name: s("name"),
                ty: s("type"),
                format: s("format"),
                description: s("description"),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                path: parse(&s("jsonPath")),
            }
        })
        .collect()
}

/// The column definitions of a table of such objects.
pub(crate) fn definitions(cols: &[PrinterColumn]) -> Vec<Value> {
    let defaults = crate::table::columns("", "");
    if cols.is_empty() {
        return defaults.iter().map(crate::table::Column::definition).collect();
    }
    let mut out = vec![defaults[0].definition()];
    out.extend(cols.iter().map(|c| {
        json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    out
}

/// The cells of one object's row.
pub(crate) fn cells(cols: &[PrinterColumn], obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    if cols.is_empty() {
        return crate::table::cells("", "", obj, now);
    }
    let mut out = vec![obj.pointer("/metadata/name").cloned().unwrap_or_else(|| json!(""))];
    for c in cols {
        let found = c.path.as_ref().map(|p| find(obj, p)).unwrap_or_default();
        let cell = match found.as_slice() {
            [] => Value::Null,
            [one] if c.ty == "date" => match one.as_str().and_then(edgehive_store::parse_rfc3339) {
                Some(t) => json!(crate::table::human_duration(now - t)),
                None => (*one).clone(),
            },
            [one] => (*one).clone(),
            many => json!(many.iter().map(|v| plain(v)).collect::<Vec<_>>().join(",")),
        };
        out.push(cell);
    }
    out
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Parses a JSON path; `None` when it is not of the supported form (the
/// column is then always empty, never an error for the whole table).
fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path.trim();
    let path = path.strip_prefix('{').and_then(|p| p.strip_suffix('}')).unwrap_or(path);
    let mut rest = path.strip_prefix('$').unwrap_or(path);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(Step::Field(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse() {
                steps.push(Step::Index(i));
            } else {
                steps.push(filter(inner)?);
            }
        } else {
            return None;
        }
    }
    Some(steps)
}

/// `?(@.type=="Ready")`.
fn filter(inner: &str) -> Option<Step> {
    let body = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (lhs, rhs, equal) = match body.split_once("==") {
        Some((l, r)) => (l, r, true),
        None => {
            let (l, r) = body.split_once("!=")?;
            (l, r, false)
        }
    };
    let path = lhs.trim().strip_prefix("@.")?.split('.').map(str::to_owned).collect();
    let rhs = rhs.trim();
    let value = match rhs.strip_prefix(['"', '\'']).and_then(|r| r.strip_suffix(['"', '\''])) {
        Some(s) => json!(s),
        None => serde_json::from_str(rhs).ok()?,
    };
    Some(Step::Filter { path, equal, value })
}

fn find<'v>(obj: &'v Value, steps: &[Step]) -> Vec<&'v Value> {
    let mut cur = vec![obj];
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(f) => next.extend(v.get(f)),
                Step::Index(i) => next.extend(v.get(*i)),
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter { path, equal, value } => {
                    for item in v.as_array().into_iter().flatten() {
                        let got = path.iter().try_fold(item, |cur, k| cur.get(k));
                        if (got == Some(value)) == *equal {
                            next.push(item);
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur.into_iter().filter(|v| !v.is_null()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(ty: &str, path: &str) -> PrinterColumn {
        let v = json!({"additionalPrinterColumns": [{"name": "C", "type": ty, "jsonPath": path}]});
        of(&v).remove(0)
    }

    #[test]
    fn paths_read_fields_indexes_wildcards_and_filters() {
        let obj = json!({
            "metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"size": 3, "ports": [{"port": 80}, {"port": 443}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]},
        });
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20454) + time::Duration::minutes(3);
        let cols = vec![
            column("integer", ".spec.size"),
            column("integer", ".spec.ports[1].port"),
            column("string", ".spec.ports[*].port"),
            column("string", ".status.conditions[?(@.type==\"Ready\")].status"),
            column("date", ".metadata.creationTimestamp"),
            column("string", ".spec.missing"),
            column("string", "{.spec.size}"),
        ];
        assert_eq!(
            cells(&cols, &obj, now),
            [json!("w"), json!(3), json!(443), json!("80,443"), json!("True"), json!("3m"), Value::Null, json!(3)]
        );
        let defs = definitions(&cols);
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[1]["type"], "integer");
        assert_eq!(definitions(&[]).len(), 2, "Name and Age when the version has none");
        assert_eq!(parse(".a..b"), None);
        assert_eq!(parse("spec"), None);
    }
}
