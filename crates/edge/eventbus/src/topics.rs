//! What the EventBus decides, without any I/O: which topics it subscribes,
//! where an MQTT message goes on the bus, and what a message from the bus
//! asks of the brokers. KubeEdge v1.15: `edge/pkg/eventbus/mqtt/client.go`
//! (`SubTopics`), `mqtt/filter.go` and `mqtt/handler.go` (incoming),
//! `eventbus.go` `pubCloudMsgToEdge` (downstream).

use base64::Engine as _;
use edgehive_model::constants::{group, op, source};
use edgehive_model::{Content, Message};

/// The topics every EventBus subscribes (KubeEdge's `SubTopics`), besides
/// those stored in `sub_topics`.
pub const SUB_TOPICS: [&str; 6] = [
    "$hw/events/upload/#",
    "$hw/events/device/+/state/update",
    "$hw/events/device/+/twin/+",
    "$hw/events/node/+/membership/get",
    "SYS/dis/upload_records",
    "+/user/#",
];

/// The largest payload passed on, either way: 1 MiB. A bigger one is
/// dropped, logged and counted (`dropped_total{reason="too_large"}`).
/// KubeEdge has no limit; a device's twin update or event is a few hundred
/// bytes, and a whole message is held in memory several times on its way.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// The largest MQTT packet the EventBus's clients and the embedded broker
/// read: 4 MiB. Payloads between [`MAX_PAYLOAD_BYTES`] and this are read and
/// dropped; a bigger packet breaks that connection (the client reconnects).
pub(crate) const MAX_PACKET_BYTES: usize = 4 << 20;

/// How many topics `subscribe` may add to the stored ones. KubeEdge has no
/// bound; each is a subscription on the broker made again at every connect.
pub const MAX_STORED_TOPICS: usize = 1000;

/// MQTT's limit on a topic's length (a 16-bit length prefix).
const MAX_TOPIC_BYTES: usize = 65535;

const TWIN_PREFIXES: [&str; 2] = ["$hw/events/device", "$hw/events/node"];

/// Why an MQTT message or a bus message was not passed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// An MQTT payload that is not UTF-8: the bus carries it as a JSON string.
    NotUtf8,
    /// A payload over [`MAX_PAYLOAD_BYTES`].
    TooLarge(usize),
    /// A topic (or subscription filter) MQTT does not allow.
    BadTopic(&'static str),
    /// A bus message whose content does not have the shape its operation needs.
    BadContent(&'static str),
    /// A subscribe over [`MAX_STORED_TOPICS`].
    TooManyTopics,
    /// An operation the EventBus does not know (KubeEdge: "Action not found").
    UnknownOperation,
}

impl Refused {
    /// The `reason` label of `dropped_total`.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Refused::NotUtf8 => "not_utf8",
            Refused::TooLarge(_) => "too_large",
            Refused::BadTopic(_) | Refused::BadContent(_) => "malformed",
            Refused::TooManyTopics => "too_many_topics",
            Refused::UnknownOperation => "unknown_operation",
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotUtf8 => f.write_str("the payload is not UTF-8 text"),
            Refused::TooLarge(n) => write!(f, "the payload is {n} bytes, over the limit of {MAX_PAYLOAD_BYTES}"),
            Refused::BadTopic(why) => write!(f, "bad topic: {why}"),
            Refused::BadContent(why) => write!(f, "bad content: {why}"),
            Refused::TooManyTopics => write!(f, "already {MAX_STORED_TOPICS} stored topics"),
            Refused::UnknownOperation => f.write_str("unknown operation"),
        }
    }
}

/// Where an MQTT message goes on the bus.
#[derive(Debug, Clone)]
pub(crate) enum Upstream {
    /// To group `twin` (device and node topics).
    Twin(Message),
    /// To group `hub`, that is the cloud (every other topic).
    Cloud(Message),
}

