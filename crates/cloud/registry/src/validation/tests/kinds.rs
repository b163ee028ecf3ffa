//! The other kinds, KubeEdge kinds, decoding and robustness.

use super::*;
use serde_json::{Value, json};

// --- ConfigMap, Secret -------------------------------------------------------------------------------------

fn config_map(data: Value) -> Value {
    json!({"metadata": {"name": "cm", "namespace": "d"}, "data": data})
}

#[test]
fn config_map_keys_and_size() {
    assert_eq!(core("ConfigMap", &config_map(json!({"a-b_c.d": "x"}))), Vec::<String>::new());
    assert_eq!(
        core("ConfigMap", &config_map(json!({"a b": "x", "..": "y"}))),
        vec![
            "data[..]: Invalid value: \"..\": must not be '..'",
            "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        ]
    );
    let both = with(config_map(json!({"k": "x"})), "/binaryData", json!({"k": "eA=="}));
    assert_eq!(core("ConfigMap", &both), vec!["data[k]: Invalid value: \"k\": duplicate of key present in binaryData"]);
    let big = config_map(json!({"a": "x".repeat(600 * 1024), "b": "y".repeat(600 * 1024)}));
    assert_eq!(core("ConfigMap", &big), vec![": Too long: must have at most 1048576 bytes"]);
}

#[test]
fn immutable_config_maps_and_secrets() {
    let old = with(config_map(json!({"k": "v"})), "/immutable", json!(true));
    assert_eq!(core_update("ConfigMap", &old, &old), Vec::<String>::new());
    let changed = with(old.clone(), "/data", json!({"k": "w"}));
    assert_eq!(
        core_update("ConfigMap", &changed, &old),
        vec!["data: Forbidden: field is immutable when `immutable` is set"]
    );
    let unset = with(old.clone(), "/immutable", json!(false));
    assert_eq!(
        core_update("ConfigMap", &unset, &old),
        vec!["immutable: Forbidden: field is immutable when `immutable` is set"]
    );
    let mutable = config_map(json!({"k": "v"}));
    assert_eq!(
        core_update("ConfigMap", &with(mutable.clone(), "/data", json!({"k": "w"})), &mutable),
        Vec::<String>::new()
    );
    let secret = json!({"metadata": {"name": "s", "namespace": "d"}, "data": {"k": "dg=="}, "immutable": true});
    let old = stored("", "Secret", &secret);
    assert_eq!(
        core_update("Secret", &with(old.clone(), "/data/k", json!("dw==")), &old),
        vec!["data: Forbidden: field is immutable when `immutable` is set"]
    );
    assert_eq!(
        core_update("Secret", &with(old.clone(), "/type", json!("kubernetes.io/basic-auth")), &old),
        vec![
            "type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable",
            "data[username]: Required value",
            "data[password]: Required value",
        ]
    );
}

fn secret(kind: &str, data: Value) -> Value {
    json!({"metadata": {"name": "s", "namespace": "d"}, "type": kind, "data": data})
}

#[test]
fn secret_rules() {
    assert_eq!(core("Secret", &secret("Opaque", json!({"a": "aGk="}))), Vec::<String>::new());
    let errs = validate_create("", "Secret", &secret("Opaque", json!({"a": "not base64!"})));
    assert_eq!(errs.len(), 1);
    assert!(errs[0].is_decode_error());
    assert_eq!(errs[0].status_code(), 400);
    assert_eq!(errs[0].message(), "illegal base64 data at input byte 3");
    assert_eq!(
        core("Secret", &secret("kubernetes.io/tls", json!({}))),
        vec!["data[tls.crt]: Required value", "data[tls.key]: Required value"]
    );
    assert_eq!(
        core("Secret", &secret("kubernetes.io/tls", json!({"tls.crt": "", "tls.key": ""}))),
        Vec::<String>::new()
    );
    assert_eq!(
        core("Secret", &secret("kubernetes.io/dockerconfigjson", json!({}))),
        vec!["data[.dockerconfigjson]: Required value"]
    );
    assert_eq!(
        core("Secret", &secret("kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": "e30="}))),
        Vec::<String>::new()
    );
    assert_eq!(
        core("Secret", &secret("kubernetes.io/dockerconfigjson", json!({".dockerconfigjson": "eA=="}))),
        vec![
            "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": invalid character 'x' looking for beginning of value"
        ]
    );
    assert_eq!(
        core("Secret", &secret("kubernetes.io/basic-auth", json!({}))),
        vec!["data[username]: Required value", "data[password]: Required value"]
    );
    assert_eq!(core("Secret", &secret("kubernetes.io/basic-auth", json!({"password": ""}))), Vec::<String>::new());
    let with_string_data = with(secret("Opaque", json!({})), "/stringData", json!({"bad key": "v"}));
    assert_eq!(validate_create("", "Secret", &with_string_data)[0].field, "data[bad key]");
    let big = secret(
        "Opaque",
        json!({"a": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![0u8; 1024 * 1024 + 1])}),
    );
    assert_eq!(core("Secret", &big), vec!["data: Too long: must have at most 1048576 bytes"]);
}

