//! Registering modules, starting them, supervising them, and shutting down.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use edgehive_model::Text;
use thiserror::Error;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::bus::{Bus, Counters, ModuleEntry, ModuleState};
use crate::context::{Context, ModuleContext};
use crate::module::{Module, RunOutcome};
use crate::waiters::Waiters;

/// Settings of the bus.
#[derive(Debug, Clone)]
pub struct Config {
    /// Mailbox size of a module that does not choose its own.
    pub mailbox_capacity: usize,
    /// After shutdown is requested, how long a module may take to return before
    /// it is aborted.
    pub shutdown_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config { mailbox_capacity: 1024, shutdown_timeout: Duration::from_secs(10) }
    }
}

/// A module that cannot be registered.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RegisterError {
    /// Two modules with one name.
    #[error("a module named {0:?} is already registered")]
    Duplicate(String),
    /// A module with an empty name.
    #[error("a module needs a non-empty name")]
    EmptyName,
}

/// Collects modules, then builds the bus.
#[derive(Default)]
pub struct BeehiveBuilder {
    config: Config,
    modules: Vec<Arc<dyn Module>>,
    names: HashSet<String>,
}

impl std::fmt::Debug for BeehiveBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BeehiveBuilder").field("config", &self.config).field("modules", &self.names).finish()
    }
}

impl BeehiveBuilder {
    /// A builder with the given settings.
    pub fn with_config(config: Config) -> BeehiveBuilder {
        BeehiveBuilder { config, ..Default::default() }
    }

    /// Adds a module. Disabled modules are registered too, so that sends to
    /// them fail with `Disabled` rather than `UnknownTarget`.
    pub fn register(&mut self, module: Arc<dyn Module>) -> Result<&mut Self, RegisterError> {
        let name = module.name().to_owned();
        if name.is_empty() {
            return Err(RegisterError::EmptyName);
        }
        if !self.names.insert(name.clone()) {
            return Err(RegisterError::Duplicate(name));
        }
        self.modules.push(module);
        Ok(self)
    }

    /// Builds the bus. Messages can be sent as soon as it exists; they wait in
    /// the mailboxes until [`Beehive::run`] starts the modules.
    pub fn build(self) -> Beehive {
        let root = CancellationToken::new();
        let mut modules = HashMap::new();
        let mut groups: HashMap<Text, Vec<Arc<ModuleEntry>>> = HashMap::new();
        let mut all_groups = HashSet::new();
        let mut list = Vec::with_capacity(self.modules.len());
        for m in self.modules {
            let name = Text::from(m.name().to_owned());
            let group = Text::from(m.group().to_owned());
            let capacity = m.mailbox_capacity().unwrap_or(self.config.mailbox_capacity).max(1);
            let entry = Arc::new(ModuleEntry::new(name.clone(), group.clone(), m.enabled(), capacity, &root));
            if !group.is_empty() {
                all_groups.insert(group.clone());
                if m.enabled() {
                    groups.entry(group).or_default().push(entry.clone());
                }
            }
            modules.insert(name, entry.clone());
            list.push((m, entry));
        }
        let disabled_groups = all_groups.into_iter().filter(|g| !groups.contains_key(g)).collect();
        let bus = Arc::new(Bus {
            modules,
            groups,
            disabled_groups,
            waiters: Arc::new(Waiters::new()),
            counters: Counters::default(),
            root,
        });
        Beehive { bus, modules: list, config: self.config }
    }
}

/// The bus and its modules.
pub struct Beehive {
    bus: Arc<Bus>,
    modules: Vec<(Arc<dyn Module>, Arc<ModuleEntry>)>,
    config: Config,
}

impl std::fmt::Debug for Beehive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.modules.iter().map(|(_, e)| e.name.as_str()).collect();
        f.debug_struct("Beehive").field("modules", &names).finish()
    }
}

/// How the bus shut down.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Modules that did not return within the shutdown timeout and were aborted.
    pub aborted: Vec<Text>,
    /// Modules that ended by giving up (restart policy exhausted).
    pub failed: Vec<Text>,
}

impl Beehive {
    /// A builder with default settings.
    pub fn builder() -> BeehiveBuilder {
        BeehiveBuilder::default()
    }

    /// A context for code outside any module (tests, the binary's wiring).
    pub fn context(&self) -> Context {
        Context::new(self.bus.clone(), Text::EMPTY)
    }

