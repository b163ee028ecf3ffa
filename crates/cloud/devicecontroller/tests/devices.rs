//! DeviceController on a beehive with a stand-in CloudHub: what goes down
//! for Devices and DeviceModels, and what the edges' reports do to the
//! store, including reports that must be refused.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_beehive::{Beehive, Context, FnModule, ModuleContext, ModuleFuture};
use edgehive_devicecontroller::{DeviceController, DeviceControllerConfig};
use edgehive_model::{Content, Message, group, op, source};
use edgehive_store::resources::{DEVICE_MODELS, DEVICES};
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_testkit::eventually;
use edgehive_testkit::fixtures::TempDir;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type Seen = Arc<Mutex<Vec<Message>>>;

struct Cloud {
    store: Store,
    ctx: Context,
    seen: Seen,
    controller: Arc<DeviceController>,
    stop: CancellationToken,
    _dir: TempDir,
}

const DEADLINE: Duration = Duration::from_secs(20);

impl Cloud {
    async fn start(cfg: DeviceControllerConfig) -> Cloud {
        let (store, dir) = Cloud::store().await;
        Cloud::start_over(cfg, store, dir, Vec::new()).await
    }

    /// An empty store, to fill before the controller starts.
    async fn store() -> (Store, TempDir) {
        let dir = TempDir::new("devicecontroller");
        let store =
            Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false }))
                .await
                .unwrap();
        (store, dir)
    }

    /// The controller over `store`, with `queued` in its mailbox before it
    /// starts (what CloudHub handed over while it was starting).
    async fn start_over(cfg: DeviceControllerConfig, store: Store, dir: TempDir, queued: Vec<Message>) -> Cloud {
        let seen: Seen = Arc::default();
        let seen2 = seen.clone();
        let hub = FnModule::new(source::CLOUDHUB, source::CLOUDHUB, move |mut ctx: ModuleContext, cancel| {
            let seen = seen2.clone();
            Box::pin(async move {
                while let Some(m) = ctx.receive_until(&cancel).await {
                    seen.lock().unwrap().push(m);
                }
                Ok(())
            }) as ModuleFuture
        });
        let controller = Arc::new(DeviceController::new(store.clone(), cfg));
        let mut b = Beehive::builder();
        b.register(Arc::new(hub)).unwrap();
        b.register(controller.clone()).unwrap();
        let hive = b.build();
        let ctx = hive.context();
        for m in queued {
            ctx.send(source::DEVICECONTROLLER, m).await.unwrap();
        }
        let stop = CancellationToken::new();
        tokio::spawn(hive.run(stop.clone()));
        Cloud { store, ctx, seen, controller, stop, _dir: dir }
    }

    /// Messages seen so far for `resource` (and taken out).
    fn take(&self) -> Vec<Message> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// Sends CloudHub's forward of a report ([`report`]).
    async fn report(&self, node: &str, rest: &str, content: Content) {
        self.ctx.send(source::DEVICECONTROLLER, report(node, rest, content)).await.unwrap();
    }

    async fn status(&self, name: &str) -> Value {
        let d = self.store.get(&DEVICES, "default", name).await.unwrap();
        d.value().unwrap().get("status").cloned().unwrap_or(Value::Null)
    }

    fn metric(&self, name: &str) -> u64 {
        let mut r = prometheus_client::registry::Registry::with_prefix("edgehive");
        self.controller.metrics().register(&mut r);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        let line = text.lines().find(|l| l.starts_with(&format!("edgehive_devicecontroller_{name}"))).unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// An upstream report as CloudHub forwards it: `node/{node}/` prefixed
/// from the session's certificate, never from the edge's message.
fn report(node: &str, rest: &str, content: Content) -> Message {
    Message::new()
        .with_route(source::TWIN, group::RESOURCE, format!("node/{node}/{rest}"), op::UPDATE)
        .with_content(content)
}

fn model() -> Value {
    json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "DeviceModel",
        "metadata": {"name": "thermo-model", "namespace": "default"},
        "spec": {"protocol": "modbus", "properties": [{"name": "temperature", "type": "INT", "accessMode": "ReadWrite"}]}})
}

fn device(name: &str, node: &str, desired: &str) -> Value {
    json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "deviceModelRef": {"name": "thermo-model"},
            "protocol": {"protocolName": "modbus"},
            "properties": [{"name": "temperature", "desired": {"value": desired}}]}})
}

