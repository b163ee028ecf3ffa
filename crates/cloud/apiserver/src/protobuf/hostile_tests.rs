//! The stable-Rust stand-in for the `protobuf_decode` fuzz target (`fuzz/`): thousands of
//! seeded, deterministic inputs made by mutating real bodies (kubectl's captures and the
//! hand-built Pod and workloads) and by putting each body's object under every type. Decoding must
//! return, never panic, and what it returns must stay in proportion to the body: the
//! module promises that hostile input cannot make it allocate without bound.

use serde_json::Value;

use super::testenc::{Enc, envelope};
use super::tests::KINDS;
use super::wire::{Reader, WireType};
use super::{MAGIC, ProtoError, decode};
use super::{kubectl_tests, tests, workload_tests};

/// JSON values a decoded object may hold per body byte, beyond [`VALUES_ALLOWANCE`]. A
/// field takes at least two bytes (tag and value) and yields one value, a map entry one
/// or two; zero-value fills add at most one per four bytes (`decode.rs`).
const VALUES_PER_BYTE: usize = 2;

/// JSON values any body may decode to: the fill allowance of `decode.rs` and the object
/// around them.
const VALUES_ALLOWANCE: usize = 1024 + 16;

/// Bytes of JSON text per body byte, beyond [`TEXT_ALLOWANCE`]: a two-byte field can name
/// a long field and render as a timestamp or a ten-digit number.
const TEXT_PER_BYTE: usize = 64;

/// Bytes of JSON text any body may decode to (the fills' field names and zero values).
const TEXT_ALLOWANCE: usize = 64 * 1024;

/// The real bodies the mutations start from.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = [
        kubectl_tests::CONFIG_MAP,
        kubectl_tests::SECRET,
        kubectl_tests::NAMESPACE,
        kubectl_tests::SERVICE_CLUSTER_IP,
        kubectl_tests::SERVICE_NODE_PORT,
        kubectl_tests::SERVICE_EXTERNAL_NAME,
        kubectl_tests::SERVICE_HEADLESS,
        kubectl_tests::DEPLOYMENT,
        kubectl_tests::DEPLOYMENT_BUSYBOX,
        kubectl_tests::JOB,
        kubectl_tests::CRON_JOB,
    ]
    .map(<[u8]>::to_vec)
    .into();
    seeds.push(tests::config_map_body());
    seeds.push(tests::pod_body());
    seeds.extend(workload_tests::bodies());
    seeds
}

/// The object inside a body (field 2 of the envelope), or nothing.
fn object_of(body: &[u8]) -> Option<&[u8]> {
    let mut reader = Reader::new(body, MAGIC.len());
    while !reader.at_end() {
        let (number, wire) = reader.tag().ok()?;
        if number == 2 && wire == WireType::Len {
            return reader.bytes().ok();
        }
        reader.skip(wire).ok()?;
    }
    None
}

/// Changes `body` in one to eight places: bytes overwritten, bits flipped, bytes inserted
/// or removed, varints lengthened, a chunk copied elsewhere, the end cut off.
fn mutate(rng: &mut fastrand::Rng, body: &mut Vec<u8>) {
    // Mostly one or two changes, so that many bodies still decode and the decoding goes
    // deep; sometimes many.
    let changes = if rng.u8(0..4) == 0 { rng.usize(3..=8) } else { rng.usize(1..=2) };
    for _ in 0..changes {
        let at = rng.usize(0..=body.len());
        match rng.u8(0..7) {
            0 => {
                if let Some(b) = body.get_mut(at) {
                    *b = rng.u8(..);
                }
            }
            1 => {
                if let Some(b) = body.get_mut(at) {
                    *b ^= 1 << rng.u8(0..8);
                }
            }
            2 => body.insert(at, rng.u8(..)),
            3 if at < body.len() => {
                body.remove(at);
            }
            4 => {
                if let Some(b) = body.get_mut(at) {
                    *b |= 0x80;
                }
            }
            5 => {
                let from = rng.usize(0..=body.len());
                let len = rng.usize(0..=32.min(body.len() - from));
                let chunk = body.get(from..from + len).unwrap_or_default().to_vec();
                body.splice(at..at, chunk);
            }
            _ => body.truncate(at),
        }
    }
}

/// How many JSON values `value` holds, itself included.
fn count_values(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_values).sum(),
        Value::Object(map) => map.values().map(count_values).sum(),
        _ => 0,
    }
}

/// Decodes `body`: whatever the result, it must come back without a panic, and an object
/// must be no bigger than the body allows.
fn check(body: &[u8]) -> Result<(), ProtoError> {
    let (_, _, object) = decode(body)?;
    let values = count_values(&object);
    assert!(values <= VALUES_PER_BYTE * body.len() + VALUES_ALLOWANCE, "{values} values from {} bytes", body.len());
    let text = object.to_string().len();
    assert!(text <= TEXT_PER_BYTE * body.len() + TEXT_ALLOWANCE, "{text} bytes of JSON from {} bytes", body.len());
    Ok(())
}

#[test]
fn mutated_real_bodies_never_panic() {
    let mut rng = fastrand::Rng::with_seed(0x5eed_0001);
    let seeds = seeds();
    let mut decoded_ok = 0;
    for round in 0..6000 {
        let mut body = seeds[round % seeds.len()].clone();
        mutate(&mut rng, &mut body);
        decoded_ok += usize::from(check(&body).is_ok());
    }
    // Most mutations break the body; enough must survive to reach deep into the objects.
    assert!(decoded_ok > 200, "only {decoded_ok} mutated bodies decoded");
}

#[test]
fn every_object_under_every_type_never_panics() {
    let mut rng = fastrand::Rng::with_seed(0x5eed_0002);
    let objects: Vec<Vec<u8>> = seeds().iter().filter_map(|body| object_of(body)).map(<[u8]>::to_vec).collect();
    assert_eq!(objects.len(), seeds().len(), "every seed has an object");
    for object in &objects {
        for (api_version, kind) in KINDS {
            // As it is, then mutated a few times.
            let _ = check(&envelope(api_version, kind, Enc::from_bytes(object)));
            for _ in 0..20 {
                let mut mutated = object.clone();
                mutate(&mut rng, &mut mutated);
                let _ = check(&envelope(api_version, kind, Enc::from_bytes(&mutated)));
            }
        }
    }
}

#[test]
fn random_bytes_under_every_type_never_panic() {
    let mut rng = fastrand::Rng::with_seed(0x5eed_0003);
    for round in 0..4000 {
        let (api_version, kind) = KINDS[round % KINDS.len()];
        let len = rng.usize(0..=300);
        let object: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(len).collect();
        let _ = check(&envelope(api_version, kind, Enc::from_bytes(&object)));
    }
}
