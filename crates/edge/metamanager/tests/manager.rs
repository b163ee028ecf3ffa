//! MetaManager on a real beehive with a stand-in EdgeHub (module
//! `websocket`): changes from the cloud are committed before their ACK,
//! updates upsert and never go back in version, queries are answered by the
//! cloud when connected and from the store otherwise — also by a new
//! MetaManager over the same database with no cloud at all. With a stand-in
//! edged: changes its full mailbox could not take still reach it (a wake-up
//! and a re-read of the store), and a deleted pod's status rows go with it.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_beehive::{Beehive, Context, FnModule, ModuleContext};
use edgehive_metamanager::{MetaConfig, MetaDb, MetaManager, MetaMetrics};
use edgehive_model::{Content, Message, group, op, source, well_known};
use edgehive_testkit::fixtures::TempDir;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

/// What the stand-in EdgeHub saw: each message, and whether the object it
/// ACKs was already in the database when the ACK came.
type Seen = Arc<Mutex<Vec<(Message, bool)>>>;

struct Edge {
    ctx: Context,
    seen: Seen,
    stop: CancellationToken,
    db_path: std::path::PathBuf,
}

impl Drop for Edge {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A beehive with MetaManager over `db` and a `websocket` module that
/// records what reaches it and answers queries with `cloud_answer`.
fn edge(db: &Path, cloud_answer: Option<Value>, cfg: MetaConfig) -> Edge {
    edge_with(db, cloud_answer, cfg, None).0
}

/// The value of one sample of MetaManager's metrics as `edgehive edge`
/// exports them, e.g. `edgehive_metamanager_committed_total` (panics when
/// there is none).
fn metric(metrics: &MetaMetrics, series: &str) -> u64 {
    let mut registry = prometheus_client::registry::Registry::with_prefix("edgehive");
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
}

/// As [`edge`], with another module (a stand-in edged); also MetaManager's counters.
fn edge_with(
    db: &Path,
    cloud_answer: Option<Value>,
    cfg: MetaConfig,
    extra: Option<Arc<dyn edgehive_beehive::Module>>,
) -> (Edge, Arc<MetaMetrics>) {
    let mut b = Beehive::builder();
    let meta = Arc::new(MetaManager::new(cfg, Arc::new(MetaDb::open(db).unwrap())));
    let metrics = meta.metrics();
    b.register(meta).unwrap();
    if let Some(m) = extra {
        b.register(m).unwrap();
    }
    (with_hub(b, db, cloud_answer), metrics)
}

/// Adds the stand-in EdgeHub to a hive holding MetaManager and runs it.
fn with_hub(mut b: edgehive_beehive::BeehiveBuilder, db: &Path, cloud_answer: Option<Value>) -> Edge {
    let seen: Seen = Arc::default();
    let (seen2, path) = (seen.clone(), db.to_owned());
    let hub = FnModule::new(source::WEBSOCKET, group::HUB, move |mut ctx: ModuleContext, cancel: CancellationToken| {
        let (seen, path, answer) = (seen2.clone(), path.clone(), cloud_answer.clone());
        Box::pin(async move {
            let check = MetaDb::open(&path).unwrap();
            while let Some(m) = ctx.receive_until(&cancel).await {
                let stored = check.get(&m.route.resource).ok().flatten().is_some();
                if m.route.operation == op::QUERY
                    && let Some(a) = &answer
                {
                    let mut r = m.response(Content::from_serialize(a).unwrap());
                    r.route.source = source::EDGECONTROLLER.into();
                    let _ = ctx.send_resp(r);
                }
                // Events are recorded when the stand-in cloud has an answer.
                if m.route.operation == op::INSERT && m.route.resource.contains("/event/") && answer.is_some() {
                    let _ = ctx.send_resp(m.response(m.content.clone()));
                }
                seen.lock().unwrap().push((m, stored));
            }
            Ok(())
        }) as edgehive_beehive::ModuleFuture
    });
    b.register(Arc::new(hub)).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let stop = CancellationToken::new();
    tokio::spawn(hive.run(stop.clone()));
    Edge { ctx, seen, stop, db_path: db.to_owned() }
}

fn from_cloud(operation: &'static str, resource: &str, obj: Value) -> Message {
    let rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
    Message::new()
        .with_route(source::EDGECONTROLLER, group::RESOURCE, resource.to_owned(), operation)
        .with_resource_version(rv)
        .with_content(Content::from_serialize(&obj).unwrap())
}

fn pod(name: &str, rv: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": rv}})
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl Edge {
    fn acks(&self) -> Vec<(Message, bool)> {
        self.seen.lock().unwrap().iter().filter(|(m, _)| m.route.operation == op::RESPONSE).cloned().collect()
    }

    fn stored(&self, key: &str) -> Option<Value> {
        MetaDb::open(&self.db_path).unwrap().get(key).unwrap().map(|v| serde_json::from_str(&v).unwrap())
    }

    async fn connect(&self, up: bool) {
        self.connect_agreeing(up, "").await;
    }

    /// As EdgeHub says it: the agreed features in the message's type.
    async fn connect_agreeing(&self, up: bool, agreed: &str) {
        let state = if up { well_known::CLOUD_CONNECTED } else { well_known::CLOUD_DISCONNECTED };
        let mut m = Message::new()
            .with_route(source::EDGEHUB, group::META, well_known::NODE_CONNECTION, op::CONNECT)
            .with_content(Content::string(state));
        m.header.message_type = edgehive_model::Text::copy_from(agreed);
        self.ctx.send("metamanager", m).await.unwrap();
    }

    fn sent(&self, operation: &str) -> Vec<Message> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m.route.operation == operation)
            .map(|(m, _)| m.clone())
            .collect()
    }

