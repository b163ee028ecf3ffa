//! Persist + ACK throughput of MetaManager: pod inserts from "the cloud"
//! (a stand-in EdgeHub module) are committed to SQLite (WAL,
//! synchronous=FULL) and ACKed; the figure is ACKs per second, end to end
//! through beehive. `cargo bench -p edgehive-metamanager --bench persist_ack`
//! (`MESSAGES=N` to change the count).
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)] // wall-clock timing is the point

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use edgehive_beehive::{Beehive, FnModule, ModuleContext, ModuleFuture};
use edgehive_metamanager::{MetaConfig, MetaDb, MetaManager};
use edgehive_model::{Content, Message, group, op, source};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn main() {
    let n: usize = std::env::var("MESSAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let dir = std::env::temp_dir().join(format!("edgehive-persist-ack-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Arc::new(MetaDb::open(&dir.join("edge.db")).unwrap());
        let acks = Arc::new(AtomicUsize::new(0));
        let counted = acks.clone();
        let hub = FnModule::new(source::WEBSOCKET, group::HUB, move |mut ctx: ModuleContext, cancel: CancellationToken| {
            let acks = counted.clone();
            Box::pin(async move {
                while let Some(m) = ctx.receive_until(&cancel).await {
                    if m.route.operation == op::RESPONSE {
                        acks.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(())
            }) as ModuleFuture
        });
        let mut b = Beehive::builder();
        b.register(Arc::new(MetaManager::new(MetaConfig::default(), db))).unwrap();
        b.register(Arc::new(hub)).unwrap();
        let hive = b.build();
        let ctx = hive.context();
        let stop = CancellationToken::new();
        let running = tokio::spawn(hive.run(stop.clone()));
        // A kubelet-sized pod, about 1 KiB of JSON.
        let pod = |i: usize| {
            let obj = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i}"), "namespace": "default", "uid": format!("00000000-0000-0000-0000-{i:012}"), "resourceVersion": (i + 1).to_string(), "labels": {"app": "bench"}},
                "spec": {"nodeName": "edge-1", "containers": [{"name": "c", "image": "registry.example/app:1.2.3", "command": ["sh", "-c", "while true; do sleep 5; done"], "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]},
                "status": {"phase": "Pending"}});
            Message::new()
                .with_route(source::EDGECONTROLLER, group::RESOURCE, format!("default/pod/p{i}"), op::INSERT)
                .with_resource_version((i + 1).to_string())
                .with_content(Content::from_serialize(&obj).unwrap())
        };
        let start = Instant::now();
        for i in 0..n {
            ctx.send("metamanager", pod(i)).await.unwrap();
        }
        while acks.load(Ordering::Relaxed) < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let took = start.elapsed();
        println!("persist+ACK: {n} pod inserts committed and ACKed in {took:.2?}: {:.0} messages/s", n as f64 / took.as_secs_f64());
        stop.cancel();
        let _ = running.await;
        let _ = std::fs::remove_dir_all(&dir);
    });
}
