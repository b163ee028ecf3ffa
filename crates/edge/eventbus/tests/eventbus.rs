//! The EventBus end to end: a real mosquitto as the external broker (and the
//! embedded broker in other tests), `mosquitto_pub` and rumqttc as the
//! devices, and a beehive with the EventBus between a `twin` module and a
//! `websocket` (group `hub`) module that record what reaches them.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Beehive, Context, Module, ModuleContext, ModuleFuture};
use edgehive_eventbus::{EventBus, EventBusConfig, EventBusMetrics, MAX_PAYLOAD_BYTES, MqttMode, twin_resource};
use edgehive_model::{Content, Message};
use edgehive_testkit::fixtures::{TempDir, free_port};
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(20);

/// A module that records every message it is sent.
struct Recorder {
    name: &'static str,
    group: &'static str,
    tx: mpsc::UnboundedSender<Message>,
}

impl Module for Recorder {
    fn name(&self) -> &str {
        self.name
    }
    fn group(&self) -> &str {
        self.group
    }
    fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        Box::pin(async move {
            while let Some(m) = ctx.receive_until(&cancel).await {
                let _ = self.tx.send(m);
            }
            Ok(())
        })
    }
}

/// The edge side: a beehive with the EventBus, `twin` and `websocket`.
struct Edge {
    ctx: Context,
    twin: mpsc::UnboundedReceiver<Message>,
    hub: mpsc::UnboundedReceiver<Message>,
    metrics: Arc<EventBusMetrics>,
    stop: CancellationToken,
    running: tokio::task::JoinHandle<()>,
}

impl Edge {
    fn start(cfg: EventBusConfig, db: &Path) -> Edge {
        let (twin_tx, twin) = mpsc::unbounded_channel();
        let (hub_tx, hub) = mpsc::unbounded_channel();
        let bus = Arc::new(EventBus::new(cfg, db, "edge-1"));
        let metrics = bus.metrics();
        let mut b = Beehive::builder();
        b.register(bus).unwrap();
        b.register(Arc::new(Recorder { name: "twin", group: "twin", tx: twin_tx })).unwrap();
        b.register(Arc::new(Recorder { name: "websocket", group: "hub", tx: hub_tx })).unwrap();
        let hive = b.build();
        let ctx = hive.context();
        let stop = CancellationToken::new();
        let s = stop.clone();
        let running = tokio::spawn(async move {
            hive.run(s).await;
        });
        Edge { ctx, twin, hub, metrics, stop, running }
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(DEADLINE, self.running).await.expect("the hive stops").unwrap();
    }

    /// Sends a message to the EventBus as `source` would.
    async fn send(&self, source: &str, operation: &str, resource: &str, content: Content) {
        let m = Message::build(source.to_owned(), "user", resource.to_owned(), operation.to_owned(), content);
        self.ctx.send("eventbus", m).await.unwrap();
    }

    async fn connected(&self) {
        let m = self.metrics.clone();
        edgehive_testkit::eventually("the EventBus connected to the broker", DEADLINE, || {
            m.is_connected() == (true, true)
        })
        .await;
    }
}

/// A mosquitto for one test, killed when dropped.
struct Mosquitto {
    child: Option<tokio::process::Child>,
    port: u16,
    conf: PathBuf,
}

impl Mosquitto {
    async fn start(dir: &Path) -> Mosquitto {
        Mosquitto::start_with(dir, "").await
    }

    /// With a TLS listener that requires a client certificate of `tls`'s CA.
    async fn start_tls(dir: &Path, tls: &TlsFiles) -> Mosquitto {
        let conf = format!(
            "cafile {}\ncertfile {}\nkeyfile {}\nrequire_certificate true\n",
            tls.ca.display(),
            tls.server_cert.display(),
            tls.server_key.display()
        );
        Mosquitto::start_with(dir, &conf).await
    }

    async fn start_with(dir: &Path, listener: &str) -> Mosquitto {
        let port = free_port();
        let conf = dir.join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!(
                "listener {port} 127.0.0.1\n{listener}allow_anonymous true\npersistence false\nlog_dest stderr\nlog_type error\n"
            ),
        )
        .unwrap();
        let mut m = Mosquitto { child: None, port, conf };
        m.restart().await;
        m
    }

    async fn restart(&mut self) {
        self.kill().await;
        let bin = if Path::new("/usr/sbin/mosquitto").exists() { "/usr/sbin/mosquitto" } else { "mosquitto" };
        let child = tokio::process::Command::new(bin)
            .arg("-c")
            .arg(&self.conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("run mosquitto (Debian's mosquitto package)");
        self.child = Some(child);
        wait_listening(self.port).await;
    }

    async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    fn url(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.port)
    }
}