    async fn query(&self, resource: &str) -> Message {
        let q = Message::new().with_route(source::EDGED, group::META, resource.to_owned(), op::QUERY);
        self.ctx.send_sync("metamanager", q, WAIT).await.unwrap()
    }
}

#[tokio::test]
async fn changes_are_committed_before_their_ack_and_never_go_back() {
    let dir = TempDir::new("mm-commit");
    let e = edge(&dir.path().join("edge.db"), None, MetaConfig::default());
    let mut sent = Vec::new();
    for i in 0..200 {
        let m = from_cloud(op::INSERT, &format!("default/pod/p{i}"), pod(&format!("p{i}"), "10"));
        sent.push(m.header.msg_id.clone());
        e.ctx.send("metamanager", m).await.unwrap();
    }
    eventually("200 ACKs", || e.acks().len() == 200).await;
    for (ack, stored_before) in e.acks() {
        assert!(stored_before, "ACK for {} before its commit", ack.route.resource);
        assert_eq!(ack.content.as_text().as_deref(), Some("OK"));
        assert!(sent.contains(&ack.header.parent_msg_id));
    }
    // An update of an unknown object inserts it; an older version does not overwrite.
    e.ctx.send("metamanager", from_cloud(op::UPDATE, "default/pod/late", pod("late", "7"))).await.unwrap();
    e.ctx.send("metamanager", from_cloud(op::UPDATE, "default/pod/p1", pod("p1", "9"))).await.unwrap();
    e.ctx.send("metamanager", from_cloud(op::DELETE, "default/pod/p2", pod("p2", "10"))).await.unwrap();
    eventually("3 more ACKs", || e.acks().len() == 203).await;
    assert_eq!(e.stored("default/pod/late").unwrap()["metadata"]["resourceVersion"], "7");
    assert_eq!(e.stored("default/pod/p1").unwrap()["metadata"]["resourceVersion"], "10");
    assert!(e.stored("default/pod/p2").is_none());
}

#[tokio::test]
async fn queries_ask_the_cloud_when_connected_and_the_store_otherwise() {
    let dir = TempDir::new("mm-query");
    let db = dir.path().join("edge.db");
    let cm = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "cfg", "namespace": "default", "resourceVersion": "5"}, "data": {"k": "cloud"}});
    let e = edge(&db, Some(cm.clone()), MetaConfig::default());
    e.ctx
        .send(
            "metamanager",
            from_cloud(
                op::INSERT,
                "default/configmap/cfg",
                json!({"metadata": {"name": "cfg", "resourceVersion": "3"}, "data": {"k": "local"}}),
            ),
        )
        .await
        .unwrap();
    eventually("stored", || e.stored("default/configmap/cfg").is_some()).await;

    // Offline: the store answers, as a list of values.
    let r = e.query("default/configmap/cfg").await;
    let values: Vec<String> = r.content.decode().unwrap();
    assert_eq!(serde_json::from_str::<Value>(&values[0]).unwrap()["data"]["k"], "local");

    // Connected: the cloud answers; the answer is stored and ACKed.
    e.connect(true).await;
    let r = e.query("default/configmap/cfg").await;
    assert_eq!(r.content.to_value()["data"]["k"], "cloud");
    assert_eq!(e.stored("default/configmap/cfg").unwrap()["data"]["k"], "cloud");
    eventually("the cloud's answer is ACKed", || {
        e.seen.lock().unwrap().iter().any(|(m, _)| {
            m.route.operation == op::RESPONSE
                && m.content.as_text().as_deref() == Some("OK")
                && m.route.resource == "default/configmap/cfg"
        })
    })
    .await;

    // A type list is always local.
    let r = e.query("default/configmap").await;
    assert_eq!(r.content.decode::<Vec<String>>().unwrap().len(), 1);
}

