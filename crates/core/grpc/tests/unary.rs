//! Both ends over a real unix socket: answers, errors, limits, deadlines,
//! shutdown — and peers that are not gRPC, or send broken frames.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{BufMut as _, Bytes, BytesMut};
use edgehive_grpc::{Channel, GrpcError, Server, Status, code};
use edgehive_testkit::fixtures::TempDir;
use tokio_util::sync::CancellationToken;

#[derive(Clone, PartialEq, prost::Message)]
struct Echo {
    #[prost(string, tag = "1")]
    text: String,
    #[prost(uint64, tag = "2")]
    n: u64,
}

const ECHO: &str = "/test.v1.Echo/Say";
const FAIL: &str = "/test.v1.Echo/Fail";
const HANG: &str = "/test.v1.Echo/Hang";
const SECOND: Duration = Duration::from_secs(5);

/// Sets its flag when dropped: proves a handler's future was abandoned.
struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct Running {
    _dir: TempDir,
    sock: std::path::PathBuf,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    hang_dropped: Arc<AtomicBool>,
}

fn start(max: usize) -> Running {
    let dir = TempDir::new("grpc-unary");
    let sock = dir.path().join("sub").join("echo.sock");
    let hang_dropped = Arc::new(AtomicBool::new(false));
    let flag = hang_dropped.clone();
    let server = Server::new()
        .max_message(max)
        .unary(ECHO, |req: Echo| async move { Ok(Echo { text: format!("echo {}", req.text), n: req.n + 1 }) })
        .unary(FAIL, |req: Echo| async move {
            Err::<Echo, _>(Status::not_found(format!("no \"{}\" here — 100%", req.text)))
        })
        .unary(HANG, move |_: Echo| {
            let guard = DropFlag(flag.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(Echo::default())
            }
        });
    let bound = server.bind(&sock).expect("bind");
    let cancel = CancellationToken::new();
    let task = tokio::spawn(bound.serve(cancel.clone()));
    Running { _dir: dir, sock, cancel, task, hang_dropped }
}

fn frame(message: &[u8], declared: u32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u8(0);
    b.put_u32(declared);
    b.put_slice(message);
    b.freeze()
}

