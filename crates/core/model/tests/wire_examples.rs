//! Example messages (docs/protocol.md §1, §6) decode, re-encode
//! byte-for-byte as Go would write them, and decode again to the same
//! value; and the exchanges a KubeEdge v1.15 EdgeCore has with an edgehive
//! cloud carry what EdgeCore reads (§5).

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

/// Exchanges of a KubeEdge v1.15 EdgeCore with an edgehive cloud, as Go
/// writes them (the cloud's side as edgehive writes it): kubelet's Lease
/// (query, NotFound, MetaManager's ACK of the answer, create, its answer),
/// a pod deletion confirmed by kubelet's status manager and its answer, and
/// two refusals.
const KUBEEDGE_V115: &[&str] = &[
    // 0: the Lease query, as MetaManager forwards it.
    r#"{"header":{"msg_id":"l1","timestamp":1700000001000},"route":{"source":"edged","group":"meta","operation":"query","resource":"kube-node-lease/lease/edge-1"},"content":null}"#,
    // 1: NotFound, in KubeEdge's ObjectResp: kubelet then creates the Lease.
    r#"{"header":{"msg_id":"l2","parent_msg_id":"l1","timestamp":1700000001010},"route":{"source":"edgecontroller","group":"resource","operation":"response","resource":"kube-node-lease/lease/edge-1"},"content":{"Object":null,"Err":{"ErrStatus":{"metadata":{},"status":"Failure","message":"leases.coordination.k8s.io \"edge-1\" not found","reason":"NotFound","details":{"name":"edge-1","group":"coordination.k8s.io","kind":"leases"},"code":404}}}}"#,
    // 2: MetaManager acknowledges every answer to a remote query.
    r#"{"header":{"msg_id":"l3","parent_msg_id":"l2","timestamp":1700000001020},"route":{"source":"edgecontroller","group":"resource","operation":"response","resource":"kube-node-lease/lease/edge-1"},"content":"OK"}"#,
    // 3: the Lease created (Go writes a zero creationTimestamp as null).
    r#"{"header":{"msg_id":"l4","timestamp":1700000001030},"route":{"source":"edged","group":"meta","operation":"insert","resource":"kube-node-lease/lease/edge-1"},"content":{"metadata":{"name":"edge-1","namespace":"kube-node-lease","creationTimestamp":null},"spec":{"holderIdentity":"edge-1","leaseDurationSeconds":40,"renewTime":"2023-11-14T22:13:21.030000Z"}}}"#,
    // 4: its answer, with the stored Lease.
    r#"{"header":{"msg_id":"l5","parent_msg_id":"l4","timestamp":1700000001040,"resourceversion":"501"},"route":{"source":"edgecontroller","group":"resource","operation":"response","resource":"kube-node-lease/lease/edge-1"},"content":{"Object":{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"resourceVersion":"501","creationTimestamp":"2023-11-14T22:13:21Z","name":"edge-1","namespace":"kube-node-lease","uid":"0b5e0000-0000-4000-8000-000000000005"},"spec":{"holderIdentity":"edge-1","leaseDurationSeconds":40,"renewTime":"2023-11-14T22:13:21.030000Z"}},"Err":null}}"#,
    // 5: kubelet's status manager confirms a pod's deletion (DeleteOptions).
    r#"{"header":{"msg_id":"d1","timestamp":1700000002000},"route":{"source":"edged","group":"meta","operation":"delete","resource":"default/pod/nginx"},"content":{"gracePeriodSeconds":0,"preconditions":{"uid":"8d3e0d2c-0000-4000-8000-000000000001"}}}"#,
    // 6: "OK" — also to a retry after the pod is gone.
    r#"{"header":{"msg_id":"d2","parent_msg_id":"d1","timestamp":1700000002010},"route":{"source":"edgecontroller","group":"resource","operation":"response","resource":"default/pod/nginx"},"content":"OK"}"#,
    // 7: another node's pod: Forbidden, a bare StatusError (EdgeCore fails
    // anything but "OK"); operation `error` for edgehive's own edge.
    r#"{"header":{"msg_id":"d4","parent_msg_id":"d3","timestamp":1700000002030},"route":{"source":"edgecontroller","group":"resource","operation":"error","resource":"default/pod/web"},"content":{"ErrStatus":{"metadata":{},"status":"Failure","message":"pods \"web\" is forbidden: pod default/web is bound to another node","reason":"Forbidden","details":{"name":"web","kind":"pods"},"code":403}}}"#,
    // 8: a configmap no pod of the node uses: the message alone (EdgeCore
    // would decode a JSON object as an empty ConfigMap).
    r#"{"header":{"msg_id":"q4","parent_msg_id":"q3","timestamp":1700000003010},"route":{"source":"edgecontroller","group":"resource","operation":"error","resource":"default/configmap/other"},"content":"configmaps \"other\" is forbidden: no pod bound to node edge-1 uses configmap default/other"}"#,
];

#[test]
fn kubeedge_exchanges_round_trip_byte_for_byte() {
    for ex in KUBEEDGE_V115 {
        let m = Message::decode(ex.as_bytes()).unwrap_or_else(|e| panic!("{e}: {ex}"));
        assert_eq!(String::from_utf8(m.encode()).unwrap(), *ex);
    }
}

/// What EdgeCore reads of each answer: a reply is routed by its parent,
/// MetaManager acknowledges a remote answer by its id, kubelet's lease
/// controller needs `Err.ErrStatus.reason` NotFound to create the Lease,
/// `Pods().Delete` needs exactly the string "OK", and a refusal is not a
/// JSON object where EdgeCore decodes one as the object asked for.
#[test]
fn kubeedge_exchanges_carry_what_edgecore_reads() {
    let m: Vec<Message> = KUBEEDGE_V115.iter().map(|ex| Message::decode(ex.as_bytes()).unwrap()).collect();
    for (request, answer) in [(0, 1), (3, 4), (5, 6)] {
        assert_eq!(m[answer].header.parent_msg_id, m[request].header.msg_id);
        assert_eq!(m[answer].route.resource, m[request].route.resource);
    }
    assert_eq!(m[2].header.parent_msg_id, m[1].header.msg_id);
    let not_found = m[1].content.to_value();
    assert!(not_found["Object"].is_null());
    assert_eq!(not_found["Err"]["ErrStatus"]["reason"], "NotFound");
    let created = m[4].content.to_value();
    assert!(created["Err"].is_null() && created["Object"]["kind"] == "Lease");
    assert_eq!(m[6].content.as_text().as_deref(), Some("OK"));
    assert_eq!(m[5].content.to_value()["preconditions"]["uid"], "8d3e0d2c-0000-4000-8000-000000000001");
    assert_eq!(m[7].content.to_value()["ErrStatus"]["code"], 403);
    assert!(m[7].content.as_text().is_none(), "not \"OK\"");
    let refusal = m[8].content.as_text().unwrap();
    assert!(serde_json::from_str::<Value>(&refusal).is_err(), "EdgeCore's decoding fails");
    for i in [7, 8] {
        assert_eq!(m[i].route.operation, op::ERROR);
    }
}

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
