//! Turns the wire bytes of one message into JSON, driven by a [`Message`] descriptor.
//!
//! The output follows Go's `encoding/json` rendering of the same Kubernetes struct:
//!
//! * unknown field numbers are skipped (newer clients may send fields we do not know), but a
//!   known field with the wrong wire type is an error;
//! * a scalar sent twice keeps the last value; a message sent twice is merged;
//! * scalar fields marked [`Presence::OmitEmpty`] disappear when zero, [`Presence::Pointer`]
//!   fields stay whenever they were sent, [`Presence::Always`] fields are filled with the zero
//!   value when not sent (gogo-protobuf writes every non-pointer scalar, so they are sent);
//! * messages appear whenever they were sent, even empty (`"resources": {}`), as Go never
//!   drops a struct for `omitempty`; empty lists and maps are left out;
//! * repeated scalars are accepted packed and unpacked.
//!
//! Filling in [`Presence::Always`] fields is the one way a few bytes can create many JSON
//! values (an empty two-byte message can stand for an object with ten fields), so the fills
//! one body may cause are limited in proportion to its size; real clients send those fields
//! themselves and never come near the limit.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::ProtoError;
use super::schema::{Field, Kind, Message, Presence, Shape};
use super::wellknown::{fields_v1, int_or_string, quantity, raw_extension, text, timestamp};
use super::wire::{Reader, WireType};

/// How deeply messages may nest before decoding stops with [`ProtoError::TooDeep`].
pub(crate) const MAX_DEPTH: usize = 64;

/// Zero-value fills allowed whatever the body's size.
const FILL_ALLOWANCE: usize = 1024;

/// Decodes the object in `reader` (part of a body of `body_len` bytes) as `desc`.
pub(crate) fn decode_object(
    desc: &'static Message,
    reader: Reader<'_>,
    body_len: usize,
) -> Result<Map<String, Value>, ProtoError> {
    let mut decoder = Decoder { fills_left: FILL_ALLOWANCE + body_len / 4 };
    decoder.message(desc, reader, 1)
}

/// The state of one body's decoding.
#[derive(Debug)]
struct Decoder {
    /// How many more [`Presence::Always`] fields may still be filled with zero values.
    fills_left: usize,
}

impl Decoder {
    /// Decodes the message in `reader` as `desc` at nesting level `depth` (the top object is 1).
    fn message(
        &mut self,
        desc: &'static Message,
        reader: Reader<'_>,
        depth: usize,
    ) -> Result<Map<String, Value>, ProtoError> {
        let mut out = Map::new();
        self.merge(desc, reader, &mut out, depth)?;
        Ok(out)
    }

    /// Decodes `reader` as `desc`, merging its fields into `out`.
    fn merge(
        &mut self,
        desc: &'static Message,
        mut reader: Reader<'_>,
        out: &mut Map<String, Value>,
        depth: usize,
    ) -> Result<(), ProtoError> {
        if depth > MAX_DEPTH {
            return Err(ProtoError::TooDeep);
        }
        while !reader.at_end() {
            let (number, wire) = reader.tag()?;
            let Some(field) = desc.field(number) else {
                reader.skip(wire)?;
                continue;
            };
            match field.shape {
                Shape::Inline(inner) => {
                    let sub = expect_len(field.number, wire, &mut reader)?;
                    self.merge(inner, sub, out, depth + 1)?;
                }
                Shape::Single(_) => self.single(field, wire, &mut reader, out, depth)?,
                Shape::Repeated => {
                    let slot = out.entry(field.json).or_insert(Value::Null);
                    let mut items = match slot.take() {
                        Value::Array(items) => items,
                        _ => Vec::new(),
                    };
                    let result = self.repeated(field, wire, &mut reader, &mut items, depth);
                    *slot = Value::Array(items);
                    result?;
                }
                Shape::Map => {
                    let (key, value) = self.map_entry(field, wire, &mut reader, depth)?;
                    let slot = out.entry(field.json).or_insert(Value::Null);
                    if !slot.is_object() {
                        *slot = Value::Object(Map::new());
                    }
                    if let Value::Object(entries) = slot {
                        entries.insert(key, value);
                    }
                }
            }
        }
        self.finish(desc, out)
    }

