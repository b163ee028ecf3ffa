//! Bad input and faults: each closes only the connection concerned, with a
//! reason, and the server and other connections carry on.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::*;
use edgehive_viaduct::ws::connect;
use edgehive_viaduct::{CloseReason, ConnConfig, Protocol, Server, ServerConfig, ServerStats, WriteError};
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::Message as Frame;

/// A healthy connection keeps working after a neighbour was closed.
async fn assert_healthy(pki: &Pki, srv: &mut edgehive_viaduct::Server) {
    let (client, accepted) = pair(pki, srv, "healthy").await;
    assert_delivers(&accepted.tx, &mut { client.rx }).await;
}

#[tokio::test]
async fn oversize_frame_closes_that_connection_only() {
    let pki = Pki::new();
    let cfg = ConnConfig { max_frame_size: 64 * 1024, ..ConnConfig::default() };
    let mut srv = server(&pki, cfg).await;
    let (other_client, other) = pair(&pki, &mut srv, "bystander").await;

    let mut raw = raw_ws(&pki, srv.local_addr(), "big").await;
    let (_tx, mut rx) = srv.accept().await.unwrap().split();
    let _ = raw.send(Frame::Text("x".repeat(200 * 1024).into())).await;
    assert!(rx.recv().await.is_none());
    assert_eq!(rx.close_reason(), Some(CloseReason::FrameTooLarge { limit: 64 * 1024 }));

    // The bystander still talks.
    let (otx, _orx) = other.split();
    let (_octx, mut ocrx) = other_client.split();
    otx.write(pod("ok")).await.unwrap();
    assert!(ocrx.recv().await.is_some());
    assert_healthy(&pki, &mut srv).await;
}

