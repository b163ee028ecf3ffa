//! The beehive `Message` and its wire-exact JSON form (docs/protocol.md §1.1).
//!
//! Field names, field order and omission rules match KubeEdge's Go struct tags:
//! `msg_id` and `timestamp` are always written, `parent_msg_id`,
//! `resourceversion`, `sync` and `type` only when set; every route field is
//! omitted when empty, but `route` itself is always present; `content` is `null`
//! when empty. Unknown fields are ignored and `null` decodes as the zero value,
//! as Go's `encoding/json` does.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize};

use crate::constants::op;
use crate::content::Content;
use crate::error::DecodeError;
use crate::id::new_msg_id;
use crate::text::Text;

/// One beehive message: header, route and content.
///
/// A `Message` is a shared, copy-on-write handle to its [`MessageParts`]:
/// moving one through a channel moves a pointer, a clone (a fan-out to many
/// modules) is a reference-count bump, and a clone is only copied when one
/// holder changes a field. Fields are reached directly: `msg.header.msg_id`,
/// `msg.route.operation = ...`.
///
/// ```
/// use edgehive_model::{Content, Message, constants::{op, group, source}};
/// let msg = Message::new()
///     .with_route(source::EDGECONTROLLER, group::RESOURCE, String::from("default/pod/nginx"), op::INSERT)
///     .with_resource_version("48213")
///     .with_content(Content::from_json(r#"{"kind":"Pod"}"#).unwrap());
/// let bytes = msg.encode();
/// let back = Message::decode(&bytes).unwrap();
/// assert_eq!(back, msg);
///
/// let ack = back.response(Content::string("OK"));
/// assert_eq!(ack.header.parent_msg_id, msg.header.msg_id);
/// assert_eq!(ack.route.operation, "response");
/// ```
#[derive(Clone, PartialEq)]
pub struct Message(Arc<MessageParts>);

/// The fields of a [`Message`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageParts {
    /// Identity and metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub header: MessageHeader,
    /// Where the message comes from and what it is about.
    #[serde(default, deserialize_with = "null_as_default")]
    pub route: MessageRoute,
    /// The body; `null` when there is none.
    #[serde(default)]
    pub content: Content,
}

impl Deref for Message {
    type Target = MessageParts;
    fn deref(&self) -> &MessageParts {
        &self.0
    }
}

impl DerefMut for Message {
    /// Copies the parts first if another holder shares them.
    fn deref_mut(&mut self) -> &mut MessageParts {
        Arc::make_mut(&mut self.0)
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("header", &self.header)
            .field("route", &self.route)
            .field("content", &self.content)
            .finish()
    }
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        MessageParts::deserialize(d).map(Message::from_parts)
    }
}

impl From<MessageParts> for Message {
    fn from(p: MessageParts) -> Self {
        Message::from_parts(p)
    }
}

/// `header` of a message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageHeader {
    /// Unique id; a UUIDv4 for messages made here.
    #[serde(default)]
    pub msg_id: Text,
    /// For a response: the `msg_id` of the request.
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    pub parent_msg_id: Text,
    /// Creation time, Unix milliseconds.
    #[serde(default, deserialize_with = "null_as_default")]
    pub timestamp: i64,
    /// Kubernetes resourceVersion of the object in `content`.
    #[serde(default, rename = "resourceversion", skip_serializing_if = "Text::is_empty")]
    pub resource_version: Text,
    /// Set by a synchronous send; normally absent on the wire.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "is_false")]
    pub sync: bool,
    /// Beehive context type; not used across the wire.
    #[serde(default, rename = "type", skip_serializing_if = "Text::is_empty")]
    pub message_type: Text,
}

/// `route` of a message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRoute {
    /// The module that made the message.
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    pub source: Text,
    /// Optional destination module.
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    pub destination: Text,
    /// Group the message is routed by.
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    pub group: Text,
    /// What is done to the resource (`insert`, `response`, ...).
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    pub operation: Text,
    /// The resource path (see [`ResourcePath`](crate::ResourcePath)).
    #[serde(default, skip_serializing_if = "Text::is_empty")]
    pub resource: Text,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Current Unix time in milliseconds, as KubeEdge stamps messages.
pub fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
}

impl Default for Message {
    fn default() -> Self {
        Message::new()
    }
}

impl Message {
    /// A new message with a fresh id and the current time (KubeEdge `NewMessage("")`).
    pub fn new() -> Message {
        Message::from_parts(MessageParts {
            header: MessageHeader { msg_id: new_msg_id(), timestamp: now_millis(), ..Default::default() },
            route: MessageRoute::default(),
            content: Content::null(),
        })
    }

