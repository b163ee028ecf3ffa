//! UUIDs as 128-bit numbers and their `8-4-4-4-12` text.

/// A UUID's 128 bits from its `8-4-4-4-12` hex form (either case).
pub fn uuid_bits(s: &str) -> Option<u128> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut v: u128 = 0;
    for (i, c) in b.iter().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            continue;
        }
        v = (v << 4) | u128::from((*c as char).to_digit(16)?);
    }
    Some(v)
}

/// A UUID in its lowercase `8-4-4-4-12` form.
pub fn format_uuid(v: u128) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        v >> 96,
        (v >> 80) & 0xffff,
        (v >> 64) & 0xffff,
        (v >> 48) & 0xffff,
        v & 0xffff_ffff_ffff
    )
}