// --- Service, Endpoints ------------------------------------------------------------------------------------

fn service(spec: Value) -> Value {
    json!({"metadata": {"name": "web", "namespace": "d"}, "spec": spec})
}

#[test]
fn service_ports() {
    assert_eq!(core("Service", &service(json!({"ports": [{"port": 80}]}))), Vec::<String>::new());
    assert_eq!(core("Service", &service(json!({}))), vec!["spec.ports: Required value"]);
    assert_eq!(core("Service", &service(json!({"clusterIP": "None"}))), Vec::<String>::new());
    assert_eq!(
        core("Service", &service(json!({"type": "ExternalName", "externalName": "db.example.com."}))),
        Vec::<String>::new()
    );
    let bad =
        service(json!({"ports": [{"port": 0, "targetPort": "Http_1"}, {"port": 81, "protocol": "ICMP", "name": "b"}]}));
    assert_eq!(
        core("Service", &bad),
        vec![
            "spec.ports[0].name: Required value",
            "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[0].targetPort: Invalid value: \"Http_1\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            "spec.ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ]
    );
    let dup = service(json!({"ports": [{"port": 80, "name": "a"}, {"port": 80, "name": "a"}]}));
    assert_eq!(
        core("Service", &dup),
        vec![
            "spec.ports[1].name: Duplicate value: \"a\"",
            "spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\", AppProtocol:(*string)(nil), Port:80, \
TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}",
        ]
    );
}

