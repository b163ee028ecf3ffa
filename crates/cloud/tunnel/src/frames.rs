//! The tunnel's WebSocket framing, server side (RFC 6455 §5).
//!
//! KubeEdge sends its tunnel messages, whose data are raw bytes, in *text*
//! messages (`DefaultTunnel.WriteMessage`); gorilla/websocket checks no
//! UTF-8 in them, but tungstenite does and would refuse the first exec
//! whose bytes are not UTF-8. So the tunnel reads frames itself, after the
//! HTTP upgrade: masked client frames, messages reassembled from
//! fragments up to a limit checked before any payload is read, pings
//! answered, close frames echoed. It writes unmasked text frames, as
//! CloudStream does.

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// Why the tunnel's framing failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The connection failed or ended mid-frame.
    #[error("reading the tunnel: {0}")]
    Io(#[from] std::io::Error),
    /// A frame that breaks RFC 6455.
    #[error("WebSocket protocol violation: {0}")]
    Protocol(String),
    /// A message over the limit.
    #[error("WebSocket message of at least {len} bytes is over the limit of {max}")]
    TooLarge { len: u64, max: usize },
}

impl FrameError {
    /// Whether the peer broke the protocol (as opposed to the connection
    /// failing).
    pub(crate) fn is_violation(&self) -> bool {
        !matches!(self, FrameError::Io(_))
    }
}

/// What the peer sent.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A whole data message (text or binary).
    Message(Bytes),
    /// A ping, to be answered with its payload.
    Ping(Bytes),
    /// A close frame: its status code, if any.
    Close(Option<u16>),
}

/// Reads a client's frames.
#[derive(Debug)]
pub(crate) struct FrameReader<R> {
    r: R,
    max_message: usize,
    /// The message being reassembled from fragments.
    partial: Option<BytesMut>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(crate) fn new(r: R, max_message: usize) -> FrameReader<R> {
        FrameReader { r, max_message, partial: None }
    }

