//! Bodies captured from kubectl v1.32 (`kubectl --server=http://127.0.0.1:PORT create …`
//! against a loopback listener that saved each request), checked against the JSON the same
//! command prints with `--dry-run=client -o json` (without its `"creationTimestamp": null`).
//!
//! These are real gogo-protobuf encodings: every non-pointer field is present, zero or not.

use serde_json::{Value, json};

use super::decode;
use super::testenc::{Enc, envelope};
use super::wire::{Reader, WireType};

fn decoded(body: &[u8]) -> Value {
    match decode(body) {
        Ok((_, _, object)) => object,
        Err(e) => panic!("decode failed: {e}"),
    }
}

/// `kubectl create configmap lit --from-literal=k=v`
pub(super) const CONFIG_MAP: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12\x1d\x0a\x13\x0a\x03lit\x12\x00\x1a\x00\"\x00*\x00\
    2\x008\x00B\x00\x12\x06\x0a\x01k\x12\x01v\x1a\x00\"\x00";

/// `kubectl create secret generic creds --from-literal=user=admin --from-file=key.bin=<00 01 02 ff>`
pub(super) const SECRET: &[u8] =
    b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x129\x0a\x15\x0a\x05creds\x12\x00\x1a\x00\"\x00*\x002\
    \x008\x00B\x00\x12\x0f\x0a\x07key.bin\x12\x04\x00\x01\x02\xff\x12\x0d\x0a\x04user\x12\x05admin\
    \x1a\x00\x1a\x00\"\x00";

/// `kubectl create namespace team-a`
pub(super) const NAMESPACE: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x1e\x0a\x16\x0a\x06team-a\x12\x00\x1a\x00\"\x00*\
    \x002\x008\x00B\x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\"\x00";

/// `kubectl create service clusterip web --tcp=80:8080 --tcp=443:https`
pub(super) const SERVICE_CLUSTER_IP: &[u8] =
    b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12\x8d\x01\x0a\x1f\x0a\x03web\x12\x00\x1a\x00\"\x00*\
    \x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12f\x0a\x1b\x0a\x0780-8080\x12\x03TCP\x18P\"\x07\
    \x08\x00\x10\x90?\x1a\x00(\x00\x0a\"\x0a\x09443-https\x12\x03TCP\x18\xbb\x03\"\x0b\x08\x01\x10\
    \x00\x1a\x05https(\x00\x12\x0a\x0a\x03app\x12\x03web\x1a\x00\"\x09ClusterIP:\x00B\x00R\x00Z\x00`\
    \x00h\x00\x1a\x02\x0a\x00\x1a\x00\"\x00";

/// `kubectl create service nodeport np --tcp=80:8080 --node-port=30080`
pub(super) const SERVICE_NODE_PORT: &[u8] =
    b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12g\x0a\x1d\x0a\x02np\x12\x00\x1a\x00\"\x00*\x002\x008\
    \x00B\x00Z\x09\x0a\x03app\x12\x02np\x12B\x0a\x1d\x0a\x0780-8080\x12\x03TCP\x18P\"\x07\x08\x00\
    \x10\x90?\x1a\x00(\x80\xeb\x01\x12\x09\x0a\x03app\x12\x02np\x1a\x00\"\x08NodePort:\x00B\x00R\x00\
    Z\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\"\x00";

/// `kubectl create service externalname ext --external-name=example.com`
pub(super) const SERVICE_EXTERNAL_NAME: &[u8] =
    b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12Z\x0a\x1f\x0a\x03ext\x12\x00\x1a\x00\"\x00*\x002\x00\
    8\x00B\x00Z\x0a\x0a\x03app\x12\x03ext\x123\x12\x0a\x0a\x03app\x12\x03ext\x1a\x00\"\x0cExternalNa\
    me:\x00B\x00R\x0bexample.comZ\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\"\x00";

/// `kubectl create service clusterip headless --clusterip=None`
pub(super) const SERVICE_HEADLESS: &[u8] =
    b"k8s\x00\x0a\x0d\x0a\x02v1\x12\x07Service\x12_\x0a)\x0a\x08headless\x12\x00\x1a\x00\"\x00*\x002\
    \x008\x00B\x00Z\x0f\x0a\x03app\x12\x08headless\x12.\x12\x0f\x0a\x03app\x12\x08headless\x1a\x04No\
    ne\"\x09ClusterIP:\x00B\x00R\x00Z\x00`\x00h\x00\x1a\x02\x0a\x00\x1a\x00\"\x00";

