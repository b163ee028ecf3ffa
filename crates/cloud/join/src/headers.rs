//! The headers of an `/edge.crt` request, read and checked: `NodeName`,
//! `Authorization: Bearer` and `ExtKeyUsages`. Pure functions; the handler
//! turns their errors into refusals.

use http::HeaderMap;
use http::header::AUTHORIZATION;

/// The header naming the node that asks for a certificate.
pub(crate) const NODE_NAME: &str = "NodeName";
/// The optional header listing the extended key usages the node wants.
pub(crate) const EXT_KEY_USAGES: &str = "ExtKeyUsages";

/// Longest node name: a DNS-1123 subdomain.
const MAX_NODE_NAME: usize = 253;

/// Go's `x509.ExtKeyUsageClientAuth`, the one usage issued.
pub(crate) const CLIENT_AUTH: i64 = 2;
/// Go's largest `x509.ExtKeyUsage` value (`ExtKeyUsageMicrosoftKernelCodeSigning`).
const MAX_EXT_KEY_USAGE: i64 = 13;

/// The `NodeName` header, checked to be a DNS-1123 subdomain (what
/// Kubernetes accepts as a node name).
pub(crate) fn node_name(headers: &HeaderMap) -> Result<&str, String> {
    let mut values = headers.get_all(NODE_NAME).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => return Err("the NodeName header is required".into()),
        (Some(_), Some(_)) => return Err("more than one NodeName header".into()),
        (Some(v), None) => v,
    };
    let name = value.to_str().map_err(|_| "the NodeName header is not visible ASCII".to_string())?;
    check_node_name(name).map_err(|reason| format!("invalid NodeName {:?}: {reason}", shorten(name)))?;
    Ok(name)
}

/// Kubernetes' `IsDNS1123Subdomain`: at most 253 characters, dot-separated
/// labels of lower-case letters, digits and '-', each starting and ending
/// with a letter or digit.
pub(crate) fn check_node_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty");
    }
    if name.len() > MAX_NODE_NAME {
        return Err("longer than 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("empty label (leading, trailing or double '.')");
        }
        if !label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            return Err("must consist of lower case letters, digits, '-' and '.'");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("each '.'-separated part must start and end with a letter or digit");
        }
    }
    Ok(())
}

/// The token of an `Authorization: Bearer {token}` header: exactly two
/// parts separated by one space, the first `Bearer` (any case, as RFC 7235
/// has it). Otherwise what is wrong with it, or that it is missing.
pub(crate) fn bearer(headers: &HeaderMap) -> Result<&str, &'static str> {
    let value = headers.get(AUTHORIZATION).ok_or("no Authorization header")?;
    let value = value.to_str().map_err(|_| "the Authorization header is not visible ASCII")?;
    let parts: Vec<&str> = value.split(' ').collect();
    match parts[..] {
        [scheme, token] if scheme.eq_ignore_ascii_case("Bearer") && !token.is_empty() => Ok(token),
        _ => Err("expected \"Authorization: Bearer <token>\""),
    }
}

/// The `ExtKeyUsages` header, a JSON array of Go `x509.ExtKeyUsage`
/// numbers; `[2]` (clientAuth) when absent, as KubeEdge defaults it.
pub(crate) fn ext_key_usages(headers: &HeaderMap) -> Result<Vec<i64>, String> {
    let Some(value) = headers.get(EXT_KEY_USAGES) else {
        return Ok(vec![CLIENT_AUTH]);
    };
    let text = value.to_str().map_err(|_| "the ExtKeyUsages header is not visible ASCII".to_string())?;
    let usages: Vec<i64> = serde_json::from_str(text)
        .map_err(|e| format!("the ExtKeyUsages header {:?} is not a JSON array of integers: {e}", shorten(text)))?;
    if let Some(bad) = usages.iter().find(|u| !(0..=MAX_EXT_KEY_USAGE).contains(*u)) {
        return Err(format!("the ExtKeyUsages header names unknown usage {bad}"));
    }
    Ok(usages)
}

/// `text` cut to 100 characters, for messages and logs.
pub(crate) fn shorten(text: &str) -> &str {
    match text.char_indices().nth(100) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn node_names_are_dns_1123_subdomains() {
        for good in ["edge-1", "a", "0", "edge.example.com", "x1-2.y3", &"a".repeat(253)] {
            assert_eq!(check_node_name(good), Ok(()), "{good}");
        }
        for bad in ["", "Edge-1", "-edge", "edge-", "edge..1", ".edge", "edge.", "edge_1", "edge 1", "édge", "a/b"] {
            assert!(check_node_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(check_node_name(&"a".repeat(254)), Err("longer than 253 characters"));
    }

    #[test]
    fn the_node_name_header_is_required_once() {
        assert_eq!(node_name(&headers(&[("nodename", "edge-1")])), Ok("edge-1"));
        assert!(node_name(&headers(&[])).unwrap_err().contains("required"));
        assert!(node_name(&headers(&[("NodeName", "")])).unwrap_err().contains("empty"));
        assert!(node_name(&headers(&[("NodeName", "a"), ("NodeName", "b")])).unwrap_err().contains("more than one"));
        let long = "X".repeat(300);
        let err = node_name(&headers(&[("NodeName", &long)])).unwrap_err();
        assert!(err.len() < 200, "{err}");
    }

    #[test]
    fn bearer_needs_exactly_two_parts() {
        assert_eq!(bearer(&headers(&[("authorization", "Bearer a.b.c")])), Ok("a.b.c"));
        assert_eq!(bearer(&headers(&[("authorization", "bearer a.b.c")])), Ok("a.b.c"));
        assert!(bearer(&headers(&[])).is_err());
        for bad in ["Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer a b", "Bearer  a", "a.b.c"] {
            assert!(bearer(&headers(&[("authorization", bad)])).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ext_key_usages_default_to_client_auth() {
        assert_eq!(ext_key_usages(&headers(&[])), Ok(vec![2]));
        assert_eq!(ext_key_usages(&headers(&[("ExtKeyUsages", "[1, 2]")])), Ok(vec![1, 2]));
        assert_eq!(ext_key_usages(&headers(&[("ExtKeyUsages", "[]")])), Ok(vec![]));
        for bad in ["2", "[\"clientAuth\"]", "[2", "[1.5]", "[99]", "[-1]", "null"] {
            assert!(ext_key_usages(&headers(&[("ExtKeyUsages", bad)])).is_err(), "{bad}");
        }
    }

    #[test]
    fn shorten_cuts_on_a_character_boundary() {
        assert_eq!(shorten("abc"), "abc");
        let long = "é".repeat(150);
        assert_eq!(shorten(&long).chars().count(), 100);
    }
}
