//! Structured logs: `tracing` to stderr, human or JSON.

use anyhow::Context as _;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber.
pub(crate) fn init(filter: &str, json: bool) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(filter).with_context(|| format!("parse log filter {filter:?}"))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let res = if json { builder.json().try_init() } else { builder.compact().try_init() };
    res.map_err(|e| anyhow::anyhow!("install log subscriber: {e}"))
}
