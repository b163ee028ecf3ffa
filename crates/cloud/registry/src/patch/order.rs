//! Where the elements of a merged list land, as Kubernetes' strategic merge patch puts them
//! (`normalizeElementOrder` and `mergeSortedSlice` in apimachinery's `strategicpatch`).
//!
//! The merged list is split into the elements the patch names and the live-only ones.
//! Patch elements are sorted by the patch's order (the `$setElementOrder` list when there is
//! one, else the patch list itself); live-only elements keep their live order. The two runs
//! are then interleaved: a live-only element goes out first only while it stood before the
//! next patch element in the live list. A patch element that was not live at all goes out as
//! soon as it comes up, so an element a patch adds lands *before* the live-only elements
//! that follow it, not at the end: patching `[a, b]` with `[c]` gives `[c, a, b]`, as
//! Kubernetes does.

use serde_json::Value;

use super::{PatchError, brief, json_eq};

/// How an element of a list is told apart from the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Identity<'a> {
    /// A list of scalars: the value itself.
    Scalar,
    /// A list of objects: the value of the merge key.
    Key(&'a str),
}

impl Identity<'_> {
    /// The identity of `v`, `None` when it has no merge key.
    pub(crate) fn of<'v>(&self, v: &'v Value) -> Option<&'v Value> {
        match self {
            Identity::Scalar => Some(v),
            Identity::Key(key) => v.get(*key),
        }
    }
}

/// The identities of the elements of a `$setElementOrder` list; `None` if one lacks the key.
pub(crate) fn ids<'v>(order: &'v [Value], id: Identity<'_>) -> Option<Vec<&'v Value>> {
    order.iter().map(|v| id.of(v)).collect()
}

/// Checks that the patch list names its elements in the order of `$setElementOrder`, and none
/// that it lacks (`$patch` elements, deletions among them, are exempt).
pub(crate) fn check_patch_follows(
    patch: &[Value],
    order_ids: &[&Value],
    id: Identity<'_>,
    name: &str,
) -> Result<(), PatchError> {
    if patch.is_empty() || order_ids.is_empty() {
        return Ok(());
    }
    let mut next = 0;
    for item in patch {
        if item.get("$patch").is_some_and(|d| d != "merge") {
            continue;
        }
        let Some(item_id) = id.of(item) else {
            return Err(PatchError::Malformed(format!("an element of {name:?} lacks its merge key: {}", brief(item))));
        };
        match order_ids[next..].iter().position(|o| json_eq(o, item_id)) {
            Some(skip) => next += skip + 1,
            None => {
                return Err(PatchError::Malformed(format!(
                    "element {} of {name:?} is missing from $setElementOrder/{name} or out of its order",
                    brief(item_id)
                )));
            }
        }
    }
    Ok(())
}

/// The identities of the elements of a live list, kept to order the merged list by.
pub(crate) fn live_ids(list: &[Value], id: Identity<'_>) -> Vec<Value> {
    list.iter().filter_map(|v| id.of(v).cloned()).collect()
}

/// Orders `merged` by `order_ids` (the `$setElementOrder` list, or the patch's elements when
/// there is none) and, for the elements `order_ids` does not name, by `live_ids` (the live
/// list, from [`live_ids`]).
pub(crate) fn arrange(merged: Vec<Value>, order_ids: &[&Value], live_ids: &[Value], id: Identity<'_>) -> Vec<Value> {
    let in_order = |v: &Value| id.of(v).and_then(|x| order_ids.iter().position(|i| json_eq(i, x)));
    let in_live = |v: &Value| id.of(v).and_then(|x| live_ids.iter().position(|i| json_eq(i, x)));

    let (mut named, mut live_only): (Vec<Value>, Vec<Value>) = merged.into_iter().partition(|v| in_order(v).is_some());
    named.sort_by_key(|v| in_order(v));
    live_only.sort_by_key(|v| in_live(v).unwrap_or(usize::MAX));

    let mut out = Vec::with_capacity(named.len() + live_only.len());
    let mut named = named.into_iter().peekable();
    let mut live_only = live_only.into_iter().peekable();
    loop {
        let live_first = match (live_only.peek(), named.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(n)) => match (in_live(l), in_live(n)) {
                (Some(li), Some(ni)) => li < ni,
                // A named element that was not live goes out first.
                _ => false,
            },
        };
        let next = if live_first { live_only.next() } else { named.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(list: &[Value]) -> Vec<&str> {
        list.iter().filter_map(|v| v.get("name").and_then(Value::as_str)).collect()
    }

    fn objs(names: &[&str]) -> Vec<Value> {
        names.iter().map(|n| json!({"name": n})).collect()
    }

    #[test]
    fn new_patch_elements_go_before_the_remaining_server_only_ones() {
        let id = Identity::Key("name");
        let live = live_ids(&objs(&["a", "b"]), id);
        let c = json!("c");
        let out = arrange(objs(&["a", "b", "c"]), &[&c], &live, id);
        assert_eq!(names(&out), ["c", "a", "b"]);
    }

    #[test]
    fn server_only_elements_keep_their_place_between_patch_elements() {
        let id = Identity::Key("name");
        let server = objs(&["a", "s", "b", "t"]);
        let order = [json!("b"), json!("a")];
        let order_ids: Vec<&Value> = order.iter().collect();
        let out = arrange(server.clone(), &order_ids, &live_ids(&server, id), id);
        // b and a swap; s stood before b, t after it.
        assert_eq!(names(&out), ["s", "b", "a", "t"]);
    }

    #[test]
    fn scalars_use_their_own_value() {
        let server = vec![json!("x"), json!("y")];
        let merged = vec![json!("x"), json!("y"), json!("z")];
        let patch = [json!("y"), json!("z")];
        let out = arrange(merged, &patch.iter().collect::<Vec<_>>(), &server, Identity::Scalar);
        assert_eq!(out, vec![json!("x"), json!("y"), json!("z")]);
    }

    #[test]
    fn patch_must_follow_the_element_order() {
        let order = [json!({"name": "a"}), json!({"name": "b"})];
        let ids = ids(&order, Identity::Key("name")).expect("keys");
        let ok = objs(&["a", "b"]);
        assert!(check_patch_follows(&ok, &ids, Identity::Key("name"), "containers").is_ok());
        let swapped = objs(&["b", "a"]);
        assert!(check_patch_follows(&swapped, &ids, Identity::Key("name"), "containers").is_err());
        let stranger = objs(&["c"]);
        assert!(check_patch_follows(&stranger, &ids, Identity::Key("name"), "containers").is_err());
        let deletion = vec![json!({"name": "c", "$patch": "delete"}), json!({"name": "b"})];
        assert!(check_patch_follows(&deletion, &ids, Identity::Key("name"), "containers").is_ok());
    }
}
