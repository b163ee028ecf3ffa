//! Errors of the model crate.

use thiserror::Error;

/// A resource string that is not a valid path of the expected form.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("malformed resource {input:?}: {reason}")]
pub struct ResourceError {
    /// The string that failed to parse.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl ResourceError {
    pub(crate) fn new(input: &str, reason: &'static str) -> ResourceError {
        ResourceError { input: input.to_owned(), reason }
    }
}

/// Content that could not be encoded or decoded.
#[derive(Debug, Error)]
pub enum ContentError {
    /// The value could not be serialised to JSON.
    #[error("encode content: {0}")]
    Encode(#[source] serde_json::Error),
    /// The JSON did not have the expected shape, or was not JSON.
    #[error("decode content: {0}")]
    Decode(#[source] serde_json::Error),
}

/// Why bytes did not decode as a [`Message`](crate::Message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The input ends in the middle of a value (a truncated frame).
    Truncated,
    /// The input is not JSON (bad syntax, trailing bytes, invalid UTF-8).
    Syntax,
    /// Valid JSON, but not a message (wrong field types, not an object).
    Shape,
}

/// Bytes that are not one JSON-encoded message.
#[derive(Debug, Error)]
#[error("decode message ({kind:?} at line {line} column {column}): {source}")]
pub struct DecodeError {
    /// The class of failure.
    pub kind: DecodeErrorKind,
    /// Position of the failure, 1-based, as serde_json reports it.
    pub line: usize,
    /// Column of the failure.
    pub column: usize,
    #[source]
    source: serde_json::Error,
}

impl DecodeError {
    /// Valid JSON that is not an object.
    pub(crate) fn not_an_object(bytes: &[u8]) -> DecodeError {
        let e = match serde_json::from_slice::<serde_json::Value>(bytes) {
            Err(e) => e,
            Ok(_) => <serde_json::Error as serde::de::Error>::custom("a message must be a JSON object"),
        };
        DecodeError::from(e)
    }
}

impl From<serde_json::Error> for DecodeError {
    fn from(e: serde_json::Error) -> Self {
        use serde_json::error::Category;
        let kind = match e.classify() {
            Category::Eof => DecodeErrorKind::Truncated,
            Category::Syntax | Category::Io => DecodeErrorKind::Syntax,
            Category::Data => DecodeErrorKind::Shape,
        };
        DecodeError { kind, line: e.line(), column: e.column(), source: e }
    }
}