async fn wait_listening(port: u16) {
    let end = tokio::time::Instant::now() + DEADLINE;
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(tokio::time::Instant::now() < end, "nothing listens on {port}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// PEM files of a test CA: the broker's certificate (127.0.0.1) and a
/// client's, and another CA's broker certificate.
struct TlsFiles {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

impl TlsFiles {
    fn write(dir: &Path, ca: &edgehive_testkit::pki::TestCa) -> TlsFiles {
        let file = |name: &str, pem: &str| {
            let p = dir.join(name);
            std::fs::write(&p, pem).unwrap();
            p
        };
        let (server, client) = (ca.server(), ca.client("edge-1", None));
        TlsFiles {
            ca: file("ca.crt", &ca.cert_pem),
            server_cert: file("server.crt", &server.cert_pem),
            server_key: file("server.key", &server.key_pem),
            client_cert: file("client.crt", &client.cert_pem),
            client_key: file("client.key", &client.key_pem),
        }
    }

    fn broker_tls(&self) -> edgehive_eventbus::BrokerTls {
        edgehive_eventbus::BrokerTls {
            ca_file: self.ca.clone(),
            cert_file: self.client_cert.clone(),
            key_file: self.client_key.clone(),
        }
    }
}

/// `mosquitto_pub` sends one message (QoS 1) from a file, so any bytes go.
async fn mosquitto_pub(port: u16, topic: &str, payload: &[u8], dir: &Path) {
    mosquitto_pub_with(port, &[], topic, payload, dir).await;
}

async fn mosquitto_pub_with(port: u16, extra: &[&std::ffi::OsStr], topic: &str, payload: &[u8], dir: &Path) {
    let file = dir.join(format!("payload-{}", fastrand_name()));
    std::fs::write(&file, payload).unwrap();
    let status = tokio::time::timeout(
        DEADLINE,
        tokio::process::Command::new("mosquitto_pub")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1", "-t", topic, "-f"])
            .arg(&file)
            .args(extra)
            .stdout(Stdio::null())
            .status(),
    )
    .await
    .expect("mosquitto_pub ends")
    .expect("run mosquitto_pub (Debian's mosquitto-clients package)");
    assert!(status.success(), "mosquitto_pub {topic}: {status}");
}

fn fastrand_name() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Publishes until a message matching `pred` arrives on `rx` (a
/// subscription may be made a moment after the connect), then returns it.
async fn publish_until(
    port: u16,
    dir: &Path,
    topic: &str,
    payload: &[u8],
    rx: &mut mpsc::UnboundedReceiver<Message>,
    pred: impl Fn(&Message) -> bool,
) -> Message {
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        assert!(tokio::time::Instant::now() < end, "nothing arrived for {topic}");
        mosquitto_pub(port, topic, payload, dir).await;
        let wait = tokio::time::Instant::now() + Duration::from_millis(500);
        while let Ok(Some(m)) = tokio::time::timeout_at(wait, rx.recv()).await {
            if pred(&m) {
                return m;
            }
        }
    }
}

/// A device that subscribes with rumqttc and hands over what it receives.
struct Device {
    rx: mpsc::UnboundedReceiver<(String, Vec<u8>)>,
    task: tokio::task::JoinHandle<()>,
}

impl Device {
    async fn subscribe(port: u16, id: &str, filter: &str) -> Device {
        let (client, mut events) = AsyncClient::new(MqttOptions::new(id, "127.0.0.1", port), 10);
        client.subscribe(filter, QoS::AtLeastOnce).await.unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let (subscribed_tx, subscribed_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let _client = client;
            let mut subscribed = Some(subscribed_tx);
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        if let Some(s) = subscribed.take() {
                            let _ = s.send(());
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let _ = tx.send((p.topic.clone(), p.payload.to_vec()));
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        });
        tokio::time::timeout(DEADLINE, subscribed_rx).await.expect("SUBACK").unwrap();
        Device { rx, task }
    }

    async fn next(&mut self) -> (String, Vec<u8>) {
        tokio::time::timeout(DEADLINE, self.rx.recv()).await.expect("a message reaches the device").unwrap()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn stored_topics(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    // The module creates the table when it starts.
    let Ok(mut stmt) = conn.prepare("SELECT topic FROM sub_topics ORDER BY topic") else {
        return Vec::new();
    };
    stmt.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
}

fn external(url: String) -> EventBusConfig {
    EventBusConfig { mqtt_server_external: url, ..EventBusConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_reach_twin_and_the_cloud_and_twin_reaches_devices() {
    let dir = TempDir::new("eventbus-ext");
    let db = dir.path().join("edgecore.db");
    let broker = Mosquitto::start(dir.path()).await;
    let mut edge = Edge::start(external(broker.url()), &db);
    edge.connected().await;

    // A device's twin update reaches DeviceTwin as KubeEdge sends it.
    let topic = "$hw/events/device/d1/twin/update";
    let body = br#"{"event_id":"","timestamp":1,"twin":{"temp":{"actual":{"value":"21"}}}}"#;
    let m = publish_until(broker.port, dir.path(), topic, body, &mut edge.twin, |_| true).await;
    assert_eq!(m.route.source, "bus");
    assert_eq!(m.route.group, "user");
    assert_eq!(m.route.operation, "response");
    assert_eq!(m.route.resource, twin_resource(topic));
    assert_eq!(m.route.resource, "JGh3L2V2ZW50cy9kZXZpY2UvZDEvdHdpbi91cGRhdGU=");
    assert_eq!(m.content.as_text().as_deref(), Some(std::str::from_utf8(body).unwrap()));

    // A `+/user/#` topic goes to the cloud as an upload.
    let m = publish_until(broker.port, dir.path(), "app/user/temp", b"21.5", &mut edge.hub, |_| true).await;
    assert_eq!((m.route.resource.as_str(), m.route.operation.as_str()), ("app/user/temp", "upload"));
    assert_eq!((m.route.source.as_str(), m.route.group.as_str()), ("bus", "user"));
    assert_eq!(m.content.as_text().as_deref(), Some("21.5"));

    // DeviceTwin's publish reaches a subscribed device.
    let mut device = Device::subscribe(broker.port, "device-1", "$hw/events/device/d1/twin/update/result").await;
    edge.send("twin", "publish", "$hw/events/device/d1/twin/update/result", Content::string(r#"{"event_id":"e1"}"#))
        .await;
    assert_eq!(
        device.next().await,
        ("$hw/events/device/d1/twin/update/result".to_owned(), br#"{"event_id":"e1"}"#.to_vec())
    );

    // The cloud's `message` and `get_result` for auth_info, as KubeEdge publishes them.
    let mut all = Device::subscribe(broker.port, "device-2", "cloud/#").await;
    let mut auth = Device::subscribe(broker.port, "device-3", "$hw/events/node/edge-1/authInfo/get/result").await;
    edge.send(
        "router_eventbus",
        "message",
        "",
        Content::from_json(r#"{"message":{"topic":"cloud/a","v":1}}"#).unwrap(),
    )
    .await;
    assert_eq!(all.next().await, ("cloud/a".to_owned(), br#"{"topic":"cloud/a","v":1}"#.to_vec()));
    edge.send("cloud", "get_result", "auth_info", Content::from_json(r#"{"sk":"2","ak":"1"}"#).unwrap()).await;
    assert_eq!(auth.next().await.1, br#"{"ak":"1","sk":"2"}"#.to_vec());
    edge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_subscription_persists_and_survives_a_restart() {
    let dir = TempDir::new("eventbus-sub");
    let db = dir.path().join("edgecore.db");
    let broker = Mosquitto::start(dir.path()).await;
    let mut edge = Edge::start(external(broker.url()), &db);
    edge.connected().await;
    edge.send("router_eventbus", "subscribe", "factory/+/alarm", Content::null()).await;
    let end = tokio::time::Instant::now() + DEADLINE;
    while stored_topics(&db) != ["factory/+/alarm"] {
        assert!(tokio::time::Instant::now() < end, "the topic was not stored: {:?}", stored_topics(&db));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let m = publish_until(broker.port, dir.path(), "factory/line1/alarm", b"hot", &mut edge.hub, |_| true).await;
    assert_eq!((m.route.resource.as_str(), m.route.operation.as_str()), ("factory/line1/alarm", "upload"));
    edge.stop().await;

    // A new EventBus on the same database subscribes it again.
    let mut edge = Edge::start(external(broker.url()), &db);
    edge.connected().await;
    assert_eq!(edge.metrics.subscriptions_count(), 7);
    let m = publish_until(broker.port, dir.path(), "factory/line2/alarm", b"cold", &mut edge.hub, |_| true).await;
    assert_eq!(m.content.as_text().as_deref(), Some("cold"));

    edge.send("router_eventbus", "unsubscribe", "factory/+/alarm", Content::null()).await;
    let end = tokio::time::Instant::now() + DEADLINE;
    while !stored_topics(&db).is_empty() {
        assert!(tokio::time::Instant::now() < end, "the topic was not forgotten");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(edge.metrics.subscriptions_count(), 6);
    edge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_reconnects_and_resubscribes() {
    let dir = TempDir::new("eventbus-restart");
    let db = dir.path().join("edgecore.db");
    let mut broker = Mosquitto::start(dir.path()).await;
    let mut edge = Edge::start(external(broker.url()), &db);
    edge.connected().await;
    edge.send("router_eventbus", "subscribe", "plant/#", Content::null()).await;
    publish_until(broker.port, dir.path(), "plant/x", b"1", &mut edge.hub, |_| true).await;

    broker.kill().await;
    let m = edge.metrics.clone();
    edgehive_testkit::eventually("the EventBus saw the broker go", DEADLINE, || m.is_connected() == (false, false))
        .await;
    // A publish while the broker is away waits (bounded) and does not block the module.
    edge.send("twin", "publish", "$hw/events/device/d1/twin/update/delta", Content::string("{}")).await;
    broker.restart().await;
    edgehive_testkit::eventually("the EventBus reconnected", DEADLINE, || {
        m.connects_count().0 >= 2 && m.is_connected() == (true, true)
    })
    .await;

    // KubeEdge's topics and the stored one are subscribed again.
    let topic = "$hw/events/device/d9/state/update";
    let got = publish_until(broker.port, dir.path(), topic, br#"{"state":"online"}"#, &mut edge.twin, |_| true).await;
    assert_eq!(got.route.resource, twin_resource(topic));
    let got = publish_until(broker.port, dir.path(), "plant/y", b"2", &mut edge.hub, |_| true).await;
    assert_eq!(got.route.resource, "plant/y");
    edge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_dropped_counted_and_disturbs_nothing() {
    let dir = TempDir::new("eventbus-bad");
    let db = dir.path().join("edgecore.db");
    let broker = Mosquitto::start(dir.path()).await;
    let mut edge = Edge::start(external(broker.url()), &db);
    edge.connected().await;
    let metrics = edge.metrics.clone();
    let port = broker.port;
    let until_counted = |reason: &'static str, n: u64| {
        let m = metrics.clone();
        async move { edgehive_testkit::eventually(reason, DEADLINE, || m.dropped_count(reason) >= n).await }
    };

    // Make sure the subscriptions are in place, then play the attacker.
    publish_until(port, dir.path(), "$hw/events/device/d1/twin/get", b"{}", &mut edge.twin, |_| true).await;
    mosquitto_pub(port, "$hw/events/device/d1/twin/update", b"\xff\xfe not utf-8", dir.path()).await;
    until_counted("not_utf8", 1).await;
    let big = vec![b'x'; MAX_PAYLOAD_BYTES + 1];
    mosquitto_pub(port, "$hw/events/device/d1/twin/update", &big, dir.path()).await;
    until_counted("too_large", 1).await;

    // Malformed messages from the bus.
    edge.send("twin", "publish", "a/b", Content::from_json(r#"{"not":"a string"}"#).unwrap()).await;
    edge.send("twin", "publish", "", Content::string("x")).await;
    edge.send("twin", "publish", "a/+/b", Content::string("x")).await;
    edge.send("router_eventbus", "message", "", Content::from_json(r#"{"message":{"no":"topic"}}"#).unwrap()).await;
    // A filter the broker would answer by closing the connection: never stored, never sent.
    edge.send("router_eventbus", "subscribe", "a/#/b", Content::null()).await;
    until_counted("malformed", 5).await;
    edge.send("router_eventbus", "frobnicate", "x", Content::null()).await;
    until_counted("unknown_operation", 1).await;

    // Nothing reached the bus, nothing was stored, and the link still works.
    assert!(edge.twin.try_recv().is_err());
    assert!(stored_topics(&db).is_empty());
    assert_eq!(metrics.connects_count(), (1, 1));
    let m = publish_until(port, dir.path(), "$hw/events/device/d2/twin/update", b"{}", &mut edge.twin, |_| true).await;
    assert_eq!(m.route.resource, twin_resource("$hw/events/device/d2/twin/update"));
    let mut device = Device::subscribe(port, "device-ok", "ok/topic").await;
    edge.send("twin", "publish", "ok/topic", Content::string("fine")).await;
    assert_eq!(device.next().await.1, b"fine".to_vec());
    edge.stop().await;
}

fn internal(port: u16) -> EventBusConfig {
    EventBusConfig {
        mqtt_mode: MqttMode::Internal,
        mqtt_server_internal: format!("tcp://127.0.0.1:{port}"),
        ..EventBusConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_broker_serves_devices_and_twin() {
    let dir = TempDir::new("eventbus-int");
    let db = dir.path().join("edgecore.db");
    let port = free_port();
    let mut edge = Edge::start(internal(port), &db);
    wait_listening(port).await;

    // Devices publish with mosquitto_pub; `$hw` topics reach twin.
    let topic = "$hw/events/device/d1/twin/update";
    let m = publish_until(port, dir.path(), topic, br#"{"twin":{}}"#, &mut edge.twin, |_| true).await;
    assert_eq!((m.route.operation.as_str(), m.route.resource.as_str()), ("response", twin_resource(topic).as_str()));
    let m = publish_until(port, dir.path(), "SYS/dis/upload_records", b"r", &mut edge.hub, |_| true).await;
    assert_eq!((m.route.resource.as_str(), m.route.operation.as_str()), ("SYS/dis/upload_records", "upload"));
    // A topic nobody asked for is not passed on.
    mosquitto_pub(port, "other/topic", b"x", dir.path()).await;

    // Twin's publish reaches a device subscribed with a wildcard; `#` alone
    // does not match `$` topics (MQTT 3.1.1 §4.7.2).
    let mut device = Device::subscribe(port, "dev-1", "$hw/events/device/+/twin/update/result").await;
    let mut everything = Device::subscribe(port, "dev-2", "#").await;
    edge.send("twin", "publish", "$hw/events/device/d1/twin/update/result", Content::string("ok")).await;
    assert_eq!(device.next().await, ("$hw/events/device/d1/twin/update/result".to_owned(), b"ok".to_vec()));
    edge.send("twin", "publish", "plain/topic", Content::string("p")).await;
    assert_eq!(everything.next().await.0, "plain/topic");

    // A subscription from the cloud is watched on the embedded broker too.
    edge.send("router_eventbus", "subscribe", "line/+/speed", Content::null()).await;
    let m = publish_until(port, dir.path(), "line/3/speed", b"7", &mut edge.hub, |_| true).await;
    assert_eq!(m.route.resource, "line/3/speed");
    assert!(edge.hub.try_recv().map(|m| m.route.resource != "other/topic").unwrap_or(true));
    edge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_broker_survives_garbage_and_bad_payloads() {
    use tokio::io::AsyncWriteExt as _;
    let dir = TempDir::new("eventbus-int-bad");
    let db = dir.path().join("edgecore.db");
    let port = free_port();
    let mut edge = Edge::start(internal(port), &db);
    wait_listening(port).await;

    // Not MQTT at all, a CONNECT that never ends, and a packet claiming 200 MB.
    let mut garbage = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut half = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    half.write_all(&[0x10, 0x20, 0x00]).await.unwrap();
    let mut huge = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    huge.write_all(&[0x10, 0xff, 0xff, 0xff, 0x5f]).await.unwrap();

    mosquitto_pub(port, "$hw/events/device/d1/twin/update", b"\xc3\x28", dir.path()).await;
    let m = edge.metrics.clone();
    edgehive_testkit::eventually("the non-UTF-8 payload was counted", DEADLINE, || m.dropped_count("not_utf8") == 1)
        .await;

    // Devices are still served.
    let topic = "$hw/events/node/edge-1/membership/get";
    let got = publish_until(port, dir.path(), topic, b"{}", &mut edge.twin, |_| true).await;
    assert_eq!(got.route.resource, twin_resource(topic));
    drop((garbage, half, huge));
    edge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_broker_never_blocks_the_module() {
    let dir = TempDir::new("eventbus-dead");
    let db = dir.path().join("edgecore.db");
    // Nothing listens on this port.
    let cfg = EventBusConfig { mqtt_session_queue_size: 2, ..external(format!("tcp://127.0.0.1:{}", free_port())) };
    let edge = Edge::start(cfg, &db);
    for i in 0..10 {
        edge.send("twin", "publish", "$hw/events/device/d1/twin/update/delta", Content::string(&i.to_string())).await;
    }
    // The module went on: a later subscribe is stored, and the publishes
    // beyond the queue were dropped and counted.
    edge.send("router_eventbus", "subscribe", "still/working", Content::null()).await;
    let end = tokio::time::Instant::now() + DEADLINE;
    while stored_topics(&db) != ["still/working"] {
        assert!(tokio::time::Instant::now() < end, "the module is stuck");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(edge.metrics.dropped_count("queue_full") >= 7, "{}", edge.metrics.dropped_count("queue_full"));
    assert_eq!(edge.metrics.is_connected(), (false, false));
    edge.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_both_bridges_the_two_brokers_through_the_bus() {
    let dir = TempDir::new("eventbus-both");
    let db = dir.path().join("edgecore.db");
    let broker = Mosquitto::start(dir.path()).await;
    let port = free_port();
    let cfg = EventBusConfig { mqtt_mode: MqttMode::Both, mqtt_retain: true, ..internal(port) };
    let mut edge = Edge::start(EventBusConfig { mqtt_server_external: broker.url(), ..cfg }, &db);
    edge.connected().await;
    wait_listening(port).await;

    // Both brokers are listened to.
    let topic = "$hw/events/device/d1/twin/update";
    publish_until(broker.port, dir.path(), topic, b"{}", &mut edge.twin, |_| true).await;
    publish_until(port, dir.path(), topic, b"{}", &mut edge.twin, |_| true).await;

    // A publish goes to both; on the embedded broker it is retained
    // (`mqttRetain`), so a device that subscribes afterwards gets it.
    let mut outside = Device::subscribe(broker.port, "dev-ext", "$hw/events/device/d1/twin/update/result").await;
    edge.send("twin", "publish", "$hw/events/device/d1/twin/update/result", Content::string("both")).await;
    assert_eq!(outside.next().await.1, b"both".to_vec());
    let mut late = Device::subscribe(port, "dev-int", "$hw/events/device/d1/twin/update/result").await;
    assert_eq!(late.next().await, ("$hw/events/device/d1/twin/update/result".to_owned(), b"both".to_vec()));
    edge.stop().await;
}

/// A rumqttc client of the embedded broker that takes packets of up to
/// 5 MiB, its events handed over as they come.
async fn big_client(
    port: u16,
    id: &str,
) -> (AsyncClient, mpsc::UnboundedReceiver<Packet>, tokio::task::JoinHandle<()>) {
    let mut opts = MqttOptions::new(id, "127.0.0.1", port);
    opts.set_max_packet_size(5 << 20, 5 << 20);
    let (client, mut events) = AsyncClient::new(opts, 10);
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        loop {
            match events.poll().await {
                Ok(Event::Incoming(p)) => {
                    let _ = tx.send(p);
                }
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    });
    (client, rx, task)
}

/// The next packet that `pick` wants, skipping the others.
async fn next_of<T>(rx: &mut mpsc::UnboundedReceiver<Packet>, pick: impl Fn(Packet) -> Option<T>) -> T {
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        let p = tokio::time::timeout_at(end, rx.recv()).await.expect("the packet arrives").unwrap();
        if let Some(t) = pick(p) {
            return t;
        }
    }
}

fn suback(p: Packet) -> Option<Vec<rumqttc::SubscribeReasonCode>> {
    if let Packet::SubAck(s) = p { Some(s.return_codes) } else { None }
}

fn publish(p: Packet) -> Option<(String, usize, bool)> {
    if let Packet::Publish(p) = p { Some((p.topic.clone(), p.payload.len(), p.retain)) } else { None }
}

/// A client subscribes with a filter of 2 KiB (work on every publish, and
/// memory per subscription): refused with the SUBACK failure code, and the
/// same client subscribes and receives normally afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_broker_refuses_an_over_long_filter_and_the_client_stays_usable() {
    let dir = TempDir::new("eventbus-int-filter");
    let port = free_port();
    let edge = Edge::start(internal(port), &dir.path().join("edgecore.db"));
    wait_listening(port).await;
    let (client, mut rx, task) = big_client(port, "attacker").await;
    let long = format!("a/{}", "b".repeat(2048));
    client.subscribe(&long, QoS::AtLeastOnce).await.unwrap();
    assert_eq!(next_of(&mut rx, suback).await, vec![rumqttc::SubscribeReasonCode::Failure]);
    let limit = format!("a/{}", "c".repeat(1022));
    client.subscribe(&limit, QoS::AtLeastOnce).await.unwrap();
    assert_eq!(next_of(&mut rx, suback).await, vec![rumqttc::SubscribeReasonCode::Success(QoS::AtLeastOnce)]);
    client.subscribe("a/+", QoS::AtLeastOnce).await.unwrap();
    assert_eq!(next_of(&mut rx, suback).await, vec![rumqttc::SubscribeReasonCode::Success(QoS::AtLeastOnce)]);
    client.publish("a/x", QoS::AtLeastOnce, false, b"still here".to_vec()).await.unwrap();
    assert_eq!(next_of(&mut rx, publish).await, ("a/x".to_owned(), 10, false));
    task.abort();
    edge.stop().await;
}

/// A client fills the retained store with large messages: the broker keeps
/// 16 MiB of them; the next is delivered to subscribers but not retained
/// (counted), the earlier ones still are, and clearing one makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_broker_keeps_retained_messages_within_their_byte_budget() {
    const BIG: usize = 3 << 20; // 3 MiB: five fit in 16 MiB, the sixth does not
    let dir = TempDir::new("eventbus-int-retained");
    let port = free_port();
    let edge = Edge::start(internal(port), &dir.path().join("edgecore.db"));
    wait_listening(port).await;
    let (watcher, mut seen, watcher_task) = big_client(port, "watcher").await;
    watcher.subscribe("big/+", QoS::AtLeastOnce).await.unwrap();
    next_of(&mut seen, suback).await;

    let (attacker, mut acks, attacker_task) = big_client(port, "attacker").await;
    for i in 0..6 {
        attacker.publish(format!("big/{i}"), QoS::AtLeastOnce, true, vec![b'x'; BIG]).await.unwrap();
        next_of(&mut acks, |p| matches!(p, Packet::PubAck(_)).then_some(())).await;
        // Delivered live, the sixth too.
        assert_eq!(next_of(&mut seen, publish).await, (format!("big/{i}"), BIG, false));
    }
    let m = edge.metrics.clone();
    edgehive_testkit::eventually("the sixth was counted", DEADLINE, || m.dropped_count("retained_budget") == 1).await;

    // A new subscriber gets the five retained ones, then a live marker, and
    // never the sixth.
    let retained_of = |rx: &mut mpsc::UnboundedReceiver<Packet>| {
        let mut got = Vec::new();
        while let Ok(p) = rx.try_recv() {
            if let Some(p) = publish(p) {
                got.push(p);
            }
        }
        got
    };
    let (late, mut late_rx, late_task) = big_client(port, "late").await;
    late.subscribe("big/+", QoS::AtLeastOnce).await.unwrap();
    next_of(&mut late_rx, suback).await;
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(next_of(&mut late_rx, publish).await);
    }
    attacker.publish("big/end", QoS::AtLeastOnce, false, b"end".to_vec()).await.unwrap();
    next_of(&mut acks, |p| matches!(p, Packet::PubAck(_)).then_some(())).await;
    got.push(next_of(&mut late_rx, publish).await);
    got.extend(retained_of(&mut late_rx));
    let want: Vec<(String, usize, bool)> =
        (0..5).map(|i| (format!("big/{i}"), BIG, true)).chain([("big/end".to_owned(), 3, false)]).collect();
    assert_eq!(got, want);

    // Clearing one (an empty retained payload) makes room for the sixth.
    attacker.publish("big/0", QoS::AtLeastOnce, true, Vec::new()).await.unwrap();
    attacker.publish("big/5", QoS::AtLeastOnce, true, vec![b'y'; BIG]).await.unwrap();
    for _ in 0..2 {
        next_of(&mut acks, |p| matches!(p, Packet::PubAck(_)).then_some(())).await;
    }
    let (again, mut again_rx, again_task) = big_client(port, "again").await;
    again.subscribe("big/5", QoS::AtLeastOnce).await.unwrap();
    next_of(&mut again_rx, suback).await;
    assert_eq!(next_of(&mut again_rx, publish).await, ("big/5".to_owned(), BIG, true));
    assert_eq!(m.dropped_count("retained_budget"), 1);
    for t in [watcher_task, attacker_task, late_task, again_task] {
        t.abort();
    }
    edge.stop().await;
}

/// eventBusTLS: the external broker over mutual TLS. Devices' messages
/// reach the twin through it; a broker whose certificate another CA signed
/// is never spoken to, and a TLS URL without eventBusTLS (KubeEdge would
/// skip the certificate check) or with files that do not load is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_broker_is_used_with_eventbustls_and_an_impostor_is_not() {
    let dir = TempDir::new("eventbus-tls");
    let ca = edgehive_testkit::pki::TestCa::new("mqtt-ca");
    let files = TlsFiles::write(dir.path(), &ca);
    let broker = Mosquitto::start_tls(dir.path(), &files).await;
    let url = format!("ssl://127.0.0.1:{}", broker.port);

    // Without eventBusTLS, and with a key file that is not there: refused.
    let err = external(url.clone()).validate().unwrap_err().to_string();
    assert!(err.contains("eventBusTLS") && err.contains("TLS broker"), "{err}");
    let mut missing = files.broker_tls();
    missing.key_file = dir.path().join("nothere.key");
    let err = EventBusConfig { tls: Some(missing), ..external(url.clone()) }.validate().unwrap_err().to_string();
    assert!(err.contains("tlsMqttPrivateKeyFile") && err.contains("nothere.key"), "{err}");

    let cfg = EventBusConfig { tls: Some(files.broker_tls()), ..external(url.clone()) };
    cfg.validate().unwrap();
    let mut edge = Edge::start(cfg, &dir.path().join("edgecore.db"));
    edge.connected().await;
    let tls_args: Vec<&std::ffi::OsStr> = vec![
        "--cafile".as_ref(),
        files.ca.as_os_str(),
        "--cert".as_ref(),
        files.client_cert.as_os_str(),
        "--key".as_ref(),
        files.client_key.as_os_str(),
    ];
    let topic = "$hw/events/device/thermo/twin/update";
    let end = tokio::time::Instant::now() + DEADLINE;
    let got = loop {
        assert!(tokio::time::Instant::now() < end, "nothing reached the twin over TLS");
        mosquitto_pub_with(broker.port, &tls_args, topic, br#"{"twin":{}}"#, dir.path()).await;
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(500), edge.twin.recv()).await {
            break m;
        }
    };
    assert_eq!(got.route.resource, twin_resource(topic));
    edge.stop().await;

    // A broker with another CA's certificate: no connection is made.
    let impostor_dir = TempDir::new("eventbus-tls-impostor");
    let other = TlsFiles::write(impostor_dir.path(), &edgehive_testkit::pki::TestCa::new("other-ca"));
    let impostor = Mosquitto::start_tls(
        impostor_dir.path(),
        &TlsFiles {
            // It would take our client's certificate: only the edge's check stops it.
            ca: files.ca.clone(),
            server_cert: other.server_cert.clone(),
            server_key: other.server_key.clone(),
            client_cert: other.client_cert.clone(),
            client_key: other.client_key.clone(),
        },
    )
    .await;
    let url = format!("ssl://127.0.0.1:{}", impostor.port);
    let edge = Edge::start(
        EventBusConfig { tls: Some(files.broker_tls()), ..external(url) },
        &impostor_dir.path().join("edgecore.db"),
    );
    let m = edge.metrics.clone();
    edgehive_testkit::eventually("attempts to the impostor fail", DEADLINE, || {
        let (sub, publ) = m.disconnects_count();
        sub >= 2 && publ >= 2
    })
    .await;
    assert_eq!(edge.metrics.connects_count(), (0, 0), "never connected to the impostor");
    edge.stop().await;
}
