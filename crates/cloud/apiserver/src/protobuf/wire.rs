//! A small protobuf wire-format reader: varints, tags, length-delimited slices, skipping.
//!
//! The reader never allocates and never indexes past its bounds: every length is checked
//! against the bytes that are left before anything is sliced, so a bogus length yields
//! [`ProtoError::Truncated`] rather than a panic or a huge allocation. Offsets in errors are
//! absolute positions in the body the first reader was made over, which keeps them useful
//! when the failure is deep inside a nested message.

use super::ProtoError;

/// The largest field number protobuf allows (2^29 - 1).
const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;

/// How a value is framed on the wire (the low three bits of a tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireType {
    /// 0: a base-128 varint (`int32`, `int64`, `bool`, enums).
    Varint,
    /// 1: eight little-endian bytes (`fixed64`, `double`).
    Fixed64,
    /// 2: a varint length, then that many bytes (strings, bytes, messages, packed scalars).
    Len,
    /// 5: four little-endian bytes (`fixed32`, `float`).
    Fixed32,
}

impl WireType {
    /// The wire type's number, for error reports.
    pub(crate) fn number(self) -> u8 {
        match self {
            Self::Varint => 0,
            Self::Fixed64 => 1,
            Self::Len => 2,
            Self::Fixed32 => 5,
        }
    }
}

