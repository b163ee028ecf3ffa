//! What a module is, and how it is restarted when it fails.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::context::ModuleContext;
use crate::error::ModuleError;

/// The future a module's `run` returns.
pub type ModuleFuture = Pin<Box<dyn Future<Output = Result<(), ModuleError>> + Send + 'static>>;

/// A unit of work on one side (cloudhub, edgecontroller, metamanager, ...),
/// reachable by name and by group over the bus.
///
/// `run` reads the module's mailbox through `ctx`, sends through it, and returns
/// when `cancel` fires. It may be called again after it fails (see
/// [`RestartPolicy`]); the mailbox and the messages in it survive the restart.
///
/// ```
/// use std::sync::Arc;
/// use edgehive_beehive::{Module, ModuleContext, ModuleFuture};
/// use tokio_util::sync::CancellationToken;
///
/// struct Echo;
/// impl Module for Echo {
///     fn name(&self) -> &str { "echo" }
///     fn group(&self) -> &str { "demo" }
///     fn run(self: Arc<Self>, mut ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
///         Box::pin(async move {
///             while let Some(msg) = ctx.receive_until(&cancel).await {
///                 let reply = msg.response(msg.content.clone());
///                 let _ = ctx.send_resp(reply);
///             }
///             Ok(())
///         })
///     }
/// }
/// ```
pub trait Module: Send + Sync + 'static {
    /// Unique name; messages are addressed to it.
    fn name(&self) -> &str;
    /// Group for `send_to_group`.
    fn group(&self) -> &str;
    /// Disabled modules are registered (sends to them fail with `Disabled`) but
    /// not started.
    fn enabled(&self) -> bool {
        true
    }
    /// What to do when `run` returns or panics.
    fn restart_policy(&self) -> RestartPolicy {
        RestartPolicy::default()
    }
    /// Mailbox size; `None` uses the bus default.
    fn mailbox_capacity(&self) -> Option<usize> {
        None
    }
    /// Runs the module until `cancel` fires.
    fn run(self: Arc<Self>, ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture;
}

/// When a module is restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartMode {
    /// Never: a module that ends stays stopped.
    Never,
    /// After a panic or an error; a clean return ends it.
    OnFailure,
    /// After any return, clean or not (until the bus shuts down).
    Always,
}

/// Restart policy with exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// When to restart.
    pub mode: RestartMode,
    /// Delay before the first restart.
    pub initial_backoff: Duration,
    /// Upper bound of the delay; it doubles after each consecutive failure.
    pub max_backoff: Duration,
    /// Give up after this many restarts in a row (`None`: never give up).
    pub max_restarts: Option<u32>,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            mode: RestartMode::OnFailure,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_restarts: None,
        }
    }
}

impl RestartPolicy {
    /// A policy that never restarts.
    pub const NEVER: RestartPolicy = RestartPolicy {
        mode: RestartMode::Never,
        initial_backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
        max_restarts: Some(0),
    };

    /// Delay before restart number `attempt` (1-based) of a run of failures.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let shift = attempt.saturating_sub(1).min(31);
        self.initial_backoff.saturating_mul(1u32 << shift).min(self.max_backoff)
    }
}

/// How one run of a module ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunOutcome {
    Returned,
    Failed,
    Panicked,
}

impl RestartPolicy {
    /// Whether a run that ended with `outcome` is followed by another.
    pub(crate) fn restarts_after(&self, outcome: RunOutcome) -> bool {
        match self.mode {
            RestartMode::Never => false,
            RestartMode::OnFailure => outcome != RunOutcome::Returned,
            RestartMode::Always => true,
        }
    }
}

/// The closure a [`FnModule`] runs: `Fn(ModuleContext, CancellationToken) -> ModuleFuture`.
pub trait ModuleFn: Fn(ModuleContext, CancellationToken) -> ModuleFuture + Send + Sync + 'static {}

impl<F> ModuleFn for F where F: Fn(ModuleContext, CancellationToken) -> ModuleFuture + Send + Sync + 'static {}

/// A module made of a closure, for small wiring jobs and tests.
///
/// The closure is called for every run (again after a restart) with the
/// module's context and cancellation token.
pub struct FnModule<F> {
    name: String,
    group: String,
    enabled: bool,
    policy: RestartPolicy,
    capacity: Option<usize>,
    f: F,
}

impl<F> std::fmt::Debug for FnModule<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnModule").field("name", &self.name).field("group", &self.group).finish_non_exhaustive()
    }
}

impl<F> FnModule<F>
where
    F: Fn(ModuleContext, CancellationToken) -> ModuleFuture + Send + Sync + 'static,
{
    /// An enabled module with the default restart policy.
    pub fn new(name: impl Into<String>, group: impl Into<String>, f: F) -> FnModule<F> {
        FnModule {
            name: name.into(),
            group: group.into(),
            enabled: true,
            policy: RestartPolicy::default(),
            capacity: None,
            f,
        }
    }

    /// Sets whether the module is enabled.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Sets the restart policy.
    pub fn restart_policy(mut self, policy: RestartPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the mailbox size.
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.capacity = Some(capacity);
        self
    }
}

impl<F> Module for FnModule<F>
where
    F: Fn(ModuleContext, CancellationToken) -> ModuleFuture + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn group(&self) -> &str {
        &self.group
    }
    fn enabled(&self) -> bool {
        self.enabled
    }
    fn restart_policy(&self) -> RestartPolicy {
        self.policy
    }
    fn mailbox_capacity(&self) -> Option<usize> {
        self.capacity
    }
    fn run(self: Arc<Self>, ctx: ModuleContext, cancel: CancellationToken) -> ModuleFuture {
        (self.f)(ctx, cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RestartPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..RestartPolicy::default()
        };
        let got: Vec<u128> = (1..=6).map(|a| p.backoff(a).as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.backoff(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn restart_modes() {
        let on_failure = RestartPolicy::default();
        assert!(!on_failure.restarts_after(RunOutcome::Returned));
        assert!(on_failure.restarts_after(RunOutcome::Failed));
        assert!(on_failure.restarts_after(RunOutcome::Panicked));
        assert!(!RestartPolicy::NEVER.restarts_after(RunOutcome::Panicked));
        let always = RestartPolicy { mode: RestartMode::Always, ..RestartPolicy::default() };
        assert!(always.restarts_after(RunOutcome::Returned));
    }
}
