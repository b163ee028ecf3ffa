//! The client end: unary calls over one HTTP/2 connection to a unix socket
//! (reconnected when it drops), each with a deadline, a size cap on the
//! answer, and the server's `grpc-status` turned into an error that says
//! what it was. edged speaks CRI with it, the edge's `dmi` module calls the
//! mappers with it and a mapper calls the edge.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::MAX_MESSAGE;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The socket could not be reached.
    #[error("connect {path}: {source}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP/2 connection failed.
    #[error("{method}: transport: {detail}")]
    Transport {
        /// The method.
        method: String,
        /// What happened.
        detail: String,
    },
    /// The server answered with an error status.
    #[error("{method}: status {code}: {message}")]
    Status {
        /// The method.
        method: String,
        /// gRPC status code.
        code: u32,
        /// The server's message.
        message: String,
    },
    /// The answer was not a valid message.
    #[error("{method}: bad answer: {detail}")]
    Decode {
        /// The method.
        method: String,
        /// What was wrong.
        detail: String,
    },
    /// No answer within the deadline.
    #[error("{method}: no answer within {deadline:?}")]
    Deadline {
        /// The method.
        method: String,
        /// The deadline.
        deadline: Duration,
    },
}

impl GrpcError {
    /// The gRPC status code, for a status error.
    pub fn code(&self) -> Option<u32> {
        match self {
            GrpcError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// One connection to a gRPC server on a unix socket.
#[derive(Debug)]
pub struct Channel {
    path: PathBuf,
    conn: tokio::sync::Mutex<Option<SendRequest<Full<Bytes>>>>,
    dials: std::sync::atomic::AtomicU64,
}

impl Channel {
    /// A channel to the socket at `path` (connected at the first call).
    pub fn new(path: impl Into<PathBuf>) -> Channel {
        Channel { path: path.into(), conn: tokio::sync::Mutex::new(None), dials: std::sync::atomic::AtomicU64::new(0) }
    }

    /// The socket.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many connections were made so far: a change means the server
    /// closed the last one (it may have restarted).
    pub fn dials(&self) -> u64 {
        self.dials.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn sender(&self) -> Result<SendRequest<Full<Bytes>>, GrpcError> {
        let mut conn = self.conn.lock().await;
        if let Some(s) = conn.as_ref().filter(|s| !s.is_closed()) {
            return Ok(s.clone());
        }
        let stream = tokio::net::UnixStream::connect(&self.path)
            .await
            .map_err(|source| GrpcError::Connect { path: self.path.clone(), source })?;
        let (send, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .max_frame_size(1 << 20)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| GrpcError::Transport { method: "connect".into(), detail: e.to_string() })?;
        self.dials.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self.path.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(socket = %path.display(), error = %e, "gRPC connection closed");
            }
        });
        *conn = Some(send.clone());
        Ok(send)
    }

    /// Calls `method` (e.g. `/runtime.v1.RuntimeService/Version`) with
    /// `req`, waiting at most `deadline`.
    pub async fn call<Req, Resp>(&self, method: &str, req: &Req, deadline: Duration) -> Result<Resp, GrpcError>
    where
        Req: prost::Message,
        Resp: prost::Message + Default,
    {
        let transport =
            |e: &dyn std::fmt::Display| GrpcError::Transport { method: method.to_owned(), detail: e.to_string() };
        let mut frame = BytesMut::with_capacity(5 + req.encoded_len());
        frame.put_u8(0);
        frame.put_u32(u32::try_from(req.encoded_len()).map_err(|e| transport(&e))?);
        req.encode(&mut frame).map_err(|e| transport(&e))?;
        let message = self.call_raw(method, frame.freeze(), deadline).await?;
        Resp::decode(message).map_err(|e| GrpcError::Decode { method: method.to_owned(), detail: e.to_string() })
    }

    /// One call with its request body as given (normally one framed
    /// message; tests send broken ones); the answer's message, unframed.
    /// Not generic over the messages, so the transport's code is in the
    /// binary once, not once per method (the edge's binary is mapped into
    /// memory whole: BENCHMARKS.md, "The edge agent").
    pub async fn call_raw(&self, method: &str, frame: Bytes, deadline: Duration) -> Result<Bytes, GrpcError> {
        match tokio::time::timeout(deadline, self.exchange(method, frame, deadline)).await {
            Ok(r) => r,
            Err(_) => Err(GrpcError::Deadline { method: method.to_owned(), deadline }),
        }
    }

    async fn exchange(&self, method: &str, frame: Bytes, deadline: Duration) -> Result<Bytes, GrpcError> {
        let transport =
            |e: &dyn std::fmt::Display| GrpcError::Transport { method: method.to_owned(), detail: e.to_string() };
        let request = || {
            http::Request::builder()
                .method(http::Method::POST)
                .uri(format!("http://localhost{method}"))
                .header(http::header::CONTENT_TYPE, "application/grpc")
                .header(http::header::TE, "trailers")
                .header("grpc-timeout", format!("{}m", deadline.as_millis().clamp(1, 99_999_999)))
                .body(Full::new(frame.clone()))
                .map_err(|e| transport(&e))
        };
        let dials = self.dials();
        let mut send = self.sender().await?;
        let response = match send.send_request(request()?).await {
            Ok(r) => r,
            // Not sent: the server closed a connection kept from an earlier
            // call (an idle one, or the server restarted). Once more on a new one.
            Err(e) if e.is_canceled() && self.dials() == dials => {
                *self.conn.lock().await = None;
                let mut send = self.sender().await?;
                send.send_request(request()?).await.map_err(|e| transport(&e))?
            }
            Err(e) => {
                // A dead connection: the next call dials again.
                *self.conn.lock().await = None;
                return Err(transport(&e));
            }
        };
        let (head, body) = response.into_parts();
        if head.status != http::StatusCode::OK {
            return Err(transport(&format!("HTTP status {}", head.status)));
        }
        let collected =
            http_body_util::Limited::new(body, MAX_MESSAGE + 5).collect().await.map_err(|e| transport(&e))?;
        let trailers = collected.trailers().cloned();
        let status_of = |h: &http::HeaderMap| {
            h.get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u32>().ok())
        };
        // A trailers-only answer carries its status in the headers.
        let status = trailers.as_ref().and_then(status_of).or_else(|| status_of(&head.headers));
        let message_of = |h: &http::HeaderMap| h.get("grpc-message").and_then(|v| v.to_str().ok()).map(percent_decode);
        match status {
            Some(0) => {}
            Some(code) => {
                let message = trailers.as_ref().and_then(message_of).or_else(|| message_of(&head.headers));
                return Err(GrpcError::Status {
                    method: method.to_owned(),
                    code,
                    message: message.unwrap_or_default(),
                });
            }
            None => return Err(transport(&"no grpc-status in the answer")),
        }
        let mut data = collected.to_bytes();
        let decode = |detail: String| GrpcError::Decode { method: method.to_owned(), detail };
        if data.len() < 5 {
            return Err(decode(format!("{} bytes, shorter than a message frame", data.len())));
        }
        let compressed = data.get_u8();
        let len = data.get_u32() as usize;
        if compressed != 0 {
            return Err(decode("compressed message (none was offered)".into()));
        }
        if len > MAX_MESSAGE || len > data.len() {
            return Err(decode(format!("message of {len} bytes, {} received", data.len())));
        }
        data.truncate(len);
        Ok(data)
    }
}

/// Decodes `grpc-message`'s percent-encoding (invalid sequences kept as is).
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(percent_decode("image %22x%22 not found"), "image \"x\" not found");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
