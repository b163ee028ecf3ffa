//! RFC 6902 JSON patch (`application/json-patch+json`) with RFC 6901 JSON pointers: what
//! `kubectl patch --type json` sends.
//!
//! The whole document is parsed and checked before anything is applied, and the operations
//! run on a copy that replaces the target only when all of them succeeded.

use serde_json::{Map, Value};

use super::{PatchError, brief, json_eq};

/// The most operations one patch may hold: Kubernetes' limit.
pub(crate) const MAX_OPERATIONS: usize = 10_000;

/// The most bytes (as serialized JSON, roughly) that the `copy` operations of one patch may
/// duplicate. Each `copy` can double the document, so without a bound a patch of a few dozen
/// operations could exhaust memory.
pub(crate) const MAX_COPIED_BYTES: usize = 16 << 20;

/// RFC 6902 JSON patch (application/json-patch+json): add, remove, replace, move, copy, test,
/// with JSON Pointer (RFC 6901, ~0 ~1 escapes, "-" for append). Applied atomically: on error
/// target is unchanged.
///
/// Shape errors (not an array, an operation that is not an object, a missing or unknown `op`,
/// a missing `path`/`from`/`value`, a pointer not starting with `/`, a bad `~` escape, a move
/// into its own child) are [`PatchError::Malformed`]. Everything that depends on the target
/// (a path that does not exist, an index out of range, a failed `test`) is
/// [`PatchError::Unapplicable`].
///
/// ```
/// # use edgehive_registry::patch::json_patch;
/// # use serde_json::json;
/// let mut node = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}});
/// let patch = json!([
///     {"op": "test", "path": "/spec/taints/0/key", "value": "a"},
///     {"op": "add", "path": "/spec/taints/-", "value": {"key": "b", "effect": "NoExecute"}},
///     {"op": "remove", "path": "/spec/taints/0"},
/// ]);
/// json_patch(&mut node, &patch)?;
/// assert_eq!(node, json!({"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}}));
/// # Ok::<(), edgehive_registry::patch::PatchError>(())
/// ```
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops = parse(patch)?;
    let mut doc = target.clone();
    let mut copied = 0;
    for (i, op) in ops.iter().enumerate() {
        apply(&mut doc, op, &mut copied).map_err(|e| match e {
            PatchError::Malformed(m) => PatchError::Malformed(format!("operation {i}: {m}")),
            PatchError::Unapplicable(m) => PatchError::Unapplicable(format!("operation {i}: {m}")),
        })?;
    }
    *target = doc;
    Ok(())
}

/// A parsed JSON pointer: the unescaped reference tokens, and the text for messages.
#[derive(Debug)]
struct Pointer {
    text: String,
    tokens: Vec<String>,
}

impl Pointer {
    fn parse(text: &str) -> Result<Pointer, PatchError> {
        if text.is_empty() {
            return Ok(Pointer { text: String::new(), tokens: Vec::new() });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(PatchError::Malformed(format!("JSON pointer {text:?} does not start with '/'")));
        };
        let tokens = rest.split('/').map(|raw| unescape(raw, text)).collect::<Result<_, _>>()?;
        Ok(Pointer { text: text.to_owned(), tokens })
    }

    /// Whether `self` is a proper prefix of `other` (a location and one of its children).
    fn is_proper_prefix_of(&self, other: &Pointer) -> bool {
        self.tokens.len() < other.tokens.len() && other.tokens.starts_with(&self.tokens)
    }
}

/// Decodes `~1` to `/` and `~0` to `~`; any other `~` is an error (RFC 6901 section 3).
fn unescape(raw: &str, whole: &str) -> Result<String, PatchError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('~'),
            Some('1') => out.push('/'),
            _ => return Err(PatchError::Malformed(format!("JSON pointer {whole:?} has a '~' not followed by 0 or 1"))),
        }
    }
    Ok(out)
}

/// One operation of the patch document.
#[derive(Debug)]
enum Op {
    Add { path: Pointer, value: Value },
    Remove { path: Pointer },
    Replace { path: Pointer, value: Value },
    Move { from: Pointer, path: Pointer },
    Copy { from: Pointer, path: Pointer },
    Test { path: Pointer, value: Value },
}