#[tokio::test]
async fn a_cloud_that_does_not_answer_falls_back_to_the_store() {
    let dir = TempDir::new("mm-fallback");
    let cfg = MetaConfig { remote_query_timeout: Duration::from_millis(200), ..MetaConfig::default() };
    let e = edge(&dir.path().join("edge.db"), None, cfg);
    e.ctx
        .send(
            "metamanager",
            from_cloud(op::INSERT, "default/secret/s", json!({"metadata": {"name": "s", "resourceVersion": "1"}})),
        )
        .await
        .unwrap();
    eventually("stored", || e.stored("default/secret/s").is_some()).await;
    e.connect(true).await;
    let r = e.query("default/secret/s").await;
    assert_eq!(r.route.operation, op::RESPONSE);
    assert_eq!(r.content.decode::<Vec<String>>().unwrap().len(), 1);
}

#[tokio::test]
async fn after_a_restart_without_the_cloud_every_object_is_served_and_damaged_rows_skipped() {
    let dir = TempDir::new("mm-autonomy");
    let db = dir.path().join("edge.db");
    {
        let e = edge(&db, None, MetaConfig::default());
        for i in 0..40 {
            e.ctx
                .send("metamanager", from_cloud(op::INSERT, &format!("default/pod/p{i}"), pod(&format!("p{i}"), "1")))
                .await
                .unwrap();
        }
        eventually("40 ACKs", || e.acks().len() == 40).await;
    }
    rusqlite_insert_damaged(&db);
    // A new MetaManager, no cloud: everything is there.
    let e = edge(&db, None, MetaConfig::default());
    let r = e.query("default/pod").await;
    let pods: Vec<String> = r.content.decode().unwrap();
    assert_eq!(pods.len(), 40, "the damaged row is skipped, the rest served");
    let one = e.query("default/pod/p7").await;
    assert_eq!(one.content.decode::<Vec<String>>().unwrap().len(), 1);
    let bad = e.query("default/pod/broken").await;
    assert_eq!(bad.content.decode::<Vec<String>>().unwrap().len(), 0);
}

fn rusqlite_insert_damaged(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute("INSERT INTO meta VALUES ('default/pod/broken', 'pod', '{truncated')", []).unwrap();
}

/// What the stand-in edged believes the store holds: pod key → resourceVersion.
type Applied = Arc<Mutex<std::collections::BTreeMap<String, String>>>;

