//! beehive: the in-process message bus between the modules of one side.
//!
//! Modules are registered by name and group; each gets a bounded mailbox.
//! A [`Context`] sends to a module or a group, asynchronously or as a request
//! that waits for its response (matched on `parent_msg_id`), and hands every
//! undeliverable message back to the caller. A supervisor restarts modules that
//! fail, with backoff, and shutdown stops them all.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use edgehive_beehive::{Beehive, Module, ModuleContext, ModuleFuture};
//! use edgehive_model::{Content, Message};
//! use tokio_util::sync::CancellationToken;
//!
//! struct Echo;
//! impl Module for Echo {
//!     fn name(&self) -> &str { "echo" }
//!     fn group(&self) -> &str { "demo" }
//!     fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
//!         Box::pin(async move {
//!             while let Some(m) = ctx.receive_until(&cancel).await {
//!                 let _ = ctx.send_resp(m.response(Content::string("OK")));
//!             }
//!             Ok(())
//!         })
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let mut b = Beehive::builder();
//! b.register(Arc::new(Echo)).unwrap();
//! let hive = b.build();
//! let ctx = hive.context();
//! let stop = CancellationToken::new();
//! let running = tokio::spawn(hive.run(stop.clone()));
//! let resp = ctx.send_sync("echo", Message::new(), Duration::from_secs(1)).await.unwrap();
//! assert_eq!(resp.content.as_text().as_deref(), Some("OK"));
//! stop.cancel();
//! running.await.unwrap();
//! # });
//! ```
//!
//! **Architecture Invariant:** beehive knows no network. It moves `Message`s
//! between modules of one process; cloudhub and edgehub adapt it to viaduct.

mod bus;
mod context;
mod error;
mod hive;
mod mailbox;
mod module;
mod stats;
mod waiters;

pub use bus::ModuleState;
pub use context::{Context, ModuleContext};
pub use error::{ModuleError, RespError, SendError, SendErrorKind, SyncError, WaitError};
pub use hive::{Beehive, BeehiveBuilder, Config, RegisterError, ShutdownReport};
pub use module::{FnModule, Module, ModuleFn, ModuleFuture, RestartMode, RestartPolicy};
pub use stats::{ModuleStats, Stats};
