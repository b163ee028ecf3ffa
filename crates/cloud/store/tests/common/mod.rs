//! A store on each backend for the conformance suite: SQLite in a temporary
//! directory, or a real etcd started for the test.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_testkit::fixtures::{EtcdServer, TempDir};
use serde_json::{Value, json};

/// Runs each named `async fn(Kind)` of the including file as two tests,
/// `sqlite::name` and `etcd::name`.
#[allow(unused_macros)]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Kind::Sqlite).await;
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Kind::Etcd).await;
                }
            )*
        }
    };
}

/// Which backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Etcd,
}

/// A store and what keeps its backend alive.
pub(crate) struct Harness {
    pub(crate) store: Store,
    pub(crate) kind: Kind,
    pub(crate) dir: TempDir,
    pub(crate) etcd: Option<EtcdServer>,
}

impl Harness {
    pub(crate) async fn new(kind: Kind) -> Harness {
        Harness::with(kind, |_| {}).await
    }

    pub(crate) async fn with(kind: Kind, tune: impl FnOnce(&mut StoreConfig)) -> Harness {
        let dir = TempDir::new("store-conformance");
        let (backend, etcd) = match kind {
            Kind::Sqlite => (BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false }, None),
            Kind::Etcd => {
                let etcd = EtcdServer::start();
                (BackendConfig::Etcd { endpoints: vec![etcd.url.clone()] }, Some(etcd))
            }
        };
        let mut config = StoreConfig::new(backend);
        config.bookmark_interval = Duration::from_millis(100);
        tune(&mut config);
        let store = Store::open(config).await.unwrap();
        Harness { store, kind, dir, etcd }
    }

    /// Another store on the same backend (a restart, or a second replica).
    pub(crate) async fn reopen(&self) -> Store {
        let backend = match self.kind {
            Kind::Sqlite => BackendConfig::Sqlite { path: self.dir.path().join("state.db"), fsync: false },
            Kind::Etcd => BackendConfig::Etcd { endpoints: vec![self.etcd.as_ref().unwrap().url.clone()] },
        };
        Store::open(StoreConfig::new(backend)).await.unwrap()
    }
}

pub(crate) fn pod(ns: &str, name: &str, node: Option<&str>, labels: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    json!({"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec, "status": {"phase": "Pending"}})
}

pub(crate) fn configmap(ns: &str, name: &str, data: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": ns}, "data": data})
}