    /// The next message or control frame. Pongs are skipped.
    pub(crate) async fn next(&mut self) -> Result<Incoming, FrameError> {
        loop {
            let mut head = [0u8; 2];
            self.r.read_exact(&mut head).await?;
            let fin = head[0] & 0x80 != 0;
            if head[0] & 0x70 != 0 {
                return Err(FrameError::Protocol("reserved bits set (no extension was agreed)".into()));
            }
            let opcode = head[0] & 0x0f;
            if head[1] & 0x80 == 0 {
                return Err(FrameError::Protocol("a client frame without a mask".into()));
            }
            let len = match head[1] & 0x7f {
                126 => u64::from(self.r.read_u16().await?),
                127 => self.r.read_u64().await?,
                n => u64::from(n),
            };
            let control = opcode & 0x08 != 0;
            if control && (!fin || len > 125) {
                return Err(FrameError::Protocol("a fragmented or long control frame".into()));
            }
            let taken = self.partial.as_ref().map_or(0, |p| p.len());
            let room = if control { 125 } else { self.max_message - taken };
            if len > room as u64 {
                return Err(FrameError::TooLarge { len: (taken as u64).saturating_add(len), max: self.max_message });
            }
            let mut mask = [0u8; 4];
            self.r.read_exact(&mut mask).await?;
            let mut payload = vec![0u8; len as usize];
            self.r.read_exact(&mut payload).await?;
            for (i, b) in payload.iter_mut().enumerate() {
                *b ^= mask[i % 4];
            }
            match opcode {
                OP_TEXT | OP_BINARY => {
                    if self.partial.is_some() {
                        return Err(FrameError::Protocol("a new message inside a fragmented one".into()));
                    }
                    if fin {
                        return Ok(Incoming::Message(Bytes::from(payload)));
                    }
                    self.partial = Some(BytesMut::from(&payload[..]));
                }
                OP_CONTINUATION => {
                    let Some(mut partial) = self.partial.take() else {
                        return Err(FrameError::Protocol("a continuation frame outside a message".into()));
                    };
                    partial.put_slice(&payload);
                    if fin {
                        return Ok(Incoming::Message(partial.freeze()));
                    }
                    self.partial = Some(partial);
                }
                OP_PING => return Ok(Incoming::Ping(Bytes::from(payload))),
                OP_PONG => {}
                OP_CLOSE => {
                    let code = (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
                    return Ok(Incoming::Close(code));
                }
                other => return Err(FrameError::Protocol(format!("unknown opcode {other:#x}"))),
            }
        }
    }
}

/// One unmasked frame with FIN set, as a server writes it.
fn frame(opcode: u8, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(payload.len() + 10);
    b.put_u8(0x80 | opcode);
    match payload.len() {
        n if n < 126 => b.put_u8(n as u8),
        n if n <= usize::from(u16::MAX) => {
            b.put_u8(126);
            b.put_u16(n as u16);
        }
        n => {
            b.put_u8(127);
            b.put_u64(n as u64);
        }
    }
    b.put_slice(payload);
    b.freeze()
}

/// A text message (how CloudStream sends tunnel messages).
pub(crate) fn text(payload: &[u8]) -> Bytes {
    frame(OP_TEXT, payload)
}

/// The answer to a ping.
pub(crate) fn pong(payload: &[u8]) -> Bytes {
    frame(OP_PONG, payload)
}

/// A close frame with a status code and a reason (cut to fit 125 bytes).
pub(crate) fn close(code: u16, reason: &str) -> Bytes {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut p = Vec::with_capacity(2 + end);
    p.extend_from_slice(&code.to_be_bytes());
    p.extend_from_slice(&reason.as_bytes()[..end]);
    frame(OP_CLOSE, &p)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A client frame: masked.
    fn client(first: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1, 2, 3, 4];
        let mut b = vec![first];
        match payload.len() {
            n if n < 126 => b.push(0x80 | n as u8),
            n if n <= 65535 => {
                b.push(0x80 | 126);
                b.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                b.push(0x80 | 127);
                b.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        b.extend_from_slice(&mask);
        b.extend(payload.iter().enumerate().map(|(i, x)| x ^ mask[i % 4]));
        b
    }

    async fn read(bytes: Vec<u8>, max: usize) -> Vec<Result<Incoming, FrameError>> {
        let mut r = FrameReader::new(&bytes[..], max);
        let mut out = Vec::new();
        loop {
            let n = r.next().await;
            let end = n.is_err();
            out.push(n);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn messages_are_reassembled_and_text_need_not_be_utf8() {
        let mut b = client(0x81, b"\xff\xfe not utf-8");
        b.extend(client(0x02, b"frag"));
        b.extend(client(0x89, b"ping"));
        b.extend(client(0x8a, b"pong"));
        b.extend(client(0x80, b"mented"));
        b.extend(client(0x82, &vec![7u8; 70_000]));
        b.extend(client(0x88, &1000u16.to_be_bytes()));
        let got = read(b, 1 << 20).await;
        assert!(matches!(&got[0], Ok(Incoming::Message(m)) if m.as_ref() == b"\xff\xfe not utf-8"));
        assert!(matches!(&got[1], Ok(Incoming::Ping(p)) if p.as_ref() == b"ping"));
        assert!(matches!(&got[2], Ok(Incoming::Message(m)) if m.as_ref() == b"fragmented"));
        assert!(matches!(&got[3], Ok(Incoming::Message(m)) if m.len() == 70_000));
        assert!(matches!(&got[4], Ok(Incoming::Close(Some(1000)))));
        assert!(matches!(&got[5], Err(FrameError::Io(_))), "the end of the input");
    }

    #[tokio::test]
    async fn frames_that_break_the_protocol_or_the_limit_are_errors() {
        let unmasked = vec![0x81, 0x02, b'h', b'i'];
        let long_ping = client(0x89, &[0; 126]);
        let bare_continuation = client(0x80, b"x");
        let rsv = client(0xc1, b"x");
        let mut nested = client(0x01, b"a");
        nested.extend(client(0x81, b"b"));
        for bad in [unmasked, long_ping, bare_continuation, rsv, nested, client(0x83, b"x")] {
            let got = read(bad, 1024).await;
            assert!(matches!(got.last(), Some(Err(FrameError::Protocol(_)))), "{got:?}");
        }
        // Over the limit, whole or in fragments; refused from the header,
        // before the payload is read.
        let got = read(client(0x82, &[0; 1025]), 1024).await;
        assert!(matches!(got[0], Err(FrameError::TooLarge { len: 1025, max: 1024 })));
        let mut b = client(0x02, &[0; 1000]);
        b.extend(client(0x80, &[0; 100]));
        let got = read(b, 1024).await;
        assert!(matches!(got[0], Err(FrameError::TooLarge { len: 1100, .. })));
        let header_only = vec![0x82, 0x80 | 127, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        let got = read(header_only, 1024).await;
        assert!(matches!(got[0], Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn server_frames_are_unmasked_with_the_shortest_length() {
        assert_eq!(text(b"hi").as_ref(), b"\x81\x02hi");
        assert_eq!(&text(&[0; 200])[..4], b"\x81\x7e\x00\xc8");
        assert_eq!(&text(&[0; 70_000])[..10], b"\x81\x7f\x00\x00\x00\x00\x00\x01\x11\x70");
        assert_eq!(pong(b"p").as_ref(), b"\x8a\x01p");
        assert_eq!(close(1000, "").as_ref(), b"\x88\x02\x03\xe8");
        assert_eq!(close(1008, &"é".repeat(100)).len(), 2 + 2 + 122);
    }
}
