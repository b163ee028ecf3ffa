//! Message ids: random (version 4) UUIDs in their usual text form.
//!
//! KubeEdge uses google/uuid's `NewString()`. Ids only need to be unique, not
//! secret, so they come from a fast per-thread generator seeded at random
//! rather than from a system call per message.

use crate::text::Text;

/// A fresh UUIDv4 such as `6f1c2a8e-3b1d-4c5e-9a0b-1c2d3e4f5a6b`.
///
/// ```
/// let id = edgehive_model::new_msg_id();
/// assert_eq!(id.len(), 36);
/// assert_eq!(&id[14..15], "4");
/// ```
pub fn new_msg_id() -> Text {
    let mut b = fastrand::u128(..).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    Text::copy_from(format_uuid(&b).as_str())
}

struct UuidText([u8; 36]);

impl UuidText {
    fn as_str(&self) -> &str {
        // Only ASCII hex digits and dashes are written.
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

fn format_uuid(b: &[u8; 16]) -> UuidText {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'-'; 36];
    let mut o = 0;
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            o += 1;
        }
        out[o] = HEX[usize::from(byte >> 4)];
        out[o + 1] = HEX[usize::from(byte & 0x0f)];
        o += 2;
    }
    UuidText(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn format_matches_uuid_text_form() {
        let t = format_uuid(&[
            0x6f, 0x1c, 0x2a, 0x8e, 0x3b, 0x1d, 0x4c, 0x5e, 0x9a, 0x0b, 0x1c, 0x2d, 0x3e, 0x4f, 0x5a, 0x6b,
        ]);
        assert_eq!(t.as_str(), "6f1c2a8e-3b1d-4c5e-9a0b-1c2d3e4f5a6b");
    }

    #[test]
    fn ids_are_v4_and_unique() {
        let mut seen = HashSet::new();
        for _ in 0..100_000 {
            let id = new_msg_id();
            assert_eq!(&id[14..15], "4");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
            assert!(seen.insert(id));
        }
    }
}
