//! `Content`: a message body held as pre-encoded JSON and shared, not copied.
//!
//! KubeEdge's `content` is a Go `interface{}` marshalled by `encoding/json`
//! (docs/protocol.md §1.1). We keep the encoded JSON text behind an `Arc`, so a pod sent
//! to a thousand nodes is serialised once and every copy of the message points at
//! the same bytes. Decoding is lazy: a module that only routes a message never
//! parses its body.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::ContentError;

/// The body of a [`Message`](crate::Message): any JSON value, `null` by default.
///
/// ```
/// use edgehive_model::Content;
/// let ok = Content::string("OK");
/// assert_eq!(ok.as_json(), "\"OK\"");
/// assert_eq!(ok.as_text().as_deref(), Some("OK"));
///
/// let pod = Content::from_serialize(&serde_json::json!({"kind": "Pod"})).unwrap();
/// let shared = pod.clone(); // no copy of the JSON text
/// assert!(pod.ptr_eq(&shared));
/// ```
#[derive(Clone, Default)]
pub struct Content(Option<Arc<RawValue>>);

impl Content {
    /// `null`, the content of a message built without a body.
    pub const fn null() -> Content {
        Content(None)
    }

    /// A JSON string, as Go encodes a `string` content such as `"OK"` or a
    /// serialised JSON patch.
    pub fn string(s: &str) -> Content {
        // Encoding a &str as JSON cannot fail.
        let json = serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""));
        Content::from_trusted_json(json)
    }

    /// Encodes any serialisable value once; clones share the encoding.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Content, ContentError> {
        let json = serde_json::to_string(value).map_err(ContentError::Encode)?;
        Ok(Content::from_trusted_json(json))
    }

    /// Takes JSON text, checking that it is exactly one JSON value.
    pub fn from_json(json: impl Into<String>) -> Result<Content, ContentError> {
        let mut json = json.into();
        let trimmed = json.trim();
        if trimmed.len() != json.len() {
            json = trimmed.to_owned();
        }
        let raw = RawValue::from_string(json).map_err(ContentError::Decode)?;
        Ok(Content::from_raw(raw))
    }

    /// Takes bytes as Go would marshal a `[]byte` content: a base64 JSON string.
    pub fn bytes(data: &[u8]) -> Content {
        let mut s = String::with_capacity(data.len().div_ceil(3) * 4 + 2);
        s.push('"');
        base64_encode(data, &mut s);
        s.push('"');
        Content::from_trusted_json(s)
    }

    fn from_raw(raw: Box<RawValue>) -> Content {
        if raw.get() == "null" { Content(None) } else { Content(Some(Arc::from(raw))) }
    }

    /// `json` came from serde_json's own encoder, so it is one valid value.
    fn from_trusted_json(json: String) -> Content {
        match RawValue::from_string(json) {
            Ok(raw) => Content::from_raw(raw),
            Err(_) => Content(None),
        }
    }

    /// True for `null`.
    pub fn is_null(&self) -> bool {
        self.0.is_none()
    }

    /// The JSON text as it goes on the wire.
    pub fn as_json(&self) -> &str {
        match &self.0 {
            Some(raw) => raw.get(),
            None => "null",
        }
    }

    /// If the content is a JSON string, its decoded value.
    pub fn as_text(&self) -> Option<Cow<'_, str>> {
        let raw = self.0.as_ref()?;
        if !raw.get().starts_with('"') {
            return None;
        }
        serde_json::from_str::<Cow<'_, str>>(raw.get()).ok()
    }

    /// The payload bytes, with the meaning of KubeEdge's `GetContentData`: the
    /// decoded text of a JSON string, otherwise the JSON text itself.
    pub fn data(&self) -> Cow<'_, [u8]> {
        match self.as_text() {
            Some(Cow::Borrowed(s)) => Cow::Borrowed(s.as_bytes()),
            Some(Cow::Owned(s)) => Cow::Owned(s.into_bytes()),
            None => Cow::Borrowed(self.as_json().as_bytes()),
        }
    }

    /// Decodes the content into `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, ContentError> {
        serde_json::from_str(self.as_json()).map_err(ContentError::Decode)
    }

    /// Decodes the content into a generic JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        // The text is always one valid JSON value, so this does not fail.
        serde_json::from_str(self.as_json()).unwrap_or(serde_json::Value::Null)
    }

    /// True if both point at the same shared encoding (a fan-out copy).
    pub fn ptr_eq(&self, other: &Content) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// Bytes of encoded JSON held.
    pub fn encoded_len(&self) -> usize {
        self.as_json().len()
    }
}

impl PartialEq for Content {
    /// Equal when the JSON values are equal (key order and spacing ignored).
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.as_json() == other.as_json() || self.to_value() == other.to_value()
    }
}

impl fmt::Debug for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX: usize = 256;
        let s = self.as_json();
        if s.len() <= MAX {
            f.write_str(s)
        } else {
            let mut end = MAX;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            write!(f, "{}…({} bytes)", &s[..end], s.len())
        }
    }
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(raw) => raw.serialize(s),
            None => s.serialize_unit(),
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(Content::from_raw(raw))
    }
}

impl From<&str> for Content {
    fn from(s: &str) -> Self {
        Content::string(s)
    }
}

impl TryFrom<serde_json::Value> for Content {
    type Error = ContentError;
    fn try_from(v: serde_json::Value) -> Result<Self, ContentError> {
        Content::from_serialize(&v)
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding, as Go's `encoding/json` writes a `[]byte`.
fn base64_encode(data: &[u8], out: &mut String) {
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let idx = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        for (i, &v) in idx.iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(B64[v as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_round_trip() {
        let c: Content = serde_json::from_str("null").unwrap();
        assert!(c.is_null());
        assert_eq!(serde_json::to_string(&c).unwrap(), "null");
        assert_eq!(Content::default(), Content::null());
    }

    #[test]
    fn string_content_gives_raw_payload() {
        let patch = r#"{"status":{"phase":"Running"}}"#;
        let c = Content::string(patch);
        assert_eq!(c.as_json(), r#""{\"status\":{\"phase\":\"Running\"}}""#);
        assert_eq!(&*c.data(), patch.as_bytes());
    }

    #[test]
    fn object_content_data_is_json_text() {
        let c = Content::from_json(r#"{"a":1}"#).unwrap();
        assert_eq!(&*c.data(), br#"{"a":1}"#);
        assert!(c.as_text().is_none());
    }

    #[test]
    fn bytes_are_base64_like_go() {
        assert_eq!(Content::bytes(b"").as_json(), "\"\"");
        assert_eq!(Content::bytes(b"f").as_json(), "\"Zg==\"");
        assert_eq!(Content::bytes(b"fo").as_json(), "\"Zm8=\"");
        assert_eq!(Content::bytes(b"foo").as_json(), "\"Zm9v\"");
        assert_eq!(Content::bytes(b"foobar").as_json(), "\"Zm9vYmFy\"");
    }

    #[test]
    fn invalid_json_is_an_error() {
        assert!(Content::from_json("{").is_err());
        assert!(Content::from_json("1 2").is_err());
        assert!(Content::from_json("").is_err());
    }

    #[test]
    fn equality_ignores_key_order() {
        let a = Content::from_json(r#"{"a":1,"b":2}"#).unwrap();
        let b = Content::from_json(r#"{"b":2, "a":1}"#).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, Content::string("x"));
    }
}
