//! String formats Kubernetes checks (DNS names, label keys and values, config keys, IPs, quantities), each
//! returning Kubernetes' own wording so that a failed check reads exactly as the real API server's.
//!
//! Every check is written by hand instead of with regular expressions: the patterns are tiny, and hand
//! matchers keep the crate free of a regex engine. Lengths are counted in bytes, as Go's `len` does.

/// Longest DNS-1123 label (RFC 1123).
pub(crate) const DNS1123_LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain (RFC 1123).
pub(crate) const DNS1123_SUBDOMAIN_MAX: usize = 253;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const ENV_VAR_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const HTTP_HEADER_FMT: &str = "[-A-Za-z0-9]+";

/// Kubernetes' "must be no more than N characters".
pub(crate) fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// Kubernetes' `RegexError`: the message, then the examples and the pattern in its fixed wording.
pub(crate) fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let quoted: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!("{msg} (e.g. {}regex used for validation is '{fmt}')", quoted.join(" or "))
}

/// Kubernetes' "must be between lo and hi, inclusive".
pub(crate) fn inclusive_range_error(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_lower_alnum(f) && is_lower_alnum(l) && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// Checks a DNS-1123 label (e.g. a namespace name) and returns Kubernetes' messages for each problem.
pub(crate) fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must \
                 start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// Checks a DNS-1123 subdomain (most object names) and returns Kubernetes' messages for each problem.
pub(crate) fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and \
             must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Checks a DNS-1035 label (Service names) and returns Kubernetes' messages for each problem.
pub(crate) fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    let b = value.as_bytes();
    let ok = match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            f.is_ascii_lowercase() && is_lower_alnum(l) && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    };
    if !ok {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic \
             character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// How an object name may be shaped, per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// Most kinds: a DNS-1123 subdomain.
    Subdomain,
    /// Namespaces: a DNS-1123 label.
    Label,
    /// Services: a DNS-1035 label.
    Dns1035,
    /// The generic rule every object name meets (a usable URL path segment); Kubernetes applies only this
    /// to core/v1 Events.
    PathSegment,
}

impl NameRule {
    /// Kubernetes' name check; with `prefix` (a generateName) a trailing '-' is allowed.
    pub(crate) fn check(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let name = if prefix && name.ends_with('-') {
            // Kubernetes replaces the last two bytes with "a" (its maskTrailingDash); a one-byte "-" becomes "a".
            let keep = name.len().saturating_sub(2);
            masked = format!("{}a", name.get(..keep).unwrap_or(""));
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Subdomain => dns1123_subdomain(name),
            NameRule::Label => dns1123_label(name),
            NameRule::Dns1035 => dns1035_label(name),
            NameRule::PathSegment => path_segment_name(name, prefix),
        }
    }
}

/// `path.ValidatePathSegmentName`: a name that can be a URL path segment.
fn path_segment_name(name: &str, prefix: bool) -> Vec<String> {
    let mut errs = Vec::new();
    if !prefix {
        match name {
            "." | ".." => errs.push(format!("may not be '{name}'")),
            _ => {}
        }
    }
    for c in ["/", "%"] {
        if name.contains(c) {
            errs.push(format!("may not contain '{c}'"));
        }
    }
    errs
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_alnum(f) && is_alnum(l) && b.iter().all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
        }
        _ => false,
    }
}

const LABEL_KEY_ERR: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Kubernetes' "qualified name" (label keys, annotation keys, finalizers): optional DNS prefix, '/', name.
pub(crate) fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches_label_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// A label value: empty, or at most 63 characters shaped like a label name.
pub(crate) fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !matches_label_name(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and \
             must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

fn ch_dir_prefix(value: &str) -> Option<String> {
    match value {
        "." => Some("must not be '.'".to_string()),
        ".." => Some("must not be '..'".to_string()),
        v if v.starts_with("..") => Some("must not start with '..'".to_string()),
        _ => None,
    }
}

/// A ConfigMap or Secret key: `[-._a-zA-Z0-9]+`, at most 253 bytes, not "." or "..".
pub(crate) fn config_map_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    let ok = !value.is_empty() && value.bytes().all(|c| is_alnum(c) || c == b'-' || c == b'.' || c == b'_');
    if !ok {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(ch_dir_prefix(value));
    errs
}

/// An environment variable name (the strict rule, Kubernetes' default before the relaxed feature gate).
pub(crate) fn env_var_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let b = value.as_bytes();
    let ok = match b.first() {
        Some(&f) => {
            (f.is_ascii_alphabetic() || f == b'-' || f == b'.' || f == b'_')
                && b.iter().all(|&c| is_alnum(c) || c == b'-' || c == b'.' || c == b'_')
        }
        None => false,
    };
    if !ok {
        errs.push(regex_error(
            "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', \
             and must not start with a digit",
            ENV_VAR_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    errs.extend(ch_dir_prefix(value));
    errs
}

/// An IANA service (port) name: at most 15 of `[-a-z0-9]`, at least one letter, no "--", no '-' at either end.
pub(crate) fn port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push(max_len_error(15));
    }
    if port.is_empty() || !port.bytes().all(|c| is_lower_alnum(c) || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string());
    }
    if !port.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// A port number in 1..=65535.
pub(crate) fn port_num(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) { Vec::new() } else { vec![inclusive_range_error(1, 65535)] }
}