#[tokio::test]
async fn malformed_frames_close_the_connection_with_a_reason() {
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    let cases: [(&str, &[u8]); 4] = [
        ("not json", b"hello edge"),
        ("truncated", br#"{"header":{"msg_id":"x","timestamp":1},"route":{"#),
        ("wrong shape", br#"{"header":"nope"}"#),
        ("array", br#"[1,2,3]"#),
    ];
    for (what, bytes) in cases {
        let mut raw = raw_ws(&pki, srv.local_addr(), "bad").await;
        let (_tx, mut rx) = srv.accept().await.unwrap().split();
        raw.send(Frame::Binary(bytes.to_vec().into())).await.unwrap();
        assert!(rx.recv().await.is_none(), "{what}: connection must close");
        let reason = rx.close_reason().unwrap();
        assert!(matches!(reason, CloseReason::Malformed(_)), "{what}: {reason:?}");
        // The peer sees the connection end.
        let end =
            tokio::time::timeout(Duration::from_secs(10), async { while let Some(Ok(_)) = raw.next().await {} }).await;
        assert!(end.is_ok(), "{what}: peer not disconnected");
    }
    assert_healthy(&pki, &mut srv).await;
}

#[tokio::test]
async fn bad_certificates_fail_the_handshake() {
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    let addr = srv.local_addr();

    // A certificate from another CA.
    let foreign = edgehive_testkit::pki::TestCa::new("someone-else");
    let mut cfg = client_config(&pki, addr, "intruder");
    let intruder = foreign.node("intruder");
    cfg.tls.identity.cert_chain = vec![intruder.cert];
    cfg.tls.identity.key = intruder.key;
    let err = connect(&cfg).await.unwrap_err();
    assert!(
        matches!(err, edgehive_viaduct::ConnectError::Tls { .. } | edgehive_viaduct::ConnectError::Handshake { .. }),
        "{err}"
    );

    // An expired certificate.
    let expired = pki.ca.expired_node("old");
    let mut cfg = client_config(&pki, addr, "old");
    cfg.tls.identity.cert_chain = vec![expired.cert];
    cfg.tls.identity.key = expired.key;
    assert!(connect(&cfg).await.is_err());

    // No certificate at all.
    if let Ok(mut tls) = raw_tls(&pki, addr, None).await {
        let mut buf = [0u8; 16];
        // The server refuses: the stream ends or errors, it never carries data.
        assert!(matches!(tls.read(&mut buf).await, Ok(0) | Err(_)));
    }

    eventually("three TLS failures counted", || srv.stats().tls_failures() == 3).await;
    assert_eq!(srv.stats().accepted(), 0);
    assert_healthy(&pki, &mut srv).await;
}

#[tokio::test]
async fn a_client_refuses_a_server_from_another_ca() {
    let pki = Pki::new();
    let srv = server(&pki, ConnConfig::default()).await;
    let other = Pki::new();
    let cfg = client_config(&other, srv.local_addr(), "edge-1");
    let err = connect(&cfg).await.unwrap_err();
    assert!(err.to_string().contains("TLS handshake"), "{err}");
}

#[tokio::test]
async fn silent_peer_is_dropped_at_the_handshake_deadline() {
    let pki = Pki::new();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.handshake_timeout = Duration::from_millis(300);
    let mut srv = Server::bind_ws(cfg).await.unwrap();
    let mut silent = tokio::net::TcpStream::connect(srv.local_addr()).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(30)).await, "not dropped");
    // The connection ends when its task counts it; the count may trail the
    // close by a moment.
    eventually("the timeout counted", || srv.stats().handshake_timeouts() == 1).await;
    assert_eq!(srv.stats().pending_handshakes(), 0);
    let mut registry = prometheus_client::registry::Registry::with_prefix("edgehive");
    ServerStats::register(&[(Protocol::WebSocket, srv.shared_stats())], &mut registry);
    let mut metrics = String::new();
    prometheus_client::encoding::text::encode(&mut metrics, &registry).unwrap();
    assert!(
        metrics.contains("\nedgehive_viaduct_handshakes_total{transport=\"websocket\",result=\"timeout\"} 1\n"),
        "{metrics}"
    );
    assert_healthy(&pki, &mut srv).await;
}

/// A server whose handshakes never time out during the test (the default
/// 5 s could pass on a slow machine), so that only eviction makes room.
async fn patient_server(pki: &Pki, configure: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.handshake_timeout = Duration::from_secs(600);
    configure(&mut cfg);
    Server::bind_ws(cfg).await.unwrap()
}

/// Issue 14: about 4,100 idle connections used to fill every handshake slot
/// and make the server refuse every edge's reconnect. Now each new
/// connection evicts the oldest pending handshake of its source (all of
/// these come from 127.0.0.1), so the edge gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_does_not_lock_an_edge_out() {
    const FLOOD: usize = 5_000;
    let pki = Pki::new();
    let mut srv = patient_server(&pki, |_| {}).await;
    let per_source = edgehive_viaduct::DEFAULT_MAX_PENDING_HANDSHAKES_PER_SOURCE as u64;
    let mut flood = silent_connections(srv.local_addr(), FLOOD).await;

    let edge = async {
        let client = connect(&client_config(&pki, srv.local_addr(), "edge-1")).await.unwrap();
        let accepted = srv.accept().await.unwrap();
        (client, accepted)
    };
    let (client, accepted) =
        tokio::time::timeout(Duration::from_secs(2), edge).await.expect("the edge got through within 2 s");
    assert_eq!(accepted.peer().node_id, "edge-1");
    assert_delivers(&accepted.tx, &mut { client.rx }).await;

    // Every connection past the per-source limit evicted one, and eviction
    // closed the evicted sockets (the first one, long before any deadline).
    eventually("the flood evicted", || srv.stats().evicted_per_source() >= FLOOD as u64 - per_source).await;
    assert!(closed_within(&mut flood[0], Duration::from_secs(30)).await, "the oldest was closed");
    assert!(srv.stats().pending_handshakes() <= per_source);
    assert_eq!(srv.stats().refused_busy(), 0);
    assert_eq!(srv.stats().handshake_timeouts(), 0);
}