    /// Applies the presence rules once all of a message's bytes have been read.
    fn finish(&mut self, desc: &'static Message, out: &mut Map<String, Value>) -> Result<(), ProtoError> {
        for field in desc.fields {
            match field.shape {
                Shape::Single(Presence::OmitEmpty) if is_scalar(field.kind) => {
                    if out.get(field.json).is_some_and(is_zero) {
                        out.remove(field.json);
                    }
                }
                Shape::Single(Presence::Always) if !out.contains_key(field.json) => {
                    if let Some(zero) = zero_scalar(field.kind) {
                        self.fills_left = self.fills_left.checked_sub(1).ok_or_else(|| {
                            ProtoError::Invalid("too many required fields left out for the body's size".to_owned())
                        })?;
                        out.insert(field.json.to_owned(), zero);
                    }
                }
                Shape::Repeated | Shape::Map => {
                    let empty = match out.get(field.json) {
                        Some(Value::Array(items)) => items.is_empty(),
                        Some(Value::Object(entries)) => entries.is_empty(),
                        _ => false,
                    };
                    if empty {
                        out.remove(field.json);
                    }
                }
                // Inlined structs always exist in Go, so their own rules apply here too.
                Shape::Inline(inner) => self.finish(inner, out)?,
                Shape::Single(_) => {}
            }
        }
        Ok(())
    }

    /// One occurrence of a single field.
    fn single(
        &mut self,
        field: &Field,
        wire: WireType,
        reader: &mut Reader<'_>,
        out: &mut Map<String, Value>,
        depth: usize,
    ) -> Result<(), ProtoError> {
        if let (Kind::Message(inner), Some(Value::Object(existing))) = (field.kind, out.get_mut(field.json)) {
            // A message sent twice is merged into the first, as protobuf specifies.
            let sub = expect_len(field.number, wire, reader)?;
            return self.merge(inner, sub, existing, depth + 1);
        }
        match self.value(field, wire, reader, depth)? {
            Some(v) => out.insert(field.json.to_owned(), v),
            // A zero Time sent after a real one resets it, as the last value wins.
            None => out.remove(field.json),
        };
        Ok(())
    }

    /// One occurrence of a repeated field: one value, or a packed run of varints.
    fn repeated(
        &mut self,
        field: &Field,
        wire: WireType,
        reader: &mut Reader<'_>,
        items: &mut Vec<Value>,
        depth: usize,
    ) -> Result<(), ProtoError> {
        if is_varint(field.kind) && wire == WireType::Len {
            let mut run = reader.len_delimited()?;
            while !run.at_end() {
                items.push(varint_value(field.kind, run.varint()?));
            }
            return Ok(());
        }
        items.push(self.value(field, wire, reader, depth)?.unwrap_or(Value::Null));
        Ok(())
    }

    /// One `map<string, V>` entry (key = 1, value = 2); a missing part is its zero value.
    fn map_entry(
        &mut self,
        field: &Field,
        wire: WireType,
        reader: &mut Reader<'_>,
        depth: usize,
    ) -> Result<(String, Value), ProtoError> {
        let mut entry = expect_len(field.number, wire, reader)?;
        let (mut key, mut value) = (String::new(), None);
        while !entry.at_end() {
            let (number, entry_wire) = entry.tag()?;
            match number {
                1 => key = text(expect_len(number, entry_wire, &mut entry)?.rest()),
                2 => value = self.value(field, entry_wire, &mut entry, depth)?,
                _ => entry.skip(entry_wire)?,
            }
        }
        Ok((key, value.unwrap_or_else(|| zero_map_value(field.kind))))
    }

    /// Decodes one value of `field.kind`. `None` means the zero value Go writes as nothing
    /// (a zero `Time`, an empty `FieldsV1`).
    fn value(
        &mut self,
        field: &Field,
        wire: WireType,
        reader: &mut Reader<'_>,
        depth: usize,
    ) -> Result<Option<Value>, ProtoError> {
        let kind = field.kind;
        if is_varint(kind) {
            if wire != WireType::Varint {
                return Err(bad_wire(field.number, wire));
            }
            return Ok(Some(varint_value(kind, reader.varint()?)));
        }
        let sub = expect_len(field.number, wire, reader)?;
        Ok(match kind {
            Kind::String => Some(Value::String(text(sub.rest()))),
            Kind::Bytes => Some(Value::String(STANDARD.encode(sub.rest()))),
            Kind::Message(inner) => Some(Value::Object(self.message(inner, sub, depth + 1)?)),
            Kind::Time => timestamp(sub, false)?,
            Kind::MicroTime => timestamp(sub, true)?,
            Kind::IntOrString => Some(int_or_string(sub)?),
            Kind::Quantity => Some(quantity(sub)?),
            Kind::FieldsV1 => fields_v1(sub)?,
            Kind::RawExtension => Some(raw_extension(sub)?),
            // Varint kinds returned above.
            Kind::Bool | Kind::Int32 | Kind::Int64 => None,
        })
    }
}