/// An HTTP header name: `[-A-Za-z0-9]+`.
pub(crate) fn http_header_name(value: &str) -> Vec<String> {
    if !value.is_empty() && value.bytes().all(|c| is_alnum(c) || c == b'-') {
        Vec::new()
    } else {
        vec![regex_error(
            "a valid HTTP header must consist of alphanumeric characters or '-'",
            HTTP_HEADER_FMT,
            &["X-Header-Name"],
        )]
    }
}

/// Go's `ParseIPSloppy`: IPv4 dotted quads (leading zeros allowed, read as decimal) or any IPv6 form.
pub(crate) fn parse_ip_sloppy(s: &str) -> Option<std::net::IpAddr> {
    if s.contains(':') {
        return s.parse::<std::net::Ipv6Addr>().ok().map(std::net::IpAddr::V6);
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (o, p) in octets.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        *o = p.parse::<u8>().ok()?;
    }
    Some(std::net::IpAddr::V4(std::net::Ipv4Addr::from(octets)))
}

/// Kubernetes' IP check message, or nothing when `value` is an IP address.
pub(crate) fn ip_error(value: &str) -> Option<&'static str> {
    match parse_ip_sloppy(value) {
        Some(_) => None,
        None => Some("must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
    }
}

/// Go's `ParseCIDRSloppy`, reduced to what validation needs: the address and the prefix length.
pub(crate) fn parse_cidr_sloppy(s: &str) -> Option<(std::net::IpAddr, u8)> {
    let (ip, bits) = s.split_once('/')?;
    let ip = parse_ip_sloppy(ip)?;
    if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

/// Kubernetes' CIDR check message, or nothing when `value` is a CIDR.
pub(crate) fn cidr_error(value: &str) -> Option<&'static str> {
    match parse_cidr_sloppy(value) {
        Some(_) => None,
        None => Some("must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_label_messages_match_kubernetes() {
        assert!(dns1123_label("my-name").is_empty());
        assert_eq!(dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(
            dns1123_label("Foo"),
            vec![
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must \
                 start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for \
                 validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                    .to_string()
            ]
        );
        assert_eq!(dns1123_label(&"a".repeat(64)), vec!["must be no more than 63 characters"]);
    }

    #[test]
    fn subdomain_and_1035() {
        assert!(dns1123_subdomain("example.com").is_empty());
        assert_eq!(dns1123_subdomain("a..b").len(), 1);
        assert!(dns1035_label("abc-1").is_empty());
        assert_eq!(dns1035_label("1abc").len(), 1);
    }

    #[test]
    fn qualified_names() {
        assert!(qualified_name("example.com/MyName").is_empty());
        assert!(qualified_name("app").is_empty());
        assert_eq!(qualified_name("/a"), vec!["prefix part must be non-empty"]);
        assert_eq!(qualified_name("a/b/c").len(), 1);
        assert_eq!(qualified_name("a/").first().map(String::as_str), Some("name part must be non-empty"));
    }

    #[test]
    fn generate_name_prefix_masks_trailing_dash() {
        assert!(NameRule::Subdomain.check("web-", true).is_empty());
        assert!(!NameRule::Subdomain.check("web-", false).is_empty());
        assert!(NameRule::Subdomain.check("-", true).is_empty());
    }

    #[test]
    fn ips_and_cidrs() {
        assert!(ip_error("10.0.0.1").is_none());
        assert!(ip_error("010.000.000.001").is_none());
        assert!(ip_error("::1").is_none());
        assert!(ip_error("300.0.0.1").is_some());
        assert!(cidr_error("10.0.0.0/24").is_none());
        assert!(cidr_error("10.0.0.0/33").is_some());
        assert!(cidr_error("fd00::/64").is_none());
    }
}
