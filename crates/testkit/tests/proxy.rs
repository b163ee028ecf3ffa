//! The fault-injecting proxy against a small echo server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use edgehive_testkit::eventually;
use edgehive_testkit::proxy::{Fault, FaultProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, timeout};

/// Generous deadline for anything that should happen.
const DEADLINE: Duration = Duration::from_secs(5);
/// How long to watch for something that should not happen.
const QUIET: Duration = Duration::from_millis(300);

/// What the echo server has seen.
#[derive(Debug, Default)]
struct EchoStats {
    accepted: AtomicU64,
    open: AtomicUsize,
    received: AtomicU64,
}

/// An echo server on 127.0.0.1:0; it lives as long as the test's runtime.
async fn echo_server() -> (SocketAddr, Arc<EchoStats>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the echo server");
    let addr = listener.local_addr().expect("echo server address");
    let stats = Arc::new(EchoStats::default());
    let s = Arc::clone(&stats);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { return };
            s.accepted.fetch_add(1, Ordering::SeqCst);
            s.open.fetch_add(1, Ordering::SeqCst);
            let s = Arc::clone(&s);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                loop {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            s.received.fetch_add(n as u64, Ordering::SeqCst);
                            if stream.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                s.open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, stats)
}

async fn connect(addr: SocketAddr) -> TcpStream {
    timeout(DEADLINE, TcpStream::connect(addr)).await.expect("connect timed out").expect("connect")
}

/// Reads exactly `n` bytes within the deadline.
async fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    timeout(DEADLINE, s.read_exact(&mut buf)).await.expect("read timed out").expect("read");
    buf
}

/// Writes `msg` and reads its echo.
async fn round_trip(s: &mut TcpStream, msg: &[u8]) {
    timeout(DEADLINE, s.write_all(msg)).await.expect("write timed out").expect("write");
    assert_eq!(read_n(s, msg.len()).await, msg);
}

/// Asserts nothing arrives for a while.
async fn assert_quiet(s: &mut TcpStream) {
    let mut buf = [0u8; 64];
    match timeout(QUIET, s.read(&mut buf)).await {
        Err(_) => {}
        Ok(r) => panic!("expected silence, got {r:?}"),
    }
}