fn expect_len<'a>(number: u32, wire: WireType, reader: &mut Reader<'a>) -> Result<Reader<'a>, ProtoError> {
    if wire != WireType::Len {
        return Err(bad_wire(number, wire));
    }
    reader.len_delimited()
}

fn bad_wire(field: u32, wire: WireType) -> ProtoError {
    ProtoError::BadWireType { field, wire: wire.number() }
}

fn is_scalar(kind: Kind) -> bool {
    matches!(kind, Kind::String | Kind::Bytes | Kind::Bool | Kind::Int32 | Kind::Int64)
}

fn is_varint(kind: Kind) -> bool {
    matches!(kind, Kind::Bool | Kind::Int32 | Kind::Int64)
}

fn varint_value(kind: Kind, raw: u64) -> Value {
    match kind {
        Kind::Bool => Value::Bool(raw != 0),
        // Two's complement reinterpretation, then (for int32) the low 32 bits, as Go does.
        Kind::Int32 => Value::from(i64::from(raw as i64 as i32)),
        _ => Value::from(raw as i64),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    }
}

/// The JSON of a scalar kind's zero value (`None` for message-like kinds).
fn zero_scalar(kind: Kind) -> Option<Value> {
    match kind {
        Kind::String | Kind::Bytes => Some(Value::String(String::new())),
        Kind::Bool => Some(Value::Bool(false)),
        Kind::Int32 | Kind::Int64 => Some(Value::from(0)),
        _ => None,
    }
}

