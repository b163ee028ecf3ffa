//! A cloud (store + CloudHub + EdgeController on beehive) and simulated
//! edges: viaduct clients that persist what they receive and ACK it.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_beehive::Beehive;
use edgehive_cloudhub::{CloudHub, CloudHubConfig, SuccessPoints};
use edgehive_edgecontroller::{EdgeController, LifecycleConfig};
use edgehive_model::{Content, Message, op};
use edgehive_store::resources::{NODES, OBJECT_SYNCS, PODS};
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_synccontroller::{SyncConfig, SyncController};
use edgehive_testkit::fixtures::TempDir;
use edgehive_testkit::pki::{Issued, TestCa};
use edgehive_viaduct::{ClientConfig, ClientTls, ConnTx, Identity, Server, ServerConfig, ServerTls};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Whether a node has a session, as EdgeController asks it.
type Presence = Box<dyn Fn(&str) -> bool + Send + Sync>;

pub struct Cloud {
    /// The cloud's bus, to send CloudHub what another module would.
    pub ctx: edgehive_beehive::Context,
    pub store: Store,
    pub hub: Arc<CloudHub>,
    pub controller: Arc<EdgeController>,
    pub sync: Arc<SyncController>,
    pub addr: SocketAddr,
    pub quic_addr: SocketAddr,
    pub ca: TestCa,
    pub tokens: Arc<edgehive_pki::ServiceAccountTokens>,
    /// Which node certificates CloudHub still accepts.
    pub credentials: Arc<edgehive_credentials::Credentials>,
    /// The modules' metrics, registered as `edgehive cloud` does.
    metrics: prometheus_client::registry::Registry,
    stop: CancellationToken,
    hive: Option<JoinHandle<()>>,
    _dir: TempDir,
}

impl Cloud {
    pub async fn start(cfg: CloudHubConfig) -> Cloud {
        Cloud::start_with(cfg, LifecycleConfig::default()).await
    }

    pub async fn start_with(cfg: CloudHubConfig, lifecycle: LifecycleConfig) -> Cloud {
        Cloud::start_with_modules(cfg, lifecycle, Vec::new()).await
    }

    /// A cloud with more modules on its bus (e.g. a stand-in for another
    /// controller).
    pub async fn start_with_modules(
        cfg: CloudHubConfig,
        lifecycle: LifecycleConfig,
        extra: Vec<Arc<dyn edgehive_beehive::Module>>,
    ) -> Cloud {
        Cloud::start_full(cfg, lifecycle, extra, None).await
    }