    /// A new message with route and content in one step (no copy-on-write
    /// checks, which the `with_*` builders pay once each).
    pub fn build(
        source: impl Into<Text>,
        group: impl Into<Text>,
        resource: impl Into<Text>,
        operation: impl Into<Text>,
        content: Content,
    ) -> Message {
        Message::from_parts(MessageParts {
            header: MessageHeader { msg_id: new_msg_id(), timestamp: now_millis(), ..Default::default() },
            route: MessageRoute {
                source: source.into(),
                destination: Text::EMPTY,
                group: group.into(),
                operation: operation.into(),
                resource: resource.into(),
            },
            content,
        })
    }

    /// A message made of the given parts.
    pub fn from_parts(parts: MessageParts) -> Message {
        Message(Arc::new(parts))
    }

    /// The parts, copied only if the message is shared.
    pub fn into_parts(self) -> MessageParts {
        Arc::unwrap_or_clone(self.0)
    }

    /// True if both handles share the same parts (a clone not changed since).
    pub fn ptr_eq(&self, other: &Message) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Sets source, group, resource and operation (KubeEdge `BuildRouter`).
    pub fn with_route(
        mut self,
        source: impl Into<Text>,
        group: impl Into<Text>,
        resource: impl Into<Text>,
        operation: impl Into<Text>,
    ) -> Message {
        self.route.source = source.into();
        self.route.group = group.into();
        self.route.resource = resource.into();
        self.route.operation = operation.into();
        self
    }

    /// Sets the content.
    pub fn with_content(mut self, content: Content) -> Message {
        self.content = content;
        self
    }

    /// Sets the parent id.
    pub fn with_parent(mut self, parent_msg_id: impl Into<Text>) -> Message {
        self.header.parent_msg_id = parent_msg_id.into();
        self
    }

    /// Sets the resource version.
    pub fn with_resource_version(mut self, rv: impl Into<Text>) -> Message {
        self.header.resource_version = rv.into();
        self
    }

    /// Sets the destination module.
    pub fn with_destination(mut self, destination: impl Into<Text>) -> Message {
        self.route.destination = destination.into();
        self
    }

    /// The message id.
    pub fn id(&self) -> &Text {
        &self.header.msg_id
    }

    /// The parent id, if this is a response.
    pub fn parent_id(&self) -> Option<&Text> {
        (!self.header.parent_msg_id.is_empty()).then_some(&self.header.parent_msg_id)
    }

    /// A response to this message (KubeEdge `NewRespByMessage`): parent = this
    /// id, same source, group and resource, operation `response`, type copied,
    /// resource version not copied.
    pub fn response(&self, content: Content) -> Message {
        Message::from_parts(MessageParts {
            header: MessageHeader {
                msg_id: new_msg_id(),
                parent_msg_id: self.header.msg_id.clone(),
                timestamp: now_millis(),
                message_type: self.header.message_type.clone(),
                ..Default::default()
            },
            route: MessageRoute {
                source: self.route.source.clone(),
                destination: Text::EMPTY,
                group: self.route.group.clone(),
                operation: Text::from(op::RESPONSE),
                resource: self.route.resource.clone(),
            },
            content,
        })
    }

    /// An error reply to this message (KubeEdge `NewErrorMessage`): operation
    /// `error`, the reason as string content. The parent is this message's id,
    /// as KubeEdge's master does; v1.15 used this message's own parent id, which
    /// left the reply unmatched.
    pub fn error_response(&self, reason: &str) -> Message {
        let mut m = self.response(Content::string(reason));
        m.route.operation = Text::from(op::ERROR);
        m
    }

