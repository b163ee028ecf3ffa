//! Property tests: any message survives encode/decode; garbage never panics.

use edgehive_model::{Content, Message, MessageHeader, MessageParts, MessageRoute, ResourcePath, Text};
use proptest::prelude::*;
use serde_json::Value;

fn text() -> impl Strategy<Value = Text> {
    prop_oneof![Just(Text::EMPTY), "[a-z0-9/._-]{1,40}".prop_map(Text::from), any::<String>().prop_map(Text::from),]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn message() -> impl Strategy<Value = Message> {
    (
        (text(), text(), any::<i64>(), text(), any::<bool>(), text()),
        (text(), text(), text(), text(), text()),
        json_value(),
    )
        .prop_map(|((id, parent, ts, rv, sync, ty), (src, dst, grp, op, res), content)| {
            Message::from_parts(MessageParts {
                header: MessageHeader {
                    msg_id: id,
                    parent_msg_id: parent,
                    timestamp: ts,
                    resource_version: rv,
                    sync,
                    message_type: ty,
                },
                route: MessageRoute { source: src, destination: dst, group: grp, operation: op, resource: res },
                content: Content::from_serialize(&content).expect("a JSON value encodes"),
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_message_round_trips(m in message()) {
        let bytes = m.encode();
        let back = Message::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &m);
        // Encoding is deterministic.
        prop_assert_eq!(back.encode(), bytes);
    }

    #[test]
    fn garbage_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Message::decode(&bytes);
    }

    #[test]
    fn truncated_frames_are_errors(m in message(), cut in any::<prop::sample::Index>()) {
        let bytes = m.encode();
        let n = cut.index(bytes.len());
        // Every strict prefix of an object is incomplete JSON.
        prop_assert!(Message::decode(&bytes[..n]).is_err());
    }

    #[test]
    fn arbitrary_json_never_panics(v in json_value()) {
        let _ = Message::decode(&serde_json::to_vec(&v).unwrap());
    }

    #[test]
    fn resource_parsing_never_panics(s in any::<String>()) {
        if let Ok(p) = ResourcePath::parse_wire(&s) {
            prop_assert_eq!(p.to_wire(), s.clone());
        }
        if let Ok(r) = ResourcePath::parse_cloud(&s) {
            prop_assert_eq!(r.to_cloud(), s);
        }
    }
}
