//! An edge store's inventory (edgehive, not KubeEdge; docs/protocol.md §8):
//! what an edgehive edge says its store holds, after connecting to a cloud
//! that agreed the `inventory` feature. Content `{"items": [{"key", "uid",
//! "resourceVersion"}]}` of an `inventory` message on
//! `null/inventory/{node}`.

use serde::{Deserialize, Serialize};

use crate::Content;

/// Most items an inventory lists: an edge holding more sends none (10,000
/// keys of the longest names fit one 8 MiB frame).
pub const MAX_ITEMS: usize = 10_000;

/// One stored object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// The wire resource, `{namespace}/{type}/{name}`.
    pub key: String,
    /// `metadata.uid` (empty when the row has none or is damaged).
    #[serde(default)]
    pub uid: String,
    /// `metadata.resourceVersion` (empty when the row has none or is damaged).
    #[serde(default, rename = "resourceVersion")]
    pub resource_version: String,
}

#[derive(Debug, Deserialize)]
struct Inventory {
    #[serde(deserialize_with = "bounded")]
    items: Vec<Item>,
}

/// The items, refused as soon as there are more than [`MAX_ITEMS`] (a
/// hostile list of tiny items never grows past the bound in memory).
fn bounded<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Item>, D::Error> {
    struct Items;
    impl<'de> serde::de::Visitor<'de> for Items {
        type Value = Vec<Item>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_ITEMS} items")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Item>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<Item>()? {
                if out.len() == MAX_ITEMS {
                    return Err(serde::de::Error::custom(format!("more than {MAX_ITEMS} items")));
                }
                out.push(item);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Items)
}

/// Reads an inventory message's content; the reason when it is not one.
pub fn parse(content: &Content) -> Result<Vec<Item>, String> {
    let inv: Inventory = content.decode().map_err(|e| format!("an inventory is {{\"items\": [...]}}: {e}"))?;
    Ok(inv.items)
}

/// The content of an inventory listing `items`.
pub fn content(items: &[Item]) -> Content {
    #[derive(Serialize)]
    struct Out<'a> {
        items: &'a [Item],
    }
    Content::from_serialize(&Out { items }).unwrap_or_default()
}

/// The `inventory` message of `node` listing `items` (resource
/// `null/inventory/{node}`, from MetaManager, group `meta`).
pub fn message(node: &str, items: &[Item]) -> crate::Message {
    crate::Message::new()
        .with_route(
            crate::source::METAMANAGER,
            crate::group::META,
            format!("{}/{}/{node}", crate::well_known::NULL_NAMESPACE, crate::resource_type::INVENTORY),
            crate::op::INVENTORY,
        )
        .with_content(content(items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &str, uid: &str, rv: &str) -> Item {
        Item { key: key.into(), uid: uid.into(), resource_version: rv.into() }
    }

    #[test]
    fn inventories_round_trip_and_are_bounded() {
        let c =
            Content::from_json(r#"{"items":[{"key":"default/pod/a","uid":"u","resourceVersion":"1"},{"key":"x"}]}"#)
                .unwrap();
        let items = parse(&c).unwrap();
        assert_eq!(items, [item("default/pod/a", "u", "1"), item("x", "", "")]);
        assert_eq!(parse(&content(&items)).unwrap(), items);
        assert!(parse(&Content::string("nope")).is_err());
        assert!(parse(&Content::from_json(r#"{"items":{}}"#).unwrap()).is_err());
        let many = format!(r#"{{"items":[{}]}}"#, vec![r#"{"key":"k"}"#; MAX_ITEMS + 1].join(","));
        let err = parse(&Content::from_json(&many).unwrap()).unwrap_err();
        assert!(err.contains("more than 10000 items"), "{err}");
    }
}