    /// A cloud whose EdgeController asks `presence` whether a node has a
    /// session (`edgehive cloud` asks CloudHub, as the other starts do).
    pub async fn start_with_presence(
        lifecycle: LifecycleConfig,
        presence: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Cloud {
        Cloud::start_full(CloudHubConfig::default(), lifecycle, Vec::new(), Some(Box::new(presence))).await
    }

    async fn start_full(
        cfg: CloudHubConfig,
        lifecycle: LifecycleConfig,
        extra: Vec<Arc<dyn edgehive_beehive::Module>>,
        presence: Option<Presence>,
    ) -> Cloud {
        let dir = TempDir::new("edgecontroller-delivery");
        let store =
            Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false }))
                .await
                .unwrap();
        let ca = TestCa::new("test-ca");
        let server = ca.server();
        let tls = ServerTls {
            identity: Identity { cert_chain: vec![server.cert.clone()], key: server.key.clone_key() },
            client_ca: vec![ca.cert.clone()],
        };
        // As `edgehive cloud`: edges that offer it keep alive with pings.
        // And as `edgehive cloud`, the inventory is agreed with edges that
        // offer it (CloudHub then holds a session's first sends for it).
        let features = vec![edgehive_viaduct::features::INVENTORY.to_owned()];
        let mut ws = ServerConfig::new("127.0.0.1:0".parse().unwrap(), tls.clone());
        ws.ping_keepalive = true;
        ws.features = features.clone();
        let srv = Server::bind_ws(ws).await.unwrap();
        let addr = srv.local_addr();
        let mut quic = ServerConfig::new("127.0.0.1:0".parse().unwrap(), tls);
        quic.ping_keepalive = true;
        quic.features = features;
        let quic = Server::bind_quic(quic).await.unwrap();
        let quic_addr = quic.local_addr();
        let points = SuccessPoints::load(store.clone()).await.unwrap();
        // Tokens are not used here; the records of node certificates are.
        let token_ca = Arc::new(edgehive_pki::Ca::generate("unused-token-ca").unwrap());
        let credentials = Arc::new(edgehive_credentials::Credentials::new(store.clone(), token_ca));
        let hub = Arc::new(CloudHub::new(cfg, points, vec![srv, quic]).with_credentials(credentials.clone()));
        let tokens = Arc::new(edgehive_pki::ServiceAccountTokens::generate().unwrap());
        let stop = CancellationToken::new();
        let controller = EdgeController::with_lifecycle(store.clone(), lifecycle)
            .with_service_account_tokens(tokens.clone())
            .with_events(edgehive_events::Recorder::start(store.clone(), stop.clone()));
        let controller = Arc::new(match presence {
            Some(p) => controller.with_presence(p),
            None => controller.with_presence(hub.presence()),
        });
        let sync = Arc::new(SyncController::new(store.clone(), SyncConfig { interval: Duration::from_millis(200) }));
        let mut b = Beehive::builder();
        b.register(hub.clone()).unwrap();
        b.register(controller.clone()).unwrap();
        b.register(sync.clone()).unwrap();
        for m in extra {
            b.register(m).unwrap();
        }
        let hive = b.build();
        let ctx = hive.context();
        let mut metrics = prometheus_client::registry::Registry::with_prefix("edgehive");
        hub.metrics().register(&mut metrics);
        controller.metrics().register(&mut metrics);
        sync.metrics().register(&mut metrics);
        let running = tokio::spawn({
            let stop = stop.clone();
            async move {
                hive.run(stop).await;
            }
        });
        Cloud {
            ctx,
            store,
            hub,
            controller,
            sync,
            addr,
            quic_addr,
            ca,
            tokens,
            credentials,
            metrics,
            stop,
            hive: Some(running),
            _dir: dir,
        }
    }

    /// The value of one sample of the exported metrics, e.g.
    /// `edgehive_cloudhub_refused_total{reason="identity"}` (panics when
    /// there is no such sample).
    pub fn metric(&self, series: &str) -> u64 {
        sample(&self.metrics, series)
    }

    /// The store's SQLite database.
    pub fn db_path(&self) -> std::path::PathBuf {
        self._dir.path().join("state.db")
    }

    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(h) = self.hive.take() {
            h.await.unwrap();
        }
        self.store.close().await;
    }

    pub async fn edge_node(&self, name: &str) {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"node-role.kubernetes.io/edge": ""}}});
        self.store.create(&NODES, node).await.unwrap();
    }

    /// An edge node that reports Ready now.
    pub async fn ready_edge_node(&self, name: &str, labels: Value) {
        let mut l = json!({"node-role.kubernetes.io/edge": ""});
        l.as_object_mut().unwrap().extend(labels.as_object().unwrap().clone());
        let now = edgehive_store::now_rfc3339();
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": l},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
        self.store.create(&NODES, node).await.unwrap();
    }

    pub async fn pod(&self, name: &str, node: &str, configmap: Option<&str>) -> edgehive_store::Object {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}});
        if let Some(cm) = configmap {
            pod["spec"]["volumes"] = json!([{"name": "cfg", "configMap": {"name": cm}}]);
        }
        self.store.create(&PODS, pod).await.unwrap()
    }

    pub async fn touch_pod(&self, name: &str, label: &str) -> edgehive_store::Object {
        self.store
            .update_with::<_, edgehive_store::StoreError>(&PODS, "default", name, |cur| {
                let mut v = cur.to_value()?;
                v["metadata"]["labels"] = json!({"v": label});
                Ok(Some(v))
            })
            .await
            .unwrap()
    }

    pub async fn object_sync_rv(&self, node: &str, uid: &str) -> Option<String> {
        let o = self.store.get(&OBJECT_SYNCS, "default", &format!("{node}.{uid}")).await.ok()?;
        o.value().ok()?.pointer("/status/objectResourceVersion")?.as_str().map(str::to_owned)
    }

    pub fn client_config(&self, node_id: &str, cert: &Issued) -> ClientConfig {
        let tls = ClientTls {
            identity: Identity { cert_chain: vec![cert.cert.clone()], key: cert.key.clone_key() },
            server_ca: vec![self.ca.cert.clone()],
        };
        ClientConfig::new(self.addr.to_string(), node_id, tls)
    }
}