/// Asserts the peer closes the stream (end of stream or an error) within the
/// deadline; bytes before the close are skipped.
async fn assert_closed(s: &mut TcpStream) {
    let end = Instant::now() + DEADLINE;
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(end, s.read(&mut buf)).await {
            Err(_) => panic!("stream not closed within {DEADLINE:?}"),
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn passes_bytes_both_ways() {
    let (upstream, stats) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    assert!(proxy.addr().ip().is_loopback());
    assert_eq!(proxy.fault(), Fault::None);
    let mut c = connect(proxy.addr()).await;
    round_trip(&mut c, b"hello").await;
    assert_eq!(proxy.accepted(), 1);
    assert_eq!(proxy.connections(), 1);

    // More than the proxy buffers, written and read at once.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let (mut r, mut w) = c.split();
    let write = async {
        w.write_all(&big).await.unwrap();
    };
    let read = async {
        let mut got = vec![0u8; big.len()];
        r.read_exact(&mut got).await.unwrap();
        got
    };
    let ((), got) = timeout(DEADLINE, async { tokio::join!(write, read) }).await.expect("big echo timed out");
    assert!(got == big, "echo differs");
    assert_eq!(stats.received.load(Ordering::SeqCst), 5 + big.len() as u64);

    // The client's close reaches the server.
    drop(c);
    eventually("upstream closed", DEADLINE, || stats.open.load(Ordering::SeqCst) == 0).await;
    eventually("no open connections", DEADLINE, || proxy.connections() == 0).await;
}

#[tokio::test]
async fn delay_holds_each_chunk() {
    let (upstream, _) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let mut c = connect(proxy.addr()).await;
    round_trip(&mut c, b"warm").await;

    let delay = Duration::from_millis(150);
    proxy.set_fault(Fault::Delay(delay));
    assert_eq!(proxy.fault(), Fault::Delay(delay));
    let start = Instant::now();
    round_trip(&mut c, b"slow").await;
    // Delayed on the way there and on the way back.
    assert!(start.elapsed() >= 2 * delay, "round trip took {:?}", start.elapsed());

    // Order is kept across chunks.
    for i in 0..5u8 {
        c.write_all(&[i]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(read_n(&mut c, 5).await, [0, 1, 2, 3, 4]);

    proxy.set_fault(Fault::None);
    let start = Instant::now();
    round_trip(&mut c, b"fast").await;
    assert!(start.elapsed() < DEADLINE);
}

#[tokio::test]
async fn blackhole_swallows_bytes_until_cleared() {
    let (upstream, stats) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let mut c = connect(proxy.addr()).await;
    round_trip(&mut c, b"hello").await;

    proxy.set_fault(Fault::Blackhole);
    c.write_all(b"lost").await.unwrap();
    assert_quiet(&mut c).await;
    assert_eq!(stats.received.load(Ordering::SeqCst), 5, "blackholed bytes reached upstream");

    // A new connection is accepted but not connected upstream.
    let mut c2 = connect(proxy.addr()).await;
    eventually("second accept", DEADLINE, || proxy.accepted() == 2).await;
    c2.write_all(b"early").await.unwrap();
    assert_quiet(&mut c2).await;
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(proxy.connections(), 2);

    // Cleared: the same connections carry bytes again.
    proxy.set_fault(Fault::None);
    round_trip(&mut c, b"back").await;
    eventually("second upstream connection", DEADLINE, || stats.accepted.load(Ordering::SeqCst) == 2).await;
    round_trip(&mut c2, b"late").await;
    assert_eq!(stats.received.load(Ordering::SeqCst), 5 + 4 + 4);
}

#[tokio::test]
async fn blackhole_swallows_the_echo_too() {
    let (upstream, stats) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let mut c = connect(proxy.addr()).await;
    round_trip(&mut c, b"hi").await;

    // The write goes through with Delay, the echo comes back into a blackhole.
    proxy.set_fault(Fault::Delay(Duration::from_millis(200)));
    c.write_all(b"gone").await.unwrap();
    eventually("upstream got the bytes", DEADLINE, || stats.received.load(Ordering::SeqCst) == 6).await;
    proxy.set_fault(Fault::Blackhole);
    assert_quiet(&mut c).await;
    proxy.set_fault(Fault::None);
    round_trip(&mut c, b"again").await;
}

#[tokio::test]
async fn refuse_closes_open_and_new_connections() {
    let (upstream, stats) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let mut c = connect(proxy.addr()).await;
    round_trip(&mut c, b"hello").await;

    proxy.set_fault(Fault::Refuse);
    assert_closed(&mut c).await;
    eventually("upstream side closed", DEADLINE, || stats.open.load(Ordering::SeqCst) == 0).await;
    eventually("no open connections", DEADLINE, || proxy.connections() == 0).await;

    for _ in 0..3 {
        let mut n = connect(proxy.addr()).await;
        assert_closed(&mut n).await;
    }
    eventually("refused connections counted", DEADLINE, || proxy.accepted() == 4).await;
    assert_eq!(stats.accepted.load(Ordering::SeqCst), 1, "a refused connection reached upstream");
    assert_eq!(proxy.connections(), 0);

    proxy.set_fault(Fault::None);
    let mut c = connect(proxy.addr()).await;
    round_trip(&mut c, b"healed").await;
}

#[tokio::test]
async fn reset_all_cuts_open_connections_and_keeps_accepting() {
    let (upstream, stats) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let mut a = connect(proxy.addr()).await;
    let mut b = connect(proxy.addr()).await;
    round_trip(&mut a, b"a").await;
    round_trip(&mut b, b"b").await;
    assert_eq!(proxy.connections(), 2);

    proxy.reset_all();
    assert_closed(&mut a).await;
    assert_closed(&mut b).await;
    eventually("upstream sides closed", DEADLINE, || stats.open.load(Ordering::SeqCst) == 0).await;
    eventually("no open connections", DEADLINE, || proxy.connections() == 0).await;
    assert_eq!(proxy.fault(), Fault::None);

    let mut c = connect(proxy.addr()).await;
    round_trip(&mut c, b"after").await;
    assert_eq!(proxy.accepted(), 3);
    assert_eq!(proxy.connections(), 1);
}

#[tokio::test]
async fn drop_after_forwards_exactly_n_bytes() {
    let (upstream, stats) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    proxy.set_fault(Fault::DropAfter(10));
    let mut c = connect(proxy.addr()).await;
    let msg: Vec<u8> = (0..100u8).collect();
    c.write_all(&msg[..4]).await.unwrap();
    assert_eq!(read_n(&mut c, 4).await, msg[..4]);
    c.write_all(&msg[4..]).await.unwrap();
    assert_eq!(read_n(&mut c, 6).await, msg[4..10]);
    assert_quiet(&mut c).await;
    assert_eq!(stats.received.load(Ordering::SeqCst), 10);

    // Still open: clearing the fault resumes it.
    proxy.set_fault(Fault::None);
    round_trip(&mut c, b"more").await;

    // A fresh budget on the open connection.
    proxy.set_fault(Fault::DropAfter(3));
    c.write_all(b"abcdef").await.unwrap();
    assert_eq!(read_n(&mut c, 3).await, b"abc");
    assert_quiet(&mut c).await;
    assert_eq!(stats.received.load(Ordering::SeqCst), 10 + 4 + 3);
}

#[tokio::test]
async fn dropping_the_proxy_closes_everything() {
    let (upstream, stats) = echo_server().await;
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let addr = proxy.addr();
    let mut a = connect(addr).await;
    let mut b = connect(addr).await;
    round_trip(&mut a, b"a").await;
    round_trip(&mut b, b"b").await;
    proxy.set_fault(Fault::Blackhole);
    b.write_all(b"held").await.unwrap();
    assert_quiet(&mut b).await;
    assert_eq!(stats.open.load(Ordering::SeqCst), 2);

    drop(proxy);
    assert_closed(&mut a).await;
    assert_closed(&mut b).await;
    eventually("upstream sides closed", DEADLINE, || stats.open.load(Ordering::SeqCst) == 0).await;

    // The listener is gone too.
    let end = Instant::now() + DEADLINE;
    loop {
        match timeout(DEADLINE, TcpStream::connect(addr)).await.expect("connect timed out") {
            Err(_) => break,
            Ok(mut s) => assert_closed(&mut s).await,
        }
        assert!(Instant::now() < end, "proxy still listening after drop");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
