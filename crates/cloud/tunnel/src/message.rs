//! The messages of KubeEdge's stream tunnel (`pkg/stream/message.go`,
//! `constants.go`): each WebSocket message of the tunnel is one
//! [`TunnelMessage`],
//!
//! ```text
//! uvarint(connect id) | uvarint(message type) | data (the rest of the message)
//! ```
//!
//! with Go's `encoding/binary` unsigned varints (7 bits a byte, least
//! significant group first, the high bit set on every byte but the last; at
//! most 10 bytes). KubeEdge reads at most 1 MiB of data
//! (`MaxRespBodyLength`) and silently drops the rest; this codec refuses a
//! longer message instead, so a peer cannot make the cloud buffer more.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

/// Most data bytes in one message: KubeEdge's `MaxRespBodyLength` (1 MiB).
pub const MAX_DATA: usize = 1 << 20;
/// Longest Go uvarint.
const MAX_VARINT: usize = 10;
/// Longest message: two varints and [`MAX_DATA`].
pub const MAX_MESSAGE: usize = MAX_DATA + 2 * MAX_VARINT;

/// What a message is (`stream.MessageType`, numbered by `iota` in
/// `constants.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    /// 0, cloud to edge: serve a container's log (`EdgedLogsConnection` JSON).
    LogsConnect,
    /// 1, cloud to edge: an exec (`EdgedExecConnection` JSON).
    ExecConnect,
    /// 2, cloud to edge: a metrics request (not sent by edgehive).
    MetricConnect,
    /// 3, both ways: bytes of a connection.
    Data,
    /// 4, both ways: the connection ended.
    RemoveConnect,
    /// 5, cloud to edge: the tunnel is refused; the data says why.
    CloseConnect,
    /// 6, cloud to edge: an attach (`EdgedAttachConnection` JSON).
    AttachConnect,
    /// Any other number (KubeEdge logs and ignores these).
    Unknown(u64),
}

impl MessageType {
    /// The type's number on the wire.
    pub fn code(self) -> u64 {
        match self {
            MessageType::LogsConnect => 0,
            MessageType::ExecConnect => 1,
            MessageType::MetricConnect => 2,
            MessageType::Data => 3,
            MessageType::RemoveConnect => 4,
            MessageType::CloseConnect => 5,
            MessageType::AttachConnect => 6,
            MessageType::Unknown(n) => n,
        }
    }

    /// The type a number stands for.
    pub fn from_code(n: u64) -> MessageType {
        match n {
            0 => MessageType::LogsConnect,
            1 => MessageType::ExecConnect,
            2 => MessageType::MetricConnect,
            3 => MessageType::Data,
            4 => MessageType::RemoveConnect,
            5 => MessageType::CloseConnect,
            6 => MessageType::AttachConnect,
            n => MessageType::Unknown(n),
        }
    }

    /// KubeEdge's name of the type (`MessageType.String()`).
    pub fn name(self) -> &'static str {
        match self {
            MessageType::LogsConnect => "LOGS_CONNECT",
            MessageType::ExecConnect => "EXEC_CONNECT",
            MessageType::MetricConnect => "METRIC_CONNECT",
            MessageType::Data => "DATA",
            MessageType::RemoveConnect => "REMOVE_CONNECT",
            MessageType::CloseConnect => "CLOSE_CONNECT",
            MessageType::AttachConnect => "ATTACH_CONNECT",
            MessageType::Unknown(_) => "UNKNOWN",
        }
    }
}

impl fmt::Display for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why bytes are not a tunnel message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The message ended inside a varint (or was empty).
    #[error("tunnel message truncated in its {0}")]
    Truncated(&'static str),
    /// A varint longer than 10 bytes or past 64 bits.
    #[error("tunnel message's {0} overflows a 64-bit integer")]
    Overflow(&'static str),
    /// More than [`MAX_DATA`] bytes of data.
    #[error("tunnel message of {len} bytes is over the limit of {max}")]
    TooLarge {
        /// The message's length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// One message of the tunnel (`stream.Message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelMessage {
    /// The connection it belongs to (numbered by the cloud from 1).
    pub connect_id: u64,
    /// What it is.
    pub kind: MessageType,
    /// Its data.
    pub data: Bytes,
}

impl TunnelMessage {
    /// A message.
    ///
    /// ```
    /// use edgehive_tunnel::message::{MessageType, TunnelMessage};
    /// let m = TunnelMessage::new(300, MessageType::Data, &b"hi"[..]);
    /// assert_eq!(m.encode().as_ref(), &[0xac, 0x02, 0x03, b'h', b'i']);
    /// assert_eq!(TunnelMessage::decode(m.encode()).unwrap(), m);
    /// ```
    pub fn new(connect_id: u64, kind: MessageType, data: impl Into<Bytes>) -> TunnelMessage {
        TunnelMessage { connect_id, kind, data: data.into() }
    }

    /// The message's bytes, as `Message.Bytes()` writes them.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(2 * MAX_VARINT + self.data.len());
        put_uvarint(&mut b, self.connect_id);
        put_uvarint(&mut b, self.kind.code());
        b.put_slice(&self.data);
        b.freeze()
    }

    /// Reads a message (`ReadMessageFromTunnel`); the data shares `b`'s
    /// memory. Over [`MAX_MESSAGE`] bytes is an error, not a truncation.
    pub fn decode(b: Bytes) -> Result<TunnelMessage, MessageError> {
        if b.len() > MAX_MESSAGE {
            return Err(MessageError::TooLarge { len: b.len(), max: MAX_MESSAGE });
        }
        let (connect_id, n) = uvarint(&b, "connect id")?;
        let (kind, m) = uvarint(&b[n..], "message type")?;
        let data = b.slice(n + m..);
        if data.len() > MAX_DATA {
            return Err(MessageError::TooLarge { len: b.len(), max: n + m + MAX_DATA });
        }
        Ok(TunnelMessage { connect_id, kind: MessageType::from_code(kind), data })
    }
}

impl fmt::Display for TunnelMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MESSAGE: connectID {} messageType {}", self.connect_id, self.kind)
    }
}

