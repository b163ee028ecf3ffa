//! Resource paths: parse never panics, and what parses rebuilds exactly.
#![no_main]

use edgehive_model::ResourcePath;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(p) = ResourcePath::parse_wire(s) {
        assert_eq!(p.to_wire(), s);
    }
    if let Ok(r) = ResourcePath::parse_cloud(s) {
        assert_eq!(r.to_cloud(), s);
    }
});
