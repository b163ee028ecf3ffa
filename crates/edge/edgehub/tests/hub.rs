//! EdgeHub on a real beehive against a viaduct server on 127.0.0.1: routing
//! both ways, keepalives (messages, or pings when the cloud agrees),
//! endpoints tried in turn, status reports kept coalesced while the cloud is
//! away, requests refused at once, and the upstream rate limit.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use edgehive_beehive::{Beehive, Context, FnModule, ModuleContext, ModuleFuture};
use edgehive_edgehub::{CloudEndpoint, EdgeCerts, EdgeHub, EdgeHubConfig, Transport};
use edgehive_model::{Content, Message, group, op, source, well_known};
use edgehive_testkit::fixtures::free_port;
use edgehive_testkit::pki::TestCa;
use edgehive_viaduct::{Connection, Identity, Server, ServerConfig, ServerTls};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

struct Cloud {
    ca: TestCa,
}

impl Cloud {
    fn new() -> Cloud {
        Cloud { ca: TestCa::new("edgehub-test-ca") }
    }

    async fn server(&self, addr: SocketAddr, ping_keepalive: bool) -> Server {
        let s = self.ca.server();
        let tls = ServerTls {
            identity: Identity { cert_chain: vec![s.cert.clone()], key: s.key.clone_key() },
            client_ca: vec![self.ca.cert.clone()],
        };
        let mut cfg = ServerConfig::new(addr, tls);
        cfg.ping_keepalive = ping_keepalive;
        // An edgehive cloud agrees to pings and to the inventory together.
        if ping_keepalive {
            cfg.features = vec![edgehive_viaduct::features::INVENTORY.to_owned()];
        }
        Server::bind_ws(cfg).await.unwrap()
    }

    fn certs(&self) -> EdgeCerts {
        let node = self.ca.node("edge-1");
        EdgeCerts {
            ca: self.ca.cert.clone(),
            cert: node.cert,
            key: node.key,
            not_before: SystemTime::now(),
            not_after: SystemTime::now() + Duration::from_secs(86400),
        }
    }
}

/// A beehive with EdgeHub and a `metamanager` that records what it gets.
struct Edge {
    ctx: Context,
    got: Arc<Mutex<Vec<Message>>>,
    /// EdgeHub's metrics, registered as `edgehive edge` does.
    metrics: prometheus_client::registry::Registry,
    certs: tokio::sync::watch::Sender<Arc<EdgeCerts>>,
    /// `EdgeHub::link_state`.
    link: tokio::sync::watch::Receiver<Option<edgehive_model::Text>>,
    _stop: tokio_util::sync::DropGuard,
}

fn edge(cloud: &Cloud, cfg: EdgeHubConfig) -> Edge {
    let (certs, rx) = tokio::sync::watch::channel(Arc::new(cloud.certs()));
    let hub = Arc::new(EdgeHub::new(cfg, rx));
    let link = hub.link_state();
    let mut metrics = prometheus_client::registry::Registry::with_prefix("edgehive");
    hub.metrics().register(&mut metrics);
    let got: Arc<Mutex<Vec<Message>>> = Arc::default();
    let mut b = Beehive::builder();
    b.register(hub).unwrap();
    // Stand-ins for the modules the cloud's messages go to; all record in `got`.
    for (name, grp) in [(source::METAMANAGER, group::META), (source::EVENTBUS, group::BUS), (source::TWIN, group::TWIN)]
    {
        let got2 = got.clone();
        let m = FnModule::new(name, grp, move |mut ctx: ModuleContext, cancel: CancellationToken| {
            let got = got2.clone();
            Box::pin(async move {
                while let Some(m) = ctx.receive_until(&cancel).await {
                    got.lock().unwrap().push(m);
                }
                Ok(())
            }) as ModuleFuture
        });
        b.register(Arc::new(m)).unwrap();
    }
    let hive = b.build();
    let ctx = hive.context();
    let stop = CancellationToken::new();
    tokio::spawn(hive.run(stop.clone()));
    Edge { ctx, got, metrics, certs, link, _stop: stop.drop_guard() }
}

impl Edge {
    /// The value of one sample of the exported metrics, e.g.
    /// `edgehive_edgehub_throttled_total` (panics when there is none).
    fn metric(&self, series: &str) -> u64 {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.metrics).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
    }
}