#[tokio::test]
async fn a_call_is_answered_and_an_error_status_reaches_the_caller() {
    let s = start(1024);
    let mode = std::fs::metadata(&s.sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket is the owner's only");
    let ch = Channel::new(&s.sock);
    for i in 0..3u64 {
        let r: Echo = ch.call(ECHO, &Echo { text: "hi".into(), n: i }, SECOND).await.unwrap();
        assert_eq!(r, Echo { text: "echo hi".into(), n: i + 1 });
    }
    let e = ch.call::<_, Echo>(FAIL, &Echo { text: "x".into(), n: 0 }, SECOND).await.unwrap_err();
    match e {
        GrpcError::Status { code: c, message, .. } => {
            assert_eq!(c, code::NOT_FOUND);
            assert_eq!(message, "no \"x\" here — 100%");
        }
        other => panic!("{other:?}"),
    }
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
    assert!(!s.sock.exists(), "the socket file is removed at shutdown");
}

#[tokio::test]
async fn broken_requests_get_grpc_go_codes_and_the_server_keeps_serving() {
    let s = start(1024);
    let ch = Channel::new(&s.sock);
    let status = |r: Result<Bytes, GrpcError>| match r {
        Err(GrpcError::Status { code, message, .. }) => (code, message),
        other => panic!("expected a status, got {other:?}"),
    };
    // Unknown method: UNIMPLEMENTED, at once (no hang).
    let (c, m) = status(ch.call_raw("/test.v1.Echo/Nope", frame(b"", 0), SECOND).await);
    assert_eq!(c, code::UNIMPLEMENTED, "{m}");
    // A frame that declares more than the limit.
    let (c, m) = status(ch.call_raw(ECHO, frame(b"", 4096), SECOND).await);
    assert_eq!(c, code::RESOURCE_EXHAUSTED, "{m}");
    // A body larger than the limit.
    let big = vec![b'a'; 8192];
    let (c, _) = status(ch.call_raw(ECHO, frame(&big, 8192), SECOND).await);
    assert_eq!(c, code::RESOURCE_EXHAUSTED);
    // Truncated: declares 10 bytes, sends 3; and a frame shorter than its header.
    let (c, m) = status(ch.call_raw(ECHO, frame(b"abc", 10), SECOND).await);
    assert_eq!(c, code::INTERNAL, "{m}");
    let (c, _) = status(ch.call_raw(ECHO, Bytes::from_static(&[0, 0]), SECOND).await);
    assert_eq!(c, code::INTERNAL);
    // Garbage that is not protobuf (a field with wire type 7).
    let junk = [0xffu8, 0xff, 0xff, 0xff, 0x0f];
    let (c, m) = status(ch.call_raw(ECHO, frame(&junk, 5), SECOND).await);
    assert_eq!(c, code::INTERNAL, "{m}");
    assert!(m.contains("unmarshalling"), "{m}");
    // Compressed flag without an encoding.
    let mut compressed = BytesMut::from(&frame(b"", 0)[..]);
    compressed[0] = 1;
    let (c, _) = status(ch.call_raw(ECHO, compressed.freeze(), SECOND).await);
    assert_eq!(c, code::INTERNAL);
    // Still serving, on the same connection.
    let r: Echo = ch.call(ECHO, &Echo { text: "ok".into(), n: 1 }, SECOND).await.unwrap();
    assert_eq!(r.text, "echo ok");
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_callers_deadline_ends_the_call_at_the_server_too() {
    let s = start(1024);
    let ch = Channel::new(&s.sock);
    let t = tokio::time::Instant::now();
    let e = ch.call::<_, Echo>(HANG, &Echo::default(), Duration::from_millis(200)).await.unwrap_err();
    assert!(matches!(e, GrpcError::Deadline { .. }) || e.code() == Some(code::DEADLINE_EXCEEDED), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(3));
    edgehive_testkit::eventually("the server drops the handler", SECOND, || s.hang_dropped.load(Ordering::SeqCst))
        .await;
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_stale_socket_is_replaced_and_a_file_that_is_not_a_socket_is_kept() {
    let dir = TempDir::new("grpc-stale");
    let sock = dir.path().join("stale.sock");
    // A socket file left by a process that died.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let bound = Server::new().unary(ECHO, |r: Echo| async move { Ok(r) }).bind(&sock).unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(bound.serve(cancel.clone()));
    let r: Echo = Channel::new(&sock).call(ECHO, &Echo { text: "a".into(), n: 0 }, SECOND).await.unwrap();
    assert_eq!(r.text, "a");
    cancel.cancel();
    task.await.unwrap().unwrap();

    let file = dir.path().join("data");
    std::fs::write(&file, b"precious").unwrap();
    let e = Server::new().bind(&file).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read(&file).unwrap(), b"precious");
}

#[tokio::test]
async fn a_peer_that_is_not_grpc_is_an_error_and_a_silent_one_meets_the_deadline() {
    let dir = TempDir::new("grpc-bad");
    let req = Echo::default();
    // Nothing listening.
    let ch = Channel::new(dir.path().join("none.sock"));
    let e = ch.call::<_, Echo>(ECHO, &req, SECOND).await;
    assert!(matches!(e, Err(GrpcError::Connect { .. })), "{e:?}");
    // Garbage instead of HTTP/2.
    let junk = dir.path().join("junk.sock");
    let l = tokio::net::UnixListener::bind(&junk).unwrap();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt as _;
        while let Ok((mut s, _)) = l.accept().await {
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\nnot grpc").await;
        }
    });
    let t = tokio::time::Instant::now();
    let e = Channel::new(&junk).call::<_, Echo>(ECHO, &req, SECOND).await;
    assert!(matches!(e, Err(GrpcError::Transport { .. })), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(4));
    // Accepts and says nothing: the deadline ends the call.
    let silent = dir.path().join("silent.sock");
    let l = tokio::net::UnixListener::bind(&silent).unwrap();
    tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            kept.push(s);
        }
    });
    let e = Channel::new(&silent).call::<_, Echo>(ECHO, &req, Duration::from_millis(300)).await;
    assert!(matches!(e, Err(GrpcError::Deadline { .. })), "{e:?}");
}