/// Go's `binary.PutUvarint`.
fn put_uvarint(b: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        b.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    b.put_u8(v as u8);
}

/// Go's `binary.ReadUvarint`: the value and the bytes it took.
fn uvarint(b: &[u8], what: &'static str) -> Result<(u64, usize), MessageError> {
    let mut x = 0u64;
    let mut shift = 0u32;
    for (i, &byte) in b.iter().enumerate().take(MAX_VARINT) {
        if byte < 0x80 {
            if i == MAX_VARINT - 1 && byte > 1 {
                return Err(MessageError::Overflow(what));
            }
            return Ok((x | (u64::from(byte) << shift), i + 1));
        }
        x |= u64::from(byte & 0x7f) << shift;
        shift += 7;
    }
    if b.len() >= MAX_VARINT { Err(MessageError::Overflow(what)) } else { Err(MessageError::Truncated(what)) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The bytes KubeEdge's `NewMessage(id, type, data).Bytes()` produces,
    /// worked out from `binary.PutUvarint`.
    #[test]
    fn messages_encode_byte_for_byte_as_kubeedge_writes_them() {
        let cases: [(u64, MessageType, &[u8], &[u8]); 7] = [
            (1, MessageType::LogsConnect, b"test_data", b"\x01\x00test_data"),
            (100, MessageType::ExecConnect, b"", b"\x64\x01"),
            (127, MessageType::Data, b"x", b"\x7f\x03x"),
            (128, MessageType::RemoveConnect, b"", b"\x80\x01\x04"),
            (300, MessageType::AttachConnect, b"{}", b"\xac\x02\x06{}"),
            (0, MessageType::CloseConnect, b"why", b"\x00\x05why"),
            (u64::MAX, MessageType::Unknown(100), b"", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x64"),
        ];
        for (id, kind, data, want) in cases {
            let m = TunnelMessage::new(id, kind, Bytes::copy_from_slice(data));
            assert_eq!(m.encode().as_ref(), want, "{m}");
            assert_eq!(TunnelMessage::decode(Bytes::copy_from_slice(want)).unwrap(), m);
        }
        assert_eq!(MessageType::from_code(6).name(), "ATTACH_CONNECT");
        assert_eq!(MessageType::from_code(100).name(), "UNKNOWN");
        assert_eq!(
            TunnelMessage::new(100, MessageType::LogsConnect, Bytes::new()).to_string(),
            "MESSAGE: connectID 100 messageType LOGS_CONNECT"
        );
    }

    #[test]
    fn malformed_and_oversize_messages_are_refused() {
        let d = |b: &[u8]| TunnelMessage::decode(Bytes::copy_from_slice(b));
        assert_eq!(d(b""), Err(MessageError::Truncated("connect id")));
        assert_eq!(d(b"\x01"), Err(MessageError::Truncated("message type")));
        assert_eq!(d(b"\x01\x80"), Err(MessageError::Truncated("message type")));
        // Eleven continuation bytes, or a tenth byte past 64 bits.
        assert_eq!(d(&[0x80; 11]), Err(MessageError::Overflow("connect id")));
        assert_eq!(d(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02\x03"), Err(MessageError::Overflow("connect id")));
        // Go accepts a varint that is not minimal; so does this.
        assert_eq!(d(b"\x81\x00\x03").unwrap().connect_id, 1);
        let big = Bytes::from(vec![0u8; MAX_MESSAGE + 1]);
        assert!(matches!(TunnelMessage::decode(big), Err(MessageError::TooLarge { .. })));
        let mut most = vec![0x01, 0x03];
        most.resize(2 + MAX_DATA, b'a');
        assert_eq!(TunnelMessage::decode(Bytes::from(most)).unwrap().data.len(), MAX_DATA);
        let mut over = vec![0x01, 0x03];
        over.resize(3 + MAX_DATA, b'a');
        assert!(matches!(TunnelMessage::decode(Bytes::from(over)), Err(MessageError::TooLarge { .. })));
    }
}
