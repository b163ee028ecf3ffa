//! DeviceTwin on a beehive with stand-ins for EventBus, EdgeHub and DMI:
//! the cloud's Devices in, `$hw/events` requests answered, reports to the
//! cloud held while it is away, and the tables surviving a restart.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use edgehive_beehive::{Beehive, Context, FnModule, ModuleContext, ModuleFuture};
use edgehive_devicetwin::{DeviceTwin, TwinConfig, TwinDb};
use edgehive_metamanager::MetaDb;
use edgehive_model::{Content, Message, group, op, source, well_known};
use edgehive_testkit::eventually;
use edgehive_testkit::fixtures::TempDir;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type Seen = Arc<Mutex<Vec<Message>>>;
const DEADLINE: Duration = Duration::from_secs(20);

struct Edge {
    ctx: Context,
    bus: Seen,
    hub: Seen,
    dmi: Seen,
    twin: Arc<DeviceTwin>,
    stop: CancellationToken,
    done: tokio::task::JoinHandle<()>,
}

fn stand_in(
    name: &'static str,
    grp: &'static str,
    seen: Seen,
) -> FnModule<impl Fn(ModuleContext, CancellationToken) -> ModuleFuture + Send + Sync> {
    FnModule::new(name, grp, move |mut ctx: ModuleContext, cancel: CancellationToken| {
        let seen = seen.clone();
        Box::pin(async move {
            while let Some(m) = ctx.receive_until(&cancel).await {
                seen.lock().unwrap().push(m);
            }
            Ok(())
        }) as ModuleFuture
    })
}

impl Edge {
    fn start(db: &Path) -> Edge {
        let mut cfg = TwinConfig::new("edge-1");
        cfg.flush_interval = Duration::from_millis(20);
        Edge::start_with(db, cfg)
    }

    fn start_with(db: &Path, cfg: TwinConfig) -> Edge {
        let meta = Arc::new(MetaDb::open(db).unwrap());
        Edge::start_twin(DeviceTwin::new(cfg, db, meta).unwrap())
    }

    fn start_twin(twin: DeviceTwin) -> Edge {
        Edge::start_gated(twin, None)
    }

    /// With an EventBus of 8 places that reads nothing until `gate` says.
    fn start_gated(twin: DeviceTwin, gate: Option<tokio::sync::watch::Receiver<bool>>) -> Edge {
        let twin = Arc::new(twin);
        let (bus, hub, dmi): (Seen, Seen, Seen) = Default::default();
        let mut b = Beehive::builder();
        b.register(twin.clone()).unwrap();
        match gate {
            None => {
                b.register(Arc::new(stand_in(source::EVENTBUS, group::BUS, bus.clone()))).unwrap();
            }
            Some(gate) => {
                let seen = bus.clone();
                let m = FnModule::new(source::EVENTBUS, group::BUS, move |mut ctx: ModuleContext, cancel| {
                    let (seen, mut gate) = (seen.clone(), gate.clone());
                    Box::pin(async move {
                        let _ = gate.wait_for(|open| *open).await;
                        while let Some(m) = ctx.receive_until(&cancel).await {
                            seen.lock().unwrap().push(m);
                        }
                        Ok(())
                    }) as ModuleFuture
                });
                b.register(Arc::new(m.mailbox_capacity(8))).unwrap();
            }
        };
        b.register(Arc::new(stand_in(source::WEBSOCKET, group::HUB, hub.clone()))).unwrap();
        b.register(Arc::new(stand_in("dmi", "dmi", dmi.clone()))).unwrap();
        let hive = b.build();
        let ctx = hive.context();
        let stop = CancellationToken::new();
        let done = tokio::spawn({
            let stop = stop.clone();
            async move {
                hive.run(stop).await;
            }
        });
        Edge { ctx, bus, hub, dmi, twin, stop, done }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.done.await.unwrap();
    }

    async fn send(&self, m: Message) {
        self.ctx.send(source::TWIN, m).await.unwrap();
    }

    /// A message on a `$hw/events` topic, as EventBus hands it over.
    async fn mqtt(&self, topic: &str, payload: &str) {
        let resource = base64::engine::general_purpose::URL_SAFE.encode(topic);
        let m = Message::new()
            .with_route(source::BUS, group::USER, resource, op::RESPONSE)
            .with_content(Content::string(payload));
        self.send(m).await;
    }

