//! The server end: unary methods served on a unix socket over HTTP/2.
//!
//! A request is routed by its path (`/package.Service/Method`), its one
//! length-prefixed message read under the size limit and the caller's
//! deadline (`grpc-timeout`), and the answer sent as one message followed by
//! the `grpc-status` trailer — or, for an error, a trailers-only answer with
//! `grpc-status` and a percent-encoded `grpc-message`, as grpc-go does. The
//! codes are grpc-go's for the same faults: an unknown method is
//! UNIMPLEMENTED, a message over the limit RESOURCE_EXHAUSTED, a truncated
//! frame or an undecodable message INTERNAL, a passed deadline
//! DEADLINE_EXCEEDED.
//!
//! A peer on the socket is not trusted to be well behaved: at most 64
//! connections are served at once (more wait in the listen backlog until
//! one closes), each with at most 16 calls in flight, and a call without a
//! `grpc-timeout` still ends after 30 s — so headers sent and a body
//! trickled forever hold a stream for that long, not for ever. A `grpc-timeout` longer than that
//! governs the handler but not the reading of the request body. A
//! connection with no call in flight for 60 s is closed (HTTP/2 GOAWAY;
//! gRPC clients connect again when they next call), so connections that
//! never call cannot hold the 64 places.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::io;
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use http_body_util::combinators::WithTrailers;
use http_body_util::{BodyExt as _, Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::{MAX_MESSAGE, code};

/// How long open connections get to finish their calls at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Connections served at once by default ([`Server::max_connections`]).
const MAX_CONNECTIONS: usize = 64;

/// Calls in flight on one connection (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`).
/// grpc-go leaves it unlimited; a unary local caller needs a few.
const MAX_STREAMS: u32 = 16;

/// A call's deadline when the caller sends no `grpc-timeout`, and the
/// longest time a request body may take to arrive ([`Server::call_deadline`]).
const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// How long a connection may go without a call in flight before it is
/// closed ([`Server::idle_timeout`]).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// How long an idle connection being closed gets to take its GOAWAY.
const IDLE_CLOSE_GRACE: Duration = Duration::from_millis(500);

/// A gRPC status: what a method answers instead of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The code ([`crate::code`]).
    pub code: u32,
    /// Said to the caller in `grpc-message`.
    pub message: String,
}

impl Status {
    /// A status with `code` and `message`.
    pub fn new(code: u32, message: impl Into<String>) -> Status {
        Status { code, message: message.into() }
    }

    /// INVALID_ARGUMENT: the request is not acceptable.
    pub fn invalid_argument(message: impl Into<String>) -> Status {
        Status::new(code::INVALID_ARGUMENT, message)
    }

    /// NOT_FOUND: the named object is unknown.
    pub fn not_found(message: impl Into<String>) -> Status {
        Status::new(code::NOT_FOUND, message)
    }

    /// INTERNAL: the server failed.
    pub fn internal(message: impl Into<String>) -> Status {
        Status::new(code::INTERNAL, message)
    }

    /// RESOURCE_EXHAUSTED: too many requests, or too large.
    pub fn resource_exhausted(message: impl Into<String>) -> Status {
        Status::new(code::RESOURCE_EXHAUSTED, message)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "status {}: {}", self.code, self.message)
    }
}

type HandlerFuture = Pin<Box<dyn Future<Output = Result<Bytes, Status>> + Send>>;
/// A method, not generic over its messages once registered: the transport
/// code is in the binary once.
type Handler = Arc<dyn Fn(Bytes) -> HandlerFuture + Send + Sync>;
/// An empty body (a trailers-only answer: hyper ends the stream on the
/// HEADERS frame, which grpc-go requires to read the status from the
/// headers), or one message and its trailers.
type ResponseBody = Either<Full<Bytes>, WithTrailers<Full<Bytes>, Ready<Option<Result<http::HeaderMap, Infallible>>>>>;