fn config(servers: &[SocketAddr]) -> EdgeHubConfig {
    let endpoints =
        servers.iter().map(|a| CloudEndpoint { transport: Transport::WebSocket, server: a.to_string() }).collect();
    let mut cfg = EdgeHubConfig::new("edge-1", endpoints);
    cfg.backoff_base = Duration::from_millis(50);
    cfg.backoff_cap = Duration::from_millis(200);
    cfg.heartbeat = Duration::from_millis(300);
    cfg.ping_keepalive = false;
    cfg
}

async fn accept(server: &mut Server) -> Connection {
    tokio::time::timeout(WAIT, server.accept()).await.expect("the edge connects").unwrap()
}

async fn next(conn: &mut edgehive_viaduct::ConnRx) -> Message {
    tokio::time::timeout(WAIT, conn.recv()).await.expect("a message in time").unwrap()
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn status(name: &str, n: u32) -> Message {
    Message::new()
        .with_route(source::EDGED, group::META, format!("default/podstatus/{name}"), op::UPDATE)
        .with_content(Content::string(&n.to_string()))
}

#[tokio::test]
async fn it_keeps_alive_and_routes_both_ways() {
    let cloud = Cloud::new();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), false).await;
    let e = edge(&cloud, config(&[server.local_addr()]));
    let (tx, mut rx) = accept(&mut server).await.split();
    // A keepalive at once, then every heartbeat.
    for _ in 0..2 {
        let k = next(&mut rx).await;
        assert_eq!((k.route.operation.as_str(), k.route.resource.as_str()), (op::KEEPALIVE, "node"));
        assert_eq!(k.route.source, source::WEBSOCKET);
    }
    // The edge modules hear of the connection; the cloud's pod goes to MetaManager.
    let pod = Message::new()
        .with_route(source::EDGECONTROLLER, group::RESOURCE, "default/pod/p", op::INSERT)
        .with_resource_version("5");
    tx.write(pod.clone()).await.unwrap();
    eventually("connect event and pod reach metamanager", || {
        let got = e.got.lock().unwrap();
        got.iter().any(|m| m.content.as_text().as_deref() == Some(well_known::CLOUD_CONNECTED))
            && got.iter().any(|m| m.header.msg_id == pod.header.msg_id)
    })
    .await;
    // The cloud's `user` messages go to EventBus, `twin` ones to DeviceTwin.
    let user = Message::new().with_route(source::ROUTER, group::USER, "app/topic", op::PUBLISH);
    let twin = Message::new().with_route(source::DEVICECONTROLLER, group::TWIN, "membership", op::UPDATE);
    tx.write(user.clone()).await.unwrap();
    tx.write(twin.clone()).await.unwrap();
    eventually("user and twin messages reach their modules", || {
        let got = e.got.lock().unwrap();
        got.iter().any(|m| m.header.msg_id == user.header.msg_id)
            && got.iter().any(|m| m.header.msg_id == twin.header.msg_id)
    })
    .await;
    // A request from the edge gets the cloud's answer through its waiter.
    let asking = tokio::spawn({
        let ctx = e.ctx.clone();
        async move {
            let q = Message::new().with_route(source::METAMANAGER, group::META, "default/configmap/c", op::QUERY);
            ctx.send_sync(edgehive_edgehub::MODULE, q, WAIT).await
        }
    });
    let q = loop {
        let m = next(&mut rx).await;
        if m.route.operation == op::QUERY {
            break m;
        }
    };
    assert!(!q.header.sync, "written as asynchronous, as KubeEdge does");
    tx.write(q.response(Content::string("answer"))).await.unwrap();
    let answer = asking.await.unwrap().unwrap();
    assert_eq!(answer.content.as_text().as_deref(), Some("answer"));
    // The link's state says what the notices say. (The server goes first:
    // the edge would reconnect at once, its TLS session resumed, and the
    // state be back before it could be read.)
    assert!(e.link.borrow().is_some(), "connected");
    drop(server);
    tx.close();
    eventually("the state says disconnected", || e.link.borrow().is_none()).await;
}

