//! A tiny protobuf encoder for tests: builds the bytes a Go client would send.
//!
//! Field order and presence are up to the caller, so tests can reproduce what gogo-protobuf
//! writes (every non-pointer scalar, even when zero) or any odd but legal encoding.

/// A message under construction.
#[derive(Debug, Default, Clone)]
pub(crate) struct Enc(Vec<u8>);

impl Enc {
    /// An empty message.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn raw_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.raw_varint((u64::from(field) << 3) | u64::from(wire));
    }

    /// A message whose bytes were encoded elsewhere.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }

    /// A varint field (`int32`, `int64`, enums); negative values take ten bytes, as in Go.
    pub(crate) fn int(mut self, field: u32, value: i64) -> Self {
        self.key(field, 0);
        self.raw_varint(value as u64);
        self
    }

    /// A `bool` field.
    pub(crate) fn bool(self, field: u32, value: bool) -> Self {
        self.int(field, i64::from(value))
    }

    /// A length-delimited field holding `value`.
    pub(crate) fn bytes(mut self, field: u32, value: &[u8]) -> Self {
        self.key(field, 2);
        self.raw_varint(value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }

    /// A `string` field.
    pub(crate) fn str(self, field: u32, value: &str) -> Self {
        self.bytes(field, value.as_bytes())
    }

    /// A nested message field.
    pub(crate) fn msg(self, field: u32, inner: Enc) -> Self {
        self.bytes(field, &inner.0)
    }

    /// A packed repeated varint field.
    pub(crate) fn packed(self, field: u32, values: &[i64]) -> Self {
        let mut run = Enc::new();
        for v in values {
            run.raw_varint(*v as u64);
        }
        self.bytes(field, &run.0)
    }

    /// A `map<string, string>` entry.
    pub(crate) fn entry(self, field: u32, key: &str, value: &str) -> Self {
        self.msg(field, Enc::new().str(1, key).str(2, value))
    }

    /// A `map<string, bytes>` entry.
    pub(crate) fn bytes_entry(self, field: u32, key: &str, value: &[u8]) -> Self {
        self.msg(field, Enc::new().str(1, key).bytes(2, value))
    }

    /// A `map<string, Quantity>` entry.
    pub(crate) fn quantity_entry(self, field: u32, key: &str, value: &str) -> Self {
        self.msg(field, Enc::new().str(1, key).msg(2, quantity(value)))
    }

    /// A `fixed64` field (for skipping tests).
    pub(crate) fn fixed64(mut self, field: u32, value: u64) -> Self {
        self.key(field, 1);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// A `fixed32` field (for skipping tests).
    pub(crate) fn fixed32(mut self, field: u32, value: u32) -> Self {
        self.key(field, 5);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// The encoded bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// A meta/v1 `Time`/`MicroTime` message.
pub(crate) fn time(seconds: i64, nanos: i64) -> Enc {
    Enc::new().int(1, seconds).int(2, nanos)
}

/// An `IntOrString` holding a number, as Go writes it (all three fields).
pub(crate) fn int_val(value: i64) -> Enc {
    Enc::new().int(1, 0).int(2, value).str(3, "")
}

/// An `IntOrString` holding a string.
pub(crate) fn str_val(value: &str) -> Enc {
    Enc::new().int(1, 1).int(2, 0).str(3, value)
}

/// A `Quantity`.
pub(crate) fn quantity(value: &str) -> Enc {
    Enc::new().str(1, value)
}

/// The `ObjectMeta` gogo-protobuf writes for a new object: every value field, zero or not.
pub(crate) fn new_object_meta(name: &str, namespace: &str) -> Enc {
    Enc::new().str(1, name).str(2, "").str(3, namespace).str(4, "").str(5, "").str(6, "").int(7, 0).msg(8, Enc::new())
}

/// The full body: magic, then a `runtime.Unknown` with the type and the object's bytes.
pub(crate) fn envelope(api_version: &str, kind: &str, object: Enc) -> Vec<u8> {
    let unknown = Enc::new().msg(1, Enc::new().str(1, api_version).str(2, kind)).msg(2, object).str(3, "").str(4, "");
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.finish());
    body
}