/// A set of unary methods to serve on a unix socket.
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// #[derive(Clone, PartialEq, prost::Message)]
/// struct Ping { #[prost(string, tag = "1")] text: String }
/// let cancel = tokio_util::sync::CancellationToken::new();
/// edgehive_grpc::Server::new()
///     .unary("/demo.Echo/Ping", |req: Ping| async move { Ok(req) })
///     .bind(std::path::Path::new("echo.sock"))?
///     .serve(cancel)
///     .await
/// # }
/// ```
#[derive(Clone)]
pub struct Server {
    routes: HashMap<String, Handler>,
    max_message: usize,
    max_connections: usize,
    call_deadline: Duration,
    idle_timeout: Duration,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut methods: Vec<&String> = self.routes.keys().collect();
        methods.sort();
        f.debug_struct("Server")
            .field("methods", &methods)
            .field("max_message", &self.max_message)
            .field("max_connections", &self.max_connections)
            .field("call_deadline", &self.call_deadline)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl Default for Server {
    fn default() -> Self {
        Server::new()
    }
}

impl Server {
    /// A server with no methods and the default limits: [`MAX_MESSAGE`],
    /// 64 connections, 30 s for a call without `grpc-timeout`.
    pub fn new() -> Server {
        Server {
            routes: HashMap::new(),
            max_message: MAX_MESSAGE,
            max_connections: MAX_CONNECTIONS,
            call_deadline: CALL_DEADLINE,
            idle_timeout: IDLE_TIMEOUT,
        }
    }

    /// Sets how long a connection may go without a call in flight (from
    /// its start, or its last call's end) before it is closed.
    pub fn idle_timeout(mut self, d: Duration) -> Server {
        self.idle_timeout = d;
        self
    }

    /// Sets how many connections are served at once (at least one); the
    /// next waits in the listen backlog until one closes.
    pub fn max_connections(mut self, n: usize) -> Server {
        self.max_connections = n.max(1);
        self
    }

    /// Sets the deadline of a call that carries no `grpc-timeout`, and the
    /// longest time any request body may take to arrive.
    pub fn call_deadline(mut self, d: Duration) -> Server {
        self.call_deadline = d;
        self
    }

    /// Sets the largest request (and answer) message, in bytes.
    pub fn max_message(mut self, bytes: usize) -> Server {
        self.max_message = bytes;
        self
    }

    /// Serves `method` (its full path, `/package.Service/Method`) with
    /// `handler`.
    pub fn unary<Req, Resp, F, Fut>(mut self, method: &str, handler: F) -> Server
    where
        Req: prost::Message + Default + 'static,
        Resp: prost::Message + 'static,
        F: Fn(Req) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let wrapped: Handler = Arc::new(move |message: Bytes| {
            let handler = handler.clone();
            Box::pin(async move {
                let req = Req::decode(message)
                    .map_err(|e| Status::internal(format!("grpc: error unmarshalling request: {e}")))?;
                let resp = handler(req).await?;
                Ok(Bytes::from(resp.encode_to_vec()))
            })
        });
        self.routes.insert(method.to_owned(), wrapped);
        self
    }

    /// Listens on the unix socket at `path`: a stale socket file left by an
    /// earlier run is removed first (anything else there is an error, not
    /// deleted), the parent directory is created, and the socket is made
    /// mode 0600 (only the owner may connect).
    pub fn bind(self, path: &Path) -> io::Result<BoundServer> {
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)?,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let listener = tokio::net::UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(BoundServer {
            listener,
            path: path.to_owned(),
            connections: Arc::new(tokio::sync::Semaphore::new(self.max_connections)),
            routes: Arc::new(Routes {
                methods: self.routes,
                max_message: self.max_message,
                call_deadline: self.call_deadline,
                idle_timeout: self.idle_timeout,
            }),
        })
    }
}

/// A server listening on its socket; [`BoundServer::serve`] runs it.
#[derive(Debug)]
pub struct BoundServer {
    listener: tokio::net::UnixListener,
    path: PathBuf,
    routes: Arc<Routes>,
    /// One permit per connection served.
    connections: Arc<tokio::sync::Semaphore>,
}

struct Routes {
    methods: HashMap<String, Handler>,
    max_message: usize,
    call_deadline: Duration,
    idle_timeout: Duration,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes").field("methods", &self.methods.len()).finish_non_exhaustive()
    }
}