/// grpc-go reads the status from the headers only when the HEADERS frame
/// ends the stream (a trailers-only answer); a success ends with trailers.
#[tokio::test]
async fn an_error_is_a_trailers_only_answer_and_a_success_ends_with_trailers() {
    use http_body_util::BodyExt as _;
    use hyper::body::Body as _;
    let s = start(1024);
    let stream = tokio::net::UnixStream::connect(&s.sock).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let request = |path: &str, body: Bytes| {
        http::Request::post(format!("http://localhost{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(http_body_util::Full::new(body))
            .unwrap()
    };
    let resp = send.send_request(request("/test.v1.Echo/Nope", frame(b"", 0))).await.unwrap();
    assert_eq!(resp.headers()["grpc-status"], "12");
    assert_eq!(resp.headers()["content-type"], "application/grpc");
    assert!(resp.body().is_end_stream(), "the HEADERS frame ends the stream");

    let msg = prost::Message::encode_to_vec(&Echo { text: "x".into(), n: 1 });
    let resp = send.send_request(request(ECHO, frame(&msg, msg.len() as u32))).await.unwrap();
    assert!(resp.headers().get("grpc-status").is_none());
    let collected = resp.into_body().collect().await.unwrap();
    assert_eq!(collected.trailers().unwrap()["grpc-status"], "0");
    // Not gRPC at all: plain HTTP errors.
    let plain = http::Request::post("http://localhost/test.v1.Echo/Say")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::new()))
        .unwrap();
    let resp = send.send_request(plain).await.unwrap();
    assert_eq!(resp.status(), http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

/// A request body that sends its first bytes and then, unless told to end
/// there, never ends: a peer holding a stream (and its buffers) open.
struct Stalled(Option<Bytes>, bool);

impl hyper::body::Body for Stalled {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        match self.0.take() {
            Some(b) => std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(b)))),
            None if self.1 => std::task::Poll::Ready(None),
            None => std::task::Poll::Pending,
        }
    }
}

type RawSender<B> = hyper::client::conn::http2::SendRequest<B>;

async fn raw_connection<B>(sock: &std::path::Path) -> (RawSender<B>, tokio::task::JoinHandle<()>)
where
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = tokio::net::UnixStream::connect(sock).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, task)
}