    /// The token that stops every module when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.bus.root.clone()
    }

    /// Starts every enabled module and supervises it until `shutdown` fires (or
    /// every module has ended on its own). Returns when all have stopped.
    pub async fn run(self, shutdown: CancellationToken) -> ShutdownReport {
        let root = self.bus.root.clone();
        let mut set = JoinSet::new();
        for (module, entry) in self.modules {
            if entry.tx.is_none() {
                tracing::info!(module = %entry.name, "module disabled; not started");
                continue;
            }
            let sup = Supervisor {
                module,
                entry: entry.clone(),
                ctx: Context::new(self.bus.clone(), entry.name.clone()),
                shutdown_timeout: self.config.shutdown_timeout,
            };
            let span = tracing::info_span!("module", module = %entry.name, group = %entry.group);
            set.spawn(sup.run().instrument(span));
        }
        let mut report = ShutdownReport::default();
        loop {
            tokio::select! {
                _ = shutdown.cancelled(), if !root.is_cancelled() => {
                    tracing::info!("beehive shutting down");
                    root.cancel();
                }
                done = set.join_next() => match done {
                    Some(Ok(end)) => match end {
                        SupervisorEnd::Stopped => {}
                        SupervisorEnd::Aborted(n) => report.aborted.push(n),
                        SupervisorEnd::GaveUp(n) => report.failed.push(n),
                    },
                    Some(Err(e)) => tracing::error!(error = %e, "module supervisor ended abnormally"),
                    None => break,
                }
            }
        }
        root.cancel();
        report.aborted.sort();
        report.failed.sort();
        tracing::info!(aborted = ?report.aborted, failed = ?report.failed, "beehive stopped");
        report
    }
}

enum SupervisorEnd {
    Stopped,
    Aborted(Text),
    GaveUp(Text),
}

/// Runs one module, restarting it as its policy says.
struct Supervisor {
    module: Arc<dyn Module>,
    entry: Arc<ModuleEntry>,
    ctx: Context,
    shutdown_timeout: Duration,
}

impl Supervisor {
    async fn run(self) -> SupervisorEnd {
        let policy = self.module.restart_policy();
        let cancel = self.entry.cancel.clone();
        let mut failures_in_a_row: u32 = 0;
        let end = loop {
            let Some(rx) = self.entry.slot.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                tracing::error!("module mailbox was not returned by its last run; not restarting");
                break SupervisorEnd::GaveUp(self.entry.name.clone());
            };
            let mctx = ModuleContext::new(self.ctx.clone(), rx, self.entry.slot.clone());
            self.entry.set_state(ModuleState::Running);
            tracing::info!("module starting");
            let started = Instant::now();
            let mut task = tokio::spawn(self.module.clone().run(mctx, cancel.clone()).in_current_span());

            let joined = tokio::select! {
                r = &mut task => Some(r),
                _ = async { cancel.cancelled().await; tokio::time::sleep(self.shutdown_timeout).await } => None,
            };
            let outcome = match joined {
                None => {
                    tracing::error!(timeout = ?self.shutdown_timeout, "module ignored cancellation; aborting it");
                    task.abort();
                    let _ = task.await;
                    break SupervisorEnd::Aborted(self.entry.name.clone());
                }
                Some(Ok(Ok(()))) => {
                    tracing::info!("module returned");
                    RunOutcome::Returned
                }
                Some(Ok(Err(e))) => {
                    tracing::error!(error = %e, "module failed");
                    RunOutcome::Failed
                }
                Some(Err(e)) if e.is_panic() => {
                    let what = panic_text(e.into_panic());
                    tracing::error!(panic = %what, "module panicked");
                    RunOutcome::Panicked
                }
                Some(Err(e)) => {
                    tracing::error!(error = %e, "module task was cancelled");
                    RunOutcome::Failed
                }
            };
            if cancel.is_cancelled() || self.entry.removed.load(Ordering::Relaxed) {
                break SupervisorEnd::Stopped;
            }
            if !policy.restarts_after(outcome) {
                break match outcome {
                    RunOutcome::Returned => SupervisorEnd::Stopped,
                    _ => SupervisorEnd::GaveUp(self.entry.name.clone()),
                };
            }
            // A run that lasted longer than the longest backoff ends a streak.
            if started.elapsed() > policy.max_backoff {
                failures_in_a_row = 0;
            }
            failures_in_a_row = failures_in_a_row.saturating_add(1);
            if policy.max_restarts.is_some_and(|max| failures_in_a_row > max) {
                tracing::error!(restarts = failures_in_a_row - 1, "module keeps failing; giving up");
                break SupervisorEnd::GaveUp(self.entry.name.clone());
            }
            let delay = policy.backoff(failures_in_a_row);
            self.entry.set_state(ModuleState::BackingOff);
            tracing::warn!(?delay, attempt = failures_in_a_row, "restarting module after backoff");
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = cancel.cancelled() => break SupervisorEnd::Stopped,
            }
            self.entry.restarts.fetch_add(1, Ordering::Relaxed);
        };
        self.entry.set_state(match end {
            SupervisorEnd::Stopped => ModuleState::Stopped,
            _ => ModuleState::Failed,
        });
        if self.entry.removed.load(Ordering::Relaxed) {
            // Drop the mailbox so that senders blocked on it wake with `Closed`.
            drop(self.entry.slot.lock().unwrap_or_else(|p| p.into_inner()).take());
        }
        end
    }
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => match p.downcast::<&'static str>() {
            Ok(s) => (*s).to_owned(),
            Err(_) => String::from("(non-string panic payload)"),
        },
    }
}
