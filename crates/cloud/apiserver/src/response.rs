//! Responses: JSON bodies, streamed bodies (watches), and `Status` errors.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Frame;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::status::ApiError;

/// Response body: whole, or a stream of chunks (watches).
pub(crate) enum Body {
    /// A complete body.
    Full(Full<Bytes>),
    /// Chunks from a channel, ending when the sender goes.
    Stream(mpsc::Receiver<Bytes>),
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Body::Full(_) => "Body::Full",
            Body::Stream(_) => "Body::Stream",
        })
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(b) => Pin::new(b).poll_frame(cx),
            Body::Stream(rx) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(b) => b.is_end_stream(),
            Body::Stream(_) => false,
        }
    }
}

/// A response with a JSON body.
pub(crate) fn json_response(code: StatusCode, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Body::Full(Full::new(body)));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A response with a JSON value.
pub(crate) fn value_response(code: StatusCode, v: &Value) -> Response<Body> {
    json_response(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
}

/// An error response (a `Status`).
pub(crate) fn error_response(e: &ApiError) -> Response<Body> {
    value_response(e.code, &e.to_status())
}