/// `kubectl create deployment web --image=nginx:1.27 --port=80 --replicas=2 -- nginx -g 'daemon off;'`
pub(super) const DEPLOYMENT: &[u8] =
    b"k8s\x00\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12\xd6\x01\x0a\x1f\x0a\x03web\x12\x00\x1a\x00\
    \"\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12\xa4\x01\x08\x02\x12\x0c\x0a\x0a\x0a\
    \x03app\x12\x03web\x1a\x89\x01\x0a\x1c\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00Z\x0a\
    \x0a\x03app\x12\x03web\x12i\x12K\x0a\x05nginx\x12\x0anginx:1.27\x1a\x05nginx\x1a\x02-g\x1a\x0bda\
    emon off;*\x002\x0a\x0a\x00\x10\x00\x18P\"\x00*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90\
    \x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\
    \x00\xc2\x01\x00\"\x02\x0a\x00(\x008\x00\x1a\x0c\x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\x00\
    \"\x00";

/// `kubectl create deployment web --image=busybox`
pub(super) const DEPLOYMENT_BUSYBOX: &[u8] =
    b"k8s\x00\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12\xaf\x01\x0a\x1f\x0a\x03web\x12\x00\x1a\
    \x00\"\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12~\x08\x01\x12\x0c\x0a\x0a\x0a\x03a\
    pp\x12\x03web\x1ad\x0a\x1c\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\
    \x12\x03web\x12D\x12&\x0a\x07busybox\x12\x07busybox*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\
    \x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\
    \x01\x00\xc2\x01\x00\"\x02\x0a\x00(\x008\x00\x1a\x0c\x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\
    \x00\"\x00";

/// `kubectl create job pi --image=busybox -- sh -c 'echo hi'`
pub(super) const JOB: &[u8] =
    b"k8s\x00\x0a\x0f\x0a\x08batch/v1\x12\x03Job\x12\x8b\x01\x0a\x12\x0a\x02pi\x12\x00\x1a\x00\"\
    \x00*\x002\x008\x00B\x00\x12k2i\x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12U\
    \x122\x0a\x02pi\x12\x07busybox\x1a\x02sh\x1a\x02-c\x1a\x07echo hi*\x00B\x00j\x00r\x00\x80\x01\
    \x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x05Never2\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\
    \x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x1a\x08 \x00(\x000\x00:\x00\x1a\x00\"\x00";

/// `kubectl create cronjob tick --image=busybox --schedule='*/5 * * * *' -- date`
pub(super) const CRON_JOB: &[u8] =
    b"k8s\x00\x0a\x13\x0a\x08batch/v1\x12\x07CronJob\x12\xaa\x01\x0a\x14\x0a\x04tick\x12\x00\x1a\
    \x00\"\x00*\x002\x008\x00B\x00\x12\x8f\x01\x0a\x0b*/5 * * * *\x1a\x00*~\x0a\x14\x0a\x04tick\x12\
    \x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12f2d\x0a\x10\x0a\x00\x12\x00\x1a\x00\"\x00*\x002\x008\
    \x00B\x00\x12P\x12)\x0a\x04tick\x12\x07busybox\x1a\x04date*\x00B\x00j\x00r\x00\x80\x01\x00\x88\
    \x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x09OnFailure2\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\
    \x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x1a\x00\x1a\x00\"\x00";

#[test]
fn kubectl_create_bodies_decode_to_kubectl_json() {
    let cases = [
        (CONFIG_MAP, json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "lit"}, "data": {"k": "v"}})),
        (
            SECRET,
            json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "creds"},
                   "data": {"key.bin": "AAEC/w==", "user": "YWRtaW4="}}),
        ),
        (
            NAMESPACE,
            json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "team-a"}, "spec": {}, "status": {}}),
        ),
        (
            SERVICE_CLUSTER_IP,
            json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": "web", "labels": {"app": "web"}},
                   "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                                      {"name": "443-https", "protocol": "TCP", "port": 443, "targetPort": "https"}],
                            "selector": {"app": "web"}, "type": "ClusterIP"},
                   "status": {"loadBalancer": {}}}),
        ),
        (
            SERVICE_NODE_PORT,
            json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": "np", "labels": {"app": "np"}},
                   "spec": {"ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080,
                                       "nodePort": 30080}],
                            "selector": {"app": "np"}, "type": "NodePort"},
                   "status": {"loadBalancer": {}}}),
        ),
        (
            SERVICE_EXTERNAL_NAME,
            json!({"kind": "Service", "apiVersion": "v1", "metadata": {"name": "ext", "labels": {"app": "ext"}},
                   "spec": {"selector": {"app": "ext"}, "type": "ExternalName", "externalName": "example.com"},
                   "status": {"loadBalancer": {}}}),
        ),
        (
            SERVICE_HEADLESS,
            json!({"kind": "Service", "apiVersion": "v1",
                   "metadata": {"name": "headless", "labels": {"app": "headless"}},
                   "spec": {"selector": {"app": "headless"}, "clusterIP": "None", "type": "ClusterIP"},
                   "status": {"loadBalancer": {}}}),
        ),
    ];
    for (body, want) in cases {
        assert_eq!(decoded(body), want);
    }
}

