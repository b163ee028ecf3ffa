//! Helpers shared by the beehive tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use edgehive_beehive::{Beehive, Config, FnModule, ModuleContext, ModuleFn, ModuleFuture};
use edgehive_model::{Content, Message, group, op, source};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A module that forwards everything it receives to a test channel.
pub fn sink(name: &str, group: &str) -> (Arc<FnModule<impl ModuleFn>>, mpsc::UnboundedReceiver<Message>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let m = FnModule::new(name, group, move |mut ctx: ModuleContext, cancel: CancellationToken| -> ModuleFuture {
        let tx = tx.clone();
        Box::pin(async move {
            while let Some(m) = ctx.receive_until(&cancel).await {
                let _ = tx.send(m);
            }
            Ok(())
        })
    });
    (Arc::new(m), rx)
}

/// A module that answers every message with `OK` (its own name as source).
pub fn responder(name: &str, group: &str) -> Arc<FnModule<impl ModuleFn>> {
    Arc::new(FnModule::new(name, group, |mut ctx: ModuleContext, cancel: CancellationToken| -> ModuleFuture {
        Box::pin(async move {
            while let Some(m) = ctx.receive_until(&cancel).await {
                let _ = ctx.send_resp(m.response(Content::string("OK")));
            }
            Ok(())
        })
    }))
}

/// A module that reads nothing: its mailbox only fills.
pub fn deaf(name: &str, group: &str, capacity: usize) -> Arc<FnModule<impl ModuleFn>> {
    Arc::new(
        FnModule::new(name, group, |ctx: ModuleContext, cancel: CancellationToken| -> ModuleFuture {
            Box::pin(async move {
                cancel.cancelled().await;
                drop(ctx);
                Ok(())
            })
        })
        .mailbox_capacity(capacity),
    )
}

pub fn pod_msg(name: &str) -> Message {
    Message::new().with_route(source::EDGECONTROLLER, group::RESOURCE, format!("default/pod/{name}"), op::INSERT)
}

/// Runs the hive in the background; the returned token stops it.
pub fn start(hive: Beehive) -> (CancellationToken, tokio::task::JoinHandle<edgehive_beehive::ShutdownReport>) {
    let stop = CancellationToken::new();
    let h = tokio::spawn(hive.run(stop.clone()));
    (stop, h)
}

pub fn quick_config() -> Config {
    Config { mailbox_capacity: 16, shutdown_timeout: Duration::from_secs(5) }
}

/// Waits for a condition, polling, failing after a generous deadline.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