#[tokio::test]
async fn while_the_cloud_is_away_reports_wait_coalesced_and_requests_fail_fast() {
    let cloud = Cloud::new();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let e = edge(&cloud, config(&[addr]));
    for (name, n) in [("a", 1), ("b", 1), ("a", 2), ("a", 3)] {
        e.ctx.send(edgehive_edgehub::MODULE, status(name, n)).await.unwrap();
    }
    // A request is refused at once, not after its deadline.
    let insert = Message::new().with_route(source::EDGED, group::META, "default/node/edge-1", op::INSERT);
    let started = tokio::time::Instant::now();
    let r = e.ctx.send_sync(edgehive_edgehub::MODULE, insert, WAIT).await.unwrap();
    assert_eq!(r.route.operation, op::ERROR);
    assert_eq!(r.content.as_text().as_deref(), Some("not connected"));
    assert!(started.elapsed() < WAIT / 2);
    eventually("reports kept", || e.metric("edgehive_edgehub_outbox_kept_total") == 4).await;

    // The cloud comes up: the latest report of each object, in first-report order.
    let mut server = cloud.server(addr, false).await;
    let (_tx, mut rx) = accept(&mut server).await.split();
    let mut reports = Vec::new();
    while reports.len() < 2 {
        let m = next(&mut rx).await;
        if m.route.operation == op::UPDATE {
            reports.push((m.route.resource.to_string(), m.content.as_text().unwrap().into_owned()));
        }
    }
    assert_eq!(reports, [("default/podstatus/a".into(), "3".into()), ("default/podstatus/b".into(), "1".into())]);
    assert_eq!(e.metric("edgehive_edgehub_outbox_coalesced_total"), 2);
    assert!(e.metric("edgehive_edgehub_dial_failures_total") >= 1);
}

#[tokio::test]
async fn endpoints_are_tried_in_turn() {
    let cloud = Cloud::new();
    let dead: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), false).await;
    let _e = edge(&cloud, config(&[dead, server.local_addr()]));
    let conn = accept(&mut server).await;
    assert_eq!(conn.peer().node_id, "edge-1");
}

#[tokio::test]
async fn with_a_cloud_that_agrees_pings_are_the_keepalive() {
    let cloud = Cloud::new();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), true).await;
    let mut cfg = config(&[server.local_addr()]);
    cfg.ping_keepalive = true;
    let e = edge(&cloud, cfg);
    let (_tx, mut rx) = accept(&mut server).await.split();
    assert!(rx.peer().ping_keepalive);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(rx.idle_for() < Duration::from_millis(700), "pings keep the link fresh: idle {:?}", rx.idle_for());
    assert!(tokio::time::timeout(Duration::from_millis(50), rx.recv()).await.is_err(), "no keepalive message");
    let connected = e.got.lock().unwrap().iter().find(|m| m.route.operation == op::CONNECT).cloned().unwrap();
    assert_eq!(connected.header.message_type, "session-liveness,inventory");
    assert!(well_known::connection_has(&connected.header.message_type, well_known::INVENTORY_AGREED));
}

#[tokio::test]
async fn upstream_messages_are_rate_limited_but_acks_are_not() {
    let cloud = Cloud::new();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), false).await;
    let mut cfg = config(&[server.local_addr()]);
    cfg.message_qps = 20.0;
    cfg.message_burst = 5;
    cfg.heartbeat = Duration::from_secs(60);
    let e = edge(&cloud, cfg);
    let (_tx, mut rx) = accept(&mut server).await.split();
    let _keepalive = next(&mut rx).await;
    // ACKs (answers to the cloud) skip the limiter.
    for _ in 0..30 {
        let ack = Message::new()
            .with_route(source::EDGECONTROLLER, group::RESOURCE, "default/pod/p", op::RESPONSE)
            .with_parent("cloud-msg")
            .with_content(Content::string("OK"));
        e.ctx.send(edgehive_edgehub::MODULE, ack).await.unwrap();
    }
    for _ in 0..30 {
        next(&mut rx).await;
    }
    assert_eq!(e.metric("edgehive_edgehub_throttled_total"), 0);
    // 25 reports at 20/s after a burst of 5 take at least a second.
    let started = tokio::time::Instant::now();
    for i in 0..25 {
        e.ctx.send(edgehive_edgehub::MODULE, status(&format!("p{i}"), 1)).await.unwrap();
    }
    for _ in 0..25 {
        next(&mut rx).await;
    }
    assert!(started.elapsed() >= Duration::from_millis(950), "{:?}", started.elapsed());
    assert!(e.metric("edgehive_edgehub_throttled_total") > 0);
}

