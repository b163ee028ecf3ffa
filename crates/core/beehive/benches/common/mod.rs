//! Bench fixtures: a counting sink module and a responder.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use edgehive_beehive::{FnModule, Module, ModuleContext, ModuleFuture};
use edgehive_model::{Content, Message, group, op, source};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Counts received messages and wakes the bench when `target` is reached.
pub struct Counter {
    pub seen: AtomicU64,
    pub target: AtomicU64,
    pub done: Notify,
}

impl Counter {
    pub fn new() -> Arc<Counter> {
        Arc::new(Counter { seen: AtomicU64::new(0), target: AtomicU64::new(u64::MAX), done: Notify::new() })
    }

    pub fn arm(&self, target: u64) {
        self.seen.store(0, Ordering::SeqCst);
        self.target.store(target, Ordering::SeqCst);
    }

    pub async fn wait(&self) {
        loop {
            let notified = self.done.notified();
            if self.seen.load(Ordering::SeqCst) >= self.target.load(Ordering::SeqCst) {
                return;
            }
            notified.await;
        }
    }
}

pub fn sink(name: &str, group: &str, counter: Arc<Counter>) -> Arc<dyn Module> {
    Arc::new(FnModule::new(name, group, move |mut ctx: ModuleContext, cancel: CancellationToken| -> ModuleFuture {
        let counter = counter.clone();
        Box::pin(async move {
            while let Some(m) = ctx.receive_until(&cancel).await {
                drop(m);
                let n = counter.seen.fetch_add(1, Ordering::AcqRel) + 1;
                if n == counter.target.load(Ordering::Acquire) {
                    counter.done.notify_one();
                }
            }
            Ok(())
        })
    }))
}

pub fn responder(name: &str) -> Arc<dyn Module> {
    Arc::new(FnModule::new(name, "resp", |mut ctx: ModuleContext, cancel: CancellationToken| -> ModuleFuture {
        Box::pin(async move {
            while let Some(m) = ctx.receive_until(&cancel).await {
                let _ = ctx.send_resp(m.response(Content::string("OK")));
            }
            Ok(())
        })
    }))
}

/// A fresh pod message, as real traffic has: new id, timestamp and route.
pub fn fresh(content: &Content) -> Message {
    Message::build(source::EDGECONTROLLER, group::RESOURCE, "default/pod/nginx", op::INSERT, content.clone())
}

/// ~1 KB of pod JSON.
pub fn pod_1k() -> Content {
    let containers: Vec<serde_json::Value> = (0..6)
        .map(|i| serde_json::json!({"name": format!("c{i}"), "image": "registry.local/app:1.0", "args": ["--port", "8080", "--verbose"], "env": [{"name": "MODE", "value": "edge"}]}))
        .collect();
    let pod = serde_json::json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "nginx", "namespace": "default", "uid": "8d3e0d2c-0000-4000-8000-000000000001", "resourceVersion": "48213"},
        "spec": {"nodeName": "edge-1", "containers": containers},
        "status": {}
    });
    Content::from_serialize(&pod).unwrap()
}

/// The runtime the benches run on: `RT=current` for a single-threaded one,
/// otherwise two worker threads (the machine's two cores).
pub fn runtime() -> tokio::runtime::Runtime {
    if std::env::var("RT").as_deref() == Ok("current") {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }
}

/// Runs `fut` as a task on the runtime's workers, where modules run, rather
/// than on the bench's own thread (every hop would then cross threads).
pub fn on_worker<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    rt.block_on(rt.spawn(fut)).unwrap()
}