/// A stand-in edged with a mailbox of four that takes nothing until
/// `release` is cancelled; then it applies each pod change it is passed,
/// and on MetaManager's wake-up (`update podlist`) reads every pod from
/// the store again, as edged does.
fn stalled_edged(applied: Applied, release: CancellationToken) -> Arc<dyn edgehive_beehive::Module> {
    let edged = FnModule::new(source::EDGED, group::EDGED, move |mut ctx: ModuleContext, cancel: CancellationToken| {
        let (applied, release) = (applied.clone(), release.clone());
        Box::pin(async move {
            tokio::select! {
                () = release.cancelled() => {}
                () = cancel.cancelled() => return Ok(()),
            }
            while let Some(m) = ctx.receive_until(&cancel).await {
                let resource = m.route.resource.to_string();
                if resource == "podlist" {
                    let q = Message::new().with_route(source::EDGED, group::META, "default/pod", op::QUERY);
                    let r = ctx.context().send_sync("metamanager", q, WAIT).await.unwrap();
                    let rows: Vec<String> = r.content.decode().unwrap();
                    let mut map = applied.lock().unwrap();
                    map.clear();
                    for row in rows {
                        let v: Value = serde_json::from_str(&row).unwrap();
                        let name = v["metadata"]["name"].as_str().unwrap();
                        map.insert(
                            format!("default/pod/{name}"),
                            v["metadata"]["resourceVersion"].as_str().unwrap().into(),
                        );
                    }
                    continue;
                }
                let mut map = applied.lock().unwrap();
                if m.route.operation == op::DELETE {
                    map.remove(&resource);
                } else {
                    let rv = m.content.to_value()["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
                    map.insert(resource, rv);
                }
            }
            Ok(())
        }) as edgehive_beehive::ModuleFuture
    })
    .mailbox_capacity(4);
    Arc::new(edged)
}

/// A stand-in DeviceTwin with a mailbox of two that takes nothing until
/// `release`; then it records each Device it is passed, and on
/// MetaManager's wake-up (`update devicelist`) what the store holds.
fn stalled_twin(seen: Arc<Mutex<Vec<String>>>, release: CancellationToken) -> Arc<dyn edgehive_beehive::Module> {
    let twin = FnModule::new(source::TWIN, group::TWIN, move |mut ctx: ModuleContext, cancel: CancellationToken| {
        let (seen, release) = (seen.clone(), release.clone());
        Box::pin(async move {
            tokio::select! {
                () = release.cancelled() => {}
                () = cancel.cancelled() => return Ok(()),
            }
            while let Some(m) = ctx.receive_until(&cancel).await {
                seen.lock().unwrap().push(m.route.resource.to_string());
            }
            Ok(())
        }) as edgehive_beehive::ModuleFuture
    })
    .mailbox_capacity(2);
    Arc::new(twin)
}

/// Devices go to DeviceTwin, never waited for: a stalled DeviceTwin holds up
/// no commit and no ACK (pods included), and gets a wake-up to re-read the
/// store for what its full mailbox did not take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_device_twin_holds_up_nothing_and_is_told_to_read_the_store() {
    let dir = TempDir::new("mm-twin-full");
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let release = CancellationToken::new();
    let (e, metrics) = edge_with(
        &dir.path().join("edge.db"),
        None,
        MetaConfig::default(),
        Some(stalled_twin(seen.clone(), release.clone())),
    );
    let device = |i: usize| {
        json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
            "metadata": {"name": format!("d{i}"), "namespace": "default", "uid": format!("u{i}"), "resourceVersion": "1"}})
    };
    for i in 0..20 {
        let mut m = from_cloud(op::INSERT, &format!("default/device/d{i}"), device(i));
        m.route.source = source::DEVICECONTROLLER.into();
        e.ctx.send("metamanager", m).await.unwrap();
    }
    e.ctx.send("metamanager", from_cloud(op::INSERT, "default/pod/p", pod("p", "1"))).await.unwrap();
    eventually("every change ACKed while the twin is stalled", || e.acks().len() == 21).await;
    assert!(metric(&metrics, "edgehive_metamanager_twin_missed_total") >= 18);
    release.cancel();
    eventually("the twin is told to read the store", || seen.lock().unwrap().iter().any(|r| r == "devicelist")).await;
    assert!(metric(&metrics, "edgehive_metamanager_twin_resyncs_total") >= 1);
    assert!(seen.lock().unwrap().iter().all(|r| r.contains("/device/") || r == "devicelist"), "pods do not go to twin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_edgeds_full_mailbox_could_not_take_still_reach_it() {
    let dir = TempDir::new("mm-edged-full");
    let applied: Applied = Arc::default();
    let release = CancellationToken::new();
    let (e, metrics) = edge_with(
        &dir.path().join("edge.db"),
        None,
        MetaConfig::default(),
        Some(stalled_edged(applied.clone(), release.clone())),
    );
    // 40 inserts, 20 updates, 10 deletes while edged takes nothing: its
    // mailbox of four fills at once.
    let mut n = 0;
    for i in 0..40 {
        e.ctx
            .send("metamanager", from_cloud(op::INSERT, &format!("default/pod/p{i}"), pod(&format!("p{i}"), "1")))
            .await
            .unwrap();
        n += 1;
    }
    for i in 0..20 {
        e.ctx
            .send("metamanager", from_cloud(op::UPDATE, &format!("default/pod/p{i}"), pod(&format!("p{i}"), "2")))
            .await
            .unwrap();
        n += 1;
    }
    for i in 30..40 {
        e.ctx
            .send("metamanager", from_cloud(op::DELETE, &format!("default/pod/p{i}"), pod(&format!("p{i}"), "1")))
            .await
            .unwrap();
        n += 1;
    }
    // MetaManager does not wait for edged: every change is committed and
    // ACKed while edged is stalled.
    eventually("every change ACKed while edged is stalled", || e.acks().len() == n).await;
    let missed = metric(&metrics, "edgehive_metamanager_edged_missed_total");
    assert!(missed >= 60, "edged's mailbox of four took {} of {n} changes", n as u64 - missed);
    // Edged gets going: it ends up with exactly what the store holds.
    release.cancel();
    let store = || -> std::collections::BTreeMap<String, String> {
        MetaDb::open(&e.db_path)
            .unwrap()
            .list_type("pod")
            .unwrap()
            .rows
            .into_iter()
            .map(|(k, v)| {
                let v: Value = serde_json::from_str(&v).unwrap();
                (k, v["metadata"]["resourceVersion"].as_str().unwrap().to_owned())
            })
            .collect()
    };
    assert_eq!(store().len(), 30);
    eventually("edged holds what the store holds", || *applied.lock().unwrap() == store()).await;
    assert!(metric(&metrics, "edgehive_metamanager_edged_resyncs_total") >= 1);
    assert_eq!(applied.lock().unwrap()["default/pod/p3"], "2");
    assert_eq!(applied.lock().unwrap()["default/pod/p25"], "1");
}