impl BoundServer {
    /// The socket.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves until `cancel`: then stops accepting, lets open calls finish
    /// (up to a few seconds), and removes the socket file.
    pub async fn serve(self, cancel: CancellationToken) -> io::Result<()> {
        let tracker = TaskTracker::new();
        let result = loop {
            // A free slot first, then accept: past the cap, callers wait in
            // the kernel's backlog rather than in our memory.
            let permit = tokio::select! {
                _ = cancel.cancelled() => break Ok(()),
                permit = self.connections.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break Ok(()),
                },
            };
            let stream = tokio::select! {
                _ = cancel.cancelled() => break Ok(()),
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) if is_transient(&e) => {
                        tracing::warn!(socket = %self.path.display(), error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    Err(e) => break Err(e),
                },
            };
            let routes = self.routes.clone();
            let cancel = cancel.clone();
            tracker.spawn(async move {
                serve_connection(stream, routes, cancel).await;
                drop(permit);
            });
        };
        tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait()).await.is_err() {
            tracing::warn!(socket = %self.path.display(), "gRPC calls still open at shutdown, dropped");
        }
        drop(self.listener);
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(socket = %self.path.display(), error = %e, "remove socket");
        }
        result
    }
}

/// Accept errors that do not end the server (out of file descriptors, a
/// peer gone before accept).
fn is_transient(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted)
        || e.raw_os_error().is_some_and(|n| n == 24 || n == 23)
}

/// A connection's calls in flight, and when the last one ended.
struct Activity {
    calls: usize,
    since: tokio::time::Instant,
}

/// Ends a call in [`Activity`] however the call's future ends.
struct CallGuard(Arc<std::sync::Mutex<Activity>>);

impl Drop for CallGuard {
    fn drop(&mut self) {
        let mut a = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        a.calls -= 1;
        a.since = tokio::time::Instant::now();
    }
}

async fn serve_connection(stream: tokio::net::UnixStream, routes: Arc<Routes>, cancel: CancellationToken) {
    let idle = routes.idle_timeout;
    let activity = Arc::new(std::sync::Mutex::new(Activity { calls: 0, since: tokio::time::Instant::now() }));
    let calls = activity.clone();
    let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let routes = routes.clone();
        calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).calls += 1;
        let guard = CallGuard(calls.clone());
        async move {
            let resp = routes.handle(req).await;
            drop(guard);
            Ok::<_, Infallible>(resp)
        }
    });
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .max_frame_size(1 << 20)
        .max_concurrent_streams(MAX_STREAMS)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let mut check = tokio::time::Instant::now() + idle;
    let grace = loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "gRPC connection ended");
                }
                return;
            }
            _ = cancel.cancelled() => break SHUTDOWN_GRACE,
            () = tokio::time::sleep_until(check) => {
                let a = activity.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if a.calls == 0 && a.since + idle <= tokio::time::Instant::now() {
                    tracing::debug!(idle_s = idle.as_secs(), "gRPC connection idle; closed");
                    // No call to finish: only the GOAWAY to send.
                    break IDLE_CLOSE_GRACE;
                }
                check = a.since.max(tokio::time::Instant::now()) + idle;
            }
        }
    };
    conn.as_mut().graceful_shutdown();
    // A peer that neither reads nor closes does not hold the place.
    let _ = tokio::time::timeout(grace, conn).await;
}

