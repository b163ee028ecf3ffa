//! Any bytes given to the Kubernetes protobuf decoder (the API server's
//! `application/vnd.kubernetes.protobuf` bodies): an error or an object, never a panic,
//! and memory in proportion to the input (libFuzzer's `-rss_limit_mb` and
//! `-malloc_limit_mb` catch a blow-up).
#![no_main]

use edgehive_apiserver::decode_protobuf_for_fuzzing;
use libfuzzer_sys::fuzz_target;

/// The types the decoder knows, and one it does not.
const KINDS: [(&str, &str); 12] = [
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Namespace"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("v1", "Endpoints"),
    ("v1", "Event"),
    ("v1", "Node"),
    ("v1", "Pod"),
    ("coordination.k8s.io/v1", "Lease"),
    ("v1", "DeleteOptions"),
    ("apps/v1", "Deployment"),
];

fuzz_target!(|data: &[u8]| {
    // The bytes as a client could send them.
    decode_protobuf_for_fuzzing(data);
    // The rest wrapped in a well-formed envelope for a type the first byte picks, so that
    // most runs get past the envelope and into the object decoders.
    if let Some((first, object)) = data.split_first() {
        let (api_version, kind) = KINDS[usize::from(*first) % KINDS.len()];
        decode_protobuf_for_fuzzing(&envelope(api_version, kind, object));
    }
});

/// `k8s\0` and a `runtime.Unknown`: `typeMeta` = 1 (`apiVersion` = 1, `kind` = 2),
/// `raw` = 2.
fn envelope(api_version: &str, kind: &str, object: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    len_field(&mut type_meta, 1, api_version.as_bytes());
    len_field(&mut type_meta, 2, kind.as_bytes());
    let mut body = b"k8s\0".to_vec();
    len_field(&mut body, 1, &type_meta);
    len_field(&mut body, 2, object);
    body
}

/// A length-delimited field (wire type 2).
fn len_field(out: &mut Vec<u8>, number: u64, value: &[u8]) {
    varint(out, number << 3 | 2);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