#[tokio::test]
async fn an_ack_passes_reports_the_rate_limit_holds() {
    let cloud = Cloud::new();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), false).await;
    let mut cfg = config(&[server.local_addr()]);
    // One report now, the next in 100 s: the rest are held for the test.
    cfg.message_qps = 0.01;
    cfg.message_burst = 1;
    cfg.heartbeat = Duration::from_secs(60);
    let e = edge(&cloud, cfg);
    let (tx, mut rx) = accept(&mut server).await.split();
    let _keepalive = next(&mut rx).await;
    for i in 0..20 {
        e.ctx.send(edgehive_edgehub::MODULE, status(&format!("p{i}"), 1)).await.unwrap();
    }
    assert_eq!(next(&mut rx).await.route.resource, "default/podstatus/p0");
    eventually("the reports behind the held one are read", || e.metric("edgehive_edgehub_upstream_line") == 18).await;
    // The ACK sent after them is written at once, ahead of them.
    let ack = Message::new()
        .with_route(source::METAMANAGER, group::RESOURCE, "default/pod/p", op::RESPONSE)
        .with_parent("cloud-msg")
        .with_content(Content::string("OK"));
    e.ctx.send(edgehive_edgehub::MODULE, ack).await.unwrap();
    let got = next(&mut rx).await;
    assert_eq!(got.route.operation, op::RESPONSE);
    assert_eq!(got.parent_id().map(|t| t.as_str()), Some("cloud-msg"));
    assert!(e.metric("edgehive_edgehub_throttled_total") >= 1);
    // Lost with reports in line: they wait in the outbox, none dropped.
    tx.close();
    drop(rx);
    drop(server);
    eventually("the held reports wait for the next link", || {
        e.metric("edgehive_edgehub_connected") == 0 && e.metric("edgehive_edgehub_outbox_depth") == 19
    })
    .await;
}

#[tokio::test]
async fn a_renewed_certificate_is_used_at_once() {
    let cloud = Cloud::new();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), false).await;
    let e = edge(&cloud, config(&[server.local_addr()]));
    let (_tx, mut first_rx) = accept(&mut server).await.split();
    // The keeper publishes a renewed certificate: the hub reconnects with it.
    e.certs.send_replace(Arc::new(cloud.certs()));
    let second = accept(&mut server).await;
    assert_eq!(second.peer().node_id, "edge-1");
    assert!(
        tokio::time::timeout(WAIT, async { while first_rx.recv().await.is_some() {} }).await.is_ok(),
        "the old link is closed"
    );
    assert_eq!(e.metric("edgehive_edgehub_cert_reconnects_total"), 1);
    assert_eq!(e.metric("edgehive_edgehub_disconnects_total"), 0, "not counted as a lost link");
}

#[tokio::test]
async fn it_connects_over_quic() {
    let cloud = Cloud::new();
    let s = cloud.ca.server();
    let tls = ServerTls {
        identity: Identity { cert_chain: vec![s.cert.clone()], key: s.key.clone_key() },
        client_ca: vec![cloud.ca.cert.clone()],
    };
    let mut server = Server::bind_quic(ServerConfig::new("127.0.0.1:0".parse().unwrap(), tls)).await.unwrap();
    let endpoints = vec![CloudEndpoint { transport: Transport::Quic, server: server.local_addr().to_string() }];
    let mut cfg = EdgeHubConfig::new("edge-1", endpoints);
    cfg.ping_keepalive = false;
    let _e = edge(&cloud, cfg);
    let conn = accept(&mut server).await;
    assert_eq!(conn.peer().protocol, edgehive_viaduct::Protocol::Quic);
    let (_tx, mut rx) = conn.split();
    assert_eq!(next(&mut rx).await.route.operation, op::KEEPALIVE);
}

/// The next status report the cloud receives (keepalives come between).
async fn next_report(rx: &mut edgehive_viaduct::ConnRx) -> Message {
    let report = async {
        loop {
            let m = next(rx).await;
            if m.route.operation == op::UPDATE {
                return m;
            }
        }
    };
    tokio::time::timeout(WAIT, report).await.expect("a status report in time")
}

/// CloudHub's answer to a message it could not hand to its controller in time.
fn busy(m: &Message) -> Message {
    let mut b = m.error_response(&format!("edgecontroller {}", well_known::CLOUD_BUSY));
    b.route.source = edgehive_model::Text::from(source::CLOUDHUB);
    b
}