/// The JSON a map value takes when an entry carries no value at all.
fn zero_map_value(kind: Kind) -> Value {
    match kind {
        Kind::Message(_) => Value::Object(Map::new()),
        Kind::Quantity => Value::String("0".to_owned()),
        Kind::IntOrString => Value::from(0),
        other => zero_scalar(other).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testenc::Enc;
    use super::*;
    use crate::protobuf::schema::{I32, I64, QUANTITY, STR, TIME, inline, map, msg, opt, ptr, rep, req};
    use serde_json::json;

    static INNER: Message = Message::new("Inner", &[opt(1, "a", STR), rep(2, "n", I64)]);
    static OUTER: Message = Message::new(
        "Outer",
        &[
            opt(1, "s", STR),
            ptr(2, "p", I32),
            req(3, "r", I32),
            opt(4, "m", msg(&INNER)),
            rep(5, "ms", msg(&INNER)),
            opt(6, "t", TIME),
            opt(7, "i", I32),
        ],
    );
    static WITH_INLINE: Message = Message::new(
        "WithInline",
        &[req(1, "name", STR), inline(2, "inner", &INNER), map(3, "q", QUANTITY), map(4, "m", msg(&INNER))],
    );
    static SELF_NESTED: Message = Message::new("SelfNested", &[opt(1, "next", msg(&SELF_NESTED))]);

    fn run(desc: &'static Message, bytes: &[u8]) -> Result<Value, ProtoError> {
        decode_object(desc, Reader::new(bytes, 0), bytes.len()).map(Value::Object)
    }

    #[test]
    fn presence_rules() {
        let bytes = Enc::new().str(1, "").int(2, 0).int(7, 0).msg(6, Enc::new()).finish();
        assert_eq!(run(&OUTER, &bytes), Ok(json!({"p": 0, "r": 0})));
    }

    #[test]
    fn last_scalar_wins_and_messages_merge() {
        let bytes = Enc::new()
            .str(1, "first")
            .str(1, "second")
            .msg(4, Enc::new().str(1, "x"))
            .msg(4, Enc::new().packed(2, &[1, 2]))
            .finish();
        assert_eq!(run(&OUTER, &bytes), Ok(json!({"s": "second", "r": 0, "m": {"a": "x", "n": [1, 2]}})));
    }

    #[test]
    fn repeated_packed_and_unpacked_mix() {
        let inner = Enc::new().int(2, 5).packed(2, &[-1, 7]).int(2, 9);
        let bytes = Enc::new().msg(5, inner).msg(5, Enc::new()).finish();
        assert_eq!(run(&OUTER, &bytes), Ok(json!({"r": 0, "ms": [{"n": [5, -1, 7, 9]}, {}]})));
    }

    #[test]
    fn int32_is_truncated_like_go() {
        // -1 as a ten-byte varint, and a value over 32 bits.
        let bytes = Enc::new().int(2, -1).int(7, (1 << 32) + 3).finish();
        assert_eq!(run(&OUTER, &bytes), Ok(json!({"p": -1, "r": 0, "i": 3})));
    }

    #[test]
    fn unknown_fields_are_skipped_but_wrong_wire_types_fail() {
        let bytes = Enc::new().int(99, 1).str(98, "x").fixed64(97, 1).fixed32(96, 2).str(1, "ok").finish();
        assert_eq!(run(&OUTER, &bytes), Ok(json!({"s": "ok", "r": 0})));
        let bytes = Enc::new().int(1, 5).finish();
        assert_eq!(run(&OUTER, &bytes), Err(ProtoError::BadWireType { field: 1, wire: 0 }));
        let bytes = Enc::new().str(2, "x").finish();
        assert_eq!(run(&OUTER, &bytes), Err(ProtoError::BadWireType { field: 2, wire: 2 }));
    }

    #[test]
    fn invalid_utf8_is_replaced_like_go_json() {
        let bytes = Enc::new().bytes(1, b"a\xffb").finish();
        assert_eq!(run(&OUTER, &bytes), Ok(json!({"s": "a\u{fffd}b", "r": 0})));
    }

    #[test]
    fn nesting_is_limited() {
        let mut enc = Enc::new();
        for _ in 0..MAX_DEPTH + 5 {
            enc = Enc::new().msg(1, enc);
        }
        assert_eq!(run(&SELF_NESTED, &enc.finish()), Err(ProtoError::TooDeep));
        let mut enc = Enc::new();
        for _ in 0..MAX_DEPTH - 1 {
            enc = Enc::new().msg(1, enc);
        }
        assert!(run(&SELF_NESTED, &enc.finish()).is_ok());
    }

    #[test]
    fn inline_fields_merge_into_the_parent() {
        let bytes =
            Enc::new().msg(2, Enc::new().str(1, "a").int(2, 1)).str(1, "n").msg(2, Enc::new().int(2, 2)).finish();
        assert_eq!(run(&WITH_INLINE, &bytes), Ok(json!({"name": "n", "a": "a", "n": [1, 2]})));
        let bytes = Enc::new().int(2, 1).finish();
        assert_eq!(run(&WITH_INLINE, &bytes), Err(ProtoError::BadWireType { field: 2, wire: 0 }));
    }

    #[test]
    fn map_entries_with_missing_parts_take_zero_values() {
        let bytes = Enc::new()
            .msg(3, Enc::new().str(1, "cpu"))
            .msg(3, Enc::new().msg(2, Enc::new().str(1, "1Gi")))
            .msg(3, Enc::new().str(1, "cpu").msg(2, Enc::new().str(1, "2")).int(9, 1))
            .msg(4, Enc::new().str(1, "k"))
            .finish();
        assert_eq!(run(&WITH_INLINE, &bytes), Ok(json!({"name": "", "q": {"cpu": "2", "": "1Gi"}, "m": {"k": {}}})));
        let bytes = Enc::new().msg(3, Enc::new().int(1, 5)).finish();
        assert_eq!(run(&WITH_INLINE, &bytes), Err(ProtoError::BadWireType { field: 1, wire: 0 }));
    }

    #[test]
    fn fills_are_limited_by_body_size() {
        // Each empty two-byte item stands for an object with a filled-in "name": fine up to
        // the allowance plus a quarter of the body's size, refused beyond.
        static FILLS: Message = Message::new("Fills", &[rep(1, "items", msg(&WITH_INLINE))]);
        let mut enc = Enc::new();
        for _ in 0..FILL_ALLOWANCE {
            enc = enc.msg(1, Enc::new());
        }
        assert!(run(&FILLS, &enc.clone().finish()).is_ok());
        for _ in 0..2 * FILL_ALLOWANCE {
            enc = enc.msg(1, Enc::new());
        }
        assert!(matches!(run(&FILLS, &enc.finish()), Err(ProtoError::Invalid(_))));
    }
}