    async fn connection(&self, up: bool) {
        self.connection_agreeing(up, "").await;
    }

    /// EdgeHub's connection event, listing what the link agreed.
    async fn connection_agreeing(&self, up: bool, agreed: &str) {
        let text = if up { well_known::CLOUD_CONNECTED } else { "cloud_disconnected" };
        let mut m = Message::new()
            .with_route(source::EDGEHUB, group::META, well_known::NODE_CONNECTION, op::CONNECT)
            .with_content(Content::string(text));
        m.header.message_type = edgehive_model::Text::copy_from(agreed);
        self.send(m).await;
    }

    /// What was published on `topic` (payloads).
    fn published(&self, topic: &str) -> Vec<Value> {
        let bus = self.bus.lock().unwrap();
        bus.iter()
            .filter(|m| m.route.resource == topic && m.route.operation == op::PUBLISH)
            .map(|m| serde_json::from_str(&m.content.as_text().unwrap()).unwrap())
            .collect()
    }

    fn reports(&self) -> Vec<(String, Value)> {
        let hub = self.hub.lock().unwrap();
        hub.iter().map(|m| (m.route.resource.to_string(), m.content.to_value())).collect()
    }
}

fn device_message(operation: &'static str, desired: &str) -> Message {
    let device = json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
        "metadata": {"name": "thermo", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
        "spec": {"nodeName": "edge-1", "deviceModelRef": {"name": "thermo-model"},
            "properties": [{"name": "temperature", "desired": {"value": desired}}]}});
    Message::new()
        .with_route(source::DEVICECONTROLLER, group::RESOURCE, "default/device/thermo", operation)
        .with_content(Content::from_serialize(&device).unwrap())
}