fn twin_report(value: &str) -> Content {
    Content::from_serialize(&json!({"event_id": "e", "timestamp": 1700,
        "twin": {"temperature": {"actual": {"value": value, "metadata": {"timestamp": 1700}},
            "expected": {"value": "20"}, "metadata": {"type": "int"}}}}))
    .unwrap()
}

fn routes(ms: &[Message]) -> Vec<(String, String, String)> {
    ms.iter()
        .map(|m| (m.route.group.to_string(), m.route.resource.to_string(), m.route.operation.to_string()))
        .collect()
}

async fn seen_until(cloud: &Cloud, n: usize) -> Vec<Message> {
    let mut all = Vec::new();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while all.len() < n && tokio::time::Instant::now() < deadline {
        all.extend(cloud.take());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_go_to_their_node_and_reports_come_back_coalesced() {
    let cloud = Cloud::start(DeviceControllerConfig {
        min_write_interval: Duration::from_millis(300),
        ..DeviceControllerConfig::default()
    })
    .await;
    cloud.store.create(&DEVICE_MODELS, model()).await.unwrap();
    let created = cloud.store.create(&DEVICES, device("thermo", "edge-1", "20")).await.unwrap();

    // Membership, model, device: KubeEdge v1.15's three messages. The
    // model's informer races the devices', so it may come first or last.
    let mut down = seen_until(&cloud, 3).await;
    let model_at = down.iter().position(|m| m.route.resource.contains("/devicemodel/")).unwrap();
    let model_msg = down.remove(model_at);
    assert_eq!(model_msg.route.operation, "insert");
    assert_eq!(model_msg.route.resource, "node/edge-1/default/devicemodel/thermo-model");
    assert_eq!(
        routes(&down),
        vec![
            ("twin".into(), "node/edge-1/membership".into(), "update".into()),
            ("resource".into(), "node/edge-1/default/device/thermo".into(), "insert".into()),
        ]
    );
    let membership = down[0].content.to_value();
    assert_eq!(membership["added_devices"], json!([{"id": "thermo", "name": "thermo"}]));
    assert_eq!(membership["removed_devices"], json!([]));
    assert_eq!(down[1].header.resource_version.as_str(), created.rev().to_string());

    // A report of edge-1 lands in the status.
    cloud.report("edge-1", "device/thermo/twin/edge_updated", twin_report("21")).await;
    let mut status = Value::Null;
    for _ in 0..200 {
        status = cloud.status("thermo").await;
        if status.pointer("/twins/0/reported/value") == Some(&json!("21")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        status["twins"][0],
        json!({"propertyName": "temperature",
            "reported": {"value": "21", "metadata": {"timestamp": "1700", "type": "int"}},
            "observedDesired": {"value": "20", "metadata": {"type": "int"}}})
    );
    // A status write sends nothing down (the spec did not change).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(cloud.take().is_empty());

    // Fifty reports in a burst: a few writes, the last value wins.
    let writes_before = cloud.metric("status_writes_total");
    for v in 0..50 {
        cloud.report("edge-1", "device/thermo/twin/edge_updated", twin_report(&format!("{}", 100 + v))).await;
    }
    eventually("the last value is written", DEADLINE, || {
        futures_poll(cloud.status("thermo")).pointer("/twins/0/reported/value") == Some(&json!("149"))
    })
    .await;
    let writes = cloud.metric("status_writes_total") - writes_before;
    assert!(writes <= 4, "{writes} writes for 50 reports");
    assert!(cloud.metric("coalesced_total") >= 40);

    // A state report.
    let state = Content::string(
        r#"{"event_id":"s","timestamp":1,"device":{"name":"thermo","state":"online","last_online":"2026-11-25 10:00:00"}}"#,
    );
    cloud.report("edge-1", "device/thermo/state/update", state).await;
    eventually("the state is written", DEADLINE, || futures_poll(cloud.status("thermo"))["state"] == "online").await;

    // A new desired value goes down as an update of the Device.
    let mut d = cloud.store.get(&DEVICES, "default", "thermo").await.unwrap().to_value().unwrap();
    d["spec"]["properties"][0]["desired"]["value"] = json!("25");
    cloud.store.update(&DEVICES, d).await.unwrap();
    let down = seen_until(&cloud, 2).await;
    assert_eq!(
        routes(&down),
        vec![
            ("resource".into(), "node/edge-1/default/devicemodel/thermo-model".into(), "update".into()),
            ("resource".into(), "node/edge-1/default/device/thermo".into(), "update".into()),
        ]
    );
    assert_eq!(down[1].content.to_value()["spec"]["properties"][0]["desired"]["value"], "25");

    // The node reconnects: everything offered again (CloudHub filters).
    let connected = Message::new().with_route(source::CLOUDHUB, group::RESOURCE, "node/edge-1", op::CONNECTED);
    cloud.ctx.send(source::DEVICECONTROLLER, connected).await.unwrap();
    let down = seen_until(&cloud, 3).await;
    assert_eq!(down.len(), 3, "{:?}", routes(&down));

    // Moved to edge-2: edge-1 loses device and model, edge-2 gains them.
    let mut d = cloud.store.get(&DEVICES, "default", "thermo").await.unwrap().to_value().unwrap();
    d["spec"]["nodeName"] = json!("edge-2");
    cloud.store.update(&DEVICES, d).await.unwrap();
    let down = seen_until(&cloud, 6).await;
    assert_eq!(
        routes(&down),
        vec![
            ("twin".into(), "node/edge-1/membership".into(), "update".into()),
            ("resource".into(), "node/edge-1/default/device/thermo".into(), "delete".into()),
            ("resource".into(), "node/edge-1/default/devicemodel/thermo-model".into(), "delete".into()),
            ("twin".into(), "node/edge-2/membership".into(), "update".into()),
            ("resource".into(), "node/edge-2/default/devicemodel/thermo-model".into(), "insert".into()),
            ("resource".into(), "node/edge-2/default/device/thermo".into(), "insert".into()),
        ]
    );
    assert_eq!(down[1].content.to_value()["metadata"]["uid"], created.uid().unwrap());
}

/// A node may report only its own devices; malformed reports are refused
/// and hurt nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_for_another_nodes_device_or_malformed_are_refused() {
    let cloud = Cloud::start(DeviceControllerConfig {
        min_write_interval: Duration::from_millis(50),
        ..DeviceControllerConfig::default()
    })
    .await;
    cloud.store.create(&DEVICE_MODELS, model()).await.unwrap();
    cloud.store.create(&DEVICES, device("thermo", "edge-1", "20")).await.unwrap();
    cloud.store.create(&DEVICES, device("other", "edge-2", "20")).await.unwrap();
    seen_until(&cloud, 6).await;

    // edge-2 forges a report of edge-1's device; nonsense of every kind.
    cloud.report("edge-2", "device/thermo/twin/edge_updated", twin_report("666")).await;
    cloud.report("edge-2", "device/nosuch/twin/edge_updated", twin_report("666")).await;
    cloud.report("edge-1", "device/thermo/twin/edge_updated", Content::string("{not json")).await;
    cloud
        .report("edge-1", "device/thermo/twin/edge_updated", Content::from_serialize(&json!({"twin": 5})).unwrap())
        .await;
    cloud.report("edge-1", "device/thermo/twin/edge_updated", Content::from_serialize(&json!([1])).unwrap()).await;
    cloud.report("edge-1", "device/thermo/frobnicate", twin_report("1")).await;
    cloud.report("edge-1", "default/pod/web", twin_report("1")).await;
    let huge = json!({"twin": {"temperature": {"actual": {"value": "9".repeat(100_000)}}}});
    cloud.report("edge-1", "device/thermo/twin/edge_updated", Content::from_serialize(&huge).unwrap()).await;
    // A message without the node prefix at all.
    let bare = Message::new()
        .with_route(source::TWIN, group::RESOURCE, "device/thermo/twin/edge_updated", op::UPDATE)
        .with_content(twin_report("666"));
    cloud.ctx.send(source::DEVICECONTROLLER, bare).await.unwrap();

    // Then a good report from the right node, which lands.
    cloud.report("edge-2", "device/other/twin/edge_updated", twin_report("7")).await;
    eventually("edge-2's own report is written", DEADLINE, || {
        futures_poll(cloud.status("other")).pointer("/twins/0/reported/value") == Some(&json!("7"))
    })
    .await;
    assert_eq!(cloud.metric("refused_total"), 9);
    assert_eq!(cloud.status("thermo").await, Value::Null, "thermo untouched");
}

/// A batch (`devices/reports`) is taken entry by entry: a forged or
/// malformed entry is refused alone, the node's own devices land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_taken_entry_by_entry() {
    let cloud = Cloud::start(DeviceControllerConfig {
        min_write_interval: Duration::from_millis(50),
        ..DeviceControllerConfig::default()
    })
    .await;
    cloud.store.create(&DEVICE_MODELS, model()).await.unwrap();
    cloud.store.create(&DEVICES, device("thermo", "edge-1", "20")).await.unwrap();
    cloud.store.create(&DEVICES, device("other", "edge-2", "20")).await.unwrap();
    cloud.store.create(&DEVICES, device("third", "edge-2", "20")).await.unwrap();
    seen_until(&cloud, 9).await;

    let twin = |v: &str| twin_report(v).to_value();
    // Not a batch at all: refused whole.
    cloud.report("edge-2", "devices/reports", Content::from_serialize(&json!({"devices": 5})).unwrap()).await;
    // edge-2 hides edge-1's device among its own, with a malformed entry.
    let batch = json!({"devices": [
        {"id": "thermo", "twin": twin("666")},
        {"id": "other", "twin": twin("7")},
        {"id": "other", "twin": {"twin": {"temperature": {"actual": {"value": 1}}}}},
        {"id": "third", "twin": twin("8"), "state": {"device": {"state": "online"}}},
    ]});
    cloud.report("edge-2", "devices/reports", Content::from_serialize(&batch).unwrap()).await;
    eventually("edge-2's own devices are written", DEADLINE, || {
        futures_poll(cloud.status("other")).pointer("/twins/0/reported/value") == Some(&json!("7"))
            && futures_poll(cloud.status("third")).get("state") == Some(&json!("online"))
    })
    .await;
    assert_eq!(cloud.status("third").await.pointer("/twins/0/reported/value"), Some(&json!("8")));
    assert_eq!(cloud.metric("refused_total"), 3);
    assert_eq!(cloud.metric("batches_total"), 1);
    assert_eq!(cloud.status("thermo").await, Value::Null, "thermo untouched");
}

/// More devices due than writes may be in flight: each is written in
/// turn, none starved (values change on every report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_more_due_than_in_flight_every_device_is_written() {
    let cloud = Cloud::start(DeviceControllerConfig {
        min_write_interval: Duration::from_millis(300),
        writes_in_flight: 1,
        ..DeviceControllerConfig::default()
    })
    .await;
    cloud.store.create(&DEVICE_MODELS, model()).await.unwrap();
    let n = 40;
    for i in 0..n {
        cloud.store.create(&DEVICES, device(&format!("d{i:02}"), "edge-1", "20")).await.unwrap();
    }
    seen_until(&cloud, 3 * n).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut round = 0;
    loop {
        round += 1;
        for i in 0..n {
            let r = twin_report(&format!("{round}"));
            cloud.report("edge-1", &format!("device/d{i:02}/twin/edge_updated"), r).await;
        }
        let mut unwritten = 0;
        for i in 0..n {
            if cloud.status(&format!("d{i:02}")).await == Value::Null {
                unwritten += 1;
            }
        }
        if unwritten == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{unwritten} of {n} devices never written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs a store read to completion from a sync closure (the test's
/// `eventually` takes one); the store answers without blocking on I/O
/// this test controls.
fn futures_poll<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// A value that goes back to an earlier one right after a write is written
/// at once, not a refresh interval later (the informer's copy of the status
/// lags behind the controller's own writes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_back_to_an_earlier_one_is_written_without_waiting_a_refresh() {
    let cloud = Cloud::start(DeviceControllerConfig {
        min_write_interval: Duration::from_millis(100),
        refresh_interval: Duration::from_secs(3600),
        ..DeviceControllerConfig::default()
    })
    .await;
    cloud.store.create(&DEVICE_MODELS, model()).await.unwrap();
    cloud.store.create(&DEVICES, device("thermo", "edge-1", "20")).await.unwrap();
    seen_until(&cloud, 3).await;
    let value = |cloud: &Cloud| futures_poll(cloud.status("thermo")).pointer("/twins/0/reported/value").cloned();
    cloud.report("edge-1", "device/thermo/twin/edge_updated", twin_report("21")).await;
    eventually("21 is written", DEADLINE, || value(&cloud) == Some(json!("21"))).await;
    // 22 then 21 again, the second at a different moment of the first's
    // write each round (a deliberate spread, to meet the write in flight).
    for round in 0..30u64 {
        cloud.report("edge-1", "device/thermo/twin/edge_updated", twin_report("22")).await;
        tokio::time::sleep(Duration::from_millis(round * 7 % 160)).await;
        cloud.report("edge-1", "device/thermo/twin/edge_updated", twin_report("21")).await;
        eventually(&format!("round {round}: back to 21 at once"), Duration::from_secs(5), || {
            value(&cloud) == Some(json!("21"))
        })
        .await;
    }
}

/// Ids on the edge are names: a second Device of one name bound to the same
/// node from another namespace is not sent (it would overwrite the first
/// there), and reports of that name are refused as ambiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_device_of_the_same_name_on_a_node_is_not_sent() {
    let cloud = Cloud::start(DeviceControllerConfig::default()).await;
    cloud.store.create(&DEVICE_MODELS, model()).await.unwrap();
    cloud.store.create(&DEVICES, device("thermo", "edge-1", "20")).await.unwrap();
    seen_until(&cloud, 3).await;
    let mut other = device("thermo", "edge-1", "99");
    other["metadata"]["namespace"] = json!("other");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    cloud.store.create(&edgehive_store::resources::NAMESPACES, ns).await.unwrap();
    cloud.store.create(&DEVICES, other).await.unwrap();
    eventually("refused", DEADLINE, || cloud.metric("refused_total") == 1).await;
    assert!(cloud.take().iter().all(|m| !m.route.resource.contains("/other/")), "nothing of other/thermo sent");
    // An undeclared twin in a report is dropped, the declared one kept.
    let report = Content::from_serialize(&json!({"twin": {
        "temperature": {"actual": {"value": "5"}}, "nonsense": {"actual": {"value": "6"}}}}))
    .unwrap();
    cloud.report("edge-1", "device/thermo/twin/edge_updated", report).await;
    // The report is of the device the node holds: default/thermo.
    eventually("the held device's report is written", DEADLINE, || {
        futures_poll(cloud.status("thermo")).pointer("/twins/0/reported/value") == Some(&json!("5"))
    })
    .await;
    assert_eq!(cloud.status("thermo").await["twins"].as_array().unwrap().len(), 1);
    assert_eq!(cloud.metric("refused_total"), 1);
    // The first leaves: the one that waited is sent in its place.
    cloud.take();
    cloud.store.delete(&DEVICES, "default", "thermo", &Default::default()).await.unwrap();
    let seen = seen_until(&cloud, 4).await;
    let r = routes(&seen);
    assert!(r.iter().any(|(_, res, op)| res == "node/edge-1/default/device/thermo" && op == "delete"), "{r:?}");
    assert!(r.iter().any(|(_, res, op)| res == "node/edge-1/other/device/thermo" && op == "insert"), "{r:?}");
    let sent = seen.iter().find(|m| m.route.resource == "node/edge-1/other/device/thermo").unwrap();
    assert_eq!(sent.content.to_value().pointer("/spec/properties/0/desired/value"), Some(&json!("99")));
}

/// Reports handed over while the controller starts (edges reconnecting to
/// a restarted cloud report every device again) wait for the Devices'
/// list: before it, no device holds their name, and they were refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_taken_while_the_controller_starts_waits_for_the_devices_list() {
    let (store, dir) = Cloud::store().await;
    store.create(&DEVICE_MODELS, model()).await.unwrap();
    store.create(&DEVICES, device("thermo", "edge-1", "20")).await.unwrap();
    let queued = vec![report("edge-1", "device/thermo/twin/edge_updated", twin_report("23"))];
    let cloud = Cloud::start_over(DeviceControllerConfig::default(), store, dir, queued).await;
    let reported = || async { cloud.status("thermo").await.pointer("/twins/0/reported/value") == Some(&json!("23")) };
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !reported().await {
        assert!(tokio::time::Instant::now() < deadline, "the report never reached the status");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cloud.metric("refused"), 0);
}