fn parse(patch: &Value) -> Result<Vec<Op>, PatchError> {
    let Value::Array(items) = patch else {
        return Err(PatchError::Malformed(format!(
            "a JSON patch must be an array of operations, got {}",
            brief(patch)
        )));
    };
    if items.len() > MAX_OPERATIONS {
        return Err(PatchError::Malformed(format!(
            "a JSON patch may hold at most {MAX_OPERATIONS} operations, this one has {}",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            parse_op(item).map_err(|e| match e {
                PatchError::Malformed(m) => PatchError::Malformed(format!("operation {i}: {m}")),
                other => other,
            })
        })
        .collect()
}

fn parse_op(item: &Value) -> Result<Op, PatchError> {
    let Value::Object(obj) = item else {
        return Err(PatchError::Malformed(format!("an operation must be an object, got {}", brief(item))));
    };
    let op = string_member(obj, "op")?;
    let path = Pointer::parse(string_member(obj, "path")?)?;
    let value = || obj.get("value").cloned().ok_or_else(|| missing("value", op));
    let from = || string_member(obj, "from").and_then(Pointer::parse);
    Ok(match op {
        "add" => Op::Add { path, value: value()? },
        "remove" => Op::Remove { path },
        "replace" => Op::Replace { path, value: value()? },
        "test" => Op::Test { path, value: value()? },
        "move" => {
            let from = from()?;
            if from.is_proper_prefix_of(&path) {
                return Err(PatchError::Malformed(format!(
                    "cannot move {:?} into its own child {:?}",
                    from.text, path.text
                )));
            }
            Op::Move { from, path }
        }
        "copy" => Op::Copy { from: from()?, path },
        other => return Err(PatchError::Malformed(format!("unknown op {other:?}"))),
    })
}

fn string_member<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a str, PatchError> {
    match obj.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(PatchError::Malformed(format!("member {name:?} must be a string, got {}", brief(other)))),
        None => Err(missing(name, obj.get("op").and_then(Value::as_str).unwrap_or("operation"))),
    }
}

fn missing(member: &str, op: &str) -> PatchError {
    PatchError::Malformed(format!("{op} is missing member {member:?}"))
}

fn apply(doc: &mut Value, op: &Op, copied: &mut usize) -> Result<(), PatchError> {
    match op {
        Op::Add { path, value } => add(doc, path, value.clone()),
        Op::Remove { path } => remove(doc, path).map(drop),
        Op::Replace { path, value } => {
            let slot = get_mut(doc, &path.tokens).ok_or_else(|| not_found(path))?;
            *slot = value.clone();
            Ok(())
        }
        Op::Move { from, path } => {
            if from.tokens == path.tokens {
                return get(doc, &from.tokens).map(drop).ok_or_else(|| not_found(from));
            }
            let value = remove(doc, from)?;
            add(doc, path, value)
        }
        Op::Copy { from, path } => {
            let source = get(doc, &from.tokens).ok_or_else(|| not_found(from))?;
            *copied = copied.saturating_add(approximate_size(source));
            if *copied > MAX_COPIED_BYTES {
                return Err(PatchError::Unapplicable(format!(
                    "the copy operations would duplicate more than {MAX_COPIED_BYTES} bytes"
                )));
            }
            let value = source.clone();
            add(doc, path, value)
        }
        Op::Test { path, value } => {
            let found = get(doc, &path.tokens).ok_or_else(|| not_found(path))?;
            if json_eq(found, value) {
                Ok(())
            } else {
                Err(PatchError::Unapplicable(format!(
                    "test failed: {:?} is {}, not {}",
                    path.text,
                    brief(found),
                    brief(value)
                )))
            }
        }
    }
}

/// Roughly the length of `v` serialized, without serializing it.
fn approximate_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(list) => list.iter().map(approximate_size).fold(2, |a, b| a.saturating_add(b + 1)),
        Value::Object(map) => {
            map.iter().map(|(k, v)| k.len() + 4 + approximate_size(v)).fold(2, |a, b| a.saturating_add(b))
        }
    }
}

fn not_found(path: &Pointer) -> PatchError {
    PatchError::Unapplicable(format!("path {:?} does not exist", path.text))
}

/// The index an array reference token names, if it is one: `0` or digits without a
/// leading zero (RFC 6901 section 4).
fn array_index(token: &str) -> Option<usize> {
    let digits = token.bytes().all(|b| b.is_ascii_digit());
    if token.is_empty() || !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

fn get<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    tokens.iter().try_fold(doc, |cur, token| match cur {
        Value::Object(map) => map.get(token),
        Value::Array(list) => list.get(array_index(token)?),
        _ => None,
    })
}

fn get_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    tokens.iter().try_fold(doc, |cur, token| match cur {
        Value::Object(map) => map.get_mut(token),
        Value::Array(list) => list.get_mut(array_index(token)?),
        _ => None,
    })
}