/// A cursor over `data[pos..end]`, one message (or packed run) at a time.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `data[start..]` (empty when `start` is past the end).
    pub(crate) fn new(data: &'a [u8], start: usize) -> Self {
        let pos = start.min(data.len());
        Self { data, pos, end: data.len() }
    }

    /// Whether every byte of this reader's range has been consumed.
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    /// How many bytes are left in this reader's range.
    pub(crate) fn remaining(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }

    /// Reads one base-128 varint (at most ten bytes).
    pub(crate) fn varint(&mut self) -> Result<u64, ProtoError> {
        let start = self.pos;
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.data.get(self.pos).filter(|_| self.pos < self.end) else {
                return Err(ProtoError::Truncated { at: start });
            };
            self.pos += 1;
            // The tenth byte carries only the top bit; anything above it is dropped, as the
            // Go decoder does.
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtoError::Invalid(format!("varint at byte {start} is longer than ten bytes")))
    }

    /// Reads a field tag: the field number and its wire type.
    pub(crate) fn tag(&mut self) -> Result<(u32, WireType), ProtoError> {
        let at = self.pos;
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 || number > MAX_FIELD_NUMBER {
            return Err(ProtoError::Invalid(format!("field number {number} at byte {at}")));
        }
        // Checked just above: the number fits in 29 bits.
        let field = u32::try_from(number).unwrap_or(u32::MAX);
        let wire = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            5 => WireType::Fixed32,
            // 3 and 4 are the deprecated groups, which no Kubernetes message uses; 6 and 7
            // do not exist.
            other => {
                return Err(ProtoError::BadWireType { field, wire: other as u8 });
            }
        };
        Ok((field, wire))
    }

    /// Reads a length prefix and returns a reader over exactly that many following bytes,
    /// advancing past them.
    pub(crate) fn len_delimited(&mut self) -> Result<Reader<'a>, ProtoError> {
        let len = self.varint()?;
        let start = self.pos;
        let len = usize::try_from(len).map_err(|_| ProtoError::Truncated { at: start })?;
        if len > self.remaining() {
            return Err(ProtoError::Truncated { at: start });
        }
        self.pos = start + len;
        Ok(Reader { data: self.data, pos: start, end: start + len })
    }

    /// Reads a length-delimited value and returns its bytes.
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], ProtoError> {
        let sub = self.len_delimited()?;
        Ok(sub.rest())
    }

    /// The unread bytes of this reader's range.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.data.get(self.pos..self.end).unwrap_or_default()
    }

    /// Skips `n` bytes.
    fn advance(&mut self, n: usize) -> Result<(), ProtoError> {
        if n > self.remaining() {
            return Err(ProtoError::Truncated { at: self.pos });
        }
        self.pos += n;
        Ok(())
    }

    /// Skips the value of a field this reader's caller does not know.
    pub(crate) fn skip(&mut self, wire: WireType) -> Result<(), ProtoError> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::Fixed64 => self.advance(8),
            WireType::Len => self.len_delimited().map(drop),
            WireType::Fixed32 => self.advance(4),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode() {
        let cases: &[(&[u8], u64)] = &[
            (&[0], 0),
            (&[1], 1),
            (&[0x7f], 127),
            (&[0x80, 0x01], 128),
            (&[0xac, 0x02], 300),
            (&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], u64::MAX),
        ];
        for (bytes, want) in cases {
            let mut r = Reader::new(bytes, 0);
            assert_eq!(r.varint(), Ok(*want), "{bytes:?}");
            assert!(r.at_end());
        }
    }

    #[test]
    fn varint_errors() {
        let mut r = Reader::new(&[0x80, 0x80], 0);
        assert_eq!(r.varint(), Err(ProtoError::Truncated { at: 0 }));
        let mut r = Reader::new(&[0xff; 11], 0);
        assert!(matches!(r.varint(), Err(ProtoError::Invalid(_))));
    }

    #[test]
    fn tags_and_wire_types() {
        let mut r = Reader::new(&[0x0a, 0x10, 0x19, 0x25], 0);
        assert_eq!(r.tag(), Ok((1, WireType::Len)));
        assert_eq!(r.tag(), Ok((2, WireType::Varint)));
        assert_eq!(r.tag(), Ok((3, WireType::Fixed64)));
        assert_eq!(r.tag(), Ok((4, WireType::Fixed32)));
        assert_eq!(Reader::new(&[0x0b], 0).tag(), Err(ProtoError::BadWireType { field: 1, wire: 3 }));
        assert_eq!(Reader::new(&[0x0f], 0).tag(), Err(ProtoError::BadWireType { field: 1, wire: 7 }));
        assert!(matches!(Reader::new(&[0x02], 0).tag(), Err(ProtoError::Invalid(_))));
    }

    #[test]
    fn lengths_are_checked_before_slicing() {
        // Claims 5 bytes, has 2: offset of the payload is reported.
        let mut r = Reader::new(&[9, 9, 0x05, 1, 2], 2);
        assert_eq!(r.len_delimited().map(|s| s.rest().len()), Err(ProtoError::Truncated { at: 3 }));
        // A length near u64::MAX must not allocate or overflow.
        let mut huge = vec![0xff; 9];
        huge.push(0x01);
        assert!(matches!(Reader::new(&huge, 0).bytes(), Err(ProtoError::Truncated { .. })));
    }

    #[test]
    fn sub_readers_keep_absolute_offsets_and_bounds() {
        let data = [0x03, 0x80, 0x80, 0x01, 0x07];
        let mut outer = Reader::new(&data, 0);
        let mut inner = outer.len_delimited().expect("length fits");
        assert_eq!(inner.pos, 1);
        // The varint inside is cut by the sub-reader's end, not by the outer data.
        let mut cut = inner.clone();
        cut.end = 3;
        assert_eq!(cut.varint(), Err(ProtoError::Truncated { at: 1 }));
        assert_eq!(inner.varint(), Ok(1 << 14));
        assert!(inner.at_end());
        assert_eq!(outer.varint(), Ok(7));
    }

    #[test]
    fn skipping_each_wire_type() {
        let data = [0x96, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0x02, 0xaa, 0xbb, 1, 2, 3, 4];
        let mut r = Reader::new(&data, 0);
        assert_eq!(r.skip(WireType::Varint), Ok(()));
        assert_eq!(r.skip(WireType::Fixed64), Ok(()));
        assert_eq!(r.skip(WireType::Len), Ok(()));
        assert_eq!(r.skip(WireType::Fixed32), Ok(()));
        assert!(r.at_end());
        assert_eq!(r.skip(WireType::Fixed32), Err(ProtoError::Truncated { at: data.len() }));
    }
}