#[tokio::test]
async fn a_deleted_pods_status_rows_go_with_it() {
    let dir = TempDir::new("mm-status-churn");
    let e = edge(&dir.path().join("edge.db"), None, MetaConfig::default());
    let status = |name: &str, ty: &str, operation: &'static str| {
        Message::new().with_route(source::EDGED, group::META, format!("default/{ty}/{name}"), operation).with_content(
            Content::from_serialize(&json!({"UID": format!("uid-{name}"), "Status": {"phase": "Running"}})).unwrap(),
        )
    };
    // Pods come, report, go — and report once more after their delete (a
    // report in flight while the delete is committed).
    for round in 0..3 {
        for i in 0..20 {
            let name = format!("p{i}");
            let rv = (round * 10 + 1).to_string();
            e.ctx
                .send("metamanager", from_cloud(op::INSERT, &format!("default/pod/{name}"), pod(&name, &rv)))
                .await
                .unwrap();
            e.ctx.send("metamanager", status(&name, "podstatus", op::UPDATE)).await.unwrap();
            e.ctx.send("metamanager", status(&name, "podpatch", op::PATCH)).await.unwrap();
        }
        eventually("status rows stored beside their pods", || {
            let db = MetaDb::open(&e.db_path).unwrap();
            db.list_type("podstatus").unwrap().rows.len() == 20 && db.list_type("podpatch").unwrap().rows.len() == 20
        })
        .await;
        for i in 0..20 {
            let name = format!("p{i}");
            e.ctx
                .send("metamanager", from_cloud(op::DELETE, &format!("default/pod/{name}"), pod(&name, "1")))
                .await
                .unwrap();
            e.ctx.send("metamanager", status(&name, "podstatus", op::UPDATE)).await.unwrap();
        }
        let forwarded = (round + 1) * 60;
        eventually("every report passed on", || {
            e.seen.lock().unwrap().iter().filter(|(m, _)| m.route.resource.contains("/pod")).count() >= forwarded
        })
        .await;
        eventually("every pod's delete ACKed", || e.acks().len() == (round + 1) * 40).await;
    }
    // Nothing is left per deleted pod: 60 pods, 0 rows.
    let db = MetaDb::open(&e.db_path).unwrap();
    let rows: Vec<String> = db.list_all().unwrap().rows.into_iter().map(|(k, _)| k).collect();
    assert_eq!(rows, Vec::<String>::new());
}