fn raw_request<B>(path: &str, body: B) -> http::Request<B> {
    // No grpc-timeout: the server's own deadline is all there is.
    http::Request::post(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(body)
        .unwrap()
}

/// An attacker on the socket opens connections, sends a call's headers and
/// half its message, and never finishes (no grpc-timeout either): the
/// server's deadline cuts each call off, connections past the cap wait, and
/// a good client is served once the stalled ones are gone.
#[tokio::test]
async fn stalled_callers_meet_the_servers_deadline_and_connections_past_the_cap_wait() {
    const CAP: usize = 2;
    let dir = TempDir::new("grpc-stall");
    let sock = dir.path().join("stall.sock");
    let hang_dropped = Arc::new(AtomicBool::new(false));
    let flag = hang_dropped.clone();
    let bound = Server::new()
        .max_connections(CAP)
        .call_deadline(Duration::from_millis(300))
        .unary(ECHO, |r: Echo| async move { Ok(r) })
        .unary(HANG, move |_: Echo| {
            let guard = DropFlag(flag.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(Echo::default())
            }
        })
        .bind(&sock)
        .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(bound.serve(cancel.clone()));

    // The cap's worth of connections, each with a call whose body never ends.
    let mut held = Vec::new();
    for _ in 0..CAP {
        let (mut send, conn) = raw_connection::<Stalled>(&sock).await;
        let half = frame(b"abc", 100);
        let resp = tokio::time::timeout(SECOND, send.send_request(raw_request(ECHO, Stalled(Some(half), false))))
            .await
            .expect("a stalled body is cut off at the server's deadline, not held for ever")
            .unwrap();
        assert_eq!(resp.headers()["grpc-status"], "4", "DEADLINE_EXCEEDED");
        held.push((send, conn));
    }

    // A handler that never answers, called without grpc-timeout: ended too.
    let msg = prost::Message::encode_to_vec(&Echo::default());
    let whole = Stalled(Some(frame(&msg, msg.len() as u32)), true);
    let resp = tokio::time::timeout(SECOND, held[0].0.send_request(raw_request(HANG, whole)))
        .await
        .expect("a hung handler is ended at the server's deadline")
        .unwrap();
    assert_eq!(resp.headers()["grpc-status"], "4", "DEADLINE_EXCEEDED");
    edgehive_testkit::eventually("the server drops the hung handler", SECOND, || hang_dropped.load(Ordering::SeqCst))
        .await;

    // Past the cap: a new caller is not served while the held ones stay open.
    let ch = Channel::new(&sock);
    let r = ch.call::<_, Echo>(ECHO, &Echo { text: "late".into(), n: 0 }, Duration::from_millis(300)).await;
    assert!(r.is_err(), "a connection past the cap must wait: {r:?}");

    // The attacker goes; the good client is served.
    for (send, conn) in held {
        drop(send);
        conn.abort();
    }
    let served = Arc::new(AtomicBool::new(false));
    let deadline = tokio::time::Instant::now() + SECOND;
    while tokio::time::Instant::now() < deadline {
        if let Ok(r) = ch.call::<_, Echo>(ECHO, &Echo { text: "good".into(), n: 1 }, Duration::from_millis(300)).await {
            assert_eq!(r.text, "good");
            served.store(true, Ordering::SeqCst);
            break;
        }
    }
    assert!(served.load(Ordering::SeqCst), "the good client is served once the stalled connections close");
    cancel.cancel();
    task.await.unwrap().unwrap();
}

/// An attacker fills every place with connections that never say a word:
/// each is closed once idle, and a good client is served. A connection
/// that called and then went quiet is closed too (its caller reconnects).
#[tokio::test]
async fn connections_without_a_call_are_closed_once_idle() {
    const CAP: usize = 2;
    let dir = TempDir::new("grpc-idle");
    let sock = dir.path().join("idle.sock");
    let bound = Server::new()
        .max_connections(CAP)
        .idle_timeout(Duration::from_millis(300))
        .unary(ECHO, |r: Echo| async move { Ok(r) })
        .bind(&sock)
        .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(bound.serve(cancel.clone()));

    let mut silent = Vec::new();
    for _ in 0..CAP {
        silent.push(tokio::net::UnixStream::connect(&sock).await.unwrap());
    }
    // The server closes each: reading reaches the end (after its SETTINGS).
    for mut s in silent {
        let mut buf = Vec::new();
        tokio::time::timeout(SECOND, tokio::io::AsyncReadExt::read_to_end(&mut s, &mut buf))
            .await
            .expect("a silent connection is closed once idle")
            .unwrap();
    }
    let ch = Channel::new(&sock);
    let r = ch.call::<_, Echo>(ECHO, &Echo { text: "good".into(), n: 1 }, SECOND).await.unwrap();
    assert_eq!(r.text, "good");

    // A caller that goes quiet after a call is closed as well.
    let (mut send, conn) = raw_connection::<http_body_util::Full<Bytes>>(&sock).await;
    let msg = prost::Message::encode_to_vec(&Echo { text: "once".into(), n: 0 });
    let resp =
        send.send_request(raw_request(ECHO, http_body_util::Full::new(frame(&msg, msg.len() as u32)))).await.unwrap();
    assert_eq!(resp.status(), 200);
    tokio::time::timeout(SECOND, conn).await.expect("an idle connection is closed").unwrap();
    // The channel's connection went idle too: its next call connects again.
    let r = ch.call::<_, Echo>(ECHO, &Echo { text: "again".into(), n: 2 }, SECOND).await.unwrap();
    assert_eq!(r.text, "again");
    cancel.cancel();
    task.await.unwrap().unwrap();
}
