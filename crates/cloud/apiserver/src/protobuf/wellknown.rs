//! Decoders for the apimachinery types whose JSON is not an object: `Time`, `MicroTime`,
//! `IntOrString`, `Quantity`, `FieldsV1` and `RawExtension`.
//!
//! Each takes a reader over the type's own message and follows the Go type's `Unmarshal`
//! and `MarshalJSON`: an empty `Time` is the zero time (left out of JSON), a `Time` drops its
//! nanoseconds, a `MicroTime` keeps microseconds, an `IntOrString` becomes a number or a
//! string by its `type`, a `Quantity` is its string (`"0"` when absent), and `FieldsV1` and
//! `RawExtension` carry raw JSON that is embedded as is.

use serde_json::Value;

use super::ProtoError;
use super::time::{format_micro_time, format_time};
use super::wire::{Reader, WireType};

/// Go strings may hold any bytes; its JSON encoder replaces invalid UTF-8 with U+FFFD.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Reads the varint of a field inside a small well-known message.
fn small_varint(number: u32, wire: WireType, reader: &mut Reader<'_>) -> Result<u64, ProtoError> {
    if wire != WireType::Varint {
        return Err(ProtoError::BadWireType { field: number, wire: wire.number() });
    }
    reader.varint()
}

/// Reads the bytes of a field inside a small well-known message.
fn small_bytes<'a>(number: u32, wire: WireType, reader: &mut Reader<'a>) -> Result<&'a [u8], ProtoError> {
    if wire != WireType::Len {
        return Err(ProtoError::BadWireType { field: number, wire: wire.number() });
    }
    reader.bytes()
}

/// meta/v1 `Time`/`MicroTime`: `seconds` = 1 (int64), `nanos` = 2 (int32).
pub(crate) fn timestamp(mut reader: Reader<'_>, micro: bool) -> Result<Option<Value>, ProtoError> {
    // Go reads an empty message as the zero time, which its JSON leaves out (`null`).
    if reader.at_end() {
        return Ok(None);
    }
    let (mut seconds, mut nanos) = (0_i64, 0_i32);
    while !reader.at_end() {
        let (number, wire) = reader.tag()?;
        match number {
            1 => seconds = small_varint(number, wire, &mut reader)? as i64,
            2 => nanos = small_varint(number, wire, &mut reader)? as i64 as i32,
            _ => reader.skip(wire)?,
        }
    }
    let text = if micro { format_micro_time(seconds, nanos)? } else { format_time(seconds)? };
    Ok(Some(Value::String(text)))
}

/// intstr `IntOrString`: `type` = 1 (0 int, 1 string), `intVal` = 2, `strVal` = 3.
pub(crate) fn int_or_string(mut reader: Reader<'_>) -> Result<Value, ProtoError> {
    let (mut kind, mut int_val, mut str_val) = (0_i64, 0_i32, String::new());
    while !reader.at_end() {
        let (number, wire) = reader.tag()?;
        match number {
            1 => kind = small_varint(number, wire, &mut reader)? as i64,
            2 => int_val = small_varint(number, wire, &mut reader)? as i64 as i32,
            3 => str_val = text(small_bytes(number, wire, &mut reader)?),
            _ => reader.skip(wire)?,
        }
    }
    match kind {
        0 => Ok(Value::from(int_val)),
        1 => Ok(Value::String(str_val)),
        other => Err(ProtoError::Invalid(format!("IntOrString has type {other}"))),
    }
}

/// resource `Quantity`: `string` = 1, already in canonical form from the Go client.
pub(crate) fn quantity(mut reader: Reader<'_>) -> Result<Value, ProtoError> {
    // Go's zero Quantity (no string at all) renders as "0".
    let mut text_val = None;
    while !reader.at_end() {
        let (number, wire) = reader.tag()?;
        match number {
            1 => text_val = Some(text(small_bytes(number, wire, &mut reader)?)),
            _ => reader.skip(wire)?,
        }
    }
    match text_val {
        None => Ok(Value::String("0".to_owned())),
        Some(s) if s.is_empty() => Err(ProtoError::Invalid("empty quantity".to_owned())),
        Some(s) => Ok(Value::String(s)),
    }
}

/// The bytes of field 1 of a message holding only raw bytes (`FieldsV1`, `RawExtension`).
fn raw_bytes<'a>(mut reader: Reader<'a>) -> Result<&'a [u8], ProtoError> {
    let mut raw: &[u8] = &[];
    while !reader.at_end() {
        let (number, wire) = reader.tag()?;
        match number {
            1 => raw = small_bytes(number, wire, &mut reader)?,
            _ => reader.skip(wire)?,
        }
    }
    Ok(raw)
}

/// Parses raw bytes that must be JSON. serde_json has its own recursion limit, so hostile
/// nesting is an error too.
fn raw_json(raw: &[u8], what: &str) -> Result<Value, ProtoError> {
    serde_json::from_slice(raw).map_err(|e| ProtoError::Invalid(format!("{what} is not JSON: {e}")))
}