impl Routes {
    async fn handle(&self, req: http::Request<Incoming>) -> http::Response<ResponseBody> {
        if req.method() != http::Method::POST {
            return plain(http::StatusCode::METHOD_NOT_ALLOWED);
        }
        let is_grpc = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/grpc"));
        if !is_grpc {
            return plain(http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
        }
        let method = req.uri().path().to_owned();
        let Some(handler) = self.methods.get(&method).cloned() else {
            return status_only(&Status::new(code::UNIMPLEMENTED, format!("unknown method {method}")));
        };
        let deadline = match req.headers().get("grpc-timeout").map(|v| v.to_str().ok().and_then(parse_timeout)) {
            None => self.call_deadline,
            Some(Some(d)) => d,
            Some(None) => return status_only(&Status::internal("malformed grpc-timeout")),
        };
        let call = async {
            // The body is the peer's to send: never longer than the server's
            // own deadline, whatever the caller asked for.
            let message =
                tokio::time::timeout(self.call_deadline, self.read_message(req.into_body())).await.unwrap_or_else(
                    |_| Err(Status::new(code::DEADLINE_EXCEEDED, "reading the request: deadline exceeded")),
                )?;
            let answer = handler(message).await?;
            if answer.len() > self.max_message {
                return Err(Status::resource_exhausted(format!(
                    "grpc: trying to send message larger than max ({} vs. {})",
                    answer.len(),
                    self.max_message
                )));
            }
            Ok(answer)
        };
        let result = tokio::time::timeout(deadline, call)
            .await
            .unwrap_or_else(|_| Err(Status::new(code::DEADLINE_EXCEEDED, "context deadline exceeded")));
        match result {
            Ok(answer) => message_response(&answer),
            Err(status) => {
                tracing::debug!(%method, code = status.code, message = %status.message, "gRPC call failed");
                status_only(&status)
            }
        }
    }

    /// The request's one message, unframed, within the size limit.
    async fn read_message(&self, body: Incoming) -> Result<Bytes, Status> {
        let too_large = |size: String| {
            Status::resource_exhausted(format!(
                "grpc: received message larger than max ({size} vs. {})",
                self.max_message
            ))
        };
        let collected = http_body_util::Limited::new(body, self.max_message + 5).collect().await.map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                too_large("more".into())
            } else {
                Status::new(code::CANCELLED, format!("reading the request: {e}"))
            }
        })?;
        let mut data = collected.to_bytes();
        if data.len() < 5 {
            return Err(Status::internal(format!("truncated message frame: {} bytes", data.len())));
        }
        let compressed = data.get_u8();
        let len = data.get_u32() as usize;
        if compressed != 0 {
            return Err(Status::internal("grpc: compressed flag set with identity or empty encoding"));
        }
        if len > self.max_message {
            return Err(too_large(len.to_string()));
        }
        if data.len() < len {
            return Err(Status::internal(format!("truncated message: {len} bytes declared, {} received", data.len())));
        }
        if data.len() > len {
            return Err(Status::internal("grpc: more than one request message for a unary method"));
        }
        Ok(data)
    }
}

/// `grpc-timeout`: up to 8 digits and a unit (H, M, S, m, u, n).
fn parse_timeout(v: &str) -> Option<Duration> {
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (digits, unit) = v.split_at(v.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

fn empty_body() -> ResponseBody {
    Either::Left(Full::new(Bytes::new()))
}

fn plain(status: http::StatusCode) -> http::Response<ResponseBody> {
    let mut r = http::Response::new(empty_body());
    *r.status_mut() = status;
    r
}

fn grpc_response(body: ResponseBody) -> http::Response<ResponseBody> {
    let mut r = http::Response::new(body);
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/grpc"));
    r
}

/// A trailers-only answer: the status in the headers, no body.
fn status_only(status: &Status) -> http::Response<ResponseBody> {
    let mut r = grpc_response(empty_body());
    put_status(r.headers_mut(), status);
    r
}

fn message_response(message: &[u8]) -> http::Response<ResponseBody> {
    let mut frame = BytesMut::with_capacity(5 + message.len());
    frame.put_u8(0);
    // The size was checked against the limit, which fits in a u32.
    frame.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    frame.put_slice(message);
    let mut trailers = http::HeaderMap::new();
    put_status(&mut trailers, &Status::new(code::OK, ""));
    grpc_response(Either::Right(Full::new(frame.freeze()).with_trailers(ready(Some(Ok(trailers))))))
}

fn put_status(h: &mut http::HeaderMap, status: &Status) {
    h.insert("grpc-status", http::HeaderValue::from(status.code));
    if !status.message.is_empty()
        && let Ok(v) = http::HeaderValue::from_str(&percent_encode(&status.message))
    {
        h.insert("grpc-message", v);
    }
}

/// `grpc-message`'s encoding: printable ASCII except `%` as is, every other
/// byte as `%XX`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_grpc_defines_them() {
        assert_eq!(parse_timeout("10S"), Some(Duration::from_secs(10)));
        assert_eq!(parse_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_timeout("5u"), Some(Duration::from_micros(5)));
        assert_eq!(parse_timeout("123456789S"), None, "more than 8 digits");
        assert_eq!(parse_timeout("S"), None);
        assert_eq!(parse_timeout("-1S"), None);
        assert_eq!(parse_timeout("10x"), None);
    }

    #[test]
    fn messages_round_trip_through_percent_encoding() {
        let m = "device \"a\" 100% gone\nnext — line";
        let e = percent_encode(m);
        assert!(e.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{e}");
        assert_eq!(crate::client::percent_decode(&e), m);
    }
}