/// True for the topics KubeEdge hands to DeviceTwin: its patterns
/// `$hw/events/device/` and `$hw/events/node/` compile to
/// `^\$hw/events/device(/.*)?$`, so the bare prefix matches too.
pub(crate) fn is_twin_topic(topic: &str) -> bool {
    TWIN_PREFIXES.iter().any(|p| topic.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/')))
}

/// KubeEdge's resource for a twin topic: Go's `base64.URLEncoding` (the
/// URL-safe alphabet, with padding) of the topic.
///
/// ```
/// # use edgehive_eventbus::twin_resource;
/// assert_eq!(twin_resource("$hw/events/device/d1/twin/update"), "JGh3L2V2ZW50cy9kZXZpY2UvZDEvdHdpbi91cGRhdGU=");
/// ```
pub fn twin_resource(topic: &str) -> String {
    base64::engine::general_purpose::URL_SAFE.encode(topic.as_bytes())
}

/// The bus message for an MQTT message (KubeEdge `handleDeviceTwin`,
/// `handleUploadTopic`): source `bus`, group `user`, the payload as a JSON
/// string; to twin with the base64url topic and operation `response`, to
/// the cloud with the topic and operation `upload`.
///
/// A payload that is not UTF-8 is refused (KubeEdge's `string(payload)`
/// would reach the JSON encoder, which replaces each bad byte with U+FFFD,
/// so a binary payload arrives damaged; here it does not arrive).
pub(crate) fn incoming(topic: &str, payload: &[u8]) -> Result<Upstream, Refused> {
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(Refused::TooLarge(payload.len()));
    }
    let text = std::str::from_utf8(payload).map_err(|_| Refused::NotUtf8)?;
    let content = Content::string(text);
    Ok(if is_twin_topic(topic) {
        Upstream::Twin(Message::build(source::BUS, group::USER, twin_resource(topic), op::RESPONSE, content))
    } else {
        Upstream::Cloud(Message::build(source::BUS, group::USER, topic.to_owned(), op::UPLOAD, content))
    })
}

/// What a bus message asks of the brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Subscribe to a filter and store it.
    Subscribe(String),
    /// Unsubscribe and forget it.
    Unsubscribe(String),
    /// Publish a payload.
    Publish { topic: String, payload: Vec<u8> },
    /// Nothing to do (a connection event, a `get_result` about something
    /// else than `auth_info`); the reason is logged at debug level.
    Ignore(&'static str),
}

/// The action a bus message asks for (KubeEdge `pubCloudMsgToEdge`):
/// - `subscribe` / `unsubscribe`: the filter is the resource;
/// - `publish`: the topic is the resource, the payload the content's text
///   (KubeEdge takes a `[]byte` or a `string` content; on edgehive's bus a
///   content is JSON, so it must be a JSON string);
/// - `message`: the topic is `content.message.topic`, the payload
///   `content.message` as JSON;
/// - `get_result` on `auth_info`: publishes the content as JSON on
///   `$hw/events/node/{node}/authInfo/get/result`.
pub(crate) fn downstream(msg: &Message, node_name: &str) -> Result<Action, Refused> {
    let resource = msg.route.resource.as_str();
    match msg.route.operation.as_str() {
        op::SUBSCRIBE => {
            valid_filter(resource)?;
            Ok(Action::Subscribe(resource.to_owned()))
        }
        op::UNSUBSCRIBE => {
            valid_filter(resource)?;
            Ok(Action::Unsubscribe(resource.to_owned()))
        }
        op::PUBLISH => {
            valid_topic(resource)?;
            let text = msg.content.as_text().ok_or(Refused::BadContent("a publish's content must be a JSON string"))?;
            publish(resource.to_owned(), text.into_owned().into_bytes())
        }
        op::MESSAGE => {
            let body = msg.content.to_value();
            let serde_json::Value::Object(mut body) = body else {
                return Err(Refused::BadContent("a message's content must be an object"));
            };
            let Some(serde_json::Value::Object(message)) = body.remove("message") else {
                return Err(Refused::BadContent("a message's content.message must be an object"));
            };
            let Some(serde_json::Value::String(topic)) = message.get("topic") else {
                return Err(Refused::BadContent("a message's content.message.topic must be a string"));
            };
            let topic = topic.clone();
            valid_topic(&topic)?;
            let payload = go_json(&serde_json::Value::Object(message));
            publish(topic, payload.into_bytes())
        }
        op::GET_RESULT => {
            if resource != "auth_info" {
                return Ok(Action::Ignore("a get_result about something else than auth_info"));
            }
            let topic = format!("$hw/events/node/{node_name}/authInfo/get/result");
            valid_topic(&topic)?;
            publish(topic, go_json(&msg.content.to_value()).into_bytes())
        }
        op::CONNECT => Ok(Action::Ignore("a connection event")),
        _ => Err(Refused::UnknownOperation),
    }
}