/// A status report CloudHub was too busy to take goes again, as its
/// object's newest; a refused report since replaced by a newer one does not
/// (the newer one stands), nor one the controller itself refused.
#[tokio::test]
async fn a_status_report_the_cloud_was_too_busy_for_goes_again() {
    let cloud = Cloud::new();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), false).await;
    let e = edge(&cloud, config(&[server.local_addr()]));
    let (tx, mut rx) = accept(&mut server).await.split();
    let text = |m: &Message| (m.route.resource.to_string(), m.content.as_text().unwrap().into_owned());
    e.ctx.send(edgehive_edgehub::MODULE, status("a", 1)).await.unwrap();
    let first = next_report(&mut rx).await;
    tx.write(busy(&first)).await.unwrap();
    let again = next_report(&mut rx).await;
    assert_eq!(text(&again), ("default/podstatus/a".to_owned(), "1".to_owned()));
    eventually("counted", || e.metric("edgehive_edgehub_busy_retried_total") == 1).await;
    // A newer report of the same pod, then a refusal of the older one.
    e.ctx.send(edgehive_edgehub::MODULE, status("a", 2)).await.unwrap();
    let second = next_report(&mut rx).await;
    assert_eq!(text(&second).1, "2");
    tx.write(busy(&again)).await.unwrap();
    // The controller's own busy answer (its node's share of requests was
    // waiting) is read as CloudHub's.
    let mut controller_busy = busy(&second);
    controller_busy.route.source = edgehive_model::Text::from(source::EDGECONTROLLER);
    tx.write(controller_busy).await.unwrap();
    let third = next_report(&mut rx).await;
    assert_eq!(text(&third), ("default/podstatus/a".to_owned(), "2".to_owned()));
    // The controller's refusal is an answer, not a retry; and once a
    // report is answered, no refusal brings it back.
    tx.write(third.error_response("forbidden")).await.unwrap();
    tx.write(busy(&third)).await.unwrap();
    e.ctx.send(edgehive_edgehub::MODULE, status("b", 1)).await.unwrap();
    assert_eq!(text(&next_report(&mut rx).await), ("default/podstatus/b".to_owned(), "1".to_owned()));
    assert_eq!(e.metric("edgehive_edgehub_busy_retried_total"), 2);
}

/// A report refused as busy while a newer one of its object is held back
/// by the rate limit does not go again: it would follow the newer one and
/// leave the cloud with the older status.
#[tokio::test]
async fn a_busy_refusal_never_sends_an_older_report_after_a_newer_one() {
    let cloud = Cloud::new();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), false).await;
    let mut cfg = config(&[server.local_addr()]);
    // One message every 2 s: the refusal comes while the newer report is held.
    (cfg.message_qps, cfg.message_burst) = (0.5, 1);
    let e = edge(&cloud, cfg);
    let (tx, mut rx) = accept(&mut server).await.split();
    let text = |m: &Message| (m.route.resource.to_string(), m.content.as_text().unwrap().into_owned());
    e.ctx.send(edgehive_edgehub::MODULE, status("a", 1)).await.unwrap();
    let first = next_report(&mut rx).await;
    e.ctx.send(edgehive_edgehub::MODULE, status("a", 2)).await.unwrap();
    eventually("the newer report held back", || e.metric("edgehive_edgehub_throttled_total") >= 1).await;
    tx.write(busy(&first)).await.unwrap();
    e.ctx.send(edgehive_edgehub::MODULE, status("b", 1)).await.unwrap();
    assert_eq!(text(&next_report(&mut rx).await), ("default/podstatus/a".to_owned(), "2".to_owned()));
    assert_eq!(text(&next_report(&mut rx).await), ("default/podstatus/b".to_owned(), "1".to_owned()));
    assert_eq!(e.metric("edgehive_edgehub_busy_retried_total"), 0);
}