fn model_message() -> Message {
    let model = json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "DeviceModel",
        "metadata": {"name": "thermo-model", "namespace": "default"},
        "spec": {"properties": [{"name": "temperature", "type": "INT"}]}});
    Message::new()
        .with_route(source::DEVICECONTROLLER, group::RESOURCE, "default/devicemodel/thermo-model", op::INSERT)
        .with_content(Content::from_serialize(&model).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_twins_and_reports_end_to_end_on_the_bus() {
    let dir = TempDir::new("devicetwin");
    let db = dir.path().join("edgecore.db");
    let edge = Edge::start(&db);
    edge.send(model_message()).await;
    edge.send(device_message(op::INSERT, "20")).await;

    // Known, forwarded to DMI unchanged, announced, and the delta published.
    eventually("the device is forwarded to dmi", DEADLINE, || edge.dmi.lock().unwrap().len() == 2).await;
    assert_eq!(edge.dmi.lock().unwrap()[1].route.resource, "default/device/thermo");
    eventually("membership and delta published", DEADLINE, || {
        !edge.published("$hw/events/node/edge-1/membership/updated").is_empty()
            && !edge.published("$hw/events/device/thermo/twin/update/delta").is_empty()
    })
    .await;
    let delta = &edge.published("$hw/events/device/thermo/twin/update/delta")[0];
    assert_eq!(delta["delta"], json!({"temperature": "20"}));
    assert_eq!(delta["twin"]["temperature"]["metadata"]["type"], "int");

    // A mapper reports while the cloud is away: answered, not sent yet.
    edge.mqtt(
        "$hw/events/device/thermo/twin/update",
        r#"{"event_id":"e1","twin":{"temperature":{"actual":{"value":"21"}}}}"#,
    )
    .await;
    eventually("the update is answered", DEADLINE, || {
        !edge.published("$hw/events/device/thermo/twin/update/result").is_empty()
    })
    .await;
    edge.mqtt(
        "$hw/events/device/thermo/twin/update",
        r#"{"event_id":"e2","twin":{"temperature":{"actual":{"value":"22"}}}}"#,
    )
    .await;
    edge.mqtt("$hw/events/device/thermo/state/update", r#"{"event_id":"s","state":"online"}"#).await;
    eventually("both answered", DEADLINE, || edge.published("$hw/events/device/thermo/state/update/result").len() == 1)
        .await;
    assert!(edge.reports().is_empty(), "nothing goes up while disconnected");

    // The cloud returns: the latest value, once, and the state.
    edge.connection(true).await;
    eventually("reports reach EdgeHub", DEADLINE, || edge.reports().len() >= 2).await;
    let reports = edge.reports();
    let twin: Vec<_> = reports.iter().filter(|(r, _)| r == "device/thermo/twin/edge_updated").collect();
    assert_eq!(twin.len(), 1, "{reports:?}");
    assert_eq!(twin[0].1["twin"]["temperature"]["actual"]["value"], "22");
    assert!(twin[0].1["twin"]["temperature"].get("actual_version").is_none());
    let state: Vec<_> = reports.iter().filter(|(r, _)| r == "device/thermo/state/update").collect();
    let state: Value = serde_json::from_str(state[0].1.as_str().unwrap()).unwrap();
    assert_eq!(state["device"]["state"], "online");

    // Connected, a change goes up at the next flush.
    edge.mqtt("$hw/events/device/thermo/twin/update", r#"{"twin":{"temperature":{"actual":{"value":"23"}}}}"#).await;
    eventually("the change is reported", DEADLINE, || {
        edge.reports().iter().any(|(_, c)| c.pointer("/twin/temperature/actual/value") == Some(&json!("23")))
    })
    .await;

    // A new desired value from the cloud: a delta.
    edge.send(device_message(op::UPDATE, "25")).await;
    eventually("the new delta", DEADLINE, || {
        edge.published("$hw/events/device/thermo/twin/update/delta").iter().any(|d| d["delta"]["temperature"] == "25")
    })
    .await;
    let metrics = edge.twin.metrics().clone();
    edge.stop().await;

    // The tables hold the device, in KubeEdge's columns.
    let tables = TwinDb::open(&db).unwrap().load().unwrap();
    let t = &tables["thermo"].twins["temperature"];
    assert_eq!(t.expected_value(), Some("25"));
    assert_eq!(t.actual_value(), Some("23"));
    assert_eq!(tables["thermo"].state, "online");
    let conn = rusqlite_columns(&db);
    assert!(conn.contains(&"expected_version".to_owned()) && conn.contains(&"attr_type".to_owned()), "{conn:?}");
    drop(metrics);

    // Restarted, it answers from its tables.
    let edge = Edge::start(&db);
    edge.mqtt("$hw/events/device/thermo/twin/get", r#"{"event_id":"g"}"#).await;
    eventually("the get is answered", DEADLINE, || {
        !edge.published("$hw/events/device/thermo/twin/get/result").is_empty()
    })
    .await;
    let got = &edge.published("$hw/events/device/thermo/twin/get/result")[0];
    assert_eq!(got["twin"]["temperature"]["actual"]["value"], "23");
    // Deleted by the cloud: gone, and announced.
    edge.send(device_message(op::DELETE, "25")).await;
    eventually("removal announced", DEADLINE, || {
        edge.published("$hw/events/node/edge-1/membership/updated")
            .iter()
            .any(|m| m["removed_devices"][0]["id"] == "thermo")
    })
    .await;
    edge.stop().await;
    assert!(TwinDb::open(&db).unwrap().load().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_disturbs_nothing() {
    let dir = TempDir::new("devicetwin-bad");
    let db = dir.path().join("edgecore.db");
    let edge = Edge::start(&db);
    edge.send(device_message(op::INSERT, "20")).await;
    edge.connection(true).await;
    // Not base64; oversize; malformed JSON; unknown device; a device named
    // unlike its resource; a membership update that does not parse.
    let junk =
        Message::new().with_route(source::BUS, group::USER, "%%%", op::RESPONSE).with_content(Content::string("{}"));
    edge.send(junk).await;
    edge.mqtt("$hw/events/device/thermo/twin/update", &"x".repeat(edgehive_devicetwin::MAX_PAYLOAD + 1)).await;
    edge.mqtt("$hw/events/device/thermo/twin/update", "{\"twin\": ").await;
    edge.mqtt("$hw/events/device/ghost/twin/update", r#"{"twin":{"temperature":{"actual":{"value":"1"}}}}"#).await;
    let mut liar = device_message(op::UPDATE, "99");
    liar.route.resource = "default/device/other".into();
    edge.send(liar).await;
    let bad_membership = Message::new()
        .with_route(source::DEVICECONTROLLER, group::TWIN, "membership", op::UPDATE)
        .with_content(Content::from_serialize(&json!({"added_devices": "nope"})).unwrap());
    edge.send(bad_membership).await;
    // Then a good report still goes through.
    edge.mqtt("$hw/events/device/thermo/twin/update", r#"{"twin":{"temperature":{"actual":{"value":"21"}}}}"#).await;
    eventually("the good report is sent", DEADLINE, || {
        edge.reports().iter().any(|(_, c)| c.pointer("/twin/temperature/actual/value") == Some(&json!("21")))
    })
    .await;
    let errors: Vec<Value> = edge.published("$hw/events/device/thermo/twin/update/result");
    assert_eq!(errors[0]["code"], 400, "{errors:?}");
    assert_eq!(edge.published("$hw/events/device/ghost/twin/update/result")[0]["code"], 404);
    let expected = {
        let mut r = prometheus_client::registry::Registry::default();
        edge.twin.metrics().register(&mut r);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        text
    };
    // junk, oversize, malformed, ghost, liar, membership.
    assert!(expected.contains("twin_refused_total 6"), "{expected}");
    edge.stop().await;
    let tables = TwinDb::open(&db).unwrap().load().unwrap();
    assert_eq!(tables.len(), 1);
    assert_eq!(tables["thermo"].twins["temperature"].expected_value(), Some("20"), "the liar changed nothing");
}

fn rusqlite_columns(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut q = conn.prepare("SELECT name FROM pragma_table_info('device_twin')").unwrap();
    q.query_map([], |r| r.get::<_, String>(0)).unwrap().map(Result::unwrap).collect()
}

/// Told by MetaManager that it missed changes, DeviceTwin reads the stored
/// Devices again: what it missed is applied, what is gone is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_from_metamanager_reads_the_store_again() {
    let dir = TempDir::new("devicetwin-resync");
    let db = dir.path().join("edgecore.db");
    let edge = Edge::start(&db);
    edge.send(device_message(op::INSERT, "20")).await;
    eventually("thermo is known", DEADLINE, || !edge.published("$hw/events/node/edge-1/membership/updated").is_empty())
        .await;
    // The store now holds another device, and not thermo (both missed).
    let meta = MetaDb::open(&db).unwrap();
    let other = json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
        "metadata": {"name": "missed", "namespace": "default", "uid": "u2", "resourceVersion": "9"},
        "spec": {"nodeName": "edge-1", "properties": [{"name": "level", "desired": {"value": "3"}}]}});
    meta.apply(&[edgehive_metamanager::Op::Put {
        key: "default/device/missed".into(),
        resource_type: "device".into(),
        value: other.to_string(),
    }])
    .unwrap();
    let wake = Message::new()
        .with_route(source::METAMANAGER, group::META, "devicelist", op::UPDATE)
        .with_content(Content::string("twin missed changes: read the store again"));
    edge.send(wake).await;
    eventually("the missed device is applied and thermo removed", DEADLINE, || {
        let m = edge.published("$hw/events/node/edge-1/membership/updated");
        m.iter().any(|p| p["added_devices"][0]["id"] == "missed")
            && m.iter().any(|p| p["removed_devices"][0]["id"] == "thermo")
    })
    .await;
    edge.stop().await;
    let tables = TwinDb::open(&db).unwrap().load().unwrap();
    assert_eq!(tables.keys().collect::<Vec<_>>(), ["missed"]);
    assert_eq!(tables["missed"].twins["level"].expected_value(), Some("3"));
}

/// Reports go to the cloud a few a flush, devices in turn: a flood of
/// changes neither starves the node's other messages nor any device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_are_paced_and_every_device_gets_its_turn() {
    let dir = TempDir::new("devicetwin-paced");
    let mut cfg = TwinConfig::new("edge-1");
    cfg.flush_interval = Duration::from_millis(20);
    cfg.reports_per_flush = 3;
    let edge = Edge::start_with(&dir.path().join("edgecore.db"), cfg);
    for i in 0..50 {
        let mut m = device_message(op::INSERT, "20");
        let mut v = m.content.to_value();
        v["metadata"]["name"] = json!(format!("d{i:02}"));
        m = m.with_content(Content::from_serialize(&v).unwrap());
        m.route.resource = format!("default/device/d{i:02}").into();
        edge.send(m).await;
    }
    for round in 0..3 {
        for i in 0..50 {
            let body = json!({"twin": {"temperature": {"actual": {"value": format!("{round}{i}")}}}}).to_string();
            edge.mqtt(&format!("$hw/events/device/d{i:02}/twin/update"), &body).await;
        }
    }
    let start = tokio::time::Instant::now();
    edge.connection(true).await;
    eventually("every device is reported", DEADLINE, || {
        let r = edge.reports();
        (0..50).all(|i| r.iter().any(|(res, _)| res == &format!("device/d{i:02}/twin/edge_updated")))
    })
    .await;
    // Three a flush: 50 reports take at least 16 flushes of 20 ms (a slow
    // machine only makes this longer).
    assert!(start.elapsed() >= Duration::from_millis(16 * 20), "{:?}: not paced", start.elapsed());
    // Each device once, with its latest value: merged while it waited.
    let r = edge.reports();
    assert_eq!(r.len(), 50, "{r:?}");
    for (res, body) in &r {
        let i: usize = res.trim_start_matches("device/d")[..2].parse().unwrap();
        assert_eq!(body["twin"]["temperature"]["actual"]["value"], format!("2{i}"), "{res}");
    }
    edge.stop().await;
}

/// With a cloud that agreed `device-reports`, many devices' reports go in
/// one message, up to 256 devices each, every device once with its latest
/// twin values and state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_agreeing_cloud_reports_go_in_batches() {
    let dir = TempDir::new("devicetwin-batched");
    let mut cfg = TwinConfig::new("edge-1");
    cfg.flush_interval = Duration::from_millis(20);
    cfg.reports_per_flush = 1;
    let edge = Edge::start_with(&dir.path().join("edgecore.db"), cfg);
    let n = 300;
    for i in 0..n {
        let mut m = device_message(op::INSERT, "20");
        let mut v = m.content.to_value();
        v["metadata"]["name"] = json!(format!("d{i:03}"));
        m = m.with_content(Content::from_serialize(&v).unwrap());
        m.route.resource = format!("default/device/d{i:03}").into();
        edge.send(m).await;
    }
    for round in 0..2 {
        for i in 0..n {
            let body = json!({"twin": {"temperature": {"actual": {"value": format!("{round}-{i}")}}}}).to_string();
            edge.mqtt(&format!("$hw/events/device/d{i:03}/twin/update"), &body).await;
        }
    }
    edge.mqtt("$hw/events/device/d007/state/update", r#"{"state":"online"}"#).await;
    edge.connection_agreeing(true, "session-liveness,device-reports").await;
    eventually("every device is reported", DEADLINE, || {
        edge.reports().iter().map(|(_, b)| b["devices"].as_array().map_or(0, Vec::len)).sum::<usize>() >= n
    })
    .await;
    let r = edge.reports();
    assert!(r.iter().all(|(res, _)| res == "devices/reports"), "{r:?}");
    assert_eq!(r.iter().map(|(_, b)| b["devices"].as_array().unwrap().len()).collect::<Vec<_>>(), [256, n - 256]);
    let mut ids = std::collections::BTreeSet::new();
    for entry in r.iter().flat_map(|(_, b)| b["devices"].as_array().unwrap().iter()) {
        let id = entry["id"].as_str().unwrap();
        assert!(ids.insert(id.to_owned()), "{id} twice");
        let i: usize = id[1..].parse().unwrap();
        assert_eq!(entry["twin"]["twin"]["temperature"]["actual"]["value"], format!("1-{i}"), "{id}");
        assert_eq!(entry.get("state").is_some(), id == "d007", "{id}");
    }
    let d007 = r.iter().flat_map(|(_, b)| b["devices"].as_array().unwrap()).find(|e| e["id"] == "d007").unwrap();
    assert_eq!(d007["state"]["device"]["state"], "online");
    edge.stop().await;
}

/// EdgeHub's notices can miss a module whose mailbox stays full; the link
/// state it keeps cannot. Reports follow the state alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_follow_edgehubs_link_state_without_its_notices() {
    let dir = TempDir::new("devicetwin-link");
    let db = dir.path().join("edgecore.db");
    let mut cfg = TwinConfig::new("edge-1");
    cfg.flush_interval = Duration::from_millis(20);
    let (link, state) = tokio::sync::watch::channel(None);
    let meta = Arc::new(MetaDb::open(&db).unwrap());
    let edge = Edge::start_twin(DeviceTwin::new(cfg, &db, meta).unwrap().with_link_state(state));
    edge.send(device_message(op::INSERT, "20")).await;
    let update = |v: &str| json!({"twin": {"temperature": {"actual": {"value": v}}}}).to_string();
    edge.mqtt("$hw/events/device/thermo/twin/update", &update("21")).await;
    link.send_replace(Some("session-liveness,device-reports".into()));
    eventually("the report, in a batch", DEADLINE, || {
        edge.reports().iter().any(|(res, b)| {
            res == "devices/reports" && b["devices"][0]["twin"]["twin"]["temperature"]["actual"]["value"] == "21"
        })
    })
    .await;
    // Down: a report waits. Up again (a cloud that agreed nothing): it goes,
    // one message per report.
    link.send_replace(None);
    edge.mqtt("$hw/events/device/thermo/twin/update", &update("22")).await;
    let before = edge.reports().len();
    link.send_replace(Some("".into()));
    eventually("the held report", DEADLINE, || {
        edge.reports().iter().any(|(res, b)| {
            res == "device/thermo/twin/edge_updated" && b["twin"]["temperature"]["actual"]["value"] == "22"
        })
    })
    .await;
    assert!(edge.reports().len() > before);
    edge.stop().await;
}

/// EventBus's mailbox full: the answers wait in order (DeviceTwin cannot
/// wait for room, as EventBus may be waiting for room in its mailbox), and
/// none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_wait_for_a_full_eventbus_in_order() {
    let dir = TempDir::new("devicetwin-full-bus");
    let db = dir.path().join("edgecore.db");
    let mut cfg = TwinConfig::new("edge-1");
    cfg.flush_interval = Duration::from_millis(20);
    let (open, gate) = tokio::sync::watch::channel(false);
    let meta = Arc::new(MetaDb::open(&db).unwrap());
    let edge = Edge::start_gated(DeviceTwin::new(cfg, &db, meta).unwrap(), Some(gate));
    edge.send(device_message(op::INSERT, "20")).await;
    let n = 100;
    for i in 0..n {
        edge.mqtt("$hw/events/device/thermo/twin/get", &format!(r#"{{"event_id":"g{i}"}}"#)).await;
    }
    open.send_replace(true);
    let topic = "$hw/events/device/thermo/twin/get/result";
    eventually("every answer", DEADLINE, || edge.published(topic).len() >= n).await;
    let ids: Vec<String> = edge.published(topic).iter().map(|a| a["event_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids, (0..n).map(|i| format!("g{i}")).collect::<Vec<_>>());
    edge.stop().await;
}

/// MetaManager and DeviceTwin write the same file from two connections: a
/// MetaManager commit (which reads before it writes) must wait for a twin
/// commit, not fail with "database is locked" (and so leave the cloud's
/// messages unACKed).
#[test]
fn metamanager_and_twin_commits_on_one_file_wait_for_each_other() {
    use edgehive_devicetwin::db::Write;
    use edgehive_devicetwin::twins::DeviceState;
    use edgehive_metamanager::Op;
    let dir = TempDir::new("devicetwin-shared-file");
    let path = dir.path().join("edgecore.db");
    let meta = Arc::new(MetaDb::open(&path).unwrap());
    let twin = Arc::new(TwinDb::open(&path).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (twin, stop) = (twin.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let d = DeviceState { id: format!("d{}", n % 50), name: "d".into(), ..DeviceState::default() };
                twin.apply(&[Write::Put(d)]).unwrap();
                n += 1;
            }
        })
    };
    // Big objects: reading the stored one (between the commit's first read
    // and its first write) takes a while.
    let big = "x".repeat(200_000);
    for i in 0..300 {
        let value =
            json!({"metadata": {"name": format!("p{i}"), "resourceVersion": "1"}, "data": {"k": big}}).to_string();
        let op = Op::Put { key: format!("default/pod/p{}", i % 20), resource_type: "pod".into(), value };
        meta.apply(&[op]).unwrap_or_else(|e| panic!("commit {i}: {e}"));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.join().unwrap();
}