/// meta/v1 `FieldsV1`: `Raw` = 1 holds JSON, embedded as is.
pub(crate) fn fields_v1(reader: Reader<'_>) -> Result<Option<Value>, ProtoError> {
    let raw = raw_bytes(reader)?;
    if raw.is_empty() {
        return Ok(None);
    }
    raw_json(raw, "fieldsV1").map(Some)
}

/// runtime `RawExtension`: `raw` = 1 holds the embedded object, which Go's `MarshalJSON`
/// writes as is when it is JSON and as `null` when there is none. Raw bytes in another
/// encoding (CBOR, which Go would convert) are refused.
pub(crate) fn raw_extension(reader: Reader<'_>) -> Result<Value, ProtoError> {
    let raw = raw_bytes(reader)?;
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    raw_json(raw, "RawExtension")
}

#[cfg(test)]
mod tests {
    use super::super::testenc::{Enc, int_val, quantity as quantity_msg, str_val, time};
    use super::*;
    use serde_json::json;

    fn reader(bytes: &[u8]) -> Reader<'_> {
        Reader::new(bytes, 0)
    }

    #[test]
    fn times() {
        assert_eq!(timestamp(reader(&[]), false), Ok(None));
        let t = time(1_700_000_000, 999_999_999).finish();
        assert_eq!(timestamp(reader(&t), false), Ok(Some(json!("2023-11-14T22:13:20Z"))));
        assert_eq!(timestamp(reader(&t), true), Ok(Some(json!("2023-11-14T22:13:20.999999Z"))));
        // Seconds alone, as Go writes a whole-second time (nanos = 0 is still sent).
        let t = Enc::new().int(1, 0).finish();
        assert_eq!(timestamp(reader(&t), false), Ok(Some(json!("1970-01-01T00:00:00Z"))));
        let t = Enc::new().str(1, "x").finish();
        assert_eq!(timestamp(reader(&t), false), Err(ProtoError::BadWireType { field: 1, wire: 2 }));
    }

    #[test]
    fn int_or_strings() {
        let cases = [(int_val(8080), json!(8080)), (int_val(-1), json!(-1)), (str_val("http"), json!("http"))];
        for (enc, want) in cases {
            assert_eq!(int_or_string(reader(&enc.finish())), Ok(want));
        }
        // An empty message is Go's zero IntOrString: the number 0.
        assert_eq!(int_or_string(reader(&[])), Ok(json!(0)));
        let bad = Enc::new().int(1, 2).finish();
        assert!(matches!(int_or_string(reader(&bad)), Err(ProtoError::Invalid(_))));
    }

    #[test]
    fn quantities() {
        assert_eq!(quantity(reader(&quantity_msg("250m").finish())), Ok(json!("250m")));
        assert_eq!(quantity(reader(&[])), Ok(json!("0")));
        assert!(matches!(quantity(reader(&quantity_msg("").finish())), Err(ProtoError::Invalid(_))));
    }

    #[test]
    fn raw_extension_embeds_json() {
        let raw = Enc::new().bytes(1, br#"{"spec":{"template":{"$patch":"replace"}}}"#).finish();
        assert_eq!(raw_extension(reader(&raw)), Ok(json!({"spec": {"template": {"$patch": "replace"}}})));
        assert_eq!(raw_extension(reader(&Enc::new().bytes(1, b" [1, 2]").finish())), Ok(json!([1, 2])));
        // No object at all is Go's `null`.
        assert_eq!(raw_extension(reader(&[])), Ok(Value::Null));
        assert_eq!(raw_extension(reader(&Enc::new().bytes(1, b"").finish())), Ok(Value::Null));
        // CBOR (self-described tag first) and other non-JSON bytes are refused.
        let cbor = Enc::new().bytes(1, &[0xd9, 0xd9, 0xf7, 0xa0]).finish();
        assert!(matches!(raw_extension(reader(&cbor)), Err(ProtoError::Invalid(_))));
        let wrong = Enc::new().int(1, 3).finish();
        assert_eq!(raw_extension(reader(&wrong)), Err(ProtoError::BadWireType { field: 1, wire: 0 }));
    }

    #[test]
    fn fields_v1_embeds_json() {
        let raw = Enc::new().bytes(1, br#"{"f:metadata":{"f:labels":{".":{}}}}"#).finish();
        assert_eq!(fields_v1(reader(&raw)), Ok(Some(json!({"f:metadata": {"f:labels": {".": {}}}}))));
        assert_eq!(fields_v1(reader(&[])), Ok(None));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let raw = Enc::new().bytes(1, deep.as_bytes()).finish();
        assert!(matches!(fields_v1(reader(&raw)), Err(ProtoError::Invalid(_))));
    }
}
