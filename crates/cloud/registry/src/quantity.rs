//! Resource quantities (`100m`, `1Gi`, `1e3`) as Kubernetes' `resource.Quantity` parses them, held
//! exactly enough to compare: what defaults (QoS class) and validation (requests within limits) share.

/// The regular expression Kubernetes quotes when a quantity does not parse.
pub const QUANTITY_FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A parsed `resource.Quantity`, held exactly enough for comparisons: billionths, rounded up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    /// The value times 10^9, rounded away from zero; saturates far beyond any real resource amount.
    pub nanos: i128,
}

impl Quantity {
    /// True when the value is above zero.
    pub fn is_positive(self) -> bool {
        self.nanos > 0
    }
}

/// Parses a quantity the way `resource.ParseQuantity` accepts it: sign, decimal number, then one suffix
/// (n u m "" k M G T P E, Ki..Ei, or a decimal exponent such as e3). Errors carry Kubernetes' message.
pub fn parse_quantity(s: &str) -> Result<Quantity, &'static str> {
    let s = s.trim();
    let b = s.as_bytes();
    let mut i = 0;
    let negative = match b.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let num_start = i;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    let number = s.get(num_start..i).unwrap_or("");
    let suffix = s.get(i..).unwrap_or("");
    if number.is_empty() || number.bytes().filter(|&c| c == b'.').count() > 1 || number == "." {
        return Err(QUANTITY_FORMAT_ERROR);
    }
    // The suffix must match [eEinumkKMGTP]*[-+]?[0-9]* before its meaning is looked at.
    let sb = suffix.as_bytes();
    let mut j = 0;
    while j < sb.len() && b"eEinumkKMGTP".contains(&sb[j]) {
        j += 1;
    }
    if j < sb.len() && (sb[j] == b'-' || sb[j] == b'+') {
        j += 1;
    }
    while j < sb.len() && sb[j].is_ascii_digit() {
        j += 1;
    }
    if j != sb.len() {
        return Err(QUANTITY_FORMAT_ERROR);
    }
    // (base, exponent) of the multiplier: 10^exp or 2^exp.
    let (base, exp): (i128, i32) = match suffix {
        "" => (10, 0),
        "n" => (10, -9),
        "u" => (10, -6),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        other => {
            let digits = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .ok_or("unable to parse quantity's suffix")?;
            let e: i32 = digits.parse().map_err(|_| "unable to parse quantity's suffix")?;
            (10, e)
        }
    };
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // Work in units of 10^-(9 + frac digits) to stay exact, then scale.
    let mut mantissa: i128 = 0;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa.saturating_mul(10).saturating_add(i128::from(c - b'0'));
    }
    let frac_digits = i32::try_from(frac_part.len()).unwrap_or(i32::MAX);
    // value = mantissa * 10^-frac_digits * base^exp; nanos = value * 10^9.
    let mut num = mantissa;
    let mut den: i128 = 1;
    let mut scale10 = 9 - frac_digits;
    if base == 10 {
        scale10 = scale10.saturating_add(exp);
    } else {
        num = num.saturating_mul(1i128 << exp.clamp(0, 62));
    }
    if scale10 >= 0 {
        for _ in 0..scale10.min(40) {
            num = num.saturating_mul(10);
        }
    } else {
        for _ in 0..(-scale10).min(40) {
            den = den.saturating_mul(10);
        }
    }
    let mut nanos = num / den + i128::from(num % den != 0);
    if negative {
        nanos = -nanos;
    }
    Ok(Quantity { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("1").map(|q| q.nanos), Ok(1_000_000_000));
        assert_eq!(parse_quantity("100m").map(|q| q.nanos), Ok(100_000_000));
        assert_eq!(parse_quantity("1Ki").map(|q| q.nanos), Ok(1_024_000_000_000));
        assert_eq!(parse_quantity("1e3").map(|q| q.nanos), Ok(1_000_000_000_000));
        assert_eq!(parse_quantity("0.5"), parse_quantity("500m"));
        assert_eq!(parse_quantity("-1").map(|q| q.nanos), Ok(-1_000_000_000));
        assert_eq!(parse_quantity("abc"), Err(QUANTITY_FORMAT_ERROR));
        assert_eq!(parse_quantity("1Zi"), Err(QUANTITY_FORMAT_ERROR));
        assert!(parse_quantity("1mi").is_err());
    }
}
