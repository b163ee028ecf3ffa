//! What every long-running command shares: the shutdown signal and the
//! bus's own metrics.

/// beehive's queue depths, one gauge per module.
pub(crate) fn render_bus(bus: &edgehive_beehive::Context, out: &mut String) {
    use std::fmt::Write as _;
    let stats = bus.stats();
    let _ = writeln!(out, "# HELP edgehive_beehive_queue_depth Messages waiting in a module's mailbox.");
    let _ = writeln!(out, "# TYPE edgehive_beehive_queue_depth gauge");
    for m in &stats.modules {
        let _ = writeln!(out, "edgehive_beehive_queue_depth{{module=\"{}\"}} {}", m.name, m.queue_depth);
    }
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