    /// Encodes the message as KubeEdge's JSON, without a trailing newline.
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(self.encoded_len_hint());
        self.encode_into(&mut buf);
        buf
    }

    /// About how many bytes the JSON encoding takes (the header and route's
    /// usual size plus the content and resource): room to reserve so that
    /// an encoding is one allocation, not a chain of growths.
    pub fn encoded_len_hint(&self) -> usize {
        160 + self.content.encoded_len() + self.route.resource.len()
    }

    /// Encodes the message as KubeEdge's JSON into a `String`.
    pub fn encode_string(&self) -> String {
        // Serialising our own types cannot fail (see `encode_into`).
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Appends the JSON encoding to `buf`.
    pub fn encode_into(&self, buf: &mut Vec<u8>) {
        // Serialising our own types into memory cannot fail: every key is a
        // string and content is already valid JSON.
        if serde_json::to_writer(&mut *buf, self).is_err() {
            debug_assert!(false, "message encoding failed");
        }
    }

    /// Decodes one JSON-encoded message. Surrounding whitespace (such as the
    /// newline Go's `WriteJSON` appends) is accepted; anything else is an error.
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        // Go decodes a message only from a JSON object; serde would also take an
        // array of the three fields, so refuse anything else up front.
        match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') | None => {}
            Some(_) => return Err(DecodeError::not_an_object(bytes)),
        }
        Ok(serde_json::from_slice(bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constants::{group, source};

    #[test]
    fn new_message_has_id_and_time() {
        let m = Message::new();
        assert_eq!(m.header.msg_id.len(), 36);
        assert!(m.header.timestamp > 1_600_000_000_000);
        assert_ne!(Message::new().header.msg_id, m.header.msg_id);
    }

    #[test]
    fn minimal_encoding_omits_empty_fields() {
        let mut m = Message::new();
        m.header.msg_id = Text::from("id");
        m.header.timestamp = 7;
        assert_eq!(
            String::from_utf8(m.encode()).unwrap(),
            r#"{"header":{"msg_id":"id","timestamp":7},"route":{},"content":null}"#
        );
    }

    #[test]
    fn full_encoding_keeps_go_field_order() {
        let m = Message::from_parts(MessageParts {
            header: MessageHeader {
                msg_id: "a".into(),
                parent_msg_id: "p".into(),
                timestamp: 1,
                resource_version: "9".into(),
                sync: true,
                message_type: "t".into(),
            },
            route: MessageRoute {
                source: "s".into(),
                destination: "d".into(),
                group: "g".into(),
                operation: "o".into(),
                resource: "r".into(),
            },
            content: Content::string("x"),
        });
        assert_eq!(
            String::from_utf8(m.encode()).unwrap(),
            concat!(
                r#"{"header":{"msg_id":"a","parent_msg_id":"p","timestamp":1,"resourceversion":"9","sync":true,"type":"t"},"#,
                r#""route":{"source":"s","destination":"d","group":"g","operation":"o","resource":"r"},"content":"x"}"#
            )
        );
    }

    #[test]
    fn decode_tolerates_go_quirks() {
        let m = Message::decode(
            br#"{"header":{"msg_id":"x","parent_msg_id":null,"timestamp":null,"sync":null,"extra":1},"route":null,"unknown":[1,2]}
"#,
        )
        .unwrap();
        assert_eq!(m.header.msg_id, "x");
        assert!(m.parent_id().is_none());
        assert_eq!(m.header.timestamp, 0);
        assert!(m.content.is_null());
        assert_eq!(m.route, MessageRoute::default());
    }

    #[test]
    fn response_copies_route_but_not_resource_version() {
        let req = Message::new()
            .with_route(source::EDGECONTROLLER, group::RESOURCE, "default/pod/nginx", op::INSERT)
            .with_resource_version("5");
        let resp = req.response(Content::string("OK"));
        assert_eq!(resp.header.parent_msg_id, req.header.msg_id);
        assert_eq!(resp.route.source, source::EDGECONTROLLER);
        assert_eq!(resp.route.resource, "default/pod/nginx");
        assert_eq!(resp.route.operation, op::RESPONSE);
        assert!(resp.header.resource_version.is_empty());
        let err = req.error_response("boom");
        assert_eq!(err.route.operation, op::ERROR);
        assert_eq!(err.header.parent_msg_id, req.header.msg_id);
        assert_eq!(err.content.as_text().as_deref(), Some("boom"));
    }

    #[test]
    fn garbage_is_an_error() {
        use crate::error::DecodeErrorKind;
        assert_eq!(Message::decode(b"{\"header\":{").unwrap_err().kind, DecodeErrorKind::Truncated);
        assert_eq!(Message::decode(b"hello").unwrap_err().kind, DecodeErrorKind::Syntax);
        assert_eq!(Message::decode(b"[1,2]").unwrap_err().kind, DecodeErrorKind::Shape);
        assert_eq!(Message::decode(b"[{},{},null]").unwrap_err().kind, DecodeErrorKind::Shape);
        assert_eq!(Message::decode(b"").unwrap_err().kind, DecodeErrorKind::Truncated);
        assert_eq!(Message::decode(br#"{"header":{"timestamp":"now"}}"#).unwrap_err().kind, DecodeErrorKind::Shape);
        assert!(Message::decode(b"{} {}").is_err());
        assert!(Message::decode(&[0xff, 0xfe]).is_err());
    }
}