/// A server told that any lag is too much: behind on its work, its
/// handshake budget soon cut to one.
async fn behind_server(pki: &Pki) -> Server {
    patient_server(pki, |c| {
        c.handshake_timeout = Duration::from_secs(10);
        c.max_lag = Some(Duration::ZERO);
        c.min_handshake_budget = 1;
    })
    .await
}

/// A server behind on its work (told that any lag is too much) runs at
/// most its handshake budget at once: with a silent connection holding it,
/// an edge's connection is held unread for up to 2 s and then closed before
/// TLS (the edge retries after its backoff); once the silent one has taken
/// half the deadline, the edge's next attempt gives it up and gets in.
#[tokio::test]
async fn a_server_behind_closes_connections_past_its_budget_until_the_oldest_is_stale() {
    let pki = Pki::new();
    let mut srv = behind_server(&pki).await;
    eventually("the budget cut to its floor", || srv.stats().handshake_budget() == 1).await;
    let mut silent = silent_connections(srv.local_addr(), 1).await;
    let opened = tokio::time::Instant::now();
    eventually("the silent one pending", || srv.stats().pending_handshakes() == 1).await;
    let cfg = client_config(&pki, srv.local_addr(), "edge-1");
    let err = tokio::time::timeout(Duration::from_secs(5), connect(&cfg))
        .await
        .expect("refused after its hold, not left to time out")
        .unwrap_err();
    assert!(opened.elapsed() < Duration::from_secs(5), "the silent one is still young");
    assert!(err.to_string().contains("TLS handshake"), "{err}");
    eventually("the refusal counted", || srv.stats().refused_overload() == 1).await;
    assert!(still_open(&silent[0]));

    tokio::time::sleep_until(opened + Duration::from_secs(5)).await;
    assert_healthy(&pki, &mut srv).await;
    assert_eq!(srv.stats().evicted_budget(), 1);
    assert!(closed_within(&mut silent[0], Duration::from_secs(30)).await, "the stale one is closed");
}

/// Connections a server behind has no slot for wait, unread, and are taken
/// as soon as a slot frees: nothing is refused, and the session ticket in a
/// waiting ClientHello still resumes (refused, the edge would have spent it).
#[tokio::test]
async fn a_server_behind_holds_a_connection_until_a_slot_frees_and_its_session_resumes() {
    let pki = Pki::new();
    let mut srv = behind_server(&pki).await;
    let client = edgehive_viaduct::ws::WsClient::new(client_config(&pki, srv.local_addr(), "edge-held")).unwrap();
    let first = client.connect().await.unwrap();
    let _first_accepted = srv.accept().await.unwrap();
    drop(first);
    eventually("the budget cut to its floor", || srv.stats().handshake_budget() == 1).await;
    let silent = silent_connections(srv.local_addr(), 1).await;
    eventually("the silent one pending", || srv.stats().pending_handshakes() == 1).await;

    // Two dials wait, first come first served. The silent connection goes
    // away within their wait.
    let other = edgehive_viaduct::ws::WsClient::new(client_config(&pki, srv.local_addr(), "edge-behind")).unwrap();
    let a = tokio::spawn(async move { client.connect().await });
    eventually("the first dial waiting", || srv.stats().waiting_handshakes() == 1).await;
    let b = tokio::spawn(async move { other.connect().await });
    eventually("the second behind it", || srv.stats().waiting_handshakes() == 2).await;
    assert_eq!(srv.stats().refused_overload(), 0, "waiting, not refused");
    drop(silent);
    let held = a.await.unwrap().expect("the held edge got in once the slot freed");
    let behind = b.await.unwrap().expect("and so did the one behind it");
    let mut names =
        vec![srv.accept().await.unwrap().peer().node_id.clone(), srv.accept().await.unwrap().peer().node_id.clone()];
    names.sort();
    assert_eq!(names, ["edge-behind", "edge-held"]);
    assert!(held.peer().resumed, "the ticket in the held ClientHello resumed");
    assert!(!behind.peer().resumed, "a first connection is a full handshake");
    assert_eq!(srv.stats().refused_overload(), 0);
}