/// A message no module waits on (a pod's deletion confirmation) that the
/// cloud was too busy for goes again, once per refusal: lost, it would
/// leave the pod Terminating until the edge reconnects. A request's asker
/// is told instead, and the request is not sent again behind its back.
#[tokio::test]
async fn a_deletion_confirmation_the_cloud_was_too_busy_for_goes_again() {
    let cloud = Cloud::new();
    let mut server = cloud.server("127.0.0.1:0".parse().unwrap(), false).await;
    let e = edge(&cloud, config(&[server.local_addr()]));
    let (tx, mut rx) = accept(&mut server).await.split();
    let gone = Message::new()
        .with_route(source::EDGED, group::META, "default/pod/web-0", op::DELETE)
        .with_content(Content::string("{}"));
    e.ctx.send(edgehive_edgehub::MODULE, gone.clone()).await.unwrap();
    let first = next_not_keepalive(&mut rx).await;
    assert_eq!(first.header.msg_id, gone.header.msg_id);
    // The controller had this node's share of requests waiting.
    let mut controller_busy = busy(&first);
    controller_busy.route.source = edgehive_model::Text::from(source::EDGECONTROLLER);
    tx.write(controller_busy).await.unwrap();
    let again = next_not_keepalive(&mut rx).await;
    assert_eq!((again.route.operation.as_str(), again.route.resource.as_str()), (op::DELETE, "default/pod/web-0"));
    // CloudHub too: it goes a third time; answered, it is done with.
    tx.write(busy(&again)).await.unwrap();
    let third = next_not_keepalive(&mut rx).await;
    assert_eq!(third.route.resource, "default/pod/web-0");
    tx.write(third.response(Content::string("OK"))).await.unwrap();
    tx.write(busy(&third)).await.unwrap();
    assert_eq!(e.metric("edgehive_edgehub_busy_retried_total"), 2);
    // A request refused as busy: its asker reads the refusal, and it is
    // not written again.
    let ask = Message::new().with_route(source::EDGED, group::META, "default/configmap/c", op::QUERY);
    let ctx = e.ctx.clone();
    let asked = tokio::spawn(async move { ctx.send_sync(edgehive_edgehub::MODULE, ask, WAIT).await });
    let query = next_not_keepalive(&mut rx).await;
    assert_eq!(query.route.operation, op::QUERY);
    tx.write(busy(&query)).await.unwrap();
    let answer = asked.await.unwrap().unwrap();
    assert!(answer.content.as_text().unwrap().ends_with(well_known::CLOUD_BUSY));
    // Nothing was written again: the next message is the next one sent.
    e.ctx.send(edgehive_edgehub::MODULE, status("b", 1)).await.unwrap();
    assert_eq!(next_not_keepalive(&mut rx).await.route.resource, "default/podstatus/b");
    assert_eq!(e.metric("edgehive_edgehub_busy_retried_total"), 2);

    // An inventory is kept until the cloud answers it; the answer ends the
    // keeping and no module is given it (nothing waits for it).
    let inventory = Message::new()
        .with_route(source::METAMANAGER, group::META, "null/inventory/edge-1", op::INVENTORY)
        .with_content(Content::string(r#"{"items":[]}"#));
    e.ctx.send(edgehive_edgehub::MODULE, inventory.clone()).await.unwrap();
    let sent = next_not_keepalive(&mut rx).await;
    assert_eq!(sent.header.msg_id, inventory.header.msg_id);
    tx.write(sent.response(Content::string(well_known::ACK_OK))).await.unwrap();
    tx.write(busy(&sent)).await.unwrap();
    let after = Message::new()
        .with_route(source::EDGECONTROLLER, group::RESOURCE, "default/configmap/after", op::UPDATE)
        .with_content(Content::string("{}"));
    tx.write(after.clone()).await.unwrap();
    eventually("the next message reaches metamanager", || {
        e.got.lock().unwrap().iter().any(|m| m.header.msg_id == after.header.msg_id)
    })
    .await;
    let answers = e.got.lock().unwrap().iter().filter(|m| m.parent_id() == Some(&inventory.header.msg_id)).count();
    assert_eq!(answers, 1, "only the refusal after the answer reaches a module, as any unknown answer does");
    e.ctx.send(edgehive_edgehub::MODULE, status("c", 1)).await.unwrap();
    assert_eq!(
        next_not_keepalive(&mut rx).await.route.resource,
        "default/podstatus/c",
        "the inventory is not written again"
    );
    assert_eq!(e.metric("edgehive_edgehub_busy_retried_total"), 2);
}

/// The next message the cloud receives but keepalives.
async fn next_not_keepalive(rx: &mut edgehive_viaduct::ConnRx) -> Message {
    let message = async {
        loop {
            let m = next(rx).await;
            if m.route.operation != op::KEEPALIVE {
                return m;
            }
        }
    };
    tokio::time::timeout(WAIT, message).await.expect("a message but a keepalive in time")
}