/// After connecting to a cloud that agreed the inventory, the store's pods,
/// configmaps and secrets are listed to it (a damaged row without a uid, so
/// that the cloud sends it again); a KubeEdge cloud gets no inventory.
#[tokio::test]
async fn the_inventory_goes_to_a_cloud_that_agreed_and_lists_what_the_store_holds() {
    let dir = TempDir::new("mm-inventory");
    let db = dir.path().join("edge.db");
    let cfg = MetaConfig { node_name: "edge-1".into(), ..MetaConfig::default() };
    let e = edge(&db, None, cfg);
    e.ctx.send("metamanager", from_cloud(op::INSERT, "default/pod/a", pod("a", "4"))).await.unwrap();
    let cm = json!({"metadata": {"name": "c", "uid": "uc", "resourceVersion": "9"}});
    e.ctx.send("metamanager", from_cloud(op::INSERT, "default/configmap/c", cm)).await.unwrap();
    eventually("stored", || e.acks().len() == 2).await;
    rusqlite_insert_damaged(&db);
    e.connect(true).await;
    e.connect_agreeing(true, "session-liveness").await;
    let q = e.query("default/pod/a").await;
    assert!(!q.content.to_value().is_null());
    assert!(e.sent(op::INVENTORY).is_empty(), "no inventory to a cloud that did not agree");
    e.connect_agreeing(true, "session-liveness,inventory").await;
    eventually("inventory", || e.sent(op::INVENTORY).len() == 1).await;
    let inv = &e.sent(op::INVENTORY)[0];
    assert_eq!(inv.route.resource, "null/inventory/edge-1");
    assert_eq!(inv.route.source, "metamanager");
    let items = inv.content.to_value()["items"].clone();
    assert_eq!(
        items,
        json!([
            {"key": "default/configmap/c", "uid": "uc", "resourceVersion": "9"},
            {"key": "default/pod/a", "uid": "uid-a", "resourceVersion": "4"},
            {"key": "default/pod/broken", "uid": "", "resourceVersion": ""},
        ])
    );
}

/// A store rebuilt at start is reported as a Warning Event about the Node
/// on each connection until the cloud records it, then never again.
#[tokio::test]
async fn a_rebuilt_store_is_reported_until_the_cloud_records_it() {
    use edgehive_metamanager::Rebuilt;
    let dir = TempDir::new("mm-rebuilt");
    let db = dir.path().join("edge.db");
    let rebuilt = Rebuilt { moved_to: dir.path().join("edge.db.damaged-1"), reason: "page 3: btree damaged".into() };
    let hive = |answer: Option<Value>| {
        let cfg = MetaConfig {
            node_name: "edge-1".into(),
            remote_query_timeout: Duration::from_millis(200),
            ..MetaConfig::default()
        };
        let mut b = Beehive::builder();
        let meta = MetaManager::new(cfg, Arc::new(MetaDb::open(&db).unwrap())).report_rebuilt(&rebuilt);
        let metrics = meta.metrics();
        b.register(Arc::new(meta)).unwrap();
        (b, metrics, answer)
    };
    // A stand-in cloud that does not answer: the Event is sent on each connection.
    let (b, metrics, _) = hive(None);
    let e = with_hub(b, &db, None);
    e.connect_agreeing(true, "inventory").await;
    eventually("event sent", || e.sent(op::INSERT).len() == 1).await;
    let ev = e.sent(op::INSERT)[0].clone();
    assert!(ev.route.resource.starts_with("default/event/edge-1."), "{}", ev.route.resource);
    let v = ev.content.to_value();
    assert_eq!((v["reason"].as_str(), v["type"].as_str()), (Some("EdgeStoreRebuilt"), Some("Warning")));
    assert_eq!(v["involvedObject"]["kind"], "Node");
    assert!(v["message"].as_str().unwrap().contains("page 3: btree damaged"), "{v}");
    assert_eq!(metric(&metrics, "edgehive_metamanager_store_rebuilt"), 1);
    e.connect_agreeing(true, "inventory").await;
    eventually("sent again", || e.sent(op::INSERT).len() == 2).await;
    drop(e);
    // One that records it: sent once, not again on the next connection.
    let (b, metrics, answer) = hive(Some(json!({})));
    let e = with_hub(b, &db, answer);
    e.connect_agreeing(true, "inventory").await;
    eventually("event sent", || e.sent(op::INSERT).len() == 1).await;
    eventually("inventory", || e.sent(op::INVENTORY).len() == 1).await;
    eventually("recorded", || metric(&metrics, "edgehive_metamanager_store_rebuilt") == 0).await;
    e.connect_agreeing(true, "inventory").await;
    eventually("second inventory", || e.sent(op::INVENTORY).len() == 2).await;
    assert_eq!(e.sent(op::INSERT).len(), 1, "recorded: not sent again");
}