/// What a simulated edge stores: resource → (resourceversion, content).
pub type EdgeDb = Arc<Mutex<HashMap<String, (String, Value)>>>;

pub struct Edge {
    pub name: String,
    pub db: EdgeDb,
    /// Every object message received (also resends), in order.
    pub received: Arc<Mutex<Vec<Message>>>,
    /// Everything else received (replies, errors).
    pub other: Arc<Mutex<Vec<Message>>>,
    /// ACKs still to be dropped.
    pub drop_acks: Arc<AtomicUsize>,
    /// When set, nothing is ACKed.
    pub hold_acks: Arc<AtomicBool>,
    pub tx: ConnTx,
    task: JoinHandle<()>,
}

impl Edge {
    pub async fn connect(cloud: &Cloud, name: &str) -> Edge {
        Edge::connect_with(cloud, name, EdgeDb::default()).await
    }

    /// Connects keeping a database from an earlier connection.
    pub async fn connect_with(cloud: &Cloud, name: &str, db: EdgeDb) -> Edge {
        Edge::connect_offering(cloud, name, db, &[]).await
    }

    /// Connects offering the cloud `features` (which it must agree).
    pub async fn connect_offering(cloud: &Cloud, name: &str, db: EdgeDb, features: &[&str]) -> Edge {
        let cert = cloud.ca.node(name);
        let mut cfg = cloud.client_config(name, &cert);
        cfg.features = features.iter().map(|f| (*f).to_owned()).collect();
        let conn = edgehive_viaduct::ws::connect(&cfg).await.unwrap();
        for f in features {
            assert!(conn.peer().agreed(f), "the cloud agrees {f}");
        }
        let (tx, mut rx) = conn.split();
        let received = Arc::new(Mutex::new(Vec::new()));
        let other = Arc::new(Mutex::new(Vec::new()));
        let drop_acks = Arc::new(AtomicUsize::new(0));
        let hold_acks = Arc::new(AtomicBool::new(false));
        tx.try_write(keepalive()).unwrap();
        let task = tokio::spawn({
            let (db, received, other, drop_acks, hold, tx) =
                (db.clone(), received.clone(), other.clone(), drop_acks.clone(), hold_acks.clone(), tx.clone());
            async move {
                let mut tick = tokio::time::interval(Duration::from_millis(500));
                loop {
                    let m = tokio::select! {
                        m = rx.recv() => match m { Some(m) => m, None => return },
                        _ = tick.tick() => { let _ = tx.try_write(keepalive()); continue; }
                    };
                    if !matches!(m.route.operation.as_str(), op::INSERT | op::UPDATE | op::DELETE) {
                        other.lock().unwrap().push(m);
                        continue;
                    }
                    received.lock().unwrap().push(m.clone());
                    {
                        let mut db = db.lock().unwrap();
                        if m.route.operation == op::DELETE {
                            // A delete names the uid it removes; a newer object
                            // under the same name stays.
                            let uid = m.content.to_value()["metadata"]["uid"].clone();
                            let same = db
                                .get(m.route.resource.as_str())
                                .is_none_or(|(_, v)| uid.is_null() || v["metadata"]["uid"] == uid);
                            if same {
                                db.remove(m.route.resource.as_str());
                            }
                        } else {
                            db.insert(
                                m.route.resource.to_string(),
                                (m.header.resource_version.to_string(), m.content.to_value()),
                            );
                        }
                    }
                    if hold.load(Ordering::SeqCst) {
                        continue;
                    }
                    if drop_acks.load(Ordering::SeqCst) > 0 {
                        drop_acks.fetch_sub(1, Ordering::SeqCst);
                        continue;
                    }
                    let _ = tx.try_write(m.response(Content::string("OK")));
                }
            }
        });
        Edge { name: name.into(), db, received, other, drop_acks, hold_acks, tx, task }
    }

