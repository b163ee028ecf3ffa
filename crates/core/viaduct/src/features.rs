//! Features two edgehive peers agree on at the handshake.
//!
//! A client offers a list of feature names; the server answers the ones it
//! also has; both record the agreed list in [`PeerInfo::features`](crate::PeerInfo::features).
//! On WebSocket the offer and the answer are the [`HEADER`] of the upgrade
//! request and response (comma-separated); on QUIC they ride in the header
//! frame and its reply (see [`crate::quic`]). KubeEdge peers neither offer
//! nor answer, so nothing is agreed with them and each feature's messages
//! stay off their links.
//!
//! A name is 1–[`MAX_NAME`] characters of `a-z`, `0-9` and `-`; an offer
//! lists at most [`MAX_OFFERED`]. Names a side does not know are ignored, so
//! either side can be newer than the other.

use edgehive_model::Text;

/// The WebSocket header carrying an offer (request) or an answer (response).
pub const HEADER: &str = "Edgehive-Features";
/// The edge sends its store's inventory after connecting, and the cloud
/// reconciles it (docs/protocol.md, "Inventory").
pub const INVENTORY: &str = "inventory";
/// The edge sends many devices' twin and state reports in one message
/// (docs/protocol.md, "Device report batches").
pub const DEVICE_REPORTS: &str = "device-reports";
/// Longest feature name.
pub const MAX_NAME: usize = 32;
/// Most names one offer may list; the rest are ignored.
pub const MAX_OFFERED: usize = 16;

fn valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The names of a comma-separated list, invalid ones and those past
/// [`MAX_OFFERED`] dropped.
pub(crate) fn parse(list: &str) -> Vec<String> {
    list.split(',').map(str::trim).filter(|n| valid(n)).take(MAX_OFFERED).map(str::to_owned).collect()
}

/// The names a list of strings holds, as [`parse`] keeps them.
pub(crate) fn sanitize<S: AsRef<str>>(names: &[S]) -> Vec<String> {
    names.iter().map(AsRef::as_ref).filter(|n| valid(n)).take(MAX_OFFERED).map(str::to_owned).collect()
}

/// What both sides have, in the offer's order, each once.
pub(crate) fn agree<S: AsRef<str>>(offered: &[String], ours: &[S]) -> Vec<Text> {
    let mut out: Vec<Text> = Vec::new();
    for name in offered {
        if ours.iter().any(|o| o.as_ref() == name) && !out.iter().any(|t| t.as_str() == name) {
            out.push(Text::copy_from(name));
        }
    }
    out
}

/// The comma-separated form of an agreed list.
pub(crate) fn join(names: &[Text]) -> String {
    names.iter().map(Text::as_str).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_are_parsed_bounded_and_agreed() {
        assert_eq!(parse(" inventory , x-y2,,Bad,a/b"), ["inventory", "x-y2"]);
        let long = "a".repeat(MAX_NAME + 1);
        assert!(parse(&long).is_empty());
        let many = (0..40).map(|i| format!("f{i}")).collect::<Vec<_>>().join(",");
        assert_eq!(parse(&many).len(), MAX_OFFERED);
        let offered = parse("inventory,unknown,inventory");
        assert_eq!(agree(&offered, &["inventory", "other"]), [Text::from("inventory")]);
        assert!(agree(&offered, &[] as &[&str]).is_empty());
        assert_eq!(join(&[Text::from("a"), Text::from("b")]), "a,b");
    }
}