#[test]
fn kubectl_create_workload_bodies_decode_to_kubectl_json() {
    // kubectl sends the empty `status` (and a `strategy` with an empty `type`) of a new
    // object, which Go prints as `{}` too; `replicas` is a pointer and always set.
    let cases = [
        (
            DEPLOYMENT,
            json!({"kind": "Deployment", "apiVersion": "apps/v1",
                   "metadata": {"name": "web", "labels": {"app": "web"}},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                                                  "command": ["nginx", "-g", "daemon off;"],
                                                                  "ports": [{"containerPort": 80}],
                                                                  "resources": {}}]}},
                            "strategy": {}},
                   "status": {}}),
        ),
        (
            DEPLOYMENT_BUSYBOX,
            json!({"kind": "Deployment", "apiVersion": "apps/v1",
                   "metadata": {"name": "web", "labels": {"app": "web"}},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "busybox", "image": "busybox",
                                                                  "resources": {}}]}},
                            "strategy": {}},
                   "status": {}}),
        ),
        (
            JOB,
            json!({"kind": "Job", "apiVersion": "batch/v1", "metadata": {"name": "pi"},
                   "spec": {"template": {"metadata": {},
                                         "spec": {"containers": [{"name": "pi", "image": "busybox",
                                                                  "command": ["sh", "-c", "echo hi"],
                                                                  "resources": {}}],
                                                  "restartPolicy": "Never"}}},
                   "status": {}}),
        ),
        (
            CRON_JOB,
            json!({"kind": "CronJob", "apiVersion": "batch/v1", "metadata": {"name": "tick"},
                   "spec": {"schedule": "*/5 * * * *",
                            "jobTemplate": {"metadata": {"name": "tick"},
                                            "spec": {"template": {"metadata": {},
                                                                  "spec": {"containers": [{"name": "tick",
                                                                                           "image": "busybox",
                                                                                           "command": ["date"],
                                                                                           "resources": {}}],
                                                                           "restartPolicy": "OnFailure"}}}}},
                   "status": {}}),
        ),
    ];
    for (body, want) in cases {
        assert_eq!(decoded(body), want);
    }
}

#[test]
fn kubectl_workload_captures_are_whole() {
    // The captures' lengths as saved by the listener, so a line continuation in a literal
    // cannot have swallowed a byte unnoticed.
    assert_eq!([DEPLOYMENT_BUSYBOX.len(), JOB.len(), CRON_JOB.len()], [209, 167, 202]);
}

/// The bytes of the first field `number` (length-delimited) in `message`.
fn field(message: &[u8], number: u32) -> &[u8] {
    let mut reader = Reader::new(message, 0);
    while !reader.at_end() {
        let (n, wire) = reader.tag().expect("valid tag");
        if n == number && wire == WireType::Len {
            return reader.bytes().expect("valid length");
        }
        reader.skip(wire).expect("valid field");
    }
    panic!("no field {number}");
}

#[test]
fn a_real_gogo_pod_template_decodes_as_a_pod() {
    // Deployment.spec (2) .template (3) is a PodTemplateSpec, whose metadata (1) and spec (2)
    // have the same numbers as Pod's: a real gogo encoding of a PodSpec and a Container with
    // every value field present.
    let unknown = DEPLOYMENT.get(4..).expect("magic");
    let template = field(field(field(unknown, 2), 2), 3);
    assert_eq!(
        decoded(&envelope("v1", "Pod", Enc::from_bytes(template))),
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                     "command": ["nginx", "-g", "daemon off;"],
                                     "ports": [{"containerPort": 80}], "resources": {}}]}
        })
    );
}

#[test]
fn every_truncation_of_kubectl_bodies_is_an_error_or_the_same_object() {
    let bodies = [
        CONFIG_MAP,
        SECRET,
        NAMESPACE,
        SERVICE_CLUSTER_IP,
        SERVICE_NODE_PORT,
        SERVICE_EXTERNAL_NAME,
        SERVICE_HEADLESS,
        DEPLOYMENT,
        DEPLOYMENT_BUSYBOX,
        JOB,
        CRON_JOB,
    ];
    for body in bodies {
        let full = decode(body).expect("decodes");
        for cut in 0..body.len() {
            if let Ok(partial) = decode(body.get(..cut).unwrap_or_default()) {
                // Only the trailing empty contentEncoding/contentType may be cut off.
                assert!(cut >= body.len() - 4, "cut at {cut} of {} decoded", body.len());
                assert_eq!(partial, full);
            }
        }
    }
}