    pub fn has(&self, resource: &str) -> Option<(String, Value)> {
        self.db.lock().unwrap().get(resource).cloned()
    }

    /// Object messages received for `resource`.
    pub fn receipts(&self, resource: &str) -> Vec<Message> {
        self.received.lock().unwrap().iter().filter(|m| m.route.resource == resource).cloned().collect()
    }

    pub fn others(&self) -> Vec<Message> {
        self.other.lock().unwrap().clone()
    }

    pub async fn disconnect(self) -> EdgeDb {
        self.tx.close();
        self.task.abort();
        let _ = self.task.await;
        self.db
    }
}

pub fn keepalive() -> Message {
    Message::new().with_route("websocket", "resource", "node", op::KEEPALIVE).with_content(Content::string("ping"))
}

/// Waits until `f` holds, polling; panics with `what` after `deadline`.
pub async fn eventually<F: FnMut() -> bool>(what: &str, deadline: Duration, mut f: F) {
    let end = tokio::time::Instant::now() + deadline;
    while !f() {
        assert!(tokio::time::Instant::now() < end, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Async version of [`eventually`].
pub async fn eventually_async<F, Fut>(what: &str, deadline: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + deadline;
    while !f().await {
        assert!(tokio::time::Instant::now() < end, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// EdgeController alone on a bus, over a store filled before it starts,
/// beside a stand-in CloudHub that keeps what it is sent.
pub struct Alone {
    pub store: Store,
    /// What EdgeController sent CloudHub.
    pub to_hub: Arc<Mutex<Vec<Message>>>,
    controller: Arc<EdgeController>,
    stop: CancellationToken,
    hive: Option<JoinHandle<()>>,
    _dir: TempDir,
}

impl Alone {
    /// The store, empty, for the test to fill.
    pub async fn store() -> (Store, TempDir) {
        let dir = TempDir::new("edgecontroller-alone");
        let path = dir.path().join("state.db");
        let store = Store::open(StoreConfig::new(BackendConfig::Sqlite { path, fsync: false })).await.unwrap();
        (store, dir)
    }

    /// Starts EdgeController with `queued` already in its mailbox, as
    /// requests CloudHub handed over while it was starting.
    pub async fn start(store: Store, dir: TempDir, lifecycle: LifecycleConfig, queued: Vec<Message>) -> Alone {
        let to_hub: Arc<Mutex<Vec<Message>>> = Arc::default();
        let kept = to_hub.clone();
        let hub = edgehive_beehive::FnModule::new(
            edgehive_model::source::CLOUDHUB,
            edgehive_model::group::HUB,
            move |mut ctx: edgehive_beehive::ModuleContext, cancel: CancellationToken| {
                let kept = kept.clone();
                Box::pin(async move {
                    while let Some(m) = ctx.receive_until(&cancel).await {
                        kept.lock().unwrap().push(m);
                    }
                    Ok(())
                }) as edgehive_beehive::ModuleFuture
            },
        );
        let controller = Arc::new(EdgeController::with_lifecycle(store.clone(), lifecycle));
        let mut b = Beehive::builder();
        b.register(Arc::new(hub)).unwrap();
        b.register(controller.clone()).unwrap();
        let hive = b.build();
        let ctx = hive.context();
        for m in queued {
            ctx.send(edgehive_model::source::EDGECONTROLLER, m).await.unwrap();
        }
        let stop = CancellationToken::new();
        let running = tokio::spawn({
            let stop = stop.clone();
            async move {
                hive.run(stop).await;
            }
        });
        Alone { store, to_hub, controller, stop, hive: Some(running), _dir: dir }
    }

    /// The value of one sample of EdgeController's metrics, e.g.
    /// `edgehive_edgecontroller_lifecycle_reads_total`.
    pub fn metric(&self, series: &str) -> u64 {
        let mut registry = prometheus_client::registry::Registry::with_prefix("edgehive");
        self.controller.metrics().register(&mut registry);
        sample(&registry, series)
    }

    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(h) = self.hive.take() {
            h.await.unwrap();
        }
        self.store.close().await;
    }
}

/// The value of one sample in `registry`'s text exposition (panics when
/// there is no such sample).
fn sample(registry: &prometheus_client::registry::Registry, series: &str) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
}
