//! `Text`: an immutable string that is free to clone.
//!
//! Message fields are copied a lot (a fan-out to ten modules clones the route ten
//! times), and most of them are well-known constants such as `"insert"` or
//! `"resource"`. `Text` keeps a `&'static str` without allocating and shares any
//! other string behind an `Arc`, so a clone is at most one reference-count bump.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable, cheaply cloneable string.
///
/// ```
/// use edgehive_model::Text;
/// let op = Text::from("insert");            // a constant: no allocation
/// let res = Text::from(format!("default/pod/{}", "nginx")); // shared
/// assert_eq!(op, "insert");
/// assert_eq!(&*res, "default/pod/nginx");
/// ```
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl Text {
    /// The empty string.
    pub const EMPTY: Text = Text(Repr::Static(""));

    /// Wraps a static string without allocating.
    pub const fn from_static(s: &'static str) -> Text {
        Text(Repr::Static(s))
    }

    /// Copies a borrowed string into a new shared `Text`.
    pub fn copy_from(s: &str) -> Text {
        if s.is_empty() { Text::EMPTY } else { Text(Repr::Shared(Arc::from(s))) }
    }

    /// True for the empty string.
    pub fn is_empty(&self) -> bool {
        self.as_str().is_empty()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.as_str().len()
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Static(s) => s,
            Repr::Shared(s) => s,
        }
    }
}

impl Default for Text {
    fn default() -> Self {
        Text::EMPTY
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&'static str> for Text {
    fn from(s: &'static str) -> Self {
        Text::from_static(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        if s.is_empty() { Text::EMPTY } else { Text(Repr::Shared(Arc::from(s))) }
    }
}

impl From<Arc<str>> for Text {
    fn from(s: Arc<str>) -> Self {
        Text(Repr::Shared(s))
    }
}

impl From<&Text> for Text {
    fn from(s: &Text) -> Self {
        s.clone()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}
impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}
impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}
impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}
impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Text {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text {
    /// Accepts a string or `null` (Go's decoder leaves a string empty on `null`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text::copy_from(v))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Text, E> {
                Ok(Text::from(v))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Text, E> {
                Ok(Text::EMPTY)
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Text, E> {
                Ok(Text::EMPTY)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_and_shared_compare_equal() {
        let a = Text::from("pod");
        let b = Text::from(String::from("pod"));
        assert_eq!(a, b);
        assert_eq!(a, "pod");
        assert_eq!("pod", b);
        let mut h1 = std::collections::hash_map::DefaultHasher::new();
        let mut h2 = std::collections::hash_map::DefaultHasher::new();
        a.hash(&mut h1);
        b.hash(&mut h2);
        assert_eq!(h1.finish(), h2.finish());
    }

    #[test]
    fn null_decodes_as_empty() {
        let t: Text = serde_json::from_str("null").unwrap();
        assert!(t.is_empty());
        assert!(serde_json::from_str::<Text>("12").is_err());
    }
}