/// The container that holds `path`, and the last token; `None` for the root.
fn parent_mut<'a>(doc: &'a mut Value, path: &'a Pointer) -> Result<Option<(&'a mut Value, &'a str)>, PatchError> {
    let Some((last, parents)) = path.tokens.split_last() else {
        return Ok(None);
    };
    let parent = get_mut(doc, parents)
        .ok_or_else(|| PatchError::Unapplicable(format!("the parent of path {:?} does not exist", path.text)))?;
    Ok(Some((parent, last)))
}

fn add(doc: &mut Value, path: &Pointer, value: Value) -> Result<(), PatchError> {
    let Some((parent, last)) = parent_mut(doc, path)? else {
        *doc = value;
        return Ok(());
    };
    match parent {
        Value::Object(map) => {
            map.insert(last.to_owned(), value);
            Ok(())
        }
        Value::Array(list) if last == "-" => {
            list.push(value);
            Ok(())
        }
        Value::Array(list) => match array_index(last) {
            Some(i) if i <= list.len() => {
                list.insert(i, value);
                Ok(())
            }
            _ => Err(PatchError::Unapplicable(format!(
                "path {:?}: {last:?} is not an index from 0 to {} of the array",
                path.text,
                list.len()
            ))),
        },
        other => {
            Err(PatchError::Unapplicable(format!("path {:?}: cannot add a member to {}", path.text, brief(other))))
        }
    }
}

fn remove(doc: &mut Value, path: &Pointer) -> Result<Value, PatchError> {
    let Some((parent, last)) = parent_mut(doc, path)? else {
        return Err(PatchError::Unapplicable("cannot remove the whole document".to_owned()));
    };
    let removed = match parent {
        Value::Object(map) => map.remove(last),
        Value::Array(list) => array_index(last).filter(|&i| i < list.len()).map(|i| list.remove(i)),
        _ => None,
    };
    removed.ok_or_else(|| not_found(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_unescape_in_the_right_order() {
        let p = Pointer::parse("/a~1b/~01/").expect("valid");
        assert_eq!(p.tokens, vec!["a/b", "~1", ""]);
        assert!(Pointer::parse("a").is_err());
        assert!(Pointer::parse("/a~").is_err());
        assert!(Pointer::parse("/a~2").is_err());
        assert!(Pointer::parse("").expect("root").tokens.is_empty());
    }

    #[test]
    fn array_indices_reject_leading_zeros_and_signs() {
        assert_eq!(array_index("0"), Some(0));
        assert_eq!(array_index("10"), Some(10));
        assert_eq!(array_index("01"), None);
        assert_eq!(array_index("-1"), None);
        assert_eq!(array_index("+1"), None);
        assert_eq!(array_index(""), None);
        assert_eq!(array_index("99999999999999999999999"), None);
    }

    #[test]
    fn add_and_replace_at_the_root_replace_the_document() {
        let mut doc = json!({"a": 1});
        json_patch(&mut doc, &json!([{"op": "add", "path": "", "value": [1]}])).expect("add root");
        assert_eq!(doc, json!([1]));
        json_patch(&mut doc, &json!([{"op": "replace", "path": "", "value": {"b": 2}}])).expect("replace root");
        assert_eq!(doc, json!({"b": 2}));
        let err = json_patch(&mut doc, &json!([{"op": "remove", "path": ""}])).expect_err("remove root");
        assert!(matches!(err, PatchError::Unapplicable(_)));
    }

    #[test]
    fn copies_that_double_the_document_are_bounded() {
        let mut doc = json!({"a": "x".repeat(1024)});
        let doubling: Vec<Value> =
            (0..40).map(|i| json!({"op": "copy", "from": "", "path": format!("/c{i}")})).collect();
        let err = json_patch(&mut doc, &Value::Array(doubling)).expect_err("too much copying");
        assert!(matches!(err, PatchError::Unapplicable(_)));
        assert_eq!(doc, json!({"a": "x".repeat(1024)}));
    }

    #[test]
    fn too_many_operations_are_refused() {
        let ops: Vec<Value> = (0..=MAX_OPERATIONS).map(|_| json!({"op": "test", "path": "", "value": 1})).collect();
        let err = json_patch(&mut json!({}), &Value::Array(ops)).expect_err("too many");
        assert!(matches!(err, PatchError::Malformed(_)));
    }

    #[test]
    fn move_to_itself_is_a_no_op_but_needs_the_source() {
        let mut doc = json!({"a": {"b": 1}});
        json_patch(&mut doc, &json!([{"op": "move", "from": "/a", "path": "/a"}])).expect("no-op");
        assert_eq!(doc, json!({"a": {"b": 1}}));
        let err = json_patch(&mut doc, &json!([{"op": "move", "from": "/x", "path": "/x"}])).expect_err("absent");
        assert!(matches!(err, PatchError::Unapplicable(_)));
    }
}