/// A flood from one address while the server is behind fills only that
/// address's share of the waiting room: past it its connections are closed
/// at once, and an edge from another address waits in the room and gets
/// the next free slot, ahead of the flood's later connections.
#[tokio::test]
async fn a_flood_while_behind_fills_only_its_share_of_the_waiting_room() {
    let pki = Pki::new();
    let mut srv = patient_server(&pki, |c| {
        c.handshake_timeout = Duration::from_secs(10);
        c.max_lag = Some(Duration::ZERO);
        c.min_handshake_budget = 1;
        c.max_pending_handshakes_per_source = 2;
    })
    .await;
    eventually("the budget cut to its floor", || srv.stats().handshake_budget() == 1).await;
    let holder = silent_connections(srv.local_addr(), 1).await;
    eventually("the flood's first pending", || srv.stats().pending_handshakes() == 1).await;
    let mut flood = silent_connections(srv.local_addr(), 6).await;
    eventually("its share waiting", || srv.stats().waiting_handshakes() == 2).await;
    for s in &mut flood[2..] {
        assert!(closed_within(s, Duration::from_secs(5)).await, "past its share: closed at once");
    }
    assert_eq!(srv.stats().refused_overload(), 4);

    let mut cfg = client_config(&pki, srv.local_addr(), "edge-elsewhere");
    cfg.local_ip = Some("127.0.0.2".parse().unwrap());
    let edge = tokio::spawn(async move { connect(&cfg).await });
    eventually("the edge waiting beside the flood", || srv.stats().waiting_handshakes() == 3).await;
    // The holder goes; the two of the flood that waited come first, then the edge.
    drop(holder);
    drop(flood);
    let client = edge.await.unwrap().expect("the edge got in");
    let accepted = srv.accept().await.unwrap();
    assert_eq!(accepted.peer().node_id, "edge-elsewhere");
    assert_delivers(&accepted.tx, &mut { client.rx }).await;
    assert_eq!(srv.stats().refused_overload(), 4, "the edge was not refused");
}

#[tokio::test]
async fn a_source_at_its_limit_loses_its_oldest_pending_handshake() {
    let pki = Pki::new();
    let mut srv = patient_server(&pki, |c| c.max_pending_handshakes_per_source = 2).await;
    let mut silent = silent_connections(srv.local_addr(), 3).await;
    assert!(closed_within(&mut silent[0], Duration::from_secs(30)).await, "the oldest is closed at once");
    assert_eq!(srv.stats().evicted_per_source(), 1);
    assert!(still_open(&silent[1]) && still_open(&silent[2]), "the younger ones are left alone");
    // A real edge from the same address evicts the next oldest and gets in.
    assert_healthy(&pki, &mut srv).await;
    assert!(closed_within(&mut silent[1], Duration::from_secs(30)).await);
    assert!(still_open(&silent[2]));
    assert_eq!(srv.stats().evicted_per_source(), 2);
    assert_eq!(srv.stats().evicted_global(), 0);
}

#[tokio::test]
async fn a_full_server_loses_its_oldest_pending_handshake() {
    let pki = Pki::new();
    let mut srv = patient_server(&pki, |c| {
        c.max_pending_handshakes = 3;
        c.max_pending_handshakes_per_source = 100;
    })
    .await;
    let mut silent = silent_connections(srv.local_addr(), 4).await;
    assert!(closed_within(&mut silent[0], Duration::from_secs(30)).await, "the oldest is closed at once");
    assert_eq!(srv.stats().evicted_global(), 1);
    assert!(silent[1..].iter().all(still_open));
    assert_healthy(&pki, &mut srv).await;
    assert!(closed_within(&mut silent[1], Duration::from_secs(30)).await);
    assert_eq!(srv.stats().evicted_global(), 2);
    assert_eq!(srv.stats().evicted_per_source(), 0);
}

