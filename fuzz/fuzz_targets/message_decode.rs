//! Any bytes given to the frame/message decoder: an error or a message that
//! re-encodes and decodes to itself, never a panic.
#![no_main]

use edgehive_model::Message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::decode(data) {
        let again = Message::decode(&m.encode()).expect("our own encoding decodes");
        assert_eq!(again, m);
        let _ = m.content.data();
        let _ = m.content.as_text();
    }
});