fn publish(topic: String, payload: Vec<u8>) -> Result<Action, Refused> {
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(Refused::TooLarge(payload.len()));
    }
    Ok(Action::Publish { topic, payload })
}

/// Checks a topic to publish on: not empty, no wildcard, no NUL, at most
/// 65,535 bytes (MQTT 3.1.1 §4.7).
pub(crate) fn valid_topic(topic: &str) -> Result<(), Refused> {
    if topic.is_empty() {
        return Err(Refused::BadTopic("the topic is empty"));
    }
    if topic.len() > MAX_TOPIC_BYTES {
        return Err(Refused::BadTopic("the topic is longer than 65535 bytes"));
    }
    if topic.contains(['+', '#']) {
        return Err(Refused::BadTopic("a topic to publish on has no wildcards"));
    }
    if topic.contains('\0') {
        return Err(Refused::BadTopic("the topic contains NUL"));
    }
    Ok(())
}

/// Checks a subscription filter: not empty, at most 65,535 bytes, no NUL,
/// `+` and `#` alone in their level and `#` last (MQTT 3.1.1 §4.7.1). A
/// broker closes the connection of a client that subscribes to a bad
/// filter, so one must never be stored and re-subscribed at every connect.
pub(crate) fn valid_filter(filter: &str) -> Result<(), Refused> {
    if filter.is_empty() {
        return Err(Refused::BadTopic("the filter is empty"));
    }
    if filter.len() > MAX_TOPIC_BYTES {
        return Err(Refused::BadTopic("the filter is longer than 65535 bytes"));
    }
    if filter.contains('\0') {
        return Err(Refused::BadTopic("the filter contains NUL"));
    }
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        if level.contains('#') && (*level != "#" || i != levels.len() - 1) {
            return Err(Refused::BadTopic("'#' must be a whole level, and the last"));
        }
        if level.contains('+') && *level != "+" {
            return Err(Refused::BadTopic("'+' must be a whole level"));
        }
    }
    Ok(())
}

/// True when `topic` matches the subscription `filter` (MQTT 3.1.1 §4.7):
/// `+` is one level, `#` the rest (and the level above it), and a filter
/// that starts with a wildcard does not match a topic that starts with `$`.
pub(crate) fn filter_matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && filter.starts_with(['+', '#']) {
        return false;
    }
    let mut levels = topic.split('/');
    for f in filter.split('/') {
        if f == "#" {
            return true;
        }
        match levels.next() {
            Some(level) if f == "+" || f == level => {}
            _ => return false,
        }
    }
    levels.next().is_none()
}

/// JSON as Go's `json.Marshal` writes a decoded `interface{}`: object keys
/// sorted, and `<`, `>`, `&`, U+2028 and U+2029 escaped (those characters
/// can only occur inside strings, so replacing them in the text is exact).
/// Numbers are written as serde_json keeps them (Go would rewrite a
/// fraction such as `1.0` as `1`).
pub(crate) fn go_json(value: &serde_json::Value) -> String {
    edgehive_model::json::go_html_escape(serde_json::to_string(&sorted(value)).unwrap_or_else(|_| "null".to_owned()))
}