#[tokio::test]
async fn vanished_peer_is_dropped_at_the_read_deadline() {
    let pki = Pki::new();
    let cfg = ConnConfig { read_timeout: Some(Duration::from_millis(300)), ..ConnConfig::default() };
    let mut srv = server(&pki, cfg).await;
    // Connects, then never sends another byte (and never closes).
    let _raw = raw_ws(&pki, srv.local_addr(), "ghost").await;
    let (_tx, mut rx) = srv.accept().await.unwrap().split();
    assert!(rx.recv().await.is_none());
    assert_eq!(rx.close_reason(), Some(CloseReason::ReadTimeout(Duration::from_millis(300))));
}

#[tokio::test]
async fn pings_keep_an_idle_healthy_connection_alive() {
    let pki = Pki::new();
    let cfg = ConnConfig { read_timeout: Some(Duration::from_millis(400)), ..ConnConfig::default() };
    let mut srv = server(&pki, cfg).await;
    let mut ccfg = client_config(&pki, srv.local_addr(), "quiet");
    ccfg.conn.ping_interval = Some(Duration::from_millis(100));
    let client = connect(&ccfg).await.unwrap();
    let accepted = srv.accept().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!accepted.tx.is_closed(), "pings must feed the read deadline");
    assert!(!client.tx.is_closed());
}

#[tokio::test]
async fn a_peer_that_stops_reading_is_disconnected_and_others_are_not_slowed() {
    let pki = Pki::new();
    let cfg = ConnConfig { write_timeout: Duration::from_millis(500), send_queue: 64, ..ConnConfig::default() };
    let mut srv = server(&pki, cfg).await;
    // Connects and never reads.
    let _stuck = raw_ws(&pki, srv.local_addr(), "stuck").await;
    let (stuck_tx, _stuck_rx) = srv.accept().await.unwrap().split();
    let (client, healthy) = pair(&pki, &mut srv, "healthy").await;
    let (htx, _hrx) = healthy.split();
    let (_ctx, mut crx) = client.split();

    let big = edgehive_model::Content::from_json(format!("\"{}\"", "p".repeat(64 * 1024))).unwrap();
    let mut full_seen = false;
    let mut sent_healthy = 0;
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while !stuck_tx.is_closed() {
        assert!(tokio::time::Instant::now() < end, "stuck peer never disconnected");
        match stuck_tx.try_write(pod("flood").with_content(big.clone())) {
            Ok(()) => {}
            Err(WriteError::Full { message, .. }) => {
                full_seen = true;
                assert_eq!(message.route.resource, "default/pod/flood", "the message is handed back");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(WriteError::Closed { .. }) => break,
            Err(e) => panic!("{e}"),
        }
        // Meanwhile the healthy node gets its messages promptly.
        htx.write(pod("h")).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), crx.recv()).await.expect("healthy peer slowed").unwrap();
        sent_healthy += 1;
    }
    assert!(full_seen, "the stuck peer's queue must fill");
    assert!(sent_healthy > 0);
    let reason = stuck_tx.closed().await;
    assert_eq!(reason, CloseReason::WriteTimeout(Duration::from_millis(500)));
}

#[tokio::test]
async fn random_frames_never_bring_the_server_down() {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    let mut runner = TestRunner::default();
    let strategy = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        // Near-messages: valid JSON objects with odd fields.
        "[a-z{}:\",\\[\\] 0-9]{0,64}".prop_map(|s| format!("{{\"header\":{{{s}}}}}").into_bytes()),
    ];
    let frames: Vec<Vec<u8>> = (0..24).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect();
    for bytes in frames {
        let mut raw = raw_ws(&pki, srv.local_addr(), "fuzz").await;
        let (_tx, mut rx) = srv.accept().await.unwrap().split();
        raw.send(Frame::Binary(bytes.clone().into())).await.unwrap();
        // Either it was a valid message (delivered) or the connection closed.
        match rx.recv().await {
            Some(m) => assert_eq!(edgehive_model::Message::decode(&bytes).unwrap(), m),
            None => assert!(matches!(rx.close_reason(), Some(CloseReason::Malformed(_)))),
        }
    }
    assert_healthy(&pki, &mut srv).await;
}