#[test]
fn service_types_and_ips() {
    assert_eq!(
        core("Service", &service(json!({"type": "Cluster", "ports": [{"port": 80}]}))),
        vec![
            "spec.type: Unsupported value: \"Cluster\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
        ]
    );
    assert_eq!(
        core("Service", &service(json!({"type": "ExternalName", "externalName": "Bad_Name"}))),
        vec![format!("spec.externalName: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}")]
    );
    assert_eq!(
        core("Service", &service(json!({"clusterIP": "10.0.0.300", "ports": [{"port": 80}]}))),
        vec![
            "spec.clusterIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        ]
    );
    assert_eq!(
        core("Service", &service(json!({"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]}))),
        vec!["spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"]
    );
}

#[test]
fn service_cluster_ip_is_immutable() {
    let old = stored("", "Service", &service(json!({"clusterIP": "10.0.0.1", "ports": [{"port": 80}]})));
    assert_eq!(core_update("Service", &old, &old), Vec::<String>::new());
    // Leaving it out keeps the allocated one, as Kubernetes' registry does.
    let omitted = without(without(old.clone(), "/spec/clusterIP"), "/spec/clusterIPs");
    assert_eq!(core_update("Service", &omitted, &old), Vec::<String>::new());
    let changed = with(without(old.clone(), "/spec/clusterIPs"), "/spec/clusterIP", json!("10.0.0.2"));
    assert_eq!(
        core_update("Service", &changed, &old),
        vec!["spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.2\"}: may not change once set"]
    );
}

#[test]
fn endpoints_rules() {
    let ok = json!({"metadata": {"name": "web", "namespace": "d"}, "subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 80}]}]});
    assert_eq!(core("Endpoints", &ok), Vec::<String>::new());
    let bad = with(ok.clone(), "/subsets/0/addresses", json!([{"ip": ""}, {"ip": "127.0.0.1"}]));
    assert_eq!(
        core("Endpoints", &bad),
        vec![
            "subsets[0].addresses[0].ip: Invalid value: \"\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            "subsets[0].addresses[0].ip: Invalid value: \"\": must be a valid IP address",
            "subsets[0].addresses[1].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ]
    );
    let empty = with(ok, "/subsets/0/addresses", json!([]));
    assert_eq!(
        core("Endpoints", &empty),
        vec!["subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"]
    );
}

// --- Namespace, Node, Event, Lease -------------------------------------------------------------------------

#[test]
fn namespace_and_node_rules() {
    let ns = json!({"metadata": {"name": "dev"}, "spec": {"finalizers": ["kubernetes", "custom"]}});
    assert_eq!(
        core("Namespace", &ns),
        vec![
            "spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"
        ]
    );
    let node = json!({"metadata": {"name": "edge"}, "spec": {"podCIDR": "10.244.0.0/33", "taints": [{"key": "k", "effect": "Sometimes"}]}});
    assert_eq!(
        core("Node", &node),
        vec![
            "metadata.taints[0].effect: Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
            "spec.podCIDRs[0]: Invalid value: \"10.244.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        ]
    );
    let old = stored("", "Node", &json!({"metadata": {"name": "edge"}, "spec": {"podCIDR": "10.244.0.0/24"}}));
    let unset = stored("", "Node", &json!({"metadata": {"name": "edge"}}));
    assert_eq!(core_update("Node", &old, &unset), Vec::<String>::new());
    let moved = stored("", "Node", &json!({"metadata": {"name": "edge"}, "spec": {"podCIDR": "10.245.0.0/24"}}));
    assert_eq!(
        core_update("Node", &moved, &old),
        vec!["spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid"]
    );
}

#[test]
fn event_rules() {
    let ev = json!({"metadata": {"name": "web.17a", "namespace": "d"}, "involvedObject": {"kind": "Pod", "name": "web", "namespace": "d"},
                    "reason": "Started", "message": "ok"});
    assert_eq!(core("Event", &ev), Vec::<String>::new());
    let other = with(ev.clone(), "/involvedObject/namespace", json!("e"));
    assert_eq!(
        core("Event", &other),
        vec!["involvedObject.namespace: Invalid value: \"e\": does not match event.namespace"]
    );
    let modern =
        with(with(ev.clone(), "/eventTime", json!("2024-01-01T00:00:00.000000Z")), "/reason", json!("r".repeat(129)));
    assert_eq!(
        core("Event", &modern),
        vec![
            "reportingController: Required value",
            "reportingController: Invalid value: \"\": name part must be non-empty",
            "reportingController: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', \
and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "reportingInstance: Required value",
            "action: Required value",
            "reason: Invalid value: \"\": can have at most 128 characters",
        ]
    );
    // Only the generic name rule applies to core/v1 Events.
    assert_eq!(
        core("Event", &with(ev, "/metadata/name", json!("a/b"))),
        vec!["metadata.name: Invalid value: \"a/b\": may not contain '/'"]
    );
}

#[test]
fn lease_rules() {
    let lease = |spec: Value| json!({"metadata": {"name": "edge-1", "namespace": "kube-node-lease"}, "spec": spec});
    let v = |spec: Value| {
        validate_create("coordination.k8s.io", "Lease", &lease(spec))
            .iter()
            .map(FieldError::message)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        v(json!({"holderIdentity": "edge-1", "leaseDurationSeconds": 40, "leaseTransitions": 0})),
        Vec::<String>::new()
    );
    assert_eq!(
        v(json!({"leaseDurationSeconds": 0, "leaseTransitions": -1})),
        vec![
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
            "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
        ]
    );
    assert_eq!(
        v(json!({"preferredHolder": "x"})),
        vec!["spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"]
    );
}

// --- KubeEdge ----------------------------------------------------------------------------------------------

fn device(spec: Value) -> Value {
    json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device", "metadata": {"name": "sensor", "namespace": "d"}, "spec": spec})
}

fn edge(kind: &str, obj: &Value) -> Vec<FieldError> {
    let group = if kind.contains("ObjectSync") { "reliablesyncs.kubeedge.io" } else { "devices.kubeedge.io" };
    validate_create(group, kind, obj)
}

#[test]
fn device_schema_and_webhook() {
    let ok = device(json!({"deviceModelRef": {"name": "m"}, "nodeName": "edge-1",
                           "properties": [{"name": "temp", "desired": {"value": "1"}, "reportCycle": 1000}],
                           "protocol": {"protocolName": "modbus", "configData": {"any": {"thing": 1}}}}));
    assert!(edge("Device", &ok).is_empty());
    let typed = device(json!({"nodeName": 5, "properties": [{"name": "t", "desired": {}}]}));
    let errs = edge("Device", &typed);
    assert_eq!(
        errs.iter().map(FieldError::message).collect::<Vec<_>>(),
        vec![
            "spec.nodeName: Invalid value: \"integer\": spec.nodeName in body must be of type string: \"integer\"",
            "spec.properties[0].desired.value: Required value",
        ]
    );
    assert_eq!(errs[0].kind.reason(), "FieldValueTypeInvalid");
    assert!(!errs[0].is_decode_error());
    let dup = device(json!({"properties": [{"name": "t"}, {"name": "t"}]}));
    let errs = edge("Device", &dup);
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].message(),
        "admission webhook \"validatedevice.kubeedge.io\" denied the request: property names must be unique."
    );
    assert_eq!(errs[0].status_code(), 400);
    // The webhook is not reached when validation already failed.
    let both = with(dup, "/metadata/name", json!("Bad"));
    assert_eq!(edge("Device", &both).len(), 1);
    assert_eq!(edge("Device", &both)[0].field, "metadata.name");
}

#[test]
fn device_model_enums() {
    let model = |props: Value| json!({"metadata": {"name": "m", "namespace": "d"}, "spec": {"protocol": "modbus", "properties": props}});
    assert!(
        edge("DeviceModel", &model(json!([{"name": "temp", "type": "INT", "accessMode": "ReadWrite"}]))).is_empty()
    );
    let errs = edge("DeviceModel", &model(json!([{"name": "temp", "type": "int", "accessMode": "RW"}])));
    assert_eq!(
        errs.iter().map(FieldError::message).collect::<Vec<_>>(),
        vec![
            "spec.properties[0].accessMode: Unsupported value: \"RW\": supported values: \"ReadWrite\", \"ReadOnly\"",
            "spec.properties[0].type: Unsupported value: \"int\": supported values: \"INT\", \"FLOAT\", \"DOUBLE\", \"STRING\", \"BOOLEAN\", \"BYTES\", \"STREAM\"",
        ]
    );
    let dup = edge("DeviceModel", &model(json!([{"name": "t"}, {"name": "t"}])));
    assert_eq!(dup[0].origin, Origin::Webhook("validatedevicemodel.kubeedge.io"));
}

#[test]
fn object_syncs() {
    let sync = json!({"metadata": {"name": "edge-1.6f1c1b0e-3c1f-4b5a-9d55-2b1f0c3a1e11", "namespace": "d"},
                      "spec": {"objectAPIVersion": "v1", "objectKind": "Pod", "objectName": "web"}});
    assert!(edge("ObjectSync", &sync).is_empty());
    let no_ns = without(sync.clone(), "/metadata/namespace");
    assert_eq!(edge("ObjectSync", &no_ns)[0].message(), "metadata.namespace: Required value");
    assert!(edge("ClusterObjectSync", &no_ns).is_empty());
    let typed = with(sync, "/spec/objectKind", json!(["Pod"]));
    assert_eq!(
        edge("ObjectSync", &typed)[0].message(),
        "spec.objectKind: Invalid value: \"array\": spec.objectKind in body must be of type string: \"array\""
    );
}

// --- decoding ----------------------------------------------------------------------------------------------

#[test]
fn wrong_json_types_are_decode_errors() {
    let cases = [
        (
            "/spec/containers",
            json!("x"),
            "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container",
        ),
        (
            "/spec/containers/0/ports",
            json!([{"containerPort": "80"}]),
            "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32",
        ),
        (
            "/metadata/labels",
            json!({"a": 1}),
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        ),
        ("/spec", json!([]), "json: cannot unmarshal array into Go struct field Pod.spec of type v1.PodSpec"),
        (
            "/spec/terminationGracePeriodSeconds",
            json!(1.5),
            "json: cannot unmarshal number 1.5 into Go struct field PodSpec.spec.terminationGracePeriodSeconds of type int64",
        ),
        (
            "/spec/containers/0/resources",
            json!({"limits": {"cpu": "lots"}}),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
    ];
    for (at, value, message) in cases {
        let errs = validate_create("", "Pod", &with(pod(), at, value));
        assert_eq!(errs.len(), 1, "{at}");
        assert!(errs[0].is_decode_error());
        assert_eq!(errs[0].message(), message);
    }
    let mut odd = secret("Opaque", json!({}));
    odd["stringData"] = json!({"a": 5});
    crate::defaults::apply_defaults("", "Secret", &mut odd);
    assert_eq!(
        validate_create("", "Secret", &odd)[0].message(),
        "json: cannot unmarshal number into Go struct field Secret.stringData of type string"
    );
    let svc = service(json!({"ports": [{"port": 80, "targetPort": true}]}));
    assert_eq!(
        validate_create("", "Service", &svc)[0].message(),
        "json: cannot unmarshal bool into Go value of type int32"
    );
    let many = with(with(pod(), "/spec/containers", json!(1)), "/metadata/name", json!(2));
    assert_eq!(validate_create("", "Pod", &many).len(), 1, "Go's decoder reports one error");
    assert!(validate_create("", "Pod", &json!([1])).first().is_some_and(FieldError::is_decode_error));
}

// --- robustness --------------------------------------------------------------------------------------------

fn weird_values() -> Vec<Value> {
    vec![
        json!(null),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(1e300),
        json!(""),
        json!("x"),
        json!(true),
        json!([]),
        json!([null, 1, "a", {}]),
        json!({}),
        json!({"a": [1]}),
    ]
}

/// Every path to every value in `v`, as JSON pointers.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(child, p, out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(child, p, out);
            }
        }
        _ => {}
    }
}

#[test]
fn nothing_panics_on_any_shape() {
    let samples: Vec<(&str, &str, Value)> = vec![
        ("", "Pod", {
            let mut p = with(
                pod(),
                "/spec/volumes",
                json!([{"name": "v", "secret": {"secretName": "s", "items": [{"key": "k", "path": "p"}]}}]),
            );
            p = with(p, "/spec/containers/0/ports", json!([{"containerPort": 80}]));
            p = with(
                p,
                "/spec/containers/0/env",
                json!([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]),
            );
            p = with(p, "/spec/containers/0/livenessProbe", json!({"httpGet": {"port": 80, "path": "/"}}));
            p = with(p, "/spec/containers/0/resources", json!({"limits": {"cpu": "1"}}));
            p = with(p, "/spec/tolerations", json!([{"key": "k", "operator": "Exists"}]));
            with(p, "/metadata/labels", json!({"a": "b"}))
        }),
        (
            "",
            "Service",
            service(
                json!({"ports": [{"port": 80, "targetPort": 8080}], "clusterIP": "10.0.0.1", "selector": {"a": "b"}}),
            ),
        ),
        ("", "Secret", secret("kubernetes.io/tls", json!({"tls.crt": "", "tls.key": ""}))),
        ("", "ConfigMap", config_map(json!({"a": "b"}))),
        (
            "",
            "Endpoints",
            json!({"metadata": {"name": "e", "namespace": "d"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 1}]}]}),
        ),
        ("", "Namespace", json!({"metadata": {"name": "n"}, "spec": {"finalizers": ["kubernetes"]}})),
        (
            "",
            "Node",
            json!({"metadata": {"name": "n"}, "spec": {"podCIDRs": ["10.0.0.0/24"], "taints": [{"key": "k", "effect": "NoSchedule"}]}, "status": {"capacity": {"cpu": "2"}}}),
        ),
        (
            "",
            "Event",
            json!({"metadata": {"name": "e", "namespace": "d"}, "involvedObject": {"namespace": "d"}, "eventTime": "x"}),
        ),
        (
            "coordination.k8s.io",
            "Lease",
            json!({"metadata": {"name": "l", "namespace": "d"}, "spec": {"leaseDurationSeconds": 1, "strategy": "x"}}),
        ),
        (
            "devices.kubeedge.io",
            "Device",
            device(
                json!({"properties": [{"name": "t", "desired": {"value": "1"}, "pushMethod": {"mqtt": {"qos": 1}}}]}),
            ),
        ),
        (
            "devices.kubeedge.io",
            "DeviceModel",
            json!({"metadata": {"name": "m", "namespace": "d"}, "spec": {"properties": [{"name": "t", "type": "INT"}]}}),
        ),
        (
            "reliablesyncs.kubeedge.io",
            "ObjectSync",
            json!({"metadata": {"name": "o", "namespace": "d"}, "spec": {"objectKind": "Pod"}}),
        ),
    ];
    for (group, kind, sample) in samples {
        for top in weird_values() {
            let _ = validate_create(group, kind, &top);
            let _ = validate_update(group, kind, &top, &sample);
            let _ = validate_update(group, kind, &sample, &top);
        }
        let mut paths = Vec::new();
        pointers(&sample, String::new(), &mut paths);
        for at in paths {
            for value in weird_values() {
                let mut obj = sample.clone();
                if let Some(slot) = obj.pointer_mut(&at) {
                    *slot = value;
                }
                let _ = validate_create(group, kind, &obj);
                let _ = validate_update(group, kind, &obj, &sample);
                let _ = validate_update(group, kind, &sample, &obj);
                let mut defaulted = obj.clone();
                crate::defaults::apply_defaults(group, kind, &mut defaulted);
                for e in validate_create(group, kind, &obj) {
                    let _ = e.message();
                }
            }
        }
    }
}