/// A copy with every object's keys in order (whether or not serde_json's
/// `preserve_order` feature is on in the build).
fn sorted(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), sorted(v))).collect())
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(operation: &str, resource: &str, content: Content) -> Message {
        Message::build(source::TWIN, group::USER, resource.to_owned(), operation.to_owned(), content)
    }

    #[test]
    fn twin_topics_follow_kubeedge_s_patterns() {
        for t in ["$hw/events/device/d1/twin/update", "$hw/events/node/n1/membership/get", "$hw/events/device"] {
            assert!(is_twin_topic(t), "{t}");
        }
        for t in
            ["$hw/events/devices/x", "$hw/events/upload/x", "SYS/dis/upload_records", "a/user/b", "$hw/events/nodex"]
        {
            assert!(!is_twin_topic(t), "{t}");
        }
    }

    #[test]
    fn device_topics_go_to_twin_with_base64url_resources() {
        let Ok(Upstream::Twin(m)) = incoming("$hw/events/device/d1/twin/update", br#"{"twin":{}}"#) else {
            panic!("not to twin")
        };
        assert_eq!(m.route.source, "bus");
        assert_eq!(m.route.group, "user");
        assert_eq!(m.route.operation, "response");
        // Go: base64.URLEncoding.EncodeToString([]byte(topic)); "?" and ">" show the URL alphabet.
        assert_eq!(m.route.resource, "JGh3L2V2ZW50cy9kZXZpY2UvZDEvdHdpbi91cGRhdGU=");
        assert_eq!(twin_resource("$hw/events/device/??>/twin/get"), "JGh3L2V2ZW50cy9kZXZpY2UvPz8-L3R3aW4vZ2V0");
        assert_eq!(m.content.as_text().as_deref(), Some(r#"{"twin":{}}"#));
    }

    #[test]
    fn other_topics_go_to_the_cloud_as_uploads() {
        let Ok(Upstream::Cloud(m)) = incoming("app/user/temp", b"21.5") else { panic!("not to the cloud") };
        assert_eq!((m.route.resource.as_str(), m.route.operation.as_str()), ("app/user/temp", "upload"));
        assert_eq!(m.content.as_json(), "\"21.5\"");
    }

    #[test]
    fn bad_payloads_are_refused() {
        assert_eq!(incoming("$hw/events/device/d/twin/update", b"\xff\xfe").unwrap_err(), Refused::NotUtf8);
        let big = vec![b'a'; MAX_PAYLOAD_BYTES + 1];
        assert_eq!(incoming("a/user/b", &big).unwrap_err(), Refused::TooLarge(MAX_PAYLOAD_BYTES + 1));
        assert!(incoming("a/user/b", &big[..MAX_PAYLOAD_BYTES]).is_ok());
    }

    #[test]
    fn filters_and_topics_are_checked() {
        for f in ["#", "+", "a/+/b", "a/#", "$hw/events/device/+/twin/+", "/", "a//b"] {
            assert_eq!(valid_filter(f), Ok(()), "{f}");
        }
        for f in ["", "a/#/b", "a#", "a/b+", "+a/b", "a\0b"] {
            assert!(valid_filter(f).is_err(), "{f:?}");
        }
        assert!(valid_topic("a/b").is_ok());
        for t in ["", "a/+", "a/#", "a\0"] {
            assert!(valid_topic(t).is_err(), "{t:?}");
        }
        assert!(valid_filter(&"a".repeat(65536)).is_err());
    }

    #[test]
    fn downstream_operations() {
        let node = "edge-1";
        assert_eq!(
            downstream(&msg("subscribe", "a/+/c", Content::null()), node),
            Ok(Action::Subscribe("a/+/c".into()))
        );
        assert_eq!(
            downstream(&msg("unsubscribe", "a/#", Content::null()), node),
            Ok(Action::Unsubscribe("a/#".into()))
        );
        assert_eq!(
            downstream(&msg("publish", "$hw/events/device/d1/twin/update/result", Content::string("{}")), node),
            Ok(Action::Publish { topic: "$hw/events/device/d1/twin/update/result".into(), payload: b"{}".to_vec() })
        );
        let content = Content::from_json(r#"{"message":{"topic":"t/1","z":1,"a":"<x>"},"other":true}"#).unwrap();
        assert_eq!(
            downstream(&msg("message", "", content), node),
            Ok(Action::Publish {
                topic: "t/1".into(),
                payload: br#"{"a":"\u003cx\u003e","topic":"t/1","z":1}"#.to_vec()
            })
        );
        let auth = Content::from_json(r#"{"sk":"s","ak":"a"}"#).unwrap();
        assert_eq!(
            downstream(&msg("get_result", "auth_info", auth.clone()), node),
            Ok(Action::Publish {
                topic: "$hw/events/node/edge-1/authInfo/get/result".into(),
                payload: br#"{"ak":"a","sk":"s"}"#.to_vec()
            })
        );
        assert!(matches!(downstream(&msg("get_result", "other", auth), node), Ok(Action::Ignore(_))));
        assert!(matches!(
            downstream(&msg("connect", "node/connection", Content::string("x")), node),
            Ok(Action::Ignore(_))
        ));
    }

    #[test]
    fn malformed_downstream_messages_are_refused() {
        let node = "n";
        let cases = [
            msg("subscribe", "", Content::null()),
            msg("subscribe", "a/#/b", Content::null()),
            msg("publish", "", Content::string("x")),
            msg("publish", "a/+", Content::string("x")),
            msg("publish", "a/b", Content::from_json(r#"{"not":"a string"}"#).unwrap()),
            msg("publish", "a/b", Content::null()),
            msg("message", "", Content::string("x")),
            msg("message", "", Content::from_json(r#"{"message":"x"}"#).unwrap()),
            msg("message", "", Content::from_json(r#"{"message":{"topic":7}}"#).unwrap()),
            msg("message", "", Content::from_json(r#"{"message":{"topic":"a/#"}}"#).unwrap()),
        ];
        for m in cases {
            let got = downstream(&m, node);
            assert!(matches!(got, Err(Refused::BadTopic(_) | Refused::BadContent(_))), "{m:?}: {got:?}");
            assert_eq!(got.unwrap_err().reason(), "malformed");
        }
        assert_eq!(downstream(&msg("frobnicate", "a", Content::null()), node), Err(Refused::UnknownOperation));
        let big = "x".repeat(MAX_PAYLOAD_BYTES + 1);
        assert_eq!(
            downstream(&msg("publish", "a/b", Content::string(&big)), node),
            Err(Refused::TooLarge(MAX_PAYLOAD_BYTES + 1))
        );
    }

    #[test]
    fn filters_match_as_mqtt_says() {
        let yes = [
            ("$hw/events/device/+/twin/+", "$hw/events/device/d1/twin/update"),
            ("$hw/events/upload/#", "$hw/events/upload/x/y"),
            ("$hw/events/upload/#", "$hw/events/upload"),
            ("+/user/#", "app/user/a/b"),
            ("a/b", "a/b"),
            ("#", "a"),
            ("+/+", "/x"),
        ];
        for (f, t) in yes {
            assert!(filter_matches(f, t), "{f} {t}");
        }
        let no = [
            ("$hw/events/device/+/twin/+", "$hw/events/device/d1/twin/update/result"),
            ("#", "$hw/events/x"),
            ("+/events/x", "$hw/events/x"),
            ("+/user/#", "app/users/a"),
            ("a/b", "a/b/c"),
            ("a/b/c", "a/b"),
        ];
        for (f, t) in no {
            assert!(!filter_matches(f, t), "{f} {t}");
        }
    }

    #[test]
    fn go_json_sorts_nested_keys() {
        let v: serde_json::Value = serde_json::from_str(r#"{"b":[{"y":1,"x":2}],"a":"&\u2028"}"#).unwrap();
        assert_eq!(go_json(&v), r#"{"a":"\u0026\u2028","b":[{"x":2,"y":1}]}"#);
    }
}
