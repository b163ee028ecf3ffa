//! The example messages of PROTOCOL.md §1.4 decode, re-encode byte-for-byte as
//! Go would write them, and decode again to the same value.

use edgehive_model::{Content, Message, ResourcePath, group, op, source};
use serde_json::{Value, json};

/// Go's encoder writes keys in struct order with no spaces, so a message built
/// by KubeEdge is byte-identical to our encoding of the decoded message.
const EXAMPLES: &[&str] = &[
    // Pod insert, cloud -> edge, ACK mode.
    r#"{"header":{"msg_id":"6f1c2a8e-3b1d-4c5e-9a0b-1c2d3e4f5a6b","timestamp":1700000000123,"resourceversion":"48213"},"route":{"source":"edgecontroller","group":"resource","operation":"insert","resource":"default/pod/nginx"},"content":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"nginx","namespace":"default","uid":"8d3e0d2c-0000-4000-8000-000000000001","resourceVersion":"48213"},"spec":{"nodeName":"edge-1","containers":[{"name":"nginx","image":"nginx"}]},"status":{}}}"#,
    // ACK from the edge.
    r#"{"header":{"msg_id":"b27d0000-0000-4000-8000-000000000002","parent_msg_id":"6f1c2a8e-3b1d-4c5e-9a0b-1c2d3e4f5a6b","timestamp":1700000000200},"route":{"source":"edgecontroller","group":"resource","operation":"response","resource":"default/pod/nginx"},"content":"OK"}"#,
    // Keepalive, edge -> cloud.
    r#"{"header":{"msg_id":"k1","timestamp":1700000000300},"route":{"source":"websocket","group":"resource","operation":"keepalive","resource":"node"},"content":"ping"}"#,
    // Node status patch (content is a JSON string holding the patch).
    r#"{"header":{"msg_id":"a1","timestamp":1700000000400},"route":{"source":"edged","group":"meta","operation":"patch","resource":"default/nodepatch/edge-1"},"content":"{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"}"#,
    // The cloud's reply to it.
    r#"{"header":{"msg_id":"c9","parent_msg_id":"a1","timestamp":1700000000500,"resourceversion":"48300"},"route":{"source":"edgecontroller","group":"resource","operation":"response","resource":"default/nodepatch/edge-1"},"content":{"Object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"edge-1"}},"Err":null}}"#,
    // Deprecated node status update.
    r#"{"header":{"msg_id":"u1","timestamp":1700000000600},"route":{"source":"edged","group":"meta","operation":"update","resource":"default/nodestatus/edge-1"},"content":{"UID":"abc","Status":{"phase":"Running"},"ExtendResources":null}}"#,
    // Query from the edge and its response.
    r#"{"header":{"msg_id":"q1","timestamp":1700000000700},"route":{"source":"edged","group":"meta","operation":"query","resource":"default/configmap/cfg"},"content":null}"#,
    r#"{"header":{"msg_id":"r1","parent_msg_id":"q1","timestamp":1700000000800,"resourceversion":"777"},"route":{"source":"edgecontroller","group":"resource","operation":"response","resource":"default/configmap/cfg"},"content":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cfg","namespace":"default"},"data":{"k":"v"}}}"#,
    // Edge connect event (internal).
    r#"{"header":{"msg_id":"e1","timestamp":1700000000900},"route":{"source":"edgehub","group":"meta","operation":"connect","resource":"node/connection"},"content":"cloud_connected"}"#,
];

#[test]
fn examples_round_trip_byte_for_byte() {
    for ex in EXAMPLES {
        let m = Message::decode(ex.as_bytes()).unwrap_or_else(|e| panic!("{e}: {ex}"));
        let encoded = String::from_utf8(m.encode()).unwrap();
        assert_eq!(&encoded, ex);
        let again = Message::decode(encoded.as_bytes()).unwrap();
        assert_eq!(again, m);
        // A frame as gorilla's WriteJSON sends it ends in a newline.
        let framed = format!("{ex}\n");
        assert_eq!(Message::decode(framed.as_bytes()).unwrap(), m);
    }
}

#[test]
fn pod_insert_fields() {
    let m = Message::decode(EXAMPLES[0].as_bytes()).unwrap();
    assert_eq!(m.route.source, source::EDGECONTROLLER);
    assert_eq!(m.route.group, group::RESOURCE);
    assert_eq!(m.route.operation, op::INSERT);
    assert_eq!(m.header.resource_version, "48213");
    let path = ResourcePath::parse_wire(&m.route.resource).unwrap();
    assert_eq!(path.to_cloud("edge-1"), "node/edge-1/default/pod/nginx");
    let pod: Value = m.content.decode().unwrap();
    assert_eq!(pod["spec"]["nodeName"], "edge-1");
}

#[test]
fn ack_built_here_matches_kubeedge_shape() {
    let req = Message::decode(EXAMPLES[0].as_bytes()).unwrap();
    let ack = req.response(Content::string("OK"));
    let v: Value = serde_json::from_slice(&ack.encode()).unwrap();
    assert_eq!(v["header"]["parent_msg_id"], json!(req.header.msg_id.as_str()));
    assert!(v["header"].get("resourceversion").is_none());
    assert!(v["header"].get("sync").is_none());
    assert_eq!(
        v["route"],
        json!({"source":"edgecontroller","group":"resource","operation":"response","resource":"default/pod/nginx"})
    );
    assert_eq!(v["content"], json!("OK"));
}

#[test]
fn string_content_is_raw_payload() {
    let m = Message::decode(EXAMPLES[3].as_bytes()).unwrap();
    let patch: Value = serde_json::from_slice(&m.content.data()).unwrap();
    assert_eq!(patch["status"]["conditions"][0]["type"], "Ready");
}

#[test]
fn go_style_input_with_spaces_and_unknown_fields() {
    let input = r#" { "route" : { "operation" : "insert" , "x": 1 }, "header" : { "msg_id" : "m", "timestamp": 5, "future": {"a": [1]} }, "content" : { "b" : 2 , "a" : 1 } } "#;
    let m = Message::decode(input.as_bytes()).unwrap();
    assert_eq!(m.header.msg_id, "m");
    assert_eq!(m.route.operation, "insert");
    assert_eq!(m.content.to_value(), json!({"a":1,"b":2}));
    assert_eq!(Message::decode(&m.encode()).unwrap(), m);
}

#[test]
fn fan_out_shares_one_encoding() {
    let content = Content::from_serialize(&json!({"kind":"Pod","spec":{"containers":[{"name":"a"}]}})).unwrap();
    let base = Message::new()
        .with_route(source::EDGECONTROLLER, group::RESOURCE, "default/pod/p", op::INSERT)
        .with_content(content);
    let copies: Vec<Message> = (0..1000)
        .map(|i| {
            let mut m = base.clone();
            m.header.msg_id = edgehive_model::new_msg_id();
            m.route.resource = format!("default/pod/p{i}").into();
            m
        })
        .collect();
    for m in &copies {
        assert!(m.content.ptr_eq(&base.content), "content must be shared, not re-encoded");
    }
}
